"""The entry points that take either kind of model and branch on it, as the CLI's one parser
does (``cli/common.resolve_kind``): ``profile``, ``predict`` and ``calibrate``.

A tensor model (``builtin:NAME``, ``package.module:factory``, .onnx, .tflite, IR ...) goes to
the tensor implementation (``profiling.profile``, ``predictions.predict``, the kernel
calibration); a generative one (``llm:NAME``, a .gguf file, a Hugging Face folder, an
``LLMModel``) to the generative one (``generative.profile_generative``, ``estimate_generative``,
``calibrate_llm``). The options both kinds take (target, backends, precisions, threads,
device, isolate, timeout_s, out, fleet, calibration ...) mean the same for both; an option of
one kind given for the other kind's model is a one-line ``UserError`` naming it.

This is the one module of the API that imports its siblings (``profiling``,
``predictions``, ``generative``); they import only ``common``, never this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.api.common import Progress
from edgeprof.core.errors import UnsupportedError, UserError

from edgeprof.core.kinds import GENERATIVE, KIND_WORDS, TENSOR, model_kind


def _shown(model: Any) -> Any:
    """``model`` as a message names it: a path or name as given, else its type's name."""
    return model if isinstance(model, (str, os.PathLike)) else type(model).__name__


def _refuse_other_kind(model: Any, kind: str, **options: Any) -> None:
    """A ``UserError`` naming the first of ``options`` given (not None) that applies to the
    other kind of model only."""
    other = GENERATIVE if kind == TENSOR else TENSOR
    for name, value in options.items():
        if value is not None:
            raise UserError(f"{name} applies to {KIND_WORDS[other]}; {_shown(model)} is a "
                            f"{kind} model")


def _merge_option(run_options: dict[str, Any], key: str, value: Any) -> None:
    """``run_options[key] = value``, a ``UserError`` when run_options already says otherwise."""
    if key in run_options and run_options[key] != value:
        raise UserError(f"{key}={value!r} and run_options['{key}']={run_options[key]!r} "
                        "disagree; give one")
    run_options[key] = value


# --------------------------------------------------------------------------- profile
def profile(model: Any, target: Any = None, backends: Sequence[str] | str | None = None,
            precisions: Sequence[str] | str | None = None, *,
            # both kinds
            threads: int | None = None, device: str | None = None,
            warmup: int | None = None, isolate: bool = False, timeout_s: float | None = None,
            out: str | os.PathLike | None = None, plugins: str | os.PathLike | None = None,
            targets_dir: str | os.PathLike | None = None, progress: Progress | None = None,
            fleet: Any = None, calibration: str | os.PathLike | None = None,
            # tensor models
            batch_size: int | None = None,
            input_shapes: Sequence[Sequence[int]] | None = None,
            input_dtypes: Sequence[str] | None = None, stream_rate_fps: float | None = None,
            latency_budget_ms: float | None = None, run_options: dict[str, Any] | None = None,
            recalibrate: bool = False, trace: bool = False,
            calibration_data: str | os.PathLike | None = None,
            # generative models
            prompt_tokens: int | None = None, gen_tokens: int | None = None,
            depths: Sequence[int] | int | None = None, repetitions: int | None = None,
            workdir: str | os.PathLike | None = None) -> Any:
    """Profile ``model`` on ``target``: estimate, measure here (or on a board of ``fleet``)
    and read the runs against the target, for either kind of model. Returns a
    :class:`~edgeprof.profilers.report.family.ProfileReport` (``to_dict``, ``save``,
    ``ProfileReport.load`` for both), the member of the model's workload:

    * A tensor model: :func:`edgeprof.api.profiling.profile` (``target`` default ``host``,
      ``backends`` default ``torch_eager``, ``precisions`` default ``fp32``); a
      :class:`~edgeprof.profilers.report.tensor_report.TensorReport`. ``device``, ``warmup``,
      ``isolate`` and ``timeout_s`` are its ``run_options`` of those names.
    * A generative model: :func:`edgeprof.api.generative.profile_generative` (``target`` default
      none, ``backends`` default ``llama_cpp``, ``precisions`` default each backend's
      format; ``prompt_tokens``, ``gen_tokens``, ``depths``, ``repetitions``, ``warmup``
      its test shape, default profile_generative's); a
      :class:`~edgeprof.profilers.report.generative.GenerativeReport`.

    An option of the other kind (``batch_size`` for a generative model, ``prompt_tokens``
    for a tensor one ...) is a ``UserError`` naming it. When ``out`` cannot be written the
    ``OutputError`` carries the report (``.result``), as for the functions it calls."""
    kind = model_kind(model)
    if kind == GENERATIVE:
        _refuse_other_kind(model, kind, batch_size=batch_size, input_shapes=input_shapes,
                           input_dtypes=input_dtypes, stream_rate_fps=stream_rate_fps,
                           latency_budget_ms=latency_budget_ms, run_options=run_options,
                           recalibrate=recalibrate or None, trace=trace or None,
                           calibration_data=calibration_data)
        from edgeprof.api.generative import profile_generative

        # the test shape given; profile_generative's own defaults for the rest
        shape = {k: v for k, v in (("prompt_tokens", prompt_tokens), ("gen_tokens", gen_tokens),
                                   ("depths", depths), ("repetitions", repetitions),
                                   ("warmup", warmup)) if v is not None}
        return profile_generative(
            model, backends="llama_cpp" if backends is None else backends,
            precisions=precisions, target=target, threads=threads, device=device,
            isolate=isolate, timeout_s=timeout_s, out=out, plugins=plugins,
            targets_dir=targets_dir, progress=progress, fleet=fleet, calibration=calibration,
            workdir=workdir, **shape)
    _refuse_other_kind(model, kind, prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
                       depths=depths, repetitions=repetitions, workdir=workdir)
    from edgeprof.api.profiling import profile as profile_tensor

    options = dict(run_options or {})
    for key, value in (("device", device), ("warmup", warmup),
                       ("isolate", True if isolate else None), ("timeout_s", timeout_s)):
        if value is not None:
            _merge_option(options, key, value)
    return profile_tensor(
        model, target="host" if target is None else target,
        backends=("torch_eager",) if backends is None else backends,
        precisions=("fp32",) if precisions is None else precisions, batch_size=batch_size,
        input_shapes=input_shapes, input_dtypes=input_dtypes, threads=threads,
        stream_rate_fps=stream_rate_fps, latency_budget_ms=latency_budget_ms,
        run_options=options or None, out=out, plugins=plugins, targets_dir=targets_dir,
        recalibrate=recalibrate, trace=trace, calibration_data=calibration_data,
        progress=progress, fleet=fleet, calibration=calibration)


# --------------------------------------------------------------------------- predict
def predict(model: Any, target: Any, backend: str, precision: str | None = None, *,
            # both kinds
            threads: int | None = None, device: str | None = None,
            calibration: str | os.PathLike | Any = None, runtime_version: str | None = None,
            plugins=None, targets_dir=None,
            # tensor models
            input_shapes: Sequence[Sequence[int]] | None = None,
            input_dtypes: Sequence[str] | None = None,
            # generative models
            prompt_tokens: int | None = None, gen_tokens: int | None = None,
            depth: int | None = None) -> Any:
    """The predicted figures of ``model`` on the board ``target`` with runtime ``backend`` at
    ``precision``, without building or running anything, for either kind of model.

    * A tensor model: :func:`edgeprof.api.predictions.predict` (``precision`` default fp32):
      a :class:`~edgeprof.profilers.predict.Prediction` (latency with its interval).
    * A generative model: ``estimate_generative(model, target, backends=backend, ...)``'s one
      prediction (``precision``: the weight format, default the backend's; ``prompt_tokens``
      / ``gen_tokens`` default 512 / 128, ``depth`` the tokens already cached, default 0;
      ``runtime_version`` the runtime build): a
      :class:`~edgeprof.profilers.report.generative.GenerativePrediction` (prefill and
      decode tokens/s, TTFT, TPOT, each with its interval and provenance).

    An option of the other kind is a ``UserError`` naming it."""
    kind = model_kind(model)
    if kind == GENERATIVE:
        _refuse_other_kind(model, kind, input_shapes=input_shapes, input_dtypes=input_dtypes)
        return _predict_generative(model, target, backend, precision, threads=threads,
                                   device=device, calibration=calibration,
                                   build=runtime_version, plugins=plugins,
                                   targets_dir=targets_dir, prompt_tokens=prompt_tokens,
                                   gen_tokens=gen_tokens, depth=depth)
    _refuse_other_kind(model, kind, prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
                       depth=depth)
    from edgeprof.api.predictions import predict as predict_tensor

    return predict_tensor(model, target, backend, "fp32" if precision is None else precision,
                          threads=threads, device=device, calibration=calibration,
                          input_shapes=input_shapes, input_dtypes=input_dtypes,
                          plugins=plugins, targets_dir=targets_dir,
                          runtime_version=runtime_version)


def _one(value: Any, name: str) -> Any:
    """``value`` when it names one thing (a prediction is for one configuration)."""
    from edgeprof.api.common import split_names

    if value is None:
        return None
    names = split_names(value, name)
    if len(names) != 1:
        raise UserError(f"{name} names one for a prediction, got {', '.join(names) or 'none'}; "
                        "edgeprof estimate predicts several at once")
    return names[0]


def _predict_generative(model: Any, target: Any, backend: str, precision: str | None, *,
                        prompt_tokens: int | None, gen_tokens: int | None,
                        depth: int | None, **options: Any) -> Any:
    from edgeprof.api.generative import estimate_generative

    if target is None:
        raise UserError(f"predict {model} needs a target board (e.g. raspberry_pi_5): a "
                        "prediction is for a board; estimate_llm gives the analytic figures "
                        "without one")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                              or depth < 0):
        raise UserError(f"depth must be 0 or more tokens, got {depth!r}")
    report = estimate_generative(model, target, backends=_one(backend, "backend"),
                                 precisions=_one(precision, "precision"),
                                 prompt_tokens=512 if prompt_tokens is None else prompt_tokens,
                                 gen_tokens=128 if gen_tokens is None else gen_tokens,
                                 depths=(depth or 0,), **options)
    if not report.predictions:
        why = [n for n in report.notes if "no prediction" in n]
        raise UnsupportedError("; ".join(why) or f"no prediction of {model} on {target} with "
                               f"{backend}", backend=backend, precision=precision)
    return report.predictions[0]


# ---------------------------------------------------- estimate, recommend, optimize
def _call(func: Any, model: Any, kind: str, verb: str, *args: Any, also: Any = None,
          **options: Any) -> Any:
    """``func(model, *args, **options)``; an option neither ``func`` nor ``also`` (the
    function ``func`` passes its other keywords to) takes is a ``UserError`` naming it and
    the options there are."""
    import inspect

    takes = [n for f in (func, also) if f is not None
             for n, p in inspect.signature(f).parameters.items() if p.kind is p.KEYWORD_ONLY]
    for name in options:
        if name not in takes:
            raise UserError(f"{verb}() takes no option '{name}' for {_shown(model)}, a {kind} "
                            f"model; its options: {', '.join(dict.fromkeys(takes))}")
    return func(model, *args, **options)


#: the names both kinds take -> a generative function's own (one name or several)
_GENERATIVE_NAMES = {"precision": "precisions", "backend": "backends",
                     "runtime_version": "build"}


def _generative_names(options: dict[str, Any]) -> dict[str, Any]:
    """A generative model's options with the names both kinds take (``precision``,
    ``backend``, ``runtime_version``) given as its functions' own (``precisions``,
    ``backends``: one or several; ``build``)."""
    for name, own in _GENERATIVE_NAMES.items():
        if name in options:
            value = options.pop(name)
            if options.get(own) not in (None, value):
                raise UserError(f"give {name} or {own}, not both")
            options[own] = value
    return options


def estimate(model: Any, target: Any = None, precision: Any = None, **options: Any) -> Any:
    """The analytic figures of ``model`` on ``target``, for either kind of model; nothing is
    built or run.

    * A tensor model: :func:`edgeprof.api.verbs.estimate` (``target`` default host,
      ``precision`` default fp32; ``batch_size``, ``input_shapes``, ``input_dtypes`` ...): an
      :class:`~edgeprof.core.results.Estimate`, per layer; with ``backend`` (and
      ``threads``, ``device``, ``calibration``, ``runtime_version``) it carries the board's
      prediction for that runtime (``.prediction``).
    * A generative model: :func:`edgeprof.api.generative.estimate_generative` (``target`` default
      none: the estimate alone; ``precision``: one format or several, default the
      backend's; ``backend``/``backends`` default llama_cpp; ``prompt_tokens``,
      ``gen_tokens``, ``depths``, ``device``, ``threads``, ``calibration``,
      ``runtime_version``/``build`` ...): a
      :class:`~edgeprof.profilers.report.generative.GenerativeReport` (``command``
      "estimate": per stage, and the target's predictions).

    An option of the other kind is a ``UserError`` naming it."""
    if model_kind(model) == GENERATIVE:
        from edgeprof.api.generative import estimate_generative

        if precision is not None:
            options["precision"] = precision
        return _call(estimate_generative, model, GENERATIVE, "estimate", target,
                     **_generative_names(options))
    return _call(_estimate_tensor, model, TENSOR, "estimate", "host" if target is None
                 else target, "fp32" if precision is None else precision, **options)


def _estimate_tensor(model: Any, target: Any, precision: str, *, backend: str | None = None,
                     threads: int | None = None, device: str | None = None,
                     calibration: Any = None, runtime_version: str | None = None,
                     batch_size: int | None = None,
                     input_shapes: Sequence[Sequence[int]] | None = None,
                     input_dtypes: Sequence[str] | None = None, plugins: Any = None,
                     targets_dir: Any = None) -> Any:
    """A tensor model's estimate; with ``backend`` the predictor's, carrying its prediction
    (``predictions.predict``'s figures)."""
    from edgeprof.api.verbs import estimate as estimate_tensor

    if backend is None:
        given = [n for n, v in (("--threads", threads), ("--device", device),
                                ("--calibration", calibration),
                                ("--runtime-version", runtime_version)) if v is not None]
        if given:
            raise UserError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for the "
                            "prediction: give --backend B too (the runtime family on the "
                            "board)")
        return estimate_tensor(model, target, precision, batch_size=batch_size,
                               input_shapes=input_shapes, input_dtypes=input_dtypes,
                               plugins=plugins, targets_dir=targets_dir)
    from edgeprof.api.predictions import Predictor

    pred = Predictor(target, backend, precision, threads=threads, device=device,
                     calibration=calibration, plugins=plugins, targets_dir=targets_dir,
                     runtime_version=runtime_version)
    est = pred.estimate(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                        batch_size=batch_size)
    est.prediction = pred.from_estimate(est)
    return est


def recommend(model: Any, target: Any = "host", constraints: Any = None,
              **options: Any) -> Any:
    """How to run ``model`` on ``target``, for either kind of model; analytic, nothing runs.

    * A tensor model: :func:`edgeprof.optimize.loop.recommend_plan` (``latency_budget_ms``,
      ``memory_budget_mb``, ``max_accuracy_drop``, ``stream_rate_fps``, ``threads`` ...): the
      router's :class:`~edgeprof.optimize.router.Plan`.
    * A generative model: :func:`edgeprof.api.generative.recommend_llm` (``tokens_per_s``,
      ``context_tokens``, ``backends``, ``precisions``, ``device``, ``threads`` ...): the
      format that fits and meets the budget with the most bits, an
      :class:`~edgeprof.optimize.llm.LLMChoice`.
    * An :class:`~edgeprof.core.results.Estimate` (what ``edgeprof.estimate`` gave) with
      ``constraints`` (a :class:`~edgeprof.optimize.router.Constraints`): the router on it,
      :func:`edgeprof.optimize.router.recommend`, as before.

    An option of the other kind is a ``UserError`` naming it."""
    from edgeprof.core.results import Estimate

    if isinstance(model, Estimate):  # an estimate already made: the router on it
        from edgeprof.optimize.router import recommend as route

        return route(model, target, constraints, **options)
    if constraints is not None:
        raise UserError("constraints go with an Estimate; for a model give the budgets as "
                        "keywords (latency_budget_ms=..., tokens_per_s=...)")
    if model_kind(model) == GENERATIVE:
        from edgeprof.api.generative import recommend_llm

        return _call(recommend_llm, model, GENERATIVE, "recommend", target,
                     **_generative_names(options))
    from edgeprof.optimize.loop import recommend_plan

    return _call(recommend_plan, model, TENSOR, "recommend", target, **options)


def optimize(model: Any, target: Any = "host", **options: Any) -> Any:
    """The recommended configurations of ``model`` measured here and the best one chosen,
    for either kind of model.

    * A tensor model: :func:`edgeprof.optimize.loop.optimize` (budgets, ``candidates``,
      ``compressions``, ``data``, ``out`` ...): an
      :class:`~edgeprof.optimize.loop.OptimizeReport`.
    * A generative model: :func:`edgeprof.api.generative.optimize_llm` (``shortlist``,
      ``repetitions``, ``out`` and :func:`recommend`'s options): the
      :class:`~edgeprof.optimize.llm.LLMChoice` with the shortlisted formats
      ``measured_here``.

    An option of the other kind is a ``UserError`` naming it."""
    if model_kind(model) == GENERATIVE:
        from edgeprof.api.generative import optimize_llm, recommend_llm

        return _call(optimize_llm, model, GENERATIVE, "optimize", target, also=recommend_llm,
                     **_generative_names(options))
    from edgeprof.optimize.loop import optimize as optimize_tensor

    return _call(optimize_tensor, model, TENSOR, "optimize", target, **options)


def compare(a: Any, b: Any, *, force: bool = False, **thresholds: Any) -> list[Any]:
    """Two profiles of either kind compared run by run (``edgeprof compare``): is B faster
    or slower than A, really? ``a``, ``b``: a :class:`~edgeprof.profilers.report.family.
    ProfileReport`, its ``to_dict()``, or a profile.json (the file or the ``save``/``--out``
    folder). Rows per :func:`edgeprof.profilers.report.compare.compare_results` (``alpha``,
    ``min_rel_change``, ``min_cliffs``); ``force`` compares profiles of different things."""
    from edgeprof.profilers.report.compare import compare_results

    return compare_results(_document(a), _document(b), force=force, **thresholds)


def _document(profile: Any) -> Any:
    """The profile.json document of a report, a dict or a path (file or folder)."""
    if hasattr(profile, "to_dict"):
        return profile.to_dict()
    if isinstance(profile, Mapping):
        return dict(profile)
    from edgeprof.core.io import read_json_document

    return read_json_document(profile)[1]


# ------------------------------------------------------------------------- calibrate
@dataclass
class CalibrationResult:
    """What :func:`calibrate` made: ``kind`` (``tensor`` or ``generative``: the backend's),
    ``source`` (``measured``: kernels or presets timed here or on a fleet board;
    ``measurements``: the user's own timings fitted), the ``calibration`` (a tensor
    ``Calibration`` object, a generative calibration dict), the ``path`` it was written to,
    and, as each source gives them, the fit's ``summary`` (measurements) or the measured
    ``records`` (a generative backend's presets)."""

    kind: str
    source: str
    calibration: Any
    path: Path | None
    summary: dict[str, Any] | None = None
    records: list[Any] = field(default_factory=list)


def calibrate(backend: str, target: Any = "host", precision: str | None = None, *,
              measurements: str | os.PathLike | None = None, kernels: str | None = None,
              runs: int | None = None, models: Sequence[str] | str | None = None,
              threads: int | None = None, out: str | os.PathLike | None = None,
              fleet: Any = None, isolate: bool = False, timeout_s: float | None = None,
              plugins=None, targets_dir=None,
              progress: Progress | None = None) -> CalibrationResult:
    """A calibration of ``backend`` on ``target``, written where predictions look for it
    (``edgeprof calibrate``), for either kind of backend:

    * ``measurements`` (a CSV of the user's own timings on the board, ``threads``: the
      threads every row ran, ``out``: where to write): fitted with
      :func:`~edgeprof.api.predictions.calibrate_measurements` (a tensor backend) or
      :func:`~edgeprof.api.generative.calibrate_llm_measurements` (a generative one);
    * else measured: a tensor backend's sampled ``kernels`` (``default`` or ``tiny``;
      ``runs`` timed runs each, default 20) here (``target`` host) or on a board of
      ``target`` on the Dask scheduler ``fleet``; a generative backend's presets
      (``models``, default ``LLM_CALIBRATION_MODELS``) here, in a worker (``isolate``,
      ``timeout_s``) or on a board of the fleet (:func:`calibrate_llm`).

    ``precision``: default fp32 (a generative backend: q4_0 or int4 where it makes it).
    Options of the other source or kind (``kernels`` for a generative backend, ``models``
    or ``isolate`` for a tensor one, a measuring option with ``measurements`` ...) are a
    ``UserError`` naming them."""
    from edgeprof.core.plugins import get_registry

    if measurements is not None:
        measuring = [flag for flag, given in (
            ("--fleet", fleet is not None), ("--models", models is not None),
            ("--kernels", kernels is not None), ("--runs", runs is not None),
            ("--isolate", bool(isolate)), ("--timeout", timeout_s is not None)) if given]
        if measuring:
            raise UserError(f"{', '.join(measuring)} measure (here or on a board of the "
                            "fleet); --measurements fits timings you took: give one or the "
                            "other")
        return _calibrate_measurements(measurements, target, backend, precision=precision,
                                       threads=threads, out=out, plugins=plugins,
                                       targets_dir=targets_dir, progress=progress)
    if threads is not None or out is not None:
        raise UserError("--threads and --out go with --measurements FILE.csv (a calibration "
                        "from your own timings)")
    target_id = target if isinstance(target, str) else getattr(target, "id", target)
    if target_id != "host" and fleet is None:
        raise UserError(f"calibrating '{target_id}' needs that device: only --target host "
                        "can be calibrated on this machine; give --fleet SCHEDULER to measure "
                        "on a board of the fleet (built-in boards ship calibrations "
                        "fitted to published measurements)")
    reg = get_registry(plugins)
    if getattr(reg.backend(backend), "workload", "tensor") == "generate":
        if kernels is not None or runs is not None:
            raise UserError("--kernels and --runs go with a tensor backend's kernels; a "
                            f"generative backend ({backend}) measures presets: --models")
        from edgeprof.api.generative import LLM_CALIBRATION_MODELS, calibrate_llm

        cal, records = calibrate_llm(
            backend, precision, models=models or LLM_CALIBRATION_MODELS, plugins=plugins,
            progress=progress, target=target, fleet=fleet, isolate=bool(isolate),
            timeout_s=timeout_s, targets_dir=targets_dir)
        return CalibrationResult(GENERATIVE, "measured", cal, _path(cal.get("path")),
                                 records=list(records))
    kernels = kernels or "default"
    runs = 20 if runs is None else runs
    if isolate or timeout_s is not None:
        raise UserError("--isolate and --timeout go with a generative backend (e.g. "
                        "--backend llama_cpp); a tensor calibration measures its kernels here "
                        "or, with --fleet, on a board")
    if models is not None:
        raise UserError(f"--models names the presets a generative backend measures; "
                        f"{backend} calibrates from kernels (--kernels default or tiny)")
    from edgeprof.profilers.predict.host import calibrate_fleet, calibrate_host

    if fleet is not None:
        cal, path = calibrate_fleet(fleet, target, backend, precision or "fp32",
                                    kernels=kernels, runs=runs, registry=reg,
                                    targets_dir=targets_dir, progress=progress)
    else:
        cal, path = calibrate_host(backend, precision or "fp32", kernels=kernels, runs=runs,
                                   registry=reg, progress=progress)
    return CalibrationResult(TENSOR, "measured", cal, _path(path))


def _calibrate_measurements(measurements: str | os.PathLike, target: Any, backend: str, *,
                            precision: str | None, threads: int | None,
                            out: str | os.PathLike | None, plugins: Any, targets_dir: Any,
                            progress: Progress | None) -> CalibrationResult:
    """The user's own timings on the board refine its calibration (either kind)."""
    from edgeprof.core.plugins import get_registry

    reg = get_registry(plugins)
    if backend in reg.backends and getattr(reg.backend(backend), "workload",
                                           "") == "generate":
        from edgeprof.api.generative import calibrate_llm_measurements

        cal, summary = calibrate_llm_measurements(
            measurements, target, backend, precision=precision, threads=threads, out=out,
            plugins=plugins, targets_dir=targets_dir)
        return CalibrationResult(GENERATIVE, "measurements", cal, _path(cal.get("path")),
                                 summary=summary)
    from edgeprof.api.predictions import calibrate_measurements

    cal, path, summary = calibrate_measurements(
        measurements, target, backend, precision=precision, threads=threads, out=out,
        plugins=plugins, targets_dir=targets_dir, progress=progress)
    return CalibrationResult(TENSOR, "measurements", cal, _path(path), summary=summary)


def _path(path: Any) -> Path | None:
    return Path(path) if path is not None else None


__all__ = ["GENERATIVE", "KIND_WORDS", "TENSOR", "CalibrationResult", "calibrate", "compare",
           "estimate",
           "model_kind", "optimize", "predict", "profile", "recommend"]

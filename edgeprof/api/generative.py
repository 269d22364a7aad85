"""Generative models (``llm:NAME``, a .gguf file, a Hugging Face folder): ``estimate_llm``,
``profile_llm``, ``recommend_llm``, ``optimize_llm``, ``calibrate_llm``, and the plan of
(backend, format) pairs they share (``llm_plan``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgeprof.api.common import Progress, check_out, resolve_target, save_artifacts, split_names
from edgeprof.core.errors import EdgeprofError, OutputError, UserError
from edgeprof.core.plugins import Registry, get_registry
from edgeprof.profilers.measure.environment import host_info as _host_info
from edgeprof.profilers.measure.measure import measure
from edgeprof.profilers.report.generative import GenerativeReport


# ------------------------------------------------------------------ generative models
#: the format each backend profiles when no --precision is given (the first it makes)
DEFAULT_LLM_FORMATS = ("q4_k_m", "int4")


def _llm_model(model: Any) -> Any:
    """An :class:`~edgeprof.core.llm.LLMModel` from ``llm:NAME``, a .gguf or an HF folder."""
    from edgeprof.zoo.llm import resolve_llm

    return resolve_llm(model)


def _llm_config(*, prompt_tokens: int, gen_tokens: int, depths: Sequence[int] | int,
                repetitions: int = 5, warmup: int = 1, threads: int | None = None,
                device: str = "cpu", seed: int = 0, on_board: bool = False) -> Any:
    """The test shape. ``device``: cpu or cuda (a run here); ``on_board``: a board's
    processor for an estimate or prediction (npu ...), which :func:`_board_device` checks
    against the target."""
    from edgeprof.core.llm import GenerationConfig

    depths = (depths,) if isinstance(depths, int) else tuple(depths or (0,))
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads <= 0):
        raise UserError(f"--threads must be a positive integer, got {threads!r}")
    if device not in ("cpu", "cuda") and (not on_board or ":" in str(device)):
        raise UserError(f"--device must be cpu or cuda for a generative model, got '{device}'"
                        + ("" if on_board else "; a board's other processor (npu ...) goes "
                           "with --target BOARD"))
    if warmup < 0:
        raise UserError(f"warm-up runs must be 0 or more, got {warmup}")
    return GenerationConfig(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=depths,
                            repetitions=repetitions, warmup=warmup, threads=threads,
                            device=device, seed=seed)


#: MLC LLM quantization codes -> the estimator's format of the same bytes per weight (the
#: LLM calibration reads MLC's q4f16 rows as llama.cpp q4_0: 4-bit weights in groups of 32
#: with an fp16 scale, 4.5 bits/weight; q0: unquantized)
MLC_AS = {"q4f16_1": "q4_0", "q4f16_ft": "q4_0", "q0f16": "f16", "q0f32": "f32"}


def _family_layout(family: str, fmt: str) -> Any:
    """The :class:`~edgeprof.core.llm.FormatInfo` the estimator counts a prediction-only
    generative family's format ``fmt`` with, as the LLM calibration reads its rows
    (``predict.llm.formats.row_format``: llama.cpp's GGUF types, q3_k_m, RKLLM's w8a8 /
    w4a16; MLC's codes through :data:`MLC_AS`); None where no byte layout is known."""
    from edgeprof.profilers.estimate.llm import resolve_format
    from edgeprof.profilers.predict.llm.formats import row_format

    name = MLC_AS.get(fmt) if family == "mlc" else fmt
    if name is None:
        return None
    try:
        return resolve_format(row_format(name))
    except EdgeprofError:
        return None


def prediction_only_generative(family: str, reg: Registry | None = None) -> type:
    """A prediction-only generative runtime family of ``data/runtimes.toml`` (``workload =
    "generate"``: llamafile, mlc, rkllm; no edgeprof backend runs it) as a generative
    backend class: ``formats`` its precisions, ``layouts`` the byte layout of each the
    estimator counts, never available here (its run: ``unavailable``, with
    ``runtimes.prediction_only_reason``); its figures come from the LLM predictor with
    ``runtime=family``."""
    from edgeprof.core.backend import Availability
    from edgeprof.core.llm import GenerativeBackend
    from edgeprof.profilers.predict.runtimes import (family_processors, kinds_text,
                                                     offered_precisions,
                                                     prediction_only_reason)

    offered, _ = offered_precisions(family, reg)
    kinds, source = family_processors(family, reg)
    reason = prediction_only_reason(family, reg)
    layouts = {f: info for f in offered or () if (info := _family_layout(family, f))}

    def board_reason(self, fmt: str, device: str) -> str | None:
        if fmt not in self.layouts:
            return (f"edgeprof has no byte layout of {self.name}'s {fmt} to predict from; "
                    f"it predicts {', '.join(self.layouts) or 'none'}")
        return None

    def supports(self, model: Any, fmt: str, device: str = "cpu") -> str | None:
        return reason

    return type(f"PredictionOnlyLLM_{family}", (GenerativeBackend,), {
        "name": family, "prediction_only": True, "prediction_only_reason": reason,
        "formats": tuple(offered or ()), "layouts": layouts, "devices": (),
        "board_devices": (), "description": f"prediction-only: runs on "
                                            f"{kinds_text(kinds)} ({source})",
        "availability": classmethod(lambda cls: Availability(False, reason)),
        "board_reason": board_reason, "supports": supports})


def _generative_backends(names: Sequence[str] | str | None, reg: Registry, *,
                         prediction_only: bool = False) -> dict[str, type]:
    """Name -> class of the generative backends named (``None``/``all``: every registered
    one). ``prediction_only``: a prediction-only generative family (llamafile, mlc, rkllm)
    is taken too (:func:`prediction_only_generative`), else it is a one-line UserError
    pointing at ``edgeprof predict``."""
    from edgeprof.profilers.predict.runtimes import generative_families

    known = reg.backends_for("generate")
    given = split_names(names, "--backend") if names is not None else ["all"]
    if not given or given == ["all"]:
        if not known:
            raise UserError("no generative backend is registered; 'edgeprof backends' lists "
                            "them (install llama-cpp-python or onnxruntime-genai)")
        return {n: e.cls for n, e in known.items()}
    out = {}
    for n in given:
        if n not in reg.backends and n in generative_families(reg):
            if not prediction_only:
                raise UserError(f"{n} is a generative runtime edgeprof only predicts (no "
                                f"edgeprof backend runs it): 'edgeprof predict llm:NAME "
                                f"--target BOARD --backend {n}' gives its figures")
            out[n] = prediction_only_generative(n, reg)
            continue
        cls = reg.backend(n)  # UnknownNameError names the closest
        if getattr(cls, "workload", "tensor") != "generate":
            raise UserError(f"backend '{n}' runs fixed-shape tensor models, not generative "
                            f"ones; generative backends: {', '.join(known) or '(none)'}")
        out[n] = cls
    return out


def llm_plan(model: Any, backends: dict[str, type], precisions: Sequence[str] | str | None,
             device: str = "cpu", *, runnable: bool = True
             ) -> tuple[list[tuple[str, str]], list[str]]:
    """The (backend, format) pairs to run, and notes on the pairs left out.

    Each format runs on the named backends that make it; a format none of them makes is a
    ``UserError`` (exit 2), and so is a pair whose backend cannot run this architecture on
    ``device`` (its ``supports`` reason). A pair whose backend is not installed is kept: the
    harness records it ``unavailable``. ``runnable=False`` (estimates and predictions for a
    board: nothing runs here) asks ``supports_on_board`` instead: the runtime's board devices
    and the architecture, statically (no runtime import)."""
    notes: list[str] = []
    if precisions is None or (isinstance(precisions, str) and not precisions.strip()):
        fmts: list[str] = []
        for name, cls in backends.items():
            made = tuple(cls.formats)
            pick = (model.file_format if model.file_format in made else
                    next((f for f in DEFAULT_LLM_FORMATS if f in made), made[0] if made else None))
            if pick and pick not in fmts:
                fmts.append(pick)
    else:
        fmts = split_names(precisions, "--precision")
    pairs: list[tuple[str, str]] = []
    for fmt in fmts:
        makers = [n for n, cls in backends.items() if fmt in cls.formats]
        if not makers:
            made = "; ".join(f"{n} makes {', '.join(cls.formats)}" for n, cls in backends.items())
            raise UserError(f"no backend given makes format '{fmt}' ({made}); choose one of "
                            "those or add a backend that makes it")
        for n in backends:
            if n in makers:
                pairs.append((n, fmt))
            elif precisions is not None:
                notes.append(f"{n} {fmt}: skipped, {n} does not make {fmt} "
                             f"(made by {', '.join(makers)})")
    for n, fmt in pairs:
        cls = backends[n]
        if not runnable:
            why = cls().supports_on_board(model, fmt, device)
        elif not cls.availability().available:
            continue  # the harness says unavailable (exit 3), as for tensor backends
        else:
            why = cls().supports(model, fmt, device)
        if why:
            raise UserError(f"{n} cannot run {model.spec.name} ({model.spec.family}) as {fmt} "
                            f"on {device}: {why}")
    return pairs, notes


def _fit(est: dict[str, Any]) -> dict[str, Any]:
    """The fit verdict of one estimate made for a target (the estimate's own rule:
    weights + KV cache + runtime allowance against the RAM after the OS reserve)."""
    verdict = dict(est["fit"])
    fits = bool(verdict.get("fits"))
    verdict.setdefault("verdict", "fits" if fits else "does not fit")
    if not fits and "does not fit" not in str(verdict["verdict"]):
        verdict["verdict"] = f"does not fit: {verdict['verdict']}"
    return verdict


def _board_device(model: Any, tgt: Any, chosen: dict[str, type], device: str | None,
                  notes: list[str]) -> str:
    """The board processor the estimates and predictions are for: ``device`` where given
    (a processor ``tgt`` has: cpu, cuda, npu ...; each prediction-only family must run
    there: ``runtimes.processor_for``, else exit 2), else the one the runtimes use there (a
    Jetson's GPU for llama_cpp, the RK3588's NPU for rkllm; ``optimize.llm.default_device``
    for the backends, ``processor_for`` for the prediction-only families), which a note
    names. Without a board: cpu (or the cpu/cuda asked)."""
    from edgeprof.profilers.predict.runtimes import processor_for

    if tgt is None or getattr(tgt, "is_host", False):
        if device not in (None, "cpu", "cuda"):
            raise UserError(f"--device {device} is a board's processor: give --target BOARD "
                            "with one ('edgeprof targets'); here a generative model runs on "
                            "cpu or cuda")
    po = {n: c for n, c in chosen.items() if getattr(c, "prediction_only", False)}
    if tgt is None:
        return device or "cpu"
    if device is not None:
        if not getattr(tgt, "is_host", False):
            tgt.get_processor(device)  # a device the board lacks: exit 2 naming its devices
        for n in po:
            processor_for(tgt, n, device)  # exit 2 where the runtime does not run there
        return device
    picks: dict[str, str] = {}
    for n in po:
        dev, why = processor_for(tgt, n)
        picks[n] = dev
        if why not in ("as asked", "this machine") and not why.endswith(
                "the processor its figures describe"):
            notes.append(f"device {dev}: {why}")
    rest = {n: c for n, c in chosen.items() if n not in po}
    if rest:
        from edgeprof.optimize.llm import default_device

        dev = default_device(model, tgt, rest, notes)
        picks.update({n: dev for n in rest})
    devices = sorted(set(picks.values()))
    if len(devices) > 1:
        raise UserError(f"the runtimes given run on different processors of {tgt.id} ("
                        + ", ".join(f"{n}: {d}" for n, d in picks.items())
                        + "): give --device, or one --backend at a time")
    return devices[0]


def _llm_estimates(model: Any, pairs: Sequence[tuple[str, str]], config: Any, tgt: Any,
                   device: str, notes: list[str], threads: int | None = None,
                   build: str | None = None, classes: dict[str, type] | None = None,
                   calibration: str | os.PathLike | None = None,
                   ) -> tuple[list[dict], list[dict]]:
    """Estimates (per format and depth, with the fit on ``tgt``) and, for a target,
    predictions (per backend, format and depth). Analytic: nothing is built or run."""
    from edgeprof.profilers.estimate.llm import estimate_llm as _estimate

    from edgeprof.profilers.predict.llm import predict_llm as predict

    estimates, predictions = [], []
    for backend, fmt in pairs:
        cls = (classes or {}).get(backend)
        only = getattr(cls, "prediction_only", False)  # llamafile, mlc, rkllm: predicted
        for depth in config.depths:  # a plugin's backend: the format's generic accounting
            est = _estimate(model.spec, cls.layouts[fmt] if only else fmt,
                            prompt_tokens=config.prompt_tokens,
                            gen_tokens=config.gen_tokens, depth=depth, target=tgt,
                            device=device, backend=None if only else (cls or backend))
            row = {**est.to_dict(), "backend": backend, "format": fmt, "depth": depth}
            if only:
                row["prediction_only"] = True
            if tgt is not None:
                row["fit"] = _fit(row)
            estimates.append(row)
            if tgt is not None:
                try:
                    pred = predict(est, tgt, device=device, runtime=backend,
                                   threads=threads, build=build, calibration=calibration)
                except UserError:
                    raise
                except EdgeprofError as e:
                    notes.append(f"{backend} {fmt}: no prediction for {tgt.id}: {e}")
                    continue
                pred = {**dict(pred), "backend": backend, "format": fmt,
                        "depth": depth, "target": tgt.id, "device": device}
                if only:  # predicts, can't run here: no edgeprof backend runs it
                    pred["prediction_only"] = True
                    pred["prediction_only_reason"] = cls.prediction_only_reason
                    if est.format != fmt:
                        pred["notes"] = [*(pred.get("notes") or []),
                                         f"{backend} {fmt}: bytes counted as {est.format} "
                                         "(the same bytes per weight; as the calibration "
                                         "reads its rows)"]
                predictions.append(pred)
    return estimates, predictions


def estimate_generative(model: Any, target: Any = None, *,
                        backends: Sequence[str] | str | None = "llama_cpp",
                        precisions: Sequence[str] | str | None = None,
                        prompt_tokens: int = 512, gen_tokens: int = 128,
                        depths: Sequence[int] | int = (0,), device: str | None = None,
                        plugins=None, targets_dir=None, threads: int | None = None,
                        build: str | None = None,
                        calibration: str | os.PathLike | None = None) -> GenerativeReport:
    """A generative model's estimate and, for a ``target``, its prediction (with interval)
    and fit verdict, per backend and format: no build, no run, no runtime imported. Returns
    a :class:`GenerativeReport` (``command`` "estimate"). ``device``: the board's
    processor (default, as ``recommend_llm`` and ``predict``: the one the backends would use
    there, a Jetson's GPU; cpu without a target); ``threads``: the board's (default: all its
    big cores); ``build``: the runtime build to predict for (default: the one installed
    here, else the newest the calibration knows); ``calibration``: an LLM calibration file
    (``calibrate --measurements --out FILE``) used before the search."""
    from edgeprof.profilers.measure.generate import check_context

    if calibration is not None and target is None:
        raise UserError("a calibration is for a board's prediction: give --target BOARD too")
    if device is not None:  # a wrong device: exit 2 before any reading
        _llm_config(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=depths,
                    device=device, on_board=target is not None)
    reg = get_registry(plugins)
    chosen = _generative_backends(backends, reg, prediction_only=True)
    tgt = resolve_target(target, targets_dir, plugins)  # None: no target
    llm = _llm_model(model)
    device_notes: list[str] = []
    device = _board_device(llm, tgt, chosen, device, device_notes)
    config = _llm_config(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=depths,
                         device=device, on_board=True)
    check_context(llm, config)
    pairs, notes = llm_plan(llm, chosen, precisions, device, runnable=False)
    notes = [*device_notes, *notes]
    estimates, predictions = _llm_estimates(llm, pairs, config, tgt, device, notes,
                                            threads=threads, build=build, classes=chosen,
                                            calibration=calibration)
    return GenerativeReport.create(llm, target=tgt, device=device, config=config,
                                   parameters=_llm_parameters(llm), estimates=estimates,
                                   predictions=predictions, notes=[llm.note, *notes],
                                   command="estimate")


def _llm_parameters(model: Any) -> int | None:
    from edgeprof.profilers.estimate.llm import parameter_count

    return int(parameter_count(model.spec))


def profile_generative(model: Any, *, backends: Sequence[str] | str | None = "llama_cpp",
                       precisions: Sequence[str] | str | None = None, prompt_tokens: int = 512,
                       gen_tokens: int = 128, depths: Sequence[int] | int = (0,),
                       repetitions: int = 5, warmup: int = 1, threads: int | None = None,
                       target: Any = None, device: str | None = None,
                       out: str | os.PathLike | None = None, plugins=None, targets_dir=None,
                       workdir: str | os.PathLike | None = None,
                       progress: Progress | None = None, isolate: bool = False,
                       timeout_s: float | None = None, fleet: Any = None,
                       calibration: str | os.PathLike | None = None) -> GenerativeReport:
    """Measure a generative model per backend and format (llama-bench's pp/tg, TTFT, TPOT,
    load time, peak RSS), beside its estimate and, with a ``target``, the target's
    prediction. Writes ``out`` as a whole when given. Returns a :class:`GenerativeReport`
    (``exit_code``: the CLI's exit status).

    Each (backend, format) is one ``MeasureRequest`` through ``measure()``, as a tensor run:
    in this process, in a worker process (``isolate``, or a ``timeout_s``: a crash inside
    the runtime or a hang fails that run, not the caller), or on a board of ``target``
    connected to the Dask scheduler ``fleet`` (built here, loaded and timed there; a real
    board's tokens/s are measured on it, an emulating one's stay this host's).

    ``device``: the processor the runs use and the target's figures are for; None: the runs
    on the CPU and, without a ``fleet``, the target's figures for the processor the backends
    would use there (a Jetson's GPU, as :func:`estimate_generative`), which a note names.
    ``calibration``: an LLM calibration file the target's figures use before the search."""
    from edgeprof.profilers.measure.generate import check_context

    if calibration is not None and target is None:
        raise UserError("a calibration is for a board's prediction: give --target BOARD too")
    say = progress or (lambda msg: None)
    config = _llm_config(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=depths,
                         repetitions=repetitions, warmup=warmup, threads=threads,
                         device=device or "cpu")
    reg = get_registry(plugins)
    chosen = _generative_backends(backends, reg, prediction_only=True)
    tgt = resolve_target(target, targets_dir, plugins)  # None: no target
    llm = _llm_model(model)
    check_context(llm, config)
    only = [n for n, c in chosen.items() if getattr(c, "prediction_only", False)]
    if only and tgt is None:  # nothing runs it here: its figure is a board's prediction
        raise UserError(f"{only[0]} is a generative runtime edgeprof only predicts: give "
                        f"--target BOARD for its figure ('edgeprof predict llm:NAME --target "
                        f"BOARD --backend {only[0]}')")
    pairs, notes = llm_plan(llm, chosen, precisions, config.device)
    if only:  # llm_plan checks a runnable backend's pairs; these are predicted on the board
        llm_plan(llm, {n: chosen[n] for n in only}, precisions, config.device,
                 runnable=False)
    board_device = device or config.device
    if device is None and fleet is None and tgt is not None \
            and not getattr(tgt, "is_host", False):  # a board's runs: its figures' processor
        board_device = _board_device(llm, tgt, chosen, None, notes)
    elif only and tgt is not None:
        _board_device(llm, tgt, {n: chosen[n] for n in only}, board_device, [])
    check_out(out)
    say(f"estimating {llm.spec.name}")
    estimates, predictions = _llm_estimates(llm, pairs, config, tgt, board_device, notes,
                                            threads=threads, classes=chosen,
                                            calibration=calibration)
    from edgeprof.profilers.measure.llm_runs import measure_pairs

    runs = measure_pairs(llm, pairs, chosen, config, registry=reg, target=tgt, say=say,
                         isolate=isolate, timeout_s=timeout_s, fleet=fleet, plugins=plugins,
                         workdir=workdir)
    recommendation = None
    from edgeprof.profilers.estimate.llm import declares_formats

    known = [c for c in chosen.values() if declares_formats(c)]  # formats with bytes
    if tgt is not None and known:  # analytic, a fraction of a second: the report's card
        from edgeprof.optimize.llm import choose_llm_format

        recommendation = choose_llm_format(  # the figures the payload's predictions give
            llm, tgt, device=board_device, backends=known,
            context_tokens=config.context_needed(), prompt_tokens=prompt_tokens,
            gen_tokens=gen_tokens, threads=threads, calibration=calibration).to_dict()
    host = _host_info(None)
    if any(r["status"] == "ok" for r in runs):  # the roof the measured points sit under
        try:
            host["target"] = resolve_target("host", targets_dir, plugins).to_dict()
        except EdgeprofError as e:
            notes.append(f"this host's roof is left out of the report: {e}")
    report = GenerativeReport.create(
        llm, target=tgt, device=config.device, config=config,
        parameters=_llm_parameters(llm), estimates=estimates, predictions=predictions,
        runs=runs, notes=[llm.note, *notes], recommendation=recommendation, host=host,
        command="profile")
    if out is not None:
        say(f"writing artifacts to {out}")
        save_artifacts(report, lambda: report.save(out))
    return report


def _as_document(make: Any, name: str) -> Any:
    """``make`` (a function returning a :class:`GenerativeReport`) as one returning the
    report's document (``to_dict``: profile.json as a dict), its signature kept; an
    ``OutputError`` carries the document too."""
    import functools

    @functools.wraps(make)
    def document(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return make(*args, **kwargs).to_dict()
        except OutputError as e:
            if isinstance(e.result, GenerativeReport):
                e.result = e.result.to_dict()
            raise

    document.__name__ = document.__qualname__ = name
    document.__doc__ = (f"{make.__name__}'s report as its document (profile.json as a dict); "
                        f"see :func:`{make.__name__}`.")
    return document


#: the generative estimate and profile as documents (dicts), as edgeprof 1.x returned them;
#: ``edgeprof.estimate`` / ``edgeprof.profile`` return the reports
estimate_llm = _as_document(estimate_generative, "estimate_llm")
profile_llm = _as_document(profile_generative, "profile_llm")


def llm_exit_code(payload: dict[str, Any]) -> int:
    """0 complete (a run skipped because the model is too big for this machine counts as
    complete: it was estimated and predicted); 3 when a run produced no measurement."""
    return 3 if any(r.get("status") not in ("ok", "skipped") for r in payload.get("runs") or ()) \
        else 0


def recommend_llm(model: Any, target: Any, *, device: str | None = None,
                  backends: Sequence[str] | str | None = None,
                  context_tokens: int | None = None, tokens_per_s: float | None = None,
                  prompt_tokens: int = 512, gen_tokens: int = 128, plugins=None,
                  targets_dir=None, precisions: Sequence[str] | str | None = None,
                  threads: int | None = None,
                  calibration: str | os.PathLike | None = None,
                  depths: Sequence[int] | int | None = None) -> Any:
    """The format (and backend) for ``model`` on ``target`` (``threads``: of the board's
    cores the predictions are for; default all its big cores): fits the RAM with room for
    ``context_tokens`` (default the deepest of ``depths``, the tokens already cached, + prompt
    + generated tokens), meets ``tokens_per_s`` (default: the interactive floor of 10 tok/s
    decode), and keeps the most bits
    (``edgeprof.optimize.llm.choose_llm_format``: an ``LLMChoice`` whose reasons name the
    binding constraint). ``device`` None: the processor the runtimes would use on the board
    (a Jetson's GPU). ``precisions``: only these formats. ``calibration``: an LLM
    calibration file used before the search. Analytic: nothing runs."""
    from edgeprof.optimize.llm import choose_llm_format

    if target is None:
        raise UserError("choosing a format for a generative model needs --target BOARD "
                        "(e.g. raspberry_pi_5); 'edgeprof targets' lists them")
    reg = get_registry(plugins)
    names = list(_generative_backends(backends, reg)) if backends is not None else None
    tgt = resolve_target(target, targets_dir, plugins)
    llm = _llm_model(model)
    if context_tokens is None and depths is not None:
        deepest = max(depths) if isinstance(depths, Sequence) and depths else depths or 0
        context_tokens = int(deepest) + int(prompt_tokens) + int(gen_tokens)
    return choose_llm_format(llm, tgt, device=device, backends=names,
                             context_tokens=context_tokens, tokens_per_s=tokens_per_s,
                             prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
                             precisions=precisions, threads=threads, calibration=calibration)


def optimize_llm(model: Any, target: Any, *, shortlist: int = 3, repetitions: int = 3,
                 threads: int | None = None, progress: Progress | None = None,
                 out: str | os.PathLike | None = None, **choose: Any) -> Any:
    """:func:`recommend_llm`'s choice, then the shortlisted formats (the choice first, then
    the other formats that fit and meet the budget, most bits first; at most ``shortlist``;
    0: the choice alone, as recommend) measured here, each on its backend (llama-bench's
    pp/tg with ``repetitions``). Returns the ``LLMChoice`` with ``measured_here``: the
    runs (measured on this machine, not on the target: they confirm the formats run and how
    they rank, the target's figures stay predicted) and ``notes`` for formats not measured
    (a backend not installed here). ``out``: a folder replaced as a whole with
    optimize.json (the document) and, when formats were measured, their llm_bench.csv."""
    say = progress or (lambda msg: None)
    check_out(out)  # before any work: an unusable out is one line, exit 2
    choice = recommend_llm(model, target, **choose)
    cands = [c for c in choice.candidates if c.status in ("chosen", "ok") and c.fits]
    cands.sort(key=lambda c: (c.status != "chosen", tuple(-x for x in c.rank)))
    reg = get_registry(choose.get("plugins"))
    runs, notes = [], []
    for c in cands[:max(0, int(shortlist))]:
        cls = reg.backends_for("generate").get(c.backend)
        avail = cls.cls.availability() if cls is not None else None
        if avail is None or not avail.available:
            notes.append(f"{c.label}: not measured here: "
                         + (avail.reason if avail is not None else "backend not registered"))
            continue
        say(f"measuring {c.label} here")
        measured = profile_generative(model, backends=c.backend, precisions=c.format,
                                      prompt_tokens=choose.get("prompt_tokens", 512),
                                      gen_tokens=choose.get("gen_tokens", 128),
                                      repetitions=repetitions, threads=threads,
                                      plugins=choose.get("plugins"), progress=progress)
        runs.extend(r.to_dict() for r in measured.runs)
    choice.measured_here = runs
    choice.notes = list(choice.notes) + notes + [
        "measured_here: figures measured on this machine (provenance measured, where "
        "'this host'); the target's figures stay predicted"]
    if out is not None:
        say(f"writing artifacts to {out}")
        save_artifacts(choice, lambda: _write_optimize_llm(out, choice.to_dict()))
    return choice


def _write_optimize_llm(out: str | os.PathLike, doc: dict[str, Any]) -> list[Path]:
    """Replace ``out`` as a whole (core.io.publish_staged) with optimize.json and, when formats
    were measured here, their llama-bench rows (llm_bench.csv, ``where`` this host)."""
    from edgeprof.core.io import publish_staged, write_csv, write_json
    from edgeprof.profilers.report.llm_outputs import bench_frame

    def write(stage: Path) -> list[str]:
        write_json(stage / "optimize.json", doc)
        if not doc.get("measured_here"):
            return ["optimize.json"]
        runs = GenerativeReport.from_dict({"kind": "llm", "runs": doc["measured_here"],
                                           "target": doc.get("target")})
        write_csv(stage / "llm_bench.csv", bench_frame(runs))
        return ["optimize.json", "llm_bench.csv"]

    return publish_staged(out, write)


#: the presets `edgeprof calibrate --backend <generative>` measures by default: three sizes,
#: so the fit can separate bandwidth from per-layer overhead
LLM_CALIBRATION_MODELS = ("smollm2-135m", "smollm2-360m", "qwen2.5-0.5b")


def calibrate_llm(backend: str, precision: str | None = None, *,
                  models: Sequence[str] | str = LLM_CALIBRATION_MODELS,
                  prompt_tokens: int = 128, gen_tokens: int = 32, repetitions: int = 3,
                  threads: int | None = None, plugins=None, workdir=None,
                  path: str | os.PathLike | None = None, progress: Progress | None = None,
                  target: Any = "host", fleet: Any = None, isolate: bool = False,
                  timeout_s: float | None = None, targets_dir=None
                  ) -> tuple[dict[str, Any], list[Any]]:
    """Measure presets of several sizes with a generative backend and fit an LLM calibration
    (effective bandwidth, per-layer overhead, prefill efficiency:
    ``edgeprof.profilers.predict.llm.calibrate_llm_host``). Returns the calibration and the
    measured records.

    Each preset is one ``MeasureRequest`` through ``measure()`` on the runner ``profile``
    chooses: this process, an isolated worker (``isolate``, ``timeout_s``), or a board of
    ``target`` on the Dask scheduler ``fleet``. Runs on a real board of ``target`` fit that
    board's calibration (its fingerprint and name kept); runs here, or on an emulating worker
    on this machine, stay this host's and fit this host's."""
    from edgeprof.core.requests import MeasureRequest
    from edgeprof.profilers.measure.llm_runs import (calibration_subject, label_calibration,
                                                     measured_where, runner_phrase)
    from edgeprof.profilers.measure.choice import chosen_runner
    from edgeprof.profilers.predict.llm import calibrate_llm_host

    say = progress or (lambda msg: None)
    reg = get_registry(plugins)
    cls = _generative_backends(backend, reg)[backend]
    fmt = precision or next((f for f in ("q4_0", "int4") if f in cls.formats), cls.formats[0])
    names = split_names(models, "--models")
    llms = {n: _llm_model(n if ":" in n else f"llm:{n}") for n in names}
    config = _llm_config(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=(0,),
                         repetitions=repetitions, warmup=1, threads=threads, device="cpu")
    tgt = resolve_target(target or "host", targets_dir, plugins)
    runs = []
    with chosen_runner(tgt if fleet is not None else None, fleet=fleet, isolate=isolate,
                           timeout_s=timeout_s, progress=say, registry=reg) as runner:
        for name, llm in llms.items():
            reason = cls().supports(llm, fmt, "cpu")
            if reason:
                raise UserError(f"cannot calibrate {backend} {fmt} on {name}: {reason}")
            say(f"measuring {backend} {fmt} on {name}{runner_phrase(runner, tgt)}")
            request = MeasureRequest.for_generation(cls, llm, fmt, config, timeout_s=timeout_s,
                                                    isolate=isolate, plugins_file=plugins,
                                                    workdir=workdir)
            runs.append(measure(request, runner, registry=reg))
    failed = [r for run in runs for r in run.records if not r.ok]
    if failed:
        r = failed[0]
        raise UserError(f"calibration run {r.backend} {r.format} on {r.model} {r.status}: "
                        f"{r.reason}")
    subject, board, kept = calibration_subject(runs, tgt.id)
    records = [r for run in kept for r in run.records]
    specs = {llm.spec.name: llm.spec for llm in llms.values()}  # records name the spec
    fit_on = tgt if subject == "board" else resolve_target("host", targets_dir, plugins)
    where = {} if board is None else {"where": measured_where(subject, board, tgt)}
    cal = calibrate_llm_host(records, specs.__getitem__, target=fit_on, write=False, **where)
    if board is not None:
        label_calibration(cal, subject, board, tgt, left_out=len(runs) - len(kept))
    return _save_llm_calibration(cal, path), records


def _save_llm_calibration(cal: dict[str, Any], path: str | os.PathLike | None
                          ) -> dict[str, Any]:
    """Write ``cal`` atomically to ``path`` (into it, as the calibration folder names it, when
    it is a folder; default: the user's calibration folder, where predictions look first);
    its ``path`` set."""
    from edgeprof.core.io import out_file, write_json
    from edgeprof.profilers.predict.calibration import user_file

    path = user_file(cal["name"]) if path is None else out_file(path, f"{cal['name']}.json")
    write_json(path, cal)
    cal["path"] = str(path)
    return cal


def calibrate_llm_measurements(measurements: str | os.PathLike, target: Any, backend: str, *,
                               precision: str | None = None, threads: int | None = None,
                               device: str | None = None, out: str | os.PathLike | None = None,
                               plugins=None, targets_dir=None
                               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """An LLM calibration of ``target`` for the generative ``backend`` fitted to the user's
    own llama-bench tests on it (a CSV ``model,test,tokens_per_s[,precision,threads,
    runtime_version,device,source]``, one row per ``pp512``/``tg128`` test), as a fleet
    board's measurements are fitted; written atomically to ``out`` or the user's calibration
    folder, where predictions for that board and processor prefer it. Rows without threads
    ran all the board's big cores (llama-bench's default); without a device, the processor
    the runtime uses there. Returns (calibration, summary)."""
    from edgeprof.optimize.llm import default_device
    from edgeprof.profilers.predict.llm import calibrate_llm_host
    from edgeprof.profilers.predict.llm.inputs import board_of
    from edgeprof.profilers.predict.llm.measured import (bad_line, check_rows,
                                                         read_llm_measurements, records_of)

    tgt = resolve_target(target, targets_dir, plugins)
    if getattr(tgt, "is_host", False):
        raise UserError("--measurements calibrates a board from tests run on it; for this "
                        f"machine run 'edgeprof calibrate --target host --backend {backend}'")
    if device is not None:
        _llm_config(prompt_tokens=1, gen_tokens=1, depths=(0,), device=device)
    reg = get_registry(plugins)
    cls = _generative_backends(backend, reg)[backend]
    if out is not None:  # before the fit: an unusable out is one line, exit 2
        from edgeprof.core.io import prepare_out_file

        prepare_out_file(out)
    path = Path(measurements)
    rows = read_llm_measurements(path, precision=precision, threads=threads, device=device)
    models: dict[str, Any] = {}
    for r in rows:
        if r.spec not in models:
            try:
                models[r.spec] = _llm_model(r.spec)
            except EdgeprofError as e:
                raise bad_line(path, r.line, f"model {r.spec!r} does not load: {e}") from None
    first = models[rows[0].spec]
    default = default_device(first, tgt, {backend: cls}, [])
    devices = sorted({r.device or default for r in rows})
    if len(devices) > 1:
        raise bad_line(path, None, f"rows on {' and '.join(devices)}: a calibration is for one "
                                   "processor of the board; give one file per device")
    dev = devices[0]
    tgt.get_processor(dev)  # a device the board lacks: exit 2
    check_rows(rows, cls, models, path, dev)
    board = board_of(tgt, dev)
    for r in rows:
        r.device = dev
        if board["kind"] != "cpu":
            r.threads = None  # a GPU's kernels: host threads do not apply
        elif r.threads is None:
            r.threads = board["n_ref"]  # llama-bench's default: the physical cores
        elif r.threads > board["cores"]:
            raise bad_line(path, r.line, f"threads {r.threads}: {tgt.id} has {board['cores']} "
                                         f"core{'s' if board['cores'] != 1 else ''} on {dev}")
    records = records_of(rows, backend, models, path)
    specs = {m.spec.name: m.spec for m in models.values()}
    where = f"{tgt.id} (your measurements, {path.name})"
    cal = calibrate_llm_host(records, specs.__getitem__, target=tgt, device=dev, write=False,
                             label=f"measured-{backend}-{dev}", where=where)
    cal["fingerprint"] = {"target": board["base_id"], "device": dev, "source": "measurements",
                          "file": str(path.resolve()), "mode": getattr(tgt, "mode", None)}
    sizes = sorted({m.spec.name for m in models.values()})
    learned = ("the level (one model: the per-layer overhead is not identifiable; rows of "
               "several sizes fit it too)" if len(sizes) == 1 else
               f"the level and the per-layer overhead ({len(sizes)} models)")
    cal["note"] = f"{cal['note']}; learned {learned}"
    cal = _save_llm_calibration(cal, out)
    cv = cal.get("cv") or {}
    summary = {"rows": len(rows), "device": dev, "models": sizes,
               "threads": sorted({r.threads for r in rows if r.threads is not None}),
               "builds": sorted({r.version for r in rows if r.version}),
               "stages": {st: sum(r.stage == st for r in rows) for st in ("prefill", "decode")},
               "learned": learned, "cv": {"n": cv.get("n", 0), "boards": cv.get("boards"),
                                          "intervals": cv.get("intervals")}}
    return cal, summary

"""Evaluating one candidate: what ``optimize`` measures and how.

* the labelled data and the fp32 reference accuracy is judged against
  (:func:`prepare_data`, :func:`reference_logits`);
* the candidate's model variant, compressed and fine-tuned once per variant
  (:func:`variant`);
* the timing, through :func:`edgeprof.profilers.measure.measure.measure` (the one path every
  measurement takes), and the target's latency, memory and energy read from the summary
  (``measured`` on the host; ``predicted`` / ``uncalibrated`` for another target);
* top-1 accuracy and agreement with the reference, measured on the very artifact that was
  timed (:func:`measure_candidate`);
* the longer, interleaved re-timing of finalists (:func:`make_retimer`, the default
  ``retime`` callback of :func:`edgeprof.optimize.loop.optimize`).

Progress goes to the context's ``on_progress`` callback; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgeprof.core.errors import EdgeprofError, UnsupportedError, UserError
from edgeprof.optimize.candidates import (PRUNING_METHODS, Candidate, converts,
                                          reference_backend)
from edgeprof.optimize.report import CandidateResult
from edgeprof.optimize.select import judge
from edgeprof.profilers.report.summary import summarize, target_precision

Progress = Callable[[str], None]

#: short timing runs: optimize measures many configurations
DEFAULT_RUN_OPTIONS: dict[str, Any] = {"runs": 30, "min_time_s": 0.3, "max_time_s": 1.5}
DEFAULT_TRAIN_SECONDS = 8.0
#: fine-tuning after pruning: optimizer steps on the data set's training split (0 = off). The
#: reference gets the same number of plain steps, so every candidate had the same budget.
FINETUNE_STEPS = 200
FINETUNE_MAX_SECONDS = 60.0
CALIBRATION_SAMPLES = 256
#: re-timing: this many interleaved rounds of these (longer) run options per finalist
RETIME_ROUNDS = 2
RETIME_RUN_OPTIONS: dict[str, Any] = {"runs": 100, "min_time_s": 1.0, "max_time_s": 3.0}


@dataclass
class EvalContext:
    """What every candidate's evaluation shares (and the per-run caches)."""

    reg: Any
    handle: Any  # the base model handle (trained weights for built-ins)
    target: Any
    host: Any
    constraints: Any
    dataset: Any
    ref_logits: Any
    ref_accuracy: float
    min_ratio: float
    run_options: dict[str, Any]
    on_progress: Progress
    variants: dict[str, tuple[Any, list[dict[str, Any]]] | Exception] = field(default_factory=dict)
    estimates: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    finetune_steps: int = FINETUNE_STEPS
    prune_source: Any = None  # the module pruning starts from (the reference before its
    # own fine-tuning, so both had the same training budget)
    plugins: Any = None  # the plugins file (isolated workers load it too)


def check_run_options(run_options: dict[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULT_RUN_OPTIONS` updated with the user's, checked against RunConfig."""
    from edgeprof.core.backend import RunConfig, run_config_options
    from edgeprof.profilers.measure.harness import plan_from_config

    user = run_config_options(run_options, reserved=("precision", "batch_size"))
    opts = dict(DEFAULT_RUN_OPTIONS)
    if "max_time_s" in user and "min_time_s" not in user and \
            user["max_time_s"] is not None and user["max_time_s"] < opts.get("min_time_s", 0):
        opts["min_time_s"] = user["max_time_s"]  # --max-time alone caps the default minimum
    opts.update(user)
    try:
        plan_from_config(RunConfig(**{k: v for k, v in opts.items() if k != "options"}))
    except TypeError as e:
        raise UserError(f"run_options: {e}") from None
    return opts


# -------------------------------------------------------------------- data and reference
def with_calibration(handle: Any, dataset: Any) -> Any:
    """The handle with the training split's first samples as its static-int8 calibration
    data (a content-named .npz in the cache, so calibrated conversions are cached too)."""
    import hashlib

    import numpy as np

    from edgeprof.core.cache import cache_dir

    if len(handle.input_specs) != 1:
        return handle
    x = np.ascontiguousarray(dataset.x_train[:CALIBRATION_SAMPLES])
    digest = hashlib.sha256(x.tobytes() + str(x.shape).encode()).hexdigest()[:24]
    path = cache_dir("calibration") / f"{digest}.npz"
    if not path.exists():
        from edgeprof.core.io import write_with

        def save(tmp: Path) -> None:
            with open(tmp, "wb") as f:  # a file object: np.savez would append .npz to a name
                np.savez(f, x=x)

        write_with(path, save)
    return replace(handle, calibration=path)


@dataclass
class Data:
    """The labelled data and the model it is measured on (see :func:`prepare_data`)."""

    handle: Any  # trained weights for built-ins, calibration data attached
    dataset: Any
    training: dict[str, Any] | None
    prune_source: Any  # the reference module before its own fine-tuning, or None


def prepare_data(handle: Any, *, data: Any, train_seconds: float, finetune_steps: int,
                 prunes: bool, on_progress: Progress) -> Data:
    """The labelled data: ``data`` (an .npz) or, for a built-in model, scikit-learn's
    digits with the model trained on them (cached). Where pruned variants will be
    fine-tuned, the reference gets as many plain steps first (its state before them is
    kept as the module pruning starts from)."""
    from edgeprof.optimize import accuracy as acc

    training: dict[str, Any] | None = None
    if data is not None:
        dataset = acc.load_npz_dataset(data, handle)
    elif handle.spec.startswith("builtin:") and handle.format == "torch":
        on_progress(f"training {handle.name} on digits (cached after the first run)")
        trained = acc.train_builtin(handle.name, seconds=train_seconds)
        training = trained.to_dict()
        handle = replace(handle, spec=f"{handle.spec}@digits", _factory=None,
                         _module=trained.module.eval())
        dataset = acc.load_digits_dataset(handle)
    else:
        raise UserError(f"optimize measures accuracy on labelled data: give --data FILE.npz "
                        f"(arrays x: samples shaped like {handle.name}'s input, y: integer "
                        "labels); built-in models use scikit-learn's digits")
    handle = with_calibration(handle, dataset)
    prune_source = None
    if finetune_steps and prunes and handle.format == "torch" and len(dataset.x_train):
        # pruned variants are fine-tuned for finetune_steps; the reference gets as many plain
        # steps first, so accuracy differences are the compression's, not extra training's
        import copy

        prune_source = copy.deepcopy(handle.torch_module())
        on_progress(f"fine-tuning the reference for {finetune_steps} steps (the budget pruned "
                    "variants get)")
        info = acc.fine_tune(handle.torch_module(), dataset, max_steps=finetune_steps,
                             seconds=FINETUNE_MAX_SECONDS)
        training = {**(training or {}), "reference_fine_tune": info}
    return Data(handle, dataset, training, prune_source)


@dataclass
class Reference:
    """The fp32 reference: its logits over the test split and its accuracy."""

    backend: str | None
    logits: Any
    accuracy: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "precision": "fp32", "accuracy": self.accuracy,
                "source": self.source}


def reference_logits(reg: Any, handle: Any, dataset: Any) -> Reference:
    """Torch eager fp32 for a torch model; for a file, its fp32 run on the first available
    backend that loads it. A model that does not return one row of class scores per sample
    is a UserError."""
    from edgeprof.optimize import accuracy as acc

    name = reference_backend(reg, handle)
    if handle.format == "torch":
        logits = acc.predict(acc.torch_run_fn(handle.torch_module()), dataset.x_test)
        source = "torch eager fp32 on the whole test split"
    elif name is not None:
        from edgeprof.core.backend import RunConfig

        config = RunConfig(precision="fp32", batch_size=handle.batch_size)
        logits = predict_with(reg.backend(name), handle, config, dataset.x_test)
        source = f"{name} fp32"
    else:
        raise UserError(f"no available backend loads {handle.format} models at fp32, so there "
                        "is no reference to measure accuracy against")
    accuracy = float((logits.argmax(axis=1) == dataset.y_test).mean())
    if logits.ndim != 2 or logits.shape[0] != len(dataset.y_test):
        raise UserError(f"the model returns shape {tuple(logits.shape)} for "
                        f"{len(dataset.y_test)} samples; optimize needs one row of class scores "
                        "per sample")
    return Reference(name, logits, accuracy, source)


# ---------------------------------------------------------------------- running data
def _feeder(template: Any, specs: Sequence[Any]) -> Callable[[list], Any]:
    """Turn numpy arrays into a runtime's native inputs, mirroring the structure and element
    types of the prepared model's own sample inputs (a dict of arrays, a list of arrays, a
    list of torch tensors). Raises UnsupportedError where that needs facts the prepared
    model does not expose (e.g. the scale of quantized inputs)."""
    import numpy as np

    def like(t: Any, spec: Any) -> Callable[[Any], Any]:
        if type(t).__module__.startswith("torch"):
            import torch

            dtype, device = t.dtype, t.device
            last = t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) \
                and not t.is_contiguous()

            def conv(a):
                x = torch.from_numpy(np.ascontiguousarray(a)).to(device)
                if x.is_floating_point():
                    x = x.to(dtype)
                return x.contiguous(memory_format=torch.channels_last) if last else x
            return conv
        if isinstance(t, np.ndarray):
            if t.dtype.kind in "iu" and not str(spec.dtype).startswith(("int", "uint")):
                raise UnsupportedError("the runtime takes quantized inputs whose scale the "
                                       "prepared model does not expose; accuracy not measured")
            dt = t.dtype
            return lambda a: np.ascontiguousarray(np.asarray(a).astype(dt, copy=False))
        raise UnsupportedError(f"cannot feed data to a runtime whose inputs are "
                               f"{type(t).__name__}; accuracy not measured")

    if isinstance(template, dict):
        keys = list(template)
        convs = [like(template[k], s) for k, s in zip(keys, specs)]
        return lambda arrays: {k: c(a) for k, c, a in zip(keys, convs, arrays)}
    if isinstance(template, (list, tuple)):
        convs = [like(t, s) for t, s in zip(template, specs)]
        return lambda arrays: [c(a) for c, a in zip(convs, arrays)]
    raise UnsupportedError(f"cannot feed data to a runtime whose inputs are "
                           f"{type(template).__name__}; accuracy not measured")


def _outputs_to_numpy(prepared: Any, outputs: Any):
    import numpy as np

    if prepared.to_numpy is not None:
        arrays = prepared.to_numpy(outputs)
    elif isinstance(outputs, (list, tuple)):
        arrays = [np.asarray(o) for o in outputs]
    else:
        arrays = [np.asarray(outputs)]
    return np.asarray(arrays[0], dtype=np.float32)


def predict_prepared(prepared: Any, x: Any, batch_size: int, specs: Sequence[Any]):
    """Logits of a prepared model over ``x``, ``batch_size`` samples per call (its fixed
    input batch); a short last batch is padded with repeats and the padding dropped."""
    import numpy as np

    if prepared.feed is not None:  # the backend's own conversion (quantized inputs: the
        def feed(arrays):          # interpreter's scale and zero point), as profile runs it
            return prepared.feed([np.asarray(a, dtype=np.float32)
                                  if np.asarray(a).dtype.kind == "f" else a for a in arrays])
    else:
        feed = _feeder(prepared.inputs, specs)
    n = len(x)
    outs = []
    for i in range(0, n, batch_size):
        chunk = x[i:i + batch_size]
        k = len(chunk)
        if k < batch_size:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], batch_size - k, axis=0)])
        out = prepared.run(feed([chunk]))
        if prepared.sync is not None:
            prepared.sync()
        outs.append(_outputs_to_numpy(prepared, out).reshape(batch_size, -1)[:k])
    return np.concatenate(outs) if outs else np.zeros((0, 0), dtype=np.float32)


def predict_with(cls: type, handle: Any, config: Any, x: Any):
    """Logits over ``x`` of ``handle`` prepared by backend ``cls`` with ``config`` (the
    prepared model is closed afterwards)."""
    prepared = None
    try:
        prepared = cls().prepare(handle, config, handle.make_inputs(config.seed))
        return predict_prepared(prepared, x, handle.batch_size, handle.input_specs)
    finally:
        if prepared is not None and prepared.close is not None:
            try:
                prepared.close()
            except Exception:  # noqa: BLE001 - closing is cleanup; the logits stand
                pass


# ---------------------------------------------------------------------------- variants
def variant(ctx: EvalContext, cand: Candidate):
    """(handle, compression records) for the candidate's model variant, built once."""
    key = cand.model_key
    if key not in ctx.variants:
        try:
            ctx.variants[key] = build_variant(ctx.handle, cand, ctx.dataset,
                                              ctx.finetune_steps, ctx.prune_source)
        except EdgeprofError as e:
            ctx.variants[key] = e
        except Exception as e:  # a compression method's own failure is that row's reason
            ctx.variants[key] = UnsupportedError(f"{cand.model_key} failed: "
                                                 f"{type(e).__name__}: {e}")
    v = ctx.variants[key]
    if isinstance(v, Exception):
        raise v
    return v


def build_variant(handle: Any, cand: Candidate, dataset: Any = None,
                  finetune_steps: int = FINETUNE_STEPS, source: Any = None):
    """Apply the candidate's compressions to the torch module (fine-tuning pruned ones on
    the training split); (a new handle, the compression records)."""
    if not cand.compression:
        return handle, []
    if handle.format != "torch":
        raise UnsupportedError(f"{'+'.join(cand.compression)} needs a torch model; "
                               f"{handle.spec} is a {handle.format} file")
    import torch

    from edgeprof.optimize.compression import compress

    prunes = any(m in PRUNING_METHODS for m in cand.compression)
    # pruning starts from the reference as it was before its own fine-tuning steps (then gets
    # as many steps itself); a layout change starts from the reference as it is
    module = source if (source is not None and prunes) else handle.torch_module()
    example = tuple(torch.from_numpy(a) for a in handle.make_inputs())
    records = []
    for method in cand.compression:
        opts: dict[str, Any] = {"example_inputs": example}
        if method == "magnitude":
            opts["amount"] = cand.ratio
        elif method == "channels":
            opts["ratio"] = cand.ratio
        module, rec = compress(module, method, **opts)
        records.append(rec.to_dict())
    if finetune_steps and dataset is not None and prunes:
        from edgeprof.optimize.accuracy import fine_tune

        info = fine_tune(module, dataset, max_steps=finetune_steps,
                         seconds=FINETUNE_MAX_SECONDS)
        records[-1].setdefault("notes", []).append(
            f"fine-tuned {info['steps']} steps ({info['seconds']:.1f} s) on the training split, "
            f"pruned weights kept at zero: test accuracy {info['accuracy_before']:.4f} -> "
            f"{info['accuracy_after']:.4f}")
        records[-1]["fine_tune"] = info
    new = replace(handle, spec=f"{handle.spec}+{cand.model_key}",
                  name=f"{handle.name}+{cand.model_key}", _factory=None, _module=module.eval())
    return new, records


def applicable(ctx: EvalContext, cand: Candidate) -> str | None:
    """Why the candidate cannot run here (before anything is built), or None."""
    try:
        cls = ctx.reg.backend(cand.backend)
    except EdgeprofError as e:
        return f"unavailable: {e}"
    a = cls.availability()
    if not a.available:
        return f"unavailable: {a.reason}" + (f"; {a.hint}" if a.hint else "")
    from edgeprof.optimize.router import runs_on_target

    elsewhere = runs_on_target(cls, cand.backend, ctx.target)
    if elsewhere is not None:
        return f"skipped: not ranked for {ctx.target.id}: {elsewhere}"
    caps = cls.capabilities
    if "cpu" not in caps.devices:
        return (f"unavailable: {cand.backend} runs on {', '.join(caps.devices)}, and this "
                "host measures on its CPU")
    if cand.precision not in caps.precisions:
        return (f"unsupported: {cand.backend} cannot run {cand.precision}; it runs "
                f"{', '.join(caps.precisions)}")
    if not cls.accepts_format(ctx.handle.format, cand.precision):
        return f"unsupported: no conversion route takes {ctx.handle.format} models to {cand.backend}"
    if cand.precision not in ctx.target.supported_precisions:
        return (f"skipped: {ctx.target.id} does not run {cand.precision} (it runs "
                f"{', '.join(ctx.target.supported_precisions)}); a runtime would fall back")
    if "channels_last" in cand.compression and converts(cls):
        return (f"unsupported: channels-last is a torch memory format; {cand.backend} converts "
                "the module to its own graph (which it lays out itself), so the layout does "
                "not reach its kernels")
    return None


# --------------------------------------------------------------------------- measuring
def _estimate(ctx: EvalContext, handle: Any, target: Any, precision: str):
    from edgeprof.profilers.estimate.analytic import estimate_model

    key = (handle.spec, target.id, precision)
    if key not in ctx.estimates:
        ctx.estimates[key] = estimate_model(handle, target, precision)
    return ctx.estimates[key]


def _run_config(ctx: EvalContext, cand: Candidate, handle: Any,
                override: dict[str, Any] | None = None) -> Any:
    """The RunConfig of one timing: the context's run options (``override`` on top)."""
    from edgeprof.core.backend import RunConfig

    opts = {**ctx.run_options, **(override or {})}
    harness = {"keep_samples": False, **dict(opts.pop("harness_options", {}) or {})}
    return RunConfig(precision=cand.precision, batch_size=handle.batch_size,
                     harness_options=harness, **opts)


def _measure(ctx: EvalContext, backend: str, handle: Any, config: Any) -> Any:
    """One configuration through ``measure()``, the path every measurement takes."""
    from edgeprof.core.requests import MeasureRequest
    from edgeprof.profilers.measure.measure import measure

    return measure(MeasureRequest.for_handle(backend, handle, config,
                                             plugins_file=ctx.plugins),
                   registry=ctx.reg)


def _take_timing(ctx: EvalContext, res: CandidateResult, handle: Any, bench: Any):
    """Set the result's host timing and the target's latency and energy (read from the
    summary, with their provenance) from one successful run; returns (the estimate used,
    the latency figure)."""
    from edgeprof.core.precision import PRECISIONS

    p = bench.executed_precision if bench.executed_precision in PRECISIONS \
        else res.candidate.precision
    # the target's figure is predict's for the candidate's precision (profile's rule)
    est = _estimate(ctx, handle, ctx.target,
                    target_precision(res.candidate.precision, bench, ctx.target, False))
    host_est = _estimate(ctx, handle, ctx.host, p) if ctx.host is not None else None
    summ = summarize(est, bench, ctx.target, ctx.host, host_est)
    lat = summ.figures["latency_ms"]
    res.host_latency_ms = bench.stats.median_ms
    res.host_ci_ms = (bench.stats.ci_low_ms, bench.stats.ci_high_ms)
    res.latency_ms, res.latency_provenance = lat.value, lat.provenance
    lo, hi = summ.figures.get("latency_low_ms"), summ.figures.get("latency_high_ms")
    res.latency_low_ms = lo.value if lo is not None else None
    res.latency_high_ms = hi.value if hi is not None else None
    res.energy_proxy_j = summ.value("energy_proxy_j")
    return est, lat


def measure_candidate(ctx: EvalContext, cand: Candidate) -> CandidateResult:
    """Benchmark, evaluate and judge one candidate; never raises for the candidate's own
    failure (that becomes the row's status and reason)."""
    why = applicable(ctx, cand)
    if why is not None:
        status, _, reason = why.partition(": ")
        return CandidateResult(cand, status, reason)
    try:
        handle, records = variant(ctx, cand)
    except UserError:
        raise
    except EdgeprofError as e:
        return CandidateResult(cand, "unsupported", str(e))
    res = CandidateResult(cand, "failed", compression=records)
    if records:
        last = records[-1]
        res.params = int(last["parameters_after"])
        res.sparsity = max(float(r.get("sparsity") or 0.0) for r in records)
        res.notes.extend(n for r in records for n in r.get("notes", []))
    else:
        try:
            from edgeprof.optimize.compression import count_parameters

            res.params = count_parameters(handle.torch_module())[0] \
                if handle.format == "torch" else None
        except Exception:  # noqa: BLE001 - a count is a nicety
            res.params = None
    config = _run_config(ctx, cand, handle)
    ctx.on_progress(f"measuring {cand.label}")
    bench = _measure(ctx, cand.backend, handle, config)
    res.status, res.reason = bench.status, bench.reason
    res.warnings = [w.to_dict() for w in bench.warnings]
    res.notes.extend(bench.notes)
    if not bench.ok:
        return res
    res.executed_precision = bench.executed_precision
    res.host_peak_rss_bytes = bench.peak_memory_bytes

    # -- latency, memory and energy on the target ---------------------------------------
    est, lat = _take_timing(ctx, res, handle, bench)
    if lat.value is None:
        res.notes.append(f"target latency unavailable: {lat.reason}")
    res.memory_bytes = float(est.parameter_bytes + est.peak_activation_bytes)

    # -- accuracy and agreement on the artifact that was timed -----------------------------
    _accuracy(ctx, ctx.reg.backend(cand.backend), handle, config, res)
    judge(ctx, res, est)
    return res


def _accuracy(ctx: EvalContext, cls: type, handle: Any, config: Any,
              res: CandidateResult) -> None:
    """Top-1 accuracy over the test split and agreement with the reference's logits; where
    they cannot be measured, the row says why."""
    import numpy as np

    from edgeprof.backends.common import compare_outputs
    from edgeprof.optimize.accuracy import accept

    try:
        logits = predict_with(cls, handle, config, ctx.dataset.x_test)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - the row says why accuracy is missing
        from edgeprof.profilers.measure.harness import one_line

        res.accuracy_reason = f"accuracy not measured: {one_line(e)}"
        res.notes.append(res.accuracy_reason)
        return
    y = ctx.dataset.y_test
    if logits.ndim != 2 or logits.shape[0] != len(y):
        res.accuracy_reason = (f"accuracy not measured: the model returned shape "
                               f"{tuple(logits.shape)} for {len(y)} samples")
        return
    res.accuracy = float(np.mean(logits.argmax(axis=1) == y))
    verdict = accept(res.accuracy, ctx.ref_accuracy, min_ratio=ctx.min_ratio,
                     max_accuracy_drop=ctx.constraints.max_accuracy_drop)
    res.accuracy_drop_pp = verdict.drop_pp
    res.accuracy_ratio = verdict.ratio
    if ctx.ref_logits is not None and ctx.ref_logits.shape == logits.shape:
        a = compare_outputs(ctx.ref_logits, logits, res.executed_precision or "fp32").to_dict()
        res.agreement = {**{k: a[k] for k in ("top1_agreement", "max_abs_error",
                                              "cosine_similarity", "relative_error")},
                         "reference": "fp32 torch eager" if ctx.handle.format == "torch"
                         else "fp32 reference backend"}


# -------------------------------------------------------------------------- re-timing
def make_retimer(ctx: EvalContext) -> Callable[[list[CandidateResult]], list[CandidateResult]]:
    """The default ``retime`` callback: time the finalists again, longer and interleaved
    (``RETIME_ROUNDS`` rounds of ``RETIME_RUN_OPTIONS``), keep each one's lowest round
    median (the least disturbed), and re-judge them in place; returns the finalists."""

    def retime(finalists: list[CandidateResult]) -> list[CandidateResult]:
        best: dict[int, Any] = {}
        for _ in range(RETIME_ROUNDS):
            for r in finalists:
                handle, _records = variant(ctx, r.candidate)
                config = _run_config(ctx, r.candidate, handle, RETIME_RUN_OPTIONS)
                ctx.on_progress(f"re-timing {r.candidate.label}")
                bench = _measure(ctx, r.candidate.backend, handle, config)
                if bench.ok and (id(r) not in best or
                                 bench.stats.median_ms < best[id(r)][1].stats.median_ms):
                    best[id(r)] = (handle, bench)
        for r in finalists:
            if id(r) not in best:
                continue
            handle, bench = best[id(r)]
            first = r.latency_ms
            est, _lat = _take_timing(ctx, r, handle, bench)
            r.notes.append(f"re-timed with {RETIME_ROUNDS} interleaved rounds of >= "
                           f"{RETIME_RUN_OPTIONS['min_time_s']} s (lowest round median kept): "
                           f"{first:.4g} -> {r.latency_ms:.4g} ms")
            judge(ctx, r, est)
        return finalists

    return retime


class quiet_root_logger:
    """Runtimes' quantizers log advice through the root logger (``WARNING:root:...``); it
    would interleave with the table, so the root logger is raised to ERROR while measuring
    and restored afterwards."""

    def __enter__(self):
        import logging

        self._root = logging.getLogger()
        self._level = self._root.level
        self._root.setLevel(max(self._level, logging.ERROR))
        return self

    def __exit__(self, *exc):
        self._root.setLevel(self._level)
        return False


__all__ = ["DEFAULT_RUN_OPTIONS", "EvalContext", "build_variant",
           "check_run_options", "make_retimer", "measure_candidate", "predict_prepared",
           "prepare_data", "reference_logits", "variant", "with_calibration"]

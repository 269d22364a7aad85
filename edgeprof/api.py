"""The Python API: ``profile``, ``estimate``, ``benchmark``, ``summarize`` and the listings.

The CLI is a thin layer over these functions; other toolchains call them directly and read
the :class:`ProfileReport` (or its JSON, ``profile.json``).
"""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof._version import __version__
from edgeprof.core.backend import (Backend, RunConfig, check_backend_options, option_specs,
                                   run_config_options)
from edgeprof.core.errors import EdgeprofError, InputSpecError, OutputError, UserError
from edgeprof.core.models import ModelHandle, check_batch_size, resolve_model
from edgeprof.core.plugins import Registry, get_registry
from edgeprof.core.precision import get_precision
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult, Estimate, Summary, WarningRecord, clean
from edgeprof.profilers.measure.environment import host_info as _host_info
from edgeprof.profilers.measure.measure import measure

SCHEMA_VERSION = "1.0"
Progress = Callable[[str], None]


# ------------------------------------------------------------------------- listings
def list_backends(plugins: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Every registered backend with its availability, reason, install hint and capabilities."""
    reg = get_registry(plugins)
    rows = []
    for name, entry in reg.backends.items():
        cls = entry.cls
        try:
            a = cls.availability()
            available, reason, hint = a.available, a.reason, a.hint
        except Exception as e:  # an availability check must never take the listing down
            available, reason, hint = False, f"availability check failed: {e}", ""
        caps = cls.capabilities
        workload = getattr(cls, "workload", "tensor")
        generative = workload == "generate"  # a GenerativeBackend: its formats, its devices
        rows.append({"name": name, "available": available, "reason": reason, "hint": hint,
                     "workload": workload,
                     "precisions": list(cls.formats if generative else caps.precisions),
                     "devices": list(cls.devices if generative else caps.devices),
                     "model_formats": list(caps.model_formats), "plugin": entry.plugin,
                     "description": getattr(cls, "description", ""),
                     "options": [{"name": n, "type": t, "default": d}
                                 for n, t, d in option_specs(cls.Options)]})
    return rows


def _target_registry(targets_dir=None, plugins=None):
    from edgeprof.targets import get_target_registry

    return get_target_registry(targets_dir, plugins)


def list_targets(targets_dir: str | os.PathLike | None = None,
                 plugins: str | os.PathLike | None = None) -> list[Any]:
    """The descriptor targets (validated), without detecting ``host``."""
    return _target_registry(targets_dir, plugins).all()


def _target(target: Any, targets_dir=None, plugins=None, recalibrate=False):
    if isinstance(target, str):
        return _target_registry(targets_dir, plugins).get(target, recalibrate=recalibrate)
    return target


# ---------------------------------------------------------------------- three verbs
def estimate(model: Any, target: Any = "host", precision: str = "fp32", *,
             batch_size: int | None = None, input_shapes: Sequence[Sequence[int]] | None = None,
             input_dtypes: Sequence[str] | None = None, plugins=None,
             targets_dir=None) -> Estimate:
    """Analytic per-layer estimate of ``model`` on ``target`` at ``precision``."""
    from edgeprof.profilers.estimate.analytic import estimate_model

    get_precision(precision)
    reg = get_registry(plugins)
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           batch_size=batch_size, registry=reg)
    return estimate_model(handle, _target(target, targets_dir, plugins), precision, registry=reg)


def benchmark(model: Any, backend: str = "torch_eager", precision: str = "fp32", *,
              config: RunConfig | None = None, batch_size: int | None = None,
              input_shapes=None, input_dtypes=None, plugins=None) -> BenchmarkResult:
    """Measure ``model`` on ``backend`` on this host (latency percentiles, memory ...).

    Isolated in a worker process when ``config.isolate`` or ``config.timeout_s`` is set."""
    reg = get_registry(plugins)
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           batch_size=batch_size, registry=reg)
    config = config or RunConfig(precision=precision)
    config.precision = precision
    config.batch_size = handle.batch_size
    return measure(MeasureRequest.for_handle(backend, handle, config, plugins_file=plugins),
                   registry=reg)


def summarize(estimate: Estimate, benchmark: BenchmarkResult | None, target: Any, *,
              host: Any = None, host_estimate: Estimate | None = None, force: bool = False,
              **options) -> Summary:
    """The estimate and the measurement together against ``target``. An estimate and a
    benchmark of different models, precisions or batch sizes are refused (UserError) unless
    ``force=True``."""
    from edgeprof.profilers.report.summary import summarize as _summarize

    return _summarize(estimate, benchmark, _target(target), host=host,
                      host_estimate=host_estimate, force=force, **options)


# --------------------------------------------------------------------------- predict
def on_device(target: Any, device: str | None) -> Any:
    """``target`` as seen from processor ``device`` (a Jetson's CPU cluster, say): its peaks,
    bandwidth and cores. The processor the target's kind implies is the target itself."""
    if device is None or getattr(target, "is_host", False):
        return target
    proc = target.get_processor(device)  # UnknownNameError (exit 2) for a device it lacks
    if device == target.implied_device:
        return target
    import dataclasses

    changes: dict[str, Any] = {"peak_compute": dict(proc.peak_compute), "cores": proc.cores,
                               "kind": "edge_cpu" if proc.kind == "cpu" else target.kind}
    if proc.bandwidth is not None:
        changes["bandwidth"] = proc.bandwidth
    if proc.frequency is not None:
        changes["frequency"] = proc.frequency
    fields = {f.name for f in dataclasses.fields(target)}
    if "big_cores_figure" in fields:
        changes["big_cores_figure"] = proc.cores
    return dataclasses.replace(target, **{k: v for k, v in changes.items() if k in fields})


class Predictor:
    """Predictions for one (target, backend, precision, threads, device, calibration), many
    models: the target, the calibration and the registry are looked up once, so screening a
    search space costs one estimate and one sum per model (``predict_many``)."""

    def __init__(self, target: Any, backend: str, precision: str = "fp32", *,
                 threads: int | None = None, device: str | None = None,
                 calibration: str | os.PathLike | Any = None, plugins=None, targets_dir=None,
                 runtime_version: str | None = None):
        from edgeprof.profilers.predict.calibration import load_calibration
        from edgeprof.profilers.predict.predictor import check_threads

        get_precision(precision)
        self.registry = get_registry(plugins)
        from edgeprof.profilers.predict.threads import known_families

        if backend not in self.registry.backends and backend not in known_families():
            self.registry.backend(backend)  # UnknownNameError (exit 2) naming the backends
        self.target = on_device(_target(target, targets_dir, plugins), device)
        check_threads(threads, self.target)
        self.backend, self.precision, self.threads = backend, precision, threads
        self.runtime_version = runtime_version  # the board's build: warned about if it differs
        self.calibration = (load_calibration(calibration)
                            if isinstance(calibration, (str, os.PathLike)) else calibration)

    def estimate(self, model: Any, *, input_shapes=None, input_dtypes=None) -> Estimate:
        from edgeprof.profilers.estimate.analytic import estimate_model

        handle = model if isinstance(model, ModelHandle) else resolve_model(
            model, input_shapes=input_shapes, input_dtypes=input_dtypes, registry=self.registry)
        return estimate_model(handle, self.target, self.precision, registry=self.registry)

    def __call__(self, model: Any, *, input_shapes=None, input_dtypes=None) -> Any:
        from edgeprof.profilers.predict import predict_latency

        est = self.estimate(model, input_shapes=input_shapes, input_dtypes=input_dtypes)
        pred = predict_latency(est, self.target, self.backend, self.precision,
                               threads=self.threads, calibration=self.calibration,
                               runtime_version=self.runtime_version)
        pred.model = est.model
        return pred


def predict(model: Any, target: Any, backend: str, precision: str = "fp32", *,
            threads: int | None = None, device: str | None = None,
            calibration: str | os.PathLike | Any = None,
            input_shapes: Sequence[Sequence[int]] | None = None,
            input_dtypes: Sequence[str] | None = None, plugins=None, targets_dir=None,
            runtime_version: str | None = None) -> Any:
    """Predicted latency of ``model`` on ``target`` with runtime ``backend`` at ``precision``
    on ``threads`` of the board's cores, without building or running anything: a
    :class:`~edgeprof.profilers.predict.Prediction` (``value_ms``, ``low_ms``, ``high_ms``,
    ``provenance``, ``calibration``, ``method``, ``notes``). ``runtime_version``: the board's
    runtime build; a calibration fitted with another is used with a warning naming both."""
    return Predictor(target, backend, precision, threads=threads, device=device,
                     calibration=calibration, plugins=plugins, targets_dir=targets_dir,
                     runtime_version=runtime_version)(
        model, input_shapes=input_shapes, input_dtypes=input_dtypes)


def predict_many(models: Any, target: Any, backend: str, precision: str = "fp32", *,
                 threads: int | None = None, device: str | None = None,
                 calibration: str | os.PathLike | Any = None,
                 input_shapes: Sequence[Sequence[int]] | None = None,
                 input_dtypes: Sequence[str] | None = None, plugins=None,
                 targets_dir=None) -> list[Any]:
    """:func:`predict` over an iterable of models (the same figures as one by one)."""
    pred = Predictor(target, backend, precision, threads=threads, device=device,
                     calibration=calibration, plugins=plugins, targets_dir=targets_dir)
    return [pred(m, input_shapes=input_shapes, input_dtypes=input_dtypes) for m in models]


def calibrate_measurements(measurements: str | os.PathLike, target: Any, backend: str, *,
                           precision: str | None = None, threads: int | None = None,
                           out: str | os.PathLike | None = None, plugins=None,
                           targets_dir=None, progress: Progress | None = None):
    """A calibration of ``target`` for ``backend`` fitted to the user's own timings (a CSV
    ``model,latency_ms[,input_shape,precision,threads,runtime,source]``), refining the
    shipped one; written to ``out`` or the user's calibration folder (preferred there).
    Returns (calibration, path, summary)."""
    from edgeprof.profilers.predict.measured import calibrate_from_measurements

    tgt = _target(target, targets_dir, plugins)
    if getattr(tgt, "is_host", False):
        raise UserError("--measurements calibrates a board from timings taken on it; for this "
                        "machine run 'edgeprof calibrate --target host --backend B'")
    return calibrate_from_measurements(measurements, tgt, backend, precision=precision,
                                       threads=threads, out=out,
                                       registry=get_registry(plugins), progress=progress)


# --------------------------------------------------------------------------- profile
@dataclass
class ProfileRun:
    """One backend x precision of a profile: the measurement (``benchmark``, the
    :data:`~edgeprof.core.results.RunRecord` that ``measure()`` returned) and its summary for
    the target."""

    backend: str
    requested_precision: str
    benchmark: BenchmarkResult
    summary: Summary | None = None
    host_summary: Summary | None = None
    explicit: bool = True  # named by the user (counts for the exit status)
    operators: Any = None  # DataFrame: the runtime's per-operator profile joined to the estimate
    trace_file: Path | None = None  # Chrome trace written by the runtime's profiler

    @property
    def status(self) -> str:
        return self.benchmark.status

    @property
    def executed_precision(self) -> str | None:
        """The precision that actually ran (``to_dict()``'s ``executed_precision``)."""
        return self.benchmark.executed_precision

    def to_dict(self) -> dict[str, Any]:
        b = self.benchmark
        return clean({
            "backend": self.backend, "requested_precision": self.requested_precision,
            "executed_precision": b.executed_precision, "status": b.status, "reason": b.reason,
            "provenance": {"benchmark": "measured", "target_figures": (
                self.summary.figures["latency_ms"].provenance if self.summary else None),
                "measured_on": _measured_on(b), "board": (b.extra or {}).get("fleet")},
            "benchmark": b.to_dict(),
            "summary": self.summary.to_dict() if self.summary else None,
            "host_summary": self.host_summary.to_dict() if self.host_summary else None,
            "operators": (self.operators.to_dict(orient="records")
                          if self.operators is not None else None),
        })


@dataclass
class ProfileReport:
    """Everything ``edgeprof profile`` produces; ``to_dict()`` is profile.json."""

    model: ModelHandle
    target: Any
    host: dict[str, Any]
    estimate: Estimate
    runs: list[ProfileRun]
    request: dict[str, Any]
    warnings: list[WarningRecord] = field(default_factory=list)
    host_target: Any = None
    created_utc: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc)
                             .isoformat(timespec="seconds"))
    #: the temporary folder holding the runs' Chrome traces (``trace=True``) until ``save``
    #: copies them; removed when the report is dropped (or at exit)
    trace_folder: Any = field(default=None, repr=False, compare=False)

    @property
    def exit_code(self) -> int:
        """0 complete; 3 partial: a run the user named produced no measurement, or any run
        that should have worked failed (unavailable/unsupported rows under ``all`` don't
        count)."""
        return 3 if any((r.explicit and r.status != "ok") or r.status == "failed"
                        for r in self.runs) else 0

    def to_dict(self) -> dict[str, Any]:
        warnings = list(self.warnings)
        for r in self.runs:
            warnings.extend(r.benchmark.warnings)
            if r.summary:
                warnings.extend(r.summary.warnings)
        return clean({
            "schema_version": SCHEMA_VERSION,
            "edgeprof_version": __version__,
            "created_utc": self.created_utc,
            "host": self.host,
            "target": self.target.to_dict(),
            "model": self.model.to_dict(),
            "request": self.request,
            "estimate": self.estimate.to_dict(),
            "runs": [r.to_dict() for r in self.runs],
            "warnings": [w.to_dict() for w in warnings],
        })

    def save(self, out_dir: str | os.PathLike, *, stream_rate_fps: float | None = None) -> list[Path]:
        """Write every artifact into ``out_dir``; files appear only when all are written."""
        from edgeprof.core.io import publish_staged
        from edgeprof.profilers.report.artifacts import write_artifacts

        return publish_staged(out_dir, lambda stage: write_artifacts(
            self, stage, stream_rate_fps=stream_rate_fps))


def split_names(value: Sequence[str] | str, flag: str) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``; an empty name (``"a,,b"``, ``"a,"``) is a user error."""
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip() if isinstance(n, str) else n for n in names]
    if isinstance(value, str) and not value.strip():
        return []
    if any(not n for n in names):
        shown = value if isinstance(value, str) else ",".join(map(str, value))
        raise UserError(f"{flag} '{shown}' has an empty name; separate names with single commas")
    return names


def _check_out(out: str | os.PathLike | None) -> None:
    """Refuse an unusable --out before anything is measured (OutputError, exit 2)."""
    if out is not None:
        from edgeprof.core.io import prepare_out_dir

        prepare_out_dir(out)


def _save(report: Any, save: Callable[[], Any]) -> None:
    """Write the artifacts; when that fails, the error carries the report (``.result``)."""
    try:
        save()
    except OutputError as e:
        e.result = report
        raise


def resolve_backends(names: Sequence[str] | str, reg: Registry) -> list[tuple[str, bool]]:
    """``["all"]`` -> every registered backend (not explicit); otherwise validate names."""
    names = split_names(names, "--backend")
    if not names:
        raise UserError("no backend given; use --backend NAME, a comma-separated list or 'all'")
    if list(names) == ["all"]:
        return [(n, False) for n in reg.backends_for("tensor")]
    out = []
    for n in names:
        reg.backend(n)  # raises UnknownNameError with the closest name
        out.append((n, True))
    return out


def profile(model: Any, target: Any = "host", backends: Sequence[str] | str = ("torch_eager",),
            precisions: Sequence[str] | str = ("fp32",), *, batch_size: int | None = None,
            input_shapes: Sequence[Sequence[int]] | None = None,
            input_dtypes: Sequence[str] | None = None, threads: int | None = None,
            stream_rate_fps: float | None = None, latency_budget_ms: float | None = None,
            run_options: dict[str, Any] | None = None, out: str | os.PathLike | None = None,
            plugins: str | os.PathLike | None = None, targets_dir: str | os.PathLike | None = None,
            recalibrate: bool = False, trace: bool = False,
            calibration_data: str | os.PathLike | None = None,
            progress: Progress | None = None, fleet: Any = None,
            calibration: str | os.PathLike | None = None) -> ProfileReport:
    """Estimate ``model`` on ``target``, benchmark it on each backend x precision on this
    host, and summarize each against the target. Writes artifacts to ``out`` when given.

    ``fleet``: a Dask scheduler address (or ``FleetSpec``): measure on a board of ``target``
    instead (``edgeprof.profilers.measure.fleet``); the board's figures are then measured.

    ``threads``: the threads of the runs here and, on a board target, of its predicted
    figures (default: the backend's own here, all the board's big cores there).
    ``calibration``: a calibration file for the board's predictions (``edgeprof calibrate
    --measurements``), used instead of the search."""
    say = progress or (lambda msg: None)
    reg = get_registry(plugins)
    precisions = split_names(precisions, "--precision")
    if not precisions:
        raise UserError("no precision given; use --precision fp32 (or a comma-separated list)")
    for p in precisions:
        get_precision(p)
    if batch_size is not None:
        check_batch_size(batch_size)
    if threads is not None and (not isinstance(threads, int) or threads <= 0):
        raise InputSpecError(f"--threads must be a positive integer, got {threads!r}")
    if stream_rate_fps is not None and not stream_rate_fps > 0:
        raise UserError(f"--stream-rate must be a positive number of frames per second, "
                        f"got {stream_rate_fps!r}")
    if latency_budget_ms is not None and not latency_budget_ms > 0:
        raise UserError(f"--latency-budget-ms must be a positive number, got {latency_budget_ms!r}")
    run_options = run_config_options(run_options)  # a wrong name: one-line ConfigError
    chosen = resolve_backends(backends, reg)
    check_backend_options(run_options.get("options") or {},
                          [reg.backend(n) for n, _ in chosen])  # exit 2 before any work
    treg = _target_registry(targets_dir, plugins)
    tgt = target if not isinstance(target, str) else treg.get(target, recalibrate=recalibrate)
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           batch_size=batch_size, registry=reg, calibration=calibration_data)
    _check_out(out)

    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.report.summary import summarize as _summarize

    say(f"estimating {handle.name} on {tgt.id}")
    estimates: dict[tuple[str, str], Estimate] = {}

    def est(t, precision: str) -> Estimate:
        key = (t.id, precision)
        if key not in estimates:
            estimates[key] = estimate_model(handle, t, precision, registry=reg)
        return estimates[key]

    primary = est(tgt, precisions[0])
    warnings: list[WarningRecord] = []
    host_t = tgt if getattr(tgt, "is_host", False) else None
    if host_t is None:
        say("calibrating host (cached after the first run)")
        try:
            host_t = treg.get("host", recalibrate=recalibrate)
        except EdgeprofError as e:
            warnings.append(WarningRecord("host_uncalibrated", f"host calibration failed: {e}; "
                                          f"target latency cannot be estimated"))
    options = dict(stream_rate_fps=stream_rate_fps, latency_budget_ms=latency_budget_ms)
    if not getattr(tgt, "is_host", False):
        from edgeprof.profilers.predict.calibration import load_calibration
        from edgeprof.profilers.predict.predictor import check_threads

        check_threads(threads, tgt)  # a thread count the board does not have: exit 2
        options.update(threads=threads, calibration=load_calibration(calibration)
                       if calibration is not None else None)
    trace_folder = tempfile.TemporaryDirectory(prefix="edgeprof-trace-") if trace else None
    trace_dir = Path(trace_folder.name) if trace_folder is not None else None
    runs: list[ProfileRun] = []
    from edgeprof.profilers.measure.fleet import board_target, fleet_runner

    runner = fleet_runner(fleet, tgt)  # None: measured here
    for name, explicit in chosen:
        cls = reg.backend(name)
        for precision in precisions:
            say(f"benchmarking {name} {precision}")
            config = RunConfig(precision=precision, batch_size=handle.batch_size,
                               threads=threads, **run_options)
            result = measure(MeasureRequest.for_handle(name, handle, config,
                                                       plugins_file=plugins), runner,
                             registry=reg)
            record = ProfileRun(name, precision, result, explicit=explicit)
            board_t = board_target(result, tgt)  # measured on a board of the target itself
            if result.ok:
                p = result.executed_precision if result.executed_precision in _known_precisions() \
                    else precision
                host_est = est(host_t, p) if host_t is not None else None
                record.summary = _summarize(est(tgt, p), result, board_t or tgt, host_t, host_est,
                                            **options)
                if host_t is not None and host_t is not tgt and board_t is None:
                    record.host_summary = _summarize(
                        host_est, result, host_t, stream_rate_fps=stream_rate_fps,
                        latency_budget_ms=latency_budget_ms)
                if trace and runner is None:
                    say(f"profiling operators of {name} {precision}")
                    _trace_run(record, cls(), handle, config, est(tgt, p), trace_dir, warnings)
            else:
                record.summary = _summarize(est(tgt, precision), result, tgt, **options)
            runs.append(record)
    report = ProfileReport(model=handle, target=tgt, host=_host_info(host_t), estimate=primary,
                           runs=runs, warnings=warnings, host_target=host_t,
                           trace_folder=trace_folder, request={
                               "model": str(model) if isinstance(model, str) else handle.spec,
                               "target": tgt.id, "backends": [n for n, _ in chosen],
                               "precisions": list(precisions), "batch_size": handle.batch_size,
                               "threads": threads, "stream_rate_fps": stream_rate_fps,
                               "latency_budget_ms": latency_budget_ms,
                               "run_options": dict(run_options),
                               "fleet": runner.spec.url if runner is not None else None})
    if runner is not None:
        runner.close()
    if out is not None:
        say(f"writing artifacts to {out}")
        _save(report, lambda: report.save(out, stream_rate_fps=stream_rate_fps))
    return report


def _trace_run(record: ProfileRun, backend: Backend, handle: ModelHandle, config: RunConfig,
               estimate_: Estimate, trace_dir: Path | None, warnings: list) -> None:
    """Per-operator profile from the runtime's own profiler, joined to the estimate's rows."""

    prepared = None
    path = trace_dir / f"trace_{record.backend}_{record.requested_precision}.json" if trace_dir \
        else None
    try:
        prepared = backend.prepare(handle, config, handle.make_inputs(config.seed))
        frame = backend.operator_profile(prepared, runs=10, trace_path=str(path) if path else None)
    except Exception as e:  # a profiler's failure loses the trace, not the run
        warnings.append(WarningRecord("operator_profile_failed",
                                      f"{record.backend} {record.requested_precision}: "
                                      f"{type(e).__name__}: {e}"))
        return
    finally:
        if prepared is not None and prepared.close is not None:
            prepared.close()
    if frame is None:
        record.benchmark.notes.append(f"{record.backend} offers no per-operator profile")
        return
    est = estimate_.to_frame()[["layer", "op_type", "macs", "parameter_bytes", "activation_bytes",
                                "roofline_latency_ms", "bound"]].rename(
        columns={"op_type": "estimate_op_type", "roofline_latency_ms": "estimate_roofline_ms",
                 "bound": "estimate_bound"})
    if "layer" not in frame.columns:
        frame["layer"] = None
    record.operators = frame.merge(est, on="layer", how="left")
    if path is not None and path.exists():
        record.trace_file = path


def _measured_on(record: BenchmarkResult) -> str:
    from edgeprof.profilers.measure.fleet import measured_on

    return measured_on(record) or "this host"


def _known_precisions():
    from edgeprof.core.precision import PRECISIONS

    return PRECISIONS


# ------------------------------------------------------------------------ batch sizes
@dataclass
class BatchReport:
    """Latency per batch measured on this host, and the largest batch that fits the target."""

    model: ModelHandle
    target: Any
    backend: str
    precision: str
    frame: Any  # DataFrame, edgeprof.profilers.measure.batching.BATCH_COLUMNS
    choice: Any  # BatchChoice (memory of the target; None with the reason in notes)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return clean({
            "schema_version": SCHEMA_VERSION, "kind": "batch_sizes", "model": self.model.to_dict(),
            "target": self.target.id, "backend": self.backend, "precision": self.precision,
            "rows": self.frame.to_dict(orient="records"), "stopped": dict(self.frame.attrs),
            "target_choice": self.choice.to_dict() if self.choice else None,
            "notes": list(self.notes)})

    def save(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write batch_sizes.csv and .json into ``out_dir`` as a whole (core.io)."""
        from edgeprof.core.io import publish_staged, write_csv, write_json

        def write(stage: Path) -> list[str]:
            write_csv(stage / "batch_sizes.csv", self.frame)
            write_json(stage / "batch_sizes.json", self.to_dict())
            return ["batch_sizes.csv", "batch_sizes.json"]

        return publish_staged(out_dir, write)


def batch_sizes(model: Any, batch_sizes: Sequence[int], *, target: Any = "host",
                backend: str = "torch_eager", precision: str = "fp32",
                latency_budget_ms: float | None = None,
                run_options: dict[str, Any] | None = None, input_shapes=None, input_dtypes=None,
                plugins=None, targets_dir=None, out=None) -> BatchReport:
    """Measure latency per batch, per sample and throughput for each batch size on this
    host (stopping cleanly at out-of-memory), and pick the largest batch whose estimated
    weights + peak activations fit ``target``'s memory (and the latency budget)."""
    from edgeprof.core.errors import ConstraintError
    from edgeprof.profilers.measure.batching import (benchmark_batch_sizes, check_batch_sizes,
                                             check_budget, find_optimal_batch_size)

    get_precision(precision)
    run_options = run_config_options(run_options, reserved=("precision", "batch_size"))
    sizes = check_batch_sizes(batch_sizes)
    check_budget(latency_budget_ms)
    reg = get_registry(plugins)
    tgt = _target(target, targets_dir, plugins)
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           registry=reg)
    cls = reg.backend(backend)
    cls.ensure_available()
    _check_out(out)
    config = RunConfig(precision=precision, **run_options)
    frame = benchmark_batch_sizes(cls, handle, sizes, config, latency_budget_ms=latency_budget_ms,
                                  plugins_file=plugins, registry=reg)
    notes: list[str] = []
    try:
        choice = find_optimal_batch_size(None, handle, tgt, precision=precision,
                                         max_batch_size=max(1024, max(sizes)))
    except ConstraintError as e:
        choice = None
        notes.append(str(e))
    report = BatchReport(handle, tgt, backend, precision, frame, choice, notes)
    if out is not None:
        _save(report, lambda: report.save(out))
    return report


# ------------------------------------------------------------------ generative models
#: the format each backend profiles when no --precision is given (the first it makes)
DEFAULT_LLM_FORMATS = ("q4_k_m", "int4")


def _llm_model(model: Any) -> Any:
    """An :class:`~edgeprof.core.llm.LLMModel` from ``llm:NAME``, a .gguf or an HF folder."""
    from edgeprof.core.llm import LLMModel

    if isinstance(model, LLMModel):
        return model
    from edgeprof.zoo.llm import resolve_llm

    return resolve_llm(str(model))


def _llm_config(*, prompt_tokens: int, gen_tokens: int, depths: Sequence[int] | int,
                repetitions: int = 5, warmup: int = 1, threads: int | None = None,
                device: str = "cpu", seed: int = 0) -> Any:
    from edgeprof.core.llm import GenerationConfig

    depths = (depths,) if isinstance(depths, int) else tuple(depths or (0,))
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads <= 0):
        raise UserError(f"--threads must be a positive integer, got {threads!r}")
    if device not in ("cpu", "cuda"):
        raise UserError(f"--device must be cpu or cuda for a generative model, got '{device}'")
    if warmup < 0:
        raise UserError(f"warm-up runs must be 0 or more, got {warmup}")
    return GenerationConfig(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=depths,
                            repetitions=repetitions, warmup=warmup, threads=threads,
                            device=device, seed=seed)


def _generative_backends(names: Sequence[str] | str | None, reg: Registry) -> dict[str, type]:
    """Name -> class of the generative backends named (``None``/``all``: every one)."""
    known = reg.backends_for("generate")
    given = split_names(names, "--backend") if names is not None else ["all"]
    if not given or given == ["all"]:
        if not known:
            raise UserError("no generative backend is registered; 'edgeprof backends' lists "
                            "them (install llama-cpp-python or onnxruntime-genai)")
        return {n: e.cls for n, e in known.items()}
    out = {}
    for n in given:
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


def _llm_estimates(model: Any, pairs: Sequence[tuple[str, str]], config: Any, tgt: Any,
                   device: str, notes: list[str], threads: int | None = None,
                   build: str | None = None, classes: dict[str, type] | None = None,
                   ) -> tuple[list[dict], list[dict]]:
    """Estimates (per format and depth, with the fit on ``tgt``) and, for a target,
    predictions (per backend, format and depth). Analytic: nothing is built or run."""
    from edgeprof.profilers.estimate.llm import estimate_llm as _estimate

    from edgeprof.profilers.predict.llm import predict_llm as predict

    estimates, predictions = [], []
    for backend, fmt in pairs:
        for depth in config.depths:  # a plugin's backend: the format's generic accounting
            est = _estimate(model.spec, fmt, prompt_tokens=config.prompt_tokens,
                            gen_tokens=config.gen_tokens, depth=depth, target=tgt,
                            device=device,
                            backend=(classes or {}).get(backend, backend))
            row = {**est.to_dict(), "backend": backend, "format": fmt, "depth": depth}
            if tgt is not None:
                row["fit"] = _fit(row)
            estimates.append(row)
            if tgt is not None:
                try:
                    pred = predict(est, tgt, device=device, runtime=backend,
                                   threads=threads, build=build)
                except UserError:
                    raise
                except EdgeprofError as e:
                    notes.append(f"{backend} {fmt}: no prediction for {tgt.id}: {e}")
                    continue
                predictions.append({**dict(pred), "backend": backend, "format": fmt,
                                    "depth": depth, "target": tgt.id, "device": device})
    return estimates, predictions


def _llm_target(target: Any, targets_dir=None, plugins=None) -> Any:
    if target is None:
        return None
    return _target(target, targets_dir, plugins)


def estimate_llm(model: Any, target: Any = None, *, backends: Sequence[str] | str | None =
                 "llama_cpp", precisions: Sequence[str] | str | None = None,
                 prompt_tokens: int = 512, gen_tokens: int = 128,
                 depths: Sequence[int] | int = (0,), device: str = "cpu", plugins=None,
                 targets_dir=None, threads: int | None = None,
                 build: str | None = None) -> dict[str, Any]:
    """A generative model's estimate and, for a ``target``, its prediction (with interval)
    and fit verdict, per backend and format: no build, no run, no runtime imported. Returns
    the LLM payload (``edgeprof.profilers.report.llm_outputs``). ``threads``: the board's
    (default: all its big cores); ``build``: the runtime build to predict for (default: the
    one installed here, else the newest the calibration knows)."""
    from edgeprof.profilers.measure.generate import check_context
    from edgeprof.profilers.report.llm_outputs import build_payload

    config = _llm_config(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=depths,
                         device=device)
    reg = get_registry(plugins)
    chosen = _generative_backends(backends, reg)
    tgt = _llm_target(target, targets_dir, plugins)
    llm = _llm_model(model)
    check_context(llm, config)
    pairs, notes = llm_plan(llm, chosen, precisions, device, runnable=False)
    estimates, predictions = _llm_estimates(llm, pairs, config, tgt, device, notes,
                                            threads=threads, build=build, classes=chosen)
    return build_payload(llm, target=tgt, device=device, config=config,
                         parameters=_llm_parameters(llm), estimates=estimates,
                         predictions=predictions, notes=[llm.note, *notes], command="estimate")


def _llm_parameters(model: Any) -> int | None:
    from edgeprof.profilers.estimate.llm import parameter_count

    return int(parameter_count(model.spec))


def profile_llm(model: Any, *, backends: Sequence[str] | str | None = "llama_cpp",
                precisions: Sequence[str] | str | None = None, prompt_tokens: int = 512,
                gen_tokens: int = 128, depths: Sequence[int] | int = (0,),
                repetitions: int = 5, warmup: int = 1, threads: int | None = None,
                target: Any = None, device: str = "cpu", out: str | os.PathLike | None = None,
                plugins=None, targets_dir=None, workdir: str | os.PathLike | None = None,
                progress: Progress | None = None, isolate: bool = False,
                timeout_s: float | None = None, fleet: Any = None) -> dict[str, Any]:
    """Measure a generative model per backend and format (llama-bench's pp/tg, TTFT, TPOT,
    load time, peak RSS), beside its estimate and, with a ``target``, the target's
    prediction. Writes ``out`` as a whole when given. Returns the LLM payload;
    :func:`llm_exit_code` gives the CLI's exit status.

    Each (backend, format) is one ``MeasureRequest`` through ``measure()``, as a tensor run:
    in this process, in a worker process (``isolate``, or a ``timeout_s``: a crash inside
    the runtime or a hang fails that run, not the caller), or on a board of ``target``
    connected to the Dask scheduler ``fleet`` (built here, loaded and timed there; a real
    board's tokens/s are measured on it, an emulating one's stay this host's)."""
    from edgeprof.profilers.measure.generate import check_context
    from edgeprof.profilers.report.llm_outputs import build_payload, write_llm_outputs

    say = progress or (lambda msg: None)
    config = _llm_config(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=depths,
                         repetitions=repetitions, warmup=warmup, threads=threads, device=device)
    reg = get_registry(plugins)
    chosen = _generative_backends(backends, reg)
    tgt = _llm_target(target, targets_dir, plugins)
    llm = _llm_model(model)
    check_context(llm, config)
    pairs, notes = llm_plan(llm, chosen, precisions, device)
    _check_out(out)
    say(f"estimating {llm.spec.name}")
    estimates, predictions = _llm_estimates(llm, pairs, config, tgt, device, notes,
                                            threads=threads, classes=chosen)
    from edgeprof.profilers.measure.llm_runs import measure_pairs

    runs = measure_pairs(llm, pairs, chosen, config, registry=reg, target=tgt, say=say,
                         isolate=isolate, timeout_s=timeout_s, fleet=fleet, plugins=plugins,
                         workdir=workdir)
    recommendation = None
    from edgeprof.profilers.estimate.llm import declares_formats

    known = [c for c in chosen.values() if declares_formats(c)]  # formats with bytes
    if tgt is not None and known:  # analytic, a fraction of a second: the report's card
        from edgeprof.optimize.llm import choose_llm_format

        recommendation = choose_llm_format(
            llm, tgt, device=device, backends=known,
            context_tokens=config.context_needed(), prompt_tokens=prompt_tokens,
            gen_tokens=gen_tokens).to_dict()
    host = _host_info(None)
    if any(r["status"] == "ok" for r in runs):  # the roof the measured points sit under
        try:
            host["target"] = _target("host", targets_dir, plugins).to_dict()
        except EdgeprofError as e:
            notes.append(f"this host's roof is left out of the report: {e}")
    payload = build_payload(llm, target=tgt, device=device, config=config,
                            parameters=_llm_parameters(llm), estimates=estimates,
                            predictions=predictions, runs=runs, notes=[llm.note, *notes],
                            recommendation=recommendation, host=host, command="profile")
    if out is not None:
        say(f"writing artifacts to {out}")
        _save(payload, lambda: write_llm_outputs(out, payload))
    return payload


def llm_exit_code(payload: dict[str, Any]) -> int:
    """0 complete (a run skipped because the model is too big for this machine counts as
    complete: it was estimated and predicted); 3 when a run produced no measurement."""
    return 3 if any(r.get("status") not in ("ok", "skipped") for r in payload.get("runs") or ()) \
        else 0


def recommend_llm(model: Any, target: Any, *, device: str | None = None,
                  backends: Sequence[str] | str | None = None,
                  context_tokens: int | None = None, tokens_per_s: float | None = None,
                  prompt_tokens: int = 512, gen_tokens: int = 128, plugins=None,
                  targets_dir=None, precisions: Sequence[str] | str | None = None) -> Any:
    """The format (and backend) for ``model`` on ``target``: fits the RAM with room for
    ``context_tokens`` (default prompt + generated tokens), meets ``tokens_per_s`` (default:
    the interactive floor of 10 tok/s decode), and keeps the most bits
    (``edgeprof.optimize.llm.choose_llm_format``: an ``LLMChoice`` whose reasons name the
    binding constraint). ``device`` None: the processor the runtimes would use on the board
    (a Jetson's GPU). ``precisions``: only these formats. Analytic: nothing runs."""
    from edgeprof.optimize.llm import choose_llm_format

    if target is None:
        raise UserError("choosing a format for a generative model needs --target BOARD "
                        "(e.g. raspberry_pi_5); 'edgeprof targets' lists them")
    reg = get_registry(plugins)
    names = list(_generative_backends(backends, reg)) if backends is not None else None
    tgt = _target(target, targets_dir, plugins)
    llm = _llm_model(model)
    return choose_llm_format(llm, tgt, device=device, backends=names,
                             context_tokens=context_tokens, tokens_per_s=tokens_per_s,
                             prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
                             precisions=precisions)


def optimize_llm(model: Any, target: Any, *, shortlist: int = 3, repetitions: int = 3,
                 threads: int | None = None, progress: Progress | None = None,
                 **choose: Any) -> dict[str, Any]:
    """:func:`recommend_llm`'s choice, then the shortlisted formats (the choice first, then
    the other formats that fit and meet the budget, most bits first; at most ``shortlist``)
    measured here, each on its backend (llama-bench's pp/tg with ``repetitions``). Returns
    the choice's document with ``measured_here``: the runs (measured on this machine, not on
    the target: they confirm the formats run and how they rank, the target's figures stay
    predicted) and ``notes`` for formats not measured (a backend not installed here)."""
    say = progress or (lambda msg: None)
    choice = recommend_llm(model, target, **choose)
    doc = choice.to_dict()
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
        payload = profile_llm(model, backends=c.backend, precisions=c.format,
                              prompt_tokens=choose.get("prompt_tokens", 512),
                              gen_tokens=choose.get("gen_tokens", 128),
                              repetitions=repetitions, threads=threads,
                              plugins=choose.get("plugins"), progress=progress)
        runs.extend(payload.get("runs") or [])
    doc["measured_here"] = runs
    doc["notes"] = list(doc.get("notes") or []) + notes + [
        "measured_here: figures measured on this machine (provenance measured, where "
        "'this host'); the target's figures stay predicted"]
    return doc


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
    from edgeprof.profilers.measure.llm_runs import (calibration_subject, generative_runner,
                                                     runner_phrase)
    from edgeprof.profilers.predict.llm import calibrate_llm_host

    say = progress or (lambda msg: None)
    reg = get_registry(plugins)
    cls = _generative_backends(backend, reg)[backend]
    fmt = precision or next((f for f in ("q4_0", "int4") if f in cls.formats), cls.formats[0])
    names = split_names(models, "--models")
    llms = {n: _llm_model(n if ":" in n else f"llm:{n}") for n in names}
    config = _llm_config(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, depths=(0,),
                         repetitions=repetitions, warmup=1, threads=threads, device="cpu")
    tgt = _target(target or "host", targets_dir, plugins)
    runs = []
    with generative_runner(tgt if fleet is not None else None, fleet=fleet, isolate=isolate,
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
    fit_on = tgt if subject == "board" else _target("host", targets_dir, plugins)
    if board is None:
        cal = calibrate_llm_host(records, specs.__getitem__, target=fit_on, write=False)
    else:
        from edgeprof.profilers.measure.llm_runs import label_calibration, measured_where

        cal = calibrate_llm_host(records, specs.__getitem__, target=fit_on, write=False,
                                 where=measured_where(subject, board, tgt))
        label_calibration(cal, subject, board, tgt, left_out=len(runs) - len(kept))
    return _save_llm_calibration(cal, path), records


def _save_llm_calibration(cal: dict[str, Any], path: str | os.PathLike | None
                          ) -> dict[str, Any]:
    """Write ``cal`` atomically to ``path`` (default: the user's calibration folder, where
    predictions look first); its ``path`` set."""
    from edgeprof.core.io import write_json
    from edgeprof.profilers.predict.calibration import user_file

    if path is None:
        path = user_file(cal["name"])
    write_json(Path(path), cal)
    cal["path"] = str(path)
    return cal

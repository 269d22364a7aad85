"""``profile`` (estimate + benchmark per backend x precision + summary against the target:
:class:`ProfileReport`, profile.json) and ``batch_sizes`` (:class:`BatchReport`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.api.common import (SCHEMA_VERSION, Progress, check_out, resolve_target,
                                 save_artifacts, split_names, target_registry)
from edgeprof.core.backend import (Backend, RunConfig, check_backend_options,
                                   run_config_options)
from edgeprof.core.errors import EdgeprofError, InputSpecError, UserError
from edgeprof.core.invocation import command as invocation_command
from edgeprof.core.models import ModelHandle, check_batch_size, resolve_model
from edgeprof.core.plugins import Registry, get_registry
from edgeprof.core.precision import get_precision
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import Estimate, WarningRecord, clean
from edgeprof.profilers.measure.environment import host_info as _host_info
from edgeprof.profilers.measure.measure import measure
from edgeprof.profilers.report.tensor_report import ProfileRun, TensorReport


def resolve_backends(names: Sequence[str] | str, reg: Registry) -> list[tuple[str, bool]]:
    """``["all"]`` -> every registered backend (not explicit); otherwise validate names."""
    names = split_names(names, "--backend")
    if not names:
        raise UserError("no backend given; use --backend NAME, a comma-separated list or 'all'")
    if list(names) == ["all"]:
        return [(n, False) for n in reg.backends_for("tensor")]
    from edgeprof.profilers.predict.runtimes import runtime_class

    out = []
    for n in names:
        # an edgeprof backend, or a runtime family it only predicts (its run: unavailable,
        # with the reason); else UnknownNameError with every name, the closest first
        runtime_class(n, reg)
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
            calibration: str | os.PathLike | None = None) -> TensorReport:
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
    from edgeprof.profilers.predict.runtimes import runtime_class

    classes = {n: runtime_class(n, reg) for n, _ in chosen}
    check_backend_options(run_options.get("options") or {},
                          list(classes.values()))  # exit 2 before any work
    treg = target_registry(targets_dir, plugins)
    # runs on this machine's GPU are read against the GPU (host_gpu), never the CPU
    on_gpu = fleet is None and str(run_options.get("device") or "cpu").startswith("cuda")
    target_id = target if isinstance(target, str) else getattr(target, "id", None)
    if target_id == "host_gpu" and not on_gpu:
        raise UserError("--target host_gpu is this machine's GPU, but the runs are on the CPU: "
                        "add --device cuda (or use --target host)")
    this_machine = on_gpu and target_id in ("host", "host_gpu")
    tgt = None if this_machine else (
        target if not isinstance(target, str) else treg.get(target, recalibrate=recalibrate))
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           batch_size=batch_size, registry=reg, calibration=calibration_data)
    check_out(out)
    warnings: list[WarningRecord] = []
    gpu_t = _gpu_host(on_gpu, run_options.get("device"), recalibrate, say, warnings,
                      required=target_id == "host_gpu")
    if tgt is None:  # this machine: its GPU, or its CPU when the GPU can't be found
        tgt = gpu_t if gpu_t is not None else treg.get("host", recalibrate=recalibrate)

    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.report.summary import summarize as _summarize
    from edgeprof.profilers.report.summary import target_precision

    say(f"estimating {handle.name} on {tgt.id}")
    estimates: dict[tuple[str, str], Estimate] = {}

    def est(t, precision: str) -> Estimate:
        key = (t.id, precision)
        if key not in estimates:
            estimates[key] = estimate_model(handle, t, precision, registry=reg)
        return estimates[key]

    primary = est(tgt, precisions[0])
    host_t = tgt if getattr(tgt, "is_host", False) else gpu_t
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
    from edgeprof.profilers.measure.fleet import board_target
    from edgeprof.profilers.measure.choice import choose_runner

    runner = choose_runner(tgt, fleet=fleet, isolate=bool(run_options.get("isolate")),
                           timeout_s=run_options.get("timeout_s"), progress=progress,
                           registry=reg)
    remote = getattr(runner, "name", None) == "remote"
    for name, explicit in chosen:
        cls = classes[name]
        # a registered backend goes by name (a worker process or a board looks it up); a
        # prediction-only family by its class, unavailable here and on a fleet's boards
        # alike (no edgeprof backend runs it): checked here, never shipped
        run_as, run_on = (name, runner) if name in reg.backends else (cls, None)
        for precision in precisions:
            say(f"benchmarking {name} {precision}")
            config = RunConfig(precision=precision, batch_size=handle.batch_size,
                               threads=threads, **run_options)
            result = measure(MeasureRequest.for_handle(run_as, handle, config,
                                                       plugins_file=plugins), run_on,
                             registry=reg)
            record = ProfileRun(name, precision, result, explicit=explicit)
            board_t = board_target(result, tgt)  # measured on a board of the target itself
            if result.ok:
                p = result.executed_precision if result.executed_precision in _known_precisions() \
                    else precision
                host_est = est(host_t, p) if host_t is not None else None
                # the board's figure is predict's for the precision asked, unless a board of
                # the target measured it (then the precision that ran there)
                tp = target_precision(precision, result, tgt, board_t is not None)
                record.summary = _summarize(est(tgt, tp), result, board_t or tgt, host_t,
                                            host_est, **options)
                if host_t is not None and host_t is not tgt and board_t is None:
                    record.host_summary = _summarize(
                        host_est, result, host_t, stream_rate_fps=stream_rate_fps,
                        latency_budget_ms=latency_budget_ms)
                if trace and not remote:
                    say(f"profiling operators of {name} {precision}")
                    _trace_run(record, cls(), handle, config, est(tgt, p), trace_dir, warnings)
            else:
                record.summary = _summarize(est(tgt, precision), result, tgt, **options)
            runs.append(record)
    report = TensorReport(model=handle, target=tgt, host=_host_info(host_t), estimate=primary,
                           runs=runs, warnings=warnings, host_target=host_t,
                           trace_folder=trace_folder, request={
                               "model": str(model) if isinstance(model, str) else handle.spec,
                               "target": tgt.id, "backends": [n for n, _ in chosen],
                               "precisions": list(precisions), "batch_size": handle.batch_size,
                               "threads": threads, "stream_rate_fps": stream_rate_fps,
                               "latency_budget_ms": latency_budget_ms,
                               "run_options": dict(run_options),
                               "fleet": runner.spec.url if remote else None,
                               "command": invocation_command()})
    if hasattr(runner, "close"):
        runner.close()
    if out is not None:
        say(f"writing artifacts to {out}")
        save_artifacts(report, lambda: report.save(out, stream_rate_fps=stream_rate_fps))
    return report


def _gpu_host(on_gpu: bool, device: str | None, recalibrate: bool, say: Progress,
              warnings: list[WarningRecord], *, required: bool = False) -> Any | None:
    """The ``host_gpu`` target when the runs are on this machine's CUDA GPU (``on_gpu``:
    ``device`` cuda and no fleet), else None. A GPU that can't be detected leaves the CPU
    ``host`` in its place, with a warning (the backends then say why the runs can't
    happen), unless it was asked for by name (``required``): then its one-line error."""
    if not on_gpu:
        return None
    from edgeprof.targets.host_gpu import host_gpu_target

    say(f"calibrating this machine's GPU ({device}; cached after the first run)")
    try:
        return host_gpu_target(device, recalibrate=recalibrate)
    except EdgeprofError as e:
        if required:
            raise
        warnings.append(WarningRecord("host_gpu_uncalibrated",
                                      f"{e}; the runs are read against the CPU host instead"))
        return None


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
    gpu_problems: list[WarningRecord] = []
    device = run_options.get("device")
    gpu_t = _gpu_host(str(device or "cpu").startswith("cuda"), device, False, lambda msg: None,
                      gpu_problems, required=target == "host_gpu")
    # on the GPU, "host" is the GPU: the batch that fits is the one that fits its memory
    tgt = gpu_t if gpu_t is not None and target in ("host", "host_gpu") else \
        resolve_target(target, targets_dir, plugins)
    handle = resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                           registry=reg)
    cls = reg.backend(backend)
    cls.ensure_available()
    check_out(out)
    config = RunConfig(precision=precision, **run_options)
    frame = benchmark_batch_sizes(cls, handle, sizes, config, latency_budget_ms=latency_budget_ms,
                                  plugins_file=plugins, registry=reg)
    notes: list[str] = [w.message for w in gpu_problems]
    try:
        choice = find_optimal_batch_size(None, handle, tgt, precision=precision,
                                         max_batch_size=max(1024, max(sizes)))
    except ConstraintError as e:
        choice = None
        notes.append(str(e))
    report = BatchReport(handle, tgt, backend, precision, frame, choice, notes)
    if out is not None:
        save_artifacts(report, lambda: report.save(out))
    return report

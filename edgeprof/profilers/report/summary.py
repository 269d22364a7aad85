"""Summarize: the estimate and the measurement together, against one target.

Figures and where they come from (each :class:`Figure` carries its provenance):

* on the host (or on a board of the target through the fleet), latency is **measured**
  (the harness's median);
* for any other target, latency is **predicted** by a calibration of that target x runtime
  family x precision (``edgeprof.profilers.predict``), with its 90 % interval
  (``latency_low_ms`` / ``latency_high_ms``) and the calibration's name; without one it is
  the roofline times a documented prior, labelled **uncalibrated**. Neither uses this
  machine's timing, so the figure does not move with the host's load; neither is below the
  target's roofline. The old scalar carry-over (``roofline_target x measured_host /
  roofline_host``) is only available as ``method="carry_over"`` (provenance
  **estimated**), and is refused for a measurement on a GPU (its efficiency is not the CPU
  host's roofline's);
* ``host_efficiency_ratio`` (measured host latency / host roofline) is **estimated**:
  derived from a measurement and an analytic figure;
* achieved GB/s and GMAC/s, bandwidth and compute utilization, the energy proxy and the
  latency budget all use that latency, and inherit its provenance;
* roofline figures are **analytic**, the target's peak figures come from its **descriptor**
  (the host's from its measured calibration, a board's from its datasheet: each roofline
  uses its own target's convention).

The reading is one classification with the estimate's ``bottleneck``: the roofline says which
roof binds (memory or compute, analytic), the latency says how close the run comes to it
(``roofline / latency``, the fraction of the roofline's speed, with the latency's provenance):
above 80% ``<bound>-bound``, 20-80% ``<bound>-bound, below roof``, under 20%
``inefficient`` (time goes where the roofline counts none: dispatch, small kernels, poor
access patterns). The seeds read bandwidth utilization alone (above 80% memory-bound, below
20% "compute-bound or inefficient"), which named a compute bound for a model the roofline
calls memory-bound; the bandwidth utilization figure keeps its seed formula. The roofline
is a lower bound: a host measurement below
the host's roofline (by more than the median's confidence interval) means a descriptor figure
is wrong; the warning ``measurement_below_roofline`` says so, in the host's summary and in
the target's.
"""

from __future__ import annotations

from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.core.precision import get_precision
from edgeprof.core.results import BenchmarkResult, Estimate, Figure, Summary, WarningRecord

NEAR_ROOF_ABOVE = 0.80
INEFFICIENT_BELOW = 0.20


def target_precision(requested: str, benchmark: BenchmarkResult | None, target: Any,
                     measured_there: bool) -> str:
    """The precision a run's figures on ``target`` are for. Where the run measured the target
    itself (a board of the fleet, or this machine as ``--target host``) it is the precision
    that executed; otherwise the target's figure is ``predict``'s for the precision asked:
    what this machine fell back to (fp16 computed in fp32 on an x86 CPU) is this machine's,
    and the board's own fallback is the predictor's to apply (``executed_precision``)."""
    from edgeprof.core.precision import PRECISIONS

    executed = benchmark.executed_precision if benchmark is not None else None
    if measured_there or getattr(target, "is_host", False):
        return executed if executed in PRECISIONS else requested
    return requested


def reading_of(bound: str, roofline_ms: float | None, latency_ms: float | None,
               provenance: str | None = None) -> str:
    """The reading of a run: the roofline's ``bound`` (``memory`` or ``compute``, what the
    estimate's ``bottleneck`` says) and how close ``latency_ms`` comes to the roofline's
    speed (``roofline_ms / latency_ms``); ``provenance`` is the latency's, named in the
    text so the reading carries the label of the figure it comes from."""
    if latency_ms is None or not latency_ms > 0 or roofline_ms is None:
        return f"unknown (no latency); the roofline says {bound}-bound"
    fraction = roofline_ms / latency_ms
    of = f"{100 * fraction:.0f}% of roofline" + (f", {provenance}" if provenance else "")
    if fraction > NEAR_ROOF_ABOVE:
        return f"{bound}-bound ({of})"
    if fraction >= INEFFICIENT_BELOW:
        return f"{bound}-bound, below roof ({of})"
    return f"inefficient, {bound}-bound ({of})"


def seed_bytes(estimate: Estimate) -> float:
    """Bytes moved per the seeds' formula: parameter bytes + activation (output) bytes."""
    return float(sum(r.parameter_bytes + r.activation_bytes for r in estimate.layers))


METHODS = ("predict", "carry_over")


def _below_roofline(benchmark: BenchmarkResult, roofline_ms: float, where: str):
    st = benchmark.stats
    upper = st.ci_high_ms if st.ci_high_ms is not None else st.median_ms
    if roofline_ms > 0 and upper < roofline_ms:
        why = ("the run used TF32 tensor cores (its note says so), a rate the fp32 peak does "
               "not count" if any("TF32" in n for n in benchmark.notes) else
               "a descriptor figure (bandwidth or peak compute) must be wrong, or the working "
               "set stayed in cache")
        return WarningRecord(
            "measurement_below_roofline",
            f"measured {st.median_ms:.4g} ms (CI upper {upper:.4g} ms) beats the roofline "
            f"lower bound {roofline_ms:.4g} ms on {where}: {why}")
    return None


def _on_gpu(benchmark: BenchmarkResult | None) -> bool:
    if benchmark is None:
        return False
    device = (benchmark.device or "cpu").lower()
    return device not in ("cpu", "") or benchmark.backend == "tensorrt"


def _gpu_on_a_cpu_host(benchmark: BenchmarkResult | None, host: Any) -> bool:
    """A GPU's measurement beside a host that describes a CPU: its roofline is not the
    GPU's (``host_gpu``, the GPU the run was on, is)."""
    return _on_gpu(benchmark) and getattr(host, "kind", None) not in ("gpu", "edge_gpu")


def _model_names(spec: str) -> set[str]:
    """The names an estimate may give a result's model spec: the spec itself and its last
    part (``builtin:small_cnn`` -> ``small_cnn``, ``pkg.mod:make`` -> ``make``,
    ``path/net.onnx`` -> ``net``)."""
    from pathlib import PurePath

    tail = spec.rpartition(":")[2] if ":" in spec and not PurePath(spec).drive else spec
    return {spec, tail, PurePath(tail).name, PurePath(tail).stem}


def check_pair(estimate: Estimate, benchmark: BenchmarkResult | None) -> None:
    """Refuse an estimate and a benchmark that are not of the same model, precision and batch
    size (UserError, one line): joined, their figures would describe neither."""
    if benchmark is None:
        return
    problems = []
    if estimate.model not in _model_names(str(benchmark.model)):
        problems.append(f"the estimate is of {estimate.model}, the benchmark of "
                        f"{benchmark.model}")
    ran = {benchmark.requested_precision, benchmark.executed_precision} - {None}
    if estimate.precision not in ran:
        problems.append(f"the estimate is at {estimate.precision}, the benchmark ran "
                        f"{' -> '.join(sorted(ran)) or 'no precision'}")
    if estimate.batch_size != benchmark.batch_size:
        problems.append(f"the estimate is at batch {estimate.batch_size}, the benchmark at "
                        f"batch {benchmark.batch_size}")
    if problems:
        raise UserError(f"summarize joins an estimate and a benchmark of the same model, "
                        f"precision and batch: {'; '.join(problems)}; pass force=True to join "
                        "them anyway")


def summarize(estimate: Estimate, benchmark: BenchmarkResult | None, target: Any,
              host: Any | None = None, host_estimate: Estimate | None = None, *,
              stream_rate_fps: float | None = None,
              latency_budget_ms: float | None = None, method: str = "predict",
              backend: str | None = None, calibration_dirs: list | None = None,
              threads: int | None = None, calibration: Any = None,
              force: bool = True) -> Summary:
    """``estimate`` is on ``target``; ``benchmark`` was measured on this host (or on a board
    of the target); ``host_estimate`` is the same model on ``host``. ``method`` picks how a
    target that was not measured gets its latency: ``predict`` (default) or the named
    ``carry_over`` of the host's measured efficiency. ``force=False`` (what
    ``edgeprof.summarize`` passes by default) refuses a pair of another model, precision or
    batch (:func:`check_pair`); edgeprof's own callers pair them by construction."""
    if not force:
        check_pair(estimate, benchmark)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
    on_host = bool(getattr(target, "is_host", False))
    warnings: list[WarningRecord] = []
    notes: list[str] = []
    figures: dict[str, Figure] = {}
    measured_ok = benchmark is not None and benchmark.ok
    backend = backend or (benchmark.backend if benchmark is not None else None)
    roofline_ms = estimate.roofline_latency_ms
    figures["roofline_latency_ms"] = Figure(roofline_ms, "ms", "analytic")
    prediction = None

    # -- the host's measurement, as a measurement ---------------------------------------
    gpu = _gpu_on_a_cpu_host(benchmark, host)
    if measured_ok and not on_host:
        host_ms = benchmark.stats.median_ms
        figures["host_latency_ms"] = Figure(host_ms, "ms", "measured")
        if gpu:
            notes.append(f"measured on {benchmark.device or 'a GPU'} ({benchmark.backend}): "
                         "not compared with the CPU host's roofline")
        elif host_estimate is not None and host_estimate.roofline_latency_ms > 0:
            figures["host_roofline_latency_ms"] = Figure(host_estimate.roofline_latency_ms,
                                                         "ms", "analytic")
            figures["host_efficiency_ratio"] = Figure(
                host_ms / host_estimate.roofline_latency_ms, "ratio", "estimated")
            w = _below_roofline(benchmark, host_estimate.roofline_latency_ms,
                                f"this host ({getattr(host, 'id', 'host')})")
            if w is not None:
                warnings.append(w)

    # -- latency on the target ---------------------------------------------------------
    latency_ms: float | None = None
    reason: str | None = None
    low = high = None
    if on_host:
        provenance = "measured"
        if measured_ok:
            latency_ms = benchmark.stats.median_ms
        else:
            reason = ("no measurement: " + (benchmark.reason or benchmark.status)) if benchmark \
                else "no measurement was requested"
    elif method == "carry_over":
        provenance = "estimated"
        if not measured_ok:
            reason = ("no measurement: " + (benchmark.reason or benchmark.status)) if benchmark \
                else "no measurement was requested"
        elif gpu:
            reason = (f"carry-over refused: the measurement ran on {benchmark.device or 'a GPU'} "
                      f"({benchmark.backend}), and the host's roofline describes its CPU")
        elif "host_efficiency_ratio" not in figures:
            reason = "host roofline unavailable (host calibration missing), cannot carry the " \
                     "host's efficiency over to the target"
        else:
            eff = figures["host_efficiency_ratio"].value
            latency_ms = max(roofline_ms * eff, roofline_ms)
            notes.append(
                f"latency on {target.id} is estimated by the carry-over method: roofline "
                f"{roofline_ms:.4g} ms x host efficiency ratio {eff:.3g} (measured on host / "
                f"roofline on host), floored at the roofline; it moves with this host's load")
    else:
        from edgeprof.core.errors import UserError
        from edgeprof.profilers.predict import predict_latency
        from edgeprof.profilers.predict.predictor import check_processor

        try:  # a runtime on no processor of the board, or a precision it does not offer
            # (a row 'not offered'): no figure, and why
            runs_there = backend is None or check_processor(
                target, backend, precision=estimate.precision) is None
        except UserError as e:
            runs_there, reason = False, f"no prediction: {e}"
        if backend is None:
            provenance = "uncalibrated"
            reason = "no backend named, so no runtime family to predict for"
        elif not runs_there:
            provenance = "uncalibrated"
        else:
            prediction = predict_latency(estimate, target, backend, estimate.precision,
                                         threads=threads, calibration=calibration,
                                         dirs=calibration_dirs)
            provenance = prediction.provenance
            latency_ms = prediction.value_ms
            low, high = prediction.low_ms, prediction.high_ms
            notes.append(prediction.note)
            warnings.extend(prediction.warnings)
    figures["latency_ms"] = Figure(latency_ms, "ms", provenance, reason)
    if low is not None:
        figures["latency_low_ms"] = Figure(low, "ms", provenance)
        figures["latency_high_ms"] = Figure(high, "ms", provenance)

    # -- achieved rates and utilization (the seeds' formulas) ----------------------------
    total_bytes = seed_bytes(estimate)
    total_macs = float(estimate.total_macs)
    bw_cfg = target.bandwidth_bytes_per_s / 1e9
    figures["configured_memory_bandwidth_gbps"] = Figure(bw_cfg, "GB/s", "descriptor")
    figures["estimated_total_bytes"] = Figure(total_bytes, "B", "analytic")
    figures["estimated_total_macs"] = Figure(total_macs, "MAC", "analytic")
    precision = estimate.precision
    peak = target.peak_macs(get_precision(precision).compute) or target.peak_macs("fp32")
    if latency_ms is not None and latency_ms > 0:
        lat_s = latency_ms / 1e3
        achieved_gbps = total_bytes / lat_s / 1e9
        achieved_gmacs = total_macs / lat_s / 1e9
        figures["achieved_bandwidth_gbps"] = Figure(achieved_gbps, "GB/s", provenance)
        figures["bandwidth_utilization"] = Figure(achieved_gbps / bw_cfg, "fraction", provenance)
        figures["achieved_gmacs"] = Figure(achieved_gmacs, "GMAC/s", provenance)
        figures["compute_utilization"] = Figure(
            achieved_gmacs * 1e9 / peak if peak else None, "fraction", provenance,
            None if peak else f"{target.id} has no peak compute figure for {precision}")
        from edgeprof.profilers.measure.energy import energy_proxy_j

        figures["energy_proxy_j"] = energy_proxy_j(target, lat_s)  # None + reason if no power
        batch = estimate.batch_size or (benchmark.batch_size if benchmark is not None else 0)
        if batch:
            figures["throughput_per_s"] = Figure(batch / lat_s, "samples/s", provenance)
    else:
        why = reason or "no latency"
        for name, unit in (("achieved_bandwidth_gbps", "GB/s"), ("bandwidth_utilization", "fraction"),
                           ("achieved_gmacs", "GMAC/s"), ("compute_utilization", "fraction"),
                           ("energy_proxy_j", "J"), ("throughput_per_s", "samples/s")):
            figures[name] = Figure(None, unit, provenance, why)

    # -- memory ---------------------------------------------------------------------------
    figures["estimated_memory_bytes"] = Figure(
        float(estimate.parameter_bytes + estimate.peak_activation_bytes), "B", "analytic")
    if benchmark is not None and benchmark.peak_memory_bytes is not None:
        figures["host_peak_memory_bytes"] = Figure(float(benchmark.peak_memory_bytes), "B",
                                                   "measured")

    # -- stream rate and latency budget ---------------------------------------------------
    if stream_rate_fps:
        figures["stream_utilization"] = Figure(
            latency_ms / (1000.0 / stream_rate_fps) if latency_ms is not None else None,
            "fraction", provenance, None if latency_ms is not None else (reason or "no latency"))
    if latency_budget_ms is not None:
        from edgeprof.core.provenance import budget_verdict

        verdict = budget_verdict(latency_ms, latency_budget_ms, provenance, low_ms=low,
                                 high_ms=high)
        meets = None if verdict.met is None else float(verdict.met)
        figures["meets_latency_budget"] = Figure(meets, "bool", provenance,
                                                 None if meets is not None else
                                                 (reason or verdict.text))
        if latency_ms is not None:
            notes.append(f"latency budget on {target.id}: {verdict.text}")

    # -- honesty checks -------------------------------------------------------------------
    if measured_ok and on_host:
        w = _below_roofline(benchmark, roofline_ms, target.id)
        if w is not None:
            warnings.append(w)
    if not on_host:
        notes.append(f"figures marked 'measured' were measured on this host; figures for "
                     f"{target.id} are '{provenance}' or 'analytic'")

    reading = reading_of(estimate.bound, roofline_ms, latency_ms, provenance)
    return Summary(target=target.id, backend=backend, precision=precision, on_host=on_host,
                   figures=figures, reading=reading, warnings=warnings, notes=notes,
                   prediction=prediction.to_dict() if prediction is not None else None)

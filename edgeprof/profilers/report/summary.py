"""Summarize: the estimate and the measurement together, against one target.

Figures and where they come from (each :class:`Figure` carries its provenance):

* on the host, latency is **measured** (the harness's median);
* for any other target, latency is **estimated** as
  ``roofline_target x (measured_host / roofline_host)`` for the same backend and precision:
  the host's measured efficiency is carried over (docs/design.md, "Host and target");
* achieved GB/s and GMAC/s, bandwidth and compute utilization, the energy proxy and the
  latency budget all use that latency, and inherit its provenance;
* roofline figures are **analytic**, the target's peak figures come from its **descriptor**.

The seeds' reading of bandwidth utilization: above 80% memory-bound, below 20% compute-bound
or inefficient, balanced in between. The uncalibrated roofline is a lower bound: a host
measurement below it (by more than the median's confidence interval) means a descriptor
figure is wrong, and a warning says so.
"""

from __future__ import annotations

from typing import Any

from edgeprof.core.precision import get_precision
from edgeprof.core.results import BenchmarkResult, Estimate, Figure, Summary, WarningRecord

MEMORY_BOUND_ABOVE = 0.80
COMPUTE_BOUND_BELOW = 0.20


def reading_of(bandwidth_utilization: float | None) -> str:
    """The seeds' reading of a bandwidth utilization fraction."""
    if bandwidth_utilization is None:
        return "unknown"
    if bandwidth_utilization > MEMORY_BOUND_ABOVE:
        return "memory-bound"
    if bandwidth_utilization < COMPUTE_BOUND_BELOW:
        return "compute-bound or inefficient"
    return "balanced"


def seed_bytes(estimate: Estimate) -> float:
    """Bytes moved per the seeds' formula: parameter bytes + activation (output) bytes."""
    return float(sum(r.parameter_bytes + r.activation_bytes for r in estimate.layers))


def summarize(estimate: Estimate, benchmark: BenchmarkResult | None, target: Any,
              host: Any | None = None, host_estimate: Estimate | None = None, *,
              stream_rate_fps: float | None = None,
              latency_budget_ms: float | None = None) -> Summary:
    on_host = bool(getattr(target, "is_host", False))
    warnings: list[WarningRecord] = []
    notes: list[str] = []
    figures: dict[str, Figure] = {}
    measured_ok = benchmark is not None and benchmark.ok
    roofline_ms = estimate.roofline_latency_ms
    figures["roofline_latency_ms"] = Figure(roofline_ms, "ms", "analytic")

    # -- latency on the target ---------------------------------------------------------
    latency_ms: float | None = None
    provenance = "measured" if on_host else "estimated"
    reason: str | None = None
    if not measured_ok:
        reason = ("no measurement: " + (benchmark.reason or benchmark.status)) if benchmark \
            else "no measurement was requested"
    elif on_host:
        latency_ms = benchmark.stats.median_ms
    else:
        host_ms = benchmark.stats.median_ms
        figures["host_latency_ms"] = Figure(host_ms, "ms", "measured")
        if host_estimate is None or host_estimate.roofline_latency_ms <= 0:
            reason = "host roofline unavailable (host calibration missing), cannot carry the " \
                     "host's efficiency over to the target"
        else:
            efficiency = host_ms / host_estimate.roofline_latency_ms
            figures["host_roofline_latency_ms"] = Figure(host_estimate.roofline_latency_ms, "ms",
                                                         "analytic")
            figures["host_efficiency_ratio"] = Figure(efficiency, "ratio", "measured")
            latency_ms = roofline_ms * efficiency
            notes.append(
                f"latency on {target.id} is estimated, not measured: roofline on {target.id} "
                f"{roofline_ms:.4g} ms x (measured on host {host_ms:.4g} ms / roofline on host "
                f"{host_estimate.roofline_latency_ms:.4g} ms)")
    figures["latency_ms"] = Figure(latency_ms, "ms", provenance, reason)

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
        figures["energy_proxy_j"] = Figure(target.typical_power.value * lat_s, "J", "estimated")
        if benchmark is not None and benchmark.batch_size:
            figures["throughput_per_s"] = Figure(benchmark.batch_size / lat_s, "samples/s",
                                                 provenance)
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
        meets = None if latency_ms is None else float(latency_ms <= latency_budget_ms)
        figures["meets_latency_budget"] = Figure(meets, "bool", provenance,
                                                 None if meets is not None else reason)

    # -- honesty checks -------------------------------------------------------------------
    if measured_ok and on_host and roofline_ms > 0:
        st = benchmark.stats
        upper = st.ci_high_ms if st.ci_high_ms is not None else st.median_ms
        if upper < roofline_ms:
            warnings.append(WarningRecord(
                "measurement_below_roofline",
                f"measured {st.median_ms:.4g} ms (CI upper {upper:.4g} ms) beats the roofline "
                f"lower bound {roofline_ms:.4g} ms on {target.id}: a descriptor figure "
                "(bandwidth or peak compute) must be wrong, or the working set stayed in cache"))
    if not on_host:
        notes.append(f"figures marked 'measured' were measured on this host; figures for "
                     f"{target.id} are 'estimated' from them or 'analytic'")

    bw_util = figures["bandwidth_utilization"].value
    reading = reading_of(bw_util)
    if bw_util is None:
        reading = f"unknown (no latency); the roofline says {estimate.bound}-bound"
    return Summary(target=target.id, backend=benchmark.backend if benchmark else None,
                   precision=precision, on_host=on_host, figures=figures, reading=reading,
                   warnings=warnings, notes=notes)

"""Artifacts of a profile: the seeds' CSV files and plots, the backend comparison, and
profile.json. Written into a staging folder by :func:`write_artifacts`; the caller moves
them into place only when every one was written (see ``ProfileReport.save``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SEED_SUMMARY_KEYS = ("estimated_total_bytes", "estimated_total_macs", "achieved_bandwidth_gbps",
                     "configured_memory_bandwidth_gbps", "bandwidth_utilization", "achieved_gmacs")


def _ok_runs(report) -> list:
    return [r for r in report.runs if r.summary is not None]


def hardware_summary_frame(report):
    """One row per run: the seed's summarize_hardware keys, plus what ran and provenance."""
    import pandas as pd

    rows = []
    for r in _ok_runs(report):
        s = r.summary
        row: dict[str, Any] = {"target": s.target, "backend": r.backend,
                               "precision": r.requested_precision,
                               "executed_precision": r.benchmark.executed_precision,
                               "status": r.status}
        for k in SEED_SUMMARY_KEYS:
            row[k] = s.value(k)
        row["latency_ms"] = s.value("latency_ms")
        row["roofline_latency_ms"] = s.value("roofline_latency_ms")
        row["compute_utilization"] = s.value("compute_utilization")
        row["reading"] = s.reading
        row["latency_provenance"] = s.figures["latency_ms"].provenance
        rows.append(row)
    return pd.DataFrame(rows)


def precision_tradeoffs_frame(report):
    """Seed 001's columns (aggregated by precision) plus provenance; accuracy stays empty
    until it is measured. ``accepted``: the run produced a latency, the model fits the
    target's memory, and it meets the latency budget when one was given."""
    import pandas as pd

    from edgeprof.profilers.report.seeds import TRADEOFF_COLUMNS, precision_tradeoff_table

    rows = []
    for r in report.runs:
        s = r.summary
        if s is None:
            continue
        lat = s.value("latency_ms")
        mem = s.value("estimated_memory_bytes")
        fits = True
        est = report.estimate
        if est.memory_capacity:
            fits = bool(est.memory_capacity.get("fits", True))
        budget = s.value("meets_latency_budget")
        accepted = lat is not None and fits and (budget is None or bool(budget))
        rows.append({"precision": r.requested_precision, "accuracy": float("nan"),
                     "latency_ms": lat if lat is not None else float("nan"),
                     "memory_mb": (mem / 1e6) if mem is not None else float("nan"),
                     "energy_proxy_j": s.value("energy_proxy_j") if s.value("energy_proxy_j")
                     is not None else float("nan"),
                     "accepted": bool(accepted), "provenance": s.figures["latency_ms"].provenance})
    if not rows:
        return pd.DataFrame(columns=[*TRADEOFF_COLUMNS, "latency_provenance",
                                     "memory_provenance", "accuracy_provenance"])
    sweep = pd.DataFrame(rows)
    table = precision_tradeoff_table(sweep.drop(columns=["provenance"]))
    prov = sweep.groupby("precision")["provenance"].agg(lambda s: ",".join(sorted(set(s))))
    table["latency_provenance"] = table["precision"].map(prov)
    table["memory_provenance"] = "analytic"
    table["accuracy_provenance"] = "not measured"
    return table


def backend_comparison_frame(report):
    import pandas as pd

    rows = []
    for r in report.runs:
        b, s = r.benchmark, r.summary
        st = b.stats
        rows.append({
            "backend": r.backend, "requested_precision": r.requested_precision,
            "executed_precision": b.executed_precision, "status": b.status, "reason": b.reason,
            "host_median_ms": st.median_ms if st else None,
            "host_p90_ms": st.p90_ms if st else None,
            "host_ci_low_ms": st.ci_low_ms if st else None,
            "host_ci_high_ms": st.ci_high_ms if st else None,
            "host_throughput_per_s": b.throughput_per_s,
            "host_peak_memory_bytes": b.peak_memory_bytes,
            "first_inference_ms": b.first_inference_ms, "load_time_s": b.load_time_s,
            "target": s.target if s else None,
            "target_latency_ms": s.value("latency_ms") if s else None,
            "target_latency_provenance": s.figures["latency_ms"].provenance if s else None,
            "runtime_version": b.runtime_version,
            "agreement_relative_error": (b.extra.get("agreement") or {}).get("relative_error"),
            "agreement_passed": (b.extra.get("agreement") or {}).get("passed"),
            "model_bytes": b.extra.get("model_bytes"),
        })
    return pd.DataFrame(rows)


def totals_latency(report) -> tuple[float | None, str | None]:
    """The whole-model target latency for seed 000's totals, with its provenance.

    It comes from the first run whose precision is the estimate's (requested, or executed
    when the request was an alias such as ``int8``), through that run's summary figure, so
    an estimated, predicted or measured latency keeps its label. (None, None) when no run
    of that precision produced a latency: the totals are then the analytic roofline.
    """
    want = report.estimate.precision
    for r in report.runs:
        s = r.summary
        if s is None or "latency_ms" not in s.figures:
            continue
        if want not in (r.requested_precision, r.benchmark.executed_precision):
            continue
        fig = s.figures["latency_ms"]
        if fig.value is not None:
            return float(fig.value), fig.provenance
    return None, None


def write_artifacts(report, folder: Path, *, stream_rate_fps: float | None = None) -> list[str]:
    """Write every artifact of ``report`` into ``folder``; return the file names."""
    from edgeprof.core.io import write_csv, write_json
    from edgeprof.profilers.report import seeds as hardware
    from edgeprof.profilers.report.plots import plot_layerwise

    names: list[str] = []

    def csv(name: str, frame) -> None:
        write_csv(folder / name, frame)
        names.append(name)

    layer_frame = report.estimate.to_frame()
    csv("layerwise_breakdown.csv", layer_frame)
    latency, provenance = totals_latency(report)
    profile = hardware.build_hardware_profile_table(
        report.estimate, stream_rate_fps=stream_rate_fps, latency_ms=latency,
        latency_provenance=provenance)
    for path in hardware.write_hardware_profile_artifacts(profile, folder).values():
        names.append(Path(path).name)
    csv("hardware_summary.csv", hardware_summary_frame(report))
    csv("precision_tradeoffs.csv", precision_tradeoffs_frame(report))
    if len(report.runs) > 1:
        csv("backend_comparison.csv", backend_comparison_frame(report))
    title = f"{report.model.name} on {report.target.id} ({report.estimate.precision})"
    plot_layerwise(layer_frame, "macs", folder / "layerwise_macs.png", f"MACs per layer: {title}")
    names.append("layerwise_macs.png")
    plot_layerwise(layer_frame, "activation_bytes", folder / "layerwise_activation_memory.png",
                   f"Activation bytes per layer: {title}")
    names.append("layerwise_activation_memory.png")
    from edgeprof.profilers.report.plots import plot_roofline  # html helper: roofline.png

    plot_roofline(layer_frame, report.estimate.peak_macs_per_s,
                  report.estimate.memory_bandwidth_bytes_per_s, folder / "roofline.png",
                  f"Roofline: {title}")
    names.append("roofline.png")
    import shutil

    for r in report.runs:
        tag = f"{r.backend}_{r.requested_precision}"
        if r.operators is not None:
            csv(f"operators_{tag}.csv", r.operators)
        if r.trace_file is not None:
            shutil.copyfile(r.trace_file, folder / f"trace_{tag}.json")
            names.append(f"trace_{tag}.json")
    doc = report.to_dict()
    write_json(folder / "profile.json", doc)
    names.append("profile.json")
    from edgeprof.core.io import write_text  # html helper: the self-contained report.html
    from edgeprof.profilers.report.html import render_profile_html

    write_text(folder / "report.html", render_profile_html(doc))
    names.append("report.html")
    return list(dict.fromkeys(names))


def dumps(report) -> str:
    return json.dumps(report.to_dict(), indent=2, allow_nan=False)

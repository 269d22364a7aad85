"""The seed-compatible hardware API: the names, columns, keys and formulas of the seeds.

* :func:`estimate_layerwise_stats`, :func:`summarize_hardware`,
  :func:`precision_tradeoff_table`, :func:`save_hardware_artifacts` -- seed 002 (and 001's
  trade-off columns). ``estimate_layerwise_stats`` works on any ``nn.Module``: its rows come
  from the analytic graph walk (:mod:`edgeprof.profilers.estimate.torch_graph`), one per leaf module
  or functional op that does work, not only the seed's conv1/conv2/classifier.
* :func:`build_hardware_profile_table`, :func:`write_hardware_profile_artifacts` -- seed
  000's profile structure, built from an :class:`~edgeprof.core.results.Estimate` (per-layer
  roofline latency, or measured per-operator latency where given) instead of the seed's
  fixed per-operator constants.
* :class:`HardwareProfile`, :func:`estimate_batch_memory_mb`, :func:`auto_adjust_batch_size`,
  :func:`compute_utilization` -- seed 000's helpers with their seed meaning.

Units are decimal everywhere (1 kB = 1000 B, 1 MB = 1e6 B, 1 GB/s = 1e9 B/s); the seeds'
binary ``/1024`` divisions are not kept (docs/design.md, "Units").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.core.errors import InputSpecError
from edgeprof.core.io import write_csv
from edgeprof.core.models import check_batch_size
from edgeprof.core.precision import PRECISIONS
from edgeprof.core.results import Estimate

#: seed 002's layer-wise columns, in order; extra columns follow them
LAYERWISE_COLUMNS = ("layer", "output_elements", "parameter_bytes", "activation_bytes", "macs")
LAYERWISE_EXTRA = ("op_type", "output_shape", "input_bytes", "parameter_count", "other_ops",
                   "flops")
#: seed 001's precision trade-off columns
TRADEOFF_COLUMNS = ("precision", "accuracy_mean", "latency_ms_mean", "memory_mb_mean",
                    "energy_proxy_j_mean", "accepted_ratio")
#: seed 002 artifact file names
LAYERWISE_CSV = "layerwise_breakdown.csv"
TRADEOFF_CSV = "precision_tradeoffs.csv"
SUMMARY_CSV = "hardware_summary.csv"
ACTIVATION_PNG = "layerwise_activation_memory.png"
MACS_PNG = "layerwise_macs.png"
#: seed 000 artifact file names
OPERATOR_CSV = "operator_profile.csv"
TOTALS_CSV = "hardware_totals.csv"

QUANTIZATION_NOTE = ("Memory figures scale with bytes per element; the latency effect of fp16 "
                     "or int8 depends on the kernels the runtime has on the device, so measure "
                     "it there before relying on it.")


# --------------------------------------------------------------------------- seed 002
def estimate_layerwise_stats(model, batch_size: int, input_shape: tuple[int, ...] = (1, 28, 28),
                             activation_bytes_per_value: int | None = None):
    """Layer-by-layer output elements, parameter bytes, activation bytes and MACs.

    ``input_shape`` excludes the batch dimension (seed form). Bytes use the model's own
    parameter element size (4 for an fp32 model), activations the same unless
    ``activation_bytes_per_value`` is given. Returns a DataFrame with the seed's columns
    ``layer, output_elements, parameter_bytes, activation_bytes, macs`` followed by
    ``op_type, output_shape, input_bytes, parameter_count, other_ops, flops``.
    """
    import pandas as pd
    import torch

    from edgeprof.profilers.estimate.torch_graph import walk_torch

    check_batch_size(batch_size)
    shape = tuple(int(d) for d in input_shape)
    if not shape or any(d <= 0 for d in shape):
        raise InputSpecError(f"input_shape {input_shape!r} must be positive dimensions without "
                             "the batch, e.g. (1, 28, 28)")
    params = list(model.parameters())
    dtype = params[0].dtype if params and params[0].is_floating_point() else torch.float32
    bytes_per_param = params[0].element_size() if params else 4
    bytes_per_act = activation_bytes_per_value or bytes_per_param
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((batch_size, *shape), generator=gen, dtype=torch.float32).to(dtype)
    result = walk_torch(model, [x])
    rows = [{
        "layer": g.name,
        "output_elements": int(g.output_elements),
        "parameter_bytes": int(g.parameter_count * bytes_per_param),
        "activation_bytes": int(g.output_elements * bytes_per_act),
        "macs": int(g.macs),
        "op_type": g.op_type,
        "output_shape": "x".join(str(d) for d in g.output_shape),
        "input_bytes": int(g.input_elements * bytes_per_act),
        "parameter_count": int(g.parameter_count),
        "other_ops": int(g.other_ops),
        "flops": 2 * int(g.macs),
    } for g in result.layers]
    return pd.DataFrame(rows, columns=list(LAYERWISE_COLUMNS + LAYERWISE_EXTRA))


def summarize_hardware(layerwise_df, latency_ms: float, memory_bandwidth_gbps: float) -> dict[str, float]:
    """Achieved bandwidth and GMAC/s of a measured latency (seed 002's formula and keys).

    Total bytes are parameter plus activation bytes; the latency is clamped at 1e-9 s and the
    configured bandwidth at 1e-9 GB/s to avoid dividing by zero.
    """
    total_bytes = float(layerwise_df["parameter_bytes"].sum() + layerwise_df["activation_bytes"].sum())
    total_macs = float(layerwise_df["macs"].sum())
    latency_s = max(float(latency_ms) / 1000.0, 1e-9)
    achieved_bandwidth_gbps = (total_bytes / latency_s) / 1e9
    return {
        "estimated_total_bytes": total_bytes,
        "estimated_total_macs": total_macs,
        "achieved_bandwidth_gbps": achieved_bandwidth_gbps,
        "configured_memory_bandwidth_gbps": float(memory_bandwidth_gbps),
        "bandwidth_utilization": achieved_bandwidth_gbps / max(float(memory_bandwidth_gbps), 1e-9),
        "achieved_gmacs": (total_macs / latency_s) / 1e9,
    }


def precision_tradeoff_table(sweep_df):
    """Mean accuracy, latency, memory, energy and the accepted ratio per precision.

    Columns are seed 001's, sorted by ``latency_ms_mean``. ``sweep_df`` needs ``precision``
    and ``latency_ms``; a missing ``accuracy``, ``memory_mb``, ``energy_proxy_j`` or
    ``accepted`` column (or missing values) gives empty cells, never invented numbers. A
    ``provenance`` column, when present, is carried (distinct values joined by ``+``).
    """
    import pandas as pd

    for col in ("precision", "latency_ms"):
        if col not in sweep_df.columns:
            raise InputSpecError(f"precision_tradeoff_table needs a '{col}' column; got "
                                 f"{', '.join(map(str, sweep_df.columns)) or 'none'}")
    df = sweep_df.copy()
    for col in ("accuracy", "memory_mb", "energy_proxy_j", "accepted"):
        if col not in df.columns:
            df[col] = float("nan")
    for col in ("accuracy", "latency_ms", "memory_mb", "energy_proxy_j", "accepted"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    aggs = dict(
        accuracy_mean=("accuracy", "mean"),
        latency_ms_mean=("latency_ms", "mean"),
        memory_mb_mean=("memory_mb", "mean"),
        energy_proxy_j_mean=("energy_proxy_j", "mean"),
        accepted_ratio=("accepted", "mean"),
    )
    columns = list(TRADEOFF_COLUMNS)
    if "provenance" in df.columns:
        aggs["provenance"] = ("provenance",
                              lambda s: "+".join(sorted({str(v) for v in s.dropna()})) or None)
        columns.append("provenance")
    grouped = df.groupby("precision", as_index=False, sort=False).agg(**aggs)
    grouped = grouped.sort_values("latency_ms_mean", kind="stable", na_position="last")
    return grouped.reset_index(drop=True)[columns]


def save_hardware_artifacts(output_dir, layerwise_df, tradeoff_df,
                            hardware_summary: Mapping[str, Any]) -> dict[str, str]:
    """Write seed 002's artifacts into ``output_dir`` (created if needed), atomically.

    Files: ``layerwise_breakdown.csv``, ``precision_tradeoffs.csv``, ``hardware_summary.csv``
    (UTF-8), ``layerwise_activation_memory.png`` (MB) and ``layerwise_macs.png`` (millions
    of MACs), 180 DPI, tight layout. Returns the paths by name.
    """
    import pandas as pd

    from edgeprof.profilers.report.plots import plot_layerwise

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "layerwise_breakdown_csv": write_csv(out / LAYERWISE_CSV, layerwise_df),
        "precision_tradeoffs_csv": write_csv(out / TRADEOFF_CSV, tradeoff_df),
        "hardware_summary_csv": write_csv(out / SUMMARY_CSV, pd.DataFrame([dict(hardware_summary)])),
        "layerwise_activation_memory_png": plot_layerwise(
            layerwise_df, "activation_bytes", out / ACTIVATION_PNG, "Layer-wise Activation Memory",
            scale=1e-6, ylabel="Activation Memory (MB)", color="tab:orange"),
        "layerwise_macs_png": plot_layerwise(
            layerwise_df, "macs", out / MACS_PNG, "Layer-wise Compute Estimate", scale=1e-6,
            ylabel="MACs (Millions)", color="tab:blue"),
    }
    return {k: str(v) for k, v in paths.items()}


# --------------------------------------------------------------------------- seed 000
def _measured_by_layer(operator_latency_ms) -> dict[str, float]:
    if operator_latency_ms is None:
        return {}
    if isinstance(operator_latency_ms, Mapping):
        return {str(k): float(v) for k, v in operator_latency_ms.items() if v is not None}
    df = operator_latency_ms  # a DataFrame like Backend.operator_profile() returns
    key = "layer" if "layer" in df.columns else "operator"
    if key not in df.columns or "latency_ms" not in df.columns:
        raise InputSpecError("operator_latency_ms must be a mapping layer -> ms or a table "
                             "with 'layer' (or 'operator') and 'latency_ms' columns")
    df = df.dropna(subset=[key, "latency_ms"])
    return {str(k): float(v) for k, v in df.groupby(key)["latency_ms"].sum().items()}


def build_hardware_profile_table(estimate: Estimate, operator_latency_ms=None,
                                 stream_rate_fps: float | None = None, *,
                                 measured_latency_ms: float | None = None) -> dict[str, Any]:
    """Seed 000's hardware profile, built from an :class:`Estimate`.

    ``operator_profile`` has one ``{operator, latency_ms, memory_kb, provenance}`` per
    estimate row: the measured latency where ``operator_latency_ms`` (a mapping layer -> ms,
    or the DataFrame a backend's ``operator_profile`` returns, summed per ``layer``) has
    one, else the row's roofline latency. With ``measured_latency_ms`` (a whole-model
    measurement) the rows without a per-operator measurement share what is left of it in
    proportion to their roofline latency (provenance ``estimated``), so the total is the
    measurement (provenance ``measured``). ``memory_kb`` is the row's parameter plus output
    bytes / 1000 (the seeds' bytes moved: each output is written once and read by the next
    layer). ``totals`` sums them; ``estimated_bandwidth_mb_s`` = MB / latency in s (clamped
    at 1e-9 s); ``stream_utilization`` = latency / (1 / ``stream_rate_fps``), None without a
    stream rate (above 1 means the device cannot keep up; it is not clamped).
    ``precision_tradeoffs`` recomputes the same bytes at fp32, fp16 and int8;
    ``edge_constraints`` carries the estimate's sentences.
    """
    if not isinstance(estimate, Estimate):
        raise TypeError("build_hardware_profile_table takes an Estimate (from edgeprof.estimate "
                        "or estimate_model), not the seed's (feature_count, batch_size, "
                        "stream_interval_ms): edgeprof derives the costs from the model")
    if stream_rate_fps is not None and not (float(stream_rate_fps) > 0):
        raise InputSpecError(f"stream rate must be a positive frames-per-second figure, got "
                             f"{stream_rate_fps!r}")
    if measured_latency_ms is not None and not (float(measured_latency_ms) >= 0):
        raise InputSpecError(f"measured latency must be a non-negative number of ms, got "
                             f"{measured_latency_ms!r}")
    measured = _measured_by_layer(operator_latency_ms)
    rest = [r for r in estimate.layers if r.layer not in measured]
    share: dict[str, float] = {}
    if measured_latency_ms is not None and rest:
        left = max(float(measured_latency_ms) - sum(measured.get(r.layer, 0.0)
                                                    for r in estimate.layers), 0.0)
        roof = sum(r.roofline_latency_ms for r in rest)
        for r in rest:
            share[r.layer] = left * (r.roofline_latency_ms / roof if roof > 0 else 1 / len(rest))
    operators = []
    sources = set()
    for r in estimate.layers:
        if r.layer in measured:
            latency, prov = measured[r.layer], "measured"
        elif r.layer in share:
            latency, prov = share[r.layer], "estimated"
        else:
            latency, prov = r.roofline_latency_ms, "analytic"
        sources.add(prov)
        operators.append({"operator": r.layer, "latency_ms": float(latency),
                          "memory_kb": float((r.parameter_bytes + r.activation_bytes) / 1000.0),
                          "provenance": prov})
    total_latency = float(sum(o["latency_ms"] for o in operators))
    total_kb = float(sum(o["memory_kb"] for o in operators))
    bandwidth = (total_kb * 1000.0 / 1e6) / max(total_latency / 1000.0, 1e-9)
    utilization = None
    if stream_rate_fps is not None:
        utilization = total_latency / (1000.0 / float(stream_rate_fps))

    def kb_at(name: str) -> float:
        p = PRECISIONS[name]
        return float(sum(r.parameter_count * p.weight_bytes + r.output_elements * p.activation_bytes
                         for r in estimate.layers) / 1000.0)

    ec = estimate.edge_constraints or {}
    cache = ec.get("cache_sensitivity")
    cache_reason = ec.get("cache_sensitivity_reason")
    return {
        "operator_profile": operators,
        "totals": {
            "latency_ms": total_latency,
            "memory_kb": total_kb,
            "estimated_bandwidth_mb_s": float(bandwidth),
            "stream_utilization": None if utilization is None else float(utilization),
            "provenance": ("measured" if measured_latency_ms is not None else
                           "+".join(sorted(sources)) if sources else "analytic"),
        },
        "precision_tradeoffs": {
            "fp32_memory_kb": kb_at("fp32"),
            "fp16_memory_kb": kb_at("fp16"),
            "int8_memory_kb": kb_at("int8"),
            "note": QUANTIZATION_NOTE,
        },
        "edge_constraints": {
            "cache_sensitivity": f"{cache}: {cache_reason}" if cache and cache_reason else
            (cache or "unknown"),
            "bottleneck": ec.get("bottleneck_reason") or ec.get("bottleneck") or estimate.bound,
        },
    }


def write_hardware_profile_artifacts(profile: Mapping[str, Any], output_dir) -> dict[str, str]:
    """Write ``operator_profile.csv`` and ``hardware_totals.csv`` (UTF-8, atomically)."""
    import pandas as pd

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    ops = pd.DataFrame(list(profile["operator_profile"]))
    if ops.empty:
        ops = pd.DataFrame(columns=["operator", "latency_ms", "memory_kb"])
    totals = pd.DataFrame([dict(profile["totals"])])
    return {
        "operator_profile_csv": str(write_csv(out / OPERATOR_CSV, ops)),
        "hardware_totals_csv": str(write_csv(out / TOTALS_CSV, totals)),
    }


@dataclass
class HardwareProfile:
    """Seed 000's device budget: a memory limit (MB, decimal) and a compute budget (ops)."""

    memory_limit_mb: float
    compute_budget: float


def estimate_batch_memory_mb(batch_size: int, feature_count: int, bytes_per_feature: float = 8) -> float:
    """Memory of a batch in MB (decimal): batch x features x bytes per feature (8 = fp64)."""
    return float(batch_size) * float(feature_count) * float(bytes_per_feature) / 1e6


def auto_adjust_batch_size(initial_batch: int, feature_count: int, profile: HardwareProfile) -> int:
    """Halve ``initial_batch`` until the batch fits ``profile.memory_limit_mb`` (never below 1)."""
    batch = check_batch_size(initial_batch)
    while batch > 1 and estimate_batch_memory_mb(batch, feature_count) > profile.memory_limit_mb:
        batch //= 2
    return max(1, batch)


def compute_utilization(operations: float, profile: HardwareProfile) -> float:
    """``operations`` as a fraction of ``profile.compute_budget``, clamped to [0, 1]."""
    budget = float(profile.compute_budget)
    if budget <= 0:
        return 1.0 if operations > 0 else 0.0
    return float(min(1.0, max(0.0, float(operations) / budget)))


__all__ = [
    "HardwareProfile", "auto_adjust_batch_size", "build_hardware_profile_table",
    "compute_utilization", "estimate_batch_memory_mb", "estimate_layerwise_stats",
    "precision_tradeoff_table", "save_hardware_artifacts", "summarize_hardware",
    "write_hardware_profile_artifacts",
]

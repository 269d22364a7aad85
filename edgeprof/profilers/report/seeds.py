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

from collections import OrderedDict
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
#: ``layers=`` choices of :func:`estimate_layerwise_stats`
LAYER_SETS = ("all", "seed")
#: module types the seeds' layer-wise table has rows for
SEED_LAYER_TYPES = ("Conv2d", "Linear")


def estimate_layerwise_stats(model, batch_size: int, input_shape: tuple[int, ...] = (1, 28, 28),
                             activation_bytes_per_value: int | None = None, *,
                             layers: str = "all"):
    """Layer-by-layer output elements, parameter bytes, activation bytes and MACs.

    ``input_shape`` excludes the batch dimension (seed form). Bytes use the model's own
    parameter element size (4 for an fp32 model), activations the same unless
    ``activation_bytes_per_value`` is given.

    ``layers="all"`` (the default): one row per layer that does work (for SmallCNN also the
    ReLU and pooling rows), as a DataFrame with the seed's columns ``layer,
    output_elements, parameter_bytes, activation_bytes, macs`` followed by ``op_type,
    output_shape, input_bytes, parameter_count, other_ops, flops``.
    ``layers="seed"``: the seeds' table exactly -- only the ``nn.Conv2d`` and ``nn.Linear``
    layers (SmallCNN: conv1, conv2, classifier) and only the seed's five columns, so
    :func:`summarize_hardware` on it gives the seeds' totals.
    """
    import pandas as pd
    import torch

    from edgeprof.profilers.estimate.torch_graph import walk_torch

    if layers not in LAYER_SETS:
        raise InputSpecError(f"layers must be one of {', '.join(LAYER_SETS)}, got {layers!r}")
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
    if layers == "seed":
        rows = [r for r in rows if r["op_type"] in SEED_LAYER_TYPES]
        if not rows:
            raise InputSpecError("layers='seed' keeps only nn.Conv2d and nn.Linear layers, and "
                                 "this model has none; use layers='all'")
        return pd.DataFrame(rows, columns=list(LAYERWISE_COLUMNS))
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


#: seed 000's operators, in order: a tabular pipeline of ``feature_count`` features
SEED_OPERATORS = ("input_normalization", "linear_projection", "activation", "decision_head")
#: provenance of a whole-model latency figure -> provenance of the per-row shares of it
_SHARE_PROVENANCE = "estimated"


def seed_tabular_model(feature_count: int, hidden_features: int | None = None):
    """Seed 000's pipeline as a torch module with the seed's operator names.

    ``input_normalization`` (per-feature scale and shift: ``BatchNorm1d`` in eval),
    ``linear_projection`` (``Linear(feature_count, hidden_features)``; the seed does not
    give the width, so it defaults to ``feature_count``), ``activation`` (ReLU) and
    ``decision_head`` (``Linear(hidden_features, 1)``).
    """
    from torch import nn

    for name, v in (("feature_count", feature_count), ("hidden_features", hidden_features)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise InputSpecError(f"{name} must be a positive integer, got {v!r}")
    hidden = hidden_features or feature_count
    return nn.Sequential(OrderedDict(zip(SEED_OPERATORS, (
        nn.BatchNorm1d(feature_count), nn.Linear(feature_count, hidden), nn.ReLU(),
        nn.Linear(hidden, 1)))))


def _seed_form_estimate(feature_count, batch_size, target, precision: str,
                        hidden_features: int | None) -> Estimate:
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model

    check_batch_size(batch_size)
    model = seed_tabular_model(feature_count, hidden_features)
    handle = resolve_model(model, input_shapes=[[int(batch_size), int(feature_count)]])
    if isinstance(target, str):
        from edgeprof.targets import get_target

        target = get_target(target)
    return estimate_model(handle, target, precision)


def build_hardware_profile_table(estimate: Estimate | int | None = None, operator_latency_ms=None,
                                 stream_rate_fps: float | None = None, *,
                                 latency_ms: float | None = None,
                                 latency_provenance: str | None = None,
                                 measured_latency_ms: float | None = None,
                                 feature_count: int | None = None, batch_size: int | None = None,
                                 stream_interval_ms: float | None = None,
                                 target: Any = "host", precision: str = "fp32",
                                 hidden_features: int | None = None) -> dict[str, Any]:
    """Seed 000's hardware profile, built from an :class:`Estimate`.

    Two call forms:

    * ``build_hardware_profile_table(estimate, operator_latency_ms=None,
      stream_rate_fps=None, latency_ms=None, latency_provenance=None)`` -- any model's
      estimate (edgeprof's form);
    * ``build_hardware_profile_table(feature_count, batch_size, stream_interval_ms)`` (seed
      000's form, positional or by keyword) -- the estimate of seed 000's four-operator
      tabular pipeline (:func:`seed_tabular_model`) on ``target`` (default ``host``) at
      ``precision``. Its latencies are that model's roofline on the target, provenance
      ``analytic``, not the seed's fixed per-sample constants.

    ``operator_profile`` has one ``{operator, latency_ms, memory_kb, provenance}`` per
    estimate row: the measured latency where ``operator_latency_ms`` (a mapping layer -> ms,
    or the DataFrame a backend's ``operator_profile`` returns, summed per ``layer``) has
    one, else the row's roofline latency. With a whole-model figure ``latency_ms`` (and its
    ``latency_provenance``: ``measured``, ``predicted``, ``estimated`` ...; a summary's
    ``figures["latency_ms"]`` gives both) the rows without a per-operator measurement share
    what is left of it in proportion to their roofline latency (provenance ``estimated``),
    and the total is that figure with its provenance. ``measured_latency_ms=x`` is short for
    ``latency_ms=x, latency_provenance="measured"``: pass it only for a measurement.
    ``memory_kb`` is the row's parameter plus output bytes / 1000 (the seeds' bytes moved).
    ``totals`` sums them; ``estimated_bandwidth_mb_s`` = MB / latency in s (clamped at
    1e-9 s); ``stream_utilization`` = latency / frame interval (``1 / stream_rate_fps`` or
    ``stream_interval_ms``), None without either (above 1 means the device cannot keep up;
    it is not clamped). ``precision_tradeoffs`` recomputes the same bytes at fp32, fp16 and
    int8; ``edge_constraints`` carries the estimate's sentences.
    """
    if not isinstance(estimate, Estimate):
        seed_args = (estimate, operator_latency_ms, stream_rate_fps)
        if isinstance(estimate, (int, float)) and not isinstance(estimate, bool) or \
                estimate is None and feature_count is not None:
            if feature_count is None:  # positional seed form
                feature_count, batch_size, stream_interval_ms = (
                    seed_args[0], seed_args[1] if batch_size is None else batch_size,
                    seed_args[2] if stream_interval_ms is None else stream_interval_ms)
            if batch_size is None:
                raise InputSpecError("seed 000's form needs feature_count, batch_size and "
                                     "stream_interval_ms, e.g. (784, 32, 100)")
            estimate = _seed_form_estimate(feature_count, batch_size, target, precision,
                                           hidden_features)
            operator_latency_ms, stream_rate_fps = None, None
        else:
            raise TypeError("build_hardware_profile_table takes an Estimate (from "
                            "edgeprof.estimate or estimate_model) or seed 000's "
                            "(feature_count, batch_size, stream_interval_ms), not "
                            f"{type(estimate).__name__}")
    if stream_interval_ms is not None:
        if isinstance(stream_interval_ms, bool) or not isinstance(stream_interval_ms, (int, float)) \
                or not float(stream_interval_ms) > 0:
            raise InputSpecError(f"stream interval must be a positive number of ms, got "
                                 f"{stream_interval_ms!r}")
        if stream_rate_fps is not None:
            raise InputSpecError("give stream_rate_fps or stream_interval_ms, not both")
        stream_rate_fps = 1000.0 / float(stream_interval_ms)
    if stream_rate_fps is not None and not (float(stream_rate_fps) > 0):
        raise InputSpecError(f"stream rate must be a positive frames-per-second figure, got "
                             f"{stream_rate_fps!r}")
    if measured_latency_ms is not None:
        if latency_ms is not None:
            raise InputSpecError("give latency_ms (with its provenance) or measured_latency_ms, "
                                 "not both")
        latency_ms, latency_provenance = measured_latency_ms, "measured"
    if latency_ms is not None:
        if not (float(latency_ms) >= 0):
            raise InputSpecError(f"latency must be a non-negative number of ms, got "
                                 f"{latency_ms!r}")
        if not latency_provenance:
            raise InputSpecError("a whole-model latency needs its provenance (measured, "
                                 "predicted, estimated ...): pass latency_provenance")
    measured = _measured_by_layer(operator_latency_ms)
    rest = [r for r in estimate.layers if r.layer not in measured]
    share: dict[str, float] = {}
    if latency_ms is not None and rest:
        left = max(float(latency_ms) - sum(measured.get(r.layer, 0.0)
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
            latency, prov = share[r.layer], _SHARE_PROVENANCE
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
            "provenance": (str(latency_provenance) if latency_ms is not None else
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

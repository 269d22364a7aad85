"""Batch size and scenarios: latency and throughput per batch size, the largest batch that fits
a target's memory, and two named scenarios.

* :func:`benchmark_batch_sizes` — one benchmark per batch size (ascending); a table with
  latency per batch and per sample, throughput and peak memory. It stops cleanly at the first
  out-of-memory failure and records where (``df.attrs["stopped_at_batch"]``,
  ``df.attrs["stop_reason"]``); rows measured before stay.
  Peak memory is comparable across the rows: in one process, each row is the process's
  peak RSS while that batch ran above one baseline, the RSS before the sweep's first batch
  (after the runtime's imports). Each run's own baseline had been the RSS its predecessors
  left: the first batch paid the runtime's one-time set-up and later ones reused memory
  freed before them (small_cnn read 7.29 MB, 8.9 MB, then 1.04 MB at batch 1, 2, 4). A batch
  run in a worker process (``isolate``) starts fresh: its own figure already is that.
* :func:`find_optimal_batch_size` — the largest batch whose estimated memory (the estimate's
  ``parameter_bytes + peak_activation_bytes`` at that batch) fits the target's RAM (times
  ``memory_fraction``), optionally also meeting a latency budget (measured with a backend, or
  the roofline estimate when only an estimator is given; the provenance says which).
* Scenarios: ``single_stream`` (batch-1 latency, the figure a camera-to-answer loop sees) and
  ``offline`` (the best throughput over batch sizes, for bulk processing).

**Latency budgets.** :func:`meets_budget` compares the p90 latency when it is reported (enough
single-call samples, see ``edgeprof.profilers.measure.stats``) and the median otherwise, so a budget
is a "9 in 10 requests" promise where the data can support one.

The seed's ``auto_adjust_batch_size`` (halving until it fits) lives elsewhere; this module does
not redefine it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from edgeprof.core.backend import Backend, RunConfig
from edgeprof.core.errors import ConstraintError, InputSpecError, UserError
from edgeprof.core.results import BenchmarkResult
from edgeprof.profilers.measure.measure import benchmark_backend

BATCH_COLUMNS = [
    "batch_size", "status", "reason", "latency_ms", "latency_p90_ms", "ci_low_ms", "ci_high_ms",
    "latency_per_sample_ms", "throughput_per_s", "peak_memory_bytes", "gpu_peak_memory_bytes",
    "budget_latency_ms", "meets_budget",
]

_OOM_MARKERS = ("out of memory", "out-of-memory", "memoryerror", "cannot allocate",
                "bad_alloc", "signal sigkill")


# ------------------------------------------------------------------------- validation
def check_batch_sizes(batch_sizes: Any) -> list[int]:
    """Positive integer batch sizes, deduplicated and ascending (InputSpecError otherwise)."""
    if isinstance(batch_sizes, (str, bytes)) or not hasattr(batch_sizes, "__iter__"):
        batch_sizes = [batch_sizes]
    out = []
    for b in batch_sizes:
        if isinstance(b, bool) or not isinstance(b, int) or b <= 0:
            raise InputSpecError(f"batch size must be a positive integer, got {b!r}; give "
                                 "sizes like 1, 2, 4, 8")
        out.append(b)
    if not out:
        raise InputSpecError("no batch sizes given; give at least one positive integer")
    return sorted(set(out))


def check_budget(latency_budget_ms: Any) -> float | None:
    """A latency budget in ms: a positive finite number, or None (UserError otherwise)."""
    if latency_budget_ms is None:
        return None
    if isinstance(latency_budget_ms, str):
        try:
            latency_budget_ms = float(latency_budget_ms)
        except ValueError:
            raise UserError(f"latency budget must be a number of milliseconds, got "
                            f"'{latency_budget_ms}'") from None
    if isinstance(latency_budget_ms, bool) or not isinstance(latency_budget_ms, (int, float)) \
            or not math.isfinite(latency_budget_ms) or latency_budget_ms <= 0:
        raise UserError(f"latency budget must be a positive number of milliseconds, got "
                        f"{latency_budget_ms!r}")
    return float(latency_budget_ms)


# ----------------------------------------------------------------------------- budget
def budget_latency_ms(stats_or_result: Any) -> float | None:
    """The latency a budget is checked against: p90 when reported, else the median."""
    stats = getattr(stats_or_result, "stats", stats_or_result)
    if stats is None:
        return None
    return stats.p90_ms if stats.p90_ms is not None else stats.median_ms


def meets_budget(stats_or_result: Any, latency_budget_ms: Any) -> bool | None:
    """Whether a measurement meets ``latency_budget_ms`` (p90 if present, else median).

    None when there is no measurement or no budget.
    """
    budget = check_budget(latency_budget_ms)
    lat = budget_latency_ms(stats_or_result)
    if budget is None or lat is None:
        return None
    return lat <= budget


def is_out_of_memory(result: BenchmarkResult) -> bool:
    """A failed result whose reason says the memory ran out (MemoryError, CUDA OOM, SIGKILL)."""
    if result.status != "failed" or not result.reason:
        return False
    reason = result.reason.lower()
    return any(m in reason for m in _OOM_MARKERS)


# ------------------------------------------------------------------ batch-size sweep
def _row(batch: int, result: BenchmarkResult, budget: float | None) -> dict[str, Any]:
    s = result.stats
    lat = s.median_ms if s else None
    return {
        "batch_size": batch, "status": result.status, "reason": result.reason,
        "latency_ms": lat, "latency_p90_ms": s.p90_ms if s else None,
        "ci_low_ms": s.ci_low_ms if s else None, "ci_high_ms": s.ci_high_ms if s else None,
        "latency_per_sample_ms": lat / batch if lat is not None else None,
        "throughput_per_s": batch * 1e3 / lat if lat else None,
        "peak_memory_bytes": result.peak_memory_bytes,  # this process's RSS
        # on a GPU: torch's CUDA allocator peak (None on a CPU)
        "gpu_peak_memory_bytes": (result.memory_detail or {}).get("cuda_allocator_peak_bytes"),
        "budget_latency_ms": budget_latency_ms(result),
        "meets_budget": meets_budget(result, budget) if budget is not None else None,
    }


def _from_sweep_baseline(result: BenchmarkResult, sweep_baseline: list[int]) -> None:
    """A run in this process: its peak memory above the sweep's baseline (the first such
    run's), so each row counts the memory the runtime kept from earlier rows, as a fresh
    process running that batch alone would."""
    import os

    detail = result.memory_detail or {}
    state = ((result.environment or {}).get("conditions") or {}).get("process_state") or {}
    if state.get("pid") != os.getpid() or detail.get("peak_rss_bytes") is None \
            or detail.get("baseline_rss_bytes") is None:
        return  # a worker process's run, or no memory measured
    if not sweep_baseline:
        sweep_baseline.append(int(detail["baseline_rss_bytes"]))
    result.peak_memory_bytes = max(0, int(detail["peak_rss_bytes"]) - sweep_baseline[0])
    result.memory_detail = {**detail, "sweep_baseline_rss_bytes": sweep_baseline[0],
                            "baseline": "RSS before the first batch of the sweep in this "
                                        "process, after the runtime's modules were imported"}


def benchmark_batch_sizes(backend: Backend, model: Any, batch_sizes: Sequence[int],
                          config: RunConfig | None = None, *, latency_budget_ms: Any = None,
                          stop_over_budget: bool = False, results: list | None = None,
                          plugins_file: Any = None, registry: Any = None):
    """Benchmark ``model`` at each batch size (ascending); returns a pandas DataFrame.

    Each size is one ``measure()`` (``edgeprof.profilers.measure.measure``), isolated when
    ``config`` asks for it (``plugins_file`` then tells the worker where ``backend`` is).
    Columns: ``BATCH_COLUMNS``. Stops at the first out-of-memory failure (that row is kept,
    ``df.attrs["stopped_at_batch"]`` and ``df.attrs["stop_reason"]`` say where and why) and,
    with ``stop_over_budget``, after the first batch over the latency budget. Other failures
    are recorded and the sweep goes on; a batch the model file says it cannot take (a fixed
    batch dimension) is not run, its row is ``unsupported`` with the reason.
    ``df.attrs["failed_batches"]`` lists the rows without a measurement. Pass a list as
    ``results`` to receive the BenchmarkResult of each row.
    """
    import pandas as pd

    from edgeprof.core.models import ModelHandle, check_declared_inputs, resolve_model

    sizes = check_batch_sizes(batch_sizes)
    budget = check_budget(latency_budget_ms)
    config = config or RunConfig()
    handle = model if isinstance(model, ModelHandle) else resolve_model(model)
    rows: list[dict[str, Any]] = []
    stopped_at = stop_reason = None
    sweep_baseline: list[int] = []  # the RSS before the first batch run in this process
    for b in sizes:
        cfg = replace(config, batch_size=b)
        at_b = handle.with_batch(b)
        try:  # a batch the model file says it cannot take is not run: its row says why
            check_declared_inputs(at_b)
        except InputSpecError as e:
            result = BenchmarkResult(backend=backend.name, model=handle.spec,
                                     requested_precision=config.precision,
                                     executed_precision=None, status="unsupported",
                                     reason=str(e), batch_size=b)
        else:
            result = benchmark_backend(backend, at_b, cfg, plugins_file=plugins_file,
                                       registry=registry)
        _from_sweep_baseline(result, sweep_baseline)
        if results is not None:
            results.append(result)
        rows.append(_row(b, result, budget))
        if is_out_of_memory(result):
            stopped_at, stop_reason = b, f"out of memory at batch {b}: {result.reason}"
            break
        if stop_over_budget and rows[-1]["meets_budget"] is False:
            stopped_at, stop_reason = b, (f"batch {b} is over the {budget:g} ms latency budget "
                                          f"({rows[-1]['budget_latency_ms']:.3g} ms)")
            break
    df = pd.DataFrame(rows, columns=BATCH_COLUMNS)
    df.attrs["memory_baseline"] = (
        "peak RSS while each batch ran, above one baseline: the RSS before the first batch "
        "in this process (after the runtime's imports; its one-time set-up is in every row)"
        if sweep_baseline
        else "peak RSS of each batch's fresh worker process above its post-import baseline")
    df.attrs.update(backend=backend.name, model=handle.spec, precision=config.precision,
                    latency_budget_ms=budget, stopped_at_batch=stopped_at,
                    stop_reason=stop_reason, requested_batch_sizes=sizes,
                    failed_batches=[r["batch_size"] for r in rows if r["status"] != "ok"])
    return df


# ------------------------------------------------------------- memory-based choice
@dataclass
class BatchChoice:
    """The chosen batch size and why."""

    batch_size: int
    memory_bytes: float  # estimated weights + peak activations at this batch
    memory_limit_bytes: float
    latency_ms: float | None = None
    latency_provenance: str | None = None  # measured | estimated
    meets_budget: bool | None = None
    limited_by: str = "memory"  # memory | latency_budget | max_batch_size
    candidates: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from edgeprof.core.results import clean

        return clean(self.__dict__)


def _estimator(backend_or_estimator: Any) -> Callable[..., Any]:
    """A function ``(model, target, precision, batch_size) -> Estimate``."""
    if backend_or_estimator is None:
        from edgeprof.profilers.estimate.analytic import estimate_model

        return estimate_model
    if hasattr(backend_or_estimator, "estimate"):
        return backend_or_estimator.estimate
    if callable(backend_or_estimator):
        return backend_or_estimator
    raise UserError(f"expected a backend, an estimator callable or None, got "
                    f"{type(backend_or_estimator).__name__}")


def _memory_limit(target: Any, memory_fraction: float) -> float:
    if isinstance(target, (int, float)) and not isinstance(target, bool):
        ram = float(target)
    else:
        ram = getattr(getattr(target, "ram", None), "value", None)
        if ram is None:
            raise UserError(f"target {getattr(target, 'id', target)!r} has no ram figure; "
                            "give a target with ram or a number of bytes")
    if not 0 < memory_fraction <= 1:
        raise UserError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}")
    return float(ram) * memory_fraction


def _candidates(max_batch_size: int, candidates: Sequence[int] | None) -> list[int]:
    if candidates is not None:
        return check_batch_sizes(list(candidates))
    max_batch_size = check_batch_sizes([max_batch_size])[0]
    out = [2 ** i for i in range(max_batch_size.bit_length())]  # powers of two up to it
    if out[-1] != max_batch_size:
        out.append(max_batch_size)
    return out


def find_optimal_batch_size(backend_or_estimator: Any, model: Any, target: Any, *,
                            precision: str = "fp32", latency_budget_ms: Any = None,
                            max_batch_size: int = 1024, candidates: Sequence[int] | None = None,
                            memory_fraction: float = 1.0, config: RunConfig | None = None
                            ) -> BatchChoice:
    """The largest batch whose estimated memory fits ``target`` (and meets the budget).

    ``backend_or_estimator``: a Backend (its ``estimate`` gives the memory; with a latency
    budget it also *measures* candidates on this host), a callable
    ``(model, target, precision, batch_size=...) -> Estimate``, or None for
    ``edgeprof.profilers.estimate.analytic.estimate_model``. ``target`` is a Target (``ram.value``
    bytes) or a number of bytes. Memory per batch = ``parameter_bytes +
    peak_activation_bytes`` of the estimate at that batch; it grows with the batch, so the
    candidates (powers of two up to ``max_batch_size``, or ``candidates``) are bisected.
    Raises ``ConstraintError`` when even the smallest candidate does not fit or none meets
    the budget.
    """
    budget = check_budget(latency_budget_ms)
    estimate = _estimator(backend_or_estimator)
    limit = _memory_limit(target, memory_fraction)
    cands = _candidates(max_batch_size, candidates)
    seen: dict[int, dict[str, Any]] = {}

    def need(b: int) -> dict[str, Any]:
        if b not in seen:
            est = estimate(model, target, precision, batch_size=b)
            mem = float(est.parameter_bytes) + float(est.peak_activation_bytes)
            seen[b] = {"batch_size": b, "memory_bytes": mem, "fits": mem <= limit,
                       "estimated_latency_ms": getattr(est, "roofline_latency_ms", None)}
        return seen[b]

    if not need(cands[0])["fits"]:
        raise ConstraintError(
            f"batch {cands[0]} needs about {seen[cands[0]]['memory_bytes'] / 1e6:.1f} MB "
            f"(weights + peak activations) but the target allows {limit / 1e6:.1f} MB; use a "
            "smaller precision, a smaller model or a target with more memory")
    lo, hi = 0, len(cands) - 1  # cands[lo] fits; find the last that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if need(cands[mid])["fits"]:
            lo = mid
        else:
            hi = mid - 1
    best = lo
    limited_by = "memory" if best < len(cands) - 1 else "max_batch_size"
    choice = BatchChoice(batch_size=cands[best], memory_bytes=seen[cands[best]]["memory_bytes"],
                         memory_limit_bytes=limit, limited_by=limited_by)

    if budget is not None:
        fitting = cands[: best + 1]
        if isinstance(backend_or_estimator, Backend):
            df = benchmark_batch_sizes(backend_or_estimator, model, fitting,
                                       replace(config or RunConfig(), precision=precision),
                                       latency_budget_ms=budget, stop_over_budget=True)
            ok = df[df["meets_budget"] == True]  # noqa: E712 - pandas elementwise
            for _, r in df.iterrows():
                need(int(r["batch_size"])).update(measured_latency_ms=r["budget_latency_ms"],
                                                 meets_budget=r["meets_budget"],
                                                 status=r["status"])
            provenance = "measured"
            if df.attrs.get("stopped_at_batch") and "out of memory" in str(df.attrs.get("stop_reason")):
                choice.notes.append(df.attrs["stop_reason"])
            lat_col = "budget_latency_ms"
        else:
            import pandas as pd

            rows = [need(b) for b in fitting]
            for r in rows:
                r["meets_budget"] = (r["estimated_latency_ms"] is not None
                                     and r["estimated_latency_ms"] <= budget)
            df = pd.DataFrame(rows)
            ok = df[df["meets_budget"]]
            provenance = "estimated"
            lat_col = "estimated_latency_ms"
            choice.notes.append("latency is the analytic roofline estimate (a lower bound), "
                                "not a measurement; pass a backend to measure it")
        if ok.empty:
            raise ConstraintError(
                f"no batch size meets the {budget:g} ms latency budget (batch {fitting[0]}: "
                f"{df.iloc[0][lat_col]!s} ms, {provenance}); relax the budget or use a faster "
                "backend or precision")
        top = ok.iloc[-1]
        b = int(top["batch_size"])
        if b < choice.batch_size:
            choice.limited_by = "latency_budget"
        choice.batch_size = b
        choice.memory_bytes = seen[b]["memory_bytes"]
        choice.latency_ms = float(top[lat_col])
        choice.latency_provenance = provenance
        choice.meets_budget = True
    choice.candidates = [seen[b] for b in sorted(seen)]
    return choice


# --------------------------------------------------------------------------- scenarios
@dataclass
class ScenarioResult:
    scenario: str  # single_stream | offline
    batch_size: int
    latency_ms: float | None
    budget_latency_ms: float | None
    throughput_per_s: float | None
    meets_budget: bool | None
    status: str
    reason: str | None = None
    table: Any = None  # DataFrame of the sweep (offline)
    result: BenchmarkResult | None = None

    def to_dict(self) -> dict[str, Any]:
        from edgeprof.core.results import clean

        d = {k: v for k, v in self.__dict__.items() if k not in ("table", "result")}
        if self.table is not None:
            d["table"] = self.table.to_dict(orient="records")
        return clean(d)


def single_stream(backend: Backend, model: Any, config: RunConfig | None = None, *,
                  latency_budget_ms: Any = None) -> ScenarioResult:
    """Batch-1 latency (one request at a time); budget checked on p90 if present, else median."""
    from edgeprof.core.models import ModelHandle, resolve_model

    budget = check_budget(latency_budget_ms)
    handle = model if isinstance(model, ModelHandle) else resolve_model(model)
    cfg = replace(config or RunConfig(), batch_size=1)
    r = benchmark_backend(backend, handle.with_batch(1), cfg)
    return ScenarioResult("single_stream", 1, r.latency_ms, budget_latency_ms(r),
                          r.throughput_per_s, meets_budget(r, budget) if budget else None,
                          r.status, r.reason, result=r)


def offline(backend: Backend, model: Any, config: RunConfig | None = None, *,
            batch_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
            latency_budget_ms: Any = None) -> ScenarioResult:
    """Throughput at the best batch size of a sweep (stops at out-of-memory); with a budget,
    only batches whose latency meets it count."""
    budget = check_budget(latency_budget_ms)
    results: list[BenchmarkResult] = []
    df = benchmark_batch_sizes(backend, model, batch_sizes, config, latency_budget_ms=budget,
                               results=results)
    ok = df[(df["status"] == "ok") & df["throughput_per_s"].notna()]
    if budget is not None:
        ok = ok[ok["meets_budget"] == True]  # noqa: E712
    if ok.empty:
        why = df.attrs.get("stop_reason") or "; ".join(
            str(r) for r in df["reason"].dropna().unique()) or "no batch size met the budget"
        return ScenarioResult("offline", int(df["batch_size"].iloc[0]), None, None, None,
                              False if budget else None, "failed", why, table=df)
    i = int(ok["throughput_per_s"].astype(float).idxmax())
    row = df.loc[i]
    return ScenarioResult("offline", int(row["batch_size"]), float(row["latency_ms"]),
                          row["budget_latency_ms"], float(row["throughput_per_s"]),
                          row["meets_budget"] if budget else None, "ok",
                          df.attrs.get("stop_reason"), table=df, result=results[i])


SCENARIOS: dict[str, Callable[..., ScenarioResult]] = {"single_stream": single_stream,
                                                       "offline": offline}


def run_scenario(name: str, backend: Backend, model: Any, config: RunConfig | None = None,
                 **kwargs: Any) -> ScenarioResult:
    """Run a named scenario (``single_stream`` or ``offline``)."""
    from edgeprof.core.errors import UnknownNameError

    if name not in SCENARIOS:
        raise UnknownNameError("scenario", name, SCENARIOS)
    return SCENARIOS[name](backend, model, config, **kwargs)


__all__ = ["BATCH_COLUMNS", "BatchChoice", "SCENARIOS", "ScenarioResult",
           "benchmark_batch_sizes", "budget_latency_ms", "check_batch_sizes", "check_budget",
           "find_optimal_batch_size", "is_out_of_memory", "meets_budget", "offline",
           "run_scenario", "single_stream"]

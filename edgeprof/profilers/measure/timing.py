"""Timing a callable: the plan (how long, how to time), the loop (first call, warm-up, steady
state, blocks of calls when a call is shorter than ~1000 clock reads) and the warnings about
the measurement itself. :mod:`edgeprof.profilers.measure.harness` runs it on a prepared model
(phases 2-4 of its docstring); this module knows nothing of backends or models.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UserError
from edgeprof.core.results import WarningRecord

DEFAULT_MIN_RUNS = 100
DEFAULT_MIN_TIME_S = 1.0
DEFAULT_MAX_TIME_S = 10.0
DEFAULT_CI_LEVEL = 0.95
MAX_TIMER_OVERHEAD = 0.001  # clock cost below 0.1% of a timed sample
MAX_BLOCK_SIZE = 1_000_000
WARMUP_TOLERANCE = 0.05
WARMUP_MIN_TIME_S = 0.05
WARMUP_MAX_TIME_S = 3.0
WARMUP_WINDOW_S = 0.02
CALIBRATION_TIME_S = 0.005

#: warning thresholds
HIGH_CV = 0.10  # std / mean
HIGH_IQR = 0.10  # IQR / median
SLOW_FIRST_FACTOR = 5.0  # first inference vs steady median
SPEED_DRIFT = 0.10  # medians of the steady state's thirds, largest / smallest - 1
MIN_DRIFT_SAMPLES = 9  # three per third


# ----------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class TimingPlan:
    """How long and how to time; built from a RunConfig by :func:`plan_from_config`."""

    min_runs: int = DEFAULT_MIN_RUNS
    min_time_s: float = DEFAULT_MIN_TIME_S
    max_time_s: float = DEFAULT_MAX_TIME_S
    warmup: int | None = None  # None: adaptive
    warmup_tolerance: float = WARMUP_TOLERANCE
    warmup_min_time_s: float = WARMUP_MIN_TIME_S
    warmup_max_time_s: float = WARMUP_MAX_TIME_S
    ci_width: float | None = None
    ci_level: float = DEFAULT_CI_LEVEL
    block_size: int | None = None  # None: chosen from the call time
    max_timer_overhead: float = MAX_TIMER_OVERHEAD


def _number(name: str, value: Any, *, integer: bool = False, minimum: float | None = None,
            strict: bool = False, maximum: float | None = None) -> Any:
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and not isinstance(value, int)) or not math.isfinite(value):
        raise UserError(f"{name} must be {kind}, got {value!r}")
    if minimum is not None and (value < minimum or (strict and value == minimum)):
        op = ">" if strict else ">="
        raise UserError(f"{name} must be {op} {minimum:g}, got {value!r}")
    if maximum is not None and value > maximum:
        raise UserError(f"{name} must be <= {maximum:g}, got {value!r}")
    return value


def plan_from_config(config: RunConfig) -> TimingPlan:
    """Validate the timing knobs of ``config`` (UserError naming the bad one) into a plan."""
    o = {k: v for k, v in asdict(config.harness_options).items() if v is not None}
    # messages name the flag, then the RunConfig field (the Python API's name) in brackets
    min_runs = DEFAULT_MIN_RUNS if config.runs is None else _number(
        "--runs (runs)", config.runs, integer=True, minimum=1)
    cap = None if config.max_time_s is None else float(_number(
        "--max-time (max_time_s)", config.max_time_s, minimum=0, strict=True))
    # --max-time alone, below the default --min-time, lowers the minimum to it
    min_time = (min(DEFAULT_MIN_TIME_S, cap if cap is not None else DEFAULT_MIN_TIME_S)
                if config.min_time_s is None else float(_number(
                    "--min-time (min_time_s)", config.min_time_s, minimum=0)))
    max_time = max(DEFAULT_MAX_TIME_S, min_time) if cap is None else cap
    if max_time < min_time:
        raise UserError(f"--max-time {max_time:g} s is below --min-time {min_time:g} s "
                        "(max_time_s < min_time_s); raise --max-time or lower --min-time")
    warmup = None if config.warmup is None else _number("--warmup (warmup)", config.warmup,
                                                          integer=True, minimum=0)
    ci_width = o.get("ci_width")
    if ci_width is not None:
        ci_width = float(_number("harness.ci_width", ci_width, minimum=0, strict=True))
    block = o.get("block_size")
    if block is not None:
        block = _number("harness.block_size", block, integer=True, minimum=1)
    wmax_default = min(WARMUP_MAX_TIME_S, 0.3 * max_time)
    return TimingPlan(
        min_runs=min_runs, min_time_s=min_time, max_time_s=max_time, warmup=warmup,
        warmup_tolerance=float(_number("harness.warmup_tolerance",
                                       o.get("warmup_tolerance", WARMUP_TOLERANCE), minimum=0)),
        warmup_min_time_s=float(_number("harness.warmup_min_time_s",
                                        o.get("warmup_min_time_s", min(WARMUP_MIN_TIME_S,
                                                                       wmax_default)),
                                        minimum=0)),
        warmup_max_time_s=float(_number("harness.warmup_max_time_s",
                                        o.get("warmup_max_time_s", wmax_default), minimum=0)),
        ci_width=ci_width,
        ci_level=float(_number("harness.ci_level", o.get("ci_level", DEFAULT_CI_LEVEL),
                               minimum=0, strict=True, maximum=0.999)),
        block_size=block,
        max_timer_overhead=float(_number("harness.max_timer_overhead",
                                         o.get("max_timer_overhead", MAX_TIMER_OVERHEAD),
                                         minimum=0, strict=True)),
    )


# --------------------------------------------------------------------------- timing
@functools.lru_cache(maxsize=1)
def timer_overhead_ns() -> float:
    """Cost of one ``perf_counter_ns()`` read in this process (best of 5 x 1000 reads)."""
    clock = time.perf_counter_ns
    best = math.inf
    for _ in range(5):
        t0 = clock()
        for _ in range(1000):
            clock()
        best = min(best, (clock() - t0) / 1000)
    return max(best, 1.0)


def block_size_for(call_ns: float, overhead_ns: float,
                   max_overhead: float = MAX_TIMER_OVERHEAD) -> int:
    """Calls per timed sample so that one clock read is under ``max_overhead`` of the sample."""
    if call_ns <= 0:
        return MAX_BLOCK_SIZE
    k = math.ceil(overhead_ns / (max_overhead * call_ns))
    return int(min(MAX_BLOCK_SIZE, max(1, k)))


@dataclass
class Timing:
    """What :func:`time_callable` measured (nanoseconds per call unless said otherwise)."""

    first_ns: int
    warmup_runs: int  # calls after the first, before the steady state
    warmup_time_s: float
    warmup_settled: bool | None  # None: fixed warm-up count
    block_size: int
    samples_ns: list[float]  # per call (block means when block_size > 1)
    steady_calls: int
    steady_time_s: float
    stop_reason: str  # "min_runs_and_time" | "ci_width" | "max_time"
    timer_overhead_ns: float
    ci_rel_width: float | None = None
    warmup_medians_ns: list[float] = field(default_factory=list)


def _timed_sampler(run: Callable[[Any], Any], inputs: Any, sync: Callable[[], None] | None
                   ) -> Callable[[int], int]:
    """A function ``sample(k) -> ns`` timing ``k`` calls (and one sync) as one block."""
    clock = time.perf_counter_ns

    if sync is None:
        def sample(k: int) -> int:
            if k == 1:
                t0 = clock()
                run(inputs)
                return clock() - t0
            r = range(k)
            t0 = clock()
            for _ in r:
                run(inputs)
            return clock() - t0
    else:
        def sample(k: int) -> int:
            if k == 1:
                t0 = clock()
                run(inputs)
                sync()
                return clock() - t0
            r = range(k)
            t0 = clock()
            for _ in r:
                run(inputs)
            sync()
            return clock() - t0
    return sample


def time_callable(run: Callable[[Any], Any], inputs: Any = None, *,
                  sync: Callable[[], None] | None = None,
                  plan: TimingPlan | None = None) -> Timing:
    """Time ``run(inputs)``: first call, warm-up, steady state (see the module docstring)."""
    from edgeprof.profilers.measure.stats import relative_ci_width

    plan = plan or TimingPlan()
    overhead = timer_overhead_ns()
    sample = _timed_sampler(run, inputs, sync)
    clock = time.perf_counter_ns

    # 1. first inference
    first = sample(1)

    # 2. warm-up (and calibration of the call time)
    w_start = clock()
    warm_calls = 0
    settled: bool | None = None
    medians: list[float] = []
    if plan.warmup is not None:
        single = [sample(1) for _ in range(plan.warmup)]
        warm_calls = plan.warmup
        call_ns = median(single) if single else float(first)
    else:
        calib: list[int] = []
        while len(calib) < 3 or (clock() - w_start < CALIBRATION_TIME_S * 1e9
                                 and len(calib) < 1000):
            calib.append(sample(1))
        warm_calls += len(calib)
        call_ns = max(median(calib) - overhead, 1.0)
        settled = False
        k = plan.block_size or block_size_for(call_ns, overhead, plan.max_timer_overhead)
        while True:
            w = int(min(50, max(3, math.ceil(WARMUP_WINDOW_S * 1e9 / (k * call_ns)))))
            window = [sample(k) / k for _ in range(w)]
            warm_calls += w * k
            medians.append(median(window))
            call_ns = medians[-1]
            elapsed = (clock() - w_start) / 1e9
            if len(medians) >= 3 and elapsed >= plan.warmup_min_time_s:
                last = medians[-3:]
                if (max(last) - min(last)) <= plan.warmup_tolerance * min(last):
                    settled = True
                    break
            if elapsed >= plan.warmup_max_time_s:
                break
            if plan.block_size is None:
                k = block_size_for(call_ns, overhead, plan.max_timer_overhead)
    warm_s = (clock() - w_start) / 1e9

    # 3. steady state
    k = plan.block_size or block_size_for(call_ns, overhead, plan.max_timer_overhead)
    samples: list[float] = []
    append = samples.append
    min_ns, max_ns = plan.min_time_s * 1e9, plan.max_time_s * 1e9
    next_check = max(plan.min_runs, 8)
    rel_width: float | None = None
    calls = 0
    start = clock()
    while True:
        append(sample(k) / k)
        calls += k
        elapsed = clock() - start
        if len(samples) >= plan.min_runs and elapsed >= min_ns:
            if plan.ci_width is None:
                reason = "min_runs_and_time"
                break
            if len(samples) >= next_check:
                rel_width = relative_ci_width(samples, plan.ci_level)
                if rel_width is not None and rel_width <= plan.ci_width:
                    reason = "ci_width"
                    break
                next_check = int(len(samples) * 1.1) + 8
        if elapsed >= max_ns:
            reason = "max_time"
            break
    steady_s = (clock() - start) / 1e9
    if plan.ci_width is not None and reason != "ci_width":
        rel_width = relative_ci_width(samples, plan.ci_level)
    return Timing(first_ns=first, warmup_runs=warm_calls, warmup_time_s=warm_s,
                  warmup_settled=settled, block_size=k, samples_ns=samples, steady_calls=calls,
                  steady_time_s=steady_s, stop_reason=reason, timer_overhead_ns=overhead,
                  ci_rel_width=rel_width, warmup_medians_ns=medians)


# ------------------------------------------------------------------------- warnings
def thirds_medians(samples: list[float]) -> list[float] | None:
    """Medians of the first, middle and last third of the steady-state samples, in the order
    they were taken (None below :data:`MIN_DRIFT_SAMPLES`). On a machine whose speed changes
    for seconds at a time (a virtual machine whose host runs other guests, frequency
    scaling) these disagree while every sample of one third agrees with its neighbours: the
    spread checks and the median's CI, which take the samples as independent, cannot see it."""
    n = len(samples)
    if n < MIN_DRIFT_SAMPLES:
        return None
    cuts = (0, n // 3, 2 * n // 3, n)
    return [median(samples[cuts[i]:cuts[i + 1]]) for i in range(3)]


def timing_warnings(stats, timing: Timing, plan: TimingPlan) -> list[WarningRecord]:
    """Warnings about the measurement itself: spread, slow first run, caps reached."""
    out: list[WarningRecord] = []
    if stats.cv > HIGH_CV:
        out.append(WarningRecord("high_cv", f"latency varies a lot: CV {stats.cv:.1%} "
                                 f"(> {HIGH_CV:.0%}); close other programs or pin threads"))
    if stats.median_ms > 0 and stats.iqr_ms / stats.median_ms > HIGH_IQR:
        out.append(WarningRecord("high_iqr", f"latency spread is wide: IQR/median "
                                 f"{stats.iqr_ms / stats.median_ms:.1%} (> {HIGH_IQR:.0%})"))
    thirds = thirds_medians(timing.samples_ns)
    if thirds is not None and min(thirds) > 0 and max(thirds) / min(thirds) - 1 > SPEED_DRIFT:
        shown = ", ".join(f"{t / 1e6:.4g}" for t in thirds)
        out.append(WarningRecord("speed_drift", f"the machine's speed changed while timing: "
                                 f"medians of the first, middle and last third {shown} ms "
                                 f"({max(thirds) / min(thirds):.2f}x apart); the figure depends "
                                 "on when it was taken: rerun on a quiet machine, or with fewer "
                                 "threads than cores (--threads: a thread whose core the host "
                                 "takes stalls the others)"))
    first_ms = timing.first_ns / 1e6
    if stats.median_ms > 0 and first_ms > SLOW_FIRST_FACTOR * stats.median_ms:
        out.append(WarningRecord("slow_first_run", f"the first inference took {first_ms:.3g} ms,"
                                 f" {first_ms / stats.median_ms:.0f}x the steady median "
                                 f"{stats.median_ms:.3g} ms (lazy initialization); a cold start "
                                 "costs that much"))
    if timing.warmup_settled is False:
        out.append(WarningRecord("warmup_not_settled", f"timings had not settled within "
                                 f"{plan.warmup_tolerance:.0%} after {timing.warmup_time_s:.2g} s"
                                 " of warm-up; the steady state may still drift"))
    if timing.stop_reason == "max_time" and len(timing.samples_ns) < plan.min_runs:
        out.append(WarningRecord("time_cap_reached", f"stopped at the {plan.max_time_s:g} s cap "
                                 f"after {len(timing.samples_ns)} samples (asked for "
                                 f"{plan.min_runs}); raise --max-time for more"))
    if plan.ci_width is not None and timing.stop_reason != "ci_width":
        got = "no CI" if timing.ci_rel_width is None else f"{timing.ci_rel_width:.2%}"
        out.append(WarningRecord("ci_width_not_reached", f"the {plan.ci_level:.0%} CI of the "
                                 f"median is {got} of it, wider than the requested "
                                 f"{plan.ci_width:.2%}, at the {plan.max_time_s:g} s cap"))
    return out


__all__ = ["DEFAULT_CI_LEVEL", "DEFAULT_MAX_TIME_S", "DEFAULT_MIN_RUNS", "DEFAULT_MIN_TIME_S",
           "SPEED_DRIFT", "Timing", "TimingPlan", "block_size_for", "plan_from_config",
           "thirds_medians", "time_callable", "timer_overhead_ns", "timing_warnings"]

"""The timing harness: how edgeprof measures a prepared model.

A backend's ``prepare()`` gives a :class:`~edgeprof.core.backend.PreparedModel` whose
``run(inputs)`` is one inference; the harness times that callable and knows nothing of any
runtime. Phases are timed apart:

0. **build** — for a backend with a ``build``/``load`` pair (every built-in one that converts):
   ``backend.build(...)`` (convert, or find the conversion in the cache), timed apart
   (``config["harness"]["build"]``) *before* the load clock and the memory baseline, so a
   cold cache and a warm one report the same load time and peak memory. Then one untimed
   **set-up load** of the same artifact, closed at once: the runtime's lazy imports (an
   interpreter's native module, a device plugin) and one-time set-up (kernel registries) happen
   there, not in the figures, whether this process is fresh, ran the converter or ran the
   runtime before (``config["harness"]["setup"]``: its time and what the runtime kept). Then
   the heap is settled (young garbage collected, ``malloc_trim``) and the baseline taken.
1. **load** — ``backend.load(artifact)`` (or, for a backend that prepares in one step,
   ``backend.prepare(...)``, conversion included, and the record says so), wall time. The
   runtime's Python modules (``Backend.requires``) are imported *before* it, so neither the
   import time nor the libraries' memory count.
2. **first inference** — one call, timed alone.
3. **warm-up** — until timings settle: windows of calls (about 20 ms each, 3 to 50 samples)
   are timed, and warm-up ends when the medians of the last three windows agree within
   ``warmup_tolerance`` (5%), after a floor (3 windows and ``warmup_min_time_s``, 0.05 s)
   and at most ``warmup_max_time_s`` (``min(3 s, 0.3 x max_time_s)``; reaching it gives the
   ``warmup_not_settled`` warning). ``RunConfig.warmup = N`` runs exactly N calls instead.
4. **steady state** — timed samples until *both* ``runs`` samples (default 100) and
   ``min_time_s`` (default 1 s) are reached, and, when ``harness.ci_width`` is given,
   until the 95% CI of the median is narrower than that fraction of the median; always
   stopping at ``max_time_s`` (default 10 s; ``time_cap_reached`` /
   ``ci_width_not_reached`` warnings say when the cap cut it short).

Timing uses ``time.perf_counter_ns``; ``prepared.sync`` (accelerators) is called inside the
timed region. Phases 2-4 run with every existing Python object frozen (``gc.freeze``): a
collection during timing scans only what the calls made, whatever the process held before.
A call so short that reading the clock would cost more than ``max_timer_overhead`` (0.1%)
of it is timed in *blocks* of ``k`` calls; a sample is then the block's mean per call, and
p90/p99 are not reported (they would be percentiles of means).
``runs`` counts samples (single calls, or blocks when blocked).

Extra knobs travel in ``RunConfig.harness_options`` (:class:`~edgeprof.core.backend.HarnessOptions`;
``RunConfig.options`` holds the backend's own): ``ci_width``, ``ci_level``, ``block_size``
(force; 1 disables blocking), ``max_timer_overhead``, ``warmup_tolerance``,
``warmup_min_time_s``, ``warmup_max_time_s``, ``memory`` (False skips peak-memory
measurement), ``memory_interval_s`` (RSS sampling period, see ``edgeprof.profilers.measure.memory``), ``keep_samples`` (False drops ``samples_ms``), ``concurrent_workers``
(for the oversubscription check).

The harness measures and raises: a failure in a phase (``import`` of the runtime,
``prepare``, ``inference``) is raised as :class:`MeasureFailure` carrying the phase, the
backend's own error and what was measured so far (memory, notes); ``UserError`` propagates
as itself. Turning that into a status happens in one place,
``edgeprof.profilers.measure.measure``. Where the harness runs (this process, an isolated
worker) is a runner's choice (``edgeprof.profilers.measure.runners``), not the harness's.

Every record says how it was measured, in ``environment["conditions"]``: the process kind
(``inline`` or ``isolated``) and state (frameworks loaded, OS threads, measurements before),
the threads and where they came from, the thread/malloc environment variables, the CPU
affinity, the warm-up policy and timing plan, how the inputs were made and bound, the GC and
heap handling, the load policy and the build. ``environment.COMPARABLE_CONDITIONS`` names the
part that every path (profile, sweep, batch, optimize) must share for one job to give one
answer.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from edgeprof.core.backend import Backend, RunConfig
from edgeprof.core.errors import (BackendUnavailableError, EdgeprofError, UnsupportedError,
                                  UserError)
from edgeprof.core.results import BenchmarkResult, WarningRecord

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


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


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
        call_ns = _median(single) if single else float(first)
    else:
        calib: list[int] = []
        while len(calib) < 3 or (clock() - w_start < CALIBRATION_TIME_S * 1e9
                                 and len(calib) < 1000):
            calib.append(sample(1))
        warm_calls += len(calib)
        call_ns = max(_median(calib) - overhead, 1.0)
        settled = False
        k = plan.block_size or block_size_for(call_ns, overhead, plan.max_timer_overhead)
        while True:
            w = int(min(50, max(3, math.ceil(WARMUP_WINDOW_S * 1e9 / (k * call_ns)))))
            window = [sample(k) / k for _ in range(w)]
            warm_calls += w * k
            medians.append(_median(window))
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
    return [_median(samples[cuts[i]:cuts[i + 1]]) for i in range(3)]


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
                                 "on when it was taken: rerun on a quiet machine"))
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


# ------------------------------------------------------------------------ benchmark
def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, at most ``limit`` characters."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    kind = getattr(exc, "remote_type", None) or type(exc).__name__  # as raised in a worker
    text = f"{kind}: {msg}" if msg else kind
    return text if len(text) <= limit else text[: limit - 1] + "…"


class MeasureFailure(Exception):
    """A measurement that did not finish: the phase (``import``, ``prepare``, ``inference``;
    None when the process running it was lost), the error raised there, and the partial
    result (memory, notes, load time) measured before it."""

    def __init__(self, phase: str | None, error: BaseException,
                 partial: BenchmarkResult | None = None):
        super().__init__(f"{phase or 'run'} failed: {one_line(error)}")
        self.phase = phase
        self.error = error
        self.partial = partial


#: what a backend may raise that is its own failure (SystemExit included: a converter
#: calling sys.exit must not end the whole run); KeyboardInterrupt is never caught
BACKEND_FAILURES = (Exception, SystemExit)


def _json_safe(extra: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready part of a backend's ``extra`` (agreement, model path and size ...);
    live objects (modules, sessions) stay behind."""
    import json

    out: dict[str, Any] = {}
    for k, v in (extra or {}).items():
        try:
            json.dumps(v, allow_nan=False)
        except (TypeError, ValueError):
            continue
        out[k] = v
    return out


def _base_result(backend: Backend, model, config: RunConfig) -> BenchmarkResult:
    return BenchmarkResult(backend=backend.name, model=model.spec,
                           requested_precision=config.precision, executed_precision=None,
                           status="failed", batch_size=model.batch_size, device=config.device,
                           config=config.to_dict())


#: measurements this process has run (part of the process state each record carries)
_MEASUREMENTS_IN_PROCESS = 0


def _build_first(backend: Backend, model, config: RunConfig,
                 prepare: Callable[[list], Any] | None, result: BenchmarkResult
                 ) -> tuple[Callable[[list], Any] | None, dict[str, Any]]:
    """Build (convert, or find in the cache) before the memory baseline and the load clock:
    ``(what loads the built artifact, what was built)``. A backend that converts inside its
    own ``prepare()`` (no ``build``/``load`` pair) keeps it, and the record says so."""
    if prepare is not None:
        return prepare, {"when": "before this run: a built artifact was given",
                         "time_s": None, "cache_hit": None}
    cls = type(backend)
    if cls.prepare is not Backend.prepare or cls.build is Backend.build \
            or cls.load is Backend.load:
        return None, {"when": "inside the backend's own prepare(): counted in the load time",
                      "time_s": None, "cache_hit": None}
    try:
        backend.check_request(model, config)
        t0 = time.perf_counter()
        artifact = backend.build(model, config.precision, model.calibration)
        took = time.perf_counter() - t0
    except UserError:
        raise
    except BACKEND_FAILURES as e:  # a conversion's failure is the run's, as in prepare()
        raise MeasureFailure("prepare", e, result) from e
    build = {"when": "before the load clock and the memory baseline", "time_s": took,
             "cache_hit": bool(artifact.cache_hit)}
    return _ArtifactLoader(backend, model, config, artifact), build


class _ArtifactLoader:
    """``backend.load(artifact)``, as ``Backend.prepare`` does after its build: a cached
    artifact that fails to load is rebuilt once (with a warning); the cache's warnings
    become the run's. Called twice (the set-up load, then the timed one): a rebuild in the
    first is not timed, and the warnings reach the second."""

    def __init__(self, backend: Backend, model, config: RunConfig, artifact: Any):
        self.backend, self.model, self.config, self.artifact = backend, model, config, artifact
        self.warnings: list[tuple[str, str]] = []

    def __call__(self, inputs: list) -> Any:
        from edgeprof.core.backend import add_warning
        from edgeprof.core.cache import drain_warnings, evict
        from edgeprof.core.errors import BackendUnavailableError, InputSpecError

        b, config = self.backend, self.config
        try:
            prepared = b.load(self.artifact, config, inputs)
        except (BackendUnavailableError, InputSpecError):
            raise  # not the artifact's fault
        except Exception:  # noqa: BLE001 - a cached artifact that does not load is rebuilt
            if not self.artifact.cache_hit:
                raise
            rebuilt = self.artifact.path
            evict(rebuilt)
            self.artifact = b.build(self.model, config.precision, self.model.calibration)
            prepared = b.load(self.artifact, config, inputs)
            self.warnings.append(("cache_rebuilt", f"cached artifact '{rebuilt}' did not "
                                  "load; it was rebuilt"))
        self.warnings.extend(("cache", m) for m in drain_warnings())
        have = {(w.get("code"), w.get("message")) for w in prepared.warnings}
        for code, message in self.warnings:
            if (code, message) not in have:
                add_warning(prepared, code, message)
        return prepared


def _close(prepared: Any, result: BenchmarkResult) -> None:
    if prepared is not None and prepared.close is not None:
        try:
            prepared.close()
        except BACKEND_FAILURES as e:
            result.notes.append(f"closing the prepared model failed: {one_line(e)}")


def _set_up_runtime(load: Callable[[list], Any], inputs: list,
                    result: BenchmarkResult) -> dict[str, Any]:
    """One untimed load of the artifact, closed at once, before the memory baseline and the
    load clock: the runtime's lazy imports (an interpreter's native module, a device
    plugin) and its one-time set-up (kernel registries, thread pools) then happen here, so
    the figures that follow are the model's, whether this process is fresh, ran the
    converter, or ran this runtime before."""
    from edgeprof.profilers.measure.memory import current_rss

    rss0 = current_rss()
    t0 = time.perf_counter()
    try:
        prepared = load(inputs)
    except UserError:
        raise
    except BACKEND_FAILURES as e:
        raise MeasureFailure("prepare", e, result) from e
    took = time.perf_counter() - t0
    _close(prepared, result)
    del prepared
    return {"load_s": took, "rss_before_bytes": rss0}


class _FrozenGC:
    """Freeze every object that exists (``gc.freeze``) for the timed calls: a collection
    during timing then scans only what the calls made, so its cost does not depend on how
    many objects the process held before (torch, other runs). Nothing is collected first (a
    full collection costs ~0.2 s in a process holding torch); frozen garbage is freed after
    the run, when the objects are unfrozen."""

    def __enter__(self) -> _FrozenGC:
        import gc

        if hasattr(gc, "freeze"):
            gc.freeze()
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        if hasattr(gc, "unfreeze"):
            gc.unfreeze()


def _warmup_policy(plan: TimingPlan) -> dict[str, Any]:
    if plan.warmup is not None:
        return {"policy": "fixed", "calls": plan.warmup}
    return {"policy": "adaptive", "tolerance": plan.warmup_tolerance,
            "min_time_s": plan.warmup_min_time_s, "max_time_s": plan.warmup_max_time_s}


def _conditions(process: str, config: RunConfig, plan: TimingPlan, prepared: Any,
                build: dict[str, Any], heap: str, setup: dict[str, Any] | None
                ) -> dict[str, Any]:
    """How this measurement was taken (``environment["conditions"]``); the keys of
    ``environment.COMPARABLE_CONDITIONS`` are what every path shares for one job."""
    from edgeprof.profilers.measure.environment import (affinity, frameworks_loaded,
                                                        os_threads, thread_environment)

    physical = None
    try:
        from edgeprof.backends.common import physical_cores

        physical = physical_cores()
    except Exception:  # noqa: BLE001
        physical = None
    inputs = prepared.inputs
    kind = type(inputs).__name__
    if isinstance(inputs, (list, tuple)) and inputs:
        kind += " of " + ", ".join(sorted({type(x).__name__ for x in inputs}))
    elif isinstance(inputs, dict) and inputs:
        kind += " of " + ", ".join(sorted({type(x).__name__ for x in inputs.values()}))
    return {
        "process": process,
        "process_state": {"pid": os.getpid(),
                          "measurements_before": _MEASUREMENTS_IN_PROCESS,
                          "frameworks_loaded": frameworks_loaded(),
                          "os_threads": os_threads()},
        "threads": dict(prepared.threads),
        "threads_from": ("--threads" if config.threads else
                         f"the backend's default (physical cores: {physical})"),
        "thread_env": thread_environment(),
        "affinity": affinity(),
        "warmup": _warmup_policy(plan),
        "timing": {"min_runs": plan.min_runs, "min_time_s": plan.min_time_s,
                   "max_time_s": plan.max_time_s, "ci_width": plan.ci_width,
                   "block_size": plan.block_size or "auto"},
        "inputs": {"seed": config.seed, "made": "once, before loading",
                   "bound": f"by the backend at load ({kind}); the same objects every call"},
        "gc": "objects frozen while timing (collections scan only what the calls make)",
        "heap": heap,
        "load": ("timed after one untimed set-up load of the same artifact (the runtime's "
                 "lazy imports and one-time set-up are not the model's)" if setup is not None
                 else "the backend's prepare(), timed as it is (no set-up load)"),
        "build": build,
    }


def run_in_process(backend: Backend, model, config: RunConfig, *,
                   plan: TimingPlan | None = None,
                   prepare: Callable[[list], Any] | None = None,
                   process: str = "inline") -> BenchmarkResult:
    """Prepare ``model`` with ``backend`` and time it, in this process; see the module
    docstring. Returns an ``ok`` result or raises (:class:`MeasureFailure`, ``UserError``).

    ``model`` is a :class:`~edgeprof.core.models.ModelHandle` (its batch size and sample
    inputs are used); ``prepare(inputs)`` replaces ``backend.prepare(model, config, inputs)``
    (e.g. ``backend.load`` of a built artifact). Bad timing knobs raise ``UserError`` before
    anything runs. ``process`` names the kind of process this is (``inline``: the caller's;
    ``isolated``: a fresh worker), recorded in ``environment["conditions"]``.

    Order: import the runtime, **build** (convert or find in the cache: timed apart, as
    ``config["harness"]["build"]``), settle the heap, start the memory baseline, then
    **load** (the load clock), then time the calls. A cold cache and a warm one therefore
    report the same load time and peak memory.
    """
    global _MEASUREMENTS_IN_PROCESS
    from edgeprof.profilers.measure.environment import (CpuUsage, collect_environment,
                                                        environment_warnings, settle_heap)
    from edgeprof.profilers.measure.memory import DEFAULT_INTERVAL_S, PeakMemory
    from edgeprof.profilers.measure.stats import latency_stats

    plan = plan or plan_from_config(config)
    options = config.harness_options
    result = _base_result(backend, model, config)
    try:
        backend.ensure_available()
        for mod in getattr(backend, "requires", ()) or ():  # post-import memory baseline
            importlib.import_module(mod)
    except UserError:
        raise
    except BACKEND_FAILURES as e:
        raise MeasureFailure("import", e, result) from e
    # 0. build before the baseline and the load clock (a conversion is not loading)
    load, build = _build_first(backend, model, config, prepare, result)
    result.config["harness"] = {"build": build}
    inputs = model.make_inputs(config.seed)
    setup = None
    if load is not None:  # a built artifact: set the runtime up with one untimed load
        setup = _set_up_runtime(load, inputs, result)
    heap = settle_heap()
    if setup is not None:  # what the runtime kept of its first load in this process
        from edgeprof.profilers.measure.memory import current_rss

        setup["rss_kept_bytes"] = current_rss() - setup.pop("rss_before_bytes")
    result.config["harness"]["setup"] = setup
    env = collect_environment()
    mem = None
    if options.memory:
        mem = PeakMemory(float(DEFAULT_INTERVAL_S if options.memory_interval_s is None
                               else options.memory_interval_s),
                         device=config.device).start()
    prepared = None
    try:
        # 1. load / compile
        t0 = time.perf_counter()
        try:
            prepared = (load(inputs) if load is not None
                        else backend.prepare(model, config, inputs))
        except UserError:
            raise
        except BACKEND_FAILURES as e:  # the runtime's failure: measure() makes the status
            raise MeasureFailure("prepare", e, result) from e
        result.load_time_s = time.perf_counter() - t0
        result.executed_precision = prepared.executed_precision
        result.runtime, result.runtime_version = prepared.runtime, prepared.runtime_version
        result.threads = dict(prepared.threads)
        result.device = prepared.device
        result.notes.extend(prepared.notes)
        # a backend's named warnings (a rebuilt cache entry, an uninformative agreement
        # check) travel with the run like the harness's own, so tools can read the code
        result.warnings.extend(WarningRecord(w["code"], w["message"])
                               for w in getattr(prepared, "warnings", ()))
        result.extra = _json_safe(prepared.extra)
        conditions = _conditions(process, config, plan, prepared, build, heap, setup)

        # 2-4. first inference, warm-up, steady state
        cpu = CpuUsage().start()
        try:
            with _FrozenGC():
                timing = time_callable(prepared.run, prepared.inputs, sync=prepared.sync,
                                       plan=plan)
        except UserError:
            raise
        except BACKEND_FAILURES as e:
            raise MeasureFailure("inference", e, result) from e
        finally:
            cpu.stop()
            _MEASUREMENTS_IN_PROCESS += 1
    finally:
        if mem is not None:
            mem.stop()
            result.peak_memory_bytes = mem.peak_bytes
            result.memory_detail = mem.detail()
            if setup is not None:
                result.memory_detail["baseline"] = (
                    "RSS after the runtime's modules were imported, the model was built and "
                    "loaded once untimed (set-up), before the timed load")
        _close(prepared, result)

    stats = latency_stats([s / 1e6 for s in timing.samples_ns], block_size=timing.block_size,
                          ci_level=plan.ci_level, keep_samples=options.keep_samples)
    env.update(runtime=prepared.runtime, runtime_version=prepared.runtime_version,
               threads=dict(prepared.threads), conditions=conditions)
    result.status = "ok"
    result.stats = stats
    result.throughput_per_s = model.batch_size * 1e3 / stats.median_ms if stats.median_ms > 0 else None
    result.first_inference_ms = timing.first_ns / 1e6
    result.warmup_runs = timing.warmup_runs
    result.warmup_time_s = timing.warmup_time_s
    result.steady_time_s = timing.steady_time_s
    result.environment = env
    # the backend's own named warnings (collected at load) first, then the measurement's
    result.warnings = result.warnings + timing_warnings(stats, timing, plan) \
        + environment_warnings(env, other_cores=cpu.other_cores,
                               workers=int(options.concurrent_workers),
                               steal_cores=cpu.steal_cores)
    result.config["harness"] = {
        "block_size": timing.block_size,
        "steady_calls": timing.steady_calls,
        "timer_overhead_ns": timing.timer_overhead_ns,
        "stop_reason": timing.stop_reason,
        "warmup_settled": timing.warmup_settled,
        "ci_rel_width": timing.ci_rel_width,
        "thirds_median_ms": (None if (t := thirds_medians(timing.samples_ns)) is None
                             else [v / 1e6 for v in t]),
        "other_processes_cores": cpu.other_cores,
        "steal_cores": cpu.steal_cores,
        "backend_reported_load_time_s": prepared.load_time_s,
        "build": build,
        "setup": setup,
    }
    return result


__all__ = ["BACKEND_FAILURES", "DEFAULT_MAX_TIME_S", "DEFAULT_MIN_RUNS", "DEFAULT_MIN_TIME_S",
           "MeasureFailure", "Timing", "TimingPlan", "block_size_for", "one_line",
           "plan_from_config", "run_in_process", "time_callable", "timer_overhead_ns",
           "timing_warnings"]


# ------------------------------------------------------------------- error -> status
# the one rule every path (measure(), sweeps, generative runs) turns an error into a status
def _out_of_memory(exc: BaseException) -> bool:
    return (isinstance(exc, MemoryError) or getattr(exc, "remote_type", "") == "MemoryError"
            or "out of memory" in str(exc).lower())


def status_of(exc: BaseException) -> tuple[str, str]:
    """``(status, reason)`` for what a runner raised; re-raises what is not the backend's
    failure (``UserError``, ``KeyboardInterrupt``)."""
    phase, error = (exc.phase, exc.error) if isinstance(exc, MeasureFailure) else (None, exc)
    if isinstance(error, UserError):
        raise error
    if isinstance(error, UnsupportedError):
        return "unsupported", str(error)
    if isinstance(error, BackendUnavailableError):
        return "unavailable", str(error)
    if phase == "import" and isinstance(error, ImportError):
        return "unavailable", f"importing the runtime failed: {one_line(error)}"
    if phase is None:
        return "failed", str(error) if isinstance(error, EdgeprofError) else one_line(error)
    if _out_of_memory(error):
        return "failed", f"out of memory during {phase}: {one_line(error)}"
    return "failed", f"{phase} failed: {one_line(error)}"

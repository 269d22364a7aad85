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

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from edgeprof.core.backend import Backend, RunConfig
from edgeprof.core.errors import (BackendUnavailableError, EdgeprofError, UnsupportedError,
                                  UserError)
from edgeprof.core.results import BenchmarkResult, WarningRecord
from edgeprof.profilers.measure.timing import (  # re-exported: the harness's API
    DEFAULT_CI_LEVEL, DEFAULT_MAX_TIME_S, DEFAULT_MIN_RUNS, DEFAULT_MIN_TIME_S, Timing,
    TimingPlan, block_size_for, plan_from_config, thirds_medians, time_callable,
    timer_overhead_ns, timing_warnings)


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


@contextlib.contextmanager
def failing_in(phase: str, partial: BenchmarkResult | None = None) -> Iterator[None]:
    """What the block raises is the backend's failure in ``phase``: a :class:`MeasureFailure`
    carrying ``partial``; ``UserError`` (and ``KeyboardInterrupt``) propagate as themselves."""
    try:
        yield
    except UserError:
        raise
    except BACKEND_FAILURES as e:
        raise MeasureFailure(phase, e, partial) from e


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
    with failing_in("prepare", result):  # a conversion's failure is the run's, as in prepare()
        backend.check_request(model, config)
        t0 = time.perf_counter()
        artifact = backend.build(model, config.precision, model.calibration)
        took = time.perf_counter() - t0
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
    with failing_in("prepare", result):
        prepared = load(inputs)
    took = time.perf_counter() - t0
    _close(prepared, result)
    del prepared
    return {"load_s": took, "rss_before_bytes": rss0}


@contextlib.contextmanager
def _frozen_gc() -> Iterator[None]:
    """Freeze every object that exists (``gc.freeze``) for the timed calls: a collection
    during timing then scans only what the calls made, so its cost does not depend on how
    many objects the process held before (torch, other runs). Nothing is collected first (a
    full collection costs ~0.2 s in a process holding torch); frozen garbage is freed after
    the run, when the objects are unfrozen."""
    import gc

    if hasattr(gc, "freeze"):
        gc.freeze()
    try:
        yield
    finally:
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
    from edgeprof.profilers.measure.environment import process_conditions

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
    threads_from = ("--threads" if config.threads else
                    f"the backend's default (physical cores: {physical})")
    return {
        **process_conditions(process, prepared.threads, threads_from,
                             measurements_before=_MEASUREMENTS_IN_PROCESS),
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
    with failing_in("import", result):
        backend.ensure_available()
        for mod in getattr(backend, "requires", ()) or ():  # post-import memory baseline
            importlib.import_module(mod)
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
        with failing_in("prepare", result):  # the runtime's failure: measure() makes the status
            prepared = (load(inputs) if load is not None
                        else backend.prepare(model, config, inputs))
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
            with failing_in("inference", result), _frozen_gc():
                timing = time_callable(prepared.run, prepared.inputs, sync=prepared.sync,
                                       plan=plan)
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


__all__ = ["BACKEND_FAILURES", "DEFAULT_CI_LEVEL", "DEFAULT_MAX_TIME_S", "DEFAULT_MIN_RUNS",
           "DEFAULT_MIN_TIME_S", "MeasureFailure", "Timing", "TimingPlan", "block_size_for",
           "one_line", "plan_from_config", "run_in_process", "thirds_medians", "time_callable",
           "timer_overhead_ns", "timing_warnings"]


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

"""The machine a measurement ran on, recorded with every result, and the warnings it earns.

``collect_environment()`` returns a JSON-ready dict: CPU model, physical/logical cores, the
cores this process may use (affinity), the CPU frequency governor when readable, load
average, memory, OS, python/numpy versions and — filled in by the harness — the runtime's
name, version and thread counts, and ``conditions``: how the measurement was taken (process
kind and state, threads, affinity, warm-up, inputs, GC, heap, load policy; see
``harness.run_in_process``). :data:`COMPARABLE_CONDITIONS` is the part two paths measuring
one job must share. Static parts are read once per process.

The warning checks are pure functions of numbers, so they can be tested with any values:

* ``machine_busy`` — other processes kept the CPUs busy during the measurement (CPU time of
  the whole machine minus this process's, from psutil), or the 1-minute load average at the
  start already exceeded the usable cores;
* ``cpu_frequency_scaling`` — the cpufreq governor is readable and is not ``performance``
  (clocks move with load, so latencies drift);
* ``thread_oversubscription`` — runtime threads x concurrent workers exceed the usable cores.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
from pathlib import Path
from typing import Any

from edgeprof.core.results import WarningRecord

#: other processes using at least this many cores (and this share of all cores) is "busy"
BUSY_MIN_CORES = 0.5
BUSY_MIN_SHARE = 0.10

_GOVERNOR_FILE = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, sysctl on macOS, else platform)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "processor\t: arm")):
                value = line.split(":", 1)[1].strip()
                if value:
                    return value
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            import subprocess

            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"],
                                 capture_output=True, text=True, timeout=2)
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


def usable_cores() -> int:
    """Logical cores this process may run on (affinity where the OS has it)."""
    cpus = affinity()
    return (len(cpus) or 1) if cpus is not None else (os.cpu_count() or 1)


def read_governor(path: Path = _GOVERNOR_FILE) -> str | None:
    """The cpufreq scaling governor of CPU 0, or None when not readable (VMs, macOS)."""
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def load_average() -> list[float] | None:
    try:
        return [round(v, 3) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


@functools.lru_cache(maxsize=1)
def _static_environment() -> dict[str, Any]:
    import numpy as np
    import psutil

    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False) or logical
    vm = psutil.virtual_memory()
    return {
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "physical_cores": int(physical),
        "logical_cores": int(logical),
        "total_memory_bytes": int(vm.total),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy_version": np.__version__,
    }


def collect_environment(*, runtime: str | None = None, runtime_version: str | None = None,
                        threads: dict[str, int] | None = None) -> dict[str, Any]:
    """What the machine looked like for this measurement (JSON-ready)."""
    import psutil

    env = dict(_static_environment())
    env["usable_cores"] = usable_cores()
    env["governor"] = read_governor()
    env["load_average"] = load_average()
    try:
        freq = psutil.cpu_freq()
        env["cpu_frequency_mhz"] = round(freq.current, 1) if freq else None
    except (AttributeError, NotImplementedError, OSError, FileNotFoundError):
        env["cpu_frequency_mhz"] = None
    env["available_memory_bytes"] = int(psutil.virtual_memory().available)
    env["runtime"] = runtime
    env["runtime_version"] = runtime_version
    env["threads"] = dict(threads or {})
    return env


# ------------------------------------------------------------ measuring conditions
#: variables that change how runtimes pick or park their threads, or how malloc behaves;
#: recorded (those that are set) with every measurement
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES",
                   "GOMP_SPINCOUNT", "KMP_AFFINITY", "KMP_BLOCKTIME", "MKL_NUM_THREADS",
                   "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
                   "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "MALLOC_ARENA_MAX",
                   "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")
#: frameworks whose presence in a measuring process is recorded (process state)
FRAMEWORK_MODULES = ("torch", "tensorflow", "jax", "onnxruntime", "openvino", "ai_edge_litert",
                     "tflite_runtime", "tensorrt", "llama_cpp", "transformers", "distributed")
#: the parts of :func:`measurement_conditions` that every path (profile, sweep, batch,
#: optimize) must share for one job to give one answer; the rest describes the process
COMPARABLE_CONDITIONS = ("process", "threads", "threads_from", "thread_env", "affinity",
                         "warmup", "timing", "inputs", "gc", "heap", "load")


def thread_environment() -> dict[str, str]:
    """The thread and malloc variables of :data:`THREAD_ENV_VARS` that are set here."""
    return {k: os.environ[k] for k in THREAD_ENV_VARS if k in os.environ}


def affinity() -> list[int] | None:
    """The CPUs this process may run on (None where the OS does not say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def frameworks_loaded() -> list[str]:
    """The heavy frameworks already imported in this process."""
    return [m for m in FRAMEWORK_MODULES if m in sys.modules]


def os_threads() -> int | None:
    """Threads alive in this process (runtime pools and Python threads)."""
    try:
        import psutil

        return int(psutil.Process().num_threads())
    except Exception:  # noqa: BLE001
        return None


def process_conditions(process: str, threads: dict[str, int], threads_from: str,
                       **state: Any) -> dict[str, Any]:
    """The conditions every workload's record opens with: the process (its kind; its state:
    pid, ``state``, the frameworks loaded, OS threads), the threads and where they came from,
    the thread variables that are set and the CPU affinity."""
    return {"process": process,
            "process_state": {"pid": os.getpid(), **state,
                              "frameworks_loaded": frameworks_loaded(),
                              "os_threads": os_threads()},
            "threads": dict(threads), "threads_from": threads_from,
            "thread_env": thread_environment(), "affinity": affinity()}


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL("libc.so.6")


def settle_heap() -> str:
    """Collect Python's young garbage (what the build and the set-up load left) and hand
    free malloc pages back to the OS (glibc's ``malloc_trim``), so the memory baseline and the
    heap a run starts from do not depend on what the process did before (a conversion, other
    runs). A full collection is left out: in a process holding torch it costs ~0.2 s a run.
    Returns what was done."""
    import gc

    gc.collect(1)
    if sys.platform.startswith("linux"):
        try:
            _libc().malloc_trim(0)
            return "gc.collect(1) and malloc_trim(0) before the memory baseline"
        except (OSError, AttributeError):
            pass
    return "gc.collect(1) before the memory baseline"


def comparable_conditions(conditions: dict[str, Any]) -> dict[str, Any]:
    """The part of a record's ``environment["conditions"]`` that two paths measuring one job
    must share (:data:`COMPARABLE_CONDITIONS`)."""
    return {k: conditions.get(k) for k in COMPARABLE_CONDITIONS}


# ------------------------------------------------------------------------- CPU usage
class CpuUsage:
    """CPU time of the whole machine versus this process, between ``start()`` and ``stop()``.

    ``other_cores`` is the average number of cores other processes kept busy.
    """

    def __init__(self) -> None:
        self._sys0 = self._own0 = self._t0 = None
        self.other_cores: float | None = None
        self.own_cores: float | None = None
        self.steal_cores: float | None = None  # CPU time the hypervisor gave other guests
        self.wall_s: float | None = None
        self._steal0 = 0.0

    @staticmethod
    def _busy(t) -> float:
        idle = getattr(t, "idle", 0.0) + getattr(t, "iowait", 0.0)
        # steal is time the hypervisor gave to other guests: it slows us but is not a process
        # on this machine; guest time is already counted in user
        total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
        return total - idle - getattr(t, "steal", 0.0)

    @staticmethod
    def _own() -> float:
        import psutil

        c = psutil.Process().cpu_times()
        return c.user + c.system + getattr(c, "children_user", 0.0) + getattr(c, "children_system", 0.0)

    def start(self) -> CpuUsage:
        import time

        import psutil

        self._t0 = time.perf_counter()
        times = psutil.cpu_times()
        self._sys0 = self._busy(times)
        self._steal0 = getattr(times, "steal", 0.0)
        self._own0 = self._own()
        return self

    def stop(self) -> CpuUsage:
        import time

        import psutil

        if self._t0 is None:
            return self
        wall = time.perf_counter() - self._t0
        times = psutil.cpu_times()
        sys_busy = self._busy(times) - self._sys0
        own = self._own() - self._own0
        self.wall_s = wall
        if wall > 0.05:  # psutil's counters tick at 10 ms; shorter windows say nothing
            self.own_cores = own / wall
            self.other_cores = max(0.0, (sys_busy - own) / wall)
            self.steal_cores = max(0.0, (getattr(times, "steal", 0.0) - self._steal0) / wall)
        return self


# -------------------------------------------------------------------------- warnings
def load_warning(*, other_cores: float | None, load_avg_1min: float | None,
                 cores: int) -> WarningRecord | None:
    """``machine_busy`` when other processes used CPUs during the run or the load is high."""
    cores = max(1, int(cores))
    parts = []
    if other_cores is not None and other_cores >= max(BUSY_MIN_CORES, BUSY_MIN_SHARE * cores):
        parts.append(f"other processes kept {other_cores:.1f} of {cores} cores busy during "
                     "the measurement")
    if load_avg_1min is not None and load_avg_1min > cores:
        parts.append(f"load average {load_avg_1min:.2f} exceeds {cores} cores at the start")
    if not parts:
        return None
    return WarningRecord("machine_busy", "; ".join(parts)
                         + "; latencies may be inflated and noisy — rerun on an idle machine")


#: share of the cores' time taken by the hypervisor (steal) that earns a warning
STEAL_MIN_SHARE = 0.02


def steal_warning(steal_cores: float | None, cores: int) -> WarningRecord | None:
    """``cpu_steal`` when a virtual machine's hypervisor took CPU time during the run: the
    run was slowed by other guests, which nothing on this machine can show or stop."""
    cores = max(1, int(cores))
    if steal_cores is None or steal_cores < STEAL_MIN_SHARE * cores:
        return None
    return WarningRecord("cpu_steal", f"the hypervisor took {100 * steal_cores / cores:.1f}% of "
                         f"the {cores} cores' time during the measurement (steal: other virtual "
                         "machines on the same host); expect run-to-run differences beyond the "
                         "confidence interval")


def governor_warning(governor: str | None) -> WarningRecord | None:
    """``cpu_frequency_scaling`` when the governor is readable and not ``performance``."""
    if governor is None or governor == "performance":
        return None
    return WarningRecord("cpu_frequency_scaling",
                         f"CPU frequency governor is '{governor}', not 'performance': clocks "
                         "follow the load, so latencies can drift (e.g. 'sudo cpupower "
                         "frequency-set -g performance')")


def oversubscription_warning(threads: dict[str, int] | int | None, workers: int,
                             cores: int) -> WarningRecord | None:
    """``thread_oversubscription`` when threads x concurrent workers exceed the cores.

    ``threads`` is the runtime's thread counts (the largest pool counts: intra-op threads do
    the work, inter-op threads mostly wait) or a number.
    """
    if threads is None:
        return None
    if isinstance(threads, dict):
        if not threads:
            return None
        per_worker = max(int(v) for v in threads.values())
    else:
        per_worker = int(threads)
    workers = max(1, int(workers))
    total = per_worker * workers
    if total <= cores:
        return None
    return WarningRecord("thread_oversubscription",
                         f"{per_worker} threads x {workers} concurrent worker(s) = {total} "
                         f"threads on {cores} cores; threads will preempt each other — set "
                         "--threads so threads x workers <= cores")


def environment_warnings(env: dict[str, Any], *, other_cores: float | None = None,
                         workers: int = 1, steal_cores: float | None = None
                         ) -> list[WarningRecord]:
    """All machine-level warnings for a result whose environment is ``env``."""
    cores = int(env.get("usable_cores") or env.get("logical_cores") or 1)
    load = env.get("load_average") or [None]
    out = [
        load_warning(other_cores=other_cores, load_avg_1min=load[0], cores=cores),
        governor_warning(env.get("governor")),
        oversubscription_warning(env.get("threads") or None, workers, cores),
        steal_warning(steal_cores, cores),
    ]
    return [w for w in out if w is not None]


__all__ = ["COMPARABLE_CONDITIONS", "CpuUsage", "FRAMEWORK_MODULES", "THREAD_ENV_VARS",
           "affinity", "collect_environment", "comparable_conditions", "cpu_model",
           "environment_warnings", "frameworks_loaded", "governor_warning", "load_average",
           "load_warning", "os_threads", "oversubscription_warning", "read_governor",
           "settle_heap", "steal_warning", "thread_environment", "usable_cores"]


def host_info(host_target: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "machine": platform.machine()}
    if host_target is not None:
        info["target"] = host_target.to_dict()
    return info

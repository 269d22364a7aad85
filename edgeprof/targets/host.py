"""The ``host`` target: the machine edgeprof runs on, detected and calibrated.

Detection reads what the operating system says (``/proc/cpuinfo``, ``/sys`` cache and
cpufreq entries, psutil). Calibration measures, once, what this machine really does:

* a STREAM-style **triad** ``a = b + s*c`` on fp64 arrays several times the last-level cache,
  counted the STREAM way: 3 arrays x 8 bytes per element per iteration (read ``b``, read
  ``c``, write ``a``; the write-allocate read of ``a`` is *not* counted), best of N (STREAM's convention; the median run's rate is kept beside it);
* a **GEMM per compute precision** this host can run: fp32 always (torch and numpy's BLAS,
  the faster one counts), bf16 only where the CPU has native bf16 arithmetic, int8 through
  real int8 kernels (``torch.ops.quantized.linear``, ``torch._int_mm``). Every kernel is
  checked for correctness on a small problem before it is timed, then repeated (at least
  :data:`MIN_GEMM_RUNS` times): its figure is the **median** run's MAC/s with the
  interquartile range of the runs (``macs_per_s_iqr``) beside it, and the best run kept as
  ``best_macs_per_s``. A best-of-N on a shared machine reports the one lucky run (seen: an
  int8 best 4.4x the median), so it is never the headline. A precision that cannot be
  calibrated is *absent* from the result (with the reason under ``unavailable``), never
  guessed.
* **power**: the RAPL package counter where it is readable (measured); else the vendor's
  TDP per core for a CPU in :data:`CPU_POWER` (each with its source), scaled to this host's
  cores; else no figure (NaN, with the reason as its source), never a guess.

The result is cached as JSON in ``cache_dir("host")``, keyed by CPU model, core counts,
library versions and the calibration parameters; ``recalibrate=True`` redoes it.
Heavy libraries (torch) are imported inside functions only.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edgeprof.core.errors import TargetError
from edgeprof.core.precision import PRECISIONS
from edgeprof.targets.schema import Target, target_from_dict

CALIBRATION_SCHEMA = 2  # 2: GEMM figures are medians with an IQR (1 was best-of-N)
#: a GEMM is timed at least this many times, so its median and IQR mean something
MIN_GEMM_RUNS = 5
MiB = 1024 * 1024

#: ISA flags edgeprof looks for (x86 ``flags`` and Arm ``Features`` names of /proc/cpuinfo)
ISA_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16",
             "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
             "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve")
INT8_DOT_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni", "i8mm", "asimddp")
BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")

_PROC_CPUINFO = Path("/proc/cpuinfo")
_SYS_CPU = Path("/sys/devices/system/cpu")
_RAPL = Path("/sys/class/powercap/intel-rapl:0")


@dataclass(frozen=True)
class CalibrationParams:
    """Sizes and repeat counts of the calibration (defaults: a few seconds in all)."""

    triad_array_bytes: int | None = None  # bytes per array; None: 4x the LLC, >= 64 MiB
    triad_repeats: int = 10
    gemm_min_n: int = 512
    gemm_max_n: int = 2048
    gemm_target_s: float = 0.03  # size the GEMM so one call takes about this long
    gemm_repeats: int = 8
    kernel_budget_s: float = 0.5  # stop repeating a kernel after this much time (>= 2 runs)
    use_torch: bool = True


# ----------------------------------------------------------------------------- detection
def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _cpuinfo_fields() -> dict[str, str]:
    """Key/value pairs of the first processor block of /proc/cpuinfo (plus global lines)."""
    text = _read(_PROC_CPUINFO) or ""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        k, v = line.split(":", 1)
        out.setdefault(k.strip(), v.strip())
    return out


def _cpu_model(info: dict[str, str]) -> tuple[str, str]:
    for key in ("model name", "Hardware", "cpu model", "Processor"):
        if info.get(key):
            return info[key], f"/proc/cpuinfo '{key}'"
    dt = _read(Path("/sys/firmware/devicetree/base/model"))
    if dt:
        return dt.strip("\x00 \n"), "/sys/firmware/devicetree/base/model"
    if platform.processor():
        return platform.processor(), "platform.processor()"
    return platform.machine() or "unknown CPU", "platform.machine()"


def _size_bytes(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text or "")
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1024, "M": MiB, "G": 1024 * MiB}[m.group(2)]


def _detect_caches() -> dict[str, dict[str, Any]]:
    """Data/unified caches from /sys: per-instance size and how many instances exist."""
    seen: dict[tuple[int, str], dict[str, Any]] = {}
    for idx in sorted(_SYS_CPU.glob("cpu[0-9]*/cache/index[0-9]*")):
        level = (_read(idx / "level") or "").strip()
        ctype = (_read(idx / "type") or "").strip()
        size = _size_bytes((_read(idx / "size") or "").strip())
        shared = (_read(idx / "shared_cpu_list") or idx.parent.parent.name).strip()
        if not level.isdigit() or ctype not in ("Data", "Unified") or not size:
            continue
        entry = seen.setdefault((int(level), ctype), {"bytes": size, "instances": set()})
        entry["instances"].add(shared)
    names = {(1, "Data"): "l1d_cache", (2, "Unified"): "l2_cache", (3, "Unified"): "l3_cache"}
    out: dict[str, dict[str, Any]] = {}
    for key, name in names.items():
        if key in seen:
            n = len(seen[key]["instances"])
            out[name] = {"bytes_per_instance": seen[key]["bytes"], "instances": n,
                         "total_bytes": seen[key]["bytes"] * n}
    return out


def _detect_frequency(info: dict[str, str]) -> tuple[float | None, str]:
    raw = _read(_SYS_CPU / "cpu0/cpufreq/cpuinfo_max_freq")
    if raw and raw.strip().isdigit():
        return float(raw.strip()) * 1e3, \
            "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq (maximum clock)"
    if info.get("cpu MHz"):
        try:
            return float(info["cpu MHz"]) * 1e6, \
                "/proc/cpuinfo 'cpu MHz' (clock the kernel reports; no cpufreq, so boost unknown)"
        except ValueError:
            pass
    try:
        import psutil

        f = psutil.cpu_freq()
        if f and (f.max or f.current):
            return float(f.max or f.current) * 1e6, "psutil.cpu_freq()"
    except Exception:  # pragma: no cover - platform dependent
        pass
    return None, "not detectable on this host"


def _library_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("numpy", "torch"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def detect_host() -> dict[str, Any]:
    """What this machine says about itself (no measurement). JSON-serializable."""
    import psutil

    info = _cpuinfo_fields()
    model, model_src = _cpu_model(info)
    flags_text = info.get("flags") or info.get("Features") or ""
    flags = set(flags_text.split())
    freq, freq_src = _detect_frequency(info)
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        usable = psutil.cpu_count(logical=True) or 1
    logical = psutil.cpu_count(logical=True) or usable
    physical = psutil.cpu_count(logical=False) or logical
    return {
        "cpu_model": model, "cpu_model_source": model_src,
        "vendor": info.get("vendor_id") or info.get("CPU implementer") or "",
        "arch": platform.machine(), "system": platform.system(),
        "physical_cores": int(physical), "logical_cores": int(logical),
        "usable_cpus": int(usable),
        "ram_bytes": int(psutil.virtual_memory().total),
        "frequency_hz": freq, "frequency_source": freq_src,
        "caches": _detect_caches(),
        "isa": {f: f in flags for f in ISA_FLAGS},
        "isa_source": "/proc/cpuinfo 'flags'" if info.get("flags") else
                      ("/proc/cpuinfo 'Features'" if info.get("Features") else "unavailable"),
        "libraries": _library_versions(),
    }


# --------------------------------------------------------------------------- calibration
def _torch():
    try:
        import torch
    except Exception:
        return None
    return torch


class _Threads:
    """Set torch's intra-op threads for the calibration, restore afterwards."""

    def __init__(self, torch, n: int):
        self.torch, self.n, self.old = torch, n, None

    def __enter__(self):
        if self.torch is not None:
            self.old = self.torch.get_num_threads()
            self.torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        if self.torch is not None and self.old:
            self.torch.set_num_threads(self.old)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile of an ascending list (numpy's default method)."""
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _times(fn: Callable[[], Any], repeats: int, budget_s: float,
           first: float | None = None, min_runs: int = 2) -> list[float]:
    """Wall times of ``fn``, ascending.

    Without ``first`` one warm-up call comes before the timed ones; with it, ``first`` is an
    already-timed warm call and counts as a run. At least ``min_runs`` runs (or ``repeats``
    if fewer), then stop early once ``budget_s`` is spent.
    """
    times: list[float] = []
    if first is None:
        fn()
    else:
        times.append(first)
    start = time.perf_counter()
    while len(times) < max(1, repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= min(min_runs, repeats) and time.perf_counter() - start > budget_s:
            break
    return sorted(times)


def _best_of(fn: Callable[[], Any], repeats: int, budget_s: float,
             first: float | None = None) -> tuple[float, float, int]:
    """(best, median, runs) of wall times of ``fn`` (see :func:`_times`)."""
    times = _times(fn, repeats, budget_s, first)
    return times[0], _quantile(times, 0.5), len(times)


def _triad_array_bytes(params: CalibrationParams, detected: dict[str, Any]) -> int:
    if params.triad_array_bytes:
        return int(params.triad_array_bytes)
    caches = detected.get("caches", {})
    llc = next((caches[k]["total_bytes"] for k in ("l3_cache", "l2_cache", "l1d_cache")
                if k in caches), 8 * MiB)
    want = max(4 * llc, 64 * MiB)
    try:
        import psutil

        want = min(want, psutil.virtual_memory().available // 8)  # 3 arrays well below free
    except Exception:  # pragma: no cover
        pass
    return int(max(want, 4 * MiB))


def _run_triad(params: CalibrationParams, detected: dict[str, Any], threads: int) -> dict:
    torch = _torch() if params.use_torch else None
    array_bytes = _triad_array_bytes(params, detected)
    scalar = 3.0
    for _attempt in range(4):
        n = max(array_bytes // 8, 1024)
        try:
            if torch is not None:
                with _Threads(torch, threads):
                    a = torch.empty(n, dtype=torch.float64)
                    b = torch.full((n,), 1.0, dtype=torch.float64)
                    c = torch.full((n,), 2.0, dtype=torch.float64)
                    a.fill_(0.0)  # first touch, so page faults are not timed

                    def fn():
                        torch.add(b, c, alpha=scalar, out=a)

                    best, median, runs = _best_of(fn, params.triad_repeats, 10.0)
                    ok = float(a[0]) == 7.0 and float(a[-1]) == 7.0
                impl = "torch.add(b, c, alpha=3.0, out=a) on fp64 tensors"
                used_threads = threads
            else:
                import numpy as np

                a = np.zeros(n)
                b = np.full(n, 1.0)
                c = np.full(n, 2.0)
                block = 32768  # 256 KiB per block: the temporary stays in L2

                def fn():
                    for i in range(0, n, block):
                        s = slice(i, i + block)
                        np.multiply(c[s], scalar, out=a[s])
                        np.add(a[s], b[s], out=a[s])

                best, median, runs = _best_of(fn, params.triad_repeats, 10.0)
                ok = float(a[0]) == 7.0 and float(a[-1]) == 7.0
                impl = "numpy, blocked a = b + 3.0*c (256 KiB blocks, single thread)"
                used_threads = 1
        except MemoryError:
            array_bytes //= 2
            continue
        if not ok:
            raise RuntimeError("triad produced a wrong result")
        counted = 3 * 8 * n
        return {
            "bytes_per_s": counted / best, "best_s": best, "median_s": median, "runs": runs,
            "median_bytes_per_s": counted / median,
            "elements_per_array": n, "array_bytes": 8 * n, "bytes_counted_per_run": counted,
            "counting": "STREAM convention: read b + read c + write a = 3 arrays x 8 B per "
                        "element; the write-allocate read of a is not counted",
            "threads": used_threads, "implementation": impl,
        }
    raise MemoryError("not enough memory for the triad arrays")


# -- GEMM kernels: each is (name, check() -> None or raises, make(n) -> callable) ---------
def _gemm_kernels(precision: str, torch, isa: dict[str, bool]) -> tuple[list, str | None]:
    """The real GEMM kernels for ``precision`` on this host, or the reason there are none."""
    import numpy as np

    kernels: list[tuple[str, Callable[[], None], Callable[[int], Callable[[], Any]]]] = []
    rng = np.random.default_rng(0)

    if precision == "fp32":
        if torch is not None:
            def make_t(n):
                a, b = torch.randn(n, n), torch.randn(n, n)
                return lambda: torch.mm(a, b)

            def check_t():
                a, b = torch.randn(64, 48, dtype=torch.float64), torch.randn(48, 32,
                                                                            dtype=torch.float64)
                got = torch.mm(a.float(), b.float()).double()
                if not torch.allclose(got, a @ b, rtol=1e-3, atol=1e-3):
                    raise RuntimeError("torch.mm fp32 result is wrong")
            kernels.append(("torch.mm fp32", check_t, make_t))

        def make_np(n):
            a = rng.standard_normal((n, n), dtype=np.float32)
            b = rng.standard_normal((n, n), dtype=np.float32)
            return lambda: np.matmul(a, b)

        def check_np():
            a, b = rng.standard_normal((64, 48)), rng.standard_normal((48, 32))
            got = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float64)
            if not np.allclose(got, a @ b, rtol=1e-3, atol=1e-3):
                raise RuntimeError("numpy.matmul fp32 result is wrong")
        kernels.append(("numpy.matmul fp32 (BLAS)", check_np, make_np))
        return kernels, None

    if torch is None:
        return [], "torch is not installed (only torch provides bf16/int8 GEMM kernels here)"

    if precision == "bf16":
        native = [f for f in BF16_FLAGS if isa.get(f)]
        if not native:
            return [], ("no native bf16 arithmetic on this CPU (none of "
                        f"{', '.join(BF16_FLAGS)} in the ISA flags); emulated bf16 is not "
                        "calibrated")

        def make_b(n):
            a = torch.randn(n, n, dtype=torch.bfloat16)
            b = torch.randn(n, n, dtype=torch.bfloat16)
            return lambda: torch.mm(a, b)

        def check_b():
            a = torch.randint(-4, 5, (64, 48)).to(torch.bfloat16)
            b = torch.randint(-4, 5, (48, 32)).to(torch.bfloat16)
            if not torch.equal(torch.mm(a, b).float(), a.float() @ b.float()):
                raise RuntimeError("torch.mm bf16 result is wrong")
        kernels.append((f"torch.mm bf16 ({'/'.join(native)})", check_b, make_b))
        return kernels, None

    if precision == "int8":
        q = getattr(torch.ops, "quantized", None)
        if q is not None and hasattr(torch, "quantize_per_tensor"):
            engine = torch.backends.quantized.engine

            def _qlinear(x_int, w_int, out_scale):
                xq = torch.quantize_per_tensor(x_int.float(), 1.0, 0, torch.quint8)
                wq = torch.quantize_per_tensor(w_int.float(), 1.0, 0, torch.qint8)
                packed = torch.ops.quantized.linear_prepack(wq, None)
                return lambda: torch.ops.quantized.linear(xq, packed, out_scale, 128)

            def make_q(n):
                x = torch.randint(0, 16, (n, n))
                w = torch.randint(-8, 8, (n, n))
                return _qlinear(x, w, float(16 * 8 * n) / 127.0)

            def check_q():
                x = torch.randint(0, 16, (64, 48))
                w = torch.randint(-8, 8, (32, 48))
                ref = (x.double() @ w.double().t())
                scale = max(float(ref.abs().max()), 1.0) / 127.0
                got = _qlinear(x, w, scale)().dequantize().double()
                if float((got - ref).abs().max()) > 0.51 * scale + 1e-6:
                    raise RuntimeError("quantized.linear int8 result is wrong")
            kernels.append((f"torch.ops.quantized.linear u8xs8 ({engine} engine)", check_q,
                            make_q))
        if hasattr(torch, "_int_mm"):
            def make_i(n):
                a = torch.randint(-128, 128, (n, n), dtype=torch.int8)
                b = torch.randint(-128, 128, (n, n), dtype=torch.int8)
                return lambda: torch._int_mm(a, b)

            def check_i():
                a = torch.randint(-128, 128, (64, 48), dtype=torch.int8)
                b = torch.randint(-128, 128, (48, 32), dtype=torch.int8)
                ref = (a.double() @ b.double()).to(torch.int64)
                if not torch.equal(torch._int_mm(a, b).to(torch.int64), ref):
                    raise RuntimeError("torch._int_mm result is wrong")
            kernels.append(("torch._int_mm s8xs8->s32", check_i, make_i))
        if not kernels:
            return [], "this torch build has no int8 GEMM kernel"
        return kernels, None

    return [], f"edgeprof does not calibrate {precision} on a CPU host"


def _time_gemm(make: Callable[[int], Callable[[], Any]], params: CalibrationParams) -> dict:
    """Size n so one call takes roughly ``gemm_target_s``, then time it N times.

    Start at ``gemm_min_n``; halve while one call takes over 4x the target (a slow kernel),
    double while it takes under a quarter of it (a fast machine), one direction only. The
    figure is the median run's MAC/s, with the interquartile range of the runs' MAC/s
    (``macs_per_s_iqr``: the rates of the 75th and 25th percentile times) and the best run.
    """
    n, direction = max(64, params.gemm_min_n), 0
    while True:
        fn = make(n)
        fn()  # warm-up at this size
        t = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            fn()
            t = min(t, time.perf_counter() - t0)
        if t > 4 * params.gemm_target_s and n > 64 and direction <= 0:
            n, direction = n // 2, -1
        elif t < params.gemm_target_s / 4 and 2 * n <= params.gemm_max_n and direction >= 0:
            n, direction = 2 * n, 1
        else:
            break
    times = _times(fn, max(params.gemm_repeats, MIN_GEMM_RUNS), params.kernel_budget_s,
                   first=t, min_runs=MIN_GEMM_RUNS)
    median, q1, q3 = (_quantile(times, x) for x in (0.5, 0.25, 0.75))
    macs = n ** 3
    return {"n": n, "macs_per_run": macs, "best_s": times[0], "median_s": median,
            "q1_s": q1, "q3_s": q3, "runs": len(times), "macs_per_s": macs / median,
            "macs_per_s_iqr": [macs / q3, macs / q1], "best_macs_per_s": macs / times[0]}


def _rapl_energy_uj() -> int | None:
    raw = _read(_RAPL / "energy_uj")
    return int(raw) if raw and raw.strip().isdigit() else None


def _load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - not on this platform
        return None


def calibrate(params: CalibrationParams | None = None,
              detected: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure this host now (no cache). Returns the raw calibration record."""
    params = params or CalibrationParams()
    detected = detected or detect_host()
    torch = _torch() if params.use_torch else None
    threads = max(1, min(detected["physical_cores"], detected["usable_cpus"]))
    t_start = time.perf_counter()
    record: dict[str, Any] = {
        "schema": CALIBRATION_SCHEMA,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": detected, "params": asdict(params), "threads": threads,
        "triad": None, "gemm": {}, "unavailable": {}, "power": None, "warnings": [],
    }
    load = _load_average()
    record["load_average_1min"] = load
    if load is not None and load > 0.5 * detected["usable_cpus"]:
        record["warnings"].append(
            f"host_busy: 1-minute load average {load:.1f} on {detected['usable_cpus']} CPUs "
            "when calibrating; the measured figures may be low. Recalibrate when the machine "
            "is idle (edgeprof --recalibrate).")
    record["triad"] = _run_triad(params, detected, threads)

    for precision in ("fp32", "bf16", "int8"):
        kernels, reason = _gemm_kernels(precision, torch, detected["isa"])
        if not kernels:
            record["unavailable"][precision] = reason
            continue
        results: dict[str, Any] = {}
        e0, t0 = (_rapl_energy_uj(), time.perf_counter()) if precision == "fp32" else (None, 0)
        with warnings.catch_warnings(), _Threads(torch, threads):
            warnings.simplefilter("ignore")  # torch's deprecation notes on quantized tensors
            for name, check, make in kernels:
                try:
                    check()
                    results[name] = _time_gemm(make, params)
                except Exception as e:  # a kernel that fails or is wrong is not calibrated
                    results[name] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
        e1 = _rapl_energy_uj() if e0 is not None else None
        if e0 is not None and e1 is not None and e1 > e0:
            record["power"] = {"watts": (e1 - e0) * 1e-6 / (time.perf_counter() - t0),
                               "source": "RAPL package energy counter (intel-rapl:0) over the "
                                         "fp32 GEMM calibration"}
        ok = {k: v for k, v in results.items() if "macs_per_s" in v}
        if not ok:
            record["unavailable"][precision] = "every kernel failed: " + "; ".join(
                f"{k}: {v['error']}" for k, v in results.items())
            continue
        best_name = max(ok, key=lambda k: ok[k]["macs_per_s"])  # the faster kernel, by median
        record["gemm"][precision] = {"macs_per_s": ok[best_name]["macs_per_s"],
                                     "kernel": best_name, **{k: ok[best_name][k] for k in (
                                         "n", "best_s", "median_s", "runs", "macs_per_s_iqr",
                                         "best_macs_per_s")},
                                     "statistic": "median of the runs",
                                     "kernels": results}
    record["duration_s"] = time.perf_counter() - t_start
    return record


# ------------------------------------------------------------------------------- caching
def _cache_key(detected: dict[str, Any], params: CalibrationParams) -> dict[str, Any]:
    return {"schema": CALIBRATION_SCHEMA, "cpu_model": detected["cpu_model"],
            "physical_cores": detected["physical_cores"],
            "logical_cores": detected["logical_cores"], "libraries": detected["libraries"],
            "params": asdict(params)}


def calibration_path(params: CalibrationParams | None = None,
                     detected: dict[str, Any] | None = None) -> Path:
    """Where the calibration of this host (with these parameters) is cached."""
    from edgeprof.core.cache import cache_dir

    params = params or CalibrationParams()
    detected = detected or detect_host()
    digest = hashlib.sha256(json.dumps(_cache_key(detected, params), sort_keys=True)
                            .encode()).hexdigest()[:16]
    return cache_dir("host") / f"calibration-{digest}.json"


def host_calibration(recalibrate: bool = False,
                     params: CalibrationParams | None = None) -> dict[str, Any]:
    """The raw host record (detection + calibration), from the cache or measured now.

    This is what profile.json stores under ``"host"``.
    """
    from edgeprof.core.io import write_json

    params = params or CalibrationParams()
    detected = detect_host()
    key = _cache_key(detected, params)
    path = calibration_path(params, detected)
    if not recalibrate and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("key") == key and data.get("triad"):
            data["cache"] = {"path": str(path), "hit": True}
            return data
    data = calibrate(params, detected)
    data["key"] = key
    write_json(path, data)
    data["cache"] = {"path": str(path), "hit": False}
    return data


# ------------------------------------------------------------------------------- target
def _bits(precision: str) -> int:
    return {"fp32": 32, "fp16": 16, "bf16": 16, "int4_weight": 4}.get(precision, 8)


def derive_strategy(isa: dict[str, bool], peaks: dict[str, float]) -> dict[str, Any]:
    """The recommended compression strategy, chosen from the ISA flags and from which
    precisions could be calibrated (measured figures are quoted in the reason, but do not
    decide: on a busy machine their ratio is noisy, the ISA is not)."""
    g = {k: v / 1e9 for k, v in peaks.items()}
    measured = ", ".join(f"{k} {v:.1f} GMAC/s" for k, v in g.items())
    common = ("Structured pruning (not the seed's unstructured): dense CPU GEMM kernels do "
              "not skip zeros, shrinking channels shrinks the GEMMs. NHWC: the layout "
              "oneDNN/XNNPACK/fbgemm convolutions run in.")
    dot = [f for f in INT8_DOT_FLAGS if isa.get(f)]
    if "int8" in peaks and dot:
        return {"quantization_bits": 8, "pruning_type": "structured", "layout": "NHWC",
                "precision": "int8_static",
                "reason": f"{'/'.join(dot)} provide int8 dot-product instructions "
                          f"(measured: {measured}); static int8 with calibrated scales avoids "
                          f"quantizing activations at run time. {common}"}
    if "bf16" in peaks:
        return {"quantization_bits": 16, "pruning_type": "structured", "layout": "NHWC",
                "precision": "bf16",
                "reason": f"native bf16 arithmetic and no int8 dot-product instructions "
                          f"(measured: {measured}); bf16 keeps fp32's range (seed 003's CPU "
                          f"default). {common}"}
    simd8 = [f for f in ("avx2", "asimd") if isa.get(f)]
    if "int8" in peaks and simd8:
        x86 = simd8[0] == "avx2"
        path = ("AVX2 vpmaddubsw, whose 16-bit intermediates can saturate: quantize weights to "
                "7 bits (reduce_range)" if x86 else "NEON widening multiply-accumulate")
        return {"quantization_bits": 8, "pruning_type": "structured", "layout": "NHWC",
                "precision": "int8",
                "reason": f"no bf16 arithmetic (seed 003's CPU default would contradict the "
                          f"hardware) and no int8 dot-product instructions; int8 runs through "
                          f"{path}, and moves 4x fewer bytes than fp32 (measured: {measured}; "
                          f"the measured ratio varies with load, the choice follows the ISA). "
                          f"{common}"}
    return {"quantization_bits": 8, "pruning_type": "structured", "layout": "NHWC",
            "precision": "int8_weight",
            "reason": f"no bf16 arithmetic and no calibrated int8 SIMD path on this host "
                      f"({measured}); weight-only int8 quarters weight traffic while "
                      f"computing in fp32. {common}"}


#: sourced power figures per CPU: (pattern matched against the detected CPU model, watts,
#: cores those watts are for, source). Vendor TDPs are the sustained all-core thermal design
#: figures (an upper-range typical power), not measurements of this host.
CPU_POWER: tuple[tuple[str, float, int, str], ...] = (
    (r"Ryzen 7 5800X\b", 105.0, 8,
     "AMD product page, Ryzen 7 5800X: default TDP 105 W, 8 cores"),
    (r"EPYC 7742\b", 225.0, 64, "AMD product page, EPYC 7742: default TDP 225 W, 64 cores"),
    (r"EPYC 7763\b", 280.0, 64, "AMD product page, EPYC 7763: default TDP 280 W, 64 cores"),
    (r"EPYC 9654\b", 360.0, 96, "AMD product page, EPYC 9654: default TDP 360 W, 96 cores"),
    (r"Xeon.*Platinum 8480\+", 350.0, 56,
     "Intel ARK, Xeon Platinum 8480+: TDP 350 W, 56 cores"),
    (r"Xeon.*Gold 6248R\b", 205.0, 24, "Intel ARK, Xeon Gold 6248R: TDP 205 W, 24 cores"),
    (r"Core.*i9-13900K\b", 125.0, 24,
     "Intel ARK, Core i9-13900K: processor base power 125 W, 24 cores (8P + 16E)"),
    (r"Raspberry Pi 4\b", 6.4, 4,
     "RasPi.TV (2019): a Raspberry Pi 4 (4x Cortex-A72) measured at 6.4 W under 400% CPU "
     "load, whole board"),
)


def host_power(detected: dict[str, Any]) -> tuple[float, str]:
    """(watts, source) for a host without a readable RAPL counter.

    The figure of the first :data:`CPU_POWER` entry whose pattern matches the detected CPU
    model, per core x this host's physical cores (at most the chip's). A CPU not in the
    table gets NaN -- no figure -- and the source says why: a power figure from another CPU
    would be a made-up number.
    """
    model = str(detected.get("cpu_model", ""))
    cores = int(detected.get("physical_cores") or 1)
    for pattern, watts, chip_cores, source in CPU_POWER:
        if re.search(pattern, model):
            per = watts / chip_cores
            used = min(cores, chip_cores)
            return per * used, (f"ESTIMATE from the vendor figure, not measured (no readable "
                                f"RAPL counter on this host): {used} of {chip_cores} cores x "
                                f"{per:.2f} W/core; {source}")
    return float("nan"), (f"not known: no readable RAPL counter on this host, and no sourced "
                          f"power figure for '{model}' in edgeprof.targets.host.CPU_POWER; "
                          "energy is left empty rather than guessed")


def _gemm_statistic(g: dict[str, Any]) -> str:
    """How a GEMM figure was taken, with its spread: 'median of 8 runs, IQR 20.1-27.0 GMAC/s,
    best 31.2'. (A record of calibration schema 1 says 'best of N'.)"""
    iqr = g.get("macs_per_s_iqr")
    if not iqr:
        return f"best of {g['runs']}"
    text = (f"median of {g['runs']} runs, IQR {iqr[0] / 1e9:.1f}-{iqr[1] / 1e9:.1f} GMAC/s")
    if g.get("best_macs_per_s"):
        text += f", best {g['best_macs_per_s'] / 1e9:.1f}"
    return text


def target_from_calibration(cal: dict[str, Any]) -> Target:
    """Build the validated ``host`` Target from a calibration record."""
    det = cal["host"]
    date = cal.get("date", "")
    threads = cal.get("threads", det["physical_cores"])
    where = Path(cal.get("cache", {}).get("path") or "host")
    triad = cal["triad"]
    peaks = {p: float(g["macs_per_s"]) for p, g in cal.get("gemm", {}).items()}
    if "fp32" not in peaks:
        raise TargetError("fp32 GEMM could not be calibrated on this host: "
                          f"{cal.get('unavailable', {}).get('fp32', 'no kernel')}",
                          path=where, field="compute.peak.fp32")
    supported = [p for p, spec in PRECISIONS.items() if spec.compute in peaks]

    def q(value, unit, source):
        return {"value": value, "unit": unit, "source": source}

    peak = {p: q(peaks[p], "MAC/s",
                 f"measured on this host by edgeprof calibration ({g['kernel']}, "
                 f"{g['n']}x{g['n']}x{g['n']} GEMM, {_gemm_statistic(g)}, {threads} threads, "
                 f"{date})") for p, g in cal["gemm"].items()}
    memory = {
        "ram": q(det["ram_bytes"], "B", "psutil.virtual_memory().total on this host"),
        "bandwidth": q(triad["bytes_per_s"], "B/s",
                       f"measured on this host by edgeprof calibration (STREAM triad, "
                       f"n={triad['elements_per_array']} fp64 elements per array, 3 arrays x "
                       f"8 B counted per element, best of {triad['runs']}, "
                       f"{triad['threads']} threads, {date})"),
    }
    for name, c in det.get("caches", {}).items():
        if name == "l3_cache":
            memory[name] = q(c["total_bytes"], "B",
                             f"/sys/devices/system/cpu/cpu*/cache (level 3, {c['instances']} "
                             f"instance(s) x {c['bytes_per_instance']} B, total)")
        else:
            memory[name] = q(c["bytes_per_instance"], "B",
                             f"/sys/devices/system/cpu/cpu*/cache ({name[:2].upper()}, per "
                             f"instance; {c['instances']} instance(s))")
    if cal.get("power"):
        power = q(cal["power"]["watts"], "W", f"measured: {cal['power']['source']} ({date})")
    else:
        watts, source = host_power(det)
        power = q(watts, "W", source)
    flags = [f for f, on in det.get("isa", {}).items() if on]
    backends = (["tflite", "onnxruntime", "torch_eager", "torch_compile"]
                if det.get("arch", "").lower() in ("aarch64", "arm64") else
                ["onnxruntime", "openvino", "torch_compile", "torch_eager"])
    data = {
        "name": f"This host ({det['cpu_model']})",
        "kind": "cpu", "strategy_class": "cpu",
        "processor": f"{det['cpu_model']}, {det['physical_cores']} cores / "
                     f"{det['logical_cores']} threads, ISA: {' '.join(flags) or 'n/a'}",
        "description": "Detected and calibrated on this machine: peak compute and bandwidth "
                       "are measurements, not vendor figures.",
        "supported_precisions": supported,
        "preferred_backends": backends,
        "compute": {
            "cores": q(det["physical_cores"], "count",
                       f"psutil.cpu_count(logical=False) on this host "
                       f"({det['logical_cores']} logical CPUs)"),
            "peak": peak,
            # the clock is optional: some VMs publish none (then it is absent, not guessed)
            **({"frequency": q(det["frequency_hz"], "Hz", det["frequency_source"])}
               if det.get("frequency_hz") else {}),
        },
        "memory": memory,
        "power": {"typical": power},
        "strategy": derive_strategy(det.get("isa", {}), peaks),
    }
    digest = hashlib.sha256(json.dumps({k: v for k, v in cal.items() if k != "cache"},
                                       sort_keys=True, default=str).encode()).hexdigest()
    return target_from_dict(data, target_id="host", path=where, sha256=digest, is_host=True)


def host_target(recalibrate: bool = False, params: CalibrationParams | None = None) -> Target:
    """The ``host`` target: this machine, detected and calibrated (cached)."""
    return target_from_calibration(host_calibration(recalibrate=recalibrate, params=params))


def describe_host(calibration: dict[str, Any] | None = None, *, calibrate: bool = True) -> str:
    """One line about this host for the CLI (detection only when ``calibrate`` is False)."""
    if calibration is None and calibrate:
        calibration = host_calibration()
    det = calibration["host"] if calibration else detect_host()
    caches = det.get("caches", {})
    llc = next(((k, caches[k]["total_bytes"]) for k in ("l3_cache", "l2_cache") if k in caches),
               None)
    parts = [f"{det['cpu_model']}", f"{det['physical_cores']} cores/{det['logical_cores']} "
             f"threads", f"{det['ram_bytes'] / 1e9:.1f} GB RAM"]
    if det.get("frequency_hz"):
        parts.append(f"{det['frequency_hz'] / 1e9:.2f} GHz")
    if llc:
        parts.append(f"{llc[0][:2].upper()} {llc[1] / MiB:.0f} MiB")
    flags = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16",
                         "amx_int8", "amx_bf16", "asimddp", "i8mm", "bf16")
             if det.get("isa", {}).get(f)]
    if flags:
        parts.append("+".join(flags))
    line = ", ".join(parts)
    if calibration:
        measured = [f"triad {calibration['triad']['bytes_per_s'] / 1e9:.1f} GB/s"]
        measured += [f"{p} {g['macs_per_s'] / 1e9:.1f} GMAC/s"
                     + (f" (IQR {g['macs_per_s_iqr'][0] / 1e9:.1f}-"
                        f"{g['macs_per_s_iqr'][1] / 1e9:.1f})" if g.get("macs_per_s_iqr") else "")
                     for p, g in calibration.get("gemm", {}).items()]
        line += "; measured: " + ", ".join(measured)
        if calibration.get("unavailable"):
            line += f" ({', '.join(calibration['unavailable'])} not calibrated)"
        if any(w.startswith("host_busy") for w in calibration.get("warnings", [])):
            line += " [calibrated while busy: figures may be low]"
    return line


__all__ = ["CPU_POWER", "CalibrationParams", "calibrate", "calibration_path",
           "derive_strategy", "describe_host", "detect_host", "host_calibration", "host_power",
           "host_target", "target_from_calibration"]

if __name__ == "__main__":  # pragma: no cover
    print(describe_host(), file=sys.stdout)

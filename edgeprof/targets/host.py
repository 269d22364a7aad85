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

This module calibrates (:func:`calibrate`), caches (:func:`host_calibration`) and builds the
target (:func:`host_target`); detection is in :mod:`edgeprof.targets.host_detect`, the
measurements (triad, GEMM kernels, timing) in :mod:`edgeprof.targets.host_kernels`, the
calibration record's figures, power and strategy in :mod:`edgeprof.targets.host_figures`.
Every public name is importable from here.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from edgeprof.targets import host_detect as _host_detect
from edgeprof.targets.host_detect import (BF16_FLAGS, INT8_DOT_FLAGS, ISA_FLAGS, MiB,
                                          detect_host)
from edgeprof.targets.host_figures import (CPU_POWER, derive_strategy, host_power,
                                           target_from_calibration)
from edgeprof.targets.host_kernels import (MIN_GEMM_RUNS, CalibrationParams, Threads, gemm_kernels,
                                           import_torch, load_average, rapl_energy_uj, run_triad,
                                           time_gemm)
from edgeprof.targets.schema import Target

CALIBRATION_SCHEMA = 2  # 2: GEMM figures are medians with an IQR (1 was best-of-N)

#: detection's size parser, where tests/targets/test_host.py reads it
_size_bytes = _host_detect._size_bytes


def calibrate(params: CalibrationParams | None = None,
              detected: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure this host now (no cache). Returns the raw calibration record."""
    params = params or CalibrationParams()
    detected = detected or detect_host()
    torch = import_torch() if params.use_torch else None
    threads = max(1, min(detected["physical_cores"], detected["usable_cpus"]))
    t_start = time.perf_counter()
    record: dict[str, Any] = {
        "schema": CALIBRATION_SCHEMA,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": detected, "params": asdict(params), "threads": threads,
        "triad": None, "gemm": {}, "unavailable": {}, "power": None, "warnings": [],
    }
    load = load_average()
    record["load_average_1min"] = load
    if load is not None and load > 0.5 * detected["usable_cpus"]:
        record["warnings"].append(
            f"host_busy: 1-minute load average {load:.1f} on {detected['usable_cpus']} CPUs "
            "when calibrating; the measured figures may be low. Recalibrate when the machine "
            "is idle (edgeprof --recalibrate).")
    record["triad"] = run_triad(params, detected, threads)

    for precision in ("fp32", "bf16", "int8"):
        kernels, reason = gemm_kernels(precision, torch, detected["isa"])
        if not kernels:
            record["unavailable"][precision] = reason
            continue
        results: dict[str, Any] = {}
        e0, t0 = (rapl_energy_uj(), time.perf_counter()) if precision == "fp32" else (None, 0)
        with warnings.catch_warnings(), Threads(torch, threads):
            warnings.simplefilter("ignore")  # torch's deprecation notes on quantized tensors
            for name, check, make in kernels:
                try:
                    check()
                    results[name] = time_gemm(make, params)
                except Exception as e:  # a kernel that fails or is wrong is not calibrated
                    results[name] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
        e1 = rapl_energy_uj() if e0 is not None else None
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
    from edgeprof.core.cache import cached_record

    params = params or CalibrationParams()
    detected = detect_host()
    return cached_record(calibration_path(params, detected), _cache_key(detected, params),
                         lambda: calibrate(params, detected), refresh=recalibrate,
                         required="triad")


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


__all__ = ["BF16_FLAGS", "CALIBRATION_SCHEMA", "CPU_POWER", "CalibrationParams",
           "INT8_DOT_FLAGS", "ISA_FLAGS", "MIN_GEMM_RUNS", "MiB", "calibrate",
           "calibration_path", "derive_strategy", "describe_host", "detect_host",
           "host_calibration", "host_power", "host_target", "target_from_calibration"]

if __name__ == "__main__":  # pragma: no cover
    print(describe_host(), file=sys.stdout)

"""Detecting the ``host`` target: what this machine says about itself (``/proc/cpuinfo``,
``/sys`` cache and cpufreq entries, psutil, library versions), with no measurement
(:func:`detect_host`); the ISA flags edgeprof looks for."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

MiB = 1024 * 1024

#: ISA flags edgeprof looks for (x86 ``flags`` and Arm ``Features`` names of /proc/cpuinfo)
ISA_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16",
             "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
             "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve")
INT8_DOT_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni", "i8mm", "asimddp")
BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")

_PROC_CPUINFO = Path("/proc/cpuinfo")
_SYS_CPU = Path("/sys/devices/system/cpu")
RAPL_DIR = Path("/sys/class/powercap/intel-rapl:0")


# ----------------------------------------------------------------------------- detection
def read_text_or_none(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _cpuinfo_fields() -> dict[str, str]:
    """Key/value pairs of the first processor block of /proc/cpuinfo (plus global lines)."""
    text = read_text_or_none(_PROC_CPUINFO) or ""
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
    dt = read_text_or_none(Path("/sys/firmware/devicetree/base/model"))
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
        level = (read_text_or_none(idx / "level") or "").strip()
        ctype = (read_text_or_none(idx / "type") or "").strip()
        size = _size_bytes((read_text_or_none(idx / "size") or "").strip())
        shared = (read_text_or_none(idx / "shared_cpu_list") or idx.parent.parent.name).strip()
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
    raw = read_text_or_none(_SYS_CPU / "cpu0/cpufreq/cpuinfo_max_freq")
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
    from edgeprof.core.importing import dist_version

    return {"python": platform.python_version(),
            **{dist: dist_version(dist, None) for dist in ("numpy", "torch")}}


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

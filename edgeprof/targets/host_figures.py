"""The ``host`` target built from a calibration record (:func:`target_from_calibration`):
each figure with its source, the sourced power figure where RAPL is not readable
(:data:`CPU_POWER`, :func:`host_power`), and the compression strategy the ISA flags and
calibrated precisions recommend (:func:`derive_strategy`)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from edgeprof.core.errors import TargetError
from edgeprof.core.precision import PRECISIONS
from edgeprof.targets.host_detect import INT8_DOT_FLAGS
from edgeprof.targets.schema import Target, target_from_dict


# ------------------------------------------------------------------------------- target
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


def quantity(value: Any, unit: str, source: str) -> dict[str, Any]:
    """A descriptor figure: its value, unit and source."""
    return {"value": value, "unit": unit, "source": source}


def record_path(cal: dict[str, Any], target_id: str) -> Path:
    """Where a calibration record lives (its cache file), for errors; the id without one."""
    return Path(cal.get("cache", {}).get("path") or target_id)


def calibrated_peaks(cal: dict[str, Any], target_id: str, where: str) -> dict[str, float]:
    """MAC/s per compute precision the record's GEMMs measured; a record without fp32 is a
    :class:`TargetError` (``where``: 'this host', 'this GPU')."""
    peaks = {p: float(g["macs_per_s"]) for p, g in cal.get("gemm", {}).items()}
    if "fp32" not in peaks:
        raise TargetError(f"fp32 GEMM could not be calibrated on {where}: "
                          f"{cal.get('unavailable', {}).get('fp32', 'no kernel')}",
                          path=record_path(cal, target_id), field="compute.peak.fp32")
    return peaks


def host_target(cal: dict[str, Any], *, target_id: str, name: str, kind: str,
                strategy_class: str, processor: str, description: str,
                preferred_backends: list[str], compute: dict[str, Any],
                memory: dict[str, Any], power: dict[str, Any],
                strategy: dict[str, Any]) -> Target:
    """The validated Target of this machine's processor (``host``, ``host_gpu``) from its
    calibration record ``cal``: the precisions it supports are those its GEMMs measured
    (``compute['peak']``), and its hash is the record's (the cache entry left out)."""
    peaks = compute["peak"]
    data = {
        "name": name, "kind": kind, "strategy_class": strategy_class,
        "processor": processor, "description": description,
        "supported_precisions": [p for p, spec in PRECISIONS.items() if spec.compute in peaks],
        "preferred_backends": preferred_backends,
        "compute": compute, "memory": memory, "power": {"typical": power},
        "strategy": strategy,
    }
    digest = hashlib.sha256(json.dumps({k: v for k, v in cal.items() if k != "cache"},
                                       sort_keys=True, default=str).encode()).hexdigest()
    return target_from_dict(data, target_id=target_id, path=record_path(cal, target_id),
                            sha256=digest, is_host=True)


def target_from_calibration(cal: dict[str, Any]) -> Target:
    """Build the validated ``host`` Target from a calibration record."""
    det = cal["host"]
    date = cal.get("date", "")
    threads = cal.get("threads", det["physical_cores"])
    triad = cal["triad"]
    peaks = calibrated_peaks(cal, "host", "this host")
    q = quantity
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
    return host_target(
        cal, target_id="host", name=f"This host ({det['cpu_model']})",
        kind="cpu", strategy_class="cpu",
        processor=f"{det['cpu_model']}, {det['physical_cores']} cores / "
                  f"{det['logical_cores']} threads, ISA: {' '.join(flags) or 'n/a'}",
        description="Detected and calibrated on this machine: peak compute and bandwidth "
                    "are measurements, not vendor figures.",
        preferred_backends=backends,
        compute={
            "cores": q(det["physical_cores"], "count",
                       f"psutil.cpu_count(logical=False) on this host "
                       f"({det['logical_cores']} logical CPUs)"),
            "peak": peak,
            # the clock is optional: some VMs publish none (then it is absent, not guessed)
            **({"frequency": q(det["frequency_hz"], "Hz", det["frequency_source"])}
               if det.get("frequency_hz") else {}),
        },
        memory=memory, power=power, strategy=derive_strategy(det.get("isa", {}), peaks))

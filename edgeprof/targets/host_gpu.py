"""The ``host_gpu`` target: this machine's CUDA GPU, detected through torch and calibrated.

A run with ``--device cuda`` executes on the GPU, so its achieved GB/s and GMAC/s must be
read against the GPU's figures, never the CPU's (``host``). This module is the GPU's
counterpart of :mod:`edgeprof.targets.host`:

* **detection** reads ``torch.cuda.get_device_properties``: name, compute capability,
  streaming multiprocessors, memory, L2, SM clock, memory clock and bus width;
* **calibration** measures, once, what the GPU really does, timed with CUDA events:

  - a device-to-device **copy** of a buffer many times the L2 (``dst.copy_(src)``), counted
    as bytes read plus bytes written, the median of the runs (IQR and best beside it);
  - a **GEMM per precision** through cuBLAS (``torch.matmul``): fp32 with TF32 *off* (the
    CUDA-core rate a plain fp32 run gets), fp16 and bf16 (tensor cores where the chip has
    them), int8 through ``torch._int_mm``. Each kernel is checked against a reference on a
    small problem before it is timed; a precision that fails or is wrong is *absent*, with
    the reason under ``unavailable``, never guessed.

  The driver's theoretical bandwidth (2 x memory clock x bus width, the datasheet figure)
  is kept beside the measured copy rate, which is what the target uses.

The record is cached as JSON in ``cache_dir("host")``, keyed by the GPU, torch and CUDA
versions and the parameters. torch is imported inside functions only.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from edgeprof.core.errors import TargetError
from edgeprof.targets.schema import Target

GPU_CALIBRATION_SCHEMA = 1
HOST_GPU_ID = "host_gpu"

#: FP32 lanes (CUDA cores) per streaming multiprocessor, by compute capability: the
#: "arithmetic instructions" throughput table of NVIDIA's CUDA C++ Programming Guide
#: (32-bit floating-point add/multiply/multiply-add results per clock cycle per SM)
FP32_LANES_PER_SM = {(5, 0): 128, (5, 2): 128, (5, 3): 128, (6, 0): 64, (6, 1): 128,
                     (6, 2): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64,
                     (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128}
LANES_SOURCE = ("NVIDIA CUDA C++ Programming Guide, arithmetic instruction throughput table "
                "(32-bit floating-point results per clock per SM)")


@dataclass(frozen=True)
class GpuCalibrationParams:
    copy_bytes: int = 1 << 30  # per buffer: 1 GiB, far above any L2 (H100: 50 MB)
    gemm_n: int = 8192  # square GEMM side; shrunk to fit a small GPU's memory
    runs: int = 10
    warmup: int = 3


def _torch_cuda():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no GPU here
        raise TargetError(f"host_gpu needs torch with CUDA ({type(e).__name__}: {e}); "
                          "install a CUDA build of torch or use --target host") from None
    if not torch.cuda.is_available():
        raise TargetError("host_gpu is this machine's CUDA GPU and torch sees none; use "
                          "--target host (the CPU) or run on a machine with a GPU")
    return torch


def device_index(device: str = "cuda") -> int:
    """``cuda`` -> the current device; ``cuda:N`` -> N."""
    kind, _, n = str(device).partition(":")
    if kind != "cuda" or (n and not n.isdigit()):
        raise TargetError(f"device must be cuda or cuda:N for host_gpu, got '{device}'")
    if n:
        return int(n)
    return int(_torch_cuda().cuda.current_device())


def theoretical_bandwidth(memory_clock_khz: float | None, bus_width_bits: float | None
                          ) -> float | None:
    """The datasheet-style peak: double data rate x memory clock x bus width in bytes
    (H100 SXM: 2 x 2619 MHz x 640 B = 3.35 TB/s)."""
    if not memory_clock_khz or not bus_width_bits:
        return None
    return 2.0 * float(memory_clock_khz) * 1e3 * float(bus_width_bits) / 8.0


def detect_gpu(device: str = "cuda") -> dict[str, Any]:
    """What torch reports about the GPU ``device`` (no timing)."""
    torch = _torch_cuda()
    index = device_index(device)
    if index >= torch.cuda.device_count():
        raise TargetError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA "
                          f"device(s), numbered from 0")
    p = torch.cuda.get_device_properties(index)
    return {"name": p.name, "index": index, "capability": [p.major, p.minor],
            "sm_count": int(p.multi_processor_count), "memory_bytes": int(p.total_memory),
            "l2_cache_bytes": int(getattr(p, "L2_cache_size", 0) or 0) or None,
            "sm_clock_khz": getattr(p, "clock_rate", None),
            "memory_clock_khz": getattr(p, "memory_clock_rate", None),
            "memory_bus_width_bits": getattr(p, "memory_bus_width", None),
            "libraries": {"torch": torch.__version__, "cuda": torch.version.cuda}}


# ----------------------------------------------------------------------------- kernels
def _time_events(torch, call, runs: int, warmup: int) -> list[float]:
    """Seconds per call, one CUDA-event pair per run, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    out = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / 1e3)
    return out


def _spread(per_run_rates: list[float]) -> dict[str, Any]:
    q = statistics.quantiles(per_run_rates, n=4) if len(per_run_rates) > 1 else \
        [per_run_rates[0]] * 3
    return {"median": statistics.median(per_run_rates), "iqr": [q[0], q[2]],
            "best": max(per_run_rates)}


def _copy(torch, index: int, params: GpuCalibrationParams, memory: int) -> dict[str, Any]:
    nbytes = int(min(params.copy_bytes, memory // 8))
    src = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{index}").fill_(1)
    dst = torch.empty_like(src)
    times = _time_events(torch, lambda: dst.copy_(src), params.runs, params.warmup)
    if not bool(torch.equal(dst[:4096], src[:4096])):
        raise TargetError("the device-to-device copy returned wrong bytes; the GPU cannot be "
                          "calibrated")
    s = _spread([2 * nbytes / t for t in times])
    src = dst = None  # free the buffers before the GEMMs
    torch.cuda.empty_cache()
    return {"bytes_per_s": s["median"], "bytes_per_s_iqr": s["iqr"],
            "best_bytes_per_s": s["best"], "bytes_per_buffer": nbytes, "runs": len(times),
            "statistic": "median of the runs; bytes read + bytes written"}


def _gemm_kernel(torch, precision: str, dev: str):
    """(name, check, make) for ``precision``, or None when torch has no such kernel."""
    if precision in ("fp32", "fp16", "bf16"):
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
        tol = {"fp32": 1e-3, "fp16": 2e-2, "bf16": 5e-2}[precision]

        def check():
            a = torch.randn(128, 128, device=dev)
            b = torch.randn(128, 128, device=dev)
            got = (a.to(dtype) @ b.to(dtype)).double().cpu()
            ref = a.double().cpu() @ b.double().cpu()
            err = float((got - ref).abs().max() / ref.abs().max())
            if err > tol:
                raise ValueError(f"result off by {err:.2g} of the largest entry")

        def make(n):
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            return lambda: torch.matmul(a, b)

        name = {"fp32": "torch.matmul fp32 (cuBLAS, TF32 off)",
                "fp16": "torch.matmul fp16 (cuBLAS)", "bf16": "torch.matmul bf16 (cuBLAS)"}
        return name[precision], check, make
    if precision == "int8" and hasattr(torch, "_int_mm"):
        def check():
            a = torch.randint(-8, 8, (64, 64), dtype=torch.int8, device=dev)
            b = torch.randint(-8, 8, (64, 64), dtype=torch.int8, device=dev)
            got = torch._int_mm(a, b).cpu().long()
            if not bool(torch.equal(got, a.cpu().long() @ b.cpu().long())):
                raise ValueError("int8 GEMM result is wrong")

        def make(n):
            # B column-major: cuBLASLt's int8 tensor-core GEMM is "TN"; a row-major B takes
            # a slower path (seen on an H100: 62 TMAC/s, a tenth of the datasheet)
            a = torch.randint(-8, 8, (n, n), dtype=torch.int8, device=dev)
            b = torch.randint(-8, 8, (n, n), dtype=torch.int8, device=dev).t()
            return lambda: torch._int_mm(a, b)

        return "torch._int_mm int8 -> int32 (cuBLASLt, B column-major)", check, make
    return None


def calibrate_gpu(device: str = "cuda", params: GpuCalibrationParams | None = None,
                  detected: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure the GPU now (no cache). Returns the raw calibration record."""
    params = params or GpuCalibrationParams()
    torch = _torch_cuda()
    detected = detected or detect_gpu(device)
    index, dev = detected["index"], f"cuda:{detected['index']}"
    t0 = time.perf_counter()
    record: dict[str, Any] = {
        "schema": GPU_CALIBRATION_SCHEMA,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": detected, "params": asdict(params), "copy": None, "gemm": {},
        "unavailable": {}, "warnings": []}
    with torch.cuda.device(index):
        record["copy"] = _copy(torch, index, params, detected["memory_bytes"])
        # three n x n matrices in the widest dtype must fit in a quarter of the memory
        n = params.gemm_n
        while n > 512 and 3 * n * n * 4 > detected["memory_bytes"] // 4:
            n //= 2
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, not TF32
        try:
            for precision in ("fp32", "fp16", "bf16", "int8"):
                kernel = _gemm_kernel(torch, precision, dev)
                if kernel is None:
                    record["unavailable"][precision] = "this torch has no such GPU kernel"
                    continue
                name, check, make = kernel
                try:
                    check()
                    times = _time_events(torch, make(n), params.runs, params.warmup)
                except Exception as e:  # noqa: BLE001 - a kernel that fails is not calibrated
                    record["unavailable"][precision] = \
                        f"{name}: {type(e).__name__}: {e}".splitlines()[0][:200]
                    continue
                finally:
                    torch.cuda.empty_cache()
                s = _spread([n ** 3 / t for t in times])
                record["gemm"][precision] = {
                    "macs_per_s": s["median"], "macs_per_s_iqr": s["iqr"],
                    "best_macs_per_s": s["best"], "kernel": name, "n": n,
                    "runs": len(times), "statistic": "median of the runs"}
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
    record["duration_s"] = time.perf_counter() - t0
    return record


# ------------------------------------------------------------------------------- caching
def _cache_key(detected: dict[str, Any], params: GpuCalibrationParams) -> dict[str, Any]:
    return {"schema": GPU_CALIBRATION_SCHEMA, "gpu": {k: detected[k] for k in (
        "name", "capability", "sm_count", "memory_bytes")},
        "libraries": detected["libraries"], "params": asdict(params)}


def gpu_calibration(device: str = "cuda", recalibrate: bool = False,
                    params: GpuCalibrationParams | None = None) -> dict[str, Any]:
    """The GPU's record (detection + calibration), from the cache or measured now."""
    from edgeprof.core.cache import cache_dir, cached_record

    params = params or GpuCalibrationParams()
    detected = detect_gpu(device)
    key = _cache_key(detected, params)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    data = cached_record(cache_dir("host") / f"gpu-calibration-{digest}.json", key,
                         lambda: calibrate_gpu(device, params, detected), refresh=recalibrate,
                         required="copy")
    data["gpu"] = {**data["gpu"], "index": detected["index"]}  # the device asked for now
    return data


# ------------------------------------------------------------------------------- target
def _strategy(det: dict[str, Any], peaks: dict[str, float]) -> dict[str, Any]:
    g = ", ".join(f"{k} {v / 1e12:.1f} TMAC/s" for k, v in peaks.items())
    half = "fp16" if "fp16" in peaks else ("bf16" if "bf16" in peaks else "fp32")
    sparse = tuple(det["capability"]) >= (8, 0)
    return {"quantization_bits": 32 if half == "fp32" else 16,
            "pruning_type": "n:m" if sparse else "structured", "layout": "NHWC",
            "precision": half,
            "reason": f"measured on this GPU: {g}. {half} is the precision the GEMMs ran "
                      f"fastest in without a calibration set; int8 needs TensorRT or a static "
                      f"quantizer to reach its rate in a whole network. "
                      + ("n:m (2:4) pruning: sm_80 and later run 2:4 sparsity on tensor cores. "
                         if sparse else "structured pruning: dense kernels do not skip zeros. ")
                      + "NHWC: cuDNN's tensor-core convolutions prefer channels_last."}


def target_from_gpu_calibration(cal: dict[str, Any]) -> Target:
    """Build the validated ``host_gpu`` Target from a calibration record."""
    from edgeprof.targets import host_figures

    det, date = cal["gpu"], cal.get("date", "")
    peaks = host_figures.calibrated_peaks(cal, HOST_GPU_ID, "this GPU")
    q = host_figures.quantity

    def stat(g, scale, unit):
        lo, hi = g.get("macs_per_s_iqr") or g.get("bytes_per_s_iqr")
        return f"median of {g['runs']} runs, IQR {lo / scale:.1f}-{hi / scale:.1f} {unit}"

    peak = {p: q(peaks[p], "MAC/s", f"measured on this GPU by edgeprof calibration "
                 f"({g['kernel']}, {g['n']}x{g['n']}x{g['n']} GEMM, "
                 f"{stat(g, 1e12, 'TMAC/s')}, CUDA events, {date})")
            for p, g in cal["gemm"].items()}
    copy = cal["copy"]
    theory = theoretical_bandwidth(det.get("memory_clock_khz"), det.get("memory_bus_width_bits"))
    memory = {
        "ram": q(det["memory_bytes"], "B", "torch.cuda.get_device_properties().total_memory"),
        "bandwidth": q(copy["bytes_per_s"], "B/s", (
            f"measured on this GPU by edgeprof calibration (device-to-device copy of "
            f"{copy['bytes_per_buffer'] / 2**20:.0f} MiB, bytes read + written, "
            f"{stat(copy, 1e9, 'GB/s')}, CUDA events, {date})"
            + (f"; the driver's theoretical peak is {theory / 1e9:.0f} GB/s (2 x memory "
               f"clock x bus width)" if theory else ""))),
    }
    if det.get("l2_cache_bytes"):
        memory["l2_cache"] = q(det["l2_cache_bytes"], "B",
                               "torch.cuda.get_device_properties().L2_cache_size")
    cap = tuple(det["capability"])
    lanes = FP32_LANES_PER_SM.get(cap)
    cores = (q(det["sm_count"] * lanes, "count", f"{det['sm_count']} SMs x {lanes} FP32 lanes "
               f"per SM (sm_{cap[0]}{cap[1]}; {LANES_SOURCE})") if lanes else
             q(det["sm_count"], "count", f"streaming multiprocessors (sm_{cap[0]}{cap[1]} is not "
               "in edgeprof's lanes-per-SM table, so SMs are counted)"))
    return host_figures.host_target(
        cal, target_id=HOST_GPU_ID, name=f"This machine's GPU ({det['name']})",
        kind="gpu", strategy_class="nvidia_gpu",
        processor=f"{det['name']} (sm_{cap[0]}{cap[1]}), {det['sm_count']} SMs, "
                  f"{det['memory_bytes'] / 2**30:.0f} GiB",
        description="Detected and calibrated on this machine's GPU (--device cuda): peak "
                    "compute and bandwidth are measurements, not vendor figures.",
        preferred_backends=["tensorrt", "torch_compile", "onnxruntime", "torch_eager"],
        compute={"cores": cores, "peak": peak,
                 **({"frequency": q(det["sm_clock_khz"] * 1e3, "Hz",
                                    "torch.cuda.get_device_properties().clock_rate "
                                    "(the SM clock the driver reports)")}
                    if det.get("sm_clock_khz") else {})},
        memory=memory,
        power=q(float("nan"), "W", "not known: edgeprof reads no GPU power counter; energy "
                "is left empty rather than guessed"),
        strategy=_strategy(det, peaks))


def host_gpu_target(device: str = "cuda", recalibrate: bool = False,
                    params: GpuCalibrationParams | None = None) -> Target:
    """The ``host_gpu`` target: this machine's GPU ``device``, detected and calibrated."""
    return target_from_gpu_calibration(gpu_calibration(device, recalibrate, params))


def describe_gpu(cal: dict[str, Any]) -> str:
    """One line about the GPU and what its calibration measured."""
    det = cal["gpu"]
    parts = [f"{det['name']} (sm_{det['capability'][0]}{det['capability'][1]})",
             f"{det['sm_count']} SMs", f"{det['memory_bytes'] / 2**30:.0f} GiB",
             f"copy {cal['copy']['bytes_per_s'] / 1e9:.0f} GB/s"]
    parts += [f"{p} {g['macs_per_s'] / 1e12:.1f} TMAC/s" for p, g in cal["gemm"].items()]
    return ", ".join(parts)


__all__ = ["FP32_LANES_PER_SM", "GpuCalibrationParams", "HOST_GPU_ID", "calibrate_gpu",
           "describe_gpu", "detect_gpu", "device_index", "gpu_calibration",
           "host_gpu_target", "target_from_gpu_calibration", "theoretical_bandwidth"]

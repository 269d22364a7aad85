"""Measuring the ``host`` target (:mod:`edgeprof.targets.host` says how it is counted): the
calibration's sizes and repeats (:class:`CalibrationParams`), timing a call (median,
quartiles, best), the STREAM-style triad, the GEMM kernel of each compute precision with its
correctness check, and the RAPL energy counter and load average read around them. Heavy
libraries (torch) are imported inside functions only."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edgeprof.targets.host_detect import RAPL_DIR, BF16_FLAGS, MiB, read_text_or_none

#: a GEMM is timed at least this many times, so its median and IQR mean something
MIN_GEMM_RUNS = 5


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


# --------------------------------------------------------------------------- calibration
def import_torch():
    try:
        import torch
    except Exception:
        return None
    return torch


class Threads:
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


def run_triad(params: CalibrationParams, detected: dict[str, Any], threads: int) -> dict:
    torch = import_torch() if params.use_torch else None
    array_bytes = _triad_array_bytes(params, detected)
    scalar = 3.0
    for _attempt in range(4):
        n = max(array_bytes // 8, 1024)
        try:
            if torch is not None:
                with Threads(torch, threads):
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
def gemm_kernels(precision: str, torch, isa: dict[str, bool]) -> tuple[list, str | None]:
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


def time_gemm(make: Callable[[int], Callable[[], Any]], params: CalibrationParams) -> dict:
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


def rapl_energy_uj() -> int | None:
    raw = read_text_or_none(RAPL_DIR / "energy_uj")
    return int(raw) if raw and raw.strip().isdigit() else None


def load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - not on this platform
        return None

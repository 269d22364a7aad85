"""Peak memory of a benchmark: peak resident memory above the post-import baseline, in bytes.

Three sources, combined (the largest wins; ``detail["method"]`` names the one used):

* **VmHWM** (Linux) — the kernel's peak-RSS mark of this process, reset at the start by
  writing ``5`` to ``/proc/self/clear_refs`` and read from ``/proc/self/status`` at the end:
  the exact peak of the run, transient activation peaks included.
* **RSS sampling** — where the peak mark cannot be reset (not Linux, or ``clear_refs`` not
  writable), a daemon thread reads this process's RSS every ``interval_s`` (5 ms by default)
  from the baseline to the end of the runs. It can miss a peak shorter than the interval.
  Where VmHWM works no thread runs: the mark already holds every RSS a sampler could read,
  and a second Python thread, even asleep, slowed ExecuTorch's Python runtime by ~9 %.
* **ru_maxrss** — the kernel's exact lifetime peak of this process. It says something about
  this run only when it grew during the run (then the run set a new lifetime peak, and that
  peak is exact). Linux carries it across fork+exec, so even a freshly spawned worker may
  start with its parent's peak; the growth rule covers that too.

``peak_bytes = max(VmHWM since reset, sampled peak, ru_maxrss if it grew) - baseline``. Where torch is already
loaded and the device is CUDA, the CUDA caching allocator's peak is reported as well.
``detail`` says which method produced the figure.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

DEFAULT_INTERVAL_S = 0.005


def current_rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def ru_maxrss_bytes() -> int | None:
    """The process's lifetime peak RSS in bytes (None where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(v if sys.platform == "darwin" else v * 1024)  # macOS: bytes, Linux: KiB


def reset_peak_mark() -> bool:
    """Reset this process's VmHWM (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_mark_bytes() -> int | None:
    """VmHWM of this process in bytes (Linux), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cuda_device(device: str) -> Any | None:
    """torch, if it is already imported and ``device`` is CUDA and present (never imports it)."""
    torch = sys.modules.get("torch")
    if torch is None or not str(device).startswith("cuda"):
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken CUDA setup must not break measurement
        return None


class PeakMemory:
    """Context manager (or ``start()``/``stop()``) measuring peak RSS above the baseline.

    The baseline is the RSS when ``start()`` is called: call it after the runtime's modules are
    imported, so the figure is the model's and the runtime's working memory, not its libraries.
    """

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, device: str = "cpu"):
        self.interval_s = float(interval_s)
        self.device = device
        self.baseline: int | None = None
        self.sampled_peak: int = 0
        self.samples = 0
        self._ru_before: int | None = None
        self._ru_after: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._torch = None
        self.cuda_peak: int | None = None
        self._hwm_reset = False
        self.hwm_peak: int | None = None

    # -- sampling --------------------------------------------------------------------
    def _loop(self) -> None:
        import psutil

        proc = psutil.Process()
        while not self._stop.wait(self.interval_s):
            try:
                rss = proc.memory_info().rss
            except Exception:  # noqa: BLE001 - process going away
                return
            self.samples += 1
            if rss > self.sampled_peak:
                self.sampled_peak = rss

    def start(self) -> PeakMemory:
        self._hwm_reset = reset_peak_mark()
        self.baseline = current_rss()
        self.sampled_peak = self.baseline
        self._ru_before = ru_maxrss_bytes()
        self._torch = _cuda_device(self.device)
        if self._torch is not None:
            self._torch.cuda.reset_peak_memory_stats()
        # the sampler only where the kernel keeps no exact peak: VmHWM holds every RSS the
        # sampler could read, and a Python thread alive beside the runs, even asleep, cost
        # ExecuTorch's Python runtime ~9 % (benchmarks/bare_loop_native.py)
        if self.interval_s > 0 and not self._hwm_reset:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="edgeprof-rss", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> PeakMemory:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=1.0)
            self._thread = None
        try:
            rss = current_rss()
            self.sampled_peak = max(self.sampled_peak, rss)
        except Exception:  # noqa: BLE001
            pass
        self._ru_after = ru_maxrss_bytes()
        self.hwm_peak = peak_mark_bytes() if self._hwm_reset else None
        if self._torch is not None:
            try:
                self._torch.cuda.synchronize()
                self.cuda_peak = int(self._torch.cuda.max_memory_allocated())
            except Exception:  # noqa: BLE001
                self.cuda_peak = None
        return self

    def __enter__(self) -> PeakMemory:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- results ---------------------------------------------------------------------
    @property
    def ru_peak_valid(self) -> bool:
        """ru_maxrss speaks for this run: it grew during it (a new lifetime peak)."""
        if self._ru_after is None or self._ru_before is None:
            return False
        return self._ru_after > self._ru_before

    @property
    def peak_rss(self) -> int | None:
        if self.baseline is None:
            return None
        peak = max(self.sampled_peak, self.hwm_peak or 0)
        if self.ru_peak_valid:
            peak = max(peak, self._ru_after or 0)
        return peak

    @property
    def peak_bytes(self) -> int | None:
        """Peak RSS above the baseline, in bytes (never negative)."""
        peak = self.peak_rss
        if peak is None or self.baseline is None:
            return None
        return max(0, peak - self.baseline)

    def detail(self) -> dict[str, Any]:
        candidates = {"rss_sampling": self.sampled_peak, "vmhwm": self.hwm_peak or 0,
                      "ru_maxrss": (self._ru_after or 0) if self.ru_peak_valid else 0}
        method = max(candidates, key=lambda k: (candidates[k], k == "vmhwm"))
        d: dict[str, Any] = {
            "method": method,
            "baseline": "RSS after the runtime's modules were imported, before prepare",
            "baseline_rss_bytes": self.baseline,
            "peak_rss_bytes": self.peak_rss,
            "sampled_peak_rss_bytes": self.sampled_peak,
            "vmhwm_bytes": self.hwm_peak,
            "ru_maxrss_bytes": self._ru_after,
            "ru_maxrss_applies": self.ru_peak_valid,
            "interval_s": self.interval_s,
            "samples": self.samples,
        }
        if self.cuda_peak is not None:
            d["cuda_allocator_peak_bytes"] = self.cuda_peak
        return d


__all__ = ["DEFAULT_INTERVAL_S", "PeakMemory", "current_rss", "ru_maxrss_bytes"]

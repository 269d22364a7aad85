"""Peak memory without a second thread where the kernel keeps the exact peak: the RSS
sampler thread is only the fallback. A Python thread alive beside the runs, even one asleep,
cost ExecuTorch's Python runtime ~9 % of its latency (small_resnet, 1 thread: harness 0.353
ms against its own loop's 0.309 ms; benchmarks/bare_loop_native.py), and VmHWM already holds
every peak the sampler could see."""

from __future__ import annotations

import mmap
import threading

import pytest

from edgeprof.profilers.measure.memory import PeakMemory, reset_peak_mark


def _sampler_alive() -> bool:
    return any(t.name == "edgeprof-rss" for t in threading.enumerate())


def test_no_sampler_thread_where_the_kernel_peak_mark_works():
    if not reset_peak_mark():
        pytest.skip("/proc/self/clear_refs is not writable here (not Linux, or restricted)")
    mem = PeakMemory(interval_s=0.005).start()
    try:
        assert not _sampler_alive()
        # fresh pages (an anonymous mapping, every page written): a bytearray may reuse heap
        # pages an earlier test left resident, which raise no peak (seen in full runs)
        block = mmap.mmap(-1, 30_000_000)
        for i in range(0, 30_000_000, mmap.PAGESIZE):
            block[i] = 1
        block.close()
    finally:
        mem.stop()
    d = mem.detail()
    assert d["method"] == "vmhwm" and mem.peak_bytes >= 0.9 * 30_000_000, d


def test_the_sampler_runs_where_the_peak_mark_cannot_be_reset(monkeypatch):
    import edgeprof.profilers.measure.memory as memory

    monkeypatch.setattr(memory, "reset_peak_mark", lambda: False)
    mem = PeakMemory(interval_s=0.005).start()
    try:
        assert _sampler_alive()
    finally:
        mem.stop()
    assert not _sampler_alive() and mem.peak_bytes is not None

"""Batch-size sweeps, the largest batch that fits, latency budgets and the two scenarios."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import ConstraintError, InputSpecError, UnknownNameError, UserError
from edgeprof.core.results import LatencyStats
from edgeprof.profilers.measure.batching import (BATCH_COLUMNS, benchmark_batch_sizes, check_batch_sizes,
                                         check_budget, find_optimal_batch_size, meets_budget,
                                         offline, run_scenario, single_stream)


from tests import fakes  # noqa: E402


def cfg(**options):
    return RunConfig(min_time_s=0.03, max_time_s=1.0, runs=20, options=options)


# ----------------------------------------------------------------------- validation
@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "8", [1, 0], []])
def test_bad_batch_sizes(bad):
    with pytest.raises(InputSpecError, match="batch size"):
        check_batch_sizes(bad)


def test_batch_sizes_are_sorted_and_deduplicated():
    assert check_batch_sizes([8, 1, 4, 1]) == [1, 4, 8]
    assert check_batch_sizes(3) == [3]


@pytest.mark.parametrize("bad", ["fast", float("nan"), -1, 0, True, [3]])
def test_latency_budget_must_be_a_positive_number(bad):
    with pytest.raises(UserError, match="latency budget"):
        check_budget(bad)
    assert check_budget("12.5") == 12.5 and check_budget(None) is None


def _stats(median, p90):
    return LatencyStats(n=100, median_ms=median, mean_ms=median, std_ms=0, cv=0, iqr_ms=0,
                        min_ms=median, max_ms=p90 or median, p50_ms=median, p90_ms=p90,
                        p99_ms=None, ci_low_ms=None, ci_high_ms=None)


def test_budget_uses_p90_when_present_else_median():
    assert meets_budget(_stats(5.0, 12.0), 10) is False  # p90 decides
    assert meets_budget(_stats(5.0, 9.0), 10) is True
    assert meets_budget(_stats(5.0, None), 10) is True  # no p90: the median decides
    assert meets_budget(_stats(11.0, None), 10) is False
    assert meets_budget(None, 10) is None
    with pytest.raises(UserError):
        meets_budget(_stats(5.0, None), "soon")


# ------------------------------------------------------------------------- sweeps
def test_sweep_reports_per_batch_and_per_sample_and_stops_at_oom():
    results = []
    df = benchmark_batch_sizes(fakes.FakeBusyBackend(), fakes.fake_handle(), [16, 1, 2, 4, 8],
                               cfg(fake_ms=0.1, fake_scale_with_batch=True,
                                   fake_oom_above_batch=4), results=results)
    assert list(df.columns) == BATCH_COLUMNS
    assert list(df["batch_size"]) == [1, 2, 4, 8]  # 16 never ran
    assert list(df["status"]) == ["ok", "ok", "ok", "failed"]
    assert df.attrs["stopped_at_batch"] == 8
    assert "out of memory at batch 8" in df.attrs["stop_reason"]
    ok = df[df["status"] == "ok"]
    assert (ok["latency_per_sample_ms"] == ok["latency_ms"] / ok["batch_size"]).all()
    assert (ok["throughput_per_s"] - ok["batch_size"] * 1e3 / ok["latency_ms"]).abs().max() < 1e-6
    # the fake's latency grows with the batch (0.1 ms per sample)
    assert ok["latency_ms"].iloc[2] > 2 * ok["latency_ms"].iloc[0]
    assert [r.batch_size for r in results] == [1, 2, 4, 8]


def test_sweep_marks_the_latency_budget():
    df = benchmark_batch_sizes(fakes.FakeBusyBackend(), fakes.fake_handle(), [1, 8],
                               cfg(fake_ms=0.1, fake_scale_with_batch=True),
                               latency_budget_ms=0.5)
    assert list(df["meets_budget"]) == [True, False]


# ------------------------------------------------------------- memory-based choice
class FakeEstimator:
    """weights 1 MB + 100 kB of activations per sample; roofline 0.1 ms per sample."""

    def __init__(self):
        self.calls = []

    def __call__(self, model, target, precision="fp32", batch_size=None):
        self.calls.append(batch_size)
        return SimpleNamespace(parameter_bytes=1e6, peak_activation_bytes=1e5 * batch_size,
                               roofline_latency_ms=0.1 * batch_size)


def test_largest_power_of_two_batch_that_fits():
    est = FakeEstimator()
    target = SimpleNamespace(id="tiny", ram=SimpleNamespace(value=2e6))
    choice = find_optimal_batch_size(est, "model", target, max_batch_size=1024)
    assert choice.batch_size == 8  # 1e6 + 8e5 <= 2e6 < 1e6 + 16e5
    assert choice.memory_bytes == pytest.approx(1.8e6)
    assert choice.memory_limit_bytes == 2e6 and choice.limited_by == "memory"
    assert len(est.calls) <= 6  # bisected over 11 candidates, not a linear scan


def test_exact_batch_with_explicit_candidates_and_memory_fraction():
    choice = find_optimal_batch_size(FakeEstimator(), "m", 2e6, candidates=range(1, 65))
    assert choice.batch_size == 10
    choice = find_optimal_batch_size(FakeEstimator(), "m", 2e6, candidates=range(1, 65),
                                     memory_fraction=0.75)
    assert choice.batch_size == 5  # 1.5e6 allowed


def test_max_batch_size_limits_the_choice():
    choice = find_optimal_batch_size(FakeEstimator(), "m", 1e9, max_batch_size=6)
    assert choice.batch_size == 6 and choice.limited_by == "max_batch_size"


def test_batch_that_cannot_fit_is_a_clear_error():
    with pytest.raises(ConstraintError, match="batch 1 needs about 1.1 MB"):
        find_optimal_batch_size(FakeEstimator(), "m", 1e6)


def test_estimated_latency_budget_narrows_the_choice():
    choice = find_optimal_batch_size(FakeEstimator(), "m", 1e9, max_batch_size=64,
                                     latency_budget_ms=0.45)
    assert choice.batch_size == 4 and choice.limited_by == "latency_budget"
    assert choice.latency_provenance == "estimated" and choice.meets_budget is True
    with pytest.raises(ConstraintError, match="latency budget"):
        find_optimal_batch_size(FakeEstimator(), "m", 1e9, latency_budget_ms=0.01)


class EstimatingBusyBackend(fakes.FakeBusyBackend):
    def estimate(self, model, target, precision="fp32", batch_size=None):
        return FakeEstimator()(model, target, precision, batch_size)


def test_measured_latency_budget_with_a_backend():
    b = EstimatingBusyBackend()
    choice = find_optimal_batch_size(b, fakes.fake_handle(), 1e9, max_batch_size=16,
                                     latency_budget_ms=0.6,
                                     config=cfg(fake_ms=0.1, fake_scale_with_batch=True))
    # measured 0.1 ms per sample: batch 4 (~0.4 ms) meets 0.6 ms, batch 8 (~0.8 ms) does not
    assert choice.batch_size == 4
    assert choice.latency_provenance == "measured" and choice.limited_by == "latency_budget"


# ------------------------------------------------------------------------ scenarios
def test_single_stream_is_batch_one_latency():
    s = single_stream(fakes.FakeBusyBackend(), fakes.fake_handle(batch_size=4),
                      cfg(fake_ms=0.2), latency_budget_ms=100)
    assert s.scenario == "single_stream" and s.batch_size == 1 and s.status == "ok"
    assert s.result.batch_size == 1
    assert s.latency_ms == pytest.approx(0.2, rel=0.5)
    assert s.meets_budget is True


def test_offline_picks_the_best_throughput_and_survives_oom():
    # constant time per batch: throughput grows with the batch until memory runs out at 8
    s = run_scenario("offline", fakes.FakeBusyBackend(), fakes.fake_handle(),
                     cfg(fake_ms=0.2, fake_oom_above_batch=4), batch_sizes=[1, 2, 4, 8, 16])
    assert s.status == "ok" and s.batch_size == 4
    assert s.throughput_per_s == pytest.approx(4e3 / s.latency_ms)
    assert "out of memory at batch 8" in s.reason
    assert list(s.table["batch_size"]) == [1, 2, 4, 8]


def test_unknown_scenario():
    with pytest.raises(UnknownNameError, match="scenario"):
        run_scenario("server", fakes.FakeBusyBackend(), fakes.fake_handle())


def test_offline_with_nothing_measured_is_failed_not_an_exception():
    s = offline(fakes.FakeRaiseBackend(), fakes.fake_handle(), cfg(), batch_sizes=[1, 2])
    assert s.status == "failed" and "fake failure" in s.reason


# ----------------------------------------------------------------- peak memory per batch
_LAZY: list = []  # what the fake runtime keeps of its first use in this process


class LazyRuntimeBackend(fakes.FakeBusyBackend):
    """Like torch: its first prepare in a process keeps a one-time 24 MB (thread pools,
    kernel caches); each model holds 6 MB per sample while it is loaded."""

    name = "fake_lazy_runtime"

    def prepare(self, model, config, inputs):
        import numpy as np

        if not _LAZY:
            _LAZY.append(np.ones(24_000_000, dtype=np.uint8))
        held = np.ones(6_000_000 * model.batch_size, dtype=np.uint8)
        prepared = super().prepare(model, config, inputs)
        prepared.extra["held"] = int(held[-1])
        prepared.run = lambda xs, held=held: xs
        return prepared


def test_peak_memory_of_each_batch_is_measured_from_one_start():
    """batch small_cnn 1,2,4 read 7.29 MB, 8.9 MB, then 1.04 MB: each batch in the same
    process was measured from the RSS its predecessors left (the first paid the runtime's
    one-time set-up, later ones reused memory freed before them). Every row is now the
    process's peak while that batch ran above one baseline, so a larger batch never reads
    smaller than the runtime's own kept memory, and the rows say how they were measured."""
    _LAZY.clear()
    df = benchmark_batch_sizes(LazyRuntimeBackend(), fakes.fake_handle(), [1, 2, 4], cfg())
    mem = list(df["peak_memory_bytes"])
    assert all(m is not None for m in mem), mem
    for b, m in zip([1, 2, 4], mem):
        assert m >= 24e6 + 6e6 * b * 0.95, (b, mem)  # the runtime's kept memory + the batch's
    # batch 4 holds 18 MB more than batch 1 and 12 MB more than batch 2: above the noise of
    # a process's RSS (one clean-clone run read batch 1 at 38.6 MB, 8.6 MB over its 30 MB,
    # and batch 2 at 36.0 MB, so 1 and 2 are not ordered)
    assert mem[-1] > max(mem[:-1]), mem
    assert "baseline" in df.attrs["memory_baseline"]

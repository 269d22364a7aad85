"""Latency statistics: quantiles, null rules, and the order-statistic CI of the median."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edgeprof.profilers.measure.stats import (MIN_N_P90, MIN_N_P99, latency_stats, median_ci,
                                      median_ci_coverage, median_ci_indices, relative_ci_width)


def test_known_grid_gives_known_quantiles():
    # 0, 1, ..., 1000: the q-th percentile of this grid is exactly 10*q
    x = np.arange(1001, dtype=float)
    s = latency_stats(np.random.default_rng(1).permutation(x))
    assert s.n == 1001
    assert s.median_ms == s.p50_ms == 500.0
    assert s.p90_ms == pytest.approx(900.0)
    assert s.p99_ms == pytest.approx(990.0)
    assert s.iqr_ms == pytest.approx(500.0)
    assert (s.min_ms, s.max_ms) == (0.0, 1000.0)
    assert s.mean_ms == pytest.approx(500.0)
    assert s.std_ms == pytest.approx(np.std(x, ddof=1))
    assert s.cv == pytest.approx(s.std_ms / 500.0)


def test_exponential_sample_matches_theoretical_quantiles():
    # Exp(scale=2): median 2 ln 2, p90 2 ln 10, p99 2 ln 100, IQR 2 ln 3
    x = np.random.default_rng(7).exponential(2.0, 200_000)
    s = latency_stats(x, keep_samples=False)
    assert s.median_ms == pytest.approx(2 * math.log(2), rel=0.01)
    assert s.p90_ms == pytest.approx(2 * math.log(10), rel=0.01)
    assert s.p99_ms == pytest.approx(2 * math.log(100), rel=0.02)
    assert s.iqr_ms == pytest.approx(2 * math.log(3), rel=0.02)
    assert s.ci_low_ms < 2 * math.log(2) < s.ci_high_ms
    assert s.samples_ms == []


@pytest.mark.parametrize("n,has_p90,has_p99", [
    (MIN_N_P90 - 1, False, False), (MIN_N_P90, True, False),
    (MIN_N_P99 - 1, True, False), (MIN_N_P99, True, True),
])
def test_tail_percentiles_need_enough_samples(n, has_p90, has_p99):
    s = latency_stats(np.linspace(1, 2, n))
    assert (s.p90_ms is not None) == has_p90
    assert (s.p99_ms is not None) == has_p99
    if not has_p90:
        assert str(MIN_N_P90) in s.null_reasons["p90_ms"]
    if not has_p99:
        assert str(MIN_N_P99) in s.null_reasons["p99_ms"]
    json.dumps(s.to_dict(), allow_nan=False)


def test_blocked_samples_report_no_tail_percentiles():
    s = latency_stats(np.linspace(1, 2, 5000), block_size=16)
    assert s.p90_ms is None and s.p99_ms is None
    assert "blocks of 16" in s.null_reasons["p90_ms"]
    assert s.block_size == 16
    assert s.ci_low_ms is not None  # the median's CI is still reported


def test_ci_indices_match_the_binomial_table():
    # n = 100: the 95% interval is [x(40), x(61)] (1-based), coverage 0.9648
    assert median_ci_indices(100) == (39, 60)
    assert median_ci_coverage(100, 39) == pytest.approx(0.9648, abs=1e-4)
    # n = 6 is the smallest n with a 95% interval: [x(1), x(6)], coverage 1 - 2/64
    assert median_ci_indices(5) is None
    assert median_ci_indices(6) == (0, 5)
    for n in (6, 11, 50, 333, 1000, 5000):
        lo, hi = median_ci_indices(n)
        assert hi == n - 1 - lo
        assert median_ci_coverage(n, lo) >= 0.95
        # one step narrower would drop below the level: the interval is the tightest
        if lo + 1 < hi - 1:
            assert median_ci_coverage(n, lo + 1) < 0.95


def test_few_samples_have_no_ci_and_say_why():
    s = latency_stats([1.0, 2.0, 3.0])
    assert s.ci_low_ms is None and s.ci_high_ms is None
    assert "too few samples" in s.null_reasons["ci_low_ms"]
    assert median_ci([1.0, 2.0]) is None
    assert relative_ci_width([1.0, 2.0]) is None


def test_ci_of_the_median_covers_the_true_median_about_95_percent():
    rng = np.random.default_rng(12345)
    true_median = math.log(2)  # Exp(1)
    trials, n = 2000, 50
    hits = 0
    for _ in range(trials):
        lo, hi = median_ci(rng.exponential(1.0, n))
        hits += lo <= true_median <= hi
    exact = median_ci_coverage(n, median_ci_indices(n)[0])  # 0.967 for n = 50
    assert 0.95 <= exact < 0.98
    # binomial standard error of the hit rate is ~0.004: allow 4 of them
    assert abs(hits / trials - exact) < 0.016


def test_bad_samples_are_rejected():
    with pytest.raises(ValueError):
        latency_stats([])
    with pytest.raises(ValueError):
        latency_stats([1.0, float("nan")])
    with pytest.raises(ValueError):
        median_ci_indices(10, level=1.5)

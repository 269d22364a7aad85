"""Latency statistics of a steady state: quantiles, spread, and a distribution-free
confidence interval of the median.

Rules (also stated in docs/design.md's "profile.json" contract: missing numbers are ``None`` with a
reason, never NaN):

* quantiles use linear interpolation between order statistics (numpy's default);
* ``p90`` is reported only with ``n >= 64`` samples and ``p99`` only with ``n >= 662``; below
  that the tail is too thin to say anything and the field is ``None`` with the reason in
  ``null_reasons``;
* when calls were timed in blocks (``block_size > 1``) the samples are block means, whose
  tails are narrower than those of single calls, so ``p90``/``p99`` are not reported at all;
* the CI of the median comes from order statistics: with ``B ~ Binomial(n, 1/2)`` the interval
  ``[x_(j), x_(n-j+1)]`` (1-based, sorted) covers the true median with probability
  ``1 - 2 P(B <= j-1)``; ``j`` is the largest index keeping that at or above the level. It
  needs no assumption on the distribution; with fewer than 6 samples no 95% interval exists.

Only numpy is imported (inside functions); no scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from edgeprof.core.results import LatencyStats

#: minimum sample counts for tail percentiles
MIN_N_P90 = 64
MIN_N_P99 = 662
DEFAULT_CI_LEVEL = 0.95


def _log_binom_half_cdf_prefix(n: int, upto: int):
    """log P(B <= m) for m = 0..upto, B ~ Binomial(n, 1/2), computed in log space."""
    import numpy as np

    # log C(n, k) - n log 2 for k = 0..upto
    lgn = math.lgamma(n + 1) - n * math.log(2.0)
    logpmf = np.array([lgn - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                       for k in range(upto + 1)])
    return np.logaddexp.accumulate(logpmf)


def median_ci_indices(n: int, level: float = DEFAULT_CI_LEVEL) -> tuple[int, int] | None:
    """0-based indices ``(lo, hi)`` into the sorted sample bounding the median's CI.

    Returns None when ``n`` is too small for any order-statistic interval to reach ``level``.
    The actual coverage is ``1 - 2 P(B <= lo)`` (at least ``level``).
    """
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    if n < 1:
        return None
    alpha_half = (1.0 - level) / 2.0
    half = n // 2
    logcdf = _log_binom_half_cdf_prefix(n, half)
    import numpy as np

    ok = np.nonzero(logcdf <= math.log(alpha_half))[0]
    if ok.size == 0:
        return None
    m = int(ok[-1])  # largest m with P(B <= m) <= alpha/2; j - 1 = m (1-based j)
    lo = m  # 0-based index of x_(j) with j = m + 1
    hi = n - 1 - m  # 0-based index of x_(n - j + 1)
    if lo >= hi:
        return None
    return lo, hi


def median_ci_coverage(n: int, lo: int) -> float:
    """Exact coverage of ``[x_(lo), x_(n-1-lo)]`` (0-based) for the median."""
    logcdf = _log_binom_half_cdf_prefix(n, lo)
    return 1.0 - 2.0 * math.exp(float(logcdf[lo]))


def median_ci(samples: Sequence[float], level: float = DEFAULT_CI_LEVEL
              ) -> tuple[float, float] | None:
    """Distribution-free CI of the median from order statistics, or None if ``n`` is too small."""
    import numpy as np

    x = np.sort(np.asarray(samples, dtype=np.float64))
    idx = median_ci_indices(x.size, level)
    if idx is None:
        return None
    return float(x[idx[0]]), float(x[idx[1]])


def relative_ci_width(samples: Sequence[float], level: float = DEFAULT_CI_LEVEL) -> float | None:
    """(CI high - CI low) / median, or None when no CI exists."""
    import numpy as np

    ci = median_ci(samples, level)
    if ci is None:
        return None
    med = float(np.median(np.asarray(samples, dtype=np.float64)))
    if med <= 0:
        return None
    return (ci[1] - ci[0]) / med


def latency_stats(samples_ms: Sequence[float], *, block_size: int = 1,
                  ci_level: float = DEFAULT_CI_LEVEL, keep_samples: bool = True) -> LatencyStats:
    """Summarize per-call latencies in milliseconds (block means when ``block_size > 1``)."""
    import numpy as np

    x = np.asarray(samples_ms, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("latency_stats needs at least one sample")
    if not np.all(np.isfinite(x)):
        raise ValueError("latency samples must be finite numbers")
    n = int(x.size)
    s = np.sort(x)
    median = float(np.median(s))
    mean = float(s.mean())
    std = float(s.std(ddof=1)) if n > 1 else 0.0
    q25, q75 = (float(v) for v in np.percentile(s, [25, 75]))
    reasons: dict[str, str] = {}

    p90: float | None = None
    p99: float | None = None
    if block_size > 1:
        why = (f"calls were timed in blocks of {block_size} (too short to time one by one); "
               "tail percentiles of block means are not reported")
        reasons["p90_ms"] = why
        reasons["p99_ms"] = why
    else:
        if n >= MIN_N_P90:
            p90 = float(np.percentile(s, 90))
        else:
            reasons["p90_ms"] = f"needs at least {MIN_N_P90} samples, have {n}"
        if n >= MIN_N_P99:
            p99 = float(np.percentile(s, 99))
        else:
            reasons["p99_ms"] = f"needs at least {MIN_N_P99} samples, have {n}"

    ci = median_ci(s, ci_level)
    if ci is None:
        reasons["ci_low_ms"] = reasons["ci_high_ms"] = (
            f"too few samples ({n}) for a {ci_level:.0%} order-statistic CI of the median")
    cv = std / mean if mean > 0 else 0.0
    return LatencyStats(
        n=n, median_ms=median, mean_ms=mean, std_ms=std, cv=float(cv), iqr_ms=q75 - q25,
        min_ms=float(s[0]), max_ms=float(s[-1]), p50_ms=median, p90_ms=p90, p99_ms=p99,
        ci_low_ms=None if ci is None else ci[0], ci_high_ms=None if ci is None else ci[1],
        ci_level=ci_level, block_size=int(block_size), null_reasons=reasons,
        samples_ms=[float(v) for v in x] if keep_samples else [],
    )


__all__ = ["MIN_N_P90", "MIN_N_P99", "latency_stats", "median_ci", "median_ci_coverage",
           "median_ci_indices", "relative_ci_width"]

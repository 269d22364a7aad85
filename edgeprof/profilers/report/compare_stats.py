"""The statistics of a comparison and the rows that carry them: the thresholds (``ALPHA``,
``MIN_REL_CHANGE``, ``MIN_CLIFFS_DELTA``), the Mann-Whitney U test (scipy's), Cliff's delta
from U, :func:`compare_samples` (the figures and verdict for two samples),
:func:`min_p_value`, and the rows :class:`Comparison` (tensor) and
:class:`GenerativeComparison`. Part of :mod:`edgeprof.profilers.report.compare`, whose
docstring states the rule."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from edgeprof.core.errors import UserError

ALPHA = 0.05
MIN_REL_CHANGE = 0.02
MIN_CLIFFS_DELTA = 0.147


@dataclass
class Comparison:
    """One (backend, precision) row of a comparison. Latencies in ms; delta = B - A."""

    backend: str
    precision: str
    status: str  # compared | only_in_a | only_in_b | no_samples
    verdict: str  # faster | slower | no significant change | not compared
    significant: bool | None = None
    median_a_ms: float | None = None
    median_b_ms: float | None = None
    delta_ms: float | None = None
    delta_pct: float | None = None  # 100 * (B - A) / A
    p_value: float | None = None
    cliffs_delta: float | None = None  # > 0: B tends to be slower
    ci_a_ms: list[float] | None = None
    ci_b_ms: list[float] | None = None
    ci_overlap: bool | None = None
    n_a: int | None = None
    n_b: int | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    #: the function of :mod:`~edgeprof.profilers.report.compare_text` that prints its rows
    table: ClassVar[str] = "format_tensor_comparison"

    def to_dict(self) -> dict[str, Any]:
        from edgeprof.core.results import clean

        return clean(asdict(self))


@dataclass
class GenerativeComparison:
    """One (backend, format, depth) and figure of two generative profiles. ``figure`` is one
    of ``prefill_tokens_per_s``, ``decode_tokens_per_s``, ``ttft_ms``, ``tpot_ms`` (None on a
    row that stands for the whole run: only in one profile, or no samples); values in
    ``unit``, delta = B - A. ``higher_is_better``: True for the rates, so a significant rise
    is "faster"; for the times a significant rise is "slower"."""

    backend: str
    format: str
    depth: int
    figure: str | None
    status: str  # compared | only_in_a | only_in_b | no_samples | too_few_samples
    verdict: str  # faster | slower | no significant change | not compared
    unit: str | None = None
    higher_is_better: bool | None = None
    significant: bool | None = None
    median_a: float | None = None
    median_b: float | None = None
    delta: float | None = None
    delta_pct: float | None = None  # 100 * (B - A) / A
    p_value: float | None = None
    cliffs_delta: float | None = None  # > 0: B's values tend to be larger
    ci_a: list[float] | None = None
    ci_b: list[float] | None = None
    ci_overlap: bool | None = None
    n_a: int | None = None
    n_b: int | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    kind: str = "generative"

    table: ClassVar[str] = "format_generative_comparison"

    def to_dict(self) -> dict[str, Any]:
        from edgeprof.core.results import clean

        return clean(asdict(self))


# --------------------------------------------------------------------------- tests
def mann_whitney(a, b) -> tuple[float, float]:
    """Two-sided Mann-Whitney U of ``a`` vs ``b`` (scipy's, a dependency): ``(U_a, p)``."""
    from scipy.stats import mannwhitneyu

    res = mannwhitneyu(a, b, alternative="two-sided")
    return float(res.statistic), float(res.pvalue)


def cliffs_delta_from_u(u_a: float, n_a: int, n_b: int) -> float:
    """Cliff's delta of B versus A, ``P(b > a) - P(b < a)``, from A's U statistic (the number
    of pairs with ``a > b``, ties counted half): ``1 - 2 U_a / (n_a n_b)``."""
    return 1.0 - 2.0 * u_a / (n_a * n_b)


def compare_samples(a_ms, b_ms, *, alpha: float = ALPHA, min_rel_change: float = MIN_REL_CHANGE,
                    min_cliffs: float = MIN_CLIFFS_DELTA) -> dict[str, Any]:
    """The comparison figures and verdict for two latency samples (ms)."""
    import numpy as np

    from edgeprof.profilers.measure.stats import median_ci

    try:
        a = np.asarray(a_ms, dtype=np.float64)
        b = np.asarray(b_ms, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise UserError(f"latency samples must be numbers of ms ({e})") from None
    bad = int((~np.isfinite(a)).sum() + (~np.isfinite(b)).sum())
    if bad:  # a NaN compares false with everything: the test would say "no change"
        raise UserError(f"{bad} latency samples are not finite numbers (NaN or inf); "
                        "nothing can be concluded from them")
    ma, mb = float(np.median(a)), float(np.median(b))
    u_a, p = mann_whitney(a, b)
    delta = cliffs_delta_from_u(u_a, a.size, b.size)
    rel = (mb - ma) / ma if ma > 0 else math.inf
    ci_a, ci_b = median_ci(a), median_ci(b)
    overlap = None
    if ci_a and ci_b:
        overlap = not (ci_a[1] < ci_b[0] or ci_b[1] < ci_a[0])
    significant = bool(p < alpha and abs(rel) >= min_rel_change and abs(delta) >= min_cliffs)
    verdict = ("slower" if mb > ma else "faster") if significant else "no significant change"
    return {"median_a_ms": ma, "median_b_ms": mb, "delta_ms": mb - ma,
            "delta_pct": 100.0 * rel if math.isfinite(rel) else None, "p_value": p,
            "cliffs_delta": delta, "ci_a_ms": list(ci_a) if ci_a else None,
            "ci_b_ms": list(ci_b) if ci_b else None, "ci_overlap": overlap,
            "n_a": int(a.size), "n_b": int(b.size), "significant": significant,
            "verdict": verdict}


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the exact Mann-Whitney U test can give for samples of
    ``n_a`` and ``n_b`` (all of one side below all of the other): ``2 / C(n_a + n_b, n_a)``.
    With 2 and 2 repetitions it is 0.33: no difference could ever be significant."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a)) if n_a and n_b else 1.0


def samples_for_significance(alpha: float) -> int:
    return next((n for n in range(2, 64) if min_p_value(n, n) < alpha), 64)

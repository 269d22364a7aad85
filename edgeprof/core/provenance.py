"""Which figure to decide on, and what a budget verdict may claim from it.

Every ranking and every budget check (recommend, optimize, the profile verdict) uses, per
candidate, the best figure it has, in this order of preference: *measured* (on the board
itself, or on this machine when the target is this machine), *predicted* (a calibration of
that target and runtime, with its interval), *estimated* (derived by a named method from
that target's calibration, e.g. another runtime's transfer), *uncalibrated* (the roofline
times the published prior of every board) and last the *analytic* roofline. A
better-founded figure outranks a faster guess.

A budget is *met* only when the figure used meets it. With an interval, the verdict says how
sure: met even at the interval's high end, likely (the value meets it, the high end does
not), or not met. The roofline is a lower bound: it can show that a budget is missed (by at
least the amount it exceeds it), never that it is met.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: provenances in order of preference (lower index wins)
PREFERENCE = ("measured", "predicted", "estimated", "uncalibrated", "analytic")


def rank(provenance: str | None) -> int:
    """0 for measured ... 4 for the analytic roofline; unknown provenances rank last."""
    try:
        return PREFERENCE.index(provenance or "")
    except ValueError:
        return len(PREFERENCE)


def sort_key(provenance: str | None, value: float | None) -> tuple[int, float]:
    """Order candidates by the quality of their figure, then by the figure."""
    return rank(provenance), (float("inf") if value is None else float(value))


@dataclass(frozen=True)
class BudgetVerdict:
    """``met``: True, False, or None where the figure cannot decide (a roofline under the
    budget); ``certainty``: ``sure`` | ``likely`` | ``not`` | ``undecided``; ``text`` for
    people."""

    met: bool | None
    certainty: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"met": self.met, "certainty": self.certainty, "text": self.text}


def budget_verdict(value_ms: float | None, budget_ms: float, provenance: str | None, *,
                   low_ms: float | None = None, high_ms: float | None = None,
                   what: str = "latency") -> BudgetVerdict:
    """Whether ``value_ms`` (of ``provenance``, with its interval) meets ``budget_ms``."""
    if value_ms is None:
        return BudgetVerdict(None, "undecided", f"no {what} figure to judge the budget on")
    v, b = float(value_ms), float(budget_ms)
    if provenance == "analytic":
        if v > b:
            return BudgetVerdict(False, "not", f"misses the {b:.4g} ms budget by at least "
                                               f"{v - b:.4g} ms: its roofline ({v:.4g} ms) is "
                                               "a lower bound")
        return BudgetVerdict(None, "undecided",
                             f"the roofline {v:.4g} ms is under the {b:.4g} ms budget, but it "
                             "is a lower bound: cannot say the budget is met (no calibrated "
                             "figure for this target and runtime)")
    interval = (f" [{low_ms:.4g}-{high_ms:.4g}]" if low_ms is not None and high_ms is not None
                else "")
    label = f"{v:.4g} ms{interval} ({provenance})"
    if v > b:
        if low_ms is not None and low_ms <= b:
            return BudgetVerdict(False, "not", f"{label} misses the {b:.4g} ms budget (its "
                                               "interval's low end would meet it)")
        return BudgetVerdict(False, "not", f"{label} misses the {b:.4g} ms budget")
    if high_ms is None or high_ms <= b:
        sure = "sure" if high_ms is not None or provenance == "measured" else "likely"
        return BudgetVerdict(True, sure, f"{label} meets the {b:.4g} ms budget"
                             + (" even at its interval's high end" if high_ms is not None
                                else ""))
    return BudgetVerdict(True, "likely", f"{label} likely meets the {b:.4g} ms budget (its "
                                         f"interval reaches {high_ms:.4g} ms)")

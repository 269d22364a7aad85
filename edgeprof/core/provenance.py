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
    return _verdict(value_ms, budget_ms, provenance, low_ms, high_ms, unit="ms",
                    higher_is_better=False, what=what, budget_name="budget")


def rate_verdict(value: float | None, budget: float, provenance: str | None, *,
                 low: float | None = None, high: float | None = None, unit: str = "tok/s",
                 what: str = "rate", budget_name: str = "budget") -> BudgetVerdict:
    """Whether a rate ``value`` (higher is better: decode tokens/s) of ``provenance``, with its
    interval, reaches ``budget``: :func:`budget_verdict`'s rule and wording the other way up
    (the interval's low end is the pessimistic one; a roofline rate is an upper bound).
    ``budget_name`` names the bar in the text (``interactive floor``)."""
    return _verdict(value, budget, provenance, low, high, unit=unit, higher_is_better=True,
                    what=what, budget_name=budget_name)


def _verdict(value: float | None, budget: float, provenance: str | None, low: float | None,
             high: float | None, *, unit: str, higher_is_better: bool, what: str,
             budget_name: str) -> BudgetVerdict:
    if value is None:
        return BudgetVerdict(None, "undecided", f"no {what} figure to judge the budget on")
    v, b = float(value), float(budget)
    bar = f"the {b:.4g} {unit} {budget_name}"
    misses = v < b if higher_is_better else v > b
    # the interval's ends: the one that would flip a miss, the one that can spoil a meet
    hopeful, fearful = (high, low) if higher_is_better else (low, high)
    hopeful_end, fearful_end = ("high", "low") if higher_is_better else ("low", "high")
    if provenance == "analytic":
        bound = "an upper" if higher_is_better else "a lower"
        if misses:
            return BudgetVerdict(False, "not", f"misses {bar} by at least {abs(v - b):.4g} "
                                               f"{unit}: its roofline ({v:.4g} {unit}) is "
                                               f"{bound} bound")
        side = "over" if higher_is_better else "under"
        return BudgetVerdict(None, "undecided",
                             f"the roofline {v:.4g} {unit} is {side} {bar}, but it "
                             f"is {bound} bound: cannot say the {budget_name} is met (no "
                             "calibrated figure for this target and runtime)")
    interval = (f" [{low:.4g}-{high:.4g}]" if low is not None and high is not None else "")
    label = f"{v:.4g} {unit}{interval} ({provenance})"
    if misses:
        if hopeful is not None and (hopeful >= b if higher_is_better else hopeful <= b):
            return BudgetVerdict(False, "not", f"{label} misses {bar} (its interval's "
                                               f"{hopeful_end} end would meet it)")
        return BudgetVerdict(False, "not", f"{label} misses {bar}")
    if fearful is None or (fearful >= b if higher_is_better else fearful <= b):
        sure = "sure" if fearful is not None or provenance == "measured" else "likely"
        return BudgetVerdict(True, sure, f"{label} meets {bar}"
                             + (f" even at its interval's {fearful_end} end"
                                if fearful is not None else ""))
    reach = "reaches down to" if higher_is_better else "reaches"
    return BudgetVerdict(True, "likely", f"{label} likely meets {bar} (its interval "
                                         f"{reach} {fearful:.4g} {unit})")

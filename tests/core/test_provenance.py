"""The budget verdict (edgeprof.core.provenance): one rule for a latency (lower is better)
and a rate such as decode tokens/s (higher is better), with the interval saying how sure."""

from __future__ import annotations

import pytest

from edgeprof.core.provenance import budget_verdict, rate_verdict


def test_latency_wording_is_unchanged():
    v = budget_verdict(8.0, 10.0, "predicted", low_ms=6.0, high_ms=12.0)
    assert (v.met, v.certainty) == (True, "likely")
    assert v.text == ("8 ms [6-12] (predicted) likely meets the 10 ms budget (its interval "
                      "reaches 12 ms)")
    v = budget_verdict(12.0, 10.0, "predicted", low_ms=9.0, high_ms=15.0)
    assert v.text == ("12 ms [9-15] (predicted) misses the 10 ms budget (its interval's low "
                      "end would meet it)")
    v = budget_verdict(8.0, 10.0, "analytic")
    assert v.met is None and "lower bound" in v.text


@pytest.mark.parametrize("value,low,high,met,certainty,text", [
    (52.0, 8.0, 118.0, True, "likely",
     "52 tok/s [8-118] (predicted) likely meets the 10 tok/s budget (its interval reaches "
     "down to 8 tok/s)"),
    (52.0, 11.0, 118.0, True, "sure",
     "52 tok/s [11-118] (predicted) meets the 10 tok/s budget even at its interval's low end"),
    (9.5, 7.0, 11.0, False, "not",
     "9.5 tok/s [7-11] (predicted) misses the 10 tok/s budget (its interval's high end would "
     "meet it)"),
    (3.0, 2.0, 4.0, False, "not", "3 tok/s [2-4] (predicted) misses the 10 tok/s budget"),
])
def test_a_rate_is_judged_with_its_interval_the_other_way_up(value, low, high, met, certainty,
                                                             text):
    v = rate_verdict(value, 10.0, "predicted", low=low, high=high)
    assert (v.met, v.certainty, v.text) == (met, certainty, text)


def test_a_rate_roofline_is_an_upper_bound_and_the_budget_can_be_named():
    v = rate_verdict(30.0, 10.0, "analytic")
    assert v.met is None and v.certainty == "undecided" and "upper bound" in v.text
    v = rate_verdict(5.0, 10.0, "analytic")
    assert v.met is False and "upper bound" in v.text
    v = rate_verdict(None, 10.0, "predicted", what="decode rate")
    assert v.met is None and "no decode rate" in v.text
    v = rate_verdict(5.0, 10.0, "predicted", budget_name="interactive floor")
    assert v.text == "5 tok/s (predicted) misses the 10 tok/s interactive floor"

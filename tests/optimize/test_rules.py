"""The plan's figures are predict's (issue 29, item 9): each precision is projected on the
backend that would run it, every step's "after" is the next one's "before", and the plan's
projection is the prediction ``edgeprof.predict`` gives for the plan's final configuration
(same number, same label), or, where steps a prediction does not see scale it, says so."""

from __future__ import annotations

import re

import pytest

from edgeprof.api import predict
from edgeprof.optimize.loop import recommend_plan


def _figures(reason: str) -> tuple[float, float]:
    m = re.search(r"latency ([\d.]+) ms -> ([\d.]+) ms", reason)
    assert m, reason
    return float(m.group(1)), float(m.group(2))


def test_the_plan_offers_the_boards_precision_and_projects_what_predict_says():
    plan = recommend_plan("builtin:small_resnet", "raspberry_pi_4", latency_budget_ms=1.5)
    prec, backend = plan.step("precision"), plan.step("backend")
    # the Pi 4's rows (issue 30's 51) make ncnn its fastest fp32 runtime, which offers no
    # weight-only int8: the plan switches to the runtime that runs the precision it picks
    assert prec.value in ("int8_weight", "int8_dynamic", "int8_static")
    assert backend.value != "ncnn" and "ncnn fp32" in plan.baseline.latency_basis
    want = predict("builtin:small_resnet", "raspberry_pi_4", backend.value, prec.value)
    p = plan.projected
    assert (p.latency_ms, p.latency_low_ms, p.latency_high_ms, p.latency_provenance) == \
        (want.value_ms, want.low_ms, want.high_ms, want.provenance)
    # the step's "after" is the plan's projection, its "before" the baseline
    before, after = _figures(prec.reason)
    assert before == float(f"{plan.baseline.latency_ms:.3g}")
    assert after == float(f"{p.latency_ms:.3g}")
    if p.latency_ms > 1.5:
        assert "meets" not in prec.reason  # a plan that fails: no step may say it meets


def test_every_steps_projection_composes():
    plan = recommend_plan("builtin:small_resnet", "raspberry_pi_4", latency_budget_ms=1.0,
                          max_accuracy_drop=5.0)
    compress = [s for s in plan.steps if s.stage == "compress"]
    assert compress
    assert compress[-1].details["projected_latency_ms"] == plan.projected.latency_ms
    prec = plan.step("precision")
    _before, after = _figures(prec.reason)
    assert after == float(f"{prec.details['projected_latency_ms']:.3g}")


def test_a_prediction_scaled_by_steps_it_does_not_see_is_labelled_estimated():
    plan = recommend_plan("builtin:small_resnet", "raspberry_pi_4", latency_budget_ms=1.0,
                          max_accuracy_drop=5.0)
    p = plan.projected
    if plan.step("pruning") is None:
        want = predict("builtin:small_resnet", "raspberry_pi_4", plan.step("backend").value,
                       plan.step("precision").value)
        assert (p.latency_ms, p.latency_provenance) == (want.value_ms, want.provenance)
    else:
        assert "for the steps it does not see" in p.latency_basis
        assert p.latency_provenance in ("estimated", "uncalibrated", "analytic")


@pytest.mark.parametrize("target,budget", [("mcu", 5.0), ("raspberry_pi_4", 1.5)])
def test_the_baseline_the_backend_step_and_the_precision_steps_before_are_one_configuration(
        target, budget):
    """small_resnet on the MCU: the baseline read 'xcubeai fp32, 131 ms', the backend step
    tflite, the precision step '11.3 ms -> 3.05 ms' (11.3 being tflite fp32's figure) and its
    switch to tinyengine said 'tflite does not' run int8_static, which tflite does."""
    import edgeprof
    from edgeprof.profilers.predict import runtimes

    plan = edgeprof.recommend_plan("builtin:small_resnet", target, latency_budget_ms=budget)
    prec = next(s for s in plan.steps if s.kind == "precision")
    assert f"{plan.baseline.latency_ms:.3g} ms ->" in prec.reason, (plan.baseline, prec.reason)
    backend = next(s for s in plan.steps if s.kind == "backend")
    assert backend.value == plan.projected.backend
    if "does not offer" in backend.reason:
        old = backend.reason.split("(")[-1].split()[0]
        assert not runtimes.offers(old, prec.value)

"""The optimize page shows the plan's figures under their own provenance (issue 29, item 2):
a baseline the terminal calls predicted is not "estimated" on the page."""

from __future__ import annotations

import re

from edgeprof.profilers.report.html import render_optimize_html


def _projection(ms, prov, lo=None, hi=None):
    return {"latency_ms": ms, "latency_provenance": prov, "latency_low_ms": lo,
            "latency_high_ms": hi, "latency_basis": "tflite fp32, calibrated by "
            "raspberry_pi_4--published", "memory_bytes": 185000.0, "precision": "fp32",
            "provenance": "estimated", "device_memory_note": "0.185 MB needed"}


def test_the_plans_latency_carries_its_own_provenance():
    doc = {"target": {"id": "raspberry_pi_4"}, "model": {"name": "small_cnn"},
           "candidates": [], "constraints": {}, "verdict": {},
           "plan": {"model": "small_cnn", "target": "raspberry_pi_4", "bound": "memory",
                    "steps": [], "baseline": _projection(0.3233, "predicted", 0.2301, 0.4328),
                    "projected": _projection(0.3233, "predicted", 0.2301, 0.4328)}}
    html = render_optimize_html(doc)
    for key in ("baseline", "projected"):
        m = re.search(rf'data-key="plan_{key}_latency_ms" data-value="([^"]+)" '
                      r'data-prov="([^"]*)"', html)
        assert m, key
        assert float(m.group(1)) == 0.3233 and m.group(2) == "predicted"
    assert "0.2301" in html or "0.23" in html  # the interval is shown with it


def test_the_plan_shows_threads_and_memory_readably():
    """The plan showed threads as raw JSON ({"inter_op": 1, "intra_op": 4}) and the Pi's RAM
    as "4.29e+03 MB"."""
    from types import SimpleNamespace

    from edgeprof.optimize.router_context import RouterContext
    from edgeprof.targets import get_target

    fits, note = RouterContext.device_fit(SimpleNamespace(target=get_target("raspberry_pi_4")),
                                          150000.0, 35000.0)
    assert fits and note == "0.185 MB needed of 4.29 GB RAM"
    proj = {**_projection(0.3233, "predicted"), "device_memory_note": note}
    doc = {"target": {"id": "raspberry_pi_4"}, "model": {"name": "small_cnn"},
           "candidates": [], "constraints": {}, "verdict": {},
           "plan": {"model": "small_cnn", "target": "raspberry_pi_4", "bound": "memory",
                    "steps": [{"kind": "threads", "value": {"inter_op": 1, "intra_op": 4},
                               "reason": "r", "stage": "s", "rule": "x"},
                              {"kind": "layout", "value": "NHWC", "reason": "r",
                               "stage": "s", "rule": "y"}],
                    "baseline": proj, "projected": proj}}
    html = render_optimize_html(doc)
    steps = html[html.index('id="plan-steps"'):]
    steps = steps[:steps.index("</ol>")]
    assert "inter_op 1, intra_op 4" in steps and "{" not in steps and "&#34;" not in steps
    assert "NHWC" in steps
    assert "e+0" not in html[html.index('id="plan"'):html.index('id="candidates-section"')]

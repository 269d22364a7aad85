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

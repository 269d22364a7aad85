"""The compare page (``render_compare_html``, two profile.json dicts): medians of A and B with
their CIs, the change and its significance per (backend, precision), each side's runs and
command."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.profilers.report.html_common import render, warning_groups
from edgeprof.profilers.report.html_figures import latency_bars
from edgeprof.profilers.report.html_profile import profile_command, runs_context


def render_compare_html(a: Mapping[str, Any], b: Mapping[str, Any], rows: Sequence[Any] | None =
                        None, *, label_a: str = "A", label_b: str = "B",
                        command: str | None = None) -> str:
    """Before/after page for two profile.json dicts: medians with CI whiskers, the change and
    its significance per (backend, precision) (``compare.compare_results`` when ``rows`` is
    not given)."""
    from edgeprof.profilers.report.compare import (ALPHA, MIN_CLIFFS_DELTA, MIN_REL_CHANGE,
                                                   compare_results)
    from edgeprof.profilers.report.family import member_of

    member = member_of(a)
    if not member.comparison_page:
        raise UserError(f"--html draws tensor profiles only; compare {member.word} profiles as "
                        "the table or with --json")
    if rows is None:
        rows = compare_results(dict(a), dict(b))
    items = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in rows]
    for r in items:
        r["label"] = f"{r.get('backend')} {r.get('precision')}"
        ca, cb = r.get("ci_a_ms") or [None, None], r.get("ci_b_ms") or [None, None]
        r["a_lo"], r["a_hi"], r["b_lo"], r["b_hi"] = ca[0], ca[1], cb[0], cb[1]
    chart, bars = latency_bars(
        [r for r in items if r.get("status") == "compared"],
        f"Median latency: {label_a} vs {label_b} (measured)", "compare",
        [(f"{label_a} (measured)", "median_a_ms", "a_lo", "a_hi"),
         (f"{label_b} (measured)", "median_b_ms", "b_lo", "b_hi")])
    counts = Counter(r.get("verdict") or "not compared" for r in items)
    sides = []
    for label, d in ((label_a, a), (label_b, b)):
        sides.append({"label": label, "doc": d, "model": (d.get("model") or {}),
                      "target": (d.get("target") or {}), "command": profile_command(d),
                      "runs": runs_context(d)})
    warnings = warning_groups([*(a.get("warnings") or []), *(b.get("warnings") or [])])
    return render("compare.html.j2", kind="compare", rows=items, sides=sides, counts=counts,
                  warnings=warnings, charts={"compare": chart}, chart_info={"bars": bars},
                  rule={"alpha": ALPHA, "min_rel_change": MIN_REL_CHANGE,
                        "min_cliffs": MIN_CLIFFS_DELTA},
                  command=command or f"edgeprof compare {shlex.quote(label_a)} "
                                     f"{shlex.quote(label_b)}",
                  title=f"{label_a} vs {label_b}")

"""The optimize page (``render_optimize_html``, optimize.json's dict): the verdict, latency
vs accuracy with the Pareto front, the router's plan and its reasons, every candidate with
its status and reason, precision trade-offs, and the command that reproduces it."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from edgeprof.profilers.report.html_common import (chart_html, esc, sig, num, render, table_data,
                                                   warning_groups)


def pareto_front(points: Sequence[Mapping[str, Any]], x: str = "latency_ms",
                 y: str = "accuracy") -> list[Mapping[str, Any]]:
    """The points no other point beats on both lower ``x`` and higher ``y``, by ``x``."""
    pts = sorted((p for p in points if num(p.get(x)) is not None and num(p.get(y)) is not None),
                 key=lambda p: (num(p[x]), -num(p[y])))
    front, best = [], -math.inf
    for p in pts:
        if num(p[y]) > best:
            front.append(p)
            best = num(p[y])
    return front


def optimize_command(doc: Mapping[str, Any]) -> str:
    """The command that ran (optimize.json's ``command``, recorded by the CLI), else one
    rebuilt from optimize.json (its backends and compressions are the ones its candidates
    used)."""
    if isinstance(doc.get("command"), str) and doc["command"]:
        return doc["command"]
    model = doc.get("model") or {}
    spec = str(model.get("spec") or "MODEL")
    if spec.endswith("@digits"):
        spec = spec[: -len("@digits")]
    args = ["edgeprof", "optimize", spec, "--target", str((doc.get("target") or {}).get("id"))]
    c = doc.get("constraints") or {}
    if c.get("latency_budget_ms") is not None:
        args += ["--latency-budget-ms", f"{c['latency_budget_ms']:g}"]
    if c.get("memory_budget_bytes") is not None:
        args += ["--memory-budget-mb", f"{c['memory_budget_bytes'] / 1e6:g}"]
    if c.get("max_accuracy_drop") is not None:
        args += ["--max-accuracy-drop", f"{c['max_accuracy_drop']:g}"]
    if c.get("stream_rate_fps") is not None:
        args += ["--stream-rate", f"{c['stream_rate_fps']:g}"]
    cands = [x for x in doc.get("candidates") or [] if isinstance(x, dict)]
    backends = sorted({str((x.get("request") or {}).get("backend")) for x in cands})
    if backends:
        args += ["--backend", ",".join(backends)]
    methods = sorted({str(m) for x in cands for m in (x.get("request") or {}).get("compression")
                      or []})
    args += ["--compression", ",".join(methods) if methods else "none"]
    for key, flag in (("runs", "--runs"), ("min_time_s", "--min-time"),
                      ("max_time_s", "--max-time")):
        v = (doc.get("run_options") or {}).get(key)
        if v is not None:
            args += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
    steps = ((model.get("training") or {}).get("reference_fine_tune") or {}).get("steps")
    if steps is not None:
        args += ["--finetune-steps", str(steps)]
    return shlex.join(args)


def render_optimize_html(doc: Mapping[str, Any], *, command: str | None = None) -> str:
    """The optimize report: verdict, latency-vs-accuracy scatter with the Pareto front, the
    router's plan and its reasons, every candidate with status/reason, precision trade-offs."""
    import plotly.graph_objects as go

    if not isinstance(doc, Mapping):
        raise TypeError("render_optimize_html needs optimize.json's dict")
    target = doc.get("target") or {}
    cands = [c for c in doc.get("candidates") or [] if isinstance(c, dict)]
    chosen = doc.get("chosen") if isinstance(doc.get("chosen"), dict) else None
    pts = [c for c in cands if c.get("status") == "ok" and num(c.get("latency_ms")) is not None
           and num(c.get("accuracy")) is not None]
    front = pareto_front(pts)
    fig = go.Figure()
    scatter_points = 0
    for accepted, name, symbol, color in ((True, "accepted", "circle", "#2ca02c"),
                                          (False, "rejected", "x", "#d62728")):
        sel = [c for c in pts if bool(c.get("accepted")) == accepted]
        if not sel:
            continue
        fig.add_trace(go.Scatter(
            x=[c["latency_ms"] for c in sel], y=[c["accuracy"] * 100 for c in sel],
            mode="markers", name=f"{name} candidates", marker=dict(size=10, symbol=symbol,
                                                                   color=color),
            text=[f"<b>{esc(c.get('label'))}</b><br>latency {sig(c['latency_ms'])} ms "
                  f"({esc(c.get('latency_provenance'))})<br>accuracy "
                  f"{c['accuracy'] * 100:.2f}% ({esc(c.get('accuracy_provenance'))})" +
                  ("" if accepted else "<br>fails: " + esc("; ".join(
                      f"{k}: {v}" for k, v in (c.get("failing") or {}).items())))
                  for c in sel], hovertemplate="%{text}<extra></extra>"))
        scatter_points += len(sel)
    if front:
        fig.add_trace(go.Scatter(x=[c["latency_ms"] for c in front],
                                 y=[c["accuracy"] * 100 for c in front], mode="lines",
                                 line=dict(shape="hv", color="#555", dash="dot"),
                                 name="Pareto front (faster or more accurate than the rest)",
                                 hoverinfo="skip"))
    if chosen and num(chosen.get("latency_ms")) is not None and \
            num(chosen.get("accuracy")) is not None:
        fig.add_trace(go.Scatter(x=[chosen["latency_ms"]], y=[chosen["accuracy"] * 100],
                                 mode="markers", name=f"chosen: {esc(chosen.get('label'))}",
                                 marker=dict(size=22, symbol="circle-open", color="black",
                                             line=dict(width=2)), hoverinfo="skip"))
    ref = num((doc.get("reference") or {}).get("accuracy"))
    if ref is not None:
        fig.add_hline(y=ref * 100, line_dash="dash", line_color="gray",
                      annotation_text="reference accuracy (measured)")
    budget = num((doc.get("constraints") or {}).get("latency_budget_ms"))
    if budget is not None:
        fig.add_vline(x=budget, line_dash="dot", line_color="orange",
                      annotation_text="latency budget")
    provs = sorted({str(c.get("latency_provenance")) for c in pts})
    fig.update_layout(title=f"Latency vs accuracy on {esc(target.get('id'))}",
                      xaxis=dict(title=f"latency on {esc(target.get('id'))} (ms, "
                                       f"{esc(', '.join(provs) or 'n/a')})"),
                      yaxis=dict(title="top-1 accuracy (%, measured)"), height=480,
                      legend=dict(orientation="h", y=-0.2))
    chart = chart_html(fig, "pareto") if pts else None
    cols = [{"key": "label", "label": "candidate", "num": False},
            {"key": "status", "label": "status", "num": False},
            {"key": "latency_ms", "label": "latency ms", "num": True, "bar": True,
             "provkey": True},
            {"key": "latency_provenance", "label": "latency provenance", "num": False},
            {"key": "host_latency_ms", "label": "host ms (measured)", "num": True},
            {"key": "accuracy", "label": "accuracy (measured)", "num": True},
            {"key": "accuracy_drop_pp", "label": "drop pp", "num": True},
            {"key": "memory_bytes", "label": "memory B (analytic)", "num": True, "bar": True},
            {"key": "energy_proxy_j", "label": "energy J (estimated)", "num": True},
            {"key": "accepted", "label": "accepted", "num": False},
            {"key": "why", "label": "reason", "num": False, "wide": True}]
    rows = []
    for c in cands:
        why = c.get("reason") or "; ".join(f"{k}: {v}" for k, v in (c.get("failing") or {}).items())
        if not why and c.get("accepted"):
            why = "meets every constraint"
        rows.append([c.get("label"), c.get("status"), c.get("latency_ms"),
                     c.get("latency_provenance"), c.get("host_latency_ms"), c.get("accuracy"),
                     c.get("accuracy_drop_pp"), c.get("memory_bytes"), c.get("energy_proxy_j"),
                     "yes" if c.get("accepted") else "no", why])
    by_prec: dict[str, list[dict[str, Any]]] = {}
    for c in cands:
        if c.get("status") == "ok":
            by_prec.setdefault(str((c.get("request") or {}).get("precision")), []).append(c)
    tradeoffs = []
    for prec, cs in by_prec.items():
        lats = [num(c.get("latency_ms")) for c in cs if num(c.get("latency_ms")) is not None]
        accs = [num(c.get("accuracy")) for c in cs if num(c.get("accuracy")) is not None]
        mems = [num(c.get("memory_bytes")) for c in cs if num(c.get("memory_bytes")) is not None]
        tradeoffs.append({"precision": prec, "n": len(cs),
                          "best_latency": min(lats) if lats else None,
                          "lat_prov": ",".join(sorted({str(c.get("latency_provenance"))
                                                       for c in cs})),
                          "best_accuracy": max(accs) if accs else None,
                          "min_memory": min(mems) if mems else None,
                          "accepted": sum(bool(c.get("accepted")) for c in cs)})
    warnings = list(doc.get("warnings") or [])
    plan = doc.get("plan") if isinstance(doc.get("plan"), dict) else None
    if plan:
        warnings += list(plan.get("warnings") or [])
    return render("optimize.html.j2", kind="optimize", doc=doc, target=target,
                  model=doc.get("model") or {}, chosen=chosen, plan=plan,
                  verdict=doc.get("verdict") or {}, front=[c.get("label") for c in front],
                  tradeoffs=tradeoffs, warnings=warning_groups(warnings),
                  charts={"pareto": chart}, chart_info={"points": scatter_points},
                  tables={"candidates": table_data(cols, rows)},
                  command=command or optimize_command(doc),
                  title=f"optimize {(doc.get('model') or {}).get('name', 'model')} for "
                        f"{target.get('id', 'target')}")

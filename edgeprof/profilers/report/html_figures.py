"""The charts of the tensor pages, as Plotly figures: the target's roofline with each layer as
a point (and the runs' measured per-operator points against this host's roof), and grouped
latency bars with their confidence-interval whiskers (runs, compare, a sweep's best).
``plotly`` is imported inside the functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgeprof.profilers.report.html_common import chart_html, esc, fmt, sig, num


def roof_trace(peak: float, bw: float, lo: float, hi: float, label: str, *, host: bool = False):
    """One roof as a Plotly line from intensity ``lo`` to ``hi``: the target's (black, from
    its descriptor) or this host's (grey dashes, from its calibration); ``label`` names it
    ("raspberry_pi_4 fp32"). Both pages' rooflines draw their roofs with it."""
    import plotly.graph_objects as go

    from edgeprof.profilers.report.plots import roofline_roof

    xs, ys = roofline_roof(peak, bw, lo, hi)
    source = "host calibration" if host else "descriptor"
    return go.Scatter(x=xs, y=[y / 1e9 for y in ys], mode="lines",
                      name=f"roof of {label}: {fmt(peak, 'MAC/s')}, {fmt(bw, 'B/s')} ({source})",
                      line=(dict(color="gray", width=1.5, dash="dash") if host
                            else dict(color="black", width=2)), hoverinfo="skip")


def whiskers(vals: Sequence[float], lows: Sequence[float | None],
             highs: Sequence[float | None], **style: Any) -> dict[str, Any]:
    """A bar's ``error_y``: whiskers from each value up to its high and down to its low (none
    where that end is None)."""
    return dict(type="data", symmetric=False, **style,
                array=[(h - v) if h is not None else 0 for v, h in zip(vals, highs)],
                arrayminus=[(v - lo) if lo is not None else 0 for v, lo in zip(vals, lows)])


def log_ticks(values: Sequence[Any]) -> dict[str, list]:
    """Tick values and full-number labels for a log axis over ``values``: 1, 2 and 5 x 10^k
    (1 x 10^k only over more than four decades). Plotly's own ``dtick="D2"`` labels the 2s
    and 5s with the bare digit, so 0.5 and 0.05 both read "5"."""
    import math

    vs = [v for v in (num(x) for x in values) if v is not None and v > 0]
    if not vs:
        return {}
    lo, hi = math.floor(math.log10(min(vs))) - 1, math.ceil(math.log10(max(vs))) + 1
    mults = (1, 2, 5) if hi - lo <= 6 else (1,)
    ticks = [m * 10.0 ** k for k in range(lo, hi + 1) for m in mults]
    return {"tickvals": ticks,
            "ticktext": [f"{t:,.0f}" if t >= 1000 else sig(t, 3) for t in ticks]}


def roofline_frame(fig, title: str, y_title: str, *, height: int, legend_y: float) -> None:
    """The roofline's log-log frame, labelled at 1, 2, 5 x 10^k with full numbers
    (:func:`log_ticks`; every digit's label crowds a short decade)."""
    xs = [v for tr in fig.data for v in (tr.x or ())]
    ys = [v for tr in fig.data for v in (tr.y or ())]
    fig.update_layout(
        title=title,
        xaxis=dict(type="log", title="arithmetic intensity (MAC per byte moved)",
                   **log_ticks(xs)),
        yaxis=dict(type="log", title=y_title, **log_ticks(ys)), height=height,
        legend=dict(orientation="h", y=legend_y))


def roofline_chart(doc: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The target's roofline with each layer as a point (analytic), and the runs' measured
    per-operator points against the host's own roof where the document has operators."""
    import plotly.graph_objects as go

    from edgeprof.profilers.report.plots import roofline_points

    est = doc.get("estimate") or {}
    layers = [r for r in est.get("layers") or [] if isinstance(r, dict)]
    target_id = str((doc.get("target") or {}).get("id") or est.get("target") or "target")
    precision = str(est.get("precision") or "")
    pts = roofline_points(layers)
    fig = go.Figure()
    info: dict[str, Any] = {"layer_points": len(pts), "measured_points": 0,
                            "skipped": len(layers) - len(pts)}
    groups = {"memory": [], "compute": [], "unknown": []}
    for p in pts:
        groups[p["bound"] if p["bound"] in groups else "unknown"].append(p)
    for bound, color in (("memory", "#1f77b4"), ("compute", "#d62728"), ("unknown", "#7f7f7f")):
        sel = groups[bound]
        if not sel:
            continue
        fig.add_trace(go.Scatter(
            x=[p["intensity"] for p in sel], y=[p["attainable"] / 1e9 for p in sel],
            mode="markers", name=f"{bound}-bound layers on {esc(target_id)} (analytic)",
            marker=dict(size=8, color=color, opacity=0.8),
            text=[f"<b>{esc(p['layer'])}</b> ({esc(p['op_type'])})<br>"
                  f"{fmt(p['macs'], 'MAC')}, {fmt(p['bytes'], 'B')} moved<br>"
                  f"intensity {sig(p['intensity'])} MAC/B<br>attainable "
                  f"{sig(p['attainable'] / 1e9)} GMAC/s<br>roofline "
                  f"{sig(p['roofline_latency_ms'])} ms (analytic)" for p in sel],
            hovertemplate="%{text}<extra></extra>"))
    peak, bw = num(est.get("peak_macs_per_s")), num(est.get("memory_bandwidth_bytes_per_s"))
    xs_all = [p["intensity"] for p in pts]
    measured = _measured_operator_points(doc)
    xs_all += [m["intensity"] for m in measured]
    if peak and bw:
        lo = min(xs_all) / 2 if xs_all else peak / bw / 10
        hi = max(xs_all) * 2 if xs_all else peak / bw * 10
        fig.add_trace(roof_trace(peak, bw, lo, hi, f"{esc(target_id)} {esc(precision)}"))
    if measured:
        host_roofs = {}
        for m in measured:
            host_roofs.setdefault(m["precision"], (m["host_peak"], m["host_bw"]))
        groups: dict[str, list[dict[str, Any]]] = {}
        for m in measured:
            groups.setdefault(m["run"], []).append(m)
        for run, sel in groups.items():
            fig.add_trace(go.Scatter(
                x=[m["intensity"] for m in sel], y=[m["achieved"] / 1e9 for m in sel],
                mode="markers", name=f"{esc(run)} per operator (measured on this host)",
                marker=dict(size=8, symbol="diamond-open", line=dict(width=2)),
                text=[f"<b>{esc(m['layer'])}</b><br>{esc(run)}: {sig(m['latency_ms'])} ms "
                      f"(measured on this host)<br>achieved {sig(m['achieved'] / 1e9)} GMAC/s"
                      for m in sel], hovertemplate="%{text}<extra></extra>"))
            info["measured_points"] += len(sel)
        for prec, (hpeak, hbw) in host_roofs.items():
            if hpeak and hbw:
                fig.add_trace(roof_trace(hpeak, hbw, min(xs_all) / 2, max(xs_all) * 2,
                                         f"this host {esc(prec)}", host=True))
    if not pts and not (peak and bw):
        return None, info
    roofline_frame(fig, f"Roofline of {esc(target_id)} ({esc(precision)}): each layer with "
                   "MACs", "attainable GMAC/s", height=480, legend_y=-0.2)
    return chart_html(fig, "roofline"), info


def _measured_operator_points(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-layer measured points from the runs' operator profiles (``--trace``): the layer's
    MACs over the summed per-operator latency the runtime's profiler measured on the host."""
    est = doc.get("estimate") or {}
    by_layer = {str(r.get("layer")): r for r in est.get("layers") or [] if isinstance(r, dict)}
    host_figs = ((doc.get("host") or {}).get("target") or {}).get("figures") or {}
    host_bw = num((host_figs.get("bandwidth") or {}).get("value"))
    out: list[dict[str, Any]] = []
    for run in doc.get("runs") or []:
        ops = run.get("operators") if isinstance(run, dict) else None
        if not ops:
            continue
        precision = str(run.get("executed_precision") or run.get("requested_precision") or "")
        base = precision.split("_")[0]
        peak_fig = host_figs.get(f"peak_{precision}") or host_figs.get(f"peak_{base}") or {}
        totals: dict[str, float] = {}
        for op in ops:
            if not isinstance(op, dict):
                continue
            lat = num(op.get("latency_ms"))
            layer = op.get("layer")
            if lat is None or lat <= 0 or layer is None or str(layer) not in by_layer:
                continue
            totals[str(layer)] = totals.get(str(layer), 0.0) + lat
        label = f"{run.get('backend')} {run.get('requested_precision')}"
        for layer, lat in totals.items():
            r = by_layer[layer]
            macs = num(r.get("macs")) or 0
            moved = sum(num(r.get(k)) or 0 for k in ("parameter_bytes", "input_bytes",
                                                     "activation_bytes"))
            if macs <= 0 or moved <= 0:
                continue
            out.append({"layer": layer, "run": label, "precision": precision,
                        "intensity": macs / moved, "achieved": macs / (lat / 1e3),
                        "latency_ms": lat, "host_peak": num(peak_fig.get("value")),
                        "host_bw": host_bw})
    return out


def latency_bars(rows: Sequence[Mapping[str, Any]], title: str, div_id: str,
                 series: Sequence[tuple[str, str, str, str]], ytitle: str = "latency (ms)"):
    """Grouped bars with CI whiskers. ``series``: (name, value key, low key, high key)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    bars = 0
    for name, key, lo_key, hi_key in series:
        sel = [r for r in rows if num(r.get(key)) is not None]
        if not sel:
            continue
        vals = [num(r[key]) for r in sel]
        lows = [num(r.get(lo_key)) for r in sel]
        highs = [num(r.get(hi_key)) for r in sel]
        has_ci = any(x is not None for x in lows + highs)
        fig.add_trace(go.Bar(
            x=[esc(r["label"]) for r in sel], y=vals, name=esc(name),
            error_y=whiskers(vals, lows, highs, visible=has_ci),
            text=[f"{esc(r['label'])}<br>{esc(name)}: {sig(v)} ms" +
                  (f"<br>95% CI {sig(lo)}–{sig(h)} ms" if lo is not None and h is not None else "")
                  for r, v, lo, h in zip(sel, vals, lows, highs)],
            hovertemplate="%{text}<extra></extra>", textposition="none"))
        bars += len(sel)
    if not bars:
        return None, 0
    # bars and whisker ends more than LOG_BARS_SPAN apart (a board's wide prediction beside a
    # host's milliseconds): a log axis, or the small bars vanish under the long whisker
    ends = [v for tr in fig.data for v, up, down in zip(
        tr.y, tr.error_y.array or [0] * len(tr.y), tr.error_y.arrayminus or [0] * len(tr.y))
        for v in (v, v + up, v - down) if v and v > 0]
    yaxis = dict(title=ytitle)
    if ends and max(ends) / min(ends) > LOG_BARS_SPAN:
        yaxis = dict(title=f"{ytitle}, log scale", type="log", **log_ticks(ends))
    fig.update_layout(title=esc(title), barmode="group", yaxis=yaxis,
                      height=420, legend=dict(orientation="h", y=-0.25))
    return chart_html(fig, div_id), bars


#: the ratio of the largest to the smallest bar or whisker end above which the latency bars
#: are drawn on a log axis
LOG_BARS_SPAN = 30.0

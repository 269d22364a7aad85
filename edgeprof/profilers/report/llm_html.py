"""The HTML report of a generative model: one self-contained page from the LLM payload
(schema ``edgeprof.llm/1``, :mod:`edgeprof.profilers.report.llm_payload`).

``render_llm_html(payload)`` returns the page, ``write_llm_html(path, payload)`` writes it
atomically. It is the profile report's page (:mod:`edgeprof.profilers.report.html`: the same
layout, Plotly with plotly.js inlined once (the vendored basic bundle: scatter and bar),
Jinja2 autoescaping, the sortable paged table, provenance badges) with four parts of its own:

* **roofline**: each format's prefill and decode stage on the target's roof (analytic points
  at the roof, and where the target is predicted, the predicted rate as achieved MAC/s), and
  the runs measured on this host as points against this host's roof when the payload has it
  (runs a real board of the target measured on the fleet: the target's measured points);
* **memory against context**: weights + KV cache + runtime allowance per format as the
  context grows, against the target's RAM and its usable part, each format's longest
  context marked;
* **tokens/s** per format and runtime: measured medians as solid bars with the spread
  (min–max over the repetitions) as whiskers; predicted / estimated figures as hatched bars
  with their interval;
* the per-layer table of every estimate, the recommendation with its reasons and the
  candidates, the runs (and why a run did not run), the notes, and the "random weights"
  banner whenever the model's weights are random.

Nothing here computes a figure the payload does not hold, except the memory curve, which is
the estimate's own KV-cache formula (``kv_cache_bytes``) at more contexts than the payload
lists; every number keeps the provenance the payload gives it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgeprof.profilers.report.html_common import (chart_html, esc, fmt, sig, num, render, table_data,
                                                   write_html)
from edgeprof.profilers.report.html_figures import log_ticks, roof_trace, roofline_frame, whiskers
from edgeprof.profilers.report.llm_payload import (find_figure, measured_on_target, run_place,
                                                   runs_by_place)

#: columns of the per-layer table (the estimate's layer rows)
LLM_LAYER_COLUMNS = ("backend", "format", "depth", "name", "kind", "layer", "params",
                     "weight_bytes", "types", "prefill_macs", "prefill_bytes",
                     "decode_macs_per_token", "decode_bytes_per_token",
                     "kv_cache_bytes_per_token", "sliding_window")
#: points on each memory-vs-context curve (log-spaced up to the model's maximum)
CURVE_POINTS = 40
PREDICTED_STYLES = {"predicted": ("#1e3a8a", "/"), "estimated": ("#b26b00", "x")}
MEASURED_COLOR = "#17733a"
#: runs a real board of the target measured: the target's own measured figures
BOARD_COLOR = "#b3261e"


# ----------------------------------------------------------------------------- helpers
def _label(backend: Any, fmt_: Any, depth: Any = 0) -> str:
    d = num(depth)
    return f"{backend} {fmt_}" + (f" @d{int(d)}" if d else "")


def target_device(payload: Mapping[str, Any]) -> str:
    """The processor the target's figures are for: its predictions' (a profile without
    --device runs here on the CPU and predicts a Jetson's GPU), else the payload's."""
    devs = {p.get("device") for p in payload.get("predictions") or []
            if isinstance(p, dict)} - {None}
    return str(next(iter(devs))) if len(devs) == 1 else str(payload.get("device") or "cpu")


def _depth0(estimates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One estimate per (backend, format): the shallowest depth."""
    best: dict[tuple[Any, Any], dict[str, Any]] = {}
    for e in estimates:
        k = (e.get("backend"), e.get("format"))
        if k not in best or (num(e.get("depth")) or 0) < (num(best[k].get("depth")) or 0):
            best[k] = e
    return list(best.values())


def _stage(e: Mapping[str, Any], name: str) -> dict[str, Any]:
    s = (e.get("stages") or {}).get(name)
    return s if isinstance(s, dict) else {}


def _estimate_for(estimates: list[dict[str, Any]], backend: Any, fmt_: Any,
                  depth: Any) -> dict[str, Any] | None:
    d = num(depth) or 0
    same = [e for e in estimates if e.get("format") == fmt_ and (num(e.get("depth")) or 0) == d]
    return next((e for e in same if e.get("backend") == backend), same[0] if same else None)


def _spec(payload: Mapping[str, Any]):
    from edgeprof.core.llm import LLMSpec

    try:
        return LLMSpec.from_dict(dict(((payload.get("model") or {}).get("spec")) or {}))
    except Exception:  # noqa: BLE001 - a payload without a usable spec draws the listed points
        return None


def _interval_text(f: Mapping[str, Any]) -> str:
    lo, hi = num(f.get("low")), num(f.get("high"))
    return f"; interval {sig(lo)}–{sig(hi)}" if lo is not None and hi is not None else ""


def _rate_stats(d: Any) -> dict[str, float | None]:
    d = d if isinstance(d, dict) else {}
    return {k: num(d.get(k)) for k in ("median", "mean", "stddev", "min", "max")}


# ----------------------------------------------------------------------------- roofline
def _roofline_chart(payload: Mapping[str, Any], estimates: list[dict[str, Any]]):
    import plotly.graph_objects as go

    target_id = str((payload.get("target") or {}).get("id") or "target")
    device = target_device(payload)
    fig = go.Figure()
    info = {"analytic_points": 0, "predicted_points": 0, "measured_points": 0,
            "board_points": 0}
    xs_all: list[float] = []
    roofs: dict[tuple[float, float], str] = {}
    shown = _depth0(estimates)
    symbols = {"prefill": "circle", "decode": "square"}
    for stage in ("prefill", "decode"):
        pts = []
        for e in shown:
            s = _stage(e, stage)
            ai, peak, bw = num(s.get("arithmetic_intensity")), num(s.get("peak_macs")), \
                num(s.get("bandwidth"))
            if ai is None or peak is None or bw is None:
                continue
            roofs.setdefault((peak, bw), str(s.get("compute_precision") or ""))
            pts.append((e, ai, min(peak, ai * bw), s))
        if pts:
            fig.add_trace(go.Scatter(
                x=[p[1] for p in pts], y=[p[2] / 1e9 for p in pts], mode="markers",
                name=f"{stage} on {esc(target_id)} roof (analytic)",
                marker=dict(size=10, symbol=symbols[stage], color="#4c1d95", opacity=0.75),
                text=[f"<b>{esc(_label(e.get('backend'), e.get('format')))}</b> {stage}<br>"
                      f"{fmt(s.get('macs'), 'MAC')}, {fmt(s.get('bytes'), 'B')} per "
                      f"{esc(s.get('per') or stage)}<br>intensity {sig(ai)} MAC/B<br>"
                      f"{s.get('bound') or '?'}-bound: attainable {sig(y / 1e9)} GMAC/s "
                      "(analytic)" for e, ai, y, s in pts],
                hovertemplate="%{text}<extra></extra>"))
            info["analytic_points"] += len(pts)
            xs_all += [p[1] for p in pts]
        # the prediction for the target, as the MAC/s it implies
        cfg = payload.get("config") or {}
        for prov, (color, _) in PREDICTED_STYLES.items():
            ppts = []
            for p in payload.get("predictions") or []:
                if not isinstance(p, dict) or (num(p.get("depth")) or 0) != 0:
                    continue
                f = find_figure(p, f"{stage}_tokens_per_s")
                rate = num((f or {}).get("value"))
                if rate is None or f.get("provenance") != prov:
                    continue
                e = _estimate_for(estimates, p.get("backend"), p.get("format"), 0)
                s = _stage(e or {}, stage)
                ai, macs = num(s.get("arithmetic_intensity")), num(s.get("macs"))
                if ai is None or not macs:
                    continue
                tokens = num(s.get("tokens")) or num(cfg.get("prompt_tokens")) or 1
                ppts.append((p, ai, macs * rate / tokens, f))
            if ppts:
                fig.add_trace(go.Scatter(
                    x=[q[1] for q in ppts], y=[q[2] / 1e9 for q in ppts], mode="markers",
                    name=f"{stage} on {esc(target_id)} ({prov})",
                    marker=dict(size=11, symbol=symbols[stage] + "-open", color=color,
                                line=dict(width=2)),
                    text=[f"<b>{esc(_label(p.get('backend'), p.get('format')))}</b> {stage} on "
                          f"{esc(target_id)} {esc(device)}<br>{sig(f['value'])} tokens/s "
                          f"({prov}{_interval_text(f)})<br>{sig(y / 1e9)} GMAC/s achieved<br>"
                          f"{esc(f.get('basis') or '')}"
                          for p, _, y, f in ppts], hovertemplate="%{text}<extra></extra>"))
                info["predicted_points"] += len(ppts)
        # runs measured on this host (or on a board: of the target itself, or emulating it)
        for where, (on_target, group) in runs_by_place(payload).items():
            mpts = []
            for r in group:
                rate = _rate_stats(r.get(f"{stage}_tokens_per_s"))["median"]
                e = _estimate_for(estimates, r.get("backend"), r.get("format"), r.get("n_depth"))
                s = _stage(e or {}, stage)
                ai, macs = num(s.get("arithmetic_intensity")), num(s.get("macs"))
                if rate is None or ai is None or not macs:
                    continue
                mpts.append((r, ai, macs * rate / (num(s.get("tokens")) or 1), rate))
            if not mpts:
                continue
            fig.add_trace(go.Scatter(
                x=[m[1] for m in mpts], y=[m[2] / 1e9 for m in mpts], mode="markers",
                name=f"{stage} measured on {esc(where)}",
                marker=dict(size=11, symbol=symbols[stage] + "-dot",
                            color=BOARD_COLOR if on_target else MEASURED_COLOR),
                text=[f"<b>{esc(_label(r.get('backend'), r.get('format'), r.get('n_depth')))}"
                      f"</b> {stage}<br>{sig(rate)} tokens/s median (measured on {esc(where)})"
                      f"<br>{sig(y / 1e9)} GMAC/s achieved" for r, _, y, rate in mpts],
                hovertemplate="%{text}<extra></extra>"))
            info["board_points" if on_target else "measured_points"] += len(mpts)
            xs_all += [m[1] for m in mpts]
    if not xs_all:
        return None, info
    lo, hi = min(xs_all) / 3, max(xs_all) * 3
    for (peak, bw), prec in roofs.items():
        fig.add_trace(roof_trace(peak, bw, lo, hi,
                                 f"{esc(target_id)} {esc(device)} {esc(prec)}"))
    host = _host_roof(payload)
    if host and info["measured_points"]:
        peak, bw, prec = host
        fig.add_trace(roof_trace(peak, bw, lo, hi, f"this host {esc(prec)}", host=True))
    info["host_roof"] = bool(host and info["measured_points"])
    roofline_frame(fig, f"Prefill and decode on the roofline of {esc(target_id)} "
                   f"({esc(device)})", "GMAC/s", height=500, legend_y=-0.22)
    return chart_html(fig, "roofline"), info


def _host_roof(payload: Mapping[str, Any]) -> tuple[float, float, str] | None:
    """This host's peak and bandwidth when the payload carries its calibrated figures."""
    figs = (((payload.get("host") or {}).get("target") or {}).get("figures")) or {}
    bw = num((figs.get("bandwidth") or {}).get("value"))
    for prec in ("int8", "fp16", "fp32"):
        peak = num((figs.get(f"peak_{prec}") or {}).get("value"))
        if peak and bw:
            return peak, bw, prec
    return None


# ----------------------------------------------------------------------------- memory
def _memory_chart(payload: Mapping[str, Any], estimates: list[dict[str, Any]]):
    import math

    import plotly.graph_objects as go

    target = payload.get("target") or {}
    figs = target.get("figures") or {}
    ram = num((figs.get("ram") or {}).get("value"))
    spec = _spec(payload)
    shown = _depth0(estimates)
    info = {"curves": 0, "max_context_marks": 0}
    if not shown:
        return None, info
    if spec is not None:
        from edgeprof.profilers.estimate.llm import kv_cache_bytes

        top = spec.max_position_embeddings
        ctxs = sorted({max(1, int(round(math.exp(math.log(16) + i * (math.log(top) -
                                                                      math.log(16)) /
                                                  (CURVE_POINTS - 1)))))
                       for i in range(CURVE_POINTS)} | {top})
    fig = go.Figure()
    usable = None
    marks_x, marks_y, marks_text = [], [], []
    for e in shown:
        w = num((find_figure(e, "weight_bytes") or {}).get("value"))
        if w is None:
            continue
        fit = e.get("fit") if isinstance(e.get("fit"), dict) else {}
        over = num(fit.get("runtime_overhead_bytes")) or 0.0
        usable = usable or num(fit.get("usable_bytes"))
        kv_dtype = str(e.get("kv_dtype") or "f16")
        if spec is not None:
            try:
                kvs = [(n, float(kv_cache_bytes(spec, n, kv_dtype))) for n in ctxs]
            except Exception:  # noqa: BLE001 - an unknown KV dtype: the payload's own points
                kvs = None
        else:
            kvs = None
        if kvs is None:
            kvs = [(int(p["context"]), float(p["bytes"])) for p in e.get("kv_curve") or []
                   if isinstance(p, dict) and num(p.get("context")) and
                   num(p.get("bytes")) is not None]
        if not kvs:
            continue
        label = _label(e.get("backend"), e.get("format"))
        fig.add_trace(go.Scatter(
            x=[n for n, _ in kvs], y=[(w + kv + over) / 1e9 for _, kv in kvs], mode="lines",
            name=esc(label), line=dict(width=1.8),
            text=[f"<b>{esc(label)}</b> at {n:,} tokens<br>weights {fmt(w, 'B')} + KV "
                  f"{fmt(kv, 'B')} ({esc(kv_dtype)}) + runtime {fmt(over, 'B')} = "
                  f"{fmt(w + kv + over, 'B')} (analytic)" for n, kv in kvs],
            hovertemplate="%{text}<extra></extra>"))
        info["curves"] += 1
        mct = num((find_figure(e, "max_context_tokens") or {}).get("value"))
        if mct is None:
            mct = num(fit.get("max_context_tokens"))
        if mct and spec is not None:
            try:
                kv_at = float(kv_cache_bytes(spec, int(mct), kv_dtype))
            except Exception:  # noqa: BLE001
                kv_at = None
            if kv_at is not None:
                marks_x.append(mct)
                marks_y.append((w + kv_at + over) / 1e9)
                capped = mct >= spec.max_position_embeddings
                marks_text.append(f"<b>{esc(label)}</b>: longest context "
                                  f"{int(mct):,} tokens (analytic"
                                  + ("; the model's maximum" if capped else "") + ")")
    if not info["curves"]:
        return None, info
    if marks_x:
        fig.add_trace(go.Scatter(x=marks_x, y=marks_y, mode="markers",
                                 name="longest context that fits (max_context_tokens)",
                                 marker=dict(size=11, symbol="x", color="#b3261e"),
                                 text=marks_text, hovertemplate="%{text}<extra></extra>"))
        info["max_context_marks"] = len(marks_x)
    tid = esc(target.get("id") or "target")
    ctx = (payload.get("recommendation") or {}).get("context_tokens")
    asked = num(ctx) is not None and num(ctx) > 0
    right = False  # is the context asked in the right half (its line, then the RAM labels left)
    if asked:
        xs = [math.log10(x) for t in fig.data if t.x for x in t.x if num(x) and x > 0]
        at = math.log10(num(ctx))
        right = bool(xs) and at > (min(xs) + max(xs)) / 2
    side = "left" if right or not asked else "right"  # the RAM labels away from that line
    if ram:
        fig.add_hline(y=ram / 1e9, line_color="#b3261e", line_width=2,
                      annotation_text=f"{tid} RAM {fmt(ram, 'B')} (descriptor)",
                      annotation_position=f"top {side}")
    if usable:
        fig.add_hline(y=usable / 1e9, line_color="#b3261e", line_dash="dash",
                      annotation_text=f"usable after the OS reserve {fmt(usable, 'B')}",
                      annotation_position=f"bottom {side}")
    if asked:
        # the x axis is log: a shape takes its x in data units, an annotation in log10 units
        # (add_vline's annotation_text would put it at 10^ctx and stretch the axis to it); the
        # label sits just above the frame, on the side of the line facing the middle of the
        # curves
        fig.add_vline(x=num(ctx), line_dash="dot", line_color="gray")
        fig.add_annotation(x=at, xref="x", y=1, yref="y domain", showarrow=False,
                           xanchor="right" if right else "left", yanchor="bottom",
                           text=f"context asked: {int(num(ctx)):,} tokens")
    fig.update_layout(title=f"Weights + KV cache + runtime against context, and {tid}'s RAM",
                      xaxis=dict(type="log", title="context (tokens held in the KV cache)",
                                 **log_ticks([x for t in fig.data for x in (t.x or ())])),
                      yaxis=dict(title="memory (GB, analytic)", rangemode="tozero"),
                      height=500, legend=dict(orientation="h", y=-0.22))
    return chart_html(fig, "memory"), info


# ----------------------------------------------------------------------------- tokens/s
def _rates_chart(payload: Mapping[str, Any]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    target_id = str((payload.get("target") or {}).get("id") or "target")
    device = target_device(payload)
    info = {"measured_bars": 0, "predicted_bars": 0, "estimated_bars": 0, "board_bars": 0}
    fig = make_subplots(rows=1, cols=2, subplot_titles=("prefill (tokens/s)",
                                                        "decode (tokens/s)"),
                        horizontal_spacing=0.08)
    measured = measured_on_target(payload)  # the target's figure there is the measured one
    preds = [p for p in payload.get("predictions") or [] if isinstance(p, dict)
             and (p.get("backend"), p.get("format"), int(p.get("depth") or 0)) not in measured]
    for col, stage in ((1, "prefill"), (2, "decode")):
        key = f"{stage}_tokens_per_s"
        for where, (on_target, group) in runs_by_place(payload).items():
            sel = [(r, _rate_stats(r.get(key))) for r in group]
            sel = [(r, s) for r, s in sel if s["median"] is not None]
            if not sel:
                continue
            fig.add_trace(go.Bar(
                x=[esc(_label(r.get("backend"), r.get("format"), r.get("n_depth")))
                   for r, _ in sel], y=[s["median"] for _, s in sel],
                name=f"measured on {esc(where)} (median; whiskers: min–max)",
                legendgroup=where, showlegend=col == 1,
                marker=dict(color=BOARD_COLOR if on_target else MEASURED_COLOR),
                error_y=whiskers([s["median"] for _, s in sel], [s["min"] for _, s in sel],
                                 [s["max"] for _, s in sel]),
                text=[f"<b>{esc(_label(r.get('backend'), r.get('format'), r.get('n_depth')))}"
                      f"</b><br>{stage} {sig(s['median'])} tokens/s median (measured on "
                      f"{esc(where)}, {r.get('repetitions')} repetitions)"
                      + (f"<br>min–max {sig(s['min'])}–{sig(s['max'])}" if s["min"] is not None
                         and s["max"] is not None else "")
                      + (f", sd {sig(s['stddev'])}" if s["stddev"] is not None else "")
                      for r, s in sel], hovertemplate="%{text}<extra></extra>",
                textposition="none"), row=1, col=col)
            info["board_bars" if on_target else "measured_bars"] += len(sel)
        for prov, (color, shape) in PREDICTED_STYLES.items():
            psel = []
            for p in preds:
                f = find_figure(p, key)
                if f and num(f.get("value")) is not None and f.get("provenance") == prov:
                    psel.append((p, f))
            if not psel:
                continue
            vals = [num(f["value"]) for _, f in psel]
            lows = [num(f.get("low")) for _, f in psel]
            highs = [num(f.get("high")) for _, f in psel]
            fig.add_trace(go.Bar(
                x=[esc(_label(p.get("backend"), p.get("format"), p.get("depth")))
                   for p, _ in psel], y=vals,
                name=f"{prov} on {esc(target_id)} {esc(device)} (whiskers: interval)",
                legendgroup=prov, showlegend=col == 1,
                marker=dict(color="rgba(0,0,0,0)", line=dict(color=color, width=1.5),
                            pattern=dict(shape=shape, fgcolor=color, size=6)),
                error_y=whiskers(vals, lows, highs, color=color),
                text=[f"<b>{esc(_label(p.get('backend'), p.get('format'), p.get('depth')))}"
                      f"</b><br>{stage} on {esc(target_id)}: {sig(v)} tokens/s ({prov})"
                      + (f"<br>interval {sig(lo)}–{sig(h)}" if lo is not None and h is not None
                         else "") + f"<br>{esc(f.get('basis') or '')}"
                      for (p, f), v, lo, h in zip(psel, vals, lows, highs)],
                hovertemplate="%{text}<extra></extra>", textposition="none"), row=1, col=col)
            info[f"{prov}_bars"] += len(psel)
    if not any(info.values()):
        return None, info
    fig.update_layout(barmode="group", height=460, legend=dict(orientation="h", y=-0.3),
                      title="Tokens/s per format and runtime: measured here (solid) and "
                            f"predicted for {esc(target_id)} (hatched)")
    fig.update_xaxes(tickangle=-30)
    return chart_html(fig, "rates"), info


# ----------------------------------------------------------------------------- tables
def _layer_table(estimates: list[dict[str, Any]]) -> dict[str, Any]:
    units = {"weight_bytes": "B", "prefill_bytes": "B", "decode_bytes_per_token": "B",
             "kv_cache_bytes_per_token": "B", "prefill_macs": "MAC",
             "decode_macs_per_token": "MAC"}
    text_cols = {"backend", "format", "name", "kind", "types"}
    cols = [{"key": c, "label": c + (f" ({units[c]})" if c in units else ""),
             "num": c not in text_cols,
             "bar": c in ("weight_bytes", "prefill_macs", "decode_bytes_per_token"),
             "prov": "analytic"} for c in LLM_LAYER_COLUMNS]
    rows = []
    for e in estimates:
        for layer in e.get("layers") or []:
            if not isinstance(layer, dict):
                continue
            row = []
            for c in LLM_LAYER_COLUMNS:
                v = e.get(c) if c in ("backend", "format", "depth") else layer.get(c)
                row.append(",".join(map(str, v)) if isinstance(v, (list, tuple)) else v)
            rows.append(row)
    return table_data(cols, rows)


def _candidate_table(rec: Mapping[str, Any]) -> dict[str, Any]:
    cols = [{"key": "backend", "label": "backend", "num": False},
            {"key": "format", "label": "format", "num": False},
            {"key": "status", "label": "status", "num": False},
            {"key": "bits_per_weight", "label": "bits/weight", "num": True},
            {"key": "weight_bytes", "label": "weights (B, analytic)", "num": True, "bar": True},
            {"key": "kv_cache_bytes", "label": "KV at the context (B, analytic)", "num": True},
            {"key": "total_bytes", "label": "total (B, analytic)", "num": True, "bar": True},
            {"key": "fits", "label": "fits", "num": False},
            {"key": "max_context_tokens", "label": "longest context", "num": True},
            {"key": "decode", "label": "decode tok/s", "num": True, "bar": True},
            {"key": "decode_low", "label": "low", "num": True},
            {"key": "decode_high", "label": "high", "num": True},
            {"key": "decode_prov", "label": "provenance", "num": False},
            {"key": "why", "label": "why", "num": False, "wide": True}]
    rows = []
    for c in rec.get("candidates") or []:
        if not isinstance(c, dict):
            continue
        d = c.get("decode_tokens_per_s") if isinstance(c.get("decode_tokens_per_s"), dict) else {}
        rows.append([c.get("backend"), c.get("format"), c.get("status"),
                     c.get("bits_per_weight"), c.get("weight_bytes"), c.get("kv_cache_bytes"),
                     c.get("total_bytes"),
                     None if c.get("fits") is None else ("yes" if c.get("fits") else "no"),
                     c.get("max_context_tokens"), num(d.get("value")), num(d.get("low")),
                     num(d.get("high")), d.get("provenance"), c.get("why")])
    return table_data(cols, rows)


def _runs_context(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    tid = (payload.get("target") or {}).get("id")
    for r in payload.get("runs") or []:
        if not isinstance(r, dict):
            continue
        tp = r.get("tpot_ms") if isinstance(r.get("tpot_ms"), dict) else {}
        where, on_target = run_place(r, tid)
        out.append({"where": where, "on_target": on_target and r.get("status") == "ok","label": _label(r.get("backend"), r.get("format"), r.get("n_depth")),
                    "backend": r.get("backend"), "format": r.get("format"),
                    "status": r.get("status"), "reason": r.get("reason"),
                    "prov": r.get("provenance") or "measured",
                    "prefill": _rate_stats(r.get("prefill_tokens_per_s")),
                    "decode": _rate_stats(r.get("decode_tokens_per_s")),
                    "ttft": _rate_stats(r.get("ttft_ms")),
                    "tpot_p50": num(tp.get("p50")), "tpot_p90": num(tp.get("p90")),
                    "load_s": num(r.get("load_s")), "peak_rss": num(r.get("peak_rss_bytes")),
                    "model_size": num(r.get("model_size")), "n_prompt": r.get("n_prompt"),
                    "n_gen": r.get("n_gen"), "n_depth": r.get("n_depth"),
                    "n_threads": r.get("n_threads"), "repetitions": r.get("repetitions"),
                    "runtime_version": r.get("runtime_version"),
                    "warnings": r.get("warnings") or []})
    return out


def _predictions_context(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    measured = measured_on_target(payload)
    for p in payload.get("predictions") or []:
        if not isinstance(p, dict):
            continue
        out.append({"measured_on": measured.get((p.get("backend"), p.get("format"),
                                                 int(p.get("depth") or 0))),"label": _label(p.get("backend"), p.get("format"), p.get("depth")),
                    **{k: find_figure(p, k) for k in ("prefill_tokens_per_s",
                                                       "decode_tokens_per_s", "ttft_ms",
                                                       "tpot_ms")},
                    "calibration": p.get("calibration"),
                    "bound": p.get("decode_bound_calibrated") or p.get("decode_bound"),
                    "notes": p.get("notes") or []})
    return out


def _fit_rows(estimates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for e in _depth0(estimates):
        fit = e.get("fit") if isinstance(e.get("fit"), dict) else None
        rows.append({"label": _label(e.get("backend"), e.get("format")),
                     "weight_bytes": find_figure(e, "weight_bytes"),
                     "kv_per_token": find_figure(e, "kv_cache_bytes_per_token"),
                     "decode_bytes": find_figure(e, "decode_bytes_per_token"),
                     "max_context": find_figure(e, "max_context_tokens"),
                     "fit": fit, "kv_dtype": e.get("kv_dtype")})
    return rows


def llm_command(payload: Mapping[str, Any]) -> str:
    """The command line that reproduces the payload: the one that ran, as the CLI received
    it (``command_line``), else rebuilt from its model, config, backends, formats and
    target (a payload made from Python)."""
    if payload.get("command_line"):
        return str(payload["command_line"])
    model = payload.get("model") or {}
    cfg = payload.get("config") or {}
    cmd = str(payload.get("command") or "profile")
    args = ["edgeprof", cmd, str(model.get("given") or (model.get("spec") or {}).get("name")
                                 or "MODEL")]
    rows = [*(payload.get("estimates") or []), *(payload.get("runs") or [])]
    backends = list(dict.fromkeys(str(r.get("backend")) for r in rows
                                  if isinstance(r, dict) and r.get("backend")))
    formats = list(dict.fromkeys(str(r.get("format")) for r in rows
                                 if isinstance(r, dict) and r.get("format")))
    if backends:
        args += ["--backend", ",".join(backends)]
    if formats:
        args += ["--precision", ",".join(formats)]
    for key, flag in (("prompt_tokens", "--prompt-tokens"), ("gen_tokens", "--gen-tokens")):
        if cfg.get(key) is not None:
            args += [flag, str(cfg[key])]
    depths = [int(d) for d in cfg.get("depths") or [] if num(d) is not None]
    if depths and depths != [0]:
        args += ["--depth", ",".join(map(str, depths))]
    if cmd == "profile":
        for key, flag in (("repetitions", "--repetitions"), ("threads", "--threads")):
            if cfg.get(key) is not None:
                args += [flag, str(cfg[key])]
    tid = (payload.get("target") or {}).get("id")
    if tid:
        args += ["--target", str(tid)]
    if payload.get("device") and payload.get("device") != "cpu":
        args += ["--device", str(payload["device"])]
    return shlex.join(args)


# ----------------------------------------------------------------------------- page
def render_llm_html(payload: Mapping[str, Any], *, command: str | None = None) -> str:
    """The page for an LLM payload (see the module docstring)."""
    if not isinstance(payload, Mapping):
        raise TypeError("render_llm_html needs the LLM payload's dict")
    estimates = [e for e in payload.get("estimates") or [] if isinstance(e, dict)]
    model = payload.get("model") or {}
    spec = model.get("spec") or {}
    target = payload.get("target") or {}
    rec = payload.get("recommendation") if isinstance(payload.get("recommendation"),
                                                      dict) else None
    roofline, roof_info = _roofline_chart(payload, estimates)
    memory, mem_info = _memory_chart(payload, estimates)
    rates, rate_info = _rates_chart(payload)
    tables = {"layers": _layer_table(estimates)}
    if rec:
        tables["candidates"] = _candidate_table(rec)
    params = model.get("parameters") if isinstance(model.get("parameters"), dict) else None
    # a mixture of experts: the parameters a token runs, beside the total held
    active = next((e["figures"]["active_parameters_per_token"] for e in estimates
                   if isinstance((e.get("figures") or {}).get("active_parameters_per_token"),
                                 dict)), None)
    return render(
        "llm.html.j2", kind="llm", payload=payload, model=model, spec=spec, target=target,
        target_figures=target.get("figures") or {}, device=target_device(payload),
        run_device=str(payload.get("device") or "cpu"),
        config=payload.get("config") or {}, params=params, active=active, rec=rec,
        random_weights=bool(model.get("random_weights")),
        random_note=model.get("note") or "", runs=_runs_context(payload),
        predictions=_predictions_context(payload), fits=_fit_rows(estimates),
        notes=[str(n) for n in payload.get("notes") or [] if n],
        charts={"roofline": roofline, "memory": memory, "rates": rates},
        chart_info={"roofline": roof_info, "memory": mem_info, "rates": rate_info},
        tables=tables, command=command or llm_command(payload),
        title=f"{spec.get('name') or 'model'}"
              + (f" on {target.get('id')}" if target.get("id") else ""))


def write_llm_html(path: str | Path, payload: Mapping[str, Any], *,
                   command: str | None = None) -> Path:
    """Render ``payload`` and write it to ``path`` atomically (a path that cannot be written
    is the user's one-line error, as for every report)."""
    return write_html(path, render_llm_html(payload, command=command))


__all__ = ["LLM_LAYER_COLUMNS", "llm_command", "render_llm_html", "write_llm_html"]

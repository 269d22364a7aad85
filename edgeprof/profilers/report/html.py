"""Self-contained HTML reports: one file a user opens offline and sends to a colleague.

``render_profile_html(doc)`` takes profile.json's dict, ``render_optimize_html(doc)``
optimize.json's, ``render_compare_html(a, b)`` two profile.json dicts and
``render_sweep_html(frame)`` a sweep's DataFrame (columns :data:`SWEEP_COLUMNS`). Each returns
one HTML document with its scripts and styles inline: plotly.js is embedded once per page
(no CDN, nothing is fetched when the page is viewed), the smallest of plotly.js's own partial
bundles that draws every trace type on the page (vendored in ``vendor/``, :func:`plotly_bundle`:
1.2 MB for scatter and bar, against the full 4.8 MB), the charts are Plotly figures built
here, the page is a Jinja2 template with autoescaping on (a layer named ``<script>`` is
shown, never run), and the per-layer table is sorted, filtered and paged by a few lines of
inline JavaScript (:data:`PAGE_ROWS` rows a page, so a 1,000-layer model stays fast).

Every number carries the provenance the document gives it (measured / predicted /
estimated / analytic / uncalibrated / descriptor); nothing here invents one. A number the
document has as null is shown as "—" with the document's reason.
"""

from __future__ import annotations

import functools
import html as _html
import math
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PAGE_ROWS = 200
PROVENANCES = ("measured", "predicted", "estimated", "analytic", "uncalibrated", "descriptor")
PROVENANCE_MEANING = {
    "measured": "measured by edgeprof: on this host, or on the board itself through a fleet "
                "worker (the page says which)",
    "predicted": "predicted by a calibration fitted to measurements of that target and runtime",
    "estimated": "derived from other figures by a named method (e.g. the host's measured "
                 "efficiency carried over to the target's roofline)",
    "analytic": "computed from the model's graph and the target's descriptor alone",
    "uncalibrated": "the roofline with a documented prior: no calibration exists for this "
                    "target and runtime",
    "descriptor": "a figure from the target's descriptor file (its source is in the tooltip)",
}
LAYER_COLUMNS = ("layer", "op_type", "output_shape", "output_elements", "input_bytes",
                 "parameter_count", "parameter_bytes", "activation_bytes", "macs", "flops",
                 "other_ops", "compute_ms", "memory_ms", "roofline_latency_ms", "bound")
LAYER_BARS = ("macs", "activation_bytes", "roofline_latency_ms")
SWEEP_COLUMNS = ("model", "target", "backend", "precision", "batch_size", "status", "reason",
                 "median_ms", "ci_low_ms", "ci_high_ms", "provenance", "board")
WARNING_EXPLANATIONS = {
    "high_cv": "Run-to-run variation is large (coefficient of variation above 10%): another "
               "program, frequency scaling or too few threads moved the timings. Medians and "
               "their confidence intervals are robust to a few outliers, small differences "
               "are not trustworthy.",
    "high_iqr": "The middle half of the samples is spread wide: the latency has two or more "
                "regimes (caches, scheduling). Compare medians with their intervals.",
    "slow_first_run": "The first inference took much longer than the steady state "
                      "(lazy initialisation, compilation, page faults). It is reported apart "
                      "as first_inference_ms and not mixed into the statistics.",
    "warmup_not_settled": "Warm-up ended at its cap before successive windows agreed: the "
                          "steady state may still include warm-up effects.",
    "time_cap_reached": "The timed phase stopped at --max-time before reaching its sample "
                        "target: the interval is wider than asked.",
    "ci_width_not_reached": "The confidence interval of the median did not get as narrow as "
                            "asked before the time cap.",
    "machine_busy": "Other processes used the CPU during the measurement: latencies may be "
                    "inflated. Rerun on an idle machine before trusting small differences.",
    "cpu_frequency_scaling": "The CPU clock governor can change frequency during the run; "
                             "pin it to 'performance' for stable timings.",
    "thread_oversubscription": "More threads were asked for than cores exist: threads "
                               "compete and latency grows.",
    "speed_drift": "The first, middle and last third of the timed samples have different "
                   "medians: the machine ran at another speed for part of the measurement "
                   "(another guest on a VM's host, frequency scaling). The interval of the "
                   "median does not cover that; a run at another time can land elsewhere.",
    "cpu_steal": "The hypervisor took CPU time from this VM during the run: timings include "
                 "time the VM did not run.",
    "measurement_below_roofline": "A measurement came out faster than the roofline allows: a "
                                  "figure in the target's descriptor (peak compute or "
                                  "bandwidth) is probably too low.",
    "host_uncalibrated": "The host could not be calibrated, so no figure for another target "
                         "could be estimated from the measurements.",
    "operator_profile_failed": "The runtime's per-operator profiler failed: that run has no "
                               "operator breakdown; its latency is unaffected.",
    "noisy_measurements": "Several measurements were flagged by the harness: rankings between "
                          "close candidates may flip on a rerun.",
}


# ----------------------------------------------------------------------------- values
def _num(v: Any) -> float | None:
    """A finite float, or None (bools and strings are not numbers here)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _g(v: float, digits: int = 4) -> str:
    return format(v, f".{digits}g")


def fmt(value: Any, unit: str | None = None) -> str:
    """How a number is shown on the page (decimal units: 1 MB = 1e6 B). None/NaN -> "—"."""
    if unit == "bool":
        f = _num(value) if not isinstance(value, bool) else float(value)
        return "—" if f is None else ("yes" if f else "no")
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = _num(value)
    if v is None:
        return "—" if value is None or isinstance(value, (int, float)) else str(value)
    scaled = {"B": ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")),
              "B/s": ((1e9, "GB/s"), (1e6, "MB/s")),
              "MAC/s": ((1e12, "TMAC/s"), (1e9, "GMAC/s"), (1e6, "MMAC/s")),
              "MAC": ((1e9, "GMAC"), (1e6, "MMAC"), (1e3, "kMAC")),
              "Hz": ((1e9, "GHz"), (1e6, "MHz"))}
    if unit in scaled:
        for factor, name in scaled[unit]:
            if abs(v) >= factor:
                return f"{_g(v / factor)} {name}"
        return f"{_g(v)} {unit}"
    if unit == "fraction":
        return f"{v * 100:.3g}%"
    if unit == "count" or (unit is None and float(v).is_integer() and abs(v) < 1e15):
        return f"{int(v):,}" + ("" if unit in (None, "count") else f" {unit}")
    return _g(v) + (f" {unit}" if unit else "")


def _esc(text: Any) -> str:
    """Text for Plotly's hover/labels: Plotly reads a small HTML subset, so escape it."""
    return _html.escape(str(text), quote=False)


def _fig(figures: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    f = (figures or {}).get(key)
    return f if isinstance(f, dict) else None


def _interval(f: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    """A figure's interval when the document gives one (a prediction's low/high)."""
    if not f:
        return None, None
    for lo, hi in (("low_ms", "high_ms"), ("low", "high"), ("ci_low_ms", "ci_high_ms")):
        if lo in f or hi in f:
            return _num(f.get(lo)), _num(f.get(hi))
    iv = f.get("interval")
    if isinstance(iv, (list, tuple)) and len(iv) == 2:
        return _num(iv[0]), _num(iv[1])
    return None, None


# ----------------------------------------------------------------------------- charts
#: the plotly.js version of the bundles in ``vendor/``: the one the pinned python plotly writes
#: its figure JSON for (``plotly.offline.get_plotlyjs_version()``; a test checks they agree)
PLOTLY_JS_VERSION = "4.1.1"
VENDOR = Path(__file__).parent / "vendor"
#: plotly.js's partial bundles (npm plotly.js-<name>-dist-min, vendored unmodified, MIT), the
#: smallest first, with the trace types each registers; "full" is python plotly's own copy
PLOTLY_BUNDLES: dict[str, frozenset[str]] = {
    "basic": frozenset({"bar", "pie", "scatter"}),
    "cartesian": frozenset({"bar", "box", "contour", "heatmap", "histogram", "histogram2d",
                            "histogram2dcontour", "image", "pie", "scatter", "scatterternary",
                            "violin"}),
}


class _Chart(str):
    """A chart's HTML, remembering the trace types it draws (to pick the page's bundle)."""

    trace_types: frozenset[str] = frozenset()


def plotly_bundle(trace_types: Iterable[str] | None) -> str:
    """The smallest plotly.js bundle that draws every trace type in ``trace_types``:
    "basic", "cartesian", or "full" (a type neither partial bundle has, or ``None``: not
    known)."""
    if trace_types is None:
        return "full"
    need = set(trace_types)
    return next((name for name, has in PLOTLY_BUNDLES.items() if need <= has), "full")


def plotly_bundle_path(bundle: str) -> Path:
    return VENDOR / f"plotly-{bundle}-{PLOTLY_JS_VERSION}.min.js"


@functools.lru_cache(maxsize=4)
def _plotly_js(bundle: str = "basic") -> str:
    """plotly.js to inline: the vendored partial bundle, or python plotly's full copy where
    the page needs a trace type no partial bundle has, or where python plotly writes figures
    for another major version of plotly.js than the one vendored."""
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    if bundle != "full" and get_plotlyjs_version().split(".")[0] == \
            PLOTLY_JS_VERSION.split(".")[0]:
        return plotly_bundle_path(bundle).read_text(encoding="utf-8")
    return get_plotlyjs()


def _chart(fig, div_id: str) -> str:
    """A Plotly figure as a <div id="chart-{div_id}"> plus its newPlot call; plotly.js itself
    is in the page's head once. Each chart counts itself (``window.edgeprofChartDone``) when
    drawn, and the page marks ``<html data-charts-ready>`` when all are."""
    import plotly.io as pio

    fig.update_layout(template="plotly_white", margin=dict(l=60, r=20, t=50, b=60),
                      font=dict(size=12))
    out = _Chart(pio.to_html(fig, include_plotlyjs=False, full_html=False,
                             div_id=f"chart-{div_id}",
                             config={"displaylogo": False, "responsive": True},
                             post_script="window.edgeprofChartDone('{plot_id}');"))
    out.trace_types = frozenset(t.type or "scatter" for t in fig.data)
    return out


def _roofline_chart(doc: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The target's roofline with each layer as a point (analytic), and the runs' measured
    per-operator points against the host's own roof where the document has operators."""
    import plotly.graph_objects as go

    from edgeprof.profilers.report.plots import roofline_points, roofline_roof

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
            mode="markers", name=f"{bound}-bound layers on {_esc(target_id)} (analytic)",
            marker=dict(size=8, color=color, opacity=0.8),
            text=[f"<b>{_esc(p['layer'])}</b> ({_esc(p['op_type'])})<br>"
                  f"{fmt(p['macs'], 'MAC')}, {fmt(p['bytes'], 'B')} moved<br>"
                  f"intensity {_g(p['intensity'])} MAC/B<br>attainable "
                  f"{_g(p['attainable'] / 1e9)} GMAC/s<br>roofline "
                  f"{_g(p['roofline_latency_ms'])} ms (analytic)" for p in sel],
            hovertemplate="%{text}<extra></extra>"))
    peak, bw = _num(est.get("peak_macs_per_s")), _num(est.get("memory_bandwidth_bytes_per_s"))
    xs_all = [p["intensity"] for p in pts]
    measured = _measured_operator_points(doc)
    xs_all += [m["intensity"] for m in measured]
    if peak and bw:
        lo = min(xs_all) / 2 if xs_all else peak / bw / 10
        hi = max(xs_all) * 2 if xs_all else peak / bw * 10
        xs, ys = roofline_roof(peak, bw, lo, hi)
        fig.add_trace(go.Scatter(x=xs, y=[y / 1e9 for y in ys], mode="lines",
                                 name=f"roof of {_esc(target_id)} {_esc(precision)}: "
                                      f"{fmt(peak, 'MAC/s')}, {fmt(bw, 'B/s')} (descriptor)",
                                 line=dict(color="black", width=2), hoverinfo="skip"))
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
                mode="markers", name=f"{_esc(run)} per operator (measured on this host)",
                marker=dict(size=8, symbol="diamond-open", line=dict(width=2)),
                text=[f"<b>{_esc(m['layer'])}</b><br>{_esc(run)}: {_g(m['latency_ms'])} ms "
                      f"(measured on this host)<br>achieved {_g(m['achieved'] / 1e9)} GMAC/s"
                      for m in sel], hovertemplate="%{text}<extra></extra>"))
            info["measured_points"] += len(sel)
        for prec, (hpeak, hbw) in host_roofs.items():
            if hpeak and hbw:
                xs, ys = roofline_roof(hpeak, hbw, min(xs_all) / 2, max(xs_all) * 2)
                fig.add_trace(go.Scatter(
                    x=xs, y=[y / 1e9 for y in ys], mode="lines",
                    name=f"roof of this host {_esc(prec)}: {fmt(hpeak, 'MAC/s')}, "
                         f"{fmt(hbw, 'B/s')} (host calibration)",
                    line=dict(color="gray", width=1.5, dash="dash"), hoverinfo="skip"))
    if not pts and not (peak and bw):
        return None, info
    fig.update_layout(
        title=f"Roofline of {_esc(target_id)} ({_esc(precision)}): each layer with MACs",
        # log axes labelled at 1, 2, 5 x 10^k only: every digit's label crowds a short decade
        xaxis=dict(type="log", dtick="D2", title="arithmetic intensity (MAC per byte moved)"),
        yaxis=dict(type="log", dtick="D2", title="attainable GMAC/s"), height=480,
        legend=dict(orientation="h", y=-0.2))
    return _chart(fig, "roofline"), info


def _measured_operator_points(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-layer measured points from the runs' operator profiles (``--trace``): the layer's
    MACs over the summed per-operator latency the runtime's profiler measured on the host."""
    est = doc.get("estimate") or {}
    by_layer = {str(r.get("layer")): r for r in est.get("layers") or [] if isinstance(r, dict)}
    host_figs = ((doc.get("host") or {}).get("target") or {}).get("figures") or {}
    host_bw = _num((host_figs.get("bandwidth") or {}).get("value"))
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
            lat = _num(op.get("latency_ms"))
            layer = op.get("layer")
            if lat is None or lat <= 0 or layer is None or str(layer) not in by_layer:
                continue
            totals[str(layer)] = totals.get(str(layer), 0.0) + lat
        label = f"{run.get('backend')} {run.get('requested_precision')}"
        for layer, lat in totals.items():
            r = by_layer[layer]
            macs = _num(r.get("macs")) or 0
            moved = sum(_num(r.get(k)) or 0 for k in ("parameter_bytes", "input_bytes",
                                                      "activation_bytes"))
            if macs <= 0 or moved <= 0:
                continue
            out.append({"layer": layer, "run": label, "precision": precision,
                        "intensity": macs / moved, "achieved": macs / (lat / 1e3),
                        "latency_ms": lat, "host_peak": _num(peak_fig.get("value")),
                        "host_bw": host_bw})
    return out


def _latency_bars(rows: Sequence[Mapping[str, Any]], title: str, div_id: str,
                  series: Sequence[tuple[str, str, str, str]], ytitle: str = "latency (ms)"):
    """Grouped bars with CI whiskers. ``series``: (name, value key, low key, high key)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    bars = 0
    for name, key, lo_key, hi_key in series:
        sel = [r for r in rows if _num(r.get(key)) is not None]
        if not sel:
            continue
        vals = [_num(r[key]) for r in sel]
        lows = [_num(r.get(lo_key)) for r in sel]
        highs = [_num(r.get(hi_key)) for r in sel]
        has_ci = any(x is not None for x in lows + highs)
        fig.add_trace(go.Bar(
            x=[_esc(r["label"]) for r in sel], y=vals, name=_esc(name),
            error_y=dict(type="data", symmetric=False,
                         array=[(h - v) if h is not None else 0 for v, h in zip(vals, highs)],
                         arrayminus=[(v - lo) if lo is not None else 0
                                     for v, lo in zip(vals, lows)],
                         visible=has_ci),
            text=[f"{_esc(r['label'])}<br>{_esc(name)}: {_g(v)} ms" +
                  (f"<br>95% CI {_g(lo)}–{_g(h)} ms" if lo is not None and h is not None else "")
                  for r, v, lo, h in zip(sel, vals, lows, highs)],
            hovertemplate="%{text}<extra></extra>", textposition="none"))
        bars += len(sel)
    if not bars:
        return None, 0
    fig.update_layout(title=_esc(title), barmode="group", yaxis=dict(title=ytitle),
                      height=420, legend=dict(orientation="h", y=-0.25))
    return _chart(fig, div_id), bars


# ----------------------------------------------------------------------------- template
@functools.lru_cache(maxsize=1)
def _env():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "templates")),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(fmt=fmt, PROVENANCES=PROVENANCES, PROVENANCE_MEANING=PROVENANCE_MEANING,
                       num=_num)
    return env


def _render(template: str, **context: Any) -> str:
    from markupsafe import Markup

    charts = [c for c in context.get("charts", {}).values() if c]
    context["charts"] = {k: Markup(v) if v else None for k, v in context.get("charts", {}).items()}
    types: set[str] | None = set()
    for c in charts:  # a chart not made by _chart: its trace types are not known
        t = getattr(c, "trace_types", None)
        types = None if t is None or types is None else types | t
    context.setdefault("plotly_bundle", plotly_bundle(types) if charts else None)
    context.setdefault("plotly_js", Markup(_plotly_js(context["plotly_bundle"])
                                           if charts else ""))  # no chart, no plotly.js
    context["chart_count"] = len(charts)
    context.setdefault("tables", {})
    context.setdefault("page_rows", PAGE_ROWS)
    return _env().get_template(template).render(**context)


def _table(columns: Sequence[dict[str, Any]], rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """Data for the inline sortable/filterable/paged table (rendered by JS from JSON)."""
    return {"columns": list(columns), "rows": [[_json_safe(v) for v in r] for r in rows],
            "page": PAGE_ROWS}


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 1) == 0:
        return _json_safe(v.item())
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _warnings(warnings: Iterable[Any]) -> list[dict[str, Any]]:
    """Warnings grouped by code: how often each occurred, its distinct messages and what the
    code means (:data:`WARNING_EXPLANATIONS`; unknown codes keep their messages only)."""
    seen: dict[str, dict[str, Any]] = {}
    for w in warnings or []:
        if not isinstance(w, dict):
            continue
        code, msg = str(w.get("code") or "warning"), str(w.get("message") or "")
        item = seen.setdefault(code, {"code": code, "messages": [], "count": 0,
                                      "explanation": WARNING_EXPLANATIONS.get(code)})
        item["count"] += 1
        if msg and msg not in item["messages"]:
            item["messages"].append(msg)
    return list(seen.values())


# ----------------------------------------------------------------------------- profile
def profile_command(doc: Mapping[str, Any]) -> str:
    """The command line that reproduces a profile, rebuilt from its ``request``."""
    req = doc.get("request") or {}
    model = doc.get("model") or {}
    spec = str(req.get("model") or model.get("spec") or "MODEL")
    args = ["edgeprof", "profile", spec, "--target",
            str(req.get("target") or (doc.get("target") or {}).get("id") or "host")]
    if req.get("backends"):
        args += ["--backend", ",".join(map(str, req["backends"]))]
    if req.get("precisions"):
        args += ["--precision", ",".join(map(str, req["precisions"]))]
    inputs = [i for i in model.get("inputs") or [] if isinstance(i, dict)]
    if spec.startswith("builtin:"):
        if req.get("batch_size") not in (None, 1):
            args += ["--batch-size", str(req["batch_size"])]
    elif model.get("format") == "torch":
        for i in inputs:
            args += ["--input-shape", "x".join(str(d) for d in i.get("shape") or [])]
        if any(i.get("dtype") not in (None, "float32") for i in inputs):
            for i in inputs:
                args += ["--input-dtype", str(i.get("dtype") or "float32")]
    for key, flag in (("threads", "--threads"), ("stream_rate_fps", "--stream-rate"),
                      ("latency_budget_ms", "--latency-budget-ms")):
        if req.get(key) is not None:
            args += [flag, f"{req[key]:g}" if isinstance(req[key], float) else str(req[key])]
    opts = req.get("run_options") or {}
    for key, flag in (("device", "--device"), ("runs", "--runs"), ("min_time_s", "--min-time"),
                      ("max_time_s", "--max-time"), ("warmup", "--warmup"),
                      ("timeout_s", "--timeout")):
        if opts.get(key) is not None:
            args += [flag, f"{opts[key]:g}" if isinstance(opts[key], float) else str(opts[key])]
    if opts.get("isolate"):
        args.append("--isolate")
    if model.get("calibration"):
        args += ["--calibration-data", str(model["calibration"])]
    if any(isinstance(r, dict) and r.get("operators") for r in doc.get("runs") or []):
        args.append("--trace")
    return shlex.join(args)


def _run_label(run: Mapping[str, Any]) -> str:
    label = f"{run.get('backend')} {run.get('requested_precision')}"
    ex = run.get("executed_precision")
    if ex and ex != run.get("requested_precision"):
        label += f"→{ex}"
    return label


def _runs_context(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    target_id = (doc.get("target") or {}).get("id")
    rows = []
    for run in doc.get("runs") or []:
        if not isinstance(run, dict):
            continue
        bench = run.get("benchmark") or {}
        stats = bench.get("stats") if isinstance(bench.get("stats"), dict) else {}
        summary = run.get("summary") if isinstance(run.get("summary"), dict) else {}
        figures = summary.get("figures") or {}
        lat = _fig(figures, "latency_ms")
        lo, hi = _interval(lat)
        if lo is None and hi is None:  # the interval as separate figures, or the prediction's
            lo = _num((_fig(figures, "latency_low_ms") or {}).get("value"))
            hi = _num((_fig(figures, "latency_high_ms") or {}).get("value"))
        pred = summary.get("prediction") if isinstance(summary.get("prediction"), dict) else {}
        if lo is None and hi is None and pred:
            lo, hi = _num(pred.get("low_ms")), _num(pred.get("high_ms"))
        agreement = (bench.get("extra") or {}).get("agreement") or {}
        prov = run.get("provenance") if isinstance(run.get("provenance"), dict) else {}
        rows.append({
            "label": _run_label(run), "backend": run.get("backend"),
            "requested_precision": run.get("requested_precision"),
            "executed_precision": run.get("executed_precision"),
            "status": run.get("status"), "reason": run.get("reason"),
            "bench_prov": prov.get("benchmark") or bench.get("provenance"),
            "measured_on": prov.get("board") or prov.get("measured_on") or "this host",
            "prediction_note": pred.get("note"),
            "median_ms": _num(stats.get("median_ms")), "ci_low_ms": _num(stats.get("ci_low_ms")),
            "ci_high_ms": _num(stats.get("ci_high_ms")), "p90_ms": _num(stats.get("p90_ms")),
            "n": stats.get("n"), "cv": _num(stats.get("cv")),
            "null_reasons": stats.get("null_reasons") or {},
            "throughput": _num(bench.get("throughput_per_s")),
            "peak_memory": _num(bench.get("peak_memory_bytes")),
            "first_ms": _num(bench.get("first_inference_ms")),
            "load_s": _num(bench.get("load_time_s")),
            "runtime": bench.get("runtime"), "runtime_version": bench.get("runtime_version"),
            "threads": bench.get("threads"),
            "target_latency": lat, "target_lo": lo, "target_hi": hi,
            "target_latency_ms": _num((lat or {}).get("value")),
            "target_prov": (lat or {}).get("provenance"),
            "roofline": _fig(figures, "roofline_latency_ms"),
            "meets_budget": _fig(figures, "meets_latency_budget"),
            "energy": _fig(figures, "energy_proxy_j"),
            "memory": _fig(figures, "estimated_memory_bytes"),
            "bw_util": _fig(figures, "bandwidth_utilization"),
            "reading": summary.get("reading"), "notes": summary.get("notes") or [],
            "agreement": agreement if isinstance(agreement, dict) else {},
            "on_host": bool(summary.get("on_host")), "target": summary.get("target") or target_id,
            "notes_bench": bench.get("notes") or [],
        })
    return rows


def _verdict(doc: Mapping[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    est = doc.get("estimate") or {}
    budget = _num((doc.get("request") or {}).get("latency_budget_ms"))
    from edgeprof.core.provenance import sort_key

    timed = [r for r in runs if r["status"] == "ok" and r["target_latency_ms"] is not None]
    # the best-founded figure first (a calibrated prediction before a faster guess)
    fastest = min(timed, key=lambda r: sort_key((r["target_latency"] or {}).get("provenance"),
                                                r["target_latency_ms"])) if timed else None
    measured = [r for r in runs if r["status"] == "ok" and r["median_ms"] is not None]
    fastest_host = min(measured, key=lambda r: r["median_ms"]) if measured else None
    meeting = [r for r in timed if _num((r["meets_budget"] or {}).get("value"))]
    cap = est.get("memory_capacity") if isinstance(est.get("memory_capacity"), dict) else {}
    return {"fastest": fastest, "fastest_host": fastest_host, "budget": budget,
            "meeting": meeting, "timed": timed, "memory": cap,
            "fits": cap.get("fits") if cap else None,
            "not_run": [r for r in runs if r["status"] != "ok"]}


def _layer_table(doc: Mapping[str, Any]) -> dict[str, Any]:
    est = doc.get("estimate") or {}
    layers = [r for r in est.get("layers") or [] if isinstance(r, dict)]
    units = {"input_bytes": "B", "parameter_bytes": "B", "activation_bytes": "B",
             "compute_ms": "ms", "memory_ms": "ms", "roofline_latency_ms": "ms"}
    text_cols = {"layer", "op_type", "output_shape", "bound"}
    cols = [{"key": c, "label": c + (f" ({units[c]})" if c in units else ""),
             "num": c not in text_cols, "bar": c in LAYER_BARS, "prov": "analytic"}
            for c in LAYER_COLUMNS]
    measured: list[tuple[str, dict[str, float]]] = []
    for run in doc.get("runs") or []:
        if isinstance(run, dict) and run.get("operators"):
            per: dict[str, float] = {}
            for op in run["operators"]:
                lat = _num(op.get("latency_ms")) if isinstance(op, dict) else None
                if lat is not None and op.get("layer") is not None:
                    per[str(op["layer"])] = per.get(str(op["layer"]), 0.0) + lat
            measured.append((_run_label(run), per))
    for label, _ in measured:
        cols.append({"key": f"measured:{label}", "label": f"{label} ms (measured on this host)",
                     "num": True, "bar": True, "prov": "measured"})
    rows = []
    for r in layers:
        row = [r.get(c) for c in LAYER_COLUMNS]
        row += [per.get(str(r.get("layer"))) for _, per in measured]
        rows.append(row)
    return _table(cols, rows)


def render_profile_html(doc: Mapping[str, Any], *, command: str | None = None) -> str:
    """The profile report: header card and verdict, roofline, runs, precision trade-offs,
    the per-layer table, warnings, environment and the command that reproduces the run."""
    if not isinstance(doc, Mapping):
        raise TypeError("render_profile_html needs profile.json's dict")
    est = doc.get("estimate") or {}
    target = doc.get("target") or {}
    runs = _runs_context(doc)
    roofline, roof_info = _roofline_chart(doc)
    ok = [r for r in runs if r["status"] == "ok"]
    series = []
    for i, where in enumerate(dict.fromkeys(r["measured_on"] for r in ok)):
        here = [r for r in ok if r["measured_on"] == where]
        for r in here:
            r[f"m{i}"], r[f"m{i}_lo"] = r["median_ms"], r["ci_low_ms"]
            r[f"m{i}_hi"] = r["ci_high_ms"]
        prov = "/".join(sorted({str(r["bench_prov"]) for r in here}))
        series.append((f"median on {where} ({prov})", f"m{i}", f"m{i}_lo", f"m{i}_hi"))
    provs = sorted({r["target_prov"] for r in ok if r["target_latency_ms"] is not None
                    and not r["on_host"] and r["target_prov"]})
    for prov in provs:
        key = f"target_{prov}"
        for r in ok:
            if r["target_prov"] == prov and not r["on_host"]:
                r[key], r[key + "_lo"], r[key + "_hi"] = (r["target_latency_ms"], r["target_lo"],
                                                          r["target_hi"])
        series.append((f"on {target.get('id')} ({prov})", key, key + "_lo", key + "_hi"))
    runs_chart, run_bars = _latency_bars(
        ok, f"Latency per backend × precision: {target.get('id')}", "runs", series)
    totals = est.get("totals") or {}
    tradeoffs = []
    by_prec: dict[str, list[dict[str, Any]]] = {}
    for r in ok:
        by_prec.setdefault(str(r["requested_precision"]), []).append(r)
    for pm in est.get("precision_memory") or []:
        if isinstance(pm, dict):
            tradeoffs.append({**pm, "runs": by_prec.pop(str(pm.get("precision")), [])})
    for prec, rs in by_prec.items():
        tradeoffs.append({"precision": prec, "runs": rs})
    return _render(
        "profile.html.j2", kind="profile", doc=doc, est=est, target=target,
        model=doc.get("model") or {}, totals=totals, runs=runs,
        verdict=_verdict(doc, runs), tradeoffs=tradeoffs,
        target_figures=target.get("figures") or {},
        warnings=_warnings(doc.get("warnings") or []),
        charts={"roofline": roofline, "runs": runs_chart},
        chart_info={"roofline": roof_info, "run_bars": run_bars},
        tables={"layers": _layer_table(doc)},
        command=command or profile_command(doc),
        title=f"{(doc.get('model') or {}).get('name', 'model')} on {target.get('id', 'target')}")


# ----------------------------------------------------------------------------- compare
def render_compare_html(a: Mapping[str, Any], b: Mapping[str, Any], rows: Sequence[Any] | None =
                        None, *, label_a: str = "A", label_b: str = "B",
                        command: str | None = None) -> str:
    """Before/after page for two profile.json dicts: medians with CI whiskers, the change and
    its significance per (backend, precision) (``compare.compare_results`` when ``rows`` is
    not given)."""
    from edgeprof.profilers.report.compare import (ALPHA, MIN_CLIFFS_DELTA, MIN_REL_CHANGE,
                                                   compare_results)

    if rows is None:
        rows = compare_results(dict(a), dict(b))
    items = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in rows]
    for r in items:
        r["label"] = f"{r.get('backend')} {r.get('precision')}"
        ca, cb = r.get("ci_a_ms") or [None, None], r.get("ci_b_ms") or [None, None]
        r["a_lo"], r["a_hi"], r["b_lo"], r["b_hi"] = ca[0], ca[1], cb[0], cb[1]
    chart, bars = _latency_bars(
        [r for r in items if r.get("status") == "compared"],
        f"Median latency: {label_a} vs {label_b} (measured)", "compare",
        [(f"{label_a} (measured)", "median_a_ms", "a_lo", "a_hi"),
         (f"{label_b} (measured)", "median_b_ms", "b_lo", "b_hi")])
    counts: dict[str, int] = {}
    for r in items:
        counts[r.get("verdict") or "not compared"] = counts.get(r.get("verdict") or
                                                                "not compared", 0) + 1
    sides = []
    for label, d in ((label_a, a), (label_b, b)):
        sides.append({"label": label, "doc": d, "model": (d.get("model") or {}),
                      "target": (d.get("target") or {}), "command": profile_command(d),
                      "runs": _runs_context(d)})
    warnings = _warnings([*(a.get("warnings") or []), *(b.get("warnings") or [])])
    return _render("compare.html.j2", kind="compare", rows=items, sides=sides, counts=counts,
                   warnings=warnings, charts={"compare": chart}, chart_info={"bars": bars},
                   rule={"alpha": ALPHA, "min_rel_change": MIN_REL_CHANGE,
                         "min_cliffs": MIN_CLIFFS_DELTA},
                   command=command or f"edgeprof compare {shlex.quote(label_a)} "
                                      f"{shlex.quote(label_b)}",
                   title=f"{label_a} vs {label_b}")


# ----------------------------------------------------------------------------- optimize
def pareto_front(points: Sequence[Mapping[str, Any]], x: str = "latency_ms",
                 y: str = "accuracy") -> list[Mapping[str, Any]]:
    """The points no other point beats on both lower ``x`` and higher ``y``, by ``x``."""
    pts = sorted((p for p in points if _num(p.get(x)) is not None and _num(p.get(y)) is not None),
                 key=lambda p: (_num(p[x]), -_num(p[y])))
    front, best = [], -math.inf
    for p in pts:
        if _num(p[y]) > best:
            front.append(p)
            best = _num(p[y])
    return front


def optimize_command(doc: Mapping[str, Any]) -> str:
    """The command line rebuilt from optimize.json (its backends and compressions are the
    ones its candidates used)."""
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
    pts = [c for c in cands if c.get("status") == "ok" and _num(c.get("latency_ms")) is not None
           and _num(c.get("accuracy")) is not None]
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
            text=[f"<b>{_esc(c.get('label'))}</b><br>latency {_g(c['latency_ms'])} ms "
                  f"({_esc(c.get('latency_provenance'))})<br>accuracy "
                  f"{c['accuracy'] * 100:.2f}% ({_esc(c.get('accuracy_provenance'))})" +
                  ("" if accepted else "<br>fails: " + _esc("; ".join(
                      f"{k}: {v}" for k, v in (c.get("failing") or {}).items())))
                  for c in sel], hovertemplate="%{text}<extra></extra>"))
        scatter_points += len(sel)
    if front:
        fig.add_trace(go.Scatter(x=[c["latency_ms"] for c in front],
                                 y=[c["accuracy"] * 100 for c in front], mode="lines",
                                 line=dict(shape="hv", color="#555", dash="dot"),
                                 name="Pareto front (faster or more accurate than the rest)",
                                 hoverinfo="skip"))
    if chosen and _num(chosen.get("latency_ms")) is not None and \
            _num(chosen.get("accuracy")) is not None:
        fig.add_trace(go.Scatter(x=[chosen["latency_ms"]], y=[chosen["accuracy"] * 100],
                                 mode="markers", name=f"chosen: {_esc(chosen.get('label'))}",
                                 marker=dict(size=22, symbol="circle-open", color="black",
                                             line=dict(width=2)), hoverinfo="skip"))
    ref = _num((doc.get("reference") or {}).get("accuracy"))
    if ref is not None:
        fig.add_hline(y=ref * 100, line_dash="dash", line_color="gray",
                      annotation_text="reference accuracy (measured)")
    budget = _num((doc.get("constraints") or {}).get("latency_budget_ms"))
    if budget is not None:
        fig.add_vline(x=budget, line_dash="dot", line_color="orange",
                      annotation_text="latency budget")
    provs = sorted({str(c.get("latency_provenance")) for c in pts})
    fig.update_layout(title=f"Latency vs accuracy on {_esc(target.get('id'))}",
                      xaxis=dict(title=f"latency on {_esc(target.get('id'))} (ms, "
                                       f"{_esc(', '.join(provs) or 'n/a')})"),
                      yaxis=dict(title="top-1 accuracy (%, measured)"), height=480,
                      legend=dict(orientation="h", y=-0.2))
    chart = _chart(fig, "pareto") if pts else None
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
        lats = [_num(c.get("latency_ms")) for c in cs if _num(c.get("latency_ms")) is not None]
        accs = [_num(c.get("accuracy")) for c in cs if _num(c.get("accuracy")) is not None]
        mems = [_num(c.get("memory_bytes")) for c in cs if _num(c.get("memory_bytes")) is not None]
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
    return _render("optimize.html.j2", kind="optimize", doc=doc, target=target,
                   model=doc.get("model") or {}, chosen=chosen, plan=plan,
                   verdict=doc.get("verdict") or {}, front=[c.get("label") for c in front],
                   tradeoffs=tradeoffs, warnings=_warnings(warnings),
                   charts={"pareto": chart}, chart_info={"points": scatter_points},
                   tables={"candidates": _table(cols, rows)},
                   command=command or optimize_command(doc),
                   title=f"optimize {(doc.get('model') or {}).get('name', 'model')} for "
                         f"{target.get('id', 'target')}")


# ----------------------------------------------------------------------------- sweep
def _config_label(row: Mapping[str, Any]) -> str:
    label = f"{row.get('backend')} {row.get('precision')}"
    bs = row.get("batch_size")
    if _num(bs) is not None and _num(bs) != 1:
        label += f" b{int(_num(bs))}"
    return label


def render_sweep_html(frame, *, title: str | None = None, command: str | None = None) -> str:
    """A sweep's grid: per target a heatmap of model × configuration (colour: how many times
    the model's fastest configuration on that target; text: the median ms), the best
    configuration per target and model, and every row with its status/reason."""
    import plotly.graph_objects as go

    missing = [c for c in SWEEP_COLUMNS if c not in getattr(frame, "columns", [])]
    if missing:
        raise ValueError(f"render_sweep_html needs the sweep columns; missing: "
                         f"{', '.join(missing)}")
    records = [{k: _json_safe(v) for k, v in r.items()} for r in frame.to_dict(orient="records")]
    for r in records:
        r["config"] = _config_label(r)
        r["median_ms"] = _num(r.get("median_ms")) if r.get("status") == "ok" else None
    targets = list(dict.fromkeys(str(r.get("target")) for r in records))
    charts: dict[str, str | None] = {}
    heat_info: dict[str, Any] = {}
    best_rows = []
    for ti, t in enumerate(targets):
        rows = [r for r in records if str(r.get("target")) == t]
        models = list(dict.fromkeys(str(r.get("model")) for r in rows))
        configs = list(dict.fromkeys(r["config"] for r in rows))
        cell = {(str(r.get("model")), r["config"]): r for r in rows}
        z, text, hover = [], [], []
        for m in models:
            ok = [_num(r["median_ms"]) for r in rows if str(r.get("model")) == m
                  and r["median_ms"] is not None]
            best = min(ok) if ok else None
            zr, tr, hr = [], [], []
            for c in configs:
                r = cell.get((m, c))
                if r is None:
                    zr.append(None), tr.append(""), hr.append(f"{_esc(m)} · {_esc(c)}: not in "
                                                              "the sweep")
                elif r["median_ms"] is None:
                    zr.append(None), tr.append(_esc(r.get("status")))
                    hr.append(f"<b>{_esc(m)}</b> · {_esc(c)}<br>{_esc(r.get('status'))}: "
                              f"{_esc(r.get('reason'))}")
                else:
                    v = r["median_ms"]
                    zr.append(v / best if best else None)
                    tr.append(_g(v, 3))
                    ci = (f"<br>95% CI {_g(r['ci_low_ms'])}–{_g(r['ci_high_ms'])} ms"
                          if _num(r.get("ci_low_ms")) is not None and
                          _num(r.get("ci_high_ms")) is not None else "")
                    hr.append(f"<b>{_esc(m)}</b> · {_esc(c)}<br>median {_g(v)} ms "
                              f"({_esc(r.get('provenance'))}){ci}<br>board: "
                              f"{_esc(r.get('board'))}<br>{v / best:.2f}× the fastest")
            z.append(zr), text.append(tr), hover.append(hr)
            if best is not None:
                b = min((r for r in rows if str(r.get("model")) == m and r["median_ms"]
                         is not None), key=lambda r: r["median_ms"])
                best_rows.append({**b, "n_ok": len(ok),
                                  "n": sum(str(r.get("model")) == m for r in rows)})
        fig = go.Figure(go.Heatmap(
            z=z, x=[_esc(c) for c in configs], y=[_esc(m) for m in models], text=text,
            texttemplate="%{text}", customdata=hover, hovertemplate="%{customdata}<extra></extra>",
            colorscale="RdYlGn_r", zmin=1, colorbar=dict(title="× fastest"), hoverongaps=True,
            xgap=1, ygap=1))
        provs = sorted({str(r.get("provenance")) for r in rows if r["median_ms"] is not None})
        fig.update_layout(title=f"{_esc(t)}: median latency (ms; "
                                f"{_esc(', '.join(provs) or 'nothing ran')}) per model × "
                                f"configuration", height=max(260, 60 + 40 * len(models)),
                          xaxis=dict(tickangle=-30))
        charts[f"heat{ti}"] = _chart(fig, f"heatmap-{ti}")
        heat_info[t] = {"models": len(models), "configs": len(configs)}
    best_chart, bars = _latency_bars(
        [{**b, "label": f"{b.get('target')} · {b.get('model')} · {b['config']}"}
         for b in best_rows], "Best configuration per target and model", "best",
        [("median (as in the sweep's provenance)", "median_ms", "ci_low_ms", "ci_high_ms")])
    charts["best"] = best_chart
    cols = [{"key": c, "label": c + (" (ms)" if c.endswith("_ms") else ""),
             "num": c in ("batch_size", "median_ms", "ci_low_ms", "ci_high_ms"),
             "bar": c == "median_ms", "wide": c == "reason"} for c in SWEEP_COLUMNS]
    table = _table(cols, [[r.get(c) for c in SWEEP_COLUMNS] for r in records])
    statuses: dict[str, int] = {}
    for r in records:
        statuses[str(r.get("status"))] = statuses.get(str(r.get("status")), 0) + 1
    return _render("sweep.html.j2", kind="sweep", targets=targets, best=best_rows,
                   statuses=statuses, n=len(records), charts=charts,
                   chart_info={"heatmaps": heat_info, "best_bars": bars},
                   tables={"sweep": table}, command=command,
                   title=title or f"sweep: {len(records)} runs on {len(targets)} target(s)")


# ----------------------------------------------------------------------------- output
def write_html(path: str | Path, text: str) -> Path:
    """Write a report atomically; a path that cannot be written is the user's error (exit 2,
    one line), not a traceback."""
    from edgeprof.core.errors import OutputError
    from edgeprof.core.io import write_text

    p = Path(path)
    if p.is_dir():
        raise OutputError(f"--html needs a file name, got the folder '{p}'", path=p)
    try:
        return write_text(p, text)
    except OSError as e:
        raise OutputError(f"cannot write the HTML report to '{p}': {e.strerror or e}; give a "
                          "writable file path", path=p) from None


__all__ = ["LAYER_COLUMNS", "PAGE_ROWS", "PLOTLY_BUNDLES", "PLOTLY_JS_VERSION", "PROVENANCES",
           "SWEEP_COLUMNS", "fmt", "plotly_bundle", "plotly_bundle_path",
           "optimize_command", "pareto_front", "profile_command", "render_compare_html",
           "render_optimize_html", "render_profile_html", "render_sweep_html", "write_html"]

"""The sweep page (``render_sweep_html``, a sweep's DataFrame with :data:`SWEEP_COLUMNS`): per
target a heatmap of model × configuration, the best configuration per target and model, and
every row with its status and reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from edgeprof.profilers.report.html_common import (_chart, _esc, _g, _json_safe, _num, _render,
                                                   _table)
from edgeprof.profilers.report.html_figures import _latency_bars

SWEEP_COLUMNS = ("model", "target", "backend", "precision", "batch_size", "status", "reason",
                 "median_ms", "ci_low_ms", "ci_high_ms", "provenance", "board")


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
    # the figure each job has on its target: a sweep's target_* columns (its measurement on
    # a board of the target, or the board's prediction), else the frame's own median
    on_target = "target_ms" in getattr(frame, "columns", [])
    keys = (("target_ms", "target_low_ms", "target_high_ms", "target_provenance") if on_target
            else ("median_ms", "ci_low_ms", "ci_high_ms", "provenance"))
    for r in records:
        r["config"] = _config_label(r)
        r["host_ms"] = _num(r.get("median_ms")) if on_target else None
        r["median_ms"] = _num(r.get(keys[0])) if r.get("status") == "ok" else None
        r["fig_low"], r["fig_high"] = _num(r.get(keys[1])), _num(r.get(keys[2]))
        r["fig_prov"] = r.get(keys[3])
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
                    what = "interval" if r["fig_prov"] != "measured" else "95% CI"
                    ci = (f"<br>{what} {_g(r['fig_low'])}–{_g(r['fig_high'])} ms"
                          if r["fig_low"] is not None and r["fig_high"] is not None else "")
                    host = (f"<br>this host: median {_g(r['host_ms'])} ms (measured; "
                            f"{_esc(r.get('measured_on'))})" if r["host_ms"] is not None
                            and r["fig_prov"] != "measured" else "")
                    hr.append(f"<b>{_esc(m)}</b> · {_esc(c)}<br>{_esc(t)}: {_g(v)} ms "
                              f"({_esc(r['fig_prov'])}){ci}{host}<br>board: "
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
        provs = sorted({str(r["fig_prov"]) for r in rows if r["median_ms"] is not None})
        fig.update_layout(title=f"{_esc(t)}: latency (ms; "
                                f"{_esc(', '.join(provs) or 'nothing ran')}) per model × "
                                f"configuration", height=max(260, 60 + 40 * len(models)),
                          xaxis=dict(tickangle=-30))
        charts[f"heat{ti}"] = _chart(fig, f"heatmap-{ti}")
        heat_info[t] = {"models": len(models), "configs": len(configs)}
    best_chart, bars = _latency_bars(
        [{**b, "label": f"{b.get('target')} · {b.get('model')} · {b['config']}"}
         for b in best_rows], "Best configuration per target and model", "best",
        [("on the target (each bar's provenance in the table)", "median_ms", "fig_low",
          "fig_high")])
    charts["best"] = best_chart
    shown = list(SWEEP_COLUMNS) + [c for c in ("measured_on", "target_ms", "target_low_ms",
                                               "target_high_ms", "target_provenance",
                                               "target_source") if on_target and c in frame]
    cols = [{"key": c, "label": c + (" (ms)" if c.endswith("_ms") else ""),
             "num": c in ("batch_size", "median_ms", "ci_low_ms", "ci_high_ms", "target_ms",
                          "target_low_ms", "target_high_ms"),
             "bar": c == ("target_ms" if on_target else "median_ms"),
             "wide": c in ("reason", "target_source")} for c in shown]
    rows_out = []
    for r in records:  # the table shows the frame's own columns (the host's median as is)
        vals = {**r, "median_ms": r["host_ms"] if on_target else r["median_ms"]}
        rows_out.append([vals.get(c) for c in shown])
    table = _table(cols, rows_out)
    statuses: dict[str, int] = {}
    for r in records:
        statuses[str(r.get("status"))] = statuses.get(str(r.get("status")), 0) + 1
    return _render("sweep.html.j2", kind="sweep", targets=targets, best=best_rows,
                   statuses=statuses, n=len(records), charts=charts,
                   chart_info={"heatmaps": heat_info, "best_bars": bars},
                   tables={"sweep": table}, command=command,
                   title=title or f"sweep: {len(records)} runs on {len(targets)} target(s)")

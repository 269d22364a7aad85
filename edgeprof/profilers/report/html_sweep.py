"""The sweep page (``render_sweep_html``, a sweep's DataFrame with :data:`SWEEP_COLUMNS`): its
sections in order: per target a heatmap of model × configuration, the best configuration per
target and model, the generative jobs (when the frame has any: rows whose ``workload`` is
``generate``, with llama-bench's columns) and every tensor row with its status and reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from edgeprof.profilers.report.html_common import (chart_html, esc, fmt, sig, json_safe, num, render,
                                                   table_data)
from edgeprof.profilers.report.html_figures import latency_bars

SWEEP_COLUMNS = ("model", "target", "backend", "precision", "batch_size", "status", "reason",
                 "median_ms", "ci_low_ms", "ci_high_ms", "provenance", "board")


def _config_label(row: Mapping[str, Any]) -> str:
    label = f"{row.get('backend')} {row.get('precision')}"
    bs = row.get("batch_size")
    if num(bs) is not None and num(bs) != 1:
        label += f" b{int(num(bs))}"
    return label


def render_sweep_html(frame, best=None, *, title: str | None = None,
                      command: str | None = None) -> str:
    """A sweep's page, its sections in order (``sections``: the template renders each): per
    target a heatmap of model × configuration (colour: how many times the model's fastest
    configuration on that target; text: the median ms), the best configuration per target
    and model, the generative jobs when there are any (:func:`_generative`; ``best``: the
    sweep's best frame, whose generate rows are their fastest decode per test), and every
    tensor row with its status/reason."""
    import plotly.graph_objects as go

    missing = [c for c in SWEEP_COLUMNS if c not in getattr(frame, "columns", [])]
    if missing:
        raise ValueError(f"render_sweep_html needs the sweep columns; missing: "
                         f"{', '.join(missing)}")
    gen = frame["workload"] == "generate" if "workload" in frame.columns else None
    generative = None
    if gen is not None and gen.any():  # their own section; the rest is the tensor jobs'
        generative = _generative(frame[gen], best)
        title = title or (f"sweep: {len(frame)} runs ({int((~gen).sum())} tensor, "
                          f"{int(gen.sum())} generative) on {frame['target'].nunique()} "
                          "target(s)")
        frame = frame[~gen].reset_index(drop=True)
    sections = ["heatmaps", "best", *(["generate"] if generative else []), "rows"]
    records = [{k: json_safe(v) for k, v in r.items()} for r in frame.to_dict(orient="records")]
    # the figure each job has on its target: a sweep's target_* columns (its measurement on
    # a board of the target, or the board's prediction), else the frame's own median
    on_target = "target_ms" in getattr(frame, "columns", [])
    keys = (("target_ms", "target_low_ms", "target_high_ms", "target_provenance") if on_target
            else ("median_ms", "ci_low_ms", "ci_high_ms", "provenance"))
    for r in records:
        r["config"] = _config_label(r)
        r["host_ms"] = num(r.get("median_ms")) if on_target else None
        r["median_ms"] = num(r.get(keys[0])) if r.get("status") == "ok" else None
        r["fig_low"], r["fig_high"] = num(r.get(keys[1])), num(r.get(keys[2]))
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
            mine = [r for r in rows if str(r.get("model")) == m]
            ok = [r for r in mine if r["median_ms"] is not None]
            fastest = min(ok, key=lambda r: r["median_ms"]) if ok else None
            best = fastest["median_ms"] if fastest else None
            zr, tr, hr = [], [], []
            for c in configs:
                r = cell.get((m, c))
                if r is None:
                    zr.append(None), tr.append(""), hr.append(f"{esc(m)} · {esc(c)}: not in "
                                                              "the sweep")
                elif r["median_ms"] is None:
                    zr.append(None), tr.append(esc(r.get("status")))
                    hr.append(f"<b>{esc(m)}</b> · {esc(c)}<br>{esc(r.get('status'))}: "
                              f"{esc(r.get('reason'))}")
                else:
                    v = r["median_ms"]
                    zr.append(v / best if best else None)
                    tr.append(sig(v, 3))
                    what = "interval" if r["fig_prov"] != "measured" else "95% CI"
                    ci = (f"<br>{what} {sig(r['fig_low'])}–{sig(r['fig_high'])} ms"
                          if r["fig_low"] is not None and r["fig_high"] is not None else "")
                    host = (f"<br>this host: median {sig(r['host_ms'])} ms (measured; "
                            f"{esc(r.get('measured_on'))})" if r["host_ms"] is not None
                            and r["fig_prov"] != "measured" else "")
                    hr.append(f"<b>{esc(m)}</b> · {esc(c)}<br>{esc(t)}: {sig(v)} ms "
                              f"({esc(r['fig_prov'])}){ci}{host}<br>board: "
                              f"{esc(r.get('board'))}<br>{v / best:.2f}× the fastest")
            z.append(zr), text.append(tr), hover.append(hr)
            if fastest:
                best_rows.append({**fastest, "n_ok": len(ok), "n": len(mine)})
        fig = go.Figure(go.Heatmap(
            z=z, x=[esc(c) for c in configs], y=[esc(m) for m in models], text=text,
            texttemplate="%{text}", customdata=hover, hovertemplate="%{customdata}<extra></extra>",
            colorscale="RdYlGn_r", zmin=1, colorbar=dict(title="× fastest"), hoverongaps=True,
            xgap=1, ygap=1))
        provs = sorted({str(r["fig_prov"]) for r in rows if r["median_ms"] is not None})
        fig.update_layout(title=f"{esc(t)}: latency (ms; "
                                f"{esc(', '.join(provs) or 'nothing ran')}) per model × "
                                f"configuration", height=max(260, 60 + 40 * len(models)),
                          xaxis=dict(tickangle=-30))
        charts[f"heat{ti}"] = chart_html(fig, f"heatmap-{ti}")
        heat_info[t] = {"models": len(models), "configs": len(configs)}
    best_chart, bars = latency_bars(
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
    table = table_data(cols, rows_out)
    statuses = Counter(str(r.get("status")) for r in records)
    return render("sweep.html.j2", kind="sweep", targets=targets, best=best_rows,
                  statuses=statuses, n=len(records), charts=charts,
                  chart_info={"heatmaps": heat_info, "best_bars": bars},
                  tables={"sweep": table}, command=command, sections=sections,
                  generative=generative,
                  title=title or f"sweep: {len(records)} runs on {len(targets)} target(s)")


def _cell(v: Any) -> str:
    if num(v) is not None:
        return fmt(v)
    return str(v) if v not in (None, "") and v == v else "—"


def _rate(median: Any, stddev: Any) -> str:
    """A rate as median ± standard deviation."""
    if num(median) is None:
        return "—"
    return fmt(median) + (f" ± {fmt(stddev)}" if num(stddev) is not None else "")


#: the generative jobs' table: its columns, and which are numbers
GENERATIVE_HEADS = [(h, h.endswith(("/s", "ms")) or h.startswith("n_")) for h in (
    "target", "model", "backend", "format", "threads", "n_prompt", "n_gen", "n_depth", "status",
    "pp tok/s", "tg tok/s", "", "TTFT ms", "TPOT ms", "measured on", "reason")]


def _generative(gen, best) -> dict[str, Any]:
    """The generative section: a row per job (llama-bench's prefill and decode tok/s, median
    ± standard deviation; TTFT and TPOT; ``width``: its decode against the fastest decode of
    its target and model, in percent) and, from ``best``, the fastest decode per target,
    model and test with its runner-up and the fastest prefill."""
    recs = gen.to_dict(orient="records")
    top: dict[tuple, float] = {}
    for r in recs:
        v = num(r.get("tg_median_ts"))
        if v is not None:
            top[(r["target"], r["model"])] = max(top.get((r["target"], r["model"]), 0.0), v)
    rows = []
    for r in recs:
        v, peak = num(r.get("tg_median_ts")), top.get((r["target"], r["model"]))
        rows.append({"status": str(r.get("status")), "tg": fmt(v),
                     "width": 0 if v is None or not peak else max(1, round(100 * v / peak)),
                     "cells": [_cell(r.get(k)) for k in (
                         "target", "model", "backend", "precision", "n_threads", "n_prompt",
                         "n_gen", "n_depth", "status")]
                     + [_rate(r.get("pp_median_ts"), r.get("pp_stddev_ts")),
                        _rate(r.get("tg_median_ts"), r.get("tg_stddev_ts"))],
                     "after": [_cell(r.get("ttft_ms")), _cell(r.get("tpot_ms")),
                               _cell(r.get("measured_on") or r.get("board")),
                               _cell(r.get("reason"))]})
    best_rows = []
    gbest = best[best["workload"] == "generate"] if best is not None and "workload" in best \
        else []
    for b in (gbest.to_dict(orient="records") if len(gbest) else []):
        t = "auto" if num(b.get("n_threads")) is None else fmt(b.get("n_threads"))
        cf = b.get("clearly_faster")
        best_rows.append([
            _cell(b.get("target")), _cell(b.get("model")),
            f"pp{_cell(b.get('n_prompt'))} tg{_cell(b.get('n_gen'))} @ d{_cell(b.get('n_depth'))}",
            f"{b.get('backend')} {b.get('precision')} t{t}",
            _rate(b.get("tg_median_ts"), b.get("tg_stddev_ts")), _cell(b.get("runner_up")),
            {True: "yes", False: "no (repetitions overlap)"}.get(cf, "—")
            if isinstance(cf, bool) else "—",
            _cell(b.get("best_prefill")), _cell(b.get("best_prefill_pp_median_ts"))])
    return {"heads": GENERATIVE_HEADS, "rows": rows, "best": best_rows}

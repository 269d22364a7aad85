"""The profile page (``render_profile_html``, profile.json's dict): header card and verdict,
roofline, runs, precision trade-offs, the per-layer table, warnings, environment and the
command that reproduces the run; the run rows and the command are the compare page's too."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from edgeprof.profilers.report.html_common import num, render, table_data, warning_groups
from edgeprof.profilers.report.html_figures import latency_bars, roofline_chart

LAYER_COLUMNS = ("layer", "op_type", "output_shape", "output_elements", "input_bytes",
                 "parameter_count", "parameter_bytes", "activation_bytes", "macs", "flops",
                 "other_ops", "compute_ms", "memory_ms", "roofline_latency_ms", "bound")
LAYER_BARS = ("macs", "activation_bytes", "roofline_latency_ms")


def _fig(figures: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    f = (figures or {}).get(key)
    return f if isinstance(f, dict) else None


def _interval(f: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    """A figure's interval when the document gives one (a prediction's low/high)."""
    if not f:
        return None, None
    for lo, hi in (("low_ms", "high_ms"), ("low", "high"), ("ci_low_ms", "ci_high_ms")):
        if lo in f or hi in f:
            return num(f.get(lo)), num(f.get(hi))
    iv = f.get("interval")
    if isinstance(iv, (list, tuple)) and len(iv) == 2:
        return num(iv[0]), num(iv[1])
    return None, None


# ----------------------------------------------------------------------------- profile
def profile_command(doc: Mapping[str, Any]) -> str:
    """The command line that reproduces a profile: the one that ran (``request.command``,
    recorded by the CLI), else one rebuilt from its ``request``."""
    req = doc.get("request") or {}
    if isinstance(req.get("command"), str) and req["command"]:
        return req["command"]
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


def runs_context(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
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
            lo = num((_fig(figures, "latency_low_ms") or {}).get("value"))
            hi = num((_fig(figures, "latency_high_ms") or {}).get("value"))
        pred = summary.get("prediction") if isinstance(summary.get("prediction"), dict) else {}
        if lo is None and hi is None and pred:
            lo, hi = num(pred.get("low_ms")), num(pred.get("high_ms"))
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
            "median_ms": num(stats.get("median_ms")), "ci_low_ms": num(stats.get("ci_low_ms")),
            "ci_high_ms": num(stats.get("ci_high_ms")), "p90_ms": num(stats.get("p90_ms")),
            "n": stats.get("n"), "cv": num(stats.get("cv")),
            "null_reasons": stats.get("null_reasons") or {},
            "throughput": num(bench.get("throughput_per_s")),
            "peak_memory": num(bench.get("peak_memory_bytes")),
            "first_ms": num(bench.get("first_inference_ms")),
            "load_s": num(bench.get("load_time_s")),
            "runtime": bench.get("runtime"), "runtime_version": bench.get("runtime_version"),
            "threads": bench.get("threads"),
            "target_latency": lat, "target_lo": lo, "target_hi": hi,
            "target_latency_ms": num((lat or {}).get("value")),
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
    budget = num((doc.get("request") or {}).get("latency_budget_ms"))
    from edgeprof.core.provenance import sort_key

    timed = [r for r in runs if r["status"] == "ok" and r["target_latency_ms"] is not None]
    # the best-founded figure first (a calibrated prediction before a faster guess)
    fastest = min(timed, key=lambda r: sort_key((r["target_latency"] or {}).get("provenance"),
                                                r["target_latency_ms"])) if timed else None
    measured = [r for r in runs if r["status"] == "ok" and r["median_ms"] is not None]
    fastest_host = min(measured, key=lambda r: r["median_ms"]) if measured else None
    meeting = [r for r in timed if num((r["meets_budget"] or {}).get("value"))]
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
             "num": c not in text_cols, "bar": c in LAYER_BARS, "prov": "analytic",
             "wrap": c == "layer"}  # a long module path folds, not the page's width
            for c in LAYER_COLUMNS]
    measured: list[tuple[str, dict[str, float]]] = []
    for run in doc.get("runs") or []:
        if isinstance(run, dict) and run.get("operators"):
            per: dict[str, float] = {}
            for op in run["operators"]:
                lat = num(op.get("latency_ms")) if isinstance(op, dict) else None
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
    return table_data(cols, rows)


def render_profile_html(doc: Mapping[str, Any], *, command: str | None = None) -> str:
    """The profile report: header card and verdict, roofline, runs, precision trade-offs,
    the per-layer table, warnings, environment and the command that reproduces the run."""
    if not isinstance(doc, Mapping):
        raise TypeError("render_profile_html needs profile.json's dict")
    est = doc.get("estimate") or {}
    target = doc.get("target") or {}
    runs = runs_context(doc)
    roofline, roof_info = roofline_chart(doc)
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
    runs_chart, run_bars = latency_bars(
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
    return render(
        "profile.html.j2", kind="profile", doc=doc, est=est, target=target,
        model=doc.get("model") or {}, totals=totals, runs=runs,
        verdict=_verdict(doc, runs), tradeoffs=tradeoffs,
        target_figures=target.get("figures") or {},
        warnings=warning_groups(doc.get("warnings") or []),
        charts={"roofline": roofline, "runs": runs_chart},
        chart_info={"roofline": roof_info, "run_bars": run_bars},
        tables={"layers": _layer_table(doc)},
        command=command or profile_command(doc),
        title=f"{(doc.get('model') or {}).get('name', 'model')} on {target.get('id', 'target')}")

"""Terminal rendering of results (rich tables). Presentation only: no computation."""

from __future__ import annotations

from typing import Any



def fmt_number(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.3e}"
        return f"{v:.{digits}g}"
    return str(v)


def si(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor:
            return f"{v / factor:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"



def render_estimate(est, console, max_layers: int = 40, title: str | None = None) -> None:
    from rich.table import Table

    table = Table(title=title or f"Estimate: {est.model} on {est.target} at {est.precision} "
                  f"(analytic roofline)", title_justify="left")
    for col in ("layer", "op", "output", "params", "MACs", "other ops", "activation",
                "roofline ms", "bound"):
        table.add_column(col, justify="left" if col in ("layer", "op", "output", "bound") else "right")
    layers = est.layers
    shown = layers if len(layers) <= max_layers else sorted(
        layers, key=lambda r: r.roofline_latency_ms, reverse=True)[:max_layers]
    order = {id(r): i for i, r in enumerate(layers)}
    for r in sorted(shown, key=lambda r: order[id(r)]):
        table.add_row(r.layer, r.op_type, r.output_shape, si(r.parameter_count, ""),
                      si(r.macs, ""), si(r.other_ops, ""), si(r.activation_bytes, "B"),
                      fmt_number(r.roofline_latency_ms), r.bound)
    console.print(table)
    if len(layers) > max_layers:
        console.print(f"({len(layers) - max_layers} more layers in layerwise_breakdown.csv; the "
                      f"{max_layers} slowest by roofline are shown)")
    t = est.totals()
    console.print(
        f"totals: {si(t['macs'], 'MAC')} ({si(t['flops'], 'FLOP')}), "
        f"{si(t['parameter_count'], '')} parameters = {si(t['parameter_bytes'], 'B')}, "
        f"peak live activations {si(t['peak_activation_bytes'], 'B')}, roofline "
        f"{fmt_number(t['roofline_latency_ms'])} ms ({t['bound']}-bound)")
    cap = est.memory_capacity or {}
    if cap:
        console.print("memory: " + _capacity_line(cap))
    ec = est.edge_constraints or {}
    for key in ("bottleneck", "cache_sensitivity"):
        if key in ec:
            reason = ec.get(f"{key}_reason")
            console.print(f"{key.replace('_', ' ')}: {ec[key]}" + (f" — {reason}" if reason else ""),
                          markup=False)
    for n in est.notes:
        console.print(f"note: {n}", markup=False)


def _capacity_line(cap: dict[str, Any]) -> str:
    parts = []
    for k, v in cap.items():
        if isinstance(v, bool):
            parts.append(f"{k}={'yes' if v else 'NO'}")
        elif isinstance(v, (int, float)):
            shown = si(float(v), 'B') if 'bytes' in k or k.endswith('_b') else fmt_number(v)
            parts.append(f"{k}={shown}")
    return ", ".join(parts)


def render_profile(report, console, max_layers: int = 40, verbose: bool = False) -> None:
    from rich.table import Table

    tgt = report.target
    console.print(f"[bold]edgeprof[/bold] {report.model.name} → {tgt.id} ({tgt.name})")
    if not tgt.is_host:
        console.print(f"[yellow]{tgt.id} is not this machine:[/yellow] benchmarks ran here "
                      f"(measured on the host); {tgt.id} latency is predicted from a calibration "
                      f"of that board and runtime where one exists, else the roofline with a "
                      f"documented prior (uncalibrated); the rest is analytic.")
    render_estimate(report.estimate, console, max_layers=max_layers)

    provs = sorted(_provenances(report.runs, "latency_ms"))
    table = Table(title=f"Runs (host: measured · {tgt.id}: "
                        f"{'measured' if tgt.is_host else ', '.join(provs) or 'no figure'})",
                  title_justify="left")
    # the rates, utilization and reading come from the target's latency: each column (or,
    # where the rows' labels differ, each cell) carries that latency's provenance
    derived = {"achieved_bandwidth_gbps": "GB/s", "bandwidth_utilization": "BW util",
               "achieved_gmacs": "GMAC/s", "latency_ms": "reading"}
    # the provenance every run's figure has, where they all have one value's
    shared = {k: p.pop() if len(p := _provenances(report.runs, k)) == 1 else None
              for k in derived}
    for col in ("backend", "precision", "ran as", "status", "host median ms [95% CI]",
                "p90 ms", f"{tgt.id} ms"):
        table.add_column(col)
    for key, name in derived.items():  # the reading names its latency's label itself
        table.add_column(f"{tgt.id} {name}" + (f" ({shared[key]})" if shared[key]
                                                and key != "latency_ms" else ""))

    def cell(s, key: str, show) -> str:  # (the reading names its own provenance)
        f = s.figures.get(key) if s else None
        if f is None or f.value is None:
            return "-"
        return show(f.value) if shared[key] else f"{show(f.value)} ({f.provenance})"
    for r in report.runs:
        b, s = r.benchmark, r.summary
        st = b.stats
        med = "-"
        if st:
            med = fmt_number(st.median_ms)
            if st.ci_low_ms is not None:
                med += f" [{fmt_number(st.ci_low_ms, 3)}–{fmt_number(st.ci_high_ms, 3)}]"
        lat = s.figures["latency_ms"] if s else None
        table.add_row(
            r.backend, r.requested_precision, b.executed_precision or "-",
            b.status if b.status == "ok" else f"[red]{b.status}[/red]", med,
            fmt_number(st.p90_ms) if st else "-",
            (f"{fmt_number(lat.value)} ({lat.provenance})" if lat and lat.value is not None
             else "-"),
            cell(s, "achieved_bandwidth_gbps", fmt_number),
            cell(s, "bandwidth_utilization", _pct), cell(s, "achieved_gmacs", fmt_number),
            s.reading if s else "-")
    console.print(table)
    for r in report.runs:
        tag = f"{r.backend} {r.requested_precision}"
        if r.status != "ok":
            console.print(f"{tag}: {r.status}: {r.benchmark.reason}", markup=False)
            continue
        agreement = r.benchmark.extra.get("agreement") or {}
        if agreement.get("relative_error") is not None:
            console.print(f"{tag}: outputs vs {agreement.get('reference') or 'the reference'}: "
                          f"relative error {fmt_number(agreement.get('relative_error'))}, cosine "
                          f"{fmt_number(agreement.get('cosine_similarity'))} — "
                          f"{'within' if agreement.get('passed') else 'OUTSIDE'} tolerance",
                          markup=False)
        elif agreement:
            console.print(f"{tag}: outputs not compared: "
                          f"{agreement.get('reason') or 'no reference model'}", markup=False)
        for n in r.benchmark.notes + (r.summary.notes if r.summary and verbose else []):
            console.print(f"{tag}: {n}", markup=False)
    budget = report.request.get("latency_budget_ms")
    if budget is not None:
        def how(r) -> str:
            f = r.summary.figures
            hi = f.get("latency_high_ms")
            if f["latency_ms"].provenance == "measured":
                return ""
            return (" (likely)" if hi is not None and hi.value is not None and hi.value > budget
                    else f" ({f['latency_ms'].provenance})")

        met = [f"{r.backend} {r.requested_precision}{how(r)}" for r in report.runs
               if r.summary and r.summary.value("meets_latency_budget") == 1.0]
        missed = [f"{r.backend} {r.requested_precision}" for r in report.runs
                  if r.summary and r.summary.value("meets_latency_budget") == 0.0]
        console.print(f"latency budget {fmt_number(budget)} ms on {tgt.id}: met by "
                      f"{', '.join(met) or 'none'}; missed by {', '.join(missed) or 'none'}",
                      markup=False)
    for r in report.runs:
        for w in r.benchmark.warnings + (r.summary.warnings if r.summary else []):
            console.print(f"[yellow]warning[/yellow] {r.backend} {r.requested_precision} "
                          f"{w.code}: {w.message}")
    for w in report.warnings:
        console.print(f"[yellow]warning[/yellow] {w.code}: {w.message}")


def _provenances(runs, key: str) -> set[str]:
    """The provenances of the runs' figures ``key`` that have a value."""
    return {r.summary.figures[key].provenance for r in runs
            if r.summary is not None and key in r.summary.figures
            and r.summary.figures[key].value is not None}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def render_prediction(pred, console) -> None:
    """One prediction: the figure, its interval and provenance, then why (one line each)."""
    if pred.threads is not None:
        threads = f"{pred.threads} thread" + ("s" if pred.threads != 1 else "")
    else:  # no thread count: a GPU's kernels, or this machine's runtime default
        threads = "GPU" if "GPU" in (pred.threads_note or "") else "the runtime's default threads"
    console.print(
        f"{pred.model or 'model'} on {pred.target} with {pred.backend} {pred.precision} "
        f"({threads}): {fmt_number(pred.value_ms)} ms "
        f"[{fmt_number(pred.low_ms)}-{fmt_number(pred.high_ms)}] "
        f"{pred.provenance}" + (f" ({pred.method})" if pred.method else ""), markup=False)
    console.print(f"  roofline {fmt_number(pred.roofline_ms)} ms (a lower bound)"
                  + (f"; calibration {pred.calibration}" if pred.calibration else ""),
                  markup=False)
    for n in pred.notes[1:] if pred.calibration else pred.notes:
        console.print(f"  {n}", markup=False)
    for w in pred.warnings:
        console.print(f"  warning {w.code}: {w.message}", markup=False)


def _cell(v: Any) -> Any:
    """A table cell's value: NaN (pandas' missing number) is None, shown as '-'."""
    return None if isinstance(v, float) and v != v else v


def batch_problems(rep) -> list[str]:
    """One line per batch row without a measurement: its batch, status and reason."""
    return [f"batch {row['batch_size']}: {row['status']}: "
            f"{_cell(row['reason']) or 'no reason given'}"
            for row in rep.frame.to_dict(orient="records") if row["status"] != "ok"]


def render_batch(rep, console) -> None:
    """The batch sweep: a row per batch (measured here), each failed row's reason under the
    table, then the largest batch that fits the target (analytic)."""
    from rich.table import Table

    table = Table(title=f"{rep.model.name} on {rep.backend} {rep.precision}, measured on this "
                        "host", title_justify="left")
    gpu = "gpu_peak_memory_bytes" in rep.frame and rep.frame["gpu_peak_memory_bytes"].notna().any()
    for col in ("batch", "status", "latency ms", "per sample ms", "throughput /s",
                "peak memory", *(["GPU peak memory"] if gpu else []), "meets budget"):
        table.add_column(col)
    for row in rep.frame.to_dict(orient="records"):
        row = {k: _cell(v) for k, v in row.items()}
        table.add_row(str(row["batch_size"]),
                      row["status"] if row["status"] == "ok" else f"[red]{row['status']}[/red]",
                      fmt_number(row["latency_ms"]), fmt_number(row["latency_per_sample_ms"]),
                      fmt_number(row["throughput_per_s"]), si(row["peak_memory_bytes"], "B"),
                      *([si(row.get("gpu_peak_memory_bytes"), "B")] if gpu else []),
                      fmt_number(row["meets_budget"]))
    console.print(table)
    if rep.frame.attrs.get("memory_baseline"):
        console.print(f"peak memory: {rep.frame.attrs['memory_baseline']}", markup=False)
    for line in batch_problems(rep):
        console.print(line, markup=False)
    if rep.frame.attrs.get("stop_reason"):
        console.print(f"stopped: {rep.frame.attrs['stop_reason']}", markup=False)
    if rep.choice is not None:
        ch = rep.choice
        console.print(f"largest batch that fits {rep.target.id} (estimated weights + peak "
                      f"activations, analytic): {ch.batch_size} ({si(ch.memory_bytes, 'B')} of "
                      f"{si(ch.memory_limit_bytes, 'B')}; limited by {ch.limited_by})",
                      markup=False)
    for n in rep.notes:
        console.print(n, markup=False)

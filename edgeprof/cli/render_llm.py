"""Terminal rendering of generative results (rich tables): a profile or estimate
(:func:`render_llm`) and the router's choice of format (:func:`render_choice`).
Presentation only: no computation."""

from __future__ import annotations

from typing import Any

from edgeprof.cli.render import si


def render_choice(doc: dict[str, Any], console) -> None:
    """The router's choice, its reasons and the candidates it weighed."""
    from rich.table import Table

    budget = f", at least {doc['tokens_per_s']:g} tok/s" if doc.get("tokens_per_s") else ""
    threads = f", {doc['threads']} thread(s)" if doc.get("threads") else ""
    console.print(f"[bold]{doc['model']}[/bold] on {doc['target']} ({doc['device']}{threads}), "
                  f"context "
                  f"{doc['context_tokens']} tokens{budget}: "
                  + (f"[bold]{doc['format']} on {doc['backend']}[/bold]" if doc.get("format")
                     else "[red]no format fits[/red]"))
    if doc.get("verdict") and doc["verdict"] != "ok":
        console.print(f"verdict: {doc['verdict']}", markup=False)
    for reason in doc.get("reasons") or []:
        console.print(f"  - {reason}", markup=False)
    table = Table("backend", "format", "bits/weight", "weights + KV + runtime", "fits",
                  "longest context", "decode tok/s (target)", "status", title="candidates",
                  title_justify="left")
    for c in doc.get("candidates") or []:
        rate = c.get("decode_tokens_per_s") or {}
        table.add_row(c["backend"], c["format"], _num(c.get("bits_per_weight")),
                      si(c.get("total_bytes"), "B"),
                      "-" if c.get("fits") is None else "yes" if c["fits"] else "no",
                      _num(c.get("max_context_tokens")),
                      f"{_cell(rate)} {rate.get('provenance', '')}".strip() if rate else "-",
                      c.get("status", "") + (f": {c['why']}" if c.get("why")
                                             and c["why"] != c.get("status") else ""))
    console.print(table)
    for n in doc.get("notes") or []:
        console.print(f"note: {n}", markup=False)


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"
    return str(v)


def _cell(f: dict[str, Any] | None, key: str = "value") -> str:
    """A figure as ``value`` or ``value [low–high]``."""
    if not f or f.get(key) is None:
        return "-"
    text = _num(f[key])
    if f.get("low") is not None and f.get("high") is not None:
        text += f" [{_num(f['low'])}–{_num(f['high'])}]"
    return text


def _stat(d: Any, spread: bool = True) -> str:
    """A run's figure (:class:`~edgeprof.profilers.report.generative.RepetitionStats`) as
    ``median`` or ``median ± stddev``."""
    if d is None or d.median is None:
        return "-"
    text = _num(d.median)
    if spread and d.stddev:
        text += f" ± {_num(d.stddev, 2)}"
    return text


def _fig(f: Any) -> str:
    """An estimate's or a prediction's figure (:class:`FigureValue`) as ``_cell`` shows it."""
    return "-" if f is None else _cell({"value": f.value, "low": f.low, "high": f.high})


def _prov(entry: Any, default: str) -> str:
    f = entry.decode_tokens_per_s
    return (f.provenance if f is not None else None) or default


def render_llm(report, console) -> None:
    """The rich tables of a generative profile or estimate
    (:class:`~edgeprof.profilers.report.generative.GenerativeReport`)."""
    from rich.table import Table

    model = report.model
    spec = model["spec"]
    target = report.target or {}
    tid = report.target_id
    params = report.parameters.value if report.parameters is not None else None
    config = report.config or {}
    device = f"device {report.device}"
    board = {p.device for p in report.predictions} - {None}
    if target and report.runs and board and board != {report.device}:
        device += f" here, {', '.join(sorted(board))} on {tid}"
    moe = ""
    if spec.get("num_experts"):  # a mixture of experts: what a token runs, beside the total
        active = next((f.value for e in report.estimates
                       if (f := e.figure("active_parameters_per_token")) is not None), None)
        moe = (f", {si(active, '')} active per token" if active else "") + \
            f" ({spec.get('num_experts_per_tok')} of {spec['num_experts']} experts per layer)"
    console.print(f"[bold]edgeprof[/bold] {spec['name']} ({spec['family']}, "
                  f"{si(params, '') if params else '?'} parameters{moe}, "
                  f"from {model['source_kind']})"
                  + (f" → {tid}" if target else "")
                  + f"; pp{config.get('prompt_tokens')} tg{config.get('gen_tokens')}, {device}")
    if model.get("random_weights"):
        console.print(model.get("note") or "random weights", markup=False)
    runs = {r.key: r for r in report.runs}
    measured = bool(runs)
    places = {k: r.place(tid) for k, r in runs.items()}  # (where, on the target)
    elsewhere = any(w != "this host" for w, _ in places.values())
    table = Table(title="tokens/s per backend and format (measured: "
                        + ("where each row says" if elsewhere else "this host")
                        + "; estimated / predicted: the target named; \\[low–high] intervals)",
                  title_justify="left")
    for col in ("backend", "format", "depth", "provenance (where)", "pp tok/s", "tg tok/s",
                "TTFT ms", "TPOT p50/p90 ms", "load s", "peak RSS", "model size", "fit"):
        if measured or col not in ("load s", "peak RSS"):
            table.add_column(col, no_wrap=col in ("backend", "format", "provenance (where)"))

    def add_row(*cells: str) -> None:
        cells_ = list(cells)
        if not measured:
            del cells_[8:10]
        table.add_row(*cells_)

    preds = {p.key: p for p in report.predictions}
    checks: list[str] = []  # predictions of figures the target's own board measured
    for e in report.estimates:
        key = tuple(map(str, e.key))
        r = runs.get(e.key)
        where, measured_on_target = places.get(e.key, ("this host", False))
        measured_on_target = measured_on_target and r is not None and r.ok
        if r is not None and r.ok:
            tpot = r.tpot_ms
            add_row(*key, f"measured ({where})", _stat(r.prefill_tokens_per_s),
                    _stat(r.decode_tokens_per_s), _stat(r.ttft_ms, False),
                    f"{_num(tpot and tpot.p50)} / {_num(tpot and tpot.p90)}", _num(r.load_s),
                    si(r.peak_rss_bytes, "B"), si(r.model_size, "B"), "")
        elif r is not None:
            colour = "yellow" if r.status == "skipped" else "red"
            add_row(*key, f"[{colour}]{r.status}[/{colour}] ({where})", *(["-"] * 7), "")
        fit = e.fit or {}
        prov = _prov(e, "analytic")
        weights = e.weight_bytes
        add_row(*key, f"{prov} ({tid})" if target else prov,
                _fig(e.prefill_tokens_per_s), _fig(e.decode_tokens_per_s), _fig(e.ttft_ms),
                _fig(e.tpot_ms), "-", "-", si(weights and weights.value, "B"),
                ("fits" if fit.get("fits") else "[red]does not fit[/red]") if fit else "")
        p = preds.get(e.key)
        if p is not None and measured_on_target:  # the target's figure is the measured one
            checks.append(f"{' '.join(key[:2])} d{key[2]} on {p.target}: measured on "
                          f"{where}, decode {_stat(r.decode_tokens_per_s, False)} tok/s "
                          f"(the target's figure); its prediction was "
                          f"{_fig(p.decode_tokens_per_s)} tok/s ({_prov(p, 'predicted')})")
        elif p is not None:
            only = ", predicts only: can't run here" if p.data.get("prediction_only") else ""
            add_row(*key, f"{_prov(p, 'predicted')} ({p.target}{only})",
                    _fig(p.prefill_tokens_per_s), _fig(p.decode_tokens_per_s),
                    _fig(p.ttft_ms), _fig(p.tpot_ms), "-", "-", "-", "")
    console.print(table)
    deepest: dict[tuple, Any] = {}  # the binding fit: the deepest cache
    for e in report.estimates:
        k = (e.backend, e.format)
        if e.fit and (k not in deepest or e.depth > deepest[k].depth):
            deepest[k] = e
    for e in deepest.values():
        fit = e.fit
        mct = fit.get("max_context_tokens")
        console.print(f"{e.backend} {e.format} on {tid}: "
                      f"{fit.get('verdict')} (context {fit.get('context_tokens')} tokens"
                      + (f"; longest context that fits: {mct} tokens" if mct is not None
                         else "") + ")", markup=False)
    for r in report.runs:
        if r.status != "ok":
            console.print(f"{r.backend} {r.format} d{r.depth}: {r.status}: {r.reason}",
                          markup=False)
    for c in checks:
        console.print(c, markup=False)
    for line in prediction_lines([p.data for p in report.predictions]):
        console.print(line, markup=False)
    for n in report.notes:
        if n != model.get("note"):
            console.print(f"note: {n}", markup=False)


def prediction_lines(predictions: list[dict[str, Any]]) -> list[str]:
    """What the JSON says of each prediction that its table row cannot: the calibration it
    used and its notes (what was transferred or estimated, and why an interval is wide).
    A note every prediction carries is printed once."""
    if not predictions:
        return []
    shared = (set.intersection(*(set(p.get("notes") or []) for p in predictions))
              if len(predictions) > 1 else set())
    lines = []
    for p in predictions:
        cal = p.get("calibration")
        lines.append(f"{p.get('backend')} {p.get('format')} d{p.get('depth', 0)} on "
                     f"{p.get('target')}: "
                     + (f"calibration {cal}" + (f" ({p['calibration_path']})"
                                                if p.get("calibration_path") else "")
                        if cal else "no calibration (estimated)"))
        if p.get("prediction_only"):  # llamafile, mlc, rkllm: no edgeprof backend runs them
            lines.append(f"  {p.get('prediction_only_reason') or 'predict only: cannot run here'}")
        lines += [f"  {n}" for n in p.get("notes") or [] if n not in shared]
    lines += [f"predictions: {n}" for n in predictions[0].get("notes") or [] if n in shared]
    return lines


__all__ = ["render_choice", "render_llm"]

"""The listings' terminal tables: ``edgeprof targets`` (every target, or one target's
figures) and ``edgeprof backends``."""

from __future__ import annotations

from typing import Any

from edgeprof.cli.render import fmt_number, si


def render_target(t: Any, console: Any, calibrations: list[dict[str, Any]] | None = None,
                  llm_calibrations: list[dict[str, Any]] | None = None) -> None:
    """One target (``edgeprof targets show ID``): its processor, modes, figures with their
    sources, precisions, backends, recommended compression, and the board calibrations
    ``predict`` would use (``Calibration.summary``; the first that has the runtime wins), and
    the LLM calibrations with rows of it (``llm.files.llm_summaries``)."""
    from rich.table import Table

    c = console
    c.print(f"[bold]{t.id}[/bold]: {t.name} ({t.kind}; strategy family {t.strategy_class})",
            markup=True)
    c.print(f"processor: {t.processor}", markup=False)
    if t.description:
        c.print(t.description, markup=False)
    if t.modes:  # TARGET:MODE names the same board at other clocks / power
        for name, m in t.modes.items():
            text = ("(this one, described above)" if name == t.mode else m.description)
            c.print(f"mode {t.base_id}:{name}: {text}", markup=False)
    c.print(f"big cores (threads to use): {t.big_cores}")
    table = Table("figure", "value", "unit", "source", show_lines=False)
    for name, q in t.figures().items():
        table.add_row(name, fmt_number(q.value), q.unit, q.source)
    c.print(table)
    c.print(f"supported precisions: {', '.join(t.supported_precisions)}")
    c.print(f"preferred backends: {', '.join(t.preferred_backends)}")
    s = t.strategy
    c.print(f"recommended compression: {s.precision}, {s.quantization_bits}-bit quantization, "
            f"{s.pruning_type} pruning, {s.layout} layout — {s.reason}")
    if t.path:
        c.print(f"descriptor: {t.path} (sha256 {t.sha256[:12]}…)" if t.sha256 else t.path)
    for cal in calibrations or []:
        cv = cal["cv"]
        runtimes = ", ".join(f"{r['family']}/{r['precision']} ({r['rows']} row"
                             f"{'s' if r['rows'] != 1 else ''})" for r in cal["runtimes"])
        held = ""
        if cv.get("within_25") is not None:
            held = (f"; {cv.get('method') or 'leave-one-out'} over {cv.get('n')} rows: "
                    f"{100 * cv['within_25']:.0f} % within ±25 %")
            if cv.get("coverage") is not None and cv.get("median_width"):
                held += (f", 90 % interval held {100 * cv['coverage']:.0f} % at "
                         f"{cv['median_width']:.2f}× wide")
        c.print(f"calibration {cal['name']}: runtimes {runtimes}{held}", markup=False)
    for cal in llm_calibrations or []:
        for key, stages in cal["entries"].items():
            parts = [f"{stage} " + ", ".join(f"{rt} ({n} row{'s' if n != 1 else ''})"
                                             for rt, n in rts.items())
                     for stage, rts in stages.items()]
            c.print(f"LLM calibration {cal['name']}, {key}: {'; '.join(parts)}", markup=False)
    if calibrations == []:
        c.print(f"no calibration for tensor models: their predictions are 'uncalibrated' here "
                f"(the roofline x the published prior) until 'edgeprof calibrate --target "
                f"{t.base_id} ...' makes one", markup=False)


def render_targets(targets: list[Any], console: Any) -> None:
    """Every target, one row each, and ``host`` and ``host_gpu``."""
    from rich.table import Table

    table = Table("id", "kind", "processor", "cores", "memory", "bandwidth", "peak fp32",
                  "power", "recommended", "modes",
                  caption="a mode is the same board at other clocks/power, named ID:MODE "
                          "(--target jetson_orin_nano:super); 'edgeprof targets show ID' "
                          "describes its modes")
    for t in targets:
        table.add_row(t.id, t.kind, t.processor, fmt_number(t.cores.value), si(t.ram.value, "B"),
                      si(t.bandwidth.value, "B/s"), si(t.peak_macs("fp32"), "MAC/s"),
                      fmt_number(t.typical_power.value) + " W", t.strategy.precision,
                      ", ".join(t.modes) or "-")
    table.add_row("host", "cpu", "this machine (detected and calibrated on first use)", "", "",
                  "", "", "", "", "-")
    table.add_row("host_gpu", "gpu", "this machine's CUDA GPU, what --device cuda runs on "
                  "(detected and calibrated on first use)", "", "", "", "", "", "", "-")
    console.print(table)


def render_backends(rows: list[dict[str, Any]], console: Any) -> None:
    """``list_backends()``'s rows: available or not, and why; their options. Lists are
    comma-and-space separated and every cell wraps (a word longer than its column folds):
    nothing is cut with an ellipsis, whatever the width. The runtime families edgeprof only
    predicts (``prediction_only``) follow in a table of their own."""
    from rich.table import Table

    predict_only = [r for r in rows if r.get("prediction_only")]
    rows = [r for r in rows if not r.get("prediction_only")]
    table = Table()
    # the names a user types (a backend, a precision, a device, a format) are never folded:
    # those columns are at least as wide as their longest name; the prose columns fold
    longest = {
        "backend": [r["name"] for r in rows], "precisions": [p for r in rows for p in r["precisions"]],
        "devices": [d for r in rows for d in r["devices"]],
        "formats": [f for r in rows for f in r["model_formats"]]}
    for header in ("backend", "available", "precisions", "devices", "formats",
                   "options (--backend-option)", "why not / how"):
        names = longest.get(header)
        table.add_column(header, overflow="fold",
                         min_width=max(map(len, names)) + 1 if names else None)
    for r in rows:
        why = "" if r["available"] else f"{r['reason']}" + (f"; {r['hint']}" if r["hint"] else "")
        opts = "\n".join(f"{o['name']}={o['default']!r} ({o['type']})"
                         for o in r.get("options", ())) or "-"
        table.add_row(r["name"], "yes" if r["available"] else "no", ", ".join(r["precisions"]),
                      ", ".join(r["devices"]), ", ".join(r["model_formats"]), opts, why)
    console.print(table, markup=False)
    if predict_only:
        render_prediction_only(predict_only, console)


def render_prediction_only(rows: list[dict[str, Any]], console: Any) -> None:
    """The runtime families the published board rows name that no edgeprof backend runs:
    ``predict``, ``profile`` and ``recommend`` give their board figures; nothing runs them
    here. Each with the processors it runs on (and the source) and the precisions it
    offers."""
    from rich.table import Table

    table = Table(title="predict only: can't run here (no edgeprof backend runs them; "
                        "predict, profile and recommend give their board figures)")
    for header in ("runtime", "processors", "precisions", "where it runs (source)"):
        table.add_column(header, overflow="fold")
    for r in rows:
        table.add_row(r["name"], ", ".join(r["processors"]), ", ".join(r["precisions"]),
                      r["processors_source"])
    console.print(table, markup=False)


__all__ = ["render_backends", "render_prediction_only", "render_target", "render_targets"]

"""The command line: parse, call the API, print, map errors to exit codes. No logic here.

Exit codes (docs/design.md): 0 complete; 2 user input or configuration error; 3 partial (a
backend named explicitly is unavailable, or a requested run produced no measurement);
4 constraints cannot be met; 1 internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from edgeprof._version import __version__
from edgeprof.core.errors import EdgeprofError, OutputError, UserError
from edgeprof.cli.signals import Interrupted, handling_signals
from edgeprof.cli.render import _fmt, _si


# ----------------------------------------------------------------------------- output
#: the Python API's constraint names, as the terminal names them: the flag that sets each
#: (plans, verdicts and errors are worded in the API's names; the JSON keeps those)
_FLAG_WORDS = {"latency_budget_ms": "--latency-budget-ms",
               "memory_budget_bytes": "--memory-budget-mb",
               "memory_budget_mb": "--memory-budget-mb",
               "max_accuracy_drop": "--max-accuracy-drop", "stream_rate_fps": "--stream-rate",
               "device_memory": "the device's memory"}


def _in_flag_words(text: str) -> str:
    """``text`` with the API's field names as flags, and an architecture step's targets
    (``latency_reduction=14.094, max_macs=931217``) in words."""
    import re

    text = re.sub(r"(?<![\w-])(" + "|".join(_FLAG_WORDS) + r")(?![\w-])",
                  lambda m: _FLAG_WORDS[m.group(1)], text)
    text = re.sub(r"\blatency_reduction=([\d.]+)",
                  lambda m: f"latency {float(m.group(1)):.3g}x lower", text)
    text = re.sub(r"\bmax_macs=(\d+)", lambda m: f"at most {_si(int(m.group(1)), 'MAC')}",
                  text)
    return re.sub(r"\bmax_parameter_bytes=(\d+)",
                  lambda m: f"at most {_si(int(m.group(1)), 'B')} of weights", text)


def _console(stderr: bool = False):
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal:  # logs and pipes: wide enough that tables stay readable
        console.width = 160
    return console


class Progress:
    """Progress on stderr for steps that take more than a moment."""

    def __init__(self, enabled: bool = True):
        self.console = _console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.status = None

    def __call__(self, msg: str) -> None:
        if not self.enabled:
            return
        if self.status is None:
            self.status = self.console.status(msg)
            self.status.start()
        else:
            self.status.update(msg)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


# --------------------------------------------------------------------------- commands
def cmd_targets(args) -> int:
    from edgeprof.api import _target_registry

    reg = _target_registry(args.targets_dir, args.plugins)
    if args.action == "show":
        if not args.id:
            raise UserError("give a target id: edgeprof targets show raspberry_pi_4")
        t = reg.get(args.id, recalibrate=args.recalibrate)
        if args.json:
            print(json.dumps(t.to_dict(), indent=2))
            return 0
        from rich.table import Table

        c = _console()
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
            table.add_row(name, _fmt(q.value), q.unit, q.source)
        c.print(table)
        c.print(f"supported precisions: {', '.join(t.supported_precisions)}")
        c.print(f"preferred backends: {', '.join(t.preferred_backends)}")
        s = t.strategy
        c.print(f"recommended compression: {s.precision}, {s.quantization_bits}-bit quantization, "
                f"{s.pruning_type} pruning, {s.layout} layout — {s.reason}")
        if t.path:
            c.print(f"descriptor: {t.path} (sha256 {t.sha256[:12]}…)" if t.sha256 else t.path)
        return 0
    targets = reg.all()
    if args.json:
        print(json.dumps([t.to_dict() for t in targets], indent=2))
        return 0
    from rich.table import Table

    table = Table("id", "kind", "processor", "cores", "memory", "bandwidth", "peak fp32",
                  "power", "recommended", "modes",
                  caption="a mode is the same board at other clocks/power, named ID:MODE "
                          "(--target jetson_orin_nano:super); 'edgeprof targets show ID' "
                          "describes its modes")
    for t in targets:
        table.add_row(t.id, t.kind, t.processor, _fmt(t.cores.value), _si(t.ram.value, "B"),
                      _si(t.bandwidth.value, "B/s"), _si(t.peak_macs("fp32"), "MAC/s"),
                      _fmt(t.typical_power.value) + " W", t.strategy.precision,
                      ", ".join(t.modes) or "-")
    table.add_row("host", "cpu", "this machine (detected and calibrated on first use)", "", "",
                  "", "", "", "", "-")
    _console().print(table)
    return 0


def cmd_backends(args) -> int:
    from edgeprof.api import list_backends

    rows = list_backends(args.plugins)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table

    table = Table("backend", "available", "precisions", "devices", "formats",
                  "options (--backend-option)", "why not / how")
    for r in rows:
        why = "" if r["available"] else f"{r['reason']}" + (f"; {r['hint']}" if r["hint"] else "")
        opts = "\n".join(f"{o['name']}={o['default']!r} ({o['type']})"
                         for o in r.get("options", ())) or "-"
        table.add_row(r["name"], "yes" if r["available"] else "no", ",".join(r["precisions"]),
                      ",".join(r["devices"]), ",".join(r["model_formats"]), opts, why)
    _console().print(table)
    return 0


def cmd_plugins(args) -> int:
    from edgeprof.core.plugins import get_registry

    reg = get_registry(args.plugins)
    for name, source in reg.plugins:
        print(f"{name}\t{source}")
    return 0


def _run_options(args) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if getattr(args, "device", None):
        opts["device"] = args.device
    for flag, key in (("runs", "runs"), ("min_time", "min_time_s"), ("max_time", "max_time_s"),
                      ("warmup", "warmup"), ("timeout", "timeout_s")):
        v = getattr(args, flag, None)
        if v is not None:
            opts[key] = v
    if getattr(args, "isolate", False):
        opts["isolate"] = True
    if getattr(args, "backend_option", None):  # validated against each Backend.Options
        opts["options"] = dict(args.backend_option)
    return opts


def cmd_profile(args) -> int:
    from edgeprof.api import profile
    from edgeprof.cli.fleet import print_boards, profile_fleet

    progress = Progress(enabled=not args.json)
    report, unwritten = _keeping_results(progress, lambda: profile(
            args.model, target=args.target, backends=args.backend, precisions=args.precision,
            batch_size=args.batch_size, input_shapes=args.input_shape or None,
            input_dtypes=args.input_dtype or None, threads=args.threads,
            stream_rate_fps=args.stream_rate, latency_budget_ms=args.latency_budget_ms,
            run_options=_run_options(args), out=args.out, trace=args.trace,
            calibration_data=args.calibration_data, plugins=args.plugins,
            targets_dir=args.targets_dir, recalibrate=args.recalibrate, progress=progress,
            fleet=profile_fleet(args), calibration=args.calibration))
    if args.json:
        from edgeprof.profilers.report.artifacts import dumps

        print(dumps(report))
        _print_problems(report, _console(stderr=True))
    else:
        from edgeprof.cli.render import render_profile

        render_profile(report, _console(), max_layers=args.max_layers)
        print_boards(report, _console())
        _print_problems(report, _console(stderr=True))
        if args.out and unwritten is None:
            _console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    _html_then_deferred_error(args, unwritten, "render_profile_html", report.to_dict)
    return report.exit_code


def _keeping_results(progress, call):
    """Run ``call``; when it measured but ``--out`` could not be written, keep the results
    (to print them) and the error (to raise after printing)."""
    try:
        return call(), None
    except OutputError as e:
        if e.result is None:
            raise
        return e.result, e
    finally:
        progress.stop()


def _html_then_deferred_error(args, unwritten, renderer: str, document) -> None:
    """After the results are printed: the ``--html`` page, then the ``--out`` failure that
    was held back so the results could still be shown."""
    if args.html:
        from edgeprof.profilers.report import html

        html.write_html(args.html, getattr(html, renderer)(document()))
    if unwritten is not None:
        raise unwritten


def _print_problems(report, console) -> None:
    for r in report.runs:
        if r.status != "ok" and r.explicit:
            console.print(f"edgeprof: {r.backend} {r.requested_precision}: {r.status}: "
                          f"{r.benchmark.reason}; the analytic estimate for {report.target.id} "
                          "is still shown", markup=False)


def cmd_estimate(args) -> int:
    from edgeprof.api import Predictor, estimate

    if args.backend is not None:  # the same prediction 'edgeprof predict' gives
        pred = Predictor(args.target, args.backend, args.precision, threads=args.threads,
                         calibration=args.calibration, plugins=args.plugins,
                         targets_dir=args.targets_dir)
        est = pred.estimate(args.model, input_shapes=args.input_shape or None,
                            input_dtypes=args.input_dtype or None)
        from edgeprof.profilers.predict import predict_latency

        prediction = predict_latency(est, pred.target, args.backend, args.precision,
                                     threads=args.threads, calibration=pred.calibration)
        prediction.model = est.model
    else:
        if args.threads is not None or args.calibration is not None:
            raise UserError("--threads and --calibration are for the prediction: give "
                            "--backend B too")
        est = estimate(args.model, args.target, args.precision, batch_size=args.batch_size,
                       input_shapes=args.input_shape or None,
                       input_dtypes=args.input_dtype or None, plugins=args.plugins,
                       targets_dir=args.targets_dir)
        prediction = None
    if args.json:
        doc = est.to_dict()
        if prediction is not None:
            doc["prediction"] = prediction.to_dict()
        print(json.dumps(doc, indent=2, allow_nan=False))
        return 0
    from edgeprof.cli.render import render_estimate, render_prediction

    render_estimate(est, _console(), max_layers=args.max_layers)
    if prediction is not None:
        render_prediction(prediction, _console())
    return 0


def cmd_predict(args) -> int:
    from edgeprof.api import predict

    pred = predict(args.model, args.target, args.backend, args.precision, threads=args.threads,
                   device=args.device, calibration=args.calibration,
                   runtime_version=args.runtime_version,
                   input_shapes=args.input_shape or None, input_dtypes=args.input_dtype or None,
                   plugins=args.plugins, targets_dir=args.targets_dir)
    if args.json:
        print(json.dumps(pred.to_dict(), indent=2, allow_nan=False))
        return 0
    from edgeprof.cli.render import render_prediction

    render_prediction(pred, _console())
    return 0


def cmd_batch(args) -> int:
    from edgeprof.api import batch_sizes

    unwritten = None
    try:
        rep = batch_sizes(args.model, args.batch_sizes, target=args.target, backend=args.backend,
                          precision=args.precision, latency_budget_ms=args.latency_budget_ms,
                          run_options=_run_options(args), input_shapes=args.input_shape or None,
                          input_dtypes=args.input_dtype or None, plugins=args.plugins,
                          targets_dir=args.targets_dir, out=args.out)
    except OutputError as e:  # measured, but --out could not be written: show it, then fail
        if e.result is None:
            raise
        rep, unwritten = e.result, e
    from edgeprof.cli.render import batch_problems, render_batch

    if args.json:
        print(json.dumps(rep.to_dict(), indent=2, allow_nan=False))
        for line in batch_problems(rep):  # the reasons on stderr too
            print(f"edgeprof: {line}", file=sys.stderr)
    else:
        render_batch(rep, _console())
    if unwritten is not None:
        raise unwritten
    # 3 = partial: a requested batch produced no measurement (its row says why)
    return 3 if batch_problems(rep) else 0


def _batch_list(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        out.append(_positive_int(part.strip()))
    if not out:
        raise argparse.ArgumentTypeError("give batch sizes like 1,2,4,8")
    return out


def cmd_compare(args) -> int:
    from pathlib import Path

    from edgeprof.profilers.report.compare import (compare_results, format_comparison,
                                                   load_profile, profile_differences,
                                                   profile_kind)

    a, b = load_profile(args.a), load_profile(args.b)
    rows = compare_results(a, b, force=args.force)  # a tensor and a generative one: exit 2
    if args.html and profile_kind(a) == "generative":
        raise UserError("--html draws tensor profiles only; compare generative profiles as "
                        "the table or with --json")
    for diff in profile_differences(a, b):  # only reached with --force
        print(f"edgeprof: WARNING: not like for like, compared anyway (--force): {diff}",
              file=sys.stderr)
    if args.json:
        from edgeprof.core.results import clean

        print(json.dumps([clean(r) for r in rows], indent=2, allow_nan=False))
    else:
        print(format_comparison(rows, Path(args.a).parent.name or "A",
                                Path(args.b).parent.name or "B"))
    if args.html:  # html helper: the before/after page
        from edgeprof.profilers.report.html import render_compare_html, write_html

        write_html(args.html, render_compare_html(a, b, rows, label_a=args.a, label_b=args.b))
    return 0


def cmd_calibrate(args) -> int:  # predict helper: edgeprof calibrate
    from edgeprof.cli.fleet import profile_fleet

    if args.measurements is not None:
        return _calibrate_measurements(args)
    if args.threads is not None or args.calibration_out is not None:
        raise UserError("--threads and --out go with --measurements FILE.csv (a calibration "
                        "from your own timings)")
    spec = profile_fleet(args)  # --fleet, else $EDGEPROF_FLEET for a target not this host
    if args.target != "host" and spec is None:
        raise UserError(f"calibrating '{args.target}' needs that device: only --target host "
                        "can be calibrated on this machine; give --fleet SCHEDULER to measure "
                        "on a board of the fleet (built-in boards ship calibrations "
                        "fitted to published measurements)")
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.predict.host import calibrate_fleet, calibrate_host

    reg = get_registry(args.plugins)
    if spec is None and getattr(reg.backend(args.backend), "workload", "tensor") == "generate":
        return _calibrate_llm(args)
    progress = Progress(enabled=not args.json)
    try:
        if spec is not None:
            cal, path = calibrate_fleet(spec, args.target, args.backend,
                                        args.precision or "fp32",
                                        kernels=args.kernels, runs=args.runs,
                                        registry=get_registry(args.plugins),
                                        targets_dir=args.targets_dir, progress=progress)
        else:
            cal, path = calibrate_host(args.backend, args.precision or "fp32",
                                       kernels=args.kernels,
                                       runs=args.runs, registry=get_registry(args.plugins),
                                       progress=progress)
    finally:
        progress.stop()
    cv = cal.cv
    if args.json:
        print(json.dumps({"calibration": cal.name, "path": str(path), "cv": {
            k: v for k, v in cv.items() if k != "errors"}, "parameters": cal.parameters,
            "fingerprint": cal.fingerprint, "note": cal.note}, indent=2, allow_nan=False))
        return 0
    if cal.fingerprint.get("board"):
        print(f"measured on board {cal.fingerprint['board']}"
              + (f" (EMULATING {cal.target}: the calibration describes that machine)"
                 if cal.fingerprint.get("emulating") else ""))
    print(f"calibration {cal.name}: {cv['n']} samples; leave-one-out median |error| "
          f"{100 * cv['median_abs_error']:.1f} %, within +-10 % {100 * cv['within_10']:.0f} %, "
          f"within +-25 % {100 * cv['within_25']:.0f} %, Spearman "
          f"{_fmt(cv['spearman']) if cv['spearman'] is not None else '-'}")
    print(f"saved to {path}")
    return 0


def _calibrate_measurements(args) -> int:
    """``calibrate --measurements FILE.csv``: the user's own timings refine the shipped
    calibration of the board."""
    from edgeprof.api import calibrate_measurements

    progress = Progress(enabled=not args.json)
    try:
        cal, path, summary = calibrate_measurements(
            args.measurements, args.target, args.backend, precision=args.precision,
            threads=args.threads, out=args.calibration_out, plugins=args.plugins,
            targets_dir=args.targets_dir, progress=progress)
    finally:
        progress.stop()
    if args.json:
        print(json.dumps({"calibration": cal.name, "path": str(path), **summary,
                          "parameters": cal.parameters, "note": cal.note},
                         indent=2, allow_nan=False, default=str))
        return 0
    cv = summary["cv"]
    n = summary["rows"]
    print(f"calibration {cal.name}: {n} row(s) at {', '.join(map(str, summary['threads'])) or 'GPU'}"
          f" thread(s); learned {summary['learned']}; prior {summary['prior']}")
    if n >= 2:
        print(f"{cv['method']}: median |error| {100 * cv['median_abs_error']:.1f} %, within "
              f"+-25 % {100 * cv['within_25']:.0f} %, Spearman "
              f"{_fmt(cv['spearman']) if cv['spearman'] is not None else '-'}; 90 % interval "
              f"held {100 * (cv['coverage'] or 0):.0f} % of the held-out rows, width "
              f"{cv['median_width']:.2f}x")
    else:
        print("one row: it moves the level only; the interval is the prior's (add rows for a "
              "leave-one-out error and a shape of your own)")
    print(f"saved to {path}")
    return 0


def _calibrate_llm(args) -> int:
    """``calibrate --backend llama_cpp``: presets of three sizes measured here, then this
    host's LLM calibration (effective bandwidth, per-layer overhead, prefill efficiency)."""
    from edgeprof import api

    progress = Progress(enabled=not args.json)
    try:
        cal, records = api.calibrate_llm(
            args.backend, args.precision, models=args.models or api.LLM_CALIBRATION_MODELS,
            plugins=args.plugins, progress=progress)
    finally:
        progress.stop()
    if args.json:
        print(json.dumps({"calibration": cal.get("name"), "path": cal.get("path"),
                          "calibration_data": cal,
                          "runs": [r.to_dict() for r in records]}, indent=2, default=str))
        return 0
    for r in records:
        print(f"{r.model:14s} {r.backend} {r.format}: pp{r.n_prompt} "
              f"{_fmt((r.prefill_tokens_per_s or {}).get('median'))} tok/s, tg{r.n_gen} "
              f"{_fmt((r.decode_tokens_per_s or {}).get('median'))} tok/s (measured)")
    for key, e in (cal.get("entries") or {}).items():
        for runtime, fit in ((e.get("decode") or {}).get("runtimes") or {}).items():
            bw = fit.get("bandwidth_fraction") or 0.0
            print(f"{key} {runtime}: effective bandwidth {_fmt(bw)} x "
                  f"{_fmt((e.get('peak_bandwidth') or 0) / 1e9)} GB/s, per-layer overhead "
                  f"{_fmt(1e3 * (fit.get('per_layer_s') or 0.0))} ms (fitted)")
    print(f"calibration {cal.get('name')} saved to {cal.get('path')}")
    return 0


def cmd_recommend(args) -> int:
    from edgeprof.optimize.router import check_feasible
    from edgeprof.optimize.loop import recommend_plan

    plan = recommend_plan(
        args.model, args.target, latency_budget_ms=args.latency_budget_ms,
        memory_budget_mb=args.memory_budget_mb, max_accuracy_drop=args.max_accuracy_drop,
        stream_rate_fps=args.stream_rate, precision=args.precision, batch_size=args.batch_size,
        input_shapes=args.input_shape or None, input_dtypes=args.input_dtype or None,
        plugins=args.plugins, targets_dir=args.targets_dir)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2, allow_nan=False))
    else:
        print(_in_flag_words(plan.to_text()))
    check_feasible(plan)  # ConstraintError (exit 4) after the closest plan was shown
    return 0


def cmd_optimize(args) -> int:
    from edgeprof.optimize.loop import optimize

    run_options = _run_options(args)
    progress = Progress(enabled=not args.json)
    report, unwritten = _keeping_results(progress, lambda: optimize(
            args.model, args.target, latency_budget_ms=args.latency_budget_ms,
            memory_budget_mb=args.memory_budget_mb, max_accuracy_drop=args.max_accuracy_drop,
            stream_rate_fps=args.stream_rate, data=args.data, out=args.out,
            run_options=run_options or None, backends=args.backend,
            compressions=args.compression,
            train_seconds=args.train_seconds, finetune_steps=args.finetune_steps,
            batch_size=args.batch_size,
            input_shapes=args.input_shape or None, input_dtypes=args.input_dtype or None,
            plugins=args.plugins, targets_dir=args.targets_dir, progress=progress,
            recalibrate=args.recalibrate))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False))
    else:
        print(_in_flag_words(report.to_text()))
        if args.out and unwritten is None:
            _console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    _html_then_deferred_error(args, unwritten, "render_optimize_html", report.to_dict)
    err = report.constraint_error()
    if err is not None:
        print(f"edgeprof: error: {_in_flag_words(str(err))}", file=sys.stderr)
    return report.exit_code


# ----------------------------------------------------------------------------- parser
def _shape(text: str):
    from edgeprof.core.models import parse_shape

    try:
        return parse_shape(text)
    except EdgeprofError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _dtype(text: str) -> str:
    from edgeprof.core.models import parse_dtype

    try:
        return parse_dtype(text)
    except EdgeprofError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _device(text: str) -> str:
    import re

    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"device must be cpu, cuda or cuda:N, got '{text}'")
    return text


def _names(text: str) -> str:
    """A comma-separated list of names: no empty name ('a,,b'); returned as given."""
    if text.strip() and any(not part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(f"'{text}' has an empty name; separate names with "
                                         "single commas")
    return text


def _number(kind: type, minimum: float, inclusive: bool, words: str):
    """An argparse type: ``kind`` parsed from text, at least ``minimum``, finite."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{text}' is not {'an integer' if kind is int else 'a number'}") from None
        if v != v or v in (float("inf"), float("-inf")) or v < minimum \
                or (not inclusive and v == minimum):
            raise argparse.ArgumentTypeError(f"must be {words}, got {text}")
        return v

    return parse


_positive_int = _number(int, 0, False, "a positive integer")
_positive_float = _number(float, 0.0, False, "a positive number")
_non_negative_int = _number(int, 0, True, "zero or a positive integer")


def _key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` or ``BACKEND.KEY=VALUE`` (a backend option; its type is the backend's)."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"backend option must be KEY=VALUE (or "
                                         f"BACKEND.KEY=VALUE), got '{text}'")
    return key.strip(), value


def _html_file(text: str) -> str:  # html helper: --html FILE, checked before any work
    from pathlib import Path

    if not text or text.endswith(("/", "\\")) or Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"--html needs a file name, got the folder '{text}'")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's own code for usage errors)
        self.exit(2, f"edgeprof: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--plugins", metavar="FILE",
                        help="a plugins.toml of your own (also $EDGEPROF_PLUGINS)")
    common.add_argument("--targets-dir", metavar="DIR",
                        help="a folder of your own target descriptors, searched first "
                             "(also $EDGEPROF_TARGETS_DIR)")
    common.add_argument("--json", action="store_true", help="print JSON to stdout")
    common.add_argument("--debug", action="store_true",
                        help="show tracebacks, and the runtimes' own log output (TensorFlow, "
                             "absl, ONNX Runtime, torch warnings), which is silenced otherwise")

    p = _Parser(prog="edgeprof", description=(
        "How will this model run on that device, with which runtime and compression, and why. "
        "Estimates are analytic; benchmarks are measured on this machine; figures for another "
        "target are estimated from both and labelled so."))
    p.add_argument("--version", action="version", version=f"edgeprof {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    t = sub.add_parser("targets", parents=[common], help="list targets, or show one's figures")
    t.add_argument("action", nargs="?", choices=["list", "show"], default="list",
                   help="list every target (default), or show one target's figures")
    t.add_argument("id", nargs="?", help="target id (for 'show')")
    t.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    t.set_defaults(func=cmd_targets)

    b = sub.add_parser("backends", parents=[common], help="list backends: available or not, and why")
    b.set_defaults(func=cmd_backends)

    pl = sub.add_parser("plugins", parents=[common], help="list loaded plugins and where from")
    pl.set_defaults(func=cmd_plugins)

    def timing_args(sp, per: str):
        """The timing flags, the same in profile and batch (optimize has its own defaults)."""
        sp.add_argument("--runs", type=_positive_int,
                        help=f"minimum timed runs per {per} (default 100)")
        sp.add_argument("--min-time", type=_positive_float, metavar="S",
                        help=f"minimum timed seconds per {per} (default 1; lowered to "
                             "--max-time when only that is given)")
        sp.add_argument("--max-time", type=_positive_float, metavar="S",
                        help=f"cap on timed seconds per {per} (default 10)")
        sp.add_argument("--warmup", type=_positive_int, metavar="N",
                        help="untimed warm-up runs (single inferences) before timing; default "
                             "adaptive: until the timings settle")

    def model_args(sp):
        sp.add_argument("model", help="builtin:NAME, package.module:factory, file.py:factory, "
                                      "or a model file (.onnx, .tflite, .xml, .keras); a "
                                      "generative model (llm:NAME, .gguf, HF folder) has its "
                                      "own flags: edgeprof profile llm:NAME --help")
        sp.add_argument("--target", "-t", default="host", help="target id (default: host)")
        sp.add_argument("--batch-size", type=_positive_int, help="sets the first dimension of "
                                                                 "every input")
        sp.add_argument("--input-shape", type=_shape, action="append", metavar="SHAPE",
                        help="input shape with the batch dimension, e.g. 1x3x224x224 "
                             "(repeat for several inputs)")
        sp.add_argument("--input-dtype", type=_dtype, action="append", metavar="DTYPE",
                        help="input dtype, e.g. float32 or int64 (repeat per input)")
        sp.add_argument("--max-layers", type=_positive_int, default=40,
                        help="layers shown in the terminal table (all are in the CSV)")

    pr = sub.add_parser("profile", parents=[common],
                        help="estimate + benchmark + summarize a model for a target")
    model_args(pr)
    pr.add_argument("--backend", "-b", default="torch_eager", type=_names,
                    help="backend name, comma-separated list, or 'all' (default torch_eager)")
    pr.add_argument("--precision", "-p", default="fp32", type=_names,
                    help="precision(s), comma-separated: fp32, fp16, bf16, int8, int8_static, "
                         "int8_dynamic, int8_weight, int4_weight")
    pr.add_argument("--threads", type=_positive_int,
                    help="intra-op threads here (default: physical cores) and, on a board "
                         "target, the board's threads its predictions are for (default: all "
                         "its big cores)")
    pr.add_argument("--calibration", metavar="FILE.json",
                    help="a calibration file for the board's predictions (edgeprof calibrate "
                         "--measurements), used instead of the search")
    pr.add_argument("--device", type=_device, default=None,
                    help="this machine's device the benchmarks run on: cpu (default) or "
                         "cuda[:N], for backends that declare a CUDA device (a board's "
                         "figures are for the processor its target describes)")
    pr.add_argument("--stream-rate", type=_positive_float, metavar="FPS",
                    help="input stream rate; gives stream_utilization")
    pr.add_argument("--latency-budget-ms", type=_positive_float, metavar="MS",
                    help="say whether each configuration meets this latency")
    timing_args(pr, "run")
    pr.add_argument("--isolate", action="store_true",
                    help="run each benchmark in its own worker process")
    pr.add_argument("--timeout", type=_positive_float, metavar="S",
                    help="per-benchmark timeout in seconds; implies --isolate (only a "
                         "separate process can be stopped)")
    pr.add_argument("--backend-option", type=_key_value, action="append", metavar="KEY=VALUE",
                    help="a backend's own option, e.g. torch_compile.mode=max-autotune (repeat; "
                         "BACKEND.KEY for one backend, KEY for all; 'edgeprof backends' lists "
                         "them)")
    pr.add_argument("--out", "-o", metavar="DIR", help="write CSV/PNG/JSON artifacts here")
    pr.add_argument("--html", metavar="FILE", type=_html_file,
                    help="also write the self-contained HTML report to FILE (--out DIR "
                         "always has report.html)")
    pr.add_argument("--calibration-data", metavar="FILE.npz",
                    help="real samples (array x, one per row) to calibrate static int8 "
                         "(default: synthetic inputs, which say nothing about accuracy)")
    pr.add_argument("--trace", action="store_true",
                    help="per-operator runtime profiles joined to the estimate's layers, and a "
                         "Chrome trace per run (written to --out)")
    pr.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    from edgeprof.cli.fleet import add_fleet_flag, add_parsers as add_fleet_parsers

    add_fleet_flag(pr)  # --fleet SCHEDULER: measure on a board of the target (cli/fleet.py)
    pr.set_defaults(func=cmd_profile)

    def prediction_args(sp, backend_required: bool):
        sp.add_argument("--backend", "-b", required=backend_required, default=None,
                        help="the runtime family on the board (tflite, onnxruntime, tensorrt "
                             "...)" + ("" if backend_required else ": adds its prediction"))
        sp.add_argument("--threads", type=_positive_int,
                        help="the board's threads (default: all its big cores; a calibration "
                             "from your measurements: the threads its rows ran)")
        sp.add_argument("--calibration", metavar="FILE.json",
                        help="a calibration file (edgeprof calibrate --measurements), used "
                             "instead of the search")

    es = sub.add_parser("estimate", parents=[common],
                        help="the analytic estimate (and, with --backend, the prediction)")
    model_args(es)
    es.add_argument("--precision", "-p", default="fp32",
                    help="the precision to estimate (and predict) at (default fp32)")
    prediction_args(es, backend_required=False)
    es.set_defaults(func=cmd_estimate)

    pd = sub.add_parser("predict", parents=[common],
                        help="predicted latency on a board, without building or running")
    model_args(pd)
    pd.add_argument("--precision", "-p", default="fp32",
                    help="the precision to predict at (default fp32)")
    prediction_args(pd, backend_required=True)
    pd.add_argument("--device", type=_device, default=None,
                    help="the board's processor (cpu, cuda ...: 'edgeprof targets show T')")
    pd.add_argument("--runtime-version", metavar="VERSION",
                    help="the runtime build on the board; a calibration fitted with another "
                         "build is used with a warning naming both")
    pd.set_defaults(func=cmd_predict)

    def constraint_args(sp):
        sp.add_argument("--latency-budget-ms", type=_positive_float, metavar="MS",
                        help="latency per inference on the target")
        sp.add_argument("--memory-budget-mb", type=_positive_float, metavar="MB",
                        help="weights + peak activations, decimal MB")
        sp.add_argument("--max-accuracy-drop", type=float, default=1.0, metavar="PP",
                        help="allowed top-1 drop in percentage points (default 1)")
        sp.add_argument("--stream-rate", type=_positive_float, metavar="FPS",
                        help="inferences per second the target must keep up with")

    rc = sub.add_parser("recommend", parents=[common],
                        help="the router's ordered optimization plan for a target (analytic)")
    model_args(rc)
    constraint_args(rc)
    rc.add_argument("--precision", "-p", default="fp32", help="the baseline precision")
    rc.set_defaults(func=cmd_recommend)

    op = sub.add_parser("optimize", parents=[common],
                        help="measure the plan, a backend x precision sweep and compressions "
                             "here; choose the fastest configuration that meets the constraints")
    model_args(op)
    constraint_args(op)
    op.add_argument("--data", metavar="FILE.npz",
                    help="labelled data: arrays x (samples) and y (integer labels); built-in "
                         "models use scikit-learn's digits")
    op.add_argument("--backend", "-b", type=_names, help="restrict the sweep to these backends (comma-separated)")
    op.add_argument("--compression", type=_names, default=",".join(("magnitude", "channels", "2:4",
                                                        "channels_last")),
                    help="compressions to try (comma-separated: magnitude, channels, 2:4, "
                         "channels_last) or 'none'")
    op.add_argument("--train-seconds", type=_positive_float, default=8.0, metavar="S",
                    help="training time of a built-in model on digits (cached; default 8)")
    op.add_argument("--finetune-steps", type=_non_negative_int, default=200, metavar="N",
                    help="fine-tuning steps after pruning, on the training split, pruned weights "
                         "kept at zero; the reference gets as many plain steps (default 200; "
                         "0 = none)")
    why = ("; shorter than profile's because optimize times many candidates, then times the "
           "close finalists again for longer")
    op.add_argument("--runs", type=_positive_int,
                    help=f"minimum timed runs per candidate (default 30{why})")
    op.add_argument("--min-time", type=_positive_float, metavar="S",
                    help=f"minimum timed seconds per candidate (default 0.3{why})")
    op.add_argument("--max-time", type=_positive_float, metavar="S",
                    help="cap on timed seconds per candidate (default 1.5)")
    op.add_argument("--out", "-o", metavar="DIR", help="write CSV/PNG/JSON artifacts here")
    op.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    op.add_argument("--html", metavar="FILE", type=_html_file,
                    help="also write the self-contained HTML report to FILE (--out DIR "
                         "always has report.html)")
    op.set_defaults(func=cmd_optimize)

    bs = sub.add_parser("batch", parents=[common],
                        help="latency and throughput per batch size (measured), and the largest "
                             "batch that fits the target (estimated)")
    model_args(bs)
    bs.add_argument("--batch-sizes", type=_batch_list, default=[1, 2, 4, 8, 16, 32],
                    help="comma-separated, e.g. 1,2,4,8 (default 1,2,4,8,16,32)")
    bs.add_argument("--backend", "-b", default="torch_eager",
                    help="the backend measured at every batch size (default torch_eager)")
    bs.add_argument("--precision", "-p", default="fp32",
                    help="the precision measured (default fp32)")
    bs.add_argument("--latency-budget-ms", type=_positive_float, metavar="MS",
                    help="say whether each batch meets this latency (p90 where reported, "
                         "else the median)")
    timing_args(bs, "batch size")
    bs.add_argument("--backend-option", type=_key_value, action="append", metavar="KEY=VALUE",
                    help="a backend option, e.g. xnnpack=false (repeat)")
    bs.add_argument("--out", "-o", metavar="DIR", help="write batch_sizes.csv/.json here")
    bs.set_defaults(func=cmd_batch)

    c = sub.add_parser("compare", parents=[common],
                       help="compare two profile.json files (significance per run)")
    c.add_argument("a", help="the first profile.json (A, the baseline)")
    c.add_argument("b", help="the second profile.json (B, compared with A)")
    c.add_argument("--html", metavar="FILE", type=_html_file,
                   help="write the before/after page (self-contained HTML) to FILE")
    c.add_argument("--force", action="store_true",
                   help="compare profiles of a different model, target or input shape anyway")
    c.set_defaults(func=cmd_compare)

    cal = sub.add_parser("calibrate", parents=[common],  # predict helper
                         help="measure sampled kernels here, fit a latency predictor, save it")
    cal.add_argument("--target", default="host",
                     help="'host' (measured here), or a board's target with --fleet")
    cal.add_argument("--backend", required=True, help="the runtime to calibrate")
    cal.add_argument("--precision", default=None,
                     help="default fp32; a generative backend: q4_0 or int4 where it makes it")
    cal.add_argument("--kernels", default="default", help="kernel set: default or tiny")
    cal.add_argument("--runs", type=int, default=20, help="minimum timed runs per kernel")
    cal.add_argument("--models", type=_names, default=None,
                     help="generative backends: the presets to measure (default "
                          "smollm2-135m,smollm2-360m,qwen2.5-0.5b)")
    cal.add_argument("--measurements", metavar="FILE.csv",
                     help="your own timings on the board: columns model,latency_ms and "
                          "optionally input_shape,precision,threads,runtime,source")
    cal.add_argument("--threads", type=_positive_int,
                     help="with --measurements: the threads every row ran")
    cal.add_argument("--out", metavar="FILE.json", dest="calibration_out",
                     help="with --measurements: where to write the calibration (default: your "
                          "calibration folder, where it is preferred over the shipped one)")
    add_fleet_flag(cal)  # --fleet SCHEDULER: measure the kernels on a board of --target
    cal.set_defaults(func=cmd_calibrate)
    add_fleet_parsers(sub, common, _positive_int, _positive_float, _non_negative_int)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from edgeprof.cli.quiet import quieted

    # the runtimes' own log noise off the terminal unless --debug (cli/quiet.py)
    with quieted(debug="--debug" in argv):
        return _main(argv)


def _main(argv: list[str]) -> int:
    from edgeprof.cli.llm import is_llm_command, main_llm

    if is_llm_command(argv):  # a generative model (llm:NAME, .gguf, HF folder): cli/llm.py
        return main_llm(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    with handling_signals():  # SIGINT/SIGTERM -> Interrupted: one line, exit 130/143
        return _run(args)


def _run(args) -> int:
    try:
        if getattr(args, "out", None):  # before any measuring: exit 2 naming the path
            from edgeprof.core.io import prepare_out_dir

            prepare_out_dir(args.out)
        return int(args.func(args) or 0)
    except EdgeprofError as e:
        if args.debug:
            raise
        print(f"edgeprof: error: {_in_flag_words(str(e))}", file=sys.stderr)
        return e.exit_code
    except Interrupted as e:
        print(e.message, file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("edgeprof: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # internal error: one line, exit 1; --debug shows the traceback
        if args.debug:
            raise
        print(f"edgeprof: internal error: {type(e).__name__}: {e} (rerun with --debug for the "
              "traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

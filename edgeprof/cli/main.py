"""The command line: parse, call the API, print, map errors to exit codes. No logic here.

One parser (:func:`build_parser`). profile, estimate, recommend and optimize take a tensor
model or a generative one (llm:NAME, .gguf, HF folder): each kind's own flags are a group of
the command, and after parsing ``common.resolve_kind`` branches on the model's kind —
refusing the other kind's flags, filling the defaults that differ by kind and choosing the
command function (here for tensor models, ``cli/llm.py`` for generative ones). Shared
helpers are in ``cli/common.py``; rendering in ``cli/render.py`` and ``cli/render_llm.py``.

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
from edgeprof.cli import llm
from edgeprof.cli.common import (Progress, _batch_list, _console, _device, _dtype,
                                 _html_file, _in_flag_words, _keeping_results, _key_value,
                                 _names, _non_negative_int, _Parser, _positive_float,
                                 _positive_int, _shape, add_isolation_flags, for_kinds,
                                 kind_groups, resolve_kind)
from edgeprof.cli.fleet import add_fleet_flag, add_parsers as add_fleet_parsers
from edgeprof.cli.fleet import print_boards, profile_fleet
from edgeprof.cli.render import _fmt, _si
from edgeprof.cli.signals import Interrupted, handling_signals
from edgeprof.core.errors import EdgeprofError, OutputError, UserError


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
    if getattr(reg.backend(args.backend), "workload", "tensor") == "generate":
        return llm.cmd_calibrate_llm(args, spec)  # here, isolated, or on a board of the fleet
    if args.isolate or args.timeout is not None:
        raise UserError("--isolate and --timeout go with a generative backend (e.g. "
                        "--backend llama_cpp); a tensor calibration measures its kernels here "
                        "or, with --fleet, on a board")
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
def _common_parser() -> argparse.ArgumentParser:
    """The flags every command takes."""
    common = _Parser(add_help=False)
    common.add_argument("--plugins", metavar="FILE",
                        help="a plugins.toml of your own (also $EDGEPROF_PLUGINS)")
    common.add_argument("--targets-dir", metavar="DIR",
                        help="a folder of your own target descriptors, searched first "
                             "(also $EDGEPROF_TARGETS_DIR)")
    common.add_argument("--json", action="store_true",
                        help="print JSON to stdout (a generative model's: its payload)")
    common.add_argument("--debug", action="store_true",
                        help="show tracebacks, and the runtimes' own log output (TensorFlow, "
                             "absl, ONNX Runtime, torch warnings, llama.cpp), which is "
                             "silenced otherwise")
    return common


def _timing_args(sp, per: str) -> None:
    """The timing flags of tensor runs, the same in profile and batch (optimize has its own
    defaults); ``sp`` a parser or profile's tensor group. profile's --warmup is its own: it
    counts for both kinds of model."""
    sp.add_argument("--runs", type=_positive_int,
                    help=f"minimum timed runs per {per} (default 100)")
    sp.add_argument("--min-time", type=_positive_float, metavar="S",
                    help=f"minimum timed seconds per {per} (default 1; lowered to "
                         "--max-time when only that is given)")
    sp.add_argument("--max-time", type=_positive_float, metavar="S",
                    help=f"cap on timed seconds per {per} (default 10)")


_MODEL_HELP = ("builtin:NAME, package.module:factory, file.py:factory, or a model file (.onnx, "
               ".tflite, .xml, .keras)")


def _model_args(sp, tensor=None) -> None:
    """The model and the tensor model's input flags. ``tensor``: the tensor group of a
    command that takes either kind of model (its --target is then added by the command)."""
    if tensor is None:
        sp.add_argument("model", help=_MODEL_HELP)
        sp.add_argument("--target", "-t", default="host", help="target id (default: host)")
    else:
        sp.add_argument("model", help=f"{_MODEL_HELP}; or a generative model: llm:NAME (a "
                                      "built-in architecture with random weights), a .gguf "
                                      "file or a Hugging Face model folder. Each group of "
                                      "flags below applies to its kind of model only")
    g = tensor or sp
    g.add_argument("--batch-size", type=_positive_int,
                   help="sets the first dimension of every input")
    g.add_argument("--input-shape", type=_shape, action="append", metavar="SHAPE",
                   help="input shape with the batch dimension, e.g. 1x3x224x224 "
                        "(repeat for several inputs)")
    g.add_argument("--input-dtype", type=_dtype, action="append", metavar="DTYPE",
                   help="input dtype, e.g. float32 or int64 (repeat per input)")
    g.add_argument("--max-layers", type=_positive_int, default=40,
                   help="layers shown in the terminal table (all are in the CSV; default 40)")


def _target_arg(sp, generative: str) -> None:
    """--target of a command that takes either kind: host by default for a tensor model."""
    for_kinds(sp.add_argument("--target", "-t",
                              help=f"target id (tensor models: default host; generative "
                                   f"models: {generative})"), tensor="host")


def _backend_arg(sp, tensor_help: str, generative_help: str, **defaults) -> None:
    """--backend of a command that takes either kind; ``defaults`` by kind."""
    for_kinds(sp.add_argument("--backend", "-b", type=_names, metavar="NAME[,NAME...]",
                              help=f"tensor models: {tensor_help}; generative models: "
                                   f"{generative_help}"), **defaults)


def _precision_arg(sp, tensor_help: str, **defaults) -> None:
    """--precision of a command that takes either kind: a generative model's formats."""
    for_kinds(sp.add_argument("--precision", "-p", type=_names, metavar="NAME[,NAME...]",
                              help=f"tensor models: {tensor_help}; generative models: "
                                   f"{llm.FORMATS_HELP}"), **defaults)


def _add_profile(sub, common) -> None:
    pr = sub.add_parser("profile", parents=[common],
                        help="estimate + benchmark + summarize a model for a target (a "
                             "generative model: llama-bench's pp/tg measured here beside the "
                             "estimate and the target's prediction)")
    t, g = kind_groups(pr)
    _model_args(pr, t)
    _target_arg(pr, "none, or the board to predict too (e.g. raspberry_pi_5)")
    _backend_arg(pr, "backend name(s), comma-separated, or 'all' (default torch_eager)",
                 f"{llm.BACKENDS_HELP} (default llama_cpp)",
                 tensor="torch_eager", generative="llama_cpp")
    _precision_arg(pr, "precision(s), comma-separated: fp32 (default), fp16, bf16, int8, "
                       "int8_static, int8_dynamic, int8_weight, int4_weight", tensor="fp32")
    pr.add_argument("--threads", type=_positive_int,
                    help="intra-op threads here (default: physical cores) and, on a board "
                         "target, the board's threads its predictions are for (default: all "
                         "its big cores)")
    pr.add_argument("--device", type=_device, default=None,
                    help="this machine's device the benchmarks run on: cpu (default) or "
                         "cuda[:N], for backends that declare a CUDA device; a generative "
                         "model: cpu or cuda, this machine's processor and the --target "
                         "board's (a board's figures are for the processor its target "
                         "describes)")
    for_kinds(pr.add_argument("--warmup", type=_non_negative_int, metavar="N",
                              help="untimed warm-up before timing: tensor models, runs of "
                                   "single inferences (default adaptive: until the timings "
                                   "settle); generative models, repetitions of one whole "
                                   "pp/tg test, as --repetitions counts them (default 1)"),
              generative=1)
    pr.add_argument("--out", "-o", metavar="DIR",
                    help="write the artifacts here: CSV/PNG/JSON for a tensor model; "
                         "profile.json, llm_bench.csv, estimate.csv, report.html for a "
                         "generative one")
    t.add_argument("--calibration", metavar="FILE.json",
                   help="a calibration file for the board's predictions (edgeprof calibrate "
                        "--measurements), used instead of the search")
    t.add_argument("--stream-rate", type=_positive_float, metavar="FPS",
                   help="input stream rate; gives stream_utilization")
    t.add_argument("--latency-budget-ms", type=_positive_float, metavar="MS",
                   help="say whether each configuration meets this latency")
    _timing_args(t, "run")
    add_isolation_flags(pr)
    t.add_argument("--backend-option", type=_key_value, action="append", metavar="KEY=VALUE",
                   help="a backend's own option, e.g. torch_compile.mode=max-autotune (repeat; "
                        "BACKEND.KEY for one backend, KEY for all; 'edgeprof backends' lists "
                        "them)")
    t.add_argument("--html", metavar="FILE", type=_html_file,
                   help="also write the self-contained HTML report to FILE (--out DIR "
                        "always has report.html)")
    t.add_argument("--calibration-data", metavar="FILE.npz",
                   help="real samples (array x, one per row) to calibrate static int8 "
                        "(default: synthetic inputs, which say nothing about accuracy)")
    t.add_argument("--trace", action="store_true",
                   help="per-operator runtime profiles joined to the estimate's layers, and a "
                        "Chrome trace per run (written to --out)")
    t.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    add_fleet_flag(pr)  # --fleet SCHEDULER: measure on a board of the target (cli/fleet.py)
    llm.add_generative_args(g, "profile")
    pr.set_defaults(func=cmd_profile, func_generative=llm.cmd_profile_llm)


def _prediction_args(sp, backend_required: bool) -> None:
    """predict's flags (and a tensor estimate's, with --backend shared)."""
    if backend_required:
        sp.add_argument("--backend", "-b", required=True,
                        help="the runtime family on the board (tflite, onnxruntime, tensorrt "
                             "...)")
    sp.add_argument("--threads", type=_positive_int,
                    help="the board's threads (default: all its big cores; a calibration "
                         "from your measurements: the threads its rows ran)")
    sp.add_argument("--calibration", metavar="FILE.json",
                    help="a calibration file (edgeprof calibrate --measurements), used "
                         "instead of the search")


def _add_estimate(sub, common) -> None:
    es = sub.add_parser("estimate", parents=[common],
                        help="the analytic estimate (and, with --backend, the prediction); "
                             "builds and runs nothing")
    t, g = kind_groups(es)
    _model_args(es, t)
    _target_arg(es, "the board to predict, with the fit verdict")
    _backend_arg(es, "the runtime family on the board: adds its prediction (default none)",
                 f"{llm.BACKENDS_HELP} (default llama_cpp)", generative="llama_cpp")
    _precision_arg(es, "the precision to estimate (and predict) at (default fp32)",
                   tensor="fp32")
    es.add_argument("--threads", type=_positive_int,
                    help="the board's threads (default: all its big cores; a calibration "
                         "from your measurements: the threads its rows ran)")
    t.add_argument("--calibration", metavar="FILE.json",
                   help="a calibration file (edgeprof calibrate --measurements), used "
                        "instead of the search")
    llm.add_generative_args(g, "estimate")
    es.set_defaults(func=cmd_estimate, func_generative=llm.cmd_estimate_llm)


def _constraint_args(sp) -> None:
    sp.add_argument("--latency-budget-ms", type=_positive_float, metavar="MS",
                    help="latency per inference on the target")
    sp.add_argument("--memory-budget-mb", type=_positive_float, metavar="MB",
                    help="weights + peak activations, decimal MB")
    sp.add_argument("--max-accuracy-drop", type=float, default=1.0, metavar="PP",
                    help="allowed top-1 drop in percentage points (default 1)")
    sp.add_argument("--stream-rate", type=_positive_float, metavar="FPS",
                    help="inferences per second the target must keep up with")


def _add_recommend(sub, common) -> None:
    rc = sub.add_parser("recommend", parents=[common],
                        help="the router's ordered optimization plan for a target (analytic; "
                             "a generative model: the format to use there)")
    t, g = kind_groups(rc)
    _model_args(rc, t)
    _target_arg(rc, "the board, required (e.g. raspberry_pi_5)")
    _precision_arg(rc, "the baseline precision (default fp32)", tensor="fp32")
    _constraint_args(t)
    llm.add_generative_args(g, "recommend")
    g.add_argument("--backend", "-b", type=_names, metavar="NAME[,NAME...]",
                   help=f"{llm.BACKENDS_HELP} to choose among (default: all of them)")
    rc.set_defaults(func=cmd_recommend, func_generative=llm.cmd_recommend_llm)


def _add_optimize(sub, common) -> None:
    op = sub.add_parser("optimize", parents=[common],
                        help="measure the plan, a backend x precision sweep and compressions "
                             "here; choose the fastest configuration that meets the "
                             "constraints (a generative model: the format, analytically, as "
                             "recommend)")
    t, g = kind_groups(op)
    _model_args(op, t)
    _target_arg(op, "the board, required (e.g. raspberry_pi_5)")
    _backend_arg(op, "restrict the sweep to these backends (comma-separated)",
                 f"{llm.BACKENDS_HELP} to choose among (default: all of them)")
    _constraint_args(t)
    t.add_argument("--data", metavar="FILE.npz",
                   help="labelled data: arrays x (samples) and y (integer labels); built-in "
                        "models use scikit-learn's digits")
    t.add_argument("--compression", type=_names,
                   default=",".join(("magnitude", "channels", "2:4", "channels_last")),
                   help="compressions to try (comma-separated: magnitude, channels, 2:4, "
                        "channels_last; default all four) or 'none'")
    t.add_argument("--train-seconds", type=_positive_float, default=8.0, metavar="S",
                   help="training time of a built-in model on digits (cached; default 8)")
    t.add_argument("--finetune-steps", type=_non_negative_int, default=200, metavar="N",
                   help="fine-tuning steps after pruning, on the training split, pruned "
                        "weights kept at zero; the reference gets as many plain steps "
                        "(default 200; 0 = none)")
    why = ("; shorter than profile's because optimize times many candidates, then times the "
           "close finalists again for longer")
    t.add_argument("--runs", type=_positive_int,
                   help=f"minimum timed runs per candidate (default 30{why})")
    t.add_argument("--min-time", type=_positive_float, metavar="S",
                   help=f"minimum timed seconds per candidate (default 0.3{why})")
    t.add_argument("--max-time", type=_positive_float, metavar="S",
                   help="cap on timed seconds per candidate (default 1.5)")
    t.add_argument("--out", "-o", metavar="DIR", help="write CSV/PNG/JSON artifacts here")
    t.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    t.add_argument("--html", metavar="FILE", type=_html_file,
                   help="also write the self-contained HTML report to FILE (--out DIR "
                        "always has report.html)")
    llm.add_generative_args(g, "optimize")
    g.add_argument("--precision", "-p", type=_names, metavar="FORMAT[,FORMAT...]",
                   help=llm.FORMATS_HELP)
    op.set_defaults(func=cmd_optimize, func_generative=llm.cmd_recommend_llm)


def _add_predict(sub, common) -> None:  # tensor models only
    pd = sub.add_parser("predict", parents=[common],
                        help="predicted latency on a board, without building or running")
    _model_args(pd)
    pd.add_argument("--precision", "-p", default="fp32",
                    help="the precision to predict at (default fp32)")
    _prediction_args(pd, backend_required=True)
    pd.add_argument("--device", type=_device, default=None,
                    help="the board's processor (cpu, cuda ...: 'edgeprof targets show T')")
    pd.add_argument("--runtime-version", metavar="VERSION",
                    help="the runtime build on the board; a calibration fitted with another "
                         "build is used with a warning naming both")
    pd.set_defaults(func=cmd_predict)


def _add_batch(sub, common) -> None:  # tensor models only
    bs = sub.add_parser("batch", parents=[common],
                        help="latency and throughput per batch size (measured), and the largest "
                             "batch that fits the target (estimated)")
    _model_args(bs)
    bs.add_argument("--batch-sizes", type=_batch_list, default=[1, 2, 4, 8, 16, 32],
                    help="comma-separated, e.g. 1,2,4,8 (default 1,2,4,8,16,32)")
    bs.add_argument("--backend", "-b", default="torch_eager",
                    help="the backend measured at every batch size (default torch_eager)")
    bs.add_argument("--precision", "-p", default="fp32",
                    help="the precision measured (default fp32)")
    bs.add_argument("--latency-budget-ms", type=_positive_float, metavar="MS",
                    help="say whether each batch meets this latency (p90 where reported, "
                         "else the median)")
    _timing_args(bs, "batch size")
    bs.add_argument("--warmup", type=_positive_int, metavar="N",
                    help="untimed warm-up runs (single inferences) before timing; default "
                         "adaptive: until the timings settle")
    bs.add_argument("--backend-option", type=_key_value, action="append", metavar="KEY=VALUE",
                    help="a backend option, e.g. xnnpack=false (repeat)")
    bs.add_argument("--out", "-o", metavar="DIR", help="write batch_sizes.csv/.json here")
    bs.set_defaults(func=cmd_batch)


def _add_listings(sub, common) -> None:
    t = sub.add_parser("targets", parents=[common], help="list targets, or show one's figures")
    t.add_argument("action", nargs="?", choices=["list", "show"], default="list",
                   help="list every target (default), or show one target's figures")
    t.add_argument("id", nargs="?", help="target id (for 'show')")
    t.add_argument("--recalibrate", action="store_true", help="redo the host calibration")
    t.set_defaults(func=cmd_targets)

    b = sub.add_parser("backends", parents=[common],
                       help="list backends: available or not, and why")
    b.set_defaults(func=cmd_backends)

    pl = sub.add_parser("plugins", parents=[common], help="list loaded plugins and where from")
    pl.set_defaults(func=cmd_plugins)


def _add_compare_and_calibrate(sub, common) -> None:
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
    llm.add_calibrate_args(cal)  # a generative backend's --isolate, --timeout
    add_fleet_flag(cal)  # --fleet SCHEDULER: measure the kernels on a board of --target
    cal.set_defaults(func=cmd_calibrate)


def build_parser() -> argparse.ArgumentParser:
    """The one parser. profile, estimate, recommend and optimize take a tensor model or a
    generative one: their flags for one kind only sit in that kind's group, and
    :func:`edgeprof.cli.common.resolve_kind` refuses the other kind's and fills the defaults
    that differ by kind, after parsing."""
    common = _common_parser()
    p = _Parser(prog="edgeprof", description=(
        "How will this model run on that device, with which runtime and compression, and why. "
        "Estimates are analytic; benchmarks are measured on this machine; figures for another "
        "target are estimated from both and labelled so. Generative models (llm:NAME, .gguf, "
        "HF folder) take profile, estimate, recommend and optimize with their own group of "
        "flags."))
    p.add_argument("--version", action="version", version=f"edgeprof {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_listings(sub, common)
    _add_profile(sub, common)
    _add_estimate(sub, common)
    _add_predict(sub, common)
    _add_recommend(sub, common)
    _add_optimize(sub, common)
    _add_batch(sub, common)
    _add_compare_and_calibrate(sub, common)
    add_fleet_parsers(sub, common)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from edgeprof.cli.quiet import quieted

    # the runtimes' own log noise off the terminal unless --debug (cli/quiet.py)
    with quieted(debug="--debug" in argv):
        return _main(argv)


def _main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if hasattr(args, "func_generative"):  # either kind of model: branch on the model's
        resolve_kind(parser, args)
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

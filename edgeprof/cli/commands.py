"""The command functions: each calls its API verb with the flags as keywords, then prints or
renders the answer (``cli/render.py``, ``cli/render_listings.py``). profile, estimate,
predict, recommend and optimize take either kind of model: one function each, the answer shown
by the view of the model's kind (``*_VIEWS``; a generative model's are in ``cli/llm.py``).
The parser that dispatches to them is ``cli/parser.py``."""

from __future__ import annotations

import json
import sys
from typing import Any

from edgeprof.cli import llm
from edgeprof.cli.common import (Progress, api_options, in_flag_words, keeping_results,
                                 make_console)
from edgeprof.cli.fleet import print_boards, profile_fleet
from edgeprof.cli.render import fmt_number
from edgeprof.core.errors import UserError


# --------------------------------------------------------------------------- commands
def cmd_targets(args) -> int:
    from edgeprof.api import target_registry

    reg = target_registry(args.targets_dir, args.plugins)
    if args.action == "show":
        if not args.id:
            raise UserError("give a target id: edgeprof targets show raspberry_pi_4")
        t = reg.get(args.id, recalibrate=args.recalibrate)
        if args.json:
            print(json.dumps(t.to_dict(), indent=2))
            return 0
        from edgeprof.api import calibrations_of
        from edgeprof.cli.render_listings import render_target

        cals = calibrations_of(t)
        render_target(t, make_console(), cals["tensor"], cals["llm"])
        return 0
    targets = reg.all()
    if args.json:
        print(json.dumps([t.to_dict() for t in targets], indent=2))
        return 0
    from edgeprof.cli.render_listings import render_targets

    render_targets(targets, make_console())
    return 0


def cmd_backends(args) -> int:
    from edgeprof.api import list_backends

    rows = list_backends(args.plugins)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from edgeprof.cli.render_listings import render_backends

    render_backends(rows, make_console())
    return 0


def cmd_plugins(args) -> int:
    from edgeprof.core.plugins import get_registry

    reg = get_registry(args.plugins)
    for name, source in reg.plugins:
        print(f"{name}\t{source}")
    return 0


def _with_timing(args, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the tensor harness's own flags (runs, min/max time, backend options),
    where any was given, as ``run_options``; the flags both kinds take (device, warmup,
    isolate, timeout) are the verbs' own keywords."""
    timing = {k: v for k, v in _run_options(args).items()
              if k not in ("device", "warmup", "isolate", "timeout_s")}
    if timing:
        options["run_options"] = timing
    return options


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


#: profile's flags (argparse dest) -> edgeprof.profile's keywords; a flag of the other kind
#: of model is None after resolve_kind, so only this kind's reach the API
PROFILE_OPTIONS = {
    "target": "target", "backend": "backends", "precision": "precisions", "threads": "threads",
    "device": "device", "warmup": "warmup", "isolate": "isolate", "timeout": "timeout_s",
    "out": "out", "plugins": "plugins", "targets_dir": "targets_dir",
    "calibration": "calibration", "batch_size": "batch_size", "input_shape": "input_shapes",
    "input_dtype": "input_dtypes", "stream_rate": "stream_rate_fps",
    "latency_budget_ms": "latency_budget_ms", "trace": "trace",
    "calibration_data": "calibration_data", "recalibrate": "recalibrate",
    "prompt_tokens": "prompt_tokens", "gen_tokens": "gen_tokens", "depth": "depths",
    "repetitions": "repetitions"}


def cmd_profile(args) -> int:
    """``edgeprof profile``, either kind of model: ``edgeprof.profile`` with the flags given,
    then its report shown by its workload's view (``PROFILE_VIEWS``)."""
    from edgeprof.api import profile

    progress = Progress(enabled=not args.json)
    options = _with_timing(args, api_options(args, PROFILE_OPTIONS))
    report, unwritten = keeping_results(progress, lambda: profile(
        args.model, fleet=profile_fleet(args), progress=progress, **options))
    if args.json:
        from edgeprof.profilers.report.artifacts import dumps

        print(dumps(report))
    else:
        PROFILE_VIEWS[args.kind](report, args, make_console())
        if args.out and unwritten is None:
            make_console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    PROFILE_PROBLEMS[args.kind](report, make_console(stderr=True))
    _html_then_deferred_error(args, unwritten, "render_profile_html", report.to_dict)
    return report.exit_code


def _show_tensor_profile(report, args, console) -> None:
    from edgeprof.cli.render import render_profile

    render_profile(report, console, max_layers=args.max_layers)
    print_boards(report, console)


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


#: how ``profile`` shows the report of each kind of model: the tables, and the runs that
#: produced no measurement (on stderr)
PROFILE_VIEWS = {"tensor": _show_tensor_profile, "generative": llm.show_profile}
PROFILE_PROBLEMS = {"tensor": _print_problems, "generative": llm.print_problems}


#: estimate's and predict's flags -> edgeprof.estimate's keywords (either kind of model)
ESTIMATE_OPTIONS = {
    "precision": "precision", "backend": "backend", "threads": "threads", "device": "device",
    "calibration": "calibration", "plugins": "plugins", "targets_dir": "targets_dir",
    "batch_size": "batch_size", "input_shape": "input_shapes", "input_dtype": "input_dtypes",
    "prompt_tokens": "prompt_tokens", "gen_tokens": "gen_tokens", "depth": "depths",
    "build": "build", "runtime_version": "runtime_version"}


def cmd_estimate(args) -> int:
    """``edgeprof estimate``, either kind of model: ``edgeprof.estimate`` (with --backend, the
    board's prediction too), shown; nothing is built or run."""
    from edgeprof.api import estimate

    result = estimate(args.model, args.target, **api_options(args, ESTIMATE_OPTIONS))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        ESTIMATE_VIEWS[args.kind](result, args, make_console())
    return 0


def cmd_predict(args) -> int:
    """``edgeprof predict``, either kind of model: the board's figures for one runtime
    (``edgeprof.estimate`` with --backend: the prediction a tensor model's ``predict`` gives,
    a generative model's prefill and decode tokens/s), without building or running."""
    from edgeprof.api import estimate

    if args.target is None:
        raise UserError(f"predict {args.model} needs --target BOARD (e.g. raspberry_pi_5): a "
                        "prediction is for a board; 'edgeprof estimate' gives the analytic "
                        "figures without one")
    result = estimate(args.model, args.target, **api_options(args, ESTIMATE_OPTIONS))
    PREDICT_VIEWS[args.kind](result, args, make_console())
    return 0


def _show_estimate(est, args, console) -> None:
    from edgeprof.cli.render import render_estimate, render_prediction

    render_estimate(est, console, max_layers=args.max_layers)
    if est.prediction is not None:
        render_prediction(est.prediction, console)


def _show_prediction(est, args, console) -> None:
    """A tensor model's prediction alone (``predict``)."""
    if args.json:
        print(json.dumps(est.prediction.to_dict(), indent=2, allow_nan=False))
        return
    from edgeprof.cli.render import render_prediction

    render_prediction(est.prediction, console)


#: how estimate and predict show their answer for each kind of model
ESTIMATE_VIEWS = {"tensor": _show_estimate, "generative": llm.show_profile}
PREDICT_VIEWS = {"tensor": _show_prediction, "generative": llm.show_estimate}


def cmd_batch(args) -> int:
    from edgeprof.api import batch_sizes

    # measured, but --out could not be written: show it, then fail
    rep, unwritten = keeping_results(None, lambda: batch_sizes(
        args.model, args.batch_sizes, target=args.target, backend=args.backend,
        precision=args.precision, latency_budget_ms=args.latency_budget_ms,
        run_options=_run_options(args), input_shapes=args.input_shape or None,
        input_dtypes=args.input_dtype or None, plugins=args.plugins,
        targets_dir=args.targets_dir, out=args.out))
    from edgeprof.cli.render import batch_problems, render_batch

    if args.json:
        print(json.dumps(rep.to_dict(), indent=2, allow_nan=False))
        for line in batch_problems(rep):  # the reasons on stderr too
            print(f"edgeprof: {line}", file=sys.stderr)
    else:
        render_batch(rep, make_console())
    if unwritten is not None:
        raise unwritten
    # 3 = partial: a requested batch produced no measurement (its row says why)
    return 3 if batch_problems(rep) else 0


def cmd_compare(args) -> int:
    from pathlib import Path

    from edgeprof.profilers.report.compare import (compare_results, format_comparison,
                                                   load_profile, profile_differences)

    a, b = load_profile(args.a), load_profile(args.b)
    rows = compare_results(a, b, force=args.force)  # a tensor and a generative one: exit 2
    page = None
    if args.html:  # html helper: the before/after page (a kind without one: exit 2, first)
        from edgeprof.core.invocation import command
        from edgeprof.profilers.report.html import render_compare_html

        page = render_compare_html(a, b, rows, label_a=args.a, label_b=args.b,
                                   command=command())
    for diff in profile_differences(a, b):  # only reached with --force
        print(f"edgeprof: WARNING: not like for like, compared anyway (--force): {diff}",
              file=sys.stderr)
    if args.json:
        from edgeprof.core.results import clean

        print(json.dumps([clean(r) for r in rows], indent=2, allow_nan=False))
    else:
        print(format_comparison(rows, Path(args.a).parent.name or "A",
                                Path(args.b).parent.name or "B"))
    if page is not None:
        from edgeprof.profilers.report.html import write_html

        write_html(args.html, page)
    return 0


def cmd_calibrate(args) -> int:  # predict helper: edgeprof calibrate
    """``edgeprof calibrate``: ``api.calibrate`` (which checks the flags against the backend's
    kind and the source: measured or --measurements), then the result printed."""
    from edgeprof.api import calibrate

    progress = Progress(enabled=not args.json)
    try:
        result = calibrate(
            args.backend, args.target, args.precision, measurements=args.measurements,
            kernels=args.kernels, runs=args.runs, models=args.models, threads=args.threads,
            out=args.calibration_out, isolate=bool(args.isolate), timeout_s=args.timeout,
            # --fleet, else $EDGEPROF_FLEET for a target not this host (measured runs only)
            fleet=args.fleet if args.measurements is not None else profile_fleet(args),
            plugins=args.plugins, targets_dir=args.targets_dir, progress=progress)
    finally:
        progress.stop()
    return CALIBRATION_PRINTERS[result.kind, result.source](result, args)


def _print_calibration(result, args) -> int:
    """A tensor backend's kernel calibration, measured here or on a board of the fleet."""
    cal, path = result.calibration, result.path
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
          f"{fmt_number(cv['spearman']) if cv['spearman'] is not None else '-'}"
          + (f"; {cv['n_unpredicted']} sample(s) {cv['unpredicted']}"
             if cv.get("n_unpredicted") else ""))
    print(f"saved to {path}")
    return 0


def _print_measurements_calibration(result, args) -> int:
    """``calibrate --measurements FILE.csv`` of a tensor backend: the user's own timings
    refine the shipped calibration of the board."""
    cal, path, summary = result.calibration, result.path, result.summary
    if args.json:
        print(json.dumps({"calibration": cal.name, "path": str(path), **summary,
                          "parameters": cal.parameters, "note": cal.note},
                         indent=2, allow_nan=False, default=str))
        return 0
    cv = summary["cv"]
    n = summary["rows"]
    ts = summary["threads"]
    at = (f"at {', '.join(map(str, ts))} thread(s)" if ts else
          "with no thread count (a GPU runtime, or the runtime's default)")
    print(f"calibration {cal.name}: {n} row(s) {at}; learned {summary['learned']}; "
          f"prior {summary['prior']}")
    if n >= 2:
        print(f"{cv['method']}: median |error| {100 * cv['median_abs_error']:.1f} %, within "
              f"+-25 % {100 * cv['within_25']:.0f} %, Spearman "
              f"{fmt_number(cv['spearman']) if cv['spearman'] is not None else '-'}; 90 % "
              f"interval held {100 * (cv['coverage'] or 0):.0f} % of the held-out rows, width "
              f"{cv['median_width']:.2f}x"
              + (f" (log sigma {cv['log_sigma']:.3f}: the rows' own {cv['log_sigma_own']:.3f} "
                 f"pooled with the prior's {cv['log_sigma_prior']:.3f}, counted as "
                 f"{cv['prior_sigma_weight']:g} rows)" if "log_sigma_own" in cv else ""))
    else:
        print("one row: it moves the level only; the interval is the prior's (add rows for a "
              "leave-one-out error and a shape of your own)")
    print(f"saved to {path}")
    return 0


#: the printer of each (kind of backend, source) of a CalibrationResult
CALIBRATION_PRINTERS = {
    ("tensor", "measured"): _print_calibration,
    ("tensor", "measurements"): _print_measurements_calibration,
    ("generative", "measured"): llm.print_llm_calibration,
    ("generative", "measurements"): llm.print_llm_measurements_calibration,
}


#: the router's flags (recommend, optimize) -> edgeprof.recommend's and optimize's keywords
_CHOICE_OPTIONS = {
    "precision": "precision", "plugins": "plugins", "targets_dir": "targets_dir",
    "batch_size": "batch_size", "input_shape": "input_shapes", "input_dtype": "input_dtypes",
    "latency_budget_ms": "latency_budget_ms", "memory_budget_mb": "memory_budget_mb",
    "max_accuracy_drop": "max_accuracy_drop", "stream_rate": "stream_rate_fps",
    "device": "device", "backend": "backends", "context": "context_tokens",
    "tokens_per_s": "tokens_per_s", "prompt_tokens": "prompt_tokens",
    "gen_tokens": "gen_tokens", "depth": "depths"}
RECOMMEND_OPTIONS = {**_CHOICE_OPTIONS, "threads": "threads", "calibration": "calibration"}
OPTIMIZE_OPTIONS = {**_CHOICE_OPTIONS, "data": "data", "out": "out",
                    "compression": "compressions", "train_seconds": "train_seconds",
                    "finetune_steps": "finetune_steps", "recalibrate": "recalibrate",
                    "repetitions": "repetitions", "shortlist": "shortlist"}


def cmd_recommend(args) -> int:
    """``edgeprof recommend``, either kind of model: ``edgeprof.recommend`` (the router's plan,
    or a generative model's format), shown; exit 4 when a constraint cannot be met (the
    closest answer is still shown)."""
    from edgeprof.api import recommend

    result = recommend(args.model, args.target, **api_options(args, RECOMMEND_OPTIONS))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False, default=str))
    else:
        CHOICE_VIEWS[args.kind](result, make_console())
    err = result.constraint_error()
    if err is not None:
        raise err
    return 0


def cmd_optimize(args) -> int:
    """``edgeprof optimize``, either kind of model: ``edgeprof.optimize`` (candidates measured
    here, the best that meets the constraints chosen), shown; exit 4 when none meets them."""
    from edgeprof.api import optimize

    options = _with_timing(args, api_options(args, OPTIMIZE_OPTIONS))
    progress = Progress(enabled=not args.json)
    result, unwritten = keeping_results(progress, lambda: optimize(
        args.model, args.target, progress=progress, **options))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False, default=str))
    else:
        CHOICE_VIEWS[args.kind](result, make_console())
        if args.out and unwritten is None:
            make_console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    _html_then_deferred_error(args, unwritten, "render_optimize_html", result.to_dict)
    err = result.constraint_error()
    if err is None:
        return 0
    print(f"edgeprof: error: {in_flag_words(str(err))}", file=sys.stderr)
    return err.exit_code


def _show_text(result, console) -> None:
    """A plan or an optimize report: its own text."""
    print(in_flag_words(result.to_text()))


#: how recommend and optimize show their answer for each kind of model
CHOICE_VIEWS = {"tensor": _show_text, "generative": llm.show_choice}

"""The tensor model's command functions (and the listings, compare, calibrate): each calls the
API, then prints or renders its result (``cli/render.py``, ``cli/render_listings.py``). The
parser that dispatches to them is ``cli/parser.py``; a generative model's commands are in
``cli/llm.py``."""

from __future__ import annotations

import json
import sys
from typing import Any

from edgeprof.cli import llm
from edgeprof.cli.common import Progress, in_flag_words, keeping_results, make_console
from edgeprof.cli.fleet import print_boards, profile_fleet
from edgeprof.cli.render import _fmt
from edgeprof.core.errors import OutputError, UserError


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
    report, unwritten = keeping_results(progress, lambda: profile(
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
        _print_problems(report, make_console(stderr=True))
    else:
        from edgeprof.cli.render import render_profile

        render_profile(report, make_console(), max_layers=args.max_layers)
        print_boards(report, make_console())
        _print_problems(report, make_console(stderr=True))
        if args.out and unwritten is None:
            make_console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
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
        prediction = pred.from_estimate(est)
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

    render_estimate(est, make_console(), max_layers=args.max_layers)
    if prediction is not None:
        render_prediction(prediction, make_console())
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

    render_prediction(pred, make_console())
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
        render_batch(rep, make_console())
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
        from edgeprof.core.invocation import command
        from edgeprof.profilers.report.html import render_compare_html, write_html

        write_html(args.html, render_compare_html(a, b, rows, label_a=args.a, label_b=args.b,
                                                  command=command()))
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
          f"{_fmt(cv['spearman']) if cv['spearman'] is not None else '-'}"
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
              f"{_fmt(cv['spearman']) if cv['spearman'] is not None else '-'}; 90 % interval "
              f"held {100 * (cv['coverage'] or 0):.0f} % of the held-out rows, width "
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


def cmd_recommend(args) -> int:
    from edgeprof.optimize.router import check_feasible
    from edgeprof.optimize.loop import recommend_plan

    plan = recommend_plan(
        args.model, args.target, latency_budget_ms=args.latency_budget_ms,
        memory_budget_mb=args.memory_budget_mb, max_accuracy_drop=args.max_accuracy_drop,
        stream_rate_fps=args.stream_rate, precision=args.precision, batch_size=args.batch_size,
        input_shapes=args.input_shape or None, input_dtypes=args.input_dtype or None,
        plugins=args.plugins, targets_dir=args.targets_dir, threads=args.threads,
        calibration=args.calibration)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2, allow_nan=False))
    else:
        print(in_flag_words(plan.to_text()))
    check_feasible(plan)  # ConstraintError (exit 4) after the closest plan was shown
    return 0


def cmd_optimize(args) -> int:
    from edgeprof.optimize.loop import optimize

    run_options = _run_options(args)
    progress = Progress(enabled=not args.json)
    report, unwritten = keeping_results(progress, lambda: optimize(
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
        print(in_flag_words(report.to_text()))
        if args.out and unwritten is None:
            make_console(stderr=True).print(f"artifacts written to {args.out}", markup=False)
    _html_then_deferred_error(args, unwritten, "render_optimize_html", report.to_dict)
    err = report.constraint_error()
    if err is not None:
        print(f"edgeprof: error: {in_flag_words(str(err))}", file=sys.stderr)
    return report.exit_code

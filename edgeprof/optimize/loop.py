"""``recommend`` and ``optimize``: the router's plan, then the plan checked by measurement.

* :func:`recommend_plan` - the router's ordered plan (backend, precision and quantization
  method, pruning, layout, threads, batch size) for a model on a target under constraints,
  read from the target's descriptor and the model's analytic estimate. Nothing is run; every
  projected figure is an estimate.
* :func:`optimize` - applies candidate configurations **on this machine** and measures each:
  the router's plan, a sweep of backend x precision over the available backends whose
  capabilities fit (precisions the target does not run are listed, not measured), and the
  compressions of :mod:`edgeprof.optimize.compression` (magnitude, channel and 2:4 pruning,
  channels-last) on torch eager and on the plan's backend. For each: latency through
  ``measure()`` (for a target that is not the host, the prediction or the uncalibrated
  roofline, labelled so), top-1 accuracy on labelled data and agreement with the fp32
  reference (both measured on the very artifact that was timed), estimated memory
  (weights + peak activations) and measured peak RSS, the energy proxy, and ``accepted``
  against the constraints. The chosen configuration is the fastest accepted one; where it
  differs from the router's plan, the report says how the measurement overruled it.

The loop is assembled from small pieces: :mod:`~edgeprof.optimize.candidates` (what to
measure), :mod:`~edgeprof.optimize.evaluate` (measuring one candidate),
:mod:`~edgeprof.optimize.select` (judging and choosing) and :mod:`~edgeprof.optimize.report`
(the report and its files). Progress (``progress(msg)``) and the re-timing of close
finalists (``retime(finalists)``) are callbacks.

Timing is deliberately short by default (:data:`DEFAULT_RUN_OPTIONS`: at least 30 samples
and 0.3 s per configuration, at most 1.5 s) so that a full run on a small model takes a
couple of minutes; pass ``run_options`` for tighter figures.

Accuracy: built-in models are trained on scikit-learn's digits for a few seconds
(:func:`edgeprof.optimize.accuracy.train_builtin`, cached) and evaluated on its fixed test
split; other models need ``data=file.npz`` (``x``: samples, ``y``: integer labels). Static
int8 is calibrated on the training split's first samples; the accuracy column says what
int8 costs. No heavy framework is imported at module level.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from edgeprof.core.errors import EdgeprofError, OutputError, UserError
from edgeprof.core.results import WarningRecord
from edgeprof.optimize import evaluate as ev
from edgeprof.optimize import select
from edgeprof.optimize.candidates import (COMPRESSIONS, DEFAULT_PRUNE_RATIO, Candidate,
                                          default_candidates, parse_backends,
                                          parse_compressions, plan_candidate, runtime_classes,
                                          wants_pruning)
from edgeprof.optimize.evaluate import (DEFAULT_RUN_OPTIONS, DEFAULT_TRAIN_SECONDS,
                                        FINETUNE_STEPS, predict_prepared)
from edgeprof.optimize.report import (STRATEGY_COLUMNS, CandidateResult, OptimizeReport,
                                      plot_latency_vs_accuracy)
from edgeprof.optimize.select import choose, make_constraints  # noqa: F401 - re-exported

Progress = Callable[[str], None]
#: re-timing callback: gets the finalists, returns those it re-timed (updated in place)
Retime = Callable[[list[CandidateResult]], Any]


def _resolve(model, input_shapes, input_dtypes, batch_size, reg):
    from edgeprof.core.models import resolve_model

    return resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                         batch_size=batch_size, registry=reg)


def _target(target, targets_dir=None, plugins=None, recalibrate=False):
    if isinstance(target, str):
        from edgeprof.targets import get_target_registry

        return get_target_registry(targets_dir, plugins).get(target, recalibrate=recalibrate)
    return target


# -------------------------------------------------------------------------- recommend
def recommend_plan(model: Any, target: Any = "host", *, latency_budget_ms: float | None = None,
                   memory_budget_mb: float | None = None, max_accuracy_drop: float = 1.0,
                   stream_rate_fps: float | None = None, precision: str = "fp32",
                   batch_size: int | None = None, input_shapes: Sequence[Sequence[int]] | None = None,
                   input_dtypes: Sequence[str] | None = None, plugins: Any = None,
                   targets_dir: Any = None, recalibrate: bool = False,
                   threads: int | None = None, calibration: Any = None):
    """The router's ordered plan for ``model`` on ``target`` under the constraints.

    ``threads``: the board threads the plan and its predicted figures are for (default: all
    its big cores; a thread count the board lacks is exit 2); ``calibration``: a calibration
    file (``edgeprof calibrate --measurements``) the figures come from, as ``predict``'s.

    Returns a :class:`~edgeprof.optimize.router.Plan` (``plan.already_met`` when the baseline
    meets every constraint, ``plan.failing`` when even the most aggressive plan does not;
    :func:`edgeprof.optimize.router.check_feasible` turns that into a ConstraintError)."""
    from edgeprof.core.plugins import get_registry

    constraints = make_constraints(latency_budget_ms, memory_budget_mb, max_accuracy_drop,
                                   stream_rate_fps)
    reg = get_registry(plugins)
    tgt = _target(target, targets_dir, plugins, recalibrate)
    cal = None
    if threads is not None or calibration is not None:
        if getattr(tgt, "is_host", False):
            raise UserError("--threads and --calibration are for a board's predicted figures; "
                            "this machine's plan is not predicted (use 'edgeprof optimize' to "
                            "measure here)")
        from edgeprof.profilers.predict.calibration import load_calibration
        from edgeprof.profilers.predict.predictor import check_threads

        check_threads(threads, tgt)  # a thread count the board does not have: exit 2
        cal = load_calibration(calibration) if calibration is not None else None
    handle = _resolve(model, input_shapes, input_dtypes, batch_size, reg)
    return _plan(handle, tgt, constraints, reg, precision, threads=threads, calibration=cal)


def latency_figures(handle: Any, tgt: Any, backends: dict[str, type], *,
                    threads: int | None = None, calibration: Any = None):
    """``latency_of(precision, backend)`` for the router: the board prediction of that
    configuration (:class:`~edgeprof.profilers.predict.config.ConfigPredictor`, the call
    ``edgeprof.predict`` makes: calibrated, else the roofline x the prior, labelled so),
    cached; with backend None, the best figure among the backends that run on the
    target and run that precision. None for this machine (nothing is measured by a plan)."""
    from edgeprof.core.provenance import sort_key
    from edgeprof.optimize.router import LatencyFigure, runs_on_target
    from edgeprof.profilers.predict.config import ConfigPredictor

    if getattr(tgt, "is_host", False):
        return None
    runnable = {n: c for n, c in backends.items() if runs_on_target(c, n, tgt) is None}
    ests: dict[str, Any] = {}
    cache: dict[tuple[str, str | None], Any] = {}

    def figure(precision: str, backend: str | None):
        key = (precision, backend)
        if key in cache:
            return cache[key]
        out = None
        if backend is None:
            figs = [figure(precision, n) for n in runnable]
            figs = [f for f in figs if f is not None]
            out = min(figs, key=lambda f: sort_key(f.provenance, f.value_ms)) if figs else None
        elif backend in runnable and precision in tuple(
                getattr(runnable[backend].capabilities, "precisions", ()) or ()):
            # a user's calibration speaks for the runtimes it measured; the others search
            mine = calibration is not None and any(
                e.get("family") == backend for e in calibration.runtimes.values())
            try:  # the call edgeprof.predict makes: its number under its label
                pred = ConfigPredictor(tgt, backend, precision, threads=threads,
                                       calibration=calibration if mine else None)
            except UserError:  # a configuration predict refuses gets no figure
                pred = None
            if pred is not None:
                if precision not in ests:
                    ests[precision] = pred.estimate(handle)
                p = pred.from_estimate(ests[precision])
                out = LatencyFigure(p.value_ms, p.provenance, p.low_ms, p.high_ms,
                                    basis=f"{backend} {precision}, {p.method}"
                                          + (f" by {p.calibration}" if p.calibration else ""),
                                    backend=backend)
        cache[key] = out
        return out

    return figure


def _plan(handle: Any, tgt: Any, constraints: Any, reg: Any, precision: str = "fp32", *,
          threads: int | None = None, calibration: Any = None):
    from edgeprof.optimize.router import recommend
    from edgeprof.profilers.estimate.analytic import estimate_model

    est = estimate_model(handle, tgt, precision)
    # the runtimes the board's processors run, prediction-only families included (labelled)
    backends = runtime_classes(reg)
    figures_threads = threads
    if figures_threads is None and calibration is not None:
        from edgeprof.profilers.predict.threads import big_cores

        # the plan's threads step is all the board's cores: so are its figures, not the
        # thread count the calibration's rows ran (a thread transfer, labelled so)
        figures_threads = big_cores(tgt)
    return recommend(est, tgt, constraints, backends=backends, rules=reg, threads=threads,
                     latency_of=latency_figures(handle, tgt, backends,
                                                threads=figures_threads,
                                                calibration=calibration))


# --------------------------------------------------------------------------- optimize
def optimize(model: Any, target: Any = "host", *, latency_budget_ms: float | None = None,
             memory_budget_mb: float | None = None, max_accuracy_drop: float = 1.0,
             stream_rate_fps: float | None = None, min_accuracy_ratio: float | None = None,
             data: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
             run_options: dict[str, Any] | None = None,
             candidates: Sequence[Any] | None = None, backends: Sequence[str] | str | None = None,
             compressions: Sequence[str] | str = COMPRESSIONS,
             prune_ratio: float = DEFAULT_PRUNE_RATIO,
             train_seconds: float = DEFAULT_TRAIN_SECONDS,
             finetune_steps: int = FINETUNE_STEPS, batch_size: int | None = None,
             input_shapes: Sequence[Sequence[int]] | None = None,
             input_dtypes: Sequence[str] | None = None, plugins: Any = None,
             targets_dir: Any = None, progress: Progress | None = None,
             recalibrate: bool = False, retime: Retime | None = None) -> OptimizeReport:
    """Measure candidate configurations of ``model`` on this host, judge each against the
    constraints for ``target``, and choose the fastest accepted one (see the module
    docstring). ``candidates`` replaces the default list (Candidate objects, dicts or
    ``"backend:precision[:method+method]"`` strings). Writes the artifacts to ``out`` when
    given. Returns the report whatever the outcome: ``report.exit_code`` is 4 when no
    candidate meets the constraints (``report.raise_for_constraints()`` raises then).

    Callbacks: ``progress(msg)`` gets a line per step (training, planning, each measurement
    and re-timing, writing); ``retime(finalists)`` gets the accepted results close to the
    fastest before the choice, may update their figures and judgement in place, and returns
    those it re-timed (the verdict's ``retimed``). Default: time them again, longer and
    interleaved, and re-judge them."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.environment import host_info

    t_start = time.perf_counter()
    say = progress or (lambda msg: None)
    constraints = make_constraints(latency_budget_ms, memory_budget_mb, max_accuracy_drop,
                                   stream_rate_fps)
    min_ratio = select.min_accuracy_ratio(min_accuracy_ratio)
    backends = parse_backends(backends)
    compressions = parse_compressions(compressions)
    reg = get_registry(plugins)
    for b in backends or ():
        reg.backend(b)  # unknown names: one line, exit 2
    opts = ev.check_run_options(run_options)
    tgt = _target(target, targets_dir, plugins, recalibrate)
    handle = _resolve(model, input_shapes, input_dtypes, batch_size, reg)
    parsed = [Candidate.parse(c) for c in candidates] if candidates is not None else None

    # -- data and the fp32 reference ------------------------------------------------------
    labelled = ev.prepare_data(handle, data=data, train_seconds=train_seconds,
                            finetune_steps=finetune_steps,
                            prunes=wants_pruning(parsed, compressions), on_progress=say)
    handle, dataset = labelled.handle, labelled.dataset
    warnings: list[WarningRecord] = []
    host_t = tgt if getattr(tgt, "is_host", False) else None
    if host_t is None:
        say("calibrating host (cached after the first run)")
        try:
            host_t = _target("host", targets_dir, plugins, recalibrate)
        except EdgeprofError as e:
            warnings.append(WarningRecord("host_uncalibrated", f"host calibration failed: {e}; "
                                          "target latency cannot be estimated"))
    ref = ev.reference_logits(reg, handle, dataset)

    # -- the router's plan, then every candidate measured ---------------------------------
    say("planning")
    plan = _plan(handle, tgt, constraints, reg)
    if parsed is None:
        parsed = default_candidates(plan, reg, handle, tgt, backends=backends,
                                    compressions=compressions, ratio=prune_ratio)
    ctx = ev.EvalContext(reg, handle, tgt, host_t, constraints, dataset, ref.logits,
                         ref.accuracy, min_ratio, opts, say, finetune_steps=finetune_steps,
                         prune_source=labelled.prune_source, plugins=plugins)
    with ev.quiet_root_logger():
        results = [ev.measure_candidate(ctx, c) for c in parsed]

    # -- judge and choose -------------------------------------------------------------------
    decision = _decide(ctx, results, plan, ref.backend,
                       retime if retime is not None else ev.make_retimer(ctx))
    report = OptimizeReport(
        model={**handle.to_dict(), "training": labelled.training}, target=tgt,
        host=host_info(host_t), constraints=constraints, plan=plan, candidates=results,
        reference=ref.to_dict(), dataset=dataset.to_dict(), run_options=opts,
        warnings=warnings + decision.pop("warnings"), **decision)
    report.elapsed_s = time.perf_counter() - t_start
    if out is not None:
        say(f"writing artifacts to {out}")
        try:
            report.save(out)
        except OutputError as e:  # the CLI still prints what was measured
            e.result = report
            raise
    return report


def _decide(ctx: Any, results: list[CandidateResult], plan: Any, ref_backend: str | None,
            retime: Retime) -> dict[str, Any]:
    """Re-time the finalists, choose, and explain the choice: the report's chosen,
    plan_result, overruled, verdict and (plan and noise) warnings."""
    pc = plan_candidate(plan, ctx.reg)
    plan_res = next((r for r in results if pc is not None and r.candidate.same_config(pc)),
                    None)
    base = next((r for r in results if r.candidate.backend == ref_backend
                 and r.candidate.precision == "fp32" and not r.candidate.compression), None)
    retimed = select.retime_finalists(results, retime)
    chosen, tied = select.choose(results)
    verdict = select.verdict(results, chosen, ctx, base, plan, retimed=retimed, tied=tied)
    warnings = list(plan.warnings) if plan is not None and plan.warnings else []
    noisy = select.noisy_warning(results)
    if noisy is not None:
        warnings.append(noisy)
    return {"chosen": chosen, "plan_result": plan_res, "verdict": verdict,
            "overruled": select.overruled(plan_res, chosen), "warnings": warnings}


__all__ = ["COMPRESSIONS", "Candidate", "CandidateResult", "DEFAULT_RUN_OPTIONS",
           "OptimizeReport", "default_candidates", "make_constraints", "optimize",
           "plan_candidate", "plot_latency_vs_accuracy", "predict_prepared", "recommend_plan",
           "STRATEGY_COLUMNS", "choose"]

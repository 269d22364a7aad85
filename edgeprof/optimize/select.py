"""Judging and choosing among measured candidates.

* :func:`make_constraints` - the router's constraints from user units; :func:`judge` -
  ``accepted`` and, where not, which constraints fail (named as the router names them);
* :func:`finalists` / :func:`retime_finalists` - the accepted candidates close to the fastest,
  handed to a ``retime`` callback before the choice (short first-pass timings misorder close
  candidates on a busy host);
* :func:`choose` - the fastest accepted candidate, the simplest among those within noise;
* :func:`overruled` and :func:`verdict` - where the measurement disagreed with the router's
  plan, and the verdict in words and as data.

Nothing here measures: results come in, decisions go out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edgeprof.core.errors import UserError
from edgeprof.core.results import WarningRecord

if TYPE_CHECKING:
    from edgeprof.optimize.report import CandidateResult

#: ties: a difference below this fraction of the latency is within noise on a busy machine
TIE_FRACTION = 0.05
#: before choosing, the accepted candidates within this factor of the fastest are timed again
#: (at most RETIME_MAX of them)
RETIME_WITHIN = 1.5
RETIME_MAX = 4


# ------------------------------------------------------------------------- constraints
def make_constraints(latency_budget_ms: float | None = None,
                     memory_budget_mb: float | None = None,
                     max_accuracy_drop: float | None = 1.0,
                     stream_rate_fps: float | None = None):
    """The router's :class:`~edgeprof.optimize.router.Constraints` from user units (MB decimal)."""
    from edgeprof.optimize.router import Constraints

    if memory_budget_mb is not None and (isinstance(memory_budget_mb, bool) or not isinstance(
            memory_budget_mb, (int, float)) or not memory_budget_mb > 0):
        raise UserError(f"memory budget must be a positive number of MB, got {memory_budget_mb!r}")
    return Constraints(latency_budget_ms=latency_budget_ms,
                       memory_budget_bytes=None if memory_budget_mb is None
                       else float(memory_budget_mb) * 1e6,
                       max_accuracy_drop=1.0 if max_accuracy_drop is None else max_accuracy_drop,
                       stream_rate_fps=stream_rate_fps)


def min_accuracy_ratio(value: float | None) -> float:
    """The accuracy ratio a candidate must keep (the accuracy module's default for None)."""
    from edgeprof.optimize.accuracy import DEFAULT_MIN_RATIO

    ratio = DEFAULT_MIN_RATIO if value is None else float(value)
    if not 0 <= ratio <= 1:
        raise UserError(f"min_accuracy_ratio must be in [0, 1], got {value!r}")
    return ratio


def judge(ctx: Any, res: CandidateResult, est: Any) -> None:
    """``accepted`` and, where not, which constraints fail and why (names as the router's).
    ``ctx`` carries constraints, min_ratio, ref_accuracy and target."""
    c = ctx.constraints
    fails: dict[str, str] = {}
    prov = res.latency_provenance or "measured"
    if res.accuracy is None:
        fails["max_accuracy_drop"] = res.accuracy_reason or "accuracy not measured"
    else:
        if res.accuracy_ratio is not None and res.accuracy_ratio < ctx.min_ratio:
            fails["min_accuracy_ratio"] = (f"accuracy {res.accuracy:.4f} is "
                                           f"{res.accuracy_ratio:.2%} of fp32's "
                                           f"{ctx.ref_accuracy:.4f} (needs {ctx.min_ratio:.0%})")
        if res.accuracy_drop_pp is not None and \
                res.accuracy_drop_pp > c.max_accuracy_drop + 1e-9:
            fails["max_accuracy_drop"] = (f"drop {res.accuracy_drop_pp:.2f} pp > "
                                          f"{c.max_accuracy_drop:g} pp")
    if res.latency_ms is None:
        if c.latency_budget_ms is not None or c.stream_rate_fps is not None:
            fails["latency_budget_ms"] = "no latency for the target"
    else:
        if c.latency_budget_ms is not None:
            from edgeprof.core.provenance import budget_verdict

            v = budget_verdict(res.latency_ms, c.latency_budget_ms, prov,
                               low_ms=res.latency_low_ms, high_ms=res.latency_high_ms)
            res.latency_verdict = v.text
            if v.met is not True:
                fails["latency_budget_ms"] = v.text
        if c.stream_rate_fps is not None:
            rate = est.batch_size * 1e3 / res.latency_ms if res.latency_ms > 0 else float("inf")
            if rate < c.stream_rate_fps:
                fails["stream_rate_fps"] = (f"{rate:.4g} inferences/s ({prov}) < stream rate "
                                            f"{c.stream_rate_fps:g} fps")
    if c.memory_budget_bytes is not None and res.memory_bytes is not None \
            and res.memory_bytes > c.memory_budget_bytes:
        fails["memory_budget_bytes"] = (f"{res.memory_bytes / 1e6:.4g} MB (estimated weights + "
                                        f"peak activations) > budget "
                                        f"{c.memory_budget_bytes / 1e6:g} MB")
    cap = getattr(est, "memory_capacity", None) or {}
    if isinstance(cap, dict) and cap.get("fits") is False:
        fails["device_memory"] = f"does not fit {ctx.target.id}: {cap.get('message', '')}"
    res.failing = fails
    res.accepted = not fails


# ------------------------------------------------------------------------- re-timing
def finalists(results: list[CandidateResult]) -> list[CandidateResult]:
    """The accepted candidates within :data:`RETIME_WITHIN` of the fastest (at most
    :data:`RETIME_MAX`, fastest first); empty unless there are at least two to order."""
    accepted = [r for r in results if r.ok and r.accepted and r.latency_ms]
    if len(accepted) < 2:
        return []
    fastest = min(r.latency_ms for r in accepted)
    out = sorted((r for r in accepted if r.latency_ms <= fastest * RETIME_WITHIN),
                 key=lambda r: r.latency_ms)[:RETIME_MAX]
    return out if len(out) >= 2 else []


def retime_finalists(results: list[CandidateResult],
                     retime: Callable[[list[CandidateResult]], Any] | None) -> list[str]:
    """Hand the :func:`finalists` to ``retime``, which times them again, updates their
    figures and re-judges them in place, and returns those it re-timed (None: none).
    Returns their labels (empty where there are no finalists or ``retime`` is None)."""
    chosen = finalists(results)
    if not chosen or retime is None:
        return []
    return [r.candidate.label for r in retime(chosen) or ()]


# ---------------------------------------------------------------------------- choice
def choose(results: list[CandidateResult]
           ) -> tuple[CandidateResult | None, list[CandidateResult]]:
    """The fastest accepted candidate among those with the best-founded figure (measured,
    then predicted, then uncalibrated: :mod:`edgeprof.core.provenance`; a faster guess does
    not outrank a calibrated prediction). Differences within :data:`TIE_FRACTION` of the
    fastest are noise on a busy machine; among those the simplest wins (fewest compression
    steps, then the higher accuracy, then the lower latency). Returns (chosen, the faster
    candidates it was preferred to)."""
    from edgeprof.core.provenance import rank

    accepted = [r for r in results if r.ok and r.accepted]
    if not accepted:
        return None, []
    best_tier = min(rank(r.latency_provenance) for r in accepted)
    accepted = [r for r in accepted if rank(r.latency_provenance) == best_tier]
    fastest = min(r.latency_ms for r in accepted)
    near = [r for r in accepted if r.latency_ms <= fastest * (1 + TIE_FRACTION)]
    chosen = min(near, key=lambda r: (len(r.candidate.compression), -(r.accuracy or 0.0),
                                      r.latency_ms))
    return chosen, [r for r in near if r.latency_ms < chosen.latency_ms]


def overruled(plan_res: CandidateResult | None, chosen: CandidateResult | None
              ) -> list[dict[str, Any]]:
    """Where the measurement disagreed with the router's plan, in words and as data."""
    if plan_res is None:
        return []
    pc = plan_res.candidate
    out: list[dict[str, Any]] = []
    if not plan_res.ok:
        out.append({"kind": "plan_could_not_run", "plan": pc.label,
                    "message": f"the router's plan ({pc.label}) could not run here: "
                               f"{plan_res.status}: {plan_res.reason}"})
    elif not plan_res.accepted:
        out.append({"kind": "plan_rejected", "plan": pc.label, "failing": plan_res.failing,
                    "message": f"the router's plan ({pc.label}) was measured and fails "
                               + "; ".join(f"{k} ({v})" for k, v in plan_res.failing.items())})
    if chosen is None or chosen.candidate.same_config(pc):
        return out
    cc = chosen.candidate
    diffs = [{"field": name, "router": a, "measured": b}
             for name, a, b in (("backend", pc.backend, cc.backend),
                                ("precision", pc.precision, cc.precision),
                                ("compression", pc.model_key, cc.model_key)) if a != b]
    if plan_res.ok and plan_res.accepted and plan_res.latency_ms and chosen.latency_ms:
        ratio = plan_res.latency_ms / chosen.latency_ms
        tie = abs(1 - chosen.latency_ms / plan_res.latency_ms) < TIE_FRACTION
        # each figure under its own provenance: a board's predictions are not measurements
        cp, pp = chosen.latency_provenance or "measured", plan_res.latency_provenance or \
            "measured"
        if cp == pp:
            msg = (f"the router said {pc.label}, but {cc.label} {cp} faster: "
                   f"{chosen.latency_ms:.4g} ms vs {plan_res.latency_ms:.4g} ms")
        else:
            msg = (f"the router said {pc.label}, but {cc.label} is faster: "
                   f"{chosen.latency_ms:.4g} ms ({cp}) vs {plan_res.latency_ms:.4g} ms ({pp})")
        msg += f" ({ratio:.2f}x{', within noise' if tie else ''}), both accepted"
        out.append({"kind": "faster_alternative", "plan": pc.label, "chosen": cc.label,
                    "differences": diffs, "plan_latency_ms": plan_res.latency_ms,
                    "plan_provenance": pp, "chosen_latency_ms": chosen.latency_ms,
                    "chosen_provenance": cp, "speedup": ratio,
                    "within_noise": tie, "message": msg})
    else:
        out.append({"kind": "replaced", "plan": pc.label, "chosen": cc.label,
                    "differences": diffs,
                    "message": f"chose {cc.label} instead of the router's {pc.label} "
                               f"(" + ", ".join(f"{d['field']} {d['router']} -> {d['measured']}"
                                                for d in diffs) + ")"})
    return out


def verdict(results: list[CandidateResult], chosen: CandidateResult | None, ctx: Any,
            baseline: CandidateResult | None, plan: Any, *, retimed: list[str] = (),
            tied: list[CandidateResult] = ()) -> dict[str, Any]:
    """The verdict as data, with its ``message``: the chosen candidate (its speed-up over
    the baseline, the faster ones within noise it was preferred to), or what fails and the
    closest candidate. ``ctx`` carries min_ratio and target."""
    v = _verdict(results, chosen, ctx, baseline, plan)
    v["retimed"] = list(retimed)
    if tied:
        v["within_noise_of_fastest"] = [r.candidate.label for r in tied]
        v["message"] += (f" (within {TIE_FRACTION:.0%} of the fastest accepted, "
                         f"{tied[0].candidate.label}: the simplest of those is chosen)")
    return v


def _verdict(results: list[CandidateResult], chosen: CandidateResult | None, ctx: Any,
             baseline: CandidateResult | None, plan: Any) -> dict[str, Any]:
    v: dict[str, Any] = {"min_accuracy_ratio": ctx.min_ratio,
                         "measured": sum(r.ok for r in results), "candidates": len(results),
                         "accepted": sum(r.accepted for r in results)}
    on_host = bool(getattr(ctx.target, "is_host", False))

    def prov(r: CandidateResult) -> str:  # the figure's own provenance, for whom
        p = r.latency_provenance or "measured"
        return p if on_host else f"{p} for {ctx.target.id}"

    if baseline is not None and baseline.ok:
        v["baseline"] = baseline.candidate.label
        v["baseline_latency_ms"] = baseline.latency_ms
        v["baseline_meets_constraints"] = baseline.accepted
    if chosen is not None:
        speed = (baseline.latency_ms / chosen.latency_ms) if baseline is not None and \
            baseline.ok and chosen.latency_ms else None
        v.update(status="ok", chosen=chosen.candidate.label, latency_ms=chosen.latency_ms,
                 latency_provenance=chosen.latency_provenance, accuracy=chosen.accuracy,
                 speedup_vs_baseline=speed)
        msg = (f"Chosen: {chosen.candidate.label} - {chosen.latency_ms:.4g} ms ({prov(chosen)}), "
               f"accuracy {chosen.accuracy:.4f} (drop {chosen.accuracy_drop_pp:.2f} pp), "
               f"{(chosen.memory_bytes or 0) / 1e6:.3g} MB estimated")
        if speed:
            msg += f"; {speed:.2f}x the {baseline.candidate.label} baseline"
        if baseline is not None and baseline.accepted and plan is not None and plan.already_met:
            msg += ("; the baseline already meets the constraints (the router said so too), "
                    "so this is an improvement, not a necessity")
        v["message"] = msg
        return v
    measured = [r for r in results if r.ok]
    closest = min(measured, key=lambda r: (len(r.failing), r.latency_ms), default=None)
    v.update(status="constraints_not_met",
             failing_counts=dict(Counter(k for r in results for k in r.failing)),
             closest=closest.candidate.label if closest else None,
             closest_failing=closest.failing if closest else None)
    if closest is None:
        v["message"] = ("no candidate produced a measurement on this host; see each row's "
                        "reason")
        return v
    binding = [k for k in closest.failing if all(k in r.failing for r in measured)]
    first = (binding or list(closest.failing) or ["constraints"])[0]
    v["binding"] = binding
    acc = "-" if closest.accuracy is None else f"{closest.accuracy:.4f}"
    v["message"] = (f"no candidate meets every constraint: {first} fails "
                    f"({closest.failing.get(first, '')}); closest: {closest.candidate.label} at "
                    f"{closest.latency_ms:.4g} ms ({prov(closest)}), accuracy {acc}"
                    + (f"; it also fails {', '.join(k for k in closest.failing if k != first)}"
                       if len(closest.failing) > 1 else "")
                    + (f"; every measured candidate fails {', '.join(binding)}"
                       if binding else ""))
    return v


def noisy_warning(results: list[CandidateResult]) -> WarningRecord | None:
    """A warning where the harness flagged measurements as disturbed (busy machine, high
    spread): small latency differences between those are not to be trusted."""
    noisy = [r.candidate.label for r in results
             if any(w.get("code") in ("machine_busy", "high_cv") for w in r.warnings)]
    if not noisy:
        return None
    return WarningRecord(
        "noisy_measurements",
        f"{len(noisy)} of {sum(r.ok for r in results)} measurements were flagged by the "
        "harness (machine_busy or high_cv): latencies on a busy machine can be inflated; "
        "rerun with longer --min-time or on an idle machine before trusting small "
        "differences")


__all__ = ["RETIME_MAX", "RETIME_WITHIN", "TIE_FRACTION", "choose", "finalists", "judge",
           "make_constraints", "min_accuracy_ratio", "noisy_warning", "overruled",
           "retime_finalists", "verdict"]

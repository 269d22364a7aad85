"""Leave-one-out: each sample predicted by a fit to the others, through the prediction path
(:func:`leave_one_out`); the intervals' sigmas from those errors (:func:`attach_cv`); the
per-board accuracy table and the interval report against the goal (:func:`cv_table`,
:func:`interval_report`)."""

from __future__ import annotations

import math
from typing import Any, Callable

from edgeprof.profilers.predict.llm.constants import (ESTIMATE_MIN_SPREAD,
                                                      EXTRAPOLATION_SIGMA, INTERVAL_GOAL,
                                                      MAX_SPREAD, POOLED_WEIGHT,
                                                      PRIOR_SPREAD_ROWS, Z80)
from edgeprof.profilers.predict.llm.core import core_entry, stage_sigma
from edgeprof.profilers.predict.llm.fit import era_of, median_of, fit_entries, fit_prior
from edgeprof.profilers.predict.llm.inputs import registry_target


def _rate_of(core: dict[str, Any], s: dict[str, Any]) -> float:
    return 1.0 / core["t_dec"] if s["stage"] == "decode" else s["prompt_tokens"] / core["t_pre"]


def _sample_board(s: dict[str, Any]) -> dict[str, Any]:
    return {"id": s.get("target_id", s["target"]), "base_id": s["target"],
            "mode": s.get("mode"), "device": s["device"], "kind": s.get("kind", "cpu"),
            "bandwidth": s["peak_bandwidth"], "peaks": {s["precision"]: s["peak_macs"]},
            "cores": s.get("cores") or 1, "core_type": s.get("core_type"),
            "n_ref": s.get("n_ref"), "big_share": 1.0,
            "little_ratio": s.get("little_ratio", 0.0)}


def _predict_sample(cal: dict[str, Any], s: dict[str, Any]
                    ) -> tuple[float, str, dict[str, Any]]:
    n = dict(s)
    n["format_compute"] = s["precision"]
    c = core_entry(cal, n, _sample_board(s), s["runtime"], threads=s.get("threads"),
                   era=era_of(s))
    return _rate_of(c, s), c["prov"][s["stage"]], c


def fit_all(samples: list[dict[str, Any]], *, per_runtime: bool, targets=None,
             prior: dict[str, Any] | None = None) -> dict[str, Any]:
    entries = fit_entries(samples, per_runtime=per_runtime, targets=targets)
    return {"entries": entries,
            "prior": dict(prior) if prior is not None else fit_prior(entries)}


def leave_one_out(samples: list[dict[str, Any]], *, per_runtime: bool = False, targets=None,
                  prior: dict[str, Any] | None = None, nested: bool = True,
                  group: Callable[[dict[str, Any]], Any] | None = None
                  ) -> list[dict[str, Any]]:
    """Each sample predicted by a fit to all the others (prior included, unless one is
    given), through the prediction path. ``nested``: the held-out row's interval is the one
    that fit states (its sigmas from a leave-one-out of the others), so coverage is honest.
    ``targets``: the samples' targets by id (default: read from the registry once, here, not
    in each of the n^2 refits). ``group``: rows of one key are held out together (the
    published rows: ``same_measurement`` of tools/build_llm_calibration.py); None: each
    row alone."""
    if targets is None:
        targets = {tid: registry_target(tid) for tid in sorted({s["target"] for s in samples})}
    out = []
    for i, s in enumerate(samples):
        if group is None:
            rest = samples[:i] + samples[i + 1:]
        else:
            key = group(s)
            rest = [x for j, x in enumerate(samples) if j != i and group(x) != key]
        cal = fit_all(rest, per_runtime=per_runtime, targets=targets, prior=prior)
        if nested and len(rest) > 1:
            attach_cv(cal, leave_one_out(rest, per_runtime=per_runtime, targets=targets,
                                         prior=prior, nested=False, group=group))
        pred, prov, c = _predict_sample(cal, s)
        r = {"id": s["id"], "target": s["target"], "device": s["device"],
             "runtime": s["runtime"], "stage": s["stage"], "model": s.get("model"),
             "format": s.get("format"), "build": (s.get("build") or {}).get("label"),
             "threads": s.get("threads"), "mode": s.get("mode"),
             "measured": s["rate"], "predicted": pred, "provenance": prov,
             "estimated_from": c["source"][s["stage"]],
             "extrapolations": [k for k, _ in c["why"][s["stage"]]],
             "error": pred / s["rate"] - 1.0, "log_error": math.log(pred / s["rate"])}
        if nested:
            sigma, _ = stage_sigma(cal, c, s["stage"])
            f = min(math.exp(Z80 * sigma), MAX_SPREAD)
            r.update(low=pred / f, high=pred * f, width=f * f,
                     covered=pred / f <= s["rate"] <= pred * f)
        out.append(r)
    return out


def _rms(xs: list[float]) -> float:
    return math.sqrt(sum(x * x for x in xs) / len(xs)) if xs else 0.0


def attach_cv(cal: dict[str, Any], loo: list[dict[str, Any]]) -> None:
    """The intervals' sigmas from leave-one-out log errors, per stage:

    * per (entry, stage), of predictions inside what the rows covered (held-out rows
      predicted by a calibration with no extrapolation): its own RMS shrunk towards the
      pooled one (``sqrt((n own^2 + POOLED_WEIGHT pooled^2) / (n + POOLED_WEIGHT))``);
    * per kind of extrapolation (another runtime, build era, model size, mode, precision,
      thread count): the excess of the held-out rows that made it over the in-coverage
      sigma, shared among a row's extrapolations (``mean((e^2 - pooled^2) / k)``), never
      below :data:`EXTRAPOLATION_SIGMA` (the prior of a kind no held-out row made);
    * the prior's spread from the rows the prior predicted."""
    from edgeprof.profilers.predict.fit import pooled_sigma  # the boards' rule (numpy)

    def inside(r: dict[str, Any]) -> bool:
        return r["provenance"] == "predicted" and not r.get("extrapolations")

    pooled: dict[str, float] = {}
    pooled_from: dict[str, str] = {}
    for st in ("decode", "prefill"):
        rows = [r["log_error"] for r in loo if r["stage"] == st and inside(r)]
        if rows:
            pooled[st], pooled_from[st] = _rms(rows), f"{len(rows)} held-out {st} rows"
    for st in ("decode", "prefill"):
        if st not in pooled:
            # no held-out row of this stage was predicted inside its rows' coverage (each
            # was another build, runtime or board): the other stage's, else the prior
            other = "prefill" if st == "decode" else "decode"
            if other in pooled:
                pooled[st], pooled_from[st] = pooled[other], f"borrowed from {other}"
            else:
                pooled[st], pooled_from[st] = EXTRAPOLATION_SIGMA, "prior"
    for key, e in cal["entries"].items():
        for st in ("decode", "prefill"):
            if not e[st]:
                continue
            own = [r["log_error"] for r in loo if f"{r['target']}/{r['device']}" == key
                   and r["stage"] == st and inside(r)]
            k = len(own)
            e[st]["sigma"] = pooled_sigma(_rms(own), k, pooled[st], POOLED_WEIGHT)
            e[st]["sigma_own"] = _rms(own) if own else None
            e[st]["sigma_rows"] = k
            e[st]["sigma_pooled"] = pooled[st]
            e[st]["sigma_pooled_from"] = pooled_from[st]
            # a runtime's own spread where the board's rows are of several runtimes and its
            # own held-out rows are two or more (RKLLM and a llama.cpp fork on one NPU are not
            # one spread), shrunk towards the board's
            rts = (e[st].get("runtimes") or {})
            for rt, r in rts.items():
                r.pop("sigma", None)
                r.pop("sigma_rows", None)
                mine = [x["log_error"] for x in loo if f"{x['target']}/{x['device']}" == key
                        and x["stage"] == st and x["runtime"] == rt and inside(x)]
                if len(rts) >= 2 and len(mine) >= 2:
                    r["sigma"] = pooled_sigma(_rms(mine), len(mine), e[st]["sigma"],
                                              POOLED_WEIGHT)
                    r["sigma_rows"] = len(mine)
    ex: dict[str, dict[str, Any]] = {}
    for st in ("decode", "prefill"):
        ex[st] = {}
        rows = [r for r in loo if r["stage"] == st and r["provenance"] == "predicted"
                and r.get("extrapolations")]
        for kind in ("runtime", "build", "size", "precision", "mode", "threads"):
            mine = [r for r in rows if kind in r["extrapolations"]]
            if not mine:
                ex[st][kind] = {"sigma": EXTRAPOLATION_SIGMA, "n": 0, "fitted": False}
                continue
            excess = [(r["log_error"] ** 2 - pooled[st] ** 2) / len(r["extrapolations"])
                      for r in mine]
            sig = math.sqrt(max(EXTRAPOLATION_SIGMA ** 2, sum(excess) / len(excess)))
            ex[st][kind] = {"sigma": sig, "n": len(mine), "fitted": True}
    cal["extrapolation_sigma"] = ex
    by_prior = [r["log_error"] for r in loo if r["provenance"] == "estimated"
                and not r.get("estimated_from")]
    if by_prior:  # measured where enough rows show it, else the widest interval
        cal["prior"]["spread"] = min(MAX_SPREAD, max(ESTIMATE_MIN_SPREAD,
                                                     math.exp(Z80 * _rms(by_prior)))) \
            if len(by_prior) >= PRIOR_SPREAD_ROWS else MAX_SPREAD
        cal["prior"]["spread_uncapped"] = math.exp(Z80 * _rms(by_prior))
        cal["prior"]["spread_n"] = len(by_prior)


def _within(stage: str) -> float:
    return 0.25 if stage == "decode" else 0.50


def _summary(rows: list[dict[str, Any]], name: str, stage: str | None) -> dict[str, Any]:
    errs = [abs(r["error"]) for r in rows]
    out = {"board": name, "stage": stage or "all", "n": len(rows),
           "median_abs_error": median_of(errs),
           "within_25": sum(x <= 0.25 for x in errs) / len(errs),
           "within_50": sum(x <= 0.50 for x in errs) / len(errs)}
    if stage:
        out["within"] = sum(x <= _within(stage) for x in errs) / len(errs)
        out["within_bound"] = _within(stage)
    iv = [r for r in rows if "covered" in r]
    if iv:
        out["coverage"] = sum(bool(r["covered"]) for r in iv) / len(iv)
        out["median_width"] = median_of([r["width"] for r in iv])
    return out


def cv_table(loo: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (target/device, stage), per stage over all boards, and overall: median
    |pred/meas - 1|, the share within +-25 % (decode) / +-50 % (prefill), interval coverage
    and median width (high/low) where the leave-one-out was nested."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in loo:
        groups.setdefault((f"{r['target']}/{r['device']}", r["stage"]), []).append(r)
    rows = [_summary(v, k[0], k[1]) for k, v in sorted(groups.items())]
    for st in ("decode", "prefill"):
        mine = [r for r in loo if r["stage"] == st]
        if mine:
            rows.append(_summary(mine, "all", st))
    rows.append(_summary(loo, "all", None))
    return rows


def interval_report(loo: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage and median width of the nested leave-one-out intervals, per stage and
    overall, against :data:`INTERVAL_GOAL`, with why a stage misses it."""
    out: dict[str, Any] = {"goal": dict(INTERVAL_GOAL), "method": (
        "nested leave-one-out: each row's interval is the one a fit without it states")}
    for st in ("decode", "prefill", "all"):
        rows = [r for r in loo if "covered" in r and (st == "all" or r["stage"] == st)]
        if not rows:
            continue
        cov = sum(bool(r["covered"]) for r in rows) / len(rows)
        width = median_of([r["width"] for r in rows])
        why = []
        if cov < INTERVAL_GOAL["coverage"]:
            bad = [r for r in rows if not r["covered"]]
            why.append(f"{len(bad)} of {len(rows)} held-out rows fell outside: "
                       + ", ".join(sorted({r["target"] + "/" + r["device"] for r in bad})))
        if width > INTERVAL_GOAL["median_width"]:
            est = sum(r["provenance"] == "estimated" for r in rows)
            ext = sum(r["provenance"] == "predicted" and bool(r.get("extrapolations"))
                      for r in rows)
            kinds = sorted({k for r in rows for k in r.get("extrapolations") or []})
            wide = {}
            for r in rows:
                wide.setdefault(f"{r['target']}/{r['device']}", []).append(r["width"])
            wide = sorted(((median_of(v), k) for k, v in wide.items()
                           if median_of(v) > INTERVAL_GOAL["median_width"]), reverse=True)
            why.append(f"median width {width:.1f}x: of {len(rows)} held-out rows, {est} had no "
                       "other row of that stage on their board's processor (estimated, from "
                       "the prior, another processor of the board or a board of the same "
                       f"core) and {ext} were predicted outside what the "
                       f"other rows covered ({', '.join(kinds) or '-'})"
                       + ("; boards wider than the goal: " + ", ".join(
                           f"{k} {w:.1f}x" for w, k in wide) if wide else ""))
        out[st] = {"n": len(rows), "coverage": cov, "median_width": width,
                   "meets_goal": cov >= INTERVAL_GOAL["coverage"]
                   and width <= INTERVAL_GOAL["median_width"], "why": why}
    return out

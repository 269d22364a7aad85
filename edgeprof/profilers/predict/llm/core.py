"""The prediction core: one stage's parameters for a runtime and build era, from the board's
own fit, another processor of the board (decode), a board of the same core or the prior
(with the ways the prediction leaves what the rows covered), the times they give
(:func:`core_entry`), and the interval's sigma (:func:`stage_sigma`,
:func:`stage_interval`)."""

from __future__ import annotations

import math
from typing import Any

from edgeprof.profilers.predict.llm.constants import (CORE_TRANSFER_SIGMA,
                                                      DEVICE_TRANSFER_SIGMA,
                                                      ESTIMATE_MIN_SPREAD,
                                                      EXTRAPOLATION_SIGMA, MAX_SPREAD,
                                                      SIGMA_FLOOR, SIZE_SPAN, Z80)
from edgeprof.profilers.predict.llm.fit import thread_param
from edgeprof.profilers.predict.llm.inputs import (compute_precision, decode_speed,
                                                   prefill_speed)


def _why_size(stage: str, fit: dict[str, Any], n: dict[str, Any],
              runtime: str | None = None) -> str | None:
    """Why the model's size is outside what the rows covered: the runtime's own rows where
    the fit records their range (its level, and its overhead where identified, come from
    them), else the board's."""
    # the stage's size: (range key, the estimate's figure, scale, what it is, unit)
    key, x, scale, what, unit = (("bytes_range", n["decode_bytes_per_token"], 1e6, "per token",
                                  "MB") if stage == "decode" else
                                 ("macs_range", n["prefill_macs"], 1e9, "for the prompt",
                                  "GMAC"))
    rp = (fit.get("runtimes") or {}).get(runtime) or {}
    whose = f"{runtime} rows'" if rp.get(key) else "rows'"
    lo, hi = rp.get(key) or fit.get(key) or (0.0, math.inf)
    if lo / SIZE_SPAN <= x <= hi * SIZE_SPAN:
        return None
    return (f"{x / scale:.0f} {unit} {what} is outside the {whose} {lo / scale:.0f}-"
            f"{hi / scale:.0f} {unit}")


def _params(fit: dict[str, Any], stage: str, runtime: str, era: str | None
            ) -> tuple[dict[str, Any], list[str], str]:
    """(parameters, reasons, what was used) of a stage fit for (runtime, era)."""
    why: list[tuple[str, str]] = []
    rp = fit["runtimes"].get(runtime)
    if rp is None:
        why.append(("runtime", f"runtime {runtime} has no {stage} rows on this board (runtimes "
                               f"{', '.join(fit['runtimes'])}): the board's base"))
        p = dict(fit["base"])
        if stage == "decode":
            p.setdefault("per_layer_s", fit["base"]["per_layer_s"])
        return p, why, "board base"
    p = {k: rp[k] for k in (("bandwidth_fraction", "per_layer_s") if stage == "decode"
                            else ("efficiency",)) if k in rp}
    if stage == "decode" and "per_layer_s" not in p:
        p["per_layer_s"] = fit["base"]["per_layer_s"]
    eras = rp.get("eras") or {}
    used = runtime
    if era and eras:
        if era in eras:
            k = float(eras[era]["factor"])
            if stage == "decode":
                p["bandwidth_fraction"] = min(1.0, p["bandwidth_fraction"] / k)
                p["per_layer_s"] = p["per_layer_s"] * k
            else:
                p["efficiency"] = min(1.0, p["efficiency"] * k)
            used = f"{runtime} builds {era}"
        else:
            why.append(("build", f"build era {era} has no {stage} rows of {runtime} on this "
                                 f"board (it learned builds "
                                 f"{', '.join(rp.get('builds') or []) or '?'}, "
                                 f"{', '.join(eras)}): the runtime's level over those builds"))
    return p, why, used


def _stage(cal: dict[str, Any], entry: dict[str, Any] | None, stage: str, n: dict[str, Any],
           runtime: str, era: str | None, board: dict[str, Any], precision: str
           ) -> dict[str, Any]:
    """One stage's parameters, provenance, reasons it extrapolates, sigma source and the
    entry it came from."""
    fit = entry.get(stage) if entry else None
    if fit is not None:
        p, why, used = _params(fit, stage, runtime, era)
        w = _why_size(stage, fit, n, runtime if runtime in fit["runtimes"] else None)
        if w:
            why.append(("size", w))
        if stage == "prefill" and precision not in fit["precisions"]:
            why.append(("precision", f"compute precision {precision} was not among the rows' "
                                     f"({', '.join(fit['precisions'])})"))
        mode = board.get("mode") or "base"
        modes = fit.get("modes") or ["base"]
        if mode not in modes:
            why.append(("mode", f"its rows ran in mode {', '.join(modes)}: scaled to "
                                f"{'the base mode' if mode == 'base' else 'mode ' + mode} by "
                                "the peaks"))
        return {"p": p, "prov": "predicted", "why": why, "fit": fit, "source": None,
                "used": used}
    # estimated: decode from another processor of the same board (the same DRAM), else from
    # a board of the same core, else the prior of the processor kind
    for transfer, src in (("board", _same_board(cal["entries"], stage, board, entry)),
                          ("core", _same_core(cal["entries"], stage, board, entry))):
        if src is not None:
            key, sfit = src
            p, why, used = _params(sfit, stage, runtime, era)
            scale = _cpu_scale(cal, board, cal["entries"][key]) if transfer == "board" \
                else 1.0
            if scale != 1.0:  # decode's (a board transfer is decode's only)
                p["bandwidth_fraction"] = min(1.0, p["bandwidth_fraction"] * scale)
            return {"p": p, "prov": "estimated", "why": why, "fit": sfit, "source": key,
                    "used": used, "transfer": transfer, "scale": scale}
    prior = cal["prior"]
    kp = (prior.get("by_kind") or {}).get(board["kind"]) or prior
    if stage == "decode":
        po = prior.get("per_layer_s")
        o = po.get(board["device"], 0.0) if isinstance(po, dict) else float(po or 0.0)
        p = {"bandwidth_fraction": kp["bandwidth_fraction"], "per_layer_s": o}
    else:
        p = {"efficiency": kp["efficiency"]}
    return {"p": p, "prov": "estimated", "why": [], "fit": None, "source": None,
            "used": "prior"}


def _same_board(entries: dict[str, Any], stage: str, board: dict[str, Any],
                own: dict[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    """Decode's fit on another processor of this board: decode streams the weights from the
    board's one DRAM whichever processor runs it (prefill's efficiency is of a processor's
    own peak, so it does not transfer)."""
    if stage != "decode":
        return None
    for key, e in sorted(entries.items()):
        if e is not own and e.get("target") == board["base_id"] \
                and e.get("device") != board["device"] and e.get(stage) is not None:
            return key, e[stage]
    return None


def _cpu_scale(cal: dict[str, Any], board: dict[str, Any], source: dict[str, Any]) -> float:
    """What a bandwidth fraction fitted on ``source`` (another processor of the board) is
    multiplied by on this one: the CPU's share beside an accelerator (``fit.cpu_share``)
    from an accelerator to the CPU, its inverse the other way, else 1."""
    share = float((cal["prior"].get("cpu_share") or {}).get("ratio", 1.0))
    cpu, from_cpu = board["kind"] == "cpu", source.get("kind", "cpu") == "cpu"
    return 1.0 if cpu == from_cpu else (share if cpu else 1.0 / share)


def _same_core(entries: dict[str, Any], stage: str, board: dict[str, Any],
               own: dict[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    ct = board.get("core_type")
    if not ct:
        return None
    for key, e in sorted(entries.items()):
        if e is own or e.get(stage) is None:
            continue
        if e.get("core_type") == ct and e.get("kind", "cpu") == board["kind"]:
            return key, e[stage]
    return None


def _times(n: dict[str, Any], board: dict[str, Any], peak: float, dec: dict[str, Any],
           pre: dict[str, Any], threads: int | None, serial: float, n_sat: float
           ) -> tuple[float, float, float]:
    """(decode s/token, prefill s for the prompt, decode s/token at the reference threads)."""
    bw = board["bandwidth"]
    t_dec_ref = (n["decode_bytes_per_token"] / (dec["bandwidth_fraction"] * bw)
                 + n["num_layers"] * dec["per_layer_s"])
    n_ref = board.get("n_ref")
    dscale = prefill_scale = 1.0
    if threads is not None and n_ref:
        dscale = decode_speed(n_ref, board, n_sat) / decode_speed(threads, board, n_sat)
        prefill_scale = prefill_speed(threads, board, serial) / prefill_speed(n_ref, board,
                                                                              serial)
    t_dec = t_dec_ref * dscale
    t_pre = max(n["prefill_macs"] / (pre["efficiency"] * peak * prefill_scale),
                n["prefill_bytes"] / (dec["bandwidth_fraction"] * bw) * dscale)
    return t_dec, t_pre + n["num_layers"] * dec["per_layer_s"], t_dec_ref


def core_entry(cal: dict[str, Any], n: dict[str, Any], board: dict[str, Any], runtime: str, *,
               threads: int | None = None, era: str | None = None) -> dict[str, Any]:
    entry = cal["entries"].get(f"{board['base_id']}/{board['device']}")
    prec = compute_precision(n["format_compute"], board["peaks"], board["kind"])
    peak = board["peaks"][prec] * board.get("big_share", 1.0)
    st = {s: _stage(cal, entry, s, n, runtime, era, board, prec)
          for s in ("decode", "prefill")}
    serial = thread_param(st["prefill"]["fit"], "prefill")
    n_sat = thread_param(st["decode"]["fit"], "decode")
    t_dec, t_pre, _ = _times(n, board, peak, st["decode"]["p"], st["prefill"]["p"], threads,
                             serial, n_sat)
    return {"entry": entry, "precision": prec, "peak": peak, "dec": st["decode"]["p"],
            "pre": st["prefill"]["p"], "t_dec": t_dec, "t_pre": t_pre,
            "prov": {s: st[s]["prov"] for s in st}, "why": {s: st[s]["why"] for s in st},
            "source": {s: st[s]["source"] for s in st}, "used": {s: st[s]["used"] for s in st},
            "transfer": {s: st[s].get("transfer") for s in st},
            "scale": {s: st[s].get("scale", 1.0) for s in st},
            "fits": {s: st[s]["fit"] for s in st}, "serial": serial, "n_sat": n_sat,
            "runtime": runtime}


def _ex_sigma(cal: dict[str, Any], stage: str, kind: str) -> float:
    d = ((cal.get("extrapolation_sigma") or {}).get(stage) or {}).get(kind) or {}
    return float(d.get("sigma", EXTRAPOLATION_SIGMA))


def stage_sigma(cal: dict[str, Any], c: dict[str, Any], stage: str) -> tuple[float, str]:
    """(sigma of the log error, where it comes from) of one stage of a prediction: the
    board's leave-one-out sigma of predictions inside what its rows covered, plus, in
    quadrature, each extrapolation's own sigma (:func:`attach_cv`)."""
    fit = c["fits"][stage]
    kinds = [k for k, _ in c["why"][stage]]
    ex = [(k, _ex_sigma(cal, stage, k)) for k in kinds]
    if c["prov"][stage] == "predicted" or c["source"][stage]:
        base = float(fit.get("sigma", 0.0)) if fit else 0.0
        k = int(fit.get("sigma_rows", 0)) if fit else 0
        of = ""
        rp = ((fit or {}).get("runtimes") or {}).get(c.get("runtime"))
        if c["prov"][stage] == "predicted" and rp and "sigma" in rp:
            base, k, of = float(rp["sigma"]), int(rp["sigma_rows"]), f" of {c['runtime']}"
        what = (f"leave-one-out sigma {base:.2f}"
                + (f" ({k} own rows{of}{': few, mostly the pooled one' if k < 3 else ''})"
                   if fit else ""))
        s2 = base ** 2 + sum(x ** 2 for _, x in ex)
        if c["source"][stage]:
            same_board = c["transfer"][stage] == "board"
            extra = DEVICE_TRANSFER_SIGMA if same_board else CORE_TRANSFER_SIGMA
            s2 += extra ** 2
            what += f", + {extra} (" + ("another processor of the same board" if same_board
                                        else "another board of the same core") + ")"
    else:
        spread = float(cal["prior"].get("spread", MAX_SPREAD))
        base = math.log(max(spread, ESTIMATE_MIN_SPREAD)) / Z80
        what = f"the prior's leave-one-out spread x/ {spread:.2f}"
        s2 = base ** 2 + sum(x ** 2 for _, x in ex)
    if ex:
        what += ", + " + ", ".join(f"{x:.2f} ({k})" for k, x in ex)
    return max(SIGMA_FLOOR, math.sqrt(s2)), what


def stage_interval(t: float, sigma: float, roof: float) -> tuple[float, float, bool]:
    """(low, high) seconds, never below the roofline; capped at x/ MAX_SPREAD."""
    capped = math.exp(Z80 * sigma) > MAX_SPREAD
    f = min(math.exp(Z80 * sigma), MAX_SPREAD)
    return max(t / f, roof), max(t * f, roof), capped

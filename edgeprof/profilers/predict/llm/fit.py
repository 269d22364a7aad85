"""The fit, per (base target, device): the decode bandwidth fraction and per-layer overhead,
the prefill efficiency, runtime and build-era factors shrunk towards the board's level, the
thread law of each stage (:func:`fit_entries`), and the prior of the boards for a board
without rows (:func:`fit_prior`)."""

from __future__ import annotations

import math
from typing import Any

from edgeprof.profilers.predict.llm.constants import (BUILD_SHRINK, MAX_SPREAD, OVERHEAD_SPAN,
                                                      SHRINK)
from edgeprof.profilers.predict.llm.inputs import (DECODE_SATURATION_PRIOR,
                                                   DECODE_SATURATION_SOURCE,
                                                   PREFILL_SERIAL_PRIOR,
                                                   PREFILL_SERIAL_SOURCE, registry_target,
                                                   board_of, decode_speed, prefill_speed)


def _board_of_sample(s: dict[str, Any]) -> dict[str, Any]:
    return {"kind": s.get("kind", "cpu"), "n_ref": s.get("n_ref"),
            "little_ratio": s.get("little_ratio", 0.0)}


def _mem_s(s: dict[str, Any]) -> float:
    """Seconds per token reading the decode bytes at the row's peak bandwidth."""
    return s["decode_bytes_per_token"] / s["peak_bandwidth"]


def _nnls_relative(cols: list[list[float]], t: list[float]) -> list[float]:
    """Non-negative x minimising sum((A x / t - 1)^2)."""
    import numpy as np
    from scipy.optimize import nnls

    A = np.asarray(cols, float).T / np.asarray(t, float)[:, None]
    x, _ = nnls(A, np.ones(len(t)))
    return [float(v) for v in x]


def _geo_mean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _versions(ss: list[dict[str, Any]]) -> list[str]:
    return sorted({str(s.get("version") or "") for s in ss} - {""})


def _builds(ss: list[dict[str, Any]]) -> list[str]:
    return sorted({(s.get("build") or {}).get("label") or "" for s in ss} - {""})


def era_of(s: dict[str, Any]) -> str | None:
    return (s.get("build") or {}).get("era")


# -- threads: the law's parameter per (entry, stage)
_SERIAL_GRID = [i / 100 for i in range(0, 91)]
_NSAT_GRID = [1.0 + i / 4 for i in range(0, 61)]


def _thread_fit(ss: list[dict[str, Any]], stage: str) -> dict[str, Any]:
    """The stage's thread law on a board: Amdahl's serial share (prefill) or the saturating
    thread count (decode), fitted by least squares on log rates where rows of one runtime,
    model, format and build ran at two thread counts or more, else the prior."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for s in ss:
        if s.get("threads") is None:
            continue
        groups.setdefault((s["runtime"], s.get("model"), s["format"], s.get("version")),
                          []).append(s)
    multi = [g for g in groups.values() if len({s["threads"] for s in g}) >= 2]
    if stage == "prefill":
        law, prior, src = "amdahl", PREFILL_SERIAL_PRIOR, PREFILL_SERIAL_SOURCE
        grid, speed = _SERIAL_GRID, prefill_speed
    else:
        law, prior, src = "saturating", DECODE_SATURATION_PRIOR, DECODE_SATURATION_SOURCE
        grid, speed = _NSAT_GRID, decode_speed
    key = "serial_share" if stage == "prefill" else "saturation_threads"
    if not multi:
        return {"law": law, key: prior, "fitted": False, "source": src}

    def loss(p: float) -> float:
        tot = 0.0
        for g in multi:
            logs = [math.log(s["rate"] / speed(s["threads"], _board_of_sample(s), p))
                    for s in g]
            mu = sum(logs) / len(logs)
            tot += sum((x - mu) ** 2 for x in logs)
        return tot

    best = min(grid, key=lambda p: (loss(p), abs(p - prior)))
    n = sum(len(g) for g in multi)
    return {"law": law, key: best, "fitted": True, "n": n,
            "source": f"fitted to {n} rows at {len({s['threads'] for g in multi for s in g})} "
                      "thread counts (least squares on log rates)"}


def thread_param(fit: dict[str, Any] | None, stage: str) -> float:
    th = (fit or {}).get("threads") or {}
    if stage == "prefill":
        return float(th.get("serial_share", PREFILL_SERIAL_PRIOR))
    return float(th.get("saturation_threads", DECODE_SATURATION_PRIOR))


def _to_ref(s: dict[str, Any], stage: str, param: float) -> float:
    """The sample's rate at the board's reference thread count (all big cores)."""
    b = _board_of_sample(s)
    if s.get("threads") is None or b["kind"] != "cpu" or not b["n_ref"]:
        return s["rate"]
    speed = prefill_speed if stage == "prefill" else decode_speed
    return s["rate"] * speed(b["n_ref"], b, param) / speed(s["threads"], b, param)


def _fit_decode_base(ss: list[dict[str, Any]]) -> tuple[float, float, bool]:
    """(a = 1/fraction, per_layer_s, overhead identified) of one group of decode rows
    (``rate_ref``: at the reference thread count)."""
    m = [_mem_s(s) for s in ss]
    L = [float(s["num_layers"]) for s in ss]
    t = [1.0 / s["rate_ref"] for s in ss]
    ratio = [l / mm for l, mm in zip(L, m)]
    identified = len({s.get("model") for s in ss}) >= 2 and max(ratio) / min(ratio) >= OVERHEAD_SPAN
    if identified:
        a, o = _nnls_relative([m, L], t)
        if a < 1.0:  # never faster than the datasheet: fix the fraction at 1, refit overhead
            a = 1.0
            o = max(0.0, _nnls_relative([L], [tt - mm for tt, mm in zip(t, m)])[0]
                    if all(tt > mm for tt, mm in zip(t, m)) else 0.0)
        if a > 0:
            return a, o, True
    a = max(1.0, _geo_mean([tt / mm for tt, mm in zip(t, m)]))
    return a, 0.0, False


def _era_factors(mine: list[dict[str, Any]], logs: dict[int, float], level: float
                 ) -> dict[str, dict[str, Any]]:
    """Per build era of one runtime's rows: the factor on the runtime's level, shrunk towards
    1 (``exp(sum(residual) / (n + BUILD_SHRINK))``), only where the rows have two eras or
    more (a single era is the runtime's level: factor 1)."""
    eras: dict[str, list[dict[str, Any]]] = {}
    for s in mine:
        e = era_of(s)
        if e:
            eras.setdefault(e, []).append(s)
    out = {}
    for e, es in sorted(eras.items()):
        if len(eras) >= 2:
            k = math.exp(sum(logs[id(s)] - level for s in es) / (len(es) + BUILD_SHRINK))
        else:
            k = 1.0
        out[e] = {"factor": k, "n": len(es), "builds": _builds(es)}
    return out


def fit_decode(ss: list[dict[str, Any]], *, per_runtime: bool = False) -> dict[str, Any]:
    """Fit one (target, device)'s decode rows. ``per_runtime``: each runtime gets its own
    (fraction, overhead) fit (a host's many rows); else runtime factors shrunk towards the
    board's base, a runtime's own (fraction, overhead) where its rows identify the overhead
    (a tiny and a big model), build-era factors within a runtime (few published rows)."""
    threads = _thread_fit(ss, "decode")
    p = threads["saturation_threads"]
    ss = [{**s, "rate_ref": _to_ref(s, "decode", p)} for s in ss]
    a, o, identified = _fit_decode_base(ss)
    runtimes: dict[str, dict[str, Any]] = {}
    for rt in sorted({s["runtime"] for s in ss}):
        mine = [s for s in ss if s["runtime"] == rt]
        ra, ro, rid = _fit_decode_base(mine)
        if per_runtime or rid:
            k = 1.0
            base_t = {id(s): ra * _mem_s(s) + ro * s["num_layers"] for s in mine}
            r = {"bandwidth_fraction": 1.0 / ra, "per_layer_s": ro, "factor": a / ra,
                 "overhead_identified": rid}
        else:
            logs = [math.log((1.0 / s["rate_ref"]) / (a * _mem_s(s) + o * s["num_layers"]))
                    for s in mine]
            k = math.exp(sum(logs) / (len(logs) + SHRINK))
            base_t = {id(s): k * (a * _mem_s(s) + o * s["num_layers"]) for s in mine}
            r = {"bandwidth_fraction": min(1.0, 1.0 / (a * k)), "per_layer_s": o * k,
                 "factor": k, "overhead_identified": False}
        # build eras: a factor on the runtime's time per token (rate = 1 / time)
        res = {id(s): math.log(base_t[id(s)] * s["rate_ref"]) for s in mine}  # log(pred/meas)
        eras = _era_factors(mine, {i: -v for i, v in res.items()}, 0.0)
        r.update(n=len(mine), versions=_versions(mine), builds=_builds(mine), eras=eras,
                 bytes_range=[min(s["decode_bytes_per_token"] for s in mine),
                              max(s["decode_bytes_per_token"] for s in mine)])
        runtimes[rt] = r
    bpt = [s["decode_bytes_per_token"] for s in ss]
    return {"n": len(ss), "base": {"bandwidth_fraction": 1.0 / a, "per_layer_s": o},
            "overhead_identified": identified, "runtimes": runtimes,
            "bytes_range": [min(bpt), max(bpt)],
            "models": sorted({str(s.get("model")) for s in ss}),
            "modes": sorted({s.get("mode") or "base" for s in ss}),
            "thread_counts": sorted({s["threads"] for s in ss if s.get("threads")}),
            "threads": threads}


def _prefill_efficiency(s: dict[str, Any], per_layer_s: float) -> float:
    t_meas = s["prompt_tokens"] / s["rate_ref"]
    t = t_meas - s["num_layers"] * per_layer_s
    t = max(t, 0.05 * t_meas)
    return min(1.0, s["prefill_macs"] / (s["peak_macs"] * t))


def fit_prefill(ss: list[dict[str, Any]], decode: dict[str, Any] | None, *,
                per_runtime: bool = False) -> dict[str, Any]:
    """Fit one (target, device)'s prefill rows: compute efficiency of the peak for the
    rows' compute precision at the reference thread count (the per-layer overhead of the
    decode fit taken off first); runtime factors and build-era factors as for decode."""
    threads = _thread_fit(ss, "prefill")
    ss = [{**s, "rate_ref": _to_ref(s, "prefill", threads["serial_share"])} for s in ss]

    def o_of(rt: str) -> float:
        if not decode:
            return 0.0
        return float(decode["runtimes"].get(rt, decode["base"])["per_layer_s"])

    effs = {id(s): _prefill_efficiency(s, o_of(s["runtime"])) for s in ss}
    base = _geo_mean(list(effs.values()))
    runtimes: dict[str, dict[str, Any]] = {}
    for rt in sorted({s["runtime"] for s in ss}):
        mine = [s for s in ss if s["runtime"] == rt]
        logs = {id(s): math.log(effs[id(s)] / base) for s in mine}
        if per_runtime:
            rho = sum(logs.values()) / len(mine)
        else:
            rho = sum(logs.values()) / (len(mine) + SHRINK)
        e = base * math.exp(rho)
        eras = _era_factors(mine, logs, rho)
        for er in eras.values():
            er["efficiency"] = min(1.0, e * er["factor"])
        runtimes[rt] = {"efficiency": min(1.0, e), "factor": e / base, "n": len(mine),
                        "versions": _versions(mine), "builds": _builds(mine), "eras": eras,
                        "macs_range": [min(s["prefill_macs"] for s in mine),
                                       max(s["prefill_macs"] for s in mine)]}
    macs = [s["prefill_macs"] for s in ss]
    return {"n": len(ss), "base": {"efficiency": base}, "runtimes": runtimes,
            "precisions": sorted({s["precision"] for s in ss}),
            "models": sorted({str(s.get("model")) for s in ss}),
            "macs_range": [min(macs), max(macs)],
            "modes": sorted({s.get("mode") or "base" for s in ss}),
            "thread_counts": sorted({s["threads"] for s in ss if s.get("threads")}),
            "threads": threads}


def _fingerprint(target) -> dict[str, Any]:
    if getattr(target, "is_host", False):
        return {"target": "host", "processor": target.processor, "cores": int(target.cores.value)}
    return {"target": getattr(target, "base_id", None) or target.id,
            "descriptor_sha256": target.sha256}


def fit_entries(samples: list[dict[str, Any]], *, per_runtime: bool = False,
                targets: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per (base target, device): the decode and prefill fits of its samples."""
    entries: dict[str, dict[str, Any]] = {}
    keys = sorted({(s["target"], s["device"]) for s in samples})
    for tid, dev in keys:
        mine = [s for s in samples if s["target"] == tid and s["device"] == dev]
        dec = [s for s in mine if s["stage"] == "decode"]
        pre = [s for s in mine if s["stage"] == "prefill"]
        target = (targets or {}).get(tid) or registry_target(tid)
        b = board_of(target, dev)
        decode = fit_decode(dec, per_runtime=per_runtime) if dec else None
        prefill = fit_prefill(pre, decode, per_runtime=per_runtime) if pre else None
        entries[f"{tid}/{dev}"] = {"target": tid, "device": dev, "kind": b["kind"],
                                   "core_type": b["core_type"],
                                   "fingerprint": _fingerprint(target),
                                   "peak_bandwidth": b["bandwidth"],
                                   "reference_threads": b["n_ref"],
                                   "decode": decode, "prefill": prefill}
    return entries


def median_of(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _prior_of(entries: list[dict[str, Any]]) -> dict[str, Any]:
    fr = [e["decode"]["base"]["bandwidth_fraction"] for e in entries if e["decode"]]
    ef = [e["prefill"]["base"]["efficiency"] for e in entries if e["prefill"]]
    over = [e["decode"]["base"]["per_layer_s"] for e in entries
            if e["decode"] and e["decode"]["overhead_identified"]]
    return {"bandwidth_fraction": median_of(fr) if fr else 0.5,
            "fraction_range": [min(fr), max(fr)] if fr else [0.1, 1.0],
            "efficiency": median_of(ef) if ef else 0.1,
            "efficiency_range": [min(ef), max(ef)] if ef else [0.01, 1.0],
            "per_layer_s": median_of(over) if over else 0.0,
            "boards": sorted(f"{e['target']}/{e['device']}" for e in entries)}


def cpu_share(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The CPU's decode bandwidth fraction over the GPU's or NPU's on the same board, from
    the boards with decode fits on both (geometric mean; 1 where there are none): a board's
    CPU cluster draws less of its DRAM than its accelerator does."""
    ratios, boards = [], []
    for tid in sorted({e["target"] for e in entries.values()}):
        dec = {e.get("kind", "cpu"): e["decode"]["base"]["bandwidth_fraction"]
               for e in entries.values() if e["target"] == tid and e["decode"]}
        acc = [v for k, v in dec.items() if k != "cpu"]
        if "cpu" in dec and acc:
            ratios.append(dec["cpu"] / acc[0])
            boards.append(tid)
    return {"ratio": _geo_mean(ratios) if ratios else 1.0, "boards": boards}


def fit_prior(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The uncalibrated prior: the median fitted fraction / efficiency over the entries,
    overall and per processor kind (``by_kind``: cpu, gpu), the per-layer overhead by device
    where one was identified (else 0), and the CPU's share of a board's DRAM beside its
    accelerator's (:func:`cpu_share`)."""
    allp = _prior_of(list(entries.values()))
    by_kind = {}
    for kind in sorted({e.get("kind", "cpu") for e in entries.values()}):
        by_kind[kind] = _prior_of([e for e in entries.values() if e.get("kind", "cpu") == kind])
    over: dict[str, list[float]] = {}
    for e in entries.values():
        if e["decode"] and e["decode"]["overhead_identified"]:
            over.setdefault(e["device"], []).append(e["decode"]["base"]["per_layer_s"])
    return {"bandwidth_fraction": allp["bandwidth_fraction"],
            "fraction_range": allp["fraction_range"], "efficiency": allp["efficiency"],
            "efficiency_range": allp["efficiency_range"],
            "per_layer_s": {d: median_of(v) for d, v in over.items()},
            "by_kind": by_kind, "cpu_share": cpu_share(entries), "n_entries": len(entries),
            "spread": MAX_SPREAD}

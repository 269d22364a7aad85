"""Predicted prefill, decode, time to first token and time per output token of a generative
model on a board, per (target, device, runtime, format).

The model (one forward pass per generated token reads every weight and the KV cache)::

    decode time per token   t_dec = decode_bytes_per_token / (fraction x peak bandwidth)
                                    + num_layers x per_layer_s
    prefill time (P tokens) t_pre = max(prompt MACs / (efficiency x peak MAC/s),
                                        prefill bytes / (fraction x peak bandwidth))
                                    + num_layers x per_layer_s
    TTFT = t_pre + t_dec          TPOT = t_dec

Peaks are the descriptor's (``Target.processor_figures(device)``: the datasheet's);
``fraction`` (effective/peak bandwidth), ``per_layer_s`` and ``efficiency`` (of the peak for
the format's compute precision) live in a calibration:

* **shipped** (``data/llm/llm--published.json``), fitted by :func:`build_calibration` only to
  ``data/llm/llm_measurements_train.csv`` (a copy of the 20 published rows, each with its source
  and quote). :data:`ROWS` says, per row, the target, device, runtime, preset and format it is
  read as, or why it is left out. Per (target, device): the bandwidth fraction from its decode
  rows; the per-layer overhead where model sizes differ enough to separate it from the
  bandwidth term (least squares on relative errors, non-negative), else 0; the prefill
  efficiency from its prefill rows; per-runtime factors shrunk towards the board's base
  (``log f = sum of the runtime's log residuals / (n + 1)``, as issue 11's calibrations do).
  Leave-one-out refits everything without each row and predicts it through the same path a
  user's prediction takes; its log errors give the intervals.
* **host** (:func:`calibrate_llm_host`): the same parameters fitted per runtime to
  :class:`~edgeprof.core.llm.GenerationRecord` s measured on this machine; written to the
  user's calibration folder (``llm--host--<label>.json``), preferred over the shipped file.

A figure is ``predicted`` when a calibration has rows for that stage on that (target,
device); the interval is the value x exp(+-1.645 sigma) of the leave-one-out log errors
(sigma: the larger of the board's own and the pooled one of that stage), widened (x2) where
the prediction leaves what the rows covered (another runtime, another compute precision, a
model more than 2x outside the rows' bytes per token). Otherwise it is ``estimated``: the
datasheet roofline scaled by the prior (the median fitted fraction / efficiency of the
shipped boards), with a wide interval (x/ the prior's spread, at least 3, never faster than
the roofline) and the reason. No figure is ever faster than the datasheet roofline.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from edgeprof.profilers.predict.calibration import CalibrationError, user_dir

DATA = Path(__file__).parent / "data" / "llm"
TRAIN_CSV = DATA / "llm_measurements_train.csv"
SHIPPED_FILE = DATA / "llm--published.json"
FORMAT = "edgeprof-llm-calibration"
FORMAT_VERSION = 1
FILE_PREFIX = "llm--"
Z90 = 1.645
SHRINK = 1.0
#: sigma x (1 + this) when the prediction leaves what the calibration's rows covered
EXTRAPOLATION_WIDENING = 1.0
#: an estimated figure's interval is value x/ max(this, the prior's spread)
ESTIMATE_MIN_SPREAD = 3.0
#: the per-layer overhead is fitted only where the rows' layers-per-second-of-bandwidth ratio
#: spans at least this factor (a tiny model beside a big one); else it is 0
OVERHEAD_SPAN = 4.0
#: prompt and generated lengths assumed for published rows that do not state them
#: (llama-bench's defaults pp512 / tg128)
ASSUMED_PROMPT = 512
ASSUMED_GEN = 128
#: Jetson Orin Nano "Super" mode (JetPack 6.1+, 25 W): the memory bandwidth a Super-mode row
#: ran with; the descriptor (original mode) says 68 GB/s
SUPER_MODE_BANDWIDTH = 102e9
SUPER_MODE_SOURCE = ("NVIDIA, 'Jetson Orin Nano Developer Kit Gets a Super Boost' (Dec 2024): "
                     "memory bandwidth 68 GB/s -> 102 GB/s in Super mode (also in "
                     "jetson_orin_nano.toml's description)")

_CLOSEST_Q4 = ("MLC q4f16 (4-bit weights in groups of 32 with an fp16 scale, 4.5 bits/weight) "
               "read as llama.cpp q4_0, the same layout; llama.cpp keeps the LM head in q6_k, "
               "MLC in q4f16 (a few % more bytes here)")


@dataclass(frozen=True)
class RowMap:
    """How one published row is read: the target and device it measured, the runtime, the
    preset and format that rebuild its bytes (None: left out, ``note`` says why)."""

    target: str
    device: str
    runtime: str
    preset: str | None
    fmt: str | None
    note: str = ""
    #: the peak bandwidth the row ran with, when it is not the descriptor's
    bandwidth: float | None = None


_PI = "TinyLlama 1.1B q8_0 from justine.lol/matmul's table; prompt length not stated: pp512 assumed"
#: row index of llm_measurements_train.csv -> how it is read
ROWS: dict[int, RowMap] = {
    0: RowMap("raspberry_pi_5", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    1: RowMap("raspberry_pi_5", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    2: RowMap("raspberry_pi_5", "cpu", "llama_cpp", "tinyllama-1.1b", "q8_0", _PI),
    3: RowMap("raspberry_pi_5", "cpu", "llama_cpp", "tinyllama-1.1b", "q8_0", _PI),
    4: RowMap("raspberry_pi_5", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    5: RowMap("raspberry_pi_5", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    6: RowMap("raspberry_pi_4", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    7: RowMap("raspberry_pi_4", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    8: RowMap("raspberry_pi_4", "cpu", "llama_cpp", "tinyllama-1.1b", "q8_0", _PI),
    9: RowMap("raspberry_pi_4", "cpu", "llama_cpp", "tinyllama-1.1b", "q8_0", _PI),
    10: RowMap("raspberry_pi_4", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    11: RowMap("raspberry_pi_4", "cpu", "llamafile", "tinyllama-1.1b", "q8_0", _PI),
    12: RowMap("jetson_nano", "cpu", "llama_cpp", "tinyllama-1.1b", "q4_k_m",
               "llama-cli CPU build, short prompt"),
    13: RowMap("jetson_nano", "cuda", "llama_cpp", "tinyllama-1.1b", "q4_k_m",
               "llama-cli CUDA build, all layers on the GPU"),
    14: RowMap("jetson_orin_nano", "cuda", "mlc", "llama-3.2-3b", "q4_0",
               "MLC INT4, original mode; " + _CLOSEST_Q4),
    15: RowMap("jetson_orin_nano", "cuda", "mlc", "gemma-2-2b", "q4_0",
               "MLC INT4, original mode; " + _CLOSEST_Q4),
    16: RowMap("jetson_orin_nano", "cuda", "mlc", "phi-3.5-mini", "q4_0",
               "MLC INT4, original mode (the table's 'Phi 3.5 3B' is Phi-3.5-mini, 3.8B); "
               + _CLOSEST_Q4),
    17: RowMap("jetson_orin_nano", "cuda", "mlc", None, None,
               "left out: the SmolLM2 model size is not stated (135M, 360M and 1.7B exist), so "
               "its bytes per token are unknown"),
    18: RowMap("jetson_orin_nano", "cuda", "mlc", "tinyllama-1.1b", "q4_0",
               "MLC via NanoLLM, read off a chart (approximate); taken as original mode (the "
               "chart predates Super mode); " + _CLOSEST_Q4),
    19: RowMap("jetson_orin_nano", "cuda", "llama_cpp", "smollm2-135m", "q8_0",
               "llama.cpp CUDA, Super mode (25 W): its memory term uses the Super mode's "
               "102 GB/s, its per-layer overhead is taken as the original mode's (kernel "
               "launches; the CPU clock differs 1.5 vs 1.7 GHz); format not stated: q8_0 assumed",
               bandwidth=SUPER_MODE_BANDWIDTH),
}


class LLMCalibrationError(CalibrationError):
    """An LLM calibration file is corrupted or of another format (exit 2)."""


# ------------------------------------------------------------------ estimate adapter
def _num(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, dict):
        v = v.get("value")
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _dig(d: Any, *path: str) -> Any:
    for p in path:
        if isinstance(d, dict):
            d = d.get(p)
        else:
            d = getattr(d, p, None)
        if d is None:
            return None
    return d


def estimate_numbers(estimate: Any) -> dict[str, Any]:
    """What the predictor needs from an :class:`~edgeprof.profilers.estimate.llm.LLMEstimate`
    (or its ``to_dict()``): format and its compute precision, prompt tokens, layers, decode
    bytes and MACs per token, prefill MACs and bytes."""
    d = estimate.to_dict() if hasattr(estimate, "to_dict") else estimate
    if not isinstance(d, dict) or "stages" not in d:
        raise TypeError(f"not an LLM estimate: {type(estimate).__name__}")
    layer_ids = [r.get("layer") for r in d.get("layers") or [] if r.get("layer") is not None]
    layers = (max(layer_ids) + 1) if layer_ids else _num(_dig(d, "spec", "num_layers"))
    prompt = _num(d.get("prompt_tokens"))
    dec_bytes = (_num(_dig(d, "figures", "decode_bytes_per_token"))
                 or _num(_dig(d, "stages", "decode", "bytes")))
    dec_macs = _num(_dig(d, "stages", "decode", "macs"))
    pre_macs = _num(_dig(d, "stages", "prefill", "macs"))
    pre_bytes = _num(_dig(d, "stages", "prefill", "bytes"))
    missing = [n for n, v in (("layers", layers), ("prompt_tokens", prompt),
                              ("decode_bytes_per_token", dec_bytes), ("prefill macs", pre_macs))
               if not v]
    if missing:
        raise ValueError(f"LLM estimate lacks {', '.join(missing)}")
    return {"format": str(d.get("format") or ""),
            "format_compute": _dig(d, "format_info", "compute") or "fp32",
            "num_layers": int(layers), "prompt_tokens": int(prompt),
            "decode_bytes_per_token": dec_bytes, "decode_macs_per_token": dec_macs or 0.0,
            "prefill_macs": pre_macs, "prefill_bytes": pre_bytes or dec_bytes,
            "model": d.get("model")}


def compute_precision(fmt_compute: str, peaks: dict[str, float]) -> str:
    """The peak a format's matrix products run at: the format's compute precision (the
    estimator's ``FormatInfo.compute``: int8 for llama.cpp's quantized types and the genai
    int4/int8, fp16/bf16 for half formats) where the processor has that peak, else fp32 --
    the estimator's roofline rule."""
    if fmt_compute in peaks:
        return fmt_compute
    return "fp32" if "fp32" in peaks else next(iter(peaks))


# ------------------------------------------------------------------ training samples
def training_rows() -> list[dict[str, str]]:
    with TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _registry_target(target_id: str):
    from edgeprof.targets import get_target

    return get_target(target_id)


def sample_from(*, sid: Any, target, device: str, runtime: str, stage: str, rate: float,
                estimate: Any, bandwidth: float | None = None, **extra: Any) -> dict[str, Any]:
    """One measured (stage, rate) with the figures of its model: a fitting sample."""
    n = estimate_numbers(estimate)
    bw, peaks, _ = target.processor_figures(device)
    prec = compute_precision(n["format_compute"], peaks)
    s = {"id": sid, "target": target.id, "device": device, "runtime": runtime, "stage": stage,
         "rate": float(rate), "format": n["format"], "format_compute": n["format_compute"],
         "num_layers": n["num_layers"],
         "prompt_tokens": n["prompt_tokens"], "decode_bytes_per_token": n["decode_bytes_per_token"],
         "decode_macs_per_token": n["decode_macs_per_token"], "prefill_macs": n["prefill_macs"],
         "prefill_bytes": n["prefill_bytes"], "peak_bandwidth": float(bandwidth or bw),
         "precision": prec, "peak_macs": peaks[prec]}
    s.update(extra)
    return s


def published_samples() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(samples, left-out rows) of the training file, figures from the estimator."""
    from edgeprof.profilers.estimate.llm import estimate_llm
    from edgeprof.zoo.llm import PRESETS

    rows = training_rows()
    samples, skipped = [], []
    for i, row in enumerate(rows):
        m = ROWS[i]
        if m.preset is None:
            skipped.append({"id": i, "model": row["model"], "device": row["device"],
                            "reason": m.note})
            continue
        target = _registry_target(m.target)
        est = estimate_llm(PRESETS[m.preset], m.fmt, prompt_tokens=ASSUMED_PROMPT,
                           gen_tokens=ASSUMED_GEN, depth=0, target=target, device=m.device)
        stage = {"prefill_tok_s": "prefill", "decode_tok_s": "decode"}[row["metric"]]
        samples.append(sample_from(
            sid=i, target=target, device=m.device, runtime=m.runtime, stage=stage,
            rate=float(row["value"]), estimate=est, bandwidth=m.bandwidth,
            model=m.preset, published_model=row["model"], published_device=row["device"],
            version=row["runtime_version"], source=row["source"], quote=row["quote"],
            note=m.note))
    return samples, skipped


# ------------------------------------------------------------------------ the fit
def _mem_s(s: dict[str, Any]) -> float:
    """Seconds per token reading the decode bytes at the row's peak bandwidth."""
    return s["decode_bytes_per_token"] / s["peak_bandwidth"]


def _prefill_s(s: dict[str, Any]) -> float:
    return s["prompt_tokens"] / s["rate"]


def _nnls_relative(cols: list[list[float]], t: list[float]) -> list[float]:
    """Non-negative x minimising sum((A x / t - 1)^2)."""
    import numpy as np
    from scipy.optimize import nnls

    A = np.asarray(cols, float).T / np.asarray(t, float)[:, None]
    x, _ = nnls(A, np.ones(len(t)))
    return [float(v) for v in x]


def _geo_mean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _fit_decode_base(ss: list[dict[str, Any]]) -> tuple[float, float, bool]:
    """(a = 1/fraction, per_layer_s, overhead identified) of one group of decode rows."""
    m = [_mem_s(s) for s in ss]
    L = [float(s["num_layers"]) for s in ss]
    t = [1.0 / s["rate"] for s in ss]
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


def _shrunk_factors(ss: list[dict[str, Any]], residual: Callable[[dict], float]) -> dict:
    out: dict[str, dict[str, Any]] = {}
    for rt in sorted({s["runtime"] for s in ss}):
        mine = [s for s in ss if s["runtime"] == rt]
        logs = [math.log(residual(s)) for s in mine]
        out[rt] = {"factor": math.exp(sum(logs) / (len(logs) + SHRINK)), "n": len(mine),
                   "versions": sorted({str(s.get("version") or "") for s in mine} - {""})}
    return out


def fit_decode(ss: list[dict[str, Any]], *, per_runtime: bool = False) -> dict[str, Any]:
    """Fit one (target, device)'s decode rows. ``per_runtime``: each runtime gets its own
    (fraction, overhead) fit (a host's many rows); else runtime factors shrunk towards the
    board's base (few published rows)."""
    a, o, identified = _fit_decode_base(ss)
    runtimes: dict[str, dict[str, Any]] = {}
    if per_runtime:
        for rt in sorted({s["runtime"] for s in ss}):
            mine = [s for s in ss if s["runtime"] == rt]
            ra, ro, rid = _fit_decode_base(mine)
            runtimes[rt] = {"bandwidth_fraction": 1.0 / ra, "per_layer_s": ro, "factor": a / ra,
                            "n": len(mine), "overhead_identified": rid,
                            "versions": sorted({str(s.get("version") or "") for s in mine} - {""})}
    else:
        facs = _shrunk_factors(ss, lambda s: (1.0 / s["rate"]) / (a * _mem_s(s)
                                                                   + o * s["num_layers"]))
        for rt, f in facs.items():
            k = f["factor"]
            runtimes[rt] = {"bandwidth_fraction": min(1.0, 1.0 / (a * k)), "per_layer_s": o * k,
                            "factor": k, "n": f["n"], "versions": f["versions"]}
    bpt = [s["decode_bytes_per_token"] for s in ss]
    return {"n": len(ss), "base": {"bandwidth_fraction": 1.0 / a, "per_layer_s": o},
            "overhead_identified": identified, "runtimes": runtimes,
            "bytes_range": [min(bpt), max(bpt)],
            "models": sorted({str(s.get("model")) for s in ss})}


def _prefill_efficiency(s: dict[str, Any], per_layer_s: float) -> float:
    t = _prefill_s(s) - s["num_layers"] * per_layer_s
    t = max(t, 0.05 * _prefill_s(s))
    return min(1.0, s["prefill_macs"] / (s["peak_macs"] * t))


def fit_prefill(ss: list[dict[str, Any]], decode: dict[str, Any] | None, *,
                per_runtime: bool = False) -> dict[str, Any]:
    """Fit one (target, device)'s prefill rows: compute efficiency of the peak for the
    rows' compute precision (the per-layer overhead of the decode fit taken off first)."""
    def o_of(rt: str) -> float:
        if not decode:
            return 0.0
        return float(decode["runtimes"].get(rt, decode["base"])["per_layer_s"])

    effs = {id(s): _prefill_efficiency(s, o_of(s["runtime"])) for s in ss}
    base = _geo_mean(list(effs.values()))
    runtimes: dict[str, dict[str, Any]] = {}
    for rt in sorted({s["runtime"] for s in ss}):
        mine = [s for s in ss if s["runtime"] == rt]
        if per_runtime:
            e = _geo_mean([effs[id(s)] for s in mine])
        else:
            logs = [math.log(effs[id(s)] / base) for s in mine]
            e = base * math.exp(sum(logs) / (len(logs) + SHRINK))
        runtimes[rt] = {"efficiency": min(1.0, e), "factor": e / base, "n": len(mine),
                        "versions": sorted({str(s.get("version") or "") for s in mine} - {""})}
    return {"n": len(ss), "base": {"efficiency": base}, "runtimes": runtimes,
            "precisions": sorted({s["precision"] for s in ss}),
            "models": sorted({str(s.get("model")) for s in ss})}


def _fingerprint(target) -> dict[str, Any]:
    if getattr(target, "is_host", False):
        return {"target": "host", "processor": target.processor, "cores": int(target.cores.value)}
    return {"target": target.id, "descriptor_sha256": target.sha256}


def fit_entries(samples: list[dict[str, Any]], *, per_runtime: bool = False,
                targets: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per (target, device): the decode and prefill fits of its samples."""
    entries: dict[str, dict[str, Any]] = {}
    keys = sorted({(s["target"], s["device"]) for s in samples})
    for tid, dev in keys:
        mine = [s for s in samples if s["target"] == tid and s["device"] == dev]
        dec = [s for s in mine if s["stage"] == "decode"]
        pre = [s for s in mine if s["stage"] == "prefill"]
        target = (targets or {}).get(tid) or _registry_target(tid)
        bw, _, _ = target.processor_figures(dev)
        decode = fit_decode(dec, per_runtime=per_runtime) if dec else None
        prefill = fit_prefill(pre, decode, per_runtime=per_runtime) if pre else None
        entries[f"{tid}/{dev}"] = {"target": tid, "device": dev,
                                   "fingerprint": _fingerprint(target), "peak_bandwidth": bw,
                                   "decode": decode, "prefill": prefill}
    return entries


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def fit_prior(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The uncalibrated prior: the median fitted fraction / efficiency over the entries, the
    per-layer overhead by device where one was identified (else 0)."""
    fr = [e["decode"]["base"]["bandwidth_fraction"] for e in entries.values() if e["decode"]]
    ef = [e["prefill"]["base"]["efficiency"] for e in entries.values() if e["prefill"]]
    over: dict[str, list[float]] = {}
    for e in entries.values():
        if e["decode"] and e["decode"]["overhead_identified"]:
            over.setdefault(e["device"], []).append(e["decode"]["base"]["per_layer_s"])
    return {"bandwidth_fraction": _median(fr) if fr else 0.5,
            "fraction_range": [min(fr), max(fr)] if fr else [0.1, 1.0],
            "efficiency": _median(ef) if ef else 0.1,
            "efficiency_range": [min(ef), max(ef)] if ef else [0.01, 1.0],
            "per_layer_s": {d: _median(v) for d, v in over.items()},
            "n_entries": len(entries), "spread": ESTIMATE_MIN_SPREAD}


# ------------------------------------------------------------------ the prediction core
def _stage_params(entry: dict[str, Any] | None, prior: dict[str, Any], stage: str,
                  runtime: str, device: str, precision: str, bytes_per_token: float
                  ) -> tuple[dict[str, Any], str, list[str]]:
    """(parameters, provenance, reasons it extrapolates) for one stage."""
    fit = entry.get(stage) if entry else None
    if fit is None:
        if stage == "decode":
            p = {"bandwidth_fraction": prior["bandwidth_fraction"],
                 "per_layer_s": prior["per_layer_s"].get(device, 0.0)}
        else:
            p = {"efficiency": prior["efficiency"]}
        return p, "estimated", []
    why = []
    rp = fit["runtimes"].get(runtime)
    if rp is None:
        rp = fit["base"]
        why.append(f"runtime {runtime} has no {stage} rows on this board (runtimes "
                   f"{', '.join(fit['runtimes'])}): the board's base")
    p = dict(rp)
    if stage == "decode":
        lo, hi = fit["bytes_range"]
        if bytes_per_token < lo / 2 or bytes_per_token > hi * 2:
            why.append(f"{bytes_per_token / 1e6:.0f} MB per token is outside the rows' "
                       f"{lo / 1e6:.0f}-{hi / 1e6:.0f} MB")
        if "per_layer_s" not in p:
            p["per_layer_s"] = fit["base"]["per_layer_s"]
    elif precision not in fit["precisions"]:
        why.append(f"compute precision {precision} was not among the rows' "
                   f"({', '.join(fit['precisions'])})")
    return p, "predicted", why


def _times(n: dict[str, Any], bw: float, peak: float, dec: dict[str, Any],
           pre: dict[str, Any], pre_layer_s: float) -> tuple[float, float]:
    """(decode s/token, prefill s for the prompt)."""
    t_dec = (n["decode_bytes_per_token"] / (dec["bandwidth_fraction"] * bw)
             + n["num_layers"] * dec["per_layer_s"])
    t_pre = max(n["prefill_macs"] / (pre["efficiency"] * peak),
                n["prefill_bytes"] / (dec["bandwidth_fraction"] * bw))
    return t_dec, t_pre + n["num_layers"] * pre_layer_s


def _core(cal: dict[str, Any], n: dict[str, Any], target_id: str, device: str, runtime: str,
          bw: float, peaks: dict[str, float]) -> dict[str, Any]:
    entry = cal["entries"].get(f"{target_id}/{device}")
    prec = compute_precision(n["format_compute"], peaks)
    peak = peaks[prec]
    dec, dprov, dwhy = _stage_params(entry, cal["prior"], "decode", runtime, device, prec,
                                     n["decode_bytes_per_token"])
    pre, pprov, pwhy = _stage_params(entry, cal["prior"], "prefill", runtime, device, prec,
                                     n["decode_bytes_per_token"])
    t_dec, t_pre = _times(n, bw, peak, dec, pre, dec["per_layer_s"])
    return {"entry": entry, "precision": prec, "peak": peak, "dec": dec, "pre": pre,
            "t_dec": t_dec, "t_pre": t_pre, "prov": {"decode": dprov, "prefill": pprov},
            "why": {"decode": dwhy, "prefill": pwhy}}


# ------------------------------------------------------------------ leave-one-out
def _rate_of(core: dict[str, Any], s: dict[str, Any]) -> float:
    return 1.0 / core["t_dec"] if s["stage"] == "decode" else s["prompt_tokens"] / core["t_pre"]


def _predict_sample(cal: dict[str, Any], s: dict[str, Any]) -> tuple[float, str]:
    peaks = {s["precision"]: s["peak_macs"]}
    c = _core(cal, s, s["target"], s["device"], s["runtime"], s["peak_bandwidth"], peaks)
    return _rate_of(c, s), c["prov"][s["stage"]]


def _fit_all(samples: list[dict[str, Any]], *, per_runtime: bool, targets=None,
             prior: dict[str, Any] | None = None) -> dict[str, Any]:
    entries = fit_entries(samples, per_runtime=per_runtime, targets=targets)
    return {"entries": entries, "prior": prior if prior is not None else fit_prior(entries)}


def leave_one_out(samples: list[dict[str, Any]], *, per_runtime: bool = False, targets=None,
                  prior: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each sample predicted by a fit to all the others (prior included, unless one is
    given), through the prediction path."""
    out = []
    for i, s in enumerate(samples):
        rest = samples[:i] + samples[i + 1:]
        cal = _fit_all(rest, per_runtime=per_runtime, targets=targets, prior=prior)
        pred, prov = _predict_sample(cal, s)
        out.append({"id": s["id"], "target": s["target"], "device": s["device"],
                    "runtime": s["runtime"], "stage": s["stage"], "model": s.get("model"),
                    "measured": s["rate"], "predicted": pred, "provenance": prov,
                    "error": pred / s["rate"] - 1.0, "log_error": math.log(pred / s["rate"])})
    return out


def _rms(xs: list[float]) -> float:
    return math.sqrt(sum(x * x for x in xs) / len(xs)) if xs else 0.0


def attach_cv(cal: dict[str, Any], loo: list[dict[str, Any]]) -> None:
    """Sigma per (entry, stage): the larger of its own leave-one-out log-error RMS and the
    pooled one of that stage (rows predicted by a calibration, not by the prior); the
    prior's spread from the rows the prior predicted."""
    pooled = {st: _rms([r["log_error"] for r in loo if r["stage"] == st
                        and r["provenance"] == "predicted"]) for st in ("decode", "prefill")}
    for key, e in cal["entries"].items():
        for st in ("decode", "prefill"):
            if not e[st]:
                continue
            own = [r["log_error"] for r in loo if f"{r['target']}/{r['device']}" == key
                   and r["stage"] == st and r["provenance"] == "predicted"]
            e[st]["sigma"] = max(_rms(own), pooled[st])
            e[st]["sigma_own"] = _rms(own) if own else None
            e[st]["sigma_pooled"] = pooled[st]
    by_prior = [r["log_error"] for r in loo if r["provenance"] == "estimated"]
    if by_prior:
        cal["prior"]["spread"] = max(ESTIMATE_MIN_SPREAD, math.exp(Z90 * _rms(by_prior)))
        cal["prior"]["spread_n"] = len(by_prior)


def cv_table(loo: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median |pred/meas - 1| per (target, device) and overall."""
    groups: dict[str, list[float]] = {}
    for r in loo:
        groups.setdefault(f"{r['target']}/{r['device']}", []).append(abs(r["error"]))
    rows = [{"board": k, "n": len(v), "median_abs_error": _median(v),
             "within_25": sum(x <= 0.25 for x in v) / len(v)} for k, v in sorted(groups.items())]
    allv = [abs(r["error"]) for r in loo]
    rows.append({"board": "all", "n": len(allv), "median_abs_error": _median(allv),
                 "within_25": sum(x <= 0.25 for x in allv) / len(allv)})
    return rows


# ------------------------------------------------------------------ building files
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _version() -> str:
    from edgeprof._version import __version__

    return __version__


def build_calibration() -> dict[str, Any]:
    """The shipped calibration, fitted only to the training file (deterministic: the same
    file gives the same numbers; ``created_utc`` aside)."""
    samples, skipped = published_samples()
    cal = _fit_all(samples, per_runtime=False)
    loo = leave_one_out(samples, per_runtime=False)
    attach_cv(cal, loo)
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "name": "llm--published",
            "entries": cal["entries"], "prior": cal["prior"],
            "cv": {"method": "leave-one-out", "n": len(loo), "rows": loo,
                   "boards": cv_table(loo)},
            "samples": samples, "left_out": skipped,
            "assumptions": {"prompt_tokens": ASSUMED_PROMPT, "gen_tokens": ASSUMED_GEN,
                            "super_mode_bandwidth": SUPER_MODE_BANDWIDTH,
                            "super_mode_source": SUPER_MODE_SOURCE},
            "created_utc": _now(), "edgeprof_version": _version(),
            "note": (f"fitted only to edgeprof/profilers/predict/data/llm/"
                     f"llm_measurements_train.csv ({len(samples)} rows used, {len(skipped)} left "
                     "out: " + "; ".join(f"row {s['id']} {s['reason']}" for s in skipped)
                     + "); bytes and MACs per token from edgeprof's estimator for the preset "
                     "and format each row is read as (ROWS in profilers/predict/llm.py)")}


def write_calibration(path: str | os.PathLike = SHIPPED_FILE) -> dict[str, Any]:
    """Rebuild the shipped file (``python benchmarks/predict_llm.py --write``)."""
    from edgeprof.core.io import write_json

    cal = build_calibration()
    write_json(path, cal)
    return cal


def comparable(cal: dict[str, Any]) -> dict[str, Any]:
    """A calibration without its timestamp and version (to compare a re-fit to a file)."""
    return {k: v for k, v in json.loads(json.dumps(cal)).items()
            if k not in ("created_utc", "edgeprof_version")}


# ------------------------------------------------------------------ loading files
def validate(d: Any, path: Path | None = None) -> dict[str, Any]:
    def bad(what: str) -> LLMCalibrationError:
        return LLMCalibrationError(f"not a usable LLM calibration ({what}); delete it or redo "
                                   "it with 'edgeprof calibrate'", path=path)

    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise bad(f"'format' is not '{FORMAT}'")
    if d.get("format_version") != FORMAT_VERSION:
        raise bad(f"format_version {d.get('format_version')!r}, this edgeprof reads "
                  f"{FORMAT_VERSION}")
    if not isinstance(d.get("entries"), dict) or not isinstance(d.get("prior"), dict):
        raise bad("missing entries or prior")
    try:
        nums = [float(d["prior"]["bandwidth_fraction"]), float(d["prior"]["efficiency"])]
        for e in d["entries"].values():
            if e.get("decode"):
                nums += [float(e["decode"]["base"]["bandwidth_fraction"]),
                         float(e["decode"]["base"]["per_layer_s"]), float(e["decode"]["sigma"])]
                for r in e["decode"]["runtimes"].values():
                    nums += [float(r["bandwidth_fraction"]), float(r["per_layer_s"])]
            if e.get("prefill"):
                nums += [float(e["prefill"]["base"]["efficiency"]), float(e["prefill"]["sigma"])]
                nums += [float(r["efficiency"]) for r in e["prefill"]["runtimes"].values()]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise bad(f"parameters unreadable: {type(e).__name__} {e}") from None
    if not all(math.isfinite(x) and x >= 0 for x in nums):
        raise bad("a parameter is negative, NaN or infinite")
    if any(x <= 0 for x in nums[:2]):
        raise bad("a fraction or efficiency is zero")
    return d


def load_llm_calibration(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise LLMCalibrationError(f"cannot read LLM calibration ({type(e).__name__}: {first}); "
                                  "delete it or redo it with 'edgeprof calibrate'",
                                  path=path) from None
    d = validate(d, path)
    d["path"] = str(path)
    return d


def llm_calibrations(dirs: list[Path] | None = None) -> list[dict[str, Any]]:
    """The user's LLM calibrations (``llm--*.json`` in the calibration folder), then the
    shipped one."""
    if dirs is None:
        u = user_dir()
        dirs = [u] if u is not None else []
        files = [f for d in dirs if d.is_dir() for f in sorted(d.glob(f"{FILE_PREFIX}*.json"))]
        files.append(SHIPPED_FILE)
    else:
        files = [f for d in dirs if Path(d).is_dir()
                 for f in sorted(Path(d).glob(f"{FILE_PREFIX}*.json"))]
    return [load_llm_calibration(f) for f in files if f.is_file()]


def _select(cals: list[dict[str, Any]], key: str) -> tuple[dict[str, Any] | None, dict]:
    """The first calibration with an entry for ``key``, and the prior to use (the first
    calibration's that has one)."""
    prior = next((c["prior"] for c in cals if c.get("prior")), None) or fit_prior({})
    for c in cals:
        if key in c["entries"]:
            return c, c.get("prior") or prior
    return None, prior


# ------------------------------------------------------------------ the public API
def _figure(value: float, low: float, high: float, unit: str, prov: str, cal: str | None,
            basis: str) -> dict[str, Any]:
    return {"value": value, "low": low, "high": high, "unit": unit, "provenance": prov,
            "calibration": cal if prov == "predicted" else None, "basis": basis}


def predict_llm(estimate: Any, target, *, device: str = "cpu", runtime: str = "llama_cpp",
                dirs: list[Path] | None = None) -> dict[str, Any]:
    """Prefill and decode tokens/s, TTFT and TPOT of ``estimate`` (an LLMEstimate or its
    dict) on ``target``'s processor ``device`` with ``runtime``. Each figure is
    ``{"value", "low", "high", "unit", "provenance", "calibration", "basis"}``; ``notes`` say
    what was extrapolated or why a figure is only estimated. A corrupted calibration file
    raises :class:`LLMCalibrationError` (exit 2); an unknown device UnknownNameError."""
    n = estimate_numbers(estimate)
    bw, peaks, _ = target.processor_figures(device)
    cals = llm_calibrations(dirs)
    cal, prior = _select(cals, f"{target.id}/{device}")
    base = {"entries": cal["entries"] if cal else {}, "prior": prior}
    c = _core(base, n, target.id, device, runtime, bw, peaks)
    entry = c["entry"]
    name = cal["name"] if cal else None
    notes: list[str] = []
    if cal is None:
        notes.append(f"no LLM calibration for {target.id} --device {device}: every figure is "
                     "estimated from the datasheet roofline and the prior of the shipped "
                     "boards (median fraction/efficiency)")
    elif entry and entry.get("fingerprint", {}).get("descriptor_sha256") not in (
            None, target.sha256):
        notes.append(f"calibration '{name}' was fitted for another description of "
                     f"{target.id} (descriptor sha256 differs); used, but may be off")

    roof_dec = n["decode_bytes_per_token"] / bw
    roof_pre = max(n["prefill_macs"] / c["peak"], n["prefill_bytes"] / bw)

    def interval(stage: str, t: float, roof: float) -> tuple[float, float]:
        if c["prov"][stage] == "predicted":
            sigma = float(entry[stage]["sigma"])
            if c["why"][stage]:
                sigma *= 1.0 + EXTRAPOLATION_WIDENING
            lo_t, hi_t = t * math.exp(-Z90 * sigma), t * math.exp(Z90 * sigma)
        else:
            spread = max(ESTIMATE_MIN_SPREAD, float(prior.get("spread", ESTIMATE_MIN_SPREAD)))
            lo_t, hi_t = t / spread, t * spread
        return max(lo_t, roof), max(hi_t, roof)

    t_dec, t_pre = c["t_dec"], c["t_pre"]
    dec_lo, dec_hi = interval("decode", t_dec, roof_dec)
    pre_lo, pre_hi = interval("prefill", t_pre, roof_pre)
    for st in ("decode", "prefill"):
        for w in c["why"][st]:
            notes.append(f"{st}: {w}; interval widened")
        if c["prov"][st] == "estimated" and cal is not None:
            notes.append(f"{st}: calibration '{name}' has no {st} rows for {target.id} --device "
                         f"{device}: estimated from the prior")
    dec, pre = c["dec"], c["pre"]
    o = dec["per_layer_s"]
    mem_s = n["decode_bytes_per_token"] / (dec["bandwidth_fraction"] * bw)
    dec_basis = (f"{n['decode_bytes_per_token'] / 1e6:.1f} MB/token / ({dec['bandwidth_fraction']:.2f}"
                 f" x {bw / 1e9:.1f} GB/s) + {n['num_layers']} layers x {o * 1e3:.3f} ms")
    pre_basis = (f"{n['prefill_macs'] / 1e9:.1f} GMAC / ({pre['efficiency']:.3f} x "
                 f"{c['peak'] / 1e9:.1f} G{c['precision']} MAC/s) for {n['prompt_tokens']} tokens"
                 f" + {n['num_layers']} layers x {o * 1e3:.3f} ms")
    pv = {"decode": c["prov"]["decode"], "prefill": c["prov"]["prefill"]}
    ttft_prov = pv["prefill"]
    P = n["prompt_tokens"]
    # roofline at the datasheet peaks: is a decode step memory- or compute-bound?
    compute_s = n["decode_macs_per_token"] / c["peak"]
    bound = "memory" if roof_dec >= compute_s else "compute"
    if n["num_layers"] * o > mem_s:
        bound_calibrated = "overhead"
    else:
        bound_calibrated = "memory" if mem_s >= compute_s else "compute"
    return {
        "prefill_tokens_per_s": _figure(P / t_pre, P / pre_hi, P / pre_lo, "tokens/s",
                                        pv["prefill"], name, pre_basis),
        "decode_tokens_per_s": _figure(1 / t_dec, 1 / dec_hi, 1 / dec_lo, "tokens/s",
                                       pv["decode"], name, dec_basis),
        # as measured: the first token is sampled from the logits the prefill made (no
        # forward pass of its own), so the time to first token is the prefill's
        "ttft_ms": _figure(1e3 * t_pre, 1e3 * pre_lo, 1e3 * pre_hi, "ms", ttft_prov, name,
                           "prefill of the prompt (the first token is sampled from its "
                           "logits)"),
        "tpot_ms": _figure(1e3 * t_dec, 1e3 * dec_lo, 1e3 * dec_hi, "ms", pv["decode"], name,
                           dec_basis),
        "runtime": runtime, "compute_precision": c["precision"],
        "decode_bound": bound, "decode_bound_calibrated": bound_calibrated,
        "roofline": {"decode_ms": 1e3 * roof_dec, "prefill_ms": 1e3 * roof_pre,
                     "peak_bandwidth": bw, "peak_macs": c["peak"]},
        "calibration": name, "calibration_path": cal.get("path") if cal else None,
        "notes": notes,
    }


# ------------------------------------------------------------------ host calibration
def _rate(d: dict[str, float] | None) -> float | None:
    if not d:
        return None
    v = d.get("median", d.get("mean"))
    return float(v) if v and v > 0 else None


def host_samples(records: list[Any], spec_for_model: Callable[[str], Any], target, *,
                 device: str = "cpu") -> list[dict[str, Any]]:
    """Fitting samples from measured GenerationRecords (ok ones only)."""
    from edgeprof.profilers.estimate.llm import BACKEND_FORMATS, estimate_llm

    out: list[dict[str, Any]] = []
    for i, r in enumerate(records):
        if getattr(r, "status", "ok") != "ok":
            continue
        spec = spec_for_model(r.model)
        # the record's own runtime's layout (OpenVINO's int4 is not ONNX Runtime GenAI's)
        layout = {"backend": r.backend} \
            if r.format in BACKEND_FORMATS.get(r.backend, ()) else {}
        est = estimate_llm(spec, r.format, prompt_tokens=max(1, int(r.n_prompt or 1)),
                           gen_tokens=max(1, int(r.n_gen or 1)), depth=int(r.n_depth or 0),
                           target=target, device=device, **layout)
        common = {"target": target, "device": device, "runtime": r.backend, "estimate": est,
                  "model": r.model, "version": r.runtime_version, "n_depth": r.n_depth,
                  "n_threads": r.n_threads, "source": "measured on this machine"}
        dr, pr = _rate(r.decode_tokens_per_s), _rate(r.prefill_tokens_per_s)
        if dr:
            out.append(sample_from(sid=f"{i}:decode", stage="decode", rate=dr, **common))
        if pr and r.n_prompt:
            out.append(sample_from(sid=f"{i}:prefill", stage="prefill", rate=pr, **common))
    return out


def calibrate_llm_host(records: list[Any], spec_for_model: Callable[[str], Any], *,
                       target=None, device: str = "cpu", label: str = "measured",
                       path: str | os.PathLike | None = None, write: bool = True
                       ) -> dict[str, Any]:
    """Fit this machine's effective bandwidth fraction and per-layer overhead (least squares
    across model sizes) and prefill efficiency, per runtime, to measured
    :class:`~edgeprof.core.llm.GenerationRecord` s; ``spec_for_model(record.model)`` gives
    the LLMSpec. Returns the calibration (the shipped file's format, entry
    ``<target>/<device>``) and, with ``write``, saves it atomically to ``path`` (default:
    the user's calibration folder, ``llm--<target>--<label>.json``)."""
    from edgeprof.core.errors import UserError
    from edgeprof.core.io import write_json

    if target is None:
        from edgeprof.targets import get_target

        target = get_target("host")
    samples = host_samples(records, spec_for_model, target, device=device)
    if not any(s["stage"] == "decode" for s in samples):
        raise UserError("no successful generation run to calibrate from: measure at least "
                        "one model first (edgeprof profile llm:NAME --backend ...)")
    targets = {target.id: target}
    # the prior for leave-one-out on the host: the shipped one (what an uncalibrated host
    # prediction would use)
    try:
        prior = load_llm_calibration(SHIPPED_FILE)["prior"]
    except LLMCalibrationError:
        prior = None
    cal = _fit_all(samples, per_runtime=True, targets=targets, prior=prior)
    loo = leave_one_out(samples, per_runtime=True, targets=targets, prior=prior) \
        if len(samples) > 1 else []
    attach_cv(cal, loo)
    for e in cal["entries"].values():
        for st in ("decode", "prefill"):
            if e[st] and "sigma" not in e[st]:
                e[st]["sigma"] = e[st]["sigma_pooled"] = 0.0
                e[st]["sigma_own"] = None
    name = f"{FILE_PREFIX}{target.id}--{label}"
    for s in samples:
        s.pop("estimate", None)
    out = {"format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
           "entries": cal["entries"], "prior": cal["prior"],
           "cv": {"method": "leave-one-out", "n": len(loo), "rows": loo,
                  "boards": cv_table(loo) if loo else []},
           "samples": samples, "left_out": [
               {"id": i, "model": r.model, "reason": f"status {r.status}: {r.reason}"}
               for i, r in enumerate(records) if getattr(r, "status", "ok") != "ok"],
           "created_utc": _now(), "edgeprof_version": _version(),
           "note": (f"fitted to {len(samples)} measurements on this machine "
                    f"({target.processor}); per runtime: bandwidth fraction of "
                    f"{target.processor_figures(device)[0] / 1e9:.1f} GB/s and per-layer "
                    "overhead (least squares across model sizes), prefill efficiency")}
    if write:
        if path is None:
            d = user_dir(create=True)
            if d is None:
                raise UserError("no calibration folder: set EDGEPROF_CALIBRATIONS_DIR")
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{name}.json"
        write_json(path, out)
        out["path"] = str(path)
    return out


__all__ = ["LLMCalibrationError", "ROWS", "build_calibration", "calibrate_llm_host",
           "compute_precision", "estimate_numbers", "llm_calibrations", "load_llm_calibration",
           "predict_llm", "write_calibration"]

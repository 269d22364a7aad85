"""Predicted prefill, decode, time to first token and time per output token of a generative
model on a board, for a configuration: target and its mode, processor (``device``), runtime
and its build, weight format, threads.

The model (one forward pass per generated token reads every weight and the KV cache; the
prompt is one batch of matrix products)::

    decode s/token   t_dec = (decode_bytes_per_token / (fraction x peak bandwidth)
                              + num_layers x per_layer_s) x D(n_ref) / D(n)
    prefill s        t_pre = max(prompt MACs / (efficiency x peak MAC/s x S(n) / S(n_ref)),
                                 prefill bytes / (fraction x peak bandwidth))
                             + num_layers x per_layer_s
    TTFT = t_pre (the first token is sampled from the prefill's logits)   TPOT = t_dec

Peaks are the descriptor's for the processor and mode asked (``Target.processor_figures``:
the datasheet's; ``jetson_orin_nano:super`` gives the Super mode's). The peak MAC/s is the
one :func:`compute_precision` names: on a CPU the format's compute precision (llama.cpp's
quantized types run int8 dot products, SDOT on a Cortex-A76/A55/A78) or fp32 where the
processor has no int8 rate (Cortex-A72/A57 NEON); on a GPU the fp16 (tensor-core) rate for a
quantized format -- of the big cores (:func:`board_of`). ``fraction`` (effective/peak
bandwidth), ``per_layer_s`` and ``efficiency`` (of that peak at the prompt's batch) are
fitted:

* **shipped** (``data/llm/llm--published.json``), fitted by :func:`build_calibration` only to
  ``data/llm/llm_measurements_train.csv`` (published rows, each with its source and quote).
  ``data/llm/rows.toml`` says, keyed on each row's content, the target (and mode), device,
  runtime, preset, format, build and threads it is read as, or why it is left out. Entries
  are per (base target, device): a Super-mode row is fitted against the Super peaks and the
  fitted fractions then apply to whichever mode is asked (the peaks scale the prediction).
  Per entry: the bandwidth fraction from its decode rows; the per-layer overhead where model
  sizes differ enough to separate it from the bandwidth term (least squares on relative
  errors, non-negative; per runtime where that runtime's own rows separate it), else 0; the
  prefill efficiency from its prefill rows; per-runtime factors shrunk towards the board's
  base (``log f = sum of the runtime's log residuals / (n + SHRINK)``, as issue 11's
  calibrations do); per build era within a runtime (:data:`BUILD_ERAS`: llama.cpp before /
  from 2025, llamafile before / from 0.7) a factor shrunk towards the runtime's level
  (``/(n + BUILD_SHRINK)``), fitted only where a board has rows of both eras.
* **host** (:func:`calibrate_llm_host`): the same parameters fitted per runtime to
  :class:`~edgeprof.core.llm.GenerationRecord` s measured on this machine; written to the
  user's calibration folder (``llm--host--<label>.json``), preferred over the shipped file.

**Builds.** :func:`normalize_build` reads a runtime version (``b4970``, ``b5043 (c262bedd)``,
``2024-03-26``, ``llamafile 0.7``, ``llama-cpp-python 0.3.36``) as a build with a date
(approximate between the anchors of :data:`LLAMA_CPP_BUILD_DATES`) and an era. A calibration
lists the builds it learned; a prediction is for a build (``build=``; default: the llama.cpp
installed here, read from the llama-cpp-python package, else the newest build the calibration
knows for that runtime) and says which. A build era without rows on that board gets the
runtime's level over the builds it has, with a note and a wider interval (an era factor is
not carried from one board to another: llama.cpp's Arm kernels changed differently per core).

**Threads.** Rows carry their thread count (the CSV's ``threads``; where a source states none,
the runtime's default, all cores). A prediction is for ``threads`` (default: all of the
board's big cores, :func:`board_of`). Prefill is compute-bound and follows Amdahl's law,
``S(n) = n_eff / (1 + serial x (n - 1))`` (``n_eff``: big cores plus little cores at their
peak ratio); decode is bandwidth-bound and saturates, ``D(n) = min(1, n_eff / n_sat)``. The
serial share and ``n_sat`` are fitted per (board, stage) where rows of one model and build
ran at two thread counts or more, else priors with their sources
(:data:`PREFILL_SERIAL_PRIOR`, :data:`DECODE_SATURATION_PRIOR`). A GPU prediction ignores
threads.

**Provenance and intervals.** A figure is ``predicted`` when a calibration has rows for that
stage on that (target, device). Its interval is an 80 % one (the truth four times in five),
value x/ exp(1.2816 sigma): sigma is the board's leave-one-out log-error RMS of predictions
inside what its rows covered, shrunk towards the pooled one of that stage
(:data:`POOLED_WEIGHT` pseudo-rows), plus in quadrature, for each way the prediction leaves
what the rows covered (another runtime, build era, mode, thread count, compute precision, a
model more than 2x outside the rows' bytes or MACs), the sigma the held-out rows that made
that extrapolation showed (at least :data:`EXTRAPOLATION_SIGMA`; :func:`attach_cv`); capped
at x/ :data:`MAX_SPREAD` with a note saying so. Otherwise it is ``estimated``: from a board
of the same core (``rk3588``'s Cortex-A76 from the Raspberry Pi 5's fractions; sigma +
:data:`CORE_TRANSFER_SIGMA`) or from the prior of its processor kind (median fitted
fraction / efficiency of the shipped boards), with the prior's leave-one-out spread. Each
calibration reports, from nested leave-one-out (each held-out row's interval is the one a fit
without it states), how often the interval held the truth and its median width (high/low),
per board and stage, against the goal (80 %, at most 2x); a prediction wider than 2x says
why. No figure is ever faster than the datasheet roofline, and nothing depends on this
machine's load.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from edgeprof.profilers.predict.calibration import CalibrationError, user_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DATA = Path(__file__).parent / "data" / "llm"
TRAIN_CSV = DATA / "llm_measurements_train.csv"
ROWS_FILE = DATA / "rows.toml"
SHIPPED_FILE = DATA / "llm--published.json"
FORMAT = "edgeprof-llm-calibration"
FORMAT_VERSION = 2
#: format versions this edgeprof reads (1: no builds, threads or interval report)
READABLE_VERSIONS = (1, 2)
FILE_PREFIX = "llm--"
#: the intervals are 80 % ones (the truth about four times in five: DESIGN.md, Prediction)
Z80 = 1.2816
#: a runtime factor's prior is worth this many rows (log f = sum / (n + SHRINK))
SHRINK = 1.0
#: a build era's factor within a runtime: its prior (factor 1) is worth this many rows. Build
#: changes are large and systematic (llamafile 0.6.2 -> 0.7 doubled a Pi 5's prefill in the
#: training rows' own source), so one row of the other era moves the factor two thirds of
#: the way
BUILD_SHRINK = 0.5
#: sigma added in quadrature per way a prediction leaves what its rows covered (a prior:
#: x/ 1.38 at 80 %; the rows cannot measure what they did not cover)
EXTRAPOLATION_SIGMA = 0.25
#: sigma added in quadrature to a figure estimated from another board of the same core (a
#: prior, x/ 1.47 at 80 %: no two shipped boards share a core, so it is not validated)
CORE_TRANSFER_SIGMA = 0.30
#: the pooled leave-one-out sigma of a stage counts as this many rows in a board's sigma
POOLED_WEIGHT = 2.0
#: no interval is narrower than x/ exp(1.2816 x this) (published rates are rounded)
SIGMA_FLOOR = 0.03
#: no interval is wider than x/ this each side; a prediction that hits it says so
MAX_SPREAD = 4.0
#: an estimated figure's interval is value x/ the prior's leave-one-out spread, within these
ESTIMATE_MIN_SPREAD = 2.0
#: the interval goal (issue 18): hold the truth this often, median high/low at most this
INTERVAL_GOAL = {"coverage": 0.80, "median_width": 2.0}
#: the per-layer overhead is fitted only where the rows' layers-per-second-of-bandwidth ratio
#: spans at least this factor (a tiny model beside a big one); else it is 0
OVERHEAD_SPAN = 4.0
#: a model whose bytes (decode) or MACs (prefill) are more than this factor outside the rows'
#: is an extrapolation
SIZE_SPAN = 2.0
#: prompt and generated lengths assumed for published rows that do not state them
#: (llama-bench's defaults pp512 / tg128)
ASSUMED_PROMPT = 512
ASSUMED_GEN = 128
#: Jetson Orin Nano "Super" mode, used only where the target registry has no modes
#: (``jetson_orin_nano:super`` does not resolve): its bandwidth and GPU clock ratio
SUPER_MODE_BANDWIDTH = 102e9
SUPER_MODE_GPU_CLOCK_RATIO = 1020 / 625
SUPER_MODE_SOURCE = ("NVIDIA, 'Jetson Orin Nano Developer Kit Gets a Super Boost' (Dec 2024): "
                     "memory bandwidth 68 GB/s -> 102 GB/s, GPU 625 -> 1020 MHz in Super mode")

# ------------------------------------------------------------------ threads
#: Amdahl serial share of a CPU prefill (prompt GEMMs) where no rows at several thread
#: counts fit one
PREFILL_SERIAL_PRIOR = 0.10
PREFILL_SERIAL_SOURCE = (
    "prior: OpenMathLib/OpenBLAS#4581 (2024) measured SGEMM on 1-4 Cortex-A76 threads: "
    "15.9 -> 59.7 GFLOP/s on an RK3588 (serial share 0.02) and 15.3 -> 39.2 on a Raspberry "
    "Pi 5 (0.19); 0.10 is between them. Compute-bound prompt GEMMs scale with the cores")
#: threads that saturate the memory bandwidth in decode where no rows fit it
DECODE_SATURATION_PRIOR = 2.0
DECODE_SATURATION_SOURCE = (
    "prior: decode streams every weight and is bandwidth-bound; one Cortex-A76 thread "
    "copies 4.64 GB/s on a Raspberry Pi 5 (ggml-org/whisper.cpp#89, memcpy benchmark: 4.6 GB/s "
    "read + 4.6 written), against the ~9 GB/s llama.cpp's 4-thread decode reads there (this "
    "calibration), and each thread also dequantises its share of the weights: two threads "
    "saturate the bus, D(n) = min(1, n / 2) (one thread: half the rate, the cautious end)")

# ------------------------------------------------------------------ builds
#: llama.cpp build number -> date, for ordering builds (approximate, about +-1 month between
#: anchors: release tags bNNNN of github.com/ggml-org/llama.cpp; b4970/b5043/b9307/b9518 from
#: the training rows' sources, whose builds are not newer than those dates). Only the era
#: (:data:`BUILD_ERAS`) is used in the fit, and no anchor is near its split.
LLAMA_CPP_BUILD_DATES: tuple[tuple[int, str], ...] = (
    (1000, "2023-08-07"), (2000, "2024-01-27"), (3000, "2024-05-27"), (4000, "2024-10-30"),
    (4970, "2025-03-27"), (5043, "2025-04-04"), (9307, "2026-05-27"), (9518, "2026-06-04"))
#: llamafile release -> date (approximate)
LLAMAFILE_DATES = {"0.6": "2024-01-04", "0.6.2": "2024-01-27", "0.7": "2024-03-31",
                   "0.8": "2024-04-25", "0.9": "2025-01-08"}
#: llama-cpp-python release -> the llama.cpp it vendors (its CHANGELOG). The PyPI sdist builds
#: without git, so the library reports no build number; ggml carries version numbers only
#: from 2025 on, which dates ggml 0.25 to the 2025+ era.
LLAMA_CPP_PYTHON = {"0.3.36": {"commit": "0c1e57098", "ggml": "0.25.3",
                               "era_date": "2025-09-01"}}
#: per runtime family: where its build eras split and why (the kernels that changed)
BUILD_ERAS: dict[str, dict[str, str]] = {
    "llama_cpp": {"key": "date", "split": "2025-01-01", "why": (
        "llama.cpp's CPU matmuls for Arm were reworked between the 2024 builds and the 2025+ "
        "builds of the rows (weight repacking for Arm dot-product kernels, late 2024; more "
        "kernels since): a calendar split between the rows' 2024-03 and 2025-03 builds")},
    "llamafile": {"key": "version", "split": "0.7", "why": (
        "llamafile 0.7 brought the tinyBLAS matmul kernels (justine.lol/matmul, the source "
        "of the rows: 20 -> 45 prompt tok/s on a Pi 5)")},
}
JETPACK_DATES = {"6.0": "2024-06-01", "6.1": "2024-12-01", "6.2": "2025-01-15"}


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


def compute_precision(fmt_compute: str, peaks: dict[str, float], kind: str = "cpu") -> str:
    """The peak a format's matrix products are measured against. On a CPU: the format's
    compute precision (the estimator's ``FormatInfo.compute``: int8 for llama.cpp's quantized
    types and the genai int4/int8, fp16/bf16 for half formats) where the processor has that
    peak, else fp32 -- the estimator's roofline rule (a Cortex-A72/A57 has no SDOT: its
    quantized dot products run at the fp32 rate). On a GPU (``kind="gpu"``) a quantized
    format is measured against the fp16 (tensor-core) rate where there is one: GPU runtimes
    dequantize weight tiles into half precision (MLC's q4f16, llama.cpp's cuBLAS path) or
    scale int8 MMA per block (llama.cpp's MMQ), and the shipped GPU prefill rows reach 0.27
    (Orin, Super) and 0.34 (Maxwell) of their fp16 peaks against 0.14 of Orin's int8 and 0.68
    of the Nano's fp32 -- one efficiency carries across GPUs only on the fp16 rate."""
    if kind == "gpu" and fmt_compute in ("int8", "int4") and "fp16" in peaks:
        return "fp16"
    if fmt_compute in peaks:
        return fmt_compute
    return "fp32" if "fp32" in peaks else next(iter(peaks))


# ------------------------------------------------------------------ builds
def _date(s: str) -> _dt.date:
    return _dt.date.fromisoformat(s)


def llama_cpp_build_date(number: int) -> str:
    """The approximate date of llama.cpp build ``number`` (linear between the anchors of
    :data:`LLAMA_CPP_BUILD_DATES`, extended at the nearest segment's rate beyond them)."""
    a = LLAMA_CPP_BUILD_DATES
    if number <= a[0][0]:
        (n0, d0), (n1, d1) = a[0], a[1]
    elif number >= a[-1][0]:
        (n0, d0), (n1, d1) = a[-2], a[-1]
    else:
        i = next(i for i in range(1, len(a)) if a[i][0] >= number)
        (n0, d0), (n1, d1) = a[i - 1], a[i]
    t0, t1 = _date(d0).toordinal(), _date(d1).toordinal()
    t = t0 + (t1 - t0) * (number - n0) / (n1 - n0)
    return _dt.date.fromordinal(int(round(t))).isoformat()


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _era(runtime: str, date: str | None, version: str | None) -> str | None:
    spec = BUILD_ERAS.get(runtime)
    if spec is None:
        return None
    if spec["key"] == "date":
        if not date:
            return None
        return ("before " if date < spec["split"] else "from ") + spec["split"]
    if not version:
        return None
    before = _version_tuple(version) < _version_tuple(spec["split"])
    return ("before " if before else "from ") + spec["split"]


def normalize_build(runtime: str, text: str | None) -> dict[str, Any]:
    """A runtime version as a build: ``{"runtime", "raw", "label", "number", "version",
    "date", "approx", "era"}`` (None where the text does not say). Reads llama.cpp build
    numbers (``b4970``, ``b5043 (c262bedd)``, ``(4970)``), dates (``2024-03-26``),
    llama-cpp-python versions (``llama-cpp-python 0.3.36``: the llama.cpp it vendors),
    llamafile versions (``0.7``) and JetPack releases (MLC's containers)."""
    raw = (text or "").strip()
    out: dict[str, Any] = {"runtime": runtime, "raw": raw or None, "label": None,
                           "number": None, "version": None, "date": None, "approx": False,
                           "era": None}
    if not raw or raw.lower().startswith("not stated"):
        return out
    low = raw.lower()
    m_py = re.search(r"llama-cpp-python\s+(\d+(?:\.\d+)+)", low)
    m_num = re.search(r"\bb(\d{3,6})\b", low) or re.search(r"\((\d{4,6})\)", low)
    m_date = re.search(r"(\d{4}-\d{2}-\d{2})", raw)
    if runtime == "llama_cpp" and m_py:
        v = m_py.group(1)
        info = LLAMA_CPP_PYTHON.get(v)
        out.update(version=v, label=f"llama-cpp-python {v}")
        if info:
            out["label"] += f" (llama.cpp {info['commit']}, ggml {info['ggml']})"
            out.update(date=info["era_date"], approx=True)
    elif m_num:
        n = int(m_num.group(1))
        out.update(number=n, label=f"b{n}", date=llama_cpp_build_date(n), approx=True)
    elif m_date:
        out.update(label=m_date.group(1), date=m_date.group(1))
    elif "jetpack" in low:
        m = re.search(r"jetpack\s*(\d+\.\d+)", low)
        if m:
            out.update(label=f"JetPack {m.group(1)}",
                       date=JETPACK_DATES.get(m.group(1)), approx=True)
        else:
            out["label"] = raw
    else:
        m = re.search(r"(\d+(?:\.\d+)+)", raw)
        if m:
            v = m.group(1)
            out.update(version=v, label=v)
            if runtime == "llamafile":
                key = next((k for k in sorted(LLAMAFILE_DATES, key=_version_tuple,
                                                reverse=True)
                            if _version_tuple(k) <= _version_tuple(v)), None)
                if key:
                    out.update(date=LLAMAFILE_DATES[key], approx=key != v)
        else:
            out["label"] = raw
    out["era"] = _era(runtime, out["date"], out["version"])
    return out


def installed_build(runtime: str) -> dict[str, Any] | None:
    """The build of ``runtime`` installed on this machine, where edgeprof can tell (llama.cpp
    through the llama-cpp-python package's version; read from its metadata, nothing is
    imported); None otherwise."""
    if runtime != "llama_cpp":
        return None
    from importlib import metadata

    try:
        v = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return None
    return normalize_build(runtime, f"llama-cpp-python {v}")


def _newest(builds: list[dict[str, Any]]) -> dict[str, Any] | None:
    dated = [b for b in builds if b.get("date")]
    return max(dated, key=lambda b: (b["date"], b.get("number") or 0)) if dated else None


# ------------------------------------------------------------------ boards
_CORE = re.compile(r"Cortex-(A\d+[A-Z]*)", re.I)
_GPU_ARCH = re.compile(r"\b(Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)\b", re.I)


def core_type(name: str, kind: str) -> str | None:
    """The (big) core a processor's name names: ``cortex-a76``, ``ampere``; None if none."""
    m = (_CORE if kind == "cpu" else _GPU_ARCH).search(name or "")
    if not m:
        return None
    return f"cortex-{m.group(1).lower()}" if kind == "cpu" else m.group(1).lower()


def board_of(target, device: str) -> dict[str, Any]:
    """What the predictor needs of a target's processor: peaks (at the target's mode), the
    bandwidth, the processor kind, its cores, the reference thread count (all of the board's
    big cores; None on a GPU) and the share of the processor's peak the big cores have
    (little cores at their clock ratio where the descriptor says big_cores < cores)."""
    bw, peaks, cores = target.processor_figures(device)
    proc = target.get_processor(device)
    kind = proc.kind
    name = proc.name or target.processor
    out = {"id": target.id, "base_id": getattr(target, "base_id", None) or target.id,
           "mode": getattr(target, "mode", None), "device": device, "kind": kind,
           "bandwidth": float(bw), "peaks": dict(peaks), "cores": int(cores),
           "core_type": core_type(name, kind) or core_type(target.processor, kind),
           "n_ref": None, "big_share": 1.0, "little_ratio": 0.0,
           "sha256": getattr(target, "sha256", None),
           "is_host": bool(getattr(target, "is_host", False))}
    if kind == "cpu":
        # the board's CPU cores: the top-level count where the top level is the CPU (an
        # edge_cpu board: rk3588's 8 beside its 4-core big-cluster table), else the table's
        total = int(cores)
        if getattr(target, "kind", "") in ("edge_cpu", "cpu") and device == "cpu":
            total = max(total, int(target.cores.value))
        big = getattr(target, "big_cores", None) or cores
        big = int(min(max(1, int(big)), total))
        out.update(n_ref=big, cores=total)
        if big < total:
            ratio = _little_ratio(target, device)
            out["little_ratio"] = ratio
            if cores > big:  # the processor's peak counts little cores too
                out["big_share"] = big / (big + (cores - big) * ratio)
    return out


def _little_ratio(target, device: str) -> float:
    """Per-core peak of a little core over a big one, from the descriptor's stated core
    types and clocks (``... Cortex-A76 @ 2.4 GHz + ... Cortex-A55 @ 1.8 GHz``): the clock
    ratio x the 128-bit-pipe ratio (:data:`NEON_PIPES`), else 0.5 (assumed)."""
    name = f"{target.get_processor(device).name} {target.processor}"
    parts = re.findall(r"Cortex-(A\d+)[^@+,;]*@\s*([\d.]+)\s*GHz", name, re.I)
    parts = [p for i, p in enumerate(parts) if p[0] not in [q[0] for q in parts[:i]]]
    if len(parts) >= 2:
        (b, bf), (lt, lf) = parts[0], parts[1]
        pb, pl = NEON_PIPES.get(b.upper()), NEON_PIPES.get(lt.upper())
        if pb and pl:
            return (pl * float(lf)) / (pb * float(bf))
    return 0.5


#: 128-bit ASIMD issue per cycle of a core (Arm software optimization guides: A76/A78 two
#: 128-bit pipes; A55 two 64-bit pipes = one 128-bit op per cycle)
NEON_PIPES = {"A76": 2.0, "A78": 2.0, "A78AE": 2.0, "A72": 2.0, "A57": 1.0, "A55": 1.0,
              "A53": 1.0}


def _n_eff(n: int, board: dict[str, Any]) -> float:
    big = board["n_ref"] or n
    return min(n, big) + max(0, n - big) * board["little_ratio"]


def prefill_speed(n: int | None, board: dict[str, Any], serial: float) -> float:
    """Amdahl's throughput of ``n`` threads on the board's cores (big first), in big-core
    units: ``n_eff / (1 + serial (n - 1))``; 1 on a GPU."""
    if n is None or board["kind"] != "cpu":
        return 1.0
    return _n_eff(n, board) / (1.0 + serial * (n - 1))


def decode_speed(n: int | None, board: dict[str, Any], n_sat: float) -> float:
    """Decode throughput of ``n`` threads relative to a saturated memory bus:
    ``min(1, n_eff / n_sat)``; 1 on a GPU."""
    if n is None or board["kind"] != "cpu":
        return 1.0
    return min(1.0, _n_eff(n, board) / n_sat)


# ------------------------------------------------------------------ the training rows
@dataclass(frozen=True)
class RowMap:
    """How one published row is read (a ``[[row]]`` of ``rows.toml``): the target (and
    mode) and device it measured, the runtime, the preset and format that rebuild its bytes
    (None: left out, ``note`` says why), its build where ``runtime_version`` is not one, its
    threads where the CSV states none."""

    match: tuple[tuple[str, str], ...]
    target: str
    device: str
    runtime: str
    preset: str | None
    fmt: str | None
    note: str = ""
    build: str | None = None
    threads: str | int | None = None

    def matches(self, row: dict[str, str]) -> bool:
        return all(row.get(k) == v for k, v in self.match)


@lru_cache(maxsize=4)
def _row_maps(path: str) -> tuple[RowMap, ...]:
    raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for i, r in enumerate(raw.get("row") or []):
        if not isinstance(r.get("match"), dict) or not r["match"]:
            raise ValueError(f"{path}: [[row]] {i + 1} has no match table")
        left = r.get("left_out")
        out.append(RowMap(match=tuple(sorted((str(k), str(v)) for k, v in r["match"].items())),
                          target=r["target"], device=r["device"], runtime=r["runtime"],
                          preset=None if left else r["preset"],
                          fmt=None if left else r["format"],
                          note=f"left out: {left}" if left else r.get("note", ""),
                          build=r.get("build"), threads=r.get("threads")))
    return tuple(out)


def row_maps(path: str | os.PathLike = ROWS_FILE) -> tuple[RowMap, ...]:
    """The ``[[row]]`` tables of ``rows.toml``."""
    return _row_maps(str(path))


def map_row(row: dict[str, str], maps: tuple[RowMap, ...] | None = None) -> RowMap:
    """The one ``[[row]]`` whose match the CSV row satisfies (ValueError: none or several)."""
    maps = row_maps() if maps is None else maps
    hits = [m for m in maps if m.matches(row)]
    if len(hits) != 1:
        key = {k: row.get(k) for k in ("device", "model", "quant_format", "runtime_version",
                                       "metric")}
        raise ValueError(f"{'no' if not hits else len(hits)} [[row]] of {ROWS_FILE.name} "
                         f"match{'es' if len(hits) == 1 else ''} the training row {key}")
    return hits[0]


def training_rows() -> list[dict[str, str]]:
    with TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def row_key(row: dict[str, str]) -> str:
    """A row's identity, from its content (what the fit's samples and leave-one-out name)."""
    return " | ".join(row.get(k, "") for k in ("device", "model", "quant_format",
                                                 "runtime_version", "metric"))


def _registry_target(target_id: str):
    from edgeprof.targets import get_target

    return get_target(target_id)


def _resolve_target(target_id: str) -> tuple[Any, str | None, dict[str, float]]:
    """(target, note, overrides) for a rows.toml target; ``TARGET:MODE`` through the
    registry's modes, or (registry without modes) the base target with the Super mode's
    figures as overrides."""
    from edgeprof.core.errors import UserError

    try:
        return _registry_target(target_id), None, {}
    except UserError:
        if target_id != "jetson_orin_nano:super":
            raise
    base = _registry_target(target_id.split(":")[0])
    return base, ("the target registry has no modes: Super mode figures from "
                  + SUPER_MODE_SOURCE), {"bandwidth": SUPER_MODE_BANDWIDTH,
                                         "compute_scale": SUPER_MODE_GPU_CLOCK_RATIO,
                                         "mode": "super"}


def sample_from(*, sid: Any, target, device: str, runtime: str, stage: str, rate: float,
                estimate: Any, bandwidth: float | None = None, threads: int | None = None,
                build: dict[str, Any] | None = None, compute_scale: float = 1.0,
                mode: str | None = None, **extra: Any) -> dict[str, Any]:
    """One measured (stage, rate) with the figures of its model and the board it ran on: a
    fitting sample (peaks at the target's mode: a mode row is fitted against its peaks)."""
    n = estimate_numbers(estimate)
    b = board_of(target, device)
    prec = compute_precision(n["format_compute"], b["peaks"], b["kind"])
    s = {"id": sid, "target": b["base_id"], "target_id": b["id"],
         "mode": mode if mode is not None else b["mode"], "device": device,
         "kind": b["kind"], "core_type": b["core_type"], "runtime": runtime, "stage": stage,
         "rate": float(rate), "format": n["format"], "format_compute": n["format_compute"],
         "num_layers": n["num_layers"],
         "prompt_tokens": n["prompt_tokens"], "decode_bytes_per_token": n["decode_bytes_per_token"],
         "decode_macs_per_token": n["decode_macs_per_token"], "prefill_macs": n["prefill_macs"],
         "prefill_bytes": n["prefill_bytes"],
         "peak_bandwidth": float(bandwidth or b["bandwidth"]), "precision": prec,
         "peak_macs": b["peaks"][prec] * compute_scale * b["big_share"],
         "threads": threads if b["kind"] == "cpu" else None, "n_ref": b["n_ref"],
         "cores": b["cores"], "little_ratio": b["little_ratio"],
         "build": build or normalize_build(runtime, None)}
    s.update(extra)
    return s


def _row_threads(row: dict[str, str], m: RowMap, board: dict[str, Any]) -> int | None:
    if board["kind"] != "cpu":
        return None
    cell = (row.get("threads") or "").strip()
    if cell:
        return int(re.search(r"\d+", cell).group(0))
    if m.threads in (None, "cores"):
        return board["n_ref"]
    return int(m.threads)


def published_samples() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(samples, left-out rows) of the training file, figures from the estimator."""
    from edgeprof.profilers.estimate.llm import estimate_llm
    from edgeprof.zoo.llm import PRESETS

    rows = training_rows()
    maps = row_maps()
    samples, skipped = [], []
    for i, row in enumerate(rows):
        m = map_row(row, maps)
        if m.preset is None:
            skipped.append({"id": i, "key": row_key(row), "model": row["model"],
                            "device": row["device"], "reason": m.note})
            continue
        target, tnote, over = _resolve_target(m.target)
        board = board_of(target, m.device)
        est = estimate_llm(PRESETS[m.preset], m.fmt, prompt_tokens=ASSUMED_PROMPT,
                           gen_tokens=ASSUMED_GEN, depth=0, target=target, device=m.device)
        stage = {"prefill_tok_s": "prefill", "decode_tok_s": "decode"}[row["metric"]]
        build = normalize_build(m.runtime, m.build or row["runtime_version"])
        build["raw"] = row["runtime_version"]
        note = m.note + (f"; {tnote}" if tnote else "")
        samples.append(sample_from(
            sid=i, target=target, device=m.device, runtime=m.runtime, stage=stage,
            rate=float(row["value"]), estimate=est, bandwidth=over.get("bandwidth"),
            compute_scale=over.get("compute_scale", 1.0), mode=over.get("mode"),
            threads=_row_threads(row, m, board), build=build, key=row_key(row),
            model=m.preset, published_model=row["model"], published_device=row["device"],
            version=row["runtime_version"], source=row["source"], quote=row["quote"],
            note=note))
    return samples, skipped


# ------------------------------------------------------------------------ the fit
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


def _era_of(s: dict[str, Any]) -> str | None:
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


def _thread_param(fit: dict[str, Any] | None, stage: str) -> float:
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
        e = _era_of(s)
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
        r.update(n=len(mine), versions=_versions(mine), builds=_builds(mine), eras=eras)
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
                        "versions": _versions(mine), "builds": _builds(mine), "eras": eras}
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
        target = (targets or {}).get(tid) or _registry_target(tid)
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


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _prior_of(entries: list[dict[str, Any]]) -> dict[str, Any]:
    fr = [e["decode"]["base"]["bandwidth_fraction"] for e in entries if e["decode"]]
    ef = [e["prefill"]["base"]["efficiency"] for e in entries if e["prefill"]]
    over = [e["decode"]["base"]["per_layer_s"] for e in entries
            if e["decode"] and e["decode"]["overhead_identified"]]
    return {"bandwidth_fraction": _median(fr) if fr else 0.5,
            "fraction_range": [min(fr), max(fr)] if fr else [0.1, 1.0],
            "efficiency": _median(ef) if ef else 0.1,
            "efficiency_range": [min(ef), max(ef)] if ef else [0.01, 1.0],
            "per_layer_s": _median(over) if over else 0.0,
            "boards": sorted(f"{e['target']}/{e['device']}" for e in entries)}


def fit_prior(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The uncalibrated prior: the median fitted fraction / efficiency over the entries,
    overall and per processor kind (``by_kind``: cpu, gpu), the per-layer overhead by device
    where one was identified (else 0)."""
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
            "per_layer_s": {d: _median(v) for d, v in over.items()},
            "by_kind": by_kind, "n_entries": len(entries), "spread": MAX_SPREAD}


# ------------------------------------------------------------------ the prediction core
def _why_size(stage: str, fit: dict[str, Any], n: dict[str, Any]) -> str | None:
    if stage == "decode":
        lo, hi = fit["bytes_range"]
        x = n["decode_bytes_per_token"]
        if x < lo / SIZE_SPAN or x > hi * SIZE_SPAN:
            return (f"{x / 1e6:.0f} MB per token is outside the rows' {lo / 1e6:.0f}-"
                    f"{hi / 1e6:.0f} MB")
        return None
    rng = fit.get("macs_range")
    if not rng:
        return None
    lo, hi = rng
    x = n["prefill_macs"]
    if x < lo / SIZE_SPAN or x > hi * SIZE_SPAN:
        return (f"{x / 1e9:.0f} GMAC for the prompt is outside the rows' {lo / 1e9:.0f}-"
                f"{hi / 1e9:.0f} GMAC")
    return None


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
        w = _why_size(stage, fit, n)
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
    # estimated: from a board of the same core, else the prior of the processor kind
    src = _same_core(cal["entries"], stage, board, entry)
    if src is not None:
        key, sfit = src
        p, why, used = _params(sfit, stage, runtime, era)
        return {"p": p, "prov": "estimated", "why": why, "fit": sfit, "source": key,
                "used": used}
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


def _core(cal: dict[str, Any], n: dict[str, Any], board: dict[str, Any], runtime: str, *,
          threads: int | None = None, era: str | None = None) -> dict[str, Any]:
    entry = cal["entries"].get(f"{board['base_id']}/{board['device']}")
    prec = compute_precision(n["format_compute"], board["peaks"], board["kind"])
    peak = board["peaks"][prec] * board.get("big_share", 1.0)
    st = {s: _stage(cal, entry, s, n, runtime, era, board, prec)
          for s in ("decode", "prefill")}
    serial = _thread_param(st["prefill"]["fit"], "prefill")
    n_sat = _thread_param(st["decode"]["fit"], "decode")
    t_dec, t_pre, _ = _times(n, board, peak, st["decode"]["p"], st["prefill"]["p"], threads,
                             serial, n_sat)
    return {"entry": entry, "precision": prec, "peak": peak, "dec": st["decode"]["p"],
            "pre": st["prefill"]["p"], "t_dec": t_dec, "t_pre": t_pre,
            "prov": {s: st[s]["prov"] for s in st}, "why": {s: st[s]["why"] for s in st},
            "source": {s: st[s]["source"] for s in st}, "used": {s: st[s]["used"] for s in st},
            "fits": {s: st[s]["fit"] for s in st}, "serial": serial, "n_sat": n_sat}


def _ex_sigma(cal: dict[str, Any], stage: str, kind: str) -> float:
    d = ((cal.get("extrapolation_sigma") or {}).get(stage) or {}).get(kind) or {}
    return float(d.get("sigma", EXTRAPOLATION_SIGMA))


def _sigma(cal: dict[str, Any], c: dict[str, Any], stage: str) -> tuple[float, str]:
    """(sigma of the log error, where it comes from) of one stage of a prediction: the
    board's leave-one-out sigma of predictions inside what its rows covered, plus, in
    quadrature, each extrapolation's own sigma (:func:`attach_cv`)."""
    fit = c["fits"][stage]
    kinds = [k for k, _ in c["why"][stage]]
    ex = [(k, _ex_sigma(cal, stage, k)) for k in kinds]
    if c["prov"][stage] == "predicted" or c["source"][stage]:
        base = float(fit.get("sigma", 0.0)) if fit else 0.0
        k = int(fit.get("sigma_rows", 0)) if fit else 0
        what = (f"leave-one-out sigma {base:.2f}"
                + (f" ({k} own rows{': few, mostly the pooled one' if k < 3 else ''})"
                   if fit else ""))
        s2 = base ** 2 + sum(x ** 2 for _, x in ex)
        if c["source"][stage]:
            s2 += CORE_TRANSFER_SIGMA ** 2
            what += f", + {CORE_TRANSFER_SIGMA} (another board of the same core)"
    else:
        spread = float(cal["prior"].get("spread", MAX_SPREAD))
        base = math.log(max(spread, ESTIMATE_MIN_SPREAD)) / Z80
        what = f"the prior's leave-one-out spread x/ {spread:.2f}"
        s2 = base ** 2 + sum(x ** 2 for _, x in ex)
    if ex:
        what += ", + " + ", ".join(f"{x:.2f} ({k})" for k, x in ex)
    return max(SIGMA_FLOOR, math.sqrt(s2)), what


def _interval(t: float, sigma: float, roof: float) -> tuple[float, float, bool]:
    """(low, high) seconds, never below the roofline; capped at x/ MAX_SPREAD."""
    capped = math.exp(Z80 * sigma) > MAX_SPREAD
    f = min(math.exp(Z80 * sigma), MAX_SPREAD)
    return max(t / f, roof), max(t * f, roof), capped


# ------------------------------------------------------------------ leave-one-out
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
    c = _core(cal, n, _sample_board(s), s["runtime"], threads=s.get("threads"),
              era=_era_of(s))
    return _rate_of(c, s), c["prov"][s["stage"]], c


def _fit_all(samples: list[dict[str, Any]], *, per_runtime: bool, targets=None,
             prior: dict[str, Any] | None = None) -> dict[str, Any]:
    entries = fit_entries(samples, per_runtime=per_runtime, targets=targets)
    return {"entries": entries,
            "prior": dict(prior) if prior is not None else fit_prior(entries)}


def leave_one_out(samples: list[dict[str, Any]], *, per_runtime: bool = False, targets=None,
                  prior: dict[str, Any] | None = None, nested: bool = True
                  ) -> list[dict[str, Any]]:
    """Each sample predicted by a fit to all the others (prior included, unless one is
    given), through the prediction path. ``nested``: the held-out row's interval is the one
    that fit states (its sigmas from a leave-one-out of the others), so coverage is honest."""
    out = []
    for i, s in enumerate(samples):
        rest = samples[:i] + samples[i + 1:]
        cal = _fit_all(rest, per_runtime=per_runtime, targets=targets, prior=prior)
        if nested and len(rest) > 1:
            attach_cv(cal, leave_one_out(rest, per_runtime=per_runtime, targets=targets,
                                         prior=prior, nested=False))
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
            sigma, _ = _sigma(cal, c, s["stage"])
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
            s2 = (k * _rms(own) ** 2 + POOLED_WEIGHT * pooled[st] ** 2) / (k + POOLED_WEIGHT)
            e[st]["sigma"] = math.sqrt(s2)
            e[st]["sigma_own"] = _rms(own) if own else None
            e[st]["sigma_rows"] = k
            e[st]["sigma_pooled"] = pooled[st]
            e[st]["sigma_pooled_from"] = pooled_from[st]
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
    if by_prior:
        cal["prior"]["spread"] = min(MAX_SPREAD, max(ESTIMATE_MIN_SPREAD,
                                                     math.exp(Z80 * _rms(by_prior))))
        cal["prior"]["spread_uncapped"] = math.exp(Z80 * _rms(by_prior))
        cal["prior"]["spread_n"] = len(by_prior)


def _within(stage: str) -> float:
    return 0.25 if stage == "decode" else 0.50


def _summary(rows: list[dict[str, Any]], name: str, stage: str | None) -> dict[str, Any]:
    errs = [abs(r["error"]) for r in rows]
    out = {"board": name, "stage": stage or "all", "n": len(rows),
           "median_abs_error": _median(errs),
           "within_25": sum(x <= 0.25 for x in errs) / len(errs),
           "within_50": sum(x <= 0.50 for x in errs) / len(errs)}
    if stage:
        out["within"] = sum(x <= _within(stage) for x in errs) / len(errs)
        out["within_bound"] = _within(stage)
    iv = [r for r in rows if "covered" in r]
    if iv:
        out["coverage"] = sum(bool(r["covered"]) for r in iv) / len(iv)
        out["median_width"] = _median([r["width"] for r in iv])
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
        width = _median([r["width"] for r in rows])
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
            why.append(f"median width {width:.1f}x: of {len(rows)} held-out rows, {est} had no "
                       "other row of that stage on their board (estimated, from the prior or "
                       f"a board of the same core) and {ext} were predicted outside what the "
                       f"other rows covered ({', '.join(kinds) or '-'}): few rows, one per "
                       "build era and runtime on most boards")
        out[st] = {"n": len(rows), "coverage": cov, "median_width": width,
                   "meets_goal": cov >= INTERVAL_GOAL["coverage"]
                   and width <= INTERVAL_GOAL["median_width"], "why": why}
    return out


# ------------------------------------------------------------------ building files
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _version() -> str:
    from edgeprof._version import __version__

    return __version__


def learned_builds(samples: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per runtime: the builds the samples learned (normalised, newest last)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for s in samples:
        b = s.get("build") or {}
        if b.get("label"):
            out.setdefault(s["runtime"], {})[b["label"]] = {
                k: b.get(k) for k in ("label", "number", "version", "date", "approx", "era")}
    return {rt: sorted(v.values(), key=lambda b: (b.get("date") or "", b.get("number") or 0))
            for rt, v in sorted(out.items())}


def _strip(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k not in ("estimate", "rate_ref")} for s in samples]


def build_calibration() -> dict[str, Any]:
    """The shipped calibration, fitted only to the training file (deterministic: the same
    file gives the same numbers; ``created_utc`` aside)."""
    samples, skipped = published_samples()
    cal = _fit_all(samples, per_runtime=False)
    loo = leave_one_out(samples, per_runtime=False, nested=True)
    attach_cv(cal, loo)
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "name": "llm--published",
            "entries": cal["entries"], "prior": cal["prior"],
            "extrapolation_sigma": cal["extrapolation_sigma"],
            "builds": learned_builds(samples), "build_eras": BUILD_ERAS,
            "cv": {"method": "leave-one-out", "n": len(loo), "rows": loo,
                   "boards": cv_table(loo), "intervals": interval_report(loo)},
            "samples": _strip(samples), "left_out": skipped,
            "assumptions": {"prompt_tokens": ASSUMED_PROMPT, "gen_tokens": ASSUMED_GEN,
                            "threads": {"prefill_serial_share": PREFILL_SERIAL_PRIOR,
                                        "prefill_source": PREFILL_SERIAL_SOURCE,
                                        "decode_saturation_threads": DECODE_SATURATION_PRIOR,
                                        "decode_source": DECODE_SATURATION_SOURCE}},
            "created_utc": _now(), "edgeprof_version": _version(),
            "note": (f"fitted only to edgeprof/profilers/predict/data/llm/"
                     f"llm_measurements_train.csv ({len(samples)} rows used, {len(skipped)} left "
                     "out: " + "; ".join(f"{s['model']} ({s['device']}): {s['reason']}"
                                         for s in skipped)
                     + "); bytes and MACs per token from edgeprof's estimator for the preset "
                     "and format each row is read as (data/llm/rows.toml)")}


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
    if d.get("format_version") not in READABLE_VERSIONS:
        raise bad(f"format_version {d.get('format_version')!r}, this edgeprof reads "
                  f"{', '.join(map(str, READABLE_VERSIONS))}")
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
                    nums += [float(x["factor"]) for x in (r.get("eras") or {}).values()]
            if e.get("prefill"):
                nums += [float(e["prefill"]["base"]["efficiency"]), float(e["prefill"]["sigma"])]
                for r in e["prefill"]["runtimes"].values():
                    nums += [float(r["efficiency"])]
                    nums += [float(x["factor"]) for x in (r.get("eras") or {}).values()]
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


def _entries_for_transfer(cals: list[dict[str, Any]]) -> dict[str, Any]:
    """Entries of every calibration (the first one's wins per key): the boards a
    same-core estimate may come from."""
    out: dict[str, Any] = {}
    for c in cals:
        for k, e in c["entries"].items():
            out.setdefault(k, e)
    return out


# ------------------------------------------------------------------ the public API
def _figure(value: float, low: float, high: float, unit: str, prov: str, cal: str | None,
            basis: str) -> dict[str, Any]:
    return {"value": value, "low": low, "high": high, "unit": unit, "provenance": prov,
            "calibration": cal if prov == "predicted" else None, "basis": basis}


def _threads_asked(threads: int | None, board: dict[str, Any], target) -> dict[str, Any]:
    from edgeprof.core.errors import UserError

    if board["kind"] != "cpu":
        return {"value": None, "default": threads is None,
                "why": "a GPU runs the layers: host threads do not change the prediction"
                       + (f" (--threads {threads} ignored)" if threads else "")}
    if threads is None:
        return {"value": board["n_ref"], "default": True,
                "why": f"all of {board['id']}'s {board['n_ref']} big cores (the default)"}
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise UserError(f"threads must be a positive whole number, got {threads!r}")
    if threads > board["cores"]:
        raise UserError(f"{board['id']} --device {board['device']} has {board['cores']} "
                        f"cores; {threads} threads were asked")
    return {"value": threads, "default": False, "why": "as asked"}


def _build_asked(build: str | None, runtime: str, cals: list[dict[str, Any]]
                 ) -> tuple[dict[str, Any] | None, str]:
    if build:
        b = normalize_build(runtime, build)
        return b, f"build {b['label'] or build} (as asked)"
    b = installed_build(runtime)
    if b is not None and b.get("era"):
        return b, f"build {b['label']} (installed here; the default)"
    known = [x for c in cals for x in (c.get("builds") or {}).get(runtime, [])]
    newest = _newest(known)
    if newest is not None:
        why = f"build {newest['label']} (the newest the calibration knows; the default)"
        if b is not None:
            why += f"; the installed {b['label']} has no known date"
        return newest, why
    return b, (f"build {b['label']} (installed here)" if b else
               "build not known (no build is known for this runtime)")


def predict_llm(estimate: Any, target, *, device: str = "cpu", runtime: str = "llama_cpp",
                threads: int | None = None, build: str | None = None,
                dirs: list[Path] | None = None) -> dict[str, Any]:
    """Prefill and decode tokens/s, TTFT and TPOT of ``estimate`` (an LLMEstimate or its
    dict) on ``target`` (a mode target, e.g. ``jetson_orin_nano:super``, uses its peaks)'s
    processor ``device`` with ``runtime`` at ``build`` (default: the one installed here, else
    the newest the calibration knows) and ``threads`` (default: all of the board's big
    cores). Each figure is ``{"value", "low", "high", "unit", "provenance", "calibration",
    "basis"}``; ``notes`` say what was transferred or extrapolated, why an interval is wider
    than the 2x goal, or why a figure is only estimated. A corrupted calibration file raises
    :class:`LLMCalibrationError` (exit 2); an unknown device UnknownNameError; a thread count
    the board does not have UserError (exit 2)."""
    n = estimate_numbers(estimate)
    board = board_of(target, device)
    th = _threads_asked(threads, board, target)
    cals = llm_calibrations(dirs)
    key = f"{board['base_id']}/{device}"
    cal, prior = _select(cals, key)
    b, build_why = _build_asked(build, runtime, [cal] if cal else cals)
    era = (b or {}).get("era")
    base = {"entries": dict(_entries_for_transfer(cals)), "prior": prior,
            "extrapolation_sigma": (cal or (cals[0] if cals else {})).get(
                "extrapolation_sigma") or {}}
    if cal is not None:
        base["entries"].update(cal["entries"])
    c = _core(base, n, board, runtime, threads=th["value"], era=era)
    entry = c["entry"]
    name = cal["name"] if cal else None
    notes: list[str] = []
    if cal is None:
        notes.append(f"no LLM calibration for {board['base_id']} --device {device}: every "
                     "figure is estimated (from a board of the same core where one is "
                     "calibrated, else from the datasheet roofline and the prior of the "
                     "shipped boards)")
    elif entry and entry.get("fingerprint", {}).get("descriptor_sha256") not in (
            None, board["sha256"]) and not board["mode"]:
        notes.append(f"calibration '{name}' was fitted for another description of "
                     f"{board['base_id']} (descriptor sha256 differs); used, but may be off")
    if board["mode"]:
        notes.append(f"mode {board['mode']}: the calibration's fitted fractions applied to "
                     f"the mode's peaks ({board['bandwidth'] / 1e9:.0f} GB/s, "
                     f"{c['peak'] / 1e12:.2f} T{c['precision']} MAC/s)")
    notes.append(f"runtime {runtime}, {build_why}"
                 + (f", era {era}" if era else ""))
    learned = sorted({x for st in ("decode", "prefill") for x in
                      ((c["fits"][st] or {}).get("runtimes", {}).get(runtime, {})
                       .get("builds") or [])})
    if learned and b and b.get("label") and b["label"] not in learned:
        notes.append(f"the calibration learned {runtime} builds {', '.join(learned)}; "
                     f"predicting for {b['label']}")

    # threads: say what was transferred
    t_why: dict[str, list[tuple[str, str]]] = {"decode": [], "prefill": []}
    if board["kind"] == "cpu":
        for st in ("decode", "prefill"):
            fit = c["fits"][st]
            counts = (fit or {}).get("thread_counts") or []
            if th["value"] is not None and counts and th["value"] not in counts:
                law = ((fit or {}).get("threads") or {})
                what = (f"Amdahl, serial share {c['serial']:.2f}" if st == "prefill" else
                        f"bandwidth saturating at {c['n_sat']:g} threads")
                t_why[st].append(("threads", f"transferred from {', '.join(map(str, counts))} "
                                             f"threads to {th['value']} ({what}, "
                                             f"{'fitted' if law.get('fitted') else 'prior'})"))
    notes.append(f"threads: {th['value'] if th['value'] is not None else 'n/a'} ({th['why']})")

    roof_dec = n["decode_bytes_per_token"] / board["bandwidth"]
    roof_pre = max(n["prefill_macs"] / (board["peaks"][c["precision"]]),
                   n["prefill_bytes"] / board["bandwidth"])
    out_iv = {}
    for st, t, roof in (("decode", c["t_dec"], roof_dec), ("prefill", c["t_pre"], roof_pre)):
        c["why"][st] = c["why"][st] + t_why[st]
        sigma, what = _sigma(base, c, st)
        lo, hi, capped = _interval(t, sigma, roof)
        out_iv[st] = (lo, hi)
        for _, w in c["why"][st]:
            notes.append(f"{st}: {w}; interval widened")
        if c["prov"][st] == "estimated":
            if c["source"][st]:
                notes.append(
                    f"{st}: estimated from {c['source'][st]} (the same core, "
                    f"{board['core_type']}): its fitted "
                    f"{'bandwidth fraction' if st == 'decode' else 'prefill efficiency'} "
                    f"({c['used'][st]}) applied to {board['id']}'s peaks; not validated: no "
                    "two calibrated boards share a core")
            elif cal is not None:
                notes.append(f"{st}: calibration '{name}' has no {st} rows for "
                             f"{board['base_id']} --device {device}: estimated from the prior "
                             f"of the shipped {board['kind']} boards")
        width = (hi / lo) if lo > 0 else float("inf")
        if capped:
            notes.append(f"{st}: the interval is capped at x/ {MAX_SPREAD:g} ({what} would "
                         "be wider): it may not hold the truth")
        elif width > INTERVAL_GOAL["median_width"] * 1.0001:
            notes.append(f"{st}: interval {width:.1f}x wide (goal: 2x) from {what}")
    dec, pre = c["dec"], c["pre"]
    o = dec["per_layer_s"]
    bw = board["bandwidth"]
    mem_s = n["decode_bytes_per_token"] / (dec["bandwidth_fraction"] * bw)
    dec_basis = (f"{n['decode_bytes_per_token'] / 1e6:.1f} MB/token / ({dec['bandwidth_fraction']:.2f}"
                 f" x {bw / 1e9:.1f} GB/s) + {n['num_layers']} layers x {o * 1e3:.3f} ms")
    pre_basis = (f"{n['prefill_macs'] / 1e9:.1f} GMAC / ({pre['efficiency']:.3f} x "
                 f"{c['peak'] / 1e9:.1f} G{c['precision']} MAC/s) for {n['prompt_tokens']} tokens"
                 f" + {n['num_layers']} layers x {o * 1e3:.3f} ms")
    if th["value"] is not None and th["value"] != board["n_ref"]:
        dec_basis += f", at {th['value']} of {board['n_ref']} threads"
        pre_basis += f", at {th['value']} of {board['n_ref']} threads"
    pv = {"decode": c["prov"]["decode"], "prefill": c["prov"]["prefill"]}
    P = n["prompt_tokens"]
    dec_lo, dec_hi = out_iv["decode"]
    pre_lo, pre_hi = out_iv["prefill"]
    t_dec, t_pre = max(c["t_dec"], roof_dec), max(c["t_pre"], roof_pre)
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
        "ttft_ms": _figure(1e3 * t_pre, 1e3 * pre_lo, 1e3 * pre_hi, "ms", pv["prefill"], name,
                           "prefill of the prompt (the first token is sampled from its "
                           "logits)"),
        "tpot_ms": _figure(1e3 * t_dec, 1e3 * dec_lo, 1e3 * dec_hi, "ms", pv["decode"], name,
                           dec_basis),
        "runtime": runtime, "compute_precision": c["precision"],
        "build": {k: (b or {}).get(k) for k in ("label", "date", "era")} | {"why": build_why},
        "threads": th, "target": board["id"], "mode": board["mode"],
        "estimated_from": {st: c["source"][st] for st in c["source"] if c["source"][st]},
        "decode_bound": bound, "decode_bound_calibrated": bound_calibrated,
        "roofline": {"decode_ms": 1e3 * roof_dec, "prefill_ms": 1e3 * roof_pre,
                     "peak_bandwidth": bw, "peak_macs": board["peaks"][c["precision"]]},
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
    """Fitting samples from measured GenerationRecords (ok ones only), at the thread count
    and build each ran with."""
    from edgeprof.profilers.estimate.llm import backend_formats, estimate_llm

    out: list[dict[str, Any]] = []
    for i, r in enumerate(records):
        if getattr(r, "status", "ok") != "ok":
            continue
        spec = spec_for_model(r.model)
        # the record's own runtime's layout (OpenVINO's int4 is not ONNX Runtime GenAI's)
        layout = {"backend": r.backend} \
            if r.format in backend_formats().get(r.backend, {}) else {}
        est = estimate_llm(spec, r.format, prompt_tokens=max(1, int(r.n_prompt or 1)),
                           gen_tokens=max(1, int(r.n_gen or 1)), depth=int(r.n_depth or 0),
                           target=target, device=device, **layout)
        threads = int(r.n_threads) if getattr(r, "n_threads", None) else None
        common = {"target": target, "device": device, "runtime": r.backend, "estimate": est,
                  "model": r.model, "version": r.runtime_version, "n_depth": r.n_depth,
                  "n_threads": r.n_threads, "threads": threads,
                  "build": normalize_build(r.backend, r.runtime_version),
                  "source": "measured on this machine"}
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
    :class:`~edgeprof.core.llm.GenerationRecord` s (and the thread law where the records ran
    at several thread counts); ``spec_for_model(record.model)`` gives the LLMSpec. Returns
    the calibration (the shipped file's format, entry ``<target>/<device>``) and, with
    ``write``, saves it atomically to ``path`` (default: the user's calibration folder,
    ``llm--<target>--<label>.json``)."""
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
    if getattr(target, "base_id", None):
        targets[target.base_id] = target
    # the prior for leave-one-out on the host: the shipped one (what an uncalibrated host
    # prediction would use)
    try:
        prior = load_llm_calibration(SHIPPED_FILE)["prior"]
    except LLMCalibrationError:
        prior = None
    cal = _fit_all(samples, per_runtime=True, targets=targets, prior=prior)
    nested = len(samples) <= 60  # n^2 refits: plain leave-one-out for many records
    loo = leave_one_out(samples, per_runtime=True, targets=targets, prior=prior,
                        nested=nested) if len(samples) > 1 else []
    attach_cv(cal, loo)
    for e in cal["entries"].values():
        for st in ("decode", "prefill"):
            if e[st] and "sigma" not in e[st]:
                e[st]["sigma"] = e[st]["sigma_pooled"] = 0.0
                e[st]["sigma_own"] = None
    tid = board_of(target, device)["base_id"]
    name = f"{FILE_PREFIX}{tid}--{label}"
    out = {"format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
           "entries": cal["entries"], "prior": cal["prior"],
           "extrapolation_sigma": cal.get("extrapolation_sigma") or {},
           "builds": learned_builds(samples), "build_eras": BUILD_ERAS,
           "cv": {"method": "leave-one-out", "n": len(loo), "rows": loo,
                  "boards": cv_table(loo) if loo else [],
                  "intervals": interval_report(loo) if nested and loo else {}},
           "samples": _strip(samples), "left_out": [
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


__all__ = ["BUILD_ERAS", "LLMCalibrationError", "RowMap", "build_calibration",
           "calibrate_llm_host", "compute_precision", "estimate_numbers", "installed_build",
           "llm_calibrations", "load_llm_calibration", "map_row", "normalize_build",
           "predict_llm", "row_maps", "write_calibration"]

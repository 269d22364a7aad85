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
quantized format; on an NPU the format's precision where the NPU has its rate, else the one it
has (the RK3588's: int8) -- of the big cores (:func:`board_of`). ``fraction`` (effective/peak
bandwidth), ``per_layer_s`` and ``efficiency`` (of that peak at the prompt's batch) are
fitted:

* **shipped** (``data/llm/llm--published.json``), fitted by ``build_calibration`` of
  tools/build_llm_calibration.py (build-only, not installed) only to
  ``data/llm/llm_measurements_train.csv`` (published rows, each with its source and quote).
  ``data/llm/rows.toml`` says, keyed on each row's content, the target (and mode), device,
  runtime, preset, format, build and threads it is read as, or why it is left out (a row's
  prompt and generated tokens where it states them; a TTFT row is its prompt's prefill rate;
  formats no backend makes, llama.cpp's q3_k_m and RKLLM's w8a8 / w4a16: ``formats``). Entries
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
(:data:`PREFILL_SERIAL_PRIOR`, :data:`DECODE_SATURATION_PRIOR`). A GPU or NPU prediction
ignores threads.

**Provenance and intervals.** A figure is ``predicted`` when a calibration has rows for that
stage on that (target, device). Its interval is an 80 % one (the truth four times in five),
value x/ exp(1.2816 sigma): sigma is the board's leave-one-out log-error RMS of predictions
inside what its rows covered, shrunk towards the pooled one of that stage
(:data:`POOLED_WEIGHT` pseudo-rows) -- the runtime's own where the board's rows are of several
runtimes and it has two held-out rows or more, shrunk towards the board's --, plus in
quadrature, for each way the prediction leaves what the rows covered (another runtime, build
era, mode, thread count, compute precision, a model more than 2x outside the bytes or MACs of
the runtime's own rows, else the board's), the sigma the held-out rows that made that
extrapolation showed (at least :data:`EXTRAPOLATION_SIGMA`; :func:`attach_cv`); capped at x/
:data:`MAX_SPREAD` with a note saying so. Otherwise it is ``estimated``: decode from another
processor of the same board (its bandwidth fraction of the same DRAM, times the CPU's share
beside an accelerator between a CPU and a GPU or NPU, ``fit.cpu_share``: the Orin Nano's CPU
from its GPU's rows; sigma + :data:`DEVICE_TRANSFER_SIGMA`), else from a board of the same
core (an uncalibrated Cortex-A76 board from the Raspberry Pi 5's fractions; sigma +
:data:`CORE_TRANSFER_SIGMA`), else from the prior of its processor kind (median fitted
fraction / efficiency of the shipped boards), with the prior's leave-one-out spread. Each
calibration reports, from nested leave-one-out (each held-out row's interval is the one a fit
without it states; the shipped file holds a row's twins at other builds of its era out with
it: ``same_measurement`` of tools/build_llm_calibration.py), how often the interval held the
truth and its median width (high/low), per board and stage, against the goal (80 %, at most
2x); a prediction wider than 2x says why. No figure is ever faster than the datasheet
roofline, and nothing depends on this machine's load.

**Modules.** :func:`predict_llm` is defined here (and what callers use most is importable
from here, ``__all__``); the rest lives in this package's modules: ``constants`` (data files, file format,
the fit's and the intervals' fixed numbers), ``builds`` (runtime versions as builds and
eras), ``inputs`` (the estimate's numbers, the board's figures, the thread laws, a fitting
sample), ``fit`` (the per-board fit and the
prior), ``core`` (one prediction's parameters, times and sigma), ``crossval``
(leave-one-out, the intervals' sigmas and reports), ``files`` (the helpers of writing
and reading calibration files), ``host`` (calibrating this machine), ``formats`` (the rows'
formats no backend makes). Building the shipped file (reading the published rows as
rows.toml says, ``published_samples``; ``build_calibration``, ``write_calibration``,
``comparable``, ``same_measurement``) is tools/build_llm_calibration.py's in the source
repository, not installed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from edgeprof.core.errors import UserError

from edgeprof.profilers.predict.llm.builds import (installed_build, llama_cpp_build_date,
                                                   newest_build, normalize_build)
from edgeprof.profilers.predict.llm.constants import (FORMAT_VERSION, INTERVAL_GOAL,
                                                      MAX_SPREAD, SHIPPED_FILE, TRAIN_CSV)
from edgeprof.profilers.predict.llm.core import core_entry, stage_interval, stage_sigma
from edgeprof.profilers.predict.llm.files import (LLMCalibrationError, entries_for_transfer,
                                                  llm_calibrations, load_llm_calibration,
                                                  select_calibration)
from edgeprof.profilers.predict.llm.formats import row_format
from edgeprof.profilers.predict.llm.host import calibrate_llm_host
from edgeprof.profilers.predict.llm.inputs import (DECODE_SATURATION_PRIOR,
                                                   PREFILL_SERIAL_PRIOR, board_of,
                                                   compute_precision, estimate_numbers,
                                                   prefill_speed)


# ------------------------------------------------------------------ the public API
def _figure(value: float, low: float, high: float, unit: str, prov: str, cal: str | None,
            basis: str) -> dict[str, Any]:
    return {"value": value, "low": low, "high": high, "unit": unit, "provenance": prov,
            "calibration": cal if prov == "predicted" else None, "basis": basis}


def _threads_asked(threads: int | None, board: dict[str, Any], target) -> dict[str, Any]:
    if board["kind"] != "cpu":
        what = "an NPU" if board["kind"] == "npu" else "a GPU"
        return {"value": None, "default": threads is None,
                "why": f"{what} runs the layers: host threads do not change the prediction"
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
    newest = newest_build(known)
    if newest is not None:
        why = f"build {newest['label']} (the newest the calibration knows; the default)"
        if b is not None:
            why += f"; the installed {b['label']} has no known date"
        return newest, why
    return b, (f"build {b['label']} (installed here)" if b else
               "build not known (no build is known for this runtime)")


def predict_llm(estimate: Any, target, *, device: str = "cpu", runtime: str = "llama_cpp",
                threads: int | None = None, build: str | None = None,
                dirs: list[Path] | None = None,
                calibration: str | os.PathLike | None = None) -> dict[str, Any]:
    """Prefill and decode tokens/s, TTFT and TPOT of ``estimate`` (an LLMEstimate or its
    dict) on ``target`` (a mode target, e.g. ``jetson_orin_nano:super``, uses its peaks)'s
    processor ``device`` with ``runtime`` at ``build`` (default: the one installed here, else
    the newest the calibration knows) and ``threads`` (default: all of the board's big
    cores). Each figure is ``{"value", "low", "high", "unit", "provenance", "calibration",
    "basis"}``; ``notes`` say what was transferred or extrapolated, why an interval is wider
    than the 2x goal, or why a figure is only estimated. A corrupted calibration file raises
    :class:`LLMCalibrationError` (exit 2); an unknown device UnknownNameError; a thread count
    the board does not have UserError (exit 2). ``calibration``: an LLM calibration file
    used before the search (``calibrate --measurements --out FILE``); one without an entry
    for the board's processor is UserError (exit 2)."""
    n = estimate_numbers(estimate)
    board = board_of(target, device)
    th = _threads_asked(threads, board, target)
    cals = llm_calibrations(dirs)
    key = f"{board['base_id']}/{device}"
    if calibration is not None:
        mine = load_llm_calibration(calibration)
        if key not in mine["entries"]:
            raise UserError(f"LLM calibration '{mine.get('name')}' ({calibration}) has no "
                            f"entry for {key}: it holds {', '.join(mine['entries']) or 'none'}"
                            "; give --target/--device accordingly or another calibration")
        cals = [mine, *cals]
    cal, prior = select_calibration(cals, key, runtime)
    b, build_why = _build_asked(build, runtime, [cal] if cal else cals)
    era = (b or {}).get("era")
    base = {"entries": dict(entries_for_transfer(cals)), "prior": prior,
            "extrapolation_sigma": (cal or (cals[0] if cals else {})).get(
                "extrapolation_sigma") or {}}
    if cal is not None:
        base["entries"].update(cal["entries"])
    c = core_entry(base, n, board, runtime, threads=th["value"], era=era)
    entry = c["entry"]
    name = cal["name"] if cal else None
    notes: list[str] = []
    if calibration is not None and cal is not cals[0]:
        notes.append(f"calibration '{cals[0].get('name')}' has no {runtime} rows on {key}: "
                     f"{runtime} is predicted by '{name}'")
    if cal is None:
        notes.append(f"no LLM calibration for {board['base_id']} --device {device}: every "
                     "figure is estimated (decode from another processor of the board, "
                     "else from a board of the same core where one is calibrated, else from "
                     "the datasheet roofline and the prior of the shipped boards)")
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
        sigma, what = stage_sigma(base, c, st)
        lo, hi, capped = stage_interval(t, sigma, roof)
        out_iv[st] = (lo, hi)
        for _, w in c["why"][st]:
            notes.append(f"{st}: {w}; interval widened")
        if c["prov"][st] == "estimated":
            if c["transfer"][st] == "board":
                boards = (base["prior"].get("cpu_share") or {}).get("boards") or []
                notes.append(
                    f"{st}: estimated from {c['source'][st]}, another processor of the same "
                    f"board: its fitted bandwidth fraction of the board's DRAM ({c['used'][st]})"
                    + (f" x {c['scale'][st]:.2f}, the CPU's share beside an accelerator on "
                       f"{', '.join(boards)}" if c["scale"][st] != 1 else ""))
            elif c["source"][st]:
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


#: what this package's users import from it (the rest from its modules)
__all__ = [
    "DECODE_SATURATION_PRIOR", "FORMAT_VERSION", "LLMCalibrationError", "MAX_SPREAD",
    "PREFILL_SERIAL_PRIOR", "SHIPPED_FILE", "TRAIN_CSV", "board_of", "calibrate_llm_host",
    "compute_precision", "estimate_numbers", "installed_build", "llama_cpp_build_date",
    "load_llm_calibration", "normalize_build", "predict_llm", "prefill_speed", "row_format"]

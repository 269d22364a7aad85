"""Builds the shipped board calibrations from
``edgeprof/profilers/predict/data/device_measurements_train.csv`` only.

That file holds published latencies (Raspberry Pi 4 and 5, Jetson Nano, STM32 boards), each
with its source and a quote. ``data/board_rows.toml`` says how every row is read: the
target and processor it ran on, its runtime family (and build, where builds differ), its
precision, and the ``builtin:`` network that rebuilds it (``edgeprof.zoo``) -- or why the
row is left out. The rules match the row's text, not its position, and a row no rule reads
is an error, so rows can be appended to the file in any order.

Each (board, processor) gets its own calibration: a board's GPU rows say nothing of its CPU
and the reverse (``<board>--published.json`` for the processor the board's kind implies,
``<board>--published-<device>.json`` for another). The build estimates each model on that
processor's view of the board, chooses the grouping of kernel classes and the runtime
factors' shrink by leave-one-out, fits the few parameters (fit.py), reports nested
leave-one-out (the choice made again without each row; each row predicted by the method the
predictor would use for it, with the interval it would give) and writes the calibration
files and ``data/prior.json``.

* **Threads.** Rows at 1 and 4 threads of one runtime, build, precision and model on a board
  give that runtime's serial share there (Amdahl's law, the median over the pairs: ncnn's
  tables); the fit and the predictions for other thread counts use it.
* **Builds.** Where one board's rows of a runtime come from several builds (ncnn's tables of
  May 2020 and June 2023 on the Pi 4), the newest build is the family's own key and an older
  one ``family@build``: a prediction is for the newest unless a build is asked for.
* **Clock.** MCU rows measured at another clock than the descriptor's are scaled to it
  (latency x f / f_descriptor: compute and the AXI bus both run off the core clock).

Build-only: not installed (the wheel carries ``edgeprof/`` alone); it imports edgeprof's
run-time pieces (the estimator, kernels.py, fit.py, runtimes.py, threads.py). Run from the
repository root (needs torch)::

    .venv/bin/python tools/build_board_calibrations.py [--write]

prints the nested cross-validation table (``benchmarks/predict_boards.py`` prints the same
and, with ``--write``, also saves it to benchmarks/results/predict_boards.txt); ``--write``
rewrites the shipped calibration files and ``data/prior.json``.
"""

from __future__ import annotations
from edgeprof.core.artifact import created_utc

import argparse
import csv
import math
import re
import statistics
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root, for edgeprof
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import edgeprof.profilers.predict as _predict  # noqa: E402
from edgeprof.profilers.predict.fit import (GROUPINGS, PRECISION_TRANSFER_WIDENING,  # noqa: E402
                                            THREAD_TRANSFER_WIDENING, factor_gap,
                                            family_sigma, fit, pooled_sigma,
                                            predict_sample_method, resolve_factor_key)

#: the package's data folder: the training rows and rules read here, the files written here
DATA = Path(_predict.__file__).parent / "data"
TRAIN_CSV = DATA / "device_measurements_train.csv"
RULES_FILE = DATA / "board_rows.toml"
#: (rules table, the CSV column its patterns read)
TABLES = (("board", "device"), ("runtime", "framework"), ("precision", "precision"),
          ("model", "model"))

#: the family factors' shrink a board's fit chooses among by leave-one-out (a family's rows
#: count as n against a prior worth ``shrink`` rows at a factor of 1)
SHRINKS = (0.25, 0.5, 1.0)
#: the groupings a board's fit chooses among by leave-one-out (``select_model``)
CANDIDATE_GROUPINGS = ("tied", "compute_memory", "split", "split_linear")
#: offered besides on a GPU board, whose runtimes run 3x3 stride-1 convolutions by Winograd
#: (cuDNN's and TensorRT's WINOGRAD algorithms, ncnn's Vulkan winograd shaders), and on a CPU
#: where one of the rows' runtimes does (ncnn, MNN: runtimes.toml ``winograd``); others
#: have none (XNNPACK, ONNX Runtime's MLAS and QNNPACK, MCU kernels), and their kernels stay
#: in ``conv`` (kernels.runs_winograd)
WINOGRAD_GROUPINGS = tuple(f"{g}+winograd" for g in CANDIDATE_GROUPINGS)


def training_rows() -> list[dict[str, str]]:
    with TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@lru_cache(maxsize=1)
def rules() -> dict[str, list[dict[str, Any]]]:
    return tomllib.loads(RULES_FILE.read_text(encoding="utf-8"))


def _match(table: str, column: str, row: dict[str, str],
           table_rules: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The first rule of ``table`` that reads the row; a ``{N}`` in its string values is
    the pattern's N-th group (``build = "ultralytics-{1}"``)."""
    for rule in table_rules.get(table, []):
        where = rule.get("where", {})
        m = re.search(rule["pattern"], row.get(column, ""))
        if m and all(re.search(v, row.get(c, "")) for c, v in where.items()):
            out = dict(rule)
            for i, g in enumerate(m.groups(), 1):
                out = {k: v.replace(f"{{{i}}}", g or "") if isinstance(v, str) else v
                       for k, v in out.items()}
            return out
    raise ValueError(f"no [[{table}]] rule of {RULES_FILE.name} reads the {column} "
                     f"{row.get(column)!r} (row: {row.get('model')!r} on "
                     f"{row.get('device', '')[:50]!r}); add one")


def read_row(row: dict[str, str], table_rules: dict | None = None) -> dict[str, Any]:
    """How the board fit reads one published row: target, processor kind (None: the
    runtime's default there), family, build, precision, builtin model (or ``left_out``),
    clock and notes. :class:`ValueError` where a table has no rule for it."""
    table_rules = table_rules or rules()
    board, runtime, precision, model = (_match(t, c, row, table_rules) for t, c in TABLES)
    return {"target": board["target"],
            "processor": runtime.get("processor") or board.get("processor"),
            "family": runtime["family"], "build": runtime.get("build"),
            "precision": precision["precision"], "builtin": model.get("builtin"),
            "input_shape": model.get("input_shape"),
            "left_out": model.get("left_out"), "clock_hz": board.get("clock_hz"),
            "notes": [r["note"] for r in (board, runtime, precision, model) if r.get("note")]}


def device_for(target, family: str, kind: str | None) -> str:
    """The board's device a row ran on: the board's processor of ``kind`` (``gpu``, ``cpu``)
    where the rules name one, else the runtime's default processor there."""
    from edgeprof.profilers.predict.runtimes import board_processors, processor_for

    if kind is None:
        return processor_for(target, family, None)[0]
    for device, k in board_processors(target):
        if k == kind:
            return device
    raise ValueError(f"{target.id} has no {kind} processor (its processors: "
                     f"{board_processors(target)})")


@lru_cache(maxsize=1)
def readings() -> tuple[dict[str, Any], ...]:
    """Every training row read (``read_row``), with its index ``id`` and device."""
    from edgeprof.targets import get_target_registry

    reg = get_target_registry()
    out = []
    for i, row in enumerate(training_rows()):
        r = read_row(row)
        r["id"] = i
        r["device"] = device_for(reg.get(r["target"]), r["family"], r["processor"])
        out.append(r)
    return tuple(out)


def calibration_name(target, device: str) -> str:
    """``<board>--published`` for the processor the board's kind implies, else
    ``<board>--published-<device>``."""
    return (f"{target.id}--published" if device == target.implied_device
            else f"{target.id}--published-{device}")


def groups() -> list[tuple[str, str]]:
    """The (board, device) pairs the training rows calibrate, in the file's order."""
    return list(dict.fromkeys((r["target"], r["device"]) for r in readings()
                              if r["builtin"] is not None))


def build_keys(rs: list[dict[str, Any]]) -> dict[int, str]:
    """row id -> the family key a row is fitted under: the family for its newest build on
    the board (and for rows that name none), ``family@build`` for an older one."""
    newest: dict[tuple[str, str], str] = {}
    for r in rs:
        if r["build"]:
            k = (r["target"], r["family"])
            newest[k] = max(newest.get(k, r["build"]), r["build"], key=build_order)
    return {r["id"]: (f"{r['family']}@{r['build']}"
                      if r["build"] and r["build"] != newest[(r["target"], r["family"])]
                      else r["family"]) for r in rs}


def build_order(build: str) -> tuple:
    """Builds in release order: numbers compared as numbers (8.3.152 after 8.3.39, 2023-06
    after 2020-05)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.split(r"(\d+)", build) if p)


def serial_shares(rs: list[dict[str, Any]], rows: list[dict[str, str]],
                  big_cores: int) -> dict[str, dict[str, Any]]:
    """family -> {serial_share, n, speedups}: Amdahl's serial share from the board's pairs
    of rows of one family, build, precision and model at 1 thread and at all the big cores
    (the median speedup s over the pairs: serial = (P / s - 1) / (P - 1))."""
    from edgeprof.profilers.predict.threads import parse_threads
    from edgeprof.targets import get_target_registry

    reg = get_target_registry()
    by: dict[tuple, dict[int, float]] = {}
    for r in rs:
        if r["builtin"] is None:
            continue
        t, _ = parse_threads(rows[r["id"]].get("threads"), r["family"], reg.get(r["target"]))
        if t is None:
            continue
        key = (r["family"], r["build"], r["precision"], r["builtin"])
        by.setdefault(key, {})[t] = float(rows[r["id"]]["latency_ms"])
    speed: dict[str, list[float]] = {}
    for (family, *_), ts in by.items():
        if 1 in ts and big_cores in ts and big_cores > 1:
            speed.setdefault(family, []).append(ts[1] / ts[big_cores])
    out = {}
    for family, ss in speed.items():
        s = statistics.median(ss)
        serial = min(1.0, max(0.0, (big_cores / s - 1.0) / (big_cores - 1.0)))
        out[family] = {"serial_share": serial, "n": len(ss),
                       "median_speedup": s, "speedups": sorted(ss)}
    return out


def board_samples(target_id: str, device: str | None = None, *, targets_dir=None
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict, dict]:
    """(samples, left-out rows, per-class kernel ranges, fitted serial shares) for one
    board's processor ``device`` (default: the one the board's kind implies)."""
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict.kernels import features, kernel_ranges, kernels_of
    from edgeprof.profilers.predict.predictor import processor_kind_of
    from edgeprof.profilers.predict.runtimes import executed_precision, on_device
    from edgeprof.profilers.predict.threads import (big_cores, family_info, parse_threads,
                                                    work_scale)
    from edgeprof.targets import get_target_registry

    board = get_target_registry(targets_dir).get(target_id)
    device = device or board.implied_device
    target = on_device(board, device)
    rows = training_rows()
    mine = [r for r in readings() if r["target"] == target_id and r["device"] == device]
    keys = build_keys(mine)
    shares = serial_shares(mine, rows, big_cores(target))
    samples, skipped, ranges = [], [], {}
    handles: dict[tuple, Any] = {}
    for r in mine:
        i, row = r["id"], rows[r["id"]]
        if r["builtin"] is None:
            skipped.append({"id": i, "model": row["model"], "reason": r["left_out"]})
            continue
        family, precision = r["family"], r["precision"]
        shape = r.get("input_shape")
        key = (r["builtin"], tuple(shape or ()))
        if key not in handles:
            handles[key] = resolve_model(f"builtin:{r['builtin']}",
                                         input_shapes=[shape] if shape else None)
        handle = handles[key]
        executed = executed_precision(target, precision)
        est = estimate_model(handle, target, executed)
        kernels = kernels_of(est, family, processor_kind_of(target))
        threads, threads_note = parse_threads(row.get("threads"), family, target)
        fitted = shares.get(family)
        serial = float(fitted["serial_share"] if fitted else family_info(family)["serial_share"])
        published = float(row["latency_ms"])
        scale = 1.0
        if r["clock_hz"] is not None and target.frequency is not None:
            scale = float(r["clock_hz"]) / float(target.frequency.value)
        for c, (lo, hi) in kernel_ranges(kernels).items():
            rg = ranges.setdefault(c, [lo, hi])
            ranges[c] = [min(rg[0], lo), max(rg[1], hi)]
        samples.append({
            "id": i, "model": r["builtin"], "published_model": row["model"],
            "family": keys[i], "runtime": family, "build": r["build"],
            "precision": executed, "published_precision": row["precision"],
            "latency_ms": published * scale,
            "published_latency_ms": published, "clock_scale": scale,
            "framework": row["framework"], "source": row["source"],
            "note": "; ".join(r["notes"]),
            "threads": threads, "threads_published": row.get("threads"),
            "threads_note": threads_note, "serial_share": serial,
            "work_scale": work_scale(threads, target, serial),
            "features": features(kernels)})
    return samples, skipped, ranges, shares


def winograd_board(target, samples: list[dict[str, Any]] | None = None) -> bool:
    """Whether the board processor's fit is offered the ``+winograd`` groupings: a GPU, whose
    runtimes (cuDNN, TensorRT, ncnn-Vulkan) run 3x3 stride-1 convolutions by Winograd, or
    a processor where one of the rows' runtimes does (ncnn and MNN on an Arm CPU:
    runtimes.toml ``winograd``)."""
    if getattr(target, "kind", "") in ("gpu", "edge_gpu"):
        return True
    return any(float(s["features"].get("conv3x3_roofline_ms") or 0.0) > 0
               for s in samples or ())


# ------------------------------------------------------------------ the model choice
# Which grouping of kernel classes and which shrink of the runtime factors a board's rows
# carry, chosen by leave-one-out, and the intervals' spreads of that leave-one-out: the
# shipped calibrations' choices (fit.py fits a given choice; the predictor reads the spreads
# a calibration stores).
def candidates_for(n_samples: int, *, winograd: bool = False,
                   shrinks: tuple[float, ...] = SHRINKS) -> list[tuple[str, float]]:
    """(grouping, shrink) pairs the samples can carry: below 10 samples two groups at most
    (one efficiency for all, one for compute and one for memory kernels, or, where
    ``winograd``, one for 3x3 convolutions and one for the rest); simplest first (ties go to
    the earlier)."""
    names = CANDIDATE_GROUPINGS + (WINOGRAD_GROUPINGS if winograd else ())
    out = []
    for g in names:
        if n_samples < 10 and len(GROUPINGS[g]) > 2:
            continue
        out.extend((g, float(sh)) for sh in shrinks)
    return out


def selection_spread(samples: list[dict[str, Any]], predicted: list[float],
                     methods: list[str] | None = None) -> float:
    """The log-error spread a choice minimises: over every row, each predicted by the
    method the predictor would use for it (``methods`` is for the record)."""
    logs = [math.log(s["latency_ms"] / p) for s, p in zip(samples, predicted)]
    return float(math.sqrt(sum(x * x for x in logs) / len(logs)))


def select_model(samples: list[dict[str, Any]], *, winograd: bool = False,
                 shrinks: tuple[float, ...] = SHRINKS
                 ) -> tuple[str, float, dict[str, float], dict[str, Any]]:
    """The (grouping, shrink) among :func:`candidates_for` whose leave-one-out spread
    (:func:`selection_spread`) is smallest; returns them, every candidate's spread (for the
    record) and the winner's leave-one-out ``{"predicted", "methods"}``."""
    spreads: dict[str, float] = {}
    runs: dict[str, dict[str, Any]] = {}
    cands = candidates_for(len(samples), winograd=winograd, shrinks=shrinks)
    for g, sh in cands:
        pred, meth = leave_one_out_methods(samples, g, shrink=sh)
        key = f"{g} shrink {sh:g}"
        spreads[key] = selection_spread(samples, pred, meth)
        runs[key] = {"grouping": g, "shrink": sh, "predicted": pred, "methods": meth}
    order = list(spreads)
    best = min(order, key=lambda k: (round(spreads[k], 6), order.index(k)))
    r = runs[best]
    sig = method_sigmas(samples, r["predicted"], r["methods"])
    s_cal = sig["log_sigma_calibrated"] if sig["log_sigma_calibrated"] is not None \
        else sig["log_sigma"]
    eb = empirical_bayes_shrink(fit(samples, r["grouping"], shrink=r["shrink"]), s_cal)
    if eb is not None and eb < r["shrink"]:
        pred, meth = leave_one_out_methods(samples, r["grouping"], shrink=eb)
        r = {"grouping": r["grouping"], "shrink": eb, "predicted": pred, "methods": meth}
        spreads[f"{r['grouping']} shrink {eb:.3g} (empirical Bayes cap)"] = \
            selection_spread(samples, pred, meth)
    return r["grouping"], r["shrink"], spreads, {"predicted": r["predicted"],
                                                 "methods": r["methods"]}



def empirical_bayes_shrink(params: dict[str, Any], sigma: float | None) -> float | None:
    """The shrink the rows themselves imply, ``sigma^2 / tau^2`` (a random-effects model of
    the runtime factors: a family's mean log residual over its n rows scatters by tau^2 +
    sigma^2 / n around 1, so the posterior mean of its log factor is ``sum / (n + sigma^2 /
    tau^2)``); None where it cannot be told (fewer than two families, no spread between
    them beyond the noise).

    ``sigma``: the calibrated rows' leave-one-out spread (the noise of one row). Leave-one-out
    cannot see the shrink a family seen once needs (held out, it has no factor at all); this
    estimate can. On the published rows it agrees with leave-one-out's choice where
    leave-one-out sees the families (Pi 4: 0.51 against 0.5; Jetson Nano: 0.19 against 0.25)
    and caps it on the MCU (0.02 against 1), where TF-Lite Micro's reference kernels, seen
    once, are 15x slower than the board's shared efficiencies and a shrink of 1 kept only
    their square root."""
    if not sigma:
        return None
    sh = float(params.get("shrink") or 0.0)
    means = [(math.log(float(v["factor"])) * (v["n"] + sh) / v["n"], int(v["n"]))
             for v in params["factors"].values() if v.get("n") and float(v["factor"]) > 0]
    if len(means) < 2:
        return None
    s2 = float(sigma) ** 2
    tau2 = sum(m * m - s2 / n for m, n in means) / len(means)
    return s2 / tau2 if tau2 > 0 else None



def sample_gap(params: dict[str, Any], sample: dict[str, Any]) -> float:
    """:func:`factor_gap` of the factor :func:`resolve_factor` gives ``sample``."""
    key, _ = resolve_factor_key(params, sample)
    if key is None:
        return 1.0
    entry = params["factors"][key]
    return factor_gap(float(entry["factor"]), entry.get("n"), params.get("shrink"))



def leave_one_out_methods(samples: list[dict[str, Any]], grouping: str, *,
                          shrink: float | None = None) -> tuple[list[float], list[str]]:
    """Leave-one-out predictions (roofline basis) and the method each used."""
    pred, meth = [], []
    for i, s in enumerate(samples):
        p, m = predict_sample_method(fit(samples[:i] + samples[i + 1:], grouping,
                                         shrink=shrink), s)
        pred.append(p)
        meth.append(m)
    return pred, meth



def method_sigmas(samples: list[dict[str, Any]], predicted: list[float],
                  methods: list[str], prior_sigma: float | None = None) -> dict[str, Any]:
    """The log-error spreads of leave-one-out predictions: every row, the rows predicted by
    the calibrated method, the rows predicted by a transfer (precision or runtime); None
    where no row was. With ``prior_sigma`` (the other boards' calibrated spread), the
    calibrated spread -- the interval's base -- is pooled with it (:func:`pooled_sigma`;
    the rows' own spread stays as ``log_sigma_calibrated_own``)."""
    def rms(idx: list[int]) -> float | None:
        if not idx:
            return None
        logs = [math.log(samples[i]["latency_ms"] / predicted[i]) for i in idx]
        return float(math.sqrt(sum(x * x for x in logs) / len(logs)))

    cal = [i for i, m in enumerate(methods) if m == "calibrated"]
    tr = [i for i, m in enumerate(methods) if m != "calibrated"]
    out = {"log_sigma": rms(list(range(len(samples)))), "log_sigma_calibrated": rms(cal),
           "log_sigma_transfer": rms(tr), "n_calibrated": len(cal), "n_transfer": len(tr)}
    if prior_sigma is not None and out["log_sigma_calibrated"] is not None:
        out["log_sigma_calibrated_own"] = out["log_sigma_calibrated"]
        out["log_sigma_calibrated"] = pooled_sigma(out["log_sigma_calibrated"], len(cal),
                                                   float(prior_sigma))
    # each runtime's own calibrated spread (an application's timings with their pre- and
    # post-processing scatter more than a benchmark tool's): pooled with the board's by
    # row_sigma / the predictor
    fams: dict[str, list[int]] = {}
    for i in cal:
        fams.setdefault(str(samples[i].get("family")), []).append(i)
    out["log_sigma_family"] = {f: {"own": rms(idx), "n": len(idx)} for f, idx in fams.items()}
    return out



def row_sigma(sigmas: dict[str, Any], method: str, factors: dict[str, Any] | None = None,
              family: str | None = None) -> float:
    """The log spread of a prediction's interval by its method (the predictor's rule): the
    calibrated rows' leave-one-out spread (every row's where none was calibrated); x
    1.5 for a precision transfer; for a runtime transfer the
    larger of the transfer rows' leave-one-out spread and the calibrated spread combined
    with the spread of the board's runtime factors (x the predictor's widening)."""
    s_cal = sigmas.get("log_sigma_calibrated")
    s0 = float(s_cal if s_cal is not None else sigmas["log_sigma"])
    if method == "calibrated":
        return family_sigma(sigmas, family, s0)
    if method == "precision transfer":
        return family_sigma(sigmas, family, s0) * PRECISION_TRANSFER_WIDENING
    logs = [math.log(float(v["factor"] if isinstance(v, dict) else v))
            for v in (factors or {}).values()]
    spread = math.sqrt(sum(x * x for x in logs) / len(logs)) if logs else 0.5
    s = math.sqrt(s0 ** 2 + spread ** 2) * THREAD_TRANSFER_WIDENING
    st = sigmas.get("log_sigma_transfer")
    return max(s, float(st)) if st is not None else s


def fit_board(target_id: str, device: str | None = None, *, targets_dir=None
              ) -> dict[str, Any]:
    """A board processor's rows and the model leave-one-out chooses for them (grouping,
    shrink, the winner's leave-one-out predictions and its own calibrated spread): the first
    half of :func:`build_board`, which the other boards' interval priors read."""
    from edgeprof.profilers.predict.runtimes import on_device
    from edgeprof.targets import get_target_registry

    board = get_target_registry(targets_dir).get(target_id)
    device = device or board.implied_device
    target = on_device(board, device)
    samples, skipped, ranges, shares = board_samples(target_id, device,
                                                     targets_dir=targets_dir)
    winograd = winograd_board(target, samples)
    grouping, shrink, spreads, loo = select_model(samples, winograd=winograd)
    own = method_sigmas(samples, loo["predicted"], loo["methods"])
    return {"target": target, "device": device, "samples": samples, "skipped": skipped,
            "ranges": ranges, "serial_shares": shares,
            "winograd": winograd, "grouping": grouping, "shrink": shrink,
            "spreads": spreads, "loo": loo, "own_sigma": own["log_sigma_calibrated"],
            "n_calibrated": own["n_calibrated"]}


def cross_board_sigma(fitted: dict[str, dict[str, Any]], target_id: str
                      ) -> tuple[float | None, int]:
    """The interval prior of one board: the other boards' own calibrated leave-one-out
    spreads pooled by their rows (root of the row-weighted mean of squares), and how many
    rows it rests on; (None, 0) where no other board has calibrated rows."""
    import math

    parts = [(f["n_calibrated"], f["own_sigma"]) for t, f in fitted.items()
             if t != target_id and f["own_sigma"] is not None and f["n_calibrated"]]
    n = sum(k for k, _ in parts)
    if not n:
        return None, 0
    return math.sqrt(sum(k * s * s for k, s in parts) / n), n


def build_board(target_id: str, device: str | None = None, *, targets_dir=None,
                fitted: dict[str, Any] | None = None, prior_sigma: float | None = None,
                prior_rows: int = 0, transfer: dict[str, Any] | None = None
                ) -> tuple[Any, list[dict[str, Any]]]:
    """Fit one board processor's calibration (with its nested leave-one-out error); returns
    (calibration, left-out rows). ``prior_sigma`` (the other boards' calibrated spread,
    :func:`cross_board_sigma`) is pooled into the calibrated interval spread, in the shipped
    fit and in every nested fold alike; ``transfer`` (the runtimes' factors on the other
    boards of its processor kind, :func:`cross_board_factors`) gives a runtime without rows
    here its factor, in the shipped fit and in every nested fold alike."""
    from edgeprof._version import __version__
    from edgeprof.profilers.predict.calibration import Calibration
    from edgeprof.profilers.predict.fit import PRIOR_SIGMA_WEIGHT, cv_summary
    from edgeprof.profilers.predict.predictor import fingerprint_of
    from edgeprof.targets import get_target_registry

    f = fitted or fit_board(target_id, device, targets_dir=targets_dir)
    target, samples, skipped, ranges = f["target"], f["samples"], f["skipped"], f["ranges"]
    grouping, shrink, loo = f["grouping"], f["shrink"], f["loo"]
    params = fit(samples, grouping, shrink=shrink, transfer=transfer)
    params["grouping_spreads"] = f["spreads"]
    shares = f.get("serial_shares") or {}
    params["serial_share"] = {fam: v["serial_share"] for fam, v in shares.items()}
    params["serial_share_fit"] = {
        fam: {"n_pairs": v["n"], "median_speedup": v["median_speedup"],
              "source": "rows of one build, precision and model at 1 thread and at all the "
                        "big cores (Amdahl: serial = (P / speedup - 1) / (P - 1), median "
                        "speedup over the pairs)"} for fam, v in shares.items()}
    nested = nested_leave_one_out(samples, winograd=f["winograd"], prior_sigma=prior_sigma,
                                  transfer=transfer)
    cv = cv_summary(samples, nested["predicted"], nested["methods"])
    cv["method"] = ("nested leave-one-out" if nested["folds"] == "leave-one-out"
                    else f"nested {nested['folds']} cross-validation")
    # the intervals' spreads: the chosen model's leave-one-out on every row (the procedure
    # whose coverage the nested figures below measure, fold by fold)
    cv.update(method_sigmas(samples, loo["predicted"], loo["methods"], prior_sigma))
    if prior_sigma is not None:
        cv.update({"log_sigma_prior": prior_sigma, "prior_sigma_rows": prior_rows,
                   "prior_sigma_weight": PRIOR_SIGMA_WEIGHT,
                   "prior_sigma_source": "the other shipped boards' calibrated "
                                         "leave-one-out spreads, pooled by their rows"})
    cv["nested_log_sigma"] = method_sigmas(samples, nested["predicted"],
                                           nested["methods"])["log_sigma"]
    cover = nested_coverage(samples, nested)
    per_row = cover.pop("rows")
    cv.update(cover)
    for e, choice, sg, (inside, width) in zip(cv["errors"], nested["choices"],
                                              nested["sigmas"], per_row):
        e["chosen"], e["log_sigma"] = choice, sg
        e["interval_held"], e["interval_width"] = inside, width
    runtimes = {}
    builds = {s["family"]: s.get("build") for s in samples}
    for key, v in params.pop("factors").items():
        family, precision = key.split("/")
        runtimes[key] = {"family": family, "precision": precision,
                         "version": builds.get(family),
                         "factor": v["factor"], "n": v["n"],
                         "sources": sorted({s["framework"] for s in samples
                                            if s["family"] == family
                                            and s["precision"] == precision})}
    cal = Calibration(
        name=calibration_name(get_target_registry(targets_dir).get(target_id),
                              f["device"]), target=target_id, fingerprint=fingerprint_of(target),
        runtimes=runtimes, parameters=params, cv=cv, ranges=ranges, samples=samples,
        created_utc=created_utc(),
        edgeprof_version=__version__,
        note=(f"fitted only to edgeprof/profilers/predict/data/device_measurements_train.csv "
              f"({len(samples)} rows used, {len(skipped)} left out: "
              + "; ".join(f"row {s['id']} {s['reason']}" for s in skipped[:1])
              + (" (and the same for the others)" if len(skipped) > 1 else "")
              + "); runtime versions as published (see samples)"))
    return cal, skipped


def cross_board_factors(fitted: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per calibration, its runtimes' factors on the other boards with a processor of the
    same kind (:func:`transfer_factors`), each board's factors from its full fit."""
    from edgeprof.profilers.predict.predictor import processor_kind_of

    factors = {name: {k: v["factor"] for k, v in fit(f["samples"], f["grouping"],
                                                     shrink=f["shrink"])["factors"].items()}
               for name, f in fitted.items()}
    kinds = {name: processor_kind_of(f["target"]) for name, f in fitted.items()}
    return {name: transfer_factors({o: factors[o] for o in fitted if kinds[o] == kinds[name]},
                                   name) for name in fitted}


def transfer_factors(factors_by_board: dict[str, dict[str, float]], board: str
                     ) -> dict[str, dict[str, Any]]:
    """Each runtime's factor (``family/precision``, its current build's: keys of an older
    build, ``ncnn@2020-05``, are left out) on the boards of ``factors_by_board`` other than
    ``board`` (boards with a processor of the same kind): the geometric mean over those
    boards, with the boards it rests on. A runtime's factor is the speed of its kernels
    against the board's shared efficiencies, and it carries across boards better than 1
    does (TorchScript 2.4 and 3.0 on the Raspberry Pi 4 and 5):
    the build checks it on every runtime with rows on several
    boards (benchmarks/results/predict_boards.txt, "runtime transfer")."""
    pooled: dict[str, dict[str, float]] = {}
    for other, factors in factors_by_board.items():
        for key, f in factors.items():
            if other != board and "@" not in key:
                pooled.setdefault(key, {})[other] = float(f)
    return {key: {"factor": math.exp(statistics.fmean(math.log(f) for f in per.values())),
                  "boards": sorted(per)} for key, per in sorted(pooled.items())}


#: above this many rows the nested cross-validation holds out a tenth at a time (rows i,
#: i + 10, ... together) instead of one row: the inner choice is a leave-one-out over the
#: rest, so nested leave-one-out costs n^3 fits (an 80-row board: about twenty minutes)
NESTED_FOLDS_ABOVE = 30
NESTED_FOLDS = 10


def nested_leave_one_out(samples: list[dict[str, Any]], *, winograd: bool = False,
                         shrinks: tuple[float, ...] = SHRINKS,
                         prior_sigma: float | None = None, folds: int | None = None,
                         transfer: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each row predicted by the model :func:`select_model` chooses *without it* (the
    grouping and shrink chosen again on the other rows), with the method the predictor would
    use, and the 90 % interval the predictor would give it: the log spreads of that inner
    leave-one-out (:func:`row_sigma`; its calibrated spread pooled with ``prior_sigma``
    where given), reaching to the family factor's gap (:func:`sample_gap`). Rows are held
    out one at a time, or ``folds`` at a time above ``NESTED_FOLDS_ABOVE`` rows (default
    ``NESTED_FOLDS``; row i in fold i mod folds): each is still predicted by a fit and a
    choice that never saw it. Returns ``{"predicted", "methods", "sigmas", "choices",
    "gaps", "folds"}`` per row. ``transfer`` (:func:`transfer_factors`) gives a held-out row
    whose runtime has no other row its factor on the other boards, as the shipped fit does;
    the choice and the spreads are made without it, as the shipped ones are."""
    n = len(samples)
    if folds is None:
        folds = NESTED_FOLDS if n > NESTED_FOLDS_ABOVE else n
    folds = max(1, min(folds, n))
    out: dict[int, tuple] = {}
    for k in range(folds):
        held = [i for i in range(n) if i % folds == k]
        rest = [s for i, s in enumerate(samples) if i % folds != k]
        g, sh, _, inner = select_model(rest, winograd=winograd, shrinks=shrinks)
        params = fit(rest, g, shrink=sh, transfer=transfer)
        sigmas = method_sigmas(rest, inner["predicted"], inner["methods"], prior_sigma)
        for i in held:
            p, m = predict_sample_method(params, samples[i])
            out[i] = (p, m, row_sigma(sigmas, m, params["factors"], samples[i].get("family")),
                      sample_gap(params, samples[i]), f"{g} shrink {sh:g}")
    cols = list(zip(*(out[i] for i in range(n)))) if n else [()] * 5
    return {"predicted": list(cols[0]), "methods": list(cols[1]), "sigmas": list(cols[2]),
            "gaps": list(cols[3]), "choices": list(cols[4]),
            "folds": "leave-one-out" if folds == n else f"{folds}-fold"}


def nested_coverage(samples: list[dict[str, Any]], nested: dict[str, Any]) -> dict[str, Any]:
    """How often each row's 90 % interval (its nested leave-one-out prediction x
    exp(+-1.645 sigma), sigma by the row's method from the inner leave-one-out, reaching to
    its runtime factor's gap, never below the roofline) held the measured latency, and the median width high/low: every row, the
    rows the calibrated method predicted, the transferred ones."""
    import statistics

    from edgeprof.profilers.predict.fit import interval_bounds

    out: dict[str, Any] = {}
    rows = []
    gaps = nested.get("gaps") or [1.0] * len(samples)
    for s, p, m, sg, gap in zip(samples, nested["predicted"], nested["methods"],
                                nested["sigmas"], gaps):
        lo, hi = interval_bounds(p, sg, gap, float(s["features"]["roofline_total_ms"]))
        rows.append((m, lo <= s["latency_ms"] <= hi, hi / lo))
    out["rows"] = [(bool(inside), float(w)) for _, inside, w in rows]
    for label, keep in (("", lambda m: True), ("_calibrated", lambda m: m == "calibrated"),
                        ("_transfer", lambda m: m != "calibrated")):
        sel = [(inside, w) for m, inside, w in rows if keep(m)]
        out[f"coverage{label}"] = sum(i for i, _ in sel) / len(sel) if sel else None
        out[f"median_width{label}"] = statistics.median(w for _, w in sel) if sel else None
    return out


def prior_from(cals: list[Any]) -> dict[str, Any]:
    """The uncalibrated prior: measured/roofline over every sample of ``cals``, each at the
    board's big cores (divided by its thread law's work factor, as a prediction for fewer
    threads multiplies it back)."""
    import numpy as np

    ratios = [s["latency_ms"] / (s["features"]["roofline_total_ms"]
                                 * float(s.get("work_scale") or 1.0))
              for c in cals for s in c.samples if s["features"]["roofline_total_ms"] > 0]
    return {"median_ratio": float(np.median(ratios)), "p10_ratio": float(np.percentile(ratios, 10)),
            "p90_ratio": float(np.percentile(ratios, 90)), "n": len(ratios),
            "source": "measured/roofline of the published board measurements in "
                      "device_measurements_train.csv used by the shipped calibrations "
                      "(Raspberry Pi 4 and 5, Jetson Nano, STM32 boards), each at the board's "
                      "big cores (divided by the thread law's work factor of the threads it "
                      "ran)"}


def build_all(write: bool = False, *, targets_dir=None) -> dict[str, tuple[Any, list]]:
    """Every board processor's calibration, by calibration name; with ``write`` also the
    package's data files (a shipped calibration no longer fitted is removed)."""
    import json

    from edgeprof.core.io import write_json

    fitted = {}
    for t, device in groups():
        f = fit_board(t, device, targets_dir=targets_dir)
        fitted[calibration_name(get_registry_target(t, targets_dir), device)] = f
    out = {}
    transfers = cross_board_factors(fitted)
    for name, f in fitted.items():
        prior, rows = cross_board_sigma(fitted, name)
        out[name] = build_board(f["target"].base_id, f["device"], targets_dir=targets_dir,
                                fitted=f, prior_sigma=prior, prior_rows=rows,
                                transfer=transfers[name])
    if write:
        folder = DATA / "calibrations"
        for old_file in folder.glob("*--published*.json"):
            if old_file.stem not in out:
                old_file.unlink()
        for name, (cal, _) in out.items():
            cal.save(folder / f"{name}.json")
        write_json(DATA / "prior.json", prior_from([c for c, _ in out.values()]))
        json.loads((DATA / "prior.json").read_text())
    return out


def get_registry_target(target_id: str, targets_dir=None):
    from edgeprof.targets import get_target_registry

    return get_target_registry(targets_dir).get(target_id)


# ------------------------------------------------------------------ the table printed
def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _stats(cal, keep) -> tuple[int, str, str, str]:
    import numpy as np
    from scipy.stats import spearmanr

    es = [e for e in cal.cv["errors"] if keep(e.get("method", "calibrated"))]
    if not es:
        return 0, "-", "-", "-"
    rel = np.asarray([abs(e["error"]) for e in es])
    y = [e["measured_ms"] for e in es]
    p = [e["predicted_ms"] for e in es]
    rho = f"{spearmanr(y, p).statistic:.2f}" if len(es) > 2 else "-"
    return len(es), f"{100 * np.median(rel):.0f} %", f"{100 * np.mean(rel <= 0.25):.0f} %", rho


def table(built) -> str:
    head = (f"{'calibration':30s} {'rows':>4s} {'left out':>8s}  {'rows':13s} {'n':>3s} "
            f"{'median |err|':>12s} {'within +-25%':>12s} {'Spearman':>8s}  "
            f"{'90% interval: coverage, width':>29s}")
    lines = ["nested cross-validation; 'calibrated': rows whose runtime and precision keep other "
             "rows; 'transfer': a precision or runtime the other rows never ran", head,
             "-" * len(head)]
    for t, (cal, skipped) in built.items():
        cv = cal.cv
        for i, (label, keep, sfx) in enumerate((
                ("all", lambda m: True, ""),
                ("calibrated", lambda m: m == "calibrated", "_calibrated"),
                ("transfer", lambda m: m != "calibrated", "_transfer"))):
            n, med, w25, rho = _stats(cal, keep)
            if n == 0:
                continue
            width = cv.get(f"median_width{sfx}")
            interval = (f"{_pct(cv.get(f'coverage{sfx}')):>6s}, "
                        + (f"{width:5.2f}x" if width is not None else "-"))
            lines.append(f"{t if i == 0 else '':30s} {cv['n'] if i == 0 else '':>4} "
                         f"{len(skipped) if i == 0 else '':>8}  {label:13s} {n:3d} {med:>12s} "
                         f"{w25:>12s} {rho:>8s}  {interval:>29s}")
    lines.append("")
    lines.append("per (calibration, runtime family): nested cross-validation of its rows")
    lines.append(f"  {'calibration':30s} {'family':18s} {'n':>3s} {'median |err|':>12s} "
                 f"{'within +-25%':>12s} {'90% interval: coverage, width':>29s}")
    for t, (cal, _) in built.items():
        by: dict[str, list] = {}
        for e in cal.cv["errors"]:
            by.setdefault(e["family"], []).append(e)
        for fam, es in sorted(by.items(), key=lambda kv: -len(kv[1])):
            rel = [abs(e["error"]) for e in es]
            held = [e.get("interval_held") for e in es if e.get("interval_held") is not None]
            widths = [e["interval_width"] for e in es if e.get("interval_width")]
            lines.append(f"  {t:30s} {fam:18s} {len(es):3d} "
                         f"{100 * statistics.median(rel):11.0f}% "
                         f"{100 * sum(r <= 0.25 for r in rel) / len(rel):11.0f}% "
                         + (f"{100 * sum(held) / len(held):21.0f} %, "
                            f"{statistics.median(widths):5.2f}x" if held else ""))
    lines.append("")
    lines.append("threads: serial share fitted per board from its rows of one runtime, build, "
                 "precision and model at 1 thread and at all the big cores")
    for t, (cal, _) in built.items():
        for fam, v in (cal.parameters.get("serial_share_fit") or {}).items():
            lines.append(f"  {t:30s} {fam:12s} serial share "
                         f"{cal.parameters['serial_share'][fam]:.3f} from {v['n_pairs']} "
                         f"pairs (median speedup {v['median_speedup']:.2f}x)")
    lines.append("")
    lines.append("runtime transfer: a runtime without rows on a board takes its factor on the "
                 "other boards of the processor kind (geometric mean); checked on the runtimes "
                 "that have rows on several: each board's own factor against the others' and "
                 "against 1 (the board's shared efficiencies, before)")
    base, moved = [], []
    for t, (cal, _) in built.items():
        table = cal.parameters.get("transfer_factors") or {}
        for key, entry in sorted(cal.runtimes.items()):
            if key in table:
                own, other = float(entry["factor"]), float(table[key]["factor"])
                base.append(abs(math.log(own)))
                moved.append(abs(math.log(own / other)))
                lines.append(f"  {t:30s} {key:22s} own {own:6.3f}  other boards' {other:6.3f} "
                             f"({', '.join(table[key]['boards'])})")
    if moved:
        def near(errs: list[float]) -> int:  # within +-25 % either way
            return sum(e <= math.log(1.25) for e in errs)
        lines.append(f"  median |log(own / transferred)| over {len(moved)} board-runtime pairs: "
                     f"{statistics.median(moved):.2f} from the other boards "
                     f"({near(moved)} within +-25 %), {statistics.median(base):.2f} with a "
                     f"factor of 1 ({near(base)})")
    lines.append("")
    lines.append("fit per board (all rows; chosen by leave-one-out): grouping, shrink, "
                 "per-inference ms, per-layer ms compute/memory, theta per class")
    for t, (cal, _) in built.items():
        p = cal.parameters
        theta = {}
        for c, v in p["efficiency_multiplier"].items():
            theta.setdefault(round(v, 3), []).append(c)
        lines.append(f"  {t:30s} {p['grouping']}, shrink {p.get('shrink', 1.0):g}, "
                     f"{p['per_inference_ms']:.3g}, {p['per_layer_ms']:.3g}/"
                     f"{p.get('per_memory_layer_ms', p['per_layer_ms']):.3g}; "
                     + ", ".join(f"{'/'.join(cs)} {v:.3g}" for v, cs in theta.items()))
    lines.append("")
    lines.append(f"row  {'calibration':30s} model                 family          prec  measured ms  "
                 "LOO predicted ms  error  method              chosen without the row")
    for t, (cal, skipped) in built.items():
        for e in cal.cv["errors"]:
            lines.append(f"{e['id']:3d}  {t:30s} {e['model']:21s} {e['family']:15s} "
                         f"{next(s['precision'] for s in cal.samples if s['id'] == e['id']):5s} "
                         f"{e['measured_ms']:11.4g} {e['predicted_ms']:17.4g} "
                         f"{100 * e['error']:+6.0f} %  {e.get('method', ''):19s} "
                         f"{e.get('chosen', '')}")
        for s in skipped:
            lines.append(f"{s['id']:3d}  {t:30s} {s['model'][:40]:40s} {s['reason'][:60]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Rebuild the shipped board calibrations from "
                                 "the published training rows and print their nested "
                                 "cross-validation")
    ap.add_argument("--write", action="store_true",
                    help="rewrite the shipped calibration files and data/prior.json")
    args = ap.parse_args(argv)
    print(table(build_all(write=args.write)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

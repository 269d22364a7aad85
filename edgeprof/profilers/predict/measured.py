"""Calibrate a board from the user's own measurements (``edgeprof calibrate --measurements``).

Most users have timed a few models on their board by hand. A CSV with the columns
``model,latency_ms`` (and optionally ``input_shape,precision,threads,runtime,source``), one
row per timed model, refines the shipped calibration of that board (the *prior*):

* every row is estimated on the target's descriptor and cut into kernels as the runtime
  family fuses them (``kernels.py``), at the thread count it ran (``threads.py``);
* **one row moves the level**: the prior's parameters scaled by the geometric mean of
  measured / prior-predicted;
* **three rows or more also move the shape**: the ``split`` basis -- per class, a cost per
  ms of the kernels' compute time (MACs / peak) and one per ms of their memory time (bytes /
  bandwidth), summed rather than maxed, so kernels small enough to live in the caches are
  not charged DRAM time they never spend --, the per-layer overheads of compute and memory
  kernels and the per-inference overhead, fitted by non-negative least squares on relative
  errors with a ridge pull towards the levelled prior; the prediction is still never below
  the roofline. The pull's strength is chosen by
  leave-one-out among ``LAMBDAS``, so ten rows of one family of networks move the shape as far
  as they support;
* the reported leave-one-out error is nested (the strength is chosen again without the row
  held out), so it is the error a new model of the same kind can expect.

The result is a calibration file (``calibration.py``'s format) whose rows are the user's,
written atomically to ``--out`` or the user's calibration folder, where it is preferred over
the shipped one. A board without a shipped calibration uses the roofline with the published
prior ratio as its prior.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgeprof.core.artifact import created_utc
from edgeprof.core.errors import ConfigError, EdgeprofError, UserError
from edgeprof.core.precision import get_precision
from edgeprof.profilers.predict.fit import PRIOR_SIGMA_WEIGHT, Z90, counts, pooled_sigma
from edgeprof.profilers.predict.kernels import CLASSES, features, kernel_ranges, kernels_of

COLUMNS = ("model", "latency_ms")
OPTIONAL = ("input_shape", "precision", "threads", "runtime", "source")
LAMBDAS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0)
SHAPE_MIN_ROWS = 3
#: the prior's leave-one-out sigma counts as PRIOR_SIGMA_WEIGHT rows in the interval's sigma
#: (fit.pooled_sigma): three close rows would otherwise give a needlessly narrow interval


class MeasurementsError(ConfigError):
    """The measurements CSV is unusable (exit 2); the message names the file and line."""


@dataclass
class Row:
    line: int
    model: str
    spec: str
    latency_ms: float
    input_shape: tuple[int, ...] | None
    precision: str
    threads: int | None
    threads_note: str
    runtime: str
    source: str


def bad_line(path: Path, line: int | None, what: str) -> MeasurementsError:
    where = f"{path}" + (f" line {line}" if line else "")
    return MeasurementsError(f"{where}: {what}")


def resolve_spec(spec: str, folder: Path) -> str:
    """``nb201.py:cell_532`` or ``net.onnx`` relative to the CSV's folder."""
    path_part, sep, rest = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if not sep:
        path_part = spec
    if spec.startswith("builtin:") or spec.startswith("llm:"):
        return spec
    looks_like_file = path_part.endswith((".py", ".onnx", ".tflite", ".xml", ".gguf",
                                          ".keras", ".pt")) or os.sep in path_part
    if looks_like_file and not os.path.isabs(path_part):
        p = folder / path_part
        return str(p) + (f":{rest}" if sep else "")
    return spec


def csv_rows(path: Path, columns: tuple[str, ...], optional: tuple[str, ...], empty: str,
             models: str) -> list[tuple[int, dict[str, str]]]:
    """(line, {column: stripped cell}) of a measurements CSV's non-blank rows, after its
    header is checked: unreadable, empty (``empty`` says what to give), a missing or an
    unknown column, a row without a model (``models`` says which specs to give) are
    :class:`MeasurementsError` naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise bad_line(path, None, f"cannot read it ({type(e).__name__}: {e})") from e
    if not text.strip():
        raise bad_line(path, None, f"the file is empty; {empty}")
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    known = (f"the columns are {','.join(columns)} and optionally {','.join(optional)}")
    missing = [c for c in columns if c not in header]
    if missing:
        raise bad_line(path, 1, f"missing column {', '.join(repr(m) for m in missing)}; {known}")
    unknown = [h for h in header if h not in columns + optional]
    if unknown:
        raise bad_line(path, 1, f"unknown column {', '.join(repr(u) for u in unknown)}; {known}")
    out = []
    for i, raw in enumerate(reader, start=2):
        r = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        if any(r.values()):
            if not r.get("model"):
                raise bad_line(path, i, f"empty model; give {models}")
            out.append((i, r))
    return out


def threads_cell(path: Path, line: int, text: str, flag: int | None) -> int | None:
    """A row's ``threads`` cell: a positive whole number, which ``--threads`` (``flag``)
    must not contradict; None when empty."""
    if not text:
        return None
    try:
        t = int(text)
    except ValueError:
        raise bad_line(path, line, f"threads {text!r} is not a whole number") from None
    if t <= 0:
        raise bad_line(path, line, f"threads {t} is not a positive whole number")
    if flag is not None and t != flag:
        raise bad_line(path, line, f"threads {t} contradicts --threads {flag}; remove the row or "
                                   "the flag")
    return t


def positive_cell(path: Path, line: int, column: str, text: str, unit: str,
                  read: Any = float) -> float:
    """A row's ``column`` cell as a positive finite number (``unit`` says of what; ``read``
    makes the number of the text)."""
    try:
        value = read(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise bad_line(path, line, f"{column} {text!r} is not a positive finite number of "
                                   f"{unit}")
    return value


def agreeing_cell(path: Path, line: int, column: str, cell: str | None, flag: str | None
                  ) -> str | None:
    """A row's ``column`` cell (None when empty), which its flag (``--column``) must not
    contradict."""
    if flag is not None and cell is not None and cell != flag:
        raise bad_line(path, line, f"{column} {cell} contradicts --{column} {flag}; remove the "
                                   "row or the flag")
    return cell


def first_of(seen: dict[tuple, int], key: tuple, path: Path, line: int, same: str,
             keep: str) -> None:
    """Records ``key``'s line in ``seen``; a second row of one key is an error naming what
    makes it the same (``same``) and what to keep (``keep``)."""
    if key in seen:
        raise bad_line(path, line, f"duplicate of line {seen[key]} ({same}); {keep}")
    seen[key] = line


def read_measurements(path: str | os.PathLike, target, family: str, *,
                      precision: str | None = None, threads: int | None = None) -> list[Row]:
    """The rows of a measurements CSV, validated (:class:`MeasurementsError` names the file
    and line of the first problem)."""
    from edgeprof.core.models import parse_shape
    from edgeprof.profilers.predict.threads import parse_threads

    path = Path(path)
    lines = csv_rows(path, COLUMNS, OPTIONAL, "give a header 'model,latency_ms' and one row "
                                              "per timed model",
                     "a model spec edgeprof accepts (builtin:NAME, file.onnx, file.py:factory ...)")
    if precision is not None:
        get_precision(precision)
    rows: list[Row] = []
    seen: dict[tuple, int] = {}
    for i, r in lines:
        model = r["model"]
        lat = positive_cell(path, i, "latency_ms", r.get("latency_ms", ""), "milliseconds")
        shape = None
        if r.get("input_shape"):
            try:
                shape = parse_shape(r["input_shape"])
            except EdgeprofError as e:
                raise bad_line(path, i, f"input_shape: {e}") from e
        p = r.get("precision") or None
        if p is not None:
            try:
                get_precision(p)
            except EdgeprofError as e:
                raise bad_line(path, i, str(e)) from e
        p = agreeing_cell(path, i, "precision", p, precision) or precision or "fp32"
        t = threads_cell(path, i, r.get("threads") or "", threads)
        if t is not None:
            t_note = "as measured"
        elif threads is not None:
            t, t_note = threads, "--threads"
        else:
            t, t_note = parse_threads("not stated", family, target)
        spec = resolve_spec(model, path.parent)
        first_of(seen, (spec, shape, p, t), path, i, "same model, input_shape, precision and "
                 "threads", "keep one row per configuration, or their median")
        rows.append(Row(i, model, spec, lat, shape, p, t, t_note, r.get("runtime", ""),
                        r.get("source", "")))
    if not rows:
        raise bad_line(path, None, "no rows under the header; give one row per timed model")
    precs = sorted({r.precision for r in rows})
    if len(precs) > 1:
        raise bad_line(path, None, f"rows at several precisions ({', '.join(precs)}): give one "
                                   "file per precision (or --precision to check them)")
    return rows


# ---------------------------------------------------------------------------- the fit
def _columns(sample: dict[str, Any]) -> np.ndarray:
    """[1, compute kernels, memory kernels, per class its compute ms, per class its memory
    ms] (the kernels' parts scaled by the thread factor)."""
    f = sample["features"]
    n_c, n_m = counts(f)
    ws = float(sample.get("work_scale", 1.0))
    comp = f.get("compute_ms") or {}
    mem = f.get("memory_ms") or {}
    return np.asarray([1.0, n_c, n_m] + [ws * float(comp.get(c, 0.0)) for c in CLASSES]
                      + [ws * float(mem.get(c, 0.0)) for c in CLASSES])


def prior_vector(params: dict[str, Any], factor: float,
                 samples: list[dict[str, Any]] | None = None) -> np.ndarray:
    """A roofline-basis calibration's parameters as a split-basis vector: each class's
    efficiency on both its compute and its memory part (the sum of the two parts is at most
    twice their max, so the levelling step absorbs the difference). Where the calibration
    sets dense 3x3 convolutions apart (``conv3x3``, Winograd on a GPU), ``conv``'s efficiency
    is the two averaged over the conv roofline of the calibration's own ``samples``."""
    if params.get("basis") == "split":
        a, b = params["ms_per_compute_ms"], params["ms_per_memory_ms"]
        return factor * np.asarray(
            [float(params["per_inference_ms"]), float(params["per_layer_ms"]),
             float(params["per_memory_layer_ms"])] + [float(a.get(c, 0.0)) for c in CLASSES]
            + [float(b.get(c, 0.0)) for c in CLASSES])
    theta = dict(params.get("efficiency_multiplier") or {})
    if "conv3x3" in theta:
        w3 = sum(float(s["features"].get("conv3x3_roofline_ms", 0.0)) for s in samples or ())
        wc = sum(float(s["features"]["roofline_ms"].get("conv", 0.0)) for s in samples or ())
        share = min(1.0, w3 / wc) if wc > 0 else 0.5
        theta["conv"] = (share * float(theta["conv3x3"])
                         + (1.0 - share) * float(theta.get("conv", 1.0)))
    per_layer = float(params.get("per_layer_ms", 0.0))
    th = [float(theta.get(c, 1.0)) for c in CLASSES]
    return factor * np.asarray(
        [float(params.get("per_inference_ms", 0.0)), per_layer,
         float(params.get("per_memory_layer_ms", per_layer))] + th + th)


def _predict(p: np.ndarray, sample: dict[str, Any]) -> float:
    return max(float(_columns(sample) @ p), float(sample["features"]["roofline_total_ms"]))


def _level(prior: np.ndarray, samples: list[dict[str, Any]]) -> float:
    logs = [math.log(s["latency_ms"] / _predict(prior, s)) for s in samples]
    return math.exp(sum(logs) / len(logs))


def fit_vector(prior: np.ndarray, samples: list[dict[str, Any]], lam: float | None) -> np.ndarray:
    """The refined parameters: the level alone below ``SHAPE_MIN_ROWS`` rows (or with
    ``lam`` None), else the ridge fit towards the levelled prior."""
    from scipy.optimize import lsq_linear

    s = _level(prior, samples)
    p0 = s * prior
    if lam is None or len(samples) < SHAPE_MIN_ROWS:
        return p0
    A = np.vstack([_columns(x) for x in samples])
    y = np.asarray([x["latency_ms"] for x in samples], float)
    Aw = A / y[:, None]
    bw = np.ones(len(y))
    med = float(np.median(y))
    n_c = max(1.0, float(np.median(A[:, 1])))
    n_m = max(1.0, float(np.median(A[:, 2])))
    floor_scale = [0.05 * med, 0.05 * med / n_c, 0.05 * med / n_m]
    scale = np.asarray([max(p0[j], floor_scale[j]) if j < 3 else max(p0[j], 0.5)
                        for j in range(len(p0))])
    R = np.sqrt(lam) * np.diag(1.0 / scale)
    M = np.vstack([Aw, R])
    b = np.concatenate([bw, R @ p0])
    lower = np.zeros(len(p0))
    x0 = p0
    res = lsq_linear(M, b, bounds=(lower, np.full(len(p0), np.inf)))
    return res.x if res.success else x0


def _loo(prior: np.ndarray, samples: list[dict[str, Any]], lam: float | None) -> list[float]:
    out = []
    for i, s in enumerate(samples):
        rest = samples[:i] + samples[i + 1:]
        out.append(_predict(fit_vector(prior, rest, lam), s))
    return out


def _log_rmse(samples, preds) -> float:
    return float(np.sqrt(np.mean([math.log(s["latency_ms"] / p) ** 2
                                  for s, p in zip(samples, preds)])))


def _kind(target) -> str:
    from edgeprof.profilers.predict.predictor import processor_kind_of

    return processor_kind_of(target)


def choose_lambda(prior: np.ndarray, samples: list[dict[str, Any]]) -> float | None:
    """The ridge strength with the smallest leave-one-out log error (None: level only)."""
    if len(samples) < SHAPE_MIN_ROWS:
        return None
    best, best_err = None, _log_rmse(samples, _loo(prior, samples, None))
    for lam in LAMBDAS:
        err = _log_rmse(samples, _loo(prior, samples, lam))
        if err < best_err - 1e-9:
            best, best_err = lam, err
    return best


def nested_loo(prior: np.ndarray, samples: list[dict[str, Any]]) -> list[float]:
    """Each row predicted by a fit (strength chosen again) to the others."""
    out = []
    for i, s in enumerate(samples):
        rest = samples[:i] + samples[i + 1:]
        lam = choose_lambda(prior, rest) if len(rest) >= SHAPE_MIN_ROWS else None
        out.append(_predict(fit_vector(prior, rest, lam), s))
    return out


def interval_stats(samples: list[dict[str, Any]], preds: list[float],
                   sigma: float) -> dict[str, float]:
    """Share of rows inside value x exp(+-1.645 sigma), and the interval's width high/low."""
    from edgeprof.profilers.predict.boards import interval_coverage

    return interval_coverage(samples, preds, sigma, Z90)


# ---------------------------------------------------------------------------- the command
def _prior(target, family: str, precision: str):
    """(parameter vector, prior calibration name, its log sigma over every row, over the
    rows of a calibrated runtime) for the board."""
    from edgeprof.profilers.predict.calibration import SHIPPED_DIR, calibrations_for
    from edgeprof.profilers.predict.predictor import base_id, load_prior

    compute = get_precision(precision).compute
    for cal in calibrations_for(base_id(target), [SHIPPED_DIR]):
        if cal.parameters.get("basis", "roofline") not in ("roofline", "split"):
            continue
        entry = cal.entry(family, compute)
        if entry is None:
            entries = [e for e in cal.runtimes.values() if e.get("family") == family]
            entry = entries[0] if entries else None
        factor = float(entry["factor"]) if entry else 1.0
        return (prior_vector(cal.parameters, factor, cal.samples), cal.name,
                float(cal.cv["log_sigma"]), float(cal.cv.get("log_sigma_calibrated")
                                                  or cal.cv["log_sigma"]))
    ratio = float(load_prior().get("median_ratio", 1.0))
    params = {"per_inference_ms": 0.0, "per_layer_ms": 0.0,
              "efficiency_multiplier": {c: ratio for c in CLASSES}}
    return prior_vector(params, 1.0), "the roofline x the published prior ratio", 0.5, 0.5


def calibrate_from_measurements(path: str | os.PathLike, target, family: str, *,
                                precision: str | None = None, threads: int | None = None,
                                out: str | os.PathLike | None = None, registry=None,
                                progress=None) -> tuple[Any, Path, dict[str, Any]]:
    """Fit a calibration of ``target`` for runtime ``family`` to the CSV's rows and write it
    (``out`` or the user's calibration folder). Returns (calibration, path, summary)."""
    from edgeprof._version import __version__
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict.calibration import Calibration, user_file
    from edgeprof.profilers.predict.fit import cv_summary
    from edgeprof.profilers.predict.predictor import base_id, check_threads, fingerprint_of
    from edgeprof.profilers.predict.threads import family_info, work_scale

    say = progress or (lambda m: None)
    path = Path(path)
    check_threads(threads, target)
    rows = read_measurements(path, target, family, precision=precision, threads=threads)
    for r in rows:
        if r.threads is not None:
            try:
                check_threads(r.threads, target)
            except UserError as e:
                raise bad_line(path, r.line, str(e)) from None
    prec = rows[0].precision
    serial = float(family_info(family)["serial_share"])
    samples: list[dict[str, Any]] = []
    ranges: dict[str, list[float]] = {}
    handles: dict[tuple, Any] = {}
    for r in rows:
        say(f"estimating {r.model} (line {r.line})")
        key = (r.spec, r.input_shape)
        try:
            if key not in handles:
                handles[key] = resolve_model(r.spec, input_shapes=[r.input_shape]
                                             if r.input_shape else None, registry=registry)
            est = estimate_model(handles[key], target, prec, registry=registry)
        except EdgeprofError as e:
            raise bad_line(path, r.line, f"model {r.model!r} does not load: {e}") from None
        except Exception as e:  # a user's factory can raise anything
            raise bad_line(path, r.line, f"model {r.model!r} does not load: {type(e).__name__}: "
                                         f"{str(e).splitlines()[0] if str(e) else ''}") from None
        kernels = kernels_of(est, family, _kind(target))
        for c, (lo, hi) in kernel_ranges(kernels).items():
            old = ranges.setdefault(c, [lo, hi])
            ranges[c] = [min(old[0], lo), max(old[1], hi)]
        samples.append({"id": r.line, "model": r.model, "family": family, "precision":
                        get_precision(prec).compute, "latency_ms": r.latency_ms,
                        "threads": r.threads, "threads_note": r.threads_note,
                        "serial_share": serial, "work_scale": work_scale(r.threads, target, serial),
                        "runtime": r.runtime, "source": r.source,
                        "input_shape": list(r.input_shape) if r.input_shape else None,
                        "features": features(kernels)})
    prior, prior_name, prior_sigma, prior_sigma_cal = _prior(target, family, prec)
    say(f"fitting {len(samples)} rows")
    lam = choose_lambda(prior, samples)
    p = fit_vector(prior, samples, lam)
    if len(samples) >= 2:
        loo = nested_loo(prior, samples)
        cv = cv_summary(samples, loo)
        cv["method"] = "nested leave-one-out"
        own = float(cv["log_sigma"])
        cv.update({"log_sigma": pooled_sigma(own, len(samples), prior_sigma_cal),
                   "log_sigma_own": own, "log_sigma_prior": prior_sigma_cal,
                   "prior_sigma_weight": PRIOR_SIGMA_WEIGHT})
    else:
        fitted = [_predict(p, s) for s in samples]
        cv = cv_summary(samples, fitted)
        cv["method"] = "none: one row (the fit reproduces it); sigma is the prior's"
        cv["log_sigma"] = prior_sigma
        loo = fitted
    cv.update(interval_stats(samples, loo, float(cv["log_sigma"])))
    if len(samples) == 1:
        cv["coverage"] = None
    learned = ("the level only (one row moves the level; three or more also move the shape)"
               if lam is None else f"the level and the shape (ridge strength {lam} chosen by "
               f"leave-one-out)")
    compute = get_precision(prec).compute
    ts = sorted({s["threads"] for s in samples if s["threads"] is not None})
    runtime_names = sorted({r.runtime for r in rows if r.runtime})
    name = (f"{base_id(target)}--measured-{family}-{compute}"
            + (f"-t{ts[0]}" if len(ts) == 1 else ""))
    fp = dict(fingerprint_of(target))
    fp.update({"source": "measurements", "file": str(path.resolve()),
               "mode": getattr(target, "mode", None)})
    k = len(CLASSES)
    params = {"basis": "split", "grouping": "per_class", "floor": "roofline",
              "per_inference_ms": float(p[0]), "per_layer_ms": float(p[1]),
              "per_memory_layer_ms": float(p[2]),
              "ms_per_compute_ms": {c: float(v) for c, v in zip(CLASSES, p[3:3 + k])},
              "ms_per_memory_ms": {c: float(v) for c, v in zip(CLASSES, p[3 + k:])},
              "efficiency_multiplier": {},
              "ridge_lambda": lam, "prior": prior_name, "learned": learned,
              "serial_share": {}}
    cal = Calibration(
        name=name, target=base_id(target), fingerprint=fp,
        runtimes={f"{family}/{compute}": {"family": family, "precision": compute,
                                          "version": ", ".join(runtime_names) or None,
                                          "factor": 1.0, "n": len(samples)}},
        parameters=params, cv=cv, ranges=ranges, samples=samples,
        created_utc=created_utc(),
        edgeprof_version=__version__,
        note=(f"fitted to {len(samples)} measurement(s) in {path.name}, refining {prior_name}: "
              f"{learned}"))
    if out is None:
        out = user_file(name)
    written = cal.save(out)
    cal.path = Path(written)
    summary = {"rows": len(samples), "learned": learned, "prior": prior_name,
               "ridge_lambda": lam, "threads": ts, "cv": {k: cv.get(k) for k in (
                   "method", "n", "median_abs_error", "within_25", "spearman", "log_sigma",
                   "coverage", "median_width")}}
    summary["cv"].update({k: cv[k] for k in ("log_sigma_own", "log_sigma_prior",
                                             "prior_sigma_weight") if k in cv})
    return cal, Path(written), summary

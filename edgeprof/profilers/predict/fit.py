"""Fit a calibration's few parameters to measured samples, and cross-validate the fit.

The model of one inference on a target, for runtime family F at precision P::

    latency = f[F, P] x (per_inference_ms + per_layer_ms x n_compute
                         + per_memory_layer_ms x n_memory
                         + w(threads) x sum over unfused kernels k of theta[class(k)] x roofline_ms(k))

* ``roofline_ms(k)`` is the kernel's roofline on the target's *descriptor* peaks (the
  datasheet's); ``theta >= 1`` is the inverse of the efficiency a runtime reaches on that
  class of kernel, so the descriptor stays the datasheet's and the efficiency lives here;
* ``per_layer_ms`` (dispatch, kernel launch, packing) per unfused compute kernel (conv,
  depthwise, pointwise, linear, recurrent, attention), ``per_memory_layer_ms`` per unfused
  pooling or elementwise kernel (add, mul -- a multiply-by-zero edge too --, concat), and
  ``per_inference_ms`` (the call, input and output copies) are the overheads that dominate
  small models (a calibration without ``per_memory_layer_ms`` charges ``per_layer_ms`` for
  every kernel);
* ``w(threads)`` scales the kernels' work from the board's big cores (the descriptor's
  peaks) to the thread count the sample ran (``threads.py``: Amdahl's law with the family's
  serial share); overheads do not scale;
* ``f[F, P]`` is a per-runtime-family factor, shrunk towards 1 (``log f = sum of the
  family's log residuals / (n + SHRINK)``) so a family seen once moves the prediction only
  half-way.

The linear part is fitted by non-negative least squares on relative errors (scikit-learn's
``LinearRegression(positive=True)`` with weights 1/y^2), alternating with the family
factors. Classes share one theta inside a *group* when samples are few (``GROUPINGS``).
Leave-one-out refits without each sample and predicts it; its log errors give the
prediction interval.

A device edgeprof measures itself (``edgeprof calibrate``: dozens of samples, one runtime)
gets the ``work`` basis instead: per class a cost per GMAC and a cost per MB moved, fitted
to the measured kernels directly, so the fit neither leans on the device's roofline (on the
host its peaks are themselves measured, under whatever load there was, and a model that
lives in the caches beats the DRAM roofline) nor needs ``theta >= 1``::

    latency = per_inference_ms + per_layer_ms x n_kernels
              + sum over classes c of (ms_per_gmac[c] x GMACs_c + ms_per_mb[c] x MB_c)
              + ms_per_spilled_mb x max(0, parameter MB - last-level cache MB)

(the last term: a kernel measured alone keeps its weights in the cache from one call to the
next; a model whose weights exceed the cache streams them from DRAM every call)

(non-negative least squares on relative errors; the ``floor`` parameter says whether the
prediction is clamped to the roofline: yes on a board's datasheet peaks, no on the host).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgeprof.profilers.predict.kernels import CLASSES

SHRINK = 1.0
ITERATIONS = 25
#: class groups sharing one efficiency: "split" needs ~10 samples, "tied" is one efficiency
GROUPINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "per_class": {c: (c,) for c in CLASSES},
    "split": {"compute": ("conv", "pointwise", "linear", "recurrent", "attention"),
              "depthwise": ("depthwise",), "memory": ("pooling", "elementwise")},
    "tied": {"all": CLASSES},
    "compute_memory": {"compute": ("conv", "depthwise", "pointwise", "linear", "recurrent",
                                   "attention"), "memory": ("pooling", "elementwise")},
    "split_linear": {"conv": ("conv", "pointwise", "recurrent", "attention"),
                     "linear": ("linear",), "depthwise": ("depthwise",),
                     "memory": ("pooling", "elementwise")},
}
#: the groupings a board's fit chooses among by leave-one-out (``select_grouping``)
CANDIDATE_GROUPINGS = ("tied", "compute_memory", "split", "split_linear")
Z90 = 1.645
#: below this many samples the per-layer and per-inference overheads are not fitted (0): with
#: four or five rows they soak up whatever the efficiencies leave (0.4 ms per layer on a
#: 480 MHz MCU)
LAYER_TERMS_MIN_SAMPLES = 8


def key_of(family: str, precision: str) -> str:
    return f"{family}/{precision}"


COMPUTE_CLASSES = ("conv", "depthwise", "pointwise", "linear", "recurrent", "attention")
MEMORY_CLASSES = ("pooling", "elementwise")


def counts(feats: dict[str, Any]) -> tuple[float, float]:
    """(unfused compute kernels, unfused pooling/elementwise kernels) of a sample."""
    c = feats.get("count") or {}
    if not c:
        return float(feats["n_kernels"]), 0.0
    return (float(sum(c.get(k, 0) for k in COMPUTE_CLASSES)),
            float(sum(c.get(k, 0) for k in MEMORY_CLASSES)))


def _design(samples: list[dict[str, Any]], groups: dict[str, tuple[str, ...]]):
    rows, nk, roof = [], [], []
    for s in samples:
        f = s["features"]
        ws = float(s.get("work_scale", 1.0))
        rows.append([ws * sum(f["roofline_ms"].get(c, 0.0) for c in cls)
                     for cls in groups.values()])
        nk.append(counts(f))
        roof.append(f["roofline_total_ms"])
    return np.asarray(rows, float), np.asarray(nk, float).reshape(-1, 2), np.asarray(roof, float)


def select_grouping(samples: list[dict[str, Any]]) -> tuple[str, dict[str, float]]:
    """The grouping whose leave-one-out log-error spread is smallest among
    :data:`CANDIDATE_GROUPINGS` that the samples can carry (below 10 samples: one efficiency
    for all, or one for compute and one for memory kernels); returns it and every
    candidate's spread (for the record)."""
    spreads: dict[str, float] = {}
    for g in CANDIDATE_GROUPINGS:
        if len(samples) < 10 and len(GROUPINGS[g]) > 2:
            continue
        loo = leave_one_out(samples, g)
        spreads[g] = cv_summary(samples, loo)["log_sigma"]
    best = min(spreads, key=lambda g: (round(spreads[g], 6), CANDIDATE_GROUPINGS.index(g)))
    return best, spreads


def choose_grouping(n_samples: int) -> str:
    """Few parameters for few points: one efficiency below 10 samples."""
    return "split" if n_samples >= 10 else "tied"


def spilled_mb(feats: dict[str, Any], cache_mb: float | None) -> float:
    """The model's parameter MB beyond the device's last-level cache (0 without one)."""
    if not cache_mb or "params_mb" not in feats:
        return 0.0
    return max(0.0, float(feats["params_mb"]) - float(cache_mb))


def _work_design(samples: list[dict[str, Any]], cache_mb: float | None) -> np.ndarray:
    rows = []
    for s in samples:
        f = s["features"]
        row = [1.0, float(f["n_kernels"])]
        for c in CLASSES:
            row += [float(f["gmacs"].get(c, 0.0)), float(f["mbytes"].get(c, 0.0))]
        row.append(spilled_mb(f, cache_mb))
        rows.append(row)
    return np.asarray(rows, float)


def fit_work(samples: list[dict[str, Any]], floor: bool = False,
             cache_mb: float | None = None) -> dict[str, Any]:
    """The ``work`` basis (module docstring): one runtime family, many samples."""
    from sklearn.linear_model import LinearRegression

    A = _work_design(samples, cache_mb)
    y = np.asarray([s["latency_ms"] for s in samples], float)
    reg = LinearRegression(positive=True, fit_intercept=False)
    reg.fit(A, y, sample_weight=1.0 / y ** 2)
    c = reg.coef_
    keys = [key_of(s["family"], s["precision"]) for s in samples]
    return {"basis": "work", "grouping": "per_class", "floor": "roofline" if floor else "none",
            "per_inference_ms": float(c[0]), "per_layer_ms": float(c[1]),
            "ms_per_gmac": {cl: float(c[2 + 2 * i]) for i, cl in enumerate(CLASSES)},
            "ms_per_mb": {cl: float(c[3 + 2 * i]) for i, cl in enumerate(CLASSES)},
            "cache_mb": cache_mb, "ms_per_spilled_mb": float(c[-1]),
            "efficiency_multiplier": {},
            "factors": {k: {"factor": 1.0, "n": keys.count(k)} for k in set(keys)}}


def fit(samples: list[dict[str, Any]], grouping: str | None = None, *,
        basis: str = "roofline", floor: bool = True,
        cache_mb: float | None = None) -> dict[str, Any]:
    """Fitted parameters (the calibration's ``parameters`` and ``runtimes`` factors)."""
    from sklearn.linear_model import LinearRegression

    if not samples:
        raise ValueError("no samples to fit")
    if basis == "work":
        return fit_work(samples, floor, cache_mb)
    grouping = grouping or choose_grouping(len(samples))
    groups = GROUPINGS[grouping]
    R, nk, roof = _design(samples, groups)
    y = np.asarray([s["latency_ms"] for s in samples], float)
    keys = [key_of(s["family"], s["precision"]) for s in samples]
    factors = {k: 1.0 for k in keys}
    few = len(y) < LAYER_TERMS_MIN_SAMPLES  # too few to tell overheads from efficiencies
    if few:
        nk = np.zeros_like(nk)
    A = np.column_stack([np.zeros(len(y)) if few else np.ones(len(y)), nk[:, 0], nk[:, 1], R])
    coef = np.zeros(A.shape[1])
    for _ in range(ITERATIONS):
        f = np.asarray([factors[k] for k in keys])
        yt = y / f
        target = yt - R.sum(axis=1)  # theta = 1 + phi, phi >= 0: never faster than the roofline
        reg = LinearRegression(positive=True, fit_intercept=False)
        reg.fit(A, target, sample_weight=1.0 / yt ** 2)
        coef = reg.coef_
        base = np.maximum(A @ coef + R.sum(axis=1), roof)
        logr = np.log(y / base)
        new = {}
        for k in set(keys):
            idx = [i for i, kk in enumerate(keys) if kk == k]
            new[k] = math.exp(float(logr[idx].sum()) / (len(idx) + SHRINK))
        factors = new
    theta = {}
    for (gname, classes), phi in zip(groups.items(), coef[3:]):
        for c in classes:
            theta[c] = 1.0 + float(phi)
    counts = {k: keys.count(k) for k in factors}
    return {"basis": "roofline", "grouping": grouping, "per_inference_ms": float(coef[0]),
            "per_layer_ms": float(coef[1]), "per_memory_layer_ms": float(coef[2]),
            "efficiency_multiplier": theta,
            "factors": {k: {"factor": float(v), "n": counts[k]} for k, v in factors.items()}}


def kernel_ms(params: dict[str, Any], kclass: str, roofline_ms: float, macs: float,
              nbytes: float) -> float:
    """One unfused kernel's share of the prediction (without the per-layer overhead)."""
    if params.get("basis") == "split":
        return max(params["ms_per_compute_ms"].get(kclass, 0.0),
                   params["ms_per_memory_ms"].get(kclass, 0.0)) * roofline_ms
    if params.get("basis") == "work":
        return (params["ms_per_gmac"].get(kclass, 0.0) * macs / 1e9
                + params["ms_per_mb"].get(kclass, 0.0) * nbytes / 1e6)
    return params["efficiency_multiplier"].get(kclass, 1.0) * roofline_ms


def base_ms(params: dict[str, Any], feats: dict[str, Any], work_scale: float = 1.0) -> float:
    """The prediction before the family factor (never below the roofline, unless the
    calibration's ``floor`` is ``none``). ``work_scale``: the thread factor on the kernels'
    work (1 at the board's big cores)."""
    if params.get("basis") == "split":
        n_compute, n_memory = counts(feats)
        t = (params["per_inference_ms"] + params["per_layer_ms"] * n_compute
             + params["per_memory_layer_ms"] * n_memory)
        a, b = params["ms_per_compute_ms"], params["ms_per_memory_ms"]
        t += work_scale * sum(a.get(c, 0.0) * feats["compute_ms"].get(c, 0.0)
                              + b.get(c, 0.0) * feats["memory_ms"].get(c, 0.0)
                              for c in CLASSES)
        return max(t, feats["roofline_total_ms"])
    if params.get("basis") == "work":
        t = params["per_inference_ms"] + params["per_layer_ms"] * feats["n_kernels"]
        t += sum(params["ms_per_gmac"].get(c, 0.0) * v for c, v in feats["gmacs"].items())
        t += sum(params["ms_per_mb"].get(c, 0.0) * v for c, v in feats["mbytes"].items())
        t += params.get("ms_per_spilled_mb", 0.0) * spilled_mb(feats, params.get("cache_mb"))
        return max(t, feats["roofline_total_ms"]) if params.get("floor") == "roofline" else t
    theta = params["efficiency_multiplier"]
    n_compute, n_memory = counts(feats)
    per_layer = float(params["per_layer_ms"])
    t = (params["per_inference_ms"] + per_layer * n_compute
         + float(params.get("per_memory_layer_ms", per_layer)) * n_memory)
    t += work_scale * sum(theta.get(c, 1.0) * v for c, v in feats["roofline_ms"].items())
    return max(t, feats["roofline_total_ms"])


def predict_sample(params: dict[str, Any], sample: dict[str, Any]) -> float:
    f = params["factors"].get(key_of(sample["family"], sample["precision"]), {"factor": 1.0})
    value = f["factor"] * base_ms(params, sample["features"],
                                  float(sample.get("work_scale", 1.0)))
    if params.get("floor", "roofline") == "none":
        return value
    return max(value, sample["features"]["roofline_total_ms"])


def leave_one_out(samples: list[dict[str, Any]], grouping: str | None = None, *,
                  basis: str = "roofline", floor: bool = True,
                  cache_mb: float | None = None) -> list[float]:
    """Each sample predicted by a fit to all the others (same grouping and basis as the
    full fit)."""
    grouping = grouping or choose_grouping(len(samples))
    out = []
    for i, s in enumerate(samples):
        rest = samples[:i] + samples[i + 1:]
        out.append(predict_sample(fit(rest, grouping, basis=basis, floor=floor,
                                      cache_mb=cache_mb), s))
    return out


def cv_summary(samples: list[dict[str, Any]], predicted: list[float]) -> dict[str, Any]:
    """Median |error|, share within +-10 % / +-25 %, Spearman, and the log-error spread."""
    from scipy.stats import spearmanr

    y = np.asarray([s["latency_ms"] for s in samples], float)
    p = np.asarray(predicted, float)
    rel = (p - y) / y
    logerr = np.log(y / p)
    rho = float(spearmanr(y, p).statistic) if len(y) > 2 else float("nan")
    return {"method": "leave-one-out", "n": int(len(y)),
            "median_abs_error": float(np.median(np.abs(rel))),
            "within_10": float(np.mean(np.abs(rel) <= 0.10)),
            "within_25": float(np.mean(np.abs(rel) <= 0.25)),
            "spearman": rho if math.isfinite(rho) else None,
            "log_sigma": float(math.sqrt(float(np.mean(logerr ** 2)))),
            "errors": [{"id": s.get("id"), "model": s.get("model"), "family": s["family"],
                        "measured_ms": float(a), "predicted_ms": float(b),
                        "error": float(r)} for s, a, b, r in zip(samples, y, p, rel)]}

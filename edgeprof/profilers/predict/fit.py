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
  family's log residuals / (n + shrink)``) so a family seen once moves the prediction only
  part of the way (half-way at ``shrink`` 1);
* on a GPU board, dense 3x3 stride-1 convolutions may form their own group (``conv3x3``,
  the ``+winograd`` groupings): cuDNN, TensorRT and ncnn-Vulkan run them with Winograd's
  minimal filtering, F(2x2, 3x3) multiplying 16 times per 2x2 outputs instead of 36
  (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016), so their
  theta may go down to ``1 / WINOGRAD_GAIN`` of the direct-convolution roofline. The
  prediction as a whole is still never below the roofline.

The linear part is fitted by non-negative least squares on relative errors (scipy's
``nnls`` on the rows weighted by 1/y), alternating with the family factors. Classes share
one theta inside a *group* when samples are few (``GROUPINGS``); a group that carries under
``GROUP_SUPPORT_SHARE`` of every sample's roofline joins the largest group
(:func:`supported_groups`: nothing pins its theta down). The grouping and the family
factors' ``shrink`` are chosen per board by leave-one-out, and the error a calibration
reports is *nested* leave-one-out, the choice made again without the row held out (both
the build's, tools/build_board_calibrations.py: ``select_model``, ``nested_leave_one_out``),
each row predicted as the predictor would (:func:`resolve_factor`: its runtime's factor,
that runtime's at another precision, or the board's shared efficiencies with a factor of
1), so the figure is what a new model can expect. Its log errors give the
prediction intervals, one spread for the calibrated method and one for transfers.

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

from edgeprof.core.errors import UserError
from edgeprof.profilers.predict.kernels import CLASSES

SHRINK = 1.0
ITERATIONS = 25
#: the multiplications Winograd's F(4x4, 3x3) saves on a 3x3 stride-1 convolution: 144 per
#: 4x4 outputs directly, 36 transformed (Lavin & Gray, CVPR 2016; cuDNN's WINOGRAD_NONFUSED
#: and ncnn's Arm conv3x3s1_winograd43 use it, F(2x2, 3x3) saves 2.25x, ncnn's F(6x6, 3x3)
#: 5.1x); the ``conv3x3`` group's theta is at least 1 / this
WINOGRAD_GAIN = 4.0
#: the pseudo-class of dense 3x3 stride-1 convolutions (a part of ``conv``) in a grouping
CONV3X3 = "conv3x3"
_SPLIT_COMPUTE = ("conv", "pointwise", "linear", "recurrent", "attention")
#: class groups sharing one efficiency: "split" needs ~10 samples, "tied" is one efficiency
GROUPINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "per_class": {c: (c,) for c in CLASSES},
    "split": {"compute": _SPLIT_COMPUTE,
              "depthwise": ("depthwise",), "memory": ("pooling", "elementwise")},
    "tied": {"all": CLASSES},
    "compute_memory": {"compute": ("conv", "depthwise", "pointwise", "linear", "recurrent",
                                   "attention"), "memory": ("pooling", "elementwise")},
    "split_linear": {"conv": ("conv", "pointwise", "recurrent", "attention"),
                     "linear": ("linear",), "depthwise": ("depthwise",),
                     "memory": ("pooling", "elementwise")},
}
for _g in ("tied", "compute_memory", "split", "split_linear"):  # the same, 3x3 convs apart
    GROUPINGS[f"{_g}+winograd"] = {CONV3X3: (CONV3X3,), **GROUPINGS[_g]}
Z90 = 1.645
PRECISION_TRANSFER_WIDENING = 1.5  # sigma x 1.5 for a precision the rows never ran
THREAD_TRANSFER_WIDENING = 1.25  # sigma x 1.25 when the serial share is a prior, not fitted
#: below this many samples the per-layer and per-inference overheads are not fitted (0): with
#: four or five rows they soak up whatever the efficiencies leave (0.4 ms per layer on a
#: 480 MHz MCU)
LAYER_TERMS_MIN_SAMPLES = 8
#: the least share of one sample's roofline a group must carry for its own theta to be
#: fitted (:func:`supported_groups`); a group below it in every sample joins the largest
GROUP_SUPPORT_SHARE = 0.2
#: a prior spread counts as this many rows in an interval's sigma: a leave-one-out spread
#: measured on a handful of rows is itself a guess (a board calibration pools its own with
#: the other boards', a user calibration with the shipped one's, an LLM stage with the
#: held-out rows of every board)
PRIOR_SIGMA_WEIGHT = 2.0
#: a leave-one-out prediction this far below the measured latency predicted nothing
UNPREDICTED_RATIO = 1e-6


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


def class_roofline(feats: dict[str, Any], winograd: bool) -> dict[str, float]:
    """Per class the roofline ms of the unfused kernels; with ``winograd``, the dense 3x3
    stride-1 convolutions apart (``conv3x3``, taken out of ``conv``)."""
    roof = {c: float(v) for c, v in feats["roofline_ms"].items()}
    if winograd:
        w = float(feats.get("conv3x3_roofline_ms", 0.0) or 0.0)
        roof["conv"] = max(0.0, roof.get("conv", 0.0) - w)
        roof[CONV3X3] = w
    return roof


def lower_theta(group_classes: tuple[str, ...]) -> float:
    """The least theta a group may take: 1 (the roofline), 1 / WINOGRAD_GAIN for 3x3 convs."""
    return 1.0 / WINOGRAD_GAIN if group_classes == (CONV3X3,) else 1.0


def _design(samples: list[dict[str, Any]], groups: dict[str, tuple[str, ...]]):
    winograd = any(cls == (CONV3X3,) for cls in groups.values())
    rows, nk, roof = [], [], []
    for s in samples:
        f = s["features"]
        ws = float(s.get("work_scale", 1.0))
        r = class_roofline(f, winograd)
        rows.append([ws * sum(r.get(c, 0.0) for c in cls) for cls in groups.values()])
        nk.append(counts(f))
        roof.append(f["roofline_total_ms"])
    return np.asarray(rows, float), np.asarray(nk, float).reshape(-1, 2), np.asarray(roof, float)


def supported_groups(samples: list[dict[str, Any]], groups: dict[str, tuple[str, ...]]
                     ) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """The grouping with every group the samples cannot pin down merged into the group that
    carries most of their roofline (not the 3x3 convolutions', whose Winograd bound is theirs
    alone); returns it and ``{merged group: the group it joined}``.

    A group is pinned down when it carries at least :data:`GROUP_SUPPORT_SHARE` of some
    sample's roofline. Otherwise its theta is fitted from shares so small that nearly any
    value fits them; a model made mostly of that class (a fully-connected autoencoder after
    CNNs whose only linear layer is the classifier) would then be predicted with it."""
    R, _, _ = _design(samples, groups)
    share = R / np.maximum(R.sum(axis=1, keepdims=True), 1e-300)
    names = list(groups)
    # the 3x3 group keeps its Winograd bound to itself: it never takes others in
    hosts = [j for j, g in enumerate(names) if groups[g] != (CONV3X3,)] or list(range(len(names)))
    host = names[max(hosts, key=lambda j: float(R[:, j].sum()))]
    merged = {g: host for j, g in enumerate(names)
              if g != host and float(share[:, j].max()) < GROUP_SUPPORT_SHARE}
    if not merged:
        return groups, {}
    out: dict[str, tuple[str, ...]] = {}
    for g, classes in groups.items():
        if g in merged:
            continue
        out[g] = classes + tuple(c for m, h in merged.items() if h == g for c in groups[m])
    return out, merged


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
            "factors": {k: {"factor": 1.0, "n": keys.count(k)} for k in dict.fromkeys(keys)}}


def fit(samples: list[dict[str, Any]], grouping: str | None = None, *,
        basis: str = "roofline", floor: bool = True,
        cache_mb: float | None = None, shrink: float | None = None,
        transfer: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fitted parameters (the calibration's ``parameters`` and ``runtimes`` factors);
    ``shrink``: the family factors' prior weight in rows (default :data:`SHRINK`);
    ``transfer``: the runtimes' factors on the other boards of the processor kind
    (``transfer_factors`` of tools/build_board_calibrations.py), kept as ``transfer_factors``
    for a runtime without rows."""
    from scipy.optimize import nnls

    if not samples:
        raise ValueError("no samples to fit")
    if basis == "work":
        return fit_work(samples, floor, cache_mb)
    grouping = grouping or choose_grouping(len(samples))
    shrink = SHRINK if shrink is None else float(shrink)
    groups, merged = supported_groups(samples, GROUPINGS[grouping])
    R, nk, roof = _design(samples, groups)
    lower = np.asarray([lower_theta(cls) for cls in groups.values()])
    y = np.asarray([s["latency_ms"] for s in samples], float)
    keys = [key_of(s["family"], s["precision"]) for s in samples]
    factors = {k: 1.0 for k in keys}
    few = len(y) < LAYER_TERMS_MIN_SAMPLES  # too few to tell overheads from efficiencies
    if few:
        nk = np.zeros_like(nk)
    A = np.column_stack([np.zeros(len(y)) if few else np.ones(len(y)), nk[:, 0], nk[:, 1], R])
    coef = np.zeros(A.shape[1])
    floor_ms = R @ lower  # theta = lower + phi, phi >= 0: never faster than the roofline
    base = None
    for _ in range(ITERATIONS):
        f = np.asarray([factors[k] for k in keys])
        yt = y / f
        target = yt - floor_ms
        # least squares on relative errors, relative to the geometric mean of the measured
        # and the predicted value: weights 1/y alone pull the fit below the rows' median by
        # about exp(-sigma^2) under multiplicative noise (1/prediction: above it)
        w = 1.0 / (yt if base is None else np.sqrt(yt * base))
        coef, _ = nnls(A * w[:, None], target * w, maxiter=50 * A.shape[1])
        base = np.maximum(A @ coef + floor_ms, roof)
        logr = np.log(y / base)
        new = {}
        for k in dict.fromkeys(keys):
            idx = [i for i, kk in enumerate(keys) if kk == k]
            new[k] = math.exp(float(logr[idx].sum()) / (len(idx) + shrink))
        factors = new
    theta = {}
    for (gname, classes), phi, lo in zip(groups.items(), coef[3:], lower):
        for c in classes:
            theta[c] = float(lo) + float(phi)
    counts = {k: keys.count(k) for k in factors}
    out = {"basis": "roofline", "grouping": grouping, "shrink": shrink,
           "per_inference_ms": float(coef[0]),
           "per_layer_ms": float(coef[1]), "per_memory_layer_ms": float(coef[2]),
           "efficiency_multiplier": theta,
           "factors": {k: {"factor": float(v), "n": counts[k]} for k, v in factors.items()}}
    if merged:
        out["merged_groups"] = merged
    if transfer:
        out["transfer_factors"] = transfer
    return out


def kernel_ms(params: dict[str, Any], kclass: str, roofline_ms: float, macs: float,
              nbytes: float, winograd: bool = False) -> float:
    """One unfused kernel's share of the prediction (without the per-layer overhead);
    ``winograd``: the kernel is a dense 3x3 stride-1 convolution."""
    if params.get("basis") == "split":
        return max(params["ms_per_compute_ms"].get(kclass, 0.0),
                   params["ms_per_memory_ms"].get(kclass, 0.0)) * roofline_ms
    if params.get("basis") == "work":
        return (params["ms_per_gmac"].get(kclass, 0.0) * macs / 1e9
                + params["ms_per_mb"].get(kclass, 0.0) * nbytes / 1e6)
    theta = params["efficiency_multiplier"]
    if winograd and CONV3X3 in theta:
        kclass = CONV3X3
    return theta.get(kclass, 1.0) * roofline_ms


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
    roof = class_roofline(feats, CONV3X3 in theta)
    t += work_scale * sum(theta.get(c, 1.0) * v for c, v in roof.items())
    return max(t, feats["roofline_total_ms"])


def resolve_factor_key(params: dict[str, Any], sample: dict[str, Any]
                       ) -> tuple[str | None, str]:
    """(the factor's key, method) the predictor would use for ``sample``: its runtime's
    factor at its precision (``calibrated``); else the same runtime's at the precision
    nearest in bytes (``precision transfer``; the roofline at the sample's precision carries
    the peaks); else none, 1 on the board's shared efficiencies (``runtime transfer``)."""
    factors = params["factors"]
    key = key_of(sample["family"], sample["precision"])
    if key in factors:
        return key, "calibrated"
    near = nearest_key(factors, sample["family"], sample["precision"])
    return (near, "precision transfer") if near else (None, "runtime transfer")


def nearest_key(table: dict[str, Any], family: str, precision: str) -> str | None:
    """The key of ``table`` (``family/precision``) of ``family`` whose precision is nearest
    ``precision`` in bytes per weight (an unknown precision name: the farthest); None where
    ``family`` has none."""
    from edgeprof.core.precision import get_precision

    def distance(k: str) -> float:
        try:
            return abs(get_precision(k.split("/", 1)[1]).weight_bytes
                       - get_precision(precision).weight_bytes)
        except Exception:  # an unknown precision name: the farthest
            return float("inf")
    keys = sorted(k for k in table if k.split("/", 1)[0] == family)
    return min(keys, key=distance) if keys else None


def transferred_factor(params: dict[str, Any], family: str, precision: str
                       ) -> tuple[float, list[str]]:
    """A runtime without rows on this board: its factor on the other boards of the kind
    (``transfer_factors``, made by the build) at ``precision``, else at the precision
    nearest in bytes, with the boards it rests on; (1, []) where no board has its rows: the
    board's shared efficiencies."""
    table = params.get("transfer_factors") or {}
    runtime = family.split("@", 1)[0]
    key = key_of(runtime, precision)
    key = key if key in table else nearest_key(table, runtime, precision)
    if key is None:
        return 1.0, []
    return float(table[key]["factor"]), list(table[key]["boards"])


def resolve_factor(params: dict[str, Any], sample: dict[str, Any]) -> tuple[float, str]:
    """(family factor, method) the predictor would use for ``sample``
    (:func:`resolve_factor_key`; a runtime transfer: :func:`transferred_factor`)."""
    key, method = resolve_factor_key(params, sample)
    if key is None:
        return transferred_factor(params, sample["family"], sample["precision"])[0], method
    return float(params["factors"][key]["factor"]), method


def factor_gap(factor: float, n: int | None, shrink: float | None) -> float:
    """How far a family factor fitted from ``n`` rows still is from those rows' own level:
    the shrink keeps ``log factor = sum of log residuals / (n + shrink)``, so the rows' mean
    log residual is ``log factor x (n + shrink) / n`` and the gap ``factor ** (shrink / n)``.
    A prediction's interval reaches from its value to its value x this gap (besides its
    spread): the shrink is a prior pull towards the board's shared efficiencies that one or
    two rows cannot confirm, not knowledge that the runtime is nearer them. 1 where nothing
    was shrunk."""
    if not n or not shrink or factor <= 0:
        return 1.0
    return float(factor) ** (float(shrink) / float(n))


def interval_bounds(value: float, sigma: float, gap: float = 1.0,
                    floor: float | None = None) -> tuple[float, float]:
    """A prediction's 90 % interval: ``value x exp(+-Z90 sigma)``, reaching to ``value x
    gap`` (:func:`factor_gap`), its low end never below ``floor`` (the roofline) where
    given. The predictor states it; nested leave-one-out measures its coverage."""
    low = value * min(1.0, gap) * math.exp(-Z90 * sigma)
    if floor is not None:
        low = max(low, floor)
    return low, max(value * max(1.0, gap) * math.exp(Z90 * sigma), low)


def predict_sample(params: dict[str, Any], sample: dict[str, Any]) -> float:
    return predict_sample_method(params, sample)[0]


def predict_sample_method(params: dict[str, Any], sample: dict[str, Any]) -> tuple[float, str]:
    """(prediction, method) of ``sample`` by ``params`` (see :func:`resolve_factor`)."""
    factor, method = resolve_factor(params, sample)
    value = factor * base_ms(params, sample["features"], float(sample.get("work_scale", 1.0)))
    if params.get("floor", "roofline") == "none":
        return value, method
    return max(value, sample["features"]["roofline_total_ms"]), method


def leave_one_out(samples: list[dict[str, Any]], grouping: str | None = None, *,
                  basis: str = "roofline", floor: bool = True,
                  cache_mb: float | None = None, shrink: float | None = None) -> list[float]:
    """Each sample predicted by a fit to all the others (same grouping and basis as the
    full fit)."""
    grouping = grouping or choose_grouping(len(samples))
    out = []
    for i, s in enumerate(samples):
        rest = samples[:i] + samples[i + 1:]
        out.append(predict_sample(fit(rest, grouping, basis=basis, floor=floor,
                                      cache_mb=cache_mb, shrink=shrink), s))
    return out


def pooled_sigma(own: float, n: int, prior: float, weight: float = PRIOR_SIGMA_WEIGHT
                 ) -> float:
    """A log sigma of ``n`` rows' own leave-one-out spread pooled with a prior spread, which
    counts as ``weight`` rows (:data:`PRIOR_SIGMA_WEIGHT`; the LLM calibration's own
    ``POOLED_WEIGHT``)."""
    return math.sqrt((n * own ** 2 + weight * prior ** 2) / (n + weight))


def family_sigma(sigmas: dict[str, Any], family: str | None, board: float) -> float:
    """The calibrated spread for ``family``'s predictions: its rows' own leave-one-out
    spread pooled with the board's (which counts as :data:`PRIOR_SIGMA_WEIGHT` rows), or
    the board's where the family has no calibrated row."""
    own = (sigmas.get("log_sigma_family") or {}).get(family or "")
    if not own or own.get("own") is None or not own.get("n"):
        return board
    return pooled_sigma(float(own["own"]), int(own["n"]), board)


def cv_summary(samples: list[dict[str, Any]], predicted: list[float],
               methods: list[str] | None = None) -> dict[str, Any]:
    """Median |error|, share within +-10 % / +-25 %, Spearman, and the log-error spread
    (with ``methods``, each row's method in its error entry)."""
    from scipy.stats import spearmanr

    y = np.asarray([s["latency_ms"] for s in samples], float)
    p = np.asarray(predicted, float)
    rel = (p - y) / y
    # a row held out may have nothing left to predict it by (a work-basis fit whose other
    # rows never ran its class predicts 0 ms, or 1e-18 ms by rounding): a miss by 100 %, and
    # no log error to pool
    seen = p > y * UNPREDICTED_RATIO
    if not seen.any():
        raise UserError(f"leave-one-out predicted none of the {len(y)} samples held out (each "
                        "is the only one of its kernel class): measure more kernels, e.g. "
                        "--kernels default")
    logerr = np.log(y[seen] / p[seen])
    rho = float(spearmanr(y, p).statistic) if len(y) > 2 else float("nan")
    unseen = {} if seen.all() else {"n_unpredicted": int((~seen).sum()), "unpredicted": (
        "held out, these rows had nothing left to predict them by (0 ms: no other row ran "
        "their kernel class); they count as misses, and the log sigma is over the others")}
    return {"method": "leave-one-out", "n": int(len(y)), **unseen,
            "median_abs_error": float(np.median(np.abs(rel))),
            "within_10": float(np.mean(np.abs(rel) <= 0.10)),
            "within_25": float(np.mean(np.abs(rel) <= 0.25)),
            "spearman": rho if math.isfinite(rho) else None,
            "log_sigma": float(math.sqrt(float(np.mean(logerr ** 2)))),
            "errors": [{"id": s.get("id"), "model": s.get("model"), "family": s["family"],
                        "measured_ms": float(a), "predicted_ms": float(b),
                        "error": float(r), **({"method": methods[i]} if methods else {})}
                       for i, (s, a, b, r) in enumerate(zip(samples, y, p, rel))]}

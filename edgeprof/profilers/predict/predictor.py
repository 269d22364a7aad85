"""``predict_latency``: a model's latency on a target for one runtime family and precision,
from a calibration when one matches, else the roofline with a documented prior.

* **predicted**: the calibration's per-kernel model summed over the estimate's kernels
  (``fit.py``), never below the target's roofline (except a host calibration's ``work``
  basis: the host's peaks are measured, so its roofline is no lower bound); the interval is the fit's leave-one-out
  log-error spread (90 %: value x exp(+-1.645 sigma)), widened by the share of the time in
  kernels outside the calibration's range (a class it never saw, or a kernel more than
  twice the largest it saw), which are named.
* **uncalibrated**: no calibration for (target, family, precision). The value is the
  roofline x the median ratio measured/roofline of the published board measurements the
  shipped calibrations were fitted to (``data/prior.json``), the interval runs from the
  roofline (a lower bound) to the 90th percentile of that ratio.

Neither depends on anything measured on this machine: the figure for a target is the same
however loaded the host is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.precision import get_precision
from edgeprof.core.results import WarningRecord, clean
from edgeprof.profilers.predict.calibration import Calibration, find_calibration
from edgeprof.profilers.predict.fit import Z90, kernel_ms, predict_sample
from edgeprof.profilers.predict.kernels import features, kernels_of

PRIOR_FILE = Path(__file__).parent / "data" / "prior.json"
EXTRAPOLATION_WIDENING = 2.0  # sigma x (1 + 2 x share of the time outside the range)


@dataclass
class Prediction:
    value_ms: float
    low_ms: float
    high_ms: float
    provenance: str  # "predicted" | "uncalibrated"
    roofline_ms: float
    calibration: str | None = None
    calibration_path: str | None = None
    extrapolated_layers: list[str] = field(default_factory=list)
    note: str = ""
    warnings: list[WarningRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("value_ms", "low_ms", "high_ms", "provenance",
                                           "roofline_ms", "calibration", "calibration_path",
                                           "extrapolated_layers", "note")}
        d["warnings"] = [w.to_dict() for w in self.warnings]
        return clean(d)


def load_prior() -> dict[str, Any]:
    try:
        return json.loads(PRIOR_FILE.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):  # a source checkout before the boards are built
        return {"median_ratio": 1.0, "p10_ratio": 1.0, "p90_ratio": 1.0, "n": 0,
                "source": "no prior file: the roofline alone"}


def fingerprint_of(target) -> dict[str, Any]:
    """What identifies the device a calibration was fitted for."""
    if getattr(target, "is_host", False):
        return {"target": "host", "processor": target.processor,
                "cores": int(target.cores.value)}
    return {"target": target.id, "descriptor_sha256": target.sha256}


def _differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    return [f"{k} {expected[k]!r} (calibration) vs {actual[k]!r} (now)"
            for k in expected if k in actual and expected[k] is not None
            and actual[k] is not None and expected[k] != actual[k]]


def _uncalibrated(roof: float, target, backend: str, compute: str, why: str) -> Prediction:
    prior = load_prior()
    m, lo, hi = (float(prior.get(k, 1.0)) for k in ("median_ratio", "p10_ratio", "p90_ratio"))
    note = (f"uncalibrated: {why}; roofline {roof:.4g} ms x the prior {m:.3g} (median ratio "
            f"measured/roofline of {prior.get('n', 0)} published board measurements, p10-p90 "
            f"{lo:.3g}-{hi:.3g}); run 'edgeprof calibrate --target {target.id} --backend "
            f"{backend}' where the device is reachable")
    return Prediction(value_ms=roof * max(m, 1.0), low_ms=roof * max(lo, 1.0),
                      high_ms=roof * max(hi, 1.0), provenance="uncalibrated", roofline_ms=roof,
                      note=note)


def predict_with(cal: Calibration, estimate, target, backend: str, compute: str, *,
                 runtime_version: str | None = None) -> Prediction:
    """The prediction of ``cal`` for ``estimate`` (whose rows are on ``target``)."""
    roof = float(estimate.roofline_latency_ms)
    kernels = kernels_of(estimate)
    feats = features(kernels)
    params = dict(cal.parameters)
    params["factors"] = {k: {"factor": float(v["factor"])} for k, v in cal.runtimes.items()}
    value = predict_sample(params, {"family": backend, "precision": compute, "features": feats})
    floored = params.get("floor", "roofline") != "none"
    outside, outside_ms = [], 0.0
    for k in kernels:
        if k.fused:
            continue
        r = cal.ranges.get(k.kclass)
        if r is None or k.roofline_ms > 2.0 * float(r[1]):
            outside.append(k.layer)
            outside_ms += kernel_ms(params, k.kclass, k.roofline_ms, k.macs, k.bytes)
    share = min(1.0, outside_ms / value) if value > 0 else 0.0
    sigma = float(cal.cv["log_sigma"]) * (1.0 + EXTRAPOLATION_WIDENING * share)
    low = value * math.exp(-Z90 * sigma)
    if floored:
        low = max(low, roof)
    high = value * math.exp(Z90 * sigma)
    entry = cal.entry(backend, compute) or {}
    warnings: list[WarningRecord] = []
    diffs = _differences(cal.fingerprint, fingerprint_of(target))
    if diffs:
        warnings.append(WarningRecord(
            "calibration_device_differs",
            f"calibration '{cal.name}' was fitted for another device description: "
            + "; ".join(diffs) + "; its prediction is used, but may be off"))
    if cal.fingerprint.get("emulating"):
        warnings.append(WarningRecord(
            "calibration_emulated",
            f"calibration '{cal.name}' was measured by board '{cal.fingerprint.get('board')}' "
            f"emulating {cal.target} (a {cal.fingerprint.get('cpu_model')}, "
            f"{cal.fingerprint.get('arch')}): it describes that machine, not a {cal.target}"))
    if runtime_version and entry.get("version") and entry["version"] != runtime_version:
        warnings.append(WarningRecord(
            "calibration_runtime_differs",
            f"calibration '{cal.name}' was fitted with {backend} {entry['version']}, this is "
            f"{backend} {runtime_version}; its prediction is used, but may be off"))
    cv = cal.cv
    note = (f"predicted by calibration '{cal.name}' ({backend}/{compute}: {entry.get('n', 0)} of "
            f"{cv.get('n')} samples; leave-one-out median |error| "
            f"{100 * float(cv.get('median_abs_error', 0)):.0f} %); 90 % interval "
            f"{low:.4g}-{high:.4g} ms; "
            + (f"never below the roofline {roof:.4g} ms" if floored else
               f"fitted to the work (GMACs, MB) of kernels measured on this device, whose "
               f"roofline ({roof:.4g} ms, on peaks measured here) is no lower bound"))
    if outside:
        shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5
                                          else "")
        note += (f"; {len(outside)} layers outside the calibration's range ({shown}): "
                 f"extrapolated, interval widened")
    return Prediction(value_ms=value, low_ms=low, high_ms=max(high, low), provenance="predicted",
                      roofline_ms=roof, calibration=cal.name,
                      calibration_path=str(cal.path) if cal.path else None,
                      extrapolated_layers=outside, note=note, warnings=warnings)


def predict_latency(estimate, target, backend: str, precision: str | None = None, *,
                    runtime_version: str | None = None,
                    dirs: list[Path] | None = None) -> Prediction:
    """Latency of the model behind ``estimate`` on ``target`` with runtime ``backend`` at
    ``precision`` (default: the estimate's). ``estimate`` must be the estimate on
    ``target``. A corrupted calibration file raises
    :class:`~edgeprof.profilers.predict.calibration.CalibrationError` (exit 2)."""
    precision = precision or estimate.precision
    compute = get_precision(precision).compute
    roof = float(estimate.roofline_latency_ms)
    cal = find_calibration(target.id, backend, compute, dirs)
    if cal is None:
        return _uncalibrated(roof, target, backend, compute,
                             f"no calibration for {target.id} with {backend} at {compute}")
    return predict_with(cal, estimate, target, backend, compute, runtime_version=runtime_version)

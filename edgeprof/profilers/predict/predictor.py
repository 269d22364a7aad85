"""``predict_latency``: a model's latency on a target for one runtime family, precision and
thread count, from a calibration when one fits, else the roofline with a documented prior.

What a prediction is for: (target and its mode, runtime family, precision, threads). The
calibration used is, in order: the one given (``--calibration FILE``), the user's own for
that target (``edgeprof calibrate``, preferred), the shipped one. Methods, each named in the
result:

* ``calibrated``: the calibration has rows of this runtime family at this precision. Its
  per-kernel model (``fit.py``) is summed over the estimate's kernels as the family fuses
  them (``kernels.py``), never below the target's roofline (except a host calibration's
  ``work`` basis, whose peaks are measured, so its roofline is no lower bound).
* ``precision transfer``: rows of this family exist at another precision only. The same
  model is applied to the estimate at the precision asked, whose roofline carries the
  processor's throughput ratio between the two precisions (the descriptor's peaks, with
  their sources); the family factor is the one fitted at the other precision; the interval
  is widened (x ``PRECISION_TRANSFER_WIDENING`` on the log spread).
* ``thread transfer`` (with either): the request's thread count differs from the rows'.
  The kernels' work scales by Amdahl's law with the family's serial share (``threads.py``).

Order the hardware implies: where the descriptor gives precision A at least precision B's
peak and A moves fewer bytes (fp16 against fp32 on a GPU with fp16 at twice fp32's rate,
int8 against fp32), A's family factor is capped at B's, so no figure at B comes out faster
than A's on the same model.

* **uncalibrated**: no calibration for (target, family) at any precision. The value is the
  roofline x the median ratio measured/roofline of the published board measurements the
  shipped calibrations were fitted to (``data/prior.json``), the interval runs from the
  roofline (a lower bound) to the 90th percentile of that ratio.

The interval is the fit's leave-one-out log-error spread (90 %: value x exp(+-1.645 sigma)):
for the calibrated method, the spread of the rows that leave-one-out predicted that way
(their runtime and precision kept other rows: ``cv.log_sigma_calibrated``); for a runtime
transfer, at least the spread the board's own rows missed by when their runtime was left
out (``cv.log_sigma_transfer``). It is widened by the share of the time in kernels outside
the calibration's range (a class it never saw, or a kernel more than twice the largest it
saw), which are named; a prediction whose interval is wider than 2x says why. Kernels of a
group of classes (``fit.GROUPINGS``) that none of the runtime's own rows spent 5 % of its
roofline in count the same way: their efficiency comes from the board's other runtimes.
A runtime factor fitted from few rows is shrunk towards the board's shared efficiencies
(``fit.factor_gap``); the interval reaches from the value to where those rows alone would
put it. Nothing depends on this machine: the figure for a target is the same however loaded the
host is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.core.precision import get_precision
from edgeprof.core.results import WarningRecord, clean
from edgeprof.profilers.estimate.analytic import compute_peak
from edgeprof.profilers.predict.calibration import (Calibration, calibrations_for,
                                                     load_calibration)
from edgeprof.profilers.predict.fit import (PRECISION_TRANSFER_WIDENING,
                                           THREAD_TRANSFER_WIDENING, Z90, base_ms,
                                           factor_gap, interval_bounds, kernel_ms,
                                           transferred_factor)
from edgeprof.profilers.predict.kernels import CLASSES, features, kernels_of
from edgeprof.profilers.predict.threads import (big_cores, family_info, is_gpu_family,
                                                work_scale)

PRIOR_FILE = Path(__file__).parent / "data" / "prior.json"
EXTRAPOLATION_WIDENING = 2.0  # sigma x (1 + 2 x share of the time outside the range)
USEFUL_WIDTH = 2.0  # an interval wider than high/low = 2 says why
#: a kernel class counts as run by a runtime when one of its rows spent this share of its
#: roofline in it
UNSEEN_SHARE = 0.05


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
    method: str = ""
    notes: list[str] = field(default_factory=list)
    target: str = ""
    backend: str = ""
    precision: str = ""
    threads: int | None = None
    threads_note: str = ""
    model: str = ""
    #: the board's processor the figure is for (``cpu``, ``cuda`` ...: ``runtimes.py``)
    device: str | None = None
    #: the precision that runs there (the requested one unless the processor falls back)
    executed_precision: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in (
            "model", "target", "device", "backend", "precision", "executed_precision",
            "threads", "threads_note", "value_ms",
            "low_ms", "high_ms", "provenance", "method", "roofline_ms", "calibration",
            "calibration_path", "extrapolated_layers", "note", "notes")}
        d["warnings"] = [w.to_dict() for w in self.warnings]
        return clean(d)


def load_prior() -> dict[str, Any]:
    try:
        return json.loads(PRIOR_FILE.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):  # a source checkout before the boards are built
        return {"median_ratio": 1.0, "p10_ratio": 1.0, "p90_ratio": 1.0, "n": 0,
                "source": "no prior file: the roofline alone"}


def base_id(target) -> str:
    """The descriptor a target (or one of its modes) comes from: calibrations are fitted per
    descriptor and scale to a mode through its peaks."""
    return getattr(target, "base_id", None) or target.id.split(":")[0]


def fingerprint_of(target) -> dict[str, Any]:
    """What identifies the device a calibration was fitted for."""
    if getattr(target, "is_host", False):
        return {"target": "host", "processor": target.processor,
                "cores": int(target.cores.value)}
    return {"target": base_id(target), "descriptor_sha256": target.sha256,
            "device": getattr(target, "implied_device", None)}


def _differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    return [f"{k} {expected[k]!r} (calibration) vs {actual[k]!r} (now)"
            for k in expected if k in actual and expected[k] is not None
            and actual[k] is not None and expected[k] != actual[k]]


def _uncalibrated(roof: float, target, backend: str, compute: str, why: str,
                  work: float = 1.0) -> Prediction:
    """The roofline x the published prior ratio (at the board's big cores) x ``work``, the
    thread law's factor for the threads asked (1 at all the big cores, or on a GPU)."""
    prior = load_prior()
    m, lo, hi = (float(prior.get(k, 1.0)) for k in ("median_ratio", "p10_ratio", "p90_ratio"))
    note = (f"uncalibrated: {why}; roofline {roof:.4g} ms x the prior {m:.3g} (median ratio "
            f"measured/roofline of {prior.get('n', 0)} published board measurements, p10-p90 "
            f"{lo:.3g}-{hi:.3g}"
            + (f"; x {work:.3g} for the threads asked" if work != 1.0 else "")
            + f"); time a few models on the board and run 'edgeprof calibrate "
            f"--target {base_id(target)} --backend {backend} --measurements FILE.csv'")
    return Prediction(value_ms=roof * max(m * work, 1.0), low_ms=roof * max(lo * work, 1.0),
                      high_ms=roof * max(hi * work, 1.0), provenance="uncalibrated",
                      roofline_ms=roof, note=note, notes=[note], method="prior")


def total_cores(target) -> int:
    cores = getattr(target, "cores", None)
    return int(getattr(cores, "value", cores) or 1)


def check_threads(threads: int | None, target) -> None:
    """A thread count the board cannot run is a user error (exit 2)."""
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0:
        raise UserError(f"--threads must be a positive integer, got {threads!r}")
    n = total_cores(target)
    if getattr(target, "kind", "") in ("gpu", "edge_gpu"):
        return  # a GPU's cores are not threads; the CPU is --device cpu
    if threads > n and not getattr(target, "is_host", False):
        raise UserError(f"{target.id} has {n} core{'s' if n != 1 else ''}: --threads "
                        f"{threads} is more than the board can run; give --threads "
                        + (f"1 to {n}" if n > 1 else "1"))


def processor_kind_of(target) -> str:
    """cpu, gpu, npu or mcu: the kind of processor a target (or a processor's view of a
    board) describes."""
    from edgeprof.profilers.predict.runtimes import KIND_OF_TARGET

    return KIND_OF_TARGET.get(getattr(target, "kind", ""), "cpu")


def runtime_of(family_key: str) -> str:
    """The runtime family of a calibration's family key (``ncnn`` for ``ncnn@2020-05``, an
    older build's rows: tools/build_board_calibrations.py)."""
    return family_key.split("@", 1)[0]


def build_key(backend: str, runtime_version: str | None, cands: list[Calibration]) -> str:
    """The family key a prediction for ``backend`` at build ``runtime_version`` reads:
    ``backend@build`` where a calibration holds rows of that older build, else ``backend``
    (the newest build's rows; a calibration fitted with another build warns)."""
    if runtime_version:
        key = f"{backend}@{runtime_version}"
        if any(e.get("family") == key for c in cands for e in c.runtimes.values()):
            return key
    return backend


def kernels_family(backend: str, target, cands: list[Calibration]) -> str | None:
    """The family whose rows predict ``backend`` on ``target``'s processor where it has none
    of its own and runs that family's kernels there (``runtimes.toml`` ``kernels_on``: TFLite
    Micro runs CMSIS-NN on a microcontroller); else None."""
    from edgeprof.profilers.predict.runtimes import KIND_OF_TARGET

    other = (family_info(backend).get("kernels_on") or {}).get(
        KIND_OF_TARGET.get(getattr(target, "kind", ""), ""))
    if not other:
        return None
    fams = {e.get("family") for c in cands for e in c.runtimes.values()}
    return other if other in fams and backend not in fams else None


def _cal_threads(cal: Calibration, family: str) -> int | None:
    """The one thread count a calibration's rows of ``family`` ran at, else None."""
    ts = {s.get("threads") for s in cal.samples if s.get("family") == family}
    return ts.pop() if len(ts) == 1 else None


def _serial(cal: Calibration, family: str) -> tuple[float, bool]:
    """(serial share, fitted?) of ``family`` for thread transfer."""
    fitted = (cal.parameters.get("serial_share") or {}).get(family)
    if fitted is not None:
        return float(fitted), True
    return float(family_info(family)["serial_share"]), False


def _precedes(target, a: str, b: str) -> bool:
    """True where the hardware implies compute precision ``a`` at least as fast as ``b``:
    ``a`` has at least ``b``'s peak on the descriptor and moves fewer bytes."""
    if a == b:
        return False
    pa, pb = target.peak_macs(a), target.peak_macs(b)
    if not pa or not pb or pa < pb:
        return False
    return get_precision(a).weight_bytes < get_precision(b).weight_bytes


def _resolve(calibration, target, family: str, compute: str,
             dirs: list[Path] | None) -> tuple[Calibration | None, str | None]:
    """(calibration, the precision of its rows used) for the request."""
    if calibration is not None:
        cal = calibration if isinstance(calibration, Calibration) else \
            load_calibration(calibration)
        if cal.target not in (base_id(target), target.id):
            raise UserError(f"calibration '{cal.name}' is for target {cal.target}, not "
                            f"{target.id}; give --target {cal.target} or another calibration")
        cands = [cal]
    else:  # a calibration of the board's GPU says nothing of its CPU, and the reverse
        device = getattr(target, "implied_device", None)
        cands = [c for c in calibrations_for(base_id(target), dirs)
                 if c.fingerprint.get("device") in (None, device)]
    for cal in cands:
        if cal.entry(family, compute) is not None:
            return cal, compute
    for cal in cands:
        others = [e["precision"] for e in cal.runtimes.values() if e.get("family") == family]
        if others:
            # the nearest precision: the same peak first, then the fewest bytes apart
            def distance(p: str) -> tuple[float, float]:
                pa, pb = target.peak_macs(p) or 0.0, target.peak_macs(compute) or 0.0
                return (abs(math.log((pa or 1.0) / (pb or 1.0))),
                        abs(get_precision(p).weight_bytes - get_precision(compute).weight_bytes))
            return cal, min(sorted(others), key=distance)
    if calibration is not None:
        known = sorted({f"{e.get('family')}/{e.get('precision')}" for e in cands[0].runtimes.values()})
        raise UserError(f"calibration '{cands[0].name}' has no rows for {family}; it holds "
                        + ", ".join(known) + "; give --backend accordingly")
    for cal in cands:  # runtime transfer: the board's shared efficiencies, with the
        # runtime's factor on the other boards of the kind (else 1: several runtimes' rows)
        families = {e.get("family") for e in cal.runtimes.values()}
        if cal.parameters.get("basis", "roofline") == "roofline" and (
                len(families) >= 3 or transferred_factor(cal.parameters, family, compute)[1]):
            return cal, None
    return None, None


def unseen_classes(cal: Calibration, family: str) -> set[str]:
    """Kernel classes (``conv3x3`` for the 3x3 convolutions a ``+winograd`` grouping sets
    apart) whose efficiency group none of ``family``'s rows spent at least ``UNSEEN_SHARE``
    of its roofline in: their efficiency comes from the board's other runtimes. Empty where
    the calibration is not a roofline-basis fit of several runtimes or has no row of
    ``family``."""
    from edgeprof.profilers.predict.fit import CONV3X3, GROUPINGS, class_roofline

    p = cal.parameters
    if p.get("basis", "roofline") != "roofline":
        return set()
    rows = [s for s in cal.samples if s.get("family") == family and s.get("features")]
    if not rows or len({s.get("family") for s in cal.samples}) < 2:
        return set()
    winograd = CONV3X3 in (p.get("efficiency_multiplier") or {})
    groups = GROUPINGS.get(p.get("grouping", ""), {c: (c,) for c in CLASSES})
    unseen: set[str] = set()
    for classes in groups.values():
        def share(f: dict[str, Any]) -> float:
            total = float(f.get("roofline_total_ms") or 0.0)
            r = class_roofline(f, winograd)
            return sum(r.get(c, 0.0) for c in classes) / total if total > 0 else 0.0
        if all(share(s["features"]) < UNSEEN_SHARE for s in rows):
            unseen |= set(classes)
    return unseen


def calibrated_sigma(cal: Calibration, family: str | None = None) -> float:
    """The log spread of the calibrated method: the leave-one-out errors of the rows whose
    runtime and precision kept other rows (``log_sigma_calibrated``), else every row's;
    for ``family``, its own rows' spread pooled with that (``fit.family_sigma``)."""
    from edgeprof.profilers.predict.fit import family_sigma

    s = cal.cv.get("log_sigma_calibrated")
    board = float(s if s is not None else cal.cv["log_sigma"])
    return family_sigma(cal.cv, family, board) if family else board


def predict_with(cal: Calibration, estimate, target, backend: str, compute: str, *,
                 source_precision: str | None = None, threads: int | None = None,
                 threads_note: str = "", runtime_version: str | None = None) -> Prediction:
    """The prediction of ``cal`` for ``estimate`` (whose rows are on ``target``) with family
    ``backend`` at ``compute``, from the calibration's rows at ``source_precision``."""
    runtime_transfer = source_precision is None and cal.entry(backend, compute) is None
    src = compute if runtime_transfer else (source_precision or compute)
    roof = float(estimate.roofline_latency_ms)
    runtime = runtime_of(backend)  # "ncnn" for a build's key "ncnn@2020-05"
    kernels = kernels_of(estimate, runtime, processor_kind_of(target))
    feats = features(kernels)
    params = dict(cal.parameters)
    factors = {k: float(v["factor"]) for k, v in cal.runtimes.items()}
    factor = factors.get(f"{backend}/{src}", 1.0)
    moved_from: list[str] = []
    if runtime_transfer:  # its kernels' speed on the other boards of the kind, where known
        factor, moved_from = transferred_factor(params, backend, compute)
    notes: list[str] = []
    method = ("runtime transfer" if runtime_transfer else
              "calibrated" if src == compute else "precision transfer")
    # -- the order the hardware implies ----------------------------------------------------
    for key, f in factors.items():
        fam, p = key.split("/", 1)
        if fam != backend or p == src:
            continue
        if _precedes(target, p, compute) and f > factor:
            notes.append(f"factor raised to {backend}/{p}'s ({f:.3g}): {p} runs at least "
                         f"{compute}'s rate on {target.id} with fewer bytes")
            factor = f
        elif _precedes(target, compute, p) and f < factor:
            notes.append(f"factor capped at {backend}/{p}'s ({f:.3g}): {compute} runs at "
                         f"least {p}'s rate on {target.id} with fewer bytes")
            factor = f
    # -- threads -------------------------------------------------------------------------
    serial, fitted = _serial(cal, runtime)
    ws = work_scale(threads, target, serial)
    seen = {s.get("threads") for s in cal.samples if s.get("family") == backend} - {None}
    thread_transfer = threads is not None and bool(seen) and threads not in seen
    if thread_transfer:
        method += " + thread transfer"
    base = base_ms(params, feats, ws)
    value = factor * base
    floored = params.get("floor", "roofline") != "none"
    if floored:
        value = max(value, roof)
    outside, outside_ms = [], 0.0
    # classes this runtime's own rows never spent time in: their efficiency is the board's
    # (other runtimes'), which the calibrated interval does not vouch for
    unseen = set() if runtime_transfer else unseen_classes(cal, backend)
    foreign: list[str] = []
    for k in kernels:
        if k.fused:
            continue
        r = cal.ranges.get(k.kclass)
        beyond = r is None or k.roofline_ms > 2.0 * float(r[1])
        kc = "conv3x3" if k.winograd and "conv3x3" in (params.get("efficiency_multiplier")
                                                        or {}) \
            else k.kclass
        if beyond or kc in unseen:
            if beyond:
                outside.append(k.layer)
            else:
                foreign.append(k.layer)
            outside_ms += kernel_ms(params, k.kclass, k.roofline_ms, k.macs, k.bytes,
                                    k.winograd)
    share = min(1.0, outside_ms / value) if value > 0 else 0.0
    sigma0 = calibrated_sigma(cal, None if runtime_transfer else backend)
    sigma = sigma0 * (1.0 + EXTRAPOLATION_WIDENING * share)
    spread = 0.0
    sigma_rt = cal.cv.get("log_sigma_transfer")
    if runtime_transfer:  # another runtime's factor is unknown: as spread as the board's are
        logs = [math.log(f) for f in factors.values() if f > 0]
        spread = math.sqrt(sum(x * x for x in logs) / len(logs)) if logs else 0.5
        sigma = math.sqrt(sigma ** 2 + spread ** 2) * THREAD_TRANSFER_WIDENING
        if sigma_rt is not None:  # what the board's own runtime transfers missed by
            sigma = max(sigma, float(sigma_rt) * (1.0 + EXTRAPOLATION_WIDENING * share))
    if src != compute:
        sigma *= PRECISION_TRANSFER_WIDENING
    if thread_transfer and not fitted:
        sigma *= THREAD_TRANSFER_WIDENING
    entry = cal.entry(backend, src) or {}
    # a factor shrunk from few rows: the interval reaches to where its rows alone put it
    gap = 1.0 if runtime_transfer else factor_gap(float(entry.get("factor", 1.0)),
                                                  entry.get("n"), params.get("shrink"))
    low, high = interval_bounds(value, sigma, gap, roof if floored else None)
    if abs(math.log(gap)) > math.log(1.1):
        notes.append(f"{backend}/{src}'s factor rests on {entry.get('n')} row(s), shrunk "
                     f"towards the board's shared efficiencies; its rows alone put the "
                     f"prediction at x{gap:.3g}: the interval reaches there")
    warnings: list[WarningRecord] = []
    if getattr(target, "mode", None) is None:
        diffs = _differences(cal.fingerprint, fingerprint_of(target))
        if diffs:
            warnings.append(WarningRecord(
                "calibration_device_differs",
                f"calibration '{cal.name}' was fitted for another device description: "
                + "; ".join(diffs) + "; its prediction is used, but may be off"))
    else:
        notes.append(f"mode '{target.mode}': the calibration of {base_id(target)} applied to "
                     f"the mode's peaks and bandwidth")
    if cal.fingerprint.get("emulating"):
        warnings.append(WarningRecord(
            "calibration_emulated",
            f"calibration '{cal.name}' was measured by board '{cal.fingerprint.get('board')}' "
            f"emulating {cal.target} (a {cal.fingerprint.get('cpu_model')}, "
            f"{cal.fingerprint.get('arch')}): it describes that machine, not a {cal.target}"))
    if runtime_version and entry.get("version") and entry["version"] != runtime_version:
        warnings.append(WarningRecord(
            "calibration_runtime_differs",
            f"calibration '{cal.name}' was fitted with {backend} build {entry['version']!r}; "
            f"the prediction asked for build {runtime_version!r}; its prediction is used, but "
            f"may be off"))
    cv = cal.cv
    head = (f"predicted by calibration '{cal.name}' ({backend}/{src}: {entry.get('n', 0)} of "
            f"{cv.get('n')} samples; leave-one-out median |error| "
            f"{100 * float(cv.get('median_abs_error', 0)):.0f} %); 90 % interval "
            f"{low:.4g}-{high:.4g} ms; "
            + (f"never below the roofline {roof:.4g} ms" if floored else
               f"fitted to the work (GMACs, MB) of kernels measured on this device, whose "
               f"roofline ({roof:.4g} ms, on peaks measured here) is no lower bound"))
    if runtime_transfer:
        notes.append(f"runtime transfer: {cal.name} has no rows of {backend}; its shared "
                     f"per-class efficiencies and overheads with "
                     + (f"{runtime}'s factor on {', '.join(moved_from)} ({factor:.3g}, the "
                        f"speed of its kernels against those boards' shared efficiencies)"
                        if moved_from else "a runtime factor of 1")
                     + f", the interval widened by the spread of the board's runtime factors "
                     f"(log sd {spread:.2f})"
                     + (f", at least what its rows missed by when their runtime was left out "
                        f"(log sd {float(sigma_rt):.2f})" if sigma_rt is not None else "")
                     + "; labelled estimated, not predicted; time a few models and "
                     f"run 'edgeprof calibrate --target {base_id(target)} --backend {backend} "
                     f"--measurements FILE.csv'")
    if src != compute:
        (ps, _, _), (pc, used, _) = compute_peak(target, src), compute_peak(target, compute)
        ratio = f"{used}/{src} = {pc / ps:.3g}" if ps and pc else f"{compute}/{src} unknown"
        why = "descriptor peaks" + ("" if used == compute else
                                    f"; {base_id(target)} gives no {compute} rate (it runs "
                                    f"{', '.join(target.supported_precisions)}): a runtime "
                                    f"falls back, the roofline takes the {used} peak")
        notes.append(f"precision transfer: {backend} was calibrated at {src}, not {compute}; "
                     f"the kernels' roofline at {compute} carries the processor's throughput "
                     f"ratio {ratio} ({why}) and the bytes {compute} moves; interval widened "
                     f"x{PRECISION_TRANSFER_WIDENING}")
    if threads is None:
        notes.append(f"threads: n/a ({threads_note or 'a GPU runtime'})")
    else:
        notes.append(f"threads: {threads} ({threads_note})"
                     + (f"; transferred from the rows' "
                        f"{', '.join(str(x) for x in sorted(seen))} thread(s) by "
                        f"Amdahl's law, serial share {serial:.3g} "
                        f"({'fitted' if fitted else 'prior: ' + family_info(runtime)['serial_share_source'][:80] + '...'})"
                        if thread_transfer else ""))
    if outside:
        shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5
                                          else "")
        notes.append(f"{len(outside)} layers outside the calibration's range ({shown}): "
                     f"extrapolated, interval widened")
    if foreign:
        classes = sorted({k.kclass for k in kernels if k.layer in set(foreign)})
        notes.append(f"{len(foreign)} {'/'.join(classes)} layers, a kind no {backend} row of "
                     f"the calibration spent {100 * UNSEEN_SHARE:.0f} % of its roofline in: "
                     f"their efficiency is learned from the board's other runtimes, interval "
                     f"widened")
        outside = outside + foreign
    if high / low > USEFUL_WIDTH:
        why = []
        n = int(entry.get("n", 0) or 0)
        if n < 3 and not runtime_transfer:
            why.append(f"only {n} row(s) of {backend}/{src}")
        if sigma0 * 2 * Z90 > math.log(USEFUL_WIDTH):
            n_cv = int(cv.get("n") or 0)
            fam = (cv.get("log_sigma_family") or {}).get(backend) or {}
            why.append(f"the calibration's own leave-one-out spread (sigma {sigma0:.2f}"
                       + (f": {backend}'s {fam['n']} row(s) pooled with the board's"
                          if fam.get("n") and not runtime_transfer else "")
                       + (f", from only {n_cv} rows" if 0 < n_cv < 10 else "") + ")")
        if share >= 0.005:
            why.append(f"{100 * share:.0f} % of the time in extrapolated layers")
        if src != compute:
            why.append("a precision the rows never ran")
        if runtime_transfer:
            why.append("a runtime the rows never ran"
                       + (f" (the board's runtime transfers missed by a log spread of "
                          f"{float(sigma_rt):.2f} in leave-one-out over "
                          f"{cal.cv.get('n_transfer')} row(s))" if sigma_rt is not None else ""))
        notes.append(f"interval {high / low:.1f}x wide because of "
                     + (", ".join(why) or "the transfers above"))
    note = "; ".join([head] + notes)
    return Prediction(value_ms=value, low_ms=low, high_ms=high,
                      provenance="estimated" if runtime_transfer else "predicted",
                      roofline_ms=roof, calibration=cal.name,
                      calibration_path=str(cal.path) if cal.path else None,
                      extrapolated_layers=outside, note=note, warnings=warnings,
                      method=method, notes=[head] + notes, target=target.id, backend=backend,
                      precision=estimate.precision, threads=threads, threads_note=threads_note)


def resolve_threads(threads: int | None, target, backend: str,
                    cal: Calibration | None) -> tuple[int | None, str]:
    """(threads, why) of a prediction: the request's; else, for a user's calibration whose
    rows ran one thread count, that count; else all of the board's big cores. None for a GPU
    runtime or a GPU target."""
    if is_gpu_family(backend):
        return None, "a GPU runtime: host threads do not change its kernels"
    if getattr(target, "kind", "") in ("gpu", "edge_gpu"):
        return None, (f"{target.id}'s GPU, whose kernels host threads do not change (give "
                      f"--device cpu for its CPU cores)")
    check_threads(threads, target)
    if threads is not None:
        return threads, "as asked"
    if cal is not None and cal.fingerprint.get("source") == "measurements":
        t = _cal_threads(cal, backend)
        if t is not None:
            return t, f"as the calibration's rows ran ({cal.name}); give --threads N for another"
    if getattr(target, "is_host", False):
        return None, "this machine: the backend's own default"
    n = big_cores(target)
    return n, (f"all of {target.id}'s {n} big core{'s' if n != 1 else ''} (the default; "
               "--threads N for another)")


def check_processor(target, backend: str, device: str | None = None, *,
                    precision: str | None = None, registry: Any = None) -> None:
    """:class:`UserError` (exit 2) where runtime ``backend`` cannot be predicted on
    ``target``: it runs on none of the board's processors (TensorRT on a Raspberry Pi, X-CUBE-AI
    on a Jetson), or not on the ``device`` asked (OpenVINO on a Jetson's GPU, TensorRT on its
    CPU), or it does not offer ``precision``. Which runtime runs where and at which precision
    is data (``runtimes.py``, ``data/runtimes.toml``, the backends' declared precisions)."""
    from edgeprof.profilers.predict.runtimes import check_offered, processor_for

    processor_for(target, backend, device, registry)
    if precision is not None:
        check_offered(backend, precision, registry)


def predict_latency(estimate, target, backend: str, precision: str | None = None, *,
                    threads: int | None = None, calibration: Any = None,
                    runtime_version: str | None = None,
                    dirs: list[Path] | None = None, device: str | None = None) -> Prediction:
    """Latency of the model behind ``estimate`` on ``target`` with runtime ``backend`` at
    ``precision`` (default: the estimate's) on ``threads`` of the board's cores (default:
    see :func:`resolve_threads`). ``estimate`` must be the estimate on ``target`` at that
    precision. ``calibration``: a :class:`Calibration` or a path, used instead of the
    search. A corrupted calibration file raises
    :class:`~edgeprof.profilers.predict.calibration.CalibrationError` (exit 2).

    The processor is the runtime's (``runtimes.processor_for``): ``device`` where given,
    else its default on the board (a CPU-only runtime on a Jetson: its CPU cluster, the
    estimate restated there, and a note says so); a runtime on none of the board's
    processors, or a precision it does not offer, is a :class:`UserError` (exit 2). A
    precision the processor has no rate for is predicted as the one it falls back to
    (``executed_precision``), the same figure, and the note says so."""
    from edgeprof.profilers.predict.runtimes import (check_offered, executed_precision,
                                                     on_device, processor_for, restate)

    precision = precision or estimate.precision
    device, where = processor_for(target, backend, device)
    check_offered(backend, precision)
    prelude: list[str] = []
    if not getattr(target, "is_host", False) and device != target.implied_device:
        # the runtime's processor on this board is not the one the target's figures describe
        target = on_device(target, device)
        estimate = restate(estimate, target, estimate.precision)
        prelude.append(f"processor: {where}")
    compute = get_precision(precision).compute
    executed = executed_precision(target, precision)
    if executed != compute:  # no rate for it here: the runtime runs (and is predicted as) that
        estimate = restate(estimate, target, executed)
        prelude.append(
            f"{precision} falls back: {base_id(target)} gives no {compute} rate (it runs "
            f"{', '.join(target.supported_precisions)}; {device} peaks: "
            f"{', '.join(target.peak_compute)}), so a runtime runs {executed}: predicted as "
            f"{executed}, the same figure (executed precision {executed})")
        compute = executed
    p = _predict(estimate, target, backend, compute, threads=threads, calibration=calibration,
                 runtime_version=runtime_version, dirs=dirs)
    p.precision = precision
    p.executed_precision = precision if compute == get_precision(precision).compute else compute
    p.device = None if getattr(target, "is_host", False) else device
    if prelude:
        p.notes = p.notes[:1] + prelude + p.notes[1:]
        p.note = "; ".join(p.notes)
    return p


def _predict(estimate, target, backend: str, compute: str, *, threads: int | None,
             calibration: Any, runtime_version: str | None,
             dirs: list[Path] | None) -> Prediction:
    """The prediction on ``target`` (the runtime's processor) at ``compute``, a precision
    the processor has a rate for (``estimate`` is at it)."""
    precision = compute
    roof = float(estimate.roofline_latency_ms)
    key, borrowed = backend, None
    if calibration is None:
        cands = calibrations_for(base_id(target), dirs)
        if runtime_version:  # an older build's own rows, where shipped
            key = build_key(backend, runtime_version, cands)
        borrowed = kernels_family(backend, target, cands)
        key = borrowed or key
    cal, src = _resolve(calibration, target, key, compute, dirs)
    t, why = resolve_threads(threads, target, backend, cal)
    if cal is None:
        serial = float(family_info(backend)["serial_share"])
        work = work_scale(t, target, serial)  # 1 on a GPU or the host (t None)
        p = _uncalibrated(roof, target, backend, compute,
                          f"no calibration for {base_id(target)} with {backend}", work)
        p.target, p.backend, p.precision, p.threads, p.threads_note = \
            target.id, backend, precision, t, why
        if t is not None:
            p.notes.append(f"threads: {t} ({why}); the prior is for all the big cores, "
                           f"scaled by Amdahl's law (serial share {serial:g}"
                           + (f": x {work:.3g}" if work != 1.0 else "") + ")")
        return p
    if cal.parameters.get("basis") == "work":
        t = threads  # a host calibration: measured at the backend's own thread setting
    p = predict_with(cal, estimate, target, key, compute, source_precision=src,
                     threads=t, threads_note=why, runtime_version=runtime_version)
    if key != backend:
        p.backend = backend
        p.notes.insert(1, (f"{backend} runs {key}'s kernels on {base_id(target)}'s "
                           f"{target.implied_device} ({family_info(backend).get('kernels_on_source', '')}): "
                           f"predicted from {key}'s rows") if borrowed else
                       (f"build {runtime_version}: the rows of {backend} build "
                        f"{runtime_version} ({key} in {cal.name})"))
        p.note = "; ".join(p.notes)
    return p

"""The shipped board calibrations, built from ``data/device_measurements_train.csv`` only.

That file holds 38 published latencies (Raspberry Pi 4, Jetson Nano, STM32H743 and its
sibling STM32H7A3), each with its source and a quote. :data:`ROWS` says, for each row, which
target and runtime family it measures, the precision, and the ``builtin:`` model that
rebuilds the network (``edgeprof.zoo.reference``, ``edgeprof.zoo.mcunet``) -- or why the row
is left out. The build
estimates each model on the target's descriptor, chooses the grouping of kernel classes and
the runtime factors' shrink by leave-one-out, fits the target's few parameters (fit.py),
reports nested leave-one-out (the choice made again without each row; each row predicted
by the method the predictor would use for it, with the interval it would give) and writes
``data/calibrations/<target>--published.json`` and ``data/prior.json``.

Runtime families: an edgeprof backend name where the runtime is one (``tflite`` for
XNNPACK/TFLite on the Pi and for TFLite Micro + CMSIS-NN on the MCU, as the mcu descriptor
says; ``torch_eager``; ``onnxruntime``; ``tensorrt``), else the runtime's own name (``ncnn``,
``tvm``, ``opencv``, ``xcubeai`` ...): those rows inform the board's shared efficiencies and
overheads, not a backend's factor. End-to-end application timings (pre/post-processing
included) get their own family (``tensorrt_app``) so they do not bias TensorRT's factor.
MCU rows measured at another clock are scaled to the descriptor's 480 MHz (latency x
f/480 MHz: compute and the AXI bus both run off the core clock).

Run ``python benchmarks/predict_boards.py --write`` to rebuild (needs torch).
"""

from __future__ import annotations

import csv
import datetime as _dt
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
TRAIN_CSV = DATA / "device_measurements_train.csv"
BOARDS = ("raspberry_pi_4", "jetson_nano", "mcu")

_VWW = ("left out: mcunet-vww1's searched config was not available, so edgeprof does not "
        "rebuild it (the ImageNet MCUNets are in edgeprof.zoo.mcunet)")

#: row index -> (target, family, precision, builtin model or None, clock Hz or None, note)
ROWS: dict[int, tuple[str, str, str, str | None, float | None, str]] = {
    0: ("raspberry_pi_4", "tflite", "fp32", "mobilenet_v2", None, "XNNPACK end2end"),
    1: ("raspberry_pi_4", "tflite", "fp32", "mobilenet_v3_small", None, "XNNPACK end2end"),
    2: ("raspberry_pi_4", "tflite", "int8", "mobilenet_v2", None, "XNNPACK end2end"),
    3: ("raspberry_pi_4", "torch_eager", "int8", "mobilenet_v2", None, "qnnpack"),
    4: ("raspberry_pi_4", "torch_eager", "int8", "resnet18", None,
        "precision not stated; the tutorial's table lists quantized models: taken as int8"),
    5: ("raspberry_pi_4", "ncnn", "fp32", "mobilenet_v2", None, ""),
    6: ("raspberry_pi_4", "ncnn", "fp32", "resnet18", None, ""),
    7: ("raspberry_pi_4", "tvm", "int8", "tiny_resnet8", None, "Latent AI LEIP (TVM)"),
    8: ("raspberry_pi_4", "tvm", "int8", "tiny_ds_cnn", None, "Latent AI LEIP (TVM)"),
    9: ("raspberry_pi_4", "tvm", "fp32", "tiny_resnet8", None, "Latent AI LEIP (TVM)"),
    10: ("raspberry_pi_4", "opencv", "fp32", "mobilenet_v2", None, "OpenCV DNN"),
    11: ("raspberry_pi_4", "tflite", "int8", "ssd_mobilenet_v2", None,
         "uint8 quantized TFLite, Python loop; NMS not in the rebuilt model"),
    12: ("raspberry_pi_4", "ncnn", "fp32", "yolov8n", None, "Ultralytics export"),
    13: ("raspberry_pi_4", "onnxruntime", "fp32", "yolov8n", None, "Ultralytics benchmark"),
    14: ("jetson_nano", "tensorrt", "fp16", "alexnet", None, "torch2trt"),
    15: ("jetson_nano", "tensorrt", "fp16", "resnet18", None, "torch2trt"),
    16: ("jetson_nano", "tensorrt", "fp16", "vgg16", None, "torch2trt"),
    17: ("jetson_nano", "torch_eager", "fp16", "resnet18", None, "PyTorch CUDA, model.half()"),
    18: ("jetson_nano", "ncnn_vulkan", "fp16", "mobilenet_v2", None, "ncnn Vulkan GPU"),
    19: ("jetson_nano", "opencv_cuda", "fp32", "resnet50_vd", None,
         "OpenCV DNN CUDA, pre/post-processing included"),
    20: ("jetson_nano", "tf_trt", "fp16", "ssd_mobilenet_v2", None, "TF-TRT"),
    21: ("jetson_nano", "tensorflow", "fp32", "ssd_mobilenet_v2", None, "TensorFlow GPU"),
    22: ("jetson_nano", "tensorrt_app", "fp16", "ssd_mobilenet_v2", None,
         "TensorRT (UFF) application FPS, pre/post-processing included"),
    23: ("jetson_nano", "tensorrt_app", "fp16", "yolov4_tiny", None,
         "TensorRT application FPS, pre/post-processing included"),
    24: ("jetson_nano", "tensorrt_app", "fp16", "yolov3", None,
         "TensorRT application FPS, pre/post-processing included"),
    25: ("mcu", "tflm_reference", "int8", "mcunet_proxyless_w03", None, "TF-Lite Micro"),
    26: ("mcu", "tflite", "int8", "mcunet_proxyless_w03", None, "CMSIS-NN"),
    27: ("mcu", "xcubeai", "int8", "mcunet_proxyless_w03", None, "X-CUBE-AI 7.3"),
    28: ("mcu", "tinyengine", "int8", "mcunet_proxyless_w03", None, "TinyEngine"),
    29: ("mcu", "xcubeai", "int8", None, None, _VWW),
    30: ("mcu", "tinyengine", "int8", None, None, _VWW),
    31: ("mcu", "xcubeai", "int8", "mcunet_in2", None, "X-CUBE-AI 7.3"),
    32: ("mcu", "xcubeai", "int8", "mcunet_in4", None, "X-CUBE-AI 7.3"),
    33: ("mcu", "tflite", "int8", "mobilenet_v1_025_160", 4.0e8,
         "CMSIS-NN (uint8 extension) on a NUCLEO-H743ZI at 400 MHz"),
    34: ("mcu", "xcubeai", "int8", "tiny_resnet8", 2.8e8, "STM32H7A3 at 280 MHz (proxy)"),
    35: ("mcu", "xcubeai", "int8", "tiny_vww_mobilenet", 2.8e8, "STM32H7A3 at 280 MHz (proxy)"),
    36: ("mcu", "xcubeai", "int8", "tiny_ds_cnn", 2.8e8, "STM32H7A3 at 280 MHz (proxy)"),
    37: ("mcu", "xcubeai", "int8", "tiny_fc_autoencoder", 2.8e8, "STM32H7A3 at 280 MHz (proxy)"),
}


def training_rows() -> list[dict[str, str]]:
    with TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def board_samples(target_id: str, *, targets_dir=None) -> tuple[list[dict[str, Any]],
                                                                 list[dict[str, Any]], dict]:
    """(samples, left-out rows, per-class kernel ranges) for one board."""
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict.kernels import features, kernel_ranges, kernels_of
    from edgeprof.profilers.predict.threads import family_info, parse_threads, work_scale
    from edgeprof.targets import get_target_registry

    target = get_target_registry(targets_dir).get(target_id)
    rows = training_rows()
    samples, skipped, ranges = [], [], {}
    handles: dict[str, Any] = {}
    for i, row in enumerate(rows):
        tid, family, precision, model, clock, note = ROWS[i]
        if tid != target_id:
            continue
        if model is None:
            skipped.append({"id": i, "model": row["model"], "reason": note})
            continue
        handle = handles.setdefault(model, resolve_model(f"builtin:{model}"))
        est = estimate_model(handle, target, precision)
        kernels = kernels_of(est, family)
        threads, threads_note = parse_threads(row.get("threads"), family, target)
        serial = float(family_info(family)["serial_share"])
        published = float(row["latency_ms"])
        scale = 1.0
        if clock is not None and target.frequency is not None:
            scale = clock / float(target.frequency.value)
        for c, (lo, hi) in kernel_ranges(kernels).items():
            r = ranges.setdefault(c, [lo, hi])
            ranges[c] = [min(r[0], lo), max(r[1], hi)]
        samples.append({
            "id": i, "model": model, "published_model": row["model"], "family": family,
            "precision": precision, "latency_ms": published * scale,
            "published_latency_ms": published, "clock_scale": scale,
            "framework": row["framework"], "source": row["source"], "note": note,
            "threads": threads, "threads_published": row.get("threads"),
            "threads_note": threads_note, "serial_share": serial,
            "work_scale": work_scale(threads, target, serial),
            "features": features(kernels)})
    return samples, skipped, ranges


def winograd_board(target) -> bool:
    """Whether the board's fit is offered the ``+winograd`` groupings: a GPU board, whose
    runtimes (cuDNN, TensorRT, ncnn-Vulkan) run 3x3 stride-1 convolutions by Winograd."""
    return getattr(target, "kind", "") in ("gpu", "edge_gpu")


def fit_board(target_id: str, *, targets_dir=None) -> dict[str, Any]:
    """A board's rows and the model leave-one-out chooses for them (grouping, shrink, the
    winner's leave-one-out predictions and its own calibrated spread): the first half of
    :func:`build_board`, which the other boards' interval priors read."""
    from edgeprof.profilers.predict.fit import method_sigmas, select_model
    from edgeprof.targets import get_target_registry

    target = get_target_registry(targets_dir).get(target_id)
    samples, skipped, ranges = board_samples(target_id, targets_dir=targets_dir)
    winograd = winograd_board(target)
    grouping, shrink, spreads, loo = select_model(samples, winograd=winograd)
    own = method_sigmas(samples, loo["predicted"], loo["methods"])
    return {"target": target, "samples": samples, "skipped": skipped, "ranges": ranges,
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


def build_board(target_id: str, *, targets_dir=None, fitted: dict[str, Any] | None = None,
                prior_sigma: float | None = None, prior_rows: int = 0
                ) -> tuple[Any, list[dict[str, Any]]]:
    """Fit one board's calibration (with its nested leave-one-out error); returns
    (calibration, left-out rows). ``prior_sigma`` (the other boards' calibrated spread,
    :func:`cross_board_sigma`) is pooled into the calibrated interval spread, in the shipped
    fit and in every nested fold alike."""
    from edgeprof._version import __version__
    from edgeprof.profilers.predict.calibration import Calibration
    from edgeprof.profilers.predict.fit import (PRIOR_SIGMA_WEIGHT, cv_summary, fit,
                                                method_sigmas, nested_leave_one_out)
    from edgeprof.profilers.predict.predictor import fingerprint_of

    f = fitted or fit_board(target_id, targets_dir=targets_dir)
    target, samples, skipped, ranges = f["target"], f["samples"], f["skipped"], f["ranges"]
    grouping, shrink, loo = f["grouping"], f["shrink"], f["loo"]
    params = fit(samples, grouping, shrink=shrink)
    params["grouping_spreads"] = f["spreads"]
    nested = nested_leave_one_out(samples, winograd=f["winograd"], prior_sigma=prior_sigma)
    cv = cv_summary(samples, nested["predicted"], nested["methods"])
    cv["method"] = "nested leave-one-out"
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
    cv.update(nested_coverage(samples, nested))
    for e, choice, sg in zip(cv["errors"], nested["choices"], nested["sigmas"]):
        e["chosen"], e["log_sigma"] = choice, sg
    runtimes = {}
    for key, v in params.pop("factors").items():
        family, precision = key.split("/")
        runtimes[key] = {"family": family, "precision": precision, "version": None,
                         "factor": v["factor"], "n": v["n"],
                         "sources": sorted({s["framework"] for s in samples
                                            if s["family"] == family
                                            and s["precision"] == precision})}
    cal = Calibration(
        name=f"{target_id}--published", target=target_id, fingerprint=fingerprint_of(target),
        runtimes=runtimes, parameters=params, cv=cv, ranges=ranges, samples=samples,
        created_utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        edgeprof_version=__version__,
        note=(f"fitted only to edgeprof/profilers/predict/data/device_measurements_train.csv "
              f"({len(samples)} rows used, {len(skipped)} left out: "
              + "; ".join(f"row {s['id']} {s['reason']}" for s in skipped[:1])
              + (" (and the same for the others)" if len(skipped) > 1 else "")
              + "); runtime versions as published (see samples)"))
    return cal, skipped


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
    for label, keep in (("", lambda m: True), ("_calibrated", lambda m: m == "calibrated"),
                        ("_transfer", lambda m: m != "calibrated")):
        sel = [(inside, w) for m, inside, w in rows if keep(m)]
        out[f"coverage{label}"] = sum(i for i, _ in sel) / len(sel) if sel else None
        out[f"median_width{label}"] = statistics.median(w for _, w in sel) if sel else None
    return out


def interval_coverage(samples: list[dict[str, Any]], predicted: list[float], sigma: float,
                      z: float) -> dict[str, float]:
    """How often value x exp(+-z sigma) held the measured latency (leave-one-out), and the
    interval's width high/low (before the widenings a prediction may add)."""
    import math

    inside = [p * math.exp(-z * sigma) <= s["latency_ms"] <= p * math.exp(z * sigma)
              for s, p in zip(samples, predicted)]
    return {"coverage": sum(inside) / len(inside) if inside else None,
            "median_width": math.exp(2 * z * sigma)}


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
                      "(Raspberry Pi 4, Jetson Nano, STM32H743/H7A3), each at the board's "
                      "big cores (divided by the thread law's work factor of the threads it "
                      "ran)"}


def build_all(write: bool = False, *, targets_dir=None) -> dict[str, tuple[Any, list]]:
    """Every board's calibration; with ``write`` also the package's data files."""
    import json

    from edgeprof.core.io import write_json

    fitted = {t: fit_board(t, targets_dir=targets_dir) for t in BOARDS}
    out = {}
    for t in BOARDS:
        prior, rows = cross_board_sigma(fitted, t)
        out[t] = build_board(t, targets_dir=targets_dir, fitted=fitted[t], prior_sigma=prior,
                             prior_rows=rows)
    if write:
        for t, (cal, _) in out.items():
            cal.save(DATA / "calibrations" / f"{t}--published.json")
        write_json(DATA / "prior.json", prior_from([c for c, _ in out.values()]))
        json.loads((DATA / "prior.json").read_text())
    return out

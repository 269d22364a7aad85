"""Threads and precisions in board predictions (issue 18, items 1-3): the thread count is an
input, precisions transfer through the descriptor's throughput ratio, the order the hardware
implies holds, and each runtime family fuses what it fuses."""

from __future__ import annotations

import pytest

from edgeprof.core.errors import UserError
from edgeprof.profilers.predict import offers, predict_latency
from edgeprof.profilers.predict.calibration import SHIPPED_DIR, calibrations_for
from edgeprof.profilers.predict.kernels import kernels_of
from edgeprof.profilers.predict.predictor import _precedes
from edgeprof.profilers.predict.threads import (default_threads, family_info, parse_threads,
                                                speedup, work_scale)
from edgeprof.targets import get_target


@pytest.fixture(scope="module")
def pi():
    return get_target("raspberry_pi_4")


@pytest.fixture(scope="module")
def nano():
    return get_target("jetson_nano")


def _est(model, target, precision, registry):
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model

    return estimate_model(resolve_model(model, registry=registry), target, precision)


# ---------------------------------------------------------------------------- threads
@pytest.mark.parametrize("text,family,expected", [
    ("multi-threaded (4 cores)", "tflite", 4), ("default (4)", "torch_eager", 4),
    ("4", "ncnn", 4), ("1 (single core)", "xcubeai", 1),
    ("not stated", "tflite", 1),  # TFLite's default: one thread
    ("not stated", "tvm", 4), ("default (OpenCV)", "opencv", 4), ("default", "ncnn", 4),
    ("n/a (GPU)", "tensorrt", None), ("", "tflite", 1)])
def test_published_thread_cells_are_read(pi, text, family, expected):
    assert parse_threads(text, family, pi)[0] == expected


def test_runtime_defaults_have_sources(pi):
    t, why = default_threads("tflite", pi)
    assert t == 1 and "num_threads" in why
    assert default_threads("onnxruntime", pi)[0] == 4
    assert default_threads("tensorrt", pi)[0] is None
    assert "XNNPACK" in family_info("anything_new")["serial_share_source"]


def test_amdahl_work_scale(pi):
    assert work_scale(4, pi, 0.15) == pytest.approx(1.0)
    assert work_scale(None, pi, 0.15) == 1.0  # a GPU
    assert work_scale(1, pi, 0.15) == pytest.approx(speedup(4, 0.15))
    assert work_scale(1, pi, 0.0) == pytest.approx(4.0)
    assert work_scale(2, pi, 0.15) < work_scale(1, pi, 0.15)


def test_fewer_threads_predict_slower_and_say_so(pi, registry, user_dir):
    est = _est("builtin:small_mobilenet", pi, "fp32", registry)
    by = {t: predict_latency(est, pi, "tflite", threads=t) for t in (1, 2, 4)}
    assert by[1].value_ms > by[2].value_ms > by[4].value_ms
    assert by[1].threads == 1 and "as asked" in by[1].threads_note
    default = predict_latency(est, pi, "tflite")
    assert default.threads == 4 and "big cores" in default.threads_note
    assert default.value_ms == pytest.approx(by[4].value_ms)
    assert "thread transfer" in by[2].method and "Amdahl" in by[2].note
    for p in by.values():
        assert p.value_ms >= p.roofline_ms


def test_threads_the_board_does_not_have_are_refused(pi, registry, user_dir):
    est = _est("builtin:small_cnn", pi, "fp32", registry)
    with pytest.raises(UserError, match="4 cores"):
        predict_latency(est, pi, "tflite", threads=8)
    with pytest.raises(UserError, match="positive"):
        predict_latency(est, pi, "tflite", threads=0)


def test_gpu_runtimes_ignore_threads(nano, registry, user_dir):
    est = _est("builtin:small_resnet", nano, "fp16", registry)
    p = predict_latency(est, nano, "tensorrt", threads=2)
    assert p.threads is None and p.value_ms == pytest.approx(
        predict_latency(est, nano, "tensorrt").value_ms)


def test_shipped_samples_carry_their_threads():
    cal = next(c for c in calibrations_for("raspberry_pi_4", [SHIPPED_DIR]))
    by_id = {s["id"]: s for s in cal.samples}
    assert by_id[0]["threads"] == 4  # XNNPACK, 'multi-threaded (4 cores)'
    (ssd,) = [s for s in cal.samples if s["family"] == "tflite"
              and s["published_model"].startswith("SSD MobileNet v2")]
    assert ssd["threads"] == 1  # TFLite, not stated: the interpreter's default
    assert ssd["work_scale"] > 1.5
    assert all("threads_note" in s for s in cal.samples)


# ------------------------------------------------------------------ precision transfer
def test_tensorrt_fp32_is_never_faster_than_fp16_on_the_nano(nano, registry, user_dir):
    """The issue's case: fp16 calibrated, fp32 had come out 2.3x faster (uncalibrated)."""
    for model in ("builtin:small_resnet", "builtin:resnet18", "builtin:small_cnn"):
        fp16 = predict_latency(_est(model, nano, "fp16", registry), nano, "tensorrt")
        fp32 = predict_latency(_est(model, nano, "fp32", registry), nano, "tensorrt")
        assert fp16.provenance == fp32.provenance == "predicted"
        # fp32 has one row now (EfficientFormer-L3, trtexec): its factor is raised to fp16's
        # where fp16's is larger, so fp32 is never the faster
        assert fp16.method == "calibrated" and fp32.method == "calibrated"
        assert fp32.value_ms >= fp16.value_ms


def test_make_demo_line_is_predicted(pi, registry, user_dir):
    """torch_eager on the Pi 4 has int8 rows only: fp32 transfers from them."""
    p = predict_latency(_est("builtin:small_cnn", pi, "fp32", registry), pi, "torch_eager")
    assert p.provenance == "predicted" and p.method.startswith("precision transfer")


@pytest.mark.parametrize("target_id", ["raspberry_pi_4", "jetson_nano", "mcu"])
def test_the_order_the_hardware_implies_holds(target_id, registry, user_dir):
    t = get_target(target_id)
    cal = calibrations_for(target_id, [SHIPPED_DIR])[0]
    families = sorted({e["family"] for e in cal.runtimes.values()})
    precisions = [p for p in ("fp32", "fp16", "int8") if t.peak_macs(p)]
    ests = {p: _est("builtin:small_mobilenet", t, p, registry) for p in precisions}
    for fam in families:
        offered = [p for p in precisions if offers(fam, p)]  # the others are exit 2
        values = {p: predict_latency(ests[p], t, fam, p).value_ms for p in offered}
        for a in offered:
            for b in offered:
                if _precedes(t, a, b):
                    assert values[a] <= values[b] * (1 + 1e-9), (fam, a, b, values)


def test_a_runtime_without_rows_is_estimated_from_the_board(pi, registry, user_dir):
    """The board's shared efficiencies with the runtime's factor on the other boards of the
    kind (OpenVINO has rows on the Raspberry Pi 5 alone): estimated, not predicted, wider
    than the calibrated runtimes' interval."""
    est = _est("builtin:small_cnn", pi, "fp32", registry)
    p = predict_latency(est, pi, "openvino")
    assert p.provenance == "estimated" and p.method == "runtime transfer"
    assert "--measurements" in p.note and p.value_ms >= p.roofline_ms
    assert "openvino's factor on raspberry_pi_5--published" in p.note
    cal = predict_latency(est, pi, "tflite")
    assert p.high_ms / p.low_ms > cal.high_ms / cal.low_ms
    (pi5,) = [c for c in calibrations_for("raspberry_pi_5", [SHIPPED_DIR])
              if c.fingerprint.get("device") in (None, "cpu")]
    moved = calibrations_for("raspberry_pi_4", [SHIPPED_DIR])[0].parameters[
        "transfer_factors"]["openvino/fp32"]
    assert moved["boards"] == ["raspberry_pi_5--published"]
    assert moved["factor"] == pytest.approx(pi5.runtimes["openvino/fp32"]["factor"])


def test_a_board_without_calibration_stays_uncalibrated(registry, user_dir):
    t = get_target("rk3588")
    p = predict_latency(_est("builtin:small_cnn", t, "fp32", registry), t, "tflite")
    assert p.provenance == "uncalibrated" and "--measurements" in p.note


def test_a_gpu_calibration_says_nothing_of_the_cpu(registry, user_dir):
    """ONNX Runtime on the Nano's CPU, which has rows of ncnn and OpenCV only: the CPU's
    calibration with ONNX Runtime's factor on the other CPU boards (the Raspberry Pis), never
    the GPU's calibration; a runtime no CPU board has rows of stays uncalibrated there."""
    from edgeprof.api import on_device

    cpu = on_device(get_target("jetson_nano"), "cpu")
    est = _est("builtin:small_cnn", cpu, "fp32", registry)
    p = predict_latency(est, cpu, "onnxruntime")
    assert p.provenance == "estimated" and p.method == "runtime transfer" and p.threads == 4
    assert "jetson_nano--published-cpu" in p.note and "raspberry_pi_4--published" in p.note
    assert "jetson_nano--published " not in p.note + " "
    assert predict_latency(est, cpu, "armnn").provenance == "uncalibrated"


# ------------------------------------------------------------------------------ fusion
def test_each_family_fuses_what_it_fuses(registry, pi):
    est = _est("builtin:small_resnet", pi, "fp32", registry)
    unfused = {f: sum(not k.fused for k in kernels_of(est, f))
               for f in ("torch_eager", "tflite", "tensorrt")}
    # eager PyTorch runs BN and ReLU as kernels; TFLite folds them; TensorRT also fuses the
    # residual add into the convolution
    assert unfused["torch_eager"] > unfused["tflite"] > unfused["tensorrt"]
    assert sum(not k.fused for k in kernels_of(est)) == unfused["tflite"]


def test_a_precision_the_board_lacks_names_the_fallback(nano, registry, user_dir):
    """int8 on the Nano's Maxwell GPU: no int8 rate; the note said 'ratio int8/fp16 =
    unknown' though the roofline takes the fp32 peak, as estimate says. It is predicted as the
    fp32 it runs (issue 29, finding 8), from the fp16 rows by the peaks' ratio."""
    p = predict_latency(_est("builtin:small_resnet", nano, "int8", registry), nano, "tensorrt")
    fp32 = predict_latency(_est("builtin:small_resnet", nano, "fp32", registry), nano,
                           "tensorrt")
    assert "unknown" not in p.note
    assert "jetson_nano gives no int8 rate (it runs fp32, fp16" in p.note
    assert "executed precision fp32" in p.note and p.executed_precision == "fp32"
    assert p.value_ms == pytest.approx(fp32.value_ms)


def test_default_threads_say_core_for_one(registry, user_dir):
    mcu = get_target("mcu")
    p = predict_latency(_est("builtin:small_cnn", mcu, "int8", registry), mcu, "tflite")
    assert "all of mcu's 1 big core (" in p.note and "1 big cores" not in p.note

"""The predictor: kernel classes, the fit, calibration files, predictions and their labels."""

from __future__ import annotations

import json
import math

import pytest

from edgeprof.core.errors import ConfigError, UserError
from edgeprof.profilers.predict import CalibrationError, load_calibration, predict_latency
from edgeprof.profilers.predict.calibration import SHIPPED_DIR, Calibration, calibrations_for
from edgeprof.profilers.predict.fit import cv_summary, fit, leave_one_out
from edgeprof.profilers.predict.kernels import features, kernels_of
from edgeprof.profilers.predict.predictor import load_prior
from edgeprof.targets import get_target

PI_FILE = SHIPPED_DIR / "raspberry_pi_4--published.json"


@pytest.fixture(scope="module")
def pi():
    return get_target("raspberry_pi_4")


@pytest.fixture(scope="module")
def est_mobilenet(pi, registry):
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model

    return estimate_model(resolve_model("builtin:small_mobilenet", registry=registry), pi, "int8")


@pytest.fixture()
def no_user_dir(tmp_path, monkeypatch):
    d = tmp_path / "user-calibrations"
    d.mkdir()
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(d))
    return d


# ------------------------------------------------------------------------------- zoo
@pytest.mark.parametrize("name,macs", [
    # MLPerf Tiny (Banbury et al. 2021, Table 1): ResNet-8 12.5 M, DS-CNN 2.7 M,
    # MobileNetV1-0.25 VWW 7.5 M, FC autoencoder 0.264 M multiply-accumulates
    ("tiny_resnet8", 12.5e6), ("tiny_ds_cnn", 2.7e6), ("tiny_vww_mobilenet", 7.5e6),
    ("tiny_fc_autoencoder", 0.264e6)])
def test_reference_models_are_builtin_and_match_published_macs(registry, pi, name, macs):
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model

    est = estimate_model(resolve_model(f"builtin:{name}", registry=registry), pi, "fp32")
    assert est.total_macs == pytest.approx(macs, rel=0.03)


# --------------------------------------------------------------------------- kernels
def test_kernel_classes_and_fusion(est_mobilenet):
    ks = kernels_of(est_mobilenet)
    classes = {k.kclass for k in ks if not k.fused}
    assert {"conv", "depthwise", "pointwise", "linear", "pooling"} <= classes
    by_layer = {k.layer: k for k in ks}
    # conv + batch-norm + ReLU6 run as one kernel
    assert by_layer["stem.1"].fused_into == "stem.0"
    assert by_layer["stem.2"].fused_into == "stem.0"
    assert by_layer["blocks.1.block.3"].kclass == "depthwise"
    assert by_layer["blocks.1.block.0"].kclass == "pointwise"
    f = features(ks)
    assert f["n_kernels"] == sum(1 for k in ks if not k.fused) < len(ks)


def test_a_linear_layer_over_many_tokens_is_a_gemm_not_a_weight_stream(pi, registry):
    """A batch-1 classifier reads each weight once (linear); the same layer over 50 tokens
    reuses each weight 50 times, as a 1x1 convolution over 50 pixels does (pointwise): a
    ViT's linear layers ran 4x slower than the streaming class predicted on a Pi 4."""
    import torch

    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model

    for shape, want in (([1, 64], "linear"), ([1, 50, 64], "pointwise")):
        handle = resolve_model(torch.nn.Linear(64, 32), input_shapes=[shape],
                               registry=registry)
        (k,) = kernels_of(estimate_model(handle, pi, "fp32"))
        assert k.kclass == want, shape


# ------------------------------------------------------------------------------- fit
def _synthetic(params, n=14):
    import random

    rng = random.Random(1)
    samples = []
    for i in range(n):
        roof = {"conv": rng.uniform(0.5, 50), "pointwise": rng.uniform(0.1, 10),
                "depthwise": rng.uniform(0.1, 8), "linear": rng.uniform(0, 2),
                "attention": 0.0, "pooling": rng.uniform(0, 0.5), "elementwise": rng.uniform(0, 2)}
        nk = rng.randint(10, 200)
        feats = {"n_kernels": nk, "roofline_ms": roof, "roofline_total_ms": sum(roof.values())}
        y = params["inf"] + params["layer"] * nk + 3.0 * (roof["conv"] + roof["pointwise"]
                                                         + roof["linear"]) \
            + 6.0 * roof["depthwise"] + 2.0 * (roof["pooling"] + roof["elementwise"])
        samples.append({"id": i, "family": "rt", "precision": "fp32", "latency_ms": y,
                        "features": feats})
    return samples


def test_fit_recovers_known_parameters_and_cross_validates():
    samples = _synthetic({"inf": 0.5, "layer": 0.02})
    p = fit(samples, "split")
    theta = p["efficiency_multiplier"]
    assert theta["conv"] == pytest.approx(3.0, rel=0.05)
    assert theta["depthwise"] == pytest.approx(6.0, rel=0.05)
    assert p["per_layer_ms"] == pytest.approx(0.02, rel=0.2)
    cv = cv_summary(samples, leave_one_out(samples, "split"))
    assert cv["n"] == 14 and cv["median_abs_error"] < 0.02 and cv["spearman"] > 0.99


# --------------------------------------------------------------------- calibrations
def test_shipped_board_calibrations_are_fitted_to_the_training_file_only():
    from tools.build_board_calibrations import groups, training_rows

    rows = training_rows()
    assert len(rows) == 241
    shipped = {c.name: c for c in calibrations_for("*", [SHIPPED_DIR])}
    for target, device in groups():
        (cal,) = [c for c in shipped.values() if c.target == target
                  and c.fingerprint.get("device") == device]
        assert cal.cv["method"].startswith("nested")
        assert cal.cv["n"] == len(cal.samples) >= 3
        for s in cal.samples:
            row = rows[s["id"]]
            assert s["source"] == row["source"] and s["published_model"] == row["model"]
            assert s["published_latency_ms"] == float(row["latency_ms"]) > 0
    assert len(shipped) == len(groups())
    prior = load_prior()
    assert prior["n"] >= 150 and 1.0 <= prior["p10_ratio"] <= prior["median_ratio"] \
        <= prior["p90_ratio"]


def test_prediction_with_a_matching_calibration(est_mobilenet, pi, no_user_dir):
    p = predict_latency(est_mobilenet, pi, "tflite", "int8")
    assert p.provenance == "predicted" and p.calibration == "raspberry_pi_4--published"
    assert p.roofline_ms == pytest.approx(est_mobilenet.roofline_latency_ms)
    assert p.roofline_ms <= p.low_ms <= p.value_ms <= p.high_ms
    assert "raspberry_pi_4--published" in p.note


def test_no_calibration_is_the_roofline_with_the_prior_labelled_uncalibrated(
        est_mobilenet, pi, no_user_dir, tmp_path):
    # a folder with no calibration of the Pi (the shipped one would transfer to openvino)
    empty = tmp_path / "none"
    empty.mkdir()
    p = predict_latency(est_mobilenet, pi, "openvino", "int8", dirs=[empty])
    prior = load_prior()
    roof = est_mobilenet.roofline_latency_ms
    assert p.provenance == "uncalibrated" and p.calibration is None
    assert p.value_ms == pytest.approx(roof * prior["median_ratio"])
    assert p.low_ms == pytest.approx(roof * max(1.0, prior["p10_ratio"]))
    assert "uncalibrated" in p.note and "edgeprof calibrate" in p.note


def test_the_prior_is_for_the_big_cores_and_scales_with_the_threads_asked(
        est_mobilenet, pi, no_user_dir, tmp_path):
    """An uncalibrated prediction gave one thread the 4-core figure ("the prior does not
    model threads"). The prior is now each published row at the board's big cores, and a
    prediction for fewer threads scales it by the same Amdahl law as a calibrated one."""
    from edgeprof.profilers.predict.threads import family_info, work_scale

    empty = tmp_path / "none"
    empty.mkdir()
    prior = load_prior()
    roof = est_mobilenet.roofline_latency_ms
    four = predict_latency(est_mobilenet, pi, "openvino", "int8", threads=4, dirs=[empty])
    one = predict_latency(est_mobilenet, pi, "openvino", "int8", threads=1, dirs=[empty])
    w = work_scale(1, pi, float(family_info("openvino")["serial_share"]))
    assert w == pytest.approx(1 / (0.15 + 0.85 / 4))  # the default serial share
    assert four.value_ms == pytest.approx(roof * prior["median_ratio"])
    assert one.value_ms == pytest.approx(four.value_ms * w)
    assert one.high_ms == pytest.approx(roof * prior["p90_ratio"] * w)
    assert one.provenance == four.provenance == "uncalibrated"
    assert any("Amdahl" in n and "x 2.76" in n for n in one.notes)
    assert "x 2.76 for the threads asked" in one.note
    # the prior itself: each row divided by its own thread law's factor
    assert "big cores" in prior["source"]


def _write(dirpath, name, data):
    path = dirpath / name
    path.write_text(json.dumps(data))
    return path


def test_user_calibration_wins_over_the_shipped_one(est_mobilenet, pi, no_user_dir):
    data = json.loads(PI_FILE.read_text())
    data["name"] = "mine"
    data["runtimes"]["tflite/int8"]["factor"] *= 2
    _write(no_user_dir, "raspberry_pi_4--mine.json", data)
    shipped = predict_latency(est_mobilenet, pi, "tflite", "int8", dirs=[SHIPPED_DIR])
    mine = predict_latency(est_mobilenet, pi, "tflite", "int8")
    assert mine.calibration == "mine"
    assert mine.value_ms > shipped.value_ms


def test_never_below_the_roofline(est_mobilenet, pi, tmp_path):
    data = json.loads(PI_FILE.read_text())
    data["parameters"].update(per_inference_ms=0.0, per_layer_ms=0.0)
    data["parameters"]["efficiency_multiplier"] = {c: 1.0 for c in
                                                   data["parameters"]["efficiency_multiplier"]}
    data["runtimes"]["tflite/int8"]["factor"] = 0.05  # a runtime "20x faster than peak"
    _write(tmp_path, "raspberry_pi_4--fast.json", data)
    p = predict_latency(est_mobilenet, pi, "tflite", "int8", dirs=[tmp_path])
    assert p.value_ms == pytest.approx(est_mobilenet.roofline_latency_ms)
    assert p.low_ms == pytest.approx(est_mobilenet.roofline_latency_ms)


@pytest.mark.parametrize("content,words", [
    ("{not json", "cannot read calibration"),
    (json.dumps({"format": "edgeprof-calibration", "format_version": 99}), "format_version 99"),
    (json.dumps({"format": "edgeprof-calibration", "format_version": 1, "name": "x"}),
     "missing"),
])
def test_corrupted_or_incompatible_calibration_is_a_one_line_user_error(
        est_mobilenet, pi, tmp_path, content, words):
    (tmp_path / "raspberry_pi_4--broken.json").write_text(content)
    with pytest.raises(CalibrationError) as e:
        predict_latency(est_mobilenet, pi, "tflite", "int8", dirs=[tmp_path])
    assert isinstance(e.value, ConfigError) and isinstance(e.value, UserError)
    assert e.value.exit_code == 2 and words in str(e.value) and "\n" not in str(e.value)
    assert "raspberry_pi_4--broken.json" in str(e.value)


def test_negative_parameter_is_refused(tmp_path):
    data = json.loads(PI_FILE.read_text())
    data["parameters"]["per_layer_ms"] = -1
    path = _write(tmp_path, "raspberry_pi_4--neg.json", data)
    with pytest.raises(CalibrationError, match="negative"):
        load_calibration(path)


def test_other_device_fingerprint_or_runtime_version_warns_and_is_used(est_mobilenet, pi,
                                                                        tmp_path):
    data = json.loads(PI_FILE.read_text())
    data["fingerprint"]["descriptor_sha256"] = "0" * 64
    data["runtimes"]["tflite/int8"]["version"] = "2.10"
    _write(tmp_path, "raspberry_pi_4--other.json", data)
    p = predict_latency(est_mobilenet, pi, "tflite", "int8", dirs=[tmp_path],
                        runtime_version="2.16")
    assert p.provenance == "predicted"
    codes = {w.code: w.message for w in p.warnings}
    assert "descriptor_sha256" in codes["calibration_device_differs"]
    assert "2.10" in codes["calibration_runtime_differs"] and \
        "2.16" in codes["calibration_runtime_differs"]


def test_layers_outside_the_range_are_named_and_widen_the_interval(est_mobilenet, pi, tmp_path):
    data = json.loads(PI_FILE.read_text())
    full = predict_latency(est_mobilenet, pi, "tflite", "int8", dirs=[tmp_path / "none"] +
                           [SHIPPED_DIR])
    data["ranges"].pop("depthwise")  # as if it had never seen a depthwise kernel
    _write(tmp_path, "raspberry_pi_4--nodw.json", data)
    p = predict_latency(est_mobilenet, pi, "tflite", "int8", dirs=[tmp_path])
    dw = [k.layer for k in kernels_of(est_mobilenet) if k.kclass == "depthwise" and not k.fused]
    assert set(dw) <= set(p.extrapolated_layers) and not full.extrapolated_layers
    assert p.value_ms == pytest.approx(full.value_ms)
    assert math.log(p.high_ms / p.value_ms) > math.log(full.high_ms / full.value_ms)
    assert "outside the calibration's range" in p.note


def test_calibration_round_trip(tmp_path):
    cal = load_calibration(PI_FILE)
    path = cal.save(tmp_path / "raspberry_pi_4--copy.json")
    again = load_calibration(path)
    assert again.to_dict() == cal.to_dict() and isinstance(again, Calibration)


def test_the_work_basis_recovers_per_class_costs_and_is_not_floored_on_the_host():
    """Samples made from known costs (ms per GMAC / per MB per class, overheads): the work
    basis gets them back, predicts below a (measured, hence no-bound) roofline when its
    floor is 'none', and is clamped to it when the floor is 'roofline'."""
    from edgeprof.profilers.predict.fit import base_ms, predict_sample

    truth = {"conv": (20.0, 0.02), "depthwise": (60.0, 0.05), "linear": (5.0, 0.08)}
    samples = []
    for i in range(24):
        cls = list(truth)[i % 3]
        g, mb, n = 0.001 * (1 + i), 0.05 * (1 + (i * 7) % 11), 1 + i % 4
        a, b = truth[cls]
        feats = {"n_kernels": n, "gmacs": {cls: g}, "mbytes": {cls: mb},
                 "roofline_ms": {cls: 1.0}, "roofline_total_ms": 100.0}
        samples.append({"family": "onnxruntime", "precision": "fp32", "features": feats,
                        "latency_ms": 0.01 + 0.003 * n + a * g + b * mb})
    params = fit(samples, basis="work", floor=False)
    assert params["basis"] == "work" and params["floor"] == "none"
    assert params["per_inference_ms"] == pytest.approx(0.01, rel=1e-3)
    assert params["per_layer_ms"] == pytest.approx(0.003, rel=1e-3)
    for cls, (a, b) in truth.items():
        assert params["ms_per_gmac"][cls] == pytest.approx(a, rel=1e-3)
        assert params["ms_per_mb"][cls] == pytest.approx(b, rel=1e-3)
    s = samples[0]
    assert predict_sample(params, s) == pytest.approx(s["latency_ms"], rel=1e-6)
    assert s["latency_ms"] < s["features"]["roofline_total_ms"]
    floored = fit(samples, basis="work", floor=True)
    assert predict_sample(floored, s) == base_ms(floored, s["features"]) == 100.0
    loo = leave_one_out(samples, basis="work", floor=False)
    assert cv_summary(samples, loo)["median_abs_error"] < 1e-3


def test_a_row_nothing_else_predicts_is_a_miss_not_an_infinite_sigma():
    """``calibrate --target host --kernels tiny`` crashed now and then with "Out of range
    float values are not JSON compliant: inf": held out, a kernel whose class no other
    sample ran was predicted 0 ms by the work basis, and its log error was infinite. It is
    now a miss by 100 %, counted and said; the log sigma is over the rows predicted; a fit
    that predicts no row held out is a one-line error."""
    samples = []
    for i, cls in enumerate(("conv", "conv", "conv", "linear")):
        g = 0.001 * (1 + i)
        feats = {"n_kernels": 1, "gmacs": {cls: g}, "mbytes": {cls: 0.0},
                 "roofline_ms": {cls: 1.0}, "roofline_total_ms": 1.0}
        samples.append({"family": "onnxruntime", "precision": "fp32", "features": feats,
                        "latency_ms": 20.0 * g})  # no overheads: the linear row is alone
    loo = leave_one_out(samples, basis="work", floor=False)
    assert loo[3] < 1e-9 and all(p > 1e-3 for p in loo[:3])
    cv = cv_summary(samples, loo)
    assert cv["n_unpredicted"] == 1 and "nothing left to predict" in cv["unpredicted"]
    assert math.isfinite(cv["log_sigma"]) and cv["within_25"] == 0.75
    json.dumps(cv, allow_nan=False)  # what the CLI prints
    with pytest.raises(UserError, match="predicted none of the 2 samples"):
        cv_summary(samples[2:], [0.0, 0.0])


def test_an_unknown_runtime_names_backends_and_families(capsys):
    """A misspelt runtime family (``tinyengin``) was refused with the backends alone listed,
    though ``predict`` takes the families the published rows name as well."""
    from edgeprof.cli.main import main

    assert main(["predict", "builtin:mcunet_in2", "--target", "mcu", "--backend", "tinyengin",
                 "--precision", "int8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "did you mean 'tinyengine'" in err
    assert "xcubeai" in err and "onnxruntime" in err


def test_a_host_prediction_is_not_labelled_gpu(capsys):
    """On this machine a CPU runtime's prediction has no thread count (the runtime's own
    default); the line said "(GPU)"."""
    from edgeprof.cli.main import main

    assert main(["predict", "builtin:small_cnn", "--target", "host", "--backend",
                 "tflite"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "(GPU)" not in first and "(the runtime's default threads)" in first
    assert main(["predict", "builtin:small_cnn", "--target", "jetson_nano", "--backend",
                 "tensorrt", "--precision", "fp16"]) == 0
    assert "(GPU)" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize("target,device,backend,words", [
    ("raspberry_pi_4", None, "tensorrt",
     "raspberry_pi_4 has no GPU with CUDA (its processors: cpu)"),
    ("raspberry_pi_4", None, "ncnn_vulkan", "raspberry_pi_4 has no GPU"),
    ("jetson_nano", "cpu", "tensorrt", "not on jetson_nano's cpu: give --device cuda"),
    ("mcu", None, "opencv_cuda", "mcu has no GPU")])
def test_a_gpu_runtime_on_a_cpu_is_exit_2(capsys, target, device, backend, words):
    """TensorRT on a Raspberry Pi 4 was 'estimated (runtime transfer)' at 2.1 ms, labelled
    (GPU), on a board without one."""
    from edgeprof.cli.main import main

    argv = ["predict", "builtin:small_cnn", "--target", target, "--backend", backend]
    assert main(argv + (["--device", device] if device else [])) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{backend} runs on a GPU" in err and words in err


def test_tensorflow_on_a_cpu_takes_threads(capsys):
    """TensorFlow's family was GPU-only (its one published row ran a Jetson's GPU): on a
    Pi 4, or a Jetson's CPU, its prediction said (GPU) and ignored --threads."""
    from edgeprof.cli.main import main

    assert main(["predict", "builtin:small_cnn", "--target", "raspberry_pi_4", "--backend",
                 "tensorflow", "--threads", "1"]) == 0
    one = capsys.readouterr().out.splitlines()[0]
    assert main(["predict", "builtin:small_cnn", "--target", "raspberry_pi_4", "--backend",
                 "tensorflow"]) == 0
    four = capsys.readouterr().out.splitlines()[0]
    assert "(1 thread)" in one and "(4 threads)" in four and "GPU" not in one + four
    assert main(["predict", "builtin:small_cnn", "--target", "jetson_nano", "--backend",
                 "tensorflow", "--device", "cpu"]) == 0
    assert "(4 threads)" in capsys.readouterr().out.splitlines()[0]
    assert main(["predict", "builtin:small_cnn", "--target", "jetson_nano", "--backend",
                 "tensorflow"]) == 0
    assert "(GPU)" in capsys.readouterr().out.splitlines()[0]

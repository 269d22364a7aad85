"""Which runtime runs where, at which precision (issue 29, findings 6, 7, 8): a runtime is
predicted only on the processors it runs on (data/runtimes.toml), only at the precisions it
offers, and a precision the processor has no rate for is predicted as what it runs."""

from __future__ import annotations

import pytest

import edgeprof

from edgeprof.core.errors import UserError
from edgeprof.targets import get_target


@pytest.fixture(autouse=True)
def _only_shipped(user_dir):
    """Only the shipped calibrations (the conftest's empty user folder)."""


def _predict(*args, **kw):
    from edgeprof.api import predict

    return predict(*args, **kw)


def _cli(capsys, *argv):
    from edgeprof.cli.main import main

    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err.strip()


# ------------------------------------------------------------------ 6: processors are data
@pytest.mark.parametrize("target,backend,precision", [
    ("jetson_nano", "openvino", "fp32"), ("jetson_orin_nano", "tflite", "int8")])
def test_a_cpu_only_runtime_on_a_jetson_defaults_to_its_cpu(capsys, target, backend, precision):
    """predict builtin:small_resnet --target jetson_nano --backend openvino said
    "(GPU): 1.299 ms" (3.918 ms with --device cpu); tflite int8 on the Orin Nano "(GPU)"."""
    p = _predict("builtin:small_resnet", target, backend, precision)
    cpu = _predict("builtin:small_resnet", target, backend, precision, device="cpu")
    assert p.device == "cpu" and p.threads == get_target(target).big_cores
    assert p.value_ms == pytest.approx(cpu.value_ms)
    assert f"{backend}'s processor there" in p.note and "--device cpu" in p.note
    rc, out, _ = _cli(capsys, "predict", "builtin:small_resnet", "--target", target,
                      "--backend", backend, "--precision", precision)
    assert rc == 0 and "(GPU)" not in out.splitlines()[0]


def test_a_cpu_only_runtime_asked_for_the_gpu_is_exit_2(capsys):
    rc, _, err = _cli(capsys, "predict", "builtin:small_cnn", "--target", "jetson_nano",
                      "--backend", "openvino", "--device", "cuda")
    assert rc == 2 and "\n" not in err
    assert "openvino runs on a CPU, not on jetson_nano's cuda" in err and "--device cpu" in err


def test_a_gpu_runtime_keeps_the_gpu_and_the_calibration():
    p = _predict("builtin:small_cnn", "jetson_nano", "tensorrt", "fp16")
    assert p.device == "cuda" and p.provenance == "predicted" and p.threads is None


@pytest.mark.parametrize("target,backend,words", [
    ("raspberry_pi_4", "xcubeai", "xcubeai runs on an MCU, and raspberry_pi_4 has no MCU"),
    ("mcu", "openvino", "openvino runs on a CPU, and mcu has no CPU (its processors: cpu (mcu))"),
    ("jetson_nano", "tinyengine", "jetson_nano has no MCU")])
def test_a_runtime_on_a_board_without_its_processor_is_exit_2(target, backend, words):
    with pytest.raises(UserError, match="edgeprof targets") as e:
        _predict("builtin:small_cnn", target, backend, "int8")
    assert words in str(e.value)


def test_runtimes_on_reads_the_data():
    from edgeprof.profilers.predict import runtimes_on

    mcu = runtimes_on(get_target("mcu"))
    assert {"tflite", "xcubeai", "tinyengine", "tflm_reference"} <= set(mcu)
    assert not {"openvino", "onnxruntime", "tensorrt", "ncnn"} & set(mcu)
    nano = get_target("jetson_nano")
    assert "openvino" in runtimes_on(nano) and "openvino" not in runtimes_on(nano, "cuda")
    assert "tensorrt" in runtimes_on(nano, "cuda") and "tensorrt" not in runtimes_on(nano, "cpu")
    assert "tensorrt" not in runtimes_on(get_target("raspberry_pi_4"))


def test_every_family_says_where_it_runs_with_a_source():
    from edgeprof.profilers.predict.runtimes import family_processors
    from edgeprof.profilers.predict.threads import known_families

    for f in known_families():
        kinds, source = family_processors(f)
        assert kinds and source, f
        # a kind, or kind:api (a GPU with CUDA, one with Vulkan, an NPU behind Core ML)
        assert {k.partition(":")[0] for k in kinds} <= {"cpu", "gpu", "npu", "mcu"}, f


@pytest.mark.parametrize("target,device,backend,runs", [
    ("raspberry_pi_5", "gpu", "onnxruntime", False),  # VideoCore VII: Vulkan, no CUDA
    ("raspberry_pi_5", "gpu", "torch_eager", False),
    ("raspberry_pi_5", "gpu", "ncnn_vulkan", True),
    ("jetson_nano", "cuda", "ncnn_vulkan", True),  # NVIDIA's driver speaks Vulkan too
    ("rk3588", "npu", "tflite", False),  # RKNPU2: RKNN only, no TFLite delegate
    ("rk3588", "npu", "onnxruntime", False),
    ("mobile_npu", "npu", "tflite", True),  # the Core ML delegate
])
def test_a_runtime_needs_its_processors_interface(target, device, backend, runs):
    """A runtime that needs a GPU's or an NPU's interface (CUDA, Vulkan, Core ML) runs only
    on a processor whose drivers offer it: onnxruntime on a Raspberry Pi 5 had been
    predicted on its VideoCore VII (with 12 'threads', its QPUs) once the board listed it."""
    from edgeprof.profilers.predict.runtimes import runs_on

    assert (device in runs_on(get_target(target), backend)) is runs
    if not runs:
        with pytest.raises(UserError):
            edgeprof.predict("builtin:small_cnn", target, backend, device=device)
    default = edgeprof.predict("builtin:small_cnn", target, backend)
    assert (default.device == device) is runs


# ------------------------------------------------------------------ 7: offered precisions
@pytest.mark.parametrize("backend,precision", [
    ("onnxruntime", "bf16"), ("onnxruntime", "int4_weight"), ("torch_compile", "int8"),
    ("tinyengine", "fp32")])
def test_a_precision_the_backend_does_not_offer_is_exit_2(capsys, backend, precision):
    """onnxruntime bf16 was predicted at 3.029 ms, int4_weight "3.262 ms ... predicted
    (calibrated)", torch_compile int8 1.962 ms."""
    from edgeprof.profilers.predict import offers

    target = "mcu" if backend == "tinyengine" else "jetson_nano"
    assert not offers(backend, precision)
    rc, _, err = _cli(capsys, "predict", "builtin:small_cnn", "--target", target,
                      "--backend", backend, "--precision", precision)
    assert rc == 2 and "\n" not in err
    assert f"{backend} does not offer {precision}; it offers" in err


def test_offers_reads_the_backend_class_and_the_data():
    from edgeprof.profilers.predict import offers

    assert offers("onnxruntime", "fp16") and offers("openvino", "int4_weight")
    assert offers("xcubeai", "int8") and not offers("xcubeai", "fp16")


def test_a_profile_row_not_offered_carries_no_board_figure(registry):
    """profile --backend all --target jetson_nano filled onnxruntime's bf16 row with a
    board figure."""
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.report.summary import summarize

    nano = get_target("jetson_nano")
    handle = resolve_model("builtin:small_cnn", registry=registry)
    s = summarize(estimate_model(handle, nano, "bf16"), None, nano, None, None,
                  backend="onnxruntime")
    f = s.figures["latency_ms"]
    assert f.value is None and "not offered: onnxruntime does not offer bf16" in f.reason


def test_the_host_run_of_a_precision_not_offered_reads_not_offered():
    from edgeprof.core.errors import UnsupportedError
    from edgeprof.core.plugins import get_registry

    with pytest.raises(UnsupportedError, match="not offered: onnxruntime does not offer bf16"):
        get_registry().backend("onnxruntime").check_precision("bf16")


# ------------------------------------------------------------- 8: a precision falls back
def test_fp16_on_a_pi_4_is_predicted_as_the_fp32_it_runs(capsys):
    """fp16 on a Pi 4 was 1.697 ms, faster than fp32 (1.863 ms), though its own note said
    the board has no fp16 rate and a runtime falls back."""
    fp32 = _predict("builtin:small_resnet", "raspberry_pi_4", "tflite", "fp32")
    fp16 = _predict("builtin:small_resnet", "raspberry_pi_4", "tflite", "fp16")
    assert fp16.value_ms == pytest.approx(fp32.value_ms)
    assert (fp16.low_ms, fp16.high_ms) == pytest.approx((fp32.low_ms, fp32.high_ms))
    assert fp16.precision == "fp16" and fp16.executed_precision == "fp32"
    assert "executed precision fp32" in fp16.note
    assert fp32.executed_precision == "fp32" and "executed precision" not in fp32.note
    rc, out, _ = _cli(capsys, "predict", "builtin:small_resnet", "--target",
                      "raspberry_pi_4", "--backend", "tflite", "--precision", "fp16", "--json")
    assert rc == 0 and '"executed_precision": "fp32"' in out


# ------------------------------------- issue 30, deliverable 2: every runtime can be named
#: runtime families the published board rows (data/device_measurements_train.csv and its
#: grown successor) name that no edgeprof backend runs, with the precision and a board each
#: predicts on
NAMED = [("paddle", "fp32", "raspberry_pi_4"), ("paddle_lite", "fp32", "raspberry_pi_4"),
         ("armnn", "fp32", "raspberry_pi_4"), ("torchscript", "fp32", "raspberry_pi_5"),
         ("cmsis_nn", "int8", "mcu"), ("microtvm", "int8", "mcu"),
         ("microtvm_cmsis_nn", "int8", "mcu"), ("plumerai", "int8", "mcu"),
         ("bosch_hale", "int8", "mcu"), ("onnc", "int8", "mcu"),
         ("tflm_reference", "int8", "mcu"), ("xcubeai", "int8", "mcu"),
         ("tinyengine", "int8", "mcu"), ("tvm", "fp32", "raspberry_pi_4")]
#: the MCU-only vendor engines and code generators
MCU_ONLY = ("cmsis_nn", "microtvm", "microtvm_cmsis_nn", "plumerai", "bosch_hale", "onnc",
            "tflm_reference", "xcubeai", "tinyengine")


@pytest.mark.parametrize("family", [n for n, _, _ in NAMED])
def test_every_runtime_the_rows_name_is_a_sourced_prediction_only_family(family):
    """mnn, paddle, executorch, armnn, cmsis_nn and the MLPerf Tiny vendor engines (plumerai,
    bosch_hale, onnc) were unknown runtime families: 61 held-out rows got no figure."""
    from edgeprof.profilers.predict.runtimes import (families, family_processors,
                                                     offered_precisions, prediction_only)
    from edgeprof.profilers.predict.threads import runtimes_table

    assert family in families() and prediction_only(family)
    kinds, source = family_processors(family)
    assert kinds and source
    offered, why = offered_precisions(family)
    assert offered and why, family  # a prediction-only family says what it offers
    own = runtimes_table()[family]
    for key in ("processors", "precisions", "default_threads", "default_threads_source",
                "fuse"):
        assert key in own, (family, key)


def test_the_real_backends_are_not_duplicated_as_prediction_only():
    """mnn and executorch have edgeprof backends now: their precisions are the classes'."""
    from edgeprof.profilers.predict.runtimes import prediction_only
    from edgeprof.profilers.predict.threads import runtimes_table

    for family in ("mnn", "executorch", "tflite", "onnxruntime"):
        assert not prediction_only(family) and "precisions" not in runtimes_table()[family], family
    # ncnn runs int8 on a board (its benchmark tables) though the wheel here can't build it:
    # the runtime's precisions are data, a superset of what the backend builds
    from edgeprof.backends.ncnn import NcnnBackend

    assert not prediction_only("ncnn")
    assert set(NcnnBackend.capabilities.precisions) < set(runtimes_table()["ncnn"]["precisions"])


def test_a_prediction_offers_what_the_runtime_runs_on_a_board_not_what_builds_here():
    from edgeprof.profilers.predict.runtimes import check_offered, offers

    assert offers("ncnn", "int8")  # was exit 2: 'ncnn does not offer int8'
    check_offered("ncnn", "int8")


@pytest.mark.parametrize("family", MCU_ONLY)
def test_mcu_vendor_engines_run_on_an_mcu_only(family):
    from edgeprof.profilers.predict.runtimes import family_processors, runs_on

    assert family_processors(family)[0] == ["mcu"]
    assert runs_on(get_target("mcu"), family)
    for board in ("raspberry_pi_4", "jetson_nano"):
        assert not runs_on(get_target(board), family), (family, board)


@pytest.mark.parametrize("family,precision,target", NAMED)
def test_predict_takes_every_named_runtime(capsys, family, precision, target):
    rc, out, err = _cli(capsys, "predict", "builtin:small_cnn", "--target", target,
                        "--backend", family, "--precision", precision)
    assert rc == 0, err
    assert f"with {family} {precision}" in out and " ms " in out

"""The LiteRT (TFLite + XNNPACK) backend and its conversions, on real models.

Conversions go through the user's conversion cache (so a second test run is fast); the
cache-hit test converts into a fresh cache folder, so it sees a real conversion, then a hit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import InputSpecError, ModelError, UnsupportedError, UserError
from edgeprof.core.models import InputSpec, ModelHandle, resolve_model

import ai_edge_litert  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)
import litert_torch  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)

PRECISIONS = ("fp32", "fp16", "int8_dynamic", "int8")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def backend():
    from edgeprof.backends.tflite import TFLiteBackend

    return TFLiteBackend()


@pytest.fixture(scope="module")
def prepared(backend, cnn):
    """Each precision of small_cnn prepared once."""
    out = {}
    for p in PRECISIONS:
        out[p] = backend.prepare(cnn, RunConfig(precision=p, threads=1), cnn.make_inputs(0))
    yield out
    for pm in out.values():
        pm.close()


def _torch_reference(handle, inputs):
    import torch

    with torch.inference_mode():
        return handle.torch_module()(*(torch.from_numpy(a) for a in inputs)).numpy()


# -------------------------------------------------------------------------- precisions
@pytest.mark.parametrize("precision", PRECISIONS)
def test_each_precision_converts_runs_and_agrees_with_torch(prepared, cnn, precision):
    pm = prepared[precision]
    assert pm.extra["converter"].startswith("litert-torch")
    assert Path(pm.extra["tflite_path"]).is_file()
    ag = pm.extra["agreement"]
    assert ag["reference"] == "torch_eager fp32"
    assert ag["passed"], ag
    # independently of the backend's own check: run it again and compare with torch here
    inputs = cnn.make_inputs(3)
    ref = _torch_reference(cnn, inputs)
    from edgeprof.backends.tflite import _quantize

    model_in = pm.inputs[0]
    x = _quantize(inputs[0], {"quantization": _input_quant(pm), "dtype": model_in.dtype}) \
        if model_in.dtype == np.int8 else inputs[0]
    got = pm.to_numpy(pm.run([x]))[0]
    assert got.shape == ref.shape == (1, 10)
    rel = np.abs(got - ref).max() / np.abs(ref).max()
    limit = {"fp32": 1e-5, "fp16": 1e-2, "int8_dynamic": 0.15, "int8": 0.15}[precision]
    assert rel <= limit, (precision, rel)
    assert pm.runtime == "litert" and pm.runtime_version[0].isdigit()
    assert pm.threads == {"intra_op": 1}


def _input_quant(pm):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=pm.extra["tflite_path"])
    return it.get_input_details()[0]["quantization"]


def test_executed_precision_is_recorded_honestly(prepared):
    assert prepared["fp32"].executed_precision == "fp32"
    # fp16 stores fp16 weights; XNNPACK unpacks them and computes in fp32
    assert prepared["fp16"].executed_precision == "fp32"
    assert prepared["fp16"].extra["stored_precision"] == "fp16"
    assert any("fp16 weights" in n for n in prepared["fp16"].notes)
    assert prepared["int8_dynamic"].executed_precision == "int8_dynamic"
    assert prepared["int8"].executed_precision == "int8_static"


def test_xnnpack_is_applied_and_can_be_turned_off(prepared, backend, cnn):
    d = prepared["fp32"].extra["delegation"]
    assert d["xnnpack_applied"] and d["delegate_partitions"] >= 1
    assert d["ops_delegated"] == d["ops_total"] == 8  # small_cnn's 8 ops, all in XNNPACK
    off = backend.prepare(cnn, RunConfig(precision="fp32", threads=1,
                                         options={"xnnpack": False}), cnn.make_inputs(0))
    assert off.extra["delegation"]["xnnpack_applied"] is False
    assert off.extra["delegation"]["ops_delegated"] == 0
    assert off.extra["agreement"]["passed"]


def test_static_int8_quantizes_inputs_in_prepare_not_in_run(prepared):
    pm = prepared["int8"]
    assert pm.inputs[0].dtype == np.int8  # quantized once, in prepare
    raw = pm.run(pm.inputs)
    assert raw[0].dtype == np.int8  # the run returns what the runtime returns
    out = pm.to_numpy(raw)[0]
    assert out.dtype == np.float32 and np.isfinite(out).all()


def test_int8_models_are_smaller_on_disk(prepared):
    size = {p: prepared[p].extra["model_bytes"] for p in PRECISIONS}
    assert size["int8"] < size["fp32"] / 2.5
    assert size["int8_dynamic"] < size["fp32"] / 2.5
    assert size["fp16"] < size["fp32"] * 0.6


def test_second_conversion_is_a_cache_hit(fresh_cache, backend, cnn):
    from edgeprof.backends.tflite_convert import convert

    first = backend.prepare(cnn, RunConfig(precision="fp32", threads=1), cnn.make_inputs(0))
    assert first.extra["cache_hit"] is False and first.extra["convert_time_s"] > 0
    assert Path(first.extra["tflite_path"]).is_relative_to(fresh_cache)
    again = backend.prepare(cnn, RunConfig(precision="fp32", threads=1), cnn.make_inputs(0))
    assert again.extra["cache_hit"] is True and again.extra["convert_time_s"] == 0.0
    assert again.extra["tflite_path"] == first.extra["tflite_path"]
    # a different model (other weights) is a different key
    import torch

    module = cnn.torch_module()
    torch.manual_seed(1)
    other = resolve_model(type(module)(), input_shapes=[[1, 1, 28, 28]])
    assert convert(other, "fp32").path != Path(again.extra["tflite_path"])


# ------------------------------------------------------------------------ .tflite files
def test_a_tflite_file_is_a_model(prepared, backend, tmp_path):
    src = Path(prepared["fp32"].extra["tflite_path"])
    path = tmp_path / "cnn.tflite"
    shutil.copy(src, path)
    handle = resolve_model(str(path))
    assert handle.format == "tflite"
    assert handle.input_specs[0].shape == (1, 1, 28, 28)
    pm = backend.prepare(handle, RunConfig(precision="fp32", threads=1), handle.make_inputs(0))
    out = pm.to_numpy(pm.run(pm.inputs))[0]
    assert out.shape == (1, 10)
    assert pm.extra["agreement"]["reference"] is None and "as given" in pm.extra["agreement"]["reason"]
    assert pm.notes[0] == "route: tflite (as given)"
    with pytest.raises(UnsupportedError, match="fp32 .tflite model"):
        backend.prepare(handle, RunConfig(precision="int8"), handle.make_inputs(0))


def test_a_quantized_tflite_file_takes_float_inputs(prepared, backend, tmp_path):
    path = tmp_path / "cnn_int8.tflite"
    shutil.copy(prepared["int8"].extra["tflite_path"], path)
    handle = resolve_model(str(path))
    assert handle.input_specs[0].dtype == "float32"  # the backend quantizes
    pm = backend.prepare(handle, RunConfig(precision="int8", threads=1), handle.make_inputs(0))
    assert pm.inputs[0].dtype == np.int8
    ref = prepared["int8"].to_numpy(prepared["int8"].run(prepared["int8"].inputs))[0]
    np.testing.assert_array_equal(pm.to_numpy(pm.run(pm.inputs))[0], ref)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
def test_a_corrupted_tflite_file_is_a_one_line_model_error(prepared, backend, tmp_path, damage):
    data = Path(prepared["fp32"].extra["tflite_path"]).read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 3]
    elif damage == "garbage":
        data = b"this is not a model\n" * 10
    else:
        data = data[:4] + b"XXXX" + data[8:]
    path = tmp_path / f"{damage}.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelError) as info:
        resolve_model(str(path))
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and isinstance(info.value, UserError)
    handle = ModelHandle(spec=str(path), name=damage, format="tflite",
                         input_specs=[InputSpec((1, 1, 28, 28))], path=path)
    with pytest.raises(ModelError) as info:
        backend.prepare(handle, RunConfig(), handle.make_inputs(0))
    assert "\n" not in str(info.value)


def test_wrong_input_shape_for_a_fixed_tflite_file(prepared, backend, tmp_path):
    path = tmp_path / "cnn.tflite"
    shutil.copy(prepared["fp32"].extra["tflite_path"], path)
    handle = resolve_model(str(path))
    with pytest.raises(InputSpecError, match="1x1x28x28"):
        backend.prepare(handle, RunConfig(), [np.zeros((1, 1, 32, 32), np.float32)])


# ------------------------------------------------------------------- refusals, failures
@pytest.mark.parametrize("precision", ["bf16", "int4_weight", "int8_weight"])
def test_unsupported_precision(backend, cnn, precision):
    with pytest.raises(UnsupportedError, match=precision) as info:
        backend.prepare(cnn, RunConfig(precision=precision), cnn.make_inputs(0))
    assert info.value.backend == "tflite"


def test_conversion_failure_names_the_op_and_backend(fresh_cache, backend):
    import torch

    class Erfinv(torch.nn.Module):
        def forward(self, x):
            return torch.erfinv(torch.tanh(x))

    handle = resolve_model(Erfinv(), input_shapes=[[1, 8]])
    with pytest.raises(UnsupportedError) as info:
        backend.prepare(handle, RunConfig(), handle.make_inputs(0))
    msg = str(info.value)
    assert "aten.erfinv" in msg and "'tflite'" in msg and "\n" not in msg
    # a failed conversion leaves nothing in the cache
    assert not list(Path(fresh_cache, "conversions", "tflite").glob("*/*.tflite"))


def test_cuda_device_is_unsupported(backend, cnn):
    with pytest.raises(UnsupportedError, match="CPU"):
        backend.prepare(cnn, RunConfig(device="cuda"), cnn.make_inputs(0))


def test_operator_profile_is_honestly_absent(prepared, backend):
    assert backend.operator_profile(prepared["fp32"]) is None


def test_availability_is_cheap_and_true_here():
    from edgeprof.backends.tflite import TFLiteBackend

    assert TFLiteBackend.availability().available


# ------------------------------------------------------------------------------- Keras
def test_keras_model_converts_at_fp32_and_int8(fresh_cache, backend, tmp_path):
    import tensorflow as tf
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((8,)),
                                 tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(4)])
    path = tmp_path / "tiny.keras"
    model.save(path)
    handle = resolve_model(str(path), input_shapes=[[1, 8]])
    assert handle.format == "keras"
    x = handle.make_inputs(0)
    ref = np.asarray(model(x[0]))
    fp32 = backend.prepare(handle, RunConfig(precision="fp32", threads=1), x)
    assert fp32.extra["agreement"]["reference"] == "keras fp32"
    assert fp32.extra["agreement"]["passed"]
    np.testing.assert_allclose(fp32.to_numpy(fp32.run(fp32.inputs))[0], ref, rtol=1e-4,
                               atol=1e-5)
    int8 = backend.prepare(handle, RunConfig(precision="int8", threads=1), x)
    assert int8.inputs[0].dtype == np.int8  # full integer: int8 inputs, quantized in prepare
    assert int8.executed_precision == "int8_static"
    assert int8.extra["agreement"]["passed"], int8.extra["agreement"]
    assert int8.extra["model_bytes"] < fp32.extra["model_bytes"]
    # TFLite's dynamic-range quantization skips weights under 1024 elements: this model's
    # are 256 and 128, so the file stays fp32 and the backend must say so
    dyn = backend.prepare(handle, RunConfig(precision="int8_dynamic", threads=1), x)
    assert dyn.extra["stored_precision"] == "fp32" and dyn.executed_precision == "fp32"
    assert any("asked for int8_dynamic" in n for n in dyn.notes)
    # the estimate reads the converted graph: same columns as for torch, Dense MACs exact
    from edgeprof.core.models import resolve_model as resolve
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.targets import get_target

    auto = resolve(str(path))  # input specs read from the Keras file (batch 1)
    assert auto.input_specs[0].shape == (1, 8)
    est = estimate_model(auto, get_target("raspberry_pi_4"))
    assert est.total_macs == 8 * 32 + 32 * 4
    # Keras initializes biases to zero and TFLiteConverter drops all-zero biases (the ops get
    # bias input -1), so the converted graph the estimate reads holds the weights only
    assert est.parameter_count == 8 * 32 + 32 * 4
    assert any("TFLiteConverter" in n for n in est.notes)

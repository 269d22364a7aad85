"""ONNX Runtime backend: every precision converts, runs and agrees with torch."""

from __future__ import annotations

import json
import platform

import numpy as np
import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import ModelError, UnsupportedError
from edgeprof.core.models import resolve_model

import onnxruntime  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)




@pytest.fixture(scope="module")
def backend(registry):
    return registry.backend("onnxruntime")()


def _prepare(backend, registry, model, precision, **kw):
    handle = resolve_model(model, registry=registry)
    return handle, backend.prepare(handle, RunConfig(precision=precision, threads=1, **kw),
                                   handle.make_inputs(0))


def test_registered_with_capabilities_as_data(registry):
    cls = registry.backend("onnxruntime")
    assert cls.availability().available
    assert set(cls.capabilities.precisions) == {"fp32", "fp16", "int8", "int8_static",
                                                "int8_dynamic"}
    assert "cuda" in cls.capabilities.devices and "onnx" in cls.capabilities.model_formats


@pytest.mark.parametrize("precision,executed", [
    ("fp32", "fp32"), ("int8_dynamic", "int8_dynamic"), ("int8_static", "int8_static"),
    ("int8", "int8_static")])
def test_precisions_run_and_agree_with_torch(backend, registry, precision, executed):
    from edgeprof.backends.common import compare_outputs, torch_outputs

    handle, pm = _prepare(backend, registry, "builtin:small_cnn", precision)
    assert pm.executed_precision == executed
    assert pm.runtime == "onnxruntime" and pm.runtime_version
    assert pm.threads == {"intra_op": 1, "inter_op": 1}
    a = pm.extra["agreement"]
    assert a["reference"] == "torch_eager fp32" and a["passed"], a
    # the prepared callable really computes: fresh inputs, checked independently
    x = handle.make_inputs(7)
    feed = dict(zip(pm.inputs, x))
    got = pm.to_numpy(pm.run(feed))
    assert compare_outputs(torch_outputs(handle.torch_module(), [x])[0], got, precision).passed


def test_fp16_on_this_cpu_reports_what_ran(backend, registry):
    handle, pm = _prepare(backend, registry, "builtin:small_cnn", "fp16")
    assert pm.extra["agreement"]["passed"]
    if platform.machine().lower() in ("x86_64", "amd64"):
        # ORT's x86 CPU provider has no fp16 Conv/Gemm kernel: it casts and runs them in fp32
        assert pm.executed_precision == "fp32"
        assert any("no fp16 kernel" in n and "Conv" in n for n in pm.notes)
    else:
        assert pm.executed_precision in ("fp16", "fp32")


def test_small_resnet_static_int8_and_transformer_fp32(backend, registry):
    _, pm = _prepare(backend, registry, "builtin:small_resnet", "int8_static")
    assert pm.extra["agreement"]["passed"]
    _, pm = _prepare(backend, registry, "builtin:tiny_transformer", "fp32")
    assert pm.inputs["input"].dtype == np.int64
    assert pm.extra["agreement"]["passed"]


def test_quantized_models_are_smaller_and_cached(backend, registry):
    _, fp32 = _prepare(backend, registry, "builtin:small_cnn", "fp32")
    for precision in ("int8_static", "int8_dynamic"):
        _, q = _prepare(backend, registry, "builtin:small_cnn", precision)
        assert q.extra["model_bytes"] < 0.5 * fp32.extra["model_bytes"]
        _, again = _prepare(backend, registry, "builtin:small_cnn", precision)
        assert again.extra["cache_hit"] and again.extra["model_path"] == q.extra["model_path"]


@pytest.mark.parametrize("precision", ["bf16", "int4_weight", "int8_weight"])
def test_unsupported_precision(backend, registry, precision):
    with pytest.raises(UnsupportedError) as e:
        _prepare(backend, registry, "builtin:small_cnn", precision)
    assert precision in str(e.value)


def test_cuda_without_cuda_provider_is_unsupported(backend, registry):
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        _, pm = _prepare(backend, registry, "builtin:small_cnn", "fp32", device="cuda")
        assert pm.device == "cuda"
    else:
        with pytest.raises(UnsupportedError, match="CUDA"):
            _prepare(backend, registry, "builtin:small_cnn", "fp32", device="cuda")


def test_onnx_file_and_truncated_file(backend, registry, tmp_path):
    from edgeprof.backends.onnx_export import export_onnx

    path = export_onnx(resolve_model("builtin:small_cnn", registry=registry)).path
    handle = resolve_model(str(path))
    pm = backend.prepare(handle, RunConfig(precision="int8_dynamic", threads=1),
                         handle.make_inputs(0))
    assert pm.extra["agreement"]["reference"].startswith("onnxruntime fp32")
    assert pm.extra["agreement"]["passed"]
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(path.read_bytes()[:5000])
    handle.path = bad  # a handle resolved earlier, whose file was then damaged
    with pytest.raises(ModelError) as e:
        backend.prepare(handle, RunConfig(threads=1), handle.make_inputs(0))
    assert "\n" not in str(e.value) and "cut.onnx" in str(e.value)


def test_operator_profile_frame_and_chrome_trace(backend, registry, tmp_path):
    _, pm = _prepare(backend, registry, "builtin:small_cnn", "fp32")
    trace = tmp_path / "trace.json"
    df = backend.operator_profile(pm, runs=3, trace_path=str(trace))
    assert len(df) > 0
    assert list(df.columns)[:4] == ["operator", "op_type", "latency_ms", "calls"]
    assert (df["latency_ms"] > 0).all() and (df["calls"] == 1).all()
    assert "Conv" in set(df["op_type"])
    # node names keep the torch module path (ORT names a fused Conv+ReLU after the ReLU)
    assert {"pool1", "classifier"} <= set(df["layer"].dropna())
    events = json.loads(trace.read_text())
    assert isinstance(events, list) and any(e.get("cat") == "Node" for e in events)


def test_static_int8_calibrates_on_real_samples_when_given(backend, registry, tmp_path):
    """Calibration data changes the quantized model (a separate cache entry) and keeps
    agreement on samples like the ones it was calibrated on."""
    import numpy as np

    from edgeprof.optimize.accuracy import load_digits_dataset

    synthetic = resolve_model("builtin:small_cnn", registry=registry)
    data = load_digits_dataset(synthetic)
    path = tmp_path / "calib.npz"
    np.savez(path, x=data.x_train[:64])
    real = resolve_model("builtin:small_cnn", registry=registry, calibration=path)
    cfg = RunConfig(precision="int8_static", threads=1)
    p_syn = backend.prepare(synthetic, cfg, synthetic.make_inputs(0))
    p_real = backend.prepare(real, cfg, [data.x_test[:1]])
    assert p_real.extra["model_path"] != p_syn.extra["model_path"]
    assert p_real.extra["agreement"]["passed"], p_real.extra["agreement"]

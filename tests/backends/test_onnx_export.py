"""torch -> ONNX export: cached, checked against torch, files accepted, errors one line."""

from __future__ import annotations

import os

import numpy as np
import pytest

from edgeprof.core.errors import ModelError, UnsupportedError
from edgeprof.core.models import resolve_model

import onnx  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)



@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    old = os.environ.get("EDGEPROF_CACHE_DIR")
    path = tmp_path_factory.mktemp("edgeprof-cache")
    os.environ["EDGEPROF_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("EDGEPROF_CACHE_DIR", None)
    else:
        os.environ["EDGEPROF_CACHE_DIR"] = old


def test_export_agrees_with_torch_and_second_call_is_a_cache_hit(registry, monkeypatch):
    import onnxruntime as ort
    import torch

    from edgeprof.backends.common import torch_outputs
    from edgeprof.backends.onnx_export import export_onnx

    handle = resolve_model("builtin:small_cnn", registry=registry)
    first = export_onnx(handle)
    assert first.converted and not first.cache_hit and first.path.is_file()
    assert first.exporter == "torchscript" and first.key["torch"] == torch.__version__
    x = handle.make_inputs(3)
    out = ort.InferenceSession(str(first.path)).run(None, {"input": x[0]})
    ref = torch_outputs(handle.torch_module(), [x])[0]
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-4, atol=1e-5)

    def no_export(*a, **k):
        raise AssertionError("re-exported although the conversion is cached")

    monkeypatch.setattr(torch.onnx, "export", no_export)
    second = export_onnx(resolve_model("builtin:small_cnn", registry=registry))
    assert second.cache_hit and second.path == first.path


def test_changed_weights_are_a_new_conversion(registry):
    import torch

    from edgeprof.backends.onnx_export import export_onnx

    handle = resolve_model("builtin:small_cnn", registry=registry)
    base = export_onnx(handle)
    module = resolve_model("builtin:small_cnn", registry=registry).torch_module()
    with torch.no_grad():
        module.conv1.bias.add_(1.0)
    changed = export_onnx(resolve_model(module, input_shapes=[[1, 1, 28, 28]]))
    assert changed.path != base.path and not changed.cache_hit


def test_int64_token_transformer_exports(registry):

    from edgeprof.backends.onnx_export import export_onnx

    handle = resolve_model("builtin:tiny_transformer", registry=registry)
    exp = export_onnx(handle)
    model = onnx.load(str(exp.path))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    # grad mode on during export: no fused fast-path op leaked into the graph
    assert not any(n.domain not in ("", "ai.onnx") for n in model.graph.node)


def test_onnx_file_is_used_as_given(registry):
    from edgeprof.backends.onnx_export import export_onnx

    path = export_onnx(resolve_model("builtin:small_cnn", registry=registry)).path
    handle = resolve_model(str(path))
    assert handle.format == "onnx" and handle.input_specs[0].shape == (1, 1, 28, 28)
    got = export_onnx(handle)
    assert got.path == path and not got.converted


@pytest.mark.parametrize("content", [b"", b"\x08\x07\x12\x05garbage-not-onnx" * 3, "truncate"])
def test_corrupted_onnx_is_a_one_line_model_error(registry, tmp_path, content):
    from edgeprof.backends.onnx_export import export_onnx, load_onnx

    bad = tmp_path / "bad.onnx"
    if content == "truncate":
        good = export_onnx(resolve_model("builtin:small_cnn", registry=registry)).path
        data = good.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
    else:
        bad.write_bytes(content)
    with pytest.raises(ModelError) as e:
        load_onnx(bad)
    assert "\n" not in str(e.value) and "bad.onnx" in str(e.value)
    with pytest.raises(ModelError):
        resolve_model(str(bad))  # input specs are read from the file


def test_unexportable_op_names_the_op_and_backend():
    import torch

    from edgeprof.backends.onnx_export import export_onnx

    @torch.library.custom_op("edgeprof_test::mystery", mutates_args=(),
                             schema="(Tensor x) -> Tensor")
    def mystery(x):
        return x.clone() * 2

    @mystery.register_fake
    def _(x):
        return torch.empty_like(x)

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.ops.edgeprof_test.mystery(x) + 1

    handle = resolve_model(Net(), input_shapes=[[1, 4]])
    with pytest.raises(UnsupportedError) as e:
        export_onnx(handle, backend="onnxruntime")
    msg = str(e.value)
    assert "mystery" in msg and "onnxruntime" in msg and "\n" not in msg


def test_module_path():
    from edgeprof.backends.onnx_export import module_path

    assert module_path("/encoder/layers.0/self_attn/MatMul_1") == "encoder.layers.0.self_attn"
    assert module_path("InsertedPrecisionFreeCast_/relu1/Relu_output_0") == "relu1"
    assert module_path("/Add") is None and module_path("node_Conv_0") is None

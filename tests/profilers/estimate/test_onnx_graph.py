"""The ONNX graph walk: closed-form MACs, parameters counted once, lifetimes, input specs."""

from __future__ import annotations


import pytest

from edgeprof.core.errors import InputSpecError
from edgeprof.core.models import resolve_model

import onnx  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)




def _onnx_handle(registry, name):
    from edgeprof.backends.onnx_export import export_onnx

    torch_handle = resolve_model(f"builtin:{name}", registry=registry)
    return torch_handle, resolve_model(str(export_onnx(torch_handle).path))


def _torch_macs(module, inputs):
    """Closed-form MACs from the torch modules' real output shapes (forward hooks)."""
    import torch

    total = []

    def hook(m, args, out):
        if isinstance(m, torch.nn.Conv2d):
            total.append(out.numel() * (m.in_channels // m.groups) * m.kernel_size[0]
                         * m.kernel_size[1])
        elif isinstance(m, torch.nn.Linear):
            total.append(out.numel() * m.in_features)

    hs = [m.register_forward_hook(hook) for m in module.modules()]
    with torch.no_grad():
        module(*[torch.from_numpy(a) for a in inputs])
    for h in hs:
        h.remove()
    return sum(total)


def test_small_cnn_closed_form(registry):
    from edgeprof.profilers.estimate import onnx_graph

    torch_handle, handle = _onnx_handle(registry, "small_cnn")
    walk = onnx_graph.walk(handle)
    rows = {layer.name: layer for layer in walk.layers}
    assert rows["/conv1/Conv"].macs == 28 * 28 * 16 * 9 * 1
    assert rows["/conv2/Conv"].macs == 14 * 14 * 32 * 9 * 16
    assert rows["/classifier/Gemm"].macs == 32 * 7 * 7 * 10
    assert rows["/pool1/MaxPool"].other_ops == 16 * 14 * 14 * 4
    assert rows["/relu1/Relu"].other_ops == 16 * 28 * 28
    assert rows["/conv1/Conv"].output_shape == (1, 16, 28, 28)
    assert rows["/conv2/Conv"].input_elements == 16 * 14 * 14
    params = sum(p.numel() for p in torch_handle.torch_module().parameters())
    assert sum(layer.parameter_count for layer in walk.layers) == params
    assert rows["/classifier/Gemm"].parameter_count == 32 * 7 * 7 * 10 + 10
    assert "/Flatten" not in rows  # a view: no row
    assert walk.peak_live_elements == 2 * 16 * 28 * 28
    assert walk.input_elements == 28 * 28


def test_depthwise_convs_match_torch(registry):
    from edgeprof.profilers.estimate import onnx_graph

    torch_handle, handle = _onnx_handle(registry, "small_mobilenet")
    walk = onnx_graph.walk(handle)
    expected = _torch_macs(torch_handle.torch_module(), torch_handle.make_inputs(0))
    assert sum(layer.macs for layer in walk.layers) == expected
    depthwise = [layer for layer in walk.layers
                 if layer.op_type == "Conv" and layer.macs == layer.output_elements * 9]
    assert len(depthwise) == 6  # one 3x3 depthwise conv per inverted-residual block


def test_attention_matmuls(registry):
    from edgeprof.profilers.estimate import onnx_graph

    _, handle = _onnx_handle(registry, "tiny_transformer")
    assert handle.input_specs[0].dtype == "int64"
    rows = {layer.name: layer for layer in onnx_graph.walk(handle).layers}
    # scores = Q K^T per head: 4 heads x 32 x 32 outputs, K = 16; then scores x V
    assert rows["/encoder/layers.0/self_attn/MatMul_1"].macs == 4 * 32 * 32 * 16
    assert rows["/encoder/layers.0/self_attn/MatMul_2"].macs == 4 * 32 * 16 * 32
    assert rows["/encoder/layers.0/linear1/MatMul"].macs == 32 * 64 * 256
    assert rows["/embed/Gather"].parameter_count == 1000 * 64


def test_input_specs_and_dynamic_dims(registry, tmp_path):

    from edgeprof.profilers.estimate import onnx_graph

    _, handle = _onnx_handle(registry, "small_cnn")
    specs = onnx_graph.input_specs(handle.path)
    assert [(s.name, s.shape, s.dtype) for s in specs] == [("input", (1, 1, 28, 28), "float32")]
    model = onnx.load(str(handle.path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    dyn = tmp_path / "dyn.onnx"
    onnx.save(model, str(dyn))
    with pytest.raises(InputSpecError, match="--input-shape") as e:
        onnx_graph.input_specs(dyn)
    assert "batch" in str(e.value)
    fixed = resolve_model(str(dyn), input_shapes=[[2, 1, 28, 28]])
    walk = onnx_graph.walk(fixed)
    assert {layer.name: layer.macs for layer in walk.layers}["/conv1/Conv"] == 2 * 28 * 28 * 16 * 9


def test_one_reader_of_the_declared_inputs(registry, tmp_path):
    """The graph inputs of an ONNX file were read twice (core/models._onnx_declared and
    onnx_graph.input_specs, issue 31): one reader here, which both the input specs and the
    declaration a loaded handle carries come from."""
    import edgeprof.core.models as models
    from edgeprof.core.models import DeclaredInput
    from edgeprof.profilers.estimate import onnx_graph

    assert not hasattr(models, "_onnx_declared") and "onnx" not in models._DECLARED_READERS
    _, handle = _onnx_handle(registry, "small_cnn")
    model = onnx.load(str(handle.path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    dyn = tmp_path / "dyn.onnx"
    onnx.save(model, str(dyn))
    assert onnx_graph.declared_inputs(dyn) == [DeclaredInput("input", (None, 1, 28, 28),
                                                             ("float32",))]
    assert resolve_model(str(dyn), input_shapes=[[3, 1, 28, 28]]).declared_inputs == \
        (DeclaredInput("input", (None, 1, 28, 28), ("float32",)),)

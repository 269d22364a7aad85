"""Parameter counts: all of a model's parameters, the forward's separately, and folded
batch-norm said where a graph format hides it."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from edgeprof.core.models import resolve_model
from edgeprof.profilers.estimate.analytic import estimate_model
from edgeprof.targets.schema import target_from_dict


def q(value, unit):
    return {"value": value, "unit": unit, "source": "test figure"}


def target():
    return target_from_dict({
        "name": "Test device", "kind": "edge_cpu", "strategy_class": "cpu", "processor": "test",
        "supported_precisions": ["fp32"], "preferred_backends": ["torch_eager"],
        "compute": {"cores": q(4, "count"), "peak": {"fp32": q(1e10, "MAC/s")}},
        "memory": {"ram": q(4e9, "B"), "bandwidth": q(4e9, "B/s")},
        "power": {"typical": q(5.0, "W")},
        "strategy": {"quantization_bits": 8, "pruning_type": "structured", "layout": "NHWC",
                     "precision": "fp32", "reason": "test"},
    }, target_id="testdev", path=Path("testdev.toml"))


class WithAuxHead(nn.Module):
    """Like Inception-v3: an auxiliary classifier that runs only in training."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.aux = nn.Linear(8 * 8 * 8, 10)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        out = self.fc(y.mean(dim=(2, 3)))
        if self.training:
            return out, self.aux(torch.flatten(y, 1))
        return out


def test_parameter_count_is_every_parameter_and_the_forward_is_separate():
    model = WithAuxHead()
    total = sum(p.numel() for p in model.parameters())
    aux = sum(p.numel() for p in model.aux.parameters())
    est = estimate_model(resolve_model(model, input_shapes=[[1, 3, 8, 8]]), target(), "fp32")
    assert est.parameter_count == total  # 224 + 5130 + 90, as torchinfo counts
    assert est.forward_parameter_count == total - aux
    assert sum(r.parameter_count for r in est.layers) == total - aux
    assert est.parameter_bytes == total * 4
    assert est.to_dict()["forward_parameter_count"] == total - aux
    assert any("forward_parameter_count" in n for n in est.notes)


def test_counts_agree_without_a_note_when_everything_runs():
    est = estimate_model(resolve_model("builtin:small_cnn"), target(), "fp32")
    assert est.parameter_count == est.forward_parameter_count
    assert not any("forward_parameter_count" in n for n in est.notes)


def test_folded_batchnorm_is_said_for_an_onnx_graph(registry):
    from edgeprof.backends.onnx_export import export_onnx

    torch_handle = resolve_model("builtin:small_resnet", registry=registry)
    onnx_handle = resolve_model(str(export_onnx(torch_handle).path))
    in_torch = estimate_model(torch_handle, target(), "fp32")
    in_onnx = estimate_model(onnx_handle, target(), "fp32")
    assert not any("batch-norm" in n for n in in_torch.notes)
    assert any("folded" in n and "batch-norm" in n for n in in_onnx.notes)
    assert in_onnx.parameter_count < in_torch.parameter_count


def test_no_batchnorm_note_for_a_graph_that_never_had_one(registry):
    """A self-exported Conv/ReLU/Pool/Linear .onnx (small_cnn has no batch-norm) was told a
    batch-norm following a convolution had been folded: the note is for a graph that shows
    a folded batch-norm, and only for it."""
    from edgeprof.backends.onnx_export import export_onnx

    handle = resolve_model("builtin:small_cnn", registry=registry)
    onnx_handle = resolve_model(str(export_onnx(handle).path))
    est = estimate_model(onnx_handle, target(), "fp32")
    assert {r.op_type for r in est.layers} >= {"Conv", "Relu", "MaxPool", "Gemm"}
    assert not any("batch-norm" in n for n in est.notes), est.notes
    assert est.parameter_count == estimate_model(handle, target(), "fp32").parameter_count


def test_a_tflite_graph_says_a_folded_batchnorm_only_where_its_weights_show_one(registry,
                                                                                tmp_path):
    import litert_torch

    def tflite_of(spec):
        handle = resolve_model(spec, registry=registry)
        sample = tuple(torch.from_numpy(a) for a in handle.make_inputs(0))
        path = tmp_path / f"{spec.split(':')[1]}.tflite"
        litert_torch.convert(handle.torch_module().eval(), sample).export(str(path))
        return estimate_model(resolve_model(str(path)), target(), "fp32")

    with_bn, without = tflite_of("builtin:small_resnet"), tflite_of("builtin:small_cnn")
    assert any("folded" in n and "batch-norm" in n for n in with_bn.notes)
    assert not any("batch-norm" in n for n in without.notes)

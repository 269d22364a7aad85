"""The PyTorch eager backend: precisions, thread settings, notes, operator profile."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgeprof.backends.common import torch_to_numpy as _to_numpy
from edgeprof.backends.torch_eager import TorchEagerBackend
from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UnsupportedError
from edgeprof.core.models import resolve_model
from edgeprof.backends.common import compare_outputs


def prepare(model: str, precision: str, threads: int = 1):
    handle = resolve_model(model)
    inputs = handle.make_inputs(0)
    return handle, TorchEagerBackend().prepare(handle, RunConfig(precision=precision,
                                                                 threads=threads), inputs)


@pytest.mark.parametrize("model", ["builtin:mlp", "builtin:tiny_transformer", "builtin:small_cnn"])
@pytest.mark.parametrize("precision", ["bf16", "fp16", "int8_dynamic"])
def test_precisions_run_and_agree_with_fp32(model, precision):
    _, ref = prepare(model, "fp32")
    _, got = prepare(model, precision)
    a = compare_outputs(_to_numpy(ref.run(ref.inputs)), _to_numpy(got.run(got.inputs)), precision)
    assert a.passed, a
    assert got.executed_precision == precision
    assert got.threads == {"intra_op": 1, "inter_op": torch.get_num_interop_threads()}


def test_int8_on_a_conv_net_says_convolutions_stay_fp32():
    _, p = prepare("builtin:small_cnn", "int8")
    assert p.executed_precision == "int8_dynamic"
    assert any("convolutions ran in fp32" in n for n in p.notes)


def test_int8_transformer_runs_with_the_attention_fast_path_off():
    _, p = prepare("builtin:tiny_transformer", "int8_dynamic")
    assert p.run(p.inputs).shape == (1, 10)
    assert torch.backends.mha.get_fastpath_enabled()  # restored after the call
    assert any("fast path" in n for n in p.notes)


def test_bf16_weights_and_inputs_are_bf16():
    _, p = prepare("builtin:mlp", "bf16")
    module = p.extra["module"]
    assert all(t.dtype == torch.bfloat16 for t in module.parameters())
    assert p.inputs[0].dtype == torch.bfloat16


def test_unsupported_precision_and_format():
    with pytest.raises(UnsupportedError, match="int4_weight"):
        prepare("builtin:mlp", "int4_weight")
    handle = resolve_model("builtin:mlp")
    handle.format = "openvino"  # no converter leaves OpenVINO IR
    with pytest.raises(UnsupportedError, match="missing edge is openvino -> torch"):
        TorchEagerBackend().prepare(handle, RunConfig(), handle.make_inputs())


def test_operator_profile_rows_are_the_estimate_layers(tmp_path):
    _, p = prepare("builtin:small_cnn", "fp32")
    frame = TorchEagerBackend().operator_profile(p, runs=3, trace_path=str(tmp_path / "t.json"))
    assert set(frame["layer"]) == {"conv1", "relu1", "pool1", "conv2", "relu2", "pool2",
                                   "classifier"}
    assert (frame["latency_ms"] > 0).all() and np.allclose(frame["calls"], 1.0)
    assert (tmp_path / "t.json").stat().st_size > 0

"""The .tflite graph walk: MACs, parameters, lifetimes, input specs."""

from __future__ import annotations

import pytest

from edgeprof.core.errors import ModelError
from edgeprof.core.models import resolve_model

import ai_edge_litert  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)
import litert_torch  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)


@pytest.fixture(scope="module")
def tflite_paths():
    """small_cnn converted at fp32, fp16 and int8 (through the conversion cache)."""
    from edgeprof.backends.tflite_convert import convert

    handle = resolve_model("builtin:small_cnn")
    return {p: convert(handle, p).path for p in ("fp32", "fp16", "int8")}, handle


# closed forms of the seeds' SmallCNN
CONV1 = 28 * 28 * 16 * 9 * 1
CONV2 = 14 * 14 * 32 * 9 * 16
FC = 32 * 7 * 7 * 10


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_small_cnn_macs_match_the_closed_form(tflite_paths, precision):
    from edgeprof.profilers.estimate.tflite_graph import walk

    paths, handle = tflite_paths
    w = walk(resolve_model(str(paths[precision])))
    macs = {l.name: l.macs for l in w.layers if l.macs}
    assert macs == {"conv1": CONV1, "conv2": CONV2, "classifier": FC}
    assert sum(l.macs for l in w.layers) == CONV1 + CONV2 + FC
    by_name = {l.name: l for l in w.layers if l.macs}
    # litert-torch lowers a 1-input-channel conv to a depthwise conv: same MACs
    assert by_name["conv1"].op_type in ("CONV_2D", "DEPTHWISE_CONV_2D")
    assert by_name["conv2"].op_type == "CONV_2D"
    assert by_name["classifier"].op_type == "FULLY_CONNECTED"
    assert by_name["conv2"].output_elements == 14 * 14 * 32
    assert by_name["conv2"].input_elements == 14 * 14 * 16


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_parameters_match_torch_counted_once(tflite_paths, precision):
    from edgeprof.profilers.estimate.tflite_graph import walk

    paths, handle = tflite_paths
    torch_params = sum(p.numel() for p in handle.torch_module().parameters())
    w = walk(str(paths[precision]))
    assert torch_params == 20490
    assert sum(l.parameter_count for l in w.layers) == torch_params
    assert w.input_elements == 28 * 28


def test_other_ops_and_peak_from_lifetimes(tflite_paths):
    from edgeprof.profilers.estimate.tflite_graph import walk

    w = walk(str(tflite_paths[0]["fp32"]))
    pools = [l for l in w.layers if l.op_type == "MAX_POOL_2D"]
    # pooling: one op per element of the largest tensor (its input), as the torch walker
    assert [l.other_ops for l in pools] == [28 * 28 * 16, 14 * 14 * 32]
    by_name = {l.name: l for l in w.layers}
    # conv: bias addition + the fused ReLU, one op per output element each
    assert by_name["conv2"].other_ops == 2 * 14 * 14 * 32
    assert by_name["classifier"].other_ops == 10  # bias only
    assert all(l.other_ops == 0 for l in w.layers if l.op_type in ("RESHAPE", "TRANSPOSE"))
    # conv1 output (28x28x16) and pool1 output (14x14x16) are alive together at pool1
    assert w.peak_live_elements == 28 * 28 * 16 + 14 * 14 * 16


def test_input_specs(tflite_paths):
    from edgeprof.profilers.estimate.tflite_graph import input_specs

    (spec,) = input_specs(tflite_paths[0]["fp32"])
    assert spec.shape == (1, 1, 28, 28) and spec.dtype == "float32" and spec.name
    (q,) = input_specs(tflite_paths[0]["int8"])
    assert q.shape == (1, 1, 28, 28) and q.dtype == "float32"  # quantized: fed as float


def test_layer_names_follow_torch_module_paths():
    from edgeprof.profilers.estimate.tflite_graph import layer_name

    assert layer_name("pkg.SmallCNN/torch.nn.modules.conv.Conv2d_conv1;") == "conv1"
    assert layer_name("m.Net/torch.nn.modules.container.Sequential_stem/"
                      "torch.nn.modules.conv.Conv2d_0;x") == "stem.0"
    assert layer_name("sequential/dense/MatMul") == "sequential/dense/MatMul"
    assert layer_name("a.<locals>.Wrapper;1") == ""


def test_not_a_tflite_file_is_a_model_error(tmp_path):
    from edgeprof.profilers.estimate.tflite_graph import walk

    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelError, match="not a .tflite model"):
        walk(str(bad))
    with pytest.raises(ModelError, match="does not exist"):
        walk(str(tmp_path / "missing.tflite"))

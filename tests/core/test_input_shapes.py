"""Input shapes are checked against what a model file declares, before anything is
estimated or run (issue 21): a wrong rank, a shape against a fixed input, a batch a
fixed-batch model can't take, a dtype it doesn't accept -> InputSpecError (exit 2), one
line naming the input and the shape it accepts. Dynamic dims ('batch', -1) accept anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.core.errors import InputSpecError
from edgeprof.core.models import DeclaredInput, check_declared_inputs, resolve_model


def make_tiny_onnx(path: Path, *, batch: int | str = 1, hw: int = 96) -> Path:
    """A small CNN (conv 3->8, relu, global pool, linear 8->10) fixed at ``batch`` x3x hw x hw
    (``batch`` a string: a dynamic batch dimension of that name)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype("float32"), "w"),
             numpy_helper.from_array(np.zeros(8, "float32"), "b"),
             numpy_helper.from_array(rng.standard_normal((10, 8)).astype("float32"), "fw"),
             numpy_helper.from_array(np.zeros(10, "float32"), "fb")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "tinynet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_onnx(tmp_path_factory.mktemp("m") / "tinynet.onnx")


@pytest.fixture(scope="module")
def tiny_dynamic(tmp_path_factory) -> Path:
    return make_tiny_onnx(tmp_path_factory.mktemp("m") / "tinydyn.onnx", batch="batch")


def test_the_declared_inputs_of_an_onnx_file_are_read(tiny, tiny_dynamic):
    h = resolve_model(str(tiny))
    assert h.declared_inputs == (DeclaredInput("x", (1, 3, 96, 96), ("float32",)),)
    d = resolve_model(str(tiny_dynamic), input_shapes=[(4, 3, 96, 96)])
    assert d.declared_inputs[0].shape == (None, 3, 96, 96)
    assert d.input_specs[0].shape == (4, 3, 96, 96)  # a dynamic batch takes any batch


def test_a_wrong_rank_names_the_input_and_the_shape_it_accepts(tiny, tiny_dynamic):
    for path in (tiny, tiny_dynamic):
        with pytest.raises(InputSpecError) as e:
            resolve_model(str(path), input_shapes=[(1, 3, 224)])
        msg = str(e.value)
        assert "\n" not in msg and "'x'" in msg and "3x96x96" in msg and "1x3x224" in msg
        assert "4 dimensions" in msg


def test_a_shape_against_a_fixed_input_is_refused_before_the_estimate(tiny, tiny_dynamic):
    with pytest.raises(InputSpecError, match=r"'x'.*1x3x96x96.*1x3x224x224"):
        resolve_model(str(tiny), input_shapes=[(1, 3, 224, 224)])
    with pytest.raises(InputSpecError, match=r"Nx3x96x96"):
        resolve_model(str(tiny_dynamic), input_shapes=[(2, 3, 224, 224)])


def test_a_batch_a_fixed_batch_model_cannot_take_is_refused(tiny, tiny_dynamic):
    with pytest.raises(InputSpecError, match=r"'x'.*fixed at batch 1.*1x3x96x96.*batch 4"):
        resolve_model(str(tiny), batch_size=4)
    with pytest.raises(InputSpecError, match="fixed at batch 1"):
        resolve_model(str(tiny), input_shapes=[(2, 3, 96, 96)])
    assert resolve_model(str(tiny_dynamic), input_shapes=[(1, 3, 96, 96)],
                         batch_size=8).batch_size == 8


def test_a_dtype_the_model_does_not_accept_is_refused(tiny):
    with pytest.raises(InputSpecError, match=r"'x'.*float32.*int64"):
        resolve_model(str(tiny), input_shapes=[(1, 3, 96, 96)], input_dtypes=["int64"])


def test_the_number_of_inputs_must_match(tiny):
    with pytest.raises(InputSpecError, match=r"takes 1 input.*2"):
        resolve_model(str(tiny), input_shapes=[(1, 3, 96, 96), (1, 3, 96, 96)])


def test_check_declared_inputs_is_a_no_op_without_a_declaration():
    h = resolve_model("builtin:small_cnn", batch_size=3)
    assert h.declared_inputs is None
    check_declared_inputs(h)  # torch modules say nothing: the tracer checks them


def test_a_tflite_model_with_a_fixed_shape_is_checked(tmp_path):
    pytest.importorskip("ai_edge_litert")
    from edgeprof.backends.tflite_convert import convert

    h = resolve_model("builtin:small_cnn")
    path = convert(h, "fp32").path
    t = resolve_model(str(path))
    assert t.declared_inputs is not None and len(t.declared_inputs[0].shape) == 4
    with pytest.raises(InputSpecError, match="dimensions"):
        resolve_model(str(path), input_shapes=[(1, 28, 28)])

"""MNN backend: .onnx (and torch through ONNX) converts with MNNConvert, runs and agrees
with the source; precisions say what ran; MNN's stdout chatter stays off stdout."""

from __future__ import annotations

import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UnsupportedError
from edgeprof.core.models import resolve_model

import MNN  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)


@pytest.fixture(scope="module")
def backend(registry):
    return registry.backend("mnn")()


def _prepare(backend, handle, precision="fp32", **kw):
    return backend.prepare(handle, RunConfig(precision=precision, threads=1, **kw),
                           handle.make_inputs(0))


def test_registered_as_a_plugin_with_capabilities_as_data(registry):
    cls = registry.backend("mnn")
    assert cls.availability().available
    assert cls.capabilities.precisions == ("fp32", "fp16", "int8_weight")
    assert cls.install_hint == "pip install 'edgeprof[mnn]'"
    assert [c.name for c in cls.route("onnx").steps] == ["MNNConvert"]
    assert [c.dst for c in cls.route("torch").steps] == ["onnx", "mnn"]


@pytest.mark.parametrize("precision,executed", [("fp32", "fp32"),
                                                ("int8_weight", "int8_weight")])
def test_precisions_convert_run_and_agree_with_torch(backend, cnn, precision, executed):
    pm = _prepare(backend, cnn, precision)
    assert pm.runtime == "mnn" and pm.executed_precision == executed
    assert pm.threads == {"intra_op": 1}
    a = pm.extra["agreement"]
    assert a["reference"] == "torch_eager fp32" and a["passed"], a
    assert pm.extra["route_text"].endswith(f"mnn (MNNConvert {pm.runtime_version})")


def test_fp16_weights_say_what_ran(backend, cnn):
    from edgeprof.backends.native_runtimes import cpu_has_fp16_arithmetic

    fp32 = _prepare(backend, cnn, "fp32")
    pm = _prepare(backend, cnn, "fp16")
    assert pm.extra["agreement"]["passed"], pm.extra["agreement"]
    assert pm.extra["model_bytes"] < fp32.extra["model_bytes"]  # fp16 weights on disk
    if not cpu_has_fp16_arithmetic():
        assert pm.executed_precision == "fp32"
        assert any("no fp16 arithmetic" in n for n in pm.notes)


def test_onnx_file_is_a_model(backend, registry, cnn, tmp_path):
    from edgeprof.backends.onnx_export import torch_to_onnx

    torch_to_onnx(cnn, tmp_path, "fp32")
    handle = resolve_model(str(tmp_path / "model.onnx"), registry=registry)
    pm = _prepare(backend, handle)
    assert pm.extra["route_text"].startswith("onnx -> mnn")
    assert pm.extra["agreement"]["passed"]


@pytest.mark.parametrize("precision", ["int8", "int8_static"])
def test_calibrated_int8_is_refused_with_the_reason(backend, cnn, precision):
    with pytest.raises(UnsupportedError) as e:
        _prepare(backend, cnn, precision)
    assert "\n" not in str(e.value) and "mnnquant" in str(e.value)


def test_a_conversion_failure_is_one_line(backend, registry, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("NoSuchOp", ["x"], ["y"], domain="edgeprof.test")
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("edgeprof.test", 1)])
    onnx.save(model, str(tmp_path / "bad.onnx"))
    handle = resolve_model(str(tmp_path / "bad.onnx"), registry=registry)
    with pytest.raises(UnsupportedError) as e:
        backend.build(handle, "fp32")
    assert "\n" not in str(e.value) and "MNNConvert" in str(e.value), str(e.value)


def test_mnn_output_stays_off_stdout(backend, cnn, capfd):
    capfd.readouterr()
    _prepare(backend, cnn, "fp16")
    out, _ = capfd.readouterr()
    assert out == "", out


def test_mnn_import_chatter_stays_off_a_piped_stdout(tmp_path):
    """C stdio buffers stdout into a pipe; what MNN prints at import must not reach it."""
    import subprocess
    import sys

    code = ("from edgeprof.backends.native_runtimes import stdout_to_stderr\n"
            "with stdout_to_stderr():\n    import MNN\nprint('{}')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "{}\n", r.stdout


def test_no_module_is_loaded_without_a_runtime_manager_after_ours(backend, cnn, monkeypatch):
    """A module loaded without a runtime manager after ours was created slowed ours down by
    1.5x (small_resnet, 1 thread: 0.72 ms against MNN's own 0.47 ms,
    benchmarks/bare_loop_native.py): the input/output names are read first."""
    import MNN.nn as nn

    calls = []
    real_rt, real_load = nn.create_runtime_manager, nn.load_module_from_file

    def rt(*a, **k):
        calls.append("runtime_manager")
        return real_rt(*a, **k)

    def load(*a, **k):
        calls.append("load with rt" if k.get("runtime_manager") is not None else "load")
        return real_load(*a, **k)

    monkeypatch.setattr(nn, "create_runtime_manager", rt)
    monkeypatch.setattr(nn, "load_module_from_file", load)
    _prepare(backend, cnn, "fp32")
    first_rt = calls.index("runtime_manager")
    assert "load" not in calls[first_rt:], calls


def test_token_ids_are_fed_as_integers_and_the_transformer_agrees(backend):
    """builtin:tiny_transformer (int64 token ids): fed as floats, the embedding's gather
    failed MNN's shape check, MNN returned no output and prepare died on an IndexError
    ('failed' in benchmarks/backend_matrix.py)."""
    handle = resolve_model("builtin:tiny_transformer")
    pm = _prepare(backend, handle)
    a = pm.extra["agreement"]
    assert a["passed"], a
    out = pm.to_numpy(pm.run(pm.inputs))
    assert len(out) == 1 and out[0].shape == (1, 10)

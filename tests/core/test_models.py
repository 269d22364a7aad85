"""Model specs: builtin, module:factory, file.py:factory, files, nn.Module objects."""

from __future__ import annotations

import textwrap

import pytest

from edgeprof.core.errors import InputSpecError, ModelError, UnknownNameError
from edgeprof.core.models import parse_dtype, parse_shape, resolve_model


def test_parse_shape_forms():
    assert parse_shape("1x3x224x224") == (1, 3, 224, 224)
    assert parse_shape("2,16") == (2, 16)
    for bad in ("", "1xax3", "0x3", "-1x3"):
        with pytest.raises(InputSpecError):
            parse_shape(bad)


def test_parse_dtype_aliases():
    assert parse_dtype("fp32") == "float32"
    assert parse_dtype("long") == "int64"
    with pytest.raises(InputSpecError):
        parse_dtype("complex128")


def test_builtin_models_resolve_with_batch_first_shapes():
    h = resolve_model("builtin:small_cnn")
    assert h.format == "torch" and h.input_specs[0].shape == (1, 1, 28, 28)
    t = resolve_model("builtin:tiny_transformer")
    assert t.input_specs[0].dtype == "int64"
    x = t.make_inputs()[0]
    assert x.dtype.name == "int64" and x.min() >= 0


def test_batch_size_overrides_first_dimension():
    h = resolve_model("builtin:small_resnet", batch_size=4)
    assert h.input_specs[0].shape == (4, 3, 32, 32)
    with pytest.raises(InputSpecError):
        resolve_model("builtin:small_resnet", batch_size=0)


def test_unknown_builtin_lists_known():
    with pytest.raises(UnknownNameError, match="small_cnn"):
        resolve_model("builtin:small_cn")


def test_module_factory_from_file_and_missing_shape(tmp_path):
    f = tmp_path / "nets.py"
    f.write_text(textwrap.dedent("""
        import torch
        def make():
            return torch.nn.Linear(8, 4)
        def make_with_shape():
            return torch.nn.Linear(8, 4), [[2, 8]]
        def broken():
            raise RuntimeError("boom")
    """))
    with pytest.raises(InputSpecError, match="--input-shape"):
        resolve_model(f"{f}:make")
    h = resolve_model(f"{f}:make", input_shapes=[(3, 8)])
    assert h.input_specs[0].shape == (3, 8)
    assert resolve_model(f"{f}:make_with_shape").input_specs[0].shape == (2, 8)
    with pytest.raises(ModelError, match="boom"):
        resolve_model(f"{f}:broken")
    with pytest.raises(ModelError, match="no callable"):
        resolve_model(f"{f}:nothing")


@pytest.mark.parametrize("spec, match", [
    ("no_such_pkg_xyz.models:make", "cannot import"),
    ("does/not/exist.onnx", "does not exist"),
    ("plain_word", "not found"),
])
def test_bad_specs_are_one_line_model_errors(spec, match):
    with pytest.raises(ModelError, match=match) as e:
        resolve_model(spec)
    assert "\n" not in str(e.value)


def test_module_object_needs_shapes():
    import torch

    net = torch.nn.Linear(4, 2)
    with pytest.raises(InputSpecError):
        resolve_model(net)
    h = resolve_model(net, input_shapes=[(1, 4)])
    assert h.torch_module() is net


def test_several_inputs_and_dtypes():
    import torch

    class Two(torch.nn.Module):
        def forward(self, a, b):
            return a.float().sum() + b

    h = resolve_model(Two(), input_shapes=[(1, 4), (1, 4)], input_dtypes=["int64", "float32"])
    xs = h.make_inputs()
    assert [x.dtype.name for x in xs] == ["int64", "float32"]
    with pytest.raises(InputSpecError):
        resolve_model(Two(), input_shapes=[(1, 4), (1, 4)], input_dtypes=["int64"] * 3)


def test_calibration_data_is_validated_and_served(tmp_path):
    import numpy as np

    from edgeprof.core.cache import model_fingerprint

    good = tmp_path / "calib.npz"
    x = np.random.default_rng(0).standard_normal((10, 1, 28, 28)).astype("float32")
    np.savez(good, x=x)
    h = resolve_model("builtin:small_cnn", calibration=good, batch_size=2)
    sets = h.calibration_inputs(3, seed=0)
    assert [s[0].shape for s in sets] == [(2, 1, 28, 28)] * 3
    np.testing.assert_array_equal(sets[0][0], x[[0, 1]])
    assert model_fingerprint(h) != model_fingerprint(resolve_model("builtin:small_cnn",
                                                                   batch_size=2))
    synthetic = resolve_model("builtin:small_cnn").calibration_inputs(2, seed=5)
    np.testing.assert_array_equal(synthetic[1][0], resolve_model("builtin:small_cnn").make_inputs(6)[0])

    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, x=np.zeros((4, 3, 32, 32), "float32"))
    with pytest.raises(InputSpecError, match="shaped"):
        resolve_model("builtin:small_cnn", calibration=wrong)
    nox = tmp_path / "nox.npz"
    np.savez(nox, y=np.zeros(3))
    with pytest.raises(InputSpecError, match="no array 'x'"):
        resolve_model("builtin:small_cnn", calibration=nox)
    with pytest.raises(InputSpecError, match="does not exist"):
        resolve_model("builtin:small_cnn", calibration=tmp_path / "missing.npz")


# ---------------------------------------------------------------- formats through the hooks
MYFMT_PLUGIN = """
    from edgeprof import hookimpl
    from edgeprof.core.models import InputSpec, load_model_file
    from edgeprof.core.results import GraphLayer, GraphWalk

    def read_inputs(path):  # a .myfmt file is one line: its input width
        return [InputSpec((1, int(path.read_text().split()[0])))]

    @hookimpl
    def edgeprof_load_model(spec, input_shapes, input_dtypes):
        return load_model_file(spec, (".myfmt",), "myfmt", read_inputs, input_shapes,
                               input_dtypes)

    @hookimpl
    def edgeprof_read_graph(model):
        if model.format != "myfmt":
            return None
        n = model.input_specs[0].shape[1]
        layer = GraphLayer("dense", "MyDense", (1, n), n, n, n * n, n * n, 0)
        return GraphWalk([layer], peak_live_elements=2 * n, input_elements=n)
"""


def _registry_with(tmp_path, name: str, body: str):
    from edgeprof.core.plugins import PluginManager

    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    toml = tmp_path / "plugins.toml"
    toml.write_text(f'[plugins]\nmodules = ["{name}.py"]\n')
    return PluginManager(toml, use_env=False, entry_points=False).build_registry()


def test_a_plugin_adds_a_model_format_through_the_loader_hook(tmp_path):
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.targets import get_target

    reg = _registry_with(tmp_path, "myfmt", MYFMT_PLUGIN)
    model = tmp_path / "x.myfmt"
    model.write_text("16\n")
    h = resolve_model(str(model), registry=reg)
    assert (h.format, h.name, h.path) == ("myfmt", "x", model)
    assert h.input_specs[0].shape == (1, 16)
    assert resolve_model(str(model), registry=reg, batch_size=4).input_specs[0].shape == (4, 16)
    est = estimate_model(h, get_target("raspberry_pi_4"), "int8", registry=reg)
    assert [r.layer for r in est.layers] == ["dense"] and est.total_macs == 256
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.myfmt"), registry=reg)
    with pytest.raises(ModelError, match="not a model format"):  # without the plugin
        resolve_model(str(model))


def test_a_later_plugin_is_asked_before_the_builtin_loader(tmp_path):
    reg = _registry_with(tmp_path, "onnx_mine", """
        from edgeprof import hookimpl
        from edgeprof.core.models import InputSpec, load_model_file

        @hookimpl
        def edgeprof_load_model(spec, input_shapes, input_dtypes):
            return load_model_file(spec, (".onnx",), "onnx", lambda p: [InputSpec((1, 7))],
                                   input_shapes, input_dtypes)
    """)
    fake = tmp_path / "not_really.onnx"  # the built-in loader could not read this
    fake.write_bytes(b"\0")
    assert resolve_model(str(fake), registry=reg).input_specs[0].shape == (1, 7)


def test_builtin_file_loaders_read_input_specs(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    h = resolve_model(str(path))
    assert (h.format, h.input_specs[0].shape, h.input_specs[0].name) == ("onnx", (2, 5), "x")
    # its batch is fixed at 2: ONNX Runtime would refuse 3x5, so it is refused up front
    with pytest.raises(InputSpecError, match="fixed at batch 2"):
        resolve_model(str(path), input_shapes=[(3, 5)])
    assert resolve_model(str(path), input_shapes=[(2, 5)]).input_specs[0].shape == (2, 5)
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"")
    with pytest.raises(InputSpecError, match="--input-shape"):
        resolve_model(str(saved))
    assert resolve_model(str(saved), input_shapes=[(1, 3)]).format == "saved_model"
    other = tmp_path / "weights.bin"
    other.write_bytes(b"")
    with pytest.raises(ModelError, match="not a model format"):
        resolve_model(str(other))


def test_inputs_larger_than_the_available_memory_are_refused_with_the_bytes_needed():
    """Before anything is allocated (this used to be an internal MemoryError)."""
    with pytest.raises(InputSpecError, match=r"need 396 PB of memory") as err:
        resolve_model("builtin:small_cnn", input_shapes=[(99999, 99999, 99999, 99)])
    assert "99999x99999x99999x99 float32" in str(err.value) and "available" in str(err.value)
    assert resolve_model("builtin:small_cnn", input_shapes=[(1, 1, 28, 28)]).input_specs


def test_a_module_is_resolved_in_eval_mode_whatever_its_mode():
    import torch

    from edgeprof.core.models import resolve_model

    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    net[1].train()  # one submodule in training mode is enough to need eval()
    net[0].eval()
    h = resolve_model(net, input_shapes=[(1, 4)])
    assert not any(m.training for m in h.torch_module().modules())
    h = resolve_model(net.eval(), input_shapes=[(1, 4)])  # already in eval: unchanged
    assert not any(m.training for m in h.torch_module().modules())

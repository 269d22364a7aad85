"""ncnn backend: torch and .onnx models convert through pnnx, run, and agree with torch;
what the wheel cannot do (int8, Vulkan here, per-layer times) is refused or said."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UnsupportedError
from edgeprof.core.models import resolve_model

import ncnn  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)


@pytest.fixture(scope="module")
def backend(registry):
    return registry.backend("ncnn")()


def _prepare(backend, handle, precision="fp32", **kw):
    return backend.prepare(handle, RunConfig(precision=precision, threads=1, **kw),
                           handle.make_inputs(0))


def test_registered_as_a_plugin_with_capabilities_as_data(registry):
    cls = registry.backend("ncnn")
    assert cls.availability().available
    assert cls.capabilities.precisions == ("fp32", "fp16")
    assert cls.capabilities.model_formats == ("ncnn",)
    assert cls.install_hint == "pip install 'edgeprof[ncnn]'"
    # both conversion routes are graph edges
    assert [c.name for c in cls.route("torch").steps] == ["pnnx"]
    assert [(c.src, c.dst) for c in cls.route("onnx").steps] == [("onnx", "ncnn")]


@pytest.mark.parametrize("model", ["builtin:small_cnn", "builtin:small_mobilenet"])
def test_fp32_converts_runs_and_agrees_with_torch(backend, registry, model):
    from edgeprof.backends.common import compare_outputs, torch_to_numpy

    handle = resolve_model(model, registry=registry)
    pm = _prepare(backend, handle)
    assert pm.runtime == "ncnn" and pm.executed_precision == "fp32"
    assert pm.threads == {"intra_op": 1}
    a = pm.extra["agreement"]
    assert a["reference"] == "torch_eager fp32" and a["passed"], a
    assert pm.extra["route_text"].startswith("torch -> ncnn (pnnx")
    # the prepared callable computes: fresh inputs, checked independently
    import torch

    x = handle.make_inputs(7)
    got = pm.to_numpy(pm.run(pm.feed(x)))
    ref = torch_to_numpy(handle.torch_module()(*[torch.from_numpy(a) for a in x]))
    assert compare_outputs(ref, got, "fp32").passed


def test_fp16_says_what_ran(backend, cnn):
    from edgeprof.backends.native_runtimes import cpu_has_fp16_arithmetic

    pm = _prepare(backend, cnn, "fp16")
    assert pm.extra["agreement"]["passed"] and pm.extra["fp16_storage"]
    if cpu_has_fp16_arithmetic():
        assert pm.executed_precision == "fp16"
    else:
        assert pm.executed_precision == "fp32"
        assert any("no fp16 arithmetic" in n for n in pm.notes)


def test_onnx_file_is_a_model(backend, registry, cnn, tmp_path):
    from edgeprof.backends.onnx_export import torch_to_onnx

    torch_to_onnx(cnn, tmp_path, "fp32")
    handle = resolve_model(str(tmp_path / "model.onnx"), registry=registry)
    pm = _prepare(backend, handle)
    assert pm.extra["route_text"].startswith("onnx -> ncnn (pnnx")
    assert pm.extra["agreement"]["passed"]


@pytest.mark.parametrize("precision", ["int8", "int8_static"])
def test_int8_is_refused_with_the_reason_and_the_command(backend, cnn, precision):
    with pytest.raises(UnsupportedError) as e:
        _prepare(backend, cnn, precision)
    msg = str(e.value)
    assert "\n" not in msg and "does not offer" in msg
    assert "ncnn2table" in msg and "ncnn2int8" in msg


def test_batch_above_one_is_refused_before_converting(backend, cnn):
    with pytest.raises(UnsupportedError, match="one sample per inference"):
        _prepare(backend, cnn.with_batch(2))


def test_an_operator_ncnn_has_no_layer_for_is_named(backend, registry, tmp_path, monkeypatch):
    (tmp_path / "ncnn_bad_op.py").write_text(textwrap.dedent("""
        import torch
        class Odd(torch.nn.Module):
            def forward(self, x):
                return torch.linalg.det(x.reshape(1, 4, 4)).reshape(1, 1)
        def odd():
            return Odd().eval(), [[1, 16]]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ncnn_bad_op", None)
    handle = resolve_model("ncnn_bad_op:odd", registry=registry)
    with pytest.raises(UnsupportedError) as e:
        _prepare(backend, handle)
    msg = str(e.value)
    assert "\n" not in msg and "pnnx" in msg and ("linalg" in msg or "det" in msg), msg


def test_unknown_layers_are_read_from_the_param_file(tmp_path):
    from edgeprof.backends.ncnn import unknown_layers

    (tmp_path / "m.param").write_text("7767517\n2 2\nInput in0 0 1 in0\n"
                                      "torch.linalg.det det_0 1 1 in0 out0\n")
    assert unknown_layers(tmp_path / "m.param") == ["torch.linalg.det"]


def test_no_per_layer_times_and_it_says_so(backend, cnn):
    pm = _prepare(backend, cnn)
    assert backend.operator_profile(pm) is None
    assert any("NCNN_BENCHMARK" in n for n in pm.notes)
    assert isinstance(pm.to_numpy(pm.run(pm.inputs))[0], np.ndarray)


def test_vulkan_without_a_vulkan_device_is_refused_with_the_reason(backend, cnn, monkeypatch):
    import edgeprof.backends.ncnn as mod

    monkeypatch.setattr(mod, "_vulkan_devices", lambda: 0)
    with pytest.raises(UnsupportedError, match="no Vulkan device"):
        _prepare(backend, cnn, device="vulkan")


def test_cli_device_vulkan_reaches_ncnn_and_gets_its_reason(capsys):
    """--device vulkan passes the CLI's device check, so ncnn itself says why it cannot run
    (no Vulkan GPU here): one line, no traceback, and the run's row carries the reason."""
    from edgeprof.cli.main import main

    from edgeprof.backends.ncnn import _vulkan_devices

    if _vulkan_devices() > 0:  # pragma: no cover - a machine with a Vulkan GPU
        pytest.skip("this machine has a Vulkan device")
    code = main(["profile", "builtin:small_cnn", "--backend", "ncnn", "--device", "vulkan",
                 "--runs", "3", "--min-time", "0.01"])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code in (2, 3), text
    assert "device must be" not in text and "no Vulkan device" in text, text
    assert "Traceback" not in text


@pytest.mark.parametrize("device", ["vulkan", "vulkan:0", "vulkan:1"])
def test_vulkan_devices_are_names_a_run_may_take(device):
    import re

    from edgeprof.core.backend import DEVICE_PATTERN

    assert re.fullmatch(DEVICE_PATTERN, device)
    assert not re.fullmatch(DEVICE_PATTERN, "vulkan:")

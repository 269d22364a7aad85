"""torch.compile backend: one real compile (slow), the rest refused before compiling."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UnknownNameError, UnsupportedError
from edgeprof.core.models import InputSpec, ModelHandle

import torch


@pytest.fixture(scope="module")
def backend():
    from edgeprof.backends.torch_compile import TorchCompileBackend

    return TorchCompileBackend()


def test_compile_fp32_default_agrees_with_eager_and_reports_compile_time(backend, cnn):
    inputs = cnn.make_inputs(0)
    pm = backend.prepare(cnn, RunConfig(precision="fp32", threads=1), inputs)
    assert pm.extra["mode"] == "default" and pm.extra["compiler_backend"] == "inductor"
    compile_s = pm.extra["compile_time_s"]
    assert compile_s > 0 and pm.load_time_s >= compile_s
    # the first call compiled; a steady call is far cheaper than the compile
    assert pm.extra["second_call_s"] < compile_s
    assert pm.extra["agreement"]["passed"] and pm.extra["agreement"]["reference"] == \
        "torch_eager fp32"
    with torch.inference_mode():
        ref = cnn.torch_module()(*(torch.from_numpy(a) for a in inputs)).numpy()
    got = pm.to_numpy(pm.run(pm.inputs))[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    assert pm.executed_precision == "fp32" and pm.runtime_version == torch.__version__
    assert pm.threads["intra_op"] == 1


def test_unknown_mode_is_refused_before_compiling(backend, cnn):
    with pytest.raises(UnknownNameError, match="max-autotune"):
        backend.prepare(cnn, RunConfig(options={"mode": "max-autotun"}), cnn.make_inputs(0))


def test_unsupported_precision_and_format(backend, cnn, tmp_path):
    with pytest.raises(UnsupportedError, match="int8"):
        backend.prepare(cnn, RunConfig(precision="int8"), cnn.make_inputs(0))
    # no converter leaves OpenVINO IR: the reason names the missing edge
    handle = ModelHandle(spec="m.xml", name="m", format="openvino",
                         input_specs=[InputSpec((1, 4))], path=tmp_path / "m.xml")
    with pytest.raises(UnsupportedError, match="missing edge is openvino -> torch"):
        backend.prepare(handle, RunConfig(), handle.make_inputs(0))


def test_availability_needs_a_cpp_compiler(backend, monkeypatch):
    from edgeprof.backends import torch_compile

    assert backend.availability().available
    monkeypatch.setattr(torch_compile.shutil, "which", lambda name: None)
    a = backend.availability()
    assert not a.available and "C++ compiler" in a.reason

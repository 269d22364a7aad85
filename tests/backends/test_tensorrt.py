"""The TensorRT plugin: registered like a user's plugin, unavailable without a GPU (with the
reason and the fix), and failing cleanly where the GPU is claimed but the provider is not."""

from __future__ import annotations

import pytest

import edgeprof.backends.tensorrt as trt
from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import BackendUnavailableError, UnsupportedError
from edgeprof.core.models import resolve_model


def test_registered_through_plugins_toml(registry):
    entry = registry.backends["tensorrt"]
    assert entry.plugin == "edgeprof.backends.tensorrt"
    assert entry.cls.capabilities.devices == ("cuda",)


def test_unavailable_without_a_gpu_says_why_and_how(monkeypatch):
    monkeypatch.setattr(trt, "nvidia_gpu_present", lambda: (False, "no NVIDIA GPU found"))
    a = trt.TensorRTBackend.availability()
    assert not a.available and "NVIDIA GPU" in a.reason and "onnxruntime-gpu" in a.hint
    with pytest.raises(BackendUnavailableError, match="tensorrt"):
        trt.TensorRTBackend().prepare(resolve_model("builtin:small_cnn"),
                                      RunConfig(device="cuda"), [])


def test_gpu_without_the_tensorrt_provider_is_a_clear_refusal(monkeypatch):
    import onnxruntime as ort

    monkeypatch.setattr(trt, "nvidia_gpu_present", lambda: (True, ""))
    a = trt.TensorRTBackend.availability()
    if trt.TRT_PROVIDER not in ort.get_available_providers():
        assert not a.available and trt.TRT_PROVIDER in a.reason
    # pretend the provider exists: the session cannot use it, and prepare says so
    real = ort.get_available_providers
    monkeypatch.setattr(ort, "get_available_providers",
                        lambda: [trt.TRT_PROVIDER, *real()])
    handle = resolve_model("builtin:small_cnn")
    with pytest.raises(UnsupportedError):
        trt.TensorRTBackend().prepare(handle, RunConfig(precision="fp16", device="cuda"),
                                      handle.make_inputs())


def test_onnxruntime_takes_an_explicit_provider_list(registry):
    backend = registry.backend("onnxruntime")()
    handle = resolve_model("builtin:small_cnn")
    p = backend.prepare(handle, RunConfig(options={"providers": ["CPUExecutionProvider"]},
                                          threads=1), handle.make_inputs())
    assert p.extra["providers"] == ["CPUExecutionProvider"] and p.device == "cpu"

"""The CUDA paths: torch eager, torch.compile and the transformers generative backend with
``--device cuda``. Everywhere: a CUDA request on a machine without a GPU is a one-line
``unsupported``. Where torch sees a GPU (never in CI, which has none; run on the device
machine): the outputs agree with the CPU's and the timing waits for the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UnsupportedError

import torch

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (CI has none)")
no_cuda = pytest.mark.skipif(CUDA, reason="this machine has a CUDA GPU")


def _cpu_reference(handle, inputs):
    with torch.inference_mode():
        return handle.torch_module()(*(torch.from_numpy(a) for a in inputs)).numpy()


@no_cuda
@pytest.mark.parametrize("name", ["torch_eager", "torch_compile"])
def test_cuda_without_a_gpu_is_unsupported_before_any_work(cnn, name):
    from edgeprof.core.plugins import get_registry

    backend = get_registry().backend(name)()
    with pytest.raises(UnsupportedError, match="torch sees no CUDA device"):
        backend.prepare(cnn, RunConfig(device="cuda"), cnn.make_inputs(0))


@no_cuda
def test_transformers_on_cuda_without_a_gpu_is_unsupported(tmp_path):
    from edgeprof.backends.hf_folder import write_random_hf_folder
    from edgeprof.backends.transformers_llm import TransformersBackend
    from edgeprof.core.llm import LLMModel

    from tests.backends.test_transformers_llm import TINY

    folder = write_random_hf_folder(TINY, tmp_path / "m")
    model = LLMModel(TINY, "hf_folder", str(folder), path=folder, random_weights=True)
    b = TransformersBackend()
    art = b.build_llm(model, "fp32", tmp_path / "work")
    with pytest.raises(UnsupportedError, match="torch sees no CUDA device"):
        b.load_llm(art, threads=1, n_ctx=64, device="cuda")


@needs_cuda
@pytest.mark.parametrize("name", ["torch_eager", "torch_compile"])
def test_cuda_output_agrees_with_the_cpu_and_timing_syncs(cnn, name):
    from edgeprof.core.plugins import get_registry

    inputs = cnn.make_inputs(0)
    pm = get_registry().backend(name)().prepare(cnn, RunConfig(device="cuda"), inputs)
    assert pm.device == "cuda" and pm.sync is not None
    assert any("TF32" in n for n in pm.notes) == bool(torch.backends.cudnn.allow_tf32)
    got = pm.to_numpy(pm.run(pm.inputs))[0]
    # cuDNN may pick TF32 or other algorithms: agree to a GPU's tolerance
    np.testing.assert_allclose(got, _cpu_reference(cnn, inputs), rtol=1e-2, atol=1e-3)


@needs_cuda
def test_transformers_generates_on_cuda_like_on_the_cpu(tmp_path):
    from edgeprof.backends.hf_folder import write_random_hf_folder
    from edgeprof.backends.transformers_llm import TransformersBackend
    from edgeprof.core.llm import LLMModel

    from tests.backends.test_transformers_llm import PROMPT, TINY

    folder = write_random_hf_folder(TINY, tmp_path / "m", seed=5)
    model = LLMModel(TINY, "hf_folder", str(folder), path=folder, random_weights=True)
    b = TransformersBackend()
    art = b.build_llm(model, "fp32", tmp_path / "work")
    tokens = {}
    for device in ("cpu", "cuda"):
        s = b.load_llm(art, threads=1, n_ctx=64, device=device)
        got: list[int] = []
        s.prefill(PROMPT)
        s.decode(8, got.append)
        s.close()
        tokens[device] = got
    assert tokens["cuda"][:4] == tokens["cpu"][:4]  # greedy: the same first tokens


def test_tf32_note_says_what_fp32_on_cuda_computes_in(monkeypatch):
    from edgeprof.backends.torch_eager import tf32_note

    assert tf32_note(torch, "cpu", "fp32") is None
    assert tf32_note(torch, "cuda", "bf16") is None
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    note = tf32_note(torch, "cuda:0", "fp32")
    assert "convolutions" in note and "TF32" in note and "matmuls" not in note
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert tf32_note(torch, "cuda", "fp32") is None
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        assert "matmuls (float32_matmul_precision 'high')" in tf32_note(torch, "cuda", "fp32")
    finally:
        torch.set_float32_matmul_precision(previous)

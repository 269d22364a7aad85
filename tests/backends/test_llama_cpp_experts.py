"""llama_cpp and a mixture of experts: a tiny MoE spec is written as llama.cpp writes Mixtral
(llama architecture, expert_count, router + stacked experts), loads and generates in
llama.cpp, and llama.cpp's quantizer gives each tensor the type and bytes the estimate says
(the router F32, the 8-expert rules); what it cannot write is refused in one line, and the
backends that build dense models only refuse experts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from gguf import GGUFReader

import llama_cpp  # noqa: F401 - `make test` installs it: a missing runtime must fail here
from edgeprof.backends.gguf_write import tensor_plan, write_random_gguf
from edgeprof.core.gguf import read_gguf_header
from edgeprof.backends.llama_cpp import LlamaCppBackend
from edgeprof.core.errors import UnsupportedError
from edgeprof.core.llm import LLMModel, LLMSpec
from edgeprof.profilers.estimate.llm import parameter_count


def tiny_moe(**kw) -> LLMSpec:
    base = dict(name="tiny-moe", family="llama", hidden_size=64, num_layers=2, num_heads=4,
                num_kv_heads=2, head_dim=16, intermediate_size=96, vocab_size=300,
                max_position_embeddings=128, tie_word_embeddings=False, num_experts=4,
                num_experts_per_tok=2, moe_intermediate_size=32)
    return LLMSpec(**{**base, **kw})


def model(spec: LLMSpec, kind: str = "preset", path=None) -> LLMModel:
    return LLMModel(spec=spec, source_kind=kind, given=str(path or f"llm:{spec.name}"),
                    path=path)


@pytest.fixture(scope="module")
def backend():
    return LlamaCppBackend()


def test_a_tiny_moe_is_written_as_mixtral_and_runs(backend, tmp_path):
    spec = tiny_moe()
    path = write_random_gguf(spec, tmp_path / "m.gguf", dtype="f32")
    reader = GGUFReader(path)
    assert reader.get_field("general.architecture").contents() == "llama"
    assert reader.get_field("llama.expert_count").contents() == 4
    assert reader.get_field("llama.expert_used_count").contents() == 2
    assert reader.get_field("llama.feed_forward_length").contents() == 32
    shapes = {t.name: list(t.shape) for t in reader.tensors}  # ggml order
    assert shapes["blk.0.ffn_gate_inp.weight"] == [64, 4]
    assert shapes["blk.0.ffn_gate_exps.weight"] == shapes["blk.0.ffn_up_exps.weight"] == [64, 32, 4]
    assert shapes["blk.0.ffn_down_exps.weight"] == [32, 64, 4]
    assert "blk.0.ffn_gate.weight" not in shapes
    assert sum(p.n_elements for p in tensor_plan(spec)) == parameter_count(spec)
    art = backend.build_llm(model(spec, "gguf", path), "f32", tmp_path)
    with backend.load_llm(art, threads=1, n_ctx=64) as session:
        session.prefill([5, 6, 7, 8])
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(session._ctx, -1),
                                       shape=(session.n_vocab,))
        assert np.isfinite(logits).all() and logits.std() > 0
        got: list[int] = []
        session.decode(5, got.append)
        assert len(got) == 5 and all(0 <= t < spec.vocab_size for t in got)


@pytest.mark.parametrize("experts", [4, 8])  # 8: the quantizer's Mixtral rules
def test_the_quantizer_gives_the_types_and_bytes_the_estimate_says(experts, backend):
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    from edgeprof.backends.llama_cpp_formats import gguf_file_bytes, gguf_tensor_types
    from edgeprof.profilers.estimate.llm import weight_bytes

    # K-quant super-blocks of 256: hidden and expert width 256 and 512 (down's rows differ)
    spec = tiny_moe(name=f"tiny-moe-{experts}", hidden_size=256, head_dim=64, num_kv_heads=1,
                    intermediate_size=512, vocab_size=512, num_experts=experts,
                    moe_intermediate_size=512)
    for fmt in ("q2_k", "q4_k_m", "q8_0", "f16"):
        art = backend.build_llm(model(spec), fmt, None)
        table = read_gguf_header(art.entry_path).tensors
        actual = {n: GGMLQuantizationType(t).name for n, (_, t, _) in table.items()}
        assert gguf_tensor_types(spec, fmt) == actual, fmt
        assert actual["blk.0.ffn_gate_inp.weight"] == "F32"
        data = sum(int(np.prod(dims)) // GGML_QUANT_SIZES[GGMLQuantizationType(t)][0]
                   * GGML_QUANT_SIZES[GGMLQuantizationType(t)][1] for dims, t, _ in table.values())
        assert weight_bytes(spec, fmt, backend="llama_cpp") == data, fmt
        size = art.entry_path.stat().st_size
        assert abs(gguf_file_bytes(spec, fmt) - size) <= 0.01 * size, fmt
    if experts == 8:
        assert actual["blk.0.attn_k.weight"] == "F16"  # f16: no mix
        q4 = gguf_tensor_types(spec, "q4_k_m")
        assert q4["blk.0.attn_k.weight"] == q4["blk.0.attn_v.weight"] == "Q8_0"
    with backend.load_llm(art, threads=1, n_ctx=32) as session:
        session.prefill([3, 4, 5])
        got: list[int] = []
        session.decode(2, got.append)
        assert len(got) == 2


def test_what_llama_cpps_llama_architecture_cannot_hold_is_refused(backend, tmp_path):
    shared = tiny_moe(shared_expert_intermediate_size=64)
    qwen2 = tiny_moe(family="qwen2", qkv_bias=True)
    for spec, words in ((shared, "no shared expert"), (qwen2, "llama architecture only")):
        with pytest.raises(UnsupportedError, match=words):
            write_random_gguf(spec, tmp_path / "m.gguf")
        reason = backend.supports(model(spec), "q4_k_m")
        assert reason and words in reason and "\n" not in reason
    assert list(tmp_path.iterdir()) == []
    assert backend.supports(model(tiny_moe()), "q4_k_m") is None


def test_qwen3_30b_a3b_is_llama_cpps_and_the_dense_builders_refuse_it(registry):
    from edgeprof.zoo.llm import resolve_llm

    m = resolve_llm("llm:qwen3-30b-a3b")
    assert LlamaCppBackend().supports_on_board(m, "q4_k_m") is None
    for name in ("transformers", "onnxruntime_genai", "openvino_genai"):
        entry = registry.backends_for("generate").get(name)
        if entry is None:
            continue
        cls = entry.cls
        reason = cls().supports_on_board(m, cls.formats[0], "cpu")
        assert reason and "mixture of experts" in reason and "\n" not in reason, name
    dense = resolve_llm("llm:qwen3-1.7b")
    assert "mixture" not in (LlamaCppBackend().supports_on_board(dense, "q4_k_m") or "")
    assert dataclasses.replace(m.spec, num_experts=0, num_experts_per_tok=0,
                               moe_intermediate_size=0).to_dict().keys() \
        == dense.spec.to_dict().keys()

"""Mixtures of experts in the zoo: Qwen3-MoE, Qwen2-MoE and Mixtral config.json files read into
LLMSpec's expert fields, the qwen3-30b-a3b preset as its published config gives it, hf_config
writing them back, and a GGUF's expert keys read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from edgeprof.core.errors import ModelError, UnsupportedError
from edgeprof.zoo.llm import get_preset, hf_config, resolve_llm, spec_from_gguf, spec_from_hf_config

#: config.json of Qwen/Qwen3-30B-A3B (architecture fields; see llm_presets.toml's source)
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False,
    "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0,
    "sliding_window": None, "tie_word_embeddings": False, "use_sliding_window": False,
    "vocab_size": 151936}


def test_qwen3_moe_config_reads_into_the_preset():
    spec = spec_from_hf_config(QWEN3_30B_A3B, name="qwen3-30b-a3b")
    preset = get_preset("qwen3-30b-a3b")
    assert spec.family == "llama" and spec.is_moe
    assert (spec.num_experts, spec.num_experts_per_tok, spec.moe_intermediate_size,
            spec.shared_expert_intermediate_size, spec.norm_topk_prob) == (128, 8, 768, 0, True)
    assert spec == dataclasses.replace(preset, published_parameters=None, source="")


def test_transformers_5_spells_qwen3_moes_experts_num_local_experts():
    cfg = {k: v for k, v in QWEN3_30B_A3B.items() if k != "num_experts"}
    assert spec_from_hf_config({**cfg, "num_local_experts": 128}, name="q").num_experts == 128


def test_mixtral_and_qwen2_moe_configs():
    mixtral = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
               "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
               "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
               "max_position_embeddings": 32768, "rope_theta": 1e6, "sliding_window": None}
    m = spec_from_hf_config(mixtral, name="mixtral")
    assert (m.family, m.num_experts, m.num_experts_per_tok, m.moe_intermediate_size,
            m.norm_topk_prob, m.qkv_bias) == ("llama", 8, 2, 14336, True, False)
    qwen2 = {"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
             "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
             "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
             "shared_expert_intermediate_size": 5632, "norm_topk_prob": False,
             "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
             "max_position_embeddings": 8192, "use_sliding_window": False}
    q = spec_from_hf_config(qwen2, name="qwen1.5-moe")
    assert (q.family, q.qkv_bias, q.num_experts, q.shared_expert_intermediate_size,
            q.norm_topk_prob) == ("qwen2", True, 60, 5632, False)
    back = spec_from_hf_config(hf_config(q), name=q.name)  # written as Qwen2-MoE
    assert hf_config(q)["model_type"] == "qwen2_moe" and back == q


@pytest.mark.parametrize("change, words", [
    ({"mlp_only_layers": [0, 1]}, "dense MLP layers among its expert layers"),
    ({"decoder_sparse_step": 2}, "decoder_sparse_step 2"),
    ({"num_experts_per_tok": 200}, "num_experts_per_tok must be from 1 to num_experts (128)"),
    ({"moe_intermediate_size": None}, "missing 'moe_intermediate_size'"),
    ({"shared_expert_intermediate_size": 512}, "shared expert in a qwen3_moe"),
])
def test_moe_configs_edgeprof_cannot_represent_are_one_line_errors(change, words):
    with pytest.raises(ModelError) as e:
        spec_from_hf_config({**QWEN3_30B_A3B, **change}, name="q", where="config.json")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_the_preset_is_written_as_mixtral_and_a_folder_of_it_resolves(tmp_path):
    spec = get_preset("qwen3-30b-a3b")
    cfg = hf_config(spec)
    assert (cfg["model_type"], cfg["architectures"]) == ("mixtral", ["MixtralForCausalLM"])
    assert (cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["intermediate_size"]) \
        == (128, 8, 768)
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_30B_A3B))
    m = resolve_llm(str(tmp_path))
    assert m.source_kind == "hf_folder" and m.spec.num_experts == 128 and not m.random_weights


def test_a_gemma_mixture_of_experts_has_no_hf_architecture():
    gemma = dataclasses.replace(get_preset("gemma-2b"), num_experts=4, num_experts_per_tok=2,
                                moe_intermediate_size=64)
    with pytest.raises(UnsupportedError, match="no Hugging Face architecture"):
        hf_config(gemma)


def test_a_gguf_s_expert_keys_are_read(tmp_path):
    """A llama-architecture GGUF with expert_count (Mixtral's layout, as the writer makes it):
    its experts are feed_forward_length wide."""
    from edgeprof.backends.gguf_write import write_random_gguf
    from edgeprof.core.llm import LLMSpec

    spec = LLMSpec(name="tiny-moe", family="llama", hidden_size=64, num_layers=2, num_heads=4,
                   num_kv_heads=2, head_dim=16, intermediate_size=96, vocab_size=300,
                   max_position_embeddings=128, tie_word_embeddings=False, num_experts=4,
                   num_experts_per_tok=2, moe_intermediate_size=32)
    back, fmt, random = spec_from_gguf(write_random_gguf(spec, tmp_path / "m.gguf"))
    assert (back.num_experts, back.num_experts_per_tok, back.moe_intermediate_size) == (4, 2, 32)
    assert back.intermediate_size == 32  # llama's feed_forward_length is the experts' width
    assert fmt == "f32" and random

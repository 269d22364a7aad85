"""The analytic estimate of a mixture of experts: memory holds every expert, a decoded token
reads (and multiplies by) the router and only its k experts, a prompt's micro-batch reads the
distinct experts its tokens route to; Qwen3-30B-A3B's total and active parameters against
the published figures."""

from __future__ import annotations

import dataclasses
import math

import pytest

from edgeprof.core.llm import LLMSpec
from edgeprof.profilers.estimate.llm import (
    UBATCH, active_parameter_count, estimate_llm, expert_parameters, experts_read,
    parameter_count, runtime_overhead_bytes, tensors)
from edgeprof.targets import get_target
from edgeprof.zoo.llm import get_preset, preset_representation

QWEN = get_preset("qwen3-30b-a3b")
E, K, F = 16, 4, 256


def moe(**kw) -> LLMSpec:
    base = dict(name="moe", family="llama", hidden_size=512, num_layers=4, num_heads=8,
                num_kv_heads=2, head_dim=64, intermediate_size=1024, vocab_size=1024,
                max_position_embeddings=2048, tie_word_embeddings=False,
                num_experts=E, num_experts_per_tok=K, moe_intermediate_size=F)
    return LLMSpec(**{**base, **kw})


def dense_twin(s: LLMSpec) -> LLMSpec:
    """The dense model whose MLP is the k experts a token runs, side by side."""
    return dataclasses.replace(s, name="dense", num_experts=0, num_experts_per_tok=0,
                               moe_intermediate_size=0,
                               intermediate_size=s.num_experts_per_tok * s.moe_intermediate_size)


# ------------------------------------------------------------------ Qwen3-30B-A3B
def test_qwen3_30b_a3b_total_and_active_parameters_are_the_published_ones():
    """Model card: '30.5B in total and 3.3B activated'; exactly 30,532,122,624 and
    3,353,032,704 with qwen3_moe's per-head q/k norms, which the llama representation does
    not hold (12,288)."""
    extra = preset_representation("qwen3-30b-a3b")["unrepresented_parameters"]
    assert extra == 2 * 128 * 48
    total, active = parameter_count(QWEN), active_parameter_count(QWEN)
    assert total + extra == QWEN.published_parameters == 30_532_122_624
    assert active + extra == 3_353_032_704
    assert total == pytest.approx(30.5e9, rel=0.02)
    assert active == pytest.approx(3.3e9, rel=0.05)
    # non-embedding (the model card's 29.9B): all but the embedding and the untied head
    assert total + extra - 2 * 151936 * 2048 == pytest.approx(29.9e9, rel=0.005)
    assert expert_parameters(QWEN) == 48 * 128 * 3 * 2048 * 768


def test_qwen3_30b_a3b_tensors_are_llama_cpps_moe_tensors():
    ts = {t.name: t for t in tensors(QWEN) if t.layer == 0}
    assert ts["blk.0.ffn_gate_inp.weight"].ne == (2048, 128)
    assert ts["blk.0.ffn_gate_exps.weight"].ne == ts["blk.0.ffn_up_exps.weight"].ne \
        == (2048, 768, 128)
    assert ts["blk.0.ffn_down_exps.weight"].ne == (768, 2048, 128)
    assert not {"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"} & set(ts)
    assert {t.kind for t in ts.values() if "exps" in t.name} == {"experts"}


def test_qwen3_30b_a3b_q4_k_m_holds_18_6_gb_and_does_not_fit_a_pi_5():
    """The GGUF: llama-bench reports Qwen3-30B-A3B-Q4_K_M.gguf (qwen3moe) as 18,556,686,912
    bytes; a Pi 5 has 8 GB. Decode reads the active experts: about a tenth of the weights."""
    pi = get_target("raspberry_pi_5")
    est = estimate_llm(QWEN, "q4_k_m", backend="llama_cpp", target=pi)
    assert est.figure("file_bytes") == pytest.approx(18_556_686_912, rel=0.01)
    wbytes, dec = est.figure("weight_bytes"), est.figure("decode_bytes_per_token")
    assert 0.08 < dec / wbytes < 0.13
    assert est.figure("active_parameters_per_token") == active_parameter_count(QWEN)
    assert est.figure("parameters") == parameter_count(QWEN)
    assert not est.fit["fits"] and est.fit["weight_bytes"] == wbytes
    assert "128 experts" in est.fit["verdict"] and "a token reads 8" in est.fit["verdict"]
    assert any(n.startswith("mixture of experts: memory holds all 128") for n in est.notes)
    bw = est.stages["decode"]["bandwidth"]
    assert est.figure("decode_tokens_per_s") == pytest.approx(
        1 / max(est.stages["decode"]["memory_s"], est.stages["decode"]["compute_s"]))
    assert est.stages["decode"]["bound"] == "memory"
    assert est.stages["decode"]["memory_s"] == pytest.approx(dec / bw, rel=1e-6)


# ------------------------------------------------------------------ per-token accounting
@pytest.mark.parametrize("fmt", ["fp32", "q4_k_m", "q8_0"])
def test_a_token_reads_what_the_dense_model_of_its_k_experts_reads_plus_the_router(fmt):
    s = moe()
    d = dense_twin(s)
    backend = None if fmt == "fp32" else "llama_cpp"
    em = estimate_llm(s, fmt, backend=backend, prompt_tokens=64, gen_tokens=16)
    ed = estimate_llm(d, fmt, backend=backend, prompt_tokens=64, gen_tokens=16)
    router = s.hidden_size * s.num_experts  # one router per layer, never quantized: F32
    layers = s.num_layers
    assert em.figure("decode_bytes_per_token") == ed.figure("decode_bytes_per_token") \
        + layers * router * 4
    assert em.stages["decode"]["macs"] == ed.stages["decode"]["macs"] + layers * router
    assert em.stages["prefill"]["macs"] == ed.stages["prefill"]["macs"] + layers * router * 64
    # memory holds all E experts: E/k times the k experts' bytes
    exps = sum(r["weight_bytes"] for r in em.layers if r["kind"] == "experts")
    mlp_d = sum(r["weight_bytes"] for r in ed.layers if r["kind"] == "mlp")
    assert exps == mlp_d * E // K
    assert em.figure("weight_bytes") == ed.figure("weight_bytes") - mlp_d + exps \
        + layers * router * 4
    assert em.figure("parameters") == parameter_count(s) > parameter_count(d)
    assert em.figure("active_parameters_per_token") == parameter_count(d) + layers * router


def test_each_layer_has_an_experts_row_holding_all_and_reading_k():
    s = moe()
    est = estimate_llm(s, "fp32", prompt_tokens=8, gen_tokens=4)
    rows = [r for r in est.layers if r["kind"] == "experts"]
    assert [r["name"] for r in rows] == [f"layers.{i}.experts" for i in range(s.num_layers)]
    for r in rows:
        assert r["params"] == 3 * s.hidden_size * F * E
        assert r["weight_bytes"] == 4 * r["params"]
        assert r["decode_bytes_per_token"] == r["weight_bytes"] * K / E
        assert r["decode_macs_per_token"] == r["params"] * K / E
        assert (r["experts"], r["experts_per_token"]) == (E, K)
    assert sum(r["params"] for r in est.layers) == parameter_count(s)


def test_prefill_reads_the_distinct_experts_of_each_micro_batch():
    s = moe()
    assert experts_read(s, 1) == K
    assert experts_read(s, 2) == pytest.approx(E * (1 - (1 - K / E) ** 2))
    assert experts_read(s, 2) <= 2 * K
    assert experts_read(s, UBATCH) == pytest.approx(E)
    assert experts_read(dense_twin(s), 100) == 0
    for p in (1, 3, UBATCH, UBATCH + 7):
        est = estimate_llm(s, "fp32", prompt_tokens=p, gen_tokens=1)
        r = next(r for r in est.layers if r["kind"] == "experts")
        chunks = [min(UBATCH, p - u * UBATCH) for u in range(math.ceil(p / UBATCH))]
        want = sum(r["weight_bytes"] * experts_read(s, n) / E for n in chunks)
        assert r["prefill_bytes"] == pytest.approx(want)
        assert r["prefill_macs"] == pytest.approx(r["params"] * K / E * p)
    # one token's prompt reads exactly its k experts, as a decoded token does
    one = estimate_llm(s, "fp32", prompt_tokens=1, gen_tokens=1)
    r = next(r for r in one.layers if r["kind"] == "experts")
    assert r["prefill_bytes"] == r["decode_bytes_per_token"]


def test_the_runtime_allowance_counts_the_experts_a_token_runs():
    s = moe()
    assert runtime_overhead_bytes(s, 64) == runtime_overhead_bytes(dense_twin(s), 64)


def test_a_dense_estimate_has_no_expert_figures():
    est = estimate_llm(dense_twin(moe()), "fp32", prompt_tokens=8, gen_tokens=4)
    assert "active_parameters_per_token" not in est.figures
    assert not any(r["kind"] == "experts" for r in est.layers)
    assert not any("experts" in n for n in est.notes)
    assert active_parameter_count(dense_twin(moe())) == parameter_count(dense_twin(moe()))


def test_mixtrals_eight_expert_rules_in_the_quantizer_mix():
    """llama.cpp's quantizer gives a model of exactly 8 experts attn_v and attn_k in Q8_0
    and attn_output in Q5_K (Q4_K_M): checked against the quantizer itself in
    tests/backends/test_llama_cpp.py."""
    from edgeprof.backends.llama_cpp_formats import gguf_tensor_types

    eight = gguf_tensor_types(moe(num_experts=8, num_experts_per_tok=2), "q4_k_m")
    other = gguf_tensor_types(moe(), "q4_k_m")
    assert eight["blk.1.attn_k.weight"] == eight["blk.1.attn_v.weight"] == "Q8_0"
    assert eight["blk.1.attn_output.weight"] == "Q5_K"
    assert other["blk.1.attn_k.weight"] == "Q4_K" and other["blk.1.attn_output.weight"] == "Q4_K"
    assert eight["blk.0.ffn_gate_inp.weight"] == other["blk.0.ffn_gate_inp.weight"] == "F32"
    # use_more_bits of the block (4 layers: 2 and 3), as for a dense ffn_down
    assert [other[f"blk.{i}.ffn_down_exps.weight"] for i in range(4)] == \
        ["Q4_K", "Q4_K", "Q6_K", "Q6_K"]

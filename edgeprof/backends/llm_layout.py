"""What a generative model stores, and the byte layouts several runtimes share.

Data for the generative backends' format declarations (``format_layouts``, see
:class:`edgeprof.core.llm.DeclaresFormats`); imports no runtime, so the estimate reads it
without one.

* :func:`tensors` — every stored tensor of an :class:`~edgeprof.core.llm.LLMSpec` under
  llama.cpp's names, with its kind and llama.cpp's tensor category (what every layout
  assigns a stored type to); a mixture of experts' MLP is llama.cpp's router
  ``ffn_gate_inp`` and the experts stacked in ``ffn_{gate,up,down}_exps`` (kind
  ``experts``), plus a shared expert ``ffn_*_shexp`` where the model has one;
* :func:`groupwise_bytes` — group-wise quantized bytes (values + a scale, and a zero point,
  per group), the arithmetic of ONNX Runtime GenAI's MatMulNBits and NNCF's groups;
* :class:`FloatLayout` and :data:`GENERIC_FORMATS` — every weight in one float dtype
  (``fp32 bf16 fp16``), the generic formats a backend without its own layout is estimated
  with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from edgeprof.core.llm import FormatInfo, LLMSpec, WeightTensor


@lru_cache(maxsize=256)
def tensors(spec: LLMSpec) -> tuple[WeightTensor, ...]:
    """Every stored tensor of ``spec`` in llama.cpp's names and order (by layer, then name);
    a tied LM head is not a tensor of its own.

    A mixture of experts' layer holds, instead of ``ffn_gate/up/down``, llama.cpp's MoE
    tensors (``src/llama-model.cpp``; ``ne`` in ggml order): the router ``ffn_gate_inp``
    ``[hidden, E]`` (kind ``mlp``: every token reads it), the experts ``ffn_gate_exps`` and
    ``ffn_up_exps`` ``[hidden, F, E]`` and ``ffn_down_exps`` ``[F, hidden, E]`` (kind
    ``experts``: a token reads ``num_experts_per_tok`` of the ``E``), and a shared expert
    ``ffn_{gate,up,down}_shexp`` of ``shared_expert_intermediate_size`` (kind ``mlp``) with,
    for Qwen2-MoE (family ``qwen2``), its one-output gate ``ffn_gate_inp_shexp`` ``[hidden]``.
    """
    h, hd = spec.hidden_size, spec.head_dim
    q_out, kv_out = spec.num_heads * hd, spec.num_kv_heads * hd
    ff = spec.intermediate_size
    gemma_post = spec.family in ("gemma2", "gemma3_text")
    out = [WeightTensor("token_embd.weight", "embedding", None, (h, spec.vocab_size),
                        "token_embd"),
           WeightTensor("output_norm.weight", "norm", None, (h,), "other")]
    if not spec.tie_word_embeddings:
        out.append(WeightTensor("output.weight", "lm_head", None, (h, spec.vocab_size), "output"))
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        layer = [WeightTensor(b + "attn_norm.weight", "norm", i, (h,), "other"),
                 WeightTensor(b + "attn_output.weight", "attention", i, (q_out, h),
                              "attn_output"),
                 WeightTensor(b + "ffn_norm.weight", "norm", i, (h,), "other")]
        if spec.fused_qkv:
            layer.append(WeightTensor(b + "attn_qkv.weight", "attention", i,
                                      (h, q_out + 2 * kv_out), "attn_qkv"))
            if spec.qkv_bias:
                layer.append(WeightTensor(b + "attn_qkv.bias", "attention", i,
                                          (q_out + 2 * kv_out,), "other"))
        else:
            for n, o in (("q", q_out), ("k", kv_out), ("v", kv_out)):
                layer.append(WeightTensor(f"{b}attn_{n}.weight", "attention", i, (h, o),
                                          f"attn_{n}"))
                if spec.qkv_bias:
                    layer.append(WeightTensor(f"{b}attn_{n}.bias", "attention", i, (o,), "other"))
        if spec.is_moe:
            layer += _moe_tensors(spec, i)
        elif spec.fused_gate_up:
            layer += [WeightTensor(b + "ffn_up.weight", "mlp", i, (h, 2 * ff), "ffn_up"),
                      WeightTensor(b + "ffn_down.weight", "mlp", i, (ff, h), "ffn_down")]
        else:
            layer += [WeightTensor(b + "ffn_gate.weight", "mlp", i, (h, ff), "ffn_gate"),
                      WeightTensor(b + "ffn_up.weight", "mlp", i, (h, ff), "ffn_up"),
                      WeightTensor(b + "ffn_down.weight", "mlp", i, (ff, h), "ffn_down")]
        if gemma_post:
            layer += [WeightTensor(b + "post_attention_norm.weight", "norm", i, (h,), "other"),
                      WeightTensor(b + "post_ffw_norm.weight", "norm", i, (h,), "other")]
        if spec.family == "gemma3_text":
            layer += [WeightTensor(b + "attn_q_norm.weight", "norm", i, (hd,), "other"),
                      WeightTensor(b + "attn_k_norm.weight", "norm", i, (hd,), "other")]
        out += sorted(layer, key=lambda t: t.name)
    return tuple(out)


def _moe_tensors(spec: LLMSpec, i: int) -> list[WeightTensor]:
    """Layer ``i``'s MLP of a mixture of experts (see :func:`tensors`)."""
    b, h = f"blk.{i}.", spec.hidden_size
    e, f = spec.num_experts, spec.moe_intermediate_size
    out = [WeightTensor(b + "ffn_gate_inp.weight", "mlp", i, (h, e), "ffn_gate_inp"),
           WeightTensor(b + "ffn_gate_exps.weight", "experts", i, (h, f, e), "ffn_gate"),
           WeightTensor(b + "ffn_up_exps.weight", "experts", i, (h, f, e), "ffn_up"),
           WeightTensor(b + "ffn_down_exps.weight", "experts", i, (f, h, e), "ffn_down")]
    sf = spec.shared_expert_intermediate_size
    if sf:
        out += [WeightTensor(b + "ffn_gate_shexp.weight", "mlp", i, (h, sf), "ffn_gate"),
                WeightTensor(b + "ffn_up_shexp.weight", "mlp", i, (h, sf), "ffn_up"),
                WeightTensor(b + "ffn_down_shexp.weight", "mlp", i, (sf, h), "ffn_down")]
        if spec.family == "qwen2":  # Qwen2-MoE's shared_expert_gate: hidden -> 1
            out.append(WeightTensor(b + "ffn_gate_inp_shexp.weight", "mlp", i, (h,), "other"))
    return out


def groupwise_bytes(ne: Sequence[int], bits: int, group: int, scale_bytes: int,
                    zp_bits: int) -> int:
    """Bytes of a matrix of ggml shape ``ne`` (input size ``K = ne[0]`` first) stored as
    ``rows x ceil(K / group)`` groups of ``group`` values at ``bits`` plus a scale of
    ``scale_bytes`` (and a zero point of ``zp_bits``, packed per row) per group; ``group``
    0 = one group per row (per output channel)."""
    k = ne[0]
    rows = math.prod(ne) // k
    g = group or k
    blocks = -(-k // g)
    per_row = blocks * (g * bits // 8 + scale_bytes) + -(-blocks * zp_bits // 8)
    return rows * per_row


class NoFileLayout:
    """A layout that models the tensors, not the runtime's model file (only a GGUF's is):
    ``file_bytes`` is None."""

    def file_bytes(self, spec: LLMSpec, tensors: Sequence[WeightTensor],
                   fmt: FormatInfo) -> tuple[int, str] | None:
        return None


@dataclass(frozen=True)
class FloatLayout(NoFileLayout):
    """Every tensor in the format's float dtype (``bits`` / 8 bytes a value, the stored type
    named after the format); a tied embedding once."""

    def storage(self, spec: LLMSpec, tensors: Sequence[WeightTensor], fmt: FormatInfo,
                device: str = "cpu") -> dict[str, tuple[int, str]]:
        b = int(fmt.bits) // 8
        return {t.name: (t.numel * b, fmt.name) for t in tensors}


FLOAT = FloatLayout()

#: the float formats as such: what a format of these names is estimated as when the backend
#: that makes it declares no layout of its own
GENERIC_FORMATS: dict[str, FormatInfo] = {f.name: f for f in (
    FormatInfo("fp32", "float", 32, "fp32", "fp32", "every weight fp32", layout=FLOAT),
    FormatInfo("bf16", "float", 16, "bf16", "bf16", "every weight bf16", layout=FLOAT),
    FormatInfo("fp16", "float", 16, "fp16", "fp16", "every weight fp16", layout=FLOAT),
)}


__all__ = ["FLOAT", "FloatLayout", "GENERIC_FORMATS", "NoFileLayout", "groupwise_bytes",
           "tensors"]

"""Random-weight GGUF files in a published architecture's shape, for llama.cpp.

:func:`write_random_gguf` turns an :class:`~edgeprof.core.llm.LLMSpec` into a GGUF that
llama.cpp loads and runs: llama.cpp's tensor names and metadata keys for the architecture
(as its ``convert_hf_to_gguf.py`` writes them), weights drawn from N(0, 0.02) so activations
stay finite, norm weights of 1 (Gemma's "1 + w" already folded in, as the converter does),
and a synthetic SentencePiece-style vocabulary of exactly ``vocab_size`` tokens
(``<unk>``, ``<s>``, ``</s>``, ``<|endoftext|>``, the 256 byte tokens, then fillers).

Latency and memory depend on the shapes and the storage types, not on the values, so the
file times like the published model; the text it generates means nothing.

The file is streamed: the header and tensor index are written first, then each tensor is
drawn and written in row chunks, so a 1.1B model never sits in memory whole. It is written
to a temporary sibling and renamed into place (nothing half-written).

Family (Hugging Face ``model_type``) -> llama.cpp architecture:

======================  ==========  ===================================================
``llama``               llama       TinyLlama, SmolLM/SmolLM2, Llama-3.2
``qwen2``               qwen2       q/k/v biases
``gemma``               gemma       tied embeddings, head_dim 256
``gemma2``              gemma2      sliding window every other layer, logit soft-caps
``gemma3_text``         gemma3      sliding window 5 of 6 layers, q/k norms
``phi3``                phi3        fused ``attn_qkv`` and ``ffn_up`` (gate and up, 2x rows)
======================  ==========  ===================================================

A mixture of experts (``LLMSpec.num_experts`` > 0) is written as llama.cpp writes Mixtral: the
``llama`` architecture with ``llama.expert_count`` / ``llama.expert_used_count``, its
``feed_forward_length`` the experts' width, and per layer the router ``ffn_gate_inp`` (F32,
as llama.cpp's converter keeps it) and the stacked experts ``ffn_gate_exps``,
``ffn_up_exps``, ``ffn_down_exps`` (ggml ``[hidden, F, E]``, ``[hidden, F, E]``,
``[F, hidden, E]``: ``src/llama-model.cpp``, LLM_ARCH_LLAMA). llama.cpp's llama graph routes
with a softmax over the experts and renormalises the chosen k (``norm_topk_prob`` true, as
Mixtral and Qwen3-MoE do). Only the llama family is written so; a shared expert (Qwen2-MoE)
has no place in llama.cpp's llama architecture and is refused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.zoo.llm import GGUF_ARCHES

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from edgeprof.core.llm import LLMSpec

#: Hugging Face model_type -> llama.cpp architecture name: the inverse of the zoo's reader
#: table (one list of the architectures edgeprof knows), plus "gemma3" as a family alias
ARCHITECTURES = {**{family: arch for arch, family in GGUF_ARCHES.items()}, "gemma3": "gemma3"}
#: standard deviation of the random weights
WEIGHT_STD = 0.02
#: Gemma 2's published soft-caps (config.json: attn_logit_softcapping, final_logit_softcapping)
GEMMA2_SOFTCAPS = (50.0, 30.0)
#: elements drawn per chunk while streaming a tensor (64 MiB of float32)
_CHUNK_ELEMENTS = 1 << 24
#: special tokens of the synthetic vocabulary
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<|endoftext|>")
N_BYTE_TOKENS = 256


@dataclass(frozen=True)
class TensorPlan:
    """One tensor of the file: its GGUF name, numpy shape (rows, cols) and role."""

    name: str
    shape: tuple[int, ...]
    role: str  # weight | norm | bias | router (a MoE router: stored F32)

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)


def llama_cpp_architecture(spec: LLMSpec) -> str:
    """llama.cpp's architecture name for ``spec`` (UnsupportedError when it has none here)."""
    arch = ARCHITECTURES.get(spec.family)
    if arch is None:
        raise UnsupportedError(
            f"llama.cpp backend cannot build architecture '{spec.family}' (model "
            f"'{spec.name}'); it builds {', '.join(sorted(set(ARCHITECTURES) - {'gemma3'}))}",
            backend="llama_cpp")
    if spec.is_moe and arch != "llama":
        raise UnsupportedError(
            f"llama.cpp backend writes a mixture of experts as the llama architecture only "
            f"(Mixtral's layout), not '{spec.family}' (model '{spec.name}')", backend="llama_cpp")
    if spec.is_moe and spec.shared_expert_intermediate_size:
        raise UnsupportedError(
            f"llama.cpp's llama architecture has no shared expert (model '{spec.name}' has one "
            f"of {spec.shared_expert_intermediate_size}); its MoE layers are routed experts only",
            backend="llama_cpp")
    q_dim = spec.num_heads * spec.head_dim
    if arch in ("qwen2", "phi3") and q_dim != spec.hidden_size:
        raise UnsupportedError(
            f"llama.cpp's {arch} needs num_heads x head_dim ({q_dim}) == hidden_size "
            f"({spec.hidden_size}) (model '{spec.name}')", backend="llama_cpp")
    return arch


def tensor_plan(spec: LLMSpec) -> list[TensorPlan]:
    """The tensors llama.cpp loads for ``spec``, in file order (numpy shapes: the GGUF's
    dimensions reversed, as the ``gguf`` package writes them)."""
    arch = llama_cpp_architecture(spec)
    d, ff, hd = spec.hidden_size, spec.intermediate_size, spec.head_dim
    q, kv = spec.num_heads * hd, spec.num_kv_heads * hd
    plan = [TensorPlan("token_embd.weight", (spec.vocab_size, d), "weight")]
    tied = spec.tie_word_embeddings or arch in ("gemma", "gemma2")  # llama.cpp ties those
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        plan.append(TensorPlan(b + "attn_norm.weight", (d,), "norm"))
        if arch == "phi3":
            plan.append(TensorPlan(b + "attn_qkv.weight", (q + 2 * kv, d), "weight"))
        else:
            plan += [TensorPlan(b + "attn_q.weight", (q, d), "weight"),
                     TensorPlan(b + "attn_k.weight", (kv, d), "weight"),
                     TensorPlan(b + "attn_v.weight", (kv, d), "weight")]
            if spec.qkv_bias:
                plan += [TensorPlan(b + "attn_q.bias", (q,), "bias"),
                         TensorPlan(b + "attn_k.bias", (kv,), "bias"),
                         TensorPlan(b + "attn_v.bias", (kv,), "bias")]
        if arch == "gemma3":
            plan += [TensorPlan(b + "attn_q_norm.weight", (hd,), "norm"),
                     TensorPlan(b + "attn_k_norm.weight", (hd,), "norm")]
        plan.append(TensorPlan(b + "attn_output.weight", (d, q), "weight"))
        if arch in ("gemma2", "gemma3"):
            plan.append(TensorPlan(b + "post_attention_norm.weight", (d,), "norm"))
        plan.append(TensorPlan(b + "ffn_norm.weight", (d,), "norm"))
        if spec.is_moe:  # numpy shapes: ggml's [hidden, F, E] reversed
            e, fe = spec.num_experts, spec.moe_intermediate_size
            plan += [TensorPlan(b + "ffn_gate_inp.weight", (e, d), "router"),
                     TensorPlan(b + "ffn_gate_exps.weight", (e, fe, d), "weight"),
                     TensorPlan(b + "ffn_up_exps.weight", (e, fe, d), "weight"),
                     TensorPlan(b + "ffn_down_exps.weight", (e, d, fe), "weight")]
        elif arch == "phi3":
            plan += [TensorPlan(b + "ffn_up.weight", (2 * ff, d), "weight"),
                     TensorPlan(b + "ffn_down.weight", (d, ff), "weight")]
        else:
            plan += [TensorPlan(b + "ffn_gate.weight", (ff, d), "weight"),
                     TensorPlan(b + "ffn_up.weight", (ff, d), "weight"),
                     TensorPlan(b + "ffn_down.weight", (d, ff), "weight")]
        if arch in ("gemma2", "gemma3"):
            plan.append(TensorPlan(b + "post_ffw_norm.weight", (d,), "norm"))
    plan.append(TensorPlan("output_norm.weight", (d,), "norm"))
    if not tied:
        plan.append(TensorPlan("output.weight", (spec.vocab_size, d), "weight"))
    return plan


def synthetic_vocab(n: int) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types of a SentencePiece-style vocabulary of ``n`` tokens:
    ``<unk> <s> </s> <|endoftext|>`` (llama.cpp looks the last one up in any model whose
    name contains "phi3"/"phi-3"), the byte tokens ``<0x00>..<0xFF>`` when there is room, then
    fillers ``▁t<i>``."""
    from gguf.constants import TokenType

    if n < len(SPECIAL_TOKENS):
        raise UserError(f"vocab_size must be at least {len(SPECIAL_TOKENS)} "
                        f"({' '.join(SPECIAL_TOKENS)}), got {n}")
    tokens = list(SPECIAL_TOKENS)
    types = [int(TokenType.UNKNOWN)] + [int(TokenType.CONTROL)] * (len(SPECIAL_TOKENS) - 1)
    if n >= len(SPECIAL_TOKENS) + N_BYTE_TOKENS:
        tokens += [f"<0x{b:02X}>" for b in range(N_BYTE_TOKENS)]
        types += [int(TokenType.BYTE)] * N_BYTE_TOKENS
    k = n - len(tokens)
    tokens += [f"\u2581t{i}" for i in range(k)]
    types += [int(TokenType.NORMAL)] * k
    scores = [0.0] * (n - k) + [-float(i) for i in range(k)]
    return tokens, scores, types


def _metadata(writer: Any, spec: LLMSpec, arch: str, file_type: int) -> None:
    from edgeprof.zoo.llm import GGUF_RANDOM_KEY

    w = writer
    w.add_name(spec.name)
    w.add_bool(GGUF_RANDOM_KEY, True)  # resolve_llm reads it back: "random weights"
    w.add_description("edgeprof random-weight model in a published shape "
                      "(latency and memory only; the text means nothing)")
    w.add_file_type(file_type)
    w.add_context_length(spec.max_position_embeddings)
    w.add_embedding_length(spec.hidden_size)
    w.add_block_count(spec.num_layers)
    if spec.is_moe:  # llama's experts are feed_forward_length wide (Mixtral's layout)
        w.add_feed_forward_length(spec.moe_intermediate_size)
        w.add_expert_count(spec.num_experts)
        w.add_expert_used_count(spec.num_experts_per_tok)
        w.add_expert_feed_forward_length(spec.moe_intermediate_size)
    else:
        w.add_feed_forward_length(spec.intermediate_size)
    w.add_head_count(spec.num_heads)
    w.add_head_count_kv(spec.num_kv_heads)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_rope_dimension_count(spec.head_dim)
    w.add_rope_freq_base(float(spec.rope_theta))
    w.add_layer_norm_rms_eps(float(spec.rms_norm_eps))
    w.add_vocab_size(spec.vocab_size)
    if arch in ("gemma2", "gemma3") and spec.sliding_window:
        w.add_sliding_window(int(spec.sliding_window))
        if spec.sliding_window_pattern > 0:
            w.add_sliding_window_pattern(int(spec.sliding_window_pattern))
    if arch == "gemma2":
        attn_cap = getattr(spec, "attn_logit_softcapping", None) or GEMMA2_SOFTCAPS[0]
        final_cap = getattr(spec, "final_logit_softcapping", None) or GEMMA2_SOFTCAPS[1]
        w.add_attn_logit_softcapping(float(attn_cap))
        w.add_final_logit_softcapping(float(final_cap))
    tokens, scores, types = synthetic_vocab(spec.vocab_size)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(UNK_ID)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)


def _chunks(plan: TensorPlan, dtype: np.dtype, seed: int, index: int) -> Iterator[np.ndarray]:
    """The tensor's values in row chunks (deterministic for ``seed`` and its index)."""
    import numpy as np

    if plan.role == "norm":
        yield np.ones(plan.shape, dtype=np.float32)
        return
    rng = np.random.default_rng([seed, index])
    if len(plan.shape) == 1:
        yield (rng.standard_normal(plan.shape, dtype=np.float32) * WEIGHT_STD)
        return
    cols = plan.shape[-1]
    rows = plan.n_elements // cols  # stacked experts: E x rows, drawn row by row
    step = max(1, _CHUNK_ELEMENTS // cols)
    for r in range(0, rows, step):
        block = rng.standard_normal((min(step, rows - r), cols), dtype=np.float32)
        block *= WEIGHT_STD
        yield block.astype(dtype, copy=False)


def write_random_gguf(spec: LLMSpec, path: str | os.PathLike, dtype: str = "f32", seed: int = 0,
                      *, overrides: Mapping[str, np.ndarray] | None = None) -> Path:
    """Write a random-weight GGUF of ``spec`` that llama.cpp loads; return its path.

    ``dtype`` is the storage of the matrices: ``f32`` (file type ALL_F32) or ``f16``
    (MOSTLY_F16; 1-D tensors stay F32, as llama.cpp's converter writes them).
    ``overrides`` replaces tensors by name or adds ones llama.cpp accepts (e.g. qwen2's
    ``output.bias``); a replacement must have the planned shape.
    """
    import numpy as np
    from gguf import GGUFWriter
    from gguf.constants import LlamaFileType

    from edgeprof.core.io import atomic_path

    if dtype not in ("f32", "f16"):
        raise UserError(f"write_random_gguf: dtype must be 'f32' or 'f16', got {dtype!r}")
    arch = llama_cpp_architecture(spec)
    matrix_dtype = np.dtype(np.float16 if dtype == "f16" else np.float32)
    file_type = int(LlamaFileType.MOSTLY_F16 if dtype == "f16" else LlamaFileType.ALL_F32)
    plan = tensor_plan(spec)
    given = {k: np.ascontiguousarray(v) for k, v in (overrides or {}).items()}
    planned = {p.name: p for p in plan}
    for name, arr in given.items():
        if name in planned and tuple(arr.shape) != planned[name].shape:
            raise UserError(f"override '{name}' has shape {tuple(arr.shape)}, the model needs "
                            f"{planned[name].shape}")
        if name not in planned:
            plan.append(TensorPlan(name, tuple(arr.shape), "given"))

    def storage(p: TensorPlan) -> np.dtype:
        if p.name in given:
            return given[p.name].dtype
        return matrix_dtype if p.role == "weight" else np.dtype(np.float32)

    path = Path(path)
    with atomic_path(path) as tmp:
        writer = GGUFWriter(tmp, arch)
        try:
            _metadata(writer, spec, arch, file_type)
            for p in plan:
                dt = storage(p)
                writer.add_tensor_info(p.name, p.shape, dt, p.n_elements * dt.itemsize)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_ti_data_to_file()
            fout = writer.fout[0]
            for index, p in enumerate(plan):
                writer.write_padding(fout, fout.tell())
                if p.name in given:
                    given[p.name].tofile(fout)
                else:
                    for block in _chunks(p, storage(p), seed, index):
                        block.tofile(fout)
                writer.write_padding(fout, p.n_elements * storage(p).itemsize)
            fout.flush()
        finally:
            writer.close()
    return path


__all__ = ["ARCHITECTURES", "BOS_ID", "EOS_ID", "TensorPlan", "UNK_ID",
           "llama_cpp_architecture", "synthetic_vocab", "tensor_plan", "write_random_gguf"]

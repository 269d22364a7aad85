"""Weight formats the published rows ran that no edgeprof backend makes, as
:class:`~edgeprof.core.llm.FormatInfo` with a byte layout, so the estimator counts their bytes
and MACs as it does the backends' formats (``estimate_llm`` takes a FormatInfo):

* ``q3_k_m``: llama.cpp's Q3_K_M mix (the Raspberry Pi 4 rows of llama.cpp b6726 / b7095).
  The llama_cpp backend does not make it (its quantizer targets are q2_k, q4_0, q4_k_m ...),
  so it is not among that backend's formats; its tensor types are llama.cpp's quantizer's
  (``llama_tensor_get_type`` in ``src/llama-quant.cpp``): Q3_K by default; ``attn_v`` Q5_K in
  the first two layers, else Q4_K; ``ffn_down`` Q5_K in the first sixteenth of the layers,
  else Q4_K (every architecture but Falcon); ``attn_output`` and a fused ``attn_qkv`` Q4_K;
  the output (and a tied embedding) Q6_K; ggml's block fallbacks as for the other K-quants.
* RKLLM's ``w8a8`` and ``w4a16`` (and their group variants ``w8a8_g128`` ... ``w4a16_g32``
  ...): Rockchip's RKLLM toolkit's quantized_dtype (the RK3588 NPU rows, rknn-llm's
  benchmark.md). 8-bit weights with 8-bit activations (int8 matrix products on the NPU), or
  4-bit weights with fp16 activations; one scale per output channel, or per group of N
  input values for ``_gN``. Assumed here (RKLLM's file layout is not published): an fp32 scale
  per group, the LM head quantized like the other matrices (kept apart from the embedding
  where they are tied), the embedding table fp16 (looked up per token on the CPU, not read in
  full: it does not enter the bytes per token), 1-D tensors fp32. The benchmark's memory
  column agrees with about one byte per parameter of the matrices for w8a8 (TinyLlama
  1085 MB, InternLM2-1.8B 1766 MB, Phi-3 3748 MB).

:func:`row_format` resolves a rows.toml format name: one of these, else the estimator's own
(the backends' formats)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from edgeprof.backends.llama_cpp_formats import (GGML_TYPE_SIZES, ggml_fallback,
                                                 ggml_storage)
from edgeprof.backends.llm_layout import groupwise_bytes
from edgeprof.core.llm import FormatInfo, LLMSpec, WeightTensor

#: llama.cpp's llama_ftype of Q3_K_M (LLAMA_FTYPE_MOSTLY_Q3_K_M)
Q3_K_M_FTYPE = 12


def q3_k_m_type(spec: LLMSpec, t: WeightTensor) -> str:
    """The ggml type llama.cpp's quantizer gives tensor ``t`` in Q3_K_M (a dense model)."""
    if not t.is_matrix or not t.name.endswith("weight") or "_norm.weight" in t.name:
        return "F32"
    cat, nx, n = t.category, t.ne[0], spec.num_layers
    if cat == "output" or (spec.tie_word_embeddings and cat == "token_embd"):
        return "Q8_0" if nx % GGML_TYPE_SIZES["Q6_K"][0] else "Q6_K"
    if cat == "attn_v":
        new = "Q5_K" if t.layer < 2 else "Q4_K"
    elif cat == "ffn_down":
        new = "Q5_K" if t.layer < n // 16 else "Q4_K"
    elif cat in ("attn_output", "attn_qkv"):
        new = "Q4_K"
    else:
        new = "Q3_K"
    return ggml_fallback(new, nx)


@dataclass(frozen=True)
class Q3KMLayout:
    """llama.cpp's Q3_K_M as its quantizer writes a GGUF (see the module docstring)."""

    def storage(self, spec: LLMSpec, tensors: Sequence[WeightTensor], fmt: FormatInfo,
                device: str = "cpu") -> dict[str, tuple[int, str]]:
        return ggml_storage(tensors, lambda t: q3_k_m_type(spec, t))

    def file_bytes(self, spec: LLMSpec, tensors: Sequence[WeightTensor],
                   fmt: FormatInfo) -> tuple[int, str] | None:
        return None


@dataclass(frozen=True)
class RKLLMLayout:
    """RKLLM's w8a8 / w4a16 (see the module docstring): ``fmt.weight_bits`` values in groups of
    ``fmt.group_size`` (0: one group per output channel) with an fp32 scale each."""

    scale_bytes: int = 4

    def storage(self, spec: LLMSpec, tensors: Sequence[WeightTensor], fmt: FormatInfo,
                device: str = "npu") -> dict[str, tuple[int, str]]:
        bits, group = int(fmt.weight_bits or 8), int(fmt.group_size or 0)

        def q(ne: Sequence[int]) -> tuple[int, str]:
            return groupwise_bytes(ne, bits, group, self.scale_bytes, 0), fmt.name

        out: dict[str, tuple[int, str]] = {}
        for t in tensors:
            if t.kind == "embedding":
                out[t.name] = (t.numel * 2, "f16")
            elif t.is_matrix:
                out[t.name] = q(t.ne)
            else:
                out[t.name] = (t.numel * 4, "f32")
        if spec.tie_word_embeddings:  # the LM head quantized apart from the fp16 embedding
            out["output.weight"] = q((spec.hidden_size, spec.vocab_size))
        return out

    def file_bytes(self, spec: LLMSpec, tensors: Sequence[WeightTensor],
                   fmt: FormatInfo) -> tuple[int, str] | None:
        return None


Q3_K_M = FormatInfo(
    "q3_k_m", "llama_cpp", 3.4375, "f16", "int8",
    "llama.cpp Q3_K_M mix (attn_v Q5_K in the first 2 layers, else Q4_K; ffn_down Q5_K in the "
    "first 1/16 of the layers, else Q4_K; attn_output Q4_K; output Q6_K; the rest Q3_K)",
    ftype=Q3_K_M_FTYPE, ggml_type="Q3_K", backend="llama_cpp", layout=Q3KMLayout())
_RKLLM = re.compile(r"^w(8)a8(?:_g(\d+))?$|^w(4)a16(?:_g(\d+))?$")
RKLLM_LAYOUT = RKLLMLayout()


def rkllm_format(name: str) -> FormatInfo | None:
    """RKLLM's quantized_dtype ``name`` (w8a8, w8a8_g128, w4a16, w4a16_g64 ...) as a
    FormatInfo; None for another name."""
    m = _RKLLM.match(name)
    if m is None:
        return None
    bits = int(m.group(1) or m.group(3))
    group = int(m.group(2) or m.group(4) or 0)
    per = f"groups of {group}" if group else "per output channel"
    act = "int8 activations (int8 matrix products)" if bits == 8 else "fp16 activations"
    return FormatInfo(name, "rkllm", bits + (32 / group if group else 0.0), "f16",
                      "int8" if bits == 8 else "fp16",
                      f"RKLLM {name}: {bits}-bit weights, {per}, fp32 scales (assumed), "
                      f"{act}; embedding fp16", weight_bits=bits, group_size=group,
                      backend="rkllm", layout=RKLLM_LAYOUT)


#: the formats of the rows no backend makes, by name
ROW_FORMATS: dict[str, FormatInfo] = {"q3_k_m": Q3_K_M, **{
    n: rkllm_format(n) for n in ("w8a8", "w8a8_g128", "w8a8_g256", "w8a8_g512", "w4a16",
                                 "w4a16_g32", "w4a16_g64", "w4a16_g128")}}


def row_format(name: str) -> FormatInfo | str:
    """A rows.toml format name as the estimator takes it: the FormatInfo of a format no backend
    makes (:data:`ROW_FORMATS`), else the name (one of the backends' formats)."""
    return ROW_FORMATS.get(name) or rkllm_format(name) or name

"""llama.cpp's weight formats as data: the llama_cpp backend's ``format_layouts``.

Imports no runtime (the estimate reads it without llama-cpp-python).

* :data:`LLAMA_CPP_FORMATS` — ``q2_k q4_0 q4_k_m q5_k_m q6_k q8_0 f16 f32`` (the formats the
  backend makes) and ``bf16_gguf`` (llama.cpp's BF16 file type, known but not made).
* The tensor type of every tensor is chosen as llama.cpp's quantizer chooses it
  (``llama_tensor_get_type`` in ``src/llama-quant.cpp`` of the llama.cpp vendored by
  llama-cpp-python 0.3.36): the output tensor (and a tied token embedding) in Q6_K, or Q8_0
  when its rows don't divide into 256; the K-quant mixes of :data:`MIXES` (Q4_K_M/Q5_K_M put
  half of ``attn_v``/``ffn_down`` (``use_more_bits``) in Q6_K; Q2_K puts ``attn_v`` in Q4_K
  (GQA >= 4) or Q3_K, ``ffn_down``/``attn_output`` in Q3_K); a row that doesn't divide into the
  type's block falls back (:data:`GGML_FALLBACK`: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
  Q2_K/Q3_K -> Q4_0, then F16); 1-D tensors and norms stay F32. A mixture of experts: the
  router ``ffn_gate_inp`` is never quantized (llama.cpp's converter writes it F32 and its
  quantizer skips it), the stacked experts take their category's type (``ffn_down_exps``
  is ``ffn_down``, by block: ``use_more_bits`` of the layer), and a model of exactly 8
  experts (Mixtral's) gets the quantizer's 8-expert rules: ``attn_v`` and ``attn_k`` in
  Q8_0, ``attn_output`` in Q5_K (Q2_K, Q4_K_M).
* Block sizes are ggml's (:data:`GGML_TYPE_SIZES`, ``ggml-common.h``).
* :func:`gguf_tensor_bytes` is the tensor data; :func:`gguf_file_bytes` adds the GGUF header,
  the tensor table, 32-byte alignment and an allowance for the vocabulary metadata
  (:data:`GGUF_VOCAB_BYTES_PER_TOKEN`, approximate: a real tokenizer's strings and merges vary).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgeprof.backends.llm_layout import tensors
from edgeprof.core.errors import UnknownNameError, UserError
from edgeprof.core.llm import FormatInfo, LLMSpec, WeightTensor

#: GGUF vocabulary metadata per token (string + length, token type, score); approximate
GGUF_VOCAB_BYTES_PER_TOKEN = 24
#: other GGUF metadata (general.*, the architecture's hyper-parameters); approximate
GGUF_BASE_METADATA_BYTES = 4096
GGUF_ALIGNMENT = 32

#: ggml type -> (elements per block, bytes per block) (ggml-common.h static_asserts)
GGML_TYPE_SIZES: dict[str, tuple[int, int]] = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2),
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176),
    "Q6_K": (256, 210),
}
#: tensor_type_fallback: a row that doesn't divide into the block -> this type (then F16)
GGML_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
                 "Q6_K": "Q8_0"}
_MORE_BITS = (("more_bits", "Q6_K"),)
_Q2_K_V = (("gqa>=4", "Q4_K"), ("always", "Q3_K"))
#: the K-quant mixes of llama_tensor_get_type: format -> tensor category -> (condition,
#: type) pairs, the first whose condition holds wins (none: the format's default type).
#: Conditions: ``always``; ``gqa>=4`` (n_head / n_head_kv >= 4); ``more_bits``
#: (``use_more_bits``: the first and last eighth of the layers and every third between)
MIXES: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {
    "q2_k": {"attn_v": _Q2_K_V, "attn_qkv": _Q2_K_V, "ffn_down": (("always", "Q3_K"),),
             "attn_output": (("always", "Q3_K"),)},
    "q4_k_m": {"attn_v": _MORE_BITS, "attn_qkv": _MORE_BITS, "ffn_down": _MORE_BITS},
    "q5_k_m": {"attn_v": _MORE_BITS, "attn_qkv": _MORE_BITS, "ffn_down": _MORE_BITS},
}


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's ``use_more_bits(i_layer, n_layers)``."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def ggml_fallback(t: str, ncols: int) -> str:
    """``t``, or llama.cpp's fallback when ``ncols`` doesn't divide into its block."""
    blck = GGML_TYPE_SIZES[t][0]
    if ncols % blck == 0:
        return t
    r = GGML_FALLBACK.get(t, t)
    if ncols % GGML_TYPE_SIZES[r][0]:
        r = "F16"
    return r


def _holds(condition: str, spec: LLMSpec, t: WeightTensor) -> bool:
    if condition == "always":
        return True
    if condition == "gqa>=4":
        return spec.num_heads // spec.num_kv_heads >= 4
    if condition == "more_bits":
        return use_more_bits(t.layer, spec.num_layers)
    raise ValueError(f"unknown llama.cpp mix condition {condition!r}")


#: the 8-expert rules of llama_tensor_get_type (``n_expert == 8``): category -> the type it
#: takes whatever the mix says, or {format: type} for the formats the rule names
EIGHT_EXPERTS: dict[str, Any] = {"attn_v": "Q8_0", "attn_k": "Q8_0",
                                 "attn_output": {"q2_k": "Q5_K", "q4_k_m": "Q5_K"}}


def tensor_type(spec: LLMSpec, f: FormatInfo, t: WeightTensor) -> str:
    """The ggml type llama.cpp's quantizer gives tensor ``t`` in format ``f``."""
    if not t.is_matrix or not t.name.endswith("weight") or "_norm.weight" in t.name:
        return "F32"  # not quantized: kept as converted (1-D tensors are F32)
    if t.category == "ffn_gate_inp":
        return "F32"  # the MoE router: converted F32, never quantized
    default = f.ggml_type or "F32"
    if default in ("F32", "F16", "BF16"):
        return default
    new, cat, nx = default, t.category, t.ne[0]
    if cat == "output" or (spec.tie_word_embeddings and cat == "token_embd"):
        if nx % GGML_TYPE_SIZES[new][0]:
            new = "Q8_0"
        elif new != "Q8_0":
            new = "Q6_K"
    else:
        for condition, ggml_type in MIXES.get(f.name, {}).get(cat, ()):
            if _holds(condition, spec, t):
                new = ggml_type
                break
        if spec.num_experts == 8 and cat in EIGHT_EXPERTS:
            rule = EIGHT_EXPERTS[cat]
            new = rule.get(f.name, new) if isinstance(rule, dict) else rule
    return ggml_fallback(new, nx)


def ggml_tensor_bytes(t: WeightTensor, ggml_type: str) -> int:
    """Bytes of tensor ``t``'s data stored as ``ggml_type``."""
    blck, size = GGML_TYPE_SIZES[ggml_type]
    rows = t.numel // t.ne[0]
    return rows * (t.ne[0] // blck) * size


def ggml_storage(tensors: Sequence[WeightTensor], type_of) -> dict[str, tuple[int, str]]:
    """name -> (bytes, ggml type) of every tensor stored as ``type_of(tensor)`` says."""
    out = {}
    for t in tensors:
        ggml_type = type_of(t)
        out[t.name] = (ggml_tensor_bytes(t, ggml_type), ggml_type)
    return out


@dataclass(frozen=True)
class GGUFLayout:
    """A llama.cpp format as the quantizer writes it into a GGUF (see the module docstring)."""

    def storage(self, spec: LLMSpec, tensors: Sequence[WeightTensor], fmt: FormatInfo,
                device: str = "cpu") -> dict[str, tuple[int, str]]:
        return ggml_storage(tensors, lambda t: tensor_type(spec, fmt, t))

    def file_bytes(self, spec: LLMSpec, tensors: Sequence[WeightTensor],
                   fmt: FormatInfo) -> tuple[int, str] | None:
        sizes = {name: b for name, (b, _) in self.storage(spec, tensors, fmt).items()}
        return (_file_bytes(spec, tensors, sizes, None),
                "GGUF size with an approximate vocabulary metadata allowance")


GGUF_LAYOUT = GGUFLayout()


def _ll(name: str, ftype: int, ggml_type: str, bits: float, desc: str) -> FormatInfo:
    return FormatInfo(name=name, family="llama_cpp", bits=bits, kv_dtype="f16",
                      compute="fp16" if ggml_type in ("F16", "BF16") else
                      "fp32" if ggml_type == "F32" else "int8",
                      description=desc, ftype=ftype, ggml_type=ggml_type, backend="llama_cpp",
                      layout=GGUF_LAYOUT)


#: every llama.cpp format edgeprof knows, by name (``ftype``: llama.cpp's llama_ftype)
LLAMA_CPP_FORMATS: dict[str, FormatInfo] = {f.name: f for f in (
    _ll("q2_k", 10, "Q2_K", 2.625, "llama.cpp Q2_K mix (attn_v Q3_K/Q4_K, ffn_down and "
        "attn_output Q3_K, output Q6_K)"),
    _ll("q4_0", 2, "Q4_0", 4.5, "llama.cpp Q4_0 (output Q6_K)"),
    _ll("q4_k_m", 15, "Q4_K", 4.5, "llama.cpp Q4_K_M mix (half of attn_v and ffn_down Q6_K, "
        "output Q6_K)"),
    _ll("q5_k_m", 17, "Q5_K", 5.5, "llama.cpp Q5_K_M mix (half of attn_v and ffn_down Q6_K, "
        "output Q6_K)"),
    _ll("q6_k", 18, "Q6_K", 6.5625, "llama.cpp Q6_K"),
    _ll("q8_0", 7, "Q8_0", 8.5, "llama.cpp Q8_0"),
    _ll("f16", 1, "F16", 16, "llama.cpp F16 (1-D tensors F32)"),
    _ll("f32", 0, "F32", 32, "llama.cpp F32"),
    # llama.cpp's bf16 file type (not a format the llama_cpp backend makes)
    _ll("bf16_gguf", 32, "BF16", 16, "llama.cpp BF16"),
)}
#: the formats the llama_cpp backend makes (its quantizer's targets), in its order
MADE = ("q2_k", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16", "f32")


# ------------------------------------------------------------------------ GGUF sizes
def _as_spec(spec: Any) -> LLMSpec:
    return getattr(spec, "spec", spec)  # an LLMModel's spec, or the spec itself


def _format(fmt: str | FormatInfo) -> FormatInfo:
    if isinstance(fmt, FormatInfo):
        if fmt.ggml_type is None:
            raise UserError(f"format '{fmt.name}' is not a llama.cpp format; llama.cpp formats: "
                            f"{', '.join(MADE)}")
        return fmt
    if fmt not in LLAMA_CPP_FORMATS:
        raise UnknownNameError("llama.cpp format", str(fmt), LLAMA_CPP_FORMATS)
    return LLAMA_CPP_FORMATS[fmt]


def gguf_tensor_types(spec: LLMSpec, fmt: str | FormatInfo) -> dict[str, str]:
    """llama.cpp tensor name -> ggml type name (``Q4_K``, ``F32`` ...) in the file llama.cpp's
    quantizer writes for ``fmt`` (from an F32/F16 GGUF with 1-D tensors in F32)."""
    spec, f = _as_spec(spec), _format(fmt)
    return {t.name: tensor_type(spec, f, t) for t in tensors(spec)}


def gguf_tensor_bytes(spec: LLMSpec, fmt: str | FormatInfo) -> dict[str, int]:
    """llama.cpp tensor name -> bytes of its data in the GGUF (no alignment padding)."""
    spec = _as_spec(spec)
    types = gguf_tensor_types(spec, fmt)
    return {t.name: ggml_tensor_bytes(t, types[t.name]) for t in tensors(spec)}


def gguf_metadata_bytes(spec: LLMSpec) -> int:
    """An allowance for a GGUF's key/value metadata: the vocabulary at
    :data:`GGUF_VOCAB_BYTES_PER_TOKEN` plus :data:`GGUF_BASE_METADATA_BYTES` (approximate)."""
    return GGUF_BASE_METADATA_BYTES + GGUF_VOCAB_BYTES_PER_TOKEN * _as_spec(spec).vocab_size


def _file_bytes(spec: LLMSpec, ts: Sequence[WeightTensor], sizes: dict[str, int],
                metadata_bytes: int | None) -> int:
    meta = gguf_metadata_bytes(spec) if metadata_bytes is None else metadata_bytes
    table = sum(8 + len(t.name) + 4 + 8 * len(t.ne) + 4 + 8 for t in ts)
    head = 4 + 4 + 8 + 8 + meta + table
    pad = lambda n: -(-n // GGUF_ALIGNMENT) * GGUF_ALIGNMENT  # noqa: E731
    return pad(head) + sum(pad(n) for n in sizes.values())


def gguf_file_bytes(spec: LLMSpec, fmt: str | FormatInfo, *,
                    metadata_bytes: int | None = None) -> int:
    """The GGUF file's size: header, metadata (``metadata_bytes``, else the allowance of
    :func:`gguf_metadata_bytes`), tensor table, and every tensor's data padded to 32 bytes."""
    spec = _as_spec(spec)
    return _file_bytes(spec, tensors(spec), gguf_tensor_bytes(spec, fmt), metadata_bytes)


__all__ = ["EIGHT_EXPERTS", "GGML_FALLBACK", "GGML_TYPE_SIZES", "GGUFLayout", "GGUF_ALIGNMENT",
           "GGUF_BASE_METADATA_BYTES", "GGUF_LAYOUT", "GGUF_VOCAB_BYTES_PER_TOKEN",
           "LLAMA_CPP_FORMATS", "MADE", "MIXES", "ggml_fallback",
           "ggml_tensor_bytes", "gguf_file_bytes", "gguf_metadata_bytes", "gguf_tensor_bytes",
           "gguf_tensor_types", "tensor_type", "use_more_bits"]

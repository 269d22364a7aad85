"""Analytic estimate of a generative (decoder-only) model: no runtime, no weight.

From an :class:`~edgeprof.core.llm.LLMSpec` alone it gives the parameter count, the bytes of
each weight format, the KV cache, per-layer and per-stage MACs and bytes, the roofline of
prefill and decode on a target, and whether the model fits the target's RAM.

Weight formats (:data:`FORMATS`, and per backend :func:`formats_for`):

* **llama.cpp** (``q2_k q4_0 q4_k_m q5_k_m q6_k q8_0 f16 f32 bf16``): the tensor type of
  every tensor is chosen as llama.cpp's quantizer chooses it (``llama_tensor_get_type`` in
  ``src/llama-quant.cpp`` of the llama.cpp vendored by llama-cpp-python 0.3.36): the output
  tensor (and a tied token embedding) in Q6_K, or Q8_0 when its rows don't divide into 256;
  Q4_K_M/Q5_K_M put half of ``attn_v``/``ffn_down`` (``use_more_bits``) in Q6_K; Q2_K puts
  ``attn_v`` in Q4_K (GQA >= 4) or Q3_K, ``ffn_down``/``attn_output`` in Q3_K; a row that
  doesn't divide into the type's block falls back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
  Q2_K/Q3_K -> Q4_0, then F16); 1-D tensors and norms stay F32. Block sizes are ggml's
  (``ggml-common.h``: Q4_0 18 B/32, Q8_0 34/32, Q2_K 84/256, Q3_K 110/256, Q4_K 144/256,
  Q5_K 176/256, Q6_K 210/256, Q5_0 22/32, Q5_1 24/32). :func:`weight_bytes` is the tensor
  data; :func:`gguf_file_bytes` adds the GGUF header, the tensor table, 32-byte alignment and
  an allowance for the vocabulary metadata (:data:`GGUF_VOCAB_BYTES_PER_TOKEN`, approximate:
  a real tokenizer's strings and merges vary).
* **ONNX Runtime GenAI** (``int4 int8 fp32``): its model builder (onnxruntime-genai 0.18,
  ``models/builders/base.py``): every MatMul becomes ``MatMulNBits`` with block size 32,
  symmetric (no zero points), scales in the I/O dtype (fp32 on CPU, fp16 on CUDA), K padded
  to whole blocks; the embedding stays a float Gather in the I/O dtype, except int4 with
  tied embeddings, where the embedding reads the LM head's int4 blocks (GatherBlockQuantized;
  counted once); norms and biases in the I/O dtype.
* **OpenVINO GenAI** (``int4 int8 fp16``): NNCF weight compression as optimum-intel applies it
  by default: int4 asymmetric, group size 128 (u4 weights, an f16 scale and a u4 zero point
  per group), with the embedding and the last MatMul (LM head) in the backup precision
  INT8_ASYM (per output channel: u8 weights, f16 scale, u8 zero point), as are MatMuls whose
  input size does not divide into 128; ``int8`` is INT8_ASYM per channel everywhere.
* **float** (``fp32 bf16 fp16``): every parameter in that dtype; a tied embedding once.

The KV cache holds, per token and layer, K and V for the KV heads (``2 x kv_heads x
head_dim`` values); a sliding-window layer holds at most its window.

Timings follow llama-bench: ``pp P`` evaluates P prompt tokens after ``depth`` cached tokens;
``tg G`` generates G tokens one at a time after ``depth`` cached tokens. Decode bytes per
token = every weight the token reads in the format (LM head included, the embedding lookup
not; norms and biases included) + the KV cache read at that depth (the mean over the G
tokens). Prefill reads the weights once per micro-batch of :data:`UBATCH` tokens and
computes logits for the last prompt token only (llama.cpp's default).

Figures carry provenance ``analytic``; roofline times (peak figures, uncalibrated) are
``estimated``. A calibrated prediction is :mod:`edgeprof.profilers.predict.llm`'s job.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from edgeprof.core.errors import UnknownNameError, UserError
from edgeprof.core.llm import LLMModel, LLMSpec

#: prompt tokens llama.cpp evaluates per micro-batch (n_ubatch default): weights are read
#: once per micro-batch during prefill
UBATCH = 512
#: runtime allowance in the fit (process, runtime libraries, scratch), besides the compute
#: buffer :func:`runtime_overhead_bytes` adds and the KV cache
RUNTIME_BASE_BYTES = 256 * 1024 ** 2
#: share of a target's RAM left to the operating system and other processes
OS_RESERVE_FRACTION = 0.10
#: GGUF vocabulary metadata per token (string + length, token type, score); approximate
GGUF_VOCAB_BYTES_PER_TOKEN = 24
#: other GGUF metadata (general.*, the architecture's hyper-parameters); approximate
GGUF_BASE_METADATA_BYTES = 4096
GGUF_ALIGNMENT = 32

# ------------------------------------------------------------------------ ggml types
#: ggml type -> (elements per block, bytes per block) (ggml-common.h static_asserts)
GGML_TYPE_SIZES: dict[str, tuple[int, int]] = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2),
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176),
    "Q6_K": (256, 210),
}
#: tensor_type_fallback: a row that doesn't divide into the block -> this type (then F16)
_GGML_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
                  "Q6_K": "Q8_0"}
#: KV cache dtype -> bytes per value (llama.cpp's quantized caches at their block rate)
KV_DTYPE_BYTES: dict[str, Fraction] = {
    "f32": Fraction(4), "fp32": Fraction(4), "f16": Fraction(2), "fp16": Fraction(2),
    "bf16": Fraction(2), "q8_0": Fraction(34, 32), "q4_0": Fraction(18, 32),
    "q5_0": Fraction(22, 32), "u8": Fraction(1), "int8": Fraction(1),
}


@dataclass(frozen=True)
class FormatInfo:
    """A weight format: how each tensor is stored and what it computes in."""

    name: str
    family: str  # llama_cpp | genai | float
    bits: float  # nominal bits per weight of the format's main type
    kv_dtype: str  # the runtime's default KV cache dtype
    compute: str  # compute precision whose peak bounds prefill (fp32 when the target lacks it)
    description: str
    ftype: int | None = None  # llama.cpp's llama_ftype
    ggml_type: str | None = None  # llama.cpp's default tensor type for the ftype
    weight_bits: int | None = None  # group-wise: 4 | 8
    group_size: int | None = None  # group-wise: 0 = one group per output channel
    symmetric: bool = True
    backend: str | None = None  # the runtime whose layout this is (None: generic)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ll(name, ftype, ggml_type, bits, desc):
    return FormatInfo(name=name, family="llama_cpp", bits=bits, kv_dtype="f16",
                      compute="fp16" if ggml_type in ("F16", "BF16") else
                      "fp32" if ggml_type == "F32" else "int8",
                      description=desc, ftype=ftype, ggml_type=ggml_type, backend="llama_cpp")


#: every format by name (``int4``/``int8`` here are ONNX Runtime GenAI's; OpenVINO GenAI's
#: differ: see :func:`formats_for`)
FORMATS: dict[str, FormatInfo] = {f.name: f for f in (
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
    FormatInfo("int4", "genai", 5.0, "fp32", "int8",
               "ONNX Runtime GenAI builder int4: MatMulNBits block 32 symmetric, fp32 scales on "
               "CPU; embedding float unless tied", weight_bits=4, group_size=32,
               backend="onnxruntime_genai"),
    FormatInfo("int8", "genai", 9.0, "fp32", "int8",
               "ONNX Runtime GenAI builder int8: MatMulNBits block 32 symmetric, fp32 scales on "
               "CPU; embedding float", weight_bits=8, group_size=32,
               backend="onnxruntime_genai"),
    FormatInfo("fp32", "float", 32, "fp32", "fp32", "every weight fp32"),
    FormatInfo("bf16", "float", 16, "bf16", "bf16", "every weight bf16"),
    FormatInfo("fp16", "float", 16, "fp16", "fp16", "every weight fp16"),
)}
#: llama.cpp's bf16 file type (not a default format of the llama_cpp backend)
FORMATS["bf16_gguf"] = _ll("bf16_gguf", 32, "BF16", 16, "llama.cpp BF16")

_OPENVINO = {f.name: f for f in (
    FormatInfo("int4", "genai", 4.125, "f16", "int8",
               "OpenVINO GenAI / NNCF INT4_SYM, group 128 halved until it divides every "
               "matrix's input width (f16 scale per group, no zero point), as the "
               "openvino_genai backend builds it; embedding and LM head INT8_ASYM per channel "
               "(NNCF's default)", weight_bits=4, group_size=128, symmetric=True,
               backend="openvino_genai"),
    FormatInfo("int8", "genai", 8.0, "f16", "int8",
               "OpenVINO GenAI / NNCF INT8_ASYM per output channel (f16 scale + u8 zero point)",
               weight_bits=8, group_size=0, symmetric=False, backend="openvino_genai"),
    FormatInfo("fp16", "float", 16, "f16", "fp16", "OpenVINO IR with fp16 weights",
               backend="openvino_genai"),
)}
#: the formats each generative backend makes
BACKEND_FORMATS: dict[str, tuple[str, ...]] = {
    "llama_cpp": ("q2_k", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16", "f32"),
    "onnxruntime_genai": ("int4", "int8", "fp32"),
    "openvino_genai": ("int4", "int8", "fp16"),
    "transformers": ("fp32", "bf16"),
}


def formats_for(backend: str | None) -> dict[str, FormatInfo]:
    """The formats ``backend`` makes, by name (every format for ``None``)."""
    if backend is None:
        return dict(FORMATS)
    if backend not in BACKEND_FORMATS:
        raise UnknownNameError("generative backend", backend, BACKEND_FORMATS)
    table = {**FORMATS, **_OPENVINO} if backend == "openvino_genai" else FORMATS
    out = {}
    for n in BACKEND_FORMATS[backend]:
        f = table[n]
        out[n] = f if f.backend == backend else FormatInfo(**{**f.to_dict(), "backend": backend})
    return out


def resolve_format(fmt: str | FormatInfo, backend: str | None = None) -> FormatInfo:
    """A format name (for ``backend`` when given) -> :class:`FormatInfo`."""
    if isinstance(fmt, FormatInfo):
        return fmt
    table = formats_for(backend) if backend else FORMATS
    if fmt not in table:
        what = f"format for backend '{backend}'" if backend else "weight format"
        raise UnknownNameError(what, str(fmt), table)
    return table[fmt]


# ------------------------------------------------------------------------ tensors
@dataclass(frozen=True)
class TensorInfo:
    """One tensor under llama.cpp's name; ``ne`` in ggml order (input size first)."""

    name: str
    kind: str  # embedding | attention | mlp | norm | lm_head
    layer: int | None
    ne: tuple[int, ...]
    category: str  # llama.cpp's tensor category (token_embd, output, attn_v, ffn_down ...)

    @property
    def numel(self) -> int:
        return math.prod(self.ne)

    @property
    def is_matrix(self) -> bool:
        return len(self.ne) >= 2


@lru_cache(maxsize=256)
def tensors(spec: LLMSpec) -> tuple[TensorInfo, ...]:
    """Every stored tensor of ``spec`` in llama.cpp's names and order (by layer, then name);
    a tied LM head is not a tensor of its own."""
    h, hd = spec.hidden_size, spec.head_dim
    q_out, kv_out = spec.num_heads * hd, spec.num_kv_heads * hd
    ff = spec.intermediate_size
    gemma_post = spec.family in ("gemma2", "gemma3_text")
    out = [TensorInfo("token_embd.weight", "embedding", None, (h, spec.vocab_size),
                      "token_embd"),
           TensorInfo("output_norm.weight", "norm", None, (h,), "other")]
    if not spec.tie_word_embeddings:
        out.append(TensorInfo("output.weight", "lm_head", None, (h, spec.vocab_size), "output"))
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        layer = [TensorInfo(b + "attn_norm.weight", "norm", i, (h,), "other"),
                 TensorInfo(b + "attn_output.weight", "attention", i, (q_out, h),
                            "attn_output"),
                 TensorInfo(b + "ffn_norm.weight", "norm", i, (h,), "other"),
                 TensorInfo(b + "ffn_down.weight", "mlp", i, (ff, h), "ffn_down")]
        if spec.fused_qkv:
            layer.append(TensorInfo(b + "attn_qkv.weight", "attention", i,
                                    (h, q_out + 2 * kv_out), "attn_qkv"))
            if spec.qkv_bias:
                layer.append(TensorInfo(b + "attn_qkv.bias", "attention", i,
                                        (q_out + 2 * kv_out,), "other"))
        else:
            for n, o in (("q", q_out), ("k", kv_out), ("v", kv_out)):
                layer.append(TensorInfo(f"{b}attn_{n}.weight", "attention", i, (h, o),
                                        f"attn_{n}"))
                if spec.qkv_bias:
                    layer.append(TensorInfo(f"{b}attn_{n}.bias", "attention", i, (o,), "other"))
        if spec.fused_gate_up:
            layer.append(TensorInfo(b + "ffn_up.weight", "mlp", i, (h, 2 * ff), "ffn_up"))
        else:
            layer += [TensorInfo(b + "ffn_gate.weight", "mlp", i, (h, ff), "ffn_gate"),
                      TensorInfo(b + "ffn_up.weight", "mlp", i, (h, ff), "ffn_up")]
        if gemma_post:
            layer += [TensorInfo(b + "post_attention_norm.weight", "norm", i, (h,), "other"),
                      TensorInfo(b + "post_ffw_norm.weight", "norm", i, (h,), "other")]
        if spec.family == "gemma3_text":
            layer += [TensorInfo(b + "attn_q_norm.weight", "norm", i, (hd,), "other"),
                      TensorInfo(b + "attn_k_norm.weight", "norm", i, (hd,), "other")]
        out += sorted(layer, key=lambda t: t.name)
    return tuple(out)


def parameter_count(spec: LLMSpec) -> int:
    """Every parameter, a tied embedding once (the published convention)."""
    return sum(t.numel for t in tensors(_spec(spec)))


# ------------------------------------------------------------------------ llama.cpp types
def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _ggml_fallback(t: str, ncols: int) -> str:
    blck = GGML_TYPE_SIZES[t][0]
    if ncols % blck == 0:
        return t
    r = _GGML_FALLBACK.get(t, t)
    if ncols % GGML_TYPE_SIZES[r][0]:
        r = "F16"
    return r


def _llama_cpp_type(spec: LLMSpec, f: FormatInfo, t: TensorInfo) -> str:
    if not t.is_matrix or not t.name.endswith("weight") or "_norm.weight" in t.name:
        return "F32"  # not quantized: kept as converted (1-D tensors are F32)
    default = f.ggml_type or "F32"
    if default in ("F32", "F16", "BF16"):
        return default
    new, cat, nx, n = default, t.category, t.ne[0], spec.num_layers
    name = f.name
    if cat == "output" or (spec.tie_word_embeddings and cat == "token_embd"):
        if nx % GGML_TYPE_SIZES[new][0]:
            new = "Q8_0"
        elif new != "Q8_0":
            new = "Q6_K"
    elif cat == "token_embd":
        pass
    elif cat in ("attn_v", "attn_qkv"):
        if name == "q2_k":
            new = "Q4_K" if spec.num_heads // spec.num_kv_heads >= 4 else "Q3_K"
        elif name in ("q4_k_m", "q5_k_m") and _use_more_bits(t.layer, n):
            new = "Q6_K"
    elif cat == "ffn_down":
        if name == "q2_k":
            new = "Q3_K"
        elif name in ("q4_k_m", "q5_k_m") and _use_more_bits(t.layer, n):
            new = "Q6_K"
    elif cat == "attn_output" and name == "q2_k":
        new = "Q3_K"
    return _ggml_fallback(new, nx)


def gguf_tensor_types(spec: LLMSpec, fmt: str | FormatInfo) -> dict[str, str]:
    """llama.cpp tensor name -> ggml type name (``Q4_K``, ``F32`` ...) in the file llama.cpp's
    quantizer writes for ``fmt`` (from an F32/F16 GGUF with 1-D tensors in F32)."""
    spec, f = _spec(spec), resolve_format(fmt)
    if f.family != "llama_cpp":
        raise UserError(f"format '{f.name}' is not a llama.cpp format; llama.cpp formats: "
                        f"{', '.join(BACKEND_FORMATS['llama_cpp'])}")
    return {t.name: _llama_cpp_type(spec, f, t) for t in tensors(spec)}


def ggml_tensor_bytes(t: TensorInfo, ggml_type: str) -> int:
    blck, size = GGML_TYPE_SIZES[ggml_type]
    rows = t.numel // t.ne[0]
    return rows * (t.ne[0] // blck) * size


def gguf_tensor_bytes(spec: LLMSpec, fmt: str | FormatInfo) -> dict[str, int]:
    """llama.cpp tensor name -> bytes of its data in the GGUF (no alignment padding)."""
    spec = _spec(spec)
    types = gguf_tensor_types(spec, fmt)
    return {t.name: ggml_tensor_bytes(t, types[t.name]) for t in tensors(spec)}


def gguf_metadata_bytes(spec: LLMSpec) -> int:
    """An allowance for a GGUF's key/value metadata: the vocabulary at
    :data:`GGUF_VOCAB_BYTES_PER_TOKEN` plus :data:`GGUF_BASE_METADATA_BYTES` (approximate)."""
    return GGUF_BASE_METADATA_BYTES + GGUF_VOCAB_BYTES_PER_TOKEN * _spec(spec).vocab_size


def gguf_file_bytes(spec: LLMSpec, fmt: str | FormatInfo, *,
                    metadata_bytes: int | None = None) -> int:
    """The GGUF file's size: header, metadata (``metadata_bytes``, else the allowance of
    :func:`gguf_metadata_bytes`), tensor table, and every tensor's data padded to 32 bytes."""
    spec = _spec(spec)
    sizes = gguf_tensor_bytes(spec, fmt)
    meta = gguf_metadata_bytes(spec) if metadata_bytes is None else metadata_bytes
    table = sum(8 + len(t.name) + 4 + 8 * len(t.ne) + 4 + 8 for t in tensors(spec))
    head = 4 + 4 + 8 + 8 + meta + table
    pad = lambda n: -(-n // GGUF_ALIGNMENT) * GGUF_ALIGNMENT  # noqa: E731
    return pad(head) + sum(pad(n) for n in sizes.values())


# ------------------------------------------------------------------------ weight bytes
_FLOAT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def _groupwise_bytes(t: TensorInfo, bits: int, group: int, scale_bytes: int,
                     zp_bits: int) -> int:
    """``rows x ceil(K / group)`` groups of ``group`` values at ``bits`` plus a scale (and a
    zero point of ``zp_bits``) per group; ``group`` 0 = one group per row."""
    k = t.ne[0]
    rows = t.numel // k
    g = group or k
    blocks = -(-k // g)
    per_row = blocks * (g * bits // 8 + scale_bytes) + -(-blocks * zp_bits // 8)
    return rows * per_row


def _storage(spec: LLMSpec, f: FormatInfo, device: str) -> dict[str, tuple[int, str]]:
    """tensor name (plus ``output.weight`` for a tied head stored apart) -> (bytes, type)."""
    ts = tensors(spec)
    if f.family == "llama_cpp":
        types = gguf_tensor_types(spec, f)
        return {t.name: (ggml_tensor_bytes(t, types[t.name]), types[t.name]) for t in ts}
    if f.family == "float":
        b = _FLOAT_BYTES[f.name]
        return {t.name: (t.numel * b, f.name) for t in ts}
    out: dict[str, tuple[int, str]] = {}
    head = TensorInfo("output.weight", "lm_head", None, (spec.hidden_size, spec.vocab_size),
                      "output")
    if f.backend == "openvino_genai":
        # the group the backend asks NNCF for (one definition: the backend's)
        from edgeprof.backends.openvino_genai import int4_group_size

        g = int4_group_size(spec)
        i8 = lambda t: (_groupwise_bytes(t, 8, 0, 2, 8), "int8_asym")  # noqa: E731
        for t in ts:
            if not t.is_matrix:
                out[t.name] = (t.numel * 4, "f32")
            elif f.weight_bits == 8 or t.kind in ("embedding", "lm_head") or t.ne[0] % g:
                out[t.name] = i8(t)
            else:
                out[t.name] = (_groupwise_bytes(t, 4, g, 2, 0), f"int4_sym_g{g}")
        return out
    # ONNX Runtime GenAI builder: io dtype fp32 on CPU, fp16 on CUDA
    io = 2 if device == "cuda" else 4
    bits = f.weight_bits or 4
    zp = 0 if f.symmetric else (4 if bits == 4 else 8)
    q = lambda t: (_groupwise_bytes(t, bits, f.group_size or 32, io, zp),  # noqa: E731
                   f"int{bits}_b{f.group_size}")
    tied_int4 = spec.tie_word_embeddings and bits == 4
    for t in ts:
        if t.kind == "embedding":
            out[t.name] = q(head) if tied_int4 else (t.numel * io, "fp32" if io == 4 else "fp16")
        elif t.is_matrix:
            out[t.name] = q(t)
        else:
            out[t.name] = (t.numel * io, "fp32" if io == 4 else "fp16")
    if spec.tie_word_embeddings and not tied_int4:
        out["output.weight"] = q(head)  # int8: a quantized head beside the float embedding
    return out


def weight_bytes(spec: LLMSpec, fmt: str | FormatInfo, *, backend: str | None = None,
                 device: str = "cpu") -> int:
    """Bytes of every stored weight of ``spec`` in ``fmt`` (llama.cpp: the GGUF's tensor data;
    GenAI: the initializers; a shared tied embedding once)."""
    spec = _spec(spec)
    return sum(b for b, _ in _storage(spec, resolve_format(fmt, backend), device).values())


# ------------------------------------------------------------------------ KV cache
def _kv_bytes(kv_dtype: str) -> Fraction:
    if kv_dtype not in KV_DTYPE_BYTES:
        raise UnknownNameError("KV cache dtype", str(kv_dtype), KV_DTYPE_BYTES)
    return KV_DTYPE_BYTES[kv_dtype]


def _layer_kv_per_token(spec: LLMSpec, kv_dtype: str) -> Fraction:
    return 2 * spec.num_kv_heads * spec.head_dim * _kv_bytes(kv_dtype)


def _window(spec: LLMSpec, i: int) -> int | None:
    return spec.sliding_window if spec.layer_slides(i) else None


def kv_cache_bytes_per_token(spec: LLMSpec, kv_dtype: str = "f16") -> int:
    """KV bytes one token adds over all layers (before any sliding window fills)."""
    spec = _spec(spec)
    return math.ceil(spec.num_layers * _layer_kv_per_token(spec, kv_dtype))


def kv_cache_bytes(spec: LLMSpec, context: int, kv_dtype: str = "f16") -> int:
    """KV bytes for ``context`` tokens; a sliding-window layer holds at most its window."""
    spec = _spec(spec)
    per = _layer_kv_per_token(spec, kv_dtype)
    total = Fraction(0)
    for i in range(spec.num_layers):
        w = _window(spec, i)
        total += per * (min(context, w) if w else context)
    return math.ceil(total)


def kv_cache_curve(spec: LLMSpec, kv_dtype: str = "f16",
                   points: int = 24) -> list[dict[str, int]]:
    """KV bytes against context, from 128 tokens doubling up to the model's maximum."""
    spec = _spec(spec)
    ctxs, c = [], 128
    while c < spec.max_position_embeddings and len(ctxs) < points - 1:
        ctxs.append(c)
        c *= 2
    ctxs.append(spec.max_position_embeddings)
    return [{"context": n, "bytes": kv_cache_bytes(spec, n, kv_dtype)} for n in ctxs]


def _sum_min(a: int, b: int, w: int | None) -> int:
    """sum of min(c, w) for c in a..b (inclusive)."""
    if b < a:
        return 0
    if not w or b <= w:
        return (a + b) * (b - a + 1) // 2
    if a > w:
        return w * (b - a + 1)
    return (a + w) * (w - a + 1) // 2 + w * (b - w)


# ------------------------------------------------------------------------ fit
def runtime_overhead_bytes(spec: LLMSpec, prompt_tokens: int = UBATCH) -> int:
    """The fit's runtime allowance: :data:`RUNTIME_BASE_BYTES` plus a compute buffer of fp32
    activations for one micro-batch (``4 B x min(P, UBATCH) x (3 x intermediate + 4 x hidden
    + vocab)``), the order of llama.cpp's CPU compute buffer."""
    spec = _spec(spec)
    n = min(max(prompt_tokens, 1), UBATCH)
    return RUNTIME_BASE_BYTES + 4 * n * (3 * spec.intermediate_size + 4 * spec.hidden_size
                                         + spec.vocab_size)


def usable_ram_bytes(ram_bytes: float) -> int:
    """RAM left to the model after :data:`OS_RESERVE_FRACTION` for the OS and others."""
    return int(ram_bytes * (1 - OS_RESERVE_FRACTION))


def max_context_tokens(spec: LLMSpec, fmt: str | FormatInfo, ram_bytes: float,
                       kv_dtype: str | None = None, *, backend: str | None = None,
                       device: str = "cpu", prompt_tokens: int = UBATCH) -> int:
    """The longest context (tokens, at most the model's maximum) whose weights + KV cache +
    runtime allowance fit in ``ram_bytes`` after the OS reserve; 0 if the weights don't."""
    spec = _spec(spec)
    f = resolve_format(fmt, backend)
    kv = kv_dtype or f.kv_dtype
    free = (usable_ram_bytes(ram_bytes) - weight_bytes(spec, f, device=device)
            - runtime_overhead_bytes(spec, prompt_tokens))
    if free < kv_cache_bytes(spec, 1, kv):
        return 0
    lo, hi = 1, spec.max_position_embeddings
    if kv_cache_bytes(spec, hi, kv) <= free:
        return hi
    while hi - lo > 1:  # kv_cache_bytes is monotone in the context
        mid = (lo + hi) // 2
        if kv_cache_bytes(spec, mid, kv) <= free:
            lo = mid
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------------ estimate
def _figure(value: Any, unit: str, provenance: str = "analytic", **extra: Any) -> dict:
    return {"value": value, "unit": unit, "provenance": provenance, **extra}


@dataclass
class LLMEstimate:
    """The analytic estimate of one (model, format, shape[, target]). See :meth:`to_dict`."""

    model: str
    format: str
    backend: str | None
    format_info: FormatInfo
    kv_dtype: str
    prompt_tokens: int
    gen_tokens: int
    depth: int
    context_tokens: int
    device: str
    figures: dict[str, dict[str, Any]]
    layers: list[dict[str, Any]]
    stages: dict[str, dict[str, Any]]
    kv_curve: list[dict[str, int]]
    fit: dict[str, Any] | None = None
    target: str | None = None
    notes: list[str] = field(default_factory=list)

    def figure(self, name: str) -> Any:
        return self.figures[name]["value"]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "edgeprof.llm_estimate/1", "model": self.model,
                "format": self.format, "backend": self.backend,
                "format_info": self.format_info.to_dict(), "kv_dtype": self.kv_dtype,
                "prompt_tokens": self.prompt_tokens, "gen_tokens": self.gen_tokens,
                "depth": self.depth, "context_tokens": self.context_tokens,
                "device": self.device, "target": self.target, "figures": self.figures,
                "layers": self.layers, "stages": self.stages, "kv_curve": self.kv_curve,
                "fit": self.fit, "notes": list(self.notes)}


def _spec(model: LLMSpec | LLMModel | str) -> LLMSpec:
    if isinstance(model, LLMSpec):
        return model
    if isinstance(model, LLMModel):
        return model.spec
    from edgeprof.core.llm import LLM_PREFIX
    from edgeprof.zoo.llm import preset_names, resolve_llm

    s = str(model)
    if s in preset_names():  # a bare preset name
        s = LLM_PREFIX + s
    return resolve_llm(s).spec


def _processor(target: Any, device: str) -> tuple[float, dict[str, float], float, str]:
    """(bandwidth B/s, {precision: MAC/s}, RAM bytes, what was used) of ``device``."""
    ram = float(target.ram.value)
    if hasattr(target, "processor_figures"):
        bw, peaks, _ = target.processor_figures(device)
        return bw, peaks, ram, f"{target.id} {device}"
    peaks = {k: float(q.value) for k, q in target.peak_compute.items()}
    return float(target.bandwidth.value), peaks, ram, f"{target.id} (top-level figures)"


def _roofline(macs: float, nbytes: float, peak: float | None, bw: float) -> dict[str, Any]:
    t_mem = nbytes / bw
    t_cmp = macs / peak if peak else 0.0
    return {"compute_s": t_cmp, "memory_s": t_mem, "time_s": max(t_mem, t_cmp),
            "bound": "compute" if t_cmp > t_mem else "memory"}


def estimate_llm(model: LLMSpec | LLMModel | str, fmt: str | FormatInfo, *,
                 prompt_tokens: int = 512, gen_tokens: int = 128, depth: int = 0,
                 kv_dtype: str | None = None, target: Any = None, device: str = "cpu",
                 backend: str | None = None) -> LLMEstimate:
    """Per-layer and per-stage MACs and bytes of llama-bench's ``pp prompt_tokens`` and
    ``tg gen_tokens`` at ``depth``, with the roofline and the fit on ``target`` when given.

    Bad input (no tokens to generate, a context longer than the model's maximum, an unknown
    format or KV dtype) is a one-line :class:`UserError`.
    """
    spec = _spec(model)
    f = resolve_format(fmt, backend)
    kv = kv_dtype or f.kv_dtype
    _kv_bytes(kv)  # an unknown KV dtype is a one-line error here
    for what, v, lo in (("--prompt-tokens", prompt_tokens, 1), ("--gen-tokens", gen_tokens, 1),
                        ("--depth", depth, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise UserError(f"{what} must be an integer of at least {lo}, got {v!r}")
    context = depth + prompt_tokens + gen_tokens  # GenerationConfig.context_needed()
    if context > spec.max_position_embeddings:
        raise UserError(f"a context of {context} tokens (depth {depth} + prompt "
                        f"{prompt_tokens} + generated {gen_tokens}) is longer than "
                        f"{spec.name}'s maximum of {spec.max_position_embeddings} "
                        "(max_position_embeddings); use fewer tokens")
    store = _storage(spec, f, device)
    P, G, D = prompt_tokens, gen_tokens, depth
    n_ub = -(-P // UBATCH)
    per_tok_kv_layer = _layer_kv_per_token(spec, kv)
    attn_dim = spec.num_heads * spec.head_dim

    by_layer: dict[tuple[int | None, str], list[TensorInfo]] = {}
    for t in tensors(spec):
        by_layer.setdefault((t.layer, t.kind), []).append(t)

    rows: list[dict[str, Any]] = []

    def add_row(name, layer, kind, ts, *, macs_per_token, prefill_tokens, extra_prefill_macs=0,
                extra_decode_macs=0.0, kv_prefill=0.0, kv_decode=0.0, read=True,
                head_bytes=None, types=None, **more):
        params = sum(t.numel for t in ts)
        wbytes = sum(store[t.name][0] for t in ts)
        read_bytes = wbytes if head_bytes is None else head_bytes
        row = {
            "name": name, "layer": layer, "kind": kind, "params": params,
            "weight_bytes": wbytes,
            "types": types if types is not None else sorted({store[t.name][1] for t in ts}),
            "prefill_macs": macs_per_token * prefill_tokens + extra_prefill_macs,
            "prefill_bytes": (read_bytes * n_ub if read else 0) + kv_prefill,
            "decode_macs_per_token": macs_per_token + extra_decode_macs,
            "decode_bytes_per_token": (read_bytes if read else 0) + kv_decode,
            **more}
        rows.append(row)

    emb = by_layer[(None, "embedding")]
    add_row("embedding", None, "embedding", emb, macs_per_token=0, prefill_tokens=0, read=False,
            note="lookup of one row per token, not counted in decode bytes")
    for i in range(spec.num_layers):
        w = _window(spec, i)
        attn = by_layer[(i, "attention")]
        mat_macs = sum(t.numel for t in attn if t.is_matrix)
        # prefill: query at position c (1-based, c = D+1 .. D+P) attends to min(c, w) keys
        score_prefill = 2 * attn_dim * _sum_min(D + 1, D + P, w)
        score_decode = 2 * attn_dim * Fraction(_sum_min(D + 1, D + G, w), G)
        kv_read_prefill = per_tok_kv_layer * sum(
            min(D + min((u + 1) * UBATCH, P), w or 1 << 62) for u in range(n_ub))
        kv_decode = per_tok_kv_layer * (Fraction(_sum_min(D + 1, D + G, w), G))
        add_row(f"layers.{i}.attention", i, "attention", attn, macs_per_token=mat_macs,
                prefill_tokens=P, extra_prefill_macs=score_prefill,
                extra_decode_macs=float(score_decode),
                kv_prefill=float(kv_read_prefill + per_tok_kv_layer * P),
                kv_decode=float(kv_decode), sliding_window=w,
                kv_cache_bytes_per_token=float(per_tok_kv_layer))
        mlp = by_layer[(i, "mlp")]
        add_row(f"layers.{i}.mlp", i, "mlp", mlp, macs_per_token=sum(t.numel for t in mlp),
                prefill_tokens=P)
        add_row(f"layers.{i}.norm", i, "norm", by_layer[(i, "norm")], macs_per_token=0,
                prefill_tokens=P)
    add_row("norm", None, "norm", by_layer[(None, "norm")], macs_per_token=0, prefill_tokens=P)
    vh = spec.vocab_size * spec.hidden_size
    if spec.tie_word_embeddings:
        shared = "output.weight" not in store
        head_bytes = store["token_embd.weight" if shared else "output.weight"]
        rows_head: list[TensorInfo] = []
        add_row("lm_head", None, "lm_head", rows_head, macs_per_token=vh, prefill_tokens=1,
                head_bytes=head_bytes[0], types=[head_bytes[1]],
                tied_to="embedding" if shared else None)
        if not shared:  # stored apart from the float embedding (ORT GenAI int8)
            rows[-1]["weight_bytes"] = head_bytes[0]
    else:
        add_row("lm_head", None, "lm_head", by_layer[(None, "lm_head")], macs_per_token=vh,
                prefill_tokens=1)
    # prefill reads the LM head once (last token only), not once per micro-batch
    rows[-1]["prefill_bytes"] = rows[-1]["decode_bytes_per_token"]

    params = parameter_count(spec)
    wbytes = sum(b for b, _ in store.values())
    stages: dict[str, dict[str, Any]] = {}
    for stage, macs_key, bytes_key, tokens in (
            ("prefill", "prefill_macs", "prefill_bytes", P),
            ("decode", "decode_macs_per_token", "decode_bytes_per_token", 1)):
        macs = float(sum(r[macs_key] for r in rows))
        nbytes = float(sum(r[bytes_key] for r in rows))
        stages[stage] = {"tokens": tokens, "macs": macs, "bytes": nbytes,
                         "arithmetic_intensity": macs / nbytes if nbytes else None,
                         "unit_macs": "MAC", "unit_bytes": "B",
                         "per": "prompt" if stage == "prefill" else "token"}
    decode_bytes = stages["decode"]["bytes"]
    figures = {
        "parameters": _figure(params, "count"),
        "weight_bytes": _figure(wbytes, "B"),
        "kv_cache_bytes_per_token": _figure(kv_cache_bytes_per_token(spec, kv), "B/token",
                                            kv_dtype=kv),
        "kv_cache_bytes": _figure(kv_cache_bytes(spec, context, kv), "B", context=context),
        "decode_bytes_per_token": _figure(round(decode_bytes), "B/token", depth=D),
    }
    if f.family == "llama_cpp":
        figures["file_bytes"] = _figure(gguf_file_bytes(spec, f), "B",
                                        note="GGUF size with an approximate vocabulary "
                                             "metadata allowance")
    notes: list[str] = []
    fit = None
    tid = None
    for r in rows:
        for k in ("prefill_bytes", "decode_bytes_per_token", "decode_macs_per_token"):
            r[k] = float(r[k])
    if target is not None:
        tid = getattr(target, "id", None)
        bw, peaks, ram, used = _processor(target, device)
        precision = f.compute if f.compute in peaks else "fp32" if "fp32" in peaks else None
        if precision != f.compute:
            notes.append(f"{used} has no {f.compute} peak; the roofline uses "
                         f"{precision or 'no'} compute peak")
        peak = peaks.get(precision) if precision else None
        for stage in ("prefill", "decode"):
            s = stages[stage]
            s.update(_roofline(s["macs"], s["bytes"], peak, bw))
            s.update(bandwidth=bw, peak_macs=peak, compute_precision=precision,
                     ridge_point=(peak / bw) if peak else None, processor=used)
        pre, dec = stages["prefill"], stages["decode"]
        est = "estimated"
        basis = "roofline at the processor's peak figures (uncalibrated upper bound)"
        figures["prefill_tokens_per_s"] = _figure(P / pre["time_s"], "tokens/s", est, basis=basis)
        figures["decode_tokens_per_s"] = _figure(1 / dec["time_s"], "tokens/s", est, basis=basis)
        figures["ttft_ms"] = _figure(pre["time_s"] * 1e3, "ms", est, basis=basis)
        figures["tpot_ms"] = _figure(dec["time_s"] * 1e3, "ms", est, basis=basis)
        need_kv = kv_cache_bytes(spec, context, kv)
        over = runtime_overhead_bytes(spec, P)
        usable = usable_ram_bytes(ram)
        required = wbytes + need_kv + over
        mct = max_context_tokens(spec, f, ram, kv, device=device, prompt_tokens=P)
        fits = required <= usable
        fit = {"ram_bytes": ram, "usable_bytes": usable,
               "os_reserve_fraction": OS_RESERVE_FRACTION, "weight_bytes": wbytes,
               "kv_cache_bytes": need_kv, "runtime_overhead_bytes": over,
               "required_bytes": required, "context_tokens": context, "fits": fits,
               "max_context_tokens": mct,
               "verdict": (f"fits: {required / 1e9:.2f} GB of {usable / 1e9:.2f} GB usable"
                           if fits else
                           f"does not fit: needs {required / 1e9:.2f} GB, "
                           f"{usable / 1e9:.2f} GB usable of {ram / 1e9:.2f} GB RAM"),
               "provenance": "analytic"}
        figures["max_context_tokens"] = _figure(mct, "tokens",
                                                capped_by_model=mct == spec.max_position_embeddings)
    return LLMEstimate(model=spec.name, format=f.name, backend=backend or f.backend,
                       format_info=f, kv_dtype=kv, prompt_tokens=P, gen_tokens=G, depth=D,
                       context_tokens=context, device=device, figures=figures, layers=rows,
                       stages=stages, kv_curve=kv_cache_curve(spec, kv), fit=fit, target=tid,
                       notes=notes)


__all__ = ["BACKEND_FORMATS", "FORMATS", "FormatInfo", "GGML_TYPE_SIZES", "KV_DTYPE_BYTES",
           "LLMEstimate", "OS_RESERVE_FRACTION", "RUNTIME_BASE_BYTES", "TensorInfo", "UBATCH",
           "estimate_llm", "formats_for", "gguf_file_bytes", "gguf_metadata_bytes",
           "gguf_tensor_bytes", "gguf_tensor_types", "kv_cache_bytes",
           "kv_cache_bytes_per_token", "kv_cache_curve", "max_context_tokens",
           "parameter_count", "resolve_format", "runtime_overhead_bytes", "tensors",
           "usable_ram_bytes", "weight_bytes"]

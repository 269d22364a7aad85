"""Analytic estimate of a generative (decoder-only) model: no runtime, no weight.

From an :class:`~edgeprof.core.llm.LLMSpec` alone it gives the parameter count, the bytes of
each weight format, the KV cache, per-layer and per-stage MACs and bytes, the roofline of
prefill and decode on a target, and whether the model fits the target's RAM.

Weight formats are the generative backends' knowledge, declared as data on each backend
class (``format_layouts``: name -> :class:`~edgeprof.core.llm.FormatInfo`, whose ``layout``
gives every tensor's stored bytes and type; :class:`~edgeprof.core.llm.DeclaresFormats`)
and read here through the plugin registry (:func:`formats_for`, :func:`backend_formats`).
Nothing here knows a runtime:

* llama.cpp (``q2_k q4_0 q4_k_m q5_k_m q6_k q8_0 f16 f32``): its quantizer's per-tensor type
  choice, ggml's block sizes and the GGUF file size (``file_bytes``), in
  :mod:`edgeprof.backends.llama_cpp_formats`;
* ONNX Runtime GenAI (``int4 int8 fp32``): its model builder's MatMulNBits layout, in
  :mod:`edgeprof.backends.onnxruntime_genai`;
* OpenVINO GenAI (``int4 int8 fp16``): NNCF's INT4_SYM groups with INT8_ASYM embedding and
  LM head, in :mod:`edgeprof.backends.openvino_genai`;
* float (``fp32 bf16 fp16``; transformers): every parameter in that dtype, a tied embedding
  once (:mod:`edgeprof.backends.llm_layout`).

A format named without a backend (``backend=None``), or for a backend that declares no
layouts (a plugin's), gets the generic table (:func:`generic_formats`): the float formats as
such, then each format name as the first registered backend that declares it lays it out.

The KV cache holds, per token and layer, K and V for the KV heads (``2 x kv_heads x
head_dim`` values); a sliding-window layer holds at most its window.

Mixture of experts (``LLMSpec.num_experts`` > 0): memory (``weight_bytes``, the fit, the
file) holds every expert of every layer and ``parameters`` counts them all; a decoded token
reads, and multiplies by, the router and only its ``num_experts_per_tok`` experts (plus a
shared expert where the model has one), so its bytes and MACs are a dense model's whose MLP
is those k experts wide (``active_parameters_per_token``: every parameter less the experts a
token does not run, embedding included, as model cards count "activated" parameters).
Prefill's MACs count k experts per prompt token; the bytes one micro-batch of N tokens reads
are the distinct experts its tokens route to, modelled as uniform independent routing
(:func:`experts_read`: ``E x (1 - (1 - k/E)^N)``, at most ``min(E, N x k)``).

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

import bisect
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from edgeprof.backends.llm_layout import GENERIC_FORMATS, tensors
from edgeprof.core.errors import EdgeprofError, UnknownNameError, UserError
from edgeprof.core.llm import FormatInfo, LLMModel, LLMSpec, WeightTensor

#: prompt tokens llama.cpp evaluates per micro-batch (n_ubatch default): weights are read
#: once per micro-batch during prefill
UBATCH = 512
#: runtime allowance in the fit (process, runtime libraries, scratch), besides the compute
#: buffer :func:`runtime_overhead_bytes` adds and the KV cache
RUNTIME_BASE_BYTES = 256 * 1024 ** 2
#: share of a target's RAM left to the operating system and other processes
OS_RESERVE_FRACTION = 0.10

#: KV cache dtype -> bytes per value (llama.cpp's quantized caches at their block rate)
KV_DTYPE_BYTES: dict[str, Fraction] = {
    "f32": Fraction(4), "fp32": Fraction(4), "f16": Fraction(2), "fp16": Fraction(2),
    "bf16": Fraction(2), "q8_0": Fraction(34, 32), "q4_0": Fraction(18, 32),
    "q5_0": Fraction(22, 32), "u8": Fraction(1), "int8": Fraction(1),
}


# ------------------------------------------------------------------------ formats
def _registry(registry: Any = None) -> Any:
    """The plugin registry (the built-ins alone when the user's plugins file is broken:
    their formats are still known)."""
    if registry is not None:
        return registry
    from edgeprof.core.plugins import get_registry

    try:
        return get_registry()
    except EdgeprofError:
        return _builtin_registry()


@lru_cache(maxsize=1)
def _builtin_registry() -> Any:
    from edgeprof.core.plugins import PluginManager

    return PluginManager(use_env=False, entry_points=False).build_registry()


def _layouts(backend: Any) -> dict[str, FormatInfo]:
    """What a backend class (or instance) declares: ``format_layouts`` (empty if none)."""
    return dict(getattr(backend, "format_layouts", None) or {})


def _declaring(registry: Any = None) -> dict[str, type]:
    """Name -> class of the registered generative backends that declare their layouts."""
    return {n: e.cls for n, e in _registry(registry).backends_for("generate").items()
            if _layouts(e.cls)}


def declares_formats(backend: Any, registry: Any = None) -> bool:
    """Whether ``backend`` (a name, a class or an instance) declares its formats' layouts."""
    if isinstance(backend, str):
        return backend in _declaring(registry)
    return bool(_layouts(backend))


def _made(cls: Any) -> dict[str, FormatInfo]:
    """The declared formats ``cls`` makes, in the order of its ``formats``."""
    table = _layouts(cls)
    made = tuple(getattr(cls, "formats", None) or table)
    return {n: table[n] for n in made if n in table}


def backend_formats(registry: Any = None) -> dict[str, dict[str, FormatInfo]]:
    """Backend name -> {format name: FormatInfo} of every registered generative backend that
    declares its layouts (registry order)."""
    return {n: _made(cls) for n, cls in _declaring(registry).items()}


def generic_formats(registry: Any = None) -> dict[str, FormatInfo]:
    """Every format by name: the float formats as such, then each name as the first
    registered backend that declares it lays it out (what a format is estimated as without
    a backend, or for a backend that declares no layouts)."""
    out = dict(GENERIC_FORMATS)
    for cls in _declaring(registry).values():
        for n, f in _layouts(cls).items():
            out.setdefault(n, f)
    return out


def formats_for(backend: Any, registry: Any = None) -> dict[str, FormatInfo]:
    """The formats ``backend`` (a name, a class or an instance) makes, by name, as it declares
    them (every format for ``None``: :func:`generic_formats`)."""
    if backend is None:
        return generic_formats(registry)
    if not isinstance(backend, str) and _layouts(backend):
        return _made(backend)
    declaring = _declaring(registry)
    name = _backend_name(backend)
    if not isinstance(backend, str) or name not in declaring:
        raise UnknownNameError("generative backend", name, declaring,
                               hint="only backends that declare their formats' byte layouts "
                                    "(format_layouts) have them")
    return _made(declaring[name])


def _layout_backend(backend: Any) -> Any:
    """``backend`` when it names one whose layouts count (a class that declares none: None)."""
    if backend is None or isinstance(backend, str) or _layouts(backend):
        return backend
    return None


def _backend_name(backend: Any) -> str | None:
    if backend is None or isinstance(backend, str):
        return backend
    return str(getattr(backend, "name", backend))


def resolve_format(fmt: str | FormatInfo, backend: Any = None,
                   registry: Any = None) -> FormatInfo:
    """A format name (as ``backend`` lays it out when given) -> :class:`FormatInfo`."""
    if isinstance(fmt, FormatInfo):
        return fmt
    backend = _layout_backend(backend)
    table = formats_for(backend, registry)
    if fmt not in table:
        what = (f"format for backend '{_backend_name(backend)}'" if backend is not None
                else "weight format")
        raise UnknownNameError(what, str(fmt), table)
    return table[fmt]


def __getattr__(name: str) -> Any:
    # read from the registry when asked: FORMATS (every format, the generic table) and
    # BACKEND_FORMATS (backend -> the names of the formats it makes), kept for old callers
    if name == "FORMATS":
        return generic_formats()
    if name == "BACKEND_FORMATS":
        return {n: tuple(t) for n, t in backend_formats().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------------ tensors
def parameter_count(spec: LLMSpec) -> int:
    """Every parameter, a tied embedding once (the published convention); a mixture of
    experts' every expert (its total parameters)."""
    return sum(t.numel for t in tensors(_spec(spec)))


def expert_parameters(spec: LLMSpec) -> int:
    """The parameters of the experts of every layer (kind ``experts``; 0 for a dense model)."""
    return sum(t.numel for t in tensors(_spec(spec)) if t.kind == "experts")


def active_parameter_count(spec: LLMSpec) -> int:
    """The parameters one token runs: every parameter less the experts it is not routed to
    (``(E - k) / E`` of the experts' parameters), the embedding included (the convention of
    "activated parameters" on model cards, e.g. Qwen3-30B-A3B's 3.3B). A dense model's
    :func:`parameter_count`."""
    spec = _spec(spec)
    total = parameter_count(spec)
    if not spec.is_moe:
        return total
    idle = Fraction(spec.num_experts - spec.num_experts_per_tok, spec.num_experts)
    return total - int(expert_parameters(spec) * idle)


def experts_read(spec: LLMSpec, tokens: int = 1) -> float:
    """How many of a layer's ``num_experts`` (E) experts ``tokens`` tokens evaluated together
    read (0 for a dense model). One token reads its ``num_experts_per_tok`` (k). A batch of
    N tokens (a prefill micro-batch) is modelled with uniform, independent routing: the
    expected number of distinct experts, ``E x (1 - (1 - k/E)^N)``, capped at
    ``min(E, N x k)``; it tends to E as N grows. A trained router is not uniform (its tokens
    share experts more often), so for a batch this is an upper estimate of the bytes read."""
    spec = _spec(spec)
    e, k = spec.num_experts, spec.num_experts_per_tok
    if not e:
        return 0.0
    if tokens <= 1:
        return float(k)
    return min(e * (1.0 - (1.0 - k / e) ** tokens), float(min(e, tokens * k)))


def _ffn_width(spec: LLMSpec) -> int:
    """The MLP width a token's activations take: ``intermediate_size``, or for a mixture of
    experts its k experts (and the shared one)."""
    if not spec.is_moe:
        return spec.intermediate_size
    return (spec.num_experts_per_tok * spec.moe_intermediate_size
            + spec.shared_expert_intermediate_size)


# ------------------------------------------------------------------------ weight bytes
def _storage(spec: LLMSpec, f: FormatInfo, device: str) -> dict[str, tuple[int, str]]:
    """tensor name (plus ``output.weight`` for a tied head stored apart) -> (bytes, type),
    as the format's layout stores it."""
    if f.layout is None:
        raise UserError(f"format '{f.name}' ({f.backend or 'generic'}) has no byte layout; "
                        "a backend declares one per format in its format_layouts")
    return f.layout.storage(spec, tensors(spec), f, device)


def weight_bytes(spec: LLMSpec, fmt: str | FormatInfo, *, backend: Any = None,
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
    windows = (_window(spec, i) for i in range(spec.num_layers))
    tokens = sum(min(context, w) if w else context for w in windows)
    return math.ceil(_layer_kv_per_token(spec, kv_dtype) * tokens)


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
    + vocab)``), the order of llama.cpp's CPU compute buffer (a mixture of experts: the
    width of the k experts a token runs, and the shared one, for ``intermediate``)."""
    spec = _spec(spec)
    n = min(max(prompt_tokens, 1), UBATCH)
    return RUNTIME_BASE_BYTES + 4 * n * (3 * _ffn_width(spec) + 4 * spec.hidden_size
                                         + spec.vocab_size)


def usable_ram_bytes(ram_bytes: float) -> int:
    """RAM left to the model after :data:`OS_RESERVE_FRACTION` for the OS and others."""
    return int(ram_bytes * (1 - OS_RESERVE_FRACTION))


def max_context_tokens(spec: LLMSpec, fmt: str | FormatInfo, ram_bytes: float,
                       kv_dtype: str | None = None, *, backend: Any = None,
                       device: str = "cpu", prompt_tokens: int = UBATCH) -> int:
    """The longest context (tokens, at most the model's maximum) whose weights + KV cache +
    runtime allowance fit in ``ram_bytes`` after the OS reserve; 0 if the weights don't."""
    spec = _spec(spec)
    f = resolve_format(fmt, backend)
    kv = kv_dtype or f.kv_dtype
    free = (usable_ram_bytes(ram_bytes) - weight_bytes(spec, f, device=device)
            - runtime_overhead_bytes(spec, prompt_tokens))
    # kv_cache_bytes is monotone in the context: bisect the contexts 1 .. the maximum
    return bisect.bisect_right(range(1, spec.max_position_embeddings + 1), free,
                               key=lambda context: kv_cache_bytes(spec, context, kv))


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
    from edgeprof.core.llm import LLM_PREFIX
    from edgeprof.zoo.llm import preset_names, resolve_llm

    if isinstance(model, str) and model in preset_names():  # a bare preset name
        model = LLM_PREFIX + model
    return resolve_llm(model).spec


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
                 backend: Any = None) -> LLMEstimate:
    """Per-layer and per-stage MACs and bytes of llama-bench's ``pp prompt_tokens`` and
    ``tg gen_tokens`` at ``depth``, with the roofline and the fit on ``target`` when given.

    ``fmt`` is laid out as ``backend`` declares it (a registered backend's name, or a
    backend class or instance; one that declares no layouts, or None: the generic table).

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

    by_layer: dict[tuple[int | None, str], list[WeightTensor]] = {}
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
        decode_keys = Fraction(_sum_min(D + 1, D + G, w), G)  # keys per decoded token
        kv_read_prefill = per_tok_kv_layer * sum(
            min(D + min((u + 1) * UBATCH, P), w or 1 << 62) for u in range(n_ub))
        add_row(f"layers.{i}.attention", i, "attention", attn, macs_per_token=mat_macs,
                prefill_tokens=P, extra_prefill_macs=score_prefill,
                extra_decode_macs=float(2 * attn_dim * decode_keys),
                kv_prefill=float(kv_read_prefill + per_tok_kv_layer * P),
                kv_decode=float(per_tok_kv_layer * decode_keys), sliding_window=w,
                kv_cache_bytes_per_token=float(per_tok_kv_layer))
        mlp = by_layer[(i, "mlp")]
        add_row(f"layers.{i}.mlp", i, "mlp", mlp, macs_per_token=sum(t.numel for t in mlp),
                prefill_tokens=P)
        if spec.is_moe:  # all experts held; k read and run per token
            exps = by_layer[(i, "experts")]
            share = Fraction(spec.num_experts_per_tok, spec.num_experts)
            held = sum(store[t.name][0] for t in exps)
            add_row(f"layers.{i}.experts", i, "experts", exps,
                    macs_per_token=sum(t.numel for t in exps) * share, prefill_tokens=P,
                    head_bytes=held * share, experts=spec.num_experts,
                    experts_per_token=spec.num_experts_per_tok)
            rows[-1]["prefill_bytes"] = sum(
                held * experts_read(spec, min(UBATCH, P - u * UBATCH)) / spec.num_experts
                for u in range(n_ub))
            rows[-1]["prefill_macs"] = float(rows[-1]["prefill_macs"])
        add_row(f"layers.{i}.norm", i, "norm", by_layer[(i, "norm")], macs_per_token=0,
                prefill_tokens=P)
    add_row("norm", None, "norm", by_layer[(None, "norm")], macs_per_token=0, prefill_tokens=P)
    vh = spec.vocab_size * spec.hidden_size
    if spec.tie_word_embeddings:
        shared = "output.weight" not in store
        head_bytes = store["token_embd.weight" if shared else "output.weight"]
        add_row("lm_head", None, "lm_head", [], macs_per_token=vh, prefill_tokens=1,
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
    notes: list[str] = []
    if spec.is_moe:
        figures["active_parameters_per_token"] = _figure(
            active_parameter_count(spec), "count", experts=spec.num_experts,
            experts_per_token=spec.num_experts_per_tok,
            note="every parameter less the experts a token is not routed to")
        held = sum(r["weight_bytes"] for r in rows if r["kind"] == "experts")
        notes.append(
            f"mixture of experts: memory holds all {spec.num_experts} experts of each layer "
            f"({held / 1e9:.2f} GB of the {wbytes / 1e9:.2f} GB of weights, "
            f"{params / 1e9:.2f} B parameters); a decoded token reads the router and "
            f"{spec.num_experts_per_tok} experts per layer "
            f"({active_parameter_count(spec) / 1e9:.2f} B parameters active, "
            f"{decode_bytes / 1e6:.0f} MB/token); a prompt's micro-batch reads the distinct "
            "experts its tokens route to (uniform routing assumed)")
    file_size = f.layout.file_bytes(spec, tensors(spec), f)  # the runtime's file, if modelled
    if file_size is not None:
        figures["file_bytes"] = _figure(file_size[0], "B", note=file_size[1])
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
                           f"{usable / 1e9:.2f} GB usable of {ram / 1e9:.2f} GB RAM")
               + (f"; the weights hold all {spec.num_experts} experts of each layer, though "
                  f"a token reads {spec.num_experts_per_tok}" if spec.is_moe else ""),
               "provenance": "analytic"}
        figures["max_context_tokens"] = _figure(mct, "tokens",
                                                capped_by_model=mct == spec.max_position_embeddings)
    return LLMEstimate(model=spec.name, format=f.name,
                       backend=_backend_name(_layout_backend(backend)) or f.backend,
                       format_info=f, kv_dtype=kv, prompt_tokens=P, gen_tokens=G, depth=D,
                       context_tokens=context, device=device, figures=figures, layers=rows,
                       stages=stages, kv_curve=kv_cache_curve(spec, kv), fit=fit, target=tid,
                       notes=notes)


__all__ = ["FormatInfo", "KV_DTYPE_BYTES", "LLMEstimate", "OS_RESERVE_FRACTION",
           "RUNTIME_BASE_BYTES", "UBATCH", "active_parameter_count", "backend_formats",
           "declares_formats", "estimate_llm", "expert_parameters", "experts_read",
           "formats_for", "generic_formats",
           "kv_cache_bytes", "kv_cache_bytes_per_token", "kv_cache_curve",
           "max_context_tokens", "parameter_count", "resolve_format", "runtime_overhead_bytes",
           "tensors", "usable_ram_bytes", "weight_bytes"]

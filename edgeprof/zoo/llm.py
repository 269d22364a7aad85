"""Generative models as given: built-in presets (``llm:NAME``), GGUF files and Hugging Face
folders, each resolved to an :class:`~edgeprof.core.llm.LLMModel` (an
:class:`~edgeprof.core.llm.LLMSpec` plus where it came from).

* Presets are data (``llm_presets.toml``): the published shape of each model, its published
  parameter count and where both come from. They are built with random weights.
* A ``.gguf`` file's header is read by ``core.gguf`` (metadata and tensor table only; no
  weight is loaded, no vocabulary string decoded; the ``gguf`` package gives the tensor
  types' sizes): llama.cpp's keys are mapped to LLMSpec (a mixture of
  experts' ``{arch}.expert_count``, ``expert_used_count``, ``expert_feed_forward_length``).
* A Hugging Face folder is read from its ``config.json``; the mixtures of experts
  (:data:`MOE_MODEL_TYPES`: ``mixtral``, ``qwen3_moe``, ``qwen2_moe``) are read as the dense
  family their layers are otherwise, with LLMSpec's expert fields.

:func:`hf_config` goes the other way (an LLMSpec -> a ``config.json`` dict transformers and
the GenAI builders load); a folder written from it is marked as random weights with
:data:`HF_RANDOM_KEY`, a GGUF with the metadata key :data:`GGUF_RANDOM_KEY`.

Imports only ``edgeprof.core`` (and ``gguf`` inside the function that reads a GGUF).
"""

from __future__ import annotations

import json
import math
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from edgeprof.core.errors import ModelError, UnknownNameError, UnsupportedError, UserError
from edgeprof.core.llm import LLM_PREFIX, LLMModel, LLMSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PRESETS_FILE = Path(__file__).with_name("llm_presets.toml")
#: config.json key a random-weight Hugging Face folder carries (written by :func:`hf_config`)
HF_RANDOM_KEY = "edgeprof_random_weights"
#: GGUF metadata key (bool) a random-weight GGUF carries
GGUF_RANDOM_KEY = "edgeprof.random_weights"
#: Hugging Face model_type -> the architecture class transformers builds
HF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                    "gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM",
                    "gemma3_text": "Gemma3ForCausalLM", "phi3": "Phi3ForCausalLM"}
FAMILIES = tuple(HF_ARCHITECTURES)
#: Hugging Face model_type of a mixture of experts -> the edgeprof family its layers are
#: otherwise (the experts are LLMSpec's num_experts ...): Mixtral is Mistral's (llama's)
#: decoder, Qwen3-MoE is qwen3's (llama with per-head q/k norms, unrepresented: see
#: llm_presets.toml), Qwen2-MoE is qwen2's (q/k/v biases, a gated shared expert)
MOE_MODEL_TYPES = {"mixtral": "llama", "qwen3_moe": "llama", "qwen2_moe": "qwen2"}
#: family of a mixture of experts -> the model_type and class :func:`hf_config` writes for it
MOE_HF_ARCHITECTURES = {"llama": ("mixtral", "MixtralForCausalLM"),
                        "qwen2": ("qwen2_moe", "Qwen2MoeForCausalLM")}
#: llama.cpp's general.architecture -> Hugging Face model_type
GGUF_ARCHES = {"llama": "llama", "qwen2": "qwen2", "gemma": "gemma", "gemma2": "gemma2",
               "gemma3": "gemma3_text", "phi3": "phi3"}
#: sliding-window pattern of the families that slide (when the file does not say)
_DEFAULT_PATTERN = {"gemma2": 2, "gemma3_text": 6}
#: sliding_window_pattern meaning "no global layer": every layer slides
ALL_LAYERS_SLIDE = 1 << 30
#: llama.cpp's general.file_type (enum llama_ftype) -> edgeprof's format name
GGUF_FILE_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 7: "q8_0", 8: "q5_0", 9: "q5_1",
                   10: "q2_k", 11: "q3_k_s", 12: "q3_k_m", 13: "q3_k_l", 14: "q4_k_s",
                   15: "q4_k_m", 16: "q5_k_s", 17: "q5_k_m", 18: "q6_k", 32: "bf16"}


# ------------------------------------------------------------------------------ presets
#: preset keys that describe how a preset represents its model, not LLMSpec fields:
#: ``architecture`` (the published Hugging Face model_type, where the preset builds it as
#: another edgeprof family) and ``unrepresented_parameters`` (the published parameters that
#: family does not hold: published_parameters = edgeprof's count + these)
REPRESENTATION_KEYS = ("architecture", "unrepresented_parameters")


@lru_cache(maxsize=1)
def _preset_data() -> dict[str, dict[str, Any]]:
    with open(PRESETS_FILE, "rb") as f:
        return tomllib.load(f)["presets"]


@lru_cache(maxsize=1)
def _presets() -> dict[str, LLMSpec]:
    return {name: LLMSpec.from_dict({"name": name, **{k: v for k, v in fields.items()
                                                      if k not in REPRESENTATION_KEYS}})
            for name, fields in _preset_data().items()}


def preset_representation(name: str) -> dict[str, Any]:
    """How preset ``name`` represents its published model: ``{"architecture": the published
    model_type, "family": the edgeprof family it is built as, "unrepresented_parameters":
    published parameters that family does not hold (0 where none)}``; a preset that is its
    own family gives its family as the architecture and 0."""
    spec = get_preset(name)
    fields = _preset_data()[spec.name]
    return {"architecture": fields.get("architecture", spec.family), "family": spec.family,
            "unrepresented_parameters": int(fields.get("unrepresented_parameters", 0))}


def preset_names() -> list[str]:
    """The built-in presets' names (``llm:NAME``), sorted."""
    return sorted(_presets())


def get_preset(name: str) -> LLMSpec:
    """The preset ``name`` (with or without ``llm:``); unknown -> one-line UserError."""
    key = name[len(LLM_PREFIX):] if name.startswith(LLM_PREFIX) else name
    presets = _presets()
    if key not in presets:
        raise UnknownNameError("LLM preset", key, presets,
                               hint=f"give {LLM_PREFIX}NAME, a .gguf file or a Hugging Face "
                                    "model folder (config.json + safetensors)")
    return presets[key]


def __getattr__(name: str) -> Any:
    # PRESETS is lazy: reading the TOML costs nothing until someone asks
    if name == "PRESETS":
        return dict(_presets())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------------------ resolve
def resolve_llm(spec: str | LLMModel | LLMSpec) -> LLMModel:
    """``llm:NAME`` | a ``.gguf`` file | a Hugging Face folder -> :class:`LLMModel`; an
    ``LLMModel`` is returned as it is, an ``LLMSpec`` built in code is a model of random
    weights in its shapes, as a preset is. The one place a generative model is resolved.

    Every mistake is a one-line :class:`UserError` saying what is wrong and what to do.
    """
    if isinstance(spec, LLMModel):
        return spec
    if isinstance(spec, LLMSpec):
        return LLMModel(spec=spec, source_kind="preset", given=spec.name, random_weights=True)
    s = str(spec)
    if s.startswith(LLM_PREFIX):
        return LLMModel(spec=get_preset(s), source_kind="preset", given=s, random_weights=True)
    path = Path(s).expanduser()
    if s.lower().endswith(".gguf"):
        if not path.is_file():
            raise ModelError(f"GGUF file '{s}' does not exist: give the path of a .gguf file",
                             spec=s)
        llm, file_format, random = spec_from_gguf(path)
        return LLMModel(spec=llm, source_kind="gguf", given=s, path=path,
                        random_weights=random, file_format=file_format)
    if path.is_dir():
        cfg_path = path / "config.json"
        if not cfg_path.is_file():
            raise ModelError(f"folder '{s}' has no config.json: give a Hugging Face model "
                             f"folder (config.json + safetensors), a .gguf file or "
                             f"{LLM_PREFIX}NAME", spec=s)
        cfg = _read_json(cfg_path)
        llm = spec_from_hf_config(cfg, name=path.name, where=str(cfg_path))
        return LLMModel(spec=llm, source_kind="hf_folder", given=s, path=path,
                        random_weights=bool(cfg.get(HF_RANDOM_KEY, False)))
    if path.exists():
        raise ModelError(f"'{s}' is not a generative model: give {LLM_PREFIX}NAME, a .gguf file "
                         "or a Hugging Face model folder", spec=s)
    raise ModelError(f"'{s}' does not exist: give {LLM_PREFIX}NAME (one of "
                     f"{', '.join(preset_names())}), a .gguf file or a Hugging Face model folder",
                     spec=s)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ModelError(f"cannot read '{path}': {e}; give a readable config.json",
                         spec=str(path)) from None
    except json.JSONDecodeError as e:
        raise ModelError(f"'{path}' is not valid JSON (line {e.lineno}: {e.msg}); fix or "
                         "re-download the model's config.json", spec=str(path)) from None
    if not isinstance(data, dict):
        raise ModelError(f"'{path}' must hold a JSON object (a model config)", spec=str(path))
    return data


# --------------------------------------------------------------------- Hugging Face config
def _positive_int(cfg: dict, key: str, where: str, default: Any = None) -> int:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        if v is None:
            raise ModelError(f"{where}: missing '{key}'; a decoder-only model config needs it",
                             spec=where)
        raise ModelError(f"{where}: '{key}' must be a positive integer, got {v!r}", spec=where)
    return v


def _rope_theta(cfg: dict, default: float = 10000.0) -> float:
    if isinstance(cfg.get("rope_theta"), (int, float)):
        return float(cfg["rope_theta"])
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict):
        if isinstance(rp.get("rope_theta"), (int, float)):
            return float(rp["rope_theta"])
        full = rp.get("full_attention")
        if isinstance(full, dict) and isinstance(full.get("rope_theta"), (int, float)):
            return float(full["rope_theta"])
    return default


def _hf_experts(cfg: dict, model_type: str, where: str) -> dict[str, Any]:
    """LLMSpec's expert fields from a mixture of experts' config.json (``model_type`` one of
    :data:`MOE_MODEL_TYPES`). Mixtral's experts are ``intermediate_size`` wide and always
    renormalised; Qwen's are ``moe_intermediate_size`` wide. Dense layers among the expert
    layers (Qwen's ``decoder_sparse_step`` > 1 or ``mlp_only_layers``) are not represented:
    a one-line ModelError."""
    key = "num_experts" if cfg.get("num_experts") else "num_local_experts"
    experts = {"num_experts": _positive_int(cfg, key, where),
               "num_experts_per_tok": _positive_int(cfg, "num_experts_per_tok", where)}
    if model_type == "mixtral":
        return {**experts, "moe_intermediate_size": _positive_int(cfg, "intermediate_size", where),
                "norm_topk_prob": True}
    step, dense = cfg.get("decoder_sparse_step", 1), cfg.get("mlp_only_layers") or []
    if step not in (None, 0, 1) or dense:
        raise ModelError(f"{where}: a {model_type} with dense MLP layers among its expert layers "
                         f"(decoder_sparse_step {step}, mlp_only_layers {dense}) is not "
                         "supported; edgeprof represents a mixture of experts in every layer",
                         spec=where)
    shared = cfg.get("shared_expert_intermediate_size") or 0
    if model_type != "qwen2_moe" and shared:
        raise ModelError(f"{where}: a shared expert in a {model_type} is not supported",
                         spec=where)
    return {**experts, "moe_intermediate_size": _positive_int(cfg, "moe_intermediate_size", where),
            "shared_expert_intermediate_size": int(shared),
            "norm_topk_prob": bool(cfg.get("norm_topk_prob", False))}


def spec_from_hf_config(cfg: dict[str, Any], *, name: str, where: str = "config.json") -> LLMSpec:
    """A Hugging Face ``config.json`` dict -> :class:`LLMSpec` (families: llama, qwen2,
    gemma, gemma2, gemma3_text (also gemma3's text_config), phi3; and the mixtures of
    experts mixtral and qwen3_moe (as llama) and qwen2_moe (as qwen2), with their experts)."""
    family = cfg.get("model_type")
    if family == "gemma3" and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "model_type": "gemma3_text"}
        family = "gemma3_text"
    experts: dict[str, Any] = {}
    if family in MOE_MODEL_TYPES:
        experts = _hf_experts(cfg, family, where)
        family = MOE_MODEL_TYPES[family]
    if family not in HF_ARCHITECTURES:
        raise ModelError(f"{where}: model_type {family!r} is not supported; edgeprof knows "
                         f"{', '.join(FAMILIES)} and the mixtures of experts "
                         f"{', '.join(MOE_MODEL_TYPES)}", spec=where)
    hidden = _positive_int(cfg, "hidden_size", where)
    heads = _positive_int(cfg, "num_attention_heads", where)
    kv_heads = _positive_int(cfg, "num_key_value_heads", where, default=heads)
    head_dim = cfg.get("head_dim") or (hidden // heads)
    layers = _positive_int(cfg, "num_hidden_layers", where)
    tie_default = family in ("gemma", "gemma2", "gemma3_text")
    window = None
    pattern = 0
    if family in ("gemma2", "gemma3_text"):
        window = cfg.get("sliding_window") or None
        pattern = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or 0
        types = cfg.get("layer_types")
        if not pattern and isinstance(types, list) and "full_attention" in types:
            pattern = types.index("full_attention") + 1
        pattern = int(pattern or _DEFAULT_PATTERN[family])
    elif family in ("qwen2", "phi3"):
        # a window shorter than the context on every layer (Qwen2 with use_sliding_window;
        # Phi-3's published window is longer than its context, so it never binds)
        sw = cfg.get("sliding_window")
        mp = cfg.get("max_position_embeddings") or 0
        on = family == "phi3" or bool(cfg.get("use_sliding_window"))
        if on and isinstance(sw, int) and 0 < sw < mp:
            window, pattern = sw, ALL_LAYERS_SLIDE
    act = cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu"
    try:
        return LLMSpec(
            name=name, family=family, hidden_size=hidden, num_layers=layers, num_heads=heads,
            num_kv_heads=kv_heads, head_dim=head_dim,
            intermediate_size=_positive_int(cfg, "intermediate_size", where),
            vocab_size=_positive_int(cfg, "vocab_size", where),
            max_position_embeddings=_positive_int(cfg, "max_position_embeddings", where),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", tie_default)),
            qkv_bias=family == "qwen2" or bool(cfg.get("attention_bias", False)),
            sliding_window=window, sliding_window_pattern=pattern,
            fused_qkv=family == "phi3", fused_gate_up=family == "phi3",
            hidden_act=str(act), rope_theta=_rope_theta(cfg),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6 if tie_default else 1e-5)),
            **experts)
    except UserError as e:
        raise ModelError(f"{where}: {e}", spec=where) from None


def hf_config(spec: LLMSpec, *, random_weights: bool = True) -> dict[str, Any]:
    """The ``config.json`` transformers (and the GenAI model builders) load for ``spec``:
    the published config's fields for its family, marked as random weights
    (:data:`HF_RANDOM_KEY`) unless ``random_weights=False``.

    A mixture of experts is written as :data:`MOE_HF_ARCHITECTURES` names it: a llama-family
    one as Mixtral (its ``intermediate_size`` the experts' width, as Mixtral's is), a
    qwen2-family one as Qwen2-MoE; another family's is an UnsupportedError."""
    if spec.is_moe:
        return _hf_moe_config(spec, random_weights=random_weights)
    fam = spec.family
    cfg: dict[str, Any] = {
        "architectures": [HF_ARCHITECTURES[fam]], "model_type": fam,
        "hidden_size": spec.hidden_size, "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim, "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size, "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings, "hidden_act": spec.hidden_act,
        "rope_theta": spec.rope_theta, "rms_norm_eps": spec.rms_norm_eps,
        "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }
    if fam == "llama":
        cfg.update(attention_bias=spec.qkv_bias, mlp_bias=False)
    elif fam == "qwen2":
        cfg.update(use_sliding_window=bool(spec.sliding_window),
                   sliding_window=spec.sliding_window, max_window_layers=spec.num_layers)
    elif fam in ("gemma", "gemma2", "gemma3_text"):
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
        cfg["attention_bias"] = False
        if fam == "gemma2":
            cfg.update(sliding_window=spec.sliding_window, query_pre_attn_scalar=spec.head_dim,
                       attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
        if fam == "gemma3_text":
            cfg.update(sliding_window=spec.sliding_window,
                       sliding_window_pattern=spec.sliding_window_pattern,
                       query_pre_attn_scalar=spec.head_dim, rope_local_base_freq=10000.0,
                       attn_logit_softcapping=None, final_logit_softcapping=None)
        if fam in ("gemma2", "gemma3_text") and spec.sliding_window:
            cfg["layer_types"] = ["sliding_attention" if spec.layer_slides(i) else
                                  "full_attention" for i in range(spec.num_layers)]
    elif fam == "phi3":
        cfg.update(sliding_window=spec.sliding_window, original_max_position_embeddings=4096,
                   resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)
    if random_weights:
        cfg[HF_RANDOM_KEY] = True
    return cfg


def _hf_moe_config(spec: LLMSpec, *, random_weights: bool) -> dict[str, Any]:
    if spec.family not in MOE_HF_ARCHITECTURES:
        raise UnsupportedError(f"model '{spec.name}': a mixture of experts of family "
                               f"'{spec.family}' has no Hugging Face architecture here; known: "
                               f"{', '.join(t for t, _ in MOE_HF_ARCHITECTURES.values())}")
    model_type, arch = MOE_HF_ARCHITECTURES[spec.family]
    cfg: dict[str, Any] = {
        "architectures": [arch], "model_type": model_type,
        "hidden_size": spec.hidden_size, "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim, "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings, "hidden_act": spec.hidden_act,
        "rope_theta": spec.rope_theta, "rms_norm_eps": spec.rms_norm_eps,
        "num_experts_per_tok": spec.num_experts_per_tok, "output_router_logits": False,
        "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }
    if model_type == "mixtral":
        cfg.update(intermediate_size=spec.moe_intermediate_size,
                   num_local_experts=spec.num_experts, sliding_window=None,
                   router_jitter_noise=0.0)
    else:
        cfg.update(intermediate_size=spec.intermediate_size, num_experts=spec.num_experts,
                   moe_intermediate_size=spec.moe_intermediate_size,
                   shared_expert_intermediate_size=spec.shared_expert_intermediate_size,
                   norm_topk_prob=spec.norm_topk_prob, decoder_sparse_step=1,
                   mlp_only_layers=[], qkv_bias=spec.qkv_bias,
                   use_sliding_window=False, max_window_layers=spec.num_layers)
    if random_weights:
        cfg[HF_RANDOM_KEY] = True
    return cfg


# ----------------------------------------------------------------------------------- GGUF
def _f32(v: float) -> float:
    """A GGUF float32 as the decimal it was written from (1e-05, not 9.99999974e-06)."""
    return float(f"{float(v):.7g}")


def spec_from_gguf(path: Path) -> tuple[LLMSpec, str | None, bool]:
    """Read a GGUF's metadata and tensor table -> (spec, file_format, random_weights).

    Not a GGUF, truncated or corrupt -> one-line :class:`ModelError`.
    """
    path = Path(path)
    what_to_do = "re-download it or convert the model again (llama.cpp's convert_hf_to_gguf.py)"
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelError(f"cannot read '{path}': {e.strerror or e}", spec=str(path)) from None
    if magic != b"GGUF":
        raise ModelError(f"'{path}' is not a GGUF file (it does not start with the GGUF magic "
                         f"bytes); give a .gguf model file written by llama.cpp or gguf-py",
                         spec=str(path))
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:  # pragma: no cover - gguf is a dependency of the llm extra
        raise ModelError("reading a GGUF needs the 'gguf' package: pip install gguf",
                         spec=str(path)) from None
    from edgeprof.core.gguf import read_gguf_header

    try:
        header = read_gguf_header(path)
        ends = []
        for dims, kind, offset in header.tensors.values():
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
            ends.append(header.data_start + offset + math.prod(dims) // block * type_size)
    except Exception as e:  # noqa: BLE001 - a damaged file fails in many ways
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ModelError(f"GGUF file '{path}' is truncated or corrupt ({detail[:120]}); "
                         f"{what_to_do}", spec=str(path)) from None
    if ends and max(ends) > size:
        raise ModelError(f"GGUF file '{path}' is truncated: its tensors need {max(ends):,} bytes "
                         f"but the file has {size:,}; {what_to_do}", spec=str(path))
    # scalars and strings; an array (per-layer values) is not one number
    fields = {k: None if isinstance(v, tuple) else v for k, v in header.kv.items()}
    tensors = header.tensors
    arch = fields.get("general.architecture")
    if arch not in GGUF_ARCHES:
        raise ModelError(f"GGUF file '{path}': architecture {arch!r} is not supported; edgeprof "
                         f"reads {', '.join(GGUF_ARCHES)}", spec=str(path))
    family = GGUF_ARCHES[arch]

    def need(key: str) -> int:
        v = fields.get(f"{arch}.{key}")
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ModelError(f"GGUF file '{path}': metadata '{arch}.{key}' is missing or not a "
                             f"positive integer; {what_to_do}", spec=str(path))
        return v

    hidden = need("embedding_length")
    heads = need("attention.head_count")
    kv = fields.get(f"{arch}.attention.head_count_kv") or heads
    head_dim = fields.get(f"{arch}.attention.key_length") or hidden // heads
    vocab = fields.get(f"{arch}.vocab_size")
    if not vocab:
        tok = header.kv.get("tokenizer.ggml.tokens")
        emb = tensors.get("token_embd.weight")
        vocab = (int(tok[1]) if isinstance(tok, tuple) else
                 int(emb[0][1]) if emb is not None and len(emb[0]) > 1 else 0)
    window = fields.get(f"{arch}.attention.sliding_window") or None
    pattern = 0
    if family in _DEFAULT_PATTERN and window:
        pattern = int(fields.get(f"{arch}.attention.sliding_window_pattern")
                      or _DEFAULT_PATTERN[family])
    elif window:
        window = None  # phi3 writes a window longer than its context: no layer slides
    ftype = fields.get("general.file_type")
    name = fields.get("general.name") or path.stem
    experts: dict[str, Any] = {}
    n_expert = fields.get(f"{arch}.expert_count")
    if isinstance(n_expert, int) and not isinstance(n_expert, bool) and n_expert > 0:
        # llama's experts are feed_forward_length wide (Mixtral); other architectures say
        # expert_feed_forward_length
        experts = {"num_experts": n_expert,
                   "num_experts_per_tok": fields.get(f"{arch}.expert_used_count") or 0,
                   "moe_intermediate_size": (fields.get(f"{arch}.expert_feed_forward_length")
                                             or need("feed_forward_length")),
                   "shared_expert_intermediate_size": (
                       fields.get(f"{arch}.expert_shared_feed_forward_length") or 0)}
    try:
        llm = LLMSpec(
            name=str(name), family=family, hidden_size=hidden, num_layers=need("block_count"),
            num_heads=heads, num_kv_heads=int(kv), head_dim=int(head_dim),
            intermediate_size=need("feed_forward_length"), vocab_size=int(vocab),
            max_position_embeddings=need("context_length"),
            tie_word_embeddings="output.weight" not in tensors,
            qkv_bias="blk.0.attn_q.bias" in tensors or "blk.0.attn_qkv.bias" in tensors,
            sliding_window=window, sliding_window_pattern=pattern,
            fused_qkv="blk.0.attn_qkv.weight" in tensors, fused_gate_up=family == "phi3",
            hidden_act="gelu_pytorch_tanh" if family.startswith("gemma") else "silu",
            rope_theta=_f32(fields.get(f"{arch}.rope.freq_base") or 10000.0),
            rms_norm_eps=_f32(fields.get(f"{arch}.attention.layer_norm_rms_epsilon") or 1e-5),
            **experts)
    except UserError as e:
        raise ModelError(f"GGUF file '{path}': {e}", spec=str(path)) from None
    file_format = GGUF_FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
    return llm, file_format, bool(fields.get(GGUF_RANDOM_KEY, False))


__all__ = ["FAMILIES", "GGUF_RANDOM_KEY", "HF_RANDOM_KEY", "MOE_HF_ARCHITECTURES",
           "MOE_MODEL_TYPES", "PRESETS_FILE", "REPRESENTATION_KEYS",
           "get_preset", "hf_config", "preset_names", "preset_representation", "resolve_llm",
           "spec_from_gguf", "spec_from_hf_config"]

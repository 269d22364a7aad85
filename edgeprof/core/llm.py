"""Contracts for generative (decoder-only language) models: what the estimator, the
generative backends, the harness, the predictor, the router and the report agree on.

Nothing here imports a runtime or a framework.

* :class:`LLMSpec` — the architecture in numbers (the shape of a published model), enough to
  count parameters, bytes per format and the KV cache without materialising a weight.
* :class:`LLMModel` — a spec plus where it came from (a preset ``llm:NAME``, a GGUF file, a
  Hugging Face folder) and whether its weights are random.
* :class:`FormatInfo` — a weight format a generative backend makes, with its byte layout
  (:class:`WeightLayout`); a backend declares them as data (:class:`DeclaresFormats`:
  ``format_layouts``), and the estimate reads them from the backend.
* :class:`GenerationConfig` — what to run: prompt and generated tokens (llama-bench's ``pp``/
  ``tg``), depths, repetitions, threads, device.
* :class:`GenerativeBackend` / :class:`GenerativeSession` — the plugin contract:
  ``build(model, fmt, workdir) -> Artifact`` (the runtime's own file or folder + manifest)
  and ``load(artifact, ...) -> session``; a session evaluates a prompt (``prefill``) and
  generates exactly ``n`` tokens (``decode``), calling back once per token so the harness,
  not the backend, holds the clock.
* :class:`GenerationRecord` — one measured (backend, format, depth) with llama-bench's column
  names in :meth:`GenerationRecord.bench_row`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Protocol, Sequence,
                    runtime_checkable)

from edgeprof.core.backend import Backend, Capabilities
from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.core.importing import dist_version
from edgeprof.core.results import GenerationRecord  # noqa: F401 - its home is results; named here too

if TYPE_CHECKING:  # pragma: no cover
    from edgeprof.core.artifact import Artifact

#: model specs that name a generative model: ``llm:NAME``, a ``.gguf`` file, or a folder
#: holding ``config.json`` (a Hugging Face model folder)
LLM_PREFIX = "llm:"
RANDOM_WEIGHTS_NOTE = ("random weights: latency and memory are those of the published shape; "
                       "the text it generates means nothing and no quality is reported")


def is_llm_spec(spec: str) -> bool:
    """Whether a model spec names a generative model (cheap: looks at the string and, for a
    folder, at whether it holds ``config.json``)."""
    s = str(spec)
    if s.startswith(LLM_PREFIX) or s.lower().endswith(".gguf"):
        return True
    p = Path(s)
    return p.is_dir() and (p / "config.json").is_file()


@dataclass(frozen=True)
class LLMSpec:
    """A decoder-only transformer's architecture (Hugging Face ``config.json`` names).

    ``family`` is the Hugging Face ``model_type`` (llama, qwen2, gemma, gemma2, gemma3_text,
    phi3). Sliding-window attention: ``sliding_window`` tokens on the layers that use it;
    ``sliding_window_pattern = N`` means every N-th layer (1-based: layers N-1, 2N-1, ...)
    is global and the others slide (Gemma 2: 2, Gemma 3: 6); 0 means no layer slides.

    Mixture of experts (Hugging Face names; Mixtral's ``num_local_experts`` is
    ``num_experts``): ``num_experts`` 0 (or None) is a dense model. Otherwise every layer's MLP
    is a router (``hidden -> num_experts`` logits) and ``num_experts`` SwiGLU experts of
    ``moe_intermediate_size``, of which ``num_experts_per_tok`` run for each token (their
    weights renormalised when ``norm_topk_prob``), plus one always-on shared expert of
    ``shared_expert_intermediate_size`` when it is > 0 (Qwen2-MoE, whose shared expert also
    has a one-output gate). ``intermediate_size`` is then unused by the layers (the published
    config's dense MLP width, kept as published). Memory holds every expert; a token reads
    the router and its ``num_experts_per_tok`` experts.
    """

    name: str
    family: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool = False
    sliding_window: int | None = None
    sliding_window_pattern: int = 0
    fused_qkv: bool = False  # Phi-3: one qkv_proj
    fused_gate_up: bool = False  # Phi-3: one gate_up_proj
    hidden_act: str = "silu"
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    #: the published parameter count and where it comes from (None for a user's model)
    published_parameters: int | None = None
    source: str = ""
    #: mixture of experts (see the class docstring); 0 = dense
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    norm_topk_prob: bool = True

    def __post_init__(self) -> None:
        for f in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                  "intermediate_size", "vocab_size", "max_position_embeddings"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise UserError(f"model '{self.name}': {f} must be a positive integer, got {v!r}")
        if self.num_heads % self.num_kv_heads:
            raise UserError(f"model '{self.name}': num_heads ({self.num_heads}) must be a "
                            f"multiple of num_kv_heads ({self.num_kv_heads})")
        self._check_experts()

    def _check_experts(self) -> None:
        for f in MOE_FIELDS[:-1]:
            v = getattr(self, f)
            if v is None:
                object.__setattr__(self, f, v := 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise UserError(f"model '{self.name}': {f} must be an integer of at least 0, "
                                f"got {v!r}")
        if not isinstance(self.norm_topk_prob, bool):
            raise UserError(f"model '{self.name}': norm_topk_prob must be true or false, got "
                            f"{self.norm_topk_prob!r}")
        e, k = self.num_experts, self.num_experts_per_tok
        if not e:
            extra = [f for f in MOE_FIELDS[1:-1] if getattr(self, f)]
            if extra:
                raise UserError(f"model '{self.name}': {', '.join(extra)} set but num_experts "
                                "is 0 (a dense model); give num_experts for a mixture of experts")
            return
        if not 1 <= k <= e:
            raise UserError(f"model '{self.name}': num_experts_per_tok must be from 1 to "
                            f"num_experts ({e}), got {k}")
        if self.moe_intermediate_size <= 0:
            raise UserError(f"model '{self.name}': a mixture of experts needs "
                            "moe_intermediate_size (each expert's MLP width) > 0")

    @property
    def is_moe(self) -> bool:
        """Whether the MLPs are mixtures of experts (``num_experts`` > 0)."""
        return self.num_experts > 0

    def layer_slides(self, i: int) -> bool:
        """Whether layer ``i`` (0-based) uses sliding-window attention."""
        if not self.sliding_window or self.sliding_window_pattern <= 0:
            return False
        return (i + 1) % self.sliding_window_pattern != 0

    def to_dict(self) -> dict[str, Any]:
        """The fields by name; a dense model's leave the expert fields out (a dense spec's
        dict, and every cache key made from it, is what it was before experts existed)."""
        d = dataclasses.asdict(self)
        if not self.num_experts:
            for f in MOE_FIELDS:
                d.pop(f)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LLMSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise UserError(f"unknown LLM spec field(s) {sorted(unknown)}")
        return cls(**d)


#: LLMSpec's mixture-of-experts fields (Hugging Face names), ``norm_topk_prob`` last
MOE_FIELDS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
              "shared_expert_intermediate_size", "norm_topk_prob")


@dataclass(frozen=True)
class LLMModel:
    """A generative model as given: its spec, where it came from, and its weights."""

    spec: LLMSpec
    source_kind: str  # preset | gguf | hf_folder
    given: str  # what the user typed
    path: Path | None = None  # the GGUF file or the HF folder (None for a preset)
    random_weights: bool = True
    #: for a GGUF: its file type as llama.cpp names it (q4_k_m ...), else None
    file_format: str | None = None

    @property
    def note(self) -> str:
        return RANDOM_WEIGHTS_NOTE if self.random_weights else ""

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "source_kind": self.source_kind,
                "given": self.given, "path": str(self.path) if self.path else None,
                "random_weights": self.random_weights, "file_format": self.file_format,
                "note": self.note}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LLMModel:
        return cls(spec=LLMSpec.from_dict(d["spec"]), source_kind=d["source_kind"],
                   given=d["given"], path=Path(d["path"]) if d.get("path") else None,
                   random_weights=bool(d.get("random_weights", True)),
                   file_format=d.get("file_format"))


# ------------------------------------------------------------------ weight formats
@dataclass(frozen=True)
class WeightTensor:
    """One stored tensor of a generative model as the estimate lists it
    (``edgeprof.backends.llm_layout.tensors``): llama.cpp's name, ``ne`` in ggml order
    (input size first)."""

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


@runtime_checkable
class WeightLayout(Protocol):
    """How a runtime stores each tensor in a format: the byte model the estimate reads.

    Declared by the backend that makes the format (its data: the types, bits, block sizes,
    which tensors stay wide), so the estimate needs no knowledge of any runtime.
    """

    def storage(self, spec: LLMSpec, tensors: Sequence[WeightTensor], fmt: FormatInfo,
                device: str = "cpu") -> dict[str, tuple[int, str]]:
        """Tensor name -> (bytes, stored type) of every tensor in ``tensors``; an LM head
        stored apart from a tied embedding is added as ``output.weight``."""

    def file_bytes(self, spec: LLMSpec, tensors: Sequence[WeightTensor],
                   fmt: FormatInfo) -> tuple[int, str] | None:
        """(bytes, how they are counted) of the runtime's model file when the layout models
        it (a GGUF), else None."""


@dataclass(frozen=True)
class FormatInfo:
    """A weight format a generative backend makes: how each tensor is stored (``layout``)
    and what it computes in. :meth:`to_dict` leaves ``layout`` out (it is behaviour)."""

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
    layout: WeightLayout | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "layout"}


@runtime_checkable
class DeclaresFormats(Protocol):
    """A generative backend that declares its formats' byte layouts as data: the estimate,
    the router and the predictor read ``format_layouts`` (every format it knows, by name;
    ``formats`` says which it makes). A backend without it gets the generic accounting of
    a format of the same name."""

    name: str
    formats: tuple[str, ...]
    format_layouts: Mapping[str, FormatInfo]


@dataclass(frozen=True)
class GenerationConfig:
    """llama-bench's test shape: ``pp n_prompt`` and ``tg n_gen`` at each depth."""

    prompt_tokens: int = 512
    gen_tokens: int = 128
    depths: tuple[int, ...] = (0,)
    repetitions: int = 5
    warmup: int = 1
    threads: int | None = None  # None: the machine's physical cores
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.depths, list):
            object.__setattr__(self, "depths", tuple(self.depths))
        if self.gen_tokens < 1:
            raise UserError(f"--gen-tokens must be at least 1, got {self.gen_tokens}")
        if self.prompt_tokens < 1:
            raise UserError(f"--prompt-tokens must be at least 1, got {self.prompt_tokens}")
        if any(d < 0 for d in self.depths):
            raise UserError(f"--depth values must be 0 or more, got {list(self.depths)}")
        if self.repetitions < 1:
            raise UserError(f"repetitions must be at least 1, got {self.repetitions}")

    def context_needed(self) -> int:
        """The context a request of this shape occupies: the deepest cache + the prompt + the
        generated tokens (what the fit, the router and the model's maximum are checked
        against; the tests themselves need less, see generate.session_context)."""
        return max(self.depths) + self.prompt_tokens + self.gen_tokens

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["depths"] = list(self.depths)
        return d


@runtime_checkable
class GenerativeSession(Protocol):
    """A loaded model with one sequence in flight.

    The harness holds the clock: it times ``prefill`` and each ``on_token`` callback.
    ``decode`` must generate exactly ``n`` tokens greedily, ignoring end-of-sequence.
    """

    #: the runtime's build (git commit or version) for llama-bench's ``build_commit``
    build_commit: str

    def reset(self) -> None:
        """Empty the KV cache: the next prefill starts a new sequence."""

    def prefill(self, token_ids: Sequence[int]) -> None:
        """Evaluate ``token_ids`` after what the cache holds; return when the logits of the
        last one are ready (the first token can be sampled)."""

    def decode(self, n: int, on_token: Callable[[int], None]) -> None:
        """Generate exactly ``n`` tokens (greedy, EOS ignored), one at a time, calling
        ``on_token(token_id)`` as soon as each token is produced."""

    def close(self) -> None:
        """Free the runtime's memory."""


def check_room(used: int, more: int, n_ctx: int) -> None:
    """A session's context check: :class:`UserError` when ``more`` tokens after the ``used``
    ones the cache holds would overflow the ``n_ctx`` the session was loaded for."""
    if used + more > n_ctx:
        raise UserError(f"the sequence would hold {used + more} tokens ({used} in the cache, "
                        f"{more} more asked); this session was loaded for a context of {n_ctx}")


class GenerativeBackend(Backend):
    """Base class of a generative backend (registered through the same
    ``edgeprof_register_backends`` hook as tensor backends).

    ``formats`` lists the weight formats it makes (``q4_k_m``, ``int4`` ...);
    ``devices`` the processors it runs on. Subclasses implement :meth:`supports`,
    :meth:`build_llm` and :meth:`load_llm`.
    """

    workload: ClassVar[str] = "generate"
    formats: ClassVar[tuple[str, ...]] = ()
    #: the processors this machine's installed build runs on (may be looked up lazily)
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    #: the processors the runtime runs on where a board has them (``--device`` of an
    #: estimate or a recommendation: data, never a runtime import)
    board_devices: ClassVar[tuple[str, ...]] = ("cpu",)
    #: the model sources it builds from (LLMModel.source_kind)
    sources: ClassVar[tuple[str, ...]] = ("preset", "hf_folder", "gguf")
    #: whether it builds and runs mixture-of-experts models (LLMSpec.num_experts > 0); one
    #: that does not is refused them by :meth:`architecture_reason` (a dense build of an MoE
    #: spec would time another model)
    runs_experts: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities(precisions=(), model_formats=("llm",))

    @classmethod
    def listed(cls) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the weight formats it makes, the processors it runs on here)."""
        return cls.formats, cls.devices

    @classmethod
    def runtime_version(cls) -> str:
        """The runtime package's version (read from its metadata, not by importing it)."""
        for req in cls.requires:
            version = dist_version(req.replace("_", "-"))
            if version:
                return f"{req} {version}"
        return ""

    def supports(self, model: LLMModel, fmt: str, device: str = "cpu") -> str | None:
        """Why this backend can't run ``model`` in ``fmt`` on this machine's ``device``
        (None if it can)."""
        if fmt not in self.formats:
            return (f"{self.name} does not make format '{fmt}'; it makes "
                    f"{', '.join(self.formats)}")
        if device != "cpu" and device not in self.devices:  # cpu needs no lookup
            return f"{self.name} runs on {', '.join(self.devices)} here, not '{device}'"
        return self.architecture_reason(model, fmt)

    def supports_on_board(self, model: LLMModel, fmt: str, device: str = "cpu") -> str | None:
        """Why this runtime can't run ``model`` in ``fmt`` on a board's ``device`` (None if it
        can): formats, :attr:`board_devices` and the architecture; imports no runtime."""
        if fmt not in self.formats:
            return (f"{self.name} does not make format '{fmt}'; it makes "
                    f"{', '.join(self.formats)}")
        return self.board_reason(fmt, device) or self.architecture_reason(model, fmt)

    def board_reason(self, fmt: str, device: str) -> str | None:
        """Why a board's ``device`` can't take ``fmt`` from this runtime (None if it can)."""
        if device not in self.board_devices:
            return (f"{self.name} runs on a board's {', '.join(self.board_devices)}, "
                    f"not '{device}'")
        return None

    def architecture_reason(self, model: LLMModel, fmt: str) -> str | None:
        """Why the runtime can't run this model's architecture or source in ``fmt`` (None if
        it can). Static: no runtime import, no file written. Subclasses add their own
        reasons after this one (a source it does not build from)."""
        if model.source_kind not in self.sources:
            names = {"preset": "an llm: preset", "hf_folder": "a Hugging Face folder",
                     "gguf": "a GGUF file"}
            return (f"{self.name} builds from {' or '.join(names[s] for s in self.sources)}, "
                    f"not {names.get(model.source_kind, model.source_kind)}")
        spec = model.spec
        if spec.is_moe and not self.runs_experts:
            return (f"{self.name} builds dense models here, not a mixture of experts "
                    f"('{spec.name}': {spec.num_experts} experts, {spec.num_experts_per_tok} "
                    "per token); the analytic estimate covers it")
        return None

    def check_buildable(self, model: LLMModel, fmt: str) -> None:
        """Raise :class:`UnsupportedError` with :meth:`supports`'s reason, then
        :class:`BackendUnavailableError` when the runtime is missing (before building)."""
        reason = self.supports(model, fmt, "cpu")
        if reason:
            raise UnsupportedError(reason, backend=self.name, precision=fmt)
        self.ensure_available()

    def check_loadable(self, n_ctx: int, limit: int | None, device: str) -> None:
        """A load's one-line refusals: a device this build does not run on, a context longer
        than the model's maximum (``limit``; None or 0 when the model does not say)."""
        if device != "cpu" and device not in self.devices:
            raise UnsupportedError(f"{self.name} runs on {', '.join(self.devices)} here, not "
                                   f"'{device}'", backend=self.name)
        if limit and n_ctx > limit:
            raise UserError(f"a context of {n_ctx} tokens is longer than the model's maximum "
                            f"({limit}); ask for fewer prompt, generated or depth tokens")

    def build_llm(self, model: LLMModel, fmt: str, workdir: Path) -> Artifact:
        """Write the runtime's model file/folder for ``model`` in ``fmt`` under ``workdir``
        (random weights for a preset) with its manifest; return the artifact."""
        raise NotImplementedError

    def load_llm(self, artifact: Artifact, *, threads: int, n_ctx: int,
                 device: str = "cpu") -> GenerativeSession:
        raise NotImplementedError


__all__ = ["DeclaresFormats", "FormatInfo", "GenerationConfig", "GenerationRecord",
           "GenerativeBackend", "GenerativeSession", "LLMModel", "LLMSpec", "LLM_PREFIX",
           "MOE_FIELDS",
           "RANDOM_WEIGHTS_NOTE", "WeightLayout", "WeightTensor",
           "check_room", "is_llm_spec"]

"""What to measure, as a small serializable value, and the :class:`Runner` contract.

A :class:`MeasureRequest` names a backend, a :class:`~edgeprof.core.backend.RunConfig` and
either a model spec (anything ``resolve_model`` reads) or a built artifact (its
``Artifact.to_dict()``). ``to_dict()`` / ``from_dict()`` make it plain JSON data, so the same
request can run inline, in an isolated worker process or on another machine.

A request is for one of two workloads, the backend's (``Backend.workload``): ``tensor`` (a
fixed-shape model timed call by call) or ``generate`` (a generative model: ``llm:NAME``, a
``.gguf`` file or a Hugging Face folder, timed as llama-bench's pp/tg per depth). A generative
request's format is ``config.precision``, its device ``config.device``, its test shape
``generation`` (a :class:`~edgeprof.core.llm.GenerationConfig` as plain data) and, optionally,
its model as plain data (``llm``: ``LLMModel.to_dict()``, so a worker need not resolve the spec
again). :meth:`MeasureRequest.for_generation` builds one.

A **runner** is where a request runs: ``runner.run(request)`` returns the
:data:`~edgeprof.core.results.RunRecord` of a run that finished, and *raises* otherwise.
Turning a raised error into a status (``unsupported``, ``unavailable``, ``failed``) is not a
runner's job: ``edgeprof.profilers.measure.measure.measure`` does it, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    from edgeprof.core.models import ModelHandle
    from edgeprof.core.results import BenchmarkResult


@dataclass
class MeasureRequest:
    """One backend x one configuration of one model (or artifact) to measure.

    ``handle`` and ``backend_type`` are shortcuts for this process only (a model already
    resolved, possibly an in-memory module; a backend class that no registry lists): they are
    never serialized. Everything else is plain data.
    """

    backend: str
    config: RunConfig = field(default_factory=RunConfig)
    model: str | None = None  # a model spec: builtin:NAME, module:factory, a model file
    artifact: dict[str, Any] | None = None  # Artifact.to_dict() of a built artifact
    input_shapes: list[list[int]] | None = None
    input_dtypes: list[str] | None = None
    plugins_file: str | None = None  # the plugins.toml that registers the backend
    calibration: str | None = None  # .npz of real samples for static int8
    backend_class: str | None = None  # "module:QualName" of a class not registered by name
    #: a registered workload's name (tensor, generate ...); None: the backend's (measure()
    #: fills it in before the hook, checking it is the backend's)
    workload: str | None = None
    generation: dict[str, Any] | None = None  # GenerationConfig.to_dict() (generate)
    llm: dict[str, Any] | None = None  # LLMModel.to_dict() of the generative model
    workdir: str | None = None  # where a generative build writes (default: edgeprof's cache)
    handle: ModelHandle | None = field(default=None, compare=False, repr=False)
    backend_type: type | None = field(default=None, compare=False, repr=False)

    _LOCAL = ("handle", "backend_type")

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not self.backend:
            raise UserError(f"a measure request needs a backend name, got {self.backend!r}")
        if self.model is None and self.artifact is None and self.handle is None:
            raise UserError("a measure request needs a model spec or an artifact")
        if isinstance(self.config, dict):
            self.config = RunConfig.from_dict(self.config)
        if self.generation is not None and not isinstance(self.generation, dict):
            self.generation = self.generation.to_dict()  # a GenerationConfig
        if self.generation is not None and self.workload is None:
            self.workload = "generate"
        if self.workload is not None and not (isinstance(self.workload, str)
                                              and self.workload):
            raise UserError(f"a measure request's workload is a registered workload's name "
                            f"(tensor, generate ...), got {self.workload!r}")
        if self.generation is not None:  # a workload that takes none refuses it (its check)
            self.generation_config()  # unknown or bad fields: UserError now, not in a worker

    @classmethod
    def for_generation(cls, backend: str | type, model: Any, fmt: str, generation: Any, *,
                       timeout_s: float | None = None, isolate: bool = False,
                       plugins_file: Any = None, workdir: Any = None) -> MeasureRequest:
        """A generative request: ``model`` (an ``LLMModel``, or its spec: ``llm:NAME``, a
        ``.gguf`` path, a Hugging Face folder) in format ``fmt`` with ``generation`` (a
        ``GenerationConfig``: prompt/generated tokens, depths, repetitions, warm-up, threads,
        device)."""
        backend_type = backend if isinstance(backend, type) else None
        name = backend.name if isinstance(backend, type) else backend
        gen = generation if isinstance(generation, dict) else generation.to_dict()
        if hasattr(model, "spec") and hasattr(model, "to_dict"):  # an LLMModel
            spec = str(model.path) if model.path is not None else model.given
            llm = model.to_dict()
        else:
            spec, llm = str(model), None
        config = RunConfig(precision=fmt, device=gen.get("device", "cpu"),
                           threads=gen.get("threads"), timeout_s=timeout_s,
                           isolate=bool(isolate))
        return cls(backend=name, config=config, model=spec, workload="generate",
                   generation=gen, llm=llm,
                   plugins_file=str(plugins_file) if plugins_file else None,
                   workdir=str(workdir) if workdir is not None else None,
                   backend_type=backend_type)

    def generation_config(self) -> Any:
        """The :class:`~edgeprof.core.llm.GenerationConfig` of a generative request (its
        defaults when none was given)."""
        from edgeprof.core.llm import GenerationConfig

        d = dict(self.generation or {})
        names = {f.name for f in fields(GenerationConfig)}
        unknown = set(d) - names
        if unknown:
            raise UserError(f"unknown generation config field(s) {sorted(unknown)}")
        if "depths" in d:
            d["depths"] = tuple(d["depths"])
        try:
            return GenerationConfig(**d)
        except TypeError as e:
            raise UserError(f"bad generation config: {e}") from None

    @classmethod
    def for_handle(cls, backend: str | type, handle: ModelHandle, config: RunConfig, *,
                   plugins_file: Any = None) -> MeasureRequest:
        """A request for an already resolved model (kept as the in-process ``handle``)."""
        backend_type = backend if isinstance(backend, type) else None
        name = backend.name if isinstance(backend, type) else backend
        model = str(handle.path.resolve()) if handle.path is not None else handle.spec
        return cls(backend=name, config=config, model=model,
                   input_shapes=[list(s.shape) for s in handle.input_specs],
                   input_dtypes=[s.dtype for s in handle.input_specs],
                   plugins_file=str(plugins_file) if plugins_file else None,
                   calibration=str(handle.calibration) if handle.calibration else None,
                   handle=handle, backend_type=backend_type)

    @property
    def model_name(self) -> str:
        """The model as results name it (the handle's spec, the artifact's source ...)."""
        if self.handle is not None:
            return self.handle.spec
        if self.llm is not None:
            return str(self.llm.get("spec", {}).get("name") or self.model)
        if self.model is not None:
            return self.model
        return str((self.artifact or {}).get("path") or "artifact")

    @property
    def batch_size(self) -> int:
        if self.handle is not None:
            return self.handle.batch_size
        if self.input_shapes and self.input_shapes[0]:
            return int(self.input_shapes[0][0])
        return self.config.batch_size

    def local_only(self) -> str | None:
        """Why this request cannot leave this process (None when it can)."""
        if self.artifact is None and (self.model is None or self.model.startswith("object:")):
            return ("the model was given as an nn.Module object, which cannot cross to a "
                    "worker process or another machine (give a package.module:factory spec "
                    "instead)")
        h = self.handle
        if self.artifact is None and h is not None and h.format == "torch" \
                and getattr(h, "_factory", None) is None:
            return (f"the model '{h.spec}' is a module built in this process (trained or "
                    "compressed here), which its spec alone cannot rebuild elsewhere")
        return None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: v.to_dict() if isinstance(v := getattr(self, f.name), RunConfig) else v
                for f in fields(self) if f.name not in self._LOCAL}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MeasureRequest:
        names = {f.name for f in fields(cls)} - set(cls._LOCAL)
        unknown = set(d) - names
        if unknown:
            raise UserError(f"unknown measure request field(s) {sorted(unknown)}")
        return cls(**d)


@runtime_checkable
class Runner(Protocol):
    """Where a request runs. ``run`` returns the record of a finished run and raises
    otherwise; :func:`edgeprof.profilers.measure.measure.measure` makes the status."""

    name: str

    def run(self, request: MeasureRequest) -> BenchmarkResult:  # pragma: no cover - protocol
        ...


__all__ = ["MeasureRequest", "Runner"]

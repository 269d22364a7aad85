"""The Profiler interface, backend capabilities, and the backend <-> harness contract.

A backend turns ``(model, precision, options)`` into a :class:`PreparedModel`: a ``run``
callable over runtime-native inputs plus metadata (versions, threads, executed precision).
The harness (``edgeprof.profilers.measure.harness``) times that callable; backends never time
themselves and the harness knows nothing of any runtime.

Backends are classes registered through the ``edgeprof_register_backends`` hook. Their
capabilities are data on the class, so the router reads data instead of branching on names.
Nothing heavy is imported here: a backend imports its runtime inside ``prepare``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from edgeprof.core.errors import BackendUnavailableError, InputSpecError, UnsupportedError

if TYPE_CHECKING:  # pragma: no cover
    from edgeprof.core.artifact import Artifact
    from edgeprof.core.formats import Route
    from edgeprof.core.models import ModelHandle


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, as data the router and the CLI read."""

    precisions: tuple[str, ...]
    devices: tuple[str, ...] = ("cpu",)
    model_formats: tuple[str, ...] = ("torch",)


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""
    hint: str = ""


@dataclass
class RunConfig:
    """A benchmark request: small and serializable, so it can travel to a worker or a node."""

    precision: str = "fp32"
    batch_size: int = 1
    threads: int | None = None  # intra-op threads; None = physical cores
    interop_threads: int = 1
    device: str = "cpu"
    warmup: int | None = None  # None = adaptive
    runs: int | None = None  # minimum timed runs; None = harness default
    min_time_s: float | None = None
    max_time_s: float | None = None
    isolate: bool = False
    timeout_s: float | None = None
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PreparedModel:
    """What a backend hands the harness: one inference as a callable, plus metadata.

    ``run(inputs)`` executes exactly one inference on ``inputs`` (already in the runtime's
    own types and on its device) and returns the outputs. For asynchronous devices ``sync``
    waits for completion; the harness calls it inside the timed region.
    """

    run: Callable[[Any], Any]
    inputs: Any
    runtime: str
    runtime_version: str
    executed_precision: str
    threads: dict[str, int] = field(default_factory=dict)
    device: str = "cpu"
    sync: Callable[[], None] | None = None
    load_time_s: float = 0.0  # the backend's own figure; the harness also times prepare() itself
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    close: Callable[[], None] | None = None
    to_numpy: Callable[[Any], list] | None = None  # outputs -> list of numpy arrays
    #: numpy inputs -> the runtime's own inputs (what ``run`` takes), for extra inputs
    feed: Callable[[Sequence[Any]], Any] | None = None
    #: warnings of the preparation ({"code", "message"}: a rebuilt cache entry, an
    #: uninformative agreement ...), also listed in ``notes``
    warnings: list[dict[str, str]] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "runtime_version": self.runtime_version,
            "executed_precision": self.executed_precision,
            "threads": dict(self.threads),
            "device": self.device,
            "load_time_s": self.load_time_s,
            "notes": list(self.notes),
            **({"extra": self.extra} if self.extra else {}),
        }


def add_warning(prepared: PreparedModel, code: str, message: str) -> None:
    """A warning of a preparation, as a record and as a note line."""
    prepared.warnings.append({"code": code, "message": message})
    prepared.notes.append(f"warning: {code}: {message}")


def modules_present(*names: str) -> str | None:
    """Return the first of ``names`` that cannot be imported, or None (cheap: find_spec)."""
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    return None


class Backend:
    """Base class of every backend: the Profiler interface.

    ``estimate`` and ``summarize`` are analytic and shared; ``benchmark`` prepares the model
    with :meth:`prepare` and times it with the harness. A backend overrides what it knows
    better (its own graph, its own per-layer timings).
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities(precisions=("fp32",))
    #: Python modules the runtime needs; checked cheaply with find_spec
    requires: ClassVar[tuple[str, ...]] = ()
    #: what to do when ``requires`` is missing
    install_hint: ClassVar[str] = ""
    #: precisions the backend produces itself from an fp32 model of a format it loads
    #: (the conversion graph routes other precisions through converters that produce them)
    quantizes: ClassVar[tuple[str, ...]] = ()

    # -- availability -------------------------------------------------------------------
    @classmethod
    def availability(cls) -> Availability:
        """Cheap check (no heavy import) that the runtime and its device are present."""
        missing = modules_present(*cls.requires)
        if missing:
            return Availability(False, f"Python package '{missing}' is not installed", cls.install_hint)
        return Availability(True)

    @classmethod
    def ensure_available(cls) -> None:
        a = cls.availability()
        if not a.available:
            raise BackendUnavailableError(cls.name, a.reason, a.hint)

    @classmethod
    def check_precision(cls, precision: str) -> None:
        if precision not in cls.capabilities.precisions:
            raise UnsupportedError(
                f"backend '{cls.name}' cannot run precision '{precision}'; "
                f"it supports {', '.join(cls.capabilities.precisions)}",
                backend=cls.name,
                precision=precision,
            )

    @classmethod
    def check_request(cls, model: ModelHandle, config: RunConfig) -> None:
        """Refuse (UnsupportedError) what the capabilities rule out: the precision, the
        model's format, the device kind. Every backend's ``prepare`` starts here."""
        cls.check_precision(config.precision)
        caps = cls.capabilities
        if model.format not in caps.model_formats:
            cls.route(model.format, config.precision)  # UnsupportedError names the missing edge
        if config.device.split(":")[0] not in caps.devices:
            raise UnsupportedError(f"backend '{cls.name}' runs on "
                                   f"{', '.join(d.upper() for d in caps.devices)}, not "
                                   f"{config.device}", backend=cls.name)

    @classmethod
    def route(cls, model_format: str, precision: str = "fp32") -> Route:
        """The cheapest conversion route from ``model_format`` to a format this backend
        loads (``capabilities.model_formats``); UnsupportedError names the missing edge."""
        from edgeprof.core.formats import get_graph

        return get_graph().plan(model_format, cls.capabilities.model_formats, precision,
                                cls.quantizes, cls.name)

    @classmethod
    def accepts_format(cls, model_format: str, precision: str = "fp32") -> bool:
        """True when a model of ``model_format`` reaches this backend (loaded or routed)."""
        try:
            cls.route(model_format, precision)
        except UnsupportedError:
            return False
        return True

    # -- the backend's own job ----------------------------------------------------------
    def build(self, model: ModelHandle, precision: str, calibration: Any = None) -> Artifact:
        """Convert ``model`` into this backend's artifact at ``precision`` (may import torch
        or tensorflow to convert); ``calibration``: a .npz of real samples for static int8."""
        raise NotImplementedError(f"backend '{self.name}' does not implement build()")

    def load(self, artifact: Artifact, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """Load a built artifact with the runtime only (no torch, no tensorflow)."""
        raise NotImplementedError(f"backend '{self.name}' does not implement load()")

    def prepare(self, model: ModelHandle, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """Load/convert ``model`` for ``config.precision``; ``inputs`` are numpy arrays.

        By default ``load(build(...))``. A cached artifact that fails to load is rebuilt
        once (with a warning); cache warnings become notes of the run."""
        from edgeprof.core.cache import drain_warnings, evict

        self.check_request(model, config)
        artifact = self.build(model, config.precision, model.calibration)
        try:
            prepared = self.load(artifact, config, inputs)
            rebuilt = None
        except (BackendUnavailableError, InputSpecError):
            raise  # not the artifact's fault
        except Exception:  # noqa: BLE001 - a cached artifact that does not load is rebuilt
            if not artifact.cache_hit:
                raise
            rebuilt = artifact.path
            evict(artifact.path)
            artifact = self.build(model, config.precision, model.calibration)
            prepared = self.load(artifact, config, inputs)
        for message in drain_warnings():
            add_warning(prepared, "cache", message)
        if rebuilt is not None:
            add_warning(prepared, "cache_rebuilt",
                        f"cached artifact '{rebuilt}' did not load; it was rebuilt")
        return prepared

    def operator_profile(self, prepared: PreparedModel, runs: int = 10,
                         trace_path: str | None = None):
        """Per-operator timings from the runtime's own profiler, or None if it has none.

        Returns a pandas DataFrame with columns ``operator`` (the runtime's node name),
        ``op_type``, ``latency_ms`` (mean per inference), ``calls`` and, where the name can be
        matched to an estimate row, ``layer``. Writes a Chrome trace (JSON) to ``trace_path``
        when given.
        """
        return None

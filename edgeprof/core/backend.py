"""The Profiler interface, backend capabilities, and the backend <-> harness contract.

A backend turns ``(model, precision, options)`` into a :class:`PreparedModel`: a ``run``
callable over runtime-native inputs plus metadata (versions, threads, executed precision).

Options are typed. A backend declares its own knobs as a frozen dataclass, ``Backend.Options``
(default: none); ``RunConfig.options`` carries them by name (``KEY`` for every backend of the
request, ``BACKEND.KEY`` for one) and :meth:`Backend.options_for` validates them into that
dataclass: an unknown key or a wrong type is a ``UserError`` naming the backend, the key and
the valid keys with their types. The harness's own knobs (confidence-interval width, memory
sampling ...) are :class:`HarnessOptions`, ``RunConfig.harness_options``; they are not backend options.
The harness (``edgeprof.profilers.measure.harness``) times that callable; backends never time
themselves and the harness knows nothing of any runtime.

Backends are classes registered through the ``edgeprof_register_backends`` hook. Their
capabilities are data on the class, so the router reads data instead of branching on names.
Nothing heavy is imported here: a backend imports its runtime inside ``prepare``.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Union

from edgeprof.core.errors import (BackendUnavailableError, InputSpecError, UnknownNameError,
                                  UnsupportedError, UserError)
from edgeprof.core.importing import modules_present

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


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class NoOptions:
    """The options of a backend that has none."""


def _type_text(tp: Any) -> str:
    """A short, readable name of an option's type (``bool``, ``'a'|'b'``, ``int|None``)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "|".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return "|".join(_type_text(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "None"
    if origin in (tuple, list):
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis or origin is list:
            return f"list[{_type_text(args[0]) if args else 'Any'}]"
        return "[" + ", ".join(_type_text(a) for a in args) + "]"
    if origin is dict:
        return "dict"
    return getattr(tp, "__name__", str(tp))


_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


def _coerce(tp: Any, value: Any) -> Any:
    """``value`` as type ``tp`` or ValueError. A string (a CLI ``KEY=VALUE``) is read as the
    type asks: a bool from true/false/yes/no/on/off/1/0, numbers, JSON lists/objects."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        raise ValueError
    if origin in (Union, types.UnionType):
        for arm in typing.get_args(tp):
            if arm is type(None):
                if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
                    return None
                continue
            try:
                return _coerce(arm, value)
            except ValueError:
                pass
        raise ValueError
    if tp is type(None):
        if value is None:
            return None
        raise ValueError
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            return int(value.strip())
        raise ValueError
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            return float(value.strip())
        raise ValueError
    if tp is str:
        if isinstance(value, str):
            return value
        raise ValueError
    if origin in (tuple, list):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ValueError
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis or len(args) == 1:
            return tuple(_coerce(args[0], v) for v in value)
        if args and len(args) != len(value):
            raise ValueError
        return tuple(_coerce(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if origin is dict or tp is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ValueError from None
        if not isinstance(value, Mapping):
            raise ValueError
        return dict(value)
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise ValueError


def option_specs(options_cls: type) -> list[tuple[str, str, Any]]:
    """``(name, type text, default)`` of each field of an options dataclass."""
    hints = typing.get_type_hints(options_cls)
    out = []
    for f in dataclasses.fields(options_cls):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        out.append((f.name, _type_text(hints[f.name]), default))
    return out


def describe_options(options_cls: type) -> str:
    """``key: type = default, ...`` (or ``none``) for messages and listings."""
    specs = option_specs(options_cls)
    return ", ".join(f"{n}: {t} = {d!r}" for n, t, d in specs) if specs else "none"


def parse_options(options_cls: type, values: Mapping[str, Any], owner: str,
                  hint: str = "") -> Any:
    """``values`` validated into ``options_cls`` (a dataclass): UserError (one line) naming
    ``owner``, the key and the valid keys with their types for an unknown key or a bad value."""
    hints = typing.get_type_hints(options_cls)
    names = {f.name for f in dataclasses.fields(options_cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in names:
            raise UserError(f"{owner} has no option '{key}'; valid options: "
                            f"{describe_options(options_cls)}{hint}")
        tp = hints[key]
        try:
            kwargs[key] = _coerce(tp, value)
        except (ValueError, TypeError):
            if typing.get_origin(tp) is Literal:
                raise UnknownNameError(f"value of {owner} option '{key}'", str(value),
                                       [str(a) for a in typing.get_args(tp)]) from None
            raise UserError(f"{owner} option '{key}' must be {_type_text(tp)}, got {value!r}; "
                            f"valid options: {describe_options(options_cls)}") from None
    return options_cls(**kwargs)


@dataclass(frozen=True)
class HarnessOptions:
    """The timing harness's knobs (``edgeprof.profilers.measure.harness``); None = its default."""

    #: stop once the CI of the median is narrower than this fraction of it
    ci_width: float | None = None
    #: confidence level of the median's CI (default 0.95)
    ci_level: float | None = None
    #: force timing in blocks of this many calls (1 disables blocking)
    block_size: int | None = None
    #: largest clock-read cost, as a fraction of a call, before calls are timed in blocks
    max_timer_overhead: float | None = None
    warmup_tolerance: float | None = None
    warmup_min_time_s: float | None = None
    warmup_max_time_s: float | None = None
    #: measure peak memory (False skips the sampler)
    memory: bool = True
    #: RSS sampling period (default: edgeprof.profilers.measure.memory's)
    memory_interval_s: float | None = None
    #: keep every sample in the result (False drops ``samples_ms``)
    keep_samples: bool = True
    #: processes measuring at once on this host (for the oversubscription check)
    concurrent_workers: int = 1

    @classmethod
    def of(cls, value: HarnessOptions | Mapping[str, Any] | None) -> HarnessOptions:
        """``value`` as HarnessOptions: unknown names are a UserError; the harness checks
        values (``plan_from_config``) so a bad one names its rule there."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise UserError(f"harness options must be a mapping of names to values, got "
                            f"{type(value).__name__}")
        unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise UserError(f"unknown harness option(s) {', '.join(unknown)}; valid: "
                            f"{describe_options(cls)}")
        return cls(**value)


#: a device a run may name (``RunConfig.device``, ``--device``, a sweep's ``[run] device``);
#: whether a backend runs on it is the backend's to say (``Capabilities.devices``, its
#: ``check_request``: ncnn names the reason it has no Vulkan device)
DEVICE_PATTERN = r"cpu|cuda(:\d+)?|vulkan(:\d+)?"
#: the same, in words, for messages
DEVICE_WORDS = "cpu, cuda, cuda:N, vulkan or vulkan:N"


@dataclass
class RunConfig:
    """A benchmark request: small and serializable, so it can travel to a worker or a node.

    ``options``: backend options by name (``KEY`` or ``BACKEND.KEY``), validated against the
    backend's ``Options`` (:meth:`Backend.options_for`); ``harness_options``: the harness's
    knobs (the record's ``config["harness"]`` is what the harness did)."""

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
    harness_options: HarnessOptions = field(default_factory=HarnessOptions)

    def __post_init__(self) -> None:
        self.harness_options = HarnessOptions.of(self.harness_options)  # a dict (from JSON) becomes the type
        self.options = dict(self.options or {})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise UserError(f"unknown run config field(s) {unknown}")
        return cls(**d)


#: ``run_options`` names that are the CLI flags' (``--min-time`` -> ``min_time``), and the
#: RunConfig field each one sets; the fields' own names are accepted too
RUN_OPTION_ALIASES: dict[str, str] = {"min_time": "min_time_s", "max_time": "max_time_s",
                                      "timeout": "timeout_s"}
#: RunConfig fields a facade sets from its own arguments (``precision=``, ``threads=`` ...)
_OWN_ARGUMENTS = ("precision", "batch_size", "threads")


def run_config_options(run_options: Mapping[str, Any] | None, *,
                       reserved: Sequence[str] = _OWN_ARGUMENTS) -> dict[str, Any]:
    """``run_options`` (the Python API's dict) as RunConfig keyword arguments: names are the
    CLI flags' (``runs``, ``min_time``, ``max_time``, ``warmup``, ``timeout``, ``device``,
    ``isolate``, ``options`` ...) or RunConfig's fields (``min_time_s`` ...). A wrong name is
    a one-line ConfigError naming the valid ones; a field the facade takes as its own
    argument (``reserved``) names that argument."""
    from edgeprof.core.errors import ConfigError

    if run_options is None:
        return {}
    if not isinstance(run_options, Mapping):
        raise ConfigError(f"run_options must be a dict of option names to values, got "
                          f"{type(run_options).__name__}")
    fields = [f.name for f in dataclasses.fields(RunConfig) if f.name not in reserved]
    valid = sorted(set(fields) | set(RUN_OPTION_ALIASES))
    out: dict[str, Any] = {}
    for key, value in run_options.items():
        name = RUN_OPTION_ALIASES.get(key, key)
        if key in reserved:
            raise ConfigError(f"run_options cannot set '{key}': pass it as the {key}= "
                              "argument instead")
        if name not in fields:
            raise ConfigError(f"unknown run option '{key}'; valid: {', '.join(valid)}")
        if name in out:
            raise ConfigError(f"run_options sets {name} twice (as '{key}' and as its other "
                              "name); give one")
        out[name] = value
    return out


def check_backend_options(options: Mapping[str, Any], backends: Sequence[type[Backend]]) -> None:
    """Validate ``options`` for every backend of a run before anything runs (UserError): a
    ``BACKEND.KEY`` must name one of ``backends`` (a misspelt backend is not silently
    ignored), and each backend's ``Options`` must accept what applies to it."""
    if not isinstance(options, Mapping):
        raise UserError(f"backend options must be a mapping of names to values, got "
                        f"{type(options).__name__}")
    names = [b.name for b in backends]
    for key in options:
        owner, dot, _ = str(key).rpartition(".")
        if dot and owner not in names:
            raise UserError(f"option '{key}' is for backend '{owner}', which is not among "
                            f"the backends of this run ({', '.join(names)})")
    for backend in backends:
        backend.options_for(options)


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
    """A named warning of a preparation; the harness carries it into the run's warnings."""
    prepared.warnings.append({"code": code, "message": message})


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
    #: the backend's own knobs: a frozen dataclass (fields with types and defaults)
    Options: ClassVar[type] = NoOptions

    # -- options ------------------------------------------------------------------------
    @classmethod
    def options_for(cls, config: RunConfig | Mapping[str, Any] | None) -> Any:
        """This backend's ``Options`` from ``config.options`` (or a mapping): ``KEY`` and
        ``<this backend>.KEY`` apply, ``<other backend>.KEY`` is skipped. An unknown key or
        a wrong type is a UserError naming the backend, the key and the valid keys."""
        values = config.options if isinstance(config, RunConfig) else (config or {})
        mine: dict[str, Any] = {}
        for key, value in values.items():
            owner, dot, name = key.rpartition(".")
            if not dot:
                mine.setdefault(key, value)
            elif owner == cls.name:
                mine[name] = value  # the qualified key wins over a plain one
        return parse_options(cls.Options, mine, f"backend '{cls.name}'",
                             "; write BACKEND.KEY=VALUE to give an option to one backend only")

    @classmethod
    def listed(cls) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(precisions, devices) it offers, as ``edgeprof backends`` lists them: its
        capabilities' (a generative backend: its weight formats and processors)."""
        return cls.capabilities.precisions, cls.capabilities.devices

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
    def offers(cls, precision: str) -> bool:
        """Whether the backend offers ``precision`` (``capabilities.precisions``: the data a
        board prediction is also checked against)."""
        return precision in cls.capabilities.precisions

    @classmethod
    def check_precision(cls, precision: str) -> None:
        if not cls.offers(precision):
            raise UnsupportedError(
                f"not offered: {cls.name} does not offer {precision}; it offers "
                f"{', '.join(cls.capabilities.precisions)}",
                backend=cls.name,
                precision=precision,
            )

    @classmethod
    def check_request(cls, model: ModelHandle, config: RunConfig) -> None:
        """Refuse (UnsupportedError) what the capabilities rule out: the precision, the
        model's format, the device kind, and the backend options. Every backend's
        ``prepare`` starts here."""
        cls.check_precision(config.precision)
        cls.options_for(config)
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
        from edgeprof.core.plugins import get_graph

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

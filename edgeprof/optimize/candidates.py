"""Which configurations ``optimize`` measures.

:class:`Candidate` is one configuration as a small serializable request (backend, precision,
compression methods, pruning ratio), so a list can be shipped to other machines.
:func:`default_candidates` is the default list: the fp32 baseline on the reference backend,
the router's plan (:func:`plan_candidate`), the backend x precision sweep grid, and the
compressions of :mod:`edgeprof.optimize.compression` on the reference backend and on the
plan's backend. Nothing here builds or runs a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgeprof.core.errors import UnknownNameError, UserError

DEFAULT_PRUNE_RATIO = 0.5
#: compression methods of edgeprof.optimize.compression tried by default
COMPRESSIONS = ("magnitude", "channels", "2:4", "channels_last")
#: the methods that remove weights (a layout change does not)
PRUNING_METHODS = ("magnitude", "channels", "2:4")
#: what each method is, in the router's pruning vocabulary
PRUNING_OF = {"magnitude": "unstructured", "channels": "structured", "2:4": "n:m",
              "channels_last": None}
#: router pruning type -> compression method
METHOD_OF_PRUNING = {"unstructured": "magnitude", "structured": "channels",
                     "channel": "channels", "n:m": "2:4"}


def _check_method(name: str) -> None:
    if name not in COMPRESSIONS:
        raise UnknownNameError("compression method", name, COMPRESSIONS)


@dataclass(frozen=True)
class Candidate:
    """One configuration to measure: a small serializable request.

    ``compression`` is a tuple of :data:`COMPRESSIONS` methods applied in order to the torch
    model before the backend prepares it; ``ratio`` is the pruning ratio (magnitude: the
    fraction of weights zeroed; channels: the fraction of channels removed). ``source`` says
    why it is in the list: ``plan``, ``sweep``, ``compression`` or ``user``."""

    backend: str
    precision: str = "fp32"
    compression: tuple[str, ...] = ()
    ratio: float = DEFAULT_PRUNE_RATIO
    source: str = "user"

    def __post_init__(self) -> None:
        from edgeprof.core.precision import get_precision

        get_precision(self.precision)
        comp = (self.compression,) if isinstance(self.compression, str) else tuple(self.compression)
        comp = tuple(c for c in comp if c and c != "none")
        for c in comp:
            _check_method(c)
        object.__setattr__(self, "compression", comp)
        if isinstance(self.ratio, bool) or not isinstance(self.ratio, (int, float)) \
                or not 0 <= self.ratio < 1:
            raise UserError(f"pruning ratio must be in [0, 1), got {self.ratio!r}")

    @property
    def key(self) -> str:
        return f"{self.backend}|{self.precision}|{self.model_key}"

    @property
    def model_key(self) -> str:
        """Which model variant (the compressed module) this candidate runs."""
        return "+".join(f"{c}{self.ratio:g}" if c in ("magnitude", "channels") else c
                        for c in self.compression) or "none"

    @property
    def label(self) -> str:
        return f"{self.backend} {self.precision}" + (
            f" + {self.model_key}" if self.compression else "")

    @property
    def pruning(self) -> str:
        kinds = [PRUNING_OF[c] for c in self.compression if PRUNING_OF[c]]
        return "+".join(kinds) or "none"

    def same_config(self, other: Candidate) -> bool:
        """Same backend, precision and model variant (whatever put each in the list)."""
        return (self.backend, self.precision, self.model_key) == \
            (other.backend, other.precision, other.model_key)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "precision": self.precision,
                "compression": list(self.compression), "ratio": self.ratio,
                "source": self.source}

    @classmethod
    def parse(cls, value: Any, source: str = "user") -> Candidate:
        """A Candidate from itself, a dict (``to_dict``'s form) or ``"backend:precision[:m+m]"``."""
        if isinstance(value, Candidate):
            return value
        if isinstance(value, dict):
            d = dict(value)
            d.setdefault("source", source)
            d["compression"] = tuple(d.get("compression") or ())
            unknown = set(d) - {"backend", "precision", "compression", "ratio", "source"}
            if unknown or "backend" not in d:
                raise UserError(f"a candidate needs 'backend' (and optionally precision, "
                                f"compression, ratio); got {sorted(value)}")
            return cls(**d)
        if isinstance(value, str):
            parts = value.split(":", 2)
            if not 1 <= len(parts) <= 3 or not parts[0]:
                raise UserError(f"candidate '{value}' is not 'backend[:precision[:method+method]]'")
            comp = tuple(parts[2].split("+")) if len(parts) > 2 and parts[2] else ()
            return cls(parts[0], parts[1] if len(parts) > 1 and parts[1] else "fp32", comp,
                       source=source)
        raise UserError(f"a candidate is a Candidate, a dict or a 'backend:precision' string; "
                        f"got {value!r}")


# ------------------------------------------------------------------------ user arguments
def parse_backends(backends: Sequence[str] | str | None) -> list[str] | None:
    """``"a,b"`` or a list -> a list of backend names; None keeps every backend."""
    if isinstance(backends, str):
        return [b.strip() for b in backends.split(",") if b.strip()]
    return None if backends is None else list(backends)


def parse_compressions(compressions: Sequence[str] | str) -> list[str]:
    """``"magnitude,2:4"``, ``"none"`` or a list -> the checked list of methods."""
    if isinstance(compressions, str):
        compressions = [] if compressions.strip() == "none" else \
            [c.strip() for c in compressions.split(",") if c.strip()]
    for c in compressions:
        _check_method(c)
    return list(compressions)


def wants_pruning(candidates: Sequence[Candidate] | None, compressions: Sequence[str]) -> bool:
    """Whether any candidate (or, for the default list, any method) prunes weights."""
    methods = [m for c in candidates for m in c.compression] if candidates is not None \
        else compressions
    return any(m in PRUNING_METHODS for m in methods)


# ------------------------------------------------------------------------ the runtimes
def prediction_only_class(name: str) -> type:
    """A runtime family no edgeprof backend runs (xcubeai, tinyengine, ncnn_vulkan ...) as the
    router sees a backend: its precisions from ``data/runtimes.toml``, no device of this
    machine, ``prediction_only`` True: it predicts on a board, it can't run here."""
    from edgeprof.core.backend import Capabilities
    from edgeprof.profilers.predict.runtimes import family_processors, offered_precisions

    precisions, _ = offered_precisions(name)
    kinds, source = family_processors(name)
    return type(f"PredictionOnly_{name}", (), {
        "name": name, "prediction_only": True, "workload": "tensor",
        "description": f"prediction-only: runs on {'/'.join(kinds)} ({source})",
        "capabilities": Capabilities(precisions=tuple(precisions or ()), devices=(),
                                     model_formats=())})


def runtime_classes(reg: Any, target: Any = None) -> dict[str, type]:
    """The runtimes a plan may choose, by name: the registry's tensor backends, then the
    prediction-only families of ``data/runtimes.toml``; with ``target``, only those that
    run on one of its processors (the data ``predict`` reads)."""
    from edgeprof.profilers.predict.runtimes import families, runs_on

    out: dict[str, type] = {}
    for name in families(reg):
        entry = reg.backends_for("tensor").get(name)
        if target is not None and not getattr(target, "is_host", False) and \
                not runs_on(target, name, registry=reg):
            continue
        out[name] = entry.cls if entry is not None else prediction_only_class(name)
    return out


# ------------------------------------------------------------------------ the default list
def converts(cls: type) -> bool:
    """True when a backend converts a torch module into its own graph format (it also loads
    files), so torch memory formats do not reach its kernels; False when it runs the module
    as given. Read from the declared model formats, not from the backend's name."""
    formats = tuple(getattr(cls.capabilities, "model_formats", ()) or ())
    return any(f != "torch" for f in formats)


def sweep_precisions(cls: type) -> list[str]:
    """A backend's precisions without the ``int8`` alias where it lists what int8 means."""
    precs = list(cls.capabilities.precisions)
    if "int8" in precs and ({"int8_static", "int8_dynamic"} & set(precs)):
        precs.remove("int8")
    return precs


def reference_backend(reg: Any, handle: Any) -> str | None:
    """torch_eager for torch models (the reference every conversion is checked against),
    else the first available backend that loads the model's format at fp32."""
    names = list(reg.backends_for("tensor"))
    if handle.format == "torch" and "torch_eager" in names:
        return "torch_eager"
    for n in names:
        cls = reg.backend(n)
        if cls.accepts_format(handle.format) and "fp32" in cls.capabilities.precisions \
                and cls.availability().available:
            return n
    return None


def plan_candidate(plan: Any, reg: Any = None) -> Candidate | None:
    """The router's plan as a measurable configuration (backend, precision, pruning and,
    for a backend that runs torch modules as given, the layout: a backend that converts the
    module lays out its own graph, so the layout step is the runtime's there)."""
    b = plan.step("backend")
    if b is None:
        return None
    p = plan.step("precision")
    comp: list[str] = []
    ratio = DEFAULT_PRUNE_RATIO
    pr = plan.step("pruning")
    if pr is not None and isinstance(pr.value, dict):
        method = METHOD_OF_PRUNING.get(str(pr.value.get("type")))
        if method:
            comp.append(method)
            if method != "2:4":
                ratio = float(pr.value.get("ratio", ratio))
    lay = plan.step("layout")
    if lay is not None and str(lay.value).upper() == "NHWC" and (
            reg is None or str(b.value) not in reg.backends
            or not converts(reg.backend(str(b.value)))):
        comp.append("channels_last")
    return Candidate(str(b.value), str(p.value) if p is not None else "fp32", tuple(comp),
                     ratio, source="plan")


def default_candidates(plan: Any, reg: Any, handle: Any, target: Any, *,
                       backends: Sequence[str] | None = None,
                       compressions: Sequence[str] = COMPRESSIONS,
                       ratio: float = DEFAULT_PRUNE_RATIO) -> list[Candidate]:
    """The router's plan, the backend x precision sweep, and the compression variants on
    torch_eager (the reference runtime) and on the plan's backend (at its precision)."""
    out: list[Candidate] = []
    seen: set[str] = set()

    def add(c: Candidate | None) -> None:
        if c is not None and c.key not in seen:
            seen.add(c.key)
            out.append(c)

    ref = reference_backend(reg, handle)
    if ref:
        add(Candidate(ref, "fp32", source="baseline"))
    pc = plan_candidate(plan, reg) if plan is not None else None
    if pc is not None and (pc.backend not in reg.backends
                           or (backends is not None and pc.backend not in backends)):
        pc = None  # not asked for, or prediction-only: its figure is the plan's, nothing to measure
    add(pc)
    names = list(backends) if backends else list(reg.backends_for("tensor"))
    for name in names:
        cls = reg.backend(name)
        for p in sweep_precisions(cls):
            add(Candidate(name, p, source="sweep"))
    if handle.format == "torch" and compressions:
        others = [ref] if ref and (backends is None or ref in backends) else []
        if pc is not None and pc.backend != ref:
            others.append(pc.backend)
        for name in others:
            prec = "fp32" if name == ref else (pc.precision if pc else "fp32")
            for m in compressions:
                add(Candidate(name, prec, (m,), ratio, source="compression"))
    return out


__all__ = ["COMPRESSIONS", "Candidate", "DEFAULT_PRUNE_RATIO", "PRUNING_METHODS",
           "converts", "default_candidates", "parse_backends", "parse_compressions",
           "plan_candidate", "prediction_only_class", "reference_backend", "runtime_classes",
           "sweep_precisions", "wants_pruning"]

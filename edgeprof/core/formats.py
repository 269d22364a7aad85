"""The conversion graph: model formats are nodes, converters are edges.

Plugins add both through hooks (``edgeprof_register_formats``,
``edgeprof_register_converters``); the built-in ones live in ``edgeprof/backends/converters.py``.
A backend declares the formats it loads (``Capabilities.model_formats``) and the precisions
it produces itself from an fp32 model of those formats (``Backend.quantizes``); the route
from a model's format to a backend is the cheapest path (Dijkstra, by converter cost) whose
steps produce fp32, except that the last step may produce the requested precision itself.

Each step of a route is cached by content (:func:`edgeprof.core.cache.cached_entry`): the key
is the previous step's key (or the source model's digest), the converter, its version, the
precision and the calibration data's digest. Nothing here imports a converter: a converter's
function is imported when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgeprof.core.artifact import Artifact
from edgeprof.core.errors import MeasurementError, PluginError, UnsupportedError
from edgeprof.core.importing import dist_version, modules_present


@dataclass(frozen=True)
class Format:
    """A node: a model format."""

    name: str
    description: str = ""
    #: file suffixes that hold it (``.onnx``); side files (``.bin`` beside an ``.xml``)
    suffixes: tuple[str, ...] = ()
    companions: tuple[str, ...] = ()
    #: ``"module:function"`` (or a callable) turning an artifact's entry file into a model
    #: object, for formats held in memory (torch); None for formats runtimes read from files
    opener: str | Callable[[Path], Any] | None = None

    def label(self) -> str:
        return self.description or self.name


@dataclass(frozen=True)
class Converter:
    """An edge: converts a model of format ``src`` into format ``dst``.

    ``function(source, out_dir, precision)`` gets a :class:`~edgeprof.core.models.ModelHandle`
    of format ``src`` and writes the result into ``out_dir``; it returns the entry file's name
    (relative to ``out_dir``) or a dict with ``entry`` and optionally ``notes`` and
    ``stored_precision``. ``function`` may be a ``"package.module:function"`` string, imported
    only when the converter runs.
    """

    src: str
    dst: str
    name: str  # how the route names it: "onnx2torch"
    package: str  # the distribution that provides it (its version is recorded)
    function: str | Callable[..., Any]
    precisions: tuple[str, ...] = ("fp32",)
    cost: float = 1.0
    #: importable modules it needs (checked cheaply); default: the package's name
    modules: tuple[str, ...] = ()
    install_hint: str = ""
    #: bump when the recipe changes, so cached results are rebuilt
    recipe: int = 1

    def missing(self) -> str | None:
        """The first required module that cannot be imported, or None."""
        return modules_present(*(self.modules or (self.package.replace("-", "_"),)))

    def version(self) -> str | None:
        return dist_version(self.package, None)

    def hint(self) -> str:
        return self.install_hint or f"pip install {self.package}"

    def step(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "converter": self.name,
                "package": self.package, "version": self.version()}

    def run(self, source: Any, out_dir: Path, precision: str) -> dict[str, Any]:
        fn = self.function
        if isinstance(fn, str):
            module, _, attr = fn.partition(":")
            fn = getattr(importlib.import_module(module), attr)
        result = fn(source, out_dir, precision)
        return {"entry": result} if isinstance(result, str) else dict(result)


@dataclass
class Route:
    """The converters from a model's format to one a backend loads, in order."""

    src: str
    steps: list[Converter] = field(default_factory=list)
    #: the precision each step produces
    precisions: list[str] = field(default_factory=list)

    @property
    def dst(self) -> str:
        return self.steps[-1].dst if self.steps else self.src

    def to_list(self) -> list[dict[str, Any]]:
        return [c.step() for c in self.steps]

    def text(self) -> str:
        from edgeprof.core.artifact import route_text

        return route_text(self.to_list(), self.src)


class ConversionGraph:
    """Formats and converters, and the cheapest route between them."""

    def __init__(self, formats: Sequence[Format] = (), converters: Sequence[Converter] = ()):
        self.formats: dict[str, Format] = {}
        self.converters: list[Converter] = []
        for f in formats:
            self.add_format(f)
        for c in converters:
            self.add_converter(c)

    def add_format(self, fmt: Format, plugin: str = "") -> None:
        if fmt.name in self.formats and self.formats[fmt.name] != fmt:
            raise PluginError(f"format '{fmt.name}' is registered twice"
                              + (f" (again by '{plugin}')" if plugin else ""))
        self.formats[fmt.name] = fmt

    def add_converter(self, conv: Converter) -> None:
        for end in (conv.src, conv.dst):
            if end not in self.formats:
                raise PluginError(f"converter '{conv.name}' ({conv.src} -> {conv.dst}) uses "
                                  f"format '{end}', which no plugin registers; register it "
                                  "with edgeprof_register_formats")
        if conv.cost <= 0:
            raise PluginError(f"converter '{conv.name}' has cost {conv.cost}; costs must be > 0")
        self.converters.append(conv)

    def label(self, name: str) -> str:
        f = self.formats.get(name)
        return f.label() if f else name

    # -- routing -------------------------------------------------------------------------
    def route(self, src: str, loads: Sequence[str], precision: str = "fp32",
              applies: Sequence[str] = (), *, available_only: bool = True) -> Route | None:
        """The cheapest route from ``src`` to one of ``loads`` that yields ``precision``:
        every step produces fp32, except that the last may produce ``precision`` itself; a
        route ending in fp32 needs the backend to apply ``precision`` (``applies``). A model
        already in a loaded format needs no route (the backend checks the rest)."""
        if src in loads:
            return Route(src)
        import networkx as nx

        g = nx.DiGraph()
        goal = ("goal", True)
        for c in self.converters:
            if available_only and c.missing():
                continue
            edges = []
            if "fp32" in c.precisions:
                edges.append(((c.src, False), (c.dst, False), "fp32"))
            if precision != "fp32" and precision in c.precisions:
                edges.append(((c.src, False), (c.dst, True), precision))
            for u, v, p in edges:
                old = g.get_edge_data(u, v)
                if old is None or c.cost < old["weight"]:
                    g.add_edge(u, v, weight=c.cost, converter=c, precision=p)
        for f in loads:
            g.add_edge((f, True), goal, weight=0.0)
            if precision == "fp32" or precision in applies:
                g.add_edge((f, False), goal, weight=0.0)
        start = (src, False)
        if start not in g:
            return None
        try:
            path = nx.dijkstra_path(g, start, goal, weight="weight")
        except nx.NetworkXNoPath:
            return None
        route = Route(src)
        for u, v in zip(path, path[1:]):
            data = g.edges[u, v]
            if "converter" in data:
                route.steps.append(data["converter"])
                route.precisions.append(data["precision"])
        return route

    def plan(self, src: str, loads: Sequence[str], precision: str, applies: Sequence[str],
             backend: str) -> Route:
        """:meth:`route`, or an :class:`UnsupportedError` naming the missing edge and the
        package that would add it."""
        route = self.route(src, loads, precision, applies)
        if route is not None:
            return route
        targets = " or ".join(self.label(f) for f in loads)
        full = self.route(src, loads, precision, applies, available_only=False)
        if full is not None:
            missing = [c for c in full.steps if c.missing()]
            c = missing[0]
            raise UnsupportedError(
                f"backend '{backend}' loads {targets}; a {src} model gets there by "
                f"{full.text()}, but the edge {c.src} -> {c.dst} ({c.name}) needs the Python "
                f"package '{c.package}': {c.hint()}", backend=backend, precision=precision)
        reach = self.reachable(src)
        need = loads[0] if loads else "?"
        if precision != "fp32" and self.route(src, loads, "fp32", (), available_only=False):
            raise UnsupportedError(
                f"backend '{backend}' cannot produce {precision} from a {src} model: no "
                f"converter into {targets} produces {precision} and the backend does not "
                "quantize that format itself; use fp32", backend=backend, precision=precision)
        via = f" (it reaches {', '.join(sorted(reach - {src}))})" if reach - {src} else ""
        raise UnsupportedError(
            f"backend '{backend}' loads {targets}, and no converter route leads there from "
            f"{self.label(src)}{via}: the missing edge is {src} -> {need}. "
            f"{_MISSING_EDGE_HINTS.get((src, need), _DEFAULT_HINT)}", backend=backend,
            precision=precision)

    def reachable(self, src: str) -> set[str]:
        seen, todo = {src}, [src]
        while todo:
            f = todo.pop()
            for c in self.converters:
                if c.src == f and c.dst not in seen:
                    seen.add(c.dst)
                    todo.append(c.dst)
        return seen

    # -- running a route -----------------------------------------------------------------
    def convert(self, handle: Any, route: Route, *, backend: str = "",
                requested_precision: str = "fp32") -> Artifact:
        """Run ``route`` on ``handle`` (each step cached by content) and return the last
        step's artifact; with no steps, the source file imported into the cache."""
        from edgeprof.core.cache import cached_entry, key_digest, model_fingerprint

        digest = model_fingerprint(handle)
        calibration = _calibration_digest(handle)
        if not route.steps:
            return self.source_artifact(handle, digest, backend=backend,
                                        requested_precision=requested_precision)
        current, prev_key, done = handle, {"source": digest}, []
        art: Artifact | None = None
        for i, (conv, precision) in enumerate(zip(route.steps, route.precisions)):
            last = i == len(route.steps) - 1
            key = {"previous": key_digest(prev_key), "converter": conv.name,
                   "src": conv.src, "dst": conv.dst, "package": conv.package,
                   "version": conv.version(), "recipe": conv.recipe, "precision": precision,
                   "inputs": [s.to_dict() for s in handle.input_specs],
                   "calibration": calibration if precision.startswith("int8") else None}
            done = [*done, conv.step()]
            source = current

            def build(folder: Path, conv=conv, source=source, precision=precision):
                try:
                    out = conv.run(source, folder, precision)
                except (UnsupportedError, PluginError, MeasurementError):
                    raise  # MeasurementError: a converter's process died (it names itself)
                except Exception as e:  # a converter's crash names the edge
                    line = (str(e).strip().splitlines() or [""])[0][:240]
                    raise UnsupportedError(
                        f"converter {conv.name} ({conv.src} -> {conv.dst}) failed on "
                        f"'{handle.spec}' at {precision}: {type(e).__name__}: {line}",
                        backend=backend or None, precision=precision) from e
                out.setdefault("stored_precision", precision)
                return out

            art = cached_entry(conv.dst, key, build, manifest={
                "format": conv.dst, "backend": backend if last else "",
                "requested_precision": requested_precision if last else precision,
                "route": done, "source_digest": digest})
            prev_key = key
            current = self.handle_for(art, handle)
        assert art is not None
        return art

    def source_artifact(self, handle: Any, digest: str, *, backend: str = "",
                        requested_precision: str = "fp32") -> Artifact:
        """The model file itself, copied into the cache as an artifact (empty route)."""
        import shutil

        from edgeprof.core.cache import cached_entry

        if handle.path is None:
            raise UnsupportedError(f"a {handle.format} model held in memory has no file to "
                                   "load; a backend that loads it must convert it",
                                   backend=backend or None)
        src = Path(handle.path)
        fmt = self.formats.get(handle.format)

        def build(folder: Path) -> dict[str, Any]:
            if src.is_dir():
                shutil.copytree(src, folder / src.name, copy_function=shutil.copyfile)
                return {"entry": src.name}
            shutil.copyfile(src, folder / src.name)
            for suffix in (fmt.companions if fmt else ()):
                side = src.with_suffix(suffix)
                if side.is_file():
                    shutil.copyfile(side, folder / side.name)
            return {"entry": src.name}

        return cached_entry("source", {"source": digest, "format": handle.format,
                                       "name": src.name}, build,
                            manifest={"format": handle.format, "backend": backend,
                                      "requested_precision": requested_precision,
                                      "route": [], "source_digest": digest})

    def handle_for(self, artifact: Artifact, like: Any) -> Any:
        """A ModelHandle for ``artifact`` with ``like``'s inputs and calibration data."""
        fmt = self.formats.get(artifact.format)
        path = artifact.entry_path
        opener = fmt.opener if fmt else None
        if isinstance(opener, str):
            module, _, attr = opener.partition(":")
            opener = getattr(importlib.import_module(module), attr)
        return replace(like, spec=str(path), name=like.name, format=artifact.format,
                       path=path if opener is None else None,
                       _factory=None if opener is None else lambda: opener(path), _module=None)


_DEFAULT_HINT = ("No installed plugin provides it; a plugin can add one with "
                 "edgeprof_register_converters (see 'Add a converter' in the README).")
#: what would add a missing edge, where something is known to
_MISSING_EDGE_HINTS: dict[tuple[str, str], str] = {
    ("openvino", "onnx"): "OpenVINO has no exporter out of its IR and no kept package "
                          "converts IR to ONNX; give the .onnx (or the torch model) the IR "
                          "came from, or add a converter plugin (edgeprof_register_converters).",
    ("openvino", "torch"): "No kept package converts OpenVINO IR to torch; give the source "
                           "model, or add a converter plugin (edgeprof_register_converters).",
    ("openvino", "tflite"): "No kept package converts OpenVINO IR to .tflite; give the source "
                            "model, or add a converter plugin (edgeprof_register_converters).",
    ("tflite", "onnx"): "The package 'tf2onnx' adds it: pip install tf2onnx.",
    ("onnx", "torch"): "The package 'onnx2torch' adds it: pip install onnx2torch.",
}


def _calibration_digest(handle: Any) -> str | None:
    cal = getattr(handle, "calibration", None)
    if cal is None:
        return None
    from edgeprof.core.artifact import sha256_file

    return sha256_file(cal)


def graph_from_registry(registry: Any) -> ConversionGraph:
    """The graph from a plugin registry's hooks (``registry.hook``, pluggy's call)."""
    graph = ConversionGraph()
    for hook, kind, add in (("edgeprof_register_formats", Format, graph.add_format),
                            ("edgeprof_register_converters", Converter, graph.add_converter)):
        for items in reversed(getattr(registry.hook, hook)()):  # the formats first
            for item in items or ():
                if not isinstance(item, kind):
                    raise PluginError(f"{hook} returned {item!r}, not a {kind.__name__}")
                add(item)
    return graph


__all__ = ["ConversionGraph", "Converter", "Format", "Route", "graph_from_registry"]

"""The plugin manager and the registry it fills.

Where plugins come from, in order:

1. the default list: the root ``plugins.toml`` (carried inside the wheel as
   ``edgeprof/plugins.toml``);
2. installed packages, through the ``edgeprof`` entry-point group;
3. a user's ``plugins.toml``, only when named: ``--plugins FILE`` or ``EDGEPROF_PLUGINS``.
   A file in the current folder is never picked up on its own, since loading a plugin runs
   its code.

Every hook is called by pluggy (``registry.hook.<name>(...)``), so ``tryfirst``/``trylast``,
``firstresult`` and hook wrappers behave as pluggy documents; registration hooks are merged
into the :class:`Registry` with the override rule written in ``hookspecs.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from edgeprof.core import hookspecs
from edgeprof.core.errors import ConfigError, PluginError, UnknownNameError
from edgeprof.core.importing import import_python_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_VAR = "EDGEPROF_PLUGINS"
ENTRY_POINT_GROUP = "edgeprof"
_ALLOWED_KEYS = {"modules"}


def default_plugins_file() -> Path:
    """The default ``plugins.toml``: the repository root's, or the copy inside the wheel."""
    pkg = Path(__file__).resolve().parents[1]
    for candidate in (pkg.parent / "plugins.toml", pkg / "plugins.toml"):
        if candidate.is_file():
            return candidate
    raise ConfigError("edgeprof's default plugins.toml is missing; reinstall edgeprof")


def read_plugins_file(path: str | os.PathLike) -> list[str]:
    """Parse a plugins.toml and return its module list (validated)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("plugins file not found; check the path given to --plugins or "
                          f"{ENV_VAR}", path=path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"malformed TOML: {e}", path=path) from None
    unknown_top = set(data) - {"plugins"}
    if unknown_top:
        raise ConfigError(f"unknown table(s) {sorted(unknown_top)}; only [plugins] is allowed",
                          path=path, field=sorted(unknown_top)[0])
    table = data.get("plugins")
    if not isinstance(table, dict):
        raise ConfigError("missing [plugins] table", path=path, field="plugins")
    unknown = set(table) - _ALLOWED_KEYS
    if unknown:
        raise ConfigError(f"unknown key(s) {sorted(unknown)}; allowed: {sorted(_ALLOWED_KEYS)}",
                          path=path, field=f"plugins.{sorted(unknown)[0]}")
    modules = table.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise ConfigError("must be a list of strings", path=path, field="plugins.modules")
    return [_resolve_entry(m, path.parent) for m in modules]


def _resolve_entry(entry: str, base: Path) -> str:
    if entry.endswith(".py"):
        p = Path(entry)
        return str(p if p.is_absolute() else (base / p).resolve())
    return entry


def _import_plugin(entry: str, source: str) -> ModuleType:
    try:
        if entry.endswith(".py"):
            path = Path(entry)
            if not path.is_file():
                raise PluginError(f"plugin file {entry} (listed in {source}) does not exist")
            name = f"edgeprof_userplugin_{path.stem}_{abs(hash(str(path))) & 0xFFFFFF:x}"
            return import_python_file(path, name)
        return importlib.import_module(entry)
    except PluginError:
        raise
    except Exception as e:  # a plugin's import error is the user's to fix: say which and why
        raise PluginError(f"cannot load plugin '{entry}' (listed in {source}): "
                          f"{type(e).__name__}: {e}") from e


@dataclass
class BackendEntry:
    cls: type
    plugin: str


@dataclass
class Registry:
    """What the loaded plugins registered, and the plugin manager to call hooks through.

    ``registry.hook.<name>(...)`` calls a hook the pluggy way (ordering, ``firstresult``,
    wrappers); ``overrides`` lists ``(kind, name, winner, loser)`` for each name a
    ``tryfirst`` registration took over from a lower-ranked one.
    """

    backends: dict[str, BackendEntry] = field(default_factory=dict)
    target_sources: list[tuple[Path, str]] = field(default_factory=list)
    models: dict[str, tuple[Any, str]] = field(default_factory=dict)
    router_rules: list[tuple[Any, str]] = field(default_factory=list)
    workloads: dict[str, Any] = field(default_factory=dict)  # name -> Workload instance
    plugins: list[tuple[str, str]] = field(default_factory=list)  # (plugin name, from where)
    overrides: list[tuple[str, str, str, str]] = field(default_factory=list)
    pm: pluggy.PluginManager | None = field(default=None, repr=False, compare=False)
    _graph: Any = field(default=None, repr=False, compare=False)

    @property
    def conversion_graph(self) -> Any:
        """The conversion graph of this registry's formats and converters
        (:class:`edgeprof.core.formats.ConversionGraph`), built on first use and kept here."""
        if self._graph is None:
            from edgeprof.core.formats import graph_from_registry

            self._graph = graph_from_registry(self)
        return self._graph

    @property
    def hook(self) -> pluggy.HookRelay:
        """``pm.hook``: call a hook as ``registry.hook.edgeprof_load_model(spec=...)``."""
        if self.pm is None:
            raise PluginError("this registry was built without a plugin manager; use "
                              "edgeprof.core.plugins.get_registry()")
        return self.pm.hook

    def backends_for(self, workload: str = "tensor") -> dict[str, BackendEntry]:
        """The backends of one workload: ``tensor`` (one fixed-shape tensor in, one out) or
        ``generate`` (generative models, :class:`edgeprof.core.llm.GenerativeBackend`)."""
        return {n: e for n, e in self.backends.items()
                if getattr(e.cls, "workload", "tensor") == workload}

    def backend(self, name: str) -> type:
        try:
            return self.backends[name].cls
        except KeyError:
            raise UnknownNameError("backend", name, self.backends,
                                   "Run 'edgeprof backends' to list them") from None


def _rank(impl: pluggy.HookImpl | None) -> int:
    """tryfirst 2 > plain 1 > trylast 0: who wins when two registrations name one thing."""
    if impl is None:  # added by a hook wrapper: the wrapper had the last word
        return 3
    return 2 if impl.tryfirst else 0 if impl.trylast else 1


class PluginManager:
    """A pluggy manager with edgeprof's hookspecs and the loading rules above."""

    def __init__(self, plugins_file: str | os.PathLike | None = None, *,
                 use_env: bool = True, entry_points: bool = True, defaults: bool = True):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.sources: dict[str, str] = {}
        if defaults:
            f = default_plugins_file()
            for m in read_plugins_file(f):
                self.register_module(m, f"default {f.name}")
        if entry_points:
            self._load_entry_points()
        user_file = plugins_file or (os.environ.get(ENV_VAR) if use_env else None)
        if user_file:
            for m in read_plugins_file(user_file):
                self.register_module(m, str(user_file))
        self.check()

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.pm.hook

    def _load_entry_points(self) -> None:
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if self.pm.get_plugin(ep.name) is not None or self.pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                raise PluginError(f"cannot load plugin '{ep.name}' from entry point "
                                  f"'{ep.value}': {type(e).__name__}: {e}") from e
            dist = getattr(ep, "dist", None)
            where = f" ({dist.name} {dist.version})" if dist is not None else ""
            self.register(plugin, name=ep.name, source=f"entry point {ep.value}{where}")

    def register_module(self, entry: str, source: str) -> None:
        if self.pm.get_plugin(entry) is not None:
            return
        module = _import_plugin(entry, source)
        self.register(module, name=entry, source=source)

    def register(self, plugin: object, *, name: str | None = None, source: str = "api") -> None:
        name = name or getattr(plugin, "__name__", None) or repr(plugin)
        try:
            self.pm.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError) as e:
            raise PluginError(f"plugin '{name}' ({source}) is invalid: {e}") from None
        self.sources[name] = source

    def check(self) -> None:
        """Reject implementations of hooks that don't exist (typos)."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as e:
            raise PluginError(f"{e}; check the hook names against edgeprof/core/hookspecs.py") from None

    def _call_registration(self, hook_name: str,
                           found_in: Any = None) -> list[tuple[Any, pluggy.HookImpl | None]]:
        """Call a registration hook through pluggy, keeping which implementation returned
        each answer.

        The call is pluggy's own (``pm.hook.<name>()``: its order, tryfirst/trylast and
        wrappers). Only to attribute the answers, each implementation's function is wrapped
        for the duration of the call to note what it returned. An answer a hook wrapper
        rebuilt is split by ``found_in(member, noted_answer)`` back to the implementations
        that returned its members; what none returned is the wrapper's (impl None).
        """
        caller = getattr(self.pm.hook, hook_name)
        returned: dict[int, tuple[pluggy.HookImpl, Any]] = {}  # holding it keeps ids unique
        patched: list[tuple[pluggy.HookImpl, Any]] = []

        def noting(impl: pluggy.HookImpl, function: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                result = function(*args, **kwargs)
                if result is not None:
                    returned[id(result)] = (impl, result)
                return result
            return call

        try:
            for impl in caller.get_hookimpls():
                if not (impl.wrapper or impl.hookwrapper):
                    patched.append((impl, impl.function))
                    impl.function = noting(impl, impl.function)  # type: ignore[misc]
            results = caller()
        finally:
            for impl, function in patched:
                impl.function = function  # type: ignore[misc]
        out: list[tuple[Any, pluggy.HookImpl | None]] = []
        for r in results:
            if id(r) in returned or found_in is None:
                out.append((r, returned[id(r)][0] if id(r) in returned else None))
                continue
            for member in r:  # rebuilt by a wrapper: attribute member by member
                impl = next((i for i, noted in returned.values() if found_in(member, noted, r)),
                            None)
                out.append(({member: r[member]} if isinstance(r, dict) else [member], impl))
        return out

    def _plugin_of(self, impl: pluggy.HookImpl | None, hook_name: str) -> str:
        if impl is not None:
            return impl.plugin_name
        names = [i.plugin_name for i in getattr(self.pm.hook, hook_name).get_hookimpls()
                 if i.wrapper or i.hookwrapper]
        return f"a hook wrapper ({', '.join(names)})" if names else "a hook wrapper"

    def _merge_named(self, reg: Registry, kind: str, label: str, hook_name: str,
                     items: list[tuple[str, Any, pluggy.HookImpl | None]], table: dict,
                     make: Any) -> None:
        """Merge named registrations, lowest precedence first; rank settles a clash
        (hookspecs.py): a higher rank overrides in place, an equal rank is an error."""
        held: dict[str, tuple[int, str]] = {}  # name -> (rank, plugin)
        for name, value, impl in items:
            plugin, rank = self._plugin_of(impl, hook_name), _rank(impl)
            if name in held:
                old_rank, old_plugin = held[name]
                if rank == old_rank:
                    raise PluginError(f"{label.format(name)} is registered by two plugins: "
                                      f"'{old_plugin}' and '{plugin}'; remove one of them from "
                                      "plugins.toml, or mark the one that should win "
                                      "@hookimpl(tryfirst=True)")
                if rank < old_rank:
                    reg.overrides.append((kind, name, old_plugin, plugin))
                    continue
                reg.overrides.append((kind, name, plugin, old_plugin))
            table[name] = make(value, plugin)  # an override keeps the listing's position
            held[name] = (rank, plugin)

    def _named_classes(self, hook: str, what: str
                       ) -> list[tuple[str, type, pluggy.HookImpl | None]]:
        """``(name, class, impl)`` of every class a registration hook returned, lowest
        precedence first; a class without a ``name`` is a PluginError naming its plugin."""
        out = []
        for classes, impl in reversed(self._call_registration(
                hook, lambda cls, noted, _: any(c is cls for c in noted))):
            for cls in classes:
                name = getattr(cls, "name", None)
                if not isinstance(name, str) or not name:
                    raise PluginError(f"plugin '{self._plugin_of(impl, hook)}' registered a "
                                      f"{what} class {cls!r} without a 'name'")
                out.append((name, cls, impl))
        return out

    def build_registry(self) -> Registry:
        """Call the registration hooks (pluggy's call) and merge what they return.

        pluggy calls the highest precedence first (tryfirst, then the latest registered).
        Each table is filled lowest precedence first, so listings keep plugins.toml's order
        and, where a consumer lets the later entry win (router rules by name), the plugin
        pluggy calls first wins; target sources stay in call order for the target registry,
        where the first file found for an id wins.
        """
        reg = Registry(plugins=[(n, self.sources.get(n, ""))
                                for n, _ in self.pm.list_name_plugin()], pm=self.pm)
        hook = "edgeprof_register_backends"
        self._merge_named(reg, "backend", "backend '{}'", hook,
                          self._named_classes(hook, "backend"), reg.backends, BackendEntry)
        hook = "edgeprof_register_models"
        models = [(name, factory, impl)
                  for table, impl in reversed(self._call_registration(
                      hook, lambda name, noted, r: name in noted and noted[name] is r[name]))
                  for name, factory in table.items()]
        self._merge_named(reg, "model", "model 'builtin:{}'", hook, models, reg.models,
                          lambda f, p: (f, p))
        hook = "edgeprof_register_workloads"
        self._merge_named(reg, "workload", "workload '{}'", hook,
                          self._named_classes(hook, "workload"), reg.workloads,
                          lambda cls, plugin: cls())
        hook = "edgeprof_register_targets"
        for sources, impl in self._call_registration(hook):
            reg.target_sources.extend((Path(s), self._plugin_of(impl, hook)) for s in sources)
        hook = "edgeprof_router_rules"
        for rules, impl in reversed(self._call_registration(hook)):
            reg.router_rules.extend((r, self._plugin_of(impl, hook)) for r in rules)
        return reg


_CACHE: dict[Any, Registry] = {}


def get_registry(plugins_file: str | os.PathLike | None = None, *, refresh: bool = False) -> Registry:
    """The registry for the default plugins plus ``plugins_file`` (or $EDGEPROF_PLUGINS)."""
    key = (str(plugins_file) if plugins_file else None, os.environ.get(ENV_VAR))
    if refresh or key not in _CACHE:
        _CACHE[key] = PluginManager(plugins_file).build_registry()
    return _CACHE[key]


def _graph_of(registry: Any) -> Any:
    """The registry's own graph (``Registry.conversion_graph``); a hand-built stand-in
    without one gets a fresh graph from its hooks."""
    from edgeprof.core.formats import graph_from_registry

    graph = getattr(registry, "conversion_graph", None)
    return graph if graph is not None else graph_from_registry(registry)


def get_graph(plugins_file: str | os.PathLike | None = None, *, registry: Any = None) -> Any:
    """The conversion graph (:class:`edgeprof.core.formats.ConversionGraph`) of ``registry``
    (or of the plugins' registry for ``plugins_file``): the one the registry owns
    (``Registry.conversion_graph``).

    With neither, the graph of the default registry (``$EDGEPROF_PLUGINS`` included) joined
    with every other registry this process loaded (a ``--plugins FILE``): a backend builds
    with every converter the user loaded, whichever registry resolved the model."""
    from edgeprof.core.formats import ConversionGraph

    if registry is not None or plugins_file is not None:
        return _graph_of(registry if registry is not None else get_registry(plugins_file))
    graphs = [_graph_of(get_registry())]
    graphs += [_graph_of(r) for r in list(_CACHE.values()) if _graph_of(r) is not graphs[0]]
    if len(graphs) == 1:
        return graphs[0]
    merged = ConversionGraph()
    for g in graphs:
        for f in g.formats.values():
            merged.formats.setdefault(f.name, f)
    for g in graphs:
        for c in g.converters:
            if c not in merged.converters:
                merged.converters.append(c)
    return merged

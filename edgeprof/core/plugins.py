"""The plugin manager and the registry it fills.

Where plugins come from, in order:

1. the default list: the root ``plugins.toml`` (carried inside the wheel as
   ``edgeprof/plugins.toml``);
2. installed packages, through the ``edgeprof`` entry-point group;
3. a user's ``plugins.toml``, only when named: ``--plugins FILE`` or ``EDGEPROF_PLUGINS``.
   A file in the current folder is never picked up on its own, since loading a plugin runs
   its code.
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
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
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
    """What the loaded plugins registered."""

    backends: dict[str, BackendEntry] = field(default_factory=dict)
    target_sources: list[tuple[Path, str]] = field(default_factory=list)
    models: dict[str, tuple[Any, str]] = field(default_factory=dict)
    router_rules: list[tuple[Any, str]] = field(default_factory=list)
    plugins: list[tuple[str, str]] = field(default_factory=list)  # (plugin name, from where)

    def backend(self, name: str) -> type:
        try:
            return self.backends[name].cls
        except KeyError:
            raise UnknownNameError("backend", name, self.backends,
                                   "Run 'edgeprof backends' to list them") from None


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

    def _load_entry_points(self) -> None:
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if self.pm.get_plugin(ep.name) is not None:
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                raise PluginError(f"cannot load plugin '{ep.name}' from entry point "
                                  f"'{ep.value}': {type(e).__name__}: {e}") from e
            self.register(plugin, name=ep.name, source=f"entry point {ep.value}")

    def register_module(self, entry: str, source: str) -> None:
        if self.pm.get_plugin(entry) is not None:
            return
        module = _import_plugin(entry, source)
        self.register(module, name=entry, source=source)

    def register(self, plugin: object, *, name: str | None = None, source: str = "api") -> None:
        name = name or getattr(plugin, "__name__", None) or repr(plugin)
        try:
            self.pm.register(plugin, name=name)
        except pluggy.PluginValidationError as e:
            raise PluginError(f"plugin '{name}' ({source}) is invalid: {e}") from None
        self.sources[name] = source

    def check(self) -> None:
        """Reject implementations of hooks that don't exist (typos)."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as e:
            raise PluginError(f"{e}; check the hook names against edgeprof/core/hookspecs.py") from None

    def _collect(self, hook_name: str) -> list[tuple[Any, str]]:
        """Call a registration hook, keeping which plugin returned what."""
        out: list[tuple[Any, str]] = []
        caller = getattr(self.pm.hook, hook_name)
        for impl in caller.get_hookimpls():  # registration order
            result = impl.function()
            if result is not None:
                out.append((result, impl.plugin_name))
        return out

    def build_registry(self) -> Registry:
        reg = Registry(plugins=[(n, self.sources.get(n, "")) for n, _ in self.pm.list_name_plugin()])
        for classes, plugin in self._collect("edgeprof_register_backends"):
            for cls in classes:
                name = getattr(cls, "name", None)
                if not isinstance(name, str) or not name:
                    raise PluginError(f"plugin '{plugin}' registered a backend class "
                                      f"{cls!r} without a 'name'")
                if name in reg.backends:
                    raise PluginError(f"backend '{name}' is registered by two plugins: "
                                      f"'{reg.backends[name].plugin}' and '{plugin}'; "
                                      "remove one of them from plugins.toml")
                reg.backends[name] = BackendEntry(cls, plugin)
        for sources, plugin in self._collect("edgeprof_register_targets"):
            reg.target_sources.extend((Path(s), plugin) for s in sources)
        for models, plugin in self._collect("edgeprof_register_models"):
            for name, factory in models.items():
                if name in reg.models:
                    raise PluginError(f"model 'builtin:{name}' is registered by two plugins: "
                                      f"'{reg.models[name][1]}' and '{plugin}'")
                reg.models[name] = (factory, plugin)
        for rules, plugin in self._collect("edgeprof_router_rules"):
            reg.router_rules.extend((r, plugin) for r in rules)
        return reg


_CACHE: dict[Any, Registry] = {}


def get_registry(plugins_file: str | os.PathLike | None = None, *, refresh: bool = False) -> Registry:
    """The registry for the default plugins plus ``plugins_file`` (or $EDGEPROF_PLUGINS)."""
    key = (str(plugins_file) if plugins_file else None, os.environ.get(ENV_VAR))
    if refresh or key not in _CACHE:
        _CACHE[key] = PluginManager(plugins_file).build_registry()
    return _CACHE[key]

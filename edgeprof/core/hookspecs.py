"""All of edgeprof's hooks. A plugin is a module (or object) with functions of these names,
decorated with ``edgeprof.hookimpl``. Built-in backends use the same hooks.

Registration hooks return lists; the plugin manager merges them and rejects duplicates.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "edgeprof"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def edgeprof_register_backends() -> list[type]:
    """Return backend classes (subclasses of ``edgeprof.Backend``).

    Each class names itself with its ``name`` ClassVar; two plugins registering the same
    name is an error that names both plugins.
    """


@hookspec
def edgeprof_register_targets() -> list[Any]:
    """Return target sources: paths to ``.toml`` descriptor files or folders of them.

    A path may be a ``str`` or ``pathlib.Path``. User targets win over built-ins of the
    same id only when loaded from a folder given explicitly (``--targets-dir``).
    """


@hookspec
def edgeprof_register_models() -> dict[str, Any]:
    """Return built-in models as ``{name: factory}``, usable as ``builtin:NAME``.

    ``factory`` is a zero-argument callable returning ``(nn.Module, input_shapes)`` where
    ``input_shapes`` is a list of shapes including the batch dimension, or a
    ``package.module:function`` string naming such a callable (imported only when used).
    """


@hookspec
def edgeprof_router_rules() -> list[Any]:
    """Return router rules (objects with ``name`` and ``apply(context) -> list[Step]``).

    Rules read the target descriptor and the model's estimate; they are data and small
    functions, not branches on target names.
    """

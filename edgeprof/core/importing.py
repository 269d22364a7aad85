"""Importing Python code, the two ways the core needs: whether modules are importable at
all (cheap, ``find_spec``: a runtime's or a converter's availability) and importing a
user's ``.py`` file as a module (a model factory, a plugin); and an installed distribution's
version (``dist_version``). Below every other core module:
it imports nothing of edgeprof's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def modules_present(*names: str) -> str | None:
    """Return the first of ``names`` that cannot be imported, or None (cheap: find_spec)."""
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    return None


def dist_version(dist: str, default: str | None = "") -> str | None:
    """An installed distribution's version, read from its metadata (not by importing it);
    ``default`` when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return default


def import_python_file(path: Path, module_name: str):
    """Import the Python file ``path`` as module ``module_name`` (kept in sys.modules, so
    pickling and dataclasses inside it work). The caller checks that the file exists."""
    mspec = importlib.util.spec_from_file_location(module_name, path)
    assert mspec and mspec.loader
    module = importlib.util.module_from_spec(mspec)
    sys.modules[module_name] = module
    mspec.loader.exec_module(module)
    return module


__all__ = ["import_python_file", "modules_present"]

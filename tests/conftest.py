"""Shared test set-up: a hermetic cache folder, so tests neither read nor fill the user's
conversion and host-calibration caches (each session starts cold, as CI does)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _hermetic_cache(tmp_path_factory):
    old = os.environ.get("EDGEPROF_CACHE_DIR")
    os.environ["EDGEPROF_CACHE_DIR"] = str(tmp_path_factory.mktemp("edgeprof-cache"))
    yield
    if old is None:
        os.environ.pop("EDGEPROF_CACHE_DIR", None)
    else:
        os.environ["EDGEPROF_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def registry():
    """The default plugins (the root plugins.toml), without entry points or $EDGEPROF_PLUGINS."""
    from edgeprof.core.plugins import PluginManager

    return PluginManager(defaults=True, entry_points=False, use_env=False).build_registry()

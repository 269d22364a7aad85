"""Shared test set-up: a hermetic cache folder, so tests neither read nor fill the user's
conversion and host-calibration caches (each session starts cold, as CI does).

This host is calibrated once per session, in that folder (:func:`host_calibration_file`; a
calibration is 7-9 s of triad and GEMMs on a 2-core runner). A test that needs a cache with
nothing built in it gets one that holds only that calibration (:func:`empty_cache`,
:func:`empty_cache_at`), as a user's cache is after their first run on a machine: its
conversions start cold, the host's figures are not measured again. The host calibration's
own tests (``tests/targets/test_host.py``) measure in caches of their own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _hermetic_cache(tmp_path_factory):
    old = os.environ.get("EDGEPROF_CACHE_DIR")
    root = tmp_path_factory.mktemp("edgeprof-cache")
    os.environ["EDGEPROF_CACHE_DIR"] = str(root)
    yield root
    if old is None:
        os.environ.pop("EDGEPROF_CACHE_DIR", None)
    else:
        os.environ["EDGEPROF_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def host_calibration_file(_hermetic_cache) -> Path:
    """This host's calibration in the session's cache: measured there once, by the first
    test that asks for it (a test's run or this fixture)."""
    from edgeprof.targets.host import calibration_path, host_calibration

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EDGEPROF_CACHE_DIR", str(_hermetic_cache))  # whatever the asking test set
        host_calibration()
        return calibration_path()


@pytest.fixture(scope="session")
def empty_cache_at(host_calibration_file):
    """``empty_cache_at(folder)``: ``folder`` made an edgeprof cache with nothing built in
    it and this host's calibration (for a subprocess's ``EDGEPROF_CACHE_DIR``)."""
    def make(root: Path) -> Path:
        host = Path(root) / "host"
        host.mkdir(parents=True, exist_ok=True)
        shutil.copy2(host_calibration_file, host / host_calibration_file.name)
        return Path(root)
    return make


@pytest.fixture
def empty_cache(tmp_path, monkeypatch, empty_cache_at) -> Path:
    """This test's own cache (``$EDGEPROF_CACHE_DIR``): nothing built, the host calibrated."""
    root = empty_cache_at(tmp_path / "cache")
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(root))
    return root


@pytest.fixture(scope="module")
def registry():
    """The default plugins (the root plugins.toml), without entry points or $EDGEPROF_PLUGINS."""
    from edgeprof.core.plugins import PluginManager

    return PluginManager(defaults=True, entry_points=False, use_env=False).build_registry()

"""Shared fixtures of the predictor tests."""

from __future__ import annotations

import pytest


@pytest.fixture()
def user_dir(tmp_path, monkeypatch):
    """An empty user calibration folder: only the shipped calibrations (and what a test
    writes here) are found."""
    d = tmp_path / "user-calibrations"
    d.mkdir()
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(d))
    return d

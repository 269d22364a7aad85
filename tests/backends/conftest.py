"""Fixtures the backend tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def cnn():
    """builtin:small_cnn (1x1x28x28 -> 10 classes): the small model most backend tests run."""
    from edgeprof.core.models import resolve_model

    return resolve_model("builtin:small_cnn")

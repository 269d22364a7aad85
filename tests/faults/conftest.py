"""Fixtures of the fault-injection suite (see inject.py)."""

from tests.faults.inject import plugins, warm  # noqa: F401 - fixtures

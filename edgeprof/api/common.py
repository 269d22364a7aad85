"""What the API's modules share: the documents' schema version, the progress callback,
target lookup, comma-separated name lists, and the checks and writes of ``out``."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from edgeprof.core.errors import OutputError, UserError
# the tensor profile.json's schema_version, named here for the API's documents
from edgeprof.profilers.report.tensor_report import SCHEMA_VERSION  # noqa: F401
Progress = Callable[[str], None]


def target_registry(targets_dir=None, plugins=None):
    from edgeprof.targets import get_target_registry

    return get_target_registry(targets_dir, plugins)


def resolve_target(target: Any, targets_dir=None, plugins=None, recalibrate=False):
    if isinstance(target, str):
        return target_registry(targets_dir, plugins).get(target, recalibrate=recalibrate)
    return target


def split_names(value: Sequence[str] | str, flag: str) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``; an empty name (``"a,,b"``, ``"a,"``) is a user error."""
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip() if isinstance(n, str) else n for n in names]
    if isinstance(value, str) and not value.strip():
        return []
    if any(not n for n in names):
        shown = value if isinstance(value, str) else ",".join(map(str, value))
        raise UserError(f"{flag} '{shown}' has an empty name; separate names with single commas")
    return names


def check_out(out: str | os.PathLike | None) -> None:
    """Refuse an unusable --out before anything is measured (OutputError, exit 2)."""
    if out is not None:
        from edgeprof.core.io import prepare_out_dir

        prepare_out_dir(out)


def save_artifacts(report: Any, save: Callable[[], Any]) -> None:
    """Write the artifacts; when that fails, the error carries the report (``.result``)."""
    try:
        save()
    except OutputError as e:
        e.result = report
        raise

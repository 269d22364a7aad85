"""Atomic artifact writing: a file is either absent or complete, never half-written."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the same folder; rename it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | os.PathLike, obj: object) -> Path:
    return write_text(path, json.dumps(obj, indent=2, allow_nan=False, default=str) + "\n")


def write_with(path: str | os.PathLike, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` and move the result onto ``path`` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return Path(path)


def write_csv(path: str | os.PathLike, frame) -> Path:
    """Write a pandas DataFrame as UTF-8 CSV, atomically."""
    return write_with(path, lambda p: frame.to_csv(p, index=False, encoding="utf-8"))


def publish_staged(out_dir: str | os.PathLike, write: Callable[[Path], list[str]]) -> list[Path]:
    """Let ``write(stage)`` write artifacts into a staging folder inside ``out_dir`` and
    return their names; then move each into place. If ``write`` fails, ``out_dir`` keeps
    only what it had: nothing half-written appears."""
    import shutil

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".edgeprof-", dir=out))
    try:
        names = write(stage)
        written = []
        for name in names:
            os.replace(stage / name, out / name)
            written.append(out / name)
        return written
    finally:
        shutil.rmtree(stage, ignore_errors=True)

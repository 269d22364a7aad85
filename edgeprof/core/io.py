"""Atomic artifact writing: a file is either absent or complete, never half-written.

An output folder (``--out``) is published as a whole: :func:`publish_staged` writes every
artifact into a sibling staging folder, adds :data:`MANIFEST` (the files with their sizes and
sha256), and swaps it in with one rename (``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere
the old folder is moved aside first). A reader sees the old complete folder or the new
complete one, never a mix, and files of an older run never linger beside a newer run's.
Writers of one folder take turns (an exclusive ``flock`` on the parent folder), and what a
killed writer left behind (staging and set-aside folders) is removed by the next one.

Because the whole folder is replaced, :func:`prepare_out_dir` refuses a folder that holds
files edgeprof did not write. Files are created with mode ``0666 & ~umask`` (folders
``0777 & ~umask``), like any other program's output.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from edgeprof.core.errors import OutputError

#: the file in every output folder edgeprof publishes: what it wrote, with sizes and sha256
MANIFEST = "edgeprof-out.json"
STAGE_TAG = ".edgeprof-stage-"
OLD_TAG = ".edgeprof-old-"
#: bytes written (and synced) by the writability probe: a full disk fails it
PROBE_BYTES = 64 * 1024
#: names earlier edgeprof versions wrote into --out (before the manifest existed)
_LEGACY_SUFFIXES = (".csv", ".png", ".json", ".html")
_LEGACY_DOCS = ("profile.json", "optimize.json", "batch_sizes.json")


# ------------------------------------------------------------------------ permissions
def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no other portable way to read it
    os.umask(mask)
    return mask


def _honour_umask(path: Path, *, folder: bool = False) -> None:
    """mkstemp/mkdtemp create 0600/0700; give the mode any program's output would have."""
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


# ----------------------------------------------------------------------- single files
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
        _honour_umask(tmp_path)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_with(path, lambda p: p.write_text(text, encoding="utf-8"))


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


# ---------------------------------------------------------------------- output folders
def _why(e: OSError) -> str:
    return e.strerror or str(e) or type(e).__name__


def _listed_in_manifest(folder: Path) -> set[str] | None:
    try:
        doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        return set(doc["files"]) | {MANIFEST}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _legacy_output(folder: Path, names: list[str]) -> bool:
    """An output folder of an edgeprof from before the manifest: its own JSON document and
    nothing but artifact files (and its staging leftovers)."""
    docs = [n for n in _LEGACY_DOCS if n in names]
    if not docs:
        return False
    try:
        doc = json.loads((folder / docs[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not (isinstance(doc, dict) and "schema_version" in doc):
        return False
    return all(n.endswith(_LEGACY_SUFFIXES) or n.startswith(".edgeprof-")
               or (n.startswith(".") and n.endswith(".tmp")) for n in names)


def foreign_entries(folder: str | os.PathLike) -> list[str]:
    """The entries of an existing output ``folder`` that edgeprof did not write (sorted)."""
    folder = Path(folder)
    names = sorted(os.listdir(folder))
    if not names:
        return []
    listed = _listed_in_manifest(folder)
    if listed is not None:
        return [n for n in names if n not in {p.split("/")[0] for p in listed}]
    if _legacy_output(folder, names):
        return []
    return names


def _siblings(out: Path) -> tuple[list[Path], list[Path]]:
    """Staging and set-aside folders of ``out`` left in its parent."""
    stages, olds = [], []
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return [], []
    for p in entries:
        if p.name.startswith(f".{out.name}{STAGE_TAG}"):
            stages.append(p)
        elif p.name.startswith(f".{out.name}{OLD_TAG}"):
            olds.append(p)
    return stages, olds


def _recover(out: Path) -> None:
    """Remove what a killed writer of ``out`` left behind. Call with the parent locked.

    A writer killed between moving the old folder aside and moving the new one in leaves no
    ``out`` and one set-aside folder: that complete old result is put back."""
    stages, olds = _siblings(out)
    for p in stages:
        shutil.rmtree(p, ignore_errors=True)
    if olds and not os.path.lexists(out):
        newest = max(olds, key=lambda p: p.stat().st_mtime)
        with contextlib.suppress(OSError):
            os.rename(newest, out)
            olds.remove(newest)
    for p in olds:
        shutil.rmtree(p, ignore_errors=True)


@contextmanager
def _parent_locked(parent: Path, *, wait: bool = True) -> Iterator[bool]:
    """An exclusive flock on ``parent`` (writers of one --out take turns); yields whether it
    is held. Where folders cannot be locked (no fcntl, some network filesystems), yields
    True without a lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield True
        return
    try:
        fd = os.open(parent, os.O_RDONLY)
    except OSError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        except OSError:
            yield True
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def _probe(folder: Path, out: object, name: str | None = None) -> None:
    """Create, write, sync and remove a small file in ``folder``: proves it is writable and
    that the disk is not full, before any measuring. ``name``: how the message names ``out``
    (default ``--out 'OUT'``)."""
    name = name or f"--out '{out}'"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".edgeprof-probe-", dir=folder)
    except OSError as e:
        raise OutputError(f"{name} cannot be written: {_why(e)} in '{folder}'; give a "
                          "folder you can write", path=out) from None
    try:
        os.write(fd, b"\0" * PROBE_BYTES)
        os.fsync(fd)
    except OSError as e:
        raise OutputError(f"{name} cannot be written: {_why(e)} in '{folder}'",
                          path=out) from None
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def prepare_out_dir(out: str | os.PathLike) -> Path:
    """Check that ``out`` can receive edgeprof's artifacts, before anything is measured, and
    remove what a killed earlier writer left; return the resolved folder path.

    Raises :class:`OutputError` (exit 2) naming the path when ``out`` is a file or lies under
    one, is a folder holding files edgeprof did not write (the whole folder is replaced), or
    cannot be written (read-only, permission, full disk)."""
    shown = os.fspath(out)
    try:
        path = Path(out).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise OutputError(f"--out '{shown}' cannot be resolved: {e}", path=shown) from None
    if path.parent == path:
        raise OutputError(f"--out '{shown}' is a filesystem root; give a folder of its own",
                          path=shown)
    if path.parent.is_dir():  # first undo what a killed writer left (it may restore ``out``)
        with _parent_locked(path.parent, wait=False) as held:
            if held:
                _recover(path)
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == path else f"lies under a file ('{existing}')"
        raise OutputError(f"--out '{shown}' {what}; give a folder (new, empty, or one edgeprof "
                          "wrote)", path=shown)
    if existing == path:
        try:
            foreign = foreign_entries(path)
        except OSError as e:
            raise OutputError(f"--out '{shown}' cannot be read: {_why(e)}", path=shown) from None
        if foreign:
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            raise OutputError(f"--out '{shown}' holds files edgeprof did not write ('{foreign[0]}'"
                              f"{more}) and would be replaced as a whole; give a new or empty "
                              f"folder, or one edgeprof wrote (it has {MANIFEST})", path=shown)
        _probe(path, shown)  # the folder itself: a read-only --out is refused, not replaced
        _probe(path.parent, shown)  # the staging folder is created beside it
    else:
        _probe(existing, shown)
    return path


def prepare_out_file(out: str | os.PathLike, *, flag: str | None = "--out",
                     folder_ok: bool = True) -> Path:
    """Check, before any work, that the output FILE ``out`` can be written: the file output's
    :func:`prepare_out_dir`. An existing folder (or a path ending in a separator) means "write
    the file in it" (:func:`out_file` names it) unless not ``folder_ok``; an existing regular
    file is replaced; missing folders above it are created when it is written. Raises
    :class:`OutputError` (exit 2) naming the path when ``out`` lies under a file, is something
    other than a file or a folder (a device, a pipe), or cannot be written (read-only,
    permission, full disk). ``flag`` names the option in the message."""
    shown = os.fspath(out)
    name = f"{flag} '{shown}'" if flag else f"'{shown}'"
    give = "give a file name or a folder" if folder_ok else "give a file name"
    try:
        path = Path(out).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise OutputError(f"{name} cannot be resolved: {e}", path=shown) from None
    folder = path.is_dir() or shown.endswith(("/", os.sep))
    if folder and not folder_ok:
        raise OutputError(f"{name} is a folder; {give}", path=shown)
    if path.exists() and not folder and not path.is_file():
        raise OutputError(f"{name} is not a regular file; {give}", path=shown)
    existing = path if folder else path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"{name} lies under a file ('{existing}'); {give}", path=shown)
    _probe(existing, shown, name)
    return path


def out_file(out: str | os.PathLike, name: str) -> Path:
    """The file an output FILE option names: ``out`` itself, or ``name`` inside it when
    ``out`` is a folder (or ends in a separator), as ``--out DIR`` of profile writes in DIR."""
    shown = os.fspath(out)
    path = Path(out).expanduser()
    return path / name if path.is_dir() or shown.endswith(("/", os.sep)) else path


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where the system
    or filesystem cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(b))


def _swap_in(stage: Path, out: Path) -> None:
    """Make ``stage`` the folder ``out``. Afterwards ``stage`` holds the old folder, if any."""
    if not os.path.lexists(out):
        os.rename(stage, out)
        return
    if _exchange(stage, out):
        return
    old = stage.with_name(stage.name.replace(STAGE_TAG, OLD_TAG, 1))
    os.rename(out, old)  # a kill from here to the next line: the next writer puts old back
    os.rename(stage, out)
    os.rename(old, stage)  # the caller removes it with the staging folder


def _manifest(stage: Path, names: list[str]) -> dict:
    from edgeprof._version import __version__
    from edgeprof.core.artifact import sha256_file

    files = {p.relative_to(stage).as_posix(): {"size": p.stat().st_size, "sha256": sha256_file(p)}
             for p in sorted(stage.rglob("*")) if p.is_file()}
    missing = [n for n in names if n not in files]
    if missing:
        raise FileNotFoundError(errno.ENOENT, "artifact was not written", missing[0])
    return {"kind": "edgeprof-out", "edgeprof_version": __version__, "pid": os.getpid(),
            "files": files}


def publish_staged(out_dir: str | os.PathLike, write: Callable[[Path], list[str]]) -> list[Path]:
    """Let ``write(stage)`` write artifacts into a staging folder beside ``out_dir`` and
    return their names; then replace ``out_dir`` with it as a whole (see the module doc).
    If anything fails, ``out_dir`` keeps what it had. An ``OSError`` while writing (a full
    disk, permissions) becomes :class:`OutputError` naming the folder."""
    out = prepare_out_dir(out_dir)
    shown = os.fspath(out_dir)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with _parent_locked(out.parent):
            _recover(out)
            if os.path.lexists(out):
                foreign = foreign_entries(out)  # written meanwhile by something else
                if foreign:
                    raise OutputError(f"--out '{shown}' now holds files edgeprof did not write "
                                      f"('{foreign[0]}'); nothing was replaced", path=shown)
            stage = Path(tempfile.mkdtemp(prefix=f".{out.name}{STAGE_TAG}", dir=out.parent))
            try:
                names = write(stage)
                write_json(stage / MANIFEST, _manifest(stage, names))
                _honour_umask(stage, folder=True)
                _swap_in(stage, out)
            finally:
                shutil.rmtree(stage, ignore_errors=True)
    except OSError as e:
        where = f" ('{e.filename}')" if getattr(e, "filename", None) else ""
        raise OutputError(f"could not write the artifacts to --out '{shown}': {_why(e)}{where}; "
                          "the folder keeps what it had", path=shown) from e
    return [out / n for n in names]


def read_json_document(path: str | os.PathLike, name: str = "profile.json") -> tuple[Path, object]:
    """(the file, its parsed JSON) of ``path``: a file, or a folder holding ``name`` (what
    ``save``/``--out`` wrote); a missing or unreadable file is a ``ConfigError`` naming it."""
    from edgeprof.core.errors import ConfigError

    p = Path(path)
    if p.is_dir():
        p = p / name
    try:
        return p, json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("file not found", path=p) from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"not a readable JSON file ({e})", path=p) from None

"""The user's cache folder and a content-keyed, self-healing cache of conversions.

Conversions (torch -> ONNX, -> OpenVINO IR, -> .tflite, quantized variants ...) are cached by
the content of their source (weights, input specs, calibration data) plus the conversion's own
key (format, precision, tool versions), so a second run does not convert again.

Each entry is an :class:`~edgeprof.core.artifact.Artifact` folder (the files and a
``manifest.json`` with every file's size and sha256):

- **published atomically**: built in a temporary sibling folder and moved into place with one
  ``os.rename``; when another process published the same entry meanwhile, its entry is used;
- **verified on every hit** (sizes and sha256): a truncated or replaced file is reported as a
  warning and the entry is rebuilt once;
- written with the **umask's permissions** (no ``mkstemp``/``mkdtemp``, which make 0600/0700);
- when the cache folder (or ``$HOME``) cannot be written, a **temporary cache** serves the run,
  with a warning, and is removed when the process exits.

Warnings are collected, not printed: :func:`drain_warnings` hands them to whoever reports the
run (backends turn them into notes).
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgeprof.core.artifact import Artifact, ArtifactError, Manifest, file_records

ENV_CACHE = "EDGEPROF_CACHE_DIR"
#: leftovers of a crashed build (``.tmp-*``) or eviction (``.trash-*``) older than this go
STALE_AFTER_S = 3600.0

_WARNINGS: list[str] = []
_ROOTS: dict[str, Path] = {}


def drain_warnings() -> list[str]:
    """The cache's warnings since the last call (and forget them)."""
    out = list(_WARNINGS)
    _WARNINGS.clear()
    return out


def _warn(message: str) -> None:
    if message not in _WARNINGS:
        _WARNINGS.append(message)


def _configured_root() -> Path:
    base = os.environ.get(ENV_CACHE)
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "edgeprof"
    return Path.home() / ".cache" / "edgeprof"  # RuntimeError when there is no home


def _writable(folder: Path) -> None:
    """Create ``folder`` and prove it writable (raises OSError otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.close(fd)
    os.unlink(probe)


def cache_root() -> Path:
    """``$EDGEPROF_CACHE_DIR``, else ``$XDG_CACHE_HOME/edgeprof``, else
    ``~/.cache/edgeprof``; a temporary folder (with a warning) when that cannot be written."""
    try:
        root = _configured_root()
        key = str(root)
    except RuntimeError as e:  # no home directory at all
        root, key = None, f"<no home: {e}>"
    if key in _ROOTS:
        return _ROOTS[key]
    try:
        if root is None:
            raise OSError(f"cannot find a home folder ({key[10:-1]})")
        _writable(root)
        _ROOTS[key] = root
    except OSError as e:
        fallback = _temporary_root()
        where = f"'{root}'" if root is not None else "the default cache folder"
        _warn(f"cache folder {where} is not writable ({type(e).__name__}: "
              f"{getattr(e, 'strerror', None) or e}); using a temporary cache '{fallback}' for "
              f"this run (conversions are not kept): set {ENV_CACHE} to a writable folder")
        _ROOTS[key] = fallback
    return _ROOTS[key]


def _temporary_root() -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="edgeprof-cache-"))  # private to this process
    atexit.register(shutil.rmtree, path, True)
    return path


def cache_dir(*parts: str) -> Path:
    """A folder under :func:`cache_root` (created)."""
    p = Path(cache_root(), *parts)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # the root was writable but this part is not: fall back too
        fallback = _temporary_root()
        _warn(f"cache folder '{p}' cannot be created ({type(e).__name__}: "
              f"{getattr(e, 'strerror', None) or e}); using a temporary cache '{fallback}'")
        for k, v in list(_ROOTS.items()):
            if p.is_relative_to(v):
                _ROOTS[k] = fallback
        p = Path(fallback, *parts)
        p.mkdir(parents=True, exist_ok=True)
    return p


def cached_record(path: Path, key: dict[str, Any], measure: Callable[[], dict[str, Any]], *,
                  refresh: bool = False, required: str) -> dict[str, Any]:
    """A measured JSON record (a host's or a GPU's calibration) kept at ``path``: the stored
    one when its ``key`` matches and it holds ``required``, else ``measure()``'s, stored with
    the key (atomically). Either way ``record["cache"]`` says where and whether it was hit."""
    from edgeprof.core.io import write_json

    if not refresh and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("key") == key and data.get(required):
            data["cache"] = {"path": str(path), "hit": True}
            return data
    data = measure()
    data["key"] = key
    write_json(path, data)
    data["cache"] = {"path": str(path), "hit": False}
    return data


def model_fingerprint(handle: Any) -> str:
    """A hash of a model's content: the file bytes, or a torch module's state and specs."""
    h = hashlib.sha256()
    h.update(json.dumps([s.to_dict() for s in handle.input_specs]).encode())
    calibration = getattr(handle, "calibration", None)
    if calibration is not None:  # calibrated conversions depend on the data
        h.update(b"calibration:" + Path(calibration).read_bytes())
    if handle.path is not None:
        p = Path(handle.path)
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        if p.suffix == ".xml":
            files.append(p.with_suffix(".bin"))
        for f in files:
            if f.is_file():
                h.update(f.name.encode())
                h.update(f.read_bytes())
        return h.hexdigest()[:24]
    module = handle.torch_module()
    h.update(type(module).__qualname__.encode())
    h.update(repr(module).encode())
    for name, t in module.state_dict().items():
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().view(-1).numpy().tobytes()
                 if t.dtype.is_floating_point or not t.is_quantized else b"")
    return h.hexdigest()[:24]


def key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]


# ------------------------------------------------------------------------------ entries
def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _sweep(folder: Path) -> None:
    """Remove build/eviction leftovers of dead processes (or old ones)."""
    now = time.time()
    try:
        items = list(folder.iterdir())
    except OSError:
        return
    for p in items:
        if not p.name.startswith((".tmp-", ".trash-")):
            continue
        try:
            pid = int(p.name.split("-")[1])
        except (IndexError, ValueError):
            pid = -1
        try:
            old = now - p.stat().st_mtime > STALE_AFTER_S
        except OSError:
            continue
        if p.name.startswith(".trash-") or old or (pid > 0 and not _pid_alive(pid)):
            shutil.rmtree(p, ignore_errors=True)


def evict(folder: str | os.PathLike) -> None:
    """Remove a cache entry atomically (rename aside, then delete)."""
    folder = Path(folder)
    trash = folder.with_name(f".trash-{folder.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(folder, trash)
    except OSError:
        return  # already gone (another process evicted or rebuilt it)
    shutil.rmtree(trash, ignore_errors=True)


def _publish(tmp: Path, final: Path) -> bool:
    """Move ``tmp`` onto ``final``; False when another process published it first."""
    try:
        os.rename(tmp, final)
        return True
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST) or final.exists():
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        raise


def cached_entry(kind: str, key: dict[str, Any], build: Callable[[Path], Any], *,
                 manifest: dict[str, Any] | None = None, entry: str = "",
                 validate: Callable[[Artifact], None] | None = None) -> Artifact:
    """The cached artifact for ``key`` under ``conversions/<kind>/``, built if absent.

    ``build(folder)`` writes the files into a fresh folder; it may return a dict of manifest
    fields to set (e.g. ``{"notes": [...]}``). ``manifest`` gives the manifest's fields
    (format, backend, requested_precision, route, source_digest ...); ``entry`` names the
    file the runtime loads. ``validate(artifact)`` may load it: on a cache hit, a failure
    there (or a size/sha256 mismatch) is a warning and the entry is rebuilt once; on a
    fresh build the failure propagates.
    """
    digest = key_digest(key)
    parent = cache_dir("conversions", kind)
    _sweep(parent)
    final = parent / digest
    problem = None
    if final.exists():
        try:
            art = Artifact.open(final)
            if validate is not None:
                validate(art)
            art.cache_hit = True
            return art
        except Exception as e:  # noqa: BLE001 - any unusable entry is rebuilt once
            legacy = (final / "key.json").exists() and not (final / "manifest.json").exists()
            problem = None if legacy else f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            evict(final)
    tmp = parent / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}-{digest}"
    os.mkdir(tmp)  # mode 0o777 & ~umask, unlike mkdtemp's 0700
    t0 = time.perf_counter()
    try:
        extra = build(tmp)
        extra = extra if isinstance(extra, dict) else {}
        fields = {"format": kind, "backend": "", "requested_precision":
                  str(key.get("precision", "fp32")), **(manifest or {}), **extra}
        m = Manifest.from_dict({**fields, "key": key, "entry": entry or fields.get("entry", "")})
        m.build_time_s = round(time.perf_counter() - t0, 4)
        m.files = file_records(tmp)
        if not m.files:
            raise ArtifactError(f"the {kind} conversion wrote no file")
        art = Artifact(tmp, m)
        art.write_manifest()
        if _publish(tmp, final):
            art.path = final
        else:  # another process won the race: use its entry
            art = Artifact.open(final)
            art.cache_hit = True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if problem:
        _warn(f"cache entry '{final}' was unusable ({problem}); rebuilt it")
    return art


def cached_artifact(kind: str, key: dict[str, Any], filename: str,
                    build: Callable[[Path], None], *, manifest: dict[str, Any] | None = None,
                    validate: Callable[[Artifact], None] | None = None) -> tuple[Path, bool]:
    """Return ``(path, hit)``: the cached file ``filename`` for ``key``, built if absent.

    ``build(tmp_path)`` writes the file to ``tmp_path`` inside a fresh folder (side files
    such as OpenVINO's ``.bin`` may go beside it). See :func:`cached_entry`.
    """
    art = cached_entry(kind, key, lambda folder: build(folder / filename), manifest=manifest,
                       entry=filename, validate=validate)
    return art.entry_path, art.cache_hit


__all__ = ["ENV_CACHE", "cache_dir", "cache_root", "cached_artifact", "cached_entry",
           "drain_warnings", "evict", "key_digest", "model_fingerprint"]

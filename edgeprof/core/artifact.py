"""Artifacts: what *build* hands *run*.

An :class:`Artifact` is a folder with the runtime's own file(s) (``model.onnx``, a
``.tflite``, an OpenVINO ``.xml`` + ``.bin``, a ``torch.export`` program) and a small
``manifest.json`` (:class:`Manifest`): the format, the requested and executed precision, the
conversion route with converter versions, the source model's digest, every file's size and
sha256, and the output agreement with the source model.

Artifacts travel as plain values: ``to_dict()/from_dict()`` for the manifest and the folder's
path, ``pack()`` (a deterministic tar of the folder) and ``unpack(data, dest, digest)`` for the
bytes, checked against their sha256 and the manifest before anything is used. Nothing here is
pickled, and nothing here imports a runtime.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
import shutil
import tarfile
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from edgeprof.core.errors import EdgeprofError

MANIFEST = "manifest.json"
#: the manifest layout; bump when a field changes meaning
MANIFEST_VERSION = 1
_CHUNK = 1 << 20


class ArtifactError(EdgeprofError):
    """An artifact is missing a file, or a file's size or sha256 differs from its manifest."""


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def file_records(folder: str | os.PathLike, *, skip: tuple[str, ...] = (MANIFEST,)
                 ) -> dict[str, dict[str, Any]]:
    """``{relpath: {"size", "sha256"}}`` for every regular file under ``folder``."""
    folder = Path(folder)
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and not p.is_symlink() and rel not in skip:
            out[rel] = {"size": p.stat().st_size, "sha256": sha256_file(p)}
    return out


def verify_files(folder: str | os.PathLike, files: dict[str, dict[str, Any]]) -> None:
    """Raise :class:`ArtifactError` naming the first file that is missing or differs."""
    folder = Path(folder)
    if not files:
        raise ArtifactError(f"artifact '{folder}' lists no files")
    for rel, rec in files.items():
        p = folder / rel
        if not p.is_file():
            raise ArtifactError(f"artifact '{folder}': file '{rel}' is missing")
        size = p.stat().st_size
        if size != rec.get("size"):
            raise ArtifactError(f"artifact '{folder}': file '{rel}' has {size} bytes, the "
                                f"manifest says {rec.get('size')} (truncated or replaced)")
        if sha256_file(p) != rec.get("sha256"):
            raise ArtifactError(f"artifact '{folder}': file '{rel}' does not match its sha256 "
                                "(corrupted or replaced)")


def write_json_plain(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON atomically with the umask's permissions (a temporary sibling opened
    normally, then ``os.replace``; mkstemp would leave the file 0600)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(obj, indent=2, default=str) + "\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def created_utc() -> str:
    """A document's ``created_utc``: now, ISO 8601 to the second with its UTC offset."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _edgeprof_version() -> str:
    from edgeprof._version import __version__

    return __version__


@dataclass
class Manifest:
    """What an artifact holds and how it was made (``manifest.json``)."""

    format: str  # onnx | tflite | openvino | torch | ...
    backend: str  # the backend it was built for ("" for a shared intermediate)
    requested_precision: str
    executed_precision: str | None = None  # None until a runtime has loaded it
    #: the conversions, in order: ``{"src", "dst", "converter", "package", "version"}``
    route: list[dict[str, Any]] = field(default_factory=list)
    source_digest: str = ""
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # relpath -> size, sha256
    agreement: dict[str, Any] | None = None
    created_utc: str = field(default_factory=utc_now)
    edgeprof_version: str = field(default_factory=_edgeprof_version)
    #: the file the runtime loads (relative to the folder)
    entry: str = ""
    #: the precision the files hold (fp32 for a file a runtime quantizes while loading)
    stored_precision: str | None = None
    #: the content key the artifact is cached under (source digest, precision, versions ...)
    key: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: seconds the last conversion step took when it was built
    build_time_s: float | None = None
    manifest_version: int = MANIFEST_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        if not isinstance(data, dict):
            raise ArtifactError(f"a manifest must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        missing = [k for k in ("format", "backend", "requested_precision") if k not in data]
        if missing:
            raise ArtifactError(f"manifest lacks field(s) {', '.join(missing)}")
        version = data.get("manifest_version", MANIFEST_VERSION)
        if version != MANIFEST_VERSION:
            raise ArtifactError(f"manifest version {version} is not {MANIFEST_VERSION}; "
                                "rebuild the artifact with this edgeprof")
        return cls(**{k: v for k, v in data.items() if k in known})

    def route_text(self) -> str:
        """``onnx -> torch (onnx2torch 1.5.15) -> tflite (litert-torch 0.10.0)``."""
        return route_text(self.route, self.format)


def route_text(route: list[dict[str, Any]], fmt: str = "") -> str:
    if not route:
        return f"{fmt} (as given)" if fmt else "(as given)"
    parts = [route[0]["src"]]
    for step in route:
        version = step.get("version")
        what = step.get("converter") or step.get("package") or "?"
        parts.append(f"{step['dst']} ({what}{' ' + version if version else ''})")
    return " -> ".join(parts)


@dataclass
class Artifact:
    """A folder holding the runtime's files and their :class:`Manifest`."""

    path: Path
    manifest: Manifest
    #: True when it came from the cache (not from this call's conversion)
    cache_hit: bool = False

    @property
    def entry_path(self) -> Path:
        return self.path / self.manifest.entry

    @property
    def format(self) -> str:
        return self.manifest.format

    @property
    def size_bytes(self) -> int:
        return sum(int(r["size"]) for r in self.manifest.files.values())

    # -- values --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "manifest": self.manifest.to_dict(),
                "cache_hit": self.cache_hit}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Artifact:
        if not isinstance(data, dict) or "path" not in data or "manifest" not in data:
            raise ArtifactError("an artifact dict needs 'path' and 'manifest'")
        return cls(Path(data["path"]), Manifest.from_dict(data["manifest"]),
                   bool(data.get("cache_hit", False)))

    # -- folders -------------------------------------------------------------------------
    @classmethod
    def open(cls, folder: str | os.PathLike, *, verify: bool = True) -> Artifact:
        """Read ``folder/manifest.json`` (and verify the files unless told not to)."""
        folder = Path(folder)
        try:
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ArtifactError(f"'{folder}' has no {MANIFEST}; it is not an edgeprof "
                                "artifact") from None
        except (OSError, ValueError) as e:
            raise ArtifactError(f"cannot read '{folder / MANIFEST}': {e}") from None
        art = cls(folder, Manifest.from_dict(data))
        if verify:
            art.verify()
        return art

    def write_manifest(self) -> None:
        """Write ``manifest.json`` atomically (files are listed as they are now)."""
        if not self.manifest.files:
            self.manifest.files = file_records(self.path)
        write_json_plain(self.path / MANIFEST, self.manifest.to_dict())

    def verify(self) -> None:
        """Check every listed file's size and sha256; raise :class:`ArtifactError`."""
        verify_files(self.path, self.manifest.files)
        if self.manifest.entry and self.manifest.entry not in self.manifest.files:
            raise ArtifactError(f"artifact '{self.path}': its entry file "
                                f"'{self.manifest.entry}' is not among its files")

    # -- bytes ---------------------------------------------------------------------------
    def pack(self) -> bytes:
        """A deterministic tar (sorted names, no owners, mtime 0) of the manifest and the
        listed files. ``hashlib.sha256(data).hexdigest()`` is what :meth:`unpack` checks."""
        self.verify()
        buf = io.BytesIO()
        manifest = json.dumps(self.manifest.to_dict(), indent=2, sort_keys=True).encode()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, MANIFEST, manifest)
            for rel in sorted(self.manifest.files):
                _add_bytes(tar, rel, (self.path / rel).read_bytes())
        return buf.getvalue()

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    @classmethod
    def unpack(cls, data: bytes, dest: str | os.PathLike, digest: str) -> Artifact:
        """Check ``data`` against ``digest`` (sha256), extract it into ``dest`` (which must
        not exist yet) and verify the files against the manifest inside. Nothing appears
        at ``dest`` unless all of that succeeds."""
        got = hashlib.sha256(data).hexdigest()
        if got != digest:
            raise ArtifactError(f"artifact bytes have sha256 {got[:16]}..., expected "
                                f"{digest[:16]}... (corrupted in transit)")
        dest = Path(dest)
        if dest.exists():
            raise ArtifactError(f"cannot unpack into '{dest}': it exists")
        dest.parent.mkdir(parents=True, exist_ok=True)
        stage = dest.parent / f".{dest.name}.unpack-{uuid.uuid4().hex[:8]}"
        os.mkdir(stage)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                for member in tar.getmembers():
                    name = member.name
                    if not member.isfile() or name.startswith("/") or ".." in Path(name).parts:
                        raise ArtifactError(f"artifact archive has an unsafe member '{name}'")
                tar.extractall(stage, filter="data")
            art = cls.open(stage)  # verifies sizes and sha256
            os.rename(stage, dest)
        except tarfile.TarError as e:
            raise ArtifactError(f"artifact bytes are not a valid archive: {e}") from None
        finally:
            if stage.exists():
                shutil.rmtree(stage, ignore_errors=True)
        art.path = dest
        return art


def _add_bytes(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(payload))


__all__ = ["MANIFEST", "Artifact", "ArtifactError", "Manifest", "file_records", "route_text",
           "sha256_file", "verify_files"]

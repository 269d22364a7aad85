"""The user's cache folder and a content-keyed artifact cache for conversions.

Conversions (torch -> ONNX, -> OpenVINO IR, -> .tflite, quantized variants) are cached by
the content of the source model (weights and input specs) plus the conversion's own key
(backend, precision, tool versions), so a second run does not convert again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_CACHE = "EDGEPROF_CACHE_DIR"


def cache_dir(*parts: str) -> Path:
    """``$EDGEPROF_CACHE_DIR`` or ``$XDG_CACHE_HOME/edgeprof`` (``~/.cache/edgeprof``)."""
    base = os.environ.get(ENV_CACHE)
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "edgeprof")
    p = Path(base, *parts)
    p.mkdir(parents=True, exist_ok=True)
    return p


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


def cached_artifact(kind: str, key: dict[str, Any], filename: str,
                    build: Callable[[Path], None]) -> tuple[Path, bool]:
    """Return ``(path, hit)``: the cached artifact for ``key``, building it if absent.

    ``build(tmp_path)`` writes the artifact to ``tmp_path`` (a file path inside a fresh
    folder, which may also receive side files such as OpenVINO's ``.bin``); the folder is
    moved into place only when ``build`` succeeds, so a failed conversion leaves nothing.
    """
    import shutil
    import tempfile

    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
    final_dir = cache_dir("conversions", kind, digest)
    final = final_dir / filename
    if final.exists():
        return final, True
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=final_dir.parent))
    try:
        build(tmp_dir / filename)
        (tmp_dir / "key.json").write_text(json.dumps(key, indent=2, default=str))
        if final_dir.exists():
            shutil.rmtree(final_dir)
        os.replace(tmp_dir, final_dir)
    finally:
        if tmp_dir.exists():
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return final, False

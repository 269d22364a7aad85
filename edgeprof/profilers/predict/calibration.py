"""Calibration files: versioned JSON, shipped for the built-in boards, written by
``edgeprof calibrate`` into the user's folder (which wins over the shipped ones).

A file ``<target>--<label>.json`` holds::

    {"format": "edgeprof-calibration", "format_version": 1, "name": ..., "target": ...,
     "fingerprint": {...},            # the device (descriptor sha256, or the host's CPU)
     "runtimes": {"tflite/fp32": {"family", "precision", "version", "factor", "n"}, ...},
     "parameters": {"grouping", "per_inference_ms", "per_layer_ms",
                    "efficiency_multiplier": {class: theta}},  # the roofline basis, or
                    # "basis": "work", "floor", "ms_per_gmac"/"ms_per_mb": {class: ...}
     "cv": {"method": "leave-one-out", "n", "median_abs_error", "within_25", "spearman",
            "log_sigma", "errors": [...]},
     "ranges": {class: [min roofline ms, max roofline ms]},   # of the samples' kernels
     "samples": [{"id", "model", "family", "precision", "latency_ms", "features", "source"}],
     "created_utc", "edgeprof_version", "note"}

Search order: ``$EDGEPROF_CALIBRATIONS_DIR``, else ``<cache>/calibrations`` (the user's
cache folder, ``edgeprof.core.cache``), then the package's ``data/calibrations``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import ConfigError

FORMAT = "edgeprof-calibration"
FORMAT_VERSION = 1
ENV_DIR = "EDGEPROF_CALIBRATIONS_DIR"
SHIPPED_DIR = Path(__file__).parent / "data" / "calibrations"
REQUIRED = ("name", "target", "fingerprint", "runtimes", "parameters", "cv", "ranges", "samples")


class CalibrationError(ConfigError):
    """A calibration file is corrupted or of a format this edgeprof cannot read (exit 2)."""


@dataclass
class Calibration:
    name: str
    target: str
    fingerprint: dict[str, Any]
    runtimes: dict[str, dict[str, Any]]
    parameters: dict[str, Any]
    cv: dict[str, Any]
    ranges: dict[str, list[float]]
    samples: list[dict[str, Any]]
    created_utc: str = ""
    edgeprof_version: str = ""
    note: str = ""
    path: Path | None = field(default=None, compare=False)

    def entry(self, family: str, precision: str) -> dict[str, Any] | None:
        return self.runtimes.get(f"{family}/{precision}")

    def summary(self) -> dict[str, Any]:
        """What the calibration knows, in brief: its runtimes (family, precision, rows,
        factor) and its leave-one-out error and interval."""
        cv = self.cv or {}
        return {"name": self.name, "path": str(self.path) if self.path else None,
                "runtimes": [{"family": v.get("family", k.split("/")[0]),
                              "precision": v.get("precision", k.split("/")[-1]),
                              "rows": v.get("n"), "factor": v.get("factor")}
                             for k, v in self.runtimes.items()],
                "cv": {k: cv.get(k) for k in ("method", "n", "median_abs_error", "within_25",
                                              "coverage", "median_width")}}

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "name": self.name,
                "target": self.target, "fingerprint": self.fingerprint,
                "runtimes": self.runtimes, "parameters": self.parameters, "cv": self.cv,
                "ranges": self.ranges, "samples": self.samples,
                "created_utc": self.created_utc, "edgeprof_version": self.edgeprof_version,
                "note": self.note}

    @classmethod
    def from_dict(cls, d: Any, path: Path | None = None) -> Calibration:
        def bad(what: str) -> CalibrationError:
            return CalibrationError(f"not a usable calibration ({what}); delete it or redo it "
                                    "with 'edgeprof calibrate'", path=path)

        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise bad(f"'format' is not '{FORMAT}'")
        if d.get("format_version") != FORMAT_VERSION:
            raise bad(f"format_version {d.get('format_version')!r}, this edgeprof reads "
                      f"{FORMAT_VERSION}")
        missing = [k for k in REQUIRED if k not in d]
        if missing:
            raise bad("missing " + ", ".join(missing))
        p = d["parameters"]
        try:
            numbers = [float(p["per_inference_ms"]), float(p["per_layer_ms"])]
            numbers += [float(v) for v in p["efficiency_multiplier"].values()]
            if p.get("basis", "roofline") not in ("roofline", "work", "split"):
                raise ValueError(f"basis {p.get('basis')!r}")
            if p.get("basis") == "split":
                numbers += [float(v) for v in p["ms_per_compute_ms"].values()]
                numbers += [float(v) for v in p["ms_per_memory_ms"].values()]
                numbers.append(float(p["per_memory_layer_ms"]))
            if p.get("basis") == "work":
                numbers += [float(v) for v in p["ms_per_gmac"].values()]
                numbers += [float(v) for v in p["ms_per_mb"].values()]
                numbers.append(float(p.get("ms_per_spilled_mb", 0.0)))
            numbers += [float(r["factor"]) for r in d["runtimes"].values()]
            numbers.append(float(d["cv"]["log_sigma"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise bad(f"parameters unreadable: {type(e).__name__} {e}") from e
        if not all(n == n and n >= 0 and n != float("inf") for n in numbers):
            raise bad("a parameter is negative, NaN or infinite")
        return cls(name=str(d["name"]), target=str(d["target"]), fingerprint=d["fingerprint"],
                   runtimes=d["runtimes"], parameters=p, cv=d["cv"], ranges=d["ranges"],
                   samples=d["samples"], created_utc=d.get("created_utc", ""),
                   edgeprof_version=d.get("edgeprof_version", ""), note=d.get("note", ""),
                   path=path)

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically to ``path``, or into it as ``<name>.json`` when it is a folder."""
        from edgeprof.core.io import out_file, write_json

        return write_json(out_file(path, f"{self.name}.json"), self.to_dict())


_LOADED: dict[tuple[str, int, int], Calibration] = {}


def load_calibration(path: str | os.PathLike) -> Calibration:
    """Read and validate one calibration file (:class:`CalibrationError` if unusable). A
    file read before and unchanged since (same size and modification time) is not parsed
    again: predictions over many models look calibrations up once per model."""
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None and key in _LOADED:
        return _LOADED[key]
    cal = _load_calibration(path)
    if key is not None:
        _LOADED[key] = cal
    return cal


def _load_calibration(path: Path) -> Calibration:
    if not path.is_file():
        raise CalibrationError("no such calibration file; give the path of one (edgeprof "
                               "calibrate --measurements FILE.csv --out FILE.json writes one)",
                               path=path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CalibrationError(f"cannot read calibration ({type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}); delete it or redo "
                               "it with 'edgeprof calibrate'", path=path) from e
    return Calibration.from_dict(data, path)


def user_dir(create: bool = False) -> Path | None:
    """The user's calibration folder (``$EDGEPROF_CALIBRATIONS_DIR`` or the cache's)."""
    env = os.environ.get(ENV_DIR)
    if env:
        p = Path(env)
        if create:
            p.mkdir(parents=True, exist_ok=True)
        return p
    from edgeprof.core.cache import cache_dir

    try:
        return cache_dir("calibrations")
    except OSError:
        return None


def user_file(name: str) -> Path:
    """Where a calibration named ``name`` is written by default: ``<user_dir>/<name>.json``
    (the folder created), where predictions look before the shipped files. UserError when
    no folder can be made here."""
    from edgeprof.core.errors import UserError

    folder = user_dir(create=True)
    if folder is None:
        raise UserError(f"no calibration folder can be created here: set {ENV_DIR} to a "
                        "writable folder, or give --out FILE.json")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.json"


def search_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = list(extra or [])
    u = user_dir()
    if u is not None:
        dirs.append(u)
    dirs.append(SHIPPED_DIR)
    return dirs


def calibrations_for(target_id: str, dirs: list[Path] | None = None) -> list[Calibration]:
    """Every calibration of ``target_id``, the user's first, then the shipped ones."""
    out = []
    for d in dirs if dirs is not None else search_dirs():
        if not d.is_dir():
            continue
        for f in sorted(d.glob(f"{target_id}--*.json")):
            out.append(load_calibration(f))
    return out

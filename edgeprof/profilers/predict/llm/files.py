"""LLM calibration files: the helpers a written file shares (``edgeprof calibrate``'s host
file, :mod:`.host`; the shipped one is built by tools/build_llm_calibration.py, build-only and
not installed), reading and validating them (:func:`load_llm_calibration`,
:func:`llm_calibrations`), and choosing the one a prediction uses."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from edgeprof.profilers.predict.calibration import CalibrationError, user_dir
from edgeprof.profilers.predict.llm.constants import (FILE_PREFIX, FORMAT, READABLE_VERSIONS,
                                                      SHIPPED_FILE)
from edgeprof.profilers.predict.llm.fit import fit_prior


class LLMCalibrationError(CalibrationError):
    """An LLM calibration file is corrupted or of another format (exit 2)."""


# ------------------------------------------------------------------ writing files
def edgeprof_version() -> str:
    from edgeprof._version import __version__

    return __version__


def strip_samples(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k not in ("estimate", "rate_ref")} for s in samples]


# ------------------------------------------------------------------ loading files
def validate(d: Any, path: Path | None = None) -> dict[str, Any]:
    def bad(what: str) -> LLMCalibrationError:
        return LLMCalibrationError(f"not a usable LLM calibration ({what}); delete it or redo "
                                   "it with 'edgeprof calibrate'", path=path)

    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise bad(f"'format' is not '{FORMAT}'")
    if d.get("format_version") not in READABLE_VERSIONS:
        raise bad(f"format_version {d.get('format_version')!r}, this edgeprof reads "
                  f"{', '.join(map(str, READABLE_VERSIONS))}")
    if not isinstance(d.get("entries"), dict) or not isinstance(d.get("prior"), dict):
        raise bad("missing entries or prior")
    try:
        nums = [float(d["prior"]["bandwidth_fraction"]), float(d["prior"]["efficiency"])]
        for e in d["entries"].values():
            if e.get("decode"):
                nums += [float(e["decode"]["base"]["bandwidth_fraction"]),
                         float(e["decode"]["base"]["per_layer_s"]), float(e["decode"]["sigma"])]
                for r in e["decode"]["runtimes"].values():
                    nums += [float(r["bandwidth_fraction"]), float(r["per_layer_s"])]
                    nums += [float(x["factor"]) for x in (r.get("eras") or {}).values()]
            if e.get("prefill"):
                nums += [float(e["prefill"]["base"]["efficiency"]), float(e["prefill"]["sigma"])]
                for r in e["prefill"]["runtimes"].values():
                    nums += [float(r["efficiency"])]
                    nums += [float(x["factor"]) for x in (r.get("eras") or {}).values()]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise bad(f"parameters unreadable: {type(e).__name__} {e}") from None
    if not all(math.isfinite(x) and x >= 0 for x in nums):
        raise bad("a parameter is negative, NaN or infinite")
    if any(x <= 0 for x in nums[:2]):
        raise bad("a fraction or efficiency is zero")
    return d


def load_llm_calibration(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise LLMCalibrationError(f"cannot read LLM calibration ({type(e).__name__}: {first}); "
                                  "delete it or redo it with 'edgeprof calibrate'",
                                  path=path) from None
    d = validate(d, path)
    d["path"] = str(path)
    return d


def llm_calibrations(dirs: list[Path] | None = None) -> list[dict[str, Any]]:
    """The user's LLM calibrations (``llm--*.json`` in the calibration folder), then the
    shipped one."""
    if dirs is None:
        u = user_dir()
        dirs = [u] if u is not None else []
        files = [f for d in dirs if d.is_dir() for f in sorted(d.glob(f"{FILE_PREFIX}*.json"))]
        files.append(SHIPPED_FILE)
    else:
        files = [f for d in dirs if Path(d).is_dir()
                 for f in sorted(Path(d).glob(f"{FILE_PREFIX}*.json"))]
    return [load_llm_calibration(f) for f in files if f.is_file()]


def llm_summaries(target_id: str, dirs: list[Path] | None = None) -> list[dict[str, Any]]:
    """Per LLM calibration with entries for ``target_id`` (any of its devices): its name and,
    per device and stage, the runtimes with their rows."""
    out = []
    for cal in llm_calibrations(dirs):
        entries = {k: v for k, v in cal["entries"].items()
                   if k.split("/", 1)[0] == target_id}
        if not entries:
            continue
        out.append({"name": cal.get("name"), "entries": {
            key: {stage: {rt: v.get("n") for rt, v in (e.get(stage) or {}).get(
                "runtimes", {}).items()} for stage in ("decode", "prefill") if e.get(stage)}
            for key, e in entries.items()}})
    return out


def _has_runtime(entry: dict[str, Any], runtime: str | None) -> bool:
    return runtime is not None and any(
        runtime in ((entry.get(st) or {}).get("runtimes") or {}) for st in ("decode", "prefill"))


def select_calibration(cals: list[dict[str, Any]], key: str, runtime: str | None = None
                       ) -> tuple[dict[str, Any] | None, dict]:
    """The calibration to predict ``key`` (``board/device``) with: the first with rows of
    ``runtime`` there, else the first with an entry for ``key`` (a runtime transfer from
    it); and the prior to use (the first calibration's that has one). A user's calibration
    of one runtime so leaves the shipped rows of the others in use, as a tensor calibration
    is chosen per runtime."""
    prior = next((c["prior"] for c in cals if c.get("prior")), None) or fit_prior({})
    with_key = [c for c in cals if key in c["entries"]]
    for c in with_key:
        if _has_runtime(c["entries"][key], runtime):
            return c, c.get("prior") or prior
    if with_key:
        return with_key[0], with_key[0].get("prior") or prior
    return None, prior


def entries_for_transfer(cals: list[dict[str, Any]]) -> dict[str, Any]:
    """Entries of every calibration (the first one's wins per key): the boards a
    same-core estimate may come from."""
    out: dict[str, Any] = {}
    for c in cals:
        for k, e in c["entries"].items():
            out.setdefault(k, e)
    return out

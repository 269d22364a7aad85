"""LLM calibration files: building the shipped one from the published rows
(:func:`build_calibration`, :func:`write_calibration`), reading and validating them
(:func:`load_llm_calibration`, :func:`llm_calibrations`), and choosing the one a prediction
uses."""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any

from edgeprof.profilers.predict.calibration import CalibrationError, user_dir
from edgeprof.profilers.predict.llm.builds import BUILD_ERAS, learned_builds
from edgeprof.profilers.predict.llm.constants import (ASSUMED_GEN, ASSUMED_PROMPT, FILE_PREFIX,
                                                      FORMAT, FORMAT_VERSION,
                                                      READABLE_VERSIONS, SHIPPED_FILE)
from edgeprof.profilers.predict.llm.crossval import (_fit_all, attach_cv, cv_table,
                                                     interval_report, leave_one_out,
                                                     same_measurement)
from edgeprof.profilers.predict.llm.fit import fit_prior
from edgeprof.profilers.predict.llm.inputs import (DECODE_SATURATION_PRIOR,
                                                   DECODE_SATURATION_SOURCE,
                                                   PREFILL_SERIAL_PRIOR,
                                                   PREFILL_SERIAL_SOURCE)
from edgeprof.profilers.predict.llm.rows import published_samples


class LLMCalibrationError(CalibrationError):
    """An LLM calibration file is corrupted or of another format (exit 2)."""


# ------------------------------------------------------------------ building files
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _version() -> str:
    from edgeprof._version import __version__

    return __version__


def _strip(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k not in ("estimate", "rate_ref")} for s in samples]


def build_calibration() -> dict[str, Any]:
    """The shipped calibration, fitted only to the training file (deterministic: the same
    file gives the same numbers; ``created_utc`` aside)."""
    samples, skipped = published_samples()
    cal = _fit_all(samples, per_runtime=False)
    loo = leave_one_out(samples, per_runtime=False, nested=True, group=same_measurement)
    attach_cv(cal, loo)
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "name": "llm--published",
            "entries": cal["entries"], "prior": cal["prior"],
            "extrapolation_sigma": cal["extrapolation_sigma"],
            "builds": learned_builds(samples), "build_eras": BUILD_ERAS,
            "cv": {"method": "leave-one-out", "grouped": (
                       "rows of one board, processor, runtime, build era, model, format and "
                       "stage (one measurement at several builds of an era) held out "
                       "together"), "n": len(loo), "rows": loo,
                   "boards": cv_table(loo), "intervals": interval_report(loo)},
            "samples": _strip(samples), "left_out": skipped,
            "assumptions": {"prompt_tokens": ASSUMED_PROMPT, "gen_tokens": ASSUMED_GEN,
                            "threads": {"prefill_serial_share": PREFILL_SERIAL_PRIOR,
                                        "prefill_source": PREFILL_SERIAL_SOURCE,
                                        "decode_saturation_threads": DECODE_SATURATION_PRIOR,
                                        "decode_source": DECODE_SATURATION_SOURCE}},
            "created_utc": _now(), "edgeprof_version": _version(),
            "note": (f"fitted only to edgeprof/profilers/predict/data/llm/"
                     f"llm_measurements_train.csv ({len(samples)} rows used, {len(skipped)} left "
                     "out: " + "; ".join(f"{s['model']} ({s['device']}): {s['reason']}"
                                         for s in skipped)
                     + "); bytes and MACs per token from edgeprof's estimator for the preset "
                     "and format each row is read as (data/llm/rows.toml)")}


def write_calibration(path: str | os.PathLike = SHIPPED_FILE) -> dict[str, Any]:
    """Rebuild the shipped file (``python benchmarks/predict_llm.py --write``)."""
    from edgeprof.core.io import write_json

    cal = build_calibration()
    write_json(path, cal)
    return cal


def comparable(cal: dict[str, Any]) -> dict[str, Any]:
    """A calibration without its timestamp and version (to compare a re-fit to a file)."""
    return {k: v for k, v in json.loads(json.dumps(cal)).items()
            if k not in ("created_utc", "edgeprof_version")}


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


def _select(cals: list[dict[str, Any]], key: str, runtime: str | None = None
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


def _entries_for_transfer(cals: list[dict[str, Any]]) -> dict[str, Any]:
    """Entries of every calibration (the first one's wins per key): the boards a
    same-core estimate may come from."""
    out: dict[str, Any] = {}
    for c in cals:
        for k, e in c["entries"].items():
            out.setdefault(k, e)
    return out

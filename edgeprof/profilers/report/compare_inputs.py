"""The inputs of a comparison, checked before anything is compared: reading a profile.json,
its schema version and samples (:func:`check_profile`), its kind (tensor or generative,
:func:`check_same_kind`) and what it measured (:func:`profile_differences`). What differs by
workload (a run's samples, what a generative profile's test shape is) is the ``comparison``
module of the document's report member (:func:`~.family.comparison_of`). Part of
:mod:`edgeprof.profilers.report.compare`."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from edgeprof.core.errors import ConfigError
from edgeprof.profilers.report.family import comparison_of, member_of

#: major versions of profile.json this module reads
SCHEMA_MAJORS = (1,)


# --------------------------------------------------------------------------- input
def load_profile(path: str | os.PathLike) -> dict[str, Any]:
    """Read a profile.json (ConfigError naming the file when it is not one)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError("file not found; give the path of a profile.json written by "
                          "'edgeprof profile --json' or '--out'", path=p)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"not valid JSON ({e}); give a profile.json written by edgeprof",
                          path=p) from None
    check_profile(doc, p)
    return doc


def schema_major(version: Any) -> int | None:
    if isinstance(version, bool):
        return None
    if isinstance(version, int):
        return version
    if isinstance(version, float) and math.isfinite(version):
        return int(version)
    if isinstance(version, str):
        head = version.strip().split(".", 1)[0]
        return int(head) if head.isdigit() else None
    return None


def check_profile(doc: Any, where: Any = "profile") -> None:
    """ConfigError unless ``doc`` looks like a profile.json this version reads: a dict with a
    ``runs`` list, a known ``schema_version`` major (when it has one), and what its
    workload's comparison checks (``check_document``): runs that name their backend,
    samples that are finite numbers (a tensor run's latencies non-negative ms, a generative
    profile's ``schema``, ``edgeprof.llm/N``, and its raw repetition times positive
    seconds)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise ConfigError("not an edgeprof profile.json (no 'runs' list); give a file written "
                          "by 'edgeprof profile'", path=where)
    if "schema_version" in doc:
        version = doc["schema_version"]
        check_major(schema_major(version), version, "schema_version", "{}.x", where)
    comparison_of(doc).check_document(doc, where)


def check_runs_name(doc: dict[str, Any], names: tuple[str, ...], where: Any) -> None:
    """ConfigError unless every run of ``doc`` is a dict naming each of ``names`` (strings)."""
    for i, run in enumerate(doc["runs"]):
        if not isinstance(run, dict) or not all(isinstance(run.get(k), str) for k in names):
            raise ConfigError(f"run {i} has no {' and '.join(repr(k) for k in names)}; is this "
                              "an edgeprof profile.json?", path=where, field=f"runs[{i}]")


def check_major(major: int | None, value: Any, field: str, shown: str, where: Any) -> None:
    """ConfigError unless ``major`` (of ``value``, at ``field``) is one this module reads;
    ``shown`` formats a readable major for the message."""
    if major not in SCHEMA_MAJORS:
        raise ConfigError(f"{field} {value!r} is not one this edgeprof reads "
                          f"({', '.join(shown.format(m) for m in SCHEMA_MAJORS)}); compare it "
                          "with the edgeprof version that wrote it", path=where, field=field)


def not_a(value: Any, expected: str, where: Any, i: int, run: dict[str, Any],
           name: str) -> None:
    """ConfigError: run ``i``'s ``name`` is not ``expected`` (a damaged file)."""
    raise ConfigError(f"{name.rsplit('.', 1)[-1]} of run {i} ({run['backend']}) is a "
                      f"{type(value).__name__}, not {expected}; the file is damaged or not "
                      "written by edgeprof", path=where, field=f"runs[{i}].{name}")


def check_numbers(values: Any, where: Any, i: int, run: dict[str, Any], what: str,
                   name: str, unit: str, positive: bool = False) -> None:
    """ConfigError unless ``values`` (samples of run ``i`` at ``runs[i].name``) is None or a
    list of finite numbers ``>= 0`` (``> 0`` when ``positive``)."""
    if values is None:
        return
    if not isinstance(values, list):
        not_a(values, f"a list of {unit}", where, i, run, name)
    for j, v in enumerate(values):
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              and (v > 0 if positive else v >= 0))
        if not ok:
            raise ConfigError(f"{what} sample {j} of run {i} ({run['backend']}) is {v!r}, not "
                              f"a finite {'positive ' if positive else ''}number of {unit}; the "
                              "file is damaged or not written by edgeprof", path=where,
                              field=f"runs[{i}].{name}")


def profile_kind(doc: Any) -> str:
    """How messages name a profile's kind: ``"generative"`` (``kind`` "llm"), ``"tensor"``."""
    return member_of(doc).word


def _what(doc: dict[str, Any]) -> str:
    name = _identity(doc).get("model name")
    return f"{profile_kind(doc)} profile" + (f" of {name}" if name else "")


def check_same_kind(a: dict[str, Any], b: dict[str, Any]) -> None:
    """ConfigError (exit 2) when one profile is a tensor one and the other a generative one."""
    if member_of(a) is not member_of(b):
        raise ConfigError(f"A is a {_what(a)} and B a {_what(b)}: a tensor latency and "
                          "generative tokens/s measure different things; compare two tensor "
                          "profiles or two generative ones")


def _identity(doc: dict[str, Any]) -> dict[str, Any]:
    """What a profile measured (only what the document says): what its workload's comparison
    names first (a generative one's model name and file format, device, prompt and generated
    tokens), then model name and format, input shapes and dtypes, and target."""
    out: dict[str, Any] = dict(comparison_of(doc).identity(doc))
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    for key in ("name", "format"):
        if model.get(key) is not None:
            out[f"model {key}"] = model[key]
    inputs = model.get("inputs")
    if isinstance(inputs, list) and inputs:
        out["input shapes"] = ", ".join(
            "x".join(str(d) for d in (i.get("shape") or [])) + f" {i.get('dtype', '')}".rstrip()
            for i in inputs if isinstance(i, dict))
    target = doc.get("target")
    tid = target.get("id") if isinstance(target, dict) else target
    if tid is not None:
        out["target"] = tid
    return out


def profile_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between the things two profiles measured (model, target, input shapes),
    e.g. ``["target: raspberry_pi_4 (A) vs jetson_nano (B)"]``; empty when they match or
    neither document says."""
    ia, ib = _identity(a), _identity(b)
    return [f"{k}: {ia[k]} (A) vs {ib[k]} (B)" for k in ia if k in ib and ia[k] != ib[k]]


def like_for_like(a: dict[str, Any], b: dict[str, Any], *, force: bool, what: str) -> list[str]:
    """The notes every row of a forced comparison carries (empty when the two profiles
    measured the same thing); ConfigError, unless ``force``, when they did not. ``what``
    names what must match ("model, target and input shape")."""
    from edgeprof.core.errors import ConfigError

    differ = profile_differences(a, b)
    if differ and not force:
        raise ConfigError("the profiles measured different things (" + "; ".join(differ)
                          + "); a change between them is not a speed-up or a slow-down. "
                          f"Compare profiles of one {what}, or pass --force to compare "
                          "anyway")
    return ["NOT LIKE FOR LIKE (forced): " + "; ".join(differ)] if differ else []

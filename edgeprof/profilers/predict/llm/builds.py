"""Runtime builds: a runtime version read as a build with a date and an era
(:func:`normalize_build`), the build installed here, and the builds a calibration learned.

Only the era (:data:`BUILD_ERAS`) is used in the fit; the dates order builds."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

#: llama.cpp build number -> date, for ordering builds (approximate, about +-1 month between
#: anchors: release tags bNNNN of github.com/ggml-org/llama.cpp; b4970/b5043/b9307/b9518 from
#: the training rows' sources, whose builds are not newer than those dates). Only the era
#: (:data:`BUILD_ERAS`) is used in the fit, and no anchor is near its split.
LLAMA_CPP_BUILD_DATES: tuple[tuple[int, str], ...] = (
    (1000, "2023-08-07"), (2000, "2024-01-27"), (3000, "2024-05-27"), (4000, "2024-10-30"),
    (4970, "2025-03-27"), (5043, "2025-04-04"), (9307, "2026-05-27"), (9518, "2026-06-04"))
#: llamafile release -> date (approximate)
LLAMAFILE_DATES = {"0.6": "2024-01-04", "0.6.2": "2024-01-27", "0.7": "2024-03-31",
                   "0.8": "2024-04-25", "0.9": "2025-01-08"}
#: llama-cpp-python release -> the llama.cpp it vendors (its CHANGELOG). The PyPI sdist builds
#: without git, so the library reports no build number; ggml carries version numbers only
#: from 2025 on, which dates ggml 0.25 to the 2025+ era.
LLAMA_CPP_PYTHON = {"0.3.36": {"commit": "0c1e57098", "ggml": "0.25.3",
                               "era_date": "2025-09-01"}}
#: per runtime family: where its build eras split and why (the kernels that changed). Within an
#: era the rows show no build effect: the same model, format and prompt at two builds measured
#: within 7 % (llama.cpp b9333 / b9518 on the Orin Nano Super, 66.69 / 66.55 tok/s decode;
#: b6726 / b7095 on a Pi 4, Qwen3-0.6B prefill 19.8 / 19.9 tok/s at pp256 / pp512; RKLLM
#: 1.2.1, 1.2.2, 1.3.0 on the RK3588's NPU, within 3 %: RKLLM has no eras), against factors of
#: 0.7-1.3 between eras (tests/profilers/predict/test_llm.py,
#: test_builds_of_one_era_measured_the_same)
BUILD_ERAS: dict[str, dict[str, str]] = {
    "llama_cpp": {"key": "date", "split": "2025-01-01", "why": (
        "llama.cpp's CPU matmuls for Arm were reworked between the 2024 builds and the 2025+ "
        "builds of the rows (weight repacking for Arm dot-product kernels, late 2024; more "
        "kernels since): a calendar split between the rows' 2024-03 and 2025-03 builds")},
    "llamafile": {"key": "version", "split": "0.7", "why": (
        "llamafile 0.7 brought the tinyBLAS matmul kernels (justine.lol/matmul, the source "
        "of the rows: 20 -> 45 prompt tok/s on a Pi 5)")},
}
JETPACK_DATES = {"6.0": "2024-06-01", "6.1": "2024-12-01", "6.2": "2025-01-15"}


def _date(s: str) -> _dt.date:
    return _dt.date.fromisoformat(s)


def llama_cpp_build_date(number: int) -> str:
    """The approximate date of llama.cpp build ``number`` (linear between the anchors of
    :data:`LLAMA_CPP_BUILD_DATES`, extended at the nearest segment's rate beyond them)."""
    a = LLAMA_CPP_BUILD_DATES
    if number <= a[0][0]:
        (n0, d0), (n1, d1) = a[0], a[1]
    elif number >= a[-1][0]:
        (n0, d0), (n1, d1) = a[-2], a[-1]
    else:
        i = next(i for i in range(1, len(a)) if a[i][0] >= number)
        (n0, d0), (n1, d1) = a[i - 1], a[i]
    t0, t1 = _date(d0).toordinal(), _date(d1).toordinal()
    t = t0 + (t1 - t0) * (number - n0) / (n1 - n0)
    return _dt.date.fromordinal(int(round(t))).isoformat()


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _era(runtime: str, date: str | None, version: str | None) -> str | None:
    spec = BUILD_ERAS.get(runtime)
    if spec is None:
        return None
    if spec["key"] == "date":
        if not date:
            return None
        return ("before " if date < spec["split"] else "from ") + spec["split"]
    if not version:
        return None
    before = _version_tuple(version) < _version_tuple(spec["split"])
    return ("before " if before else "from ") + spec["split"]


def normalize_build(runtime: str, text: str | None) -> dict[str, Any]:
    """A runtime version as a build: ``{"runtime", "raw", "label", "number", "version",
    "date", "approx", "era"}`` (None where the text does not say). Reads llama.cpp build
    numbers (``b4970``, ``b5043 (c262bedd)``, ``(4970)``), dates (``2024-03-26``),
    llama-cpp-python versions (``llama-cpp-python 0.3.36``: the llama.cpp it vendors),
    llamafile versions (``0.7``) and JetPack releases (MLC's containers)."""
    raw = (text or "").strip()
    out: dict[str, Any] = {"runtime": runtime, "raw": raw or None, "label": None,
                           "number": None, "version": None, "date": None, "approx": False,
                           "era": None}
    if not raw or raw.lower().startswith("not stated"):
        return out
    low = raw.lower()
    m_py = re.search(r"llama-cpp-python\s+(\d+(?:\.\d+)+)", low)
    m_num = re.search(r"\bb(\d{3,6})\b", low) or re.search(r"\((\d{4,6})\)", low)
    m_date = re.search(r"(\d{4}-\d{2}-\d{2})", raw)
    if runtime == "llama_cpp" and m_py:
        v = m_py.group(1)
        info = LLAMA_CPP_PYTHON.get(v)
        out.update(version=v, label=f"llama-cpp-python {v}")
        if info:
            out["label"] += f" (llama.cpp {info['commit']}, ggml {info['ggml']})"
            out.update(date=info["era_date"], approx=True)
    elif m_num:
        n = int(m_num.group(1))
        out.update(number=n, label=f"b{n}", date=llama_cpp_build_date(n), approx=True)
    elif m_date:
        out.update(label=m_date.group(1), date=m_date.group(1))
    elif "jetpack" in low:
        m = re.search(r"jetpack\s*(\d+\.\d+)", low)
        if m:
            out.update(label=f"JetPack {m.group(1)}",
                       date=JETPACK_DATES.get(m.group(1)), approx=True)
        else:
            out["label"] = raw
    else:
        m = re.search(r"(\d+(?:\.\d+)+)", raw)
        if m:
            v = m.group(1)
            out.update(version=v, label=v)
            if runtime == "llamafile":
                key = next((k for k in sorted(LLAMAFILE_DATES, key=_version_tuple,
                                                reverse=True)
                            if _version_tuple(k) <= _version_tuple(v)), None)
                if key:
                    out.update(date=LLAMAFILE_DATES[key], approx=key != v)
        else:
            out["label"] = raw
    out["era"] = _era(runtime, out["date"], out["version"])
    return out


def installed_build(runtime: str) -> dict[str, Any] | None:
    """The build of ``runtime`` installed on this machine, where edgeprof can tell (llama.cpp
    through the llama-cpp-python package's version; read from its metadata, nothing is
    imported); None otherwise."""
    if runtime != "llama_cpp":
        return None
    from edgeprof.core.importing import dist_version

    v = dist_version("llama-cpp-python", None)
    if v is None:
        return None
    return normalize_build(runtime, f"llama-cpp-python {v}")


def newest_build(builds: list[dict[str, Any]]) -> dict[str, Any] | None:
    dated = [b for b in builds if b.get("date")]
    return max(dated, key=lambda b: (b["date"], b.get("number") or 0)) if dated else None


def learned_builds(samples: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per runtime: the builds the samples learned (normalised, newest last)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for s in samples:
        b = s.get("build") or {}
        if b.get("label"):
            out.setdefault(s["runtime"], {})[b["label"]] = {
                k: b.get(k) for k in ("label", "number", "version", "date", "approx", "era")}
    return {rt: sorted(v.values(), key=lambda b: (b.get("date") or "", b.get("number") or 0))
            for rt, v in sorted(out.items())}

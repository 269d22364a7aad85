"""Compare two profile.json documents run by run: is B faster or slower than A, really?

Runs are matched by ``(backend, requested precision)``. For each pair with latency samples
(``benchmark.stats.samples_ms``) the difference is called **significant** when all hold:

1. the two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``) gives ``p < alpha``
   (0.05): the two samples are not from one distribution;
2. the medians differ by at least ``min_rel_change`` (2%) of A's median: smaller changes are
   within what a rebuild, a reboot or a thermal state moves;
3. Cliff's delta (from the same U: ``delta = 1 - 2 U_a / (n_a n_b)``) is at least ``min_cliffs``
   (0.147, the conventional "small" effect) in absolute value: a typical B sample is really
   on one side of a typical A sample, not just a shifted tail.

With thousands of samples the U test alone flags differences of a fraction of a percent;
conditions 2 and 3 keep the verdict to changes that matter and that hold for most runs. The
medians' confidence intervals are reported too (``ci_overlap``) but do not decide.

A run without samples (not ``ok``, or written with ``keep_samples`` off) is listed with the
reason and no verdict. Samples that are block means (``block_size > 1``) are compared as they
are; a note says when the two sides used different block sizes.

The inputs are checked before anything is compared (:class:`ConfigError`, exit 2):

* a ``schema_version`` whose major version this edgeprof does not read;
* latency samples that are not finite non-negative numbers (a NaN, a string): edgeprof never
  writes them, so the file is damaged or not edgeprof's;
* profiles of a different model (name, format), target or input shapes/dtypes
  (:func:`profile_differences`): a speed-up between two different things means nothing.
  ``force=True`` compares anyway, and every row carries a note saying what differs.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import ConfigError, UserError

#: major versions of profile.json this module reads
SCHEMA_MAJORS = (1,)
ALPHA = 0.05
MIN_REL_CHANGE = 0.02
MIN_CLIFFS_DELTA = 0.147


@dataclass
class Comparison:
    """One (backend, precision) row of a comparison. Latencies in ms; delta = B - A."""

    backend: str
    precision: str
    status: str  # compared | only_in_a | only_in_b | no_samples
    verdict: str  # faster | slower | no significant change | not compared
    significant: bool | None = None
    median_a_ms: float | None = None
    median_b_ms: float | None = None
    delta_ms: float | None = None
    delta_pct: float | None = None  # 100 * (B - A) / A
    p_value: float | None = None
    cliffs_delta: float | None = None  # > 0: B tends to be slower
    ci_a_ms: list[float] | None = None
    ci_b_ms: list[float] | None = None
    ci_overlap: bool | None = None
    n_a: int | None = None
    n_b: int | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from edgeprof.core.results import clean

        return clean(asdict(self))


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


def _schema_major(version: Any) -> int | None:
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
    ``runs`` list, a known ``schema_version`` major (when it has one), and latency samples
    that are finite non-negative numbers."""
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise ConfigError("not an edgeprof profile.json (no 'runs' list); give a file written "
                          "by 'edgeprof profile'", path=where)
    if "schema_version" in doc:
        version = doc["schema_version"]
        if _schema_major(version) not in SCHEMA_MAJORS:
            raise ConfigError(f"schema_version {version!r} is not one this edgeprof reads "
                              f"({', '.join(f'{m}.x' for m in SCHEMA_MAJORS)}); compare it with "
                              "the edgeprof version that wrote it", path=where,
                              field="schema_version")
    for i, run in enumerate(doc["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("backend"), str):
            raise ConfigError(f"run {i} has no 'backend' name; is this an edgeprof "
                              "profile.json?", path=where, field=f"runs[{i}]")
        stats = _stats(run)
        samples = (stats or {}).get("samples_ms")
        if samples is None:
            continue
        if not isinstance(samples, list):
            raise ConfigError(f"samples_ms of run {i} ({run['backend']}) is a "
                              f"{type(samples).__name__}, not a list of ms; the file is "
                              "damaged or not written by edgeprof", path=where,
                              field=f"runs[{i}].benchmark.stats.samples_ms")
        for j, v in enumerate(samples):
            ok = (isinstance(v, (int, float)) and not isinstance(v, bool)
                  and math.isfinite(v) and v >= 0)
            if not ok:
                raise ConfigError(f"latency sample {j} of run {i} ({run['backend']}) is "
                                  f"{v!r}, not a finite number of ms; the file is damaged or "
                                  "not written by edgeprof", path=where,
                                  field=f"runs[{i}].benchmark.stats.samples_ms")


def _identity(doc: dict[str, Any]) -> dict[str, Any]:
    """What a profile measured: model name and format, target, input shapes and dtypes
    (only what the document says)."""
    out: dict[str, Any] = {}
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


def _precision(run: dict[str, Any]) -> str:
    bench = run.get("benchmark") or {}
    return str(run.get("requested_precision") or bench.get("requested_precision")
               or run.get("precision") or "fp32")


def _stats(run: dict[str, Any]) -> dict[str, Any] | None:
    bench = run.get("benchmark")
    if isinstance(bench, dict) and isinstance(bench.get("stats"), dict):
        return bench["stats"]
    return run.get("stats") if isinstance(run.get("stats"), dict) else None


def _index(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for run in doc["runs"]:
        out.setdefault((run["backend"], _precision(run)), run)
    return out


# --------------------------------------------------------------------------- tests
def mann_whitney(a, b) -> tuple[float, float]:
    """Two-sided Mann-Whitney U of ``a`` vs ``b``: ``(U_a, p)``. scipy when present, else the
    normal approximation with tie correction (the same as scipy's ``method="asymptotic"``)."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        mannwhitneyu = None
    if mannwhitneyu is not None:
        res = mannwhitneyu(a, b, alternative="two-sided")
        return float(res.statistic), float(res.pvalue)
    n1, n2 = a.size, b.size
    allv = np.concatenate([a, b])
    order = np.argsort(allv, kind="mergesort")
    ranks = np.empty(allv.size)
    sv = allv[order]
    _, first, counts = np.unique(sv, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    tie = (counts ** 3 - counts).sum()
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1)))) if n > 1 else 0.0
    if sigma == 0:
        return float(u1), 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / sigma
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return float(u1), float(min(1.0, p))


def cliffs_delta_from_u(u_a: float, n_a: int, n_b: int) -> float:
    """Cliff's delta of B versus A, ``P(b > a) - P(b < a)``, from A's U statistic (the number
    of pairs with ``a > b``, ties counted half): ``1 - 2 U_a / (n_a n_b)``."""
    return 1.0 - 2.0 * u_a / (n_a * n_b)


def compare_samples(a_ms, b_ms, *, alpha: float = ALPHA, min_rel_change: float = MIN_REL_CHANGE,
                    min_cliffs: float = MIN_CLIFFS_DELTA) -> dict[str, Any]:
    """The comparison figures and verdict for two latency samples (ms)."""
    import numpy as np

    from edgeprof.profilers.measure.stats import median_ci

    try:
        a = np.asarray(a_ms, dtype=np.float64)
        b = np.asarray(b_ms, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise UserError(f"latency samples must be numbers of ms ({e})") from None
    bad = int((~np.isfinite(a)).sum() + (~np.isfinite(b)).sum())
    if bad:  # a NaN compares false with everything: the test would say "no change"
        raise UserError(f"{bad} latency samples are not finite numbers (NaN or inf); "
                        "nothing can be concluded from them")
    ma, mb = float(np.median(a)), float(np.median(b))
    u_a, p = mann_whitney(a, b)
    delta = cliffs_delta_from_u(u_a, a.size, b.size)
    rel = (mb - ma) / ma if ma > 0 else math.inf
    ci_a, ci_b = median_ci(a), median_ci(b)
    overlap = None
    if ci_a and ci_b:
        overlap = not (ci_a[1] < ci_b[0] or ci_b[1] < ci_a[0])
    significant = bool(p < alpha and abs(rel) >= min_rel_change and abs(delta) >= min_cliffs)
    verdict = ("slower" if mb > ma else "faster") if significant else "no significant change"
    return {"median_a_ms": ma, "median_b_ms": mb, "delta_ms": mb - ma,
            "delta_pct": 100.0 * rel if math.isfinite(rel) else None, "p_value": p,
            "cliffs_delta": delta, "ci_a_ms": list(ci_a) if ci_a else None,
            "ci_b_ms": list(ci_b) if ci_b else None, "ci_overlap": overlap,
            "n_a": int(a.size), "n_b": int(b.size), "significant": significant,
            "verdict": verdict}


def compare_results(a: dict[str, Any], b: dict[str, Any], *, alpha: float = ALPHA,
                    min_rel_change: float = MIN_REL_CHANGE,
                    min_cliffs: float = MIN_CLIFFS_DELTA,
                    force: bool = False) -> list[Comparison]:
    """Compare two profile.json documents (dicts); one row per (backend, precision).

    Profiles of a different model, target or input shape raise :class:`ConfigError`;
    ``force=True`` compares them anyway and notes the difference on every row."""
    check_profile(a, "first profile")
    check_profile(b, "second profile")
    differ = profile_differences(a, b)
    if differ and not force:
        raise ConfigError("the profiles measured different things (" + "; ".join(differ)
                          + "); a change between them is not a speed-up or a slow-down. "
                          "Compare profiles of one model, target and input shape, or pass "
                          "--force to compare anyway")
    forced = ["NOT LIKE FOR LIKE (forced): " + "; ".join(differ)] if differ else []
    ia, ib = _index(a), _index(b)
    rows: list[Comparison] = []
    for key in list(ia) + [k for k in ib if k not in ia]:
        backend, precision = key
        ra, rb = ia.get(key), ib.get(key)
        if ra is None or rb is None:
            side = "only_in_b" if ra is None else "only_in_a"
            rows.append(Comparison(backend, precision, side, "not compared",
                                   reason=f"run only in {'B' if ra is None else 'A'}"))
            continue
        sa, sb = _stats(ra), _stats(rb)
        samples_a = (sa or {}).get("samples_ms") or []
        samples_b = (sb or {}).get("samples_ms") or []
        if len(samples_a) < 2 or len(samples_b) < 2:
            why = []
            for label, run, s in (("A", ra, samples_a), ("B", rb, samples_b)):
                if len(s) < 2:
                    status = run.get("status") or (run.get("benchmark") or {}).get("status")
                    reason = run.get("reason") or (run.get("benchmark") or {}).get("reason")
                    why.append(f"{label}: " + (f"{status}" + (f" ({reason})" if reason else "")
                                               if status and status != "ok"
                                               else "no latency samples"))
            rows.append(Comparison(backend, precision, "no_samples", "not compared",
                                   reason="; ".join(why)))
            continue
        figures = compare_samples(samples_a, samples_b, alpha=alpha,
                                  min_rel_change=min_rel_change, min_cliffs=min_cliffs)
        row = Comparison(backend, precision, "compared", **figures)
        ka, kb = (sa or {}).get("block_size", 1), (sb or {}).get("block_size", 1)
        if ka != kb:
            row.notes.append(f"samples are block means of {ka} (A) and {kb} (B) calls")
        rows.append(row)
    for row in rows:
        row.notes[:0] = forced
    return rows


# --------------------------------------------------------------------------- text
def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def format_comparison(rows: list[Comparison], label_a: str = "A", label_b: str = "B") -> str:
    """A plain-text table for the terminal (no colour, no rich)."""
    header = ["backend", "precision", f"{label_a} median ms", f"{label_b} median ms",
              "change", "p", "cliff's d", "verdict"]
    body = []
    for r in rows:
        change = "-" if r.delta_pct is None else f"{r.delta_pct:+.1f}%"
        verdict = r.verdict if r.status == "compared" else f"{r.verdict}: {r.reason}"
        if any(n.startswith("NOT LIKE FOR LIKE") for n in r.notes):
            verdict += " (NOT LIKE FOR LIKE)"
        body.append([r.backend, r.precision, _fmt(r.median_a_ms), _fmt(r.median_b_ms), change,
                     "-" if r.p_value is None else f"{r.p_value:.2g}",
                     "-" if r.cliffs_delta is None else f"{r.cliffs_delta:+.2f}", verdict])
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    lines.append(f"significant = Mann-Whitney p < {ALPHA:g}, |change| >= "
                 f"{MIN_REL_CHANGE:.0%} and |cliff's d| >= {MIN_CLIFFS_DELTA:g}")
    return "\n".join(lines)


__all__ = ["ALPHA", "MIN_CLIFFS_DELTA", "MIN_REL_CHANGE", "SCHEMA_MAJORS", "Comparison",
           "check_profile", "cliffs_delta_from_u", "compare_results", "compare_samples",
           "format_comparison", "load_profile", "mann_whitney", "profile_differences"]

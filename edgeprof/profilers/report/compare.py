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
are; a note says when the two sides used different block sizes, and when either side's
measurement saw the machine change speed (the harness's ``speed_drift`` warning): on a shared
machine two runs minutes apart can differ by that much with nothing changed.

The inputs are checked before anything is compared (:class:`ConfigError`, exit 2):

* a ``schema_version`` whose major version this edgeprof does not read;
* latency samples that are not finite non-negative numbers (a NaN, a string): edgeprof never
  writes them, so the file is damaged or not edgeprof's;
* profiles of a different model (name, format), target or input shapes/dtypes
  (:func:`profile_differences`): a speed-up between two different things means nothing.
  ``force=True`` compares anyway, and every row carries a note saying what differs.
* a tensor profile and a generative one (``kind`` "llm"): they measure different things.

**Generative profiles** (``edgeprof profile llm:NAME``) are compared the same way, run by run
matched by ``(backend, format, depth)``, each of four figures in its own row
(:class:`GenerativeComparison`): prefill and decode tokens/s, time to first token and time per
output token. The samples are one value per timed repetition
(:meth:`edgeprof.profilers.report.generative.GenerativeRun.samples`), and the same three
conditions decide; for the rates higher is faster (B's larger tokens/s is "faster"), for the
times lower is. When the repetitions are too few for the U test ever to reach ``p < alpha``
(:func:`min_p_value`: 2 and 2 give 0.33; 4 and 4 are the fewest at 0.05) the medians are given
without a verdict. Generative profiles of a different model, file format, target, device,
prompt or generated length are refused like tensor ones (``force``); a different thread
count or runtime build is noted on the row.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from edgeprof.core.errors import ConfigError, UserError
from edgeprof.profilers.report.generative import STAGE_FIGURES, GenerativeRun, is_generative

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


@dataclass
class GenerativeComparison:
    """One (backend, format, depth) and figure of two generative profiles. ``figure`` is one
    of ``prefill_tokens_per_s``, ``decode_tokens_per_s``, ``ttft_ms``, ``tpot_ms`` (None on a
    row that stands for the whole run: only in one profile, or no samples); values in
    ``unit``, delta = B - A. ``higher_is_better``: True for the rates, so a significant rise
    is "faster"; for the times a significant rise is "slower"."""

    backend: str
    format: str
    depth: int
    figure: str | None
    status: str  # compared | only_in_a | only_in_b | no_samples | too_few_samples
    verdict: str  # faster | slower | no significant change | not compared
    unit: str | None = None
    higher_is_better: bool | None = None
    significant: bool | None = None
    median_a: float | None = None
    median_b: float | None = None
    delta: float | None = None
    delta_pct: float | None = None  # 100 * (B - A) / A
    p_value: float | None = None
    cliffs_delta: float | None = None  # > 0: B's values tend to be larger
    ci_a: list[float] | None = None
    ci_b: list[float] | None = None
    ci_overlap: bool | None = None
    n_a: int | None = None
    n_b: int | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    kind: str = "generative"

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
    that are finite non-negative numbers (a generative profile: its raw repetition times
    finite positive seconds)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise ConfigError("not an edgeprof profile.json (no 'runs' list); give a file written "
                          "by 'edgeprof profile'", path=where)
    if is_generative(doc):
        _check_generative(doc, where)
        return
    _check_version(doc, where)
    for i, run in enumerate(doc["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("backend"), str):
            raise ConfigError(f"run {i} has no 'backend' name; is this an edgeprof "
                              "profile.json?", path=where, field=f"runs[{i}]")
        _check_numbers((_stats(run) or {}).get("samples_ms"), where, i, run, "latency",
                       "benchmark.stats.samples_ms", "ms")


def _check_numbers(values: Any, where: Any, i: int, run: dict[str, Any], what: str,
                   name: str, unit: str, positive: bool = False) -> None:
    """ConfigError unless ``values`` (samples of run ``i`` at ``runs[i].name``) is None or a
    list of finite numbers ``>= 0`` (``> 0`` when ``positive``)."""
    if values is None:
        return
    if not isinstance(values, list):
        raise ConfigError(f"{name.rsplit('.', 1)[-1]} of run {i} ({run['backend']}) is a "
                          f"{type(values).__name__}, not a list of {unit}; the file is "
                          "damaged or not written by edgeprof", path=where,
                          field=f"runs[{i}].{name}")
    for j, v in enumerate(values):
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              and (v > 0 if positive else v >= 0))
        if not ok:
            raise ConfigError(f"{what} sample {j} of run {i} ({run['backend']}) is {v!r}, not "
                              f"a finite {'positive ' if positive else ''}number of {unit}; the "
                              "file is damaged or not written by edgeprof", path=where,
                              field=f"runs[{i}].{name}")


def _check_version(doc: dict[str, Any], where: Any) -> None:
    if "schema_version" in doc:
        version = doc["schema_version"]
        if _schema_major(version) not in SCHEMA_MAJORS:
            raise ConfigError(f"schema_version {version!r} is not one this edgeprof reads "
                              f"({', '.join(f'{m}.x' for m in SCHEMA_MAJORS)}); compare it with "
                              "the edgeprof version that wrote it", path=where,
                              field="schema_version")


def _check_generative(doc: dict[str, Any], where: Any) -> None:
    """A generative profile: a known schema (``edgeprof.llm/N``) and ``schema_version``,
    runs with a backend and format, raw repetition times that are finite positive seconds."""
    schema = doc.get("schema")
    if schema is not None:
        major = _schema_major(str(schema).rsplit("/", 1)[-1]) if isinstance(schema, str) \
            else None
        if major not in SCHEMA_MAJORS:
            raise ConfigError(f"schema {schema!r} is not one this edgeprof reads "
                              f"({', '.join(f'edgeprof.llm/{m}' for m in SCHEMA_MAJORS)}); "
                              "compare it with the edgeprof version that wrote it", path=where,
                              field="schema")
    _check_version(doc, where)
    for i, run in enumerate(doc["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("backend"), str) \
                or not isinstance(run.get("format"), str):
            raise ConfigError(f"run {i} has no 'backend' and 'format'; is this an edgeprof "
                              "profile.json?", path=where, field=f"runs[{i}]")
        samples = run.get("samples")
        if samples is None:
            continue
        if not isinstance(samples, dict):
            raise ConfigError(f"samples of run {i} ({run['backend']}) is a "
                              f"{type(samples).__name__}, not a dict of lists of seconds; the "
                              "file is damaged or not written by edgeprof", path=where,
                              field=f"runs[{i}].samples")
        for name, values in samples.items():
            _check_numbers(values, where, i, run, name, f"samples.{name}", "seconds",
                           positive=True)


def profile_kind(doc: Any) -> str:
    """``"generative"`` for a generative profile (``kind`` "llm"), else ``"tensor"``."""
    return "generative" if is_generative(doc) else "tensor"


def _what(doc: dict[str, Any]) -> str:
    name = _identity(doc).get("model name")
    return f"{profile_kind(doc)} profile" + (f" of {name}" if name else "")


def check_same_kind(a: dict[str, Any], b: dict[str, Any]) -> None:
    """ConfigError (exit 2) when one profile is a tensor one and the other a generative one."""
    if profile_kind(a) != profile_kind(b):
        raise ConfigError(f"A is a {_what(a)} and B a {_what(b)}: a tensor latency and "
                          "generative tokens/s measure different things; compare two tensor "
                          "profiles or two generative ones")


def _identity(doc: dict[str, Any]) -> dict[str, Any]:
    """What a profile measured (only what the document says): model name and format, target,
    and input shapes and dtypes; for a generative one model name and file format, target,
    device, prompt and generated tokens."""
    out: dict[str, Any] = {}
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    if is_generative(doc):
        spec = model.get("spec") if isinstance(model.get("spec"), dict) else {}
        config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
        out = {k: v for k, v in (("model name", spec.get("name")),
                                 ("model file format", model.get("file_format")),
                                 ("device", doc.get("device")),
                                 ("prompt tokens", config.get("prompt_tokens")),
                                 ("generated tokens", config.get("gen_tokens")))
               if v is not None}
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


def _drifted(run: dict[str, Any]) -> bool:
    """The run's measurement saw the machine change speed (the harness's ``speed_drift``)."""
    bench = run.get("benchmark") if isinstance(run.get("benchmark"), dict) else run
    return any(isinstance(w, dict) and w.get("code") == "speed_drift"
               for w in bench.get("warnings") or ())


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
                    force: bool = False) -> list[Comparison] | list[GenerativeComparison]:
    """Compare two profile.json documents (dicts); one row per (backend, precision), or for
    two generative profiles (:func:`compare_generative`) one per (backend, format, depth)
    and figure.

    Profiles of a different model, target or input shape raise :class:`ConfigError`;
    ``force=True`` compares them anyway and notes the difference on every row. A tensor
    profile and a generative one raise :class:`ConfigError`, forced or not."""
    check_profile(a, "first profile")
    check_profile(b, "second profile")
    check_same_kind(a, b)
    if is_generative(a):
        return compare_generative(a, b, alpha=alpha, min_rel_change=min_rel_change,
                                  min_cliffs=min_cliffs, force=force)
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
        drifted = [label for label, run in (("A", ra), ("B", rb)) if _drifted(run)]
        if drifted:
            row.notes.append(f"{' and '.join(drifted)}: the machine changed speed during the "
                             "measurement (speed_drift): part of a difference may be the "
                             "machine's moment, not the change; rerun both on a quiet machine")
        rows.append(row)
    for row in rows:
        row.notes[:0] = forced
    return rows


# ------------------------------------------------------------------------ generative
#: what the generative table calls each figure
FIGURE_LABELS = {"prefill_tokens_per_s": "prefill tok/s", "decode_tokens_per_s": "decode tok/s",
                 "ttft_ms": "TTFT ms", "tpot_ms": "TPOT ms"}


def _run_notes(ra: GenerativeRun, rb: GenerativeRun) -> list[str]:
    notes = []
    for label, va, vb in (("threads", ra.n_threads, rb.n_threads),
                          ("runtime", ra.record.runtime_version, rb.record.runtime_version)):
        if va and vb and va != vb:
            notes.append(f"{label} {va} (A) vs {vb} (B)")
    return notes


def _no_samples_reason(label: str, run: GenerativeRun) -> str:
    if not run.ok:
        return f"{label}: {run.status}" + (f" ({run.reason})" if run.reason else "")
    n = len(run.samples("decode_tokens_per_s"))
    if n == 0:
        return f"{label}: no per-repetition samples"
    return f"{label}: {n} repetition (a verdict needs {_enough(ALPHA)} or more)"


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the exact Mann-Whitney U test can give for samples of
    ``n_a`` and ``n_b`` (all of one side below all of the other): ``2 / C(n_a + n_b, n_a)``.
    With 2 and 2 repetitions it is 0.33: no difference could ever be significant."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a)) if n_a and n_b else 1.0


def _enough(alpha: float) -> int:
    return next((n for n in range(2, 64) if min_p_value(n, n) < alpha), 64)


def compare_generative(a: dict[str, Any], b: dict[str, Any], *, alpha: float = ALPHA,
                       min_rel_change: float = MIN_REL_CHANGE,
                       min_cliffs: float = MIN_CLIFFS_DELTA,
                       force: bool = False) -> list[GenerativeComparison]:
    """Compare two generative profile.json documents: for each (backend, format, depth)
    measured in both, one row per figure (prefill and decode tokens/s, TTFT, TPOT) with the
    tensor compare's statistics over the per-repetition samples. A run in one profile only,
    not ``ok`` or with one repetition gives one row without a verdict and the reason; too few
    repetitions for any verdict (:func:`min_p_value`) give the medians and no verdict.

    ConfigError when a profile holds no runs (an estimate), or, unless ``force``, when the
    profiles measured a different model, target or test shape."""
    for label, doc in (("A", a), ("B", b)):
        if not doc.get("runs"):
            raise ConfigError(f"{label} holds no measured runs (written by 'edgeprof "
                              f"{doc.get('command') or 'estimate'}'); compare two profiles "
                              "written by 'edgeprof profile llm:NAME'")
    differ = profile_differences(a, b)
    if differ and not force:
        raise ConfigError("the profiles measured different things (" + "; ".join(differ)
                          + "); a change between them is not a speed-up or a slow-down. "
                          "Compare profiles of one model, target and test shape, or pass "
                          "--force to compare anyway")
    forced = ["NOT LIKE FOR LIKE (forced): " + "; ".join(differ)] if differ else []
    ia: dict[tuple[str, str, int], GenerativeRun] = {}
    ib: dict[tuple[str, str, int], GenerativeRun] = {}
    for doc, index in ((a, ia), (b, ib)):
        for d in doc["runs"]:
            run = GenerativeRun.from_dict(d)
            index.setdefault(run.key, run)
    rows: list[GenerativeComparison] = []
    for key in list(ia) + [k for k in ib if k not in ia]:
        ra, rb = ia.get(key), ib.get(key)
        if ra is None or rb is None:
            side = "only_in_b" if ra is None else "only_in_a"
            rows.append(GenerativeComparison(*key, None, side, "not compared",
                                             reason=f"run only in {'B' if ra is None else 'A'}"))
            continue
        notes = _run_notes(ra, rb)
        short = [_no_samples_reason(label, r) for label, r in (("A", ra), ("B", rb))
                 if not r.ok or len(r.samples("decode_tokens_per_s")) < 2]
        if short:
            rows.append(GenerativeComparison(*key, None, "no_samples", "not compared",
                                             reason="; ".join(short), notes=notes))
            continue
        n_a, n_b = len(ra.samples("ttft_ms")), len(rb.samples("ttft_ms"))
        few = min_p_value(n_a, n_b) >= alpha
        for name, (unit, higher) in STAGE_FIGURES.items():
            f = compare_samples(ra.samples(name), rb.samples(name), alpha=alpha,
                                min_rel_change=min_rel_change, min_cliffs=min_cliffs)
            status, verdict, reason = "compared", f["verdict"], None
            if few:  # "no significant change" would be a verdict the test could not give
                status, verdict, f["significant"] = "too_few_samples", "not compared", None
                reason = (f"{n_a} and {n_b} repetitions: no difference can reach p < "
                          f"{alpha:g}; profile with --repetitions {_enough(alpha)} or more")
            elif f["significant"] and higher:  # a larger rate is faster
                verdict = "faster" if f["median_b_ms"] > f["median_a_ms"] else "slower"
            rows.append(GenerativeComparison(
                *key, name, status, verdict, reason=reason, unit=unit, higher_is_better=higher,
                significant=f["significant"], median_a=f["median_a_ms"],
                median_b=f["median_b_ms"], delta=f["delta_ms"], delta_pct=f["delta_pct"],
                p_value=f["p_value"], cliffs_delta=f["cliffs_delta"], ci_a=f["ci_a_ms"],
                ci_b=f["ci_b_ms"], ci_overlap=f["ci_overlap"], n_a=f["n_a"], n_b=f["n_b"],
                notes=list(notes)))
    for row in rows:
        row.notes[:0] = forced
    return rows


# --------------------------------------------------------------------------- text
def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    return lines


def _verdict_cell(r: Any) -> str:
    verdict = r.verdict if r.status == "compared" else f"{r.verdict}: {r.reason}"
    if any(n.startswith("NOT LIKE FOR LIKE") for n in r.notes):
        verdict += " (NOT LIKE FOR LIKE)"
    return verdict


def format_generative_comparison(rows: list[GenerativeComparison], label_a: str = "A",
                                 label_b: str = "B") -> str:
    """The generative comparison as a plain-text table: one line per run and figure."""
    header = ["backend", "format", "depth", "figure", f"{label_a} median", f"{label_b} median",
              "change", "p", "cliff's d", "verdict"]
    body = []
    for r in rows:
        first = r.figure in (None, "prefill_tokens_per_s")  # a run's first line
        verdict = _verdict_cell(r if first or r.status != "too_few_samples"
                                else replace(r, reason="too few repetitions"))
        extra = [n for n in r.notes if not n.startswith("NOT LIKE FOR LIKE")]
        if extra and first:
            verdict += f" [{'; '.join(extra)}]"
        body.append([r.backend, r.format, str(r.depth),
                     FIGURE_LABELS.get(r.figure or "", "-"), _fmt(r.median_a),
                     _fmt(r.median_b),
                     "-" if r.delta_pct is None else f"{r.delta_pct:+.1f}%",
                     "-" if r.p_value is None else f"{r.p_value:.2g}",
                     "-" if r.cliffs_delta is None else f"{r.cliffs_delta:+.2f}", verdict])
    lines = _table(header, body)
    lines.append("samples: one per timed repetition; tok/s: higher is faster, ms: lower is "
                 "faster; cliff's d > 0: B's values tend to be larger")
    lines.append(f"significant = Mann-Whitney p < {ALPHA:g}, |change| >= "
                 f"{MIN_REL_CHANGE:.0%} and |cliff's d| >= {MIN_CLIFFS_DELTA:g}")
    return "\n".join(lines)


def format_comparison(rows: list[Comparison] | list[GenerativeComparison], label_a: str = "A",
                      label_b: str = "B") -> str:
    """A plain-text table for the terminal (no colour, no rich); generative rows get
    :func:`format_generative_comparison`'s table."""
    if rows and all(isinstance(r, GenerativeComparison) for r in rows):
        return format_generative_comparison(rows, label_a, label_b)  # type: ignore[arg-type]
    header = ["backend", "precision", f"{label_a} median ms", f"{label_b} median ms",
              "change", "p", "cliff's d", "verdict"]
    body = []
    for r in rows:
        change = "-" if r.delta_pct is None else f"{r.delta_pct:+.1f}%"
        body.append([r.backend, r.precision, _fmt(r.median_a_ms), _fmt(r.median_b_ms), change,
                     "-" if r.p_value is None else f"{r.p_value:.2g}",
                     "-" if r.cliffs_delta is None else f"{r.cliffs_delta:+.2f}",
                     _verdict_cell(r)])
    lines = _table(header, body)
    lines.append(f"significant = Mann-Whitney p < {ALPHA:g}, |change| >= "
                 f"{MIN_REL_CHANGE:.0%} and |cliff's d| >= {MIN_CLIFFS_DELTA:g}")
    return "\n".join(lines)


__all__ = ["ALPHA", "FIGURE_LABELS", "MIN_CLIFFS_DELTA", "MIN_REL_CHANGE", "SCHEMA_MAJORS",
           "Comparison", "GenerativeComparison", "check_profile", "check_same_kind",
           "cliffs_delta_from_u", "compare_generative", "compare_results", "compare_samples",
           "format_comparison", "format_generative_comparison", "load_profile",
           "mann_whitney", "min_p_value", "profile_differences", "profile_kind"]

"""Two generative profiles compared (:func:`compare_generative`): per (backend, format,
depth) one :class:`~edgeprof.profilers.report.compare_stats.GenerativeComparison` row for each
of prefill and decode tokens/s, TTFT and TPOT, from the per-repetition samples with the
tensor comparison's statistics; with the checks of one generative document
(:func:`check_document`) and what it measured (:func:`identity`). The ``comparison`` module
of :class:`~edgeprof.profilers.report.generative.GenerativeReport`; part of
:mod:`edgeprof.profilers.report.compare`."""

from __future__ import annotations

from typing import Any

from edgeprof.core.errors import ConfigError
from edgeprof.profilers.report.compare_inputs import (check_major, check_numbers,
                                                      check_runs_name, like_for_like, not_a,
                                                      schema_major)
from edgeprof.profilers.report.compare_stats import (ALPHA, MIN_CLIFFS_DELTA, MIN_REL_CHANGE,
                                                     GenerativeComparison, compare_samples,
                                                     min_p_value, samples_for_significance)
from edgeprof.profilers.report.generative import STAGE_FIGURES, GenerativeRun


def check_document(doc: dict[str, Any], where: Any) -> None:
    """ConfigError unless its ``schema`` (``edgeprof.llm/N``, when given) is one this
    edgeprof reads, every run names its backend and format, and its raw repetition times,
    when it has any, are positive seconds."""
    schema = doc.get("schema")
    if schema is not None:
        check_major(schema_major(schema.rsplit("/", 1)[-1]) if isinstance(schema, str)
                    else None, schema, "schema", "edgeprof.llm/{}", where)
    check_runs_name(doc, ("backend", "format"), where)
    for i, run in enumerate(doc["runs"]):
        samples = run.get("samples")
        if samples is None:
            continue
        if not isinstance(samples, dict):
            not_a(samples, "a dict of lists of seconds", where, i, run, "samples")
        for name, values in samples.items():
            check_numbers(values, where, i, run, name, f"samples.{name}", "seconds",
                          positive=True)


def identity(doc: dict[str, Any]) -> dict[str, Any]:
    """What a generative profile measured beyond every profile's model and target: the
    spec's name, the file format, the device, prompt and generated tokens."""
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    spec = model.get("spec") if isinstance(model.get("spec"), dict) else {}
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    return {k: v for k, v in (("model name", spec.get("name")),
                              ("model file format", model.get("file_format")),
                              ("device", doc.get("device")),
                              ("prompt tokens", config.get("prompt_tokens")),
                              ("generated tokens", config.get("gen_tokens")))
            if v is not None}


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
    return f"{label}: {n} repetition (a verdict needs {samples_for_significance(ALPHA)} or more)"


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
    forced = like_for_like(a, b, force=force, what="model, target and test shape")
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
                          f"{alpha:g}; profile with --repetitions "
                          f"{samples_for_significance(alpha)} or more")
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


#: the name :func:`~edgeprof.profilers.report.compare.compare_results` calls
compare = compare_generative

"""Two tensor profiles compared (:func:`compare`): one
:class:`~edgeprof.profilers.report.compare_stats.Comparison` row per (backend, requested
precision), from the runs' latency samples (``benchmark.stats.samples_ms``); with the
checks of one tensor document (:func:`check_document`) and what it measured
(:func:`identity`). The ``comparison`` module of
:class:`~edgeprof.profilers.report.tensor_report.TensorReport`; part of
:mod:`edgeprof.profilers.report.compare`."""

from __future__ import annotations

from typing import Any

from edgeprof.profilers.report.compare_inputs import check_numbers, check_runs_name, like_for_like
from edgeprof.profilers.report.compare_stats import (ALPHA, MIN_CLIFFS_DELTA, MIN_REL_CHANGE,
                                                     Comparison, compare_samples)


def check_document(doc: dict[str, Any], where: Any) -> None:
    """ConfigError unless every run names its backend and its latency samples, when it has
    any, are finite non-negative ms."""
    check_runs_name(doc, ("backend",), where)
    for i, run in enumerate(doc["runs"]):
        check_numbers((run_stats(run) or {}).get("samples_ms"), where, i, run, "latency",
                      "benchmark.stats.samples_ms", "ms")


def identity(doc: dict[str, Any]) -> dict[str, Any]:
    """Nothing beyond what every profile says it measured (model, input shapes, target)."""
    return {}


def run_stats(run: dict[str, Any]) -> dict[str, Any] | None:
    bench = run.get("benchmark")
    if isinstance(bench, dict) and isinstance(bench.get("stats"), dict):
        return bench["stats"]
    return run.get("stats") if isinstance(run.get("stats"), dict) else None


def _precision(run: dict[str, Any]) -> str:
    bench = run.get("benchmark") or {}
    return str(run.get("requested_precision") or bench.get("requested_precision")
               or run.get("precision") or "fp32")


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


def compare(a: dict[str, Any], b: dict[str, Any], *, alpha: float = ALPHA,
            min_rel_change: float = MIN_REL_CHANGE, min_cliffs: float = MIN_CLIFFS_DELTA,
            force: bool = False) -> list[Comparison]:
    """Two tensor profile.json documents (checked already), one row per (backend,
    precision): see :mod:`edgeprof.profilers.report.compare` for when a change is
    significant."""
    forced = like_for_like(a, b, force=force, what="model, target and input shape")
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
        sa, sb = run_stats(ra), run_stats(rb)
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

"""The generative profile's document as data: its schema name and version, the figure form
(``{"value", "unit", "provenance"}``), finding figures, where each run was measured. Pure
functions of dicts, which the page (:mod:`edgeprof.profilers.report.llm_html`) reads as the
tensor page reads its document; the report itself is
:class:`edgeprof.profilers.report.generative.GenerativeReport`, its files
:mod:`edgeprof.profilers.report.llm_outputs`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCHEMA = "edgeprof.llm/1"
#: the version of the payload's layout (``schema_version``; a 1.x reader reads every 1.y)
SCHEMA_VERSION = "1.0"
#: llama-bench's CSV columns first, then edgeprof's
BENCH_COLUMNS = ["model", "backend", "format", "device", "test", "n_prompt", "n_gen", "n_depth",
                 "avg_ts", "stddev_ts", "median_ts", "model_size", "model_n_params",
                 "n_threads", "build_commit", "status", "provenance", "where",
                 "low_ts", "high_ts", "random_weights"]
FIGURES = ("parameters", "weight_bytes", "kv_cache_bytes_per_token", "decode_bytes_per_token",
           "prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms",
           "max_context_tokens")


def figure(value: Any, unit: str, provenance: str, **extra: Any) -> dict[str, Any]:
    """A figure as every output carries it."""
    return {"value": value, "unit": unit, "provenance": provenance, **extra}


def find_figure(d: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The figure ``name`` of a document's entry where the payload keeps it: an estimate
    under ``figures``, a prediction (and the model's ``parameters``) at the top; a bare
    number becomes ``{"value": n}``."""
    if not d:
        return None
    for holder in (d, d.get("figures")):
        if isinstance(holder, Mapping) and name in holder:
            v = holder[name]
            if isinstance(v, Mapping):
                return dict(v)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return {"value": v}
    return None


def run_place(run: Mapping[str, Any], target_id: str | None) -> tuple[str, bool]:
    """Where a payload's run was measured, in words, and whether that machine is the target
    itself: a real board of ``target_id`` on the fleet (not an emulating worker), whose run
    is then the target's ``measured`` figure, beside which its prediction is only a check."""
    from edgeprof.profilers.measure.llm_runs import on_target

    board = run.get("board") if isinstance(run.get("board"), Mapping) else None
    if not board:
        return "this host", False
    name, of = board.get("board"), board.get("target")
    if board.get("emulating"):
        return ("this host" if name == "local" else f"host of board {name}") + \
            f", emulating {of}", False
    if name in (None, "local"):
        return "this host", False
    return f"board {name} ({of})", on_target(dict(board), target_id)


def payload_target_id(payload: Mapping[str, Any]) -> str | None:
    target = payload.get("target")
    return target.get("id") if isinstance(target, Mapping) else target


def runs_by_place(payload: Mapping[str, Any]) -> dict[str, tuple[bool, list[dict[str, Any]]]]:
    """The payload's ``ok`` runs grouped by where they were measured (:func:`run_place`):
    where -> (whether that is the target itself, the runs)."""
    tid = payload_target_id(payload)
    out: dict[str, tuple[bool, list[dict[str, Any]]]] = {}
    for r in payload.get("runs") or []:
        if isinstance(r, Mapping) and r.get("status") == "ok":
            where, on_target = run_place(r, tid)
            out.setdefault(where, (on_target, []))[1].append(dict(r))
    return out


def measured_on_target(payload: Mapping[str, Any]) -> dict[tuple[Any, Any, int], str]:
    """(backend, format, depth) -> the board, for each ``ok`` run a real board of the
    payload's target measured: there the target's figure is that measurement, not the
    prediction."""
    return {(r.get("backend"), r.get("format"), int(r.get("n_depth") or 0)): where
            for where, (on_target, runs) in runs_by_place(payload).items() if on_target
            for r in runs}


__all__ = ["SCHEMA", "SCHEMA_VERSION", "BENCH_COLUMNS", "FIGURES", "figure", "find_figure",
           "run_place", "payload_target_id", "runs_by_place", "measured_on_target"]

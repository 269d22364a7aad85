"""The generative profile's payload as data: its schema name and version, the figure form
(``{"value", "unit", "provenance"}``), finding figures, where each run was measured, and
assembling the payload (:func:`build_payload`). Pure functions of dicts: the files it is
written to are :mod:`edgeprof.profilers.report.llm_outputs`'s, the page
:mod:`edgeprof.profilers.report.llm_html`'s, its typed form
:class:`edgeprof.profilers.report.generative.GenerativeReport`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from edgeprof.core.artifact import created_utc
from edgeprof.core.llm import GenerationConfig, GenerationRecord, LLMModel
from edgeprof.core.results import clean

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
    if on_target(dict(board), target_id):
        return f"board {name} ({of})", True
    return f"board {name} ({of})", False


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


def build_payload(model: LLMModel, *, target: Any = None, device: str = "cpu",
                  config: GenerationConfig | None = None, parameters: int | None = None,
                  estimates: Sequence[Mapping[str, Any]] = (),
                  predictions: Sequence[Mapping[str, Any]] = (),
                  runs: Iterable[GenerationRecord | Mapping[str, Any]] = (),
                  recommendation: Any = None, notes: Iterable[str] = (),
                  command: str = "profile", host: Mapping[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The LLM JSON payload (the shape docs and the HTML report read)."""
    from edgeprof._version import __version__
    from edgeprof.core.invocation import command as invocation_command

    m = model.to_dict()
    m["parameters"] = figure(parameters, "parameters", "analytic")
    if recommendation is not None and hasattr(recommendation, "to_dict"):
        recommendation = recommendation.to_dict()
    return clean({
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "kind": "llm", "command": command,
        # the CLI command that ran, as typed (None from Python): the page's Reproduce line
        "command_line": invocation_command(),
        "edgeprof_version": __version__,
        "created_utc": created_utc(),
        "model": m,
        "target": target.to_dict() if hasattr(target, "to_dict") else target,
        "device": device,
        "config": config.to_dict() if config is not None else None,
        "host": dict(host) if host else None,
        "estimates": [dict(e) for e in estimates],
        "predictions": [dict(p) for p in predictions],
        "runs": [r.to_dict() if isinstance(r, GenerationRecord) else dict(r) for r in runs],
        "recommendation": recommendation,
        "notes": list(dict.fromkeys(n for n in notes if n)),
    })


__all__ = ["SCHEMA", "SCHEMA_VERSION", "BENCH_COLUMNS", "FIGURES", "figure", "find_figure",
           "run_place", "payload_target_id", "runs_by_place", "measured_on_target",
           "build_payload"]

"""What a generative profile or estimate writes: the JSON payload (``profile.json``, schema
``edgeprof.llm/1``, ``schema_version`` :data:`SCHEMA_VERSION`, described by
``edgeprof/schema/llm_profile.schema.json``; its typed form is
:class:`edgeprof.profilers.report.generative.GenerativeReport`), ``llm_bench.csv`` in
llama-bench's columns, ``estimate.csv`` (one row per layer and stage of each estimate) and
``report.html`` (when the HTML renderer is there).

Every figure in the payload is ``{"value", "unit", "provenance"}``; a measured run keeps its
:class:`~edgeprof.core.llm.GenerationRecord` form (provenance ``measured``). Nothing here
computes a figure: estimates and predictions come in as their dicts.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

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
    """The figure ``name`` of an estimate or prediction dict, wherever it keeps it (at the
    top, under ``figures`` or ``totals``); a bare number becomes ``{"value": n}``."""
    if not d:
        return None
    for holder in (d, d.get("figures"), d.get("totals"), d.get("decode"), d.get("prefill")):
        if isinstance(holder, Mapping) and name in holder:
            v = holder[name]
            if isinstance(v, Mapping):
                return dict(v)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return {"value": v}
    return None


def figure_value(d: Mapping[str, Any] | None, name: str) -> Any:
    f = find_figure(d, name)
    return None if f is None else f.get("value")


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

    m = model.to_dict()
    m["parameters"] = figure(parameters, "parameters", "analytic")
    if recommendation is not None and hasattr(recommendation, "to_dict"):
        recommendation = recommendation.to_dict()
    return clean({
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "kind": "llm", "command": command,
        "edgeprof_version": __version__,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
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


# ------------------------------------------------------------------------------ tables
def bench_frame(payload: Mapping[str, Any]):
    """llama-bench's rows (``pp``/``tg`` per run), measured where ``where`` says (this host, or
    a board of the fleet: :func:`run_place`); then the target's
    predicted rows (provenance ``predicted``/``estimated``, ``where`` the target; their
    ``model_size`` is the estimate's file or weight bytes, analytic)."""
    import pandas as pd

    rows = []
    random_weights = bool((payload.get("model") or {}).get("random_weights", True))
    tid = payload_target_id(payload)
    for d in payload.get("runs") or []:
        rec = GenerationRecord.from_dict(d)
        where = run_place(d, tid)[0]
        for row in rec.bench_rows():
            rows.append({**row, "where": where, "random_weights": rec.random_weights})
    config = payload.get("config") or {}
    sizes = {(e.get("backend"), e.get("format"), e.get("depth", 0)):
             figure_value(e, "file_bytes") or figure_value(e, "weight_bytes")
             for e in payload.get("estimates") or []}
    for p in payload.get("predictions") or []:
        for test, name, n_prompt, n_gen in (
                ("pp", "prefill_tokens_per_s", config.get("prompt_tokens"), 0),
                ("tg", "decode_tokens_per_s", 0, config.get("gen_tokens"))):
            f = find_figure(p, name)
            if f is None or f.get("value") is None:
                continue
            rows.append({"model": (payload.get("model") or {}).get("spec", {}).get("name"),
                         "backend": p.get("backend"), "format": p.get("format"),
                         "device": p.get("device"), "test": f"{test}{n_prompt or n_gen}",
                         "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": p.get("depth", 0),
                         "avg_ts": f.get("value"), "stddev_ts": None, "median_ts": None,
                         "model_size": sizes.get((p.get("backend"), p.get("format"),
                                                  p.get("depth", 0))),
                         "model_n_params": figure_value(payload.get("model"), "parameters"),
                         "n_threads": None, "build_commit": "", "status": "ok",
                         "provenance": f.get("provenance", "predicted"),
                         "where": p.get("target"), "low_ts": f.get("low"),
                         "high_ts": f.get("high"), "random_weights": random_weights})
    frame = pd.DataFrame(rows, columns=BENCH_COLUMNS)
    for col in ("n_prompt", "n_gen", "n_depth", "model_size", "model_n_params", "n_threads"):
        frame[col] = frame[col].astype("Int64")  # integers, empty where not known
    return frame


def estimate_frame(payload: Mapping[str, Any]):
    """One row per layer (and stage) of every estimate, labelled with its backend, format
    and depth; an estimate without per-layer rows gives one row of its figures."""
    import pandas as pd

    rows = []
    random_weights = bool((payload.get("model") or {}).get("random_weights", True))
    for e in payload.get("estimates") or []:
        label = {**{k: e.get(k) for k in ("backend", "format", "depth")},
                 "random_weights": random_weights}
        layers = e.get("layers")
        if isinstance(layers, list) and layers:
            rows.extend({**label, **_flat(layer)} for layer in layers if isinstance(layer, Mapping))
            continue
        rows.append({**label, **{n: figure_value(e, n) for n in FIGURES}})
    return pd.DataFrame(rows)


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            if set(v) >= {"value", "unit"}:
                out[key] = v.get("value")
            else:
                out.update(_flat(v, f"{key}."))
        elif isinstance(v, (list, tuple)):
            out[key] = ",".join(map(str, v))
        else:
            out[key] = v
    return out


# ------------------------------------------------------------------------------ writing
def write_llm_outputs(out_dir: str | os.PathLike, payload: dict[str, Any]) -> list[Path]:
    """Replace ``out_dir`` as a whole (core.io.publish_staged) with profile.json,
    llm_bench.csv, estimate.csv and report.html."""
    from edgeprof.core.io import publish_staged, write_csv, write_json
    from edgeprof.profilers.report.llm_html import write_llm_html

    def write(stage: Path) -> list[str]:
        write_json(stage / "profile.json", payload)
        write_csv(stage / "llm_bench.csv", bench_frame(payload))
        write_csv(stage / "estimate.csv", estimate_frame(payload))
        write_llm_html(stage / "report.html", payload)
        return ["profile.json", "llm_bench.csv", "estimate.csv", "report.html"]

    return publish_staged(out_dir, write)


__all__ = ["BENCH_COLUMNS", "FIGURES", "SCHEMA", "SCHEMA_VERSION", "bench_frame",
           "build_payload", "estimate_frame", "figure", "figure_value", "find_figure",
           "measured_on_target", "payload_target_id", "run_place", "runs_by_place",
           "write_llm_outputs"]

"""What a generative profile or estimate writes: the JSON payload (``profile.json``, schema
``edgeprof.llm/1``, ``schema_version`` :data:`SCHEMA_VERSION`, validated by the generative
branch of ``edgeprof/schema/profile.schema.json``; its typed form is
:class:`edgeprof.profilers.report.generative.GenerativeReport`), ``llm_bench.csv`` in
llama-bench's columns, ``estimate.csv`` (one row per layer and stage of each estimate) and
``report.html`` (when the HTML renderer is there).

Every figure in the payload is ``{"value", "unit", "provenance"}``; a measured run keeps its
:class:`~edgeprof.core.llm.GenerationRecord` form (provenance ``measured``). Nothing here
computes a figure: estimates and predictions come in as their dicts. The payload as data (its
form, finding figures, where runs were measured) is :mod:`~edgeprof.profilers.report.llm_payload`
(re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgeprof.core.llm import GenerationRecord
from edgeprof.profilers.report.llm_payload import (  # noqa: F401 - re-exported
    BENCH_COLUMNS, FIGURES, SCHEMA, SCHEMA_VERSION, build_payload, figure, figure_value,
    find_figure, measured_on_target, payload_target_id, run_place, runs_by_place)


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

"""What a generative profile or estimate writes: the JSON payload (``profile.json``, schema
``edgeprof.llm/1``, ``schema_version`` :data:`SCHEMA_VERSION`, validated by the generative
branch of ``edgeprof/schema/profile.schema.json``; its typed form is
:class:`edgeprof.profilers.report.generative.GenerativeReport`), ``llm_bench.csv`` in
llama-bench's columns, ``estimate.csv`` (one row per layer and stage of each estimate) and
``report.html`` (when the HTML renderer is there).

Every figure in the payload is ``{"value", "unit", "provenance"}``; a measured run keeps its
:class:`~edgeprof.core.llm.GenerationRecord` form (provenance ``measured``). Nothing here
computes a figure: the tables read the typed report, the page its document. The payload as
data (its form, finding figures, where runs were measured) is
:mod:`~edgeprof.profilers.report.llm_payload`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgeprof.profilers.report.llm_payload import BENCH_COLUMNS, FIGURES


# ------------------------------------------------------------------------------ tables
def bench_frame(report):
    """llama-bench's rows (``pp``/``tg`` per run) of a
    :class:`~edgeprof.profilers.report.generative.GenerativeReport`, measured where ``where``
    says (this host, or a board of the fleet:
    :func:`~edgeprof.profilers.report.llm_payload.run_place`); then the target's
    predicted rows (provenance ``predicted``/``estimated``, ``where`` the target; their
    ``model_size`` is the estimate's file or weight bytes, analytic)."""
    import pandas as pd

    rows = []
    random_weights = bool(report.model.get("random_weights", True))
    tid = report.target_id
    for run in report.runs:
        where = run.place(tid)[0]
        for row in run.record.bench_rows():
            rows.append({**row, "where": where, "random_weights": run.record.random_weights})
    config = report.config or {}
    sizes = {e.key: _value(e.file_bytes) or _value(e.weight_bytes) for e in report.estimates}
    params = report.parameters
    for p in report.predictions:
        for test, name, n_prompt, n_gen in (
                ("pp", "prefill_tokens_per_s", config.get("prompt_tokens"), 0),
                ("tg", "decode_tokens_per_s", 0, config.get("gen_tokens"))):
            f = p.figure(name)
            if f is None or f.value is None:
                continue
            rows.append({"model": report.model_name, "backend": p.backend, "format": p.format,
                         "device": p.device, "test": f"{test}{n_prompt or n_gen}",
                         "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": p.depth,
                         "avg_ts": f.value, "stddev_ts": None, "median_ts": None,
                         "model_size": sizes.get(p.key),
                         "model_n_params": _value(params),
                         "n_threads": None, "build_commit": "", "status": "ok",
                         "provenance": f.provenance or "predicted",
                         "where": p.target, "low_ts": f.low, "high_ts": f.high,
                         "random_weights": random_weights})
    frame = pd.DataFrame(rows, columns=BENCH_COLUMNS)
    for col in ("n_prompt", "n_gen", "n_depth", "model_size", "model_n_params", "n_threads"):
        frame[col] = frame[col].astype("Int64")  # integers, empty where not known
    return frame


def estimate_frame(report):
    """One row per layer (and stage) of every estimate of a
    :class:`~edgeprof.profilers.report.generative.GenerativeReport`, labelled with its
    backend, format and depth; an estimate without per-layer rows gives one row of its
    figures."""
    import pandas as pd

    rows = []
    random_weights = bool(report.model.get("random_weights", True))
    for e in report.estimates:
        label = {**{k: e.data.get(k) for k in ("backend", "format", "depth")},
                 "random_weights": random_weights}
        layers = [layer for layer in e.layers if isinstance(layer, Mapping)]
        if layers:
            rows.extend({**label, **_flat(layer)} for layer in layers)
            continue
        rows.append({**label, **{n: _value(e.figure(n)) for n in FIGURES}})
    return pd.DataFrame(rows)


def _value(f: Any) -> Any:
    """A typed figure's value (None for a figure the entry lacks)."""
    return None if f is None else f.value


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
def write_llm_outputs(out_dir: str | os.PathLike, report) -> list[Path]:
    """Replace ``out_dir`` as a whole (core.io.publish_staged) with a
    :class:`~edgeprof.profilers.report.generative.GenerativeReport`'s profile.json,
    llm_bench.csv, estimate.csv and report.html (the page renders the document, as a
    profile.json read back from disk would be)."""
    payload = report.to_dict()
    from edgeprof.core.io import publish_staged, write_csv, write_json
    from edgeprof.profilers.report.llm_html import write_llm_html

    def write(stage: Path) -> list[str]:
        write_json(stage / "profile.json", payload)
        write_csv(stage / "llm_bench.csv", bench_frame(report))
        write_csv(stage / "estimate.csv", estimate_frame(report))
        write_llm_html(stage / "report.html", payload)
        return ["profile.json", "llm_bench.csv", "estimate.csv", "report.html"]

    return publish_staged(out_dir, write)


__all__ = ["bench_frame", "estimate_frame", "write_llm_outputs"]

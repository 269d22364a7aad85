"""The published training rows: how each row of ``data/llm/llm_measurements_train.csv`` is
read (``data/llm/rows.toml``: target, mode, device, runtime, preset, format, build, threads,
or why it is left out) and the fitting samples made of them (:func:`sample_from`,
:func:`published_samples`)."""

from __future__ import annotations

import csv
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from edgeprof.profilers.predict.llm.builds import normalize_build
from edgeprof.profilers.predict.llm.constants import (ASSUMED_GEN, ASSUMED_PROMPT, ROWS_FILE,
                                                      SUPER_MODE_BANDWIDTH,
                                                      SUPER_MODE_GPU_CLOCK_RATIO,
                                                      SUPER_MODE_SOURCE, TRAIN_CSV)
from edgeprof.profilers.predict.llm.formats import row_format
from edgeprof.profilers.predict.llm.inputs import (registry_target, board_of,
                                                   compute_precision, estimate_numbers)

#: the CSV's metric -> the stage it measures (ttft_ms: the prompt's prefill, read as a rate)
METRICS = {"prefill_tok_s": "prefill", "decode_tok_s": "decode", "ttft_ms": "prefill"}

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class RowMap:
    """How one published row is read (a ``[[row]]`` of ``rows.toml``): the target (and
    mode) and device it measured, the runtime, the preset and format that rebuild its bytes
    (None: left out, ``note`` says why), its build where ``runtime_version`` is not one, its
    threads where the CSV states none."""

    match: tuple[tuple[str, str], ...]
    target: str
    device: str
    runtime: str
    preset: str | None
    fmt: str | None
    note: str = ""
    build: str | None = None
    threads: str | int | None = None

    def matches(self, row: dict[str, str]) -> bool:
        return all(row.get(k) == v for k, v in self.match)


@lru_cache(maxsize=4)
def _row_maps(path: str) -> tuple[RowMap, ...]:
    raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for i, r in enumerate(raw.get("row") or []):
        if not isinstance(r.get("match"), dict) or not r["match"]:
            raise ValueError(f"{path}: [[row]] {i + 1} has no match table")
        left = r.get("left_out")
        out.append(RowMap(match=tuple(sorted((str(k), str(v)) for k, v in r["match"].items())),
                          target=r["target"], device=r["device"], runtime=r["runtime"],
                          preset=None if left else r["preset"],
                          fmt=None if left else r["format"],
                          note=f"left out: {left}" if left else r.get("note", ""),
                          build=r.get("build"), threads=r.get("threads")))
    return tuple(out)


def row_maps(path: str | os.PathLike = ROWS_FILE) -> tuple[RowMap, ...]:
    """The ``[[row]]`` tables of ``rows.toml``."""
    return _row_maps(str(path))


def map_row(row: dict[str, str], maps: tuple[RowMap, ...] | None = None) -> RowMap:
    """The one ``[[row]]`` whose match the CSV row satisfies (ValueError: none or several)."""
    maps = row_maps() if maps is None else maps
    hits = [m for m in maps if m.matches(row)]
    if len(hits) != 1:
        key = {k: row.get(k) for k in ("device", "model", "quant_format", "runtime_version",
                                       "metric")}
        raise ValueError(f"{'no' if not hits else len(hits)} [[row]] of {ROWS_FILE.name} "
                         f"match{'es' if len(hits) == 1 else ''} the training row {key}")
    return hits[0]


def training_rows() -> list[dict[str, str]]:
    with TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def row_key(row: dict[str, str]) -> str:
    """A row's identity, from its content (what the fit's samples and leave-one-out name)."""
    return " | ".join(row.get(k, "") for k in ("device", "model", "quant_format",
                                                 "runtime_version", "metric"))


def _resolve_target(target_id: str) -> tuple[Any, str | None, dict[str, float]]:
    """(target, note, overrides) for a rows.toml target; ``TARGET:MODE`` through the
    registry's modes, or (registry without modes) the base target with the Super mode's
    figures as overrides."""
    from edgeprof.core.errors import UserError

    try:
        return registry_target(target_id), None, {}
    except UserError:
        if target_id != "jetson_orin_nano:super":
            raise
    base = registry_target(target_id.split(":")[0])
    return base, ("the target registry has no modes: Super mode figures from "
                  + SUPER_MODE_SOURCE), {"bandwidth": SUPER_MODE_BANDWIDTH,
                                         "compute_scale": SUPER_MODE_GPU_CLOCK_RATIO,
                                         "mode": "super"}


def sample_from(*, sid: Any, target, device: str, runtime: str, stage: str, rate: float,
                estimate: Any, bandwidth: float | None = None, threads: int | None = None,
                build: dict[str, Any] | None = None, compute_scale: float = 1.0,
                mode: str | None = None, **extra: Any) -> dict[str, Any]:
    """One measured (stage, rate) with the figures of its model and the board it ran on: a
    fitting sample (peaks at the target's mode: a mode row is fitted against its peaks)."""
    n = estimate_numbers(estimate)
    b = board_of(target, device)
    prec = compute_precision(n["format_compute"], b["peaks"], b["kind"])
    s = {"id": sid, "target": b["base_id"], "target_id": b["id"],
         "mode": mode if mode is not None else b["mode"], "device": device,
         "kind": b["kind"], "core_type": b["core_type"], "runtime": runtime, "stage": stage,
         "rate": float(rate), "format": n["format"], "format_compute": n["format_compute"],
         "num_layers": n["num_layers"],
         "prompt_tokens": n["prompt_tokens"], "decode_bytes_per_token": n["decode_bytes_per_token"],
         "decode_macs_per_token": n["decode_macs_per_token"], "prefill_macs": n["prefill_macs"],
         "prefill_bytes": n["prefill_bytes"],
         "peak_bandwidth": float(bandwidth or b["bandwidth"]), "precision": prec,
         "peak_macs": b["peaks"][prec] * compute_scale * b["big_share"],
         "threads": threads if b["kind"] == "cpu" else None, "n_ref": b["n_ref"],
         "cores": b["cores"], "little_ratio": b["little_ratio"],
         "build": build or normalize_build(runtime, None)}
    s.update(extra)
    return s


def _row_threads(row: dict[str, str], m: RowMap, board: dict[str, Any]) -> int | None:
    if board["kind"] != "cpu":
        return None
    cell = (row.get("threads") or "").strip()
    if cell:
        return int(re.search(r"\d+", cell).group(0))
    if m.threads in (None, "cores"):
        return board["n_ref"]
    return int(m.threads)


def _tokens(cell: str | None, assumed: int) -> int:
    """A CSV token count: the cell where it is a whole number, else the assumption
    (llama-bench's pp512 / tg128 where a source states none, or hedges: '512?')."""
    cell = (cell or "").strip()
    return int(cell) if cell.isdigit() and int(cell) > 0 else assumed


def row_rate(row: dict[str, str], prompt_tokens: int) -> tuple[str, float]:
    """(stage, tokens/s) of a CSV row: prefill_tok_s and decode_tok_s as they are; ttft_ms,
    a time to first token, as the prompt's prefill rate (prompt tokens / TTFT: the first token
    is sampled from the prefill's logits, as edgeprof's TTFT is)."""
    metric, value = row["metric"], float(row["value"])
    if metric not in METRICS:
        raise ValueError(f"training row metric {metric!r} is not one of {', '.join(METRICS)}")
    if metric == "ttft_ms":
        return "prefill", prompt_tokens / (value / 1e3)
    return METRICS[metric], value


def published_samples() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(samples, left-out rows) of the training file, figures from the estimator (for the
    row's prompt and generated tokens where it states them, else pp512 / tg128)."""
    from edgeprof.profilers.estimate.llm import estimate_llm
    from edgeprof.zoo.llm import PRESETS

    rows = training_rows()
    maps = row_maps()
    samples, skipped = [], []
    for i, row in enumerate(rows):
        m = map_row(row, maps)
        if m.preset is None:
            skipped.append({"id": i, "key": row_key(row), "model": row["model"],
                            "device": row["device"], "reason": m.note})
            continue
        target, tnote, over = _resolve_target(m.target)
        board = board_of(target, m.device)
        prompt = _tokens(row.get("prompt_tokens"), ASSUMED_PROMPT)
        est = estimate_llm(PRESETS[m.preset], row_format(m.fmt), prompt_tokens=prompt,
                           gen_tokens=_tokens(row.get("gen_tokens"), ASSUMED_GEN), depth=0,
                           target=target, device=m.device)
        stage, rate = row_rate(row, prompt)
        build = normalize_build(m.runtime, m.build or row["runtime_version"])
        build["raw"] = row["runtime_version"]
        note = m.note + (f"; {tnote}" if tnote else "")
        samples.append(sample_from(
            sid=i, target=target, device=m.device, runtime=m.runtime, stage=stage,
            rate=rate, estimate=est, bandwidth=over.get("bandwidth"),
            compute_scale=over.get("compute_scale", 1.0), mode=over.get("mode"),
            threads=_row_threads(row, m, board), build=build, key=row_key(row),
            model=m.preset, published_model=row["model"], published_device=row["device"],
            version=row["runtime_version"], source=row["source"], quote=row["quote"],
            metric=row["metric"], published_value=float(row["value"]), note=note))
    return samples, skipped

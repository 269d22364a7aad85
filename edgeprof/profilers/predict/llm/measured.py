"""An LLM calibration of a board from the user's own llama-bench-style measurements
(``edgeprof calibrate --target BOARD --backend llama_cpp --measurements FILE.csv``).

Most people who run a small language model on a board have run ``llama-bench`` there. Its
table gives, per model and weight format, a prompt test ``pp512`` and a generation test
``tg128`` in tokens per second (``pp512 @ d2048`` with a filled KV cache). A CSV with the
columns ``model,test,tokens_per_s`` -- and optionally ``precision`` (the weight format),
``threads``, ``runtime_version`` (the build, ``b9307``), ``device`` (cpu or cuda) and
``source`` -- one row per test, becomes the records a board of the fleet would have measured
(:class:`~edgeprof.core.llm.GenerationRecord`, provenance: the user's), and is fitted as the
fleet's measurements are (``host.calibrate_llm_host``): per runtime, the effective bandwidth
fraction and per-layer overhead of decode, the prefill efficiency, the thread law where the
rows ran at several thread counts, with leave-one-out. One row moves the level; rows of
several model sizes also fit the per-layer overhead.

The calibration is written atomically to ``--out`` or the user's calibration folder, where
predictions for that board and processor prefer it over the shipped one. Every problem in
the file is one :class:`MeasurementsError` naming the file and line (exit 2), before anything
is written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.core.errors import EdgeprofError
from edgeprof.profilers.predict.measured import (MeasurementsError, agreeing_cell, bad_line,
                                                 csv_rows, first_of, positive_cell,
                                                 resolve_spec, threads_cell)

COLUMNS = ("model", "test", "tokens_per_s")
OPTIONAL = ("precision", "threads", "runtime_version", "device", "source")
#: llama-bench's test names: pp512, tg128, pp512 @ d2048
TEST = re.compile(r"^(pp|tg)\s*(\d+)(?:\s*@\s*d\s*(\d+))?$")


@dataclass
class LLMRow:
    line: int
    spec: str
    stage: str  # prefill | decode
    tokens: int
    depth: int
    rate: float
    precision: str
    threads: int | None
    version: str
    device: str
    source: str


def read_llm_measurements(path: str | os.PathLike, *, precision: str | None = None,
                          threads: int | None = None, device: str | None = None
                          ) -> list[LLMRow]:
    """The rows of a llama-bench-style CSV, validated (:class:`MeasurementsError` names the
    file and line of the first problem). ``precision``/``threads``/``device``: the flags,
    filling an empty cell and contradicting a different one."""
    path = Path(path)
    lines = csv_rows(path, COLUMNS, OPTIONAL, "give a header 'model,test,tokens_per_s' and "
                                              "one row per llama-bench test (pp512, tg128 ...)",
                     "llm:NAME, a .gguf file or a Hugging Face model folder")
    rows: list[LLMRow] = []
    seen: dict[tuple, int] = {}
    for i, r in lines:
        model = r["model"]
        m = TEST.match(r.get("test", "").lower())
        if m is None:
            raise bad_line(path, i, f"test {r.get('test')!r} is not a llama-bench test: ppN "
                                    "(the prompt), tgN (generation), optionally '@ dD' (KV cache "
                                    "depth)")
        rate = positive_cell(path, i, "tokens_per_s", r.get("tokens_per_s", ""),
                             "tokens per second", read=lambda t: float(t.split("±")[0]))
        # "": a .gguf's own format, else an error (below)
        fmt = agreeing_cell(path, i, "precision", r.get("precision") or None, precision) \
            or precision or ""
        t = threads_cell(path, i, r.get("threads") or "", threads)
        t = t if t is not None else threads
        dev = r.get("device") or None
        if dev is not None and dev not in ("cpu", "cuda"):
            raise bad_line(path, i, f"device {dev!r} is cpu or cuda (the board's processor)")
        dev = agreeing_cell(path, i, "device", dev, device) or device or ""
        stage = "prefill" if m.group(1) == "pp" else "decode"
        spec = resolve_spec(model, path.parent)
        row = LLMRow(i, spec, stage, int(m.group(2)), int(m.group(3) or 0), rate, fmt, t,
                     r.get("runtime_version", ""), dev, r.get("source", ""))
        first_of(seen, (spec, stage, row.tokens, row.depth, fmt, t, row.version, dev), path, i,
                 "same model, test, precision, threads, build and device",
                 "keep one row per test, or their median")
        if row.tokens <= 0:
            raise bad_line(path, i, f"test {r.get('test')!r} has no tokens")
        rows.append(row)
    if not rows:
        raise bad_line(path, None, "no rows under the header; give one row per llama-bench test")
    if not any(r.stage == "decode" for r in rows):
        raise bad_line(path, None, "no generation test (tgN): decode is what the calibration "
                                   "fits first; add the tg rows llama-bench printed")
    return rows


def records_of(rows: list[LLMRow], backend: str, models: dict[str, Any], path: Path
               ) -> list[Any]:
    """One :class:`GenerationRecord` per row (a pp row: its prefill rate, a tg row: its
    decode rate), named by the model's spec."""
    from edgeprof.core.results import GenerationRecord

    out = []
    for r in rows:
        rate = {"median": r.rate}
        out.append(GenerationRecord(
            model=models[r.spec].spec.name, backend=backend, format=r.precision,
            device=r.device or "cpu", n_prompt=r.tokens if r.stage == "prefill" else 0,
            n_gen=r.tokens if r.stage == "decode" else 0, n_depth=r.depth,
            n_threads=r.threads or 0, repetitions=1,
            prefill_tokens_per_s=rate if r.stage == "prefill" else None,
            decode_tokens_per_s=rate if r.stage == "decode" else None,
            runtime_version=r.version, provenance="measured",
            warnings=[f"{path.name} line {r.line}" + (f": {r.source}" if r.source else "")]))
    return out


def check_rows(rows: list[LLMRow], backend_cls: type, models: dict[str, Any], path: Path,
               default_device: str) -> None:
    """Each row's model, format and processor are ones the runtime runs on a board (its
    ``supports_on_board``: formats, board devices, architecture; not this machine's build),
    else the file's line, exit 2. A row without a format takes its .gguf file's."""
    for r in rows:
        own = getattr(models[r.spec], "file_format", None)
        if not r.precision:
            if not own:
                raise bad_line(path, r.line, "no weight format: give a precision column (q4_0, "
                                             "q4_k_m, int4 ...) or --precision")
            r.precision = own
        elif own and r.precision != own:
            raise bad_line(path, r.line, f"precision {r.precision} contradicts the file's own "
                                         f"format {own}")
        spec = models[r.spec].spec
        limit = getattr(spec, "max_position_embeddings", None)
        if limit and r.depth + r.tokens > limit:
            raise bad_line(path, r.line, f"the test needs a context of {r.depth + r.tokens} "
                                         f"tokens, longer than {spec.name}'s maximum of {limit}")
        dev = r.device or default_device
        try:
            reason = backend_cls().supports_on_board(models[r.spec], r.precision, dev)
        except EdgeprofError as e:
            reason = str(e)
        if reason:
            raise bad_line(path, r.line, f"{backend_cls.name} {r.precision} on {dev}: {reason}")


__all__ = ["COLUMNS", "LLMRow", "MeasurementsError", "OPTIONAL", "check_rows",
           "read_llm_measurements", "records_of"]

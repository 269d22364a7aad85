"""Time converting one torch model to .tflite at each precision in one process: every
conversion in the one converter worker the process keeps (``tflite_convert._ConverterWorker``,
now) against a fresh interpreter for each conversion (before: each paid importing torch,
litert-torch and TensorFlow again), side by side in one run, alternating, each round in an
empty conversion cache.

    .venv/bin/python benchmarks/tflite_convert_worker.py [--model builtin:small_cnn]
        [--rounds 3] [--write]

Rows: per precision, the median and range over ``--rounds`` of the conversion time the
backend records (``convert_time_s``: the conversion graph's step, cache miss), then the four
summed. ``--write`` saves the table to benchmarks/results/tflite_convert_worker.md.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PRECISIONS = ("fp32", "fp16", "int8_dynamic", "int8")


def convert_all(model: str, fresh: bool) -> dict[str, float]:
    """Seconds each precision of ``model`` took to convert, in an empty cache; ``fresh``: a new
    interpreter for each conversion (what every conversion paid before the worker)."""
    from edgeprof.backends import tflite_convert as tc
    from edgeprof.backends.tflite import TFLiteBackend
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model

    os.environ["EDGEPROF_CACHE_DIR"] = tempfile.mkdtemp(prefix="edgeprof-tflite-worker-")
    while tc._WORKERS:  # each round starts without a worker, as a new process does
        tc._WORKERS.pop().close()
    key = tc._worker_key
    if fresh:
        count = itertools.count()
        tc._worker_key = lambda: next(count)  # never the same: a new worker each time
    try:
        handle, backend, times = resolve_model(model), TFLiteBackend(), {}
        for p in PRECISIONS:
            pm = backend.prepare(handle, RunConfig(precision=p, threads=1),
                                 handle.make_inputs(0))
            times[p] = float(pm.extra["convert_time_s"])
            pm.close()
        return times
    finally:
        tc._worker_key = key


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin:small_cnn")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for fresh in (False, True):
            runs[fresh].append(convert_all(args.model, fresh))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [f"`.venv/bin/python benchmarks/tflite_convert_worker.py --model {args.model} "
             f"--rounds {args.rounds}` ({platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, load average {load:.2f} at the end)", "",
             "| precision | one worker: median s | range | a fresh interpreter each: "
             "median s | range | ratio |", "|---|---:|---:|---:|---:|---:|"]
    for p in (*PRECISIONS, "all four"):
        cells = []
        for fresh in (False, True):
            ts = [sum(r.values()) if p == "all four" else r[p] for r in runs[fresh]]
            cells.append((statistics.median(ts), min(ts), max(ts)))
        (w, wlo, whi), (f, flo, fhi) = cells
        lines.append(f"| {p} | {w:.1f} | {wlo:.1f}-{whi:.1f} | {f:.1f} | {flo:.1f}-{fhi:.1f} "
                     f"| {f / w:.1f}x |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "tflite_convert_worker.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

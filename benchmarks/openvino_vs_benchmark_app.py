"""edgeprof's OpenVINO latency vs OpenVINO's own ``benchmark_app``, configuration by configuration.

The same IR file (edgeprof's cached fp32 conversion of ``--model``), the same thread count,
``--rounds`` rounds interleaved: in each round every candidate runs once, in a rotated order,
so slow drifts of a shared machine fall on every candidate alike. The reference is
``benchmark_app -api sync -nireq 1`` (the vendor tool's synchronous latency; its median
"Latency" line), with ``-hint none -nstreams 1 -nthreads n``, and with ``-hint latency``
(where benchmark_app refuses -nthreads: OpenVINO picks the threads, so that row is shown
but only counts as the reference when it uses the same threads, i.e. ``--threads`` equals
the physical cores); the best of them is the vendor's best synchronous latency. Both pass
``-infer_precision`` for the precision asked: left alone, benchmark_app runs bf16 on a CPU
with bf16 arithmetic while edgeprof's fp32 runs f32 (row ``vendor_default_precision``
shows that figure; it is never the reference). The candidates are bare Python loops over
``openvino`` configurations (compile properties x how an inference is called), and
edgeprof's own harness with its default configuration:

* ``latency_hint``     PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS=n, infer(xs, share_inputs)
* ``none_1stream``     no PERFORMANCE_HINT, NUM_STREAMS=1, INFERENCE_NUM_THREADS=n, same call
  (what ``benchmark_app -hint none -nstreams 1 -nthreads n`` sets)
* ``none_1stream_pin`` the same plus ENABLE_CPU_PINNING=YES (benchmark_app's -pin default on Linux)
* ``*_tensors``        inputs bound once (set_input_tensor on shared tensors), then infer()
                       with no arguments: what benchmark_app's loop does
* ``*_copy``           infer(xs) with share_inputs=False (a copy of each input per call)
* ``edgeprof``         edgeprof.profilers.measure.harness.benchmark_backend (the default config)

Prints the median of the per-round medians (ms) and its ratio to the vendor's best::

    .venv/bin/python benchmarks/openvino_vs_benchmark_app.py --model builtin:small_cnn --threads 1
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCHMARK_APP = Path(sys.executable).with_name("benchmark_app")

LATENCY = {"PERFORMANCE_HINT": "LATENCY"}
NONE_1STREAM = {"NUM_STREAMS": 1}  # no PERFORMANCE_HINT key: OpenVINO 2026 rejects "NONE"
NONE_1STREAM_PIN = {**NONE_1STREAM, "ENABLE_CPU_PINNING": True}
#: name -> (compile properties without threads/precision, call style)
CANDIDATES = {
    "latency_hint": (LATENCY, "share"),
    "latency_hint_tensors": (LATENCY, "tensors"),
    "none_1stream": (NONE_1STREAM, "share"),
    "none_1stream_copy": (NONE_1STREAM, "copy"),
    "none_1stream_tensors": (NONE_1STREAM, "tensors"),
    "none_1stream_pin": (NONE_1STREAM_PIN, "share"),
    "none_1stream_pin_tensors": (NONE_1STREAM_PIN, "tensors"),
}


def bare_loop(path: str, arrays: list, threads: int, hint: str, props: dict, call: str,
              seconds: float, warmup: int) -> float:
    """Median ms of ``infer`` on a freshly compiled model, timed for about ``seconds``."""
    import openvino as ov

    compiled = ov.Core().compile_model(path, "CPU", {
        **props, "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": hint})
    request = compiled.create_infer_request()
    if call == "tensors":
        for i, a in enumerate(arrays):
            request.set_input_tensor(i, ov.Tensor(a, shared_memory=True))

        def once():
            request.infer()
    elif call == "share":
        def once():
            request.infer(arrays, share_inputs=True)
    else:
        def once():
            request.infer(arrays, share_inputs=False)
    for _ in range(warmup):
        once()
    samples: list[int] = []
    clock = time.perf_counter_ns
    end = clock() + int(seconds * 1e9)
    while clock() < end or len(samples) < 20:
        t0 = clock()
        once()
        samples.append(clock() - t0)
    return statistics.median(samples) / 1e6


def vendor(path: str, threads: int, hint: str, precision_hint: str | None,
           seconds: float) -> float:
    """benchmark_app's median latency (ms), synchronous API, one infer request.
    ``precision_hint`` None leaves benchmark_app's default (bf16 on a CPU with bf16)."""
    cmd = [str(BENCHMARK_APP), "-m", path, "-d", "CPU", "-api", "sync", "-nireq", "1",
           "-t", str(max(1, round(seconds))), "-hint", hint]
    if precision_hint:
        cmd += ["-infer_precision", precision_hint]
    if hint == "none":  # benchmark_app takes -nthreads/-nstreams only without a hint
        cmd += ["-nstreams", "1", "-nthreads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    m = re.search(r"Median:\s*([0-9.]+)\s*(ms|us)", text)
    if proc.returncode != 0 or not m:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise RuntimeError(f"benchmark_app failed ({proc.returncode}): {tail}")
    return float(m.group(1)) / (1000.0 if m.group(2) == "us" else 1.0)


def edgeprof_median(handle, precision: str, threads: int, seconds: float) -> float:
    import edgeprof
    from edgeprof.core.backend import RunConfig

    config = RunConfig(precision=precision, threads=threads, interop_threads=1,
                       min_time_s=seconds, max_time_s=seconds * 2)
    res = edgeprof.benchmark(handle, backend="openvino", precision=precision, config=config)
    if res.stats is None:
        raise RuntimeError(f"edgeprof openvino run gave no statistics: {res.reason}")
    return float(res.stats.median_ms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin:small_cnn")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per candidate "
                    "per round")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--only", default="", help="comma-separated candidate names")
    args = ap.parse_args()

    from edgeprof.backends.openvino import PRECISION_HINT, fp32_ir
    from edgeprof.core.models import resolve_model

    handle = resolve_model(args.model)
    ir, _hit, _key, _notes = fp32_ir(handle)
    path = str(ir)
    arrays = handle.make_inputs(0)
    hint = PRECISION_HINT[args.precision]
    names = [n for n in (args.only.split(",") if args.only else
                         ["vendor_none_1stream", "vendor_latency", "vendor_default_precision",
                          *CANDIDATES, "edgeprof"])]
    results: dict[str, list[float]] = {n: [] for n in names}
    t_start = time.time()
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            if name == "vendor_none_1stream":
                v = vendor(path, args.threads, "none", hint, args.seconds)
            elif name == "vendor_default_precision":  # shown, never the reference
                v = vendor(path, args.threads, "none", None, args.seconds)
            elif name == "vendor_latency":
                v = vendor(path, args.threads, "latency", hint, args.seconds)
            elif name == "edgeprof":
                v = edgeprof_median(handle, args.precision, args.threads, args.seconds)
            else:
                props, call = CANDIDATES[name]
                v = bare_loop(path, arrays, args.threads, hint, props, call, args.seconds,
                              args.warmup)
            results[name].append(v)
    medians = {n: statistics.median(v) for n, v in results.items()}
    from edgeprof.backends.openvino import _physical_cores

    vendor_names = [n for n in medians if n == "vendor_none_1stream"
                    or (n == "vendor_latency" and args.threads == _physical_cores())]
    best = min((medians[n] for n in vendor_names), default=None)
    print(f"model {args.model}  IR {Path(path).name}  precision {args.precision}  threads "
          f"{args.threads}  rounds {args.rounds}  {args.seconds:g} s per candidate per round  "
          f"openvino {__import__('openvino').get_version()}  cpus {os.cpu_count()}")
    print(f"{'configuration':<26} {'median_ms':>10} {'vs_vendor_best':>15}  rounds (ms)")
    for n in names:
        ratio = f"{medians[n] / best:.3f}" if best else "-"
        print(f"{n:<26} {medians[n]:>10.4f} {ratio:>15}  "
              + ", ".join(f"{v:.4f}" for v in results[n]))
    print(f"vendor best synchronous latency: {best:.4f} ms" if best else "no vendor reference")
    print(f"took {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()

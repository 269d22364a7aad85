"""edgeprof's median latency vs a bare loop written directly against the runtime API.

For ONNX Runtime and OpenVINO: the same converted model file (edgeprof's cached conversion),
the same thread count, rounds interleaved (edgeprof, bare, edgeprof, bare, ...). The bare
loop shares no code with edgeprof's harness: it builds its own session / compiled model and
times ``run`` / ``infer`` with ``time.perf_counter_ns``. A ratio near 1.0 means the harness
adds no overhead and measures the same steady state.

    .venv/bin/python benchmarks/bare_loop_ort_ov.py --model builtin:small_cnn --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time


def bare_ort(path: str, feed: dict, threads: int, runs: int, warmup: int) -> float:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, feed)
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        sess.run(None, feed)
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def bare_ov(path: str, inputs: list, threads: int, precision_hint: str, runs: int,
            warmup: int) -> float:
    import openvino as ov

    compiled = ov.Core().compile_model(path, "CPU", {
        "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": precision_hint})
    request = compiled.create_infer_request()
    for _ in range(warmup):
        request.infer(inputs, share_inputs=True)
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        request.infer(inputs, share_inputs=True)
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin:small_cnn")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=200, help="timed runs per bare-loop round")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--backends", default="onnxruntime,openvino")
    args = ap.parse_args()

    from edgeprof.backends.onnxruntime import OnnxRuntimeBackend
    from edgeprof.backends.openvino import PRECISION_HINT, OpenVINOBackend
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.measure.measure import benchmark_backend

    handle = resolve_model(args.model)
    arrays = handle.make_inputs(0)
    config = RunConfig(precision=args.precision, threads=args.threads, interop_threads=1,
                       warmup=args.warmup, runs=args.runs)
    print(f"model {args.model}  precision {args.precision}  threads {args.threads}  "
          f"rounds {args.rounds}")
    print(f"{'backend':<12} {'edgeprof_ms':>12} {'bare_ms':>10} {'ratio':>7}")
    for name in args.backends.split(","):
        backend = {"onnxruntime": OnnxRuntimeBackend, "openvino": OpenVINOBackend}[name]()
        # the converted model file (cached): the bare loop runs exactly this file
        prepared = backend.prepare(handle, config, arrays)
        path = prepared.extra["model_path"]
        feed = prepared.inputs
        if prepared.close:
            prepared.close()
        ours, bare = [], []
        for _ in range(args.rounds):
            result = benchmark_backend(backend, handle, config)
            if not result.ok:
                raise SystemExit(f"{name}: edgeprof produced no measurement: {result.reason}")
            ours.append(result.stats.median_ms)
            if name == "onnxruntime":
                bare.append(bare_ort(path, feed, args.threads, args.runs, args.warmup))
            else:
                precision = "int8_static" if args.precision == "int8" else args.precision
                bare.append(bare_ov(path, arrays, args.threads, PRECISION_HINT[precision],
                                    args.runs, args.warmup))
        e, b = statistics.median(ours), statistics.median(bare)
        print(f"{name:<12} {e:>12.4f} {b:>10.4f} {e / b:>7.3f}   "
              f"(rounds: edgeprof {', '.join(f'{x:.4f}' for x in ours)}; "
              f"bare {', '.join(f'{x:.4f}' for x in bare)})")


if __name__ == "__main__":
    main()

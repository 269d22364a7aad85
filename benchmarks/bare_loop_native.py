"""edgeprof's median latency vs a bare loop written directly against ncnn, MNN and ExecuTorch.

As benchmarks/bare_loop_ort_ov.py does for ONNX Runtime and OpenVINO: the same converted model
file (edgeprof's cached conversion: .param/.bin, .mnn, .pte), the same thread count, rounds
interleaved (edgeprof, bare, edgeprof, bare, ...), the ratio in one run. The bare loops share
no code with edgeprof: each builds its own net / module / method with the runtime's own API
and times one inference with ``time.perf_counter_ns`` (ncnn: a new extractor, input,
extract; MNN: forward and read; ExecuTorch: execute). A ratio near 1.0 means the harness adds
no overhead and measures the same steady state; the goal is within 2 %.

    .venv/bin/python benchmarks/bare_loop_native.py --model builtin:small_resnet --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time


def _timed(call, runs: int, warmup: int) -> float:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def bare_ncnn(param: str, arrays: list, threads: int, runs: int, warmup: int) -> float:
    import ncnn
    import numpy as np

    net = ncnn.Net()
    net.opt.num_threads = threads
    net.opt.use_vulkan_compute = False
    net.opt.use_fp16_storage = net.opt.use_fp16_packed = net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
    assert net.load_param(param) == 0 and net.load_model(param[:-len(".param")] + ".bin") == 0
    ins, outs = list(net.input_names()), list(net.output_names())
    mats = [ncnn.Mat(np.ascontiguousarray(a[0], dtype=np.float32)).clone() for a in arrays]

    def call():
        ex = net.create_extractor()
        for name, m in zip(ins, mats):
            ex.input(name, m)
        for name in outs:
            ex.extract(name)

    return _timed(call, runs, warmup)


def bare_mnn(path: str, arrays: list, threads: int, runs: int, warmup: int) -> float:
    import MNN.expr as F
    import MNN.nn as nn
    import numpy as np

    info = nn.load_module_from_file(path, [], []).get_info()
    rt = nn.create_runtime_manager(({"backend": "CPU", "precision": "normal",
                                     "numThread": threads},))
    module = nn.load_module_from_file(path, info["inputNames"], info["outputNames"],
                                      runtime_manager=rt)
    xs = [F.const(np.ascontiguousarray(a, dtype=np.float32), list(a.shape), F.NCHW)
          for a in arrays]

    def call():
        for y in module.forward(xs):
            y.read()

    return _timed(call, runs, warmup)


def bare_executorch(path: str, arrays: list, threads: int, runs: int, warmup: int) -> float:
    import numpy as np
    import torch
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(threads)
    method = Runtime.get().load_program(path).load_method("forward")
    ts = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    return _timed(lambda: method.execute(ts), runs, warmup)


BARE = {"ncnn": bare_ncnn, "mnn": bare_mnn, "executorch": bare_executorch}


def main() -> None:
    from edgeprof.cli.quiet import native_output_to_stderr

    with native_output_to_stderr():  # MNN's "The device supports ..." stays off the table
        _main()


def _main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin:small_resnet")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=200, help="timed runs per bare-loop round")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--backends", default="ncnn,mnn,executorch")
    args = ap.parse_args()

    from edgeprof.cli.quiet import quiet_third_party
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.measure import benchmark_backend

    quiet_third_party()
    handle = resolve_model(args.model)
    arrays = handle.make_inputs(0)
    config = RunConfig(precision="fp32", threads=args.threads, interop_threads=1,
                       warmup=args.warmup, runs=args.runs)
    print(f"model {args.model}  precision fp32  threads {args.threads}  rounds {args.rounds}  "
          f"runs {args.runs} per round")
    print(f"{'backend':<12} {'edgeprof_ms':>12} {'bare_ms':>10} {'ratio':>7}")
    reg = get_registry()
    for name in args.backends.split(","):
        backend = reg.backend(name)()
        # the converted model file (cached): the bare loop runs exactly this file
        prepared = backend.prepare(handle, config, arrays)
        path = prepared.extra["model_path"]
        if prepared.close:
            prepared.close()
        ours, bare = [], []
        for _ in range(args.rounds):
            result = benchmark_backend(backend, handle, config)
            if not result.ok:
                raise SystemExit(f"{name}: edgeprof produced no measurement: {result.reason}")
            ours.append(result.stats.median_ms)
            bare.append(BARE[name](path, arrays, args.threads, args.runs, args.warmup))
        e, b = statistics.median(ours), statistics.median(bare)
        print(f"{name:<12} {e:>12.4f} {b:>10.4f} {e / b:>7.3f}   "
              f"(rounds: edgeprof {', '.join(f'{x:.4f}' for x in ours)}; "
              f"bare {', '.join(f'{x:.4f}' for x in bare)})")


if __name__ == "__main__":
    main()

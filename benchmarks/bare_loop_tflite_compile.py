"""edgeprof's measured median vs a bare loop written directly against the runtime API.

For the LiteRT backend and the torch.compile backend: the *same* model (the same converted
.tflite file; the same module compiled with the same mode), the same thread count,
interleaved rounds (edgeprof harness, bare loop, then the other order next round, so drift
hits both), and the ratio ``edgeprof median / bare-loop median`` (median over rounds), plus
the ratio of each side's fastest round (less sensitive to other load on a shared machine).
A ratio near 1 says the harness adds no overhead of its own and measures what the runtime
does. On a busy machine the per-round medians of *both* sides jump between levels; read
the per-round figures before trusting a ratio far from 1.

The bare loops share no code with the harness or the backends: they call
``ai_edge_litert.interpreter.Interpreter`` (set_tensor + invoke + get_tensor, what the
backend's run does) and ``torch.compile`` directly, timed with ``time.perf_counter_ns`` over
blocks of calls. Only the .tflite *file* comes from edgeprof's conversion cache, so both
sides run the identical model.

    .venv/bin/python benchmarks/bare_loop_tflite_compile.py [--model builtin:small_cnn]
        [--precision fp32] [--threads 1] [--rounds 5] [--backends tflite,torch_compile]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


# ------------------------------------------------------------------------- bare loops
def _bare_time(call, min_samples: int = 100, min_time_s: float = 1.0,
               warmup_s: float = 0.3) -> list[float]:
    """Per-call milliseconds: warm up, then time blocks of calls (block >= ~1 ms)."""
    t_end = time.perf_counter() + warmup_s
    n = 0
    t0 = time.perf_counter_ns()
    while time.perf_counter() < t_end or n < 10:
        call()
        n += 1
    per_call_ns = (time.perf_counter_ns() - t0) / n
    block = max(1, int(1e6 // max(per_call_ns, 1)))
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < min_samples or time.perf_counter() - start < min_time_s:
        t0 = time.perf_counter_ns()
        for _ in range(block):
            call()
        samples.append((time.perf_counter_ns() - t0) / block / 1e6)
        if time.perf_counter() - start > 10.0:
            break
    return samples


def bare_tflite(path: str, inputs, threads: int):
    """A LiteRT interpreter set up by hand; returns a zero-argument inference call."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=path, num_threads=threads)
    it.allocate_tensors()
    ins = it.get_input_details()
    outs = [d["index"] for d in it.get_output_details()]
    feed = []
    for x, d in zip(inputs, ins):
        if np.dtype(d["dtype"]).kind in "iu" and d["quantization"][0]:
            scale, zero = d["quantization"]
            info = np.iinfo(d["dtype"])
            x = np.clip(np.round(x / scale + zero), info.min, info.max)
        feed.append((d["index"], np.ascontiguousarray(np.asarray(x).astype(d["dtype"]))))

    def call():
        for i, x in feed:
            it.set_tensor(i, x)
        it.invoke()
        return [it.get_tensor(o) for o in outs]

    return call


def bare_compile(module, inputs, threads: int, mode: str):
    import torch

    torch.set_num_threads(threads)
    compiled = torch.compile(module, mode=None if mode == "default" else mode,
                             backend="inductor", dynamic=False)
    xs = [torch.from_numpy(x) for x in inputs]

    def call():
        with torch.inference_mode():
            return compiled(*xs)

    call()  # compile
    return call


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="builtin:small_cnn")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backends", default="tflite,torch_compile")
    ap.add_argument("--mode", default="default", help="torch.compile mode")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model

    try:
        from edgeprof.profilers.measure.measure import benchmark_backend
    except ImportError as e:
        print(f"edgeprof.profilers.measure.harness is not importable ({e}); nothing to compare",
              file=sys.stderr)
        return 1

    handle = resolve_model(args.model)
    inputs = handle.make_inputs(0)
    report: dict = {"model": args.model, "precision": args.precision, "threads": args.threads,
                    "rounds": args.rounds, "backends": {}}
    for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
        if name == "tflite":
            from edgeprof.backends.tflite import TFLiteBackend
            from edgeprof.backends.tflite_convert import convert

            backend = TFLiteBackend()
            path = str(convert(handle, args.precision).path)  # the same file for both sides
            bare = bare_tflite(path, inputs, args.threads)
            options: dict = {}
        elif name == "torch_compile":
            from edgeprof.backends.torch_compile import TorchCompileBackend

            backend = TorchCompileBackend()
            import copy

            bare = bare_compile(copy.deepcopy(handle.torch_module()), inputs, args.threads,
                                args.mode)
            options = {"mode": args.mode}
        else:
            print(f"unknown backend {name!r}; this benchmark covers tflite and torch_compile",
                  file=sys.stderr)
            return 2
        config = RunConfig(precision=args.precision, threads=args.threads,
                           min_time_s=args.min_time, options=options,
                           harness_options={"memory": False})
        ep_medians, bare_medians = [], []
        for r in range(args.rounds):
            order = ("edgeprof", "bare") if r % 2 == 0 else ("bare", "edgeprof")
            for side in order:
                if side == "edgeprof":
                    res = benchmark_backend(backend, handle, config)
                    if not res.ok:
                        print(f"{name}: edgeprof run {res.status}: {res.reason}",
                              file=sys.stderr)
                        return 1
                    ep_medians.append(res.stats.median_ms)
                else:
                    bare_medians.append(statistics.median(_bare_time(bare,
                                                                     min_time_s=args.min_time)))
        ep, bl = statistics.median(ep_medians), statistics.median(bare_medians)
        report["backends"][name] = {
            "edgeprof_median_ms": ep, "bare_median_ms": bl, "ratio": ep / bl,
            # the fastest round of each side: less sensitive to other load on the machine
            "ratio_of_best_rounds": min(ep_medians) / min(bare_medians),
            "edgeprof_round_medians_ms": ep_medians, "bare_round_medians_ms": bare_medians,
        }
        print(f"{name:14s} edgeprof {ep:9.4f} ms   bare loop {bl:9.4f} ms   "
              f"ratio {ep / bl:6.3f} (best rounds {min(ep_medians) / min(bare_medians):6.3f})"
              f"   (rounds: edgeprof "
              f"{', '.join(f'{m:.4f}' for m in ep_medians)}; bare "
              f"{', '.join(f'{m:.4f}' for m in bare_medians)})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

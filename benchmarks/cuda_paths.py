"""edgeprof's CUDA paths on this machine's GPU: the calibration, and profiles read against it.

Needs a CUDA GPU (run it on one; it exits 2 without). It prints, in one run:

1. **The GPU's calibration** (``host_gpu``: device-to-device copy and cuBLAS GEMMs, CUDA
   events, medians with their IQR) beside the datasheet of the matching descriptor
   (``--datasheet``, default ``nvidia_h100``): measured / datasheet per figure.
2. **Profiles** (``edgeprof.profile(..., run_options={"device": "cuda"})``) of each model x
   batch x backend x precision: the harness's median latency with its IQR, achieved GB/s
   and GMAC/s read against the *calibrated GPU*, bandwidth and compute utilization, and the
   summary's reading. torch.compile's compile time is reported beside its speed-up over
   eager.
3. **Harness vs a bare loop** for torch eager: the same model moved to the GPU by hand, run
   under ``torch.inference_mode`` and timed with ``time.perf_counter`` over blocks of calls
   ending in ``torch.cuda.synchronize()`` (no edgeprof code), median of the blocks, run right
   after the harness's profile of the same configuration. A ratio near 1 says the harness
   times what the GPU does.

    python benchmarks/cuda_paths.py [--models builtin:resnet50,...] [--batches 1,32]
        [--backends torch_eager,torch_compile] [--precisions fp32,bf16]
        [--compile-models builtin:resnet50] [--compile-batches 1,32] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def bare_eager_ms(handle, batch: int, precision: str, blocks: int = 30) -> float:
    """Median ms per call of the model run by hand on the GPU (no edgeprof harness)."""
    import torch

    module = handle.torch_module().to("cuda").eval()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    module = module.to(dtype)
    xs = [torch.from_numpy(a).to("cuda", dtype if a.dtype.kind == "f" else None)
          for a in handle.make_inputs(0)]

    def call():
        with torch.inference_mode():
            module(*xs)

    for _ in range(10):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.2:
        call()
        n += 1
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / n
    block = max(1, int(0.01 / per))  # ~10 ms blocks: launch jitter averages out
    samples = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(block):
            call()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / block * 1e3)
    return statistics.median(samples)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="builtin:resnet50,builtin:mobilenet_v2,builtin:vit_tiny")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--backends", default="torch_eager,torch_compile")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--compile-models", default="builtin:resnet50",
                    help="models torch_compile runs (each compile takes tens of seconds)")
    ap.add_argument("--compile-batches", default="1,32")
    ap.add_argument("--compile-modes", default="default,reduce-overhead",
                    help="torch.compile modes (reduce-overhead replays CUDA graphs)")
    ap.add_argument("--datasheet", default="nvidia_h100")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("cuda_paths: torch sees no CUDA device; run this on a machine with a GPU",
              file=sys.stderr)
        return 2
    import edgeprof
    from edgeprof.core.models import resolve_model
    from edgeprof.targets import get_target
    from edgeprof.targets.host_gpu import describe_gpu, gpu_calibration, theoretical_bandwidth

    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    cal = gpu_calibration("cuda")
    sheet = get_target(args.datasheet)
    say(f"# edgeprof CUDA paths ({time.strftime('%Y-%m-%d')}; torch {torch.__version__}, "
        f"CUDA {torch.version.cuda})")
    say()
    say(f"GPU: {describe_gpu(cal)} (calibration {cal['duration_s']:.1f} s, "
        f"{'cached' if cal['cache']['hit'] else 'measured now'})")
    say()
    say(f"## 1. Calibration vs the {args.datasheet} datasheet")
    say()
    say("| figure | measured (median, IQR) | datasheet | measured / datasheet |")
    say("|---|---|---|---|")
    c = cal["copy"]
    theory = theoretical_bandwidth(cal["gpu"]["memory_clock_khz"],
                                   cal["gpu"]["memory_bus_width_bits"])
    say(f"| copy bandwidth | {c['bytes_per_s'] / 1e9:.0f} GB/s ({c['bytes_per_s_iqr'][0] / 1e9:.0f}"
        f"-{c['bytes_per_s_iqr'][1] / 1e9:.0f}) | {sheet.bandwidth.value / 1e9:.0f} GB/s "
        f"(driver: {theory / 1e9:.0f}) | {c['bytes_per_s'] / sheet.bandwidth.value:.2f} |")
    for p, g in cal["gemm"].items():
        ds = sheet.peak_macs(p)
        say(f"| {p} GEMM {g['n']}^3 | {g['macs_per_s'] / 1e12:.1f} TMAC/s "
            f"({g['macs_per_s_iqr'][0] / 1e12:.1f}-{g['macs_per_s_iqr'][1] / 1e12:.1f}) | "
            f"{ds / 1e12:.1f} TMAC/s | {g['macs_per_s'] / ds:.2f} |" if ds else
            f"| {p} GEMM | {g['macs_per_s'] / 1e12:.1f} TMAC/s | - | - |")
    for p, why in cal.get("unavailable", {}).items():
        say(f"| {p} GEMM | not calibrated: {why} | | |")
    say()
    say("## 2. Profiles on the GPU, read against the calibrated GPU (host_gpu)")
    say()
    say("| model | batch | backend | precision | median ms (IQR) | GB/s | util bw | GMAC/s | "
        "util compute | reading | note |")
    say("|---|---|---|---|---|---|---|---|---|---|---|")
    eager: dict[tuple, float] = {}
    bare_rows = []
    for model in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            for backend in args.backends.split(","):
                if backend == "torch_compile" and (
                        model not in args.compile_models.split(",")
                        or str(batch) not in args.compile_batches.split(",")):
                    continue
                modes = args.compile_modes.split(",") if backend == "torch_compile" else [None]
                for precision, mode in ((p, m) for p in args.precisions.split(",")
                                        for m in modes):
                    options = {"device": "cuda", "max_time": 3}
                    if mode:
                        options["options"] = {"mode": mode}
                    rep = edgeprof.profile(model, backends=backend, precisions=precision,
                                           batch_size=batch, run_options=options)
                    assert rep.target.id == "host_gpu", rep.target.id
                    run = rep.runs[0]
                    b = run.benchmark
                    if not b.ok:
                        say(f"| {model} | {batch} | {backend} | {precision} | {b.status}: "
                            f"{(b.reason or '')[:80]} | | | | | | |")
                        continue
                    f = run.summary.figures
                    s = b.stats
                    notes = [f"mode {mode}"] if mode else []
                    if backend == "torch_eager":
                        eager[(model, batch, precision)] = s.median_ms
                    elif (model, batch, precision) in eager:
                        notes += [f"{eager[(model, batch, precision)] / s.median_ms:.2f}x eager",
                                  f"compile {b.extra.get('compile_time_s', float('nan')):.0f} s"]
                    if any("TF32" in n for n in b.notes):
                        notes.append("TF32 convolutions (torch's default)")
                    note = "; ".join(notes)
                    say(f"| {model.split(':')[-1]} | {batch} | {backend} | {precision} | "
                        f"{s.median_ms:.3f} ({s.iqr_ms:.3f}) | "
                        f"{f['achieved_bandwidth_gbps'].value:.0f} | "
                        f"{f['bandwidth_utilization'].value:.2f} | "
                        f"{f['achieved_gmacs'].value:.0f} | "
                        f"{f['compute_utilization'].value:.3f} | {run.summary.reading} | "
                        f"{note} |")
                    if backend == "torch_eager":
                        handle = resolve_model(model, batch_size=batch)
                        bare = bare_eager_ms(handle, batch, precision)
                        bare_rows.append((model, batch, precision, s.median_ms, bare))
    say()
    say("## 3. Harness vs a bare loop (torch eager, same model, perf_counter over synced blocks)")
    say()
    say("| model | batch | precision | harness median ms | bare median ms | harness / bare |")
    say("|---|---|---|---|---|---|")
    for model, batch, precision, h, bare in bare_rows:
        say(f"| {model.split(':')[-1]} | {batch} | {precision} | {h:.3f} | {bare:.3f} | "
            f"{h / bare:.3f} |")
    ratios = [h / bare for *_, h, bare in bare_rows]
    if ratios:
        say()
        say(f"harness / bare: median {statistics.median(ratios):.3f}, "
            f"range {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} configurations")
    if args.out:
        from edgeprof.core.io import write_text

        write_text(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""ncnn, ExecuTorch and MNN against ONNX Runtime and TFLite on reference CNNs, on this host.

    python benchmarks/native_runtimes_matrix.py [--models mobilenet_v2,...] [--min-time 0.2] [--threads 1]

Models from edgeprof's zoo (random-initialised reference architectures at their usual input
sizes): MobileNetV2, ResNet-18, ShuffleNetV2, SqueezeNet 1.1 (224 x 224) and YOLOv8n (a
YOLO-sized detector, 640 x 640). EfficientNet-B0 is not in the zoo, so it is not here.

For each model x runtime, fp32 and the runtime's int8 (``int8``: static where it calibrates;
MNN's int8 is refused, so MNN also runs ``int8_weight``): the median latency with its 95% CI
(edgeprof's harness, ``edgeprof.profile`` as benchmarks/backend_matrix.py), the precision that
ran, and the conversion time beside it. Every runtime starts from an empty conversion cache,
so its conversion time is the whole route from the torch model (torch -> ONNX -> MNN, torch
-> pnnx -> ncnn, torch -> .pte ...), cold. A precision a runtime refuses is a row with the
reason. Everything is measured here; nothing is estimated.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

MODELS = ["mobilenet_v2", "resnet18", "shufflenet_v2", "squeezenet1_1", "yolov8n"]
RUNTIMES = ["ncnn", "executorch", "mnn", "onnxruntime", "tflite"]
PRECISIONS = {"mnn": "fp32,int8,int8_weight"}


def main() -> int:
    from edgeprof.cli.quiet import native_output_to_stderr

    with native_output_to_stderr():  # MNN's "The device supports ..." stays off the table
        return _main()


def _main() -> int:
    import edgeprof
    from edgeprof.cli.quiet import quiet_third_party

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--max-time", type=float, default=0.6)
    ap.add_argument("--runs", type=int, default=5, help="minimum timed runs per row")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of every runtime (default 1: on a shared host, OpenMP's "
                         "spin-waiting threads of ncnn make multi-threaded rows mostly noise)")
    args = ap.parse_args()
    quiet_third_party()
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; "
          f"threads {args.threads}; --min-time {args.min_time} --max-time {args.max_time} --runs {args.runs}")
    t_all = time.perf_counter()
    for model in args.models.split(","):
        t0 = time.perf_counter()
        rows = []
        for runtime in args.runtimes.split(","):
            with tempfile.TemporaryDirectory(prefix="edgeprof-cache-") as cache:
                os.environ["EDGEPROF_CACHE_DIR"] = cache  # a cold conversion per runtime
                rep = edgeprof.profile(f"builtin:{model}", target="host", backends=runtime,
                                       threads=args.threads,
                                       precisions=PRECISIONS.get(runtime, "fp32,int8"),
                                       run_options={"min_time_s": args.min_time,
                                                    "max_time_s": args.max_time,
                                                    "runs": args.runs})
                rows += list(rep.runs)
        est = rep.estimate
        print(f"\n## {model} ({est.total_macs / 1e9:.2f} GMAC, {est.parameter_count / 1e6:.2f} "
              f"M params), {time.perf_counter() - t0:.0f} s")
        print(f"{'runtime':12} {'precision':12} {'ran as':12} {'median ms':>10} "
              f"{'95% CI':>19} {'n':>4} {'convert s':>10}  note")
        for r in rows:
            b = r.benchmark
            if r.status != "ok":
                reason = (b.reason or "").replace("\n", " ")
                print(f"{r.backend:12} {r.requested_precision:12} {'-':12} {r.status:>10}  "
                      f"{reason[:150]}")
                continue
            st = b.stats
            ci = f"{st.ci_low_ms:.2f}-{st.ci_high_ms:.2f}" if st.ci_low_ms is not None else "-"
            build = (b.config.get("harness") or {}).get("build") or {}
            conv = build.get("time_s")
            print(f"{r.backend:12} {r.requested_precision:12} {b.executed_precision or '-':12} "
                  f"{st.median_ms:10.2f} {ci:>19} {st.n:>4} "
                  f"{conv if conv is not None else float('nan'):10.1f}"
                  + ("  (cache hit)" if build.get("cache_hit") else ""))
        sys.stdout.flush()
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

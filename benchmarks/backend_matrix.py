"""Latency and model size of every backend x precision for the built-in models, on this host.

    python benchmarks/backend_matrix.py [--models small_cnn,small_resnet] [--min-time 1]
                                        [--max-autotune]

Prints one table (median latency with its 95% CI, executed precision, converted model size,
agreement with torch fp32) per model. Runs that a backend cannot do are rows with the reason.
Everything is measured here by edgeprof's harness; nothing is estimated.
"""

from __future__ import annotations

import argparse
import sys
import time

MODELS = ["small_cnn", "mlp", "small_resnet", "small_mobilenet", "tiny_transformer"]
PRECISIONS = ["fp32", "fp16", "bf16", "int8_static", "int8_dynamic", "int8_weight", "int4_weight"]


def main() -> int:
    import edgeprof
    from edgeprof.api import list_backends

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-time", type=float, default=5.0)
    ap.add_argument("--max-autotune", action="store_true",
                    help="also run torch_compile with mode=max-autotune (slow to compile)")
    args = ap.parse_args()
    backends = [b["name"] for b in list_backends() if b["available"]]
    print(f"backends available here: {', '.join(backends)}")
    for model in args.models.split(","):
        t0 = time.perf_counter()
        rep = edgeprof.profile(f"builtin:{model}", target="host", backends="all",
                               precisions=args.precisions,
                               run_options={"min_time_s": args.min_time,
                                            "max_time_s": args.max_time})
        runs = list(rep.runs)
        if args.max_autotune and "torch_compile" in backends:
            extra = edgeprof.profile(f"builtin:{model}", target="host", backends="torch_compile",
                                     precisions="fp32", run_options={
                                         "min_time_s": args.min_time, "max_time_s": args.max_time,
                                         "options": {"mode": "max-autotune"}})
            for r in extra.runs:
                r.backend = "torch_compile[max-autotune]"
            runs += extra.runs
        print(f"\n## {model} ({rep.estimate.total_macs / 1e6:.2f} MMAC, "
              f"{rep.estimate.parameter_count} params), {time.perf_counter() - t0:.0f} s")
        print(f"{'backend':28} {'precision':13} {'ran as':14} {'median ms':>10} "
              f"{'95% CI':>19} {'size kB':>9} {'rel.err':>9}  note")
        ok = [r for r in runs if r.status == "ok"]
        for r in sorted(ok, key=lambda r: r.benchmark.stats.median_ms):
            b, st = r.benchmark, r.benchmark.stats
            ci = f"{st.ci_low_ms:.4f}-{st.ci_high_ms:.4f}" if st.ci_low_ms is not None else "-"
            size = b.extra.get("model_bytes")
            agr = (b.extra.get("agreement") or {}).get("relative_error")
            print(f"{r.backend:28} {r.requested_precision:13} {b.executed_precision or '-':14} "
                  f"{st.median_ms:10.4f} {ci:>19} {size / 1e3 if size else float('nan'):9.1f} "
                  f"{agr if agr is not None else float('nan'):9.2e}")
        for r in runs:
            if r.status != "ok":
                reason = (r.benchmark.reason or "").replace("\n", " ")
                print(f"{r.backend:28} {r.requested_precision:13} {'-':14} {r.status:>10}  "
                      f"{reason[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

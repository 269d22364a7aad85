"""optimize's pick vs an exhaustive backend x precision sweep, on this machine (not a test).

For each built-in CNN (small_cnn, small_resnet, small_mobilenet), on ``--target host``:

1. ``optimize`` with its defaults (short timing runs, the plan + sweep + compressions);
2. an exhaustive sweep of every available backend x every precision it lists (no
   compression), with accuracy, timed with longer runs (``--min-time``, default 1 s);
3. optimize's pick re-timed with the same longer runs, so both sides of the ratio are
   measured the same way.

Prints: the pick, its latency, the fastest accepted configuration of the sweep, the ratio
pick / sweep-best (target <= 1.10), and the pick's speed-up over torch_eager fp32 under the
accuracy rule (target >= 2x). The machine may be shared and noisy: the numbers are what
this run measured, nothing more.

    .venv/bin/python benchmarks/optimize_vs_sweep.py [--models small_cnn,...] [--min-time 1]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="small_cnn,small_resnet,small_mobilenet")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-time", type=float, default=3.0)
    ap.add_argument("--backends", default=None,
                    help="restrict both sides to these backends (comma-separated)")
    args = ap.parse_args()

    from edgeprof.core.plugins import get_registry
    from edgeprof.optimize.candidates import sweep_precisions as _sweep_precisions
    from edgeprof.optimize.loop import Candidate, optimize

    reg = get_registry()
    names = args.backends.split(",") if args.backends else list(reg.backends)
    careful = {"runs": 100, "min_time_s": args.min_time, "max_time_s": args.max_time}
    rows = []
    for model in args.models.split(","):
        spec = f"builtin:{model}"
        t0 = time.perf_counter()
        picked = optimize(spec, "host", backends=args.backends)
        t_opt = time.perf_counter() - t0
        sweep = [Candidate(n, p, source="sweep") for n in names
                 for p in _sweep_precisions(reg.backend(n))]
        if picked.chosen is not None and picked.chosen.candidate.key not in {c.key for c in sweep}:
            sweep.append(picked.chosen.candidate)  # re-time the pick the same careful way
        t0 = time.perf_counter()
        full = optimize(spec, "host", candidates=sweep, run_options=careful)
        t_sweep = time.perf_counter() - t0
        accepted = [r for r in full.candidates if r.ok and r.accepted and not r.candidate.compression]
        best = min(accepted, key=lambda r: r.latency_ms) if accepted else None
        base = next((r for r in full.candidates if r.candidate.backend == "torch_eager"
                     and r.candidate.precision == "fp32" and not r.candidate.compression), None)
        pick = None
        if picked.chosen is not None:
            pick = next((r for r in full.candidates
                         if r.candidate.key == picked.chosen.candidate.key), None)
        rows.append({
            "model": model, "pick": picked.chosen.candidate.label if picked.chosen else "-",
            "pick_ms_quick": picked.chosen.latency_ms if picked.chosen else None,
            "pick_ms": pick.latency_ms if pick and pick.ok else None,
            "best": best.candidate.label if best else "-",
            "best_ms": best.latency_ms if best else None,
            "eager_ms": base.latency_ms if base and base.ok else None,
            "pick_acc": pick.accuracy if pick else None,
            "ref_acc": full.reference["accuracy"], "t_opt": t_opt, "t_sweep": t_sweep,
            "n_opt": picked.verdict["measured"], "n_sweep": full.verdict["measured"]})

    def f(v, spec=".4g"):
        return "-" if v is None else format(v, spec)

    print(f"{'model':<16} {'optimize pick':<36} {'pick ms':>8} {'sweep best':<28} "
          f"{'best ms':>8} {'ratio':>6} {'eager fp32 ms':>13} {'speed-up':>8} "
          f"{'acc pick/ref':>13} {'optimize s':>10} {'n':>3}")
    for r in rows:
        ratio = r["pick_ms"] / r["best_ms"] if r["pick_ms"] and r["best_ms"] else None
        speed = r["eager_ms"] / r["pick_ms"] if r["pick_ms"] and r["eager_ms"] else None
        acc = f"{f(r['pick_acc'], '.3f')}/{f(r['ref_acc'], '.3f')}"
        print(f"{r['model']:<16} {r['pick']:<36} {f(r['pick_ms']):>8} {r['best']:<28} "
              f"{f(r['best_ms']):>8} {f(ratio, '.2f'):>6} {f(r['eager_ms']):>13} "
              f"{f(speed, '.2f'):>8} {acc:>13} {r['t_opt']:>10.0f} {r['n_opt']:>3}")
    print("ratio = pick / fastest accepted of the exhaustive sweep, both re-timed with "
          f"min_time {args.min_time:g} s (target <= 1.10); speed-up = torch_eager fp32 / pick "
          "(target >= 2); n = candidates optimize measured")


if __name__ == "__main__":
    main()

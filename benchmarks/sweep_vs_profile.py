"""A sweep on the LocalCluster against the same jobs run one by one through ``profile``.

3 models x 3 backends x 2 precisions (18 jobs) for raspberry_pi_4, measured on this host both
ways with the same timing settings. The conversions are built (and cached) first, so both
passes load cached artifacts and the comparison is of the measuring, not of the building.

Prints: total wall time of each pass and their ratio, and for every job the two medians with
their 95% confidence intervals and whether each median lies inside the other's interval (the
LocalCluster's single measurement slot means no two measurements overlap).

    .venv/bin/python benchmarks/sweep_vs_profile.py [--models builtin:small_cnn,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = "builtin:small_cnn,builtin:mlp,builtin:small_mobilenet"
BACKENDS = "onnxruntime,openvino,tflite"
PRECISIONS = "fp32,int8"


def _inside(x, lo, hi) -> bool | None:
    if x is None or lo is None or hi is None:
        return None
    return lo <= x <= hi


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--backends", default=BACKENDS)
    ap.add_argument("--precisions", default=PRECISIONS)
    ap.add_argument("--target", default="raspberry_pi_4")
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--max-time", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    models, backends, precisions = (s.split(",") for s in (args.models, args.backends,
                                                            args.precisions))
    import warnings

    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    from edgeprof.api import _target_registry, profile
    from edgeprof.core.models import resolve_model
    from edgeprof.optimize.sweep import run_sweep
    from edgeprof.profilers.measure.fleet import build_shipment

    run = {"min_time_s": args.min_time, "max_time_s": args.max_time, "runs": args.runs}
    jobs = [(m, b, p) for m in models for b in backends for p in precisions]
    print(f"{len(jobs)} jobs: {len(models)} models x {len(backends)} backends x "
          f"{len(precisions)} precisions, target {args.target}; min_time {args.min_time} s, "
          f"max_time {args.max_time} s, runs {args.runs}; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)

    # 0. build everything once (cached), and calibrate the host: neither pass pays for it
    t0 = time.perf_counter()
    _target_registry().get("host")
    built = {}
    for m, b, p in jobs:
        try:
            build_shipment(b, resolve_model(m), p)
            built[(m, b, p)] = "built"
        except Exception as e:  # noqa: BLE001 - shown in the table
            built[(m, b, p)] = f"{type(e).__name__}: {str(e)[:80]}"
    print(f"builds (cached for both passes): {time.perf_counter() - t0:.1f} s", flush=True)

    # 1. one by one through profile
    t0 = time.perf_counter()
    prof = {}
    for m, b, p in jobs:
        rep = profile(m, target=args.target, backends=b, precisions=p, run_options=run)
        r = rep.runs[0].benchmark
        prof[(m, b, p)] = (r.status, r.stats.median_ms if r.stats else None,
                           r.stats.ci_low_ms if r.stats else None,
                           r.stats.ci_high_ms if r.stats else None)
    profile_s = time.perf_counter() - t0
    print(f"profile, one by one: {profile_s:.1f} s", flush=True)

    # 2. the sweep on a LocalCluster (same settings)
    with tempfile.TemporaryDirectory() as tmp:
        toml = Path(tmp) / "sweep.toml"
        q = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"  # noqa: E731
        toml.write_text(f"models = {q(models)}\ntargets = {q([args.target])}\n"
                        f"backends = {q(backends)}\nprecisions = {q(precisions)}\n[run]\n"
                        f"min_time = {args.min_time}\nmax_time = {args.max_time}\n"
                        f"runs = {args.runs}\n")
        t0 = time.perf_counter()
        report = run_sweep(toml)
        sweep_s = time.perf_counter() - t0
    print(f"sweep on the LocalCluster (cluster start included): {sweep_s:.1f} s", flush=True)
    sw = {(r["model"], r["backend"], r["precision"]): r
          for r in report.frame.to_dict(orient="records")}

    print()
    print(f"{'job':44} {'profile median [95% CI] ms':32} {'sweep median [95% CI] ms':32} "
          f"{'s in p':>6} {'p in s':>6}")
    agree = both = 0
    for key in jobs:
        st, pm, plo, phi = prof[key]
        s = sw[key]
        sm, slo, shi = s["median_ms"], s["ci_low_ms"], s["ci_high_ms"]
        a, b_ = _inside(sm, plo, phi), _inside(pm, slo, shi)
        name = f"{key[0].split(':')[-1]} {key[1]} {key[2]}"

        def fmt(m, lo, hi, status):
            return f"{m:.4g} [{lo:.4g}, {hi:.4g}]" if m is not None else status

        print(f"{name:44} {fmt(pm, plo, phi, st):32} {fmt(sm, slo, shi, s['status']):32} "
              f"{str(a):>6} {str(b_):>6}")
        if a is not None:
            both += 1
            agree += bool(a and b_)
    print()
    print(f"wall time: sweep {sweep_s:.1f} s / profile one by one {profile_s:.1f} s = "
          f"{sweep_s / profile_s:.2f}")
    print(f"medians inside each other's 95% CI: {agree} of {both} jobs measured both ways")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

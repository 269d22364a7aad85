"""The README's worked example, measured: calibrate a Raspberry Pi 4 from ten NAS-Bench-201
networks timed on it (examples/nb201/: the published network definition and the published
TFLite latencies, threads not stated), then screen a search space with the calibration.

    .venv/bin/python benchmarks/predict_nb201.py [--networks 300] [--write]

Prints (1) the calibration's nested leave-one-out per network next to what the shipped Pi 4
calibration predicts for the same network at the same thread count (TFLite's default: one
thread), with median |error|, share within +-25 %, Spearman, and the 90 % interval's coverage
and width; (2) screening speed: networks per second of ``edgeprof.predict_many`` over
``--networks`` random NAS-Bench-201 cells (random architectures, uniform over the five edge
operations; their latencies are not known, so this part times the screening only), after a
first network, median and spread of ``--repeats`` runs, each over networks of its own (drawn
afresh, so that no run replays a cell another run's walks recorded: the torch walk reuses
what it learnt of a block, edgeprof/profilers/estimate/torch_memo.py), and whether the
figures equal the one-by-one ``edgeprof.predict`` path and the walk without that reuse.
``--write`` saves the table to benchmarks/results/predict_nb201.txt.

A cell whose output node has only "none" edges is not drawn: examples/nb201/nb201.py returns
no tensor for it (None), which the next cell cannot take.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.util
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NB201 = ROOT / "examples" / "nb201"
OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")


def random_arch(rng: random.Random) -> str:
    while True:
        arch = "+".join("|" + "|".join(f"{rng.choice(OPS)}~{j}" for j in range(i)) + "|"
                        for i in (1, 2, 3))
        if not arch.endswith("|none~0|none~1|none~2|"):  # (see the module docstring)
            return arch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()

    import edgeprof
    from scipy.stats import spearmanr

    lines = [f"$ .venv/bin/python benchmarks/predict_nb201.py --networks {args.networks} "
             f"--repeats {args.repeats}",
             f"date {dt.date.today()}, host {platform.processor() or platform.machine()}, "
             f"load average {os.getloadavg()[0]:.2f} (1 min) at the start", ""]
    csv_path = NB201 / "raspberry_pi_4_tflite.csv"
    rows = list(csv.DictReader(csv_path.open()))
    with tempfile.TemporaryDirectory() as d:
        cal, path, summary = edgeprof.calibrate_measurements(
            csv_path, "raspberry_pi_4", "tflite", out=Path(d) / "nb201.json")
        cv = summary["cv"]
        shipped = {}
        for r in rows:
            p = edgeprof.predict(str(NB201 / r["model"]), "raspberry_pi_4", "tflite",
                                 threads=1, input_shapes=[(1, 3, 32, 32)],
                                 calibration=edgeprof.__path__[0] + "/profilers/predict/data/"
                                 "calibrations/raspberry_pi_4--published.json")
            shipped[r["model"]] = p.value_ms
        lines.append("1. calibrate --measurements examples/nb201/raspberry_pi_4_tflite.csv "
                     f"(10 rows, TFLite, threads not stated -> {summary['threads']}): "
                     f"{summary['learned']}")
        lines.append(f"{'network':22s} {'measured ms':>11s} {'nested LOO ms':>13s} {'error':>7s}"
                     f" {'shipped Pi 4 cal. ms':>20s} {'error':>7s}")
        errs_ship = []
        for e in cal.cv["errors"]:
            s = shipped[e["model"]]
            errs_ship.append((s - e["measured_ms"]) / e["measured_ms"])
            lines.append(f"{e['model']:22s} {e['measured_ms']:11.2f} {e['predicted_ms']:13.2f} "
                         f"{100 * e['error']:+6.0f}% {s:20.2f} {100 * errs_ship[-1]:+6.0f}%")
        meas = [e["measured_ms"] for e in cal.cv["errors"]]
        rho_ship = spearmanr(meas, [shipped[e["model"]] for e in cal.cv["errors"]]).statistic
        lines.append(f"nested leave-one-out: median |error| {100 * cv['median_abs_error']:.1f} %, "
                     f"within +-25 % {100 * cv['within_25']:.0f} %, Spearman "
                     f"{cv['spearman']:.3f}, 90 % interval coverage "
                     f"{100 * cv['coverage']:.0f} %, width {cv['median_width']:.2f}x")
        lines.append(f"shipped Pi 4 calibration at 1 thread: median |error| "
                     f"{100 * statistics.median(abs(x) for x in errs_ship):.1f} %, within +-25 % "
                     f"{100 * sum(abs(x) <= 0.25 for x in errs_ship) / len(errs_ship):.0f} %, "
                     f"Spearman {rho_ship:.3f}")
        lines.append("")

        # ---- screening speed --------------------------------------------------------------
        spec = importlib.util.spec_from_file_location("nb201", NB201 / "nb201.py")
        nb = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(nb)
        rng = random.Random(201)
        runs = [[random_arch(rng) for _ in range(args.networks)] for _ in range(args.repeats)]
        shape = [(1, 3, 32, 32)]
        pred = edgeprof.Predictor("raspberry_pi_4", "tflite", calibration=path)
        pred(nb.network(random_arch(rng)), input_shapes=shape)  # the first: imports, caches
        rates, values, build_rates = [], None, []
        for archs in runs:
            t0 = time.perf_counter()
            nets = [nb.network(a) for a in archs]  # the user's model code (random init)
            build_rates.append(len(archs) / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            out = edgeprof.predict_many(nets, "raspberry_pi_4", "tflite", calibration=path,
                                        input_shapes=shape)
            rates.append(len(archs) / (time.perf_counter() - t0))
            values = [p.value_ms for p in out]
        one = [edgeprof.predict(nb.network(a), "raspberry_pi_4", "tflite", calibration=path,
                                input_shapes=shape).value_ms for a in archs[:50]]
        same = one == values[:50]
        try:  # the same figures from the walk without its block memo
            from edgeprof.profilers.estimate import torch_memo
        except ImportError:  # (a tree before the memo)
            torch_memo = None
        unmemoised = "no block memo in this tree"
        if torch_memo is not None:
            torch_memo.ENABLED[0] = False
            try:
                plain = [p.value_ms for p in edgeprof.predict_many(
                    [nb.network(a) for a in archs[:50]], "raspberry_pi_4", "tflite",
                    calibration=path, input_shapes=shape)]
            finally:
                torch_memo.ENABLED[0] = True
            unmemoised = plain == values[:50]
        both = 1 / (1 / statistics.median(rates) + 1 / statistics.median(build_rates))
        lines.append(f"2. screening: edgeprof.predict_many over {len(archs)} random NAS-Bench-201 "
                     f"networks, {args.repeats} runs (each over networks of its own) after the "
                     f"first network")
        lines.append(f"edgeprof (estimate + prediction) networks/s: median "
                     f"{statistics.median(rates):.1f} (min {min(rates):.1f}, max "
                     f"{max(rates):.1f}); 15,625 cells in "
                     f"{15625 / statistics.median(rates) / 60:.1f} min; one-by-one figures "
                     f"identical on the first 50: {same}; identical without the walk's block "
                     f"memo: {unmemoised}")
        lines.append(f"the networks' own construction (nb201.py, torch's random init): "
                     f"{statistics.median(build_rates):.1f}/s; both together {both:.1f}/s")
    text = "\n".join(lines)
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "predict_nb201.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Leave-one-out error of the shipped board calibrations, fitted only to
edgeprof/profilers/predict/data/device_measurements_train.csv (published measurements).

    .venv/bin/python benchmarks/predict_boards.py [--write]

Rebuilds each board's calibration from the training file (estimating every rebuilt model
on the board's descriptor), prints per board: rows used / left out, median |error|, share
within +-25 %, Spearman of the leave-one-out predictions, then every row. ``--write``
also rewrites the shipped calibration files and the uncalibrated prior, and saves this
table to benchmarks/results/predict_boards.txt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeprof.profilers.predict.boards import build_all  # noqa: E402


def table(built) -> str:
    lines = ["board            rows used  left out  median |err|  within +-25%  Spearman  "
             "90% interval: coverage, width  fit (grouping, per-inference ms, per-layer ms "
             "compute/memory)",
             "-" * 150]
    for t, (cal, skipped) in built.items():
        cv, p = cal.cv, cal.parameters
        rho = f"{cv['spearman']:.2f}" if cv["spearman"] is not None else "-"
        lines.append(f"{t:16s} {cv['n']:9d} {len(skipped):9d} {100 * cv['median_abs_error']:11.0f} %"
                     f" {100 * cv['within_25']:11.0f} % {rho:>9s}  {100 * cv['coverage']:17.0f} %,"
                     f" {cv['median_width']:5.2f}x  {p['grouping']}, "
                     f"{p['per_inference_ms']:.3g}, {p['per_layer_ms']:.3g}/"
                     f"{p.get('per_memory_layer_ms', p['per_layer_ms']):.3g}")
    lines.append("")
    lines.append("row  board            model                 family          prec  measured ms  "
                 "LOO predicted ms  error")
    for t, (cal, skipped) in built.items():
        for e in cal.cv["errors"]:
            lines.append(f"{e['id']:3d}  {t:16s} {e['model']:21s} {e['family']:15s} "
                         f"{next(s['precision'] for s in cal.samples if s['id'] == e['id']):5s} "
                         f"{e['measured_ms']:11.4g} {e['predicted_ms']:17.4g} "
                         f"{100 * e['error']:+6.0f} %")
        for s in skipped:
            lines.append(f"{s['id']:3d}  {t:16s} {s['model'][:40]:40s} {s['reason'][:60]}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    built = build_all(write=args.write)
    text = table(built)
    print(text)
    if args.write:
        out = Path(__file__).parent / "results" / "predict_boards.txt"
        out.write_text("$ .venv/bin/python benchmarks/predict_boards.py --write\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

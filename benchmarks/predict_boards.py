"""Leave-one-out error of the shipped board calibrations, fitted only to
edgeprof/profilers/predict/data/device_measurements_train.csv (published measurements).

    .venv/bin/python benchmarks/predict_boards.py [--write]

Rebuilds each board processor's calibration from the training file (rows read as
edgeprof/profilers/predict/data/board_rows.toml says; every rebuilt model estimated on that
processor's view of the board) and prints per calibration, from *nested* cross-validation
(each row predicted by a fit to the others, the grouping and shrink chosen again without it
-- one row held out at a time up to 30 rows, a tenth at a time above --, by the method the
predictor would use for it: ``calibrated`` where its runtime and precision keep
other rows, else a precision or runtime transfer): rows used / left out, median |error|,
share within +-25 %, Spearman, and how often the 90 % interval the predictor would give
held the truth and its median width (high/low); then the same for the rows predicted by the
calibrated method alone and by transfers, then every row. ``--write`` also rewrites the
shipped calibration files and the uncalibrated prior, and saves this table to
benchmarks/results/predict_boards.txt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeprof.profilers.predict.boards import build_all  # noqa: E402


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _stats(cal, keep) -> tuple[int, str, str, str]:
    import numpy as np
    from scipy.stats import spearmanr

    es = [e for e in cal.cv["errors"] if keep(e.get("method", "calibrated"))]
    if not es:
        return 0, "-", "-", "-"
    rel = np.asarray([abs(e["error"]) for e in es])
    y = [e["measured_ms"] for e in es]
    p = [e["predicted_ms"] for e in es]
    rho = f"{spearmanr(y, p).statistic:.2f}" if len(es) > 2 else "-"
    return len(es), f"{100 * np.median(rel):.0f} %", f"{100 * np.mean(rel <= 0.25):.0f} %", rho


def table(built) -> str:
    head = (f"{'calibration':30s} {'rows':>4s} {'left out':>8s}  {'rows':13s} {'n':>3s} "
            f"{'median |err|':>12s} {'within +-25%':>12s} {'Spearman':>8s}  "
            f"{'90% interval: coverage, width':>29s}")
    lines = ["nested cross-validation; 'calibrated': rows whose runtime and precision keep other "
             "rows; 'transfer': a precision or runtime the other rows never ran", head,
             "-" * len(head)]
    for t, (cal, skipped) in built.items():
        cv = cal.cv
        for i, (label, keep, sfx) in enumerate((
                ("all", lambda m: True, ""),
                ("calibrated", lambda m: m == "calibrated", "_calibrated"),
                ("transfer", lambda m: m != "calibrated", "_transfer"))):
            n, med, w25, rho = _stats(cal, keep)
            if n == 0:
                continue
            width = cv.get(f"median_width{sfx}")
            interval = (f"{_pct(cv.get(f'coverage{sfx}')):>6s}, "
                        + (f"{width:5.2f}x" if width is not None else "-"))
            lines.append(f"{t if i == 0 else '':30s} {cv['n'] if i == 0 else '':>4} "
                         f"{len(skipped) if i == 0 else '':>8}  {label:13s} {n:3d} {med:>12s} "
                         f"{w25:>12s} {rho:>8s}  {interval:>29s}")
    lines.append("")
    lines.append("per (calibration, runtime family): nested cross-validation of its rows")
    lines.append(f"  {'calibration':30s} {'family':18s} {'n':>3s} {'median |err|':>12s} "
                 f"{'within +-25%':>12s} {'90% interval: coverage, width':>29s}")
    for t, (cal, _) in built.items():
        by: dict[str, list] = {}
        for e in cal.cv["errors"]:
            by.setdefault(e["family"], []).append(e)
        for fam, es in sorted(by.items(), key=lambda kv: -len(kv[1])):
            import statistics
            rel = [abs(e["error"]) for e in es]
            held = [e.get("interval_held") for e in es if e.get("interval_held") is not None]
            widths = [e["interval_width"] for e in es if e.get("interval_width")]
            lines.append(f"  {t:30s} {fam:18s} {len(es):3d} "
                         f"{100 * statistics.median(rel):11.0f}% "
                         f"{100 * sum(r <= 0.25 for r in rel) / len(rel):11.0f}% "
                         + (f"{100 * sum(held) / len(held):21.0f} %, "
                            f"{statistics.median(widths):5.2f}x" if held else ""))
    lines.append("")
    lines.append("threads: serial share fitted per board from its rows of one runtime, build, "
                 "precision and model at 1 thread and at all the big cores")
    for t, (cal, _) in built.items():
        for fam, v in (cal.parameters.get("serial_share_fit") or {}).items():
            lines.append(f"  {t:30s} {fam:12s} serial share "
                         f"{cal.parameters['serial_share'][fam]:.3f} from {v['n_pairs']} "
                         f"pairs (median speedup {v['median_speedup']:.2f}x)")
    lines.append("")
    lines.append("fit per board (all rows; chosen by leave-one-out): grouping, shrink, "
                 "per-inference ms, per-layer ms compute/memory, theta per class")
    for t, (cal, _) in built.items():
        p = cal.parameters
        theta = {}
        for c, v in p["efficiency_multiplier"].items():
            theta.setdefault(round(v, 3), []).append(c)
        lines.append(f"  {t:30s} {p['grouping']}, shrink {p.get('shrink', 1.0):g}, "
                     f"{p['per_inference_ms']:.3g}, {p['per_layer_ms']:.3g}/"
                     f"{p.get('per_memory_layer_ms', p['per_layer_ms']):.3g}; "
                     + ", ".join(f"{'/'.join(cs)} {v:.3g}" for v, cs in theta.items()))
    lines.append("")
    lines.append(f"row  {'calibration':30s} model                 family          prec  measured ms  "
                 "LOO predicted ms  error  method              chosen without the row")
    for t, (cal, skipped) in built.items():
        for e in cal.cv["errors"]:
            lines.append(f"{e['id']:3d}  {t:30s} {e['model']:21s} {e['family']:15s} "
                         f"{next(s['precision'] for s in cal.samples if s['id'] == e['id']):5s} "
                         f"{e['measured_ms']:11.4g} {e['predicted_ms']:17.4g} "
                         f"{100 * e['error']:+6.0f} %  {e.get('method', ''):19s} "
                         f"{e.get('chosen', '')}")
        for s in skipped:
            lines.append(f"{s['id']:3d}  {t:30s} {s['model'][:40]:40s} {s['reason'][:60]}")
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

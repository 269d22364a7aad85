"""Leave-one-out error of the shipped LLM calibration, fitted only to
edgeprof/profilers/predict/data/llm/llm_measurements_train.csv (20 published rows).

    .venv/bin/python benchmarks/predict_llm.py [--write]

Refits the calibration from the training file (bytes and MACs per token from edgeprof's
estimator for the preset and format each row is read as), prints what was fitted per
(target, device) and per runtime, then every row's leave-one-out prediction and the median
|pred/meas - 1| per board. ``--write`` also rewrites the shipped calibration
(profilers/predict/data/llm/llm--published.json) and saves the tables to
benchmarks/results/predict_llm.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeprof.profilers.predict.llm import (SHIPPED_FILE, build_calibration,  # noqa: E402
                                            write_calibration)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def tables(cal: dict) -> str:
    out = ["## Fitted parameters (per target/device; runtimes: their own fraction, overhead, "
           "efficiency)", "",
           "| target/device | stage | rows | fitted from | base | per runtime | LOO sigma "
           "(own / pooled) |", "|---|---|---|---|---|---|---|"]
    for key, e in cal["entries"].items():
        d, p = e["decode"], e["prefill"]
        if d:
            base = (f"fraction {d['base']['bandwidth_fraction']:.3f} of "
                    f"{e['peak_bandwidth'] / 1e9:.1f} GB/s, "
                    f"{1e3 * d['base']['per_layer_s']:.3f} ms/layer"
                    + ("" if d["overhead_identified"] else " (not identifiable: one model size)"))
            rts = "; ".join(f"{rt} {r['bandwidth_fraction']:.3f}, {1e3 * r['per_layer_s']:.3f} ms"
                            f" (x{r['factor']:.2f}, n={r['n']})"
                            for rt, r in d["runtimes"].items())
            out.append(f"| {key} | decode | {d['n']} | {', '.join(d['models'])} | {base} | "
                       f"{rts} | {'-' if d['sigma_own'] is None else round(d['sigma_own'], 3)}"
                       f" / {d['sigma_pooled']:.3f} |")
        if p:
            rts = "; ".join(f"{rt} {r['efficiency']:.3f} (x{r['factor']:.2f}, n={r['n']})"
                            for rt, r in p["runtimes"].items())
            out.append(f"| {key} | prefill | {p['n']} | {', '.join(p['models'])} | efficiency "
                       f"{p['base']['efficiency']:.3f} of {'/'.join(p['precisions'])} peak | "
                       f"{rts} | {'-' if p['sigma_own'] is None else round(p['sigma_own'], 3)}"
                       f" / {p['sigma_pooled']:.3f} |")
    pr = cal["prior"]
    out += ["", f"Prior (uncalibrated boards, `estimated`): fraction {pr['bandwidth_fraction']:.3f}"
            f" (range {pr['fraction_range'][0]:.3f}-{pr['fraction_range'][1]:.3f}), prefill "
            f"efficiency {pr['efficiency']:.3f}, per-layer overhead "
            + (", ".join(f"{d} {1e3 * v:.3f} ms" for d, v in pr["per_layer_s"].items()) or "0")
            + f", interval x/ {pr['spread']:.2f}", "",
            "## Leave-one-out, per row (each row predicted by a fit to the others)", "",
            "| row | target/device | runtime | stage | model | measured tok/s | LOO predicted | "
            "provenance | error |", "|---|---|---|---|---|---|---|---|---|"]
    for r in cal["cv"]["rows"]:
        out.append(f"| {r['id']} | {r['target']}/{r['device']} | {r['runtime']} | {r['stage']} | "
                   f"{r['model']} | {r['measured']:.4g} | {r['predicted']:.4g} | "
                   f"{r['provenance']} | {100 * r['error']:+.0f} % |")
    for s in cal["left_out"]:
        out.append(f"| {s['id']} | - | - | - | {s['model']} | - | - | left out | {s['reason']} |")
    out += ["", "## Leave-one-out, per board: median \\|pred/meas - 1\\|", "",
            "| board | rows | median error | within +-25 % |", "|---|---|---|---|"]
    for b in cal["cv"]["boards"]:
        out.append(f"| {b['board']} | {b['n']} | {_pct(b['median_abs_error'])} | "
                   f"{_pct(b['within_25'])} |")
    out += ["", "Rows of a board seen once (Jetson Nano CPU, GPU) are predicted in leave-one-out "
            "by the prior (`estimated`): their error is the uncalibrated error. The Pi decode "
            "rows are one model (TinyLlama q8_0) at one published rate per board, so their 0 % "
            "says nothing about other model sizes; intervals therefore use the larger of a "
            "board's own and the pooled leave-one-out sigma of that stage."]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {SHIPPED_FILE.name} and "
                    "benchmarks/results/predict_llm.md")
    args = ap.parse_args()
    cal = write_calibration() if args.write else build_calibration()
    text = tables(cal)
    print(text)
    if args.write:
        out = Path(__file__).parent / "results" / "predict_llm.md"
        head = (f"# LLM prediction: leave-one-out on the published training rows\n\n"
                f"`.venv/bin/python benchmarks/predict_llm.py --write` "
                f"({dt.date.today().isoformat()}; deterministic, no timing involved)\n\n"
                f"{cal['note']}\n\n")
        out.write_text(head + text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

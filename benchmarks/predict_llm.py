"""Leave-one-out error and interval coverage of the shipped LLM calibration, fitted only to
edgeprof/profilers/predict/data/llm/llm_measurements_train.csv (published rows, each read as
data/llm/rows.toml says).

    .venv/bin/python benchmarks/predict_llm.py [--write]

Refits the calibration from the training file (bytes and MACs per token from edgeprof's
estimator for the preset and format each row is read as), prints what was fitted per
(target, device), runtime and build era, then every row's leave-one-out prediction and, per
board and stage (decode, prefill): the median |pred/meas - 1|, the share within +-25 %
(decode) / +-50 % (prefill), and how often the stated 80 % interval held the truth with its
median width (high/low). The leave-one-out is nested: each held-out row's interval is the one
a fit without it states; a row's twins (the same model, format and stage on the same board and
runtime at another build of the same era) are held out with it. ``--write`` also rewrites the shipped calibration
(profilers/predict/data/llm/llm--published.json) and saves the tables to
benchmarks/results/predict_llm.md. Deterministic: no timing involved.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeprof.profilers.predict.llm import (INTERVAL_GOAL, SHIPPED_FILE,  # noqa: E402
                                            build_calibration, write_calibration)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _sig(f: dict) -> str:
    own = "-" if f.get("sigma_own") is None else f"{f['sigma_own']:.3f}"
    return (f"{f['sigma']:.3f} (own {own} of {f.get('sigma_rows', 0)} rows, pooled "
            f"{f['sigma_pooled']:.3f}: {f.get('sigma_pooled_from', '')})")


def _eras(r: dict) -> str:
    eras = r.get("eras") or {}
    if len(eras) < 2:
        return ""
    return " [" + ", ".join(f"{e} x{v['factor']:.2f}" for e, v in eras.items()) + "]"


def fitted(cal: dict) -> list[str]:
    out = ["## Fitted parameters", "",
           "Per target/device (fractions of the peaks of the mode each row ran in), runtime "
           "and build era (factor on the runtime's level, only where a board has rows of two "
           "eras). Thread law: prefill Amdahl serial share, decode saturating thread count "
           "(priors unless rows at several thread counts fit them).", "",
           "| target/device | stage | rows | models | modes | base | per runtime (builds) | "
           "threads | sigma |", "|---|---|---|---|---|---|---|---|---|"]
    for key, e in cal["entries"].items():
        d, p = e["decode"], e["prefill"]
        if d:
            base = (f"fraction {d['base']['bandwidth_fraction']:.3f} of "
                    f"{e['peak_bandwidth'] / 1e9:.1f} GB/s (base mode), "
                    f"{1e3 * d['base']['per_layer_s']:.3f} ms/layer"
                    + ("" if d["overhead_identified"] else " (not identifiable)"))
            rts = "; ".join(
                f"{rt} {r['bandwidth_fraction']:.3f}, {1e3 * r['per_layer_s']:.3f} ms "
                f"(n={r['n']}: {', '.join(r.get('builds') or []) or '?'}){_eras(r)}"
                for rt, r in d["runtimes"].items())
            th = d.get("threads") or {}
            out.append(f"| {key} | decode | {d['n']} | {', '.join(d['models'])} | "
                       f"{', '.join(d.get('modes') or [])} | {base} | {rts} | "
                       f"n_sat {th.get('saturation_threads', '-')} "
                       f"({'fitted' if th.get('fitted') else 'prior'}) | {_sig(d)} |")
        if p:
            rts = "; ".join(
                f"{rt} {r['efficiency']:.3f} (n={r['n']}: "
                f"{', '.join(r.get('builds') or []) or '?'}){_eras(r)}"
                for rt, r in p["runtimes"].items())
            th = p.get("threads") or {}
            out.append(f"| {key} | prefill | {p['n']} | {', '.join(p['models'])} | "
                       f"{', '.join(p.get('modes') or [])} | efficiency "
                       f"{p['base']['efficiency']:.3f} of {'/'.join(p['precisions'])} peak | "
                       f"{rts} | serial {th.get('serial_share', '-')} "
                       f"({'fitted' if th.get('fitted') else 'prior'}) | {_sig(p)} |")
    pr = cal["prior"]
    kinds = "; ".join(f"{k}: fraction {v['bandwidth_fraction']:.3f}, efficiency "
                      f"{v['efficiency']:.3f} ({', '.join(v['boards'])})"
                      for k, v in (pr.get("by_kind") or {}).items())
    out += ["", f"Prior (a board without rows of that stage and no calibrated board of the same "
            f"core, `estimated`): per processor kind: {kinds}; interval x/ "
            f"{pr['spread']:.2f} (leave-one-out of the rows the prior predicted: x/ "
            f"{pr.get('spread_uncapped', pr['spread']):.2f}, n={pr.get('spread_n', 0)}).", "",
            "Extrapolation sigmas (added in quadrature per way a prediction leaves what its "
            "rows covered; fitted from the held-out rows that made that extrapolation, never "
            "below the 0.25 prior):", ""]
    for st, kinds_ in (cal.get("extrapolation_sigma") or {}).items():
        out.append(f"- {st}: " + ", ".join(
            f"{k} {v['sigma']:.2f} ({'n=' + str(v['n']) if v['fitted'] else 'prior'})"
            for k, v in kinds_.items()))
    out += ["", "Builds learned: " + "; ".join(
        f"{rt} " + ", ".join(f"{b['label']}" + (f" ({b['date']}{'~' if b.get('approx') else ''})"
                                                 if b.get("date") else "")
                             for b in bs)
        for rt, bs in (cal.get("builds") or {}).items())]
    return out


def loo_tables(cal: dict) -> list[str]:
    out = ["## Leave-one-out, per row (each row predicted by a fit to the others, its interval "
           "the one that fit states; rows of one measurement -- the same board, processor, "
           "runtime, build era, model, format and stage at another build -- held out "
           "together)", "",
           "| row | target/device | runtime | build | stage | model | format | measured tok/s | "
           "LOO predicted | 80 % interval | provenance | extrapolated | error |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in cal["cv"]["rows"]:
        prov = r["provenance"] + (f" (from {r['estimated_from']})" if r.get("estimated_from")
                                  else "")
        iv = (f"{r['low']:.4g}-{r['high']:.4g}{'' if r['covered'] else ' (missed)'}"
              if "low" in r else "-")
        mode = f":{r['mode']}" if r.get("mode") else ""
        out.append(f"| {r['id']} | {r['target']}{mode}/{r['device']} | {r['runtime']} | "
                   f"{r.get('build') or '-'} | {r['stage']} | {r['model']} | "
                   f"{r.get('format') or '-'} | {r['measured']:.4g} | {r['predicted']:.4g} | "
                   f"{iv} | {prov} | {', '.join(r.get('extrapolations') or []) or '-'} | "
                   f"{100 * r['error']:+.0f} % |")
    for s in cal["left_out"]:
        out.append(f"| {s['id']} | - | - | - | - | {s['model']} | - | - | - | - | left out | - | "
                   f"{s['reason']} |")
    goal = INTERVAL_GOAL
    out += ["", "## Leave-one-out, per board and stage", "",
            "Within: +-25 % for decode, +-50 % for prefill. Coverage: how often the 80 % "
            f"interval held the measured rate (goal >= {goal['coverage']:.0%}); width: median "
            f"high/low (goal <= {goal['median_width']:g}x).", "",
            "| board | stage | rows | median error | within | coverage | median width |",
            "|---|---|---|---|---|---|---|"]
    for b in cal["cv"]["boards"]:
        within = b.get("within")
        out.append(f"| {b['board']} | {b['stage']} | {b['n']} | {_pct(b['median_abs_error'])} | "
                   f"{_pct(within) if within is not None else '-'} | "
                   f"{_pct(b.get('coverage'))} | {_x(b.get('median_width'))} |")
    iv = cal["cv"].get("intervals") or {}
    out += ["", "## Intervals against the goal", ""]
    for st in ("decode", "prefill", "all"):
        r = iv.get(st)
        if not r:
            continue
        out.append(f"- {st}: coverage {_pct(r['coverage'])}, median width "
                   f"{_x(r['median_width'])} over {r['n']} held-out rows: "
                   + ("meets the goal" if r["meets_goal"] else "misses the goal: "
                      + "; ".join(r["why"])))
    out += ["", "What each board's rows cover (a held-out row outside it is a transfer: to "
            "another runtime, build era, model size, or, with no other row of its stage on "
            "the board, to the prior or a board of the same core; its interval is the wider "
            "one those transfers showed):", ""]
    cover: dict[tuple[str, str], list[dict]] = {}
    for s in cal["samples"]:
        cover.setdefault((f"{s['target']}/{s['device']}", s["stage"]), []).append(s)
    for (key, st), ss in sorted(cover.items()):
        rts = sorted({s["runtime"] for s in ss})
        out.append(f"- {key} {st}: {len(ss)} rows, {len({s['model'] for s in ss})} models, "
                   + "; ".join(f"{rt} builds " + (", ".join(sorted(
                       {(s.get('build') or {}).get('label') or '?' for s in ss
                        if s['runtime'] == rt})))
                       for rt in rts))
    return out


def tables(cal: dict) -> str:
    return "\n".join(fitted(cal) + [""] + loo_tables(cal))


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

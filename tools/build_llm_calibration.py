"""Builds the shipped LLM calibration (``edgeprof/profilers/predict/data/llm/llm--published.json``)
from the published training rows only (``data/llm/llm_measurements_train.csv``, each read as
``data/llm/rows.toml`` says: :func:`published_samples`).

Build-only: not installed (the wheel carries ``edgeprof/`` alone). It imports edgeprof's
run-time pieces -- the per-board fit and the prior (``llm.fit``), the leave-one-out and the
intervals' sigmas (``llm.crossval``, which ``edgeprof calibrate`` also runs on a host's
records) -- and adds what only the shipped file needs: how each published row is read
(``rows.toml``: :func:`map_row`, :func:`published_samples`), the nested leave-one-out that
holds a row's twins out with it (:func:`same_measurement`), the file's assembly
(:func:`build_calibration`, :func:`write_calibration`) and the tables printed. Run from the
repository root::

    .venv/bin/python tools/build_llm_calibration.py [--write]

prints the fitted parameters and the leave-one-out tables (``benchmarks/predict_llm.py``
prints the same and, with ``--write``, also saves them to benchmarks/results/predict_llm.md);
``--write`` rewrites the shipped file. Deterministic: no timing involved.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root, for edgeprof
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeprof.core.artifact import created_utc
from edgeprof.profilers.predict.llm.builds import (BUILD_ERAS, learned_builds,  # noqa: E402
                                                   normalize_build)
from edgeprof.profilers.predict.llm.constants import (ASSUMED_GEN,  # noqa: E402
                                                      ASSUMED_PROMPT, DATA, FORMAT,
                                                      FORMAT_VERSION, INTERVAL_GOAL,
                                                      MAX_SPREAD, PRIOR_SPREAD_ROWS,
                                                      SHIPPED_FILE, TRAIN_CSV)
from edgeprof.profilers.predict.llm.crossval import (fit_all, attach_cv,  # noqa: E402
                                                     cv_table, interval_report,
                                                     leave_one_out)
from edgeprof.profilers.predict.llm.files import strip_samples, edgeprof_version  # noqa: E402
from edgeprof.profilers.predict.llm.formats import row_format  # noqa: E402
from edgeprof.profilers.predict.llm.inputs import (DECODE_SATURATION_PRIOR,  # noqa: E402
                                                   DECODE_SATURATION_SOURCE,
                                                   PREFILL_SERIAL_PRIOR,
                                                   PREFILL_SERIAL_SOURCE, board_of,
                                                   registry_target, sample_from)

#: how each published row is read
ROWS_FILE = DATA / "rows.toml"
#: the CSV's metric -> the stage it measures (ttft_ms: the prompt's prefill, read as a rate)
METRICS = {"prefill_tok_s": "prefill", "decode_tok_s": "decode", "ttft_ms": "prefill"}


# ------------------------------------------------------------------ the published rows
@dataclass(frozen=True)
class RowMap:
    """How one published row is read (a ``[[row]]`` of ``rows.toml``): the target (and
    mode) and device it measured, the runtime, the preset and format that rebuild its bytes
    (None: left out, ``note`` says why), its build where ``runtime_version`` is not one, its
    threads where the CSV states none."""

    match: tuple[tuple[str, str], ...]
    target: str
    device: str
    runtime: str
    preset: str | None
    fmt: str | None
    note: str = ""
    build: str | None = None
    threads: str | int | None = None

    def matches(self, row: dict[str, str]) -> bool:
        return all(row.get(k) == v for k, v in self.match)


@lru_cache(maxsize=4)
def _row_maps(path: str) -> tuple[RowMap, ...]:
    raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for i, r in enumerate(raw.get("row") or []):
        if not isinstance(r.get("match"), dict) or not r["match"]:
            raise ValueError(f"{path}: [[row]] {i + 1} has no match table")
        left = r.get("left_out")
        out.append(RowMap(match=tuple(sorted((str(k), str(v)) for k, v in r["match"].items())),
                          target=r["target"], device=r["device"], runtime=r["runtime"],
                          preset=None if left else r["preset"],
                          fmt=None if left else r["format"],
                          note=f"left out: {left}" if left else r.get("note", ""),
                          build=r.get("build"), threads=r.get("threads")))
    return tuple(out)


def row_maps(path: str | os.PathLike = ROWS_FILE) -> tuple[RowMap, ...]:
    """The ``[[row]]`` tables of ``rows.toml``."""
    return _row_maps(str(path))


def map_row(row: dict[str, str], maps: tuple[RowMap, ...] | None = None) -> RowMap:
    """The one ``[[row]]`` whose match the CSV row satisfies (ValueError: none or several)."""
    maps = row_maps() if maps is None else maps
    hits = [m for m in maps if m.matches(row)]
    if len(hits) != 1:
        key = {k: row.get(k) for k in ("device", "model", "quant_format", "runtime_version",
                                       "metric")}
        raise ValueError(f"{'no' if not hits else len(hits)} [[row]] of {ROWS_FILE.name} "
                         f"match{'es' if len(hits) == 1 else ''} the training row {key}")
    return hits[0]


def training_rows() -> list[dict[str, str]]:
    with TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def row_key(row: dict[str, str]) -> str:
    """A row's identity, from its content (what the fit's samples and leave-one-out name)."""
    return " | ".join(row.get(k, "") for k in ("device", "model", "quant_format",
                                                 "runtime_version", "metric"))


def _row_threads(row: dict[str, str], m: RowMap, board: dict[str, Any]) -> int | None:
    if board["kind"] != "cpu":
        return None
    cell = (row.get("threads") or "").strip()
    if cell:
        return int(re.search(r"\d+", cell).group(0))
    if m.threads in (None, "cores"):
        return board["n_ref"]
    return int(m.threads)


def _tokens(cell: str | None, assumed: int) -> int:
    """A CSV token count: the cell where it is a whole number, else the assumption
    (llama-bench's pp512 / tg128 where a source states none, or hedges: '512?')."""
    cell = (cell or "").strip()
    return int(cell) if cell.isdigit() and int(cell) > 0 else assumed


def row_rate(row: dict[str, str], prompt_tokens: int) -> tuple[str, float]:
    """(stage, tokens/s) of a CSV row: prefill_tok_s and decode_tok_s as they are; ttft_ms,
    a time to first token, as the prompt's prefill rate (prompt tokens / TTFT: the first token
    is sampled from the prefill's logits, as edgeprof's TTFT is)."""
    metric, value = row["metric"], float(row["value"])
    if metric not in METRICS:
        raise ValueError(f"training row metric {metric!r} is not one of {', '.join(METRICS)}")
    if metric == "ttft_ms":
        return "prefill", prompt_tokens / (value / 1e3)
    return METRICS[metric], value


def published_samples() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(samples, left-out rows) of the training file, figures from the estimator (for the
    row's prompt and generated tokens where it states them, else pp512 / tg128)."""
    from edgeprof.profilers.estimate.llm import estimate_llm
    from edgeprof.zoo.llm import PRESETS

    rows = training_rows()
    maps = row_maps()
    samples, skipped = [], []
    for i, row in enumerate(rows):
        m = map_row(row, maps)
        if m.preset is None:
            skipped.append({"id": i, "key": row_key(row), "model": row["model"],
                            "device": row["device"], "reason": m.note})
            continue
        target = registry_target(m.target)
        board = board_of(target, m.device)
        prompt = _tokens(row.get("prompt_tokens"), ASSUMED_PROMPT)
        est = estimate_llm(PRESETS[m.preset], row_format(m.fmt), prompt_tokens=prompt,
                           gen_tokens=_tokens(row.get("gen_tokens"), ASSUMED_GEN), depth=0,
                           target=target, device=m.device)
        stage, rate = row_rate(row, prompt)
        build = normalize_build(m.runtime, m.build or row["runtime_version"])
        build["raw"] = row["runtime_version"]
        samples.append(sample_from(
            sid=i, target=target, device=m.device, runtime=m.runtime, stage=stage,
            rate=rate, estimate=est, threads=_row_threads(row, m, board), build=build,
            key=row_key(row),
            model=m.preset, published_model=row["model"], published_device=row["device"],
            version=row["runtime_version"], source=row["source"], quote=row["quote"],
            metric=row["metric"], published_value=float(row["value"]), note=m.note))
    return samples, skipped




# ------------------------------------------------------------------ the shipped file
def same_measurement(s: dict[str, Any]) -> tuple:
    """What makes two published rows one measurement repeated: the same board and processor,
    runtime and build era, model, format and stage (another build of the same era measures
    the same within 7 %: test_builds_of_one_era_measured_the_same). Leave-one-out holds such
    rows out together, so a model measured at two builds is not predicted from its own twin:
    the errors are those of a model the fit has not seen."""
    return (s["target"], s["device"], s["runtime"], (s.get("build") or {}).get("era"),
            s.get("model"), s.get("format"), s["stage"])


def build_calibration() -> dict[str, Any]:
    """The shipped calibration, fitted only to the training file (deterministic: the same
    file gives the same numbers; ``created_utc`` aside)."""
    samples, skipped = published_samples()
    cal = fit_all(samples, per_runtime=False)
    loo = leave_one_out(samples, per_runtime=False, nested=True, group=same_measurement)
    attach_cv(cal, loo)
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "name": "llm--published",
            "entries": cal["entries"], "prior": cal["prior"],
            "extrapolation_sigma": cal["extrapolation_sigma"],
            "builds": learned_builds(samples), "build_eras": BUILD_ERAS,
            "cv": {"method": "leave-one-out", "grouped": (
                       "rows of one board, processor, runtime, build era, model, format and "
                       "stage (one measurement at several builds of an era) held out "
                       "together"), "n": len(loo), "rows": loo,
                   "boards": cv_table(loo), "intervals": interval_report(loo)},
            "samples": strip_samples(samples), "left_out": skipped,
            "assumptions": {"prompt_tokens": ASSUMED_PROMPT, "gen_tokens": ASSUMED_GEN,
                            "threads": {"prefill_serial_share": PREFILL_SERIAL_PRIOR,
                                        "prefill_source": PREFILL_SERIAL_SOURCE,
                                        "decode_saturation_threads": DECODE_SATURATION_PRIOR,
                                        "decode_source": DECODE_SATURATION_SOURCE}},
            "created_utc": created_utc(), "edgeprof_version": edgeprof_version(),
            "note": (f"fitted only to edgeprof/profilers/predict/data/llm/"
                     f"llm_measurements_train.csv ({len(samples)} rows used, {len(skipped)} left "
                     "out: " + "; ".join(f"{s['model']} ({s['device']}): {s['reason']}"
                                         for s in skipped)
                     + "); bytes and MACs per token from edgeprof's estimator for the preset "
                     "and format each row is read as (data/llm/rows.toml)")}


def write_calibration(path: str | os.PathLike = SHIPPED_FILE) -> dict[str, Any]:
    """Rebuild the shipped file (``python tools/build_llm_calibration.py --write``)."""
    from edgeprof.core.io import write_json

    cal = build_calibration()
    write_json(path, cal)
    return cal


def comparable(cal: dict[str, Any]) -> dict[str, Any]:
    """A calibration without its timestamp and version (to compare a re-fit to a file)."""
    return {k: v for k, v in json.loads(json.dumps(cal)).items()
            if k not in ("created_utc", "edgeprof_version")}


# ------------------------------------------------------------------ the tables printed
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
    share = pr.get("cpu_share") or {}
    out += ["", f"Prior (a board without rows of that stage, no other processor of the board "
            f"with decode rows and no calibrated board of the same core, `estimated`): per "
            f"processor kind: {kinds}; interval x/ {pr['spread']:.2f} (leave-one-out of the "
            f"rows the prior predicted: x/ {pr.get('spread_uncapped', pr['spread']):.2f}, "
            f"n={pr.get('spread_n', 0)}; fewer than {PRIOR_SPREAD_ROWS} rows: x/ "
            f"{MAX_SPREAD:g}). Decode from another processor of the board: its fraction, x "
            f"{share.get('ratio', 1.0):.3f} from an accelerator to the CPU (the CPU's share, "
            f"from {', '.join(share.get('boards') or []) or 'no board'}).", "",
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Rebuild the shipped LLM calibration from the "
                                 "published training rows and print its leave-one-out")
    ap.add_argument("--write", action="store_true", help=f"rewrite {SHIPPED_FILE.name}")
    args = ap.parse_args(argv)
    cal = write_calibration() if args.write else build_calibration()
    print(tables(cal))
    return 0


if __name__ == "__main__":
    sys.exit(main())

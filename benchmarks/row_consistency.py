"""How far the published board rows agree with themselves: the ceiling they put on any
predictor's "within +-25 %" (issue 30: "where a figure can't reach its goal from these rows,
say which rows limit it").

    .venv/bin/python benchmarks/row_consistency.py [--write]

Reads edgeprof/profilers/predict/data/device_measurements_train.csv the way the board fit
does (``tools/build_board_calibrations.readings``: board, processor, runtime family and
build, precision, model) and groups rows that name one configuration: the same board
processor, runtime family and build, precision, model (by its published name), input shape
and thread count as the row states it. Then:

* **duplicates that disagree**: a group whose slowest row is more than 1.25**2 = 1.5625x its
  fastest. One prediction cannot be within +-25 % of both, however it is made;
* **the ceiling**: for each group, the most rows one value can hold within +-25 % (a sliding
  window over the sorted latencies), summed over the groups: the share of rows *any*
  predictor that gives one figure per configuration can have within +-25 %;
* **precision inversions**: the same board, processor, runtime, model and threads, where a
  narrower precision (fp16, int8) is more than 1.25x *slower* than fp32. A predictor that
  never predicts a narrower format slower than fp32 misses one side.

Prints a table per board processor; ``--write`` saves it to
benchmarks/results/row_consistency.txt. Reads files only; nothing is fitted.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.build_board_calibrations import calibration_name, readings, training_rows  # noqa: E402

WINDOW = 1.25 ** 2  # a value within +-25 % of both ends: max/min <= 1.5625
NARROWER = ("fp16", "int8", "int8_static", "int8_dynamic", "int4_weight")


def _held(latencies: list[float]) -> int:
    """The most of ``latencies`` one value can hold within +-25 %."""
    xs = sorted(latencies)
    best, j = 0, 0
    for i, x in enumerate(xs):
        while xs[j] * WINDOW < x:
            j += 1
        best = max(best, i - j + 1)
    return best


def groups() -> dict[tuple, list[dict]]:
    from edgeprof.targets import get_target_registry

    reg = get_target_registry()
    raw = training_rows()
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in readings():
        row = raw[r["id"]]
        cal = calibration_name(reg.get(r["target"]), r["device"])
        key = (cal, r["family"], r["build"] or "", r["precision"], row["model"],
               row["input_shape"], row["threads"])
        out[key].append({"id": r["id"], "ms": float(row["latency_ms"]),
                         "source": row["source"].split(" ")[0]})
    return out


def table() -> str:
    gs = groups()
    lines = []
    per_cal: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    disagree = []
    for key, rows in gs.items():
        ms = [r["ms"] for r in rows]
        per_cal[key[0]][0] += len(rows)
        per_cal[key[0]][1] += _held(ms)
        if len(rows) > 1 and max(ms) / min(ms) > WINDOW:
            per_cal[key[0]][2] += 1
            disagree.append((max(ms) / min(ms), key, rows))
    lines.append("calibration                      rows  most within +-25 % by any one figure "
                 "per configuration  groups that disagree")
    total = held = 0
    for cal, (n, h, d) in sorted(per_cal.items()):
        total, held = total + n, held + h
        lines.append(f"{cal:32s} {n:4d}  {h:4d} ({100 * h / n:3.0f} %)"
                     f"{'':38s}{d:3d}")
    lines.append(f"{'all':32s} {total:4d}  {held:4d} ({100 * held / total:3.0f} %)")
    lines.append("")
    lines.append(f"configurations published more than once whose rows differ more than "
                 f"{WINDOW:.4g}x (max/min), most first:")
    for ratio, key, rows in sorted(disagree, key=lambda t: -t[0]):
        cal, family, build, precision, model, _, threads = key
        rs = ", ".join(f"row {r['id']} {r['ms']:g} ms ({r['source']})" for r in rows)
        lines.append(f"  {ratio:5.2f}x  {cal} {family}{'@' + build if build else ''} "
                     f"{precision} {model} [{threads}]: {rs}")
    lines.append("")
    lines.append("precision inversions (a narrower precision > 1.25x slower than fp32, same "
                 "board processor, runtime, build, model, input and threads):")
    by_config: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for key, rows in gs.items():
        cal, family, build, precision, model, shape, threads = key
        by_config[(cal, family, build, model, shape, threads)][precision] += [
            r["ms"] for r in rows]
    n_inv = 0
    for (cal, family, build, model, _, threads), precs in sorted(by_config.items()):
        if "fp32" not in precs:
            continue
        fp32 = math.exp(sum(math.log(x) for x in precs["fp32"]) / len(precs["fp32"]))
        for p in NARROWER:
            for x in precs.get(p, ()):
                if x > 1.25 * fp32:
                    n_inv += 1
                    lines.append(f"  {cal} {family}{'@' + build if build else ''} {model} "
                                 f"[{threads}]: {p} {x:g} ms vs fp32 {fp32:.4g} ms "
                                 f"({x / fp32:.2f}x)")
    if not n_inv:
        lines.append("  none")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    text = table()
    print(text)
    if args.write:
        out = Path(__file__).parent / "results" / "row_consistency.txt"
        out.write_text("$ .venv/bin/python benchmarks/row_consistency.py --write\n" + text
                       + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

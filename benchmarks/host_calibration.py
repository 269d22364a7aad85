"""Print this host's detected and calibrated figures as a table.

    .venv/bin/python benchmarks/host_calibration.py [--recalibrate] [--json]

Uses the same cached calibration as ``edgeprof`` (``--recalibrate`` measures again).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeprof.targets.host import (  # noqa: E402
    describe_host,
    host_calibration,
    target_from_calibration,
)


def _fmt(value: float, unit: str) -> str:
    if unit == "B/s":
        return f"{value / 1e9:,.2f} GB/s"
    if unit == "MAC/s":
        return f"{value / 1e9:,.2f} GMAC/s"
    if unit == "Hz":
        return f"{value / 1e9:.3f} GHz"
    if unit == "B":
        if value < 2**20:
            return f"{value / 1024:,.0f} KiB"
        return f"{value / 2**20:,.1f} MiB" if value < 2**30 else f"{value / 1e9:,.2f} GB"
    if unit == "W":
        return f"{value:,.1f} W"
    return f"{value:g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recalibrate", action="store_true", help="measure again, ignore the cache")
    ap.add_argument("--json", action="store_true", help="print the raw calibration record")
    args = ap.parse_args(argv)
    cal = host_calibration(recalibrate=args.recalibrate)
    if args.json:
        print(json.dumps(cal, indent=2, default=str))
        return 0
    t = target_from_calibration(cal)
    rows = [(name, _fmt(q.value, q.unit), q.source) for name, q in t.figures().items()]
    for p, reason in cal.get("unavailable", {}).items():
        rows.append((f"peak_{p}", "absent", reason))
    for p, g in cal.get("gemm", {}).items():
        for kernel, r in g["kernels"].items():
            value = (f"{r['macs_per_s'] / 1e9:,.2f} GMAC/s" if "macs_per_s" in r else "failed")
            detail = (f"n={r['n']}, best {r['best_s'] * 1e3:.2f} ms of {r['runs']}, "
                      f"median {r['median_s'] * 1e3:.2f} ms" if "n" in r else r.get("error", ""))
            rows.append((f"  {p}: {kernel}", value, detail))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(describe_host(cal))
    print(f"calibrated {cal['date']} in {cal['duration_s']:.1f} s "
          f"({'from cache ' + cal['cache']['path'] if cal['cache']['hit'] else 'just now'})")
    print(f"{'figure':<{w0}}  {'value':>{w1}}  source")
    print(f"{'-' * w0}  {'-' * w1}  {'-' * 6}")
    for name, value, source in rows:
        print(f"{name:<{w0}}  {value:>{w1}}  {source}")
    for w in cal.get("warnings", []):
        print(f"warning: {w}")
    print(f"supported precisions: {', '.join(t.supported_precisions)}")
    print(f"strategy: {t.strategy.precision}, {t.strategy.quantization_bits}-bit, "
          f"{t.strategy.pruning_type} pruning, {t.strategy.layout} - {t.strategy.reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

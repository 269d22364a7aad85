"""Size and render time of the HTML report for a ResNet-50-class profile (goals: <= 5 MB,
drawn in < 2 s in headless Chromium).

    .venv/bin/python benchmarks/html_report.py [--trials 5]

Profiles ResNet-50 (benchmarks/reference_models.py, batch 1, 3x224x224) on raspberry_pi_4
with torch_eager fp32 and int8 (measured here, --trace for the per-operator points) and
tensorrt (unavailable here: rows with a reason), renders report.html, and opens it in a
fresh headless Chromium per trial (cold: a new browser process each time), timing from
navigation to every chart and table drawn. Also the same page with the estimate's rows
repeated to 1,000 layers (the paged table's worst case). Prints one table.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()

    from edgeprof.api import profile
    from edgeprof.profilers.report.html import render_profile_html
    from tests.profilers.report.test_html import Chromium, chromium_binary

    t0 = time.perf_counter()
    report = profile(f"{ROOT / 'benchmarks' / 'reference_models.py'}:resnet50",
                     target="raspberry_pi_4", backends=["torch_eager", "tensorrt"],
                     precisions=["fp32", "int8"], trace=True,
                     run_options={"runs": 20, "min_time_s": 0.5, "max_time_s": 5})
    doc = report.to_dict()
    print(f"profiled ResNet-50 in {time.perf_counter() - t0:.1f} s "
          f"({len(doc['estimate']['layers'])} layers, {len(doc['runs'])} runs)", file=sys.stderr)
    big = copy.deepcopy(doc)
    base = big["estimate"]["layers"]
    big["estimate"]["layers"] = [{**base[i % len(base)], "layer": f"{base[i % len(base)]['layer']}"
                                  f".{i}"} for i in range(1000)]
    from plotly.offline import get_plotlyjs

    binary = chromium_binary()
    rows = []
    floor = ("<!DOCTYPE html><html><head><script>" + get_plotlyjs() + "</script></head><body>"
             "<script>document.documentElement.dataset.chartsReady = 'true'; document."
             "documentElement.dataset.tablesReady = 'true';</script></body></html>")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in (("ResNet-50 (torch_eager fp32/int8 --trace, tensorrt unavailable)", doc),
                        ("ResNet-50 rows repeated to 1,000 layers", big),
                        ("floor: an empty page with plotly.js inlined, nothing drawn", None)):
            t = time.perf_counter()
            html = render_profile_html(d) if d is not None else floor
            py_s = time.perf_counter() - t
            page = Path(tmp) / "report.html"
            page.write_text(html, encoding="utf-8")
            times = []
            for _ in range(args.trials):
                b = Chromium(binary)
                try:
                    times.append(b.open(page))
                    assert not b.errors(), b.errors()
                    assert not b.remote_requests(), b.remote_requests()
                finally:
                    b.close()
            rows.append((name, len(d["estimate"]["layers"]) if d else 0, page.stat().st_size, py_s,
                         statistics.median(times), min(times), max(times)))
    print(f"HTML report: size and cold render time in headless Chromium "
          f"({Path(binary).name}), {args.trials} trials each, fresh browser per trial; "
          f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'page':<66} {'layers':>6} {'size MB':>8} {'<=5 MB':>6} {'python s':>8} "
          f"{'browser s (median)':>18} {'min-max':>11} {'<2 s':>5}")
    for name, n, size, py_s, med, lo, hi in rows:
        print(f"{name:<66} {n:>6} {size / 1e6:>8.3f} {'yes' if size <= 5e6 else 'NO':>6} "
              f"{py_s:>8.2f} {med:>18.2f} {lo:>5.2f}-{hi:<5.2f} {'yes' if med < 2 else 'NO':>5}")
    print(f"of which plotly.js (inlined once): {len(get_plotlyjs().encode()) / 1e6:.3f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

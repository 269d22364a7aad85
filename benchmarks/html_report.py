"""Size and first-render time of the HTML reports with the full plotly.js (as before, 4.8 MB)
against the vendored partial bundle each page now inlines (goals for the ResNet-50 profile
page: <= 1.5 MB, drawn in <= 1 s in headless Chromium, median of 5).

    .venv/bin/python benchmarks/html_report.py [--trials 5] [--out FILE] [--doc profile.json]

Profiles ResNet-50 (benchmarks/reference_models.py, batch 1, 3x224x224) on raspberry_pi_4
with torch_eager fp32 and int8 (measured here, --trace for the per-operator points) and
tensorrt (unavailable here: rows with a reason) and renders, from that one document:

* the profile page (report.html), and the same with the estimate's rows repeated to 1,000
  layers (the paged table's worst case);
* the sweep page of its runs (a heatmap: the cartesian bundle);
* the generative report of TinyLlama 1.1B on raspberry_pi_5 (estimate + prediction + the
  router's recommendation, no run).

Each page is written twice, identical but for the plotly.js inlined: python plotly's full
``get_plotlyjs()`` (what every report inlined before) and the page's vendored bundle; and
an empty page holding only plotly.js, per bundle (the floor: evaluating the bundle, nothing
drawn). Every trial opens each of these in a fresh headless Chromium (cold: a new browser
process each time), interleaved (one round opens each page once, the order reversed every
other round), timing from navigation to every chart and table drawn. Prints one table
(median, min-max) with the date and the load average before and after, and writes it to
--out. A load average above 2 before the run is noted: such a run does not claim a goal (the
load after includes the run's own browsers).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOAL_MB, GOAL_S = 1.5, 1.0


def pages(doc_path: Path | None = None) -> list[tuple[str, str, str]]:
    """(page, bundle, html) for each page, with its vendored bundle inlined."""
    import json

    from edgeprof.api import estimate_llm, profile, recommend_llm
    from edgeprof.profilers.report import html as H
    from edgeprof.profilers.report.llm_html import render_llm_html
    from tests.profilers.report.test_html import sweep_frame

    t0 = time.perf_counter()
    if doc_path is not None and doc_path.exists():
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    else:
        report = profile(f"{ROOT / 'benchmarks' / 'reference_models.py'}:resnet50",
                         target="raspberry_pi_4", backends=["torch_eager", "tensorrt"],
                         precisions=["fp32", "int8"], trace=True,
                         run_options={"runs": 20, "min_time_s": 0.5, "max_time_s": 5})
        doc = report.to_dict()
        if doc_path is not None:
            doc_path.write_text(json.dumps(doc), encoding="utf-8")
        print(f"profiled ResNet-50 in {time.perf_counter() - t0:.1f} s "
              f"({len(doc['estimate']['layers'])} layers, {len(doc['runs'])} runs)",
              file=sys.stderr)
    big = copy.deepcopy(doc)
    base = big["estimate"]["layers"]
    big["estimate"]["layers"] = [{**base[i % len(base)], "layer": f"{base[i % len(base)]['layer']}"
                                  f".{i}"} for i in range(1000)]
    llm = estimate_llm("llm:tinyllama-1.1b", "raspberry_pi_5",
                       backends=["llama_cpp", "onnxruntime_genai"], precisions="q4_k_m,q8_0,int4")
    llm["recommendation"] = recommend_llm("llm:tinyllama-1.1b", "raspberry_pi_5",
                                          context_tokens=2048, tokens_per_s=10).to_dict()
    out = []
    for name, render in (
            (f"ResNet-50 profile ({len(doc['estimate']['layers'])} layers, fp32/int8 --trace)",
             lambda: H.render_profile_html(doc)),
            ("ResNet-50 rows repeated to 1,000 layers", lambda: H.render_profile_html(big)),
            ("sweep of the ResNet-50 runs (heatmap)", lambda: H.render_sweep_html(
                sweep_frame(doc))),
            ("generative: TinyLlama 1.1B on raspberry_pi_5", lambda: render_llm_html(llm))):
        html = render()
        bundle = next(b for b in (*H.PLOTLY_BUNDLES, "full") if H.plotly_js(b) in html)
        out.append((name, bundle, html))
    return out


def floor(js: str) -> str:
    return ("<!DOCTYPE html><html><head><script>" + js + "</script></head><body><script>"
            "document.documentElement.dataset.chartsReady = 'true'; document.documentElement"
            ".dataset.tablesReady = 'true';</script></body></html>")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                    "html_report.txt", help="where to write the table ('-': nowhere)")
    ap.add_argument("--doc", type=Path, help="the ResNet-50 profile.json to reuse (written "
                    "there by the first run that profiles; the page is the same either way)")
    args = ap.parse_args()

    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    from edgeprof.profilers.report import html as H
    from tests.profilers.report.test_html import Chromium, chromium_binary

    t_start = time.perf_counter()
    load_before = os.getloadavg()
    binary = chromium_binary()
    full = get_plotlyjs()
    variants = []  # (page, bundle, path)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, bundle, html) in enumerate(pages(args.doc)):
            old = html.replace(H.plotly_js(bundle), full) if bundle != "full" else html
            for label, text in (("full (before)", old), (bundle, html)):
                page = Path(tmp) / f"page{i}-{label.split()[0]}.html"
                page.write_text(text, encoding="utf-8")
                variants.append((name, label, page))
        for bundle in ("full", *H.PLOTLY_BUNDLES):  # the floor: evaluating plotly.js alone
            page = Path(tmp) / f"floor-{bundle}.html"
            page.write_text(floor(full if bundle == "full" else H.plotly_js(bundle)),
                            encoding="utf-8")
            variants.append(("floor: an empty page holding plotly.js, nothing drawn",
                             bundle + (" (before)" if bundle == "full" else ""), page))
        times: dict[Path, list[float]] = {p: [] for _, _, p in variants}
        for trial in range(args.trials):
            for _, _, page in (variants if trial % 2 == 0 else variants[::-1]):
                b = Chromium(binary)
                try:
                    times[page].append(b.open(page))
                    assert not b.errors(), (page, b.errors())
                    assert not b.remote_requests(), (page, b.remote_requests())
                finally:
                    b.close()
        rows = [(name, label, page.stat().st_size, times[page]) for name, label, page in
                variants]
    load_after = os.getloadavg()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    # the machine's own business is the load before: the one after includes this run's
    # Chromium processes (a browser per trial starts several)
    busy = load_before[0] > 2
    lines = [
        f"$ python benchmarks/html_report.py --trials {args.trials}",
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{time.perf_counter() - t_start:.0f} s; {os.cpu_count()} CPUs; load average "
        f"{' '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{' '.join(f'{x:.2f}' for x in load_after)} after (this run's Chromium included)"
        + (" (busier than 2 before the run: noted, not used to claim a goal)" if busy
           else ""),
        "",
        f"HTML reports: size and cold first-render time in headless Chromium ({version}), "
        f"{args.trials} trials per page, a fresh browser per trial, pages interleaved; "
        f"plotly.js {get_plotlyjs_version()}: full = python plotly's get_plotlyjs() (inlined "
        f"before), basic/cartesian = the vendored npm bundle the page inlines now",
        f"{'page':<54} {'plotly.js':<13} {'size MB':>7} {'<=1.5':>5} {'first render s':>14} "
        f"{'min-max':>11} {'<=1 s':>5}"]
    for name, label, size, ts in rows:
        med = statistics.median(ts)
        lines.append(f"{name:<54} {label:<13} {size / 1e6:>7.3f} "
                     f"{'yes' if size <= GOAL_MB * 1e6 else 'no':>5} {med:>14.2f} "
                     f"{min(ts):>5.2f}-{max(ts):<5.2f} {'yes' if med <= GOAL_S else 'no':>5}")
    lines.append(f"bundles: full {len(full.encode()) / 1e6:.3f} MB, " + ", ".join(
        f"{b} {H.plotly_bundle_path(b).stat().st_size / 1e6:.3f} MB" for b in H.PLOTLY_BUNDLES)
        + " (edgeprof/profilers/report/vendor)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if str(args.out) != "-":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
benchmarks/results/predict_llm.md. Deterministic: no timing involved. The build and the tables
are tools/build_llm_calibration.py's (build-only code, not installed; it prints the same
tables and rebuilds the file alone).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgeprof.profilers.predict.llm import SHIPPED_FILE  # noqa: E402
# the build is tools/build_llm_calibration.py (build-only, not installed): this prints its
# tables and, with --write, saves them
from tools.build_llm_calibration import build_calibration, tables, write_calibration  # noqa: E402


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

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
benchmarks/results/predict_boards.txt. The build and the table are
tools/build_board_calibrations.py's (build-only code, not installed; it prints the same table
and rebuilds the files alone).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# the build is tools/build_board_calibrations.py (build-only, not installed): this prints
# its table and, with --write, saves it
from tools.build_board_calibrations import build_all, table  # noqa: E402


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

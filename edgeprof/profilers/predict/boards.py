"""The shipped board calibrations: what the installed package needs of them at run time.

The files (``data/calibrations/<board>--published*.json``, one per board processor, and the
uncalibrated prior ``data/prior.json``) are built from ``data/device_measurements_train.csv``
only (published latencies: Raspberry Pi 4 and 5, Jetson Nano, STM32 boards, each with its
source and a quote), every row read as ``data/board_rows.toml`` says, by
``tools/build_board_calibrations.py`` in the source repository -- build-only code, not
installed::

    .venv/bin/python tools/build_board_calibrations.py --write

(needs torch; ``benchmarks/predict_boards.py --write`` does the same and saves its table).
What stays here is the interval arithmetic a run-time fit shares with that build
(:func:`interval_coverage`, measured.py).
"""

from __future__ import annotations

from typing import Any


def interval_coverage(samples: list[dict[str, Any]], predicted: list[float], sigma: float,
                      z: float) -> dict[str, float]:
    """How often value x exp(+-z sigma) held the measured latency (leave-one-out), and the
    interval's width high/low (before the widenings a prediction may add)."""
    import math

    inside = [p * math.exp(-z * sigma) <= s["latency_ms"] <= p * math.exp(z * sigma)
              for s, p in zip(samples, predicted)]
    return {"coverage": sum(inside) / len(inside) if inside else None,
            "median_width": math.exp(2 * z * sigma)}

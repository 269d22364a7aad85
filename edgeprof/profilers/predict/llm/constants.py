"""The LLM predictor's fixed numbers: where its data files are, the calibration file format,
the statistics of the fit and of the intervals (each with why it has its value), and the
assumptions made for published rows that do not state them."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent.parent / "data" / "llm"
TRAIN_CSV = DATA / "llm_measurements_train.csv"
SHIPPED_FILE = DATA / "llm--published.json"
FORMAT = "edgeprof-llm-calibration"
FORMAT_VERSION = 2
#: format versions this edgeprof reads (1: no builds, threads or interval report)
READABLE_VERSIONS = (1, 2)
FILE_PREFIX = "llm--"
#: the intervals are 80 % ones (the truth about four times in five: DESIGN.md, Prediction)
Z80 = 1.2816
#: a runtime factor's prior is worth this many rows (log f = sum / (n + SHRINK))
SHRINK = 1.0
#: a build era's factor within a runtime: its prior (factor 1) is worth this many rows. Build
#: changes are large and systematic (llamafile 0.6.2 -> 0.7 doubled a Pi 5's prefill in the
#: training rows' own source), so one row of the other era moves the factor two thirds of
#: the way
BUILD_SHRINK = 0.5
#: sigma added in quadrature per way a prediction leaves what its rows covered (a prior:
#: x/ 1.38 at 80 %; the rows cannot measure what they did not cover)
EXTRAPOLATION_SIGMA = 0.25
#: sigma added in quadrature to a figure estimated from another board of the same core (a
#: prior, x/ 1.47 at 80 %: no two shipped boards share a core, so it is not validated)
CORE_TRANSFER_SIGMA = 0.30
#: sigma added in quadrature to a decode figure estimated from another processor of the same
#: board (its bandwidth fraction of the same DRAM, scaled by the CPU's share beside an
#: accelerator: ``fit.cpu_share``). A prior, x/ 1.47 at 80 % as a core transfer: only two
#: shipped boards have decode rows on two processors (Jetson Nano CPU 0.126 / GPU 0.160,
#: RK3588 CPU 0.707 / NPU 0.907), too few to measure the transfer's own spread
DEVICE_TRANSFER_SIGMA = 0.30
#: the pooled leave-one-out sigma of a stage counts as this many rows in a board's sigma
POOLED_WEIGHT = 2.0
#: no interval is narrower than x/ exp(1.2816 x this) (published rates are rounded)
SIGMA_FLOOR = 0.03
#: no interval is wider than x/ this each side; a prediction that hits it says so
MAX_SPREAD = 4.0
#: an estimated figure's interval is value x/ the prior's leave-one-out spread, within these
ESTIMATE_MIN_SPREAD = 2.0
#: ... measured only from this many held-out rows the prior predicted or more; from fewer
#: (two, once a board's other processor estimates decode), x/ MAX_SPREAD
PRIOR_SPREAD_ROWS = 5
#: the interval goal (issue 18): hold the truth this often, median high/low at most this
INTERVAL_GOAL = {"coverage": 0.80, "median_width": 2.0}
#: the per-layer overhead is fitted only where the rows' layers-per-second-of-bandwidth ratio
#: spans at least this factor (a tiny model beside a big one); else it is 0
OVERHEAD_SPAN = 4.0
#: a model whose bytes (decode) or MACs (prefill) are more than this factor outside the rows'
#: is an extrapolation
SIZE_SPAN = 2.0
#: prompt and generated lengths assumed for published rows that do not state them
#: (llama-bench's defaults pp512 / tg128)
ASSUMED_PROMPT = 512
ASSUMED_GEN = 128

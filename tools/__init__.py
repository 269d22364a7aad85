"""Build-only scripts of the source repository, never installed (the wheel carries
``edgeprof/`` alone: tests/test_packaging.py checks it). Each rebuilds shipped data from the
published training files and imports edgeprof's run-time pieces; run one from the repository
root:

* ``tools/build_board_calibrations.py [--write]``: the board calibrations
  (``edgeprof/profilers/predict/data/calibrations/*--published*.json``) and the uncalibrated
  prior (``data/prior.json``), from ``data/device_measurements_train.csv``;
* ``tools/build_llm_calibration.py [--write]``: the LLM calibration
  (``data/llm/llm--published.json``), from ``data/llm/llm_measurements_train.csv``.

Without ``--write`` each prints its cross-validation and writes nothing.
"""

"""Predicted latency on targets that cannot be measured here: per-kernel calibrations.

``predict_latency(estimate, target, backend, precision) -> Prediction`` (predictor.py);
calibration files (calibration.py); the fit and its cross-validation (fit.py); the kernel
classes and fusion (kernels.py); the shipped board calibrations (data/, built by
tools/build_board_calibrations.py: build-only, not installed); host calibration by measuring
sampled kernels (host.py, ``edgeprof calibrate``); which runtime runs on which processor at
which precision (runtimes.py: ``runtimes_on(target, device=None)``, ``offers(backend,
precision)``, ``processor_for``). Importing this package imports neither torch nor
scikit-learn.
"""

from edgeprof.profilers.predict.calibration import (Calibration, CalibrationError,
                                                     load_calibration)
from edgeprof.profilers.predict.predictor import Prediction, predict_latency
from edgeprof.profilers.predict.runtimes import (executed_precision, offered_precisions, offers,
                                                  prediction_only, processor_for, runtimes_on)

__all__ = ["Calibration", "CalibrationError", "Prediction", "executed_precision",
           "load_calibration", "offered_precisions", "offers", "predict_latency",
           "prediction_only", "processor_for", "runtimes_on"]

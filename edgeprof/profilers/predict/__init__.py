"""Predicted latency on targets that cannot be measured here: per-kernel calibrations.

``predict_latency(estimate, target, backend, precision) -> Prediction`` (predictor.py);
calibration files (calibration.py); the fit and its cross-validation (fit.py); the kernel
classes and fusion (kernels.py); the shipped board calibrations (boards.py, data/); host
calibration by measuring sampled kernels (host.py, ``edgeprof calibrate``). Importing this
package imports neither torch nor scikit-learn.
"""

from edgeprof.profilers.predict.calibration import (Calibration, CalibrationError,
                                                     find_calibration, load_calibration)
from edgeprof.profilers.predict.predictor import Prediction, predict_latency

__all__ = ["Calibration", "CalibrationError", "Prediction", "find_calibration",
           "load_calibration", "predict_latency"]

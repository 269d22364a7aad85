"""edgeprof: how will this model run on that device, with which runtime and compression, and why.

The public API. Importing it is cheap: no deep-learning framework is imported until a
function that needs one is called.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

from edgeprof._version import __version__
from edgeprof.core.backend import Availability, Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import (
    BackendUnavailableError,
    ConfigError,
    ConstraintError,
    EdgeprofError,
    InputSpecError,
    MeasurementError,
    ModelError,
    OutputError,
    PluginError,
    TargetError,
    UnknownNameError,
    UnsupportedError,
    UserError,
)
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.results import (
    BenchmarkResult,
    Estimate,
    Figure,
    LatencyStats,
    LayerEstimate,
    RunRecord,
    Summary,
    WarningRecord,
)

# name -> module that defines it; imported on first use (PEP 562)
_LAZY = {
    "profile": "edgeprof.api",
    "estimate": "edgeprof.api",
    "benchmark": "edgeprof.api",
    "summarize": "edgeprof.api",
    "list_backends": "edgeprof.api",
    "batch_sizes": "edgeprof.api",
    "list_targets": "edgeprof.api",
    "predict": "edgeprof.api",
    "predict_many": "edgeprof.api",
    "Predictor": "edgeprof.api",
    "calibrate_measurements": "edgeprof.api",
    "calibrations_of": "edgeprof.api",
    "calibrate": "edgeprof.api",
    "CalibrationResult": "edgeprof.api",
    # generative models (profile and predict above take them too)
    "estimate_llm": "edgeprof.api",
    "profile_llm": "edgeprof.api",
    "recommend_llm": "edgeprof.api",
    "optimize_llm": "edgeprof.api",
    "calibrate_llm": "edgeprof.api",
    "calibrate_llm_measurements": "edgeprof.api",
    "llm_exit_code": "edgeprof.api",
    "Prediction": "edgeprof.profilers.predict",
    "GenerativeReport": "edgeprof.profilers.report.generative",
    "GenerativePrediction": "edgeprof.profilers.report.generative",
    "get_target": "edgeprof.targets",
    "load_target_file": "edgeprof.targets",
    "Target": "edgeprof.targets",
    "resolve_model": "edgeprof.core.models",
    "ModelHandle": "edgeprof.core.models",
    "ProfileReport": "edgeprof.api",
    "ProfileRun": "edgeprof.api",
    "TensorReport": "edgeprof.api",
    "MeasureRequest": "edgeprof.core.requests",
    "measure": "edgeprof.profilers.measure.measure",
    "recommend": "edgeprof.api",
    "compare": "edgeprof.api",
    "Constraints": "edgeprof.optimize.router",
    "Plan": "edgeprof.optimize.router",
    "check_feasible": "edgeprof.optimize.router",
    # recommend / optimize
    "recommend_plan": "edgeprof.optimize.loop",
    "OptimizeReport": "edgeprof.optimize.loop",
    "Candidate": "edgeprof.optimize.loop",
    # seed-compatible functions (names, columns and formulas of the original tools)
    "estimate_layerwise_stats": "edgeprof.profilers.report.seeds",
    "summarize_hardware": "edgeprof.profilers.report.seeds",
    "precision_tradeoff_table": "edgeprof.profilers.report.seeds",
    "save_hardware_artifacts": "edgeprof.profilers.report.seeds",
    "build_hardware_profile_table": "edgeprof.profilers.report.seeds",
    "write_hardware_profile_artifacts": "edgeprof.profilers.report.seeds",
    "estimate_batch_memory_mb": "edgeprof.profilers.report.seeds",
    "auto_adjust_batch_size": "edgeprof.profilers.report.seeds",
    "compute_utilization": "edgeprof.profilers.report.seeds",
}

__all__ = [
    "Availability",
    "Backend",
    "BackendUnavailableError",
    "BenchmarkResult",
    "Capabilities",
    "ConfigError",
    "ConstraintError",
    "EdgeprofError",
    "Estimate",
    "Figure",
    "InputSpecError",
    "LatencyStats",
    "LayerEstimate",
    "MeasurementError",
    "ModelError",
    "OutputError",
    "PluginError",
    "PreparedModel",
    "RunConfig",
    "RunRecord",
    "Summary",
    "TargetError",
    "UnknownNameError",
    "UnsupportedError",
    "UserError",
    "WarningRecord",
    "__version__",
    "hookimpl",
    "optimize",
    *sorted(_LAZY),
]


class _VerbPackage(types.ModuleType):
    """``edgeprof.optimize``: the subpackage, and the verb when called. Importing any module
    of a subpackage sets the package's attribute of its name to the subpackage, so a
    function ``edgeprof.optimize`` beside the subpackage ``edgeprof.optimize`` would be
    replaced by it (and ``edgeprof.optimize(...)`` fail, "'module' object is not callable");
    the package itself is callable instead."""

    def __call__(self, model: Any, target: Any = "host", **options: Any) -> Any:
        # looked up on first use, as _LAZY's names are
        return importlib.import_module("edgeprof.api.kinds").optimize(model, target, **options)


importlib.import_module("edgeprof.optimize").__class__ = _VerbPackage  # only a docstring


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'edgeprof' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

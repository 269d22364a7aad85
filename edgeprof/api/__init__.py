"""The Python API: ``profile``, ``estimate``, ``benchmark``, ``summarize`` and the listings.

The CLI is a thin layer over these functions; other toolchains call them directly and read
the :class:`ProfileReport` (or its JSON, ``profile.json``).

Every name is importable from here; each lives in one module of this package, and those
import only ``common`` beside them, never this package (an import-linter contract), except
``kinds``, the entry points that take either kind of model:

- ``common``: the documents' schema version, the progress callback, target lookup, name
  lists, the checks and writes of ``out``;
- ``verbs``: the listings, a tensor model's ``estimate``, ``benchmark`` and ``summarize``;
- ``predictions``: ``predict``, ``predict_many``, :class:`Predictor`,
  ``calibrate_measurements``;
- ``profiling``: ``profile`` (:class:`ProfileReport`) and ``batch_sizes`` (:class:`BatchReport`);
- ``generative``: generative models: ``estimate_llm``, ``profile_llm``, ``recommend_llm``,
  ``optimize_llm``, ``calibrate_llm``, ``calibrate_llm_measurements``;
- ``kinds``: ``profile``, ``predict``, ``estimate``, ``recommend``, ``optimize``,
  ``compare`` and ``calibrate`` for either kind of model (a tensor model to ``profiling`` / ``predictions``
  / ``verbs`` / the optimize loop, a generative one to ``generative``; an option of the
  other kind is a one-line ``UserError``), and :class:`CalibrationResult`.

``profile``, ``predict``, ``estimate``, ``recommend`` and ``optimize`` here are those of
``kinds``; the tensor implementations keep their names in ``profiling``, ``predictions``,
``verbs`` and ``edgeprof.optimize.loop`` (``recommend_plan``, ``optimize``).
"""

from __future__ import annotations

from edgeprof.api.common import SCHEMA_VERSION, Progress, split_names, target_registry
from edgeprof.api.generative import (DEFAULT_LLM_FORMATS, LLM_CALIBRATION_MODELS,
                                     calibrate_llm, calibrate_llm_measurements, estimate_llm,
                                     llm_exit_code, llm_plan,
                                     optimize_llm, profile_llm, recommend_llm)
from edgeprof.api.kinds import (CalibrationResult, calibrate, compare, estimate, model_kind,
                                optimize, predict, profile, recommend)
from edgeprof.api.predictions import (Predictor, calibrate_measurements, calibrations_of,
                                      on_device, predict_many)
from edgeprof.api.profiling import BatchReport, batch_sizes, resolve_backends
from edgeprof.api.verbs import benchmark, list_backends, list_targets, summarize
from edgeprof.profilers.report.family import ProfileReport
from edgeprof.profilers.report.generative import GenerativeReport
from edgeprof.profilers.report.tensor_report import ProfileRun, TargetRecord, TensorReport

__all__ = [
    "DEFAULT_LLM_FORMATS", "LLM_CALIBRATION_MODELS", "SCHEMA_VERSION", "BatchReport",
    "CalibrationResult", "GenerativeReport", "Predictor", "ProfileReport", "ProfileRun",
    "Progress", "TargetRecord", "TensorReport", "batch_sizes", "benchmark", "calibrate",
    "calibrate_llm", "calibrate_llm_measurements", "compare", "calibrate_measurements", "calibrations_of",
    "estimate", "estimate_llm", "list_backends",
    "list_targets", "llm_exit_code", "llm_plan", "model_kind", "on_device", "optimize",
    "optimize_llm", "predict", "predict_many", "profile", "profile_llm", "recommend",
    "recommend_llm", "resolve_backends",
    "split_names", "summarize",
    "target_registry",  # the CLI's target lookup (cli/main, cli/fleet)
]

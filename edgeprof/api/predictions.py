"""Predictions for a board, without building or running: ``predict``, ``predict_many``,
:class:`Predictor` (and ``on_device``), and ``calibrate_measurements`` (a calibration from the
user's own timings)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from edgeprof.api.common import Progress, resolve_target
from edgeprof.core.errors import UserError
from edgeprof.core.models import ModelHandle, resolve_model
from edgeprof.core.plugins import get_registry
from edgeprof.core.precision import get_precision
from edgeprof.core.results import Estimate
from edgeprof.profilers.predict.config import ConfigPredictor, on_device  # noqa: F401


class Predictor:
    """Predictions for one (target, backend, precision, threads, device, calibration), many
    models: the target, the calibration and the registry are looked up once, so screening a
    search space costs one estimate and one sum per model (``predict_many``)."""

    def __init__(self, target: Any, backend: str, precision: str = "fp32", *,
                 threads: int | None = None, device: str | None = None,
                 calibration: str | os.PathLike | Any = None, plugins=None, targets_dir=None,
                 runtime_version: str | None = None):
        from edgeprof.profilers.predict.calibration import load_calibration

        get_precision(precision)
        self.registry = get_registry(plugins)
        board = resolve_target(target, targets_dir, plugins)
        # the one call every command that shows a board figure makes (recommend's plan,
        # optimize, a sweep): one configuration, one number, one label
        self._config = ConfigPredictor(board, backend, precision, threads=threads,
                                       device=device, registry=self.registry,
                                       runtime_version=runtime_version)
        self.calibration = (load_calibration(calibration)
                            if isinstance(calibration, (str, os.PathLike)) else calibration)
        self._config.calibration = self.calibration
        self.target = self._config.target
        self.backend, self.precision, self.threads = backend, precision, threads
        self.runtime_version = runtime_version  # the board's build: warned about if it differs

    def _handle(self, model: Any, input_shapes=None, input_dtypes=None,
                batch_size: int | None = None) -> ModelHandle:
        return model if isinstance(model, ModelHandle) else resolve_model(
            model, input_shapes=input_shapes, input_dtypes=input_dtypes, batch_size=batch_size,
            registry=self.registry)

    def estimate(self, model: Any, *, input_shapes=None, input_dtypes=None,
                 batch_size: int | None = None) -> Estimate:
        return self._config.estimate(self._handle(model, input_shapes, input_dtypes,
                                                  batch_size))

    def from_estimate(self, est: Estimate) -> Any:
        """The prediction from :meth:`estimate`'s result (what ``self(model)`` returns)."""
        return self._config.from_estimate(est)

    def __call__(self, model: Any, *, input_shapes=None, input_dtypes=None) -> Any:
        return self._config(self._handle(model, input_shapes, input_dtypes))


def predict(model: Any, target: Any, backend: str, precision: str = "fp32", *,
            threads: int | None = None, device: str | None = None,
            calibration: str | os.PathLike | Any = None,
            input_shapes: Sequence[Sequence[int]] | None = None,
            input_dtypes: Sequence[str] | None = None, plugins=None, targets_dir=None,
            runtime_version: str | None = None) -> Any:
    """Predicted latency of a tensor ``model`` on ``target`` with runtime ``backend`` at
    ``precision`` on ``threads`` of the board's cores (``edgeprof.predict``, in
    ``api/kinds.py``, takes either kind of model and calls this for a tensor one), without
    building or running anything: a
    :class:`~edgeprof.profilers.predict.Prediction` (``value_ms``, ``low_ms``, ``high_ms``,
    ``provenance``, ``calibration``, ``method``, ``notes``). ``runtime_version``: the board's
    runtime build; a calibration fitted with another is used with a warning naming both."""
    return Predictor(target, backend, precision, threads=threads, device=device,
                     calibration=calibration, plugins=plugins, targets_dir=targets_dir,
                     runtime_version=runtime_version)(
        model, input_shapes=input_shapes, input_dtypes=input_dtypes)


def predict_many(models: Any, target: Any, backend: str, precision: str = "fp32", *,
                 threads: int | None = None, device: str | None = None,
                 calibration: str | os.PathLike | Any = None,
                 input_shapes: Sequence[Sequence[int]] | None = None,
                 input_dtypes: Sequence[str] | None = None, plugins=None,
                 targets_dir=None) -> list[Any]:
    """:func:`predict` over an iterable of models (the same figures as one by one)."""
    pred = Predictor(target, backend, precision, threads=threads, device=device,
                     calibration=calibration, plugins=plugins, targets_dir=targets_dir)
    return [pred(m, input_shapes=input_shapes, input_dtypes=input_dtypes) for m in models]


def calibrate_measurements(measurements: str | os.PathLike, target: Any, backend: str, *,
                           precision: str | None = None, threads: int | None = None,
                           out: str | os.PathLike | None = None, plugins=None,
                           targets_dir=None, progress: Progress | None = None):
    """A calibration of ``target`` for ``backend`` fitted to the user's own timings (a CSV
    ``model,latency_ms[,input_shape,precision,threads,runtime,source]``), refining the
    shipped one; written to ``out`` or the user's calibration folder (preferred there).
    Returns (calibration, path, summary)."""
    from edgeprof.profilers.predict.measured import calibrate_from_measurements

    tgt = resolve_target(target, targets_dir, plugins)
    if getattr(tgt, "is_host", False):
        raise UserError("--measurements calibrates a board from timings taken on it; for this "
                        "machine run 'edgeprof calibrate --target host --backend B'")
    reg = get_registry(plugins)
    if backend in reg.backends and getattr(reg.backend(backend), "workload", "") == "generate":
        raise UserError(f"{backend} is a generative backend: its llama-bench tests (pp512, "
                        "tg128) calibrate through edgeprof.api.calibrate_llm_measurements "
                        "(the CLI's 'calibrate --measurements' takes either)")
    return calibrate_from_measurements(measurements, tgt, backend, precision=precision,
                                       threads=threads, out=out, registry=reg,
                                       progress=progress)


def calibrations_of(target: Any, *, targets_dir=None, plugins=None) -> dict[str, list]:
    """What ``predict`` knows of ``target`` (a mode reads its board's): ``{"tensor": [...],
    "llm": [...]}``, each calibration in brief -- its runtimes with their rows and, for a
    tensor calibration, its nested leave-one-out error and interval -- the user's first,
    then the shipped ones (the first that has a runtime is the one used)."""
    from edgeprof.profilers.predict.calibration import calibrations_for
    from edgeprof.profilers.predict.llm.files import llm_summaries
    from edgeprof.profilers.predict.predictor import base_id

    board = base_id(resolve_target(target, targets_dir, plugins))
    return {"tensor": [c.summary() for c in calibrations_for(board)],
            "llm": llm_summaries(board)}

"""One configuration's board prediction: :class:`ConfigPredictor`, the call every command
that shows a board figure makes (``edgeprof.predict`` / ``Predictor`` in the API, the plan of
``recommend``/``optimize``, a sweep's board figure), so that one configuration gets one number
with one label wherever it is shown.

A configuration is (target and its processor, runtime, precision, threads, calibration); the
model comes with each call. What cannot be predicted is refused here, the same way for every
command (a :class:`~edgeprof.core.errors.UserError`: an unknown runtime or precision, a GPU
runtime on a CPU, a processor or thread count the board lacks).
"""

from __future__ import annotations

from typing import Any

from edgeprof.core.precision import get_precision
from edgeprof.profilers.predict.runtimes import check_known, on_device, processor_for


class ConfigPredictor:
    """Predictions for one (target, backend, precision, threads, device, calibration), many
    models: checked once (a configuration that cannot be predicted raises a UserError here),
    then ``estimate(handle)`` and ``from_estimate(est)`` (or both: ``self(handle)``).

    ``target`` is a target object (a descriptor, not a name); ``calibration`` a loaded
    :class:`~edgeprof.profilers.predict.Calibration` or None (the search ``predict`` makes);
    ``registry`` the plugin registry (its backends, besides the runtime families the
    published rows name)."""

    def __init__(self, target: Any, backend: str, precision: str = "fp32", *,
                 threads: int | None = None, device: str | None = None,
                 calibration: Any = None, registry: Any = None,
                 runtime_version: str | None = None):
        from edgeprof.profilers.predict.predictor import check_processor, check_threads

        get_precision(precision)
        if registry is None:
            from edgeprof.core.plugins import get_registry

            registry = get_registry()
        self.registry = registry
        check_known(backend, registry)  # UnknownNameError (exit 2) listing every name
        # a runtime on a processor it does not run on, or at a precision it does not offer:
        # exit 2 (runtimes.py); without --device the prediction moves to the runtime's own
        # processor on the board (predict_latency) and says so
        check_processor(target, backend, device, precision=precision, registry=registry)
        # the processor the runtime runs on there (the one asked, else its default): the
        # estimate and the threads are that processor's; predict_latency is given the board
        # and the device as asked (a view of one processor must not be searched again: a
        # Jetson's CPU view still lists the GPU), and says which processor it chose
        self.board, self.device = target, device  # as asked (None: the runtime's default)
        self.processor = None if getattr(target, "is_host", False) else \
            processor_for(target, backend, device, registry)[0]
        self.target = on_device(target, self.processor)
        check_threads(threads, self.target)
        self.backend, self.precision, self.threads = backend, precision, threads
        self.runtime_version = runtime_version  # the board's build: warned about if it differs
        self.calibration = calibration

    def estimate(self, handle: Any) -> Any:
        """The analytic estimate the prediction rests on (the model on this processor at
        this precision)."""
        from edgeprof.profilers.estimate.analytic import estimate_model

        return estimate_model(handle, self.target, self.precision, registry=self.registry)

    def from_estimate(self, est: Any) -> Any:
        """The prediction from :meth:`estimate`'s result (a
        :class:`~edgeprof.profilers.predict.Prediction`)."""
        from edgeprof.profilers.predict.predictor import predict_latency

        pred = predict_latency(est, self.board, self.backend, self.precision,
                               threads=self.threads, calibration=self.calibration,
                               runtime_version=self.runtime_version, device=self.device)
        pred.model = est.model
        return pred

    def __call__(self, handle: Any) -> Any:
        return self.from_estimate(self.estimate(handle))


__all__ = ["ConfigPredictor", "on_device"]

"""The ``tensor`` workload: a fixed-shape tensor model (torch, ONNX, TFLite, OpenVINO IR)
timed by the harness; its record a :class:`~edgeprof.core.results.BenchmarkResult`.

Registered through ``edgeprof_register_workloads`` (this module is listed in
``plugins.toml``); ``measure()``, the runners and the fleet ask it (``workload_of``) and never
test the kind (:mod:`edgeprof.core.workload`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.results import BenchmarkResult
from edgeprof.core.workload import Workload

#: seconds a worker may take when no timeout is set: imports and conversion (which can be
#: slow) plus the timing plan's own caps
DEFAULT_TIMEOUT_BASE_S = 240.0


def default_timeout_s(plan) -> float:
    return DEFAULT_TIMEOUT_BASE_S + plan.warmup_max_time_s + 1.5 * plan.max_time_s


class TensorWorkload(Workload):
    name = "tensor"
    describe = "fixed-shape tensor models"
    record_type = BenchmarkResult

    def blank_record(self, request: Any, backend_cls: Any = None) -> BenchmarkResult:
        c = request.config
        return BenchmarkResult(backend=request.backend, model=request.model_name,
                               requested_precision=c.precision, executed_precision=None,
                               status="failed", batch_size=request.batch_size, device=c.device,
                               config=c.to_dict())

    def unavailable_record(self, request: Any, backend_cls: Any, availability: Any
                           ) -> BenchmarkResult:
        a = availability
        return self.blank_record(request).fail(
            "unavailable", a.reason + (f"; {a.hint}" if a.hint else ""))

    def prepare(self, request: Any, backend_cls: Any) -> Any:
        caps = backend_cls.capabilities
        if request.config.device == "cpu" and "cpu" not in caps.devices:
            # the default device, for a backend that has no CPU path: its own first device
            request = replace(request, config=replace(request.config, device=caps.devices[0]))
        return request

    def check(self, request: Any, backend_cls: Any) -> None:
        if request.generation is not None:
            raise UserError(f"a tensor measure request (backend '{request.backend}') takes "
                            "no generation config; give a generative backend")
        if request.handle is not None and request.artifact is None:
            backend_cls.check_request(request.handle, request.config)

    def run_here(self, request: Any, backend_cls: Any, *, registry: Any = None,
                 process: str = "inline", progress: Any = None) -> BenchmarkResult:
        from edgeprof.profilers.measure.harness import run_in_process
        from edgeprof.profilers.measure.runners import artifact_model, request_registry

        cls, config = backend_cls, request.config
        if request.artifact is not None:
            if not callable(getattr(cls, "load", None)):
                raise UnsupportedError(f"backend '{request.backend}' cannot load built "
                                       "artifacts", backend=request.backend)
            handle, artifact = artifact_model(request, request_registry(request, registry))
            backend = cls()
            return run_in_process(backend, handle, config, process=process,
                                  prepare=lambda inputs: backend.load(artifact, config, inputs))
        handle = request.handle
        if handle is None:
            from edgeprof.core.models import resolve_model

            handle = resolve_model(request.model, input_shapes=request.input_shapes,
                                   input_dtypes=request.input_dtypes,
                                   registry=request_registry(request, registry),
                                   calibration=request.calibration)
        cls.check_request(handle, config)  # what the capabilities rule out, before any work
        return run_in_process(cls(), handle, config, process=process)

    def run_remote(self, runner: Any, request: Any) -> BenchmarkResult:
        return ship_tensor(runner, request)

    def default_timeout_s(self, request: Any) -> float:
        from edgeprof.profilers.measure.harness import plan_from_config

        return default_timeout_s(plan_from_config(request.config))

    def finish(self, record: BenchmarkResult, request: Any) -> BenchmarkResult:
        record.model = request.model_name
        return record


def ship_tensor(runner: Any, request: Any) -> BenchmarkResult:
    """A tensor request on a board of ``runner``'s fleet: built here (boards never
    convert), shipped with its sha256, timed there; the record names the board."""
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.measure.fleet import Shipment, build_shipment, job_timeout_s

    if request.artifact is not None:  # built already: ship it as it is
        from edgeprof.core.artifact import Artifact

        shipment = Shipment.of_artifact(Artifact.from_dict(request.artifact))
        name = request.model_name
    else:
        handle = request.handle or resolve_model(
            request.model, input_shapes=request.input_shapes,
            input_dtypes=request.input_dtypes, calibration=request.calibration)
        runner._say(f"building {handle.name} {request.config.precision} for "
                    f"{request.backend} here (boards never convert)")
        shipment = build_shipment(request.backend_type or request.backend, handle,
                                  request.config.precision)
        name = handle.spec
    timeout = request.config.timeout_s or job_timeout_s(request.config)
    record = BenchmarkResult.from_dict(runner.run_job(
        f"{request.backend}-{request.config.precision}", request, shipment, timeout))
    record.model = name
    return record


@hookimpl
def edgeprof_register_workloads() -> list[type]:
    return [TensorWorkload]


__all__ = ["DEFAULT_TIMEOUT_BASE_S", "TensorWorkload", "default_timeout_s", "ship_tensor"]

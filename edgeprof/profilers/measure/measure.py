"""Measure one configuration: ``measure(request) -> RunRecord``, the one path every caller
(profile, benchmark, batch sizes, optimize, compare) takes, and the one place where a
failure becomes a status.

``measure`` calls the ``edgeprof_measure`` hook (``firstresult``), so a plugin can wrap every
run (``@hookimpl(wrapper=True)``: observe or change the record) or take it over; the
built-in implementation below (this module is listed in ``plugins.toml``) runs the request
on its runner (``edgeprof.profilers.measure.runners``: inline, or an isolated worker) and
turns what the runner raised into the record's status (docs/design.md, "Statuses"):

* the backend's runtime or device is missing (cheap check, before any work;
  ``BackendUnavailableError``; an ``ImportError`` importing the runtime) -> ``unavailable``;
* the backend cannot do it (``UnsupportedError``: precision, model format, device)
  -> ``unsupported``;
* anything else the backend raised, ``SystemExit`` included, or a worker that crashed or
  timed out -> ``failed``, with a one-line reason naming the phase;
* ``UserError`` propagates (the user's to fix), and so does ``KeyboardInterrupt``.

``measure`` asks the request's workload (``Backend.workload`` names it; the request's
``workload`` is filled in from it before the hook is called, so a plugin sees which;
:mod:`edgeprof.core.workload`) for what differs between kinds of run: a ``tensor`` run's
record is a ``BenchmarkResult``; a ``generate`` run (a generative model, llama-bench's pp/tg
per depth, ``edgeprof.profilers.measure.generate``) gives a
:class:`~edgeprof.core.results.GenerativeRunRecord` holding one ``GenerationRecord`` per
depth, with the same statuses by the same rule, on the same runners (a worker that crashed
inside the runtime or timed out fails the run, with the reason, never the caller).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import MeasurementError, UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.requests import MeasureRequest, Runner
from edgeprof.core.results import RunRecord
from edgeprof.core.workload import workload_of
from edgeprof.profilers.measure.harness import (  # noqa: F401 - status_of: the one rule,
    BACKEND_FAILURES, MeasureFailure, status_of)     # imported from here by sweeps and tests
from edgeprof.profilers.measure.runners import (InlineRunner, IsolatedRunner, backend_class,
                                                default_runner, request_registry)


def run_measurement(request: MeasureRequest, runner: Runner) -> RunRecord:
    """Run ``request`` on ``runner``; never raises for the backend's own failure. The
    request's workload (:mod:`edgeprof.core.workload`) supplies its defaults, checks, blank
    record and conditions; the statuses follow one rule for every workload."""
    cls = request.backend_type or backend_class(request)
    workload = workload_of(request if request.workload else cls)
    # this machine's runtimes say nothing of a board's: only runners on this host pre-check
    if isinstance(runner, (InlineRunner, IsolatedRunner)):
        a = cls.availability()
        if not a.available:
            return workload.finish(workload.unavailable_record(request, cls, a), request)
    request = workload.prepare(request, cls)
    try:
        workload.check(request, cls)  # before starting any worker
        record = runner.run(request)
    except BACKEND_FAILURES as e:  # status_of re-raises what is not the backend's
        partial = e.partial if isinstance(e, MeasureFailure) else None
        record = partial if isinstance(partial, workload.record_type) \
            else workload.blank_record(request, cls)
        record.fail(*status_of(e))
    return workload.finish(record, request)


@hookimpl
def edgeprof_measure(request: MeasureRequest, runner: Runner) -> RunRecord:
    """The built-in measurement (see the module docstring)."""
    return run_measurement(request, runner)


# ----------------------------------------------------------------------- the front door
def measure(request: MeasureRequest, runner: Runner | None = None, *,
            registry: Any = None, progress: Any = None) -> RunRecord:
    """Measure ``request`` and return its record, whatever happened to the backend.

    ``runner``: where it runs; by default :class:`~.runners.IsolatedRunner` when the
    config asks for isolation or a timeout, else :class:`~.runners.InlineRunner`.
    ``registry``: the plugins to use (default: the request's ``plugins_file``). An unknown
    backend name is a ``UserError`` raised before anything runs. ``progress``: where the
    default runner reports a generative run's steps (a runner given carries its own).
    """
    registry = request_registry(request, registry)
    if request.backend_type is None:
        request = replace(request, backend_type=backend_class(request, registry))
    workload = workload_of(request.backend_type, registry)
    if request.workload is None:
        request = replace(request, workload=workload.name)
    elif request.workload != workload.name:
        raise UserError(f"backend '{request.backend}' runs {workload.describe}, not a "
                        f"{request.workload} request; 'edgeprof backends' lists both")
    runner = runner or default_runner(request, progress=progress)
    hook = getattr(getattr(registry, "pm", None), "hook", None)
    record = None
    if hook is not None and hasattr(hook, "edgeprof_measure"):
        record = hook.edgeprof_measure(request=request, runner=runner)
    if record is None:  # a registry without the built-in implementation
        record = run_measurement(request, runner)
    return record


def benchmark_backend(backend: Any, model: Any, config: RunConfig | None = None, *,
                      runner: Runner | None = None, plugins_file: Any = None,
                      registry: Any = None) -> RunRecord:
    """:func:`measure` of ``backend`` (a registered backend's name, or a Backend class or
    object; only its class is used, built once inside the run) on ``model`` (a ModelHandle
    or a spec)."""
    from edgeprof.core.models import ModelHandle, resolve_model

    config = config or RunConfig()
    if isinstance(backend, str):
        if registry is None:
            from edgeprof.core.plugins import get_registry

            registry = get_registry(plugins_file)
        cls = registry.backend(backend)  # an unknown name: UserError naming the known ones
    else:
        cls = backend if isinstance(backend, type) else type(backend)
    handle = model if isinstance(model, ModelHandle) else resolve_model(model,
                                                                        registry=registry)
    request = MeasureRequest.for_handle(cls, handle, config, plugins_file=plugins_file)
    return measure(request, runner, registry=registry)


def raise_for_status(result: RunRecord) -> RunRecord:
    """``MeasurementError`` with the reason when a run that should work produced nothing."""
    if result.status == "failed":
        raise MeasurementError(f"{result.backend} ({result.requested_precision}) failed: "
                               f"{result.reason}")
    return result


__all__ = ["benchmark_backend", "edgeprof_measure", "measure", "raise_for_status",
           "run_measurement", "status_of"]

"""Measure on the boards themselves: a fleet of Dask distributed workers, one per board.

A board runs ``edgeprof worker SCHEDULER --target raspberry_pi_4``: a Dask worker (a
``distributed.Nanny`` and its worker process, one thread) whose *resources* name its target
(``{"raspberry_pi_4": 1}``) and the backends it can run (``{"backend:onnxruntime": 1}``), and
which publishes a **fingerprint** with the scheduler (CPU model, architecture, cores,
frequency, RAM, OS, runtimes with versions, edgeprof version). A worker whose architecture
contradicts its descriptor (a ``raspberry_pi_4`` on an x86 CPU) refuses to start unless
``--emulate`` is given; every result an emulating worker returns says
``measured on HOST, emulating raspberry_pi_4`` and the target's figures stay estimated.

This side builds the model here (conversions never run on a board), ships the built file as
bytes with its sha256 (the board checks it: never a pickled model), and submits one function
per measurement that needs the target's resource: one measurement at a time per board, each
in a fresh process there (``IsolatedRunner``: no Dask thread beside the measuring one; a
crash or a hang past the job's timeout fails the job, not the board). A
board that dies mid-job fails that attempt (with the scheduler's
``distributed.scheduler.allowed-failures`` at 0 the :class:`Dispatcher` counts every death
itself); the job is submitted again, to any board of the same target, up to ``retries``
times, then recorded as failed with the reason. A board that does not answer
``BOARD_MARGIN_S`` after a job's timeout is restarted (its nanny starts a fresh worker).

Trust: Dask runs pickled functions sent by the scheduler and its clients. A fleet is a set of
machines you trust; a scheduler reachable beyond loopback therefore needs TLS (CA,
certificate, key: ``distributed.security.Security``) unless ``--insecure`` is given.

``distributed`` is imported inside the functions that use it (``pip install
'edgeprof[device]'`` on a board).

The pieces: :mod:`~edgeprof.profilers.measure.fleet_spec` (the scheduler's address and TLS),
:mod:`~edgeprof.profilers.measure.fleet_worker` (a board: fingerprint, serving, listing, the
task it runs), :mod:`~edgeprof.profilers.measure.fleet_shipment` (what travels and how a
board measures it), :mod:`~edgeprof.profilers.measure.fleet_dispatcher` (jobs, retries,
timeouts) and here the Runner (:class:`RemoteRunner`) with the profile's entry points. Every
name is importable from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from edgeprof.core.errors import BackendUnavailableError, MeasurementError, UserError
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult, RunRecord
from edgeprof.core.workload import workload_of
from edgeprof.profilers.measure.fleet_dispatcher import (BOARD_MARGIN_S, DEFAULT_NO_BOARD_S,
                                                         DEFAULT_RETRIES, SCHEDULER_GRACE_S,
                                                         Dispatcher, FleetJob, Outcome,
                                                         PROGRESS_TOPIC, SchedulerLostError)
from edgeprof.profilers.measure.fleet_shipment import (Shipment, build_shipment, job_payload,
                                                       measure_shipment)
from edgeprof.profilers.measure.fleet_spec import (BACKEND_RESOURCE, FLEET_ENV, INSECURE_ENV,
                                                   TLS_ENV, FleetSpec)
from edgeprof.profilers.measure.fleet_worker import (RUNTIME_DISTRIBUTIONS, WORKER_CONFIG,
                                                     board_contradiction, board_progress,
                                                     default_board_name,
                                                     descriptor_family, emulation_note,
                                                     fingerprint, list_boards, machine_family,
                                                     measured_on, run_on_board, serve_worker,
                                                     worker_resources)


# ------------------------------------------------------------------------ the runner
class RemoteRunner:
    """The Runner that measures on a board of the fleet (``profile --fleet``).

    ``run(request)`` builds the model here, ships the bytes with their sha256 and returns the
    board's RunRecord (its ``extra["fleet"]`` names the board and its fingerprint); a board
    that died ``retries + 1`` times, a timeout or no capable board raises
    :class:`MeasurementError` with the reason.

    ``progress`` (one line of text per step, as the inline and isolated runners take it)
    hears what is done here (building what is shipped) and, as ``board NAME: step``, the
    steps the board's worker reports while it runs (a generative run's load and pp/tg per
    depth); a failing callback or a lost line never changes the run's outcome.
    """

    name = "remote"

    def __init__(self, fleet: FleetSpec | str, target: str, *, retries: int = DEFAULT_RETRIES,
                 client=None, no_board_s: float = DEFAULT_NO_BOARD_S,
                 progress: Callable[[str], None] | None = None):
        self.spec = fleet if isinstance(fleet, FleetSpec) else FleetSpec.from_options(fleet)
        self.target = target
        self._client = client
        self._own_client = client is None
        self.retries = retries
        self.no_board_s = no_board_s
        self.progress = progress
        self._dispatcher: Dispatcher | None = None

    def _say(self, msg: str) -> None:
        if self.progress is not None:
            try:
                self.progress(msg)
            except Exception:  # noqa: BLE001 - a display problem is not the run's
                pass

    @property
    def dispatcher(self) -> Dispatcher:
        if self._dispatcher is None:
            if self._client is None:
                self._client = self.spec.connect()
            self._dispatcher = Dispatcher(self._client, retries=self.retries,
                                          no_board_s=self.no_board_s)
        return self._dispatcher

    def boards(self) -> list[dict[str, Any]]:
        return [b for b in self.dispatcher.boards(refresh=True) if self.target in b["targets"]]

    def run(self, request: MeasureRequest) -> RunRecord:
        why = self.dispatcher.unroutable(self.target, request.backend)
        if why:
            raise BackendUnavailableError(request.backend, why)
        return workload_of(request).run_remote(self, request)

    def run_job(self, key: str, request: MeasureRequest, shipment: Shipment,
                timeout_s: float) -> dict[str, Any]:
        """``request`` with ``shipment`` as one job on a board: the record's dict that came
        back (:class:`MeasurementError` with the reason when none did)."""
        job = FleetJob(key=key, target=self.target, backend=request.backend,
                       payload=job_payload(request, shipment, self.target),
                       timeout_s=timeout_s, progress=self.progress)
        outcome = self.dispatcher.run_one(job)
        if outcome.record is None:
            raise MeasurementError(f"on the {self.target} fleet: {outcome.reason}")
        return outcome.record

    def close(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.forget_progress()
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None
            self._dispatcher = None

    def __enter__(self) -> RemoteRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def job_timeout_s(config) -> float:
    """A job's default timeout: loading plus the timing plan's own caps, with room."""
    from edgeprof.profilers.measure.harness import plan_from_config

    plan = plan_from_config(config)
    return 120.0 + plan.warmup_max_time_s + 1.5 * plan.max_time_s


# ------------------------------------------------------------------- for the profile
def fleet_runner(fleet: FleetSpec | str | None, target: Any, *,
                 progress: Callable[[str], None] | None = None) -> RemoteRunner | None:
    """The RemoteRunner for ``profile(..., fleet=...)`` (None: measure here); its boards'
    steps go to ``progress``, as an inline or isolated runner's do."""
    if fleet is None:
        return None
    spec = fleet if isinstance(fleet, FleetSpec) else FleetSpec.from_options(fleet)
    if getattr(target, "is_host", False):
        raise UserError("a fleet measures on boards of a target descriptor; 'host' is this "
                        "machine: give --target raspberry_pi_4 (or another board's target)")
    return RemoteRunner(spec, target.id, progress=progress)


def board_target(record: BenchmarkResult, target: Any) -> Any | None:
    """``target`` as the machine the record was measured on, when a board of that target
    measured it (not an emulating one): its summary then reads the latency as measured on
    the target. None otherwise."""
    fleet = (record.extra or {}).get("fleet")
    if not fleet or fleet.get("emulating") or fleet.get("target") != getattr(target, "id", None):
        return None
    return dataclasses.replace(target, is_host=True)


__all__ = ["BACKEND_RESOURCE", "BOARD_MARGIN_S", "DEFAULT_NO_BOARD_S", "DEFAULT_RETRIES",
           "Dispatcher", "FLEET_ENV", "FleetJob", "FleetSpec", "INSECURE_ENV", "Outcome",
           "PROGRESS_TOPIC", "RUNTIME_DISTRIBUTIONS", "RemoteRunner", "SCHEDULER_GRACE_S",
           "SchedulerLostError", "Shipment", "TLS_ENV", "WORKER_CONFIG", "board_contradiction",
           "board_progress", "board_target", "build_shipment", "default_board_name",
           "descriptor_family", "emulation_note", "fingerprint", "fleet_runner", "job_payload",
           "job_timeout_s", "list_boards", "machine_family", "measure_shipment", "measured_on",
           "run_on_board", "serve_worker", "worker_resources"]

"""The dispatcher: jobs submitted to the boards by their resources (target and backend) and
collected, with retries after a board's death, per-job timeouts (a board that does not
answer is restarted), a wait for a capable board, and :class:`SchedulerLostError` when the
scheduler goes away. Part of the fleet (:mod:`edgeprof.profilers.measure.fleet`);
``distributed`` is imported inside the functions that use it.

A job with a ``progress`` callback hears its board's steps as they happen: the board logs
each as a Dask event (``Worker.log_event`` on :data:`PROGRESS_TOPIC`, tagged with the job's
token and the board's name), the scheduler forwards it to this client
(``Client.subscribe_topic``), whose handler only queues it; :meth:`Dispatcher.poll`, in the
caller's thread, hands it on as ``board NAME: step``. Nothing waits on it anywhere: a board
sends and goes on, the scheduler keeps a bounded log and forwards to the clients still
connected, and a callback that fails is ignored, so progress never changes an outcome."""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgeprof.core.errors import MeasurementError
from edgeprof.profilers.measure.fleet_spec import BACKEND_RESOURCE, one_line
from edgeprof.profilers.measure.fleet_worker import PROGRESS_TOPIC, list_boards, run_on_board

DEFAULT_RETRIES = 2
#: seconds a job may wait with no connected board able to run it before it is failed
DEFAULT_NO_BOARD_S = 120.0
#: seconds past a job's timeout before a board that has not answered is restarted (the board
#: itself stops the measuring process at the timeout)
BOARD_MARGIN_S = 30.0
#: seconds without a scheduler connection before the dispatcher gives up
SCHEDULER_GRACE_S = 10.0


class SchedulerLostError(MeasurementError):
    """The connection to the scheduler is gone (exit 3)."""


# ---------------------------------------------------------------- a board's progress
#: job token -> the queue of the Dispatcher that waits for that job (any client, any thread)
_ROUTES: dict[str, queue.SimpleQueue] = {}
#: the clients subscribed to PROGRESS_TOPIC (one handler per client, shared by its Dispatchers)
_LISTENING: weakref.WeakSet = weakref.WeakSet()


def _route(event: Any) -> None:
    """The client's handler of a progress event ``(time, message)``: runs on the client's
    event loop, so it only queues the message for the Dispatcher that waits for its job
    (a message for a job of another client or of a finished one is dropped)."""
    try:
        msg = event[1]
        inbox = _ROUTES.get(msg.get("job"))
        if inbox is not None:
            inbox.put(msg)
    except Exception:  # noqa: BLE001 - progress never disturbs the client
        pass


def _listen(client) -> bool:
    """Subscribe ``client`` to the boards' progress events (once); False when it cannot."""
    try:
        if client not in _LISTENING:
            client.subscribe_topic(PROGRESS_TOPIC, _route)
            _LISTENING.add(client)
        return True
    except Exception:  # noqa: BLE001 - no progress then, the job runs the same
        return False


# ----------------------------------------------------------------------- dispatching
@dataclass
class FleetJob:
    """One measurement to run on a board of ``target`` that can run ``backend``."""

    key: str
    target: str
    backend: str
    payload: dict[str, Any]
    timeout_s: float
    info: dict[str, Any] = field(default_factory=dict)  # the caller's own data
    #: the board's steps, one line each (``board NAME: step``); never sent to the board
    progress: Callable[[str], None] | None = field(default=None, repr=False, compare=False)


@dataclass
class Outcome:
    job: FleetJob
    record: dict[str, Any] | None  # the RunRecord dict, or None when failed here
    reason: str | None  # why no record came back
    attempts: int
    history: list[str]


@dataclass
class _Active:
    job: FleetJob
    future: Any
    attempt: int
    history: list[str]
    submitted: float
    started: float | None = None
    worker: str | None = None
    no_board_since: float | None = None


class Dispatcher:
    """Submits jobs to the boards and collects them: retries after a board's death, per-job
    timeouts, routing by resources, and a clear error when the scheduler goes away."""

    def __init__(self, client, *, retries: int = DEFAULT_RETRIES,
                 no_board_s: float = DEFAULT_NO_BOARD_S, local_targets: bool = False):
        self.client = client
        self.retries = int(retries)
        self.no_board_s = float(no_board_s)
        self.local_targets = local_targets
        self.active: dict[str, _Active] = {}
        self._seq = 0
        self._boards: list[dict[str, Any]] = []
        self._boards_at = 0.0
        self._lost_since: float | None = None
        self.seen: dict[str, dict[str, Any]] = {}  # every board seen, by name
        self._names: dict[str, str] = {}  # address -> board name, dead ones included
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()  # the boards' progress messages
        self._talking: dict[str, FleetJob] = {}  # progress token -> its job

    # -- routing --------------------------------------------------------------------------
    def boards(self, refresh: bool = False) -> list[dict[str, Any]]:
        if refresh or time.monotonic() - self._boards_at > 2.0:
            with self._guard():
                self._boards = list_boards(self.client)
            self._boards_at = time.monotonic()
            self.seen.update({b["name"]: b for b in self._boards})
            self._names.update({b["address"]: b["name"] for b in self._boards})
        return self._boards

    def capable(self, target: str, backend: str) -> list[dict[str, Any]]:
        return [b for b in self.boards() if target in b["targets"] and backend in b["backends"]]

    def unroutable(self, target: str, backend: str) -> str | None:
        """Why no board can run ``backend`` for ``target`` (None when one can). A board seen
        earlier that is away now (restarting after a crash) still counts: jobs wait for it."""
        self.boards(refresh=True)
        boards = [b for b in self.seen.values() if target in b["targets"]]
        if not boards:
            return f"no board of {target} is connected to the scheduler"
        if not any(backend in b["backends"] for b in boards):
            why = "; ".join(
                f"{b['name']}: " + ((b["fingerprint"].get("backends") or {}).get(backend, {})
                                    .get("reason") or f"'{backend}' not available")
                for b in boards)
            return f"no board of {target} can run backend '{backend}' ({why})"
        return None

    # -- submitting -----------------------------------------------------------------------
    def submit(self, job: FleetJob, *, _attempt: int = 1, _history: list[str] | None = None
               ) -> None:
        self._seq += 1
        digest = hashlib.sha1(job.key.encode()).hexdigest()[:12]
        key = f"edgeprof-{digest}-a{_attempt}-{self._seq}-{os.getpid()}"
        resources = {job.target: 1, BACKEND_RESOURCE.format(job.backend): 1}
        job.payload["timeout_s"] = job.timeout_s  # the board enforces it on its measuring process
        if job.progress is not None and _listen(self.client):
            token = job.payload.setdefault("progress", uuid.uuid4().hex)  # kept by retries
            self._talking[token] = job
            _ROUTES[token] = self._inbox
        with self._guard():
            future = self.client.submit(run_on_board, job.payload, key=key, pure=False,
                                        resources=resources, retries=0)
        self.active[key] = _Active(job, future, _attempt, list(_history or []),
                                   time.monotonic())

    @property
    def pending(self) -> int:
        return len(self.active)

    # -- collecting -----------------------------------------------------------------------
    def poll(self, wait_s: float = 1.0) -> list[Outcome]:
        """Wait up to ``wait_s`` for jobs to finish; return those that did (for good)."""
        from distributed import wait

        if not self.active:
            return []
        self.relay_progress()
        self._check_scheduler()
        futures = [a.future for a in self.active.values()]
        try:
            wait(futures, timeout=wait_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            pass
        except Exception as e:  # noqa: BLE001 - a dropped connection shows up here too
            self._check_scheduler(e)
        out: list[Outcome] = []
        self._track_running()
        now = time.monotonic()
        for key, a in list(self.active.items()):
            st = a.future.status
            if st == "finished":
                del self.active[key]
                try:
                    record = a.future.result()
                except Exception as e:  # noqa: BLE001
                    self._check_scheduler(e)
                    out.append(Outcome(a.job, None, f"fetching the result failed: "
                                                     f"{one_line(e)}", a.attempt, a.history))
                    continue
                fleet = (record.get("extra") or {}).get("fleet") or {}
                record.setdefault("extra", {})["fleet"] = dict(fleet, attempts=a.attempt,
                                                               history=a.history)
                out.append(Outcome(a.job, record, None, a.attempt, a.history))
            elif st == "error":
                del self.active[key]
                exc = a.future.exception()
                died = _worker_died(exc)
                last = getattr(getattr(exc, "last_worker", None), "address", None)
                board = self._board_name(a.worker or last) or "a board"
                reason = (f"{board} died while running it ({type(exc).__name__})" if died
                          else f"the board raised {one_line(exc)}")
                history = a.history + [f"attempt {a.attempt}: {reason}"]
                if died and a.attempt <= self.retries:
                    self.submit(a.job, _attempt=a.attempt + 1, _history=history)
                else:
                    tail = f" (after {a.attempt} attempts)" if a.attempt > 1 else ""
                    out.append(Outcome(a.job, None, reason + tail, a.attempt, history))
            elif st in ("cancelled", "lost"):
                self._check_scheduler(RuntimeError(f"job {st}"))
                del self.active[key]
                self.submit(a.job, _attempt=a.attempt, _history=a.history)
            elif a.started is not None and now - a.started > a.job.timeout_s + BOARD_MARGIN_S:
                del self.active[key]
                board = self._board_name(a.worker) or "its board"
                reason = f"timed out after {a.job.timeout_s:g} s on {board}"
                with self._guard():
                    self.client.cancel([a.future], force=True)
                self._restart(a.worker)
                out.append(Outcome(a.job, None, reason + "; the board was restarted",
                                   a.attempt, a.history + [f"attempt {a.attempt}: {reason}"]))
            elif a.started is None:
                if self.capable(a.job.target, a.job.backend):
                    a.no_board_since = None
                else:
                    a.no_board_since = a.no_board_since or now
                    if now - a.no_board_since > min(self.no_board_s, a.job.timeout_s):
                        del self.active[key]
                        with self._guard():
                            self.client.cancel([a.future], force=True)
                        why = self.unroutable(a.job.target, a.job.backend) or "no board"
                        out.append(Outcome(a.job, None, f"{why} (waited "
                                                        f"{now - a.no_board_since:.0f} s)",
                                           a.attempt, a.history))
        self.relay_progress()  # what the boards said before they answered
        for o in out:
            self.forget_progress(o.job)
        return out

    # -- progress -------------------------------------------------------------------------
    def relay_progress(self) -> None:
        """Hand the boards' progress messages that arrived to their jobs' callbacks, here
        (the caller's thread); a callback that raises is ignored."""
        while True:
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return
            job = self._talking.get(msg.get("job"))
            if job is None or job.progress is None:
                continue
            try:
                job.progress(f"board {msg.get('board') or '?'}: {msg.get('text')}")
            except Exception:  # noqa: BLE001 - a display problem is not the run's
                pass

    def forget_progress(self, job: FleetJob | None = None) -> None:
        """Stop routing the progress of ``job`` (of every job when None)."""
        for token, j in list(self._talking.items()):
            if job is None or j is job:
                del self._talking[token]
                _ROUTES.pop(token, None)

    @contextlib.contextmanager
    def _guard(self):
        """A dropped scheduler connection (CommClosedError is an OSError) becomes
        :class:`SchedulerLostError`."""
        try:
            yield
        except SchedulerLostError:
            raise
        except (OSError, TimeoutError) as e:
            raise SchedulerLostError(self._lost_message(e)) from None

    def _track_running(self) -> None:
        try:
            processing = self.client.processing()
        except Exception as e:  # noqa: BLE001
            self._check_scheduler(e)
            return
        where = {k: addr for addr, keys in processing.items() for k in keys}
        now = time.monotonic()
        for key, a in self.active.items():
            addr = where.get(key)
            if addr is not None and (a.started is None or a.worker != addr):
                a.started, a.worker = now, addr

    def _board_name(self, addr: str | None) -> str | None:
        if addr is None:
            return None
        name = self._names.get(addr)
        return f"board {name}" if name else f"the worker at {addr}"

    def _restart(self, addr: str | None) -> None:
        if addr is None:
            return
        try:
            self.client.restart_workers([addr], raise_for_error=False)
        except Exception:  # noqa: BLE001 - a worker without a nanny cannot be restarted
            pass

    def _check_scheduler(self, error: BaseException | None = None) -> None:
        status = getattr(self.client, "status", "running")
        if status == "running" and error is None:
            self._lost_since = None
            return
        if status in ("closed", "closing", "failed") or (
                error is not None and status != "running"):
            raise SchedulerLostError(self._lost_message(error))
        if status != "running":
            self._lost_since = self._lost_since or time.monotonic()
            if time.monotonic() - self._lost_since > SCHEDULER_GRACE_S:
                raise SchedulerLostError(self._lost_message(error))

    def _lost_message(self, error: BaseException | None) -> str:
        addr = getattr(self.client, "scheduler", None)
        addr = getattr(addr, "address", None) or "the scheduler"
        return (f"lost the scheduler at {addr}"
                + (f" ({one_line(error)})" if error is not None else "")
                + f"; {len(self.active)} job(s) were running")

    def run_one(self, job: FleetJob, wait_s: float = 0.5) -> Outcome:
        """Submit one job and wait for its outcome."""
        try:
            self.submit(job)
            while True:
                for o in self.poll(wait_s):
                    if o.job is job:
                        return o
        finally:
            self.forget_progress(job)


def _worker_died(exc: BaseException | None) -> bool:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return True
    name = type(exc).__name__
    return name in ("CommClosedError", "StreamClosedError", "WorkerGoneError")

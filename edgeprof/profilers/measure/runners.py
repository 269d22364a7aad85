"""Runners: where a :class:`~edgeprof.core.requests.MeasureRequest` runs.

Every runner runs any registered workload (:mod:`edgeprof.core.workload`; the backend's
``Backend.workload``) by asking it: ``run_here`` in this process (a tensor model through the
harness, a generative one through llama-bench's pp/tg per depth), ``run_remote`` on a board,
``default_timeout_s`` and ``record_type`` for an isolated worker.
:func:`edgeprof.profilers.measure.choice.choose_runner` is the one place a runner is chosen.

* :class:`InlineRunner` — in this process: resolve the backend class and the model (or load
  the built artifact), build the backend object once, and time it with the harness. The
  default for ``profile``, ``batch``, ``optimize`` and a sweep without a fleet alike, so one
  job is measured the same way whichever command asks (``environment["conditions"]``).
* :class:`IsolatedRunner` — in a fresh worker process (``python -c`` running
  :mod:`edgeprof.profilers.measure.worker`), with a timeout. A runtime that segfaults, hangs,
  calls ``sys.exit`` or is killed for memory takes only its worker down. What crosses is the
  request's ``to_dict()`` (its plugins file included, so a plugin's backend runs in the worker
  too) and back the record's ``to_dict()`` or the error raised there.

A runner may carry a ``progress`` callback (one line of text per step): a generative run
reports its steps through it as it goes (building, loading, each depth's pp/tg), from this
process or, over the same pipe as its answer, from the isolated worker; the caller's progress
line shows them as it shows a tensor run's ("benchmarking ...").

A runner returns the record of a run that finished and raises otherwise: the harness's
:class:`~edgeprof.profilers.measure.harness.MeasureFailure`, the backend's own error, or
:class:`WorkerLost` (the worker died or timed out). ``measure()`` turns those into a status.

Workers die with their parent: on Linux the worker asks the kernel for ``SIGKILL`` when its
parent goes (``prctl(PR_SET_PDEATHSIG)``), and everywhere it also polls its parent's pid; a
killed ``edgeprof`` leaves no worker behind. Ctrl-C reaches the worker too (same process
group): it exits quietly (status 130) and the parent, which gets ``KeyboardInterrupt``,
stops and reaps it. A Ctrl-C that Python drops (raised in a gc callback or a ``__del__``,
"Exception ignored") is raised again by the parent's wait (:func:`_dropped_interrupts`),
from the API as from the CLI.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from edgeprof.core.errors import EdgeprofError, MeasurementError, UserError
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import RunRecord
from edgeprof.core.workload import workload_of
from edgeprof.profilers.measure.harness import MeasureFailure


class WorkerLost(MeasurementError):
    """The worker process died, hung past its timeout, or sent nothing back."""


# --------------------------------------------------------------------------- resolving
def _import_path(path: str) -> Any:
    mod, _, qual = path.partition(":")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def backend_class(request: MeasureRequest, registry: Any = None) -> type:
    """The backend class a request names: its in-process ``backend_type``, its
    ``backend_class`` import path, or the registry's class of that name."""
    if request.backend_type is not None:
        return request.backend_type
    if request.backend_class:
        return _import_path(request.backend_class)
    return request_registry(request, registry).backend(request.backend)


def artifact_model(request: MeasureRequest, registry: Any):
    """(handle, artifact) of a request for a built artifact (``edgeprof.core.artifact``):
    its files are verified; the input specs are the request's or, when it names none, read
    from the artifact's entry file (without importing a framework)."""
    from edgeprof.core.artifact import Artifact
    from edgeprof.core.models import ModelHandle, resolve_model, specs_from_shapes

    artifact = Artifact.from_dict(request.artifact)
    artifact.verify()
    entry = artifact.entry_path
    if request.input_shapes:
        handle = ModelHandle(spec=str(entry), name=entry.stem, format=artifact.format,
                             input_specs=specs_from_shapes(request.input_shapes,
                                                           request.input_dtypes, str(entry)),
                             path=entry)
    else:
        handle = resolve_model(str(entry), registry=registry)
    return handle, artifact


def request_registry(request: MeasureRequest, registry: Any) -> Any:
    if registry is None:
        from edgeprof.core.plugins import get_registry

        registry = get_registry(request.plugins_file)
    return registry


class InlineRunner:
    """Run the request in this process. ``process`` is what the record calls this process
    (``environment["conditions"]["process"]``): ``inline`` (the caller's own), or
    ``isolated`` when the isolated worker runs it."""

    name = "inline"

    def __init__(self, registry: Any = None, *, process: str = "inline",
                 progress: Callable[[str], None] | None = None):
        self.registry = registry
        self.process = process
        self.progress = progress

    def run(self, request: MeasureRequest) -> RunRecord:
        cls = backend_class(request, self.registry)
        workload = workload_of(request if request.workload else cls, self.registry)
        return workload.run_here(request, cls, registry=self.registry, process=self.process,
                                 progress=self.progress)


# --------------------------------------------------------------------- the isolated one
def _class_path(cls: type) -> str | None:
    mod = cls.__module__
    if mod in ("__main__", "__mp_main__") or mod.startswith(("edgeprof_userplugin_",
                                                             "edgeprof_usermodel_")):
        return None
    if "<locals>" in cls.__qualname__:
        return None
    try:
        importlib.import_module(mod)
    except Exception:  # noqa: BLE001
        return None
    return f"{mod}:{cls.__qualname__}"


def wire_request(request: MeasureRequest) -> tuple[dict[str, Any] | None, str | None]:
    """The request as plain data for a worker, or ``(None, why it must stay here)``."""
    why = request.local_only()
    if why:
        return None, why
    d = request.to_dict()
    if request.backend_type is not None and not request.backend_class:
        try:
            from edgeprof.core.plugins import get_registry

            entry = get_registry(request.plugins_file).backends.get(request.backend)
            by_name = (entry is not None
                       and entry.cls.__qualname__ == request.backend_type.__qualname__)
        except EdgeprofError:
            by_name = False
        if not by_name:
            d["backend_class"] = _class_path(request.backend_type)
            if d["backend_class"] is None:
                return None, (f"backend class {request.backend_type.__qualname__} is neither "
                              f"registered under '{request.backend}' nor importable by module "
                              "path")
    return d, None


def encode_error(exc: BaseException) -> dict[str, Any]:
    """An exception as plain data: its type, the nearest class the parent can rebuild
    (edgeprof's errors, Python's built-ins) and its message."""
    from edgeprof.core import errors

    base = "builtins:Exception"
    for k in type(exc).__mro__:
        if (k.__module__ == "edgeprof.core.errors" and getattr(errors, k.__name__, None) is k) \
                or (k.__module__ == "builtins" and k is not KeyboardInterrupt):
            base = f"{k.__module__}:{k.__name__}"
            break
    return {"type": type(exc).__name__, "base": base, "message": str(exc)[:4000]}


def decode_error(d: dict[str, Any]) -> BaseException:
    """The exception :func:`encode_error` described, as its nearest rebuildable class; the
    original type name stays in ``remote_type`` (``one_line`` prints it)."""
    import builtins

    from edgeprof.core import errors

    mod, _, name = str(d.get("base", "builtins:Exception")).partition(":")
    cls = getattr(errors if mod == "edgeprof.core.errors" else builtins, name, Exception)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) \
            or issubclass(cls, KeyboardInterrupt):
        cls = Exception
    exc = cls.__new__(cls)
    BaseException.__init__(exc, d.get("message", ""))
    if d.get("type") and d["type"] != cls.__name__:
        exc.remote_type = d["type"]
    return exc


_BOOT = """\
import os, signal, sys
signal.signal(signal.SIGINT, lambda *a: os._exit(130))
signal.signal(signal.SIGTERM, lambda *a: os._exit(143))
sys.path[:] = {path!r}
from edgeprof.profilers.measure.worker import main
main()
"""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _death_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker vanished without an exit status"
    if exitcode < 0:
        name = _signal_name(-exitcode)
        reason = f"worker died with signal {name}"
        if name == "SIGKILL":
            reason += " (killed from outside, often the out-of-memory killer)"
        return reason
    return f"worker exited with status {exitcode} before sending a result"


def _stop(proc) -> None:
    """Terminate, then kill, then reap ``proc``."""
    import subprocess

    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable
        pass


def _relay(line: bytes, progress: Callable[[str], None] | None) -> None:
    """A progress line from the worker (``{"progress": text}``) to ``progress``; anything
    else (or a callback that fails) is dropped: progress never changes a run's outcome."""
    if progress is None:
        return
    try:
        msg = json.loads(line)
        if isinstance(msg, dict) and isinstance(msg.get("progress"), str):
            progress(msg["progress"])
    except Exception:  # noqa: BLE001 - a display problem is not the run's
        pass


@contextmanager
def _dropped_interrupts() -> Iterator[list[BaseException]]:
    """While a worker is waited on: the interrupts Python dropped. An exception raised in a
    gc callback or a ``__del__`` goes to ``sys.unraisablehook`` ("Exception ignored") and is
    lost, so a Ctrl-C that lands there would vanish and the wait go on; the wait raises it
    again. The same hook the CLI's :func:`~edgeprof.cli.signals.handling_signals` uses for
    the whole command; the previous hook still sees every report."""
    dropped: list[BaseException] = []
    previous = sys.unraisablehook

    def hook(info: Any) -> None:
        if isinstance(info.exc_value, KeyboardInterrupt):
            dropped.append(info.exc_value)
        previous(info)

    sys.unraisablehook = hook
    try:
        yield dropped
    finally:
        sys.unraisablehook = previous


def spawn_worker(wire: dict[str, Any], timeout_s: float, *,
                 progress: Callable[[str], None] | None = None
                 ) -> tuple[dict | None, str | None, int]:
    """Run one request in a fresh worker; ``(message or None, why none, worker pid)``.

    The worker writes its progress as newline-terminated JSON lines (``{"progress": ...}``,
    handed to ``progress`` as they arrive) and then its answer, one JSON message without a
    newline (JSON text holds none), before it closes the pipe."""
    import subprocess

    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT.format(path=list(sys.path)), str(w), str(os.getpid())],
            stdin=subprocess.PIPE, pass_fds=(w,))
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)  # the worker holds the only write end: EOF when it exits
    buffer = b""
    reason = None
    answered = False
    try:
        try:
            proc.stdin.write(json.dumps(wire).encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # died before reading: its exit status says why
        deadline = time.monotonic() + timeout_s
        with _dropped_interrupts() as dropped:
            answered, reason, buffer = _wait(r, deadline, timeout_s, dropped, progress)
    finally:  # Ctrl-C, timeout or done: never leave the worker behind
        os.close(r)
        if not answered:
            _stop(proc)
        else:
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:  # sent its result but will not exit
                _stop(proc)
    message = None
    if buffer and reason is None:
        try:
            message = json.loads(buffer)
        except ValueError:
            message = None
        if not isinstance(message, dict) or set(message) == {"progress"}:
            message = None  # cut off mid-line: no answer
    if message is None and reason is None:
        reason = _death_reason(proc.returncode)
    return message, reason, proc.pid


def _wait(r: int, deadline: float, timeout_s: float, dropped: list[BaseException],
          progress: Callable[[str], None] | None) -> tuple[bool, str | None, bytes]:
    """Read the worker's pipe until it closes (answered) or ``deadline`` passes; relay its
    progress lines. ``(answered, why not, what it wrote)``."""
    import select

    buffer = b""
    while True:
        if dropped:  # an interrupt Python lost in a gc callback or a __del__
            raise dropped.pop()
        left = deadline - time.monotonic()
        if left <= 0:
            return False, f"timed out after {timeout_s:g} s", buffer
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if ready:
            data = os.read(r, 1 << 20)
            if not data:
                return True, None, buffer
            buffer += data
            while b"\n" in buffer:  # every complete line is a progress line
                line, buffer = buffer.split(b"\n", 1)
                _relay(line, progress)


class IsolatedRunner:
    """Run the request in a fresh worker process, with a timeout (``timeout_s``, else the
    request's ``config.timeout_s``, else the workload's ``default_timeout_s``: a tensor
    run's timing plan caps plus ``tensor.DEFAULT_TIMEOUT_BASE_S``). A request that cannot
    cross (an in-memory module, a backend class found neither by name nor by import path)
    runs inline, with a note."""

    name = "isolated"

    def __init__(self, timeout_s: float | None = None, *,
                 progress: Callable[[str], None] | None = None):
        if timeout_s is not None and not (isinstance(timeout_s, (int, float))
                                          and timeout_s > 0):
            raise UserError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self.progress = progress

    def _timeout(self, request: MeasureRequest) -> float:
        t = self.timeout_s or request.config.timeout_s
        if t is None:
            return workload_of(request).default_timeout_s(request)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
            raise UserError(f"timeout_s must be a positive number of seconds, got {t!r}")
        return float(t)

    def run(self, request: MeasureRequest) -> RunRecord:
        timeout_s = self._timeout(request)
        wire, why = wire_request(request)
        if wire is None:
            note = f"{why}; it ran in-process, not isolated"
            try:
                record = InlineRunner(progress=self.progress).run(request)
            except MeasureFailure as f:
                if f.partial is not None:
                    f.partial.notes.append(note)
                raise
            record.notes.append(note)
            return record
        message, reason, pid = spawn_worker(wire, timeout_s, progress=self.progress)
        if message is None:
            partial = workload_of(request).blank_record(request, request.backend_type)
            partial.notes.append(f"ran in an isolated worker process (pid {pid})")
            raise MeasureFailure(None, WorkerLost(reason), partial)
        record_type = workload_of(request).record_type  # what the worker's dicts hold
        if "result" in message:
            return record_type.from_dict(message["result"])
        if "failure" in message:
            f = message["failure"]
            partial = record_type.from_dict(f["partial"]) if f.get("partial") else None
            raise MeasureFailure(f.get("phase"), decode_error(f["error"]), partial)
        raise decode_error(message["error"])


def check_timeout(timeout_s: Any) -> None:
    """UserError (exit 2) unless ``timeout_s`` is None or a positive number of seconds."""
    if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(
            timeout_s, (int, float)) or timeout_s <= 0):
        raise UserError(f"--timeout must be a positive number of seconds, got {timeout_s!r}")


def local_runner(*, isolate: bool = False, timeout_s: float | None = None,
                 progress: Callable[[str], None] | None = None, registry: Any = None):
    """The runner on this machine: an isolated worker (``isolate`` or a ``timeout_s``: a
    timeout can only be enforced on another process), else this process
    (:func:`edgeprof.profilers.measure.choice.choose_runner` adds a fleet's boards)."""
    check_timeout(timeout_s)
    if isolate or timeout_s is not None:
        return IsolatedRunner(timeout_s, progress=progress)
    return InlineRunner(registry, progress=progress)


def default_runner(request_or_config: Any, *,
                   progress: Callable[[str], None] | None = None):
    """:func:`local_runner` for a request (or config): what its config asks (isolation, a
    timeout)."""
    config = getattr(request_or_config, "config", request_or_config)
    return local_runner(isolate=config.isolate, timeout_s=config.timeout_s, progress=progress)


__all__ = ["InlineRunner", "IsolatedRunner", "WorkerLost", "artifact_model", "backend_class",
           "check_timeout", "decode_error", "default_runner", "local_runner", "encode_error", "request_registry",
           "spawn_worker", "wire_request"]

"""Isolated benchmarks: each one in its own spawned worker process, with a timeout.

A runtime that segfaults, hangs or is killed for memory takes only its worker down; the
caller gets that backend's ``failed`` result with a one-line reason ("worker died with signal
SIGSEGV", "timed out after 30 s") and goes on. Workers are started with multiprocessing's
``spawn`` context (never ``fork``: forking after a runtime has started threads can deadlock).

What crosses to the worker is a small serializable :class:`WorkerRequest`: the backend's
registry name plus the plugins file that registers it (or, for a class that no plugins file
registers, its ``module:QualName`` import path), the model spec string and input specs, and
the RunConfig as a dict. The worker resolves the backend through
``edgeprof.core.plugins.get_registry(plugins_file)`` and the model through
``edgeprof.core.models.resolve_model``, runs :func:`edgeprof.profilers.measure.harness.run_in_process`
and sends back ``BenchmarkResult.to_dict()``. A model given as an ``nn.Module`` object (spec
``object:...``) or a backend class that cannot be found by name or import path cannot cross:
:func:`request_for` says so and the harness runs it in-process with a note.

Backends are instantiated with no arguments in the worker.
"""

from __future__ import annotations

import importlib
import os
import signal
from dataclasses import asdict, dataclass
from typing import Any

from edgeprof.core.backend import Backend, RunConfig
from edgeprof.core.errors import EdgeprofError, MeasurementError, UserError
from edgeprof.core.results import BenchmarkResult, LatencyStats, WarningRecord

#: seconds a worker may take when RunConfig.timeout_s is not set: imports and conversion
#: (which can be slow) plus the timing plan's own caps
DEFAULT_TIMEOUT_BASE_S = 240.0


def default_timeout_s(plan) -> float:
    return DEFAULT_TIMEOUT_BASE_S + plan.warmup_max_time_s + 1.5 * plan.max_time_s


@dataclass
class WorkerRequest:
    """Everything a worker needs, as plain data."""

    backend: str
    model_spec: str
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    config: dict[str, Any]
    plugins_file: str | None = None
    backend_class: str | None = None  # "module:QualName" when not resolved by registry name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkerRequest:
        return cls(**d)


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


def request_for(backend: Backend, model, config: RunConfig
                ) -> tuple[WorkerRequest | None, str | None]:
    """The worker request for this benchmark, or ``(None, why it must run in-process)``."""
    from edgeprof.core.plugins import ENV_VAR, get_registry

    if model.spec.startswith("object:"):
        return None, ("the model was given as an nn.Module object, which cannot cross to a "
                      "worker process; it ran in-process, not isolated (give a "
                      "package.module:factory spec to isolate it)")
    plugins_file = (config.options or {}).get("plugins_file") or os.environ.get(ENV_VAR)
    by_name = False
    try:
        entry = get_registry(plugins_file).backends.get(backend.name)
        by_name = entry is not None and entry.cls.__qualname__ == type(backend).__qualname__
    except EdgeprofError:
        by_name = False
    class_path = None if by_name else _class_path(type(backend))
    if not by_name and class_path is None:
        return None, (f"backend class {type(backend).__qualname__} is neither registered under "
                      f"'{backend.name}' nor importable by module path; it ran in-process, "
                      "not isolated")
    cfg = config.to_dict()
    cfg["isolate"] = False
    req = WorkerRequest(
        backend=backend.name, model_spec=str(model.path.resolve()) if model.path else model.spec,
        input_shapes=[list(s.shape) for s in model.input_specs],
        input_dtypes=[s.dtype for s in model.input_specs], config=cfg,
        plugins_file=str(plugins_file) if plugins_file else None, backend_class=class_path)
    return req, None


# ----------------------------------------------------------------------- the worker
def _resolve_backend(req: WorkerRequest) -> type:
    if req.backend_class:
        mod, _, qual = req.backend_class.partition(":")
        obj: Any = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
        return obj
    from edgeprof.core.plugins import get_registry

    return get_registry(req.plugins_file).backend(req.backend)


def _worker_main(request: dict[str, Any], conn) -> None:
    """Entry point of a spawned worker: run one benchmark, send one message, exit."""
    try:
        req = WorkerRequest.from_dict(request)
        from edgeprof.core.models import resolve_model
        from edgeprof.core.plugins import get_registry
        from edgeprof.profilers.measure.harness import run_in_process

        backend = _resolve_backend(req)()
        registry = get_registry(req.plugins_file)
        model = resolve_model(req.model_spec, input_shapes=req.input_shapes,
                              input_dtypes=req.input_dtypes, registry=registry)
        result = run_in_process(backend, model, RunConfig(**req.config))
        result.notes.append(f"ran in an isolated worker process (pid {os.getpid()})")
        conn.send({"result": result.to_dict()})
    except EdgeprofError as e:
        conn.send({"error": {"type": type(e).__name__, "message": str(e),
                             "user": isinstance(e, UserError)}})
    except BaseException as e:  # noqa: BLE001 - report, don't die silently
        from edgeprof.profilers.measure.harness import one_line

        conn.send({"error": {"type": type(e).__name__, "message": one_line(e), "user": False}})
    finally:
        conn.close()


# ----------------------------------------------------------------------- the parent
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


def _reraise(err: dict[str, Any]) -> None:
    """Raise a worker's EdgeprofError again in the parent, as the same class where possible."""
    from edgeprof.core import errors

    cls = getattr(errors, err.get("type", ""), None)
    if not (isinstance(cls, type) and issubclass(cls, EdgeprofError)):
        cls = UserError
    exc = cls.__new__(cls)
    Exception.__init__(exc, err["message"])
    raise exc


def result_from_dict(d: dict[str, Any]) -> BenchmarkResult:
    """Rebuild a BenchmarkResult from its ``to_dict()`` form."""
    d = dict(d)
    stats = d.pop("stats", None)
    warnings = d.pop("warnings", None) or []
    from dataclasses import fields

    names = {f.name for f in fields(BenchmarkResult)}
    result = BenchmarkResult(**{k: v for k, v in d.items() if k in names})
    if stats is not None:
        snames = {f.name for f in fields(LatencyStats)}
        result.stats = LatencyStats(**{k: v for k, v in stats.items() if k in snames})
    result.warnings = [WarningRecord(w["code"], w["message"]) for w in warnings]
    return result


def _failed(req: WorkerRequest, reason: str) -> BenchmarkResult:
    return BenchmarkResult(backend=req.backend, model=req.model_spec,
                           requested_precision=req.config.get("precision", "fp32"),
                           executed_precision=None, status="failed", reason=reason,
                           batch_size=req.input_shapes[0][0] if req.input_shapes and
                           req.input_shapes[0] else 1,
                           device=req.config.get("device", "cpu"), config=dict(req.config),
                           notes=["ran in an isolated worker process"])


def run_isolated(request: WorkerRequest, timeout_s: float) -> BenchmarkResult:
    """Run one benchmark in a spawned worker; crashes and hangs become ``failed`` results.

    A ``UserError`` raised in the worker (a bad model spec, an unknown backend) is raised
    again here, as the same class.
    """
    import multiprocessing as mp

    if timeout_s is None or timeout_s <= 0:
        raise UserError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    ctx = mp.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker_main, args=(request.to_dict(), sender),
                       name=f"edgeprof-worker-{request.backend}", daemon=True)
    proc.start()
    sender.close()  # so the parent sees EOF when the worker dies
    message = None
    reason = None
    try:
        if receiver.poll(timeout_s):
            try:
                message = receiver.recv()
            except (EOFError, OSError):
                message = None
        else:
            reason = f"timed out after {timeout_s:g} s"
    finally:
        receiver.close()
        if reason is not None:  # hung: stop it
            proc.terminate()
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
        proc.join(5.0)
        if proc.is_alive():  # sent its result but will not exit
            proc.kill()
            proc.join(2.0)
    if message is None:
        return _failed(request, reason or _death_reason(proc.exitcode))
    if "error" in message:
        err = message["error"]
        if err.get("user") or err.get("type") in ("MeasurementError", "ConstraintError"):
            _reraise(err)
        return _failed(request, f"worker raised {err['message']}"
                       if err["message"].startswith(err["type"]) else
                       f"worker raised {err['type']}: {err['message']}")
    return result_from_dict(message["result"])


def raise_for_status(result: BenchmarkResult) -> BenchmarkResult:
    """``MeasurementError`` with the reason when a run that should work produced nothing."""
    if result.status == "failed":
        raise MeasurementError(f"{result.backend} ({result.requested_precision}) failed: "
                               f"{result.reason}")
    return result


__all__ = ["WorkerRequest", "default_timeout_s", "raise_for_status", "request_for",
           "result_from_dict", "run_isolated"]

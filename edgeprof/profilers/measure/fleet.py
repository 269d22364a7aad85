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
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import ipaddress
import os
import platform
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof._version import __version__
from edgeprof.core.errors import (BackendUnavailableError, EdgeprofError, MeasurementError,
                                  UnsupportedError, UserError)
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult

#: the scheduler address when ``--fleet`` is not given
FLEET_ENV = "EDGEPROF_FLEET"
#: TLS files and the explicit opt-out, for commands that take ``--fleet`` (profile, sweep)
TLS_ENV = {"tls_ca": "EDGEPROF_FLEET_TLS_CA", "tls_cert": "EDGEPROF_FLEET_TLS_CERT",
           "tls_key": "EDGEPROF_FLEET_TLS_KEY"}
INSECURE_ENV = "EDGEPROF_FLEET_INSECURE"
#: resource that routes a job to a worker that can run a backend
BACKEND_RESOURCE = "backend:{}"
DEFAULT_RETRIES = 2
#: seconds a job may wait with no connected board able to run it before it is failed
DEFAULT_NO_BOARD_S = 120.0
#: seconds past a job's timeout before a board that has not answered is restarted (the board
#: itself stops the measuring process at the timeout)
BOARD_MARGIN_S = 30.0
#: seconds without a scheduler connection before the dispatcher gives up
SCHEDULER_GRACE_S = 10.0
#: Python distributions of the runtimes a board may hold (reported with their versions)
RUNTIME_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "openvino", "ai-edge-litert",
                         "tflite-runtime", "tensorrt", "torch", "tensorflow", "onnx",
                         "distributed", "numpy")


class SchedulerLostError(MeasurementError):
    """The connection to the scheduler is gone (exit 3)."""


# ------------------------------------------------------------------ address and TLS
@dataclass(frozen=True)
class FleetSpec:
    """Where the scheduler is and how to reach it safely."""

    address: str
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False

    @classmethod
    def from_options(cls, address: str | None = None, *, tls_ca: str | None = None,
                     tls_cert: str | None = None, tls_key: str | None = None,
                     insecure: bool | None = None) -> FleetSpec | None:
        """From explicit values, falling back on ``$EDGEPROF_FLEET`` and the TLS variables;
        None when no scheduler is named anywhere."""
        address = address or os.environ.get(FLEET_ENV)
        if not address:
            return None
        env = {k: os.environ.get(v) or None for k, v in TLS_ENV.items()}
        if insecure is None:
            insecure = os.environ.get(INSECURE_ENV, "").lower() in ("1", "true", "yes")
        spec = cls(address.strip(), tls_ca or env["tls_ca"], tls_cert or env["tls_cert"],
                   tls_key or env["tls_key"], bool(insecure))
        spec.check()
        return spec

    @property
    def host(self) -> str:
        rest = self.address.split("://", 1)[-1]
        if rest.startswith("["):  # [::1]:8786
            return rest[1:].split("]", 1)[0]
        return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest

    @property
    def tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert or self.tls_key)

    @property
    def loopback(self) -> bool:
        host = self.host
        if host in ("localhost", "localhost.localdomain"):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def check(self) -> None:
        """Refuse what would be unsafe or cannot work, before connecting."""
        scheme = self.address.split("://", 1)[0] if "://" in self.address else "tcp"
        if scheme not in ("tcp", "tls"):
            raise UserError(f"scheduler address '{self.address}' must be HOST:PORT, "
                            "tcp://HOST:PORT or tls://HOST:PORT")
        if self.tls:
            missing = [f"--tls-{n}" for n, v in (("ca", self.tls_ca), ("cert", self.tls_cert),
                                                 ("key", self.tls_key)) if not v]
            if missing:
                raise UserError(f"TLS needs a CA, a certificate and a key: give "
                                f"{', '.join(missing)} too")
            for v in (self.tls_ca, self.tls_cert, self.tls_key):
                if not Path(v).is_file():
                    raise UserError(f"TLS file '{v}' does not exist")
            return
        if scheme == "tls":
            raise UserError(f"scheduler '{self.address}' speaks TLS: give --tls-ca, --tls-cert "
                            "and --tls-key")
        if not self.loopback and not self.insecure:
            raise UserError(
                f"scheduler '{self.address}' is beyond loopback and no TLS was given: Dask runs "
                "pickled functions from the scheduler, so give --tls-ca, --tls-cert and "
                "--tls-key (or $EDGEPROF_FLEET_TLS_*), or --insecure on a network you trust")

    @property
    def url(self) -> str:
        rest = self.address.split("://", 1)[-1]
        return f"{'tls' if self.tls else 'tcp'}://{rest}"

    def security(self):
        """``distributed.security.Security`` for TLS, or None."""
        if not self.tls:
            return None
        from distributed.security import Security

        return Security(tls_ca_file=self.tls_ca, tls_client_cert=self.tls_cert,
                        tls_client_key=self.tls_key, tls_worker_cert=self.tls_cert,
                        tls_worker_key=self.tls_key, require_encryption=True)

    def connect(self, timeout_s: float = 10.0):
        """A ``distributed.Client`` on the scheduler; a one-line error when it cannot."""
        from distributed import Client

        try:
            return Client(self.url, security=self.security(), timeout=timeout_s,
                          set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise UserError(f"cannot reach the scheduler at {self.url} ({_one_line(e)}); is "
                            "'dask scheduler' running there, and the port open?") from None


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__


# -------------------------------------------------------------------------- boards
def machine_family(machine: str) -> str | None:
    """``x86`` / ``arm`` / None (unknown) for ``platform.machine()``."""
    m = machine.lower()
    if m in ("x86_64", "amd64", "i386", "i686", "x86"):
        return "x86"
    if m.startswith(("arm", "aarch64")):
        return "arm"
    return None


def descriptor_family(target: Any) -> str | None:
    """The CPU family a descriptor's processor names (``arm`` / ``x86``), or None when it
    names none (a GPU only, an NPU): such a descriptor cannot be contradicted by the CPU."""
    text = f"{getattr(target, 'processor', '')} {getattr(target, 'name', '')}".lower()
    if any(w in text for w in ("arm ", "arm,", "cortex", "armv", "aarch64", "neoverse",
                               "apple a1", "apple m")):
        return "arm"
    if any(w in text for w in ("x86", "amd ryzen", "intel", "epyc", "xeon", "avx")):
        return "x86"
    return None


def board_contradiction(target: Any, fp: dict[str, Any]) -> str | None:
    """Why this machine cannot be ``target`` (None when nothing contradicts it)."""
    want = descriptor_family(target)
    have = machine_family(fp.get("arch", ""))
    if want and have and want != have:
        return (f"this machine is {fp.get('arch')} ({fp.get('cpu_model')}) but {target.id} is "
                f"{want} ({target.processor})")
    return None


def _dist_version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=8)
def _fingerprint(target_id: str, board: str, emulate: bool) -> dict[str, Any]:
    import psutil

    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.environment import cpu_model

    freq = None
    try:
        f = psutil.cpu_freq()
        freq = float((f.max or f.current) * 1e6) if f else None
    except (OSError, NotImplementedError, AttributeError):
        freq = None
    backends: dict[str, Any] = {}
    try:
        for name, entry in get_registry().backends.items():
            a = entry.cls.availability()
            backends[name] = {"available": a.available,
                              **({} if a.available else {"reason": a.reason})}
    except EdgeprofError as e:  # a broken plugins file: the board still reports itself
        backends = {"error": {"available": False, "reason": str(e)}}
    runtimes = {d: v for d in RUNTIME_DISTRIBUTIONS if (v := _dist_version(d))}
    return {
        "board": board, "target": target_id, "emulating": bool(emulate),
        "hostname": socket.gethostname(), "cpu_model": cpu_model(),
        "arch": platform.machine(), "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True), "frequency_hz": freq,
        "ram_bytes": int(psutil.virtual_memory().total),
        "os": platform.platform(), "python": platform.python_version(),
        "runtimes": runtimes, "backends": backends, "edgeprof_version": __version__,
        "pid": os.getpid(),
    }


def fingerprint(target_id: str, board: str = "", emulate: bool = False) -> dict[str, Any]:
    """This machine as a board of ``target_id``: what a worker publishes."""
    return dict(_fingerprint(target_id, board or default_board_name(target_id), emulate))


def _startup_fingerprint(target_id: str, board: str, emulate: bool, worker=None):
    """``Worker(startup_information=...)`` hook: the fingerprint, sent at registration."""
    return fingerprint(target_id, board, emulate)


def default_board_name(target_id: str) -> str:
    return f"{socket.gethostname()}-{target_id}"


def emulation_note(fp: dict[str, Any]) -> str:
    return (f"measured on HOST, emulating {fp['target']} (host {fp.get('hostname')}: "
            f"{fp.get('cpu_model')}, {fp.get('arch')}); the figures for {fp['target']} are "
            "not measured on one")


#: Dask settings for a measuring worker: no statistical profiler sampling the measuring
#: thread every 10 ms, and none of the nanny's thread-count overrides (OMP_NUM_THREADS=1 ...)
#: which would measure the runtimes differently from a plain process
WORKER_CONFIG = {"distributed.worker.profile.enabled": False,
                 "distributed.nanny.pre-spawn-environ": {}}


def worker_resources(targets: Iterable[str], fp: dict[str, Any]) -> dict[str, float]:
    res = {t: 1.0 for t in targets}
    for name, b in (fp.get("backends") or {}).items():
        if b.get("available"):
            res[BACKEND_RESOURCE.format(name)] = 1.0
    return res


def serve_worker(spec: FleetSpec, target: Any, *, name: str | None = None,
                 emulate: bool = False, say: Callable[[str], None] = print,
                 local_directory: str | None = None) -> int:
    """Run a board's Dask worker until it is stopped; refuses a contradicting fingerprint."""
    board = name or default_board_name(target.id)
    fp = fingerprint(target.id, board, emulate)
    why = board_contradiction(target, fp)
    if why and not emulate:
        raise UserError(f"refusing to serve as a {target.id} board: {why}; give --emulate to "
                        f"run as one anyway (every result then says it was measured on this "
                        f"host, emulating {target.id})")
    import asyncio
    import logging

    import dask
    from distributed import Nanny

    dask.config.set(WORKER_CONFIG)  # this process serves the board: for its whole life

    resources = worker_resources([target.id], fp)
    startup = functools.partial(_startup_fingerprint, target.id, board, bool(emulate))

    async def run() -> None:
        async with Nanny(spec.url, nthreads=1, name=board, resources=resources,
                         security=spec.security(), silence_logs=logging.ERROR,
                         local_directory=local_directory, dashboard=False,
                         startup_information={"edgeprof": startup}) as nanny:
            runs = sorted(k for k, v in fp["backends"].items() if v.get("available"))
            say(f"edgeprof worker '{board}' serving {target.id} to {spec.url}"
                + (" (emulating: " + why + ")" if why else "")
                + f"; backends: {', '.join(runs)}")
            await nanny.finished()

    try:
        asyncio.run(run())  # Ctrl-C / SIGTERM: the nanny closes its worker on the way out
    except (OSError, TimeoutError) as e:
        raise UserError(f"cannot serve to the scheduler at {spec.url}: {_one_line(e)}") from None
    return 0


# ------------------------------------------------------------------------ listing
def list_boards(client) -> list[dict[str, Any]]:
    """Every connected edgeprof worker: name, address, target, fingerprint, idle/busy."""
    info = client.scheduler_info(n_workers=-1) if _takes_n_workers(client) else \
        client.scheduler_info()
    processing = client.processing()
    rows = []
    for addr, w in sorted(info.get("workers", {}).items()):
        fp = w.get("edgeprof") or {}
        busy = len(processing.get(addr, ()))
        rows.append({
            "name": fp.get("board") or str(w.get("name")), "address": addr,
            "target": fp.get("target"), "targets": sorted(
                k for k in (w.get("resources") or {}) if not k.startswith("backend:")),
            "emulating": fp.get("emulating"), "fingerprint": fp,
            "backends": sorted(k.split(":", 1)[1] for k in (w.get("resources") or {})
                               if k.startswith("backend:")),
            "runtimes": fp.get("runtimes", {}), "state": "busy" if busy else "idle",
            "jobs": busy, "edgeprof": bool(fp)})
    return rows


def _takes_n_workers(client) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


# ----------------------------------------------------------------------- shipping
@dataclass
class Shipment:
    """What travels to a board: a built artifact packed as bytes (``Artifact.pack()``), or a
    model file the runtime loads as it is, with the bytes' sha256."""

    kind: str  # "artifact" | "file"
    name: str  # the file's name, or the artifact's entry
    data: bytes
    sha256: str
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of_file(cls, path: Path, notes: list[str] | None = None) -> Shipment:
        data = Path(path).read_bytes()
        return cls("file", Path(path).name, data, hashlib.sha256(data).hexdigest(),
                   list(notes or []))

    @classmethod
    def of_artifact(cls, artifact) -> Shipment:
        data = artifact.pack()
        notes = [f"built here: {artifact.manifest.route_text()}"]
        return cls("artifact", artifact.manifest.entry, data, hashlib.sha256(data).hexdigest(),
                   notes)


def build_shipment(backend: str | type, handle, precision: str, *, registry=None) -> Shipment:
    """Build, here, what ``backend`` loads on a board (``Backend.build`` -> an Artifact,
    packed): boards never convert, and nothing is pickled."""
    cls = backend
    if isinstance(backend, str):
        from edgeprof.core.plugins import get_registry

        cls = (registry or get_registry()).backend(backend)
    try:
        artifact = cls().build(handle, precision, handle.calibration)
    except NotImplementedError:
        return _model_file(cls, handle, precision)
    if artifact.format == "torch":
        raise UnsupportedError(
            f"backend '{cls.name}' runs torch programs, which need torch on the board; the "
            "device extra holds no torch: use onnxruntime, openvino or tflite on the fleet",
            backend=cls.name)
    return Shipment.of_artifact(artifact)


def _model_file(cls: type, handle, precision: str) -> Shipment:
    """For a backend without ``build``: the model file it loads, as it is (.onnx, .tflite)."""
    if handle.path is not None and handle.format in ("onnx", "tflite") \
            and handle.format in cls.capabilities.model_formats and Path(handle.path).is_file():
        return Shipment.of_file(Path(handle.path))
    raise UnsupportedError(
        f"backend '{cls.name}' builds no artifact from a {handle.format} model, so it cannot "
        "run it on a board: edgeprof ships built artifacts (or .onnx/.tflite files) to boards, "
        "never a pickled model", backend=cls.name)


def job_payload(request: MeasureRequest, shipment: Shipment, target: str) -> dict[str, Any]:
    """What travels to a board: the request as plain data, the built bytes, their sha256,
    and the target the job measures for."""
    d = request.to_dict()
    d["model"] = None
    d["artifact"] = None
    d["calibration"] = None  # calibration is applied where the model is built: here
    d["plugins_file"] = None  # a board uses its own installed plugins
    d["backend_class"] = None
    return {"request": d, "target": target, "kind": shipment.kind, "name": shipment.name,
            "data": shipment.data, "sha256": shipment.sha256, "notes": list(shipment.notes)}


# ----------------------------------------------------------------------- on a board
def _current_board() -> dict[str, Any]:
    from distributed import get_worker

    w = get_worker()
    hook = (getattr(w, "startup_information", None) or {}).get("edgeprof")
    fp = hook(w) if hook is not None else fingerprint("host", "local", True)
    return dict(fp, address=w.address)


def measure_shipment(payload: dict[str, Any], workdir: Path, *, isolate: bool = True
                     ) -> BenchmarkResult:
    """Unpack the shipped bytes (checked against their sha256) into ``workdir`` and measure
    them: in a fresh process by default (``IsolatedRunner``: only the measuring thread runs
    there, not Dask's event loop and monitors, and a crash or hang fails the job, not the
    board; the job's timeout applies), else inline. ``measure()`` makes the status."""
    from edgeprof.core.artifact import Artifact, ArtifactError
    from edgeprof.profilers.measure.measure import measure
    from edgeprof.profilers.measure.runners import InlineRunner, IsolatedRunner

    d = dict(payload["request"])
    data = payload["data"]
    try:
        if payload.get("kind") == "artifact":
            art = Artifact.unpack(data, workdir / "artifact", payload["sha256"])
            d["artifact"] = art.to_dict()
        else:
            got = hashlib.sha256(data).hexdigest()
            if got != payload["sha256"]:
                raise ArtifactError(f"model bytes have sha256 {got[:16]}..., expected "
                                    f"{payload['sha256'][:16]}... (corrupted in transit)")
            path = workdir / Path(payload["name"]).name
            path.write_bytes(data)
            d["model"] = str(path)
    except ArtifactError as e:
        c = d.get("config") or {}
        return BenchmarkResult(backend=d["backend"], model=payload.get("name", "?"),
                               requested_precision=c.get("precision", "fp32"),
                               executed_precision=None, status="failed",
                               reason=f"{e}; not measured")
    timeout = payload.get("timeout_s")
    runner = IsolatedRunner(timeout) if isolate else InlineRunner()
    return measure(MeasureRequest.from_dict(d), runner)


def run_on_board(payload: dict[str, Any]) -> dict[str, Any]:
    """What a board runs (a Dask task): measure the shipped artifact and return the
    RunRecord's dict, its ``extra["fleet"]`` naming the board and its fingerprint."""
    board = _current_board()
    target = payload.get("target") or board.get("target")
    if target != board.get("target"):  # a local worker serves every target of a sweep
        board = dict(board, target=target, emulating=board.get("emulating") and target != "host")
    fleet = {"board": board.get("board"), "target": target,
             "emulating": bool(board.get("emulating")), "fingerprint": board,
             "sha256": payload["sha256"]}
    with tempfile.TemporaryDirectory(prefix="edgeprof-board-") as tmp:
        record = measure_shipment(payload, Path(tmp))
    record.notes.extend(payload.get("notes") or [])
    if fleet["emulating"]:
        record.notes.append(emulation_note(board))
    elif target == "host":
        record.notes.append("measured on this host")
    else:
        record.notes.append(f"measured on board {fleet['board']} ({target}: "
                            f"{board.get('cpu_model')}, {board.get('arch')})")
    record.extra = dict(record.extra or {}, fleet=fleet)
    return record.to_dict()


def measured_on(record: BenchmarkResult | dict[str, Any]) -> str | None:
    """One line: where a record was measured (None for a local measurement)."""
    extra = record.get("extra") if isinstance(record, dict) else record.extra
    fleet = (extra or {}).get("fleet")
    if not fleet:
        return None
    fp = fleet.get("fingerprint") or {}
    if fleet.get("emulating"):
        return f"measured on HOST, emulating {fleet.get('target')} (board {fleet.get('board')})"
    return f"measured on board {fleet.get('board')} ({fleet.get('target')}, {fp.get('cpu_model')})"


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
                                                     f"{_one_line(e)}", a.attempt, a.history))
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
                          else f"the board raised {_one_line(exc)}")
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
        return out

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
                + (f" ({_one_line(error)})" if error is not None else "")
                + f"; {len(self.active)} job(s) were running")

    def run_one(self, job: FleetJob, wait_s: float = 0.5) -> Outcome:
        """Submit one job and wait for its outcome."""
        self.submit(job)
        while True:
            for o in self.poll(wait_s):
                if o.job is job:
                    return o


def _worker_died(exc: BaseException | None) -> bool:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return True
    name = type(exc).__name__
    return name in ("CommClosedError", "StreamClosedError", "WorkerGoneError")


# ------------------------------------------------------------------------ the runner
class RemoteRunner:
    """The Runner that measures on a board of the fleet (``profile --fleet``).

    ``run(request)`` builds the model here, ships the bytes with their sha256 and returns the
    board's RunRecord (its ``extra["fleet"]`` names the board and its fingerprint); a board
    that died ``retries + 1`` times, a timeout or no capable board raises
    :class:`MeasurementError` with the reason.
    """

    name = "remote"

    def __init__(self, fleet: FleetSpec | str, target: str, *, retries: int = DEFAULT_RETRIES,
                 client=None, no_board_s: float = DEFAULT_NO_BOARD_S):
        self.spec = fleet if isinstance(fleet, FleetSpec) else FleetSpec.from_options(fleet)
        self.target = target
        self._client = client
        self._own_client = client is None
        self.retries = retries
        self.no_board_s = no_board_s
        self._dispatcher: Dispatcher | None = None

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

    def run(self, request: MeasureRequest) -> BenchmarkResult:
        from edgeprof.core.models import resolve_model
        from edgeprof.profilers.measure.runners import is_generative

        d = self.dispatcher
        why = d.unroutable(self.target, request.backend)
        if why:
            raise BackendUnavailableError(request.backend, why)
        if is_generative(request):
            return self._run_generation(request)
        if request.artifact is not None:  # built already: ship it as it is
            from edgeprof.core.artifact import Artifact

            shipment = Shipment.of_artifact(Artifact.from_dict(request.artifact))
            name = request.model_name
        else:
            handle = request.handle or resolve_model(
                request.model, input_shapes=request.input_shapes,
                input_dtypes=request.input_dtypes, calibration=request.calibration)
            shipment = build_shipment(request.backend_type or request.backend, handle,
                                      request.config.precision)
            name = handle.spec
        timeout = request.config.timeout_s or job_timeout_s(request.config)
        job = FleetJob(key=f"{request.backend}-{request.config.precision}", target=self.target,
                       backend=request.backend, payload=job_payload(request, shipment, self.target),
                       timeout_s=timeout)
        outcome = d.run_one(job)
        if outcome.record is None:
            raise MeasurementError(f"on the {self.target} fleet: {outcome.reason}")
        record = BenchmarkResult.from_dict(outcome.record)
        record.model = name
        return record

    def _run_generation(self, request: MeasureRequest):
        """A generative request: built here (``build_llm``: the board never converts), the
        runtime's file shipped with its sha256 and the model's spec (``request.llm``); the
        board loads and times it in a fresh process (``measure_shipment``), and its
        :class:`~edgeprof.core.results.GenerativeRunRecord` comes back with
        ``extra["fleet"]`` naming the board."""
        import dataclasses as dc

        from edgeprof.core.artifact import Artifact
        from edgeprof.core.results import GenerativeRunRecord, record_from_dict
        from edgeprof.profilers.measure.generate import request_model
        from edgeprof.profilers.measure.harness import BACKEND_FAILURES, MeasureFailure
        from edgeprof.profilers.measure.runners import (DEFAULT_GENERATION_TIMEOUT_S,
                                                        backend_class)

        if request.artifact is not None:
            artifact = Artifact.from_dict(request.artifact)
            model = request_model(request)
        else:
            model = request_model(request)
            cls = request.backend_type or backend_class(request)
            workdir = request.workdir
            if workdir is None:
                from edgeprof.core.cache import cache_dir

                workdir = cache_dir("llm", request.backend)
            try:
                artifact = cls().build_llm(model, request.config.precision, Path(workdir))
            except BACKEND_FAILURES as e:
                raise MeasureFailure("build", e) from e
        shipment = Shipment.of_artifact(artifact)
        wire = dc.replace(request, llm=model.to_dict(), workdir=None, artifact=None)
        timeout = request.config.timeout_s or DEFAULT_GENERATION_TIMEOUT_S
        job = FleetJob(key=f"{request.backend}-{request.config.precision}-generate",
                       target=self.target, backend=request.backend,
                       payload=job_payload(wire, shipment, self.target), timeout_s=timeout)
        outcome = self.dispatcher.run_one(job)
        if outcome.record is None:
            raise MeasurementError(f"on the {self.target} fleet: {outcome.reason}")
        record = record_from_dict(outcome.record)
        if not isinstance(record, GenerativeRunRecord):  # the board could not unpack it
            raise MeasurementError(f"on the {self.target} fleet: {record.reason}")
        return record

    def close(self) -> None:
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
def fleet_runner(fleet: FleetSpec | str | None, target: Any) -> RemoteRunner | None:
    """The RemoteRunner for ``profile(..., fleet=...)`` (None: measure here)."""
    if fleet is None:
        return None
    spec = fleet if isinstance(fleet, FleetSpec) else FleetSpec.from_options(fleet)
    if getattr(target, "is_host", False):
        raise UserError("a fleet measures on boards of a target descriptor; 'host' is this "
                        "machine: give --target raspberry_pi_4 (or another board's target)")
    return RemoteRunner(spec, target.id)


def board_target(record: BenchmarkResult, target: Any) -> Any | None:
    """``target`` as the machine the record was measured on, when a board of that target
    measured it (not an emulating one): its summary then reads the latency as measured on
    the target. None otherwise."""
    fleet = (record.extra or {}).get("fleet")
    if not fleet or fleet.get("emulating") or fleet.get("target") != getattr(target, "id", None):
        return None
    return dataclasses.replace(target, is_host=True)


__all__ = ["DEFAULT_RETRIES", "Dispatcher", "FLEET_ENV", "FleetJob", "FleetSpec", "Outcome",
           "board_target", "fleet_runner",
           "RemoteRunner", "SchedulerLostError", "Shipment", "board_contradiction",
           "build_shipment", "descriptor_family", "emulation_note", "fingerprint",
           "job_payload", "list_boards", "machine_family", "measured_on", "run_on_board",
           "serve_worker", "worker_resources"]

"""A board of the fleet: what it is (its fingerprint, checked against the target it serves),
how it serves (:func:`serve_worker`, a Dask nanny whose resources name its target and
backends), how the boards are listed, and the task it runs (:func:`run_on_board`: measure a
shipment, the record naming the board). Part of the fleet
(:mod:`edgeprof.profilers.measure.fleet`); ``distributed`` is imported inside the functions
that use it."""

from __future__ import annotations

import functools
import os
import platform
import socket
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from edgeprof._version import __version__
from edgeprof.core.errors import EdgeprofError, UserError
from edgeprof.core.importing import dist_version
from edgeprof.core.results import BenchmarkResult
from edgeprof.profilers.measure.fleet_shipment import measure_shipment
from edgeprof.profilers.measure.fleet_spec import BACKEND_RESOURCE, FleetSpec, one_line

#: the Dask event topic a board's progress lines travel on (``Worker.log_event`` there,
#: ``Client.subscribe_topic`` on the client: see ``fleet_dispatcher``)
PROGRESS_TOPIC = "edgeprof-progress"

#: Python distributions of the runtimes a board may hold (reported with their versions)
RUNTIME_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "openvino", "ai-edge-litert",
                         "tflite-runtime", "tensorrt", "torch", "tensorflow", "onnx",
                         "distributed", "numpy")


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


@functools.lru_cache(maxsize=8)
def _fingerprint(target_id: str, board: str, emulate: bool) -> dict[str, Any]:
    import psutil

    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.environment import cpu_model

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
    runtimes = {d: v for d in RUNTIME_DISTRIBUTIONS if (v := dist_version(d))}
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
        raise UserError(f"cannot serve to the scheduler at {spec.url}: {one_line(e)}") from None
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


# ----------------------------------------------------------------------- on a board
def _current_board() -> dict[str, Any]:
    from distributed import get_worker

    w = get_worker()
    hook = (getattr(w, "startup_information", None) or {}).get("edgeprof")
    fp = hook(w) if hook is not None else fingerprint("host", "local", True)
    return dict(fp, address=w.address)


def board_progress(token: str | None, board: str | None) -> Callable[[str], None] | None:
    """The progress callback of a job whose client listens (``token``: the job's, from the
    payload; None: nobody listens): each line becomes a Dask event on
    :data:`PROGRESS_TOPIC` naming the job and the board. Sending never waits (the worker's
    batched stream to the scheduler) and never fails the job: an error drops the line."""
    if not token:
        return None
    try:
        from distributed import get_worker

        worker = get_worker()
    except Exception:  # noqa: BLE001 - not in a Dask task: nobody to tell
        return None

    def say(text: str) -> None:
        try:
            worker.log_event(PROGRESS_TOPIC, {"job": str(token), "board": str(board),
                                              "text": str(text)[:1000]})
        except Exception:  # noqa: BLE001 - progress never changes a run's outcome
            pass

    return say


def run_on_board(payload: dict[str, Any]) -> dict[str, Any]:
    """What a board runs (a Dask task): measure the shipped artifact and return the
    RunRecord's dict, its ``extra["fleet"]`` naming the board and its fingerprint. When the
    client listens (``payload["progress"]``), the run's steps travel back as they happen
    (:func:`board_progress`)."""
    board = _current_board()
    target = payload.get("target") or board.get("target")
    if target != board.get("target"):  # a local worker serves every target of a sweep
        board = dict(board, target=target, emulating=board.get("emulating") and target != "host")
    fleet = {"board": board.get("board"), "target": target,
             "emulating": bool(board.get("emulating")), "fingerprint": board,
             "sha256": payload["sha256"]}
    say = board_progress(payload.get("progress"), fleet["board"])
    if say is not None:
        c = (payload.get("request") or {}).get("config") or {}
        say(f"measuring {(payload.get('request') or {}).get('backend')} "
            f"{c.get('precision', 'fp32')} ({payload.get('name')}, "
            f"{len(payload.get('data') or b'') / 1e3:.0f} kB shipped) in a fresh process")
    with tempfile.TemporaryDirectory(prefix="edgeprof-board-") as tmp:
        record = measure_shipment(payload, Path(tmp), progress=say)
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

"""Test support for the fleet: tiny ONNX models made with onnx.helper (no torch), and a Dask
scheduler and edgeprof workers as subprocesses on 127.0.0.1 with random ports.

Every process is ended by its own PID (the Popen object, and the children psutil lists for
that PID), never by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def make_onnx(path: Path, width: int = 32, depth: int = 2, seed: int = 0) -> Path:
    """An MLP (MatMul + Relu) x depth with input ``x`` of shape 1 x width."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev = "x"
    for i in range(depth):
        w = numpy_helper.from_array(rng.standard_normal((width, width)).astype("float32") * 0.1,
                                    f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        out = "y" if i == depth - 1 else f"r{i}"
        nodes.append(helper.make_node("Relu", [f"m{i}"], [out]))
        prev = out
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, width])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def env(extra: dict | None = None, **kw) -> dict:
    e = dict(os.environ)
    e.update({"PYTHONPATH": str(ROOT) + os.pathsep + e.get("PYTHONPATH", ""),
              "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",
              "PYTHONUNBUFFERED": "1"})
    e.update(extra or {})
    e.update(kw)
    return e


def edgeprof(*args: str) -> list[str]:
    return [PY, "-m", "edgeprof", *args]


def start_scheduler(tmp: Path, environ: dict) -> tuple[subprocess.Popen, str]:
    sched_file = tmp / "scheduler.json"
    log = open(tmp / "scheduler.log", "w")
    proc = subprocess.Popen([PY, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                             "--port", "0", "--dashboard-address", ":0", "--scheduler-file",
                             str(sched_file)], stdout=log, stderr=subprocess.STDOUT,
                            env=environ)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sched_file.exists():
            try:
                return proc, json.loads(sched_file.read_text())["address"]
            except (ValueError, KeyError):
                pass
        if proc.poll() is not None:
            raise RuntimeError((tmp / "scheduler.log").read_text())
        time.sleep(0.1)
    stop(proc)
    raise RuntimeError("the scheduler did not start")


def start_worker(tmp: Path, address: str, target: str, name: str, environ: dict,
                 *extra: str) -> subprocess.Popen:
    log = open(tmp / f"worker-{name}.log", "w")
    return subprocess.Popen(edgeprof("worker", address, "--target", target, "--name", name,
                                     "--emulate", *extra),
                            stdout=log, stderr=subprocess.STDOUT, env=environ)


def wait_boards(address: str, names: set[str], timeout: float = 90.0) -> list[dict]:
    from distributed import Client

    from edgeprof.profilers.measure.fleet import list_boards

    with Client(address, timeout=30, set_as_default=False) as c:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            boards = list_boards(c)
            if names <= {b["name"] for b in boards}:
                return boards
            time.sleep(0.2)
    raise RuntimeError(f"boards {names} did not connect")


def stop_all(procs: list[subprocess.Popen], sig: int = signal.SIGTERM,
             timeout: float = 10.0) -> None:
    """End each process and the children psutil lists for its PID, each by its own PID:
    signal them all, then wait (a nanny closes its worker on SIGTERM), then kill what is
    left."""
    import psutil

    children = []
    for proc in procs:
        try:
            children += psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        if proc.poll() is None:
            proc.send_signal(sig)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    for ch in children:
        try:
            ch.wait(max(0.1, deadline - time.monotonic()))
        except psutil.TimeoutExpired:
            try:
                ch.kill()
            except psutil.Error:
                pass
        except psutil.Error:
            pass


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    stop_all([proc], sig, timeout)

"""Sweeps (edgeprof.optimize.sweep): SWEEP.toml validation, the SQLite store, a sweep on a
fleet of emulating boards (one killed mid-job), --resume after the driver is killed, the
scheduler's death, and the local path (measured here as profile measures). 127.0.0.1 only;
processes ended by PID."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from edgeprof.cli.main import main
from edgeprof.optimize.sweep import COLUMNS, Job, SweepStore, load_sweep, results_frame
from edgeprof.core.results import BenchmarkResult
from tests.fleet_support import (edgeprof, env, make_onnx, start_scheduler, start_worker,
                                 stop_all, wait_boards)

GRID = """models = ["a.onnx", "b.onnx"]
targets = ["raspberry_pi_4", "jetson_nano"]
backends = ["onnxruntime", "openvino"]
precisions = ["fp32", "fp16"]
store = "{store}"
out = "{out}"

[run]
runs = 20
max_time = 0.5
"""


def _write(folder: Path, name: str, text: str) -> Path:
    for m, width, seed in (("a.onnx", 32, 1), ("b.onnx", 48, 2)):
        if not (folder / m).exists():
            make_onnx(folder / m, width, 2, seed)
    p = folder / name
    p.write_text(text)
    return p


def _rows(store: Path) -> list[tuple]:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT job_key, status, reason, board, attempts, record FROM results "
                          "ORDER BY rowid").fetchall()


# --------------------------------------------------------------------- the file
@pytest.mark.parametrize("text, field", [
    ("models = ['a.onnx']\ntargets = ['raspberry_pi_4']\nbackends = ['onnxruntime']\n"
     "precisions = ['fp32']\ncolour = 'red'\n", "colour"),
    ("models = ['a.onnx']\ntargets = ['raspberry_pi_4']\nbackends = ['onnxruntime']\n"
     "precisions = ['fp32']\n[run]\nmin_tim = 0.1\n", "run.min_tim"),
    ("models = ['a.onnx']\ntargets = ['raspberry_pi_9']\nbackends = ['onnxruntime']\n"
     "precisions = ['fp32']\n", "targets"),
    ("models = ['a.onnx']\ntargets = ['raspberry_pi_4']\nbackends = ['onnxrt']\n"
     "precisions = ['fp32']\n", "backends"),
    ("models = ['a.onnx']\ntargets = ['raspberry_pi_4']\nbackends = ['onnxruntime']\n"
     "precisions = ['fp33']\n", "precisions"),
    ("models = ['a.onnx']\ntargets = ['raspberry_pi_4']\nbackends = []\n"
     "precisions = ['fp32']\n", "backends"),
    ("models = ['missing.onnx']\ntargets = ['raspberry_pi_4']\nbackends = ['onnxruntime']\n"
     "precisions = ['fp32']\n", "models"),
    ("models = ['broken.onnx']\ntargets = ['raspberry_pi_4']\nbackends = ['onnxruntime']\n"
     "precisions = ['fp32']\n", "models"),
    ("models = ['a.onnx']\ntargets = ['raspberry_pi_4']\nbackends = ['onnxruntime']\n"
     "precisions = ['fp32']\n[run]\ntimeout = -1\n", "run.timeout"),
    ("targets = ['raspberry_pi_4']\nbackends = ['onnxruntime']\nprecisions = ['fp32']\n",
     "models"),
])
def test_a_bad_sweep_file_exits_2_naming_the_field(tmp_path, capsys, text, field):
    (tmp_path / "broken.onnx").write_bytes(b"not an onnx model")
    path = _write(tmp_path, "SWEEP.toml", text)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"field '{field}'" in err and "Traceback" not in err
    assert not (tmp_path / "SWEEP.sqlite").exists()  # nothing half-written


def test_the_grid_and_its_job_keys(tmp_path):
    spec = load_sweep(_write(tmp_path, "g.toml", GRID.format(store="s.sqlite", out="o")))
    jobs = spec.jobs()
    assert len(jobs) == 16 and len({j.key for j in jobs}) == 16
    assert spec.store == tmp_path / "s.sqlite" and spec.config("fp16", 1).runs == 20


def test_the_store_never_holds_a_job_twice(tmp_path):
    store = SweepStore(tmp_path / "s.sqlite")
    job = Job("m.onnx", "raspberry_pi_4", "onnxruntime", "fp32", "tensor", {"batch_size": None})
    rec = BenchmarkResult(backend="onnxruntime", model="m.onnx", requested_precision="fp32",
                          executed_precision=None, status="failed", reason="x")
    assert store.append(job, rec, board=None, attempts=1)
    assert not store.append(job, rec, board="b", attempts=2)
    assert len(store) == 1
    frame = results_frame(store)
    assert list(frame.columns) == COLUMNS and frame.loc[0, "reason"] == "x"
    store.close()


# ---------------------------------------------------------------------- the fleet
@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """pi-1 and pi-2 (raspberry_pi_4), nano-1 (jetson_nano, without OpenVINO), emulating;
    the scheduler fails a job on a worker's first death (the driver counts retries)."""
    tmp = tmp_path_factory.mktemp("sweepfleet")
    shim = tmp / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['openvino'] = None\n")
    base = env()
    sched, address = start_scheduler(tmp, base)
    procs = [sched]
    try:
        procs.append(start_worker(tmp, address, "raspberry_pi_4", "pi-1", base))
        procs.append(start_worker(tmp, address, "raspberry_pi_4", "pi-2", base))
        procs.append(start_worker(tmp, address, "jetson_nano", "nano-1", env(
            PYTHONPATH=f"{shim}:{base['PYTHONPATH']}")))
        wait_boards(address, {"pi-1", "pi-2", "nano-1"})
        yield {"address": address, "tmp": tmp, "scheduler": sched, "env": base}
    finally:
        stop_all(procs)


def _sweep(fleet, path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(edgeprof("sweep", str(path), "--fleet", fleet["address"],
                                     "--min-time", "0.05", *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=fleet["env"])


def _wait_rows(store: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store.exists():
            try:
                if len(_rows(store)) >= n:
                    return
            except sqlite3.Error:
                pass
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} rows after {timeout} s")


def test_a_board_killed_mid_job_is_retried_and_each_job_is_stored_once(fleet):
    from distributed import Client

    from edgeprof.profilers.measure.fleet import list_boards

    tmp = fleet["tmp"]
    path = _write(tmp, "kill.toml", GRID.format(store="kill.sqlite", out="kill_out"))
    keys = {hashlib.sha1(j.key.encode()).hexdigest()[:12]: j.key
            for j in load_sweep(path).jobs()}
    with Client(fleet["address"], timeout=30, set_as_default=False) as c:
        pi1 = next(b["address"] for b in list_boards(c) if b["name"] == "pi-1")
        pid = c.run(os.getpid, workers=[pi1])[pi1]
        proc = _sweep(fleet, path)
        killed = None
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            running = c.processing().get(pi1) or ()
            if running:
                os.kill(pid, signal.SIGKILL)  # the worker process, mid-job
                killed = keys[running[0].split("-")[1]]
            time.sleep(0.01)
    out, err = proc.communicate(timeout=240)
    assert killed is not None, err
    rows = _rows(tmp / "kill.sqlite")
    assert len(rows) == 16 and len({r[0] for r in rows}) == 16, err
    by_key = {r[0]: r for r in rows}
    key, status, reason, board, attempts, record = by_key[killed]
    assert status == "ok" and attempts == 2, (reason, err)
    history = json.loads(record)["extra"]["fleet"]["history"]
    assert "died while running it" in history[0] and "pi-1" in history[0]
    # nano-1 has no OpenVINO: those jobs were never sent, and say why
    for k, (_, status, reason, board, *_rest) in by_key.items():
        if "|jetson_nano|openvino|" in k:
            assert status == "unavailable" and "nano-1" in reason and "openvino" in reason
        else:
            assert status == "ok", (k, reason)
            want = "nano-1" if "|jetson_nano|" in k else ("pi-1", "pi-2")
            assert board in want
            assert "emulating" in json.loads(by_key[k][5])["notes"][-1]
    assert proc.returncode == 0, err
    assert (tmp / "kill_out" / "best.csv").exists() and (tmp / "kill_out" / "results.csv").exists()
    assert "best configuration" in out


def test_resume_after_the_driver_is_killed_never_duplicates(fleet):
    tmp = fleet["tmp"]
    path = _write(tmp, "resume.toml", GRID.format(store="resume.sqlite", out="resume_out"))
    store = tmp / "resume.sqlite"
    proc = _sweep(fleet, path)
    _wait_rows(store, 3, proc)
    proc.send_signal(signal.SIGKILL)  # the driver, by its PID
    proc.communicate(timeout=30)
    first = {r[0]: r for r in _rows(store)}
    assert 3 <= len(first) < 16
    again = _sweep(fleet, path)
    assert again.wait(60) == 2 and "--resume" in again.communicate()[1]
    resumed = _sweep(fleet, path, "--resume")
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err
    rows = _rows(store)
    assert len(rows) == 16 and len({r[0] for r in rows}) == 16
    for r in rows:  # what the first run stored is kept as it was
        if r[0] in first:
            assert r == first[r[0]]
    assert f"{len(first)} resumed" in out
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_local_sweep_takes_the_same_path(tmp_path):
    path = _write(tmp_path, "local.toml", "models = ['a.onnx']\ntargets = ['raspberry_pi_4']\n"
                  "backends = ['onnxruntime']\nprecisions = ['fp32', 'int8_dynamic']\n"
                  "[run]\nruns = 20\nmin_time = 0.05\nmax_time = 0.5\n")
    assert main(["sweep", str(path), "--json"]) == 0
    frame = results_frame(tmp_path / "local.sqlite")
    assert list(frame["status"]) == ["ok", "ok"] and set(frame["board"]) == {"local"}
    assert frame["measured_on"].str.startswith("measured on this host").all()  # not the board's
    assert (frame["ci_low_ms"] <= frame["median_ms"]).all()


def test_the_schedulers_death_is_a_clear_error_and_the_store_stays_intact(fleet):
    """Last: it ends the module's scheduler."""
    tmp = fleet["tmp"]
    path = _write(tmp, "dead.toml", GRID.format(store="dead.sqlite", out="dead_out"))
    store = tmp / "dead.sqlite"
    proc = _sweep(fleet, path)
    _wait_rows(store, 1, proc)
    fleet["scheduler"].send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "lost the scheduler" in err and "--resume" in err and "Traceback" not in err
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for (record,) in db.execute("SELECT record FROM results"):
            json.loads(record)

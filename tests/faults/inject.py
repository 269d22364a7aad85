"""Fault injection through the real command line (``python -m edgeprof`` in subprocesses).

Faults come from a plugin written to a temporary folder (``faulty.py`` + ``plugins.toml``):
backends that raise, call ``sys.exit(3)``, segfault, hang or allocate past a memory limit,
one that pauses (``fault_pause``), and, driven by environment variables, pauses at a point
of the run (``FAULT_PAUSE_AT`` = estimate | benchmark | writing; the plugin writes
``FAULT_MARK`` when it gets there, so a test knows when to send its signal), a JAX-like gc
callback (``FAULT_GC_CALLBACK``), a full disk while writing (``FAULT_ENOSPC``) and a slow
write (``FAULT_SLOW_WRITE`` seconds, after every artifact is staged).

Several runs are started at once (:func:`launch` / :meth:`Run.wait`) to keep the suite short.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FAST = ["--min-time", "0.05", "--runs", "20", "--max-time", "0.5"]
MODEL = "builtin:small_cnn"
#: address-space limit of runs that test the memory fault (torch needs about 1 GB mapped)
MEMORY_LIMIT = 4 << 30

PLUGIN = '''
import ctypes, errno, gc, os, sys, time
from pathlib import Path

from edgeprof.core.backend import Backend, Capabilities, PreparedModel
from edgeprof.core.hookspecs import hookimpl


def _mark(point):
    path = os.environ.get("FAULT_MARK")
    if path:
        Path(path).write_text(point)


def _pause(point):
    if os.environ.get("FAULT_PAUSE_AT") != point:
        return
    if os.environ.get("FAULT_GC_CALLBACK"):  # like JAX's: most time is spent inside it
        gc.callbacks.append(lambda phase, info: time.sleep(0.05) if phase == "stop" else None)
        _mark(point)
        end = time.monotonic() + 8
        while time.monotonic() < end:
            gc.collect()
        return
    _mark(point)
    time.sleep(60)


if os.environ.get("FAULT_PAUSE_AT") == "estimate":
    import edgeprof.profilers.estimate.analytic as _analytic

    _estimate_model = _analytic.estimate_model

    def _paused_estimate(*args, **kwargs):
        _pause("estimate")
        return _estimate_model(*args, **kwargs)

    _analytic.estimate_model = _paused_estimate

if os.environ.get("FAULT_PAUSE_AT") == "writing" or os.environ.get("FAULT_ENOSPC") or \
        os.environ.get("FAULT_SLOW_WRITE"):
    import edgeprof.core.io as _io

    _manifest = _io._manifest

    def _paused_manifest(stage, names):  # every artifact is in the staging folder by now
        if os.environ.get("FAULT_ENOSPC"):
            raise OSError(errno.ENOSPC, "No space left on device", str(stage / names[0]))
        time.sleep(float(os.environ.get("FAULT_SLOW_WRITE", 0)))
        _pause("writing")
        return _manifest(stage, names)

    _io._manifest = _paused_manifest


class _Faulty(Backend):
    capabilities = Capabilities(precisions=("fp32",), model_formats=("torch",))

    def prepare(self, model, config, inputs):
        self.fault()
        return PreparedModel(run=lambda xs: xs, inputs=inputs, runtime="faulty",
                             runtime_version="0", executed_precision=config.precision)

    def fault(self):
        pass


class RaiseBackend(_Faulty):
    name = "fault_raise"

    def fault(self):
        raise RuntimeError("injected failure\\nwith a second line")


class ExitBackend(_Faulty):
    name = "fault_exit"

    def fault(self):
        sys.exit(3)


class SegfaultBackend(_Faulty):
    name = "fault_segfault"

    def fault(self):
        ctypes.string_at(0)


class HangBackend(_Faulty):
    name = "fault_hang"

    def fault(self):
        while True:
            time.sleep(1)


class MemoryBackend(_Faulty):
    name = "fault_memory"

    def fault(self):
        self.held = bytearray(int(os.environ.get("FAULT_ALLOC_BYTES", 8 << 30)))


class PauseBackend(_Faulty):
    name = "fault_pause"

    def fault(self):
        _pause("benchmark")


@hookimpl
def edgeprof_register_backends():
    return [RaiseBackend, ExitBackend, SegfaultBackend, HangBackend, MemoryBackend,
            PauseBackend]
'''


@pytest.fixture(scope="session")
def plugins(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("faulty-plugin")
    (folder / "faulty.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    toml = folder / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["faulty.py"]\n', encoding="utf-8")
    return toml


@pytest.fixture(scope="session")
def warm() -> None:
    """One complete run first: the host calibration is cached for every later run (runs
    started together would otherwise each calibrate)."""
    from edgeprof.cli.main import main

    assert main(["profile", MODEL, *FAST, "--json"]) == 0  # in this process: no extra start


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    pid: int
    sid: int
    elapsed_s: float
    signalled_at: float | None = None
    ended_at: float = 0.0

    @property
    def messages(self) -> list[str]:
        """edgeprof's own lines on stderr (libraries may log their own)."""
        return [ln for ln in self.stderr.splitlines() if ln.startswith("edgeprof:")]


@dataclass
class Run:
    proc: subprocess.Popen
    cwd: Path
    mark: Path
    started: float = field(default_factory=time.monotonic)
    signalled_at: float | None = None

    def signal_at_mark(self, sig: int, *, group: bool, timeout: float = 120) -> None:
        """Wait until the plugin reports the pause point, then send ``sig`` (to the whole
        process group, as a terminal's Ctrl-C does, or to the main process only)."""
        end = time.monotonic() + timeout
        while not self.mark.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"exited ({self.proc.returncode}) before the pause point: "
                            f"{err[-2000:]}")
            if time.monotonic() > end:
                self.proc.kill()
                pytest.fail("the pause point was never reached")
            time.sleep(0.05)
        time.sleep(0.2)  # well inside the pause
        self.signalled_at = time.monotonic()
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout: float = 240) -> Result:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
            pytest.fail(f"edgeprof did not finish in {timeout} s: {err[-2000:]}")
        now = time.monotonic()
        return Result(self.proc.returncode, out, err, self.proc.pid, self.proc.pid,
                      now - self.started, self.signalled_at, now)


def launch(args: list[str], cwd: Path, *, env: dict[str, str] | None = None,
           memory_limit: int | None = None) -> Run:
    """Start ``python -m edgeprof ARGS`` in its own session (so its process group can be
    signalled and its leftovers found)."""
    mark = cwd / ".fault-mark"
    full_env = {**os.environ, "FAULT_MARK": str(mark), "PYTHONUNBUFFERED": "1",
                "COLUMNS": "200", **(env or {})}

    def limit() -> None:
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    proc = subprocess.Popen([sys.executable, "-m", "edgeprof", *args], cwd=cwd, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=limit if memory_limit else None)
    return Run(proc, cwd, mark)


def session_leftovers(sid: int) -> list[str]:
    """Processes still alive in a finished run's session (orphaned workers, trackers)."""
    import psutil

    time.sleep(0.3)
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if os.getsid(p.pid) == sid:
                found.append(f"{p.pid}: {' '.join(p.info['cmdline'] or [])[:120]}")
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


def kill_session(sid: int) -> None:
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def out_leftovers(out: Path) -> list[str]:
    """Staging or set-aside folders beside ``out`` (and anything else hidden there)."""
    return sorted(p.name for p in out.parent.iterdir()
                  if p.name.startswith(".") and p.name != ".fault-mark")


def previous_result(out: Path) -> dict:
    """An earlier, complete edgeprof result in ``out`` (written through core.io, quickly)."""
    from edgeprof.core import io

    doc = {"schema_version": "1.0", "runs": [{"backend": "earlier"}]}
    io.publish_staged(out, lambda stage: [io.write_json(stage / "profile.json", doc) and
                                          "profile.json",
                                          io.write_text(stage / "backend_comparison.csv",
                                                        "backend\nearlier\n") and
                                          "backend_comparison.csv"])
    return snapshot(out)


def snapshot(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())} if out.exists() else {}


def check_complete(out: Path) -> dict:
    """``out`` is one complete result: exactly the files its manifest lists, each intact."""
    import hashlib

    from edgeprof.core.io import MANIFEST

    manifest = json.loads((out / MANIFEST).read_text())
    names = {p.name for p in out.iterdir()} - {MANIFEST}
    assert names == set(manifest["files"]), "files and manifest disagree: a mixed folder"
    for name, meta in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == meta["sha256"], name
    return json.loads((out / "profile.json").read_text())

"""Isolated runs: spawned workers, crashes, hangs, what crosses the process line, and workers
that die with their parent.

The fake backends are found in the worker through a plugins.toml that lists tests/fakes.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import MeasurementError, ModelError, UnknownNameError
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult
from edgeprof.profilers.measure.measure import benchmark_backend, measure, raise_for_status
from edgeprof.profilers.measure.runners import (InlineRunner, IsolatedRunner, default_runner,
                                                wire_request)
from tests import fakes

ROOT = Path(__file__).resolve().parents[3]
FAST = dict(min_time_s=0.05, max_time_s=1.0, runs=20)


@pytest.fixture(scope="module")
def plugins_file(tmp_path_factory):
    return fakes.write_plugins_file(tmp_path_factory.mktemp("plugins"))


def isolated(backend, plugins_file, timeout_s=60, **options):
    cfg = RunConfig(**FAST, isolate=True, timeout_s=timeout_s, options=options)
    return benchmark_backend(backend, fakes.fake_handle(), cfg, plugins_file=plugins_file)


def test_ok_run_happens_in_another_process(plugins_file):
    r = isolated(fakes.FakeBusyBackend(), plugins_file, fake_ms=0.3)
    assert r.status == "ok", r.reason
    assert r.stats.n >= 20
    assert r.stats.median_ms == pytest.approx(0.3, rel=0.5)
    notes = [n for n in r.notes if "isolated worker process" in n]
    assert notes and f"pid {os.getpid()})" not in notes[0]
    assert r.model == fakes.FAKE_MODEL_SPEC
    assert r.environment["runtime"] == "fake"


def test_segfault_in_run_becomes_failed_and_the_caller_continues(plugins_file):
    r = isolated(fakes.FakeSegfaultBackend(), plugins_file)
    assert r.status == "failed"
    assert r.reason == "worker died with signal SIGSEGV"
    assert r.backend == "fake_segfault" and r.stats is None
    assert any("isolated worker process" in n for n in r.notes)
    with pytest.raises(MeasurementError, match="SIGSEGV"):
        raise_for_status(r)
    after = isolated(fakes.FakeBusyBackend(), plugins_file, fake_ms=0.2)  # caller goes on
    assert after.status == "ok"


def test_segfault_in_prepare_becomes_failed(plugins_file):
    r = isolated(fakes.FakeSegfaultBackend(), plugins_file, fake_when="prepare")
    assert r.status == "failed" and r.reason == "worker died with signal SIGSEGV"


def test_hang_times_out_and_the_worker_is_stopped(plugins_file):
    t0 = time.monotonic()
    r = isolated(fakes.FakeHangBackend(), plugins_file, timeout_s=3)
    assert r.status == "failed"
    assert r.reason == "timed out after 3 s"
    assert time.monotonic() - t0 < 30


def test_exception_in_worker_keeps_its_one_line_reason(plugins_file):
    r = isolated(fakes.FakeRaiseBackend(), plugins_file)
    assert r.status == "failed"
    assert r.reason == "inference failed: RuntimeError: fake failure"


def test_unsupported_crosses_as_a_status(plugins_file):
    r = isolated(fakes.FakeUnsupportedBackend(), plugins_file)
    assert r.status == "unsupported" and "cannot run anything" in r.reason


def test_peak_memory_in_a_fresh_worker(plugins_file):
    alloc = 48_000_000
    r = isolated(fakes.FakeMemoryBackend(), plugins_file, fake_alloc_bytes=alloc)
    assert r.status == "ok"
    assert alloc * 0.9 <= r.peak_memory_bytes <= alloc * 1.5 + 32e6
    # Linux carries ru_maxrss across fork+exec, so even a spawned worker's lifetime peak may
    # be its parent's; the detail says whether it spoke for this run
    assert r.memory_detail["method"] in ("rss_sampling", "ru_maxrss", "vmhwm")
    assert isinstance(r.memory_detail["ru_maxrss_applies"], bool)


def test_user_errors_in_the_worker_are_raised_again_as_themselves(plugins_file):
    req = MeasureRequest(backend="fake_busy", model="edgeprof_no_such_module:factory",
                         input_shapes=[[1, 8]], input_dtypes=["float32"],
                         config=RunConfig(**FAST), plugins_file=str(plugins_file))
    with pytest.raises(ModelError, match="edgeprof_no_such_module"):
        IsolatedRunner(timeout_s=60).run(req)
    req.model = fakes.FAKE_MODEL_SPEC
    req.backend = "fake_nonexistent"
    with pytest.raises(UnknownNameError, match="fake_nonexistent"):
        IsolatedRunner(timeout_s=60).run(req)


def test_request_is_small_plain_data(plugins_file):
    cfg = RunConfig(isolate=True)
    req = MeasureRequest.for_handle(fakes.FakeBusyBackend, fakes.fake_handle(batch_size=4), cfg,
                                    plugins_file=plugins_file)
    wire, why = wire_request(req)
    assert why is None
    assert wire["backend"] == "fake_busy" and wire["backend_class"] is None  # by registry name
    assert wire["plugins_file"] == str(plugins_file)
    assert wire["input_shapes"] == [[4, 8]]
    assert MeasureRequest.from_dict(json.loads(json.dumps(wire))) == req


def test_what_cannot_cross_runs_in_process_with_a_note(plugins_file):
    from edgeprof.core.models import resolve_model

    handle = resolve_model(fakes.FakeModule(), input_shapes=[[1, 8]])
    req = MeasureRequest.for_handle(fakes.FakeBusyBackend, handle, RunConfig())
    wire, why = wire_request(req)
    assert wire is None and "nn.Module object" in why

    from dataclasses import replace  # a module trained or compressed here (optimize)

    trained = replace(fakes.fake_handle(), spec=f"{fakes.FAKE_MODEL_SPEC}+magnitude0.5",
                      _factory=None, _module=fakes.FakeModule())
    wire, why = wire_request(MeasureRequest.for_handle(fakes.FakeBusyBackend, trained,
                                                       RunConfig()))
    assert wire is None and "built in this process" in why

    class LocalBackend(fakes.FakeBusyBackend):  # neither registered nor importable
        name = "local_only"

    req = MeasureRequest.for_handle(LocalBackend, fakes.fake_handle(), RunConfig(**FAST))
    wire, why = wire_request(req)
    assert wire is None and "neither registered" in why
    r = measure(req, IsolatedRunner(timeout_s=60))
    assert r.status == "ok" and any("ran in-process, not isolated" in n for n in r.notes)


def test_timeout_alone_implies_isolation(plugins_file):
    assert isinstance(default_runner(RunConfig()), InlineRunner)
    assert isinstance(default_runner(RunConfig(isolate=True)), IsolatedRunner)
    assert isinstance(default_runner(RunConfig(timeout_s=5)), IsolatedRunner)
    t0 = time.monotonic()
    r = benchmark_backend(fakes.FakeHangBackend(), fakes.fake_handle(),
                          RunConfig(**FAST, timeout_s=3), plugins_file=plugins_file)
    assert r.status == "failed" and r.reason == "timed out after 3 s"
    assert time.monotonic() - t0 < 30


def test_system_exit_in_a_backend_is_that_run_failing_inline_and_isolated(tmp_path):
    plugin = tmp_path / "exiting.py"
    plugin.write_text(textwrap.dedent("""
        import sys
        from edgeprof import Backend, Capabilities, hookimpl

        class Exiting(Backend):
            name = "exiting"
            capabilities = Capabilities(precisions=("fp32",))

            def prepare(self, model, config, inputs):
                sys.exit(3)

        @hookimpl
        def edgeprof_register_backends():
            return [Exiting]
    """))
    toml = tmp_path / "plugins.toml"
    toml.write_text(f'[plugins]\nmodules = ["{plugin.as_posix()}"]\n')
    for isolate in (False, True):
        req = MeasureRequest.for_handle("exiting", fakes.fake_handle(),
                                        RunConfig(**FAST, isolate=isolate), plugins_file=toml)
        r = measure(req)
        assert r.status == "failed", isolate
        assert r.reason == "prepare failed: SystemExit: 3"


PID_PLUGIN = """
import os
from edgeprof import Backend, Capabilities, PreparedModel, hookimpl

class PidProbe(Backend):
    name = "pid_probe"
    capabilities = Capabilities(precisions=("fp32",))

    def prepare(self, model, config, inputs):
        pid_file = os.environ.get("EDGEPROF_TEST_PID_FILE")
        if pid_file:
            with open(pid_file, "w") as f:
                f.write(str(os.getpid()))
        if os.environ.get("EDGEPROF_TEST_HANG"):
            import time
            time.sleep(3600)
        return PreparedModel(run=lambda xs: xs, inputs=inputs, runtime="probe",
                             runtime_version="0", executed_precision=config.precision,
                             extra={"pid": os.getpid()})

@hookimpl
def edgeprof_register_backends():
    return [PidProbe]
"""


@pytest.fixture(scope="module")
def pid_plugins(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pid_plugin")
    (folder / "pid_probe.py").write_text(PID_PLUGIN)
    toml = folder / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["pid_probe.py"]\n')
    return toml


def test_plugins_file_reaches_the_worker(pid_plugins):
    """``--plugins FILE --isolate``: the plugin's backend runs in the worker, not here."""
    from edgeprof.api import benchmark

    r = benchmark(fakes.FAKE_MODEL_SPEC, "pid_probe", plugins=str(pid_plugins),
                  config=RunConfig(**FAST, isolate=True))
    assert r.status == "ok", r.reason
    assert r.extra["pid"] != os.getpid()
    assert not any("not isolated" in n for n in r.notes)


def _state(pid: int) -> str | None:
    """The process state letter, or None when it is gone (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else state


def _worker_pid(proc: subprocess.Popen, pid_file, poll_s: float = 0.1) -> int:
    """The pid the isolated worker of ``proc`` wrote to ``pid_file``, once it has (``proc``
    still running; at most 120 s)."""
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(poll_s)
    return int(pid_file.read_text())


def _start_hanging_run(pid_plugins, tmp_path, cli: bool):
    """An isolated run in its own session, its worker hanging in prepare: ``edgeprof profile
    ... --isolate`` (``cli``) or, lighter (no torch), ``edgeprof.api.benchmark``."""
    pid_file = tmp_path / "worker.pid"
    env = {**os.environ, "EDGEPROF_TEST_PID_FILE": str(pid_file), "EDGEPROF_TEST_HANG": "1"}
    if cli:
        command = ["-m", "edgeprof", "profile", "builtin:small_cnn", "--backend", "pid_probe",
                   "--plugins", str(pid_plugins), "--isolate", "--timeout", "120"]
    else:
        command = ["-c", textwrap.dedent(f"""
            import signal  # Python's own Ctrl-C, whatever this test process inherited
            signal.signal(signal.SIGINT, signal.default_int_handler)
            from edgeprof.api import benchmark
            from edgeprof.core.backend import RunConfig
            benchmark({fakes.FAKE_MODEL_SPEC!r}, "pid_probe", plugins={str(pid_plugins)!r},
                      config=RunConfig(isolate=True, timeout_s=120))
        """)]
    proc = subprocess.Popen([sys.executable, *command], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    worker = _worker_pid(proc, pid_file)
    assert worker != proc.pid and _state(worker) is not None
    return proc, worker


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _state(pid) is None:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_main_process_leaves_no_orphan_worker(pid_plugins, tmp_path):
    proc, worker = _start_hanging_run(pid_plugins, tmp_path, cli=True)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert _gone_within(worker, 5), "the worker outlived its parent"
    finally:
        if _state(worker) is not None:
            os.kill(worker, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("to_group", [True, False], ids=["ctrl-c", "sigint-to-parent-only"])
def test_ctrl_c_during_an_isolated_run_prints_no_worker_traceback(pid_plugins, tmp_path,
                                                                  to_group):
    proc, worker = _start_hanging_run(pid_plugins, tmp_path, cli=False)
    try:
        if to_group:  # as a terminal's Ctrl-C: the whole process group
            os.killpg(proc.pid, signal.SIGINT)
        else:  # the parent alone: it stops its worker on the way out
            os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert _gone_within(worker, 5)
        assert err.count("Traceback") <= 1, err  # at most the main process's own
        assert "profilers/measure/worker.py" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
        if _state(worker) is not None:
            os.kill(worker, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_interrupt_dropped_in_a_gc_callback_still_stops_the_wait(pid_plugins, tmp_path):
    """Python drops an exception raised in a gc callback (or a ``__del__``) with "Exception
    ignored": a Ctrl-C that lands there vanished, and the API's wait on its worker went on
    (JAX's gc callback catches about a third of them; the CLI redelivers them, the API did
    not). Here the wait's first select after the worker started runs a collection whose
    callback holds the main thread: the SIGINT lands in it, and the wait must still end."""
    pid_file, holding = tmp_path / "worker.pid", tmp_path / "holding"
    code = textwrap.dedent(f"""
        import gc, os, signal, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from edgeprof.api import benchmark
        from edgeprof.core.backend import RunConfig
        import select
        held = []
        def slow(phase, info):  # hold the main thread once, 3 s, in a gc callback
            if phase == "start" and not held:
                held.append(1)
                open({str(holding)!r}, "w").close()
                time.sleep(3.0)
        select_ = select.select
        def waiting(*args):  # the wait's select: once the worker runs, a collection first
            if not held and os.path.exists({str(pid_file)!r}):
                gc.callbacks.append(slow)
                gc.collect()  # in this (the main) thread, as an allocation would trigger it
            return select_(*args)
        select.select = waiting
        benchmark({fakes.FAKE_MODEL_SPEC!r}, "pid_probe", plugins={str(pid_plugins)!r},
                  config=RunConfig(isolate=True, timeout_s=120))
    """)
    env = {**os.environ, "EDGEPROF_TEST_PID_FILE": str(pid_file), "EDGEPROF_TEST_HANG": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    worker = None
    try:
        worker = _worker_pid(proc, pid_file, poll_s=0.05)
        deadline = time.monotonic() + 30
        while not holding.exists():
            assert time.monotonic() < deadline, "the callback never held the wait"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)  # lands in the callback: Python drops it there
        _, err = proc.communicate(timeout=30)
        assert "Exception ignored" in err and "KeyboardInterrupt" in err, err
        assert _gone_within(worker, 5)
    finally:
        if proc.poll() is None:
            proc.kill()
        if worker is not None and _state(worker) is not None:
            os.kill(worker, signal.SIGKILL)


def test_result_round_trips_through_its_dict():
    r = benchmark_backend(fakes.FakeBusyBackend(), fakes.fake_handle(),
                          RunConfig(min_time_s=0.02, runs=10, options={"fake_ms": 0.2,
                                                                       "fake_first_ms": 20}))
    back = BenchmarkResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.to_dict() == r.to_dict()
    assert back.stats.median_ms == r.stats.median_ms
    assert back.warnings and back.warnings[0].code == r.warnings[0].code


def test_a_backend_class_found_by_import_path_crosses(plugins_file):
    req = MeasureRequest.for_handle(fakes.FakeBusyBackend, fakes.fake_handle(),
                                    RunConfig(**FAST))  # no plugins file: not by name
    wire, why = wire_request(req)
    assert why is None and wire["backend_class"] == "tests.fakes:FakeBusyBackend"
    r = measure(req, IsolatedRunner(timeout_s=60))
    assert r.status == "ok" and any("isolated worker process (pid" in n for n in r.notes)

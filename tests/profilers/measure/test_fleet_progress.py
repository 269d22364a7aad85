"""Progress from the boards: the steps a board's worker reports while it measures reach the
client's ``progress`` callback as ``board NAME: step`` (Dask events: ``Worker.log_event`` on
the board, ``Client.subscribe_topic`` here), for a tensor run and a generative one, and a
callback that raises changes no outcome.

One scheduler and one emulating board (``pi-9``, raspberry_pi_4) as subprocesses on
127.0.0.1; the board also loads the real-time generative fake of test_generate_runners
(through ``EDGEPROF_PLUGINS``), so a generative run costs no model."""

from __future__ import annotations

import shutil

import pytest

from edgeprof.profilers.measure.fleet import RemoteRunner
from edgeprof.profilers.measure.fleet_dispatcher import Dispatcher, FleetJob
from edgeprof.profilers.measure.measure import measure
from tests.fleet_support import env, make_onnx, start_scheduler, start_worker, stop_all, \
    wait_boards
from tests.profilers.measure.test_generate_runners import request as generative_request

pytest.importorskip("distributed")

BOARD, TARGET = "pi-9", "raspberry_pi_4"
GEN_STEPS = [f"board {BOARD}: loading tiny-gen q4_0 on sleep_gen",
             f"board {BOARD}: sleep_gen q4_0: pp8 tg4 @ d0",
             f"board {BOARD}: sleep_gen q4_0: pp8 tg4 @ d16"]
RUN = {"min_time_s": 0.05, "runs": 20}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet_progress")
    (tmp / "gen_plugin.py").write_text(
        "from edgeprof.core.hookspecs import hookimpl\n"
        "from tests.profilers.measure.test_generate_runners import SleepGenBackend\n\n"
        "@hookimpl\n"
        "def edgeprof_register_backends():\n"
        "    return [SleepGenBackend]\n")
    (tmp / "plugins.toml").write_text('[plugins]\nmodules = ["gen_plugin.py"]\n')
    base = env()
    sched, address = start_scheduler(tmp, base)
    procs = [sched]
    try:
        procs.append(start_worker(tmp, address, TARGET, BOARD,
                                  env(EDGEPROF_PLUGINS=str(tmp / "plugins.toml"))))
        wait_boards(address, {BOARD})
        yield {"address": address, "model": make_onnx(tmp / "mlp.onnx"), "tmp": tmp}
    finally:
        stop_all(procs)


def _tensor_request(model):
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model
    from edgeprof.core.requests import MeasureRequest

    return MeasureRequest.for_handle("onnxruntime", resolve_model(str(model)),
                                     RunConfig(precision="fp32", **RUN))


# ---------------------------------------------------------------------- with a board
def test_a_tensor_profile_on_the_fleet_reports_the_boards_steps(fleet):
    """``profile(..., fleet=, progress=)`` (what ``edgeprof profile --fleet`` calls with its
    progress line): the board's step arrives, naming the board, between the caller's own."""
    from edgeprof.api import profile

    seen: list[str] = []
    report = profile(str(fleet["model"]), target=TARGET, backends="onnxruntime",
                     run_options=RUN, fleet=fleet["address"], progress=seen.append)
    assert report.runs[0].status == "ok", report.runs[0].benchmark.reason
    board = [m for m in seen if m.startswith(f"board {BOARD}: ")]
    assert board and board[0].startswith(f"board {BOARD}: measuring onnxruntime fp32 (")
    assert "in a fresh process" in board[0]
    i = seen.index(board[0])
    assert seen[i - 1] == "building mlp fp32 for onnxruntime here (boards never convert)"
    assert seen.index("benchmarking onnxruntime fp32") < i


def test_a_generative_run_on_the_fleet_reports_load_and_each_depth(fleet, tmp_path):
    from edgeprof.profilers.measure.choice import chosen_runner
    from edgeprof.targets import get_target

    seen: list[str] = []
    with chosen_runner(get_target(TARGET), fleet=fleet["address"],
                           progress=seen.append) as runner:
        assert isinstance(runner, RemoteRunner) and runner.progress == seen.append
        rec = measure(generative_request(tmp=tmp_path), runner)
    assert rec.status == "ok", rec.reason
    assert rec.extra["fleet"]["board"] == BOARD
    assert seen[0] == "building tiny-gen q4_0 for sleep_gen here (boards never convert)"
    assert [m for m in seen if m in GEN_STEPS] == GEN_STEPS  # each once, in order
    from edgeprof.profilers.measure.fleet_dispatcher import _ROUTES

    assert not _ROUTES  # nothing left routed once the run is over


def test_a_sweeps_jobs_report_their_boards_steps(fleet, tmp_path):
    """``run_sweep(..., steps=)`` (the line ``edgeprof sweep --fleet`` shows under its bar):
    each step arrives with its job's key."""
    from edgeprof.optimize.sweep import run_sweep

    shutil.copy(fleet["model"], tmp_path / "mlp.onnx")
    path = tmp_path / "s.toml"
    path.write_text("models = ['mlp.onnx']\ntargets = ['raspberry_pi_4']\n"
                    "backends = ['onnxruntime']\nprecisions = ['fp32']\n"
                    "[run]\nruns = 20\nmin_time = 0.05\nmax_time = 0.5\n")
    seen: list[tuple[str, str]] = []
    report = run_sweep(path, fleet=fleet["address"], steps=lambda k, m: seen.append((k, m)))
    (job,) = report.frame["job_key"]
    assert list(report.frame["status"]) == ["ok"]
    assert seen and all(k == job for k, _ in seen)
    assert any(m.startswith(f"board {BOARD}: measuring onnxruntime fp32") for _, m in seen)


def test_a_progress_callback_that_raises_changes_no_outcome(fleet, tmp_path):
    calls: list[str] = []

    def broken(msg: str) -> None:
        calls.append(msg)
        raise RuntimeError("the terminal went away")

    with RemoteRunner(fleet["address"], TARGET, progress=broken) as runner:
        rec = measure(_tensor_request(fleet["model"]), runner)
        assert rec.status == "ok", rec.reason
        assert rec.stats.median_ms > 0
        gen = measure(generative_request(tmp=tmp_path), runner)
        assert gen.status == "ok", gen.reason
    assert any(m.startswith(f"board {BOARD}: measuring onnxruntime") for m in calls)
    assert [m for m in calls if m in GEN_STEPS] == GEN_STEPS  # every line still offered


# ------------------------------------------------------------------- without a board
class _Client:
    def __init__(self, subscribe_fails: bool = False):
        self.fails = subscribe_fails
        self.submitted: list[dict] = []
        self.subscribed = 0

    def subscribe_topic(self, topic, handler):
        if self.fails:
            raise OSError("scheduler gone")
        self.subscribed += 1

    def submit(self, fn, payload, **kw):
        self.submitted.append(payload)
        return object()


def test_a_channel_that_cannot_open_or_junk_on_it_is_dropped():
    from edgeprof.profilers.measure.fleet_dispatcher import _ROUTES, _route

    d = Dispatcher(_Client())
    quiet = FleetJob(key="k", target=TARGET, backend="x", payload={}, timeout_s=1)
    d.submit(quiet)  # nobody listens: no token, no subscription, nothing sent by the board
    assert "progress" not in quiet.payload and d.client.subscribed == 0

    d = Dispatcher(_Client(subscribe_fails=True))
    job = FleetJob(key="k", target=TARGET, backend="x", payload={}, timeout_s=1,
                   progress=lambda m: None)
    d.submit(job)  # no channel: submitted all the same, without a progress token
    assert len(d.client.submitted) == 1 and "progress" not in job.payload

    seen: list[str] = []
    d = Dispatcher(_Client())
    job = FleetJob(key="k", target=TARGET, backend="x", payload={}, timeout_s=1,
                   progress=seen.append)
    d.submit(job)
    token = job.payload["progress"]
    for junk in (None, (0.0, None), (0.0, "text"), (0.0, {"job": "someone-else's"})):
        _route(junk)  # the client's event loop never sees an error
    _route((0.0, {"job": token, "board": "b-1", "text": "loading"}))
    d.relay_progress()
    assert seen == ["board b-1: loading"]
    d.forget_progress(job)
    assert token not in _ROUTES
    _route((0.0, {"job": token, "board": "b-1", "text": "late"}))
    d.relay_progress()
    assert seen == ["board b-1: loading"]

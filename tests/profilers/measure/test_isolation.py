"""Isolated benchmarks: spawned workers, crashes, hangs, and what crosses the process line.

The fake backends are found in the worker through a plugins.toml that lists tests/fakes.py.
"""

from __future__ import annotations

import os
import time

import pytest

from edgeprof.core.backend import Backend, RunConfig
from edgeprof.core.errors import MeasurementError, ModelError, UnknownNameError
from edgeprof.profilers.measure.harness import benchmark_backend
from edgeprof.profilers.measure.worker import (WorkerRequest, raise_for_status, request_for,
                                       result_from_dict, run_isolated)


from tests import fakes  # noqa: E402


@pytest.fixture(scope="module")
def plugins_file(tmp_path_factory):
    return fakes.write_plugins_file(tmp_path_factory.mktemp("plugins"))


def isolated(backend, plugins_file, timeout_s=60, **options):
    cfg = RunConfig(min_time_s=0.05, max_time_s=1.0, runs=20, isolate=True, timeout_s=timeout_s,
                    options={"plugins_file": str(plugins_file), **options})
    return benchmark_backend(backend, fakes.fake_handle(), cfg)


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
    assert r.status == "unsupported"


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
    req = WorkerRequest(backend="fake_busy", model_spec="edgeprof_no_such_module:factory",
                        input_shapes=[[1, 8]], input_dtypes=["float32"],
                        config=RunConfig().to_dict(), plugins_file=str(plugins_file))
    with pytest.raises(ModelError, match="edgeprof_no_such_module"):
        run_isolated(req, timeout_s=60)
    req.model_spec = fakes.FAKE_MODEL_SPEC
    req.backend = "fake_nonexistent"
    with pytest.raises(UnknownNameError, match="fake_nonexistent"):
        run_isolated(req, timeout_s=60)


def test_request_is_small_plain_data(plugins_file):
    cfg = RunConfig(isolate=True, options={"plugins_file": str(plugins_file)})
    req, why = request_for(fakes.FakeBusyBackend(), fakes.fake_handle(batch_size=4), cfg)
    assert why is None
    assert req.backend == "fake_busy" and req.backend_class is None  # by registry name
    assert req.plugins_file == str(plugins_file)
    assert req.input_shapes == [[4, 8]] and req.config["isolate"] is False
    import json

    assert WorkerRequest.from_dict(json.loads(json.dumps(req.to_dict()))) == req


def test_what_cannot_cross_runs_in_process(plugins_file):
    from edgeprof.core.models import resolve_model

    handle = resolve_model(fakes.FakeModule(), input_shapes=[[1, 8]])
    req, why = request_for(fakes.FakeBusyBackend(), handle, RunConfig())
    assert req is None and "nn.Module object" in why

    class LocalBackend(Backend):  # neither registered nor importable
        name = "local_only"

    req, why = request_for(LocalBackend(), fakes.fake_handle(), RunConfig())
    assert req is None and "in-process" in why


def test_result_round_trips_through_its_dict():
    r = benchmark_backend(fakes.FakeBusyBackend(), fakes.fake_handle(),
                          RunConfig(min_time_s=0.02, runs=10, options={"fake_ms": 0.2,
                                                                       "fake_first_ms": 20}))
    back = result_from_dict(r.to_dict())
    assert back.to_dict() == r.to_dict()
    assert back.stats.median_ms == r.stats.median_ms
    assert back.warnings and back.warnings[0].code == r.warnings[0].code

"""A plugin backend that raises, calls sys.exit(3), segfaults, hangs or runs out of memory:
the run finishes, the other backends' results survive, the bad one is a `failed` row with a
one-line reason, and edgeprof says so in one line."""

from __future__ import annotations

import signal

import pytest

from tests.faults.inject import (FAST, MEMORY_LIMIT, MODEL, check_complete, kill_session, launch,
                                 out_leftovers, session_leftovers)

FAULTS = ["fault_raise", "fault_exit", "fault_memory", "fault_segfault", "fault_hang"]
#: runs in the main process (a segfault ends the process: a run of its own)
IN_PROCESS = {"in-process": "fault_raise,fault_exit,fault_memory",
              "fault_segfault": "fault_segfault"}
#: generous: the timeout also covers the worker's start (importing torch) on a busy machine
TIMEOUT = ["--timeout", "15"]


@pytest.fixture(scope="module")
def runs(warm, plugins, tmp_path_factory):
    started = {}

    def start(case, backends, extra, alone=False, **kw):
        cwd = tmp_path_factory.mktemp(case)
        out = cwd / "out"
        backends = backends if alone else f"torch_eager,{backends}"
        run = launch(["profile", MODEL, *FAST, "--plugins", str(plugins), "--backend",
                      backends, "--out", str(out), *extra], cwd, **kw)
        started[case] = (run, out)

    for case, backends in IN_PROCESS.items():
        start(case, backends, [], memory_limit=MEMORY_LIMIT)
    # a hang cannot be survived in-process: --timeout without --isolate implies isolation
    start("fault_hang", "fault_hang", TIMEOUT, alone=True)
    start("isolated", ",".join(FAULTS), ["--isolate", *TIMEOUT], memory_limit=MEMORY_LIMIT)
    results = {}
    for case, (run, out) in started.items():
        res = run.wait(timeout=240)
        results[case] = (res, out, session_leftovers(res.sid))
        kill_session(res.sid)
    return results


def rows(out):
    return {r["backend"]: r for r in check_complete(out)["runs"]}


def check_survived(res, out, faults, *, others=("torch_eager",)):
    assert res.rc == 3, (res.rc, res.stderr[-3000:])  # partial: a named backend failed
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    by_backend = rows(out)
    for other in others:
        assert by_backend[other]["status"] == "ok", by_backend[other]
    for fault in faults:
        row = by_backend[fault]
        assert row["status"] == "failed", row
        assert row["reason"] and "\n" not in row["reason"], row["reason"]
        said = [m for m in res.messages if m.startswith(f"edgeprof: {fault} ")]
        assert len(said) == 1 and "failed" in said[0], res.messages
    assert out_leftovers(out) == []


def test_raise_sys_exit_and_out_of_memory_in_process_are_failed_rows(runs):
    res, out, _ = runs["in-process"]
    check_survived(res, out, ["fault_raise", "fault_exit", "fault_memory"])
    reasons = {f: rows(out)[f]["reason"] for f in ("fault_raise", "fault_exit", "fault_memory")}
    assert "injected failure" in reasons["fault_raise"], reasons
    assert "3" in reasons["fault_exit"], reasons  # the exit status
    assert "MemoryError" in reasons["fault_memory"], reasons


def test_a_segfault_in_process_cannot_be_survived_but_leaves_nothing_half_written(runs):
    """Without --isolate a segfault takes the process down (exit -11): what was measured is
    lost, but --out holds no partial result and no staging folder. (If a later edgeprof
    isolates such backends by default, the run survives instead, as checked here too.)"""
    res, out, _ = runs["fault_segfault"]
    if res.rc == -signal.SIGSEGV:
        assert not out.exists() and out_leftovers(out) == []
    else:
        check_survived(res, out, ["fault_segfault"])


def test_a_hang_with_timeout_is_a_failed_row_without_isolate(runs):
    res, out, leftovers = runs["fault_hang"]  # alone: the other backends survive elsewhere
    check_survived(res, out, ["fault_hang"], others=())
    assert "time" in rows(out)["fault_hang"]["reason"].lower()
    assert leftovers == [], leftovers


def test_every_fault_isolated_is_a_failed_row_and_the_rest_survives(runs):
    res, out, leftovers = runs["isolated"]
    check_survived(res, out, FAULTS)
    reasons = {f: rows(out)[f]["reason"] for f in FAULTS}
    assert "SIGSEGV" in reasons["fault_segfault"], reasons
    assert "time" in reasons["fault_hang"].lower(), reasons
    assert leftovers == [], leftovers

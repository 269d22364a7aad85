"""Ctrl-C and SIGTERM at several points of a run: one line, exit 130 / 143, the previous
--out result untouched, no staging folder left, no process left behind."""

from __future__ import annotations

import ast
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.faults.inject import (FAST, MODEL, check_complete, kill_session, launch,
                                   out_leftovers, previous_result, session_leftovers, snapshot)

#: (case id, pause point, signal, extra arguments, extra environment)
CASES = [
    ("sigint-estimate", "estimate", signal.SIGINT, [], {}),
    ("sigint-benchmark", "benchmark", signal.SIGINT, [], {}),
    ("sigint-writing", "writing", signal.SIGINT, [], {}),
    # `kill PID` reaches the main process only: its worker must not outlive it
    ("sigterm-benchmark-isolated", "benchmark", signal.SIGTERM, ["--isolate"], {}),
    ("sigterm-writing", "writing", signal.SIGTERM, [], {}),
    # a library's gc callback (JAX has one) used to swallow about a third of all Ctrl-Cs
    ("sigint-in-gc-callback", "benchmark", signal.SIGINT, [], {"FAULT_GC_CALLBACK": "1"}),
    ("sigint-benchmark-isolated", "benchmark", signal.SIGINT, ["--isolate"], {}),
]
EXPECTED_LINE = {signal.SIGINT: "edgeprof: interrupted",
                 signal.SIGTERM: "edgeprof: interrupted (SIGTERM)"}


@pytest.fixture(scope="module")
def interrupted(warm, plugins, tmp_path_factory):
    """Start every case at once, signal each at its pause point, collect the results."""
    runs = {}
    for case, point, sig, extra, env in CASES:
        cwd = tmp_path_factory.mktemp(case)
        out = cwd / "out"
        before = previous_result(out)
        backends = "torch_eager,fault_pause" if point == "benchmark" else "torch_eager"
        run = launch(["profile", MODEL, *FAST, "--plugins", str(plugins), "--backend",
                      backends, "--out", str(out), *extra], cwd,
                     env={"FAULT_PAUSE_AT": point, **env})
        runs[case] = (run, sig, out, before)
    for run, sig, _, _ in runs.values():
        # a terminal's Ctrl-C reaches the whole process group; `kill` reaches one process
        run.signal_at_mark(sig, group=sig == signal.SIGINT)
    with ThreadPoolExecutor(len(runs)) as pool:  # each run's end time, as it happens
        finished = dict(zip(runs, pool.map(lambda r: r[0].wait(timeout=120), runs.values())))
    results = {}
    for case, (run, sig, out, before) in runs.items():
        res = finished[case]
        results[case] = (res, sig, out, before, session_leftovers(res.sid))
        kill_session(res.sid)
    return results


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_one_line_and_the_signal_exit_status(interrupted, case):
    res, sig, _, _, _ = interrupted[case]
    assert res.rc == 128 + sig, (res.rc, res.stderr[-3000:])
    assert res.messages == [EXPECTED_LINE[sig]], res.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "Exception ignored" not in res.stderr, res.stderr[-3000:]


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_nothing_written_and_no_staging_left(interrupted, case):
    res, _, out, before, _ = interrupted[case]
    assert snapshot(out) == before, "the earlier result in --out changed"
    check_complete(out)
    assert out_leftovers(out) == [], res.stderr[-2000:]


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_no_process_left_behind(interrupted, case):
    res, _, _, _, leftovers = interrupted[case]
    assert leftovers == [], f"still running after edgeprof exited: {leftovers}"


def test_the_interrupt_ends_the_run_within_the_pause(interrupted):
    """Each pause lasts 60 s: ending well before proves the signal, not the pause, ended it
    (a generous bound for a busy machine, not a timing figure)."""
    late = {case: round(res.ended_at - res.signalled_at, 1)
            for case, (res, *_rest) in interrupted.items()
            if res.ended_at - res.signalled_at > 45}
    assert late == {}


# ------------------------------------------------------------------ no swallowing in code
#: handlers that catch KeyboardInterrupt (or everything) without raising again, and why
ALLOWED = {
    ("edgeprof/profilers/measure/worker.py", "_worker_main"):
        "runs in the worker: reports the error to its parent, which decides",
    ("edgeprof/cli/main.py", "_run"): "the command line's last word: one line, exit 130/143",
    ("edgeprof/profilers/measure/fleet.py", "serve_worker"):
        "a board's serve loop ends on Ctrl-C, by design; nothing runs after it",
}


def _swallowing_handlers(root: Path):
    for path in sorted((root / "edgeprof").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))]
        for handler in [n for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler)]:
            names = []
            t = handler.type
            for node in (t.elts if isinstance(t, ast.Tuple) else [t]):
                names.append(getattr(node, "id", getattr(node, "attr", None)))
            if t is not None and not {"BaseException", "KeyboardInterrupt"} & set(names):
                continue
            if any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
                continue
            owner = next((f.name for f in funcs if f.lineno <= handler.lineno <= (
                f.end_lineno or f.lineno)), "<module>")
            yield (path.relative_to(root).as_posix(), owner), handler.lineno


def test_no_handler_swallows_an_interrupt():
    """``except BaseException``, ``except KeyboardInterrupt`` and bare ``except:`` must raise
    again: an interrupt caught and dropped lets the run finish with exit 0."""
    root = Path(__file__).resolve().parents[2]
    found = [f"{where[0]}:{line} in {where[1]}" for where, line in _swallowing_handlers(root)
             if where not in ALLOWED]
    assert found == []

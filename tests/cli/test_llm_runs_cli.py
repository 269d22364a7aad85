"""Generative runs through ``measure()`` on the command line (issue 19): the steps a
generative run reports while it runs (building, loading, each depth's pp/tg) reach the CLI's
progress line as a tensor run's do, in this process and from an isolated worker; and
``calibrate`` with a generative backend takes the runner ``profile`` takes (here, in a worker
with --isolate/--timeout, a board with --fleet), every bad input one line and exit 2.

The backends are the fake generative plugin of tests/cli/test_llm_cli.py (no runtime)."""

from __future__ import annotations

import json

import pytest

from edgeprof.cli import common
from edgeprof.cli.main import main
from tests.cli.test_llm_cli import TINY, cache, plugins  # noqa: F401 - fixtures


@pytest.fixture
def steps(monkeypatch) -> list[str]:
    """What the CLI's progress line is asked to show (it draws only on a terminal)."""
    seen: list[str] = []
    monkeypatch.setattr(common.Progress, "__call__", lambda self, msg: seen.append(msg))
    return seen


def _run_steps(steps: list[str]) -> list[str]:
    return [s for s in steps if s.startswith(("building ", "loading ", "fake_llm q4_0: pp"))]


# ------------------------------------------------------------------------------ progress
def test_a_generative_runs_steps_reach_the_progress_line(capsys, plugins, cache, steps):
    code = main(["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision", "q4_0",
                 "--depth", "0,8", *TINY, "--plugins", plugins])
    assert code == 0, capsys.readouterr().err
    assert steps[:2] == ["estimating smollm2-135m", "measuring fake_llm q4_0"]
    assert _run_steps(steps) == ["building smollm2-135m q4_0 for fake_llm",
                                 "loading smollm2-135m q4_0 on fake_llm",
                                 "fake_llm q4_0: pp16 tg4 @ d0", "fake_llm q4_0: pp16 tg4 @ d8"]


def test_an_isolated_workers_steps_reach_the_progress_line(capsys, plugins, cache, steps):
    code = main(["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision", "q4_0",
                 "--isolate", *TINY, "--plugins", plugins, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [run] = json.loads(captured.out)["runs"]
    assert run["status"] == "ok"
    assert "measuring fake_llm q4_0 in a worker process" in steps
    assert _run_steps(steps) == ["building smollm2-135m q4_0 for fake_llm",
                                 "loading smollm2-135m q4_0 on fake_llm",
                                 "fake_llm q4_0: pp16 tg4 @ d0"]


def test_progress_lines_and_the_answer_share_the_workers_pipe():
    """The worker's progress lines come before its answer on one pipe; a callback that
    fails, or a line cut off by a dying worker, changes nothing of the answer."""
    from edgeprof.profilers.measure.runners import _relay

    got: list[str] = []
    _relay(b'{"progress": "loading"}', got.append)
    _relay(b'{"progress": "load', got.append)  # cut off: dropped
    _relay(b'{"progress": "x"}', lambda m: 1 / 0)  # a broken display: dropped
    assert got == ["loading"]


# ----------------------------------------------------------------------------- calibrate
def test_calibrate_a_generative_backend_in_isolated_workers(tmp_path, capsys, plugins, cache,
                                                             steps, monkeypatch):
    """--isolate: each preset is measured in a fresh worker process (one per preset), as
    profile --isolate does; the calibration is this host's."""
    from edgeprof.profilers.measure import runners

    spawned = []
    real = runners.spawn_worker

    def spy(wire, timeout_s, **kw):
        spawned.append((wire["model"], timeout_s))
        return real(wire, timeout_s, **kw)

    monkeypatch.setattr(runners, "spawn_worker", spy)
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    code = main(["calibrate", "--backend", "fake_llm", "--models", "smollm2-135m,smollm2-360m",
                 "--timeout", "120", "--plugins", plugins, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert spawned == [("llm:smollm2-135m", 120.0), ("llm:smollm2-360m", 120.0)]
    assert "measuring fake_llm q4_0 on smollm2-135m in a worker process" in steps
    assert "loading smollm2-360m q4_0 on fake_llm" in steps  # from the worker
    assert {r["model"] for r in out["runs"]} == {"smollm2-135m", "smollm2-360m"}
    assert all(r["status"] == "ok" for r in out["runs"]) and out["fingerprint"] is None
    assert out["calibration"] == "llm--host--measured"
    assert json.loads((tmp_path / "cal" / "llm--host--measured.json").read_text())["entries"]


@pytest.mark.parametrize("args, words", [
    (["--backend", "onnxruntime", "--isolate"], "--isolate and --timeout go with a generative"),
    (["--backend", "fake_llm", "--fleet", "127.0.0.1:9"], "'host' is this machine"),
    (["--backend", "fake_llm", "--timeout", "0"], "--timeout"),
    (["--backend", "fake_llm", "--target", "raspberry_pi_5"], "only --target host"),
])
def test_bad_calibrate_input_is_one_line_and_exit_2(capsys, plugins, cache, args, words):
    try:
        code = main(["calibrate", *args, "--models", "smollm2-135m", "--plugins", plugins])
    except SystemExit as e:  # argparse's own refusal
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0], err

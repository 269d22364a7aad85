"""edgeprof.profilers.measure.llm_runs: the runner a generative command measures on, its
steps reported to the caller's progress (in this process and from an isolated worker), the
records as a profile's runs saying where they were measured, and which machine a calibration
fitted to them describes. The backend is the real-time fake of test_generate_runners."""

from __future__ import annotations

import socket

import pytest

from edgeprof.core.errors import UserError
from edgeprof.core.results import GenerativeRunRecord
from edgeprof.profilers.measure.llm_runs import calibration_subject, run_dicts
from edgeprof.profilers.measure.measure import measure
from edgeprof.profilers.measure.choice import chosen_runner
from edgeprof.profilers.measure.runners import InlineRunner, IsolatedRunner
from tests.profilers.measure.test_generate_runners import request

STEPS = ["building tiny-gen q4_0 for sleep_gen", "loading tiny-gen q4_0 on sleep_gen",
         "sleep_gen q4_0: pp8 tg4 @ d0", "sleep_gen q4_0: pp8 tg4 @ d16"]


def test_measure_reports_a_generative_runs_steps_inline_and_isolated(tmp_path):
    seen: list[str] = []
    rec = measure(request(tmp=tmp_path), progress=seen.append)  # the default: inline
    assert rec.ok and rec.extra["process"] == "inline" and seen == STEPS
    seen.clear()
    rec = measure(request(tmp=tmp_path, timeout_s=120), progress=seen.append)  # isolated
    assert rec.ok and rec.extra["process"] == "isolated" and seen == STEPS


def test_the_runner_profile_chooses():
    with chosen_runner(None, progress=print) as r:
        assert isinstance(r, InlineRunner) and r.progress is print
    with chosen_runner(None, isolate=True) as r:
        assert isinstance(r, IsolatedRunner) and r.timeout_s is None
    with chosen_runner(None, timeout_s=5) as r:
        assert isinstance(r, IsolatedRunner) and r.timeout_s == 5
    with pytest.raises(UserError, match="give --target"):
        with chosen_runner(None, fleet="127.0.0.1:9"):
            pass
    with pytest.raises(UserError, match="--timeout must be a positive number"):
        with chosen_runner(None, timeout_s=0):
            pass


def test_runs_say_where_a_board_measured_them(tmp_path):
    rec = measure(request(tmp=tmp_path), InlineRunner())
    here = run_dicts(rec)
    assert [r["n_depth"] for r in here] == [0, 16]
    assert all("board" not in r and "measured_on" not in r for r in here)
    rec.extra["fleet"] = {"board": "emu-1", "target": "raspberry_pi_5", "emulating": True,
                          "fingerprint": {}}
    emulated = run_dicts(rec)
    assert all(r["board"]["board"] == "emu-1" for r in emulated)
    assert all(r["measured_on"].startswith("measured on HOST, emulating raspberry_pi_5")
               for r in emulated)
    assert all(sum("this host's figures, not the target's" in w for w in r["warnings"]) == 1
               for r in run_dicts(rec))  # said once, however often it is read


def _board_run(board: str, emulating: bool, host: str) -> GenerativeRunRecord:
    return GenerativeRunRecord(backend="llama_cpp", model="m", format="q4_0", status="ok",
                               extra={"fleet": {"board": board, "target": "raspberry_pi_5",
                                                "emulating": emulating,
                                                "fingerprint": {"hostname": host}}})


def test_which_machine_a_calibration_describes():
    """A real board's runs are the board's (emulated ones beside them left out); an
    emulating worker on this machine measured this host; one on another machine measured
    neither (one line, exit 2)."""
    here = socket.gethostname()
    away = _board_run("emu-9", True, here + "-elsewhere")
    with pytest.raises(UserError, match="emulate raspberry_pi_5 on another machine"):
        calibration_subject([away], "raspberry_pi_5")
    subject, board, kept = calibration_subject([_board_run("emu-1", True, here)],
                                               "raspberry_pi_5")
    assert subject == "host" and board["board"] == "emu-1" and len(kept) == 1
    real = _board_run("pi-1", False, "pi")
    subject, board, kept = calibration_subject([away, real], "raspberry_pi_5")
    assert subject == "board" and board["board"] == "pi-1" and kept == [real]
    assert calibration_subject([GenerativeRunRecord("b", "m", "f")], "x")[0] == "here"

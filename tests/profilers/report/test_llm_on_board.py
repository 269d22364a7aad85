"""A generative run measured on a real board of the target (a fleet worker that is the board,
not an emulating one) is the target's ``measured`` figure in the terminal, the HTML page and
llm_bench.csv: it says so with the board's name, and the target's prediction for it is shown
only as a check of the measurement, never as the target's figure. A run on an emulating
worker stays a host measurement and the prediction stays the target's figure.

The payload is the real estimate and prediction of smollm2-135m on raspberry_pi_5; the runs
are synthetic GenerationRecords carrying the fleet's record of the board (what
``edgeprof.profilers.measure.llm_runs.run_dicts`` writes): they check labels, not speed."""

from __future__ import annotations

import copy
import io
import re

import pytest

from edgeprof.core.llm import GenerationRecord
from edgeprof.profilers.report.generative import GenerativeReport
from edgeprof.profilers.report.llm_html import render_llm_html
from edgeprof.profilers.report.llm_outputs import bench_frame
from edgeprof.profilers.report.llm_payload import measured_on_target, run_place

TARGET = "raspberry_pi_5"


def _board(name: str, emulating: bool) -> dict:
    return {"board": name, "target": TARGET, "emulating": emulating, "sha256": "0" * 64,
            "fingerprint": {"board": name, "target": TARGET, "emulating": emulating,
                            "hostname": "pi", "cpu_model": "Cortex-A76", "arch": "aarch64"}}


def _run(board: dict | None) -> dict:
    rec = GenerationRecord(
        model="smollm2-135m", backend="llama_cpp", format="q4_0", n_prompt=64, n_gen=16,
        n_threads=4, repetitions=3,
        prefill_tokens_per_s={"median": 300.0, "mean": 300.0, "stddev": 3.0, "min": 297.0,
                              "max": 303.0},
        decode_tokens_per_s={"median": 55.5, "mean": 55.5, "stddev": 0.5, "min": 55.0,
                             "max": 56.0},
        ttft_ms={"median": 220.0, "mean": 221.0}, tpot_ms={"p50": 18.0, "p90": 19.0},
        load_s=0.2, peak_rss_bytes=300_000_000, model_size=100_000_000)
    run = rec.to_dict()
    if board is not None:
        run["board"] = board
        run["measured_on"] = ("measured on HOST, emulating" if board["emulating"] else
                              f"measured on board {board['board']}")
    return run


@pytest.fixture(scope="module")
def estimate():
    from edgeprof.api import estimate_llm

    p = estimate_llm("llm:smollm2-135m", TARGET, backends="llama_cpp", precisions="q4_0",
                     prompt_tokens=64, gen_tokens=16)
    assert len(p["predictions"]) == 1
    return p


def with_run(estimate, board):
    p = copy.deepcopy(estimate)
    p["runs"] = [_run(board)]
    return p


def terminal(payload) -> str:
    from rich.console import Console

    from edgeprof.cli.render_llm import render_llm

    buf = io.StringIO()
    render_llm(GenerativeReport.from_dict(payload),
               Console(file=buf, width=250, color_system=None))
    return buf.getvalue()


# ---------------------------------------------------------------------------- the place
def test_a_real_board_of_the_target_is_the_target():
    assert run_place(_run(_board("pi5-1", False)), TARGET) == ("board pi5-1 (raspberry_pi_5)",
                                                               True)
    assert run_place(_run(_board("pi5-1", False)), "raspberry_pi_4")[1] is False
    assert run_place(_run(_board("emu-1", True)), TARGET) == (
        "host of board emu-1, emulating raspberry_pi_5", False)
    assert run_place(_run(None), TARGET) == ("this host", False)
    local = dict(_board("local", True))  # a sweep without a fleet
    assert run_place(_run(local), TARGET) == ("this host, emulating raspberry_pi_5", False)


# ----------------------------------------------------------------------------- terminal
def test_the_terminal_shows_the_boards_measurement_as_the_targets(estimate):
    text = terminal(with_run(estimate, _board("pi5-1", False)))
    assert "measured (board pi5-1 (raspberry_pi_5))" in text
    assert "measured (this host)" not in text
    # the target's figure is the measurement: no predicted row, the prediction a check
    assert "predicted (raspberry_pi_5)" not in text and "uncalibrated (raspberry_pi_5)" \
        not in text
    check = next(line for line in text.splitlines() if "its prediction was" in line)
    assert "measured on board pi5-1 (raspberry_pi_5), decode 55.5 tok/s (the target's figure)" \
        in check


def test_an_emulating_workers_run_stays_a_host_measurement(estimate):
    text = terminal(with_run(estimate, _board("emu-1", True)))
    assert "measured (host of board emu-1, emulating raspberry_pi_5)" in text
    prov = estimate["predictions"][0]["decode_tokens_per_s"]["provenance"]
    assert f"{prov} (raspberry_pi_5)" in text  # the target's figure stays the prediction
    assert "its prediction was" not in text


# ---------------------------------------------------------------------------------- HTML
def test_the_page_shows_the_boards_measurement_as_the_targets(estimate):
    html = render_llm_html(with_run(estimate, _board("pi5-1", False)))
    card = re.search(r'data-key="target-measured">(.*?)</dd>', html, re.S)
    assert card and "board pi5-1 (raspberry_pi_5)" in card.group(1)
    assert 'data-key="target_decode_median" data-value="55.5" data-prov="measured"' \
        in card.group(1)
    rates = re.search(r'data-measured-bars="(\d+)" data-predicted-bars="(\d+)" '
                      r'data-estimated-bars="(\d+)" data-board-bars="(\d+)"', html)
    assert [int(x) for x in rates.groups()] == [0, 0, 0, 2]  # no prediction drawn for it
    roof = re.search(r'data-measured-points="(\d+)" data-board-points="(\d+)"', html)
    assert [int(x) for x in roof.groups()] == [0, 2]
    assert "decode measured on board pi5-1 (raspberry_pi_5)" in html
    assert 'data-measured-on="board pi5-1 (raspberry_pi_5)"' in html  # the check row
    assert re.search(r'<h2 id="runs-section">Runs \(1\)</h2>', html)
    assert 'data-on-target="true">measured on board pi5-1 (raspberry_pi_5)' in html


def test_the_page_keeps_an_emulated_run_as_this_hosts(estimate):
    html = render_llm_html(with_run(estimate, _board("emu-1", True)))
    assert 'data-key="target-measured"' not in html
    rates = re.search(r'data-measured-bars="(\d+)" data-predicted-bars="(\d+)" '
                      r'data-estimated-bars="(\d+)" data-board-bars="(\d+)"', html)
    measured, predicted, estimated, board = map(int, rates.groups())
    assert measured == 2 and board == 0 and predicted + estimated == 2
    assert 'data-measured-on=' not in html and 'data-on-target' not in html
    here = render_llm_html(with_run(estimate, None))
    assert re.search(r'<h2 id="runs-section">Runs on this host \(1\)</h2>', here)


def test_llm_bench_csv_says_where_each_row_was_measured(estimate):
    frame = bench_frame(GenerativeReport.from_dict(with_run(estimate, _board("pi5-1", False))))
    measured = frame[frame["provenance"] == "measured"]
    assert set(measured["where"]) == {"board pi5-1 (raspberry_pi_5)"}
    payload = with_run(estimate, _board("pi5-1", False))
    assert measured_on_target(payload) == {("llama_cpp", "q4_0", 0):
                                           "board pi5-1 (raspberry_pi_5)"}


def test_the_typed_run_says_where_it_was_measured():
    from edgeprof.profilers.report.generative import GenerativeRun

    run = GenerativeRun.from_dict(_run(_board("pi5-1", False)))
    assert run.board["board"] == "pi5-1" and run.measured_on == "measured on board pi5-1"
    assert run.place(TARGET) == ("board pi5-1 (raspberry_pi_5)", True)
    assert run.to_dict()["board"]["board"] == "pi5-1"  # kept as read
    here = GenerativeRun.from_dict(_run(None))
    assert here.board is None and here.measured_on is None
    assert here.place(TARGET) == ("this host", False)

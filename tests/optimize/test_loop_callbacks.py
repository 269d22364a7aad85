"""The optimize loop's seams: progress and re-timing are callbacks passed in."""

from __future__ import annotations

import pytest

from edgeprof.optimize import evaluate, select
from edgeprof.optimize.candidates import Candidate
from edgeprof.optimize.loop import optimize
from edgeprof.optimize.report import CandidateResult

TINY = {"runs": 20, "min_time_s": 0.05, "max_time_s": 0.5}
PAIR = ["torch_eager:fp32", "onnxruntime:fp32"]


def _accepted(backend: str, latency: float, accepted: bool = True) -> CandidateResult:
    return CandidateResult(Candidate(backend), "ok", latency_ms=latency, accuracy=0.95,
                           accepted=accepted)


def test_retime_callback_gets_the_close_accepted_finalists_fastest_first():
    fast, close, far = _accepted("a", 1.0), _accepted("b", 1.4), _accepted("c", 1.6)
    rejected = _accepted("d", 1.1, accepted=False)
    extra = [_accepted(f"e{i}", 1.2 + i / 100) for i in range(4)]
    calls = []

    def retime(finalists):
        calls.append(finalists)
        return finalists[1:]  # what it re-timed

    labels = select.retime_finalists([far, close, rejected, fast], retime)
    assert calls == [[fast, close]] and labels == ["b fp32"]
    # at most RETIME_MAX, the fastest kept
    calls.clear()
    select.retime_finalists([close, *extra, fast], retime)
    assert calls[0] == [fast, *extra[:select.RETIME_MAX - 1]]
    # nothing to order: no call
    calls.clear()
    assert select.retime_finalists([fast, far, rejected], retime) == []
    assert calls == []
    # a callback that re-times nothing (returns None) is not reported as re-timing
    assert select.retime_finalists([fast, close], calls.append) == [] and calls
    assert select.retime_finalists([fast, close], None) == []


def test_a_retime_callback_replaces_the_default_and_the_choice_follows_it(tmp_path,
                                                                       monkeypatch):
    """Every step reaches the progress callback; the retime callback gets the finalists
    (close-enough widened so both measured candidates are finalists) and what it sets is
    what the choice is made on."""
    monkeypatch.setattr(select, "RETIME_WITHIN", 1e9)
    steps: list[str] = []
    seen: list[list[CandidateResult]] = []

    def retime(finalists):
        seen.append(list(finalists))
        slowest = finalists[-1]
        slowest.latency_ms = finalists[0].latency_ms / 10  # the re-timed figure
        slowest.notes.append("re-timed by the test")
        return [slowest]

    out = tmp_path / "out"
    report = optimize("builtin:small_cnn", "host", latency_budget_ms=1e3, run_options=TINY,
                      candidates=PAIR, out=out, progress=steps.append, retime=retime)
    assert len(seen) == 1
    finalists = seen[0]
    assert {r.candidate.label for r in finalists} == {"torch_eager fp32", "onnxruntime fp32"}
    assert all(r.ok and r.accepted for r in finalists)
    assert report.verdict["retimed"] == [finalists[-1].candidate.label]
    assert report.chosen is finalists[-1]  # chosen on the re-timed figure
    assert steps[0].startswith("training small_cnn")
    assert [s for s in steps if s.startswith("measuring")] == \
        ["measuring torch_eager fp32", "measuring onnxruntime fp32"]
    assert "planning" in steps and not any(s.startswith("re-timing") for s in steps)
    assert steps[-1] == f"writing artifacts to {out}"


def test_the_default_retimer_reports_each_round_through_progress(monkeypatch):
    monkeypatch.setattr(select, "RETIME_WITHIN", 1e9)
    monkeypatch.setattr(evaluate, "RETIME_RUN_OPTIONS", TINY)
    steps: list[str] = []
    report = optimize("builtin:small_cnn", "host", latency_budget_ms=1e3, run_options=TINY,
                      candidates=PAIR, progress=steps.append)
    retimed = report.verdict["retimed"]
    assert sorted(retimed) == sorted(r.candidate.label for r in report.candidates)
    # interleaved rounds: every finalist once per round, in the finalists' order
    assert [s for s in steps if s.startswith("re-timing")] == \
        [f"re-timing {label}" for label in retimed] * evaluate.RETIME_ROUNDS
    for r in report.candidates:
        assert any(n.startswith(f"re-timed with {evaluate.RETIME_ROUNDS} interleaved rounds")
                   for n in r.notes)
        assert r.latency_ms == pytest.approx(r.host_latency_ms)  # host: the measured figure

"""What optimize says of its choice carries each figure's own provenance (issue 29, item 2):
a board's predictions are never called measured, and the verdict names the provenance the
chosen figure has."""

from __future__ import annotations

from types import SimpleNamespace

from edgeprof.optimize.candidates import Candidate
from edgeprof.optimize.report import CandidateResult
from edgeprof.optimize.select import make_constraints, overruled, verdict


def _ctx(target_id="raspberry_pi_4", is_host=False):
    return SimpleNamespace(constraints=make_constraints(latency_budget_ms=1.0), min_ratio=0.99,
                           ref_accuracy=0.95,
                           target=SimpleNamespace(id=target_id, is_host=is_host))


def _res(backend, precision, ms, prov, accepted=True):
    r = CandidateResult(Candidate(backend, precision), "ok", latency_ms=ms,
                        latency_provenance=prov, accuracy=0.95, accepted=accepted,
                        memory_bytes=1e5)
    r.accuracy_drop_pp = 0.0
    return r


def test_a_faster_prediction_is_called_predicted_not_measured():
    plan = _res("tflite", "fp32", 0.3233, "predicted")
    chosen = _res("tflite", "int8_static", 0.2532, "predicted")
    (o,) = overruled(plan, chosen)
    assert "measured" not in o["message"]
    assert "predicted faster" in o["message"] and "0.2532 ms vs 0.3233 ms" in o["message"]
    assert o["chosen_provenance"] == o["plan_provenance"] == "predicted"


def test_figures_of_two_provenances_each_say_their_own():
    plan = _res("tflite", "fp32", 0.3233, "predicted")
    chosen = _res("openvino", "int8_static", 0.3092, "estimated")
    (o,) = overruled(plan, chosen)
    assert "0.3092 ms (estimated) vs 0.3233 ms (predicted)" in o["message"]
    assert "measured" not in o["message"]


def test_on_the_host_a_measurement_is_measured():
    plan = _res("onnxruntime", "fp32", 0.5, "measured")
    chosen = _res("onnxruntime", "int8_static", 0.3, "measured")
    (o,) = overruled(plan, chosen)
    assert "measured faster" in o["message"]


def test_the_verdict_names_the_chosen_figures_provenance():
    base = _res("torch_eager", "fp32", 0.3779, "predicted")
    chosen = _res("tflite", "int8_static", 0.2532, "predicted")
    v = verdict([base, chosen], chosen, _ctx(), base, None)
    assert "0.2532 ms (predicted for raspberry_pi_4)" in v["message"]
    assert "estimated" not in v["message"].split(" MB estimated")[0]


def test_the_closest_candidate_names_its_figures_provenance():
    r = _res("tflite", "fp32", 2.0, "uncalibrated", accepted=False)
    r.failing = {"latency_budget_ms": "too slow"}
    v = verdict([r], None, _ctx(), None, None)
    assert "2 ms (uncalibrated for raspberry_pi_4)" in v["message"]


def test_the_candidates_table_does_not_call_every_board_figure_estimated():
    from edgeprof.optimize.report import OptimizeReport

    r = _res("tflite", "fp32", 0.3233, "predicted")
    rep = OptimizeReport(model={"name": "m"}, target=SimpleNamespace(id="raspberry_pi_4",
                                                                     is_host=False),
                         host={}, constraints=make_constraints(), plan=None, candidates=[r],
                         reference={}, dataset={"name": "digits", "test": 10}, chosen=r,
                         plan_result=None, overruled=[], verdict={"message": ""},
                         run_options={})
    head = next(line for line in rep.to_text().splitlines() if line.startswith("Candidates"))
    assert "latency on raspberry_pi_4 estimated" not in head and "pred predicted" in head

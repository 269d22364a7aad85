"""recommend_plan and optimize through the Python API (small_cnn, tiny timing runs)."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from edgeprof.core.errors import ConstraintError, InputSpecError, UnknownNameError, UserError
from edgeprof.optimize.loop import (STRATEGY_COLUMNS, Candidate, CandidateResult, choose,
                                    default_candidates, optimize, plan_candidate,
                                    recommend_plan)
from edgeprof.optimize.select import judge as _judge

SEED_COLUMNS = ["precision", "accuracy_mean", "latency_ms_mean", "memory_mb_mean",
                "energy_proxy_j_mean", "accepted_ratio"]
TINY = {"runs": 20, "min_time_s": 0.05, "max_time_s": 0.5}


# ----------------------------------------------------------------------------- recommend
@pytest.mark.parametrize("target, kind", [("raspberry_pi_4", "edge_cpu"),
                                          ("jetson_nano", "edge_gpu"), ("mcu", "mcu"),
                                          ("mobile_npu", "npu")])
def test_recommend_plan_follows_the_target_descriptor(target, kind):
    from edgeprof.targets import get_target

    t = get_target(target)
    assert t.kind == kind
    plan = recommend_plan("builtin:small_resnet", target, latency_budget_ms=1e-3)
    backend = plan.step("backend")
    assert backend is not None and backend.reason
    # the backend is one the target's processors run (its runtimes are data: issue 29,
    # finding 10; an MCU's own engines, prediction-only, included), not a fixed choice
    from edgeprof.profilers.predict import runtimes_on

    assert backend.value in runtimes_on(t)
    prec = plan.step("precision")
    if prec is not None:
        assert prec.value in t.supported_precisions and prec.reason and prec.method
    assert plan.failing == ["latency_budget_ms"]  # 1 microsecond is out of reach
    doc = json.loads(json.dumps(plan.to_dict(), allow_nan=False))
    assert doc["target"] == target and doc["steps"][0]["kind"] == "backend"
    assert doc["projected"]["provenance"] == "estimated"


def test_recommend_plan_device_specific_failure_modes():
    mcu = recommend_plan("builtin:small_resnet", "mcu", latency_budget_ms=1e-3)
    assert any(w.code == "mcu_quantization_noise" for w in mcu.warnings)
    assert "symmetric" in mcu.step("precision").method  # the mitigation replaced the method
    npu = recommend_plan("builtin:small_resnet", "mobile_npu", latency_budget_ms=1e-3)
    pr = npu.step("pruning")
    assert pr.value["type"] == "channel" and pr.value["channel_multiple"] == 8
    assert npu.step("precision").value == "fp16"  # the only precision the NPU runs


def test_recommend_plan_already_met_stops_before_compressing():
    plan = recommend_plan("builtin:small_cnn", "raspberry_pi_4", latency_budget_ms=1e4)
    assert plan.already_met and plan.feasible
    assert {s.stage for s in plan.steps} <= {"deploy", "check"}
    assert plan.step("precision") is None and plan.step("pruning") is None
    assert "already meets" in plan.to_text()
    base = recommend_plan("builtin:small_resnet", "raspberry_pi_4")
    tight = recommend_plan("builtin:small_resnet", "raspberry_pi_4",
                           latency_budget_ms=0.9 * base.baseline.latency_ms)
    assert not tight.already_met and tight.step("precision") is not None


def test_recommend_plan_memory_budget_in_decimal_mb():
    plan = recommend_plan("builtin:small_cnn", "raspberry_pi_4", memory_budget_mb=0.1)
    assert plan.constraints.memory_budget_bytes == pytest.approx(0.1e6)
    with pytest.raises(UserError):
        recommend_plan("builtin:small_cnn", "raspberry_pi_4", memory_budget_mb=-1)


# ---------------------------------------------------------------------------- candidates
def test_candidate_round_trips_and_validates():
    c = Candidate.parse("torch_eager:fp32:channels+2:4")
    assert c.compression == ("channels", "2:4") and c.precision == "fp32"
    assert Candidate.parse(json.loads(json.dumps(c.to_dict()))) == replace(c)
    assert Candidate.parse("onnxruntime").precision == "fp32"
    assert c.pruning == "structured+n:m"
    with pytest.raises(UnknownNameError):
        Candidate.parse("torch_eager:fp32:quantum")
    with pytest.raises(UserError):
        Candidate("torch_eager", "fp33")
    with pytest.raises(UserError):
        Candidate.parse({"backend": "torch_eager", "speed": "max"})


def test_plan_candidate_keeps_layout_only_where_torch_runs_the_module():
    from edgeprof.core.plugins import get_registry
    from edgeprof.optimize.router import Step

    reg = get_registry()
    plan = recommend_plan("builtin:small_cnn", "host", latency_budget_ms=1e-3)
    assert plan.step("layout") is not None and plan.step("layout").value == "NHWC"
    base = [s for s in plan.steps if s.kind not in ("backend",)]
    eager = replace(plan, steps=[Step("backend", "torch_eager", "test"), *base])
    ort = replace(plan, steps=[Step("backend", "onnxruntime", "test"), *base])
    assert "channels_last" in plan_candidate(eager, reg).compression
    assert "channels_last" not in plan_candidate(ort, reg).compression
    assert plan_candidate(ort, reg).source == "plan"


def test_default_candidates_cover_plan_sweep_and_compressions():
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry

    reg = get_registry()
    handle = resolve_model("builtin:small_cnn")
    plan = recommend_plan("builtin:small_cnn", "host", latency_budget_ms=1e-3)
    cands = default_candidates(plan, reg, handle, None)
    sources = {c.source for c in cands}
    assert {"baseline", "plan", "sweep", "compression"} <= sources
    keys = [c.key for c in cands]
    assert len(keys) == len(set(keys))
    # every registered tensor backend x each of its precisions (int8 alias folded) is in the
    # sweep (generative backends take llm: models, not this graph)
    for name, entry in reg.backends_for("tensor").items():
        for p in entry.cls.capabilities.precisions:
            if p == "int8" and {"int8_static", "int8_dynamic"} & set(
                    entry.cls.capabilities.precisions):
                continue
            assert any(c.backend == name and c.precision == p and not c.compression
                       for c in cands), (name, p)
    comp = [c for c in cands if c.source == "compression"]
    assert {m for c in comp for m in c.compression} == {"magnitude", "channels", "2:4",
                                                        "channels_last"}
    only = default_candidates(plan, reg, handle, None, backends=["torch_eager"])
    assert {c.backend for c in only} == {"torch_eager"}


# ----------------------------------------------------------------------------- judging
def _ctx(**constraints):
    from edgeprof.optimize.loop import make_constraints

    return SimpleNamespace(constraints=make_constraints(**constraints), min_ratio=0.99,
                           ref_accuracy=0.95, target=SimpleNamespace(id="t"))


def _res(latency=1.0, accuracy=0.95, memory=1e6):
    r = CandidateResult(Candidate("torch_eager"), "ok", latency_ms=latency,
                        latency_provenance="measured", accuracy=accuracy, memory_bytes=memory)
    r.accuracy_drop_pp = (0.95 - accuracy) * 100
    r.accuracy_ratio = accuracy / 0.95
    return r


@pytest.mark.parametrize("kwargs, res, failing", [
    ({"latency_budget_ms": 2.0}, _res(latency=1.0), set()),
    ({"latency_budget_ms": 0.5}, _res(latency=1.0), {"latency_budget_ms"}),
    ({"max_accuracy_drop": 1.0}, _res(accuracy=0.935), {"max_accuracy_drop",
                                                        "min_accuracy_ratio"}),
    ({"max_accuracy_drop": 5.0}, _res(accuracy=0.935), {"min_accuracy_ratio"}),
    ({"max_accuracy_drop": 1.0}, _res(accuracy=0.945), set()),
    ({"memory_budget_mb": 0.5}, _res(memory=1e6), {"memory_budget_bytes"}),
    ({"stream_rate_fps": 2000.0}, _res(latency=1.0), {"stream_rate_fps"}),
    ({"stream_rate_fps": 500.0}, _res(latency=1.0), set()),
])
def test_accepted_follows_each_constraint(kwargs, res, failing):
    est = SimpleNamespace(batch_size=1, memory_capacity={"fits": True})
    _judge(_ctx(**kwargs), res, est)
    assert set(res.failing) == failing
    assert res.accepted == (not failing)


def test_judge_device_memory_and_choose_prefers_simplest_within_noise():
    est = SimpleNamespace(batch_size=1, memory_capacity={"fits": False, "message": "too big"})
    r = _res()
    _judge(_ctx(), r, est)
    assert "device_memory" in r.failing and not r.accepted
    fast = CandidateResult(Candidate("onnxruntime", "fp32", ("2:4",)), "ok", latency_ms=1.00,
                           accuracy=0.95, accepted=True)
    plain = CandidateResult(Candidate("onnxruntime", "fp32"), "ok", latency_ms=1.03,
                            accuracy=0.95, accepted=True)
    slow = CandidateResult(Candidate("torch_eager", "fp32"), "ok", latency_ms=3.0,
                           accuracy=0.95, accepted=True)
    chosen, tied = choose([slow, fast, plain])
    assert chosen is plain and tied == [fast]
    clear = CandidateResult(Candidate("openvino", "fp32", ("channels",)), "ok", latency_ms=0.5,
                            accuracy=0.95, accepted=True)
    assert choose([slow, fast, plain, clear])[0] is clear
    assert choose([replace(slow, accepted=False)]) == (None, [])


# ----------------------------------------------------------------------------- optimize
@pytest.fixture(scope="module")
def host_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("opt") / "out"
    report = optimize("builtin:small_cnn", "host", latency_budget_ms=1e3, out=out,
                      run_options=TINY,
                      candidates=["torch_eager:fp32", "onnxruntime:fp32",
                                  "onnxruntime:int8_static", "torch_eager:fp32:magnitude",
                                  "onnxruntime:fp32:channels_last", "torch_eager:fp32:channels"])
    return report, out


def test_optimize_writes_artifacts_with_the_right_columns(host_report):
    import pandas as pd

    report, out = host_report
    names = sorted(p.name for p in out.iterdir())
    assert names == ["compression_strategies.csv", "edgeprof-out.json", "latency_vs_accuracy.png",
                     "optimize.json", "precision_tradeoffs.csv", "report.html"]
    trade = pd.read_csv(out / "precision_tradeoffs.csv")
    assert list(trade.columns[:6]) == SEED_COLUMNS
    assert {"provenance", "accuracy_provenance", "memory_provenance"} <= set(trade.columns)
    assert set(trade["precision"]) == {"fp32", "int8_static"}
    assert trade["accuracy_mean"].notna().all() and trade["memory_mb_mean"].notna().all()
    strat = pd.read_csv(out / "compression_strategies.csv")
    assert list(strat.columns) == STRATEGY_COLUMNS
    assert len(strat) == 6
    lat = strat["latency_ms"].dropna().tolist()
    assert lat == sorted(lat) and len(lat) >= 4
    png = (out / "latency_vs_accuracy.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(out / "latency_vs_accuracy.png") as im:
        assert round(im.info["dpi"][0]) == 180
    doc = json.loads((out / "optimize.json").read_text())
    assert doc["kind"] == "optimize" and len(doc["candidates"]) == 6
    assert doc["chosen"]["accepted"] is True and doc["plan"]["target"] == "host"
    assert isinstance(doc["overruled"], list)
    assert not list(out.glob(".edgeprof-*"))  # the staging folder is gone
    # close accepted finalists are timed again, longer and interleaved, before the choice
    for label in doc["verdict"]["retimed"]:
        (cand,) = [c for c in doc["candidates"] if c["label"] == label]
        assert any(n.startswith("re-timed") for n in cand["notes"])


def test_optimize_rows_are_measured_and_judged(host_report):
    from edgeprof.targets import get_target

    report, _ = host_report
    power = get_target("host").typical_power
    host_power_known = power is not None and power.value is not None and power.value > 0
    by = {r.candidate.label: r for r in report.candidates}
    base = by["torch_eager fp32"]
    assert base.ok and base.latency_provenance == "measured"
    assert base.accuracy == pytest.approx(report.reference["accuracy"])
    assert base.agreement["top1_agreement"] == 1.0 and base.accuracy > 0.8
    ort = by["onnxruntime fp32"]
    assert ort.agreement["top1_agreement"] >= 0.99 and ort.agreement["cosine_similarity"] > 0.999
    for r in report.candidates:
        if not r.ok:
            continue
        assert r.latency_ms == r.host_latency_ms  # on the host: measured, not estimated
        assert r.memory_bytes > 0
        if host_power_known:  # energy needs a sourced power figure for this CPU
            assert r.energy_proxy_j > 0
        else:
            assert r.energy_proxy_j is None
        drop_ok = r.accuracy_drop_pp <= report.constraints.max_accuracy_drop + 1e-9
        ratio_ok = r.accuracy / report.reference["accuracy"] >= 0.99
        assert r.accepted == (drop_ok and ratio_ok and r.latency_ms <= 1e3), r.candidate.label
    pruned = by["torch_eager fp32 + channels0.5"]
    assert pruned.params < base.params and pruned.memory_bytes < base.memory_bytes
    mag = by["torch_eager fp32 + magnitude0.5"]
    assert mag.sparsity == pytest.approx(0.5, abs=0.01) and mag.params == base.params
    assert report.chosen is not None and report.chosen.accepted and report.exit_code == 0
    assert report.chosen.latency_ms <= 1.05 * min(r.latency_ms for r in report.candidates
                                                  if r.ok and r.accepted)


def test_a_compression_the_backend_cannot_do_is_a_row_with_a_reason(host_report):
    report, _ = host_report
    row = next(r for r in report.candidates
               if r.candidate.backend == "onnxruntime" and "channels_last" in r.candidate.compression)
    assert row.status == "unsupported" and "memory format" in row.reason
    assert row.latency_ms is None and not row.accepted
    csv_row = report.strategies_frame().query("strategy == 'onnxruntime fp32 + channels_last'")
    assert "unsupported" in csv_row["reason"].iloc[0]


def test_impossible_latency_budget_gives_exit_4_with_the_closest_candidate():
    report = optimize("builtin:small_cnn", "host", latency_budget_ms=1e-6, run_options=TINY,
                      candidates=["torch_eager:fp32", "onnxruntime:fp32"])
    assert report.chosen is None and report.exit_code == 4
    assert all("latency_budget_ms" in r.failing for r in report.candidates)
    msg = report.verdict["message"]
    assert "latency_budget_ms" in msg and report.verdict["closest"] in msg
    with pytest.raises(ConstraintError) as e:
        report.raise_for_constraints()
    assert e.value.exit_code == 4 and "\n" not in str(e.value)


def test_target_not_host_labels_latency_predicted_or_uncalibrated():
    """Another target's latency is predicted (a calibration) or the roofline with its prior
    (uncalibrated): never the host's timing scaled by one ratio, never 'measured'."""
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.targets import get_target

    report = optimize("builtin:small_cnn", "raspberry_pi_4", run_options=TINY,
                      candidates=["torch_eager:fp32"])
    r = report.candidates[0]
    assert r.ok and r.latency_provenance in ("predicted", "uncalibrated")
    from edgeprof.core.models import resolve_model
    from edgeprof.optimize.accuracy import train_builtin

    handle = replace(resolve_model("builtin:small_cnn"), _module=train_builtin("small_cnn").module)
    pi = estimate_model(handle, get_target("raspberry_pi_4"), "fp32").roofline_latency_ms
    assert r.latency_ms >= pi  # never below the target's own lower bound
    assert report.strategies_frame()["latency_provenance"].iloc[0] == r.latency_provenance
    assert r.latency_provenance in report.to_text() or "uncal" in report.to_text()


def test_bad_npz_is_one_clear_user_error(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((5, 3, 8, 8), np.float32), y=np.zeros(5, np.int64))
    with pytest.raises(InputSpecError) as e:
        optimize("builtin:small_cnn", "host", data=bad, candidates=["torch_eager:fp32"])
    assert "x has shape" in str(e.value) and "\n" not in str(e.value)
    labels = tmp_path / "labels.npz"
    np.savez(labels, x=np.zeros((5, 1, 28, 28), np.float32), y=np.array([0, 1, 2, 3, 42]))
    with pytest.raises(InputSpecError, match="out of range"):
        optimize("builtin:small_cnn", "host", data=labels, candidates=["torch_eager:fp32"])


def test_user_data_is_used(tmp_path):
    from edgeprof.optimize.accuracy import load_digits_dataset

    d = load_digits_dataset("small_cnn")
    path = tmp_path / "digits.npz"
    np.savez(path, x=d.x_test[:40], y=d.y_test[:40])
    report = optimize("builtin:small_cnn", "host", data=path, run_options=TINY,
                      candidates=["torch_eager:fp32"])
    assert report.dataset["test"] == 40 and report.candidates[0].accuracy is not None
    # an untrained model on 10 classes: the reference is whatever it gets, and fp32 agrees
    assert report.candidates[0].agreement["top1_agreement"] == 1.0


def test_model_without_data_needs_data():
    import torch

    with pytest.raises(UserError, match="--data"):
        optimize(torch.nn.Linear(4, 2), "host", input_shapes=[(1, 4)],
                 candidates=["torch_eager:fp32"])


def test_recalibrate_reaches_the_target_registry(monkeypatch):
    """optimize's target lookup passes --recalibrate on (it used to drop it)."""
    import edgeprof.targets
    from edgeprof.cli.main import build_parser
    from edgeprof.optimize.loop import _target

    asked = []

    class Registry:
        def get(self, name, recalibrate=False):
            asked.append((name, recalibrate))
            return SimpleNamespace(id=name)

    monkeypatch.setattr(edgeprof.targets, "get_target_registry", lambda *a, **k: Registry())
    assert _target("host", recalibrate=True).id == "host"
    assert asked == [("host", True)]
    assert build_parser().parse_args(["optimize", "builtin:small_cnn", "--recalibrate"]).recalibrate


# ------------------------------------------------------ deciding on the best figure (issue 21)
def test_recommend_plan_judges_on_the_calibrated_prediction():
    """The shipped Pi 4 calibration predicts more than the roofline: a budget between the
    two is missed, and the plan says on which figure."""
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.core.models import resolve_model
    from edgeprof.targets import get_target

    roof = estimate_model(resolve_model("builtin:small_resnet"), get_target("raspberry_pi_4"),
                          "fp32").roofline_latency_ms
    free = recommend_plan("builtin:small_resnet", "raspberry_pi_4")
    b = free.baseline
    assert b.latency_provenance == "predicted" and "raspberry_pi_4--published" in b.latency_basis
    assert b.latency_ms > roof and b.latency_low_ms <= b.latency_ms <= b.latency_high_ms
    budget = (roof + b.latency_ms) / 2  # the roofline meets it, the prediction does not
    tight = recommend_plan("builtin:small_resnet", "raspberry_pi_4", latency_budget_ms=budget,
                           max_accuracy_drop=0.0)
    assert not tight.already_met
    assert tight.failing == ["latency_budget_ms"]
    assert "(predicted)" in tight.failing_reasons["latency_budget_ms"]


def test_optimize_does_not_rank_runtimes_that_cannot_run_on_the_target():
    """An MCU deploys TFLite (Micro); ONNX Runtime is not ranked for it, with the reason."""
    report = optimize("builtin:small_cnn", "mcu", run_options=TINY, latency_budget_ms=1e4,
                      candidates=["tflite:fp32", "onnxruntime:fp32"])
    by = {r.candidate.backend: r for r in report.candidates}
    assert by["onnxruntime"].status == "skipped" and "not ranked for mcu" in by["onnxruntime"].reason
    assert by["tflite"].ok and by["tflite"].latency_provenance in ("predicted", "uncalibrated")
    assert report.chosen is None or report.chosen.candidate.backend == "tflite"


def test_choose_prefers_a_calibrated_prediction_to_a_faster_guess():
    guess = CandidateResult(Candidate("onnxruntime", "int8_static"), "ok", latency_ms=0.94,
                            latency_provenance="uncalibrated", accuracy=0.95, accepted=True)
    calibrated = CandidateResult(Candidate("tflite", "fp32"), "ok", latency_ms=1.34,
                                 latency_provenance="predicted", accuracy=0.95, accepted=True)
    assert choose([guess, calibrated])[0] is calibrated


def test_optimize_run_options_take_the_flag_names_and_max_time_alone():
    from edgeprof.core.errors import ConfigError
    from edgeprof.optimize.evaluate import check_run_options

    opts = check_run_options({"max_time": 0.2})
    assert opts["max_time_s"] == 0.2 and opts["min_time_s"] <= 0.2
    with pytest.raises(ConfigError, match="unknown run option 'max_tme'"):
        check_run_options({"max_tme": 1})

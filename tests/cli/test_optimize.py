"""``edgeprof recommend`` and ``edgeprof optimize`` end to end (in-process, tiny runs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprof.cli.main import main

FAST = ["--runs", "20", "--min-time", "0.05", "--max-time", "0.5"]


@pytest.mark.parametrize("target", ["raspberry_pi_4", "jetson_nano", "mcu"])
def test_recommend_prints_an_ordered_plan_with_reasons(target, capsys):
    code = main(["recommend", "builtin:small_resnet", "--target", target,
                 "--latency-budget-ms", "0.05"])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith(f"Plan for small_resnet on {target}")
    steps = [ln for ln in lines if ln.strip()[:2].rstrip(".").isdigit()]
    assert steps and steps[0].strip().startswith("1. backend:")
    assert all(" - " in s for s in steps)  # every step has its reason
    if code == 4:  # out of reach: the closest plan is shown, then one error line
        assert "FAILS --latency-budget-ms" in out  # flags, not the API's field names
        assert err.count("\n") == 1 and "--latency-budget-ms" in err
    else:
        assert code == 0 and "precision:" in out


def test_recommend_json_is_the_plan_document(capsys):
    # the Pi 4's shipped calibration predicts small_resnet at about 1.9 ms (fp32) and 1.7 ms
    # (int8): a 3 ms budget is met on the prediction, the 0.5 MB budget needs int8
    code = main(["recommend", "builtin:small_resnet", "--target", "raspberry_pi_4",
                 "--latency-budget-ms", "3", "--memory-budget-mb", "0.5",
                 "--max-accuracy-drop", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["feasible"] and not doc["already_met"]
    assert doc["constraints"]["memory_budget_bytes"] == pytest.approx(0.5e6)
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds[0] == "backend" and "precision" in kinds
    assert doc["projected"]["latency_ms"] <= 3 and doc["projected"]["memory_bytes"] <= 0.5e6
    assert doc["projected"]["latency_provenance"] == "predicted"
    # a 1 ms budget: the roofline would meet it, the prediction does not (exit 4)
    code = main(["recommend", "builtin:small_resnet", "--target", "raspberry_pi_4",
                 "--latency-budget-ms", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 4 and doc["failing"] == ["latency_budget_ms"]


def test_recommend_says_when_the_baseline_already_meets_the_constraints(capsys):
    code = main(["recommend", "builtin:small_cnn", "--target", "raspberry_pi_4",
                 "--latency-budget-ms", "1000"])
    out = capsys.readouterr().out
    assert code == 0 and "already meets the constraints" in out
    assert "precision:" not in out and "pruning:" not in out and "projected:" not in out


def test_recommend_impossible_exits_4_naming_the_constraint(capsys):
    code = main(["recommend", "builtin:small_resnet", "--target", "raspberry_pi_4",
                 "--latency-budget-ms", "0.001", "--json"])
    out, err = capsys.readouterr()
    assert code == 4
    assert json.loads(out)["failing"] == ["latency_budget_ms"]  # the closest plan
    assert err.startswith("edgeprof: error: constraint --latency-budget-ms") and \
        err.count("\n") == 1


def test_optimize_impossible_budget_exits_4_with_closest_candidate(tmp_path, capsys):
    out_dir = tmp_path / "out"
    code = main(["optimize", "builtin:small_cnn", "--target", "host", "--backend",
                 "torch_eager", "--compression", "none", "--latency-budget-ms", "0.000001",
                 "--out", str(out_dir), *FAST])
    out, err = capsys.readouterr()
    assert code == 4
    last = [ln for ln in err.splitlines() if ln.startswith("edgeprof: error:")]
    assert len(last) == 1 and "--latency-budget-ms" in last[0] and "closest: torch_eager" in last[0]
    assert "no candidate meets every constraint" in out
    doc = json.loads((out_dir / "optimize.json").read_text())
    assert doc["chosen"] is None and doc["verdict"]["status"] == "constraints_not_met"
    assert doc["verdict"]["closest"].startswith("torch_eager")


def test_optimize_json_chooses_and_reports_overrules(capsys):
    code = main(["optimize", "builtin:small_cnn", "--target", "host", "--backend",
                 "torch_eager,onnxruntime", "--compression", "channels_last",
                 "--max-accuracy-drop", "1", "--json", *FAST])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["chosen"]["accepted"]
    labels = [c["label"] for c in doc["candidates"]]
    assert "torch_eager fp32 + channels_last" in labels
    assert doc["plan_candidate"] is not None
    fastest = min(c["latency_ms"] for c in doc["candidates"] if c["accepted"])
    assert doc["chosen"]["latency_ms"] <= 1.05 * fastest
    same = (doc["chosen"]["request"]["backend"] == doc["plan_candidate"]["request"]["backend"]
            and doc["chosen"]["request"]["precision"]
            == doc["plan_candidate"]["request"]["precision"]
            and doc["chosen"]["request"]["compression"]
            == doc["plan_candidate"]["request"]["compression"])
    assert same == (not doc["overruled"])  # a different choice is always explained
    for o in doc["overruled"]:
        assert o["message"] and o["kind"]


def test_optimize_bad_npz_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((4, 28, 28), np.float32), y=np.zeros(4, np.int64))
    code = main(["optimize", "builtin:small_cnn", "--data", str(bad), "--backend",
                 "torch_eager", "--compression", "none", *FAST])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "bad.npz" in err and "x has shape" in err
    missing = tmp_path / "nolabels.npz"
    np.savez(missing, x=np.zeros((4, 1, 28, 28), np.float32))
    assert main(["optimize", "builtin:small_cnn", "--data", str(missing), *FAST]) == 2
    assert "no array 'y'" in capsys.readouterr().err


def test_optimize_unknown_compression_is_a_user_error(capsys):
    code = main(["optimize", "builtin:small_cnn", "--compression", "quantum", *FAST])
    assert code == 2 and "unknown compression method 'quantum'" in capsys.readouterr().err

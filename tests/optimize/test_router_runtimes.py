"""The router's candidates are the runtimes the target's processors run (issue 29, finding
10): data/runtimes.toml, the data predict reads, prediction-only families included and
labelled so."""

from __future__ import annotations

import pytest

from edgeprof.targets import get_target


@pytest.fixture(autouse=True)
def _only_shipped(tmp_path, monkeypatch):
    d = tmp_path / "user-calibrations"
    d.mkdir()
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(d))


def test_the_router_runtimes_are_the_targets_processors_runtimes(registry):
    from edgeprof.optimize.candidates import runtime_classes
    from edgeprof.optimize.router import runs_on_target

    classes = runtime_classes(registry)
    assert {"xcubeai", "tinyengine", "tflm_reference"} <= set(classes)
    assert classes["xcubeai"].prediction_only and not getattr(classes["tflite"],
                                                              "prediction_only", False)
    assert "int8" in classes["xcubeai"].capabilities.precisions
    mcu, pi, nano = get_target("mcu"), get_target("raspberry_pi_4"), get_target("jetson_nano")
    assert runs_on_target(classes["xcubeai"], "xcubeai", mcu) is None
    assert runs_on_target(classes["tflite"], "tflite", mcu) is None
    assert "runs on an MCU" in runs_on_target(classes["xcubeai"], "xcubeai", pi)
    assert "runs on a GPU" in runs_on_target(classes["tensorrt"], "tensorrt", pi)
    assert runs_on_target(classes["openvino"], "openvino", nano) is None  # its CPU
    assert runs_on_target(classes["onnxruntime"], "onnxruntime", mcu) is not None


def test_recommend_on_the_mcu_uses_the_mcus_runtimes(capsys):
    """recommend builtin:small_cnn --target mcu --latency-budget-ms 5 exited 4 ("cannot be
    met ... even with the most aggressive plan") though predict puts xcubeai int8 at 3.46 ms
    and tinyengine at 3.06 ms."""
    from edgeprof.api import predict
    from edgeprof.cli.main import main

    rc = main(["recommend", "builtin:small_cnn", "--target", "mcu",
               "--latency-budget-ms", "5"])
    out = capsys.readouterr().out
    assert rc == 0, out
    backend = next(line for line in out.splitlines() if "backend:" in line)
    chosen = backend.split("backend:")[1].split()[0]
    assert chosen in ("xcubeai", "tinyengine", "tflm_reference")
    assert "prediction-only" in backend
    assert predict("builtin:small_cnn", "mcu", chosen, "int8").value_ms < 5


def test_a_prediction_only_plan_is_not_measured(registry):
    """optimize measures its candidates here: a prediction-only runtime of the plan is not
    one of them."""
    from types import SimpleNamespace

    from edgeprof.optimize.candidates import default_candidates

    step = SimpleNamespace(value="xcubeai")
    plan = SimpleNamespace(step=lambda kind: step if kind == "backend" else None)
    handle = SimpleNamespace(format="torch")
    cands = default_candidates(plan, registry, handle, get_target("mcu"), compressions=())
    assert all(c.backend != "xcubeai" for c in cands)

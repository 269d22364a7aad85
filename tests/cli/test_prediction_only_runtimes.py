"""Every runtime the published board rows name can be named (issue 30, deliverable 2):
``edgeprof backends`` lists the prediction-only families apart, with their processors;
``profile --backend`` of one gives its prediction for the target and marks the run
unavailable with the reason (as TensorRT on a machine without it); an unknown name is exit 2
with the list of every name a command takes."""

from __future__ import annotations

import io
import json

import pytest

from edgeprof.cli.main import main

FAST = ["--runs", "5", "--min-time", "0.01", "--max-time", "0.5"]


@pytest.fixture(autouse=True)
def _no_user_calibrations(tmp_path, monkeypatch):
    """Only the shipped calibrations."""
    d = tmp_path / "user-calibrations"
    d.mkdir()
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(d))


def _cli(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err.strip()


def test_backends_json_lists_the_prediction_only_families_with_their_processors(capsys):
    rc, out, _ = _cli(capsys, "backends", "--json")
    assert rc == 0
    rows = {r["name"]: r for r in json.loads(out)}
    for name in ("plumerai", "bosch_hale", "onnc", "cmsis_nn", "paddle", "armnn", "xcubeai"):
        r = rows[name]
        assert r["prediction_only"] is True and r["available"] is False, name
        assert r["processors"] and r["processors_source"] and r["precisions"], name
        assert "predict only" in r["reason"] and "can't run here" in r["reason"], name
    assert rows["plumerai"]["processors"] == ["mcu"]
    # the edgeprof backends stay as they were, marked as runnable
    assert rows["torch_eager"]["prediction_only"] is False
    assert rows["tensorrt"]["prediction_only"] is False


def test_backends_table_lists_the_prediction_only_families_apart():
    from rich.console import Console

    from edgeprof.api import list_backends
    from edgeprof.cli.render_listings import render_backends

    buf = io.StringIO()
    render_backends(list_backends(), Console(file=buf, width=160, highlight=False))
    text = buf.getvalue()
    head, _, tail = text.partition("predict only: can't run here")
    assert tail, text[-2000:]
    assert "torch_eager" in head and "plumerai" not in head
    for name in ("plumerai", "bosch_hale", "onnc", "paddle", "armnn", "xcubeai", "mcu"):
        assert name in tail, name
    assert "torch_eager" not in tail


def test_profile_of_a_prediction_only_family_predicts_and_marks_the_run(capsys):
    rc, out, err = _cli(capsys, "profile", "builtin:small_cnn", "--target", "mcu",
                        "--backend", "plumerai", "--precision", "int8", "--json", *FAST)
    assert rc == 3, err  # a backend named explicitly that can't run: partial, as tensorrt
    (run,) = json.loads(out)["runs"]
    assert run["backend"] == "plumerai" and run["status"] == "unavailable"
    assert "predict only" in run["reason"] and "can't run here" in run["reason"]
    fig = run["summary"]["figures"]["latency_ms"]
    assert fig["value"] > 0 and fig["provenance"] in ("predicted", "estimated", "uncalibrated")
    from edgeprof.api import predict

    assert fig["value"] == pytest.approx(
        predict("builtin:small_cnn", "mcu", "plumerai", "int8").value_ms)
    assert "plumerai int8: unavailable: predict only" in err


def test_profile_of_a_prediction_only_family_beside_a_backend(capsys):
    rc, out, err = _cli(capsys, "profile", "builtin:small_cnn", "--target", "raspberry_pi_4",
                        "--backend", "onnxruntime,paddle", "--json", *FAST)
    assert rc == 3, err
    runs = {r["backend"]: r for r in json.loads(out)["runs"]}
    assert runs["onnxruntime"]["status"] == "ok"
    assert runs["paddle"]["status"] == "unavailable"
    assert runs["paddle"]["summary"]["figures"]["latency_ms"]["value"] > 0


@pytest.mark.parametrize("command", [
    ["predict", "builtin:small_cnn", "--target", "mcu"],
    ["estimate", "builtin:small_cnn", "--target", "mcu"],
    ["profile", "builtin:small_cnn", "--target", "mcu", *FAST]])
def test_an_unknown_runtime_is_exit_2_with_every_name(capsys, command):
    rc, out, err = _cli(capsys, *command, "--backend", "plumeria")
    assert rc == 2 and out == "" and "\n" not in err and "Traceback" not in err
    assert "unknown backend or runtime family 'plumeria' (did you mean 'plumerai'?)" in err
    for name in ("torch_eager", "onnxruntime", "plumerai", "paddle", "xcubeai", "onnc"):
        assert name in err, name

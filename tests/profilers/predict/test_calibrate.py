"""``edgeprof calibrate --target host``: a tiny kernel set, measured, fitted, saved, used."""

from __future__ import annotations

import json

import pytest

from edgeprof.cli.main import main


def test_calibrate_host_saves_a_calibration_the_predictor_uses(tmp_path, monkeypatch, capsys,
                                                               registry):
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict import load_calibration, predict_latency
    from edgeprof.targets import get_target

    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path))
    rc = main(["calibrate", "--target", "host", "--backend", "torch_eager", "--kernels", "tiny",
               "--runs", "10", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    path = tmp_path / "host--torch_eager-fp32.json"
    assert out["path"] == str(path) and out["cv"]["method"] == "leave-one-out"
    cal = load_calibration(path)
    assert cal.cv["n"] == len(cal.samples) == 6 and cal.runtimes["torch_eager/fp32"]["version"]
    host = get_target("host")
    est = estimate_model(resolve_model("builtin:small_cnn", registry=registry), host, "fp32")
    p = predict_latency(est, host, "torch_eager", "fp32")
    assert p.provenance == "predicted" and p.calibration == "host--torch_eager-fp32"
    assert p.value_ms >= est.roofline_latency_ms and not p.warnings


def test_calibrating_a_board_from_here_is_a_user_error(capsys):
    rc = main(["calibrate", "--target", "jetson_nano", "--backend", "tensorrt"])
    err = capsys.readouterr().err
    assert rc == 2 and "only --target host" in err and len(err.strip().splitlines()) == 1


def test_calibrate_host_with_a_fleet_is_a_user_error(capsys):
    rc = main(["calibrate", "--target", "host", "--backend", "onnxruntime", "--fleet",
               "127.0.0.1:9"])
    err = capsys.readouterr().err
    assert rc == 2 and "'host' is this machine" in err and len(err.strip().splitlines()) == 1


def test_calibrate_on_a_fleet_board_measures_there_and_keeps_its_fingerprint(
        tmp_path, monkeypatch, capsys, registry):
    """An emulating raspberry_pi_4 worker measures the tiny kernel set (built here, shipped
    as artifacts); the calibration carries the board's fingerprint and says it emulated."""
    import distributed  # noqa: F401  (installed by make test)
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict import load_calibration, predict_latency
    from edgeprof.targets import get_target
    from tests.fleet_support import env, start_scheduler, start_worker, stop_all, wait_boards

    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "cals"))
    base = env()
    procs = []
    sched, address = start_scheduler(tmp_path, base)
    procs.append(sched)
    try:
        procs.append(start_worker(tmp_path, address, "raspberry_pi_4", "pi-cal", base))
        wait_boards(address, {"pi-cal"})
        # what 'edgeprof calibrate --fleet' calls (test_kinds checks the command is this
        # one call); the board's steps reach the caller as they happen
        import edgeprof

        seen: list[str] = []
        result = edgeprof.calibrate("onnxruntime", "raspberry_pi_4", kernels="tiny", runs=5,
                                    fleet=address, progress=seen.append)
        board = [m for m in seen if m.startswith("board pi-cal: measuring onnxruntime fp32")]
        assert len(board) >= 6, seen  # each kernel at least once (repeats keep the quietest)
    finally:
        stop_all(procs)
    path = tmp_path / "cals" / "raspberry_pi_4--onnxruntime-fp32.json"
    assert result.path == path and (result.kind, result.source) == ("tensor", "measured")
    cal = load_calibration(path)
    fp = cal.fingerprint
    assert cal.target == "raspberry_pi_4" and len(cal.samples) == 6
    assert fp["board"] == "pi-cal" and fp["emulating"] is True and fp["arch"]
    assert fp["descriptor_sha256"] == get_target("raspberry_pi_4").sha256
    assert all("raspberry_pi_4 board of the fleet" in s["source"] for s in cal.samples)
    assert "EMULATING raspberry_pi_4" in cal.note and cal.runtimes["onnxruntime/fp32"]["version"]
    # the user's calibration wins over the shipped one, and says what it is
    pi = get_target("raspberry_pi_4")
    est = estimate_model(resolve_model("builtin:small_cnn", registry=registry), pi, "fp32")
    p = predict_latency(est, pi, "onnxruntime", "fp32")
    assert p.provenance == "predicted" and p.calibration == "raspberry_pi_4--onnxruntime-fp32"
    assert p.value_ms >= est.roofline_latency_ms
    assert [w.code for w in p.warnings] == ["calibration_emulated"]

"""The device fleet (edgeprof.profilers.measure.fleet): a Dask scheduler and edgeprof workers
as subprocesses on 127.0.0.1 (random ports), profiles routed to the right board, the light
extra, TLS beyond loopback, fingerprints that contradict their descriptor."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys

import pytest

from edgeprof.cli.main import main
from edgeprof.profilers.measure.fleet import (FleetSpec, board_contradiction, descriptor_family,
                                              machine_family, measure_shipment)
from edgeprof.targets import get_target
from tests.fleet_support import (edgeprof, env, make_onnx, start_scheduler, start_worker,
                                 stop_all, wait_boards)

# a target this machine really is (no --emulate), and one it contradicts
REAL, FAKE = (("desktop_ddr4", "raspberry_pi_4") if machine_family(platform.machine()) == "x86"
              else ("raspberry_pi_4", "desktop_ddr4"))


# ------------------------------------------------------------------ without a cluster
def test_device_extra_holds_the_runtimes_and_neither_torch_nor_tensorflow():
    from importlib import metadata

    from packaging.requirements import Requirement

    reqs = [Requirement(r) for r in metadata.requires("edgeprof") or []]
    device = {r.name.lower() for r in reqs if r.marker and r.marker.evaluate({"extra": "device"})}
    assert {"distributed", "onnxruntime", "openvino", "ai-edge-litert"} <= device
    assert not device & {"torch", "tensorflow", "tensorflow-cpu", "litert-torch"}
    every = {r.name.lower() for r in reqs if r.marker and r.marker.evaluate({"extra": "all"})}
    assert "distributed" in every  # make test installs the fleet


@pytest.mark.parametrize("argv", [
    ["fleet", "10.20.30.40:8786"],
    ["worker", "192.0.2.7:8786", "--target", "raspberry_pi_4", "--emulate"],
    ["profile", "builtin:small_cnn", "--target", "raspberry_pi_4", "--fleet", "example.org:8786"],
    ["sweep", "SWEEP.toml", "--fleet", "tcp://10.0.0.1:8786"],
])
def test_a_scheduler_beyond_loopback_without_tls_is_refused(argv, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "beyond loopback" in err and "--tls-ca" in err and "--insecure" in err
    assert "Traceback" not in err


def test_fleet_spec_rules(tmp_path):
    for ok in ("127.0.0.1:8786", "tcp://127.0.0.5:1", "localhost:8786", "[::1]:8786"):
        assert FleetSpec(ok).loopback, ok
        FleetSpec(ok).check()
    FleetSpec("10.0.0.1:8786", insecure=True).check()  # explicit opt-out
    with pytest.raises(Exception, match="speaks TLS"):
        FleetSpec("tls://127.0.0.1:8786").check()
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(Exception, match="--tls-cert, --tls-key"):
        FleetSpec("10.0.0.1:8786", tls_ca=str(ca)).check()
    spec = FleetSpec("10.0.0.1:8786", tls_ca=str(ca), tls_cert=str(ca), tls_key=str(ca))
    spec.check()
    assert spec.url == "tls://10.0.0.1:8786"


def test_a_fingerprint_that_contradicts_its_descriptor():
    pi, desk = get_target("raspberry_pi_4"), get_target("desktop_ddr4")
    assert descriptor_family(pi) == "arm" and descriptor_family(desk) == "x86"
    assert "x86_64" in board_contradiction(pi, {"arch": "x86_64", "cpu_model": "Xeon"})
    assert board_contradiction(pi, {"arch": "aarch64", "cpu_model": "Cortex-A72"}) is None
    assert board_contradiction(desk, {"arch": "aarch64", "cpu_model": "A72"}) is not None
    assert descriptor_family(get_target("nvidia_gpu")) is None  # a GPU names no CPU


def test_a_worker_refuses_to_claim_a_target_this_machine_is_not(capsys):
    assert main(["worker", "127.0.0.1:9", "--target", FAKE]) == 2
    err = capsys.readouterr().err
    assert f"refusing to serve as a {FAKE} board" in err and "--emulate" in err


def test_shipped_bytes_are_checked_against_their_digest(tmp_path):
    model = make_onnx(tmp_path / "m.onnx")
    payload = {"request": {"backend": "onnxruntime", "config": {"precision": "fp32"},
                           "input_shapes": [[1, 32]], "input_dtypes": ["float32"]},
               "kind": "file", "name": "m.onnx", "data": model.read_bytes() + b"x",
               "sha256": "0" * 64}
    record = measure_shipment(payload, tmp_path)
    assert record.status == "failed" and "corrupted in transit" in record.reason
    assert record.stats is None


# ---------------------------------------------------------------------- the cluster
@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A scheduler; pi-1 (raspberry_pi_4) and nano-1 (jetson_nano, without OpenVINO)
    emulating; real-1, a board of the target this machine really is."""
    tmp = tmp_path_factory.mktemp("fleet")
    shim = tmp / "shim"
    shim.mkdir()
    # nano-1 lacks OpenVINO: the import system finds no 'openvino' in that worker
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['openvino'] = None\n")
    base = env()
    procs = []
    sched, address = start_scheduler(tmp, base)
    procs.append(sched)
    try:
        procs.append(start_worker(tmp, address, "raspberry_pi_4", "pi-1", base))
        procs.append(start_worker(tmp, address, "jetson_nano", "nano-1", env(
            PYTHONPATH=f"{shim}:{base['PYTHONPATH']}")))
        procs.append(subprocess.Popen(
            edgeprof("worker", address, "--target", REAL, "--name", "real-1"),
            stdout=open(tmp / "worker-real-1.log", "w"), stderr=subprocess.STDOUT, env=base))
        wait_boards(address, {"pi-1", "nano-1", "real-1"})
        yield {"address": address, "model": make_onnx(tmp / "mlp.onnx"), "tmp": tmp}
    finally:
        stop_all(procs)


def _profile(fleet, target, backend="onnxruntime", *extra):
    from edgeprof.api import profile

    return profile(str(fleet["model"]), target=target, backends=backend,
                   run_options={"min_time_s": 0.05, "runs": 20}, fleet=fleet["address"])


def test_fleet_lists_the_boards_with_their_fingerprints(fleet, capsys):
    assert main(["fleet", fleet["address"], "--json"]) == 0
    boards = {b["name"]: b for b in json.loads(capsys.readouterr().out)}
    assert {"pi-1", "nano-1", "real-1"} <= set(boards)
    pi = boards["pi-1"]
    assert pi["targets"] == ["raspberry_pi_4"] and pi["emulating"] is True
    assert pi["state"] in ("idle", "busy")
    fp = pi["fingerprint"]
    for key in ("cpu_model", "arch", "physical_cores", "ram_bytes", "os", "runtimes",
                "edgeprof_version"):
        assert fp[key], key
    assert fp["arch"] == platform.machine() and "onnxruntime" in fp["runtimes"]
    assert "openvino" in pi["backends"] and "openvino" not in boards["nano-1"]["backends"]
    assert boards["real-1"]["emulating"] is False
    assert main(["fleet", fleet["address"]]) == 0
    out = capsys.readouterr().out
    assert "pi-1" in out and "raspberry_pi_4 (emulated)" in out


def test_a_profile_is_routed_to_the_board_of_its_target(fleet):
    env_ = env()
    proc = subprocess.run(edgeprof("profile", str(fleet["model"]), "--target", "jetson_nano",
                                   "--backend", "onnxruntime", "--min-time", "0.05", "--runs",
                                   "20", "--fleet", fleet["address"], "--json"),
                          capture_output=True, text=True, env=env_, timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["runs"][0]
    assert run["status"] == "ok"
    board = run["benchmark"]["extra"]["fleet"]
    assert board["board"] == "nano-1" and board["target"] == "jetson_nano"
    assert board["emulating"] is True and board["fingerprint"]["arch"] == platform.machine()
    assert any("measured on HOST, emulating jetson_nano" in n for n in run["benchmark"]["notes"])
    # an emulating board measured this host, not a Jetson: the target's latency is not
    # a measurement (predicted or estimated from this one)
    assert run["provenance"]["target_figures"] != "measured"
    assert run["provenance"]["measured_on"].startswith("measured on HOST, emulating jetson_nano")
    assert run["summary"]["figures"]["latency_ms"]["provenance"] != "measured"
    # a board must measure in a fresh process of its own: the record says so, and says
    # whether the Dask nanny's thread variables (OMP_NUM_THREADS=1 ...) reached it
    cond = run["benchmark"]["environment"]["conditions"]
    assert cond["process"] == "isolated"
    assert cond["build"]["when"] == "before this run: a built artifact was given"
    assert "OMP_NUM_THREADS" not in cond["thread_env"] or \
        cond["thread_env"]["OMP_NUM_THREADS"] == os.environ.get("OMP_NUM_THREADS")

    report = _profile(fleet, "raspberry_pi_4")
    assert report.runs[0].benchmark.extra["fleet"]["board"] == "pi-1"


def test_a_real_board_measures_the_target_latency(fleet, capsys):
    rc = main(["profile", str(fleet["model"]), "--target", REAL, "--backend", "onnxruntime",
               "--min-time", "0.05", "--runs", "20", "--fleet", fleet["address"]])
    out = capsys.readouterr().out
    assert rc == 0
    assert re.search(rf"measured on board real-1 \({REAL}", out)
    assert f"latency on {REAL} is measured" in out
    report = _profile(fleet, REAL)
    run = report.runs[0]
    assert run.benchmark.extra["fleet"]["board"] == "real-1"
    assert run.summary.on_host and run.summary.figures["latency_ms"].provenance == "measured"
    assert run.summary.value("latency_ms") == run.benchmark.stats.median_ms
    assert run.host_summary is None  # the host did not measure it
    d = report.to_dict()["runs"][0]["provenance"]
    assert d["target_figures"] == "measured" and d["board"]["board"] == "real-1"
    assert d["board"]["fingerprint"]["cpu_model"]


def test_a_board_without_the_runtime_gets_no_job(fleet):
    report = _profile(fleet, "jetson_nano", "openvino")
    run = report.runs[0]
    assert run.status == "unavailable"
    assert "no board of jetson_nano can run backend 'openvino'" in run.benchmark.reason
    assert "nano-1" in run.benchmark.reason and "openvino" in run.benchmark.reason
    assert report.runs[0].benchmark.extra.get("fleet") is None
    # the same backend on a board that has it
    assert _profile(fleet, "raspberry_pi_4", "openvino").runs[0].status == "ok"


def test_measuring_a_shipment_never_imports_torch_or_tensorflow(tmp_path):
    """What a board runs for a job, inline in a fresh interpreter."""
    import base64

    from edgeprof.core.models import resolve_model
    from edgeprof.core.requests import MeasureRequest
    from edgeprof.core.backend import RunConfig
    from edgeprof.profilers.measure.fleet import build_shipment, job_payload

    handle = resolve_model(str(make_onnx(tmp_path / "m.onnx")))
    request = MeasureRequest.for_handle("onnxruntime", handle, RunConfig(
        precision="int8_dynamic", runs=20, min_time_s=0.05))
    payload = job_payload(request, build_shipment("onnxruntime", handle, "int8_dynamic"),
                          "raspberry_pi_4")
    payload["data"] = base64.b64encode(payload["data"]).decode()
    (tmp_path / "job.json").write_text(json.dumps(payload))
    code = (
        "import base64, json, sys, pathlib\n"
        "from edgeprof.profilers.measure.fleet import measure_shipment\n"
        f"p = json.loads(pathlib.Path({str(tmp_path / 'job.json')!r}).read_text())\n"
        "p['data'] = base64.b64decode(p['data'])\n"
        f"r = measure_shipment(p, pathlib.Path({str(tmp_path)!r}), isolate=False)\n"
        "print(json.dumps([r.status, r.reason, sorted(m for m in ('torch', 'tensorflow') "
        "if m in sys.modules)]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    status, reason, heavy = json.loads(proc.stdout.strip().splitlines()[-1])
    assert status == "ok", reason
    assert heavy == []


def test_a_board_running_an_artifact_never_imports_torch_or_tensorflow(fleet):
    from distributed import Client

    from edgeprof.profilers.measure.fleet import list_boards

    _profile(fleet, "jetson_nano")
    with Client(fleet["address"], timeout=30, set_as_default=False) as c:
        nano = [b["address"] for b in list_boards(c) if b["name"] == "nano-1"]
        loaded = c.run(lambda: sorted(m for m in ("torch", "tensorflow") if m in sys.modules),
                       workers=nano)
    assert list(loaded.values()) == [[]]


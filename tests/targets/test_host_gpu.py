"""host_gpu: this machine's CUDA GPU as a target, what --device cuda runs are read against.

Everywhere: the record -> target conversion on a calibration recorded on a real H100
(``data/h100_gpu_calibration.json``, written by ``calibrate_gpu`` on the device machine),
the driver's bandwidth formula, and the one-line refusals without a GPU. Where torch sees a
CUDA device (never in CI, which has no GPU): the real calibration and a profile on it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from edgeprof.core.errors import TargetError, UnknownNameError, UserError
from edgeprof.targets import TargetRegistry
from edgeprof.targets.host_gpu import (GpuCalibrationParams, describe_gpu, host_gpu_target,
                                       target_from_gpu_calibration, theoretical_bandwidth)

RECORD = Path(__file__).parent / "data" / "h100_gpu_calibration.json"


def _cuda() -> bool:
    try:
        import torch
    except Exception:  # noqa: BLE001
        return False
    return bool(torch.cuda.is_available())


needs_cuda = pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU (CI has none)")
no_cuda = pytest.mark.skipif(_cuda(), reason="this machine has a CUDA GPU")


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORD.read_text())


def test_h100_record_becomes_a_gpu_target_with_measured_figures(record):
    t = target_from_gpu_calibration(record)
    assert t.id == "host_gpu" and t.kind == "gpu" and t.is_host
    det = record["gpu"]
    assert det["name"].startswith("NVIDIA H100")
    # 132 SMs x 128 FP32 lanes (sm_90): the 16,896 CUDA cores of the H100 SXM datasheet
    assert t.cores.value == 132 * 128 and "sm_90" in t.cores.source
    # the bandwidth is the measured copy rate, below the driver's theoretical peak
    theory = theoretical_bandwidth(det["memory_clock_khz"], det["memory_bus_width_bits"])
    assert t.bandwidth.value == record["copy"]["bytes_per_s"] < theory
    assert "measured" in t.bandwidth.source and f"{theory / 1e9:.0f} GB/s" in t.bandwidth.source
    # each precision's peak is its GEMM's median, and the hardware's order holds on an H100
    for p, g in record["gemm"].items():
        assert t.peak_macs(p) == g["macs_per_s"]
        assert "median of" in t.peak_compute[p].source
    assert t.peak_macs("fp16") > 4 * t.peak_macs("fp32")
    assert t.strategy.precision in t.supported_precisions
    assert math.isnan(t.typical_power.value) and "not known" in t.typical_power.source
    assert "H100" in describe_gpu(record)


def test_theoretical_bandwidth_is_the_datasheet_figure():
    # H100 SXM5 HBM3: 2619 MHz x 2 (DDR) x 5120-bit bus = 3.35 TB/s (NVIDIA H100 datasheet)
    assert theoretical_bandwidth(2619000, 5120) == pytest.approx(3.35e12, rel=0.002)
    assert theoretical_bandwidth(None, 5120) is None


def test_a_record_without_fp32_is_refused(record):
    bad = {**record, "gemm": {k: v for k, v in record["gemm"].items() if k != "fp32"},
           "unavailable": {"fp32": "cuBLAS failed"}}
    with pytest.raises(TargetError, match="fp32 GEMM could not be calibrated.*cuBLAS failed"):
        target_from_gpu_calibration(bad)


def test_host_gpu_has_no_modes_and_is_listed():
    reg = TargetRegistry()
    assert "host_gpu" in reg.ids()
    with pytest.raises(UnknownNameError, match="'host_gpu' is this machine"):
        reg.get("host_gpu:turbo")


@no_cuda
def test_without_a_gpu_host_gpu_is_a_one_line_refusal():
    with pytest.raises(TargetError, match="torch sees none"):
        TargetRegistry().get("host_gpu")


@no_cuda
def test_profile_on_cuda_without_a_gpu_warns_and_reads_against_the_cpu(tmp_path):
    import edgeprof

    rep = edgeprof.profile("builtin:small_cnn", run_options={"device": "cuda"})
    assert rep.target.id == "host"
    assert any(w.code == "host_gpu_uncalibrated" for w in rep.warnings)
    assert rep.runs[0].status == "unsupported"
    with pytest.raises(UserError, match="add --device cuda"):
        edgeprof.profile("builtin:small_cnn", target="host_gpu")
    with pytest.raises(TargetError, match="torch sees none"):  # asked for by name: no fallback
        edgeprof.profile("builtin:small_cnn", target="host_gpu", run_options={"device": "cuda"})


def test_cli_host_gpu_on_the_cpu_is_exit_2(capsys):
    from edgeprof.cli.main import main

    rc = main(["profile", "builtin:small_cnn", "--target", "host_gpu", "--runs", "3"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert ("add --device cuda" in err) or ("torch sees none" in err)


# ---------------------------------------------------------------------- on a real GPU
@needs_cuda
def test_calibrate_this_gpu(tmp_path, monkeypatch):
    small = GpuCalibrationParams(copy_bytes=64 << 20, gemm_n=1024, runs=3, warmup=1)
    t = host_gpu_target("cuda", recalibrate=True, params=small)
    assert t.bandwidth.value > 1e10 and t.peak_macs("fp32") > 1e11
    assert "fp16" in t.supported_precisions


@needs_cuda
def test_profile_on_cuda_is_read_against_the_gpu():
    import edgeprof

    rep = edgeprof.profile("builtin:small_resnet", backends="torch_eager",
                           precisions="fp32,bf16",
                           run_options={"device": "cuda", "runs": 20, "max_time": 2})
    assert rep.target.id == "host_gpu" and rep.host_target.id == "host_gpu"
    for run in rep.runs:
        assert run.benchmark.ok, run.benchmark.reason
        assert run.benchmark.device == "cuda"
        figs = run.summary.figures
        assert figs["latency_ms"].provenance == "measured"
        # read against the GPU's measured copy rate, a GPU run's utilization is a fraction
        assert 0 < figs["bandwidth_utilization"].value < 1.5
        assert run.benchmark.memory_detail.get("cuda_allocator_peak_bytes", 0) > 0


@no_cuda
def test_batch_on_cuda_without_a_gpu_says_so_and_fits_the_cpu_host():
    import edgeprof

    rep = edgeprof.batch_sizes("builtin:small_cnn", [1, 2], run_options={"device": "cuda"})
    assert rep.target.id == "host"
    assert any("torch sees none" in n for n in rep.notes)


@needs_cuda
def test_batch_on_cuda_fits_the_gpu_memory():
    import edgeprof

    rep = edgeprof.batch_sizes("builtin:small_cnn", [1, 2],
                               run_options={"device": "cuda", "max_time": 1})
    assert rep.target.id == "host_gpu"
    assert (rep.frame["gpu_peak_memory_bytes"] > 0).all()  # torch's CUDA allocator peak


@no_cuda
def test_cli_batch_takes_device_cuda(capsys):
    import json as _json

    from edgeprof.cli.main import main

    rc = main(["batch", "builtin:small_cnn", "--batch-sizes", "1,2", "--device", "cuda",
               "--json"])
    doc = _json.loads(capsys.readouterr().out)
    assert rc != 0 and doc["target"] == "host"
    assert all(r["status"] == "unsupported" and "torch sees no CUDA device" in r["reason"]
               for r in doc["rows"])


def test_the_calibration_is_measured_once_then_read_from_the_cache(record, monkeypatch):
    from edgeprof.targets import host_gpu

    calls = []
    detected = dict(record["gpu"])
    monkeypatch.setattr(host_gpu, "detect_gpu", lambda device="cuda": dict(detected))

    def measure(device, params, det):
        calls.append(device)
        return {k: v for k, v in record.items() if k not in ("key", "cache")}

    monkeypatch.setattr(host_gpu, "calibrate_gpu", measure)
    first = host_gpu.gpu_calibration("cuda")
    assert calls == ["cuda"] and first["cache"]["hit"] is False
    detected["index"] = 1  # the same GPU model asked for as cuda:1 reads the same record
    second = host_gpu.gpu_calibration("cuda:1")
    assert calls == ["cuda"] and second["cache"]["hit"] is True
    assert second["gpu"]["index"] == 1 and second["copy"] == record["copy"]
    host_gpu.gpu_calibration("cuda", recalibrate=True)
    assert calls == ["cuda", "cuda"]


def test_profile_on_cuda_reads_against_host_gpu_wherever_it_comes_from(record, monkeypatch):
    """The wiring, without a GPU: with host_gpu standing in (the H100's record), --device
    cuda makes 'host' the GPU, and a board target's host figures the GPU's too."""
    import edgeprof
    from edgeprof.targets import host_gpu

    h100 = target_from_gpu_calibration(record)
    asked = []
    monkeypatch.setattr(host_gpu, "host_gpu_target",
                        lambda device="cuda", recalibrate=False, params=None:
                        asked.append(device) or h100)
    rep = edgeprof.profile("builtin:small_cnn", run_options={"device": "cuda:0", "runs": 3})
    assert rep.target is h100 and rep.host_target is h100 and asked == ["cuda:0"]
    assert rep.to_dict()["target"]["id"] == "host_gpu"
    board = edgeprof.profile("builtin:small_cnn", target="jetson_nano",
                             run_options={"device": "cuda", "runs": 3})
    assert board.target.id == "jetson_nano" and board.host_target is h100
    cpu = edgeprof.profile("builtin:small_cnn", run_options={"runs": 3, "max_time": 0.2})
    assert cpu.target.id == "host" and asked == ["cuda:0", "cuda"]  # no GPU asked on the CPU


def test_a_device_that_is_not_cuda_n_is_a_one_line_error():
    from edgeprof.targets.host_gpu import device_index

    assert device_index("cuda:3") == 3
    for bad in ("cuda:x", "gpu", "cuda:-1"):
        with pytest.raises(TargetError, match="cuda or cuda:N"):
            device_index(bad)


def test_the_cpu_and_gpu_host_targets_are_built_by_one_function(record, monkeypatch):
    """The host target dict was written twice, for the CPU (host_figures) and the GPU
    (host_gpu), with the same keys, quantity helper, fp32 check and record hash (issue 31):
    one builder, host_figures.host_target, makes both."""
    from edgeprof.targets import host as H
    from edgeprof.targets import host_figures

    built = []
    real = host_figures.host_target

    def spy(cal, **fields):
        built.append(fields["target_id"])
        return real(cal, **fields)

    monkeypatch.setattr(host_figures, "host_target", spy)
    gpu = target_from_gpu_calibration(record)
    cal = {"date": "2025-01-01T00:00:00Z", "host": H.detect_host(), "threads": 2,
           "triad": {"bytes_per_s": 1.5e10, "elements_per_array": 1000, "runs": 5,
                     "threads": 2},
           "gemm": {"fp32": {"macs_per_s": 5e10, "kernel": "k", "n": 64, "runs": 3}},
           "unavailable": {}, "power": None}
    cpu = H.target_from_calibration(cal)
    assert built == ["host_gpu", "host"]
    assert (gpu.id, cpu.id) == ("host_gpu", "host") and gpu.is_host and cpu.is_host
    with pytest.raises(TargetError, match="fp32 GEMM could not be calibrated on this host"):
        H.target_from_calibration({**cal, "gemm": {}})

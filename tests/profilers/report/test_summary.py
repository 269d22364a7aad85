"""The summary's target latency: predicted / uncalibrated / measured, never below the
roofline, independent of the host's timings; host figures keep their own labels."""

from __future__ import annotations

import pytest

from edgeprof.core.results import BenchmarkResult, LatencyStats
from edgeprof.profilers.report.summary import summarize
from edgeprof.targets import get_target


def _bench(median_ms, backend="tflite", precision="int8", device="cpu", status="ok"):
    stats = None
    if status == "ok":
        stats = LatencyStats(n=20, median_ms=median_ms, mean_ms=median_ms, std_ms=0.01, cv=0.01,
                             iqr_ms=0.01, min_ms=median_ms, max_ms=median_ms, p50_ms=median_ms,
                             p90_ms=median_ms, p99_ms=None, ci_low_ms=median_ms * 0.99,
                             ci_high_ms=median_ms * 1.01)
    return BenchmarkResult(backend=backend, model="m", requested_precision=precision,
                           executed_precision=precision if status == "ok" else None,
                           status=status, reason=None if status == "ok" else "not here",
                           stats=stats, device=device)


@pytest.fixture(scope="module")
def handle(registry):
    from edgeprof.core.models import resolve_model

    return resolve_model("builtin:small_mobilenet", registry=registry)


def _est(handle, target_id, precision):
    from edgeprof.profilers.estimate.analytic import estimate_model

    return estimate_model(handle, get_target(target_id), precision)


@pytest.fixture(autouse=True)
def _only_shipped(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path))


@pytest.fixture(scope="module")
def host():  # a stand-in host: a descriptor, so no calibration run is needed
    return get_target("desktop_ddr4")


def test_prediction_does_not_move_with_the_host_timings(handle, host):
    pi, est, host_est = get_target("raspberry_pi_4"), _est(handle, "raspberry_pi_4", "int8"), \
        _est(handle, "desktop_ddr4", "int8")
    fast = summarize(est, _bench(0.5), pi, host, host_est)
    slow = summarize(est, _bench(50.0), pi, host, host_est)
    a, b = fast.figures["latency_ms"], slow.figures["latency_ms"]
    assert a.provenance == b.provenance == "predicted"
    assert a.value == b.value >= est.roofline_latency_ms
    assert fast.figures["host_latency_ms"].value != slow.figures["host_latency_ms"].value
    low, high = fast.figures["latency_low_ms"], fast.figures["latency_high_ms"]
    assert est.roofline_latency_ms <= low.value <= a.value <= high.value
    assert fast.prediction["calibration"] == "raspberry_pi_4--published"
    assert fast.to_dict()["prediction"]["provenance"] == "predicted"
    # everything derived from the latency inherits its label
    assert fast.figures["bandwidth_utilization"].provenance == "predicted"


def test_without_a_calibration_the_roofline_prior_is_labelled_uncalibrated(handle, host):
    # the rk3588 ships no calibration (a Pi 4 would transfer its board calibration to
    # openvino, labelled estimated)
    t, est = get_target("rk3588"), _est(handle, "rk3588", "fp32")
    s = summarize(est, _bench(3.0, backend="openvino", precision="fp32"), t, host,
                  _est(handle, "desktop_ddr4", "fp32"))
    f = s.figures["latency_ms"]
    assert f.provenance == "uncalibrated" and f.value >= est.roofline_latency_ms
    assert any("uncalibrated" in n for n in s.notes)
    pi, est = get_target("raspberry_pi_4"), _est(handle, "raspberry_pi_4", "fp32")
    s = summarize(est, _bench(3.0, backend="openvino", precision="fp32"), pi, host,
                  _est(handle, "desktop_ddr4", "fp32"))
    assert s.figures["latency_ms"].provenance == "estimated"
    assert any("runtime transfer" in n for n in s.notes)


def test_host_efficiency_ratio_is_estimated_not_measured(handle, host):
    s = summarize(_est(handle, "raspberry_pi_4", "int8"), _bench(2.0), get_target("raspberry_pi_4"),
                  host, _est(handle, "desktop_ddr4", "int8"))
    assert s.figures["host_efficiency_ratio"].provenance == "estimated"
    assert s.figures["host_latency_ms"].provenance == "measured"


def test_host_measurement_below_its_roofline_is_surfaced_in_the_target_summary(handle, host):
    host_est = _est(handle, "desktop_ddr4", "int8")
    s = summarize(_est(handle, "raspberry_pi_4", "int8"),
                  _bench(host_est.roofline_latency_ms / 10), get_target("raspberry_pi_4"), host,
                  host_est)
    assert "measurement_below_roofline" in {w.code for w in s.warnings}
    ok = summarize(_est(handle, "raspberry_pi_4", "int8"),
                   _bench(host_est.roofline_latency_ms * 3), get_target("raspberry_pi_4"), host,
                   host_est)
    assert "measurement_below_roofline" not in {w.code for w in ok.warnings}


def test_carry_over_is_a_named_method_floored_at_the_roofline(handle, host):
    pi, est, host_est = get_target("raspberry_pi_4"), _est(handle, "raspberry_pi_4", "int8"), \
        _est(handle, "desktop_ddr4", "int8")
    # the host ran faster than its roofline: the old code carried an efficiency < 1 over
    s = summarize(est, _bench(host_est.roofline_latency_ms / 4), pi, host, host_est,
                  method="carry_over")
    f = s.figures["latency_ms"]
    assert f.provenance == "estimated" and f.value == pytest.approx(est.roofline_latency_ms)
    assert any("carry-over" in n for n in s.notes)


def test_a_gpu_measurement_is_never_divided_by_the_cpu_roofline(handle, host):
    nano = get_target("jetson_nano")
    est, host_est = _est(handle, "jetson_nano", "fp16"), _est(handle, "desktop_ddr4", "fp16")
    gpu = _bench(1.0, backend="torch_eager", precision="fp16", device="cuda")
    s = summarize(est, gpu, nano, host, host_est, method="carry_over")
    assert s.figures["latency_ms"].value is None
    assert "carry-over refused" in s.figures["latency_ms"].reason
    assert "host_efficiency_ratio" not in s.figures
    p = summarize(est, gpu, nano, host, host_est)
    assert p.figures["latency_ms"].provenance == "predicted"
    assert "host_efficiency_ratio" not in p.figures


def test_an_unavailable_backend_still_gets_its_prediction(handle):
    nano = get_target("jetson_nano")
    est = _est(handle, "jetson_nano", "fp16")
    s = summarize(est, _bench(0, backend="tensorrt", precision="fp16", status="unavailable"),
                  nano)
    f = s.figures["latency_ms"]
    assert f.provenance == "predicted" and f.value >= est.roofline_latency_ms
    assert s.prediction["calibration"] == "jetson_nano--published"


def test_on_the_host_the_latency_is_measured(handle, host):
    est = _est(handle, "desktop_ddr4", "fp32")
    host_like = type("H", (), {"is_host": True, "id": "host",
                               "bandwidth_bytes_per_s": host.bandwidth_bytes_per_s,
                               "peak_macs": host.peak_macs, "typical_power": host.typical_power})
    s = summarize(est, _bench(7.0, precision="fp32"), host_like())
    assert s.figures["latency_ms"].provenance == "measured"
    assert s.figures["latency_ms"].value == 7.0 and s.prediction is None


def _h100():
    import json
    from pathlib import Path

    from edgeprof.targets.host_gpu import target_from_gpu_calibration

    record = Path(__file__).parents[2] / "targets" / "data" / "h100_gpu_calibration.json"
    return target_from_gpu_calibration(json.loads(record.read_text()))


def test_a_gpu_measurement_is_read_against_the_gpu_it_ran_on(handle):
    """With host_gpu as the host (profile --device cuda), the GPU's measurement meets the
    GPU's roofline: an efficiency ratio and a carry-over exist, as on a CPU host."""
    gpu_host, nano = _h100(), get_target("jetson_nano")
    from edgeprof.profilers.estimate.analytic import estimate_model

    est, host_est = _est(handle, "jetson_nano", "fp16"), estimate_model(handle, gpu_host, "fp16")
    gpu = _bench(1.0, backend="torch_eager", precision="fp16", device="cuda")
    s = summarize(est, gpu, nano, gpu_host, host_est, method="carry_over")
    assert s.figures["host_efficiency_ratio"].value == pytest.approx(
        1.0 / host_est.roofline_latency_ms)
    assert s.figures["latency_ms"].provenance == "estimated"
    assert s.figures["latency_ms"].value >= est.roofline_latency_ms


def test_beating_the_fp32_roofline_with_tf32_says_so(handle):
    gpu_host = _h100()
    from edgeprof.profilers.estimate.analytic import estimate_model

    est = estimate_model(handle, gpu_host, "fp32")
    fast = _bench(est.roofline_latency_ms / 10, backend="torch_compile", precision="fp32",
                  device="cuda")
    (w,) = [w for w in summarize(est, fast, gpu_host).warnings
            if w.code == "measurement_below_roofline"]
    assert "descriptor figure" in w.message
    fast.notes.append("fp32 on CUDA: convolutions (...) may run in TF32 on tensor cores")
    (w,) = [w for w in summarize(est, fast, gpu_host).warnings
            if w.code == "measurement_below_roofline"]
    assert "TF32 tensor cores" in w.message and "descriptor figure" not in w.message


def test_a_gpu_runtime_on_a_board_without_a_gpu_gets_no_figure_and_says_why(handle, host):
    """profile --target raspberry_pi_4 --backend tensorrt: the board has no GPU, so no
    latency is predicted for it (a 'runtime transfer' figure had been given), and the
    profile's other runs are not stopped."""
    pi, est = get_target("raspberry_pi_4"), _est(handle, "raspberry_pi_4", "fp32")
    s = summarize(est, _bench(3.0, backend="tensorrt", precision="fp32", status="unavailable"),
                  pi, host, _est(handle, "desktop_ddr4", "fp32"))
    f = s.figures["latency_ms"]
    assert f.value is None and f.provenance == "uncalibrated"
    assert "tensorrt runs on a GPU with CUDA, and raspberry_pi_4 has no GPU with CUDA" in f.reason


@pytest.mark.parametrize("factor", [1.05, 3.0, 12.0])
@pytest.mark.parametrize("model,board,bound", [("builtin:small_cnn", "raspberry_pi_4", "memory"),
                                               ("builtin:small_resnet", "jetson_nano", "compute")])
def test_the_reading_uses_the_roofline_bound_the_estimate_prints(registry, model, board, bound,
                                                                 factor):
    """The row's reading and the estimate's 'bottleneck' are one classification: the
    roofline says which roof binds, the latency says how close to it the run comes. (A
    memory-bound small_cnn on a Pi 4 read 'compute-bound or inefficient' at 15% of the
    bandwidth, under 'bottleneck: memory'.)"""
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model

    host = get_target(board)  # the board's figures, as if edgeprof ran on it
    est = estimate_model(resolve_model(model, registry=registry), host, "fp32")
    other = {"memory": "compute", "compute": "memory"}[est.bound]
    assert est.edge_constraints["bottleneck"] == est.bound == bound
    host_like = type("H", (), {"is_host": True, "id": "host",
                               "bandwidth_bytes_per_s": host.bandwidth_bytes_per_s,
                               "peak_macs": host.peak_macs, "typical_power": host.typical_power})
    s = summarize(est, _bench(est.roofline_latency_ms * factor, precision="fp32"), host_like())
    assert f"{est.bound}-bound" in s.reading and f"{other}-bound" not in s.reading
    assert ("inefficient" in s.reading) == (factor > 5)
    assert "measured" in s.reading  # the latency the reading comes from

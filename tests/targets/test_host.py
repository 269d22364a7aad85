"""The host target: detection, a (small) calibration, its cache, and honest absences."""

from __future__ import annotations

import json
import math

import pytest

from edgeprof.core.precision import PRECISIONS
from edgeprof.targets import host as H

SMALL = H.CalibrationParams(triad_array_bytes=4 * 1024 * 1024, triad_repeats=3,
                            gemm_min_n=64, gemm_max_n=128, gemm_target_s=0.002,
                            gemm_repeats=2, kernel_budget_s=0.05)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def small_cal(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("EDGEPROF_CACHE_DIR", str(tmp_path_factory.mktemp("cal")))
    try:
        yield H.host_calibration(params=SMALL)
    finally:
        mp.undo()


def test_detection_is_sane():
    d = H.detect_host()
    assert d["cpu_model"] and d["cpu_model_source"]
    assert 1 <= d["physical_cores"] <= d["logical_cores"] <= 4096
    assert d["ram_bytes"] > 256 * 1024 * 1024
    if d["frequency_hz"] is not None:
        assert 1e8 < d["frequency_hz"] < 1e10
    for c in d["caches"].values():
        assert c["bytes_per_instance"] >= 1024 and c["instances"] >= 1
    assert set(d["isa"]) == set(H.ISA_FLAGS)
    assert all(isinstance(v, bool) for v in d["isa"].values())
    assert d["libraries"]["numpy"]
    json.dumps(d)  # goes into profile.json as is


def test_cache_size_parsing():
    assert H._size_bytes("32K") == 32768
    assert H._size_bytes("32768K") == 32 * 1024 * 1024
    assert H._size_bytes("1M") == 1024 * 1024
    assert H._size_bytes("garbage") is None


def test_small_calibration_measures_and_target_validates(small_cal):
    tri = small_cal["triad"]
    assert tri["bytes_counted_per_run"] == 3 * 8 * tri["elements_per_array"]
    assert tri["bytes_per_s"] == pytest.approx(tri["bytes_counted_per_run"] / tri["best_s"])
    assert 1e8 < tri["bytes_per_s"] < 1e13
    fp32 = small_cal["gemm"]["fp32"]
    assert fp32["macs_per_s"] == pytest.approx(fp32["n"] ** 3 / fp32["median_s"])
    assert fp32["runs"] >= H.MIN_GEMM_RUNS
    low, high = fp32["macs_per_s_iqr"]
    assert low <= fp32["macs_per_s"] <= high <= fp32["best_macs_per_s"]
    assert 1e7 < fp32["macs_per_s"] < 1e14
    # every compute precision is either measured or absent with a reason, never both
    for p in ("fp32", "bf16", "int8"):
        assert (p in small_cal["gemm"]) != (p in small_cal["unavailable"])
    t = H.target_from_calibration(small_cal)
    assert t.id == "host" and t.is_host and t.kind == "cpu" and t.strategy_class == "cpu"
    assert t.bandwidth.value == tri["bytes_per_s"]
    assert "measured on this host by edgeprof calibration (STREAM triad" in t.bandwidth.source
    assert f"n={tri['elements_per_array']}" in t.bandwidth.source
    assert "measured on this host" in t.peak_compute["fp32"].source
    assert f"median of {fp32['runs']} runs, IQR" in t.peak_compute["fp32"].source
    assert t.strategy.precision in t.supported_precisions
    assert set(t.peak_compute) == set(small_cal["gemm"])
    for p in t.supported_precisions:
        assert PRECISIONS[p].compute in small_cal["gemm"]
    assert small_cal["host"]["cpu_model"] in t.processor
    for name, q in t.caches.items():
        assert q.source.startswith("/sys/devices/system/cpu"), name
    assert small_cal["host"]["frequency_source"] == t.frequency.source


def test_calibration_is_cached_and_reused(monkeypatch):
    first = H.host_calibration(params=SMALL)
    assert first["cache"]["hit"] is False
    path = H.calibration_path(SMALL)
    assert path.is_file() and json.loads(path.read_text())["date"] == first["date"]

    def boom(*a, **k):
        raise AssertionError("calibrated again instead of using the cache")

    monkeypatch.setattr(H, "calibrate", boom)
    again = H.host_calibration(params=SMALL)
    assert again["cache"]["hit"] is True
    assert again["triad"] == first["triad"] and again["date"] == first["date"]
    t = H.host_target(params=SMALL)
    assert t.bandwidth.value == first["triad"]["bytes_per_s"]
    with pytest.raises(AssertionError, match="calibrated again"):
        H.host_calibration(recalibrate=True, params=SMALL)


def test_recalibrate_overwrites_and_corrupt_cache_is_redone():
    first = H.host_calibration(params=SMALL)
    path = H.calibration_path(SMALL)
    path.write_text("{not json", encoding="utf-8")
    redone = H.host_calibration(params=SMALL)
    assert redone["cache"]["hit"] is False
    assert json.loads(path.read_text())["triad"]["bytes_per_s"] > 0
    fresh = H.host_calibration(recalibrate=True, params=SMALL)
    assert fresh["cache"]["hit"] is False
    assert first["key"] == fresh["key"]


def test_cache_key_depends_on_cpu_and_libraries():
    d = H.detect_host()
    other = dict(d, cpu_model="Some Other CPU")
    newer = dict(d, libraries={**d["libraries"], "torch": "99.0"})
    paths = {H.calibration_path(SMALL, x) for x in (d, other, newer)}
    assert len(paths) == 3


def test_precision_that_cannot_be_calibrated_is_absent(monkeypatch):
    """bf16 without native bf16 flags, and int8 without torch, are absent, not guessed."""
    d = H.detect_host()
    d["isa"] = {f: False for f in H.ISA_FLAGS}
    cal = H.calibrate(SMALL, d)
    assert "bf16" not in cal["gemm"] and "native bf16" in cal["unavailable"]["bf16"]
    no_torch = H.calibrate(H.CalibrationParams(**{**SMALL.__dict__, "use_torch": False}), d)
    assert set(no_torch["gemm"]) == {"fp32"}
    assert "torch" in no_torch["unavailable"]["int8"]
    assert no_torch["triad"]["implementation"].startswith("numpy")
    t = H.target_from_calibration(no_torch)
    assert "int8" not in t.peak_compute and "bf16" not in t.peak_compute
    assert not any(PRECISIONS[p].compute == "int8" for p in t.supported_precisions)
    assert t.strategy.precision in t.supported_precisions


def test_failing_kernel_is_not_calibrated(monkeypatch):
    """A kernel that raises or computes wrongly leaves its precision absent."""
    d = H.detect_host()
    real = H.gemm_kernels

    def broken(precision, torch, isa):
        kernels, reason = real(precision, torch, isa)
        if precision != "int8":
            return kernels, reason

        def wrong():
            raise RuntimeError("int8 result is wrong")
        return [(name, wrong, make) for name, _check, make in kernels], reason

    monkeypatch.setattr(H, "gemm_kernels", broken)
    cal = H.calibrate(SMALL, d)
    assert "int8" not in cal["gemm"]
    assert "every kernel failed" in cal["unavailable"]["int8"]
    assert "wrong" in cal["unavailable"]["int8"]


def _fake_cal(isa_on=(), peaks=None):
    d = H.detect_host()
    d["isa"] = {f: f in isa_on for f in H.ISA_FLAGS}
    peaks = peaks or {"fp32": 5e10}
    return {
        "date": "2025-01-01T00:00:00Z", "host": d, "threads": 2,
        "triad": {"bytes_per_s": 1.5e10, "elements_per_array": 1000, "runs": 5, "threads": 2},
        "gemm": {p: {"macs_per_s": v, "kernel": "k", "n": 64, "runs": 3}
                 for p, v in peaks.items()},
        "unavailable": {}, "power": None,
    }


@pytest.mark.parametrize("isa_on, peaks, expected", [
    (("amx_int8", "amx_bf16"), {"fp32": 1e11, "bf16": 4e11, "int8": 8e11}, "int8_static"),
    (("avx512_vnni",), {"fp32": 1e11, "int8": 3e11}, "int8_static"),
    (("avx512_bf16",), {"fp32": 1e11, "bf16": 2e11}, "bf16"),
    (("avx2",), {"fp32": 1e11, "int8": 2e11}, "int8"),
    (("avx2",), {"fp32": 1e11, "int8": 0.5e11}, "int8"),  # the ISA decides, not the noise
    (("asimd",), {"fp32": 1e10, "int8": 1e10}, "int8"),
    ((), {"fp32": 1e11, "int8": 1e11}, "int8_weight"),  # no SIMD int8 path
    (("avx2",), {"fp32": 1e11}, "int8_weight"),  # int8 not calibrated
    (("avx512_vnni",), {"fp32": 1e11}, "int8_weight"),  # VNNI but int8 not calibrated
])
def test_strategy_follows_isa_and_measurements(isa_on, peaks, expected):
    t = H.target_from_calibration(_fake_cal(isa_on, peaks))
    assert t.strategy.precision == expected
    assert t.strategy.precision in t.supported_precisions


def test_gemm_figure_is_the_median_run_not_the_lucky_one(monkeypatch):
    """One fast call among slow ones (a busy shared machine): the figure is the median."""
    durations = iter([0.004] * 3 + [0.001] + [0.004] * 20)  # warm-up, 2 sizing, then runs
    clock = {"t": 0.0}
    monkeypatch.setattr(H.time, "perf_counter", lambda: clock["t"])

    def make(n):
        def fn():
            clock["t"] += next(durations)
        return fn

    params = H.CalibrationParams(gemm_min_n=64, gemm_max_n=64, gemm_target_s=0.004,
                                 gemm_repeats=8, kernel_budget_s=10.0)
    g = H.time_gemm(make, params)
    assert g["runs"] == 8 and g["best_s"] == pytest.approx(0.001)
    assert g["median_s"] == pytest.approx(0.004)
    assert g["macs_per_s"] == pytest.approx(64 ** 3 / 0.004)
    assert g["best_macs_per_s"] == pytest.approx(4 * g["macs_per_s"])
    assert g["macs_per_s_iqr"] == pytest.approx([64 ** 3 / 0.004, 64 ** 3 / 0.004])


def _host_with(cpu_model, cores):
    d = H.detect_host()
    d["cpu_model"], d["physical_cores"] = cpu_model, cores
    return d


def test_power_without_rapl_is_a_sourced_figure_or_none():
    watts, source = H.host_power(_host_with("AMD Ryzen 7 5800X 8-Core Processor", 8))
    assert watts == pytest.approx(105.0) and "AMD product page" in source
    assert "ESTIMATE" in source and "not measured" in source
    watts, _ = H.host_power(_host_with("AMD EPYC 7763 64-Core Processor", 2))  # a 2-core VM
    assert watts == pytest.approx(2 * 280.0 / 64)
    # an unrelated CPU gets no figure: not another CPU's watts
    for model in ("AMD EPYC", "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "unknown CPU"):
        watts, source = H.host_power(_host_with(model, 4))
        assert math.isnan(watts) and "not known" in source and model in source
    cal = _fake_cal()
    cal["host"]["cpu_model"] = "AMD EPYC"
    t = H.target_from_calibration(cal)
    assert math.isnan(t.typical_power.value) and "not known" in t.typical_power.source
    assert t.to_dict()["figures"]["typical_power"]["source"].startswith("not known")
    cal["power"] = {"watts": 42.0, "source": "RAPL package energy counter"}
    assert H.target_from_calibration(cal).typical_power.value == 42.0


def test_busy_host_is_flagged(monkeypatch):
    d = H.detect_host()
    monkeypatch.setattr(H, "load_average", lambda: 10.0 * d["usable_cpus"])
    cal = H.calibrate(SMALL, d)
    assert any(w.startswith("host_busy") for w in cal["warnings"])
    assert "busy" in H.describe_host(cal)
    monkeypatch.setattr(H, "load_average", lambda: 0.0)
    assert H.calibrate(SMALL, d)["warnings"] == []


def test_describe_host_one_line(small_cal):
    line = H.describe_host(small_cal)
    assert "\n" not in line and "GB/s" in line and "fp32" in line
    assert small_cal["host"]["cpu_model"] in line
    quick = H.describe_host(calibrate=False)
    assert "\n" not in quick and "GMAC/s" not in quick


def test_registry_returns_host(monkeypatch, small_cal):
    from edgeprof.targets import TargetRegistry

    monkeypatch.setattr(H, "host_calibration", lambda recalibrate=False, params=None: small_cal)
    t = TargetRegistry().get("host")
    assert t.is_host and t.id == "host"

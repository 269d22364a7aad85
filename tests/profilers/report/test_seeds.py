"""The seed-compatible API: names, columns, keys and formulas of the seeds."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest

import pandas as pd
import torch

from edgeprof.core.errors import InputSpecError  # noqa: E402
from edgeprof.core.models import resolve_model  # noqa: E402
from edgeprof.profilers.estimate.analytic import estimate_model  # noqa: E402
from edgeprof.profilers.report.seeds import (  # noqa: E402
    HardwareProfile,
    auto_adjust_batch_size,
    build_hardware_profile_table,
    compute_utilization,
    estimate_batch_memory_mb,
    estimate_layerwise_stats,
    precision_tradeoff_table,
    save_hardware_artifacts,
    summarize_hardware,
    write_hardware_profile_artifacts,
)
from edgeprof.profilers.report.plots import plot_layerwise  # noqa: E402
from edgeprof.targets.schema import target_from_dict  # noqa: E402
from edgeprof.zoo.models import MLP, SmallCNN  # noqa: E402

SEED_COLUMNS = ["layer", "output_elements", "parameter_bytes", "activation_bytes", "macs"]


def q(value, unit):
    return {"value": value, "unit": unit, "source": "test figure"}


def target(peak=1e10, bandwidth=4e9):
    data = {
        "name": "Test device", "kind": "edge_cpu", "strategy_class": "cpu", "processor": "test",
        "supported_precisions": ["fp32"], "preferred_backends": ["torch_eager"],
        "compute": {"cores": q(4, "count"), "frequency": q(1.5e9, "Hz"),
                    "peak": {"fp32": q(peak, "MAC/s")}},
        "memory": {"ram": q(4e9, "B"), "bandwidth": q(bandwidth, "B/s"),
                   "l2_cache": q(1e6, "B")},
        "power": {"typical": q(5.0, "W")},
        "strategy": {"quantization_bits": 8, "pruning_type": "structured", "layout": "NHWC",
                     "precision": "fp32", "reason": "test"},
    }
    return target_from_dict(data, target_id="testdev", path=Path("testdev.toml"))


def cnn_estimate(precision="fp32"):
    torch.manual_seed(0)
    return estimate_model(resolve_model(SmallCNN(), input_shapes=[[1, 1, 28, 28]]), target(),
                          precision)


def png_dpi(path: Path) -> float:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i = data.index(b"pHYs")
    ppm_x, _, unit = struct.unpack(">IIB", data[i + 4:i + 13])
    assert unit == 1  # per metre
    return ppm_x * 0.0254


# ------------------------------------------------------------------ layerwise stats
@pytest.mark.parametrize("batch", [1, 32])
def test_estimate_layerwise_stats_small_cnn_seed_values(batch):
    df = estimate_layerwise_stats(SmallCNN(), batch_size=batch)
    assert list(df.columns[:5]) == SEED_COLUMNS
    by = df.set_index("layer")
    rows = {
        "conv1": (batch * 16 * 28 * 28, (16 * 9 + 16) * 4, batch * 16 * 28 * 28 * 1 * 9),
        "conv2": (batch * 32 * 14 * 14, (32 * 16 * 9 + 32) * 4, batch * 32 * 14 * 14 * 16 * 9),
        "classifier": (batch * 10, (1568 * 10 + 10) * 4, batch * 1568 * 10),
    }
    for layer, (out, pbytes, macs) in rows.items():
        assert by.loc[layer, "output_elements"] == out
        assert by.loc[layer, "parameter_bytes"] == pbytes
        assert by.loc[layer, "activation_bytes"] == out * 4
        assert by.loc[layer, "macs"] == macs
    # the rows of the whole model (ReLU and pooling too), in execution order
    assert list(df["layer"]) == ["conv1", "relu1", "pool1", "conv2", "relu2", "pool2",
                                 "classifier"]
    assert df["macs"].sum() == rows["conv1"][2] + rows["conv2"][2] + rows["classifier"][2]


def test_estimate_layerwise_stats_any_module_and_options():
    df = estimate_layerwise_stats(MLP(), batch_size=2, input_shape=(1, 28, 28),
                                  activation_bytes_per_value=2)
    assert list(df["layer"]) == ["net.1", "net.2", "net.3", "net.4", "net.5"]
    first = df.iloc[0]
    assert first["macs"] == 2 * 784 * 256
    assert first["parameter_bytes"] == (784 * 256 + 256) * 4
    assert first["activation_bytes"] == 2 * 256 * 2
    with pytest.raises(InputSpecError):
        estimate_layerwise_stats(MLP(), batch_size=0)
    with pytest.raises(InputSpecError):
        estimate_layerwise_stats(SmallCNN(), batch_size=1, input_shape=(3, 32, 32))


# ------------------------------------------------------------------ summarize_hardware
def test_summarize_hardware_seed_formula():
    df = pd.DataFrame({"parameter_bytes": [1000.0, 3000.0], "activation_bytes": [500.0, 500.0],
                       "macs": [2e6, 6e6]})
    s = summarize_hardware(df, latency_ms=2.0, memory_bandwidth_gbps=4.0)
    assert list(s) == ["estimated_total_bytes", "estimated_total_macs", "achieved_bandwidth_gbps",
                       "configured_memory_bandwidth_gbps", "bandwidth_utilization",
                       "achieved_gmacs"]
    assert s["estimated_total_bytes"] == 5000.0
    assert s["estimated_total_macs"] == 8e6
    assert s["achieved_bandwidth_gbps"] == pytest.approx(5000 / 0.002 / 1e9)
    assert s["bandwidth_utilization"] == pytest.approx(5000 / 0.002 / 1e9 / 4.0)
    assert s["achieved_gmacs"] == pytest.approx(8e6 / 0.002 / 1e9)
    assert s["configured_memory_bandwidth_gbps"] == 4.0
    clamped = summarize_hardware(df, latency_ms=0.0, memory_bandwidth_gbps=0.0)
    assert clamped["achieved_bandwidth_gbps"] == pytest.approx(5000 / 1e-9 / 1e9)
    assert clamped["bandwidth_utilization"] == pytest.approx(5000 / 1e-9 / 1e9 / 1e-9)
    assert all(math.isfinite(v) for v in clamped.values())


# ----------------------------------------------------------- precision_tradeoff_table
def test_precision_tradeoff_table_columns_sorting_and_missing_accuracy():
    sweep = pd.DataFrame({
        "precision": ["fp32", "fp32", "int8", "fp16", "int8"],
        "latency_ms": [10.0, 12.0, 4.0, 7.0, 6.0],
        "memory_mb": [4.0, 4.0, 1.0, 2.0, 1.0],
        "energy_proxy_j": [0.1, 0.1, 0.03, 0.05, 0.05],
        "accepted": [True, False, True, True, True],
    })
    t = precision_tradeoff_table(sweep)
    assert list(t.columns) == ["precision", "accuracy_mean", "latency_ms_mean", "memory_mb_mean",
                               "energy_proxy_j_mean", "accepted_ratio"]
    assert list(t["precision"]) == ["int8", "fp16", "fp32"]
    assert list(t["latency_ms_mean"]) == [5.0, 7.0, 11.0]
    assert list(t["accepted_ratio"]) == [1.0, 1.0, 0.5]
    assert t["accuracy_mean"].isna().all()  # not measured: empty, not invented
    with_acc = precision_tradeoff_table(sweep.assign(accuracy=[0.9, 0.8, 0.7, None, 0.6],
                                                     provenance="measured"))
    assert with_acc.set_index("precision").loc["fp32", "accuracy_mean"] == pytest.approx(0.85)
    assert math.isnan(with_acc.set_index("precision").loc["fp16", "accuracy_mean"])
    assert list(with_acc.columns)[-1] == "provenance"
    with pytest.raises(InputSpecError):
        precision_tradeoff_table(pd.DataFrame({"precision": ["fp32"]}))


# ------------------------------------------------------------ save_hardware_artifacts
def test_save_hardware_artifacts_files(tmp_path):
    layerwise = estimate_layerwise_stats(SmallCNN(), batch_size=4)
    summary = summarize_hardware(layerwise, latency_ms=1.5, memory_bandwidth_gbps=4.3)
    tradeoff = precision_tradeoff_table(pd.DataFrame({"precision": ["fp32"], "latency_ms": [1.5]}))
    out = tmp_path / "artifacts"
    paths = save_hardware_artifacts(out, layerwise, tradeoff, summary)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["hardware_summary.csv", "layerwise_activation_memory.png",
                     "layerwise_breakdown.csv", "layerwise_macs.png", "precision_tradeoffs.csv"]
    assert set(paths) == {"layerwise_breakdown_csv", "precision_tradeoffs_csv",
                          "hardware_summary_csv", "layerwise_activation_memory_png",
                          "layerwise_macs_png"}
    back = pd.read_csv(out / "layerwise_breakdown.csv", encoding="utf-8")
    assert list(back.columns[:5]) == SEED_COLUMNS and len(back) == len(layerwise)
    assert list(pd.read_csv(out / "hardware_summary.csv").columns) == list(summary)
    text = (out / "precision_tradeoffs.csv").read_text(encoding="utf-8").splitlines()
    assert text[0] == ("precision,accuracy_mean,latency_ms_mean,memory_mb_mean,"
                       "energy_proxy_j_mean,accepted_ratio")
    assert text[1] == "fp32,,1.5,,,"  # unmeasured cells are empty
    for png in ("layerwise_macs.png", "layerwise_activation_memory.png"):
        assert png_dpi(out / png) == pytest.approx(180, abs=0.5)


def test_plot_layerwise_rejects_missing_column(tmp_path):
    df = pd.DataFrame({"layer": ["a"], "macs": [1]})
    with pytest.raises(ValueError):
        plot_layerwise(df, "activation_bytes", tmp_path / "x.png", "x")
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------- seed 000 hardware profile
def test_build_hardware_profile_table_from_estimate():
    est = cnn_estimate()
    profile = build_hardware_profile_table(est)
    assert list(profile) == ["operator_profile", "totals", "precision_tradeoffs",
                             "edge_constraints"]
    ops = profile["operator_profile"]
    assert [o["operator"] for o in ops] == [r.layer for r in est.layers]
    for o, r in zip(ops, est.layers):
        assert o["latency_ms"] == r.roofline_latency_ms
        assert o["memory_kb"] == pytest.approx((r.parameter_bytes + r.activation_bytes) / 1000)
        assert o["provenance"] == "analytic"
    totals = profile["totals"]
    assert totals["latency_ms"] == pytest.approx(est.roofline_latency_ms)
    assert totals["memory_kb"] == pytest.approx(sum(o["memory_kb"] for o in ops))
    assert totals["estimated_bandwidth_mb_s"] == pytest.approx(
        totals["memory_kb"] / 1000 / (totals["latency_ms"] / 1000))
    assert totals["stream_utilization"] is None
    pt = profile["precision_tradeoffs"]
    assert pt["fp32_memory_kb"] == pytest.approx(totals["memory_kb"])
    assert pt["fp16_memory_kb"] == pytest.approx(pt["fp32_memory_kb"] / 2)
    assert pt["int8_memory_kb"] == pytest.approx(pt["fp32_memory_kb"] / 4)
    assert pt["note"]
    ec = profile["edge_constraints"]
    assert set(ec) == {"cache_sensitivity", "bottleneck"}
    assert ec["cache_sensitivity"].startswith(est.edge_constraints["cache_sensitivity"])
    assert ec["bottleneck"] == est.edge_constraints["bottleneck_reason"]


def test_build_hardware_profile_table_stream_rate_and_measured_latency():
    est = cnn_estimate()
    measured = {"conv2": 0.5, "classifier": 0.25}
    profile = build_hardware_profile_table(est, operator_latency_ms=measured, stream_rate_fps=100)
    ops = {o["operator"]: o for o in profile["operator_profile"]}
    assert ops["conv2"]["latency_ms"] == 0.5 and ops["conv2"]["provenance"] == "measured"
    assert ops["conv1"]["provenance"] == "analytic"
    total = sum(o["latency_ms"] for o in ops.values())
    assert profile["totals"]["latency_ms"] == pytest.approx(total)
    assert profile["totals"]["stream_utilization"] == pytest.approx(total / 10.0)  # 10 ms frames
    assert profile["totals"]["provenance"] == "analytic+measured"
    # a backend's operator table, several runtime ops per layer, summed
    table = pd.DataFrame({"operator": ["/conv2/Conv", "/conv2/Add", "/fc/Gemm"],
                          "layer": ["conv2", "conv2", "classifier"], "latency_ms": [0.25, 0.25, 0.25]})
    same = build_hardware_profile_table(est, operator_latency_ms=table, stream_rate_fps=100)
    assert same["operator_profile"] == profile["operator_profile"]
    with pytest.raises(InputSpecError):
        build_hardware_profile_table(est, stream_rate_fps=0)
    with pytest.raises(TypeError):
        build_hardware_profile_table("model.onnx")


def test_build_hardware_profile_table_whole_model_measurement():
    est = cnn_estimate()
    profile = build_hardware_profile_table(est, measured_latency_ms=2.0, stream_rate_fps=250)
    ops = profile["operator_profile"]
    roof = est.roofline_latency_ms
    for o, r in zip(ops, est.layers):
        assert o["latency_ms"] == pytest.approx(2.0 * r.roofline_latency_ms / roof)
        assert o["provenance"] == "estimated"
    assert profile["totals"]["latency_ms"] == pytest.approx(2.0)
    assert profile["totals"]["provenance"] == "measured"
    assert profile["totals"]["stream_utilization"] == pytest.approx(2.0 / 4.0)  # 4 ms frames
    # a per-operator measurement stays; the rest of the total is shared by roofline
    both = build_hardware_profile_table(est, operator_latency_ms={"conv2": 1.5},
                                        measured_latency_ms=2.0)
    by = {o["operator"]: o for o in both["operator_profile"]}
    assert by["conv2"]["latency_ms"] == 1.5
    assert both["totals"]["latency_ms"] == pytest.approx(2.0)


def test_write_hardware_profile_artifacts(tmp_path):
    profile = build_hardware_profile_table(cnn_estimate())
    paths = write_hardware_profile_artifacts(profile, tmp_path / "hw")
    assert set(paths) == {"operator_profile_csv", "hardware_totals_csv"}
    ops = pd.read_csv(paths["operator_profile_csv"], encoding="utf-8")
    assert list(ops.columns[:3]) == ["operator", "latency_ms", "memory_kb"]
    assert len(ops) == len(profile["operator_profile"])
    totals_text = Path(paths["hardware_totals_csv"]).read_text(encoding="utf-8").splitlines()
    header = totals_text[0].split(",")
    assert header[:4] == ["latency_ms", "memory_kb", "estimated_bandwidth_mb_s",
                          "stream_utilization"]
    assert totals_text[1].split(",")[3] == ""  # no stream rate: empty, not 0


# ------------------------------------------------------------------- seed 000 helpers
def test_estimate_batch_memory_mb_is_decimal():
    assert estimate_batch_memory_mb(32, 1000) == pytest.approx(32 * 1000 * 8 / 1e6)
    assert estimate_batch_memory_mb(10, 100, bytes_per_feature=4) == pytest.approx(0.004)


def test_auto_adjust_batch_size_halves_until_it_fits():
    profile = HardwareProfile(memory_limit_mb=1.0, compute_budget=1e9)
    # 1000 features x 8 B = 8 kB per sample: 125 samples fit in 1 MB
    assert auto_adjust_batch_size(1024, 1000, profile) == 64  # 1024 -> 512 -> 256 -> 128 -> 64
    assert auto_adjust_batch_size(100, 1000, profile) == 100  # fits already
    assert auto_adjust_batch_size(8, 10**7, profile) == 1  # never below 1
    assert auto_adjust_batch_size(200, 1000, profile) == 100
    with pytest.raises(InputSpecError):
        auto_adjust_batch_size(0, 1000, profile)


def test_compute_utilization_is_a_fraction():
    profile = HardwareProfile(memory_limit_mb=1.0, compute_budget=1000)
    assert compute_utilization(250, profile) == 0.25
    assert compute_utilization(5000, profile) == 1.0
    assert compute_utilization(-5, profile) == 0.0
    assert compute_utilization(1, HardwareProfile(1.0, 0)) == 1.0


def test_seed_functions_reachable_from_the_package():
    import edgeprof

    assert edgeprof.summarize_hardware is summarize_hardware
    assert edgeprof.auto_adjust_batch_size is auto_adjust_batch_size
    assert edgeprof.build_hardware_profile_table is build_hardware_profile_table


# ------------------------------------------------- the seeds' own call forms and examples
def test_seed_000_call_form_builds_the_seed_pipeline():
    """Seed 000 calls build_hardware_profile_table(feature_count, batch_size,
    stream_interval_ms); that form profiles its four-operator tabular pipeline."""
    profile = build_hardware_profile_table(784, 32, 100, target=target())
    assert list(profile) == ["operator_profile", "totals", "precision_tradeoffs",
                             "edge_constraints"]
    ops = profile["operator_profile"]
    assert [o["operator"] for o in ops] == ["input_normalization", "linear_projection",
                                            "activation", "decision_head"]
    assert all(o["provenance"] == "analytic" for o in ops)
    totals = profile["totals"]
    assert totals["latency_ms"] == pytest.approx(sum(o["latency_ms"] for o in ops))
    assert totals["memory_kb"] == pytest.approx(sum(o["memory_kb"] for o in ops))
    # the stream interval is in ms: utilization = latency / interval
    assert totals["stream_utilization"] == pytest.approx(totals["latency_ms"] / 100)
    assert totals["estimated_bandwidth_mb_s"] == pytest.approx(
        totals["memory_kb"] / 1000 / (totals["latency_ms"] / 1000))
    # seed 000's trade-offs: fp16 halves the fp32 memory, int8 saves 75%
    pt = profile["precision_tradeoffs"]
    assert pt["fp16_memory_kb"] == pytest.approx(0.5 * pt["fp32_memory_kb"])
    assert pt["int8_memory_kb"] == pytest.approx(0.25 * pt["fp32_memory_kb"])
    # linear_projection: 784 -> 784 weights + bias and 32 x 784 outputs, fp32, in kB
    by = {o["operator"]: o for o in ops}
    assert by["linear_projection"]["memory_kb"] == pytest.approx(
        ((784 * 784 + 784) * 4 + 32 * 784 * 4) / 1000)
    keywords = build_hardware_profile_table(feature_count=784, batch_size=32,
                                            stream_interval_ms=100, target=target())
    assert keywords == profile
    with pytest.raises(InputSpecError):
        build_hardware_profile_table(784, 32, 0, target=target())
    with pytest.raises(InputSpecError):
        build_hardware_profile_table(784, 0, 100, target=target())


def test_seed_000_call_form_without_a_target_uses_this_host():
    profile = build_hardware_profile_table(16, 4, 10)
    assert len(profile["operator_profile"]) == 4
    assert profile["totals"]["latency_ms"] > 0


def test_layers_seed_gives_the_seeds_rows_and_reading():
    """Seed 001/002: estimate_layerwise_stats(SmallCNN(), batch_size=32) has the rows conv1,
    conv2 and classifier, and summarize_hardware on them reads 2.49 MB."""
    df = estimate_layerwise_stats(SmallCNN(), batch_size=32, layers="seed")
    assert list(df.columns) == SEED_COLUMNS
    assert list(df["layer"]) == ["conv1", "conv2", "classifier"]
    summary = summarize_hardware(df, latency_ms=1.0, memory_bandwidth_gbps=4.3)
    assert summary["estimated_total_bytes"] == 2_491_688
    assert f"{summary['estimated_total_bytes'] / 1e6:.2f} MB" == "2.49 MB"
    assert summary["estimated_total_macs"] == 33_015_808
    # the default keeps every layer that does work, so its total differs (README says so)
    everything = summarize_hardware(estimate_layerwise_stats(SmallCNN(), batch_size=32),
                                    latency_ms=1.0, memory_bandwidth_gbps=4.3)
    assert f"{everything['estimated_total_bytes'] / 1e6:.2f} MB" == "5.50 MB"
    assert everything["estimated_total_macs"] == summary["estimated_total_macs"]
    with pytest.raises(InputSpecError):
        estimate_layerwise_stats(SmallCNN(), batch_size=1, layers="some")
    with pytest.raises(InputSpecError):  # no conv or linear layer: nothing the seed would list
        estimate_layerwise_stats(torch.nn.ReLU(), batch_size=1, layers="seed")


def test_seed_002_sample_output_arithmetic():
    """Seed 002's sample: 1.82 GB/s achieved on a Raspberry Pi 4 (4.3 GB/s) reads 42.3%."""
    df = estimate_layerwise_stats(SmallCNN(), batch_size=32, layers="seed")
    latency_ms = 2_491_688 / 1.82e9 * 1e3  # the latency at which SmallCNN moves 1.82 GB/s
    s = summarize_hardware(df, latency_ms=latency_ms, memory_bandwidth_gbps=4.3)
    assert f"Achieved bandwidth: {s['achieved_bandwidth_gbps']:.2f} GB/s" == \
        "Achieved bandwidth: 1.82 GB/s"
    assert f"Utilization: {s['bandwidth_utilization'] * 100:.1f}%" == "Utilization: 42.3%"
    # seed 002's reference devices, as its comparison loop uses them
    for bw, pct in ((4.3, "42.3"), (25.6, "7.1"), (50.0, "3.6")):
        got = summarize_hardware(df, latency_ms=latency_ms, memory_bandwidth_gbps=bw)
        assert f"{got['bandwidth_utilization'] * 100:.1f}" == pct
    # seed 002's "Tracking Optimization Impact": 100 ms baseline, 75 ms pruned, same bytes
    base = summarize_hardware(df, latency_ms=100, memory_bandwidth_gbps=4.3)
    pruned = summarize_hardware(df, latency_ms=75, memory_bandwidth_gbps=4.3)
    assert f"{base['achieved_bandwidth_gbps']:.2f}" == "0.02"
    assert pruned["achieved_bandwidth_gbps"] == pytest.approx(
        base["achieved_bandwidth_gbps"] * 100 / 75)
    assert (1 - pruned["estimated_total_bytes"] / base["estimated_total_bytes"]) * 100 == 0.0


def test_totals_keep_the_provenance_of_the_whole_model_figure():
    est = cnn_estimate()
    for prov in ("estimated", "predicted", "measured"):
        p = build_hardware_profile_table(est, latency_ms=2.0, latency_provenance=prov)
        assert p["totals"]["provenance"] == prov
        assert {o["provenance"] for o in p["operator_profile"]} == {"estimated"}
    with pytest.raises(InputSpecError):  # a figure without its provenance
        build_hardware_profile_table(est, latency_ms=2.0)
    with pytest.raises(InputSpecError):
        build_hardware_profile_table(est, latency_ms=2.0, latency_provenance="measured",
                                     measured_latency_ms=2.0)

"""The analytic estimate: precision bytes, roofline math, fallbacks, capacity, constraints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import torch
from torch import nn  # noqa: E402

from edgeprof.core.errors import InputSpecError, UnknownNameError, UnsupportedError  # noqa: E402
from edgeprof.core.models import ModelHandle, resolve_model  # noqa: E402
from edgeprof.profilers.estimate.analytic import estimate_model  # noqa: E402
from edgeprof.targets.schema import target_from_dict  # noqa: E402
from edgeprof.zoo.models import SmallCNN, TinyTransformer  # noqa: E402


def q(value, unit):
    return {"value": value, "unit": unit, "source": "test figure"}


def make_target(*, peaks=None, ram=4e9, bandwidth=4e9, caches=None, sram=None, flash=None,
                precisions=("fp32",), kind="edge_cpu", target_id="testdev"):
    peaks = peaks or {"fp32": 1e10}
    memory = {"ram": q(ram, "B"), "bandwidth": q(bandwidth, "B/s")}
    for k, v in (caches or {}).items():
        memory[k] = q(v, "B")
    if sram:
        memory["sram"] = q(sram, "B")
    if flash:
        memory["flash"] = q(flash, "B")
    data = {
        "name": "Test device", "kind": kind, "strategy_class": "cpu", "processor": "test",
        "supported_precisions": list(precisions), "preferred_backends": ["torch_eager"],
        "compute": {"cores": q(4, "count"), "frequency": q(1.5e9, "Hz"),
                    "peak": {k: q(v, "MAC/s") for k, v in peaks.items()}},
        "memory": memory,
        "power": {"typical": q(5.0, "W")},
        "strategy": {"quantization_bits": 8, "pruning_type": "structured", "layout": "NHWC",
                     "precision": precisions[0], "reason": "test"},
    }
    return target_from_dict(data, target_id=target_id, path=Path(f"{target_id}.toml"))


def cnn_handle(batch=1) -> ModelHandle:
    torch.manual_seed(0)
    return resolve_model(SmallCNN(), input_shapes=[[batch, 1, 28, 28]])


def by_layer(est):
    return {r.layer: r for r in est.layers}


# ----------------------------------------------------------------------------- bytes
@pytest.mark.parametrize("precision,wb,ab", [("fp32", 4, 4), ("fp16", 2, 2), ("int8", 1, 1),
                                             ("int8_dynamic", 1, 4), ("int4_weight", 0.5, 4)])
def test_precision_bytes(precision, wb, ab):
    target = make_target(peaks={"fp32": 1e10, "fp16": 2e10, "int8": 4e10})
    est = estimate_model(cnn_handle(), target, precision)
    conv1 = by_layer(est)["conv1"]
    assert conv1.parameter_count == 160
    assert conv1.parameter_bytes == 160 * wb
    assert conv1.activation_bytes == 16 * 28 * 28 * ab
    assert conv1.input_bytes == 28 * 28 * ab
    assert est.parameter_count == sum(p.numel() for p in SmallCNN().parameters())
    assert est.parameter_bytes == est.parameter_count * wb
    assert est.peak_activation_bytes == (784 + 2 * 16 * 28 * 28) * ab
    assert est.precision == precision


# -------------------------------------------------------------------------- roofline
def test_roofline_math_per_layer():
    peak, bw = 2e9, 1e9
    est = estimate_model(cnn_handle(), make_target(peaks={"fp32": peak}, bandwidth=bw))
    assert est.peak_macs_per_s == peak and est.memory_bandwidth_bytes_per_s == bw
    for r in est.layers:
        assert r.flops == 2 * r.macs
        assert r.compute_ms == pytest.approx(r.macs / peak * 1e3)
        moved = r.parameter_bytes + r.input_bytes + r.activation_bytes
        assert r.memory_ms == pytest.approx(moved / bw * 1e3)
        assert r.roofline_latency_ms == max(r.compute_ms, r.memory_ms)
        assert r.bound == ("memory" if r.memory_ms > r.compute_ms else "compute")
    conv2 = by_layer(est)["conv2"]
    assert conv2.macs == 14 * 14 * 32 * 16 * 9
    assert conv2.compute_ms == pytest.approx(903168 / 2e9 * 1e3)
    # a very fast memory makes conv2 compute-bound, a slow one memory-bound
    fast = estimate_model(cnn_handle(), make_target(peaks={"fp32": 1e9}, bandwidth=1e15))
    assert by_layer(fast)["conv2"].bound == "compute"
    assert fast.edge_constraints["bottleneck"] == "compute"
    slow = estimate_model(cnn_handle(), make_target(peaks={"fp32": 1e15}, bandwidth=1e6))
    assert by_layer(slow)["conv2"].bound == "memory"
    assert slow.edge_constraints["bottleneck"] == "memory"
    assert est.roofline_latency_ms == pytest.approx(sum(r.roofline_latency_ms for r in est.layers))


def test_missing_peak_falls_back_to_fp32_with_a_note():
    target = make_target(peaks={"fp32": 1e10})
    est = estimate_model(cnn_handle(), target, "int8")
    assert est.compute_precision == "fp32"
    assert est.peak_macs_per_s == 1e10
    assert any("no int8 peak" in n and "fp32" in n for n in est.notes)
    with_int8 = estimate_model(cnn_handle(), make_target(peaks={"fp32": 1e10, "int8": 4e10}), "int8")
    assert with_int8.compute_precision == "int8" and with_int8.peak_macs_per_s == 4e10
    assert not any("peak" in n for n in with_int8.notes)
    assert with_int8.compute_ms == pytest.approx(est.compute_ms / 4)


def test_batch_size_scales_counts_and_shapes():
    target = make_target()
    one = estimate_model(cnn_handle(), target)
    four = estimate_model(cnn_handle(), target, batch_size=4)
    assert four.batch_size == 4 and four.input_shapes == [[4, 1, 28, 28]]
    assert four.total_macs == 4 * one.total_macs
    assert four.parameter_count == one.parameter_count
    assert four.edge_constraints["batch_size"] == 4
    with pytest.raises(InputSpecError):
        estimate_model(cnn_handle(), target, batch_size=0)


# ---------------------------------------------------------------------- capacity
def test_memory_capacity_against_ram():
    est = estimate_model(cnn_handle(), make_target(ram=1e9))
    mc = est.memory_capacity
    assert mc["weights_bytes"] == est.parameter_bytes
    assert mc["peak_activation_bytes"] == est.peak_activation_bytes
    assert mc["total_bytes"] == est.parameter_bytes + est.peak_activation_bytes
    assert mc["fits"] is True and mc["fits_ram"] is True
    tiny = estimate_model(cnn_handle(), make_target(ram=50_000)).memory_capacity
    assert tiny["fits"] is False and "does not fit" in tiny["message"]
    # a board's gigabytes read as gigabytes (the report's verdict showed "4.29e+03 MB")
    board = estimate_model(cnn_handle(), make_target(ram=4.295e9)).memory_capacity
    assert board["message"].endswith("vs RAM 4.29 GB"), board["message"]


def test_memory_capacity_on_mcu_uses_sram_and_flash():
    # weights 81,960 B (fp32), peak activations 106,624 B (fp32)
    ok = estimate_model(cnn_handle(), make_target(kind="mcu", ram=512_000, sram=200_000,
                                                  flash=100_000)).memory_capacity
    assert ok["model"] == "mcu" and ok["activations_fit"] and ok["weights_fit"] and ok["fits"]
    assert ok["activation_limit_bytes"] == 200_000 and ok["weight_limit_bytes"] == 100_000
    small_sram = estimate_model(cnn_handle(), make_target(kind="mcu", ram=512_000, sram=100_000,
                                                          flash=1_000_000)).memory_capacity
    assert not small_sram["activations_fit"] and small_sram["weights_fit"]
    assert small_sram["fits"] is False
    int8 = estimate_model(cnn_handle(), make_target(kind="mcu", ram=512_000, sram=100_000,
                                                    flash=1_000_000, peaks={"fp32": 1e8,
                                                                            "int8": 2e8},
                                                    precisions=("fp32", "int8")), "int8")
    assert int8.memory_capacity["fits"] is True  # 4x smaller activations fit


# ---------------------------------------------------------------------- constraints
def test_cache_sensitivity_levels():
    caches = {"l1d_cache": 32_000, "l2_cache": 1_000_000, "l3_cache": 8_000_000}
    est = estimate_model(cnn_handle(), make_target(caches=caches))
    ec = est.edge_constraints
    largest = max(est.layers, key=lambda r: r.parameter_bytes + r.input_bytes + r.activation_bytes)
    assert ec["working_set_layer"] == largest.layer
    assert ec["working_set_bytes"] == pytest.approx(
        largest.parameter_bytes + largest.input_bytes + largest.activation_bytes)
    assert ec["working_set_bytes"] < 1_000_000
    assert ec["cache_sensitivity"] == "low" and "l2" in ec["cache_sensitivity_reason"]
    medium = estimate_model(cnn_handle(), make_target(caches={"l1d_cache": 32_000,
                                                              "l2_cache": 150_000}))
    assert medium.edge_constraints["cache_sensitivity"] == "medium"
    high = estimate_model(cnn_handle(), make_target(caches={"l1d_cache": 16_000,
                                                            "l2_cache": 64_000}))
    assert high.edge_constraints["cache_sensitivity"] == "high"
    assert "DRAM" in high.edge_constraints["cache_sensitivity_reason"]
    none = estimate_model(cnn_handle(), make_target()).edge_constraints
    assert none["cache_sensitivity"] == "unknown"


def test_precision_memory_table():
    est = estimate_model(cnn_handle(), make_target())
    table = {r["precision"]: r for r in est.precision_memory}
    assert list(table) == ["fp32", "fp16", "int8"]
    assert table["fp32"]["weights_bytes"] == est.parameter_count * 4
    assert table["fp32"]["peak_activation_bytes"] == est.peak_activation_bytes
    assert table["fp32"]["saving_vs_fp32"] == 0
    assert table["fp16"]["saving_vs_fp32"] == pytest.approx(0.5)
    assert table["int8"]["saving_vs_fp32"] == pytest.approx(0.75)
    assert table["int8"]["total_bytes"] == pytest.approx(table["fp32"]["total_bytes"] / 4)


# ----------------------------------------------------------------------- dispatch
def test_graph_readers_answer_through_the_hook_and_unknown_format(registry):
    readers = {i.plugin_name for i in registry.hook.edgeprof_read_graph.get_hookimpls()}
    assert readers == {f"edgeprof.profilers.estimate.{m}_graph"
                       for m in ("torch", "onnx", "openvino", "tflite")}
    walk = registry.hook.edgeprof_read_graph(model=cnn_handle())
    assert walk.layers and walk.layers[0].macs > 0
    handle = ModelHandle(spec="m.caffemodel", name="m", format="caffe", input_specs=[])
    with pytest.raises(UnsupportedError, match="no graph reader reads caffe models") as e:
        estimate_model(handle, make_target(), registry=registry)
    assert "edgeprof.profilers.estimate.onnx_graph" in str(e.value)
    with pytest.raises(UnknownNameError):
        estimate_model(cnn_handle(), make_target(), "fp8")


def test_wrong_input_shape_names_model_and_shape():
    handle = resolve_model(SmallCNN(), input_shapes=[[1, 3, 32, 32]])
    with pytest.raises(InputSpecError) as err:
        estimate_model(handle, make_target())
    msg = str(err.value)
    assert "SmallCNN" in msg and "1x3x32x32" in msg and "\n" not in msg


def test_int_inputs_and_json_ready():
    torch.manual_seed(0)
    handle = resolve_model(TinyTransformer(), input_shapes=[[2, 32]], input_dtypes=["int64"])
    est = estimate_model(handle, make_target(caches={"l2_cache": 1_000_000}))
    assert est.input_dtypes == ["int64"]
    assert by_layer(est)["embed"].input_bytes == 64 * 4
    assert est.parameter_count == sum(p.numel() for p in TinyTransformer().parameters())
    doc = json.loads(json.dumps(est.to_dict(), allow_nan=False))
    assert doc["totals"]["macs"] == est.total_macs
    frame = est.to_frame()
    assert list(frame["layer"]) == [r.layer for r in est.layers]


def test_functional_rows_reach_the_estimate():
    class Gram(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            h = self.fc(x)
            return h @ h.transpose(-1, -2)

    handle = resolve_model(Gram(), input_shapes=[[2, 5, 8]])
    est = estimate_model(handle, make_target())
    assert [r.layer for r in est.layers] == ["fc", "matmul"]
    assert by_layer(est)["matmul"].macs == 2 * 5 * 8 * 5


def test_the_graph_walk_runs_once_per_model_and_input_shape(monkeypatch):
    import edgeprof.profilers.estimate.analytic as analytic

    calls = []
    real = analytic.walk
    monkeypatch.setattr(analytic, "walk", lambda m, *a: calls.append(m) or real(m, *a))
    handle = cnn_handle()
    a = estimate_model(handle, make_target(), "fp32")
    b = estimate_model(handle, make_target(), "int8")
    assert len(calls) == 1 and a.total_macs == b.total_macs
    estimate_model(handle, make_target(), "fp32", batch_size=2)  # other shape: walks again
    assert len(calls) == 2

"""The router: per-kind choices, estimate- and constraint-driven plans, early stop,
infeasibility, plugin rules, failure-mode warnings."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, SimpleNamespace as NS

import pytest

from edgeprof.core.backend import Capabilities
from edgeprof.core.errors import ConstraintError, PluginError, UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.plugins import PluginManager
from edgeprof.optimize.router import (Constraints, Step, check_feasible, collect_rules,
                                  load_strategies, recommend)
from edgeprof.targets.schema import target_from_dict


def q(v, unit):
    return {"value": v, "unit": unit, "source": "test descriptor"}


def make_target(kind, strategy_class, precisions, peaks, bandwidth, ram, strategy, preferred,
                cores=4, sram=None, flash=None, tid=None):
    memory = {"ram": q(ram, "B"), "bandwidth": q(bandwidth, "B/s")}
    if sram:
        memory["sram"] = q(sram, "B")
    if flash:
        memory["flash"] = q(flash, "B")
    data = {
        "name": f"test {kind}", "kind": kind, "strategy_class": strategy_class,
        "processor": "test", "supported_precisions": precisions,
        "preferred_backends": preferred,
        "compute": {"cores": q(cores, "count"), "frequency": q(1.5e9, "Hz"),
                    "peak": {k: q(v, "MAC/s") for k, v in peaks.items()}},
        "memory": memory, "power": {"typical": q(5.0, "W")},
        "strategy": dict(zip(("quantization_bits", "pruning_type", "layout", "precision",
                              "reason"), strategy)),
    }
    tid = tid or kind
    return target_from_dict(data, target_id=tid, path=Path(f"{tid}.toml"))


TARGETS = {
    "cpu": lambda **kw: make_target(
        "cpu", "cpu", ["fp32", "bf16", "int8", "int8_static", "int8_dynamic", "int8_weight",
                       "int4_weight"],
        {"fp32": 5e11, "bf16": 1e12, "int8": 2e12}, 4e10, 16e9,
        [8, "unstructured", "NHWC", "int8", "desktop"], ["openvino", "onnxruntime",
                                                          "torch_eager"], cores=8, **kw),
    "edge_cpu": lambda **kw: make_target(
        "edge_cpu", "cpu", ["fp32", "int8", "int8_dynamic"], {"fp32": 4.8e10, "int8": 9.6e10},
        4e9, 4e9, [8, "structured", "NHWC", "int8", "pi"], ["tflite", "onnxruntime"], **kw),
    "gpu": lambda **kw: make_target(
        "gpu", "nvidia_gpu", ["fp32", "fp16", "int8"], {"fp32": 1e13, "fp16": 6e13, "int8": 1.2e14},
        9e11, 16e9, [8, "structured", "NCHW", "fp16", "gpu"], ["tensorrt", "torch_eager"], **kw),
    "edge_gpu": lambda **kw: make_target(
        "edge_gpu", "nvidia_gpu", ["fp32", "fp16"], {"fp32": 2.4e11, "fp16": 4.7e11}, 25.6e9, 4e9,
        [16, "structured", "NCHW", "fp16", "nano"], ["tensorrt", "onnxruntime"], **kw),
    "npu": lambda **kw: make_target(
        "npu", "mobile_npu", ["fp32", "fp16", "int8"], {"fp32": 1e11, "fp16": 2e12, "int8": 4e12},
        3e10, 8e9, [8, "channel", "NCHW", "int8", "npu"], ["npu_delegate", "tflite"], **kw),
    "mcu": lambda **kw: make_target(
        "mcu", "embedded_mcu", ["fp32", "int8"], {"fp32": 2e8, "int8": 8e8}, 1e9, 1.5e6,
        [8, "structured", "NCHW", "int8", "mcu"], ["tflite"], cores=1, sram=5e5, flash=2e6, **kw),
}


def backend(name, precisions, devices):
    return type(name, (), {"name": name,
                           "capabilities": Capabilities(precisions=tuple(precisions),
                                                        devices=tuple(devices))})


BACKENDS = {
    "torch_eager": backend("torch_eager", ["fp32", "bf16", "int8", "int8_dynamic"], ["cpu", "cuda"]),
    "onnxruntime": backend("onnxruntime", ["fp32", "fp16", "int8", "int8_static", "int8_dynamic"],
                           ["cpu"]),
    "openvino": backend("openvino", ["fp32", "fp16", "bf16", "int8", "int8_weight",
                                     "int4_weight"], ["cpu"]),
    "tflite": backend("tflite", ["fp32", "fp16", "int8", "int8_dynamic"], ["cpu"]),
    "tensorrt": backend("tensorrt", ["fp32", "fp16", "int8"], ["cuda"]),
    "npu_delegate": backend("npu_delegate", ["int8", "fp16"], ["npu"]),
    "tflm": backend("tflm", ["int8", "fp32"], ["mcu"]),
}


def estimate(target, macs, param_bytes, act_bytes, conv=True):
    """An Estimate-like object consistent with the target's roofline at fp32."""
    c = macs / target.peak_macs("fp32") * 1e3
    m = (param_bytes + act_bytes) / target.bandwidth_bytes_per_s * 1e3
    return NS(model="m", precision="fp32", batch_size=1, roofline_latency_ms=max(c, m),
              compute_ms=c, memory_ms=m, bound="memory" if m > c else "compute",
              parameter_bytes=param_bytes, peak_activation_bytes=act_bytes,
              activation_bytes=act_bytes, total_macs=macs,
              layers=[NS(op_type="Conv2d" if conv else "Linear")], memory_capacity={})


def memory_bound(t):  # an MLP-like model: many weights, few MACs
    return estimate(t, 25e6, 100e6, 1e5, conv=False)


def compute_bound(t):  # a CNN-like model: few weights, many MACs
    return estimate(t, 2e9, 1e6, 2e6)


def plan(t, est, **constraints):
    return recommend(est, t, Constraints(**constraints), backends=BACKENDS, rules=[])


def kinds(p):
    return [s.kind for s in p.steps]


# ------------------------------------------------------------------------- constraints
@pytest.mark.parametrize("kw", [{"latency_budget_ms": -1}, {"latency_budget_ms": "fast"},
                                {"memory_budget_bytes": 0}, {"max_accuracy_drop": -0.5},
                                {"stream_rate_fps": True}, {"stream_rate_fps": float("nan")}])
def test_constraints_validated(kw):
    with pytest.raises(UserError) as e:
        Constraints(**kw)
    assert "\n" not in str(e.value) and next(iter(kw)) in str(e.value)


def test_strategies_data_has_seed_tables():
    data = load_strategies()
    assert set(data["defaults"]) == {"nvidia_gpu", "cpu", "mobile_npu", "embedded_mcu"}
    codes = {fm["code"] for fm in data["failure_modes"]}
    assert codes == {"unstructured_pruning_on_gpu", "int4_without_kernels",
                     "shape_changing_pruning_on_npu", "mcu_quantization_noise"}


# ---------------------------------------------------------------------- per target kind
def test_cpu_path_threads_layout_then_int8():
    t = TARGETS["cpu"]()
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 3)
    assert p.step("threads").value == {"intra_op": 8, "inter_op": 1}
    assert p.step("layout").value == "NHWC"
    assert p.step("precision").value.startswith("int8")
    # openvino is preferred but cannot run the dynamic/static int8 picked: switched
    assert p.step("backend").value in ("openvino", "onnxruntime")
    assert p.step("precision").value in BACKENDS[p.step("backend").value].capabilities.precisions
    assert not p.failing and not p.already_met


def test_edge_cpu_quantizes_to_int8_with_an_edge_runtime():
    t = TARGETS["edge_cpu"]()
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms * 0.6)
    assert p.step("backend").value == "tflite"
    assert p.step("precision").value.startswith("int8")
    assert p.step("threads").value["intra_op"] == 4


def test_gpu_picks_fp16_on_tensorrt_no_threads_step():
    t = TARGETS["gpu"]()
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 2)
    assert p.step("backend").value == "tensorrt"
    assert p.step("precision").value == "fp16"  # least aggressive precision that meets it
    assert p.step("threads") is None and p.step("layout") is None


def test_edge_gpu_never_picks_a_precision_the_hardware_lacks():
    t = TARGETS["edge_gpu"]()
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 100)
    assert p.step("precision").value == "fp16"  # no int8 on this GPU
    assert "latency_budget_ms" in p.failing


def test_npu_uses_the_backend_that_declares_the_device():
    t = TARGETS["npu"]()
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 10)
    assert p.step("backend").value == "npu_delegate"
    assert p.step("precision").value == "fp16" or p.step("precision").value == "int8"


def test_npu_without_a_device_backend_warns():
    t = TARGETS["npu"]()
    # tflite and onnxruntime reach an NPU through their delegates / execution providers
    # (data/runtimes.toml): without them and the delegate, no runtime runs there
    backends = {k: v for k, v in BACKENDS.items()
                if k not in ("npu_delegate", "tflite", "onnxruntime")}
    p = recommend(compute_bound(t), t, Constraints(), backends=backends, rules=[])
    assert "no_backend_for_device" in {w.code for w in p.warnings}
    assert p.step("backend") is None


def test_mcu_memory_drives_int8_into_flash_and_sram():
    t = TARGETS["mcu"]()
    est = estimate(t, 5e6, 4e6, 3e5)  # 4 MB of fp32 weights: too big for 2 MB flash
    p = plan(t, est)
    assert "device_memory" not in p.failing
    assert p.baseline.fits_device is False and p.projected.fits_device is True
    assert p.step("precision").value == "int8"
    assert p.step("precision").method.startswith("symmetric")
    assert "mcu_quantization_noise" in {w.code for w in p.warnings}


# ------------------------------------------------------------- model- and constraint-driven
def test_plan_changes_with_memory_vs_compute_bound():
    t = TARGETS["cpu"]()
    mem, comp = memory_bound(t), compute_bound(t)
    assert mem.bound == "memory" and comp.bound == "compute"
    pm = plan(t, mem, latency_budget_ms=mem.roofline_latency_ms / 3)
    pc = plan(t, comp, latency_budget_ms=comp.roofline_latency_ms / 3)
    # weight-only int8 relieves a memory-bound model; a compute-bound one needs int8 compute
    assert pm.step("precision").value == "int8_weight"
    assert pc.step("precision").value in ("int8_dynamic", "int8_static", "int8")
    # when nothing meets it, the architecture step asks for fewer bytes vs fewer MACs
    am = plan(t, mem, latency_budget_ms=mem.roofline_latency_ms / 50).step("architecture")
    ac = plan(t, comp, latency_budget_ms=comp.roofline_latency_ms / 50).step("architecture")
    assert "max_parameter_bytes" in am.value and "max_macs" not in am.value
    assert "max_macs" in ac.value


def test_plan_changes_with_constraints():
    t = TARGETS["cpu"]()
    est = memory_bound(t)
    loose = plan(t, est, latency_budget_ms=est.roofline_latency_ms * 0.6)
    tight = plan(t, est, latency_budget_ms=est.roofline_latency_ms * 0.2, max_accuracy_drop=5)
    assert loose.step("precision").value == "bf16"  # halving the bytes is enough
    assert tight.step("precision").value == "int4_weight"
    strict = plan(t, est, latency_budget_ms=est.roofline_latency_ms * 0.2, max_accuracy_drop=1)
    assert strict.step("precision").value != "int4_weight"
    assert "latency_budget_ms" in strict.failing


def test_stream_rate_batches_on_gpu_but_not_on_edge_cpu():
    t = TARGETS["gpu"]()
    est = estimate(t, 1e8, 200e6, 1e5)  # weight traffic dominates: batching amortizes it
    fps = 1.5 * 1e3 / est.roofline_latency_ms
    p = recommend(est, t, Constraints(stream_rate_fps=fps, max_accuracy_drop=0.0),
                  backends=BACKENDS, rules=[])
    assert p.step("batch_size") is not None and p.step("batch_size").value >= 2
    assert p.projected.throughput_fps >= fps and not p.failing
    te = TARGETS["edge_cpu"]()
    pe = recommend(estimate(te, 1e8, 200e6, 1e5), te,
                   Constraints(stream_rate_fps=1e4, max_accuracy_drop=0.0), backends=BACKENDS,
                   rules=[])
    assert pe.step("batch_size") is None and "stream_rate_fps" in pe.failing


# ---------------------------------------------------------------- already met / infeasible
def with_prediction(t, est, value_ms, *, low_ms=None, high_ms=None, provenance="predicted",
                    **constraints):
    from edgeprof.optimize.router import LatencyFigure

    def latency_of(precision, backend):
        scale = 0.5 if precision != est.precision else 1.0  # a lower precision halves it
        return LatencyFigure(value_ms * scale, provenance,
                             low_ms * scale if low_ms else None,
                             high_ms * scale if high_ms else None, basis="test", backend=backend)

    return recommend(est, t, Constraints(**constraints), backends=BACKENDS, rules=[],
                     latency_of=latency_of)


def test_already_met_stops_without_compression():
    """Met on a predicted figure whose interval's high end is under the budget."""
    t = TARGETS["edge_cpu"]()
    est = compute_bound(t)
    roof = est.roofline_latency_ms
    p = with_prediction(t, est, 1.2 * roof, low_ms=roof, high_ms=1.5 * roof,
                        latency_budget_ms=roof * 2)
    assert p.already_met and not p.failing and not p.undecided
    assert set(kinds(p)) <= {"backend", "threads", "layout"}
    text = p.to_text()
    assert "already meets" in text and "even at its interval's high end" in text
    assert p.baseline.latency_provenance == "predicted"
    assert check_feasible(p) is p


def test_a_roofline_under_the_budget_is_never_met():
    """Issue 21: the roofline is a lower bound; alone it cannot say a budget is met."""
    t = TARGETS["edge_cpu"]()
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms * 2)
    assert not p.already_met and not p.failing
    assert "latency_budget_ms" in p.undecided and "lower bound" in p.undecided["latency_budget_ms"]
    assert "UNDECIDED latency_budget_ms" in p.to_text() and "already meets" not in p.to_text()
    # a roofline over the budget misses it by at least the difference
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 1000)
    assert "by at least" in p.failing_reasons["latency_budget_ms"]


def test_a_prediction_over_the_budget_fails_though_the_roofline_meets_it():
    """Issue 21's tinynet on a Pi 4: roofline 0.83 ms, predicted 1.34-2.13 ms, budget 1 ms."""
    t = TARGETS["edge_cpu"]()
    est = compute_bound(t)
    roof = est.roofline_latency_ms
    p = with_prediction(t, est, 2.0 * roof, low_ms=1.6 * roof, high_ms=2.6 * roof,
                        latency_budget_ms=1.2 * roof, max_accuracy_drop=0.0)
    assert not p.already_met and p.failing == ["latency_budget_ms"]
    assert "(predicted)" in p.failing_reasons["latency_budget_ms"]
    with pytest.raises(ConstraintError):
        check_feasible(p)
    # likely: the value meets the budget, the interval's high end does not
    p = with_prediction(t, est, 1.1 * roof, low_ms=roof, high_ms=1.6 * roof,
                        latency_budget_ms=1.2 * roof)
    assert p.already_met and "likely meets" in p.to_text()


def test_infeasible_names_the_failing_constraint():
    t = TARGETS["edge_cpu"]()
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 1000)
    assert p.failing == ["latency_budget_ms"]
    assert p.step("precision") is not None  # the closest plan is still returned
    assert p.step("architecture") is not None
    with pytest.raises(ConstraintError) as e:
        check_feasible(p)
    assert e.value.exit_code == 4 and "latency_budget_ms" in str(e.value)
    assert "\n" not in str(e.value)


def test_memory_budget_failing_is_named():
    t = TARGETS["cpu"]()
    p = plan(t, memory_bound(t), memory_budget_bytes=1e6)
    assert "memory_budget_bytes" in p.failing
    with pytest.raises(ConstraintError, match="memory_budget_bytes"):
        check_feasible(p)


def test_plan_serializes():
    t = TARGETS["cpu"]()
    p = plan(t, memory_bound(t), latency_budget_ms=1.0)
    d = p.to_dict()
    assert d["projected"]["provenance"] == "estimated"
    assert [s["kind"] for s in d["steps"]] == kinds(p)
    assert d["constraints"]["latency_budget_ms"] == 1.0
    import json

    json.dumps(d)


# ----------------------------------------------------------------------------- plugins
class AlwaysArchitecture:
    name = "user_architecture"
    order = 5
    stage = "deploy"

    def apply(self, ctx):
        return [Step("architecture", "mobilenet_v3_small", "our team standardizes on it")]


class OnnxOnly:
    name = "backend"  # replaces the built-in backend rule
    order = 10
    stage = "deploy"

    def apply(self, ctx):
        return [Step("backend", "onnxruntime", "fleet policy")]


def test_user_rule_through_a_plugin_changes_the_plan():
    plugin = ModuleType("user_router_plugin")

    @hookimpl
    def edgeprof_router_rules():
        return [AlwaysArchitecture(), OnnxOnly()]

    plugin.edgeprof_router_rules = edgeprof_router_rules
    pm = PluginManager(defaults=False, use_env=False, entry_points=False)
    pm.register(plugin, name="user_router_plugin")
    registry = pm.build_registry()
    t = TARGETS["cpu"]()
    est = compute_bound(t)
    before = plan(t, est)
    after = recommend(est, t, Constraints(), backends=BACKENDS, rules=registry)
    assert before.step("backend").value == "openvino"
    assert after.step("backend").value == "onnxruntime"
    assert after.steps[0].value == "mobilenet_v3_small"
    assert "user_architecture" in after.rules


def test_builtin_rules_module_is_a_plugin():
    from edgeprof.optimize import rules as router_rules

    pm = PluginManager(defaults=False, use_env=False, entry_points=False)
    pm.register(router_rules, name="edgeprof.optimize.rules")
    names = [r.name for r, _ in pm.build_registry().router_rules]
    assert names[:2] == ["backend", "threads"] and "failure_modes" in names
    assert [r.name for r in collect_rules()] == [r.name for r in router_rules.default_rules()]


def test_bad_rule_is_a_plugin_error():
    with pytest.raises(PluginError):
        collect_rules(extra=[object()])

    class Bad:
        name = "bad"
        stage = "deploy"

        def apply(self, ctx):
            return ["not a step"]

    t = TARGETS["cpu"]()
    with pytest.raises(PluginError, match="bad"):
        recommend(compute_bound(t), t, Constraints(), backends=BACKENDS, rules=[Bad()])


# ------------------------------------------------------------------------ failure modes
def codes(p):
    return {w.code for w in p.warnings}


def test_unstructured_pruning_on_gpu_is_replaced_by_n_m():
    t = make_target("gpu", "nvidia_gpu", ["fp32", "fp16"], {"fp32": 1e13, "fp16": 2e13}, 9e11,
                    16e9, [16, "unstructured", "NCHW", "fp16", "x"], ["tensorrt"])
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 3, max_accuracy_drop=5)
    assert "unstructured_pruning_on_gpu" in codes(p)
    assert p.step("pruning").value["type"] == "n:m"
    assert p.step("pruning").value["pattern"] == "2:4"


def test_int4_on_cpu_without_int4_kernels_warns():
    t = TARGETS["cpu"]()
    est = memory_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms * 0.2, max_accuracy_drop=5)
    assert p.step("precision").value == "int4_weight"
    assert "int4_without_kernels" in codes(p)
    # a CPU that has int4 kernels gets no warning
    t4 = make_target("cpu", "cpu", ["fp32", "int8", "int4_weight"],
                     {"fp32": 5e11, "int8": 2e12, "int4": 4e12}, 4e10, 16e9,
                     [8, "structured", "NHWC", "int8", "x"], ["openvino"])
    p4 = plan(t4, memory_bound(t4), latency_budget_ms=est.roofline_latency_ms * 0.2,
              max_accuracy_drop=5)
    assert "int4_without_kernels" not in codes(p4)


def test_target_recommending_int4_on_mcu_warns():
    t = make_target("mcu", "embedded_mcu", ["fp32", "int8"], {"fp32": 2e8, "int8": 8e8}, 1e9,
                    1.5e6, [4, "structured", "NCHW", "int8", "seed"], ["tflite"], sram=5e5,
                    flash=2e6)
    p = plan(t, estimate(t, 1e5, 1e4, 1e3))
    assert p.already_met and "int4_without_kernels" in codes(p)


def test_shape_changing_pruning_on_npu_becomes_channel_pruning():
    t = make_target("npu", "mobile_npu", ["fp32", "int8"], {"fp32": 1e11, "int8": 4e12}, 3e10,
                    8e9, [8, "structured", "NCHW", "int8", "x"], ["npu_delegate"])
    est = compute_bound(t)
    p = plan(t, est, latency_budget_ms=est.roofline_latency_ms / 60, max_accuracy_drop=5)
    assert "shape_changing_pruning_on_npu" in codes(p)
    step = p.step("pruning")
    assert step.value["type"] == "channel" and step.value["channel_multiple"] == 8


def test_no_failure_warnings_when_nothing_applies():
    t = TARGETS["edge_cpu"]()
    p = plan(t, compute_bound(t), latency_budget_ms=1e9)
    assert not p.warnings

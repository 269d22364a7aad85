"""Issue 30's boards: the MLPerf Tiny STM32 boards (one descriptor each, sourced, predicted
as the roofline with the documented prior), the Raspberry Pi 5's VideoCore VII GPU
(``--device gpu``) and the RK3588's NPU (``--device npu``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import edgeprof
from edgeprof.cli.main import main
from edgeprof.cli.parser import build_parser
from edgeprof.targets import BUILTIN_DIR, get_target, load_target_file
from edgeprof.targets.schema import DEVICES

TRAIN = (Path(__file__).resolve().parents[2] / "edgeprof" / "profilers" / "predict" / "data"
         / "device_measurements_train.csv")  # the packaged copy of the shared rows

# id -> (core, clock Hz, data SRAM B, flash B, fp32 MAC/cycle, name words the rows use)
MLPERF_TINY = {
    "nucleo_l4r5zi": ("Cortex-M4", 120e6, 640 * 1024, 2 * 1024 ** 2, 0.5, "L4R5ZI"),
    "nucleo_h7a3zi": ("Cortex-M7", 280e6, 1312 * 1024, 2 * 1024 ** 2, 1.0, "H7A3ZI"),
    "disco_f746ng": ("Cortex-M7", 216e6, 320 * 1024, 1024 ** 2, 1.0, "F746NG"),
}


def _t(name: str):
    return load_target_file(BUILTIN_DIR / f"{name}.toml")


@pytest.mark.parametrize("name", sorted(MLPERF_TINY))
def test_mlperf_tiny_board_facts(name):
    core, hz, sram, flash, fp32_per_cycle, chip = MLPERF_TINY[name]
    t = _t(name)
    assert t.kind == "mcu" and t.strategy_class == "embedded_mcu" and t.devices == ("cpu",)
    assert core in t.processor and chip in t.name and chip in t.processor.upper()
    assert t.cores.value == 1 and t.big_cores == 1 and t.frequency.value == hz
    assert t.ram.value == t.sram.value == sram  # no external RAM counted
    assert t.flash.value == flash
    assert t.peak_macs("fp32") == pytest.approx(fp32_per_cycle * hz)
    assert t.peak_macs("int8") == pytest.approx(2 * hz)  # SMLAD: 2 int8 MAC/cycle
    assert "fp16" not in t.peak_compute and "bf16" not in t.peak_compute
    assert t.strategy.precision == "int8_static" and "int4" in t.strategy.reason
    # every figure names its document; derived peaks say so; power estimates say so
    for fld, q in t.figures().items():
        assert any(doc in q.source for doc in ("DS1", "RM0", "TRM")), fld
    for prec in ("fp32", "int8"):
        assert t.peak_compute[prec].source.startswith("derived:")
    assert t.bandwidth.source.startswith("derived:")
    assert t.typical_power.source.startswith("ESTIMATE")


def test_cortex_m4_has_no_pipelined_fma():
    """The M4's fp32 rate is half a MAC a cycle (VMUL + VADD), the M7's one (VFMA)."""
    m4, m7 = _t("nucleo_l4r5zi"), _t("nucleo_h7a3zi")
    assert m4.peak_macs("fp32") / m4.frequency.value == 0.5
    assert m7.peak_macs("fp32") / m7.frequency.value == 1.0
    assert "VMUL.F32" in m4.peak_compute["fp32"].source
    assert m4.last_level_cache_bytes is None  # a Cortex-M4 has no data cache
    assert _t("disco_f746ng").caches["l1d_cache"].value == 4096


@pytest.mark.skipif(not TRAIN.is_file(), reason="the shared training rows are not here")
def test_the_training_rows_name_these_boards():
    """Every MLPerf Tiny row's board is one of the new descriptors, by the chip it names."""
    with open(TRAIN, newline="", encoding="utf-8") as f:
        devices = {r["device"] for r in csv.DictReader(f)}
    tiny = {d for d in devices if "MLPerf Tiny" in d}
    assert tiny
    for d in tiny:
        hits = [n for n, v in MLPERF_TINY.items() if v[5] in d.upper().replace("-", "")
                or v[5][:-2] in d.upper()]
        assert len(hits) == 1, d
        core, hz = MLPERF_TINY[hits[0]][:2]
        assert core.replace("-", "") in d.replace("-", "").replace("®", "")
        assert f"{hz / 1e6:.0f} MHz" in d


@pytest.mark.parametrize("name", sorted(MLPERF_TINY))
def test_mlperf_tiny_boards_are_predicted_from_their_own_rows(name):
    """Each MLPerf Tiny board has its calibration (issue 30's rows of its submissions): a
    runtime with rows there is predicted by it, never below the roofline."""
    family = {"nucleo_l4r5zi": "xcubeai", "nucleo_h7a3zi": "xcubeai",
              "disco_f746ng": "plumerai"}[name]
    p = edgeprof.predict("builtin:tiny_resnet8", name, family, "int8").to_dict()
    assert p["provenance"] == "predicted" and p["method"].startswith("calibrated")
    assert p["calibration"] == f"{name}--published"
    assert p["low_ms"] >= p["roofline_ms"] > 0 and p["low_ms"] <= p["value_ms"] <= p["high_ms"]


def test_targets_lists_the_new_boards(capsys):
    assert main(["targets", "--json"]) == 0
    listed = {t["id"]: t for t in json.loads(capsys.readouterr().out)}
    assert set(MLPERF_TINY) <= set(listed)
    assert listed["raspberry_pi_5"]["devices"] == ["cpu", "gpu"]
    assert listed["rk3588"]["processors"]["npu"]["kind"] == "npu"


# ------------------------------------------------------------------ Pi 5 GPU, RK3588 NPU
def test_gpu_is_a_device_a_descriptor_may_name():
    assert {"cpu", "cuda", "gpu", "npu"} <= set(DEVICES)


def test_raspberry_pi_5_gains_its_videocore_vii():
    t = get_target("raspberry_pi_5")
    assert t.devices == ("cpu", "gpu")
    gpu = t.get_processor("gpu")
    assert gpu.kind == "gpu" and "VideoCore VII" in gpu.name and "Vulkan 1.2" in gpu.name
    assert gpu.frequency.value == 800e6 and gpu.cores.value == 12  # 3 slices x 4 QPUs
    bw, peaks, cores = t.processor_figures("gpu")
    assert bw == t.bandwidth.value  # shares the LPDDR4X with the CPU
    assert peaks == {"fp32": pytest.approx(76.8e9 / 2)}  # 76.8 GFLOPS, no FMA: 1 MAC = 2 FLOP
    assert gpu.peak_compute["fp32"].source.startswith("derived:")
    assert t.processor_figures("cpu")[1]["fp32"] == 4 * 8 * 2.4e9  # the CPU as before


def test_rk3588_gains_its_npu():
    t = get_target("rk3588")
    assert t.devices == ("cpu", "npu")
    npu = t.get_processor("npu")
    assert npu.kind == "npu" and "RKNPU2" in npu.name and npu.cores.value == 3
    bw, peaks, cores = t.processor_figures("npu")
    assert bw == t.bandwidth.value and cores == 3
    assert peaks == {"int8": 6e12 / 2}  # Rockchip's 6 TOPS (int8) in MAC/s
    assert "6 TOPS" in npu.peak_compute["int8"].source
    assert t.big_cores == 4  # the NPU's cores are not CPU cores


@pytest.mark.parametrize("device", ["gpu", "npu", "cuda", "cuda:1", "cpu"])
def test_predict_takes_a_boards_device_names(device):
    ns = build_parser().parse_args(["predict", "builtin:small_cnn", "--target", "rk3588",
                                    "--backend", "tflite", "--device", device])
    assert ns.device == device


def test_predict_refuses_a_device_name_no_board_has(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["predict", "builtin:small_cnn", "--target", "rk3588",
                                   "--backend", "tflite", "--device", "tpu"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "'tpu'" in err and "gpu" in err and "npu" in err


def test_a_device_the_board_lacks_is_a_one_line_exit_2(capsys):
    code = main(["predict", "builtin:small_cnn", "--target", "raspberry_pi_4", "--backend",
                 "tflite", "--device", "npu"])
    err = capsys.readouterr().err
    assert code == 2 and "'npu'" in err and "cpu" in err and "Traceback" not in err

"""Per-processor tables ([processors.cpu], [processors.cuda]): the new boards, the devices a
target offers, their figures, and one-line errors for bad tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgeprof.core.errors import TargetError, UnknownNameError, UserError
from edgeprof.targets import BUILTIN_DIR, get_target, load_target_file


def _t(name: str):
    return load_target_file(BUILTIN_DIR / f"{name}.toml")


def test_raspberry_pi_5_facts():
    t = _t("raspberry_pi_5")
    assert t.kind == "edge_cpu" and t.devices == ("cpu", "gpu")  # + VideoCore VII
    assert t.cores.value == 4 and t.frequency.value == 2.4e9
    assert t.ram.value == 8 * 1024 ** 3
    assert t.bandwidth.value == pytest.approx(4267e6 * 4)  # LPDDR4X-4267, 32-bit bus
    assert t.peak_macs("fp32") == 4 * 8 * 2.4e9  # two 128-bit FMLA pipes
    assert t.peak_macs("fp16") == 2 * t.peak_macs("fp32")
    assert t.peak_macs("int8") == 4 * t.peak_macs("fp32")  # SDOT
    assert "bf16" not in t.peak_compute
    bw, peaks, cores = t.processor_figures("cpu")
    assert (bw, cores) == (t.bandwidth.value, 4) and peaks["int8"] == t.peak_macs("int8")


def test_jetson_orin_nano_facts_and_both_processors():
    t = _t("jetson_orin_nano")
    assert t.kind == "edge_gpu" and t.devices == ("cuda", "cpu")
    assert t.bandwidth.value == 68e9 and "102 GB/s" in t.description  # Super mode noted
    assert t.cores.value == 1024 and t.frequency.value == 6.25e8
    assert t.peak_macs("int8") == 1e13 and t.peak_macs("fp16") == 5e12
    bw, peaks, cores = t.processor_figures("cuda")
    assert (bw, cores) == (68e9, 1024) and peaks == {"fp32": 6.4e11, "fp16": 5e12, "int8": 1e13}
    bw, peaks, cores = t.processor_figures("cpu")
    assert (bw, cores) == (68e9, 6)  # shares the LPDDR5 with the GPU
    assert peaks == {"fp32": 6 * 8 * 1.5e9, "fp16": 6 * 16 * 1.5e9, "int8": 6 * 32 * 1.5e9}
    assert t.get_processor("cpu").kind == "cpu" and t.get_processor("cuda").kind == "gpu"


def test_jetson_nano_gains_its_cpu_cluster_and_keeps_its_gpu():
    t = _t("jetson_nano")
    assert t.devices == ("cuda", "cpu")
    bw, peaks, cores = t.processor_figures("cuda")  # the top-level figures, as before
    assert (bw, cores) == (25.6e9, 128) and peaks["fp16"] == t.peak_macs("fp16")
    bw, peaks, cores = t.processor_figures("cpu")
    assert (bw, cores) == (25.6e9, 4)
    assert peaks == {"fp32": pytest.approx(4 * 4 * 1.43e9)}
    assert "A57" in t.get_processor("cpu").name


def test_raspberry_pi_4_cpu_table_carries_the_theoretical_bandwidth():
    t = _t("raspberry_pi_4")
    assert t.devices == ("cpu",)
    assert t.bandwidth.value == 4.3e9  # the tensor roofline's practical figure is unchanged
    bw, peaks, cores = t.processor_figures("cpu")
    assert bw == 12.8e9 and cores == 4 and peaks["fp32"] == t.peak_macs("fp32")


def test_rk3588_facts():
    """Orange Pi 5 / ROCK 5B class: all 8 cores at the top level, the A76 cluster as the cpu."""
    t = _t("rk3588")
    assert t.kind == "edge_cpu" and t.devices == ("cpu", "npu") and t.modes == {}
    assert t.cores.value == 8 and t.big_cores == 4 and t.frequency.value == 2.4e9
    assert t.bandwidth.value == pytest.approx(4224e6 * 8)  # LPDDR4X-4224, 64-bit
    a76 = {"fp32": 4 * 8 * 2.4e9, "fp16": 4 * 16 * 2.4e9, "int8": 4 * 32 * 2.4e9}
    a55 = {"fp32": 4 * 4 * 1.8e9, "fp16": 4 * 8 * 1.8e9, "int8": 4 * 16 * 1.8e9}
    for prec in a76:  # top level: both clusters; an upper bound the roofline may use
        assert t.peak_macs(prec) == pytest.approx(a76[prec] + a55[prec]), prec
    bw, peaks, cores = t.processor_figures("cpu")  # what runtimes are pinned to
    assert (bw, cores) == (t.bandwidth.value, 4) and peaks == pytest.approx(a76)
    assert t.peak_macs("int8") == pytest.approx(4 * t.peak_macs("fp32"))  # SDOT on both
    # ARMv8.2-A: fp16 arithmetic and the int8 dot product, no bf16
    assert {"fp16", "int8", "int8_static"} <= set(t.supported_precisions)
    assert "bf16" not in t.supported_precisions and "bf16" not in t.peak_compute
    assert t.strategy.precision == "int8_static" and "big_cores" in t.strategy.reason
    assert "NPU" in t.strategy.reason and "RKNN" in t.description
    assert t.last_level_cache_bytes == 3 * 1024 * 1024
    assert "HPL" in t.typical_power.source


BIG_CORES = {"raspberry_pi_4": 4, "raspberry_pi_5": 4, "jetson_nano": 4,
             "jetson_orin_nano": 6, "rk3588": 4, "mcu": 1, "desktop_ddr4": 8, "mobile_npu": 2}


@pytest.mark.parametrize("name", sorted(BIG_CORES))
def test_big_cores(name):
    t = _t(name)
    assert t.big_cores == BIG_CORES[name] and isinstance(t.big_cores, int)
    q = t.figures()["big_cores"]
    assert q.unit == "count" and len(q.source) > 20
    assert t.to_dict()["big_cores"] == BIG_CORES[name]
    if "cpu" in t.processors:  # never more big cores than the CPU table has
        assert t.big_cores <= t.processors["cpu"].cores.value


def test_big_cores_default_and_whole_number(tmp_path):
    nano = NANO.read_text(encoding="utf-8")
    line = next(ln for ln in nano.splitlines() if ln.startswith("big_cores ="))
    p = tmp_path / "nano_nobig.toml"
    p.write_text(nano.replace(line + "\n", ""), encoding="utf-8")
    assert load_target_file(p).big_cores == 4  # default: the [processors.cpu] cores
    pi5 = (BUILTIN_DIR / "raspberry_pi_5.toml").read_text(encoding="utf-8")
    line = next(ln for ln in pi5.splitlines() if ln.startswith("big_cores ="))
    p2 = tmp_path / "pi5_nobig.toml"
    p2.write_text(pi5.replace(line + "\n", ""), encoding="utf-8")
    t = load_target_file(p2)
    assert t.big_cores == 4 and "big_cores" not in t.figures()
    assert _t("nvidia_gpu").big_cores == 6912  # no CPU described: cores, as documented
    p3 = tmp_path / "pi5_half.toml"
    p3.write_text(pi5.replace(line, line.replace("value = 4,", "value = 3.5,")), encoding="utf-8")
    err = _err(p3)
    assert err.field == "compute.big_cores" and "whole" in str(err)


@pytest.mark.parametrize("name,device", [("desktop_ddr4", "cpu"), ("mcu", "cpu"),
                                         ("nvidia_gpu", "cuda"), ("mobile_npu", "npu")])
def test_a_target_without_tables_has_the_device_its_kind_implies(name, device):
    t = _t(name)
    assert t.processors == {} and t.devices == (device,)
    bw, peaks, cores = t.processor_figures(device)
    assert bw == t.bandwidth.value and cores == int(t.cores.value)
    assert peaks == {k: q.value for k, q in t.peak_compute.items()}


def test_unknown_device_is_a_one_line_user_error():
    t = _t("raspberry_pi_5")
    with pytest.raises(UnknownNameError) as e:
        t.processor_figures("cuda")
    assert isinstance(e.value, UserError) and e.value.exit_code == 2
    assert "'cuda'" in str(e.value) and "cpu" in str(e.value) and "\n" not in str(e.value)


def test_processor_figures_appear_in_figures_and_to_dict():
    t = _t("jetson_orin_nano")
    figs = t.figures()
    assert figs["cpu.peak_int8"].value == 2.88e11 and figs["cuda.cores"].value == 1024
    d = json.loads(json.dumps(t.to_dict()))
    assert d["devices"] == ["cuda", "cpu"]
    assert d["processors"]["cpu"]["kind"] == "cpu"
    assert d["figures"]["cpu.frequency"]["unit"] == "Hz"


def test_issue_11_calibrations_still_match_the_edited_descriptors():
    """Adding processor tables changed the descriptors' sha256; the shipped tensor
    calibrations were refreshed so their predictions carry no device-differs warning."""
    from edgeprof.profilers.predict.calibration import SHIPPED_DIR

    for tid in ("raspberry_pi_4", "jetson_nano"):
        cal = json.loads((SHIPPED_DIR / f"{tid}--published.json").read_text())
        assert cal["fingerprint"]["descriptor_sha256"] == get_target(tid).sha256


# ------------------------------------------------------------------ bad tables
NANO = BUILTIN_DIR / "jetson_nano.toml"
CPU_TABLE = NANO.read_text(encoding="utf-8").split("[processors.cpu]")[1]


def _with(tmp_path: Path, old: str, new: str) -> Path:
    text = NANO.read_text(encoding="utf-8")
    assert old in text, old
    p = tmp_path / "bad_nano.toml"
    p.write_text(text.replace(old, new, 1), encoding="utf-8")
    return p


def _err(path: Path) -> TargetError:
    with pytest.raises(TargetError) as e:
        load_target_file(path)
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg and e.value.exit_code == 2
    return e.value


@pytest.mark.parametrize("old,new,field,words", [
    ("[processors.cpu]\n", "[processors.tpu]\n", "processors.tpu", "unknown device"),
    ('kind = "cpu"\n', "", "processors.cpu.kind", "missing"),
    ('kind = "cpu"\n', 'kind = "fpga"\n', "processors.cpu.kind", "not one of"),
    ('name = "4x Arm', 'nme = "4x Arm', "processors.cpu.nme", "unknown key"),
    ("cores = { value = 4, unit = \"count\", source = \"NVIDIA Jetson Nano module datasheet "
     "(DA-09366): quad-core Arm Cortex-A57 MPCore processor",
     "cores = { value = 4, unit = \"cores\", source = \"x: quad-core Arm Cortex-A57 MPCore "
     "processor",
     "processors.cpu.cores", "unit must be 'count'"),
    ("fp32 = { value = 2.288e10", "fp64 = { value = 2.288e10", "processors.cpu.peak.fp64",
     "unknown compute precision"),
    ("[processors.cpu.peak]\nfp32 = { value = 2.288e10", "[processors.cpu.peak]\nfp32 = "
     "{ value = -1", "processors.cpu.peak.fp32", "positive"),
])
def test_bad_processor_table_is_a_one_line_error_naming_the_field(tmp_path, old, new, field,
                                                                  words):
    err = _err(_with(tmp_path, old, new))
    assert err.field == field and words in str(err)


def test_bad_processor_bandwidth_unit_and_missing_peak(tmp_path):
    p = _with(tmp_path, 'name = "4x Arm Cortex-A57 @ 1.43 GHz"\n',
              'name = "4x Arm Cortex-A57 @ 1.43 GHz"\nbandwidth = { value = 25.6, unit = "GB/s",'
              ' source = "datasheet 25.6 GB/s" }\n')
    err = _err(p)
    assert err.field == "processors.cpu.bandwidth" and "GB/s" in str(err)
    text = NANO.read_text(encoding="utf-8")
    p2 = tmp_path / "nopeak.toml"
    p2.write_text(text[:text.index("[processors.cpu.peak]")], encoding="utf-8")
    err = _err(p2)
    assert err.field == "processors.cpu.peak" and "missing" in str(err)


def test_processors_must_be_tables(tmp_path):
    text = NANO.read_text(encoding="utf-8")
    p = tmp_path / "flat.toml"
    p.write_text(text[:text.index("[processors.cpu]")].replace(
        'preferred_backends = [', 'processors = 3\npreferred_backends = [', 1), encoding="utf-8")
    err = _err(p)
    assert err.field == "processors" and "[processors.<device>]" in str(err)
    p2 = tmp_path / "scalar.toml"
    p2.write_text(text[:text.index("[processors.cpu]")] + '[processors]\ncpu = "A57"\n',
                  encoding="utf-8")
    assert _err(p2).field == "processors.cpu"

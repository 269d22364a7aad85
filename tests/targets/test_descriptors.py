"""Built-in target descriptors: every file loads, its facts are right, and bad files fail
with an error that names the file and the field."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from edgeprof.core.errors import TargetError
from edgeprof.core.precision import PRECISIONS
from edgeprof.targets import BUILTIN_DIR, load_target_file
from edgeprof.targets.schema import COMPUTE_PRECISIONS, FIGURES

FILES = sorted(BUILTIN_DIR.glob("*.toml"))
EXPECTED_IDS = {"raspberry_pi_4", "jetson_nano", "desktop_ddr4", "mcu", "nvidia_gpu",
                "mobile_npu"}
BACKENDS = {"torch_eager", "torch_compile", "onnxruntime", "openvino", "tflite", "tensorrt"}
PRECISION_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int8_static": 8,
                  "int8_dynamic": 8, "int8_weight": 8, "int4_weight": 4}


def test_builtin_folder_has_the_six_devices():
    assert EXPECTED_IDS <= {f.stem for f in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_descriptor_loads_and_is_consistent(path: Path):
    t = load_target_file(path)
    assert t.id == path.stem
    assert t.sha256 and len(t.sha256) == 64
    # every figure: positive number in base units with a real source
    for name, q in t.figures().items():
        assert isinstance(q.value, float) and math.isfinite(q.value) and q.value > 0, name
        assert q.source.strip() and len(q.source) > 20, f"{name}: source too thin"
        assert q.unit in {"count", "Hz", "B", "B/s", "W", "MAC/s"}, (name, q.unit)
    assert set(t.peak_compute) <= set(COMPUTE_PRECISIONS)
    assert set(t.preferred_backends) <= BACKENDS and t.preferred_backends
    # the strategy never contradicts the hardware
    s = t.strategy
    assert s.precision in t.supported_precisions
    assert t.peak_macs(PRECISIONS[s.precision].compute) is not None
    assert s.quantization_bits == PRECISION_BITS[s.precision]
    assert len(s.reason) > 40
    for p in t.supported_precisions:
        assert PRECISIONS[p].compute in t.peak_compute


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_derived_peaks_match_their_stated_derivation(path: Path):
    """Where a source says 'a x b x c = N', N must be the value (within rounding)."""
    t = load_target_file(path)
    for name, q in t.figures().items():
        m = re.search(r"x ([\d.]+e\d+) Hz = ([\d.]+e\d+)", q.source)
        if m:
            assert float(m.group(2)) == pytest.approx(q.value, rel=1e-3), name


def test_raspberry_pi_4_facts():
    t = load_target_file(BUILTIN_DIR / "raspberry_pi_4.toml")
    assert t.cores.value == 4
    assert t.frequency.value == 1.5e9
    assert t.bandwidth.value == 4.3e9
    assert "12.8 GB/s" in t.bandwidth.source  # theoretical LPDDR4-3200 x 32-bit noted
    assert not {"fp16", "bf16"} & set(t.supported_precisions)
    assert not {"fp16", "bf16"} & set(t.peak_compute)
    assert t.peak_macs("fp32") == 4 * 8 * 1.5e9
    assert t.strategy.precision.startswith("int8") and t.strategy.layout == "NHWC"


def test_jetson_nano_facts():
    t = load_target_file(BUILTIN_DIR / "jetson_nano.toml")
    assert t.bandwidth.value == 25.6e9
    assert t.peak_macs("fp16") == pytest.approx(236e9, rel=1e-3)
    assert "int8" not in t.peak_compute  # Maxwell: no int8 tensor cores, no dp4a
    assert not any(p.startswith("int8") for p in t.supported_precisions)
    assert t.strategy.precision == "fp16"
    assert "10 W" in t.typical_power.source and "5 W" in t.typical_power.source


def test_mcu_facts():
    t = load_target_file(BUILTIN_DIR / "mcu.toml")
    assert t.kind == "mcu" and t.strategy_class == "embedded_mcu"
    assert t.sram is not None and t.flash is not None
    assert t.flash.value == 2 * 1024 * 1024
    assert t.ram.value == t.sram.value <= 1024 * 1024  # no external RAM
    assert t.frequency.value == 480e6
    assert t.strategy.precision in ("int8", "int8_static")  # not the seed's int4
    assert "int4" in t.strategy.reason


def test_desktop_nvidia_and_npu_facts():
    d = load_target_file(BUILTIN_DIR / "desktop_ddr4.toml")
    assert d.bandwidth.value == 51.2e9
    assert d.peak_macs("fp32") == 8 * 16 * 3.8e9
    assert "bf16" not in d.supported_precisions  # Zen 3 has no bf16
    g = load_target_file(BUILTIN_DIR / "nvidia_gpu.toml")
    assert {"fp32", "fp16", "int8"} <= set(g.peak_compute)
    assert g.peak_macs("int8") == 2 * g.peak_macs("fp16")
    n = load_target_file(BUILTIN_DIR / "mobile_npu.toml")
    assert n.kind == "npu" and n.peak_macs("fp16") == 17e12 / 2


# ------------------------------------------------------------------ validation errors
GOOD = BUILTIN_DIR / "raspberry_pi_4.toml"


def _broken(tmp_path: Path, old: str, new: str, name: str = "broken_pi.toml") -> Path:
    text = GOOD.read_text(encoding="utf-8")
    assert old in text, old
    p = tmp_path / name
    p.write_text(text.replace(old, new, 1), encoding="utf-8")
    return p


def _error(path: Path) -> TargetError:
    with pytest.raises(TargetError) as exc:
        load_target_file(path)
    assert str(path) in str(exc.value)
    assert "\n" not in str(exc.value)
    return exc.value


def test_copy_of_a_good_file_loads_under_its_own_name(tmp_path):
    p = _broken(tmp_path, 'name = "', 'name = "Copy of ', "my_pi.toml")
    assert load_target_file(p).id == "my_pi"


def test_missing_field_names_file_and_field(tmp_path):
    p = _broken(tmp_path, "bandwidth = { value = 4.3e9", "bandwidthx = { value = 4.3e9")
    err = _error(p)
    assert err.field == "memory.bandwidthx"  # unknown key is reported first
    p2 = tmp_path / "no_bw.toml"
    p2.write_text("\n".join(line for line in GOOD.read_text().splitlines()
                            if not line.startswith("bandwidth =")), encoding="utf-8")
    err = _error(p2)
    assert err.field == "memory.bandwidth" and "missing" in str(err)


def test_unknown_top_level_key(tmp_path):
    p = _broken(tmp_path, 'kind = "edge_cpu"', 'kind = "edge_cpu"\ncolour = "red"')
    err = _error(p)
    assert err.field == "colour" and err.path == p


def test_wrong_unit_gb_per_s(tmp_path):
    p = _broken(tmp_path, 'value = 4.3e9, unit = "B/s"', 'value = 4.3, unit = "GB/s"')
    err = _error(p)
    assert err.field == "memory.bandwidth" and "GB/s" in str(err) and "B/s" in str(err)


def test_string_where_a_number_is_expected(tmp_path):
    p = _broken(tmp_path, "cores = { value = 4,", 'cores = { value = "4",')
    err = _error(p)
    assert err.field == "compute.cores" and "number" in str(err)


def test_empty_source(tmp_path):
    text = GOOD.read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith("frequency ="))
    p = tmp_path / "nosource.toml"
    p.write_text(text.replace(line, 'frequency = { value = 1.5e9, unit = "Hz", source = " " }'),
                 encoding="utf-8")
    assert _error(p).field == "compute.frequency"


def test_malformed_toml(tmp_path):
    p = _broken(tmp_path, "[memory]", "[memory")
    err = _error(p)
    assert "malformed TOML" in str(err)


def test_strategy_contradicting_hardware_is_rejected(tmp_path):
    p = _broken(tmp_path, 'precision = "int8_static"', 'precision = "bf16"')
    err = _error(p)
    assert err.field == "strategy.precision"


def test_precision_without_peak_is_rejected(tmp_path):
    p = _broken(tmp_path, 'supported_precisions = ["fp32",',
                'supported_precisions = ["fp16", "fp32",')
    err = _error(p)
    assert err.field == "compute.peak.fp16"


def test_every_figure_section_is_known_to_the_schema():
    for path in FILES:
        t = load_target_file(path)
        for key in t.caches:
            assert key in FIGURES["memory"]

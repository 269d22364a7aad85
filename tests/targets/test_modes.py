"""Target modes (``[modes.<name>]``, named ``TARGET:MODE``): overrides, peaks scaled by the
clock ratio with honest sources, ids and fingerprints, one-line errors, and the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgeprof.core.errors import TargetError, UnknownNameError
from edgeprof.targets import BUILTIN_DIR, ENV_DIR, TargetRegistry, get_target, load_target_file

BUILTIN_MODES = {"jetson_orin_nano": {"super"}, "jetson_nano": {"5w"},
                 "raspberry_pi_4": {"1.8ghz"}}


@pytest.fixture(autouse=True)
def _no_user_dir(monkeypatch):
    monkeypatch.delenv(ENV_DIR, raising=False)


@pytest.fixture(scope="module")
def reg():
    return TargetRegistry()


def all_mode_ids() -> list[str]:
    return [f"{t}:{m}" for t, ms in sorted(BUILTIN_MODES.items()) for m in sorted(ms)]


# ------------------------------------------------------------------------- the builtins
def test_builtin_modes_are_listed_on_the_base(reg):
    for t in reg.all():
        assert set(t.modes) == BUILTIN_MODES.get(t.id, set()), t.id
        assert t.mode is None and t.base_id == t.id
        for m in t.modes.values():
            assert len(m.description) > 40


@pytest.mark.parametrize("tid", all_mode_ids())
def test_mode_target_ids_fingerprint_and_frozen(reg, tid):
    base_id, _, mode = tid.partition(":")
    t, base = reg.get(tid), reg.get(base_id)
    assert (t.id, t.base_id, t.mode) == (tid, base_id, mode)
    assert t.modes == base.modes  # either lists them
    assert t.sha256 and re.fullmatch(r"[0-9a-f]{64}", t.sha256) and t.sha256 != base.sha256
    assert base.sha256 == load_target_file(BUILTIN_DIR / f"{base_id}.toml").sha256
    assert reg.get(tid) is t  # cached
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.bandwidth = base.bandwidth  # type: ignore[misc]
    # what a mode does not touch is the base's
    assert (t.ram, t.strategy, t.supported_precisions, t.caches) == (
        base.ram, base.strategy, base.supported_precisions, base.caches)
    assert t.devices == base.devices
    assert mode in t.name.lower() and mode in t.description
    # every figure is still a positive figure with a real source
    for name, q in t.figures().items():
        assert q.value > 0 and len(q.source) > 20, name


@pytest.mark.parametrize("tid", all_mode_ids())
def test_scaled_peaks_say_so_and_match_their_derivation(reg, tid):
    t = reg.get(tid)
    base = reg.get(t.base_id)
    scaled = 0
    for name, q in t.figures().items():
        if q.source.startswith("scaled"):
            scaled += 1
            assert f"mode '{t.mode}'" in q.source and "ratio" in q.source
            assert "Base figure's source:" in q.source  # provenance kept
            assert name.split(".")[-1].startswith("peak_")  # only peaks are ever scaled
        # the same check the base descriptors get: 'a x b Hz = N' means N is the value
        m = re.search(r"x ([\d.]+e\d+) Hz = ([\d.]+e\d+)", q.source)
        if m:
            assert float(m.group(2)) == pytest.approx(q.value, rel=1e-3), name
    assert scaled > 0
    # bandwidth is never scaled: it is the base's or the mode's own
    assert not t.bandwidth.source.startswith("scaled")
    assert t.bandwidth == base.bandwidth or t.bandwidth.source != base.bandwidth.source


def test_orin_super(reg):
    t, base = reg.get("jetson_orin_nano:super"), reg.get("jetson_orin_nano")
    assert t.frequency.value == 1.02e9 and t.bandwidth.value == 102e9
    assert t.typical_power.value == 25.0 and "1020 MHz" in t.processor
    # int8 / fp16 from NVIDIA's 67 sparse TOPS; fp32 (CUDA cores) scaled by 1020/625
    assert t.peak_macs("int8") == 67e12 / 2 / 2 and t.peak_macs("fp16") == t.peak_macs("int8") / 2
    assert t.peak_macs("fp32") == pytest.approx(6.4e11 * 1020 / 625)
    assert t.peak_macs("fp32") == pytest.approx(1024 * 1.02e9)
    assert "clock ratio" in t.peak_compute["fp32"].source
    assert "67 sparse INT8 TOPS" in t.peak_compute["int8"].source
    # the GPU table follows the top-level figures (same processor), the CPU its own clock
    bw, peaks, cores = t.processor_figures("cuda")
    assert (bw, cores) == (102e9, 1024)
    assert peaks == {k: q.value for k, q in t.peak_compute.items()}
    assert t.get_processor("cuda").frequency.value == 1.02e9
    assert "1020 MHz" in t.get_processor("cuda").name
    bw, peaks, cores = t.processor_figures("cpu")
    assert (bw, cores) == (102e9, 6)  # shares the LPDDR5, at the mode's bandwidth
    assert t.get_processor("cpu").frequency.value == 1.7e9
    assert peaks == pytest.approx({"fp32": 6 * 8 * 1.7e9, "fp16": 6 * 16 * 1.7e9,
                                   "int8": 6 * 32 * 1.7e9})
    assert t.big_cores == 6
    # the base is untouched
    assert base.bandwidth.value == 68e9 and base.peak_macs("int8") == 1e13
    assert base.get_processor("cpu").frequency.value == 1.5e9


def test_jetson_nano_5w(reg):
    t = reg.get("jetson_nano:5w")
    assert t.frequency.value == 640e6 and t.typical_power.value == 5.0
    assert t.peak_macs("fp32") == pytest.approx(128 * 640e6)
    assert t.peak_macs("fp16") == pytest.approx(2 * 128 * 640e6)
    assert t.bandwidth.value == 25.6e9 and "1600 MHz" in t.bandwidth.source  # EMC unchanged
    bw, peaks, cores = t.processor_figures("cpu")
    assert (bw, cores) == (25.6e9, 2)  # 2 cores online
    assert peaks == {"fp32": pytest.approx(2 * 4 * 918e6)}
    assert "core-count and clock ratio" in t.get_processor("cpu").peak_compute["fp32"].source
    assert t.big_cores == 2
    assert reg.get("jetson_nano").big_cores == 4


def test_raspberry_pi_4_at_1_8ghz(reg):
    t, base = reg.get("raspberry_pi_4:1.8ghz"), reg.get("raspberry_pi_4")
    assert t.frequency.value == 1.8e9
    assert t.peak_macs("fp32") == pytest.approx(4 * 8 * 1.8e9)
    assert t.peak_macs("int8") == pytest.approx(4 * 8 * 1.8e9)
    assert t.get_processor("cpu").frequency.value == 1.8e9  # the table moves with the top level
    bw, peaks, cores = t.processor_figures("cpu")
    assert bw == 12.8e9 and cores == 4 and peaks["fp32"] == pytest.approx(5.76e10)
    # memory is not scaled by the CPU clock
    assert t.bandwidth == base.bandwidth
    # a figure that could not be sourced stays the base's value and says so
    assert t.typical_power.value == base.typical_power.value
    assert "NOT SOURCED" in t.typical_power.source


def test_get_target_and_load_target_file_take_a_mode():
    assert get_target("jetson_nano:5w").id == "jetson_nano:5w"
    t = load_target_file(BUILTIN_DIR / "raspberry_pi_4.toml", mode="1.8ghz")
    assert t.id == "raspberry_pi_4:1.8ghz" and t.frequency.value == 1.8e9


def test_to_dict_carries_modes(reg):
    d = reg.get("jetson_orin_nano:super").to_dict()
    assert (d["id"], d["base_id"], d["mode"]) == ("jetson_orin_nano:super", "jetson_orin_nano",
                                                  "super")
    assert set(d["modes"]) == {"super"} and d["big_cores"] == 6
    assert d["descriptor_sha256"] != reg.get("jetson_orin_nano").sha256
    base = reg.get("raspberry_pi_5").to_dict()
    assert base["mode"] is None and base["modes"] == {} and base["base_id"] == "raspberry_pi_5"


# ---------------------------------------------------------------------- unknown modes
def _one_line(err: Exception) -> str:
    msg = str(err)
    assert "\n" not in msg
    return msg


def test_unknown_mode_names_the_known_ones(reg):
    with pytest.raises(UnknownNameError) as exc:
        reg.get("raspberry_pi_4:turbo")
    assert exc.value.exit_code == 2
    msg = _one_line(exc.value)
    assert "raspberry_pi_4:turbo" in msg and "raspberry_pi_4:1.8ghz" in msg
    with pytest.raises(UnknownNameError) as exc:
        reg.get("raspberry_pi_5:super")
    assert "no modes" in _one_line(exc.value)
    with pytest.raises(UnknownNameError) as exc:
        reg.get("jetson_nano:")
    assert "jetson_nano:5w" in _one_line(exc.value)
    with pytest.raises(UnknownNameError) as exc:  # an unknown board is an unknown target
        reg.get("raspbery_pi4:1.8ghz")
    assert exc.value.kind == "target" and exc.value.closest == "raspberry_pi_4"


def test_host_has_no_modes_and_is_not_calibrated_to_say_so(reg, monkeypatch):
    import edgeprof.targets.host as host

    def boom(*a, **k):
        raise AssertionError("host must not be detected for 'host:x'")

    monkeypatch.setattr(host, "host_target", boom)
    with pytest.raises(UnknownNameError) as exc:
        reg.get("host:x")
    msg = _one_line(exc.value)
    assert exc.value.exit_code == 2 and "host:x" in msg and "no modes" in msg


# ------------------------------------------------------------------ validation on load
GOOD = BUILTIN_DIR / "raspberry_pi_4.toml"


def _with_mode(tmp_path: Path, table: str, name: str = "pi_modes.toml") -> Path:
    p = tmp_path / name
    p.write_text(GOOD.read_text(encoding="utf-8") + "\n" + table, encoding="utf-8")
    return p


def _error(path: Path) -> TargetError:
    with pytest.raises(TargetError) as exc:
        load_target_file(path)
    assert str(path) in _one_line(exc.value) and exc.value.exit_code == 2
    return exc.value


def test_a_user_mode_loads_and_applies(tmp_path):
    p = _with_mode(tmp_path, '[modes.eco]\ndescription = "my eco mode"\n[modes.eco.compute]\n'
                   'cores = { value = 2, unit = "count", source = "I offline two cores" }\n')
    t = TargetRegistry(tmp_path).get("pi_modes:eco")
    assert t.cores.value == 2 and t.peak_macs("fp32") == pytest.approx(4.8e10 / 2)
    assert t.get_processor("cpu").cores.value == 2  # same processor as the top level
    assert "core-count ratio" in t.peak_compute["fp32"].source


def test_mode_unknown_key(tmp_path):
    err = _error(_with_mode(tmp_path, '[modes.x]\ndescription = "d"\n[modes.x.memory]\n'
                            'ram = { value = 1e9, unit = "B", source = "more ram" }\n'))
    assert err.field == "modes.x.memory.ram"
    err = _error(_with_mode(tmp_path, '[modes.x]\ndescription = "d"\nvoltage = 1\n'))
    assert err.field == "modes.x.voltage"


def test_mode_wrong_unit(tmp_path):
    err = _error(_with_mode(tmp_path, '[modes.x]\ndescription = "d"\n[modes.x.memory]\n'
                            'bandwidth = { value = 5, unit = "GB/s", source = "faster" }\n'))
    assert err.field == "modes.x.memory.bandwidth" and "B/s" in str(err)


def test_mode_cannot_add_a_precision_or_a_processor(tmp_path):
    err = _error(_with_mode(tmp_path, '[modes.x]\ndescription = "d"\n[modes.x.compute.peak]\n'
                            'fp16 = { value = 1e11, unit = "MAC/s", source = "new" }\n'))
    assert err.field == "modes.x.compute.peak.fp16"
    err = _error(_with_mode(tmp_path, '[modes.x]\ndescription = "d"\n'
                            '[modes.x.processors.cuda]\nname = "a GPU"\n'))
    assert err.field == "modes.x.processors.cuda"


def test_mode_needs_a_description_a_name_and_a_change(tmp_path):
    err = _error(_with_mode(tmp_path, '[modes.x.power]\n'
                            'typical = { value = 5, unit = "W", source = "less" }\n'))
    assert err.field == "modes.x.description"
    err = _error(_with_mode(tmp_path, '[modes."a:b"]\ndescription = "d"\n'))
    assert err.field == "modes.a:b"
    err = _error(_with_mode(tmp_path, '[modes.x]\ndescription = "nothing changes"\n'))
    assert err.field == "modes.x"


def test_mode_cores_must_be_whole(tmp_path):
    err = _error(_with_mode(tmp_path, '[modes.x]\ndescription = "d"\n[modes.x.compute]\n'
                            'big_cores = { value = 1.5, unit = "count", source = "half" }\n'))
    assert err.field == "modes.x.compute.big_cores"


# ------------------------------------------------------------------------------- CLI
def test_cli_targets_lists_modes(capsys):
    from edgeprof.cli.main import main

    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert "modes" in out
    for modes in BUILTIN_MODES.values():
        for m in modes:
            assert m in out
    assert "rk3588" in out
    assert main(["targets", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows["jetson_orin_nano"]["modes"]) == {"super"}
    assert rows["rk3588"]["modes"] == {} and rows["rk3588"]["big_cores"] == 4


def test_cli_targets_show_a_mode(capsys):
    from edgeprof.cli.main import main

    assert main(["targets", "show", "jetson_orin_nano:super"]) == 0
    out = capsys.readouterr().out
    assert "jetson_orin_nano:super" in out and "scaled" in out and "(this one" in out
    assert main(["targets", "show", "jetson_orin_nano:super", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "super" and doc["base_id"] == "jetson_orin_nano"


@pytest.mark.parametrize("target, needle", [("raspberry_pi_4:turbo", "raspberry_pi_4:1.8ghz"),
                                            ("host:x", "no modes")])
def test_cli_unknown_mode_is_exit_2_one_line(capsys, target, needle):
    from edgeprof.cli.main import main

    assert main(["estimate", "builtin:small_cnn", "--target", target]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err and needle in lines[0]


def test_cli_estimate_on_a_mode(capsys):
    from edgeprof.cli.main import main

    assert main(["estimate", "builtin:small_cnn", "--target", "jetson_orin_nano:super",
                 "--json"]) == 0
    assert "jetson_orin_nano:super" in capsys.readouterr().out


def test_profile_unknown_mode_in_a_real_process():
    proc = subprocess.run([sys.executable, "-m", "edgeprof", "profile", "builtin:small_cnn",
                           "--target", "raspberry_pi_4:turbo"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "raspberry_pi_4:1.8ghz" in lines[0]

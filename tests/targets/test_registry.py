"""The target registry: built-ins, the user's folder overriding them, unknown ids."""

from __future__ import annotations

import pytest

from edgeprof.core.errors import TargetError, UnknownNameError
from edgeprof.targets import BUILTIN_DIR, ENV_DIR, TargetRegistry


@pytest.fixture(autouse=True)
def _no_user_dir(monkeypatch):
    monkeypatch.delenv(ENV_DIR, raising=False)


def test_builtins_are_listed_with_host():
    ids = TargetRegistry().ids()
    for i in ("raspberry_pi_4", "jetson_nano", "desktop_ddr4", "mcu", "nvidia_gpu",
              "mobile_npu", "raspberry_pi_5", "jetson_orin_nano", "rk3588", "host"):
        assert i in ids


def test_all_builtins_load():
    targets = TargetRegistry().all()
    assert {t.id for t in targets} >= {"raspberry_pi_4", "mcu"}
    assert not any(t.is_host for t in targets)


def test_user_folder_overrides_builtin(tmp_path):
    text = (BUILTIN_DIR / "raspberry_pi_4.toml").read_text(encoding="utf-8")
    (tmp_path / "raspberry_pi_4.toml").write_text(
        text.replace("value = 4.3e9", "value = 5.5e9"), encoding="utf-8")
    (tmp_path / "my_board.toml").write_text(text, encoding="utf-8")
    reg = TargetRegistry(tmp_path)
    assert reg.get("raspberry_pi_4").bandwidth.value == 5.5e9
    assert reg.path_of("raspberry_pi_4").parent == tmp_path
    assert reg.get("my_board").id == "my_board"
    assert reg.get("jetson_nano").bandwidth.value == 25.6e9  # others still built-in
    assert TargetRegistry().get("raspberry_pi_4").bandwidth.value == 4.3e9


def test_user_folder_from_environment(tmp_path, monkeypatch):
    text = (BUILTIN_DIR / "mcu.toml").read_text(encoding="utf-8")
    (tmp_path / "tiny.toml").write_text(text, encoding="utf-8")
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    assert "tiny" in TargetRegistry().ids()


def test_invalid_user_file_names_the_file(tmp_path):
    (tmp_path / "bad.toml").write_text('name = "x"\n', encoding="utf-8")
    with pytest.raises(TargetError) as exc:
        TargetRegistry(tmp_path).get("bad")
    assert "bad.toml" in str(exc.value)


def test_missing_user_folder(tmp_path):
    with pytest.raises(TargetError):
        TargetRegistry(tmp_path / "nope")


def test_unknown_id_lists_known_names_and_the_closest():
    with pytest.raises(UnknownNameError) as exc:
        TargetRegistry().get("raspbery_pi4")
    err = exc.value
    assert err.closest == "raspberry_pi_4"
    msg = str(err)
    assert "did you mean 'raspberry_pi_4'" in msg
    for i in ("jetson_nano", "mcu", "host"):
        assert i in msg
    assert err.exit_code == 2


def test_modes_are_not_ids_but_resolve():
    reg = TargetRegistry()
    assert not any(":" in i for i in reg.ids())  # modes are listed on their target
    assert reg.get("jetson_orin_nano:super").base_id == "jetson_orin_nano"
    assert reg.get("jetson_orin_nano").modes["super"].description


def test_user_folder_target_with_a_mode_overrides_builtin(tmp_path):
    text = (BUILTIN_DIR / "raspberry_pi_4.toml").read_text(encoding="utf-8")
    (tmp_path / "raspberry_pi_4.toml").write_text(
        text.replace("value = 4.3e9", "value = 5.5e9"), encoding="utf-8")
    t = TargetRegistry(tmp_path).get("raspberry_pi_4:1.8ghz")
    assert t.bandwidth.value == 5.5e9 and t.frequency.value == 1.8e9

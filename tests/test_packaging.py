"""The wheel carries what an installed edgeprof needs: the default plugins.toml, the target
descriptors, the router's data and the profile.json schema; and not the build-only code of
tools/ (rebuilding the shipped calibrations)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contains_default_plugins_and_data(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                           str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("edgeprof-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "edgeprof/plugins.toml" in names
    assert (ROOT / "plugins.toml").read_bytes() == zipfile.ZipFile(wheel).read("edgeprof/plugins.toml")
    for f in (ROOT / "edgeprof" / "targets" / "data").glob("*.toml"):
        assert f"edgeprof/targets/data/{f.name}" in names
    assert "edgeprof/targets/strategies.toml" in names
    assert "edgeprof/schema/profile.schema.json" in names
    assert "edgeprof/schema/llm_profile.schema.json" not in names  # one schema, both kinds
    # build-only code (rebuilding the shipped calibrations) is the repository's tools/, never
    # installed: not in the wheel, and no longer in the package it builds data for
    assert not [n for n in names if n.startswith("tools/") or "/tools/" in n], names
    assert (ROOT / "tools" / "build_board_calibrations.py").is_file()
    assert (ROOT / "tools" / "build_llm_calibration.py").is_file()
    boards = zipfile.ZipFile(wheel).read("edgeprof/profilers/predict/boards.py").decode()
    assert "def build_all" not in boards and "def interval_coverage" in boards
    files = zipfile.ZipFile(wheel).read("edgeprof/profilers/predict/llm/files.py").decode()
    assert "def build_calibration" not in files and "def write_calibration" not in files

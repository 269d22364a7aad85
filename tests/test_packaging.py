"""The wheel carries what an installed edgeprof needs: the default plugins.toml, the target
descriptors, the router's data and the profile.json schema."""

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
    assert "edgeprof/schema/llm_profile.schema.json" in names

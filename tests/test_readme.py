"""The README's "Writing a backend plugin" walkthrough, run exactly as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    nxt = text.find("\n## ", start + 1)
    return text[start:nxt if nxt > 0 else None]


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def _tiny_onnx(path: Path) -> Path:
    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(8, 4)).eval()
    torch.onnx.export(model, (torch.randn(1, 3, 16, 16),), str(path), dynamo=False,
                      input_names=["x"], output_names=["y"])
    return path


def test_backend_plugin_walkthrough_runs_as_written(tmp_path):
    section = _section("Writing a backend plugin")
    code = _blocks(section, "python")[0]
    toml = _blocks(section, "toml")[0]
    assert code.startswith("# my_backend.py")
    (tmp_path / "my_backend.py").write_text(code)
    (tmp_path / "plugins.toml").write_text(toml)
    model = _tiny_onnx(tmp_path / "model.onnx")

    listing = subprocess.run([sys.executable, "-m", "edgeprof", "backends", "--plugins",
                              str(tmp_path / "plugins.toml")],
                             capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert listing.returncode == 0, listing.stderr
    assert "ort_unoptimized" in listing.stdout

    done = subprocess.run([sys.executable, "-m", "edgeprof", "profile", str(model),
                           "--plugins", str(tmp_path / "plugins.toml"),
                           "--target", "host", "--backend", "ort_unoptimized",
                           "--min-time", "0.05", "--runs", "20", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    (run,) = doc["runs"]
    assert run["backend"] == "ort_unoptimized" and run["status"] == "ok"
    assert run["benchmark"]["stats"]["median_ms"] > 0


def test_calibrate_from_measurements_example_runs_as_written(tmp_path):
    """The README's NAS-Bench-201 worked example: calibrate a Pi 4 from ten timed networks,
    then predict one with the calibration."""
    import os

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("### Calibrate from your own measurements")
    block = _blocks(text[start:text.index("\n## ", start)], "bash")[0]
    commands = [c.replace("\\\n", " ") for c in re.split(r"\n(?=edgeprof )", block.strip())]
    assert len(commands) == 2
    env = {**os.environ, "EDGEPROF_CALIBRATIONS_DIR": str(tmp_path / "cals")}
    out = []
    for c in commands:
        argv = c.replace("nb201-pi4.json", str(tmp_path / "nb201-pi4.json")).split()
        assert argv[0] == "edgeprof"
        done = subprocess.run([sys.executable, "-m", "edgeprof", *argv[1:]], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        out.append(done.stdout)
    assert "nested leave-one-out" in out[0] and (tmp_path / "nb201-pi4.json").exists()
    assert "predicted" in out[1] and "raspberry_pi_4--measured-tflite-fp32-t1" in out[1]


#: what a user of the README needs, in order (the brief's list: the two commands, the CLI, the
#: Python API, how to add a backend plugin and a target, the measured figures)
SECTIONS = ("The two commands", "Architecture", "Command line", "The HTML report", "Backends",
            "Predicted latency", "Profile on your own boards", "Python API",
            "Writing a backend plugin", "Adding a target", "Measured figures")


def test_the_readme_keeps_every_section_a_user_needs_in_order():
    """An edit that splices one section's text up to a later heading cuts what lies between
    (it once removed Command line ... Profile on your own boards, 1,130 lines)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## (.+)$", text, flags=re.M)
    assert [h for h in heads if h in SECTIONS] == list(SECTIONS), heads
    for title in SECTIONS:
        assert len(_section(title).splitlines()) > 5, title

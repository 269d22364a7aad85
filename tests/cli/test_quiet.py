"""Quiet output (issue 21): the runtimes' log noise (absl/oneDNN/TensorFlow banners, torch
FutureWarnings, ONNX Runtime's quantization advice) is off stderr by default; --debug shows
it. Each run gets a cold cache, so the quantizers really run."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings

import pytest

from edgeprof.cli.quiet import QUIET_ENV, quieted

NOISE = ("absl", "oneDNN", "FutureWarning", "pre-processing before quantization",
         "UserWarning", "WARNING:root", "Created TensorFlow Lite XNNPACK delegate")
RUN = ["profile", "builtin:small_cnn", "--max-time", "0.2", "--min-time", "0.1", "--runs", "5"]


def _edgeprof(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EDGEPROF_CACHE_DIR": str(tmp_path / "cache")}
    for key in QUIET_ENV:  # as a user's shell has them: unset
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "edgeprof", *args], capture_output=True,
                          text=True, env=env, timeout=900)


def test_third_party_noise_is_off_stderr_by_default(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("ai_edge_litert")
    proc = _edgeprof(tmp_path, *RUN, "--backend", "tflite,onnxruntime", "--precision",
                     "fp32,int8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    noisy = [ln for ln in proc.stderr.splitlines() if any(n in ln for n in NOISE)]
    assert not noisy, "\n".join(noisy)
    assert "onnxruntime" in proc.stdout and "tflite" in proc.stdout


def test_debug_shows_the_runtimes_output(tmp_path):
    pytest.importorskip("onnxruntime")
    proc = _edgeprof(tmp_path, *RUN, "--backend", "onnxruntime", "--precision", "int8",
                     "--debug")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "pre-processing before quantization" in proc.stderr


def test_quieted_restores_what_it_changed(monkeypatch):
    for key in QUIET_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # the user's own setting is kept
    root = logging.getLogger()
    before = root.level
    with quieted():
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
        assert os.environ["PYTHONWARNINGS"] == "ignore"
        assert root.level >= logging.ERROR
        assert warnings.filters[0][0] == "ignore"  # torch's FutureWarnings and the like
    assert "PYTHONWARNINGS" not in os.environ and root.level == before
    with quieted(debug=True):
        assert "PYTHONWARNINGS" not in os.environ and root.level == before


def test_torchs_pytree_deprecation_is_off_stderr_unless_debug():
    """torchao registers an Enum with torch's pytree when imported (tflite's int8 conversion
    does, in optimize): torch logs a deprecation on its own handler, which it sets up at
    import, over the levels quieted() set (issue 29, finding 16)."""
    pytest.importorskip("torchao")
    code = ("import sys; from edgeprof.cli.quiet import quieted\n"
            "with quieted(debug=sys.argv[1] == 'debug'):\n"
            "    import torch\n"
            "    from torchao.quantization.pt2e import quantize_pt2e\n"
            "import logging; logging.getLogger('torch.utils._pytree').warning('%s kept', 'x')\n")
    runs = {mode: subprocess.run([sys.executable, "-c", code, mode], capture_output=True,
                                 text=True, timeout=300) for mode in ("quiet", "debug")}
    assert all(r.returncode == 0 for r in runs.values()), runs
    assert "is an Enum subclass" not in runs["quiet"].stderr, runs["quiet"].stderr
    assert "x kept" in runs["quiet"].stderr  # only that message, and only inside quieted()
    assert "is an Enum subclass" in runs["debug"].stderr  # --debug shows everything

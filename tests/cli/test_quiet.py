"""Quiet output (issue 21): the runtimes' log noise (absl/oneDNN/TensorFlow banners, torch
FutureWarnings, ONNX Runtime's quantization advice) is off stderr by default; --debug shows
it. Each run gets a cold cache, so the quantizers really run."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from edgeprof.cli.quiet import QUIET_ENV, quieted
from tests.processes import finished

NOISE = ("absl", "oneDNN", "FutureWarning", "pre-processing before quantization",
         "UserWarning", "WARNING:root", "Created TensorFlow Lite XNNPACK delegate")
RUN = ["profile", "builtin:small_cnn", "--max-time", "0.2", "--min-time", "0.1", "--runs", "5"]


def _start(cache, *args: str) -> subprocess.Popen:
    env = {**os.environ, "EDGEPROF_CACHE_DIR": str(cache)}
    for key in QUIET_ENV:  # as a user's shell has them: unset
        env.pop(key, None)
    return subprocess.Popen([sys.executable, "-m", "edgeprof", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, empty_cache_at) -> dict[str, tuple[int, str, str]]:
    """The two profiles, each with a cold cache (so the quantizers really run), at once:
    name -> (exit status, stdout, stderr)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("ai_edge_litert")
    def cold() -> Path:
        return empty_cache_at(tmp_path_factory.mktemp("cache"))

    started = {
        "default": _start(cold(), *RUN, "--backend", "tflite,onnxruntime", "--precision",
                          "fp32,int8"),
        "debug": _start(cold(), *RUN, "--backend", "onnxruntime", "--precision", "int8",
                        "--debug")}
    return finished(started, timeout=900)


def test_third_party_noise_is_off_stderr_by_default(runs):
    code, out, err = runs["default"]
    assert code == 0, err[-3000:]
    noisy = [ln for ln in err.splitlines() if any(n in ln for n in NOISE)]
    assert not noisy, "\n".join(noisy)
    assert "onnxruntime" in out and "tflite" in out


def test_debug_shows_the_runtimes_output(runs):
    code, _, err = runs["debug"]
    assert code == 0, err[-3000:]
    assert "pre-processing before quantization" in err


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
    started = {mode: subprocess.Popen([sys.executable, "-c", code, mode], text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for mode in ("quiet", "debug")}  # both at once
    err = {mode: p.communicate(timeout=300)[1] for mode, p in started.items()}
    assert all(p.returncode == 0 for p in started.values()), err
    assert "is an Enum subclass" not in err["quiet"], err["quiet"]
    assert "x kept" in err["quiet"]  # only that message, and only inside quieted()
    assert "is an Enum subclass" in err["debug"]  # --debug shows everything

"""Under the CLI, stdout carries edgeprof's own output only: a runtime's native chatter (MNN's
"The device supports: ..." printed by C code when MNN is imported, a converter's child
process, C stdio buffers flushed late) goes to stderr, so ``--json`` stays one JSON document
for every backend (issue 32)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import finished

ROOT = Path(__file__).resolve().parents[2]


def _start(*argv: str, env_cache: Path) -> subprocess.Popen:
    import os

    env = dict(os.environ, EDGEPROF_CACHE_DIR=str(env_cache))
    return subprocess.Popen([sys.executable, "-m", "edgeprof", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


BACKENDS = ("mnn", "ncnn", "executorch")
FAST = ("--runs", "3", "--min-time", "0.01", "--warmup", "1")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, empty_cache_at) -> dict[str, tuple[int, str, str]]:
    """Both profiles at once: name -> (exit status, stdout, stderr)."""
    def cold() -> Path:
        return empty_cache_at(tmp_path_factory.mktemp("cache"))

    started = {
        "inline": _start("profile", "builtin:small_cnn", "--backend", ",".join(BACKENDS),
                         "--json", *FAST, env_cache=cold()),
        # a spawned worker inherits the command's file descriptors: its runtime's chatter
        # must not reach stdout either
        "isolated": _start("profile", "builtin:small_cnn", "--backend", "mnn", "--json",
                           "--isolate", *FAST, env_cache=cold())}
    return finished(started, timeout=300)


def test_json_stdout_is_one_document_for_native_runtimes(runs):
    code, out, err = runs["inline"]
    assert code == 0, err[-2000:]
    doc = json.loads(out)  # nothing before or after the document
    assert [(run["backend"], run["status"]) for run in doc["runs"]] == [
        (b, "ok") for b in BACKENDS], doc["runs"]
    assert "The device supports" in err  # MNN's line is not lost, it is on stderr


def test_json_stdout_is_a_document_with_isolated_workers(runs):
    code, out, err = runs["isolated"]
    assert code == 0, err[-2000:]
    assert json.loads(out)["runs"][0]["status"] == "ok"


_GUARDED = r"""
import ctypes, os, subprocess, sys
from edgeprof.cli.quiet import native_output_to_stderr
libc = ctypes.CDLL(None)
with native_output_to_stderr():
    os.write(1, b"native write\n")
    libc.printf(b"c buffered\n")            # C stdio: block-buffered into a pipe
    subprocess.run([sys.executable, "-c", "print('child process')"])
    print("document")
    sys.stdout.flush()
print("after")
"""


def test_the_guard_sends_native_writes_to_stderr_and_keeps_python_output():
    r = subprocess.run([sys.executable, "-c", _GUARDED], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "document\nafter\n", r.stdout
    for line in ("native write", "c buffered", "child process"):
        assert line in r.stderr, r.stderr


def test_the_guard_leaves_a_non_file_stdout_alone(capsys):
    """In-process callers (tests, notebooks) whose sys.stdout is not file descriptor 1 keep
    their sys.stdout; the guard only moves the descriptor."""
    from edgeprof.cli.quiet import native_output_to_stderr

    before = sys.stdout
    with native_output_to_stderr():
        assert sys.stdout is before
        print("kept")
    assert sys.stdout is before
    assert capsys.readouterr().out == "kept\n"

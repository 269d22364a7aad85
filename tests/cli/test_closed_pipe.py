"""A closed output pipe (``edgeprof recommend ... | head -1``) ends the command quietly, as
a Unix tool does: exit 141 (128 + SIGPIPE, what the shell reports for a tool SIGPIPE ended),
no traceback, no "internal error", for every command and every way it prints (print, rich,
argparse's help) (issue 29, finding 12). A broken pipe that is not the output stays an
internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgeprof.cli.main import main
from edgeprof.cli.signals import CLOSED_OUTPUT_EXIT

ROOT = Path(__file__).resolve().parents[2]


def _with_closed_stdout(argv: list[str]) -> subprocess.CompletedProcess:
    """Run edgeprof with its stdout a pipe whose reader has already gone (``| head -0``)."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([sys.executable, "-m", "edgeprof", *argv], cwd=ROOT, stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)


@pytest.mark.parametrize("argv,codes", [
    (["recommend", "builtin:small_cnn", "--target", "raspberry_pi_4",
      "--latency-budget-ms", "5"], {CLOSED_OUTPUT_EXIT}),  # print()
    (["targets"], {CLOSED_OUTPUT_EXIT}),  # a rich table
    # argparse, before any command runs: it drops its own write errors, so its 0 stands
    (["--help"], {0, CLOSED_OUTPUT_EXIT}),
], ids=["print", "rich", "argparse"])
def test_a_closed_pipe_ends_the_command_quietly(argv, codes):
    done = _with_closed_stdout(argv)
    assert CLOSED_OUTPUT_EXIT == 141 and done.returncode in codes, done.stderr
    assert done.stderr == ""  # no traceback, no "internal error", no "Exception ignored"


def test_a_broken_pipe_that_is_not_the_output_is_an_internal_error(monkeypatch, capsys):
    import edgeprof.cli.commands as commands

    def worker_gone(args):
        raise BrokenPipeError(32, "Broken pipe")  # e.g. a worker process's pipe

    monkeypatch.setattr(commands, "cmd_backends", worker_gone)
    from edgeprof.cli import parser

    monkeypatch.setattr(parser, "cmd_backends", worker_gone)
    assert main(["backends"]) == 1
    err = capsys.readouterr().err
    assert "internal error: BrokenPipeError" in err and len(err.strip().splitlines()) == 1

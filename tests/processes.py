"""Test support: subprocesses started together and waited for together, so that tests whose
time is mostly each process's start-up (imports, a converter's own child) overlap on the
machine's cores instead of queueing."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping


def finished(started: Mapping[str, subprocess.Popen], timeout: float
             ) -> dict[str, tuple[int, str, str]]:
    """Wait for every process of ``started`` (started with text pipes for stdout and
    stderr): name -> (exit status, stdout, stderr)."""
    done = {}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=timeout)
        done[name] = (proc.returncode, out, err)
    return done

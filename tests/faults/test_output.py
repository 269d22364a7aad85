"""--out under faults: two processes writing one folder, a full disk after measuring, and
folders that cannot be written (refused before anything is measured)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from tests.faults.inject import (FAST, MODEL, check_complete, launch, out_leftovers,
                                 previous_result, snapshot)


def test_two_processes_writing_one_out_leave_one_complete_result(warm, plugins, tmp_path):
    out = tmp_path / "out"
    common = ["profile", MODEL, *FAST, "--plugins", str(plugins), "--out", str(out)]
    # one run (no backend_comparison.csv) against two runs (with it), both slow to write
    one = launch([*common, "--backend", "torch_eager"], tmp_path,
                 env={"FAULT_SLOW_WRITE": "1.5"})
    two = launch([*common, "--backend", "torch_eager,fault_raise"], tmp_path,
                 env={"FAULT_SLOW_WRITE": "0.5"})
    r1, r2 = one.wait(), two.wait()
    assert (r1.rc, r2.rc) == (0, 3), (r1.stderr[-2000:], r2.stderr[-2000:])
    doc = check_complete(out)
    comparison = (out / "backend_comparison.csv").exists()
    assert comparison == (len(doc["runs"]) == 2), "files of two runs mixed in one folder"
    assert out_leftovers(out) == []


@pytest.mark.parametrize("command", [
    ["profile", MODEL, *FAST], ["profile", MODEL, *FAST, "--json"],
    ["batch", MODEL, *FAST, "--batch-sizes", "1,2"],
    ["optimize", "builtin:mlp", *FAST, "--backend", "torch_eager", "--compression", "none",
     "--train-seconds", "1", "--finetune-steps", "0"]],
    ids=["profile", "profile-json", "batch", "optimize"])
def test_a_full_disk_after_measuring_still_prints_the_results(warm, tmp_path, monkeypatch,
                                                              capsys, command):
    """In this process: every CSV write fails with ENOSPC, as on a full disk."""
    import pandas as pd

    from edgeprof.cli.main import main

    out = tmp_path / "out"
    before = previous_result(out)

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    code = main([*command, "--out", str(out)])
    cap = capsys.readouterr()
    messages = [ln for ln in cap.err.splitlines() if ln.startswith("edgeprof:")]
    assert code == 2, cap.err
    assert len(messages) == 1 and "No space left on device" in messages[0], cap.err
    assert str(out) in messages[0]
    if "--json" in command:
        assert json.loads(cap.out)["runs"][0]["status"] == "ok"
    else:
        assert "torch_eager" in cap.out  # the results table (optimize: its ranking)
    assert snapshot(out) == before and out_leftovers(out) == []


def unwritable(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # chmod does not stop root; /sys refuses even root
        return Path("/sys/edgeprof-faults-out")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro / "out"


@pytest.mark.parametrize("case", ["read-only", "a-file", "under-a-file", "foreign-files"])
@pytest.mark.parametrize("command", ["profile", "optimize", "batch"])
def test_an_unusable_out_is_refused_before_measuring(tmp_path, case, command):
    (tmp_path / "f").write_text("x")
    out = {"read-only": unwritable(tmp_path), "a-file": tmp_path / "f",
           "under-a-file": tmp_path / "f" / "out", "foreign-files": tmp_path}[case]
    res = launch([command, MODEL, *FAST, "--out", str(out)], tmp_path).wait(timeout=60)
    assert res.rc == 2, res.stderr
    assert res.stdout == ""  # nothing measured, nothing printed
    assert len(res.messages) == 1 and str(out) in res.messages[0], res.stderr
    assert "internal error" not in res.stderr

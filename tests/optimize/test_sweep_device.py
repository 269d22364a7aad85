"""``[run] device`` / ``sweep --device``: a sweep's jobs run on the processor profile
``--device`` names, here or on each board; a device the file can't name, or a CUDA index
for the generative runtimes, is a one-line error naming the field; a resumed sweep keeps
the device it started with."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from edgeprof.cli.main import main
from edgeprof.optimize.sweep import load_sweep

TENSOR = """
models = ["builtin:mlp"]
targets = ["raspberry_pi_4"]
backends = ["torch_eager"]
precisions = ["fp32"]
[run]
runs = 5
max_time = 0.3
"""

GENERATE = """
[generate]
models = ["llm:smollm2-135m"]
backends = ["llama_cpp"]
formats = ["q4_0"]
prompt_tokens = 16
gen_tokens = 4
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "dev.toml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("extra, why", [
    ("device = 'gpu'\n", "must be cpu, cuda, cuda:N, vulkan or vulkan:N, got 'gpu'"),
    ("device = 0\n", "must be cpu, cuda, cuda:N, vulkan or vulkan:N, got 0"),
])
def test_a_device_the_file_cannot_name_exits_2_naming_the_field(tmp_path, capsys, extra, why):
    path = write(tmp_path, TENSOR + extra)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert "field 'run.device'" in err and why in err and "Traceback" not in err
    assert not (tmp_path / "dev.sqlite").exists()


def test_the_generative_runtimes_take_no_cuda_index(tmp_path, capsys):
    path = write(tmp_path, TENSOR + "device = 'cuda:1'\n" + GENERATE)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert "field 'run.device'" in err and "no CUDA index" in err
    assert load_sweep(write(tmp_path, TENSOR + "device = 'cuda:1'\n")).config(
        "fp32", 1).device == "cuda:1"  # a tensor sweep may name one


def test_the_cli_flag_rejects_a_device_it_cannot_name(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(write(tmp_path, TENSOR)), "--device", "gpu"])
    assert e.value.code == 2 and "device must be cpu, cuda, cuda:N, vulkan or vulkan:N" in capsys.readouterr().err


def test_sweep_device_cuda_runs_each_job_there_and_a_resume_keeps_it(tmp_path, capsys):
    path = write(tmp_path, TENSOR)
    code = main(["sweep", str(path), "--device", "cuda", "--json"])
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["results"]
    with sqlite3.connect(tmp_path / "dev.sqlite") as db:
        (rec,) = [json.loads(r) for (r,) in db.execute("SELECT record FROM results")]
        (settings,) = db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
    assert json.loads(settings)["device"] == "cuda" and row["device"] == "cuda"
    assert rec["config"]["device"] == "cuda"  # what the backend was asked for
    assert "run on this host's cuda device" in rec["notes"]
    if _has_cuda():
        assert code == 0 and row["status"] == "ok"
    else:  # the backend's own reason, as profile --device cuda gives it
        assert row["status"] == "unsupported" and "CUDA" in row["reason"]
    # a resumed sweep must measure the same way: not on the CPU this time
    assert main(["sweep", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "'device': 'cuda'" in err and "measure the same way" in err

"""Options that name an output FILE (``calibrate --out FILE.json``, ``--html FILE``): a
folder means "write the file in it", as ``profile --out DIR`` writes in DIR, and a path that
cannot be written is one line, exit 2, before any work (issue 29, finding 11: ``calibrate
--out an_existing_folder`` was "internal error: IsADirectoryError", exit 1, after the fit)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import edgeprof.api
from edgeprof.cli.main import main as _main


def main(argv: list[str]) -> int:
    """The exit status, whether the parser (SystemExit) or the command ends the call."""
    try:
        return _main(argv)
    except SystemExit as e:
        return e.code

TIMINGS = "model,latency_ms,threads\nbuiltin:small_cnn,2.5,4\n"
LLM_TIMINGS = ("model,precision,test,tokens_per_s,threads\n"
               "llm:qwen2.5-0.5b,q4_k_m,pp512,130,4\nllm:qwen2.5-0.5b,q4_k_m,tg128,22.5,4\n")
TENSOR = ["--target", "raspberry_pi_4", "--backend", "tflite"]
LLM = ["--target", "raspberry_pi_5", "--backend", "llama_cpp"]


@pytest.fixture()
def user_dir(tmp_path, monkeypatch):
    d = tmp_path / "user-calibrations"
    d.mkdir()
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(d))
    return d


@pytest.mark.parametrize("kind,timings,name", [
    ("tensor", TIMINGS, "raspberry_pi_4--measured-tflite-fp32-t4.json"),
    ("llm", LLM_TIMINGS, "llm--raspberry_pi_5--measured-llama_cpp-cpu.json"),
], ids=["tensor", "llm"])
def test_calibrate_out_a_folder_writes_the_calibration_in_it(tmp_path, user_dir, capsys, kind,
                                                             timings, name):
    csv = tmp_path / "m.csv"
    csv.write_text(timings)
    folder = tmp_path / "cals"
    folder.mkdir()
    flags = TENSOR if kind == "tensor" else LLM
    assert main(["calibrate", *flags, "--measurements", str(csv), "--out", str(folder)]) == 0
    cap = capsys.readouterr()
    assert "internal error" not in cap.err
    (written,) = folder.iterdir()
    assert written.name == name  # the name it has in the calibration folder
    assert f"saved to {written}" in cap.out
    assert json.loads(written.read_text())["name"] == name.removesuffix(".json")
    assert not any(user_dir.iterdir())


def _read_only(tmp_path) -> Path:
    if os.geteuid() == 0:  # chmod does not stop root; /sys refuses even root
        return Path("/sys/edgeprof-test.json")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro / "cal.json"


@pytest.mark.parametrize("kind", ["tensor", "llm"])
@pytest.mark.parametrize("case", ["under-a-file", "read-only", "a-device"])
def test_an_unusable_calibrate_out_is_refused_before_the_fit(tmp_path, user_dir, capsys,
                                                             monkeypatch, kind, case):
    def no_fit(*a, **k):
        raise AssertionError("the fit ran before --out was checked")

    monkeypatch.setattr(edgeprof.api, "calibrate_measurements", no_fit)
    monkeypatch.setattr(edgeprof.api, "calibrate_llm_measurements", no_fit)
    (tmp_path / "f").write_text("x")
    out = {"under-a-file": tmp_path / "f" / "cal.json", "read-only": _read_only(tmp_path),
           "a-device": Path(os.devnull)}[case]
    csv = tmp_path / "m.csv"
    csv.write_text(TIMINGS if kind == "tensor" else LLM_TIMINGS)
    flags = TENSOR if kind == "tensor" else LLM
    assert main(["calibrate", *flags, "--measurements", str(csv), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(out) in err, err
    assert "internal error" not in err and (tmp_path / "f").read_text() == "x"


def test_an_html_file_under_a_file_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    def no_work(*a, **k):
        raise AssertionError("the profile ran before --html was checked")

    monkeypatch.setattr(edgeprof.api, "profile", no_work)
    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" / "report.html"
    assert main(["profile", "builtin:mlp", "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(out) in err and "lies under a file" in err

"""recommend and optimize consider ncnn, MNN and ExecuTorch where the target's processors run
them (issue 32): they are edgeprof backends (measured by optimize, not prediction-only),
the runtimes of a board's CPU, and of no microcontroller."""

from __future__ import annotations

import pytest

from edgeprof.targets import get_target

NATIVE = ("ncnn", "mnn", "executorch")


@pytest.fixture(autouse=True)
def _only_shipped(tmp_path, monkeypatch):
    d = tmp_path / "user-calibrations"
    d.mkdir()
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(d))


def test_they_are_runtimes_of_a_boards_cpu_and_not_of_an_mcu(registry):
    from edgeprof.optimize.candidates import runtime_classes

    pi5 = runtime_classes(registry, get_target("raspberry_pi_5"))
    for name in NATIVE:
        assert name in pi5 and not getattr(pi5[name], "prediction_only", False), name
    assert not set(NATIVE) & set(runtime_classes(registry, get_target("mcu")))


def test_optimize_measures_them_at_the_precisions_they_offer(registry):
    from types import SimpleNamespace

    from edgeprof.optimize.candidates import default_candidates

    handle = SimpleNamespace(format="torch")
    cands = default_candidates(None, registry, handle, get_target("raspberry_pi_5"),
                               compressions=())
    got = {(c.backend, c.precision) for c in cands}
    assert {("ncnn", "fp32"), ("ncnn", "fp16"), ("mnn", "fp32"), ("mnn", "int8_weight"),
            ("executorch", "fp32"), ("executorch", "int8_static")} <= got
    assert ("ncnn", "int8") not in got and ("mnn", "int8") not in got


def test_recommend_on_the_pi5_weighs_them(capsys):
    from edgeprof.cli.main import main

    rc = main(["recommend", "builtin:small_mobilenet", "--target", "raspberry_pi_5",
               "--latency-budget-ms", "1"])
    out = capsys.readouterr().out
    assert rc == 0, out
    line = next(ln for ln in out.splitlines() if "backend:" in ln)
    considered = line.split("processors run (")[1].split(")")[0].split(", ")
    assert set(NATIVE) <= set(considered), line

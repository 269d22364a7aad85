"""Generative work on the fleet (issue 19): ``calibrate --fleet`` with a generative backend
measures each preset on a board through ``measure()`` (built here, loaded and timed there); a
``[generate]`` sweep job runs on a board and lands in results.csv; and a generative profile
measured on a real board of its target shows that figure as the target's measured one.

The fleet is a Dask scheduler on 127.0.0.1 with two workers on this machine: ``emu-1``
emulating a board of another architecture, and ``real-1`` serving the target this machine
really is (desktop_ddr4 on x86-64, raspberry_pi_5 on aarch64), so its runs are that target's
own. Kept small: smollm2-135m (random weights, its GGUF built once into the session's
cache), llama.cpp, q4_0."""

from __future__ import annotations

import json
import platform
import subprocess
import textwrap

import pytest

from edgeprof.cli.main import main
from tests.optimize.test_sweep_generate import needs_llama


pytestmark = needs_llama


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    pytest.importorskip("distributed")
    from edgeprof.profilers.measure.fleet import machine_family
    from tests.fleet_support import (edgeprof, env, start_scheduler, start_worker, stop_all,
                                     wait_boards)

    real, fake = (("desktop_ddr4", "raspberry_pi_5")
                  if machine_family(platform.machine()) == "x86"
                  else ("raspberry_pi_5", "desktop_ddr4"))
    tmp = tmp_path_factory.mktemp("llmfleet")
    base = env()
    sched, address = start_scheduler(tmp, base)
    procs = [sched]
    try:
        procs.append(start_worker(tmp, address, fake, "emu-1", base))
        procs.append(subprocess.Popen(
            edgeprof("worker", address, "--target", real, "--name", "real-1"),
            stdout=open(tmp / "worker-real-1.log", "w"), stderr=subprocess.STDOUT, env=base))
        wait_boards(address, {"emu-1", "real-1"})
        yield {"address": address, "real": real, "fake": fake, "tmp": tmp}
    finally:
        stop_all(procs)


def _json(capsys, args: list[str]) -> tuple[int, dict, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


# ----------------------------------------------------------------------------- calibrate
def test_calibrate_on_a_real_board_fits_that_boards_calibration(fleet, tmp_path, monkeypatch,
                                                                 capsys):
    """The presets are timed on real-1: the calibration is the target's, with the board's
    fingerprint, and the target's predictions use it from then on."""
    real = fleet["real"]
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    code, out, err = _json(capsys, ["calibrate", "--fleet", fleet["address"], "--target", real,
                                    "--backend", "llama_cpp", "--precision", "q4_0",
                                    "--models", "smollm2-135m", "--json"])
    assert code == 0, err
    assert out["calibration"] == f"llm--{real}--measured"
    fp = out["fingerprint"]
    assert fp["board"] == "real-1" and fp["target"] == real and fp["emulating"] is False
    assert fp["cpu_model"] and fp["arch"] == platform.machine()
    [run] = out["runs"]
    assert run["status"] == "ok" and run["model"] == "smollm2-135m"
    saved = json.loads((tmp_path / "cal" / f"llm--{real}--measured.json").read_text())
    assert saved["fingerprint"] == fp
    assert saved["note"].startswith(f"fitted to 2 measurements on board real-1 ({real}")
    assert all(s["source"].startswith(f"measured on board real-1 ({real}")
               for s in saved["samples"])
    [key] = saved["entries"]
    assert key.startswith(f"{real}/")
    # what the fit is for: the target's prediction is now calibrated by the board's runs
    from edgeprof.api import estimate_llm

    [pred] = estimate_llm("llm:smollm2-135m", real, backends="llama_cpp", precisions="q4_0",
                          prompt_tokens=128, gen_tokens=32)["predictions"]
    assert pred["decode_tokens_per_s"]["provenance"] == "predicted"
    assert pred["decode_tokens_per_s"]["calibration"] == f"llm--{real}--measured"


def test_calibrate_on_an_emulating_worker_stays_this_hosts(fleet, tmp_path, monkeypatch,
                                                           capsys):
    """emu-1 runs on this machine: its tokens/s are this host's, so is the calibration (it
    says which worker measured it and that it emulated); nothing is written for the board."""
    fake = fleet["fake"]
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    code = main(["calibrate", "--fleet", fleet["address"], "--target", fake, "--backend",
                 "llama_cpp", "--precision", "q4_0", "--models", "smollm2-135m"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"(measured on board emu-1, EMULATING {fake} on this host" in captured.out
    [path] = (tmp_path / "cal").iterdir()
    assert path.name == "llm--host--measured.json"
    saved = json.loads(path.read_text())
    assert saved["fingerprint"]["board"] == "emu-1" and saved["fingerprint"]["emulating"]
    assert f"this host's calibration, not a {fake}'s" in saved["note"]
    assert all(k.startswith("host/") for k in saved["entries"])


# ------------------------------------------------------------------------------ profile
def test_a_profile_measured_on_the_real_board_is_the_targets_measured_figure(fleet, tmp_path,
                                                                              capsys):
    real = fleet["real"]
    out = tmp_path / "out"
    code = main(["profile", "llm:smollm2-135m", "--backend", "llama_cpp", "--precision", "q4_0",
                 "--prompt-tokens", "16", "--gen-tokens", "4", "--repetitions", "2",
                 "--target", real, "--fleet", fleet["address"], "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"measured (board real-1 ({real}))" in captured.out
    assert "measured (this host)" not in captured.out
    assert f"on {real}: measured on board real-1 ({real})" in captured.out
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'data-key="target-measured"' in html and 'data-on-target="true"' in html
    doc = json.loads((out / "profile.json").read_text())
    [run] = doc["runs"]
    assert run["board"]["board"] == "real-1" and run["provenance"] == "measured"
    bench = (out / "llm_bench.csv").read_text()
    assert f"board real-1 ({real})" in bench


# -------------------------------------------------------------------------------- sweep
def test_a_generative_sweep_job_runs_on_a_fleet_board(fleet, tmp_path, capsys):
    """One [generate] job per target, each on a board of its target: results.csv holds both,
    with the board that measured each and where; the real board's job read back as a
    generative profile document is that target's own measurement."""
    import pandas as pd

    real, fake = fleet["real"], fleet["fake"]
    path = tmp_path / "sweep.toml"
    path.write_text(textwrap.dedent(f"""
        targets = ["{fake}", "{real}"]
        [generate]
        models = ["llm:smollm2-135m"]
        backends = ["llama_cpp"]
        formats = ["q4_0"]
        threads = [1]
        prompt_tokens = [16]
        gen_tokens = [4]
        repetitions = 2
    """))
    code, doc, err = _json(capsys, ["sweep", str(path), "--fleet", fleet["address"], "--json"])
    assert code == 0, err
    assert doc["total"] == doc["ran"] == 2
    results = pd.read_csv(tmp_path / "sweep_out" / "results.csv")
    rows = {r["target"]: r for r in results.to_dict(orient="records")}
    assert set(rows) == {fake, real}
    assert all(r["status"] == "ok" and r["workload"] == "generate" and r["tg_median_ts"] > 0
               for r in rows.values()), results[["target", "status", "reason"]]
    assert rows[fake]["board"] == "emu-1" and rows[real]["board"] == "real-1"
    assert rows[fake]["measured_on"].startswith(f"measured on HOST, emulating {fake}")
    assert rows[real]["measured_on"].startswith(f"measured on board real-1 ({real}")
    assert set(results["n_threads"]) == {1} and set(results["n_prompt"]) == {16}

    from edgeprof.optimize.sweep import run_sweep

    report = run_sweep(path, resume=True)  # nothing left to run: read the store back
    assert report.ran == 0
    on_board = report.profile_document("llm:smollm2-135m", real)
    [run] = on_board["runs"]
    assert run["board"]["board"] == "real-1" and run["board"]["emulating"] is False
    [run] = report.profile_document("llm:smollm2-135m", fake)["runs"]
    assert any("this host's figures, not the target's" in w for w in run["warnings"])

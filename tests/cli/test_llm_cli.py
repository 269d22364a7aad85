"""The generative command line: profile / estimate / recommend on llm:NAME with fake
generative backends (a plugin file), every bad input as one line and exit 2, the estimate
path importing no runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from edgeprof.cli.main import main
from edgeprof.core.llm import RANDOM_WEIGHTS_NOTE

FAKE_PLUGIN = textwrap.dedent('''
    import time
    from pathlib import Path

    from edgeprof.core.artifact import Artifact, Manifest, file_records
    from edgeprof.core.hookspecs import hookimpl
    from edgeprof.core.llm import GenerativeBackend


    class Session:
        build_commit = "fake-0001"

        def reset(self):
            pass

        def prefill(self, token_ids):
            time.sleep(1e-5 * len(token_ids))

        def decode(self, n, on_token):
            for _ in range(n):
                time.sleep(1e-4)
                on_token(5)

        def close(self):
            pass


    class FakeLlm(GenerativeBackend):
        name = "fake_llm"
        formats = ("q4_0", "q8_0")

        def supports(self, model, fmt, device="cpu"):
            if model.spec.family.startswith("gemma"):
                return f"fake_llm cannot run the {model.spec.family} architecture"
            return super().supports(model, fmt, device)

        def build_llm(self, model, fmt, workdir):
            if model.spec.name == "smollm2-135m" and fmt == "q8_0":
                raise RuntimeError("quantizer crashed")
            folder = Path(workdir) / f"{self.name}-{model.spec.name}-{fmt}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "model.bin").write_bytes(b"x" * 4096)
            art = Artifact(folder, Manifest(format="fake", backend=self.name,
                                            requested_precision=fmt,
                                            files=file_records(folder), entry="model.bin"))
            art.write_manifest()
            return art

        def load_llm(self, artifact, *, threads, n_ctx, device="cpu"):
            return Session()


    class FakeGenai(FakeLlm):
        name = "fake_genai"
        formats = ("int4", "int8")


    class FakeGpuLlm(FakeLlm):  # runs on a board's GPU too, as llama.cpp does
        name = "fake_gpu_llm"
        board_devices = ("cpu", "cuda")


    class Tensor:  # not generative
        pass


    @hookimpl
    def edgeprof_register_backends():
        return [FakeLlm, FakeGenai, FakeGpuLlm]
''')


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("plugins")
    (d / "fake_llm.py").write_text(FAKE_PLUGIN)
    (d / "plugins.toml").write_text('[plugins]\nmodules = ["fake_llm.py"]\n')
    return str(d / "plugins.toml")


@pytest.fixture
def cache(empty_cache):
    """Nothing built (each test's fake builds run), the host calibrated once per session."""
    return empty_cache


SMALL = ["--prompt-tokens", "16", "--gen-tokens", "8", "--repetitions", "2"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgeprof", *args], capture_output=True,
                          text=True, env=dict(os.environ), timeout=300)


def test_profile_measures_beside_the_estimate_and_writes_out(tmp_path, capsys, plugins, cache):
    out = tmp_path / "out"
    code = main(["profile", "llm:smollm-135m", "--backend", "fake_llm,fake_genai",
                 "--precision", "q4_0,int4", "--depth", "0,32", *SMALL, "--plugins", plugins,
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "random weights:" in captured.out and "measured (this host)" in captured.out
    assert {p.name for p in out.iterdir()} >= {"profile.json", "llm_bench.csv", "estimate.csv",
                                               "edgeprof-out.json"}
    doc = json.loads((out / "profile.json").read_text())
    assert doc["schema"] == "edgeprof.llm/1" and doc["kind"] == "llm"
    assert doc["model"]["note"] == RANDOM_WEIGHTS_NOTE
    assert doc["model"]["parameters"]["provenance"] == "analytic"
    runs = {(r["backend"], r["format"], r["n_depth"]): r for r in doc["runs"]}
    # each format on the backend that makes it; the other pairs are noted, not run
    assert set(runs) == {("fake_llm", "q4_0", 0), ("fake_llm", "q4_0", 32),
                         ("fake_genai", "int4", 0), ("fake_genai", "int4", 32)}
    assert any("fake_genai q4_0: skipped" in n for n in doc["notes"])
    assert any("fake_llm int4: skipped" in n for n in doc["notes"])
    r = runs[("fake_llm", "q4_0", 0)]
    assert r["status"] == "ok" and r["provenance"] == "measured"
    assert r["decode_tokens_per_s"]["median"] > 0 and r["model_size"] == 4096
    assert r["build_commit"] == "fake-0001"
    assert len(doc["estimates"]) == 4 and doc["predictions"] == []  # no --target
    # the roof the measured points sit under: this host's calibrated figures
    assert doc["host"]["target"]["id"] == "host"
    assert doc["host"]["target"]["figures"]["bandwidth"]["value"] > 0

    import pandas as pd

    bench = pd.read_csv(out / "llm_bench.csv")
    for col in ("n_prompt", "n_gen", "n_depth", "avg_ts", "stddev_ts", "model_size",
                "model_n_params", "n_threads", "build_commit", "backend", "format", "test",
                "provenance"):
        assert col in bench.columns
    assert set(bench["test"]) == {"pp16", "tg8"} and set(bench["provenance"]) == {"measured"}
    assert bench["random_weights"].all()  # every output says so, the CSVs too
    est = pd.read_csv(out / "estimate.csv")
    assert len(est) >= 4 and est["random_weights"].all()
    assert (out / "report.html").is_file()


def test_json_flag_prints_the_payload(capsys, plugins, cache):
    code = main(["profile", "llm:smollm-135m", "--backend", "fake_llm", "--precision", "q8_0",
                 *SMALL, "--plugins", plugins, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and [r["format"] for r in doc["runs"]] == ["q8_0"]


@pytest.mark.parametrize("args, needle", [
    (["profile", "llm:tinyllama-1.2b"], "tinyllama-1.1b"),  # unknown preset names the close one
    (["profile", "llm:smollm-135m", "--gen-tokens", "0"], "--gen-tokens"),
    (["profile", "llm:smollm-135m", "--backend", "fake_llm", "--precision", "int4"],
     "no backend given makes format 'int4'"),
    (["profile", "llm:gemma-3-1b", "--backend", "fake_llm", "--precision", "q4_0"],
     "cannot run the gemma3_text architecture"),
    (["profile", "llm:smollm-135m", "--backend", "fake_llm", "--precision", "q4_0",
      "--prompt-tokens", "2000", "--gen-tokens", "64"], "maximum of 2048"),
    (["profile", "llm:smollm-135m", "--backend", "fake_llm", "--precision", "q4_0",
      "--depth", "2048"], "maximum of 2048"),
    (["profile", "llm:smollm-135m", "--backend", "torch_eager"], "tensor models"),
    (["estimate", "llm:smollm-135m", "--backend", "fake_llm", "--precision", "f16"],
     "makes q4_0, q8_0"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, plugins, cache,
                                                         args, needle):
    out = tmp_path / "out"
    try:
        code = main([*args, "--plugins", plugins, "--out", str(out)] if args[0] == "profile"
                    else [*args, "--plugins", plugins])
    except SystemExit as e:  # argparse's own usage errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_truncated_gguf_is_one_line_exit_2(tmp_path, plugins):
    f = tmp_path / "broken.gguf"
    f.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x05" * 40)
    r = run_cli("profile", str(f), "--backend", "fake_llm", "--plugins", plugins,
                "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "broken.gguf" in r.stderr
    assert not (tmp_path / "out").exists()


def test_estimate_predicts_without_importing_a_runtime(tmp_path):
    code = textwrap.dedent("""
        import sys, json, io, contextlib
        from edgeprof.cli.main import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["estimate", "llm:llama-3.2-3b", "--target", "raspberry_pi_5",
                       "--backend", "llama_cpp", "--precision", "q4_k_m",
                       "--prompt-tokens", "512", "--gen-tokens", "128", "--json"])
        heavy = [m for m in ("torch", "onnxruntime", "onnxruntime_genai", "llama_cpp",
                             "openvino", "openvino_genai", "tensorflow") if m in sys.modules]
        print(json.dumps({"rc": rc, "heavy": heavy, "doc": json.loads(buf.getvalue())}))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["rc"] == 0 and res["heavy"] == []
    doc = res["doc"]
    assert doc["runs"] == [] and doc["target"]["id"] == "raspberry_pi_5"
    (pred,) = doc["predictions"]
    decode = pred["decode_tokens_per_s"]
    assert decode["provenance"] in ("predicted", "estimated")
    assert decode["low"] <= decode["value"] <= decode["high"]
    (est,) = doc["estimates"]
    assert est["fit"]["fits"] is True and est["fit"]["verdict"].startswith("fits")


def test_a_model_that_does_not_fit_the_target_gets_a_verdict_exit_0(capsys):
    code = main(["estimate", "llm:phi-3.5-mini", "--target", "raspberry_pi_4",
                 "--backend", "llama_cpp", "--precision", "f16"])
    out = capsys.readouterr().out
    assert code == 0
    assert "does not fit" in out


def test_recommend_names_the_binding_constraint(capsys):
    code = main(["recommend", "llm:phi-3.5-mini", "--target", "raspberry_pi_4", "--backend",
                 "llama_cpp", "--context", "640", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["format"] and doc["backend"] == "llama_cpp" and doc["context_tokens"] == 640
    assert "RAM" in doc["reasons"][0]  # f16/q8_0 don't fit 4 GB: the RAM bound
    # optimize: the same choice, then the shortlist measured here (kept small)
    code = main(["optimize", "llm:smollm2-135m", "--target", "raspberry_pi_5",
                 "--tokens-per-s", "5", "--backend", "llama_cpp", "--shortlist", "1",
                 "--prompt-tokens", "16", "--gen-tokens", "4", "--repetitions", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "candidates" in out
    assert "measured here:" in out and "(this machine, not raspberry_pi_5)" in out


def test_predict_takes_a_generative_model(capsys):
    """'predict llm:X' failed with "cannot import 'llm'": it is estimate's prediction (the
    same figures), its --runtime-version the build predicted for."""
    argv = ["llm:tinyllama-1.1b", "--target", "raspberry_pi_5", "--backend", "llama_cpp",
            "--precision", "q4_k_m", "--threads", "2", "--json"]
    assert main(["predict", *argv, "--runtime-version", "b9307"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["estimate", *argv, "--build", "b9307"]) == 0
    same = json.loads(capsys.readouterr().out)
    (pred,) = doc["predictions"]
    assert pred == same["predictions"][0] and pred["build"]["label"] == "b9307"
    assert pred["threads"]["value"] == 2 and doc["target"]["id"] == "raspberry_pi_5"
    assert main(["predict", *argv[:-1]]) == 0
    assert "predicted (raspberry_pi_5)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,words", [
    (["--backend", "llama_cpp"], "needs --target BOARD"),
    (["--target", "jetson_nano", "--backend", "llama_cpp", "--input-shape", "1x8"],
     "--input-shape applies to tensor models"),
    (["--target", "jetson_nano", "--backend", "llama_cpp", "--calibration", "no.json"],
     "cannot read LLM calibration"),
    (["--target", "jetson_nano", "--backend", "llama_cpp", "--device", "cuda:1"],
     "cpu or cuda")])
def test_predict_a_generative_model_bad_input(capsys, argv, words):
    try:
        code = main(["predict", "llm:qwen2.5-0.5b", *argv])
    except SystemExit as e:  # a flag of the other kind: argparse's error
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err


def test_the_python_predict_gives_a_generative_models_prediction():
    """edgeprof.predict takes a generative model (issue 31): the one prediction estimate_llm
    gives for that backend and format, typed; Predictor (tensor models) names it."""
    import edgeprof
    from edgeprof.core.errors import UserError

    pred = edgeprof.predict("llm:qwen2.5-0.5b", "jetson_nano", "llama_cpp", "q4_0")
    assert isinstance(pred, edgeprof.GenerativePrediction)
    [same] = edgeprof.estimate_llm("llm:qwen2.5-0.5b", "jetson_nano", backends="llama_cpp",
                                   precisions="q4_0")["predictions"]
    assert pred.to_dict() == same and pred.key == ("llama_cpp", "q4_0", 0)
    with pytest.raises(UserError, match="edgeprof.predict"):
        edgeprof.Predictor("jetson_nano", "llama_cpp")("llm:qwen2.5-0.5b")


def test_recommend_needs_a_target(capsys):
    assert main(["recommend", "llm:smollm-135m"]) == 2
    assert "--target" in capsys.readouterr().err


def test_a_model_too_big_for_this_machine_is_estimated_not_built(tmp_path, capsys, plugins,
                                                                 cache, monkeypatch):
    import pandas as pd

    from edgeprof.profilers.measure import generate

    monkeypatch.setattr(generate, "available_memory", lambda: 2 * 10 ** 9)
    out = tmp_path / "out"
    code = main(["profile", "llm:llama-3.2-3b", "--backend", "fake_llm", "--precision", "q4_0",
                 *SMALL, "--plugins", plugins, "--target", "raspberry_pi_5", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "skipped" in text and "not materialised on this machine" in text
    assert "predicted (raspberry_pi_5)" in text
    doc = json.loads((out / "profile.json").read_text())
    assert [r["status"] for r in doc["runs"]] == ["skipped"]
    bench = pd.read_csv(out / "llm_bench.csv")
    predicted = bench[bench["where"] == "raspberry_pi_5"]
    assert set(predicted["test"]) == {"pp16", "tg8"}
    assert set(predicted["provenance"]) <= {"predicted", "estimated"}
    assert (predicted["model_size"] > 1e9).all()  # the estimate's file bytes (analytic)


def test_a_run_that_fails_is_a_status_and_exit_3(capsys, plugins, cache):
    code = main(["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision",
                 "q4_0,q8_0", *SMALL, "--plugins", plugins, "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 3
    assert [(r["format"], r["status"]) for r in doc["runs"]] == [("q4_0", "ok"),
                                                                   ("q8_0", "failed")]
    assert doc["runs"][1]["reason"] == "build failed: RuntimeError: quantizer crashed"
    assert "fake_llm q8_0: failed: build failed" in captured.err


def test_calibrate_a_generative_backend_fits_this_host(tmp_path, capsys, plugins, cache,
                                                         monkeypatch):
    """`calibrate --backend <generative>` measures presets of several sizes here and saves
    this host's LLM calibration (H5's calibrate_llm_host) where predictions look for it."""
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    code = main(["calibrate", "--backend", "fake_llm", "--models",
                 "smollm2-135m,smollm2-360m", "--plugins", plugins, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    path = Path(out["path"])
    assert path.parent == tmp_path / "cal" and path.is_file()
    saved = json.loads(path.read_text())
    assert saved["name"] == out["calibration"]
    assert {r["model"] for r in out["runs"]} == {"smollm2-135m", "smollm2-360m"}
    assert all(r["status"] == "ok" and r["format"] == "q4_0" for r in out["runs"])
    [entry] = saved["entries"].values()
    assert "fake_llm" in entry["decode"]["runtimes"]


def test_calibrate_refuses_a_model_the_backend_cannot_run(tmp_path, capsys, plugins, cache,
                                                          monkeypatch):
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    code = main(["calibrate", "--backend", "fake_llm", "--models", "gemma-3-1b",
                 "--plugins", plugins])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "gemma" in err[0]
    assert not (tmp_path / "cal").exists() or not any((tmp_path / "cal").iterdir())


@pytest.mark.parametrize("args, words", [
    (["llm:gemma-3-1b", "--backend", "onnxruntime_genai", "--precision", "int4",
      "--target", "raspberry_pi_5"], "gemma3_text"),
    (["llm:tinyllama-1.1b", "--backend", "openvino_genai", "--precision", "int4",
      "--target", "jetson_orin_nano", "--device", "cuda"], "runs on a board's cpu"),
])
def test_estimate_refuses_what_the_runtime_cannot_run_on_the_board(capsys, args, words):
    """An estimate builds nothing, but it still refuses an architecture or a board processor
    the runtime can't run (statically: supports_on_board imports no runtime)."""
    code = main(["estimate", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0]


def test_recommend_leaves_out_runtimes_that_cannot_use_the_boards_device(capsys):
    code = main(["recommend", "llm:tinyllama-1.1b", "--target", "jetson_orin_nano",
                 "--device", "cuda", "--backend", "openvino_genai,transformers", "--json"])
    choice = json.loads(capsys.readouterr().out)
    assert code == 0 and choice["backend"] == "transformers"
    ov = [c for c in choice["candidates"] if c["backend"] == "openvino_genai"]
    assert ov and all(c["status"] == "unsupported" and "cuda" in c["why"] for c in ov)


# ------------------------------------------------------ isolation and timeout (one run path)
TINY = ["--prompt-tokens", "16", "--gen-tokens", "4", "--repetitions", "2"]


def test_isolate_runs_a_generative_profile_in_a_worker(capsys, plugins, cache):
    code = main(["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision", "q4_0",
                 "--isolate", "--timeout", "120", *TINY, "--plugins", plugins, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [run] = json.loads(captured.out)["runs"]
    assert run["status"] == "ok" and run["decode_tokens_per_s"]["median"] > 0
    assert run["provenance"] == "measured" and "measured_on" not in run  # this host


def test_a_crashing_build_in_the_worker_is_a_status(capsys, plugins, cache):
    code = main(["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision", "q8_0",
                 "--isolate", *TINY, "--plugins", plugins, "--json"])
    captured = capsys.readouterr()
    assert code == 3
    [run] = json.loads(captured.out)["runs"]
    assert run["status"] == "failed" and "quantizer crashed" in run["reason"]


def _llama_cpp() -> bool:
    from edgeprof.core.plugins import get_registry

    entry = get_registry().backends.get("llama_cpp")
    return entry is not None and entry.cls.availability().available


@pytest.mark.skipif(not _llama_cpp(), reason="llama-cpp-python is not installed")
def test_llama_cpp_isolated_with_a_timeout_and_a_timeout_that_kills(capsys):
    base = ["profile", "llm:smollm2-135m", "--backend", "llama_cpp", "--precision", "q4_0",
            *TINY, "--json"]
    code = main([*base, "--isolate", "--timeout", "120"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [run] = json.loads(captured.out)["runs"]
    assert run["status"] == "ok" and run["prefill_tokens_per_s"]["median"] > 0
    assert run["n_prompt"] == 16 and run["n_gen"] == 4 and run["repetitions"] == 2
    # a worker that outlives its timeout is stopped: the run fails with the reason, exit 3
    code = main([*base, "--timeout", "0.5"])
    captured = capsys.readouterr()
    assert code == 3
    [run] = json.loads(captured.out)["runs"]
    assert run["status"] == "failed" and run["reason"] == "timed out after 0.5 s"
    assert "timed out after 0.5 s" in captured.err


@pytest.mark.parametrize("backend, extra, device", [
    ("llama_cpp", [], "cuda"),                # the runtime runs on the Jetson's GPU
    ("llama_cpp", ["--device", "cpu"], "cpu"),  # asked for: its CPU cluster
    ("openvino_genai", [], "cpu"),            # OpenVINO GenAI runs on the CPU only
])
def test_estimate_on_a_board_defaults_to_the_processor_the_runtime_uses_there(
        capsys, backend, extra, device):
    """``estimate llm:X --target jetson_orin_nano`` predicted for the Jetson's CPU unless
    told, while ``recommend`` and tensor ``predict`` default to its GPU: the same question
    got two answers. All three now take the processor the runtime would use there."""
    fmt = "q4_k_m" if backend == "llama_cpp" else "int4"
    code = main(["estimate", "llm:tinyllama-1.1b", "--target", "jetson_orin_nano",
                 "--backend", backend, "--precision", fmt, *extra, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["device"] == device
    (pred,) = doc["predictions"]
    assert pred["device"] == device
    said = [n for n in doc["notes"] if n.startswith("device cuda")]
    assert bool(said) == (device == "cuda" and not extra)
    # recommend agrees on the processor
    if not extra:
        assert main(["recommend", "llm:tinyllama-1.1b", "--target", "jetson_orin_nano",
                     "--backend", backend, "--precision", fmt, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["device"] == device


@pytest.mark.parametrize("extra, board", [([], "cuda"), (["--device", "cpu"], "cpu")])
def test_profile_on_a_board_predicts_for_the_processor_the_runtime_uses_there(
        capsys, plugins, cache, extra, board):
    """Without --device the runs are this machine's CPU's, and the Jetson's figures were its
    CPU's too; they are now for the processor the runtime uses there (as estimate's), and
    the header says where each is for. --device names both."""
    code = main(["profile", "llm:smollm-135m", "--backend", "fake_gpu_llm", "--precision",
                 "q4_0", "--target", "jetson_orin_nano", *SMALL, "--plugins", plugins,
                 *extra, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["device"] == doc["config"]["device"] == "cpu"
    assert [r["device"] for r in doc["runs"]] == ["cpu"]
    assert {p["device"] for p in doc["predictions"]} == {board}
    assert any(n.startswith("device cuda") for n in doc["notes"]) == (board == "cuda")
    from edgeprof.cli.render_llm import render_llm
    from edgeprof.profilers.report.generative import GenerativeReport
    from rich.console import Console

    console = Console(record=True, width=200)
    render_llm(GenerativeReport.from_dict(doc), console)
    head = console.export_text().splitlines()[0]
    assert head.endswith("device cpu here, cuda on jetson_orin_nano") == (board == "cuda")
    from edgeprof.profilers.report.llm_html import render_llm_html

    page = render_llm_html(doc)  # the report's header, target box and charts say it too
    assert ("device cpu here, cuda on jetson_orin_nano" in page) == (board == "cuda")
    assert f"jetson_orin_nano {board}" in page
    assert ("jetson_orin_nano cpu" in page) == (board == "cpu")

"""An LLM calibration of a board from the user's own llama-bench tests
(``calibrate --target BOARD --backend llama_cpp --measurements FILE.csv``): the fit, its use
by ``predict``/``estimate``, and every bad file as one line naming the file and line, exit 2,
nothing written."""

from __future__ import annotations

import json

import pytest

from edgeprof.cli.main import main

HEADER = "model,precision,test,tokens_per_s,threads,runtime_version,source\n"
ROWS = ("llm:tinyllama-1.1b,q4_k_m,pp512,61.81 ± 0.12,4,b9307,my pi\n"
        "llm:tinyllama-1.1b,q4_k_m,tg128,11.07,4,b9307,my pi\n"
        "llm:qwen2.5-0.5b,q4_k_m,pp512,130,4,b9307,my pi\n"
        "llm:qwen2.5-0.5b,q4_k_m,tg128,22.5,4,b9307,my pi\n")


def _calibrate(csv_path, *extra):
    return main(["calibrate", "--target", "raspberry_pi_5", "--backend", "llama_cpp",
                 "--measurements", str(csv_path), *extra])


def test_tests_on_the_board_calibrate_it_and_predict_uses_them(tmp_path, capsys, user_dir):
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS)
    assert _calibrate(csv_path, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"] == 4 and doc["device"] == "cpu" and doc["threads"] == [4]
    assert doc["builds"] == ["b9307"] and doc["stages"] == {"prefill": 2, "decode": 2}
    assert doc["models"] == ["qwen2.5-0.5b", "tinyllama-1.1b"]
    cal = doc["calibration_data"]
    assert cal["fingerprint"]["source"] == "measurements"
    assert cal["cv"]["n"] == 4  # leave-one-out over the four tests
    (path,) = user_dir.glob("llm--raspberry_pi_5--measured-llama_cpp-cpu.json")
    assert doc["path"] == str(path)
    # predict finds it in the user's folder, and the decode it learned is the measured one's
    argv = ["predict", "llm:tinyllama-1.1b", "--target", "raspberry_pi_5", "--backend",
            "llama_cpp", "-p", "q4_k_m", "--json"]
    assert main(argv) == 0
    (pred,) = json.loads(capsys.readouterr().out)["predictions"]
    assert pred["calibration"] == "llm--raspberry_pi_5--measured-llama_cpp-cpu"
    decode = pred["decode_tokens_per_s"]
    assert decode["provenance"] == "predicted"
    assert 11.07 / 1.3 < decode["value"] < 11.07 * 1.3
    assert decode["low"] <= 11.07 <= decode["high"]


def test_out_writes_there_and_calibration_uses_it(tmp_path, capsys, user_dir):
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS.splitlines(keepends=True)[1])  # one tg test
    out = tmp_path / "mine.json"
    assert _calibrate(csv_path, "--out", str(out)) == 0
    text = capsys.readouterr().out
    assert "moves the level only" in text and f"saved to {out}" in text
    assert out.is_file() and not list(user_dir.iterdir())
    base = ["predict", "llm:tinyllama-1.1b", "--target", "raspberry_pi_5", "--backend",
            "llama_cpp", "-p", "q4_k_m", "--json"]
    assert main(base + ["--calibration", str(out)]) == 0
    (pred,) = json.loads(capsys.readouterr().out)["predictions"]
    assert pred["calibration"] == "llm--raspberry_pi_5--measured-llama_cpp-cpu"
    assert main(["estimate", *base[1:], "--calibration", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["predictions"] == [pred]
    assert main(base[:3] + ["raspberry_pi_4"] + base[4:] + ["--calibration", str(out)]) == 2
    assert "no entry for raspberry_pi_4/cpu" in capsys.readouterr().err


BAD = [
    ("", "the file is empty"),
    ("model,test\nllm:tinyllama-1.1b,tg128\n", "line 1: missing column 'tokens_per_s'"),
    (HEADER + "llm:tinyllama-1.1b,q4_k_m,tg128,-3,4,,\n", "line 2: tokens_per_s '-3'"),
    (HEADER + "llm:tinyllama-1.1b,q4_k_m,tg128,inf,4,,\n", "line 2: tokens_per_s 'inf'"),
    (HEADER + "llm:no-such-model,q4_k_m,tg128,3,4,,\n", "line 2: model 'llm:no-such-model' "
                                                        "does not load"),
    (HEADER + "llm:tinyllama-1.1b,q4_k_m,tg128,3,4,,\nllm:tinyllama-1.1b,q4_k_m,tg128,4,4,,\n",
     "line 3: duplicate of line 2"),
    (HEADER + "llm:tinyllama-1.1b,q8_0,tg128,3,4,,\n", "line 2: precision q8_0 contradicts "
                                                       "--precision q4_k_m"),
    (HEADER + "llm:tinyllama-1.1b,q4_k_m,tg128,3,2,,\n", "line 2: threads 2 contradicts "
                                                         "--threads 4"),
    (HEADER, "no rows under the header"),
    (HEADER + "llm:tinyllama-1.1b,q4_k_m,bench,3,4,,\n", "line 2: test 'bench' is not a "
                                                         "llama-bench test"),
    (HEADER + "llm:tinyllama-1.1b,q4_k_m,pp512,30,4,,\n", "no generation test (tgN)"),
    ("model,test,tokens_per_s,colour\nllm:tinyllama-1.1b,tg128,3,red\n",
     "line 1: unknown column 'colour'"),
]


@pytest.mark.parametrize("text,words", BAD)
def test_a_bad_file_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, user_dir, text,
                                                          words):
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(text)
    out = tmp_path / "out.json"
    assert _calibrate(csv_path, "--precision", "q4_k_m", "--threads", "4",
                      "--out", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(csv_path) in err and words in err, err
    assert not out.exists() and not list(user_dir.iterdir())


@pytest.mark.parametrize("row,words", [
    ("llm:tinyllama-1.1b,int4,tg128,3,4,,", "line 2: llama_cpp int4 on cpu"),
    ("llm:tinyllama-1.1b,q4_k_m,tg128,3,16,,", "line 2: threads 16: raspberry_pi_5 has 4 "
                                               "cores on cpu"),
    ("llm:tinyllama-1.1b,,tg128,3,,,", "line 2: no weight format")])
def test_rows_the_board_or_runtime_cannot_have(tmp_path, capsys, user_dir, row, words):
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + row + "\n")
    assert _calibrate(csv_path) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err, err
    assert not list(user_dir.iterdir())


def test_the_python_api_and_the_tensor_one_point_at_each_other(tmp_path, user_dir):
    from edgeprof.api import calibrate_llm_measurements, calibrate_measurements
    from edgeprof.core.errors import UserError

    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS)
    cal, summary = calibrate_llm_measurements(csv_path, "raspberry_pi_5", "llama_cpp",
                                              out=tmp_path / "c.json")
    assert summary["learned"].startswith("the level and the per-layer overhead")
    assert (tmp_path / "c.json").is_file() and cal["path"] == str(tmp_path / "c.json")
    with pytest.raises(UserError, match="calibrate_llm_measurements"):
        calibrate_measurements(csv_path, "raspberry_pi_5", "llama_cpp")


def test_a_runtime_your_tests_lack_keeps_the_shipped_rows_of_it(tmp_path, capsys, user_dir):
    """Your llama.cpp tests on a Pi 5 are for llama.cpp: llamafile there keeps the shipped
    calibration's rows of it (it was a runtime transfer from yours), as a tensor calibration
    is chosen per runtime."""
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS)
    assert _calibrate(csv_path) == 0
    capsys.readouterr()
    base = ["predict", "llm:tinyllama-1.1b", "--target", "raspberry_pi_5", "-p", "q8_0",
            "--json", "--backend"]
    assert main(base + ["llama_cpp"]) == 0
    (mine,) = json.loads(capsys.readouterr().out)["predictions"]
    assert mine["calibration"] == "llm--raspberry_pi_5--measured-llama_cpp-cpu"
    from edgeprof.profilers.predict.llm import predict_llm
    from edgeprof.profilers.estimate.llm import estimate_llm
    from edgeprof.targets import get_target
    from edgeprof.zoo.llm import resolve_llm

    pi5 = get_target("raspberry_pi_5")
    est = estimate_llm(resolve_llm("llm:tinyllama-1.1b").spec, "q8_0", target=pi5)
    p = predict_llm(est, pi5, runtime="llamafile")
    assert p["calibration"] == "llm--published"
    assert p["decode_tokens_per_s"]["provenance"] == "predicted"


def test_a_named_calibration_without_the_runtime_says_which_one_predicted(tmp_path, user_dir):
    from edgeprof.profilers.estimate.llm import estimate_llm
    from edgeprof.profilers.predict.llm import predict_llm
    from edgeprof.targets import get_target
    from edgeprof.zoo.llm import resolve_llm

    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS)
    out = tmp_path / "mine.json"
    assert _calibrate(csv_path, "--out", str(out)) == 0
    pi5 = get_target("raspberry_pi_5")
    est = estimate_llm(resolve_llm("llm:tinyllama-1.1b").spec, "q8_0", target=pi5)
    p = predict_llm(est, pi5, runtime="llamafile", calibration=out)
    assert p["calibration"] == "llm--published"
    assert ("calibration 'llm--raspberry_pi_5--measured-llama_cpp-cpu' has no llamafile rows "
            "on raspberry_pi_5/cpu: llamafile is predicted by 'llm--published'") in p["notes"]
    assert predict_llm(est, pi5, runtime="llama_cpp", calibration=out)["calibration"] == \
        "llm--raspberry_pi_5--measured-llama_cpp-cpu"


def test_profile_and_recommend_take_the_calibration_too(tmp_path, capsys, user_dir):
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS)
    out = tmp_path / "mine.json"
    assert _calibrate(csv_path, "--out", str(out)) == 0
    capsys.readouterr()
    assert main(["recommend", "llm:tinyllama-1.1b", "--target", "raspberry_pi_5", "--backend",
                 "llama_cpp", "-p", "q4_k_m", "--calibration", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (cand,) = [c for c in doc["candidates"] if c["status"] == "chosen"]
    mine = "llm--raspberry_pi_5--measured-llama_cpp-cpu"
    assert cand["decode_tokens_per_s"]["calibration"] == mine
    assert main(["recommend", "llm:tinyllama-1.1b", "--target", "raspberry_pi_4", "--backend",
                 "llama_cpp", "--calibration", str(out)]) == 2
    assert "no entry for raspberry_pi_4/cpu" in capsys.readouterr().err
    assert main(["profile", "llm:smollm2-135m", "--backend", "llama_cpp", "--calibration",
                 str(out)]) == 2
    assert "give --target BOARD too" in capsys.readouterr().err


def test_the_readme_example(tmp_path, capsys, user_dir):
    from pathlib import Path

    example = Path(__file__).resolve().parents[3] / "examples" / "llm" / \
        "raspberry_pi_5_llama_bench.csv"
    out = tmp_path / "pi5-llama.json"
    assert _calibrate(example, "--out", str(out)) == 0
    assert "learned the level (one model" in capsys.readouterr().out
    assert main(["predict", "llm:qwen2.5-1.5b", "--target", "raspberry_pi_5", "--backend",
                 "llama_cpp", "-p", "q4_k_m", "--calibration", str(out), "--json"]) == 0
    (pred,) = json.loads(capsys.readouterr().out)["predictions"]
    assert pred["calibration"] == "llm--raspberry_pi_5--measured-llama_cpp-cpu"
    decode = pred["decode_tokens_per_s"]
    # a model of 1.5 B parameters decodes slower than the 1.1 B one measured (11.07 tok/s)
    assert decode["provenance"] == "predicted" and decode["value"] < 11.07


def test_a_jetson_gpu_mode_calibrates_from_tests_on_its_gpu(tmp_path, capsys, user_dir):
    """The Orin Nano's llama.cpp runs its GPU; the rows were checked against this machine's
    build ('llama_cpp runs on cpu here, not cuda') instead of what the runtime runs on a
    board."""
    csv_path = tmp_path / "orin.csv"
    csv_path.write_text("model,precision,test,tokens_per_s,threads,runtime_version\n"
                        "llm:tinyllama-1.1b,q4_k_m,pp512,2265,6,b9518\n"
                        "llm:tinyllama-1.1b,q4_k_m,tg128,66.55,6,b9518\n")
    assert main(["calibrate", "--target", "jetson_orin_nano:super", "--backend", "llama_cpp",
                 "--measurements", str(csv_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "cuda" and doc["threads"] == []  # a GPU: no host threads
    assert list(doc["calibration_data"]["entries"]) == ["jetson_orin_nano/cuda"]
    assert main(["predict", "llm:tinyllama-1.1b", "--target", "jetson_orin_nano:super",
                 "--backend", "llama_cpp", "-p", "q4_k_m", "--json"]) == 0
    (pred,) = json.loads(capsys.readouterr().out)["predictions"]
    assert pred["calibration"] == "llm--jetson_orin_nano--measured-llama_cpp-cuda"
    assert 66.55 / 1.25 < pred["decode_tokens_per_s"]["value"] < 66.55 * 1.25


def test_a_gguf_row_takes_the_files_format(tmp_path, capsys, user_dir):
    from tests.zoo.test_llm_presets import write_gguf

    write_gguf(tmp_path / "tiny.gguf")  # file type 15: q4_k_m
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text("model,test,tokens_per_s\ntiny.gguf,tg128,900\ntiny.gguf,pp512,5000\n")
    assert _calibrate(csv_path) == 2  # the file's model holds 256 tokens
    assert ("line 3: the test needs a context of 512 tokens, longer than tiny-llama-test's "
            "maximum of 256") in capsys.readouterr().err
    csv_path.write_text("model,test,tokens_per_s\ntiny.gguf,tg128,900\ntiny.gguf,pp64,5000\n")
    assert _calibrate(csv_path, "--json", "--out", str(tmp_path / "c.json")) == 0
    cal = json.loads(capsys.readouterr().out)["calibration_data"]
    assert {s["format"] for s in cal["samples"]} == {"q4_k_m"}
    csv_path.write_text("model,precision,test,tokens_per_s\ntiny.gguf,q8_0,tg128,900\n")
    assert _calibrate(csv_path) == 2
    err = capsys.readouterr().err
    assert "line 2: precision q8_0 contradicts the file's own format q4_k_m" in err


@pytest.mark.parametrize("flags,named", [
    (["--fleet", "127.0.0.1:1"], "--fleet"), (["--models", "smollm2-135m"], "--models"),
    (["--kernels", "tiny", "--runs", "3"], "--kernels, --runs"), (["--isolate"], "--isolate")])
def test_measuring_flags_with_measurements_are_refused(tmp_path, capsys, user_dir, flags,
                                                       named):
    """--measurements fits timings taken elsewhere; a flag of a measuring calibration given
    beside it was silently ignored."""
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS)
    assert _calibrate(csv_path, *flags) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{named} measure" in err and "--measurements" in err
    assert not list(user_dir.iterdir())


@pytest.mark.parametrize("argv,words", [
    (["--backend", "tflite", "--models", "smollm2-135m"], "--models names the presets"),
    (["--backend", "llama_cpp", "--kernels", "tiny"], "--kernels and --runs go with a tensor"),
    (["--backend", "llama_cpp", "--runs", "3"], "--kernels and --runs go with a tensor")])
def test_a_flag_of_the_other_kind_of_calibration_is_refused(capsys, user_dir, argv, words):
    """They were silently ignored (a tflite host calibration ran, and was saved, with
    --models given)."""
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err
    assert not list(user_dir.iterdir())


def test_a_profiles_recommendation_uses_the_calibration_its_predictions_use(tmp_path,
                                                                            monkeypatch,
                                                                            user_dir):
    """profile llm:X --target B --calibration F: the report's recommendation card had
    predicted with the shipped calibration beside a tokens/s table from F."""
    import edgeprof.profilers.measure.llm_runs as runs
    from edgeprof.api import profile_llm

    csv_path = tmp_path / "bench.csv"
    csv_path.write_text(HEADER + ROWS)
    out = tmp_path / "mine.json"
    assert _calibrate(csv_path, "--out", str(out)) == 0
    monkeypatch.setattr(runs, "measure_pairs", lambda *a, **k: [])  # nothing run here
    payload = profile_llm("llm:tinyllama-1.1b", backends="llama_cpp", precisions="q4_k_m",
                          target="raspberry_pi_5", calibration=out, threads=2)
    (pred,) = payload["predictions"]
    rec = payload["recommendation"]
    (cand,) = [c for c in rec["candidates"] if c["format"] == "q4_k_m"]
    assert cand["decode_tokens_per_s"]["calibration"] == pred["calibration"] == \
        "llm--raspberry_pi_5--measured-llama_cpp-cpu"
    assert cand["decode_tokens_per_s"]["value"] == pytest.approx(
        pred["decode_tokens_per_s"]["value"])

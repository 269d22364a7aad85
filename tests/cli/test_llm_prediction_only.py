"""The prediction-only generative runtimes of data/runtimes.toml (llamafile, mlc, rkllm:
``workload = "generate"``, no edgeprof backend runs them): ``predict`` / ``estimate`` of an
llm: model give the LLM predictor's figure for that runtime (marked prediction-only), on a
board processor the runtime runs on (the RK3588's NPU for rkllm); ``profile`` gives the
prediction and marks the run unavailable; a tensor model given one is one line, exit 2."""

from __future__ import annotations

import json

import pytest

from edgeprof.cli.main import main


def _run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's own usage errors
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _prediction(capsys, *args: str) -> dict:
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["predictions"]) == 1
    return doc


@pytest.mark.parametrize("args, device", [
    (["llm:tinyllama-1.1b", "--target", "raspberry_pi_5", "--backend", "llamafile",
      "--precision", "q8_0"], "cpu"),
    (["llm:llama-3.2-1b", "--target", "jetson_orin_nano", "--backend", "mlc",
      "--precision", "q4f16_1"], "cuda"),
    (["llm:qwen2.5-0.5b", "--target", "rk3588", "--backend", "rkllm", "--precision", "w8a8",
      "--device", "npu"], "npu"),
    # without --device: rkllm's own processor on the board (the NPU), which a note names
    (["llm:qwen2.5-0.5b", "--target", "rk3588", "--backend", "rkllm", "--precision", "w8a8"],
     "npu"),
])
def test_predict_gives_the_calibrated_figure_marked_prediction_only(capsys, args, device):
    doc = _prediction(capsys, "predict", *args)
    p = doc["predictions"][0]
    assert doc["device"] == p["device"] == device
    assert p["backend"] == args[args.index("--backend") + 1]
    assert p["format"] == args[args.index("--precision") + 1]
    assert p["prediction_only"] is True
    assert p["prediction_only_reason"].startswith("predict only: can't run here")
    for name in ("prefill_tokens_per_s", "decode_tokens_per_s"):
        fig = p[name]
        # the published rows of that runtime on that board calibrate it
        assert fig["provenance"] == "predicted" and fig["calibration"] == "llm--published"
        assert 0 < fig["low"] <= fig["value"] <= fig["high"]
    assert any(f"runtime {p['backend']}" in n for n in p["notes"])


def test_rkllm_on_the_npu_is_the_runtimes_own_prediction(capsys):
    """The figure is predict_llm's with runtime=rkllm on the NPU (not llama_cpp's, not the
    CPU's)."""
    from edgeprof.api.generative import _family_layout
    from edgeprof.api.common import resolve_target
    from edgeprof.profilers.estimate.llm import estimate_llm
    from edgeprof.profilers.predict.llm import predict_llm
    from edgeprof.zoo.llm import resolve_llm

    doc = _prediction(capsys, "predict", "llm:qwen2.5-0.5b", "--target", "rk3588",
                      "--backend", "rkllm", "--precision", "w8a8", "--device", "npu")
    tgt = resolve_target("rk3588", None, None)
    est = estimate_llm(resolve_llm("llm:qwen2.5-0.5b").spec, _family_layout("rkllm", "w8a8"),
                       prompt_tokens=512, gen_tokens=128, target=tgt, device="npu")
    want = predict_llm(est, tgt, device="npu", runtime="rkllm")
    got = doc["predictions"][0]
    assert got["decode_tokens_per_s"]["value"] == pytest.approx(
        want["decode_tokens_per_s"]["value"])


def test_predict_table_says_predicts_only(capsys):
    code, out, err = _run(capsys, "predict", "llm:tinyllama-1.1b", "--target",
                          "raspberry_pi_5", "--backend", "llamafile", "--precision", "q8_0")
    assert code == 0, err
    assert "predicts only: can't run here" in out
    assert "no edgeprof backend runs llamafile" in out


def test_estimate_takes_the_family_and_a_board_npu(capsys):
    doc = _prediction(capsys, "estimate", "llm:qwen2.5-0.5b", "--target", "rk3588",
                      "--backend", "rkllm", "--device", "npu")
    assert doc["predictions"][0]["format"] == "w8a8"  # rkllm's first format
    assert doc["predictions"][0]["device"] == "npu"


def test_api_predict_takes_the_family():
    import edgeprof

    p = edgeprof.predict("llm:tinyllama-1.1b", "raspberry_pi_5", "llamafile", "q8_0")
    assert p.data["prediction_only"] is True
    assert p.data["decode_tokens_per_s"]["provenance"] == "predicted"
    q = edgeprof.predict("llm:qwen2.5-0.5b", "rk3588", "rkllm", "w8a8", device="npu")
    assert q.device == "npu"


def test_profile_gives_the_prediction_and_marks_the_run_unavailable(capsys):
    code, out, err = _run(capsys, "profile", "llm:tinyllama-1.1b", "--target",
                          "raspberry_pi_5", "--backend", "llamafile", "--precision", "q8_0",
                          "--json")
    assert code == 3, err
    doc = json.loads(out)
    (run,) = doc["runs"]
    assert run["status"] == "unavailable"
    assert "predict only: can't run here" in run["reason"]
    (p,) = doc["predictions"]
    assert p["prediction_only"] is True
    assert p["decode_tokens_per_s"]["provenance"] == "predicted"


@pytest.mark.parametrize("args, needle", [
    # a tensor model given a generative runtime
    (["predict", "builtin:resnet18", "--target", "raspberry_pi_5", "--backend", "llamafile"],
     "llamafile is a generative runtime"),
    (["predict", "builtin:resnet18", "--target", "rk3588", "--backend", "rkllm",
      "--precision", "int8"], "rkllm is a generative runtime"),
    (["profile", "builtin:resnet18", "--target", "jetson_orin_nano", "--backend", "mlc"],
     "mlc is a generative runtime"),
    # a processor the runtime does not run on / a board without it
    (["predict", "llm:qwen2.5-0.5b", "--target", "rk3588", "--backend", "rkllm",
      "--device", "cpu"], "give --device npu"),
    (["predict", "llm:qwen2.5-0.5b", "--target", "raspberry_pi_5", "--backend", "rkllm"],
     "raspberry_pi_5 has no NPU"),
    (["predict", "llm:qwen2.5-0.5b", "--target", "rk3588", "--backend", "llama_cpp",
      "--device", "npu"], "not 'npu'"),
    (["predict", "llm:qwen2.5-0.5b", "--target", "host", "--backend", "rkllm"],
     "not on this machine's"),
    (["estimate", "llm:qwen2.5-0.5b", "--backend", "rkllm", "--device", "npu"],
     "goes with --target BOARD"),
    # formats
    (["predict", "llm:qwen2.5-0.5b", "--target", "rk3588", "--backend", "rkllm",
      "--precision", "q4_0"], "rkllm makes w8a8"),
    (["predict", "llm:qwen2.5-0.5b", "--target", "jetson_orin_nano", "--backend", "mlc",
      "--precision", "q3f16_1"], "no byte layout of mlc's q3f16_1"),
    # nothing runs it here: profile needs a board, recommend is refused
    (["profile", "llm:qwen2.5-0.5b", "--backend", "llamafile"], "give --target BOARD"),
    (["recommend", "llm:qwen2.5-0.5b", "--target", "rk3588", "--backend", "rkllm"],
     "only predicts"),
])
def test_mistakes_are_one_line_exit_2(capsys, args, needle):
    code, out, err = _run(capsys, *args)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_backends_lists_them_as_generative_runtimes():
    from edgeprof.api import list_backends
    from edgeprof.profilers.predict.runtimes import families, generative_families

    rows = {r["name"]: r for r in list_backends()}
    for name in ("llamafile", "mlc", "rkllm"):
        assert rows[name]["workload"] == "generate" and rows[name]["prediction_only"]
        assert name not in families() and name in generative_families()
    assert rows["plumerai"]["workload"] == "tensor"

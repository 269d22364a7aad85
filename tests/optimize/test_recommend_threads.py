"""``recommend --threads N --calibration FILE`` (tensor models): the plan, its ``threads``
step and its predicted figures are for the board threads asked and come from the user's
calibration for its runtime, as ``predict``'s do; a thread count the board lacks is exit 2."""

from __future__ import annotations

import json

import pytest

from edgeprof.cli.main import main
from edgeprof.optimize.loop import recommend_plan

MODEL = "builtin:small_mobilenet"


def _step(plan, kind):
    (s,) = [s for s in plan.steps if s.kind == kind]
    return s


def test_the_plan_is_for_the_threads_asked():
    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict import predict_latency
    from edgeprof.targets import get_target

    four = recommend_plan(MODEL, "raspberry_pi_4")
    one = recommend_plan(MODEL, "raspberry_pi_4", threads=1)
    assert _step(four, "threads").value["intra_op"] == 4
    assert _step(one, "threads").value["intra_op"] == 1
    assert "1 thread(s) asked" in _step(one, "threads").reason
    pi = get_target("raspberry_pi_4")
    est = estimate_model(resolve_model(MODEL), pi, "fp32")
    backend = _step(one, "backend").value
    expected = predict_latency(est, pi, backend, "fp32", threads=1).value_ms
    base = one.to_dict()["baseline"]
    assert base["latency_ms"] == pytest.approx(expected)
    assert base["latency_ms"] > four.to_dict()["baseline"]["latency_ms"]


def test_a_user_calibration_gives_the_plans_figures_for_its_runtime(tmp_path):
    import edgeprof
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.optimize.loop import latency_figures
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.predict import predict_latency
    from edgeprof.targets import get_target

    pi = get_target("raspberry_pi_4")

    def shipped(model):  # the shipped calibration's one-thread figure
        est = estimate_model(resolve_model(model), pi, "fp32")
        return predict_latency(est, pi, "tflite", "fp32", threads=1).value_ms

    models = ("builtin:small_cnn", MODEL, "builtin:small_resnet")
    csv = tmp_path / "m.csv"  # a board 1.5x slower than the shipped calibration says
    csv.write_text("model,latency_ms,threads\n"
                   + "".join(f"{m},{1.5 * shipped(m)},1\n" for m in models))
    cal, path, _ = edgeprof.calibrate_measurements(csv, "raspberry_pi_4", "tflite",
                                                   out=tmp_path / "cal.json")
    backends = {n: e.cls for n, e in get_registry().backends_for("tensor").items()}
    handle = resolve_model(MODEL)
    fig = latency_figures(handle, pi, backends, threads=1, calibration=cal)("fp32", "tflite")
    assert cal.name in fig.basis and fig.provenance == "predicted"
    assert fig.value_ms == pytest.approx(1.5 * shipped(MODEL), rel=0.15)
    other = latency_figures(handle, pi, backends, calibration=cal)("fp32", "onnxruntime")
    assert cal.name not in other.basis  # a runtime it never measured searches as before
    # the plan: its threads step is all four cores, and so are its figures
    plan = recommend_plan(MODEL, "raspberry_pi_4", calibration=path)
    assert _step(plan, "threads").value["intra_op"] == 4
    est = estimate_model(handle, pi, "fp32")
    four = predict_latency(est, pi, "tflite", "fp32", threads=4, calibration=cal)
    assert four.value_ms < fig.value_ms
    figures = [plan.to_dict()["baseline"]["latency_ms"]]
    assert min(figures) <= four.value_ms + 1e-9  # the best figure of the backends


def test_threads_on_a_gpu_board_are_said_to_change_nothing():
    plan = recommend_plan(MODEL, "jetson_nano", threads=2)
    assert not [s for s in plan.steps if s.kind == "threads"]
    assert any(n.startswith("--threads 2: jetson_nano runs the model on its GPU")
               for n in plan.notes)


@pytest.mark.parametrize("args, words", [
    (["--target", "raspberry_pi_4", "--threads", "8"], "raspberry_pi_4 has 4 cores"),
    (["--target", "mcu", "--threads", "2"], "mcu has 1 core: --threads 2 is more than the "
                                             "board can run; give --threads 1"),
    (["--target", "host", "--threads", "2"], "are for a board's predicted figures"),
    (["--target", "raspberry_pi_4", "--calibration", "missing.json"], "missing.json"),
])
def test_bad_threads_or_calibration_is_one_line_exit_2(capsys, args, words):
    assert main(["recommend", MODEL, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_the_cli_passes_both(capsys):
    assert main(["recommend", MODEL, "--target", "raspberry_pi_4", "--threads", "2",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (step,) = [s for s in doc["steps"] if s["kind"] == "threads"]
    assert step["value"]["intra_op"] == 2


# ------------------------------------------------------------------ generative models
def test_a_generative_choice_is_for_the_threads_asked(capsys):
    """``recommend llm:X --threads N``: each candidate's predicted tokens/s is for N of the
    board's cores (as ``estimate llm:X --threads N``), which can change the choice."""
    from edgeprof.api import estimate_llm

    def choice(*extra):
        assert main(["recommend", "llm:tinyllama-1.1b", "--target", "raspberry_pi_5",
                     "--backend", "llama_cpp", "--precision", "q4_0", *extra, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    four, one = choice(), choice("--threads", "1")
    assert four["threads"] is None and one["threads"] == 1
    (c1,) = [c for c in one["candidates"] if c["format"] == "q4_0"]
    (c4,) = [c for c in four["candidates"] if c["format"] == "q4_0"]
    assert c1["prefill_tokens_per_s"]["value"] < c4["prefill_tokens_per_s"]["value"]
    est = estimate_llm("llm:tinyllama-1.1b", "raspberry_pi_5", backends="llama_cpp",
                       precisions="q4_0", threads=1)
    (pred,) = est["predictions"]
    assert c1["decode_tokens_per_s"]["value"] == pytest.approx(
        pred["decode_tokens_per_s"]["value"])
    assert main(["recommend", "llm:tinyllama-1.1b", "--target", "raspberry_pi_5",
                 "--threads", "9"]) == 2
    assert "9 threads were asked" in capsys.readouterr().err

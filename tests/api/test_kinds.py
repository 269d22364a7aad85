"""One house for both kinds of model in the Python API (issue 31): ``edgeprof.profile`` and
``edgeprof.predict`` take a generative model as they take a tensor one, its workload options
as keywords; an option of the other kind is a one-line ``UserError`` naming it; the
generative functions are public names; ``calibrate`` (what ``edgeprof calibrate`` calls) takes
either kind of backend, its flag rules in the API.

The generative backends are the fake plugin of tests/cli/test_llm_cli.py (no runtime)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import edgeprof
import edgeprof.api
from edgeprof.cli.main import main
from edgeprof.core.errors import UserError
from tests.cli.test_llm_cli import cache, plugins  # noqa: F401 - fixtures

GENERATIVE_NAMES = ("estimate_llm", "profile_llm", "recommend_llm", "optimize_llm",
                    "calibrate_llm", "calibrate_llm_measurements", "llm_exit_code")
FAST = {"runs": 3, "min_time": 0.01, "max_time": 0.2, "warmup": 1}
SHAPE = dict(prompt_tokens=16, gen_tokens=4, repetitions=1)


# ------------------------------------------------------------------------ public names
@pytest.mark.parametrize("name", [*GENERATIVE_NAMES, "calibrate", "GenerativePrediction"])
def test_the_generative_functions_are_public_names(name):
    assert name in edgeprof.__all__ and name in dir(edgeprof)
    assert callable(getattr(edgeprof, name))
    if name != "GenerativePrediction":
        assert name in edgeprof.api.__all__
        assert getattr(edgeprof, name) is getattr(edgeprof.api, name)


# --------------------------------------------------------------------------- profile
def test_profile_routes_a_generative_model_to_the_generative_profile(plugins, cache):
    report = edgeprof.profile("llm:smollm2-135m", backends="fake_llm", precisions="q4_0",
                              depths=(0, 8), plugins=plugins, **SHAPE)
    assert isinstance(report, edgeprof.GenerativeReport)
    assert report.command == "profile" and report.exit_code == 0
    assert [(r.backend, r.format, r.depth, r.status) for r in report.runs] == [
        ("fake_llm", "q4_0", 0, "ok"), ("fake_llm", "q4_0", 8, "ok")]
    assert report.generation_config.prompt_tokens == 16
    assert report.generation_config.gen_tokens == 4 and report.runs[0].repetitions == 1
    # the same document profile_llm gives (its defaults where nothing was given)
    payload = edgeprof.profile_llm("llm:smollm2-135m", backends="fake_llm", precisions="q4_0",
                                   depths=(0, 8), plugins=plugins, **SHAPE)
    assert set(payload) == set(report.to_dict()) and payload["config"] == report.config


def test_profile_passes_the_shared_options_to_a_generative_run(plugins, cache):
    report = edgeprof.profile("llm:smollm2-135m", backends="fake_llm", precisions="q4_0",
                              plugins=plugins, isolate=True, timeout_s=120, threads=1,
                              warmup=0, **SHAPE)
    [run] = report.runs
    assert run.status == "ok" and run.n_threads == 1
    assert run.extra["config"]["isolate"] is True and run.extra["config"]["timeout_s"] == 120
    assert run.extra["config"]["warmup"] == 0
    assert run.extra["environment"]["conditions"]["process"] == "isolated"


@pytest.mark.parametrize("keyword, value", [
    ("batch_size", 2), ("input_shapes", [[1, 8]]), ("input_dtypes", ["int64"]),
    ("stream_rate_fps", 30.0), ("latency_budget_ms", 5.0), ("run_options", {"runs": 3}),
    ("recalibrate", True), ("trace", True), ("calibration_data", "x.npz")])
def test_a_tensor_option_for_a_generative_model_is_one_line_naming_it(keyword, value):
    with pytest.raises(UserError) as e:
        edgeprof.profile("llm:smollm2-135m", backends="fake_llm", **{keyword: value})
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{keyword} applies to tensor models")
    assert "llm:smollm2-135m is a generative model" in text


@pytest.mark.parametrize("keyword, value", [
    ("prompt_tokens", 16), ("gen_tokens", 4), ("depths", (0,)), ("repetitions", 2),
    ("workdir", "w")])
def test_a_generative_option_for_a_tensor_model_is_one_line_naming_it(keyword, value):
    with pytest.raises(UserError) as e:
        edgeprof.profile("builtin:mlp", **{keyword: value})
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{keyword} applies to generative models")
    assert "builtin:mlp is a tensor model" in text


def test_profile_of_a_tensor_model_takes_the_shared_options_as_run_options():
    report = edgeprof.profile("builtin:mlp", run_options=FAST, isolate=True, timeout_s=120)
    assert isinstance(report, edgeprof.ProfileReport) and report.exit_code == 0
    config = report.runs[0].benchmark.config
    assert config["isolate"] is True and config["timeout_s"] == 120 and config["warmup"] == 1
    assert report.runs[0].benchmark.environment["conditions"]["process"] == "isolated"
    with pytest.raises(UserError, match=r"warmup=2 and run_options\['warmup'\]=1 disagree"):
        edgeprof.profile("builtin:mlp", run_options=FAST, warmup=2)


# --------------------------------------------------------------------------- predict
def test_predict_takes_a_generative_model_with_its_workload_options():
    pred = edgeprof.predict("llm:smollm2-135m", "raspberry_pi_5", "llama_cpp",
                            prompt_tokens=128, gen_tokens=32, depth=256, threads=2)
    assert isinstance(pred, edgeprof.GenerativePrediction)
    assert pred.backend == "llama_cpp" and pred.format == "q4_k_m" and pred.depth == 256
    assert pred.target == "raspberry_pi_5" and pred.to_dict()["threads"]["value"] == 2
    d = pred.decode_tokens_per_s
    assert d.provenance in ("predicted", "estimated") and d.low <= d.value <= d.high
    [same] = edgeprof.estimate_llm("llm:smollm2-135m", "raspberry_pi_5", backends="llama_cpp",
                                   prompt_tokens=128, gen_tokens=32, depths=256,
                                   threads=2)["predictions"]
    assert pred.to_dict() == same
    # a tensor model still gets its latency
    assert edgeprof.predict("builtin:mlp", "raspberry_pi_4", "onnxruntime").value_ms > 0


@pytest.mark.parametrize("model, kw, words", [
    ("llm:smollm2-135m", {"input_shapes": [[1, 8]]}, "input_shapes applies to tensor models"),
    ("llm:smollm2-135m", {"input_dtypes": ["int64"]}, "input_dtypes applies to tensor models"),
    ("builtin:mlp", {"prompt_tokens": 8}, "prompt_tokens applies to generative models"),
    ("builtin:mlp", {"depth": 0}, "depth applies to generative models"),
    ("llm:smollm2-135m", {"precision": "q4_0,q8_0"}, "precision names one"),
    ("llm:smollm2-135m", {"depth": -1}, "depth must be 0 or more")])
def test_predict_refuses_the_other_kinds_options_in_one_line(model, kw, words):
    with pytest.raises(UserError) as e:
        edgeprof.predict(model, "raspberry_pi_5", kw.pop("backend", "llama_cpp"), **kw)
    assert "\n" not in str(e.value) and words in str(e.value)


# ------------------------------------------------------- estimate, recommend, optimize
def test_edgeprof_optimize_stays_the_verb_once_its_package_is_imported():
    """``import edgeprof.optimize.router`` (what ``recommend`` or a sweep does) set the
    attribute ``edgeprof.optimize`` to the subpackage, so the README's
    ``edgeprof.optimize(...)`` failed: "'module' object is not callable"."""
    code = ("import edgeprof.optimize.router, edgeprof\n"
            "assert callable(edgeprof.optimize), edgeprof.optimize\n"
            "assert edgeprof.optimize.router.recommend\n"
            "from edgeprof import optimize; assert callable(optimize)\n"
            "try:\n    edgeprof.optimize('builtin:mlp', 'host', bogus=1)\n"
            "except edgeprof.UserError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "optimize() takes no option 'bogus' for builtin:mlp, a tensor model" in out


def test_estimate_takes_a_generative_model():
    report = edgeprof.estimate("llm:smollm2-135m", "raspberry_pi_5", "q8_0",
                               prompt_tokens=64, gen_tokens=16)
    assert isinstance(report, edgeprof.GenerativeReport) and report.command == "estimate"
    same = edgeprof.estimate_llm("llm:smollm2-135m", "raspberry_pi_5", precisions="q8_0",
                                 prompt_tokens=64, gen_tokens=16)
    assert report.to_dict()["predictions"] == same["predictions"]
    assert [e.format for e in report.estimates] == ["q8_0"]
    # a tensor model still gets its per-layer Estimate
    assert isinstance(edgeprof.estimate("builtin:mlp"), edgeprof.Estimate)


def test_recommend_takes_either_kind_of_model_or_an_estimate():
    choice = edgeprof.recommend("llm:smollm2-135m", "raspberry_pi_5", tokens_per_s=20)
    assert choice.to_dict() == edgeprof.recommend_llm("llm:smollm2-135m", "raspberry_pi_5",
                                                      tokens_per_s=20).to_dict()
    plan = edgeprof.recommend("builtin:small_cnn", "raspberry_pi_4", latency_budget_ms=5)
    assert isinstance(plan, edgeprof.Plan)
    est = edgeprof.estimate("builtin:small_cnn", "raspberry_pi_4")
    routed = edgeprof.recommend(est, edgeprof.get_target("raspberry_pi_4"),
                                edgeprof.Constraints(latency_budget_ms=5))
    assert isinstance(routed, edgeprof.Plan)
    with pytest.raises(UserError, match="constraints go with an Estimate"):
        edgeprof.recommend("builtin:mlp", "host", edgeprof.Constraints())


@pytest.mark.parametrize("verb, model, kw, words", [
    ("estimate", "builtin:mlp", {"prompt_tokens": 8},
     "estimate() takes no option 'prompt_tokens' for builtin:mlp, a tensor model"),
    ("estimate", "llm:smollm2-135m", {"batch_size": 2},
     "estimate() takes no option 'batch_size' for llm:smollm2-135m, a generative model"),
    ("recommend", "llm:smollm2-135m", {"latency_budget_ms": 5.0},
     "takes no option 'latency_budget_ms'"),
    ("recommend", "builtin:mlp", {"tokens_per_s": 5.0}, "takes no option 'tokens_per_s'"),
    ("optimize", "llm:smollm2-135m", {"compressions": "prune"},
     "takes no option 'compressions'"),
    ("optimize", "builtin:mlp", {"shortlist": 2}, "takes no option 'shortlist'")])
def test_an_option_of_the_other_kind_is_one_line_naming_it(verb, model, kw, words):
    with pytest.raises(UserError) as e:
        getattr(edgeprof, verb)(model, "raspberry_pi_5", **kw)
    assert "\n" not in str(e.value) and words in str(e.value)
    assert "its options: " in str(e.value)


def test_optimize_takes_a_generative_model():
    kw = dict(backends="llama_cpp", tokens_per_s=5, shortlist=0)
    choice = edgeprof.optimize("llm:qwen2.5-0.5b", "raspberry_pi_5", **kw)
    assert choice == edgeprof.optimize_llm("llm:qwen2.5-0.5b", "raspberry_pi_5", **kw)
    assert choice.format and choice.measured_here == []
    assert choice.to_dict()["measured_here"] == []  # recommend's has none: it measures nothing
    assert "measured_here" not in edgeprof.recommend("llm:qwen2.5-0.5b", "raspberry_pi_5",
                                                     backends="llama_cpp").to_dict()


def test_estimate_with_a_backend_carries_the_prediction_predict_gives():
    """The CLI's estimate --backend and predict are one call of edgeprof.estimate: its
    prediction is predict's, figure for figure."""
    est = edgeprof.estimate("builtin:small_cnn", "raspberry_pi_4", backend="tflite", threads=2)
    pred = edgeprof.predict("builtin:small_cnn", "raspberry_pi_4", "tflite", threads=2)
    assert est.prediction.to_dict() == pred.to_dict()
    assert est.to_dict()["prediction"] == pred.to_dict()
    assert "prediction" not in edgeprof.estimate("builtin:small_cnn", "raspberry_pi_4").to_dict()
    with pytest.raises(UserError, match="--threads is for the prediction: give --backend"):
        edgeprof.estimate("builtin:small_cnn", "raspberry_pi_4", threads=2)


def test_a_generative_recommend_holds_the_deepest_context_asked():
    kw = dict(backends="llama_cpp", prompt_tokens=64, gen_tokens=16)
    deep = edgeprof.recommend("llm:qwen2.5-0.5b", "raspberry_pi_5", depths=[0, 4096], **kw)
    assert deep.context_tokens == 4096 + 64 + 16
    assert edgeprof.recommend("llm:qwen2.5-0.5b", "raspberry_pi_5",
                              **kw).context_tokens == 64 + 16


def test_compare_takes_profiles_of_either_kind(tmp_path, plugins, cache):
    from edgeprof.profilers.report.compare import Comparison, GenerativeComparison

    tensor = [edgeprof.profile("builtin:mlp", run_options=FAST) for _ in range(2)]
    (tmp_path / "b").mkdir()  # a folder holding profile.json, as --out writes it
    (tmp_path / "b" / "profile.json").write_text(json.dumps(tensor[1].to_dict()))
    rows = edgeprof.compare(tensor[0], tmp_path / "b")  # a report and a folder
    assert [(type(r), r.backend, r.status) for r in rows] == [
        (Comparison, "torch_eager", "compared")]
    gen = [edgeprof.profile("llm:smollm2-135m", backends="fake_llm", precisions="q4_0",
                            plugins=plugins, **SHAPE).to_dict() for _ in range(2)]
    rows = edgeprof.compare(*gen)  # two dicts
    assert rows and all(isinstance(r, GenerativeComparison) for r in rows)
    with pytest.raises(edgeprof.ConfigError, match="tensor latency and generative tokens/s"):
        edgeprof.compare(tensor[0], gen[0])


# ------------------------------------------------------------------------- calibrate
@pytest.mark.parametrize("kw, words", [
    ({"backend": "onnxruntime", "measurements": "m.csv", "isolate": True, "runs": 3},
     "--runs, --isolate measure"),
    ({"backend": "onnxruntime", "threads": 2}, "--threads and --out go with --measurements"),
    ({"backend": "onnxruntime", "target": "jetson_nano"}, "only --target host"),
    ({"backend": "onnxruntime", "models": "smollm2-135m"}, "--models names the presets"),
    ({"backend": "onnxruntime", "timeout_s": 5.0}, "--isolate and --timeout go with a "
                                                   "generative backend"),
    ({"backend": "fake_llm", "kernels": "tiny"}, "--kernels and --runs go with a tensor")])
def test_calibrate_checks_its_options_in_the_api(plugins, kw, words):
    with pytest.raises(UserError) as e:
        edgeprof.calibrate(plugins=plugins, **kw)
    assert "\n" not in str(e.value) and words in str(e.value)


def test_calibrate_of_a_generative_backend_measures_its_presets(tmp_path, plugins, cache,
                                                                monkeypatch):
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "cal"))
    result = edgeprof.calibrate("fake_llm", models="smollm2-135m,smollm2-360m",
                                plugins=plugins)
    assert isinstance(result, edgeprof.CalibrationResult)
    assert (result.kind, result.source) == ("generative", "measured")
    assert result.path.parent == tmp_path / "cal" and result.path.is_file()
    assert {r.model for r in result.records} == {"smollm2-135m", "smollm2-360m"}


def test_the_calibrate_command_is_one_call_of_the_api(monkeypatch, capsys, tmp_path):
    """``edgeprof calibrate`` hands its flags to ``edgeprof.api.calibrate`` as they were given
    and prints what it returns; it measures nothing itself."""
    seen = {}

    class Cal:
        name, cv, parameters, fingerprint, note = "host--x-fp32", {"n": 2}, {}, {}, "n"

    def fake(backend, target, precision, **kw):
        seen.update(backend=backend, target=target, precision=precision, **kw)
        return edgeprof.CalibrationResult("tensor", "measured", Cal(), tmp_path / "c.json")

    monkeypatch.setattr(edgeprof.api, "calibrate", fake)
    code = main(["calibrate", "--backend", "onnxruntime", "--kernels", "tiny", "--runs", "7",
                 "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"] == "host--x-fp32" and out["path"] == str(tmp_path / "c.json")
    assert seen["backend"] == "onnxruntime" and seen["target"] == "host"
    assert seen["kernels"] == "tiny" and seen["runs"] == 7 and seen["measurements"] is None
    assert seen["isolate"] is False and seen["timeout_s"] is None and seen["fleet"] is None


@pytest.mark.parametrize("argv, words", [
    (["--backend", "onnxruntime", "--measurements", "m.csv", "--isolate"],
     "--isolate measure"),
    (["--backend", "onnxruntime", "--models", "smollm2-135m"], "--models names the presets"),
    (["--backend", "onnxruntime", "--target", "jetson_nano"], "only --target host")])
def test_the_calibrate_commands_mistakes_stay_one_line_exit_2(capsys, argv, words):
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err and "Traceback" not in err

"""Requests and records are small serializable values (to_dict/from_dict)."""

from __future__ import annotations

import json

import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UserError
from edgeprof.core.requests import MeasureRequest, Runner
from edgeprof.core.results import BenchmarkResult, LatencyStats, RunRecord, WarningRecord


def test_request_round_trips_through_json():
    req = MeasureRequest(backend="onnxruntime", model="model.onnx", input_shapes=[[1, 3, 8, 8]],
                         input_dtypes=["float32"], plugins_file="plugins.toml",
                         calibration="calib.npz",
                         config=RunConfig(precision="int8", threads=2, isolate=True,
                                          timeout_s=30.0, options={"ci_width": 0.02}))
    back = MeasureRequest.from_dict(json.loads(json.dumps(req.to_dict())))
    assert back == req
    assert isinstance(back.config, RunConfig) and back.config.options == {"ci_width": 0.02}


def test_in_process_shortcuts_are_never_serialized():
    class Handle:  # what for_handle reads from a ModelHandle
        spec = "object:Net"
        path = None
        calibration = None
        batch_size = 4
        input_specs = [type("S", (), {"shape": (4, 8), "dtype": "float32"})()]

    req = MeasureRequest.for_handle("torch_eager", Handle(), RunConfig())
    d = req.to_dict()
    assert "handle" not in d and "backend_type" not in d
    assert d["model"] == "object:Net" and d["input_shapes"] == [[4, 8]]
    assert req.batch_size == 4 and "nn.Module object" in req.local_only()
    assert MeasureRequest(backend="x", model="m.onnx").local_only() is None


@pytest.mark.parametrize("d,word", [
    ({"backend": "x", "model": "m.onnx", "colour": "red"}, "colour"),
    ({"backend": "x", "model": "m.onnx", "config": {"precision": "fp32", "speed": 1}}, "speed"),
    ({"backend": "x"}, "model spec or an artifact"),
    ({"backend": "", "model": "m.onnx"}, "backend"),
])
def test_bad_request_dicts_are_user_errors(d, word):
    with pytest.raises(UserError, match=word):
        MeasureRequest.from_dict(d)


def test_record_round_trips_with_stats_and_warnings():
    stats = LatencyStats(n=3, median_ms=1.0, mean_ms=1.1, std_ms=0.1, cv=0.09, iqr_ms=0.1,
                         min_ms=0.9, max_ms=1.3, p50_ms=1.0, p90_ms=None, p99_ms=None,
                         ci_low_ms=0.95, ci_high_ms=1.05, null_reasons={"p90_ms": "few"},
                         samples_ms=[0.9, 1.0, 1.3])
    r = BenchmarkResult(backend="b", model="m", requested_precision="fp32",
                        executed_precision="fp32", status="ok", stats=stats,
                        warnings=[WarningRecord("high_cv", "spread")], notes=["n"],
                        config={"precision": "fp32"}, extra={"agreement": {"top1": 1.0}})
    back = RunRecord.from_dict(json.loads(json.dumps(r.to_dict())))
    assert RunRecord is BenchmarkResult
    assert back == r and back.to_dict() == r.to_dict()
    assert BenchmarkResult.from_dict({**r.to_dict(), "from_a_newer_version": 1}) == r


def test_runners_satisfy_the_protocol():
    from edgeprof.profilers.measure.runners import InlineRunner, IsolatedRunner

    for runner in (InlineRunner(), IsolatedRunner()):
        assert isinstance(runner, Runner) and runner.name


def test_a_generative_request_round_trips_through_json():
    from edgeprof.core.llm import GenerationConfig, LLMModel, LLMSpec

    spec = LLMSpec(name="tiny", family="llama", hidden_size=64, num_layers=2, num_heads=4,
                   num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=1000,
                   max_position_embeddings=256, tie_word_embeddings=True)
    model = LLMModel(spec=spec, source_kind="preset", given="llm:tiny")
    gen = GenerationConfig(prompt_tokens=16, gen_tokens=4, depths=(0, 64), repetitions=2,
                           warmup=0, threads=2)
    req = MeasureRequest.for_generation("llama_cpp", model, "q4_0", gen, timeout_s=120,
                                        isolate=True, workdir="/tmp/w")
    d = json.loads(json.dumps(req.to_dict()))
    assert d["workload"] == "generate" and d["generation"]["depths"] == [0, 64]
    assert d["config"]["precision"] == "q4_0" and d["config"]["timeout_s"] == 120
    back = MeasureRequest.from_dict(d)
    assert back == req and back.generation_config() == gen
    assert LLMModel.from_dict(back.llm) == model and back.model_name == "tiny"
    # a spec alone (resolved where it runs), and the workload implied by a generation config
    by_spec = MeasureRequest.from_dict({"backend": "llama_cpp", "model": "llm:smollm2-135m",
                                        "generation": {"prompt_tokens": 8}})
    assert by_spec.workload == "generate" and by_spec.generation_config().gen_tokens == 128
    assert MeasureRequest(backend="x", model="m.onnx").workload is None


@pytest.mark.parametrize("d,word", [
    ({"backend": "x", "model": "llm:a", "generation": {"tokens": 1}}, "tokens"),
    ({"backend": "x", "model": "llm:a", "generation": {"gen_tokens": 0}}, "gen-tokens"),
    ({"backend": "x", "model": "llm:a", "workload": ""}, "workload"),
])
def test_bad_generative_requests_are_user_errors(d, word):
    with pytest.raises(UserError, match=word):
        MeasureRequest.from_dict(d)


def test_a_tensor_request_with_a_generation_config_is_refused_by_its_workload():
    """The tensor workload's own check refuses it (one line), before anything runs."""
    from edgeprof.profilers.measure.measure import measure

    req = MeasureRequest.from_dict({"backend": "onnxruntime", "model": "builtin:mlp",
                                    "workload": "tensor", "generation": {}})
    with pytest.raises(UserError, match="a tensor measure request .* takes no generation"):
        measure(req)


def test_a_generative_record_round_trips_with_its_kind():
    from edgeprof.core.llm import GenerationRecord
    from edgeprof.core.results import GenerativeRunRecord, record_from_dict

    r = GenerationRecord(model="tiny", backend="llama_cpp", format="q4_0", n_prompt=16,
                         n_gen=4, repetitions=2, decode_tokens_per_s={"median": 10.0},
                         samples={"prefill_s": [0.1, 0.2]})
    run = GenerativeRunRecord(backend="llama_cpp", model="tiny", format="q4_0",
                              records=[r], notes=["n"], extra={"fleet": {"board": "b"}})
    assert run.settle().status == "ok"
    d = json.loads(json.dumps(run.to_dict()))
    assert d["kind"] == "generate"
    back = record_from_dict(d)
    assert isinstance(back, GenerativeRunRecord) and back == run
    assert isinstance(record_from_dict(BenchmarkResult(
        backend="b", model="m", requested_precision="fp32", executed_precision=None,
        status="failed").to_dict()), BenchmarkResult)
    run.fail("failed", "timed out after 1 s")  # an ok depth keeps its figures
    assert run.status == "ok" and r.decode_tokens_per_s == {"median": 10.0}
    r.status = "failed"
    assert run.fail("failed", "timed out after 1 s").reason == "timed out after 1 s"
    assert r.decode_tokens_per_s is None

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

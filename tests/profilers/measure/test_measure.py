"""measure(): the one path every run takes, the one place a failure becomes a status, and the
``edgeprof_measure`` hook around it."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap

import pytest

from edgeprof.core.backend import Backend, Capabilities, RunConfig
from edgeprof.core.errors import ModelError, UnsupportedError
from edgeprof.core.requests import MeasureRequest
from edgeprof.profilers.measure.harness import MeasureFailure
from edgeprof.profilers.measure.measure import benchmark_backend, measure, status_of
from edgeprof.profilers.measure.runners import InlineRunner, decode_error, encode_error
from tests import fakes

FAST = dict(min_time_s=0.05, max_time_s=1.0, runs=20)


def _plugin(tmp_path, name: str, source: str, *also: str):
    """A plugins.toml listing ``source`` (written to NAME.py) and ``also`` (module paths)."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    modules = [*also, f"{name}.py"]
    toml = tmp_path / f"{name}.toml"
    toml.write_text("[plugins]\nmodules = [" + ", ".join(f'"{m}"' for m in modules) + "]\n")
    return toml


# ------------------------------------------------------------------- error -> status
@pytest.mark.parametrize("error,status,reason", [
    (MeasureFailure("prepare", RuntimeError("boom\nmore")), "failed",
     "prepare failed: RuntimeError: boom"),
    (MeasureFailure("inference", MemoryError("no room")), "failed",
     "out of memory during inference: MemoryError: no room"),
    (MeasureFailure("prepare", SystemExit(3)), "failed", "prepare failed: SystemExit: 3"),
    (MeasureFailure("import", ImportError("libfoo.so")), "unavailable",
     "importing the runtime failed: ImportError: libfoo.so"),
    (MeasureFailure("prepare", UnsupportedError("no int4")), "unsupported", "no int4"),
    (UnsupportedError("no int4"), "unsupported", "no int4"),
    (ValueError("odd"), "failed", "ValueError: odd"),
])
def test_status_of(error, status, reason):
    assert status_of(error) == (status, reason)


def test_user_errors_are_not_statuses():
    with pytest.raises(ModelError):
        status_of(ModelError("bad spec"))


def test_errors_cross_a_process_line_as_their_nearest_known_class():
    class ConverterCrash(RuntimeError):
        pass

    back = decode_error(json.loads(json.dumps(encode_error(ConverterCrash("bad graph")))))
    assert isinstance(back, RuntimeError)
    assert status_of(MeasureFailure("prepare", back)) == (
        "failed", "prepare failed: ConverterCrash: bad graph")
    back = decode_error(encode_error(UnsupportedError("no fp16", backend="x")))
    assert isinstance(back, UnsupportedError) and str(back) == "no fp16"


class _Interrupting(Backend):
    name = "interrupting"
    capabilities = Capabilities(precisions=("fp32",))

    def prepare(self, model, config, inputs):
        raise KeyboardInterrupt


def test_ctrl_c_is_never_a_status():
    with pytest.raises(KeyboardInterrupt):
        benchmark_backend(_Interrupting, fakes.fake_handle(), RunConfig(**FAST))


def test_a_failed_record_keeps_what_was_measured_before():
    r = benchmark_backend(fakes.FakeRaiseBackend(), fakes.fake_handle(), RunConfig(**FAST))
    assert r.status == "failed" and r.reason.startswith("inference failed")
    assert r.load_time_s is not None and r.runtime == "fake"  # prepare had finished
    assert r.model == fakes.FAKE_MODEL_SPEC and r.stats is None


def test_the_backend_object_is_built_once_per_measurement():
    built = []

    class Counting(fakes.FakeBusyBackend):
        name = "counting"

        def __init__(self):
            built.append(self)

    r = benchmark_backend(Counting, fakes.fake_handle(),
                          RunConfig(**FAST, options={"fake_ms": 0.1}))
    assert r.status == "ok" and len(built) == 1


def test_unknown_backend_is_a_user_error_before_anything_runs():
    from edgeprof.core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="no_such_backend"):
        measure(MeasureRequest(backend="no_such_backend", model=fakes.FAKE_MODEL_SPEC,
                               input_shapes=[[1, 8]]))


# ---------------------------------------------------------------------------- the hook
OBSERVER = """
import json
from edgeprof import hookimpl

@hookimpl(wrapper=True)
def edgeprof_measure(request, runner):
    record = yield
    with open({log!r}, "a") as f:
        f.write(json.dumps({{"backend": request.backend, "precision": request.config.precision,
                            "runner": runner.name, "status": record.status}}) + "\\n")
    return record
"""


def test_a_hook_wrapper_sees_every_run_of_a_profile(tmp_path):
    from edgeprof.api import profile

    log = tmp_path / "runs.jsonl"
    toml = _plugin(tmp_path, "observer", OBSERVER.format(log=str(log)), str(fakes.FAKES_PATH))
    report = profile("builtin:small_cnn", backends="fake_busy,fake_raise,fake_unavailable",
                     precisions="fp32,int8", plugins=str(toml), run_options=FAST)
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(s["backend"], s["precision"], s["status"]) for s in seen] == [
        (r.backend, r.requested_precision, r.status) for r in report.runs]
    assert {s["status"] for s in seen} == {"ok", "failed", "unsupported", "unavailable"}
    assert {s["runner"] for s in seen} == {"inline"}


TAKEOVER = """
from edgeprof import hookimpl
from edgeprof.core.results import BenchmarkResult

@hookimpl(tryfirst=True)
def edgeprof_measure(request, runner):
    if request.backend != "fake_busy":
        return None
    return BenchmarkResult(backend=request.backend, model=request.model_name,
                           requested_precision=request.config.precision,
                           executed_precision=None, status="failed",
                           reason="taken over by a plugin")
"""


def test_a_tryfirst_implementation_can_take_a_run_over(tmp_path):
    from edgeprof.core.plugins import get_registry

    toml = _plugin(tmp_path, "takeover", TAKEOVER, str(fakes.FAKES_PATH))
    reg = get_registry(str(toml))
    for backend, reason in (("fake_busy", "taken over by a plugin"),
                            ("fake_raise", "inference failed: RuntimeError: fake failure")):
        req = MeasureRequest.for_handle(backend, fakes.fake_handle(), RunConfig(**FAST),
                                        plugins_file=toml)
        assert measure(req, registry=reg).reason == reason


# ------------------------------------------------------------------------ requests
def test_a_request_by_spec_resolves_the_model_in_its_runner(tmp_path):
    toml = fakes.write_plugins_file(tmp_path)
    req = MeasureRequest(backend="fake_busy", model=fakes.FAKE_MODEL_SPEC, input_shapes=[[2, 8]],
                         config=RunConfig(**FAST, options={"fake_ms": 0.1}),
                         plugins_file=str(toml))
    r = measure(req, InlineRunner())
    assert r.status == "ok" and r.batch_size == 2 and r.model == fakes.FAKE_MODEL_SPEC


# ----------------------------------------------------------- framework-free artifacts
def _onnx_file(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).random((8, 4), dtype=np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=8), path)
    return path


RUN_FRESH = """
import json, sys
from edgeprof.core.backend import RunConfig
from edgeprof.core.requests import MeasureRequest
from edgeprof.profilers.measure.measure import measure

request = MeasureRequest.from_dict(json.loads(sys.argv[1]))
r = measure(request)
print(json.dumps({"status": r.status, "reason": r.reason,
                  "heavy": [m for m in ("torch", "tensorflow") if m in sys.modules]}))
"""


def _run_fresh(request: MeasureRequest) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN_FRESH, json.dumps(request.to_dict())],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_running_an_onnx_file_imports_neither_torch_nor_tensorflow(tmp_path):
    model = _onnx_file(tmp_path / "tiny.onnx")
    got = _run_fresh(MeasureRequest(backend="onnxruntime", model=str(model),
                                    config=RunConfig(runs=10, min_time_s=0.01, max_time_s=0.5)))
    assert got == {"status": "ok", "reason": None, "heavy": []}


def test_running_a_built_onnx_artifact_imports_neither_torch_nor_tensorflow(tmp_path):
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry

    reg = get_registry()
    handle = resolve_model(str(_onnx_file(tmp_path / "tiny.onnx")), registry=reg)
    artifact = reg.backend("onnxruntime")().build(handle, "fp32")
    got = _run_fresh(MeasureRequest(backend="onnxruntime", artifact=artifact.to_dict(),
                                    config=RunConfig(runs=10, min_time_s=0.01, max_time_s=0.5)))
    assert got == {"status": "ok", "reason": None, "heavy": []}


# -------------------------------------------------------------- profile's trace folder
TRACER = """
from pathlib import Path
from edgeprof import hookimpl
from tests.fakes import FakeBusyBackend

class Tracing(FakeBusyBackend):
    name = "tracing"

    def operator_profile(self, prepared, runs=10, trace_path=None):
        import pandas as pd

        if trace_path:
            Path(trace_path).write_text('{"traceEvents": []}')
        return pd.DataFrame([{"operator": "conv1", "op_type": "Conv", "latency_ms": 0.1,
                              "calls": 1, "layer": "conv1"}])

@hookimpl
def edgeprof_register_backends():
    return [Tracing]
"""


def test_profile_with_traces_leaves_no_temporary_folder(tmp_path):
    from edgeprof.api import profile

    toml = _plugin(tmp_path, "tracer", TRACER)
    report = profile("builtin:small_cnn", backends="tracing", plugins=str(toml),
                     run_options=FAST, trace=True, out=tmp_path / "out")
    trace = report.runs[0].trace_file
    assert trace is not None and (tmp_path / "out" / "trace_tracing_fp32.json").is_file()
    folder = trace.parent
    assert folder.is_dir()  # kept while the report lives (report.save may be called again)
    del report
    gc.collect()
    assert not folder.exists()

"""First-run figures (issue 21, item 4): building and converting the model happen before the
load clock and the memory baseline start, so a cold-cache run and a warm one report the same
load time and peak memory within their noise.

Each run is a separate worker process (``isolate=True``), as two ``edgeprof profile`` commands
would be: the cold one converts (importing the converter's framework, running the runtime for
the agreement check), the warm one finds the conversion in the cache. The bounds are generous:
this may run on a loaded 2-core machine.
"""

from __future__ import annotations

import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.profilers.measure.measure import benchmark_backend

MB = 1e6


def _run(backend: str, precision: str):
    cfg = RunConfig(precision=precision, min_time_s=0.05, max_time_s=0.5, runs=20,
                    isolate=True)
    r = benchmark_backend(backend, "builtin:small_cnn", cfg)
    assert r.status == "ok", r.reason
    return r


@pytest.mark.parametrize("backend, precision, runtime", [
    ("tflite", "fp32", "ai_edge_litert"),
    ("onnxruntime", "int8", "onnxruntime"),  # the quantizer runs ONNX Runtime itself
])
def test_a_cold_cache_run_reports_the_load_time_and_memory_of_a_warm_one(
        tmp_path, monkeypatch, backend, precision, runtime):
    pytest.importorskip(runtime)
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))  # cold: nothing built
    cold = _run(backend, precision)
    warm = _run(backend, precision)
    assert cold.load_time_s < 5 * warm.load_time_s + 0.5, (cold.load_time_s, warm.load_time_s)
    # peak memory above the post-build baseline: not the converter's hundreds of MB, and
    # not a runtime's one-time set-up that the converter happened to do first
    assert abs(cold.peak_memory_bytes - warm.peak_memory_bytes) \
        <= 0.2 * warm.peak_memory_bytes + 5 * MB, (cold.peak_memory_bytes,
                                                   warm.peak_memory_bytes)
    assert cold.memory_detail["baseline"] == warm.memory_detail["baseline"]
    # the conversion is timed apart, before the load, and the record says so
    built = [r.config["harness"]["build"] for r in (cold, warm)]
    assert [b["cache_hit"] for b in built] == [False, True], built
    assert built[0]["time_s"] > cold.load_time_s
    assert {b["when"] for b in built} == {"before the load clock and the memory baseline"}
    for r in (cold, warm):
        assert r.config["harness"]["setup"]["load_s"] >= 0
        assert r.environment["conditions"]["load"].startswith("timed after one untimed set-up")
        assert r.environment["conditions"]["process"] == "isolated"


def test_the_backends_own_prepare_is_timed_as_it_is_and_says_so():
    """A backend without a build/load pair (its prepare() does everything) keeps its
    prepare() inside the load clock; the record says so instead of claiming a build."""
    from tests import fakes

    r = benchmark_backend(fakes.FakeBusyBackend(), fakes.fake_handle(),
                          RunConfig(min_time_s=0.02, max_time_s=0.2, runs=5,
                                    options={"fake_ms": 0.05}))
    assert r.status == "ok", r.reason
    assert r.config["harness"]["build"]["when"].startswith("inside the backend's own prepare")
    assert r.config["harness"]["setup"] is None
    assert r.environment["conditions"]["load"].startswith("the backend's prepare()")
    assert r.environment["conditions"]["process"] == "inline"


def test_build_runs_before_the_memory_baseline_and_the_load_clock():
    """A converter's time and transient memory (here 80 MB, touched, then freed) stay out of
    the load time and the peak memory; the artifact is loaded twice: once untimed to set the
    runtime up, then timed."""
    import time
    from types import SimpleNamespace

    from edgeprof.core.backend import Backend, Capabilities, PreparedModel
    from tests import fakes

    class SlowBuild(Backend):
        name = "slow_build"
        capabilities = Capabilities(precisions=("fp32",), model_formats=("torch",))
        loads = 0

        def build(self, model, precision, calibration=None):
            junk = bytearray(80_000_000)
            for i in range(0, len(junk), 4096):  # touch every page, as a converter would
                junk[i] = 1
            time.sleep(0.3)
            return SimpleNamespace(cache_hit=False, path=None)

        def load(self, artifact, config, inputs):
            type(self).loads += 1
            return PreparedModel(run=lambda xs: None, inputs=inputs, runtime="slow",
                                 runtime_version="1", executed_precision="fp32")

    r = benchmark_backend(SlowBuild, fakes.fake_handle(),
                          RunConfig(min_time_s=0.02, max_time_s=0.2, runs=5))
    assert r.status == "ok", r.reason
    assert SlowBuild.loads == 2
    assert r.config["harness"]["build"]["time_s"] >= 0.3
    assert r.load_time_s < 0.25
    assert r.peak_memory_bytes < 40 * MB, r.memory_detail

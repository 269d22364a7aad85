"""Generative runs on the one run path: ``measure(request)`` dispatches on the backend's
workload, the inline and isolated runners run it, the ``edgeprof_measure`` hook sees it, and a
worker that crashes in the runtime or hangs past its timeout fails the run, never the caller.

The backend here is a real-time fake (sleeps, no runtime), defined at module level so the
isolated worker imports it by module path; its format says how it misbehaves."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from edgeprof.core.artifact import Artifact, Manifest, file_records
from edgeprof.core.errors import UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.llm import GenerationConfig, GenerativeBackend, LLMModel, LLMSpec
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import GenerativeRunRecord, record_from_dict
from edgeprof.profilers.measure.measure import measure
from edgeprof.profilers.measure.runners import InlineRunner, IsolatedRunner

SPEC = LLMSpec(name="tiny-gen", family="llama", hidden_size=64, num_layers=2, num_heads=4,
               num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=1000,
               max_position_embeddings=256, tie_word_embeddings=True)
MODEL = LLMModel(spec=SPEC, source_kind="preset", given="llm:tiny-gen")
CONFIG = GenerationConfig(prompt_tokens=8, gen_tokens=4, depths=(0, 16), repetitions=2,
                          warmup=0, threads=1)


class SleepSession:
    build_commit = "sleep-1"

    def __init__(self, fmt: str):
        self.fmt = fmt

    def reset(self) -> None:
        pass

    def prefill(self, token_ids) -> None:
        time.sleep(1e-5 * len(token_ids))

    def decode(self, n, on_token) -> None:
        if self.fmt == "crash":  # a runtime that segfaults mid-generation
            os.kill(os.getpid(), signal.SIGSEGV)
        for _ in range(n):
            time.sleep(2e-4)
            on_token(7)

    def close(self) -> None:
        pass


class SleepGenBackend(GenerativeBackend):
    """Formats: q4_0 (works), crash (SIGSEGV while decoding), hang (load never returns)."""

    name = "sleep_gen"
    formats = ("q4_0", "crash", "hang")

    def build_llm(self, model, fmt, workdir: Path) -> Artifact:
        folder = Path(workdir) / f"{model.spec.name}-{fmt}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.bin").write_bytes(b"\1" * 1000)
        m = Manifest(format="gguf", backend=self.name, requested_precision=fmt,
                     files=file_records(folder), entry="model.bin")
        art = Artifact(folder, m)
        art.write_manifest()
        return art

    def load_llm(self, artifact, *, threads, n_ctx, device="cpu"):
        if artifact.manifest.requested_precision == "hang":
            time.sleep(600)
        return SleepSession(artifact.manifest.requested_precision)


def request(fmt: str = "q4_0", tmp: Path | None = None, **kw) -> MeasureRequest:
    return MeasureRequest.for_generation(SleepGenBackend, MODEL, fmt, CONFIG,
                                         workdir=tmp, **kw)


# ----------------------------------------------------------------------------- the tests
def test_a_generative_request_round_trips_and_dispatches_inline(tmp_path):
    req = request(tmp=tmp_path)
    assert req.workload == "generate" and req.config.precision == "q4_0"
    rec = measure(req, InlineRunner())
    assert isinstance(rec, GenerativeRunRecord) and rec.status == "ok", rec.reason
    assert [r.n_depth for r in rec.records] == [0, 16]
    assert all(r.ok and r.decode_tokens_per_s["median"] > 0 for r in rec.records)
    assert rec.extra["process"] == "inline"
    back = record_from_dict(rec.to_dict())
    assert isinstance(back, GenerativeRunRecord) and back.to_dict() == rec.to_dict()
    assert rec.to_dict()["kind"] == "generate"


def test_inline_and_isolated_give_the_same_fields(tmp_path):
    inline = measure(request(tmp=tmp_path), InlineRunner())
    isolated = measure(request(tmp=tmp_path), IsolatedRunner(timeout_s=120))
    assert isolated.status == "ok", isolated.reason
    assert isolated.extra["process"] == "isolated"
    assert any("isolated worker process" in n for n in isolated.notes)
    a, b = inline.to_dict(), isolated.to_dict()
    assert set(a) == set(b)
    for ra, rb in zip(a["records"], b["records"]):
        assert set(ra) == set(rb)
        for k in ("model", "backend", "format", "n_prompt", "n_gen", "n_depth", "n_threads",
                  "repetitions", "status", "model_size"):
            assert ra[k] == rb[k], k
        assert rb["peak_rss_bytes"] and rb["decode_tokens_per_s"]["median"] > 0


def test_a_crash_inside_the_runtime_fails_the_run_not_the_caller(tmp_path):
    rec = measure(request("crash", tmp_path), IsolatedRunner(timeout_s=120))
    assert rec.status == "failed" and "SIGSEGV" in rec.reason
    assert all(r.status == "failed" and "SIGSEGV" in r.reason for r in rec.records)
    after = measure(request(tmp=tmp_path), IsolatedRunner(timeout_s=120))  # caller goes on
    assert after.ok


def test_a_timeout_kills_the_worker(tmp_path):
    t0 = time.monotonic()
    rec = measure(request("hang", tmp_path, timeout_s=0.5))  # a timeout implies isolation
    assert time.monotonic() - t0 < 30
    assert rec.status == "failed" and rec.reason == "timed out after 0.5 s"
    assert [r.status for r in rec.records] == ["failed", "failed"]
    assert all(r.decode_tokens_per_s is None for r in rec.records)


def test_the_measure_hook_sees_generative_runs(tmp_path):
    from edgeprof.core.plugins import get_registry

    seen = []

    class Watch:
        @hookimpl(wrapper=True)
        def edgeprof_measure(self, request, runner):
            record = yield
            seen.append((request.workload, type(record).__name__, runner.name))
            return record

    reg = get_registry()
    watch = Watch()
    reg.pm.register(watch)
    try:
        rec = measure(request(tmp=tmp_path), InlineRunner(), registry=reg)
    finally:
        reg.pm.unregister(watch)
    assert rec.ok
    assert seen == [("generate", "GenerativeRunRecord", "inline")]


def test_a_request_whose_workload_is_not_the_backends_is_refused(tmp_path):
    req = MeasureRequest(backend="sleep_gen", model="m.onnx", workload="tensor",
                         backend_type=SleepGenBackend)
    with pytest.raises(UserError, match="generative models"):
        measure(req, InlineRunner())


# ------------------------------------------------------------------------------ the fleet
def _llama_cpp() -> bool:
    from edgeprof.core.plugins import get_registry

    entry = get_registry().backends.get("llama_cpp")
    return entry is not None and entry.cls.availability().available


@pytest.mark.skipif(not _llama_cpp(), reason="llama-cpp-python is not installed")
def test_a_generative_profile_on_the_fleet(tmp_path):
    """Built here, shipped, loaded and timed on a board: an emulating one's tokens/s are
    this host's (said in each run); a real board's are measured on it, with its name."""
    pytest.importorskip("distributed")
    import platform

    from edgeprof.api import profile_llm
    from edgeprof.profilers.measure.fleet import machine_family
    from tests.fleet_support import edgeprof, env, start_scheduler, start_worker, stop_all, \
        wait_boards

    import subprocess

    real, fake = (("desktop_ddr4", "raspberry_pi_5") if machine_family(platform.machine())
                  == "x86" else ("raspberry_pi_5", "desktop_ddr4"))
    base = env()
    procs = []
    sched, address = start_scheduler(tmp_path, base)
    procs.append(sched)
    try:
        procs.append(start_worker(tmp_path, address, fake, "emu-1", base))
        procs.append(subprocess.Popen(
            edgeprof("worker", address, "--target", real, "--name", "real-1"),
            stdout=open(tmp_path / "worker-real-1.log", "w"), stderr=subprocess.STDOUT,
            env=base))
        wait_boards(address, {"emu-1", "real-1"})
        kw = dict(backends="llama_cpp", precisions="q4_0", prompt_tokens=16, gen_tokens=4,
                  repetitions=2, fleet=address)
        emu = profile_llm("llm:smollm2-135m", target=fake, **kw)
        [run] = emu["runs"]
        assert run["status"] == "ok", run["reason"]
        assert run["board"]["board"] == "emu-1" and run["board"]["emulating"] is True
        assert run["measured_on"].startswith(f"measured on HOST, emulating {fake}")
        assert any("this host's figures" in w for w in run["warnings"])
        on_board = profile_llm("llm:smollm2-135m", target=real, **kw)
        [run] = on_board["runs"]
        assert run["status"] == "ok" and run["provenance"] == "measured"
        assert run["board"]["board"] == "real-1" and run["board"]["emulating"] is False
        assert run["measured_on"].startswith("measured on board real-1")
        assert run["decode_tokens_per_s"]["median"] > 0
    finally:
        stop_all(procs)

"""The generative harness (measure_generation) with a fake backend and a fake clock: llama-bench's
definitions, forced lengths, varied prompts, statuses through the one rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.core.artifact import Artifact, Manifest, file_records
from edgeprof.core.backend import Availability
from edgeprof.core.errors import UnknownNameError, UserError
from edgeprof.core.llm import GenerationConfig, GenerativeBackend, LLMModel, LLMSpec
from edgeprof.profilers.measure import generate
from edgeprof.profilers.measure.generate import measure_generation

PREFILL_S_PER_TOKEN = 0.001  # the fake runtime's costs, on the fake clock
DECODE_S_PER_TOKEN = 0.010
CACHED_S = 1e-6  # what a cached identical prompt costs


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


SPEC = LLMSpec(name="tiny-test", family="llama", hidden_size=64, num_layers=2, num_heads=4,
               num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=1000,
               max_position_embeddings=256, tie_word_embeddings=True)
MODEL = LLMModel(spec=SPEC, source_kind="preset", given="llm:tiny-test")


class FakeSession:
    """A runtime that answers a prompt it has seen before (after the same cache content)
    from a cache, like OpenVINO GenAI did: the harness must never let that happen."""

    build_commit = "fake-1234"

    def __init__(self, backend: FakeBackend):
        self.b = backend
        self.cache: list[int] = []
        self.seen: set[tuple[int, ...]] = set()

    def reset(self) -> None:
        self.cache = []

    def prefill(self, token_ids) -> None:
        ids = list(token_ids)
        assert all(isinstance(t, int) for t in ids)
        self.b.prompts.append(tuple(ids))
        key = tuple(self.cache + ids)
        if key in self.seen:
            self.b.cache_hits += 1
            self.b.clock.advance(CACHED_S)
        else:
            self.seen.add(key)
            self.b.clock.advance(PREFILL_S_PER_TOKEN * len(ids))
        self.cache.extend(ids)

    def decode(self, n, on_token) -> None:
        # like llama.cpp: a token is sampled from the logits already there (free), then
        # evaluated to give the next logits
        for i in range(n + self.b.extra_tokens):
            on_token(7)
            self.b.clock.advance(DECODE_S_PER_TOKEN)
            self.cache.append(7)

    def close(self) -> None:
        self.b.closed += 1


class FakeBackend(GenerativeBackend):
    name = "fake_llm"
    formats = ("q4_0", "q8_0")
    clock: FakeClock
    extra_tokens = 0  # decode gives n + extra_tokens tokens
    fail_build: BaseException | None = None
    fail_load: BaseException | None = None

    def __init__(self):
        self.prompts: list[tuple[int, ...]] = []
        self.cache_hits = 0
        self.closed = 0
        self.built = 0
        self.loaded: dict = {}

    def supports(self, model, fmt, device="cpu"):
        if model.spec.family == "mamba":
            return f"{self.name} cannot run the {model.spec.family} architecture"
        return super().supports(model, fmt, device)

    def build_llm(self, model, fmt, workdir: Path) -> Artifact:
        if self.fail_build is not None:
            raise self.fail_build
        self.built += 1
        folder = Path(workdir) / f"{model.spec.name}-{fmt}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.bin").write_bytes(b"\1" * (1000 if fmt == "q4_0" else 2000))
        m = Manifest(format="gguf", backend=self.name, requested_precision=fmt,
                     files=file_records(folder), entry="model.bin")
        art = Artifact(folder, m)
        art.write_manifest()
        return art

    def load_llm(self, artifact, *, threads, n_ctx, device="cpu"):
        if self.fail_load is not None:
            raise self.fail_load
        self.loaded = {"threads": threads, "n_ctx": n_ctx, "device": device}
        return FakeSession(self)


@pytest.fixture
def fake(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(generate, "clock", clock)
    backend = FakeBackend()
    backend.clock = clock
    return backend


CONFIG = GenerationConfig(prompt_tokens=32, gen_tokens=16, depths=(0, 64), repetitions=3,
                          warmup=1, threads=2)


def test_llama_bench_definitions_on_a_fake_clock(fake, tmp_path):
    records = measure_generation(fake, MODEL, "q4_0", CONFIG, tmp_path)
    assert [r.n_depth for r in records] == [0, 64]
    for r in records:
        assert r.status == "ok", r.reason
        assert (r.n_prompt, r.n_gen, r.n_threads, r.repetitions) == (32, 16, 2, 3)
        # pp = n_prompt / prefill time: the depth fill is not timed
        assert r.prefill_tokens_per_s["median"] == pytest.approx(1 / PREFILL_S_PER_TOKEN)
        assert r.prefill_tokens_per_s["stddev"] == pytest.approx(0, abs=1e-6)
        assert r.decode_tokens_per_s["mean"] == pytest.approx(1 / DECODE_S_PER_TOKEN)
        # TTFT: until the first generated token exists (here sampled right after prefill)
        assert r.ttft_ms["median"] == pytest.approx(1e3 * 32 * PREFILL_S_PER_TOKEN)
        # TPOT: the gaps between tokens (the free first sample is not a token's time)
        for k in ("p50", "p90", "mean"):
            assert r.tpot_ms[k] == pytest.approx(1e3 * DECODE_S_PER_TOKEN)
        assert len(r.samples["prefill_s"]) == 3
        assert r.model_size == 1000  # the artifact's file bytes
        assert r.build_commit == "fake-1234" and r.random_weights
        assert r.load_s is not None and r.load_s >= 0
        assert r.artifact["build_s"] >= 0 and r.artifact["manifest"]["format"] == "gguf"
        assert r.peak_rss_bytes and r.peak_rss_bytes > 10 * 2 ** 20  # this process, absolute
        assert r.provenance == "measured"
    # the session's cache holds the deepest test: depth + max(prompt, gen) + 1
    assert fake.loaded == {"threads": 2, "n_ctx": 64 + 32 + 1, "device": "cpu"}
    assert fake.closed == 1 and fake.built == 1
    rows = records[1].bench_rows()
    assert [r["test"] for r in rows] == ["pp32", "tg16"]
    assert rows[0]["n_depth"] == 64 and rows[1]["avg_ts"] == pytest.approx(100)


def test_prompts_vary_so_a_prompt_cache_cannot_fool_the_harness(fake, tmp_path):
    records = measure_generation(fake, MODEL, "q4_0", CONFIG, tmp_path)
    assert all(r.ok for r in records)
    prompts = [p for p in fake.prompts if len(p) == 32]
    # 2 depths x (1 warm-up + 3 repetitions) pp tests, each with its own prompt
    assert len(prompts) == 8 and len(set(prompts)) == 8
    fills = [p for p in fake.prompts if len(p) == 64]
    assert len(fills) == 4 * 2 and len(set(fills)) == len(fills)  # depth 64: pp and tg fills
    assert fake.cache_hits == 0
    lo, hi = generate.token_range(SPEC.vocab_size)
    assert all(lo <= t < hi for p in fake.prompts for t in p) and 0 < lo < hi < 1000


def test_the_fake_prompt_cache_would_show_repeated_prompts(fake, tmp_path, monkeypatch):
    """The control: with one prompt for every repetition, the fake cache answers and the
    prefill rate explodes, which is what the harness's varied prompts prevent."""
    monkeypatch.setattr(generate, "random_tokens", lambda n, vocab, seed: [300] * n)
    r = measure_generation(fake, MODEL, "q4_0", CONFIG, tmp_path)[0]
    assert fake.cache_hits > 0
    assert r.prefill_tokens_per_s["median"] > 100 / PREFILL_S_PER_TOKEN


@pytest.mark.parametrize("extra", [-1, 1])
def test_a_backend_that_does_not_force_the_length_fails_the_run(fake, tmp_path, extra):
    fake.extra_tokens = extra
    records = measure_generation(fake, MODEL, "q4_0", CONFIG, tmp_path)
    for r in records:
        assert r.status == "failed"
        assert "inference failed" in r.reason and "exactly" in r.reason
        assert r.prefill_tokens_per_s is None and r.decode_tokens_per_s is None
    assert fake.closed == 1


def test_backend_failures_become_statuses_never_crashes(fake, tmp_path, monkeypatch):
    fake.fail_build = RuntimeError("quantizer exploded")
    r = measure_generation(fake, MODEL, "q4_0", CONFIG, tmp_path)
    assert [x.status for x in r] == ["failed", "failed"]
    assert r[0].reason == "build failed: RuntimeError: quantizer exploded"

    fake.fail_build, fake.fail_load = None, MemoryError("cannot allocate")
    r = measure_generation(fake, MODEL, "q4_0", CONFIG, tmp_path)[0]
    assert r.status == "failed" and r.reason.startswith("out of memory during load")

    fake.fail_load = None
    r = measure_generation(fake, MODEL, "f16", CONFIG, tmp_path)[0]
    assert r.status == "unsupported" and "does not make format 'f16'" in r.reason
    mamba = LLMModel(spec=LLMSpec(**{**SPEC.to_dict(), "family": "mamba"}), source_kind="preset",
                     given="x")
    r = measure_generation(fake, mamba, "q4_0", CONFIG, tmp_path)[0]
    assert r.status == "unsupported" and "architecture" in r.reason
    r = measure_generation(fake, MODEL, "q4_0",
                           GenerationConfig(prompt_tokens=8, gen_tokens=4, device="cuda",
                                            repetitions=1), tmp_path)[0]
    assert r.status == "unsupported" and "not 'cuda'" in r.reason

    monkeypatch.setattr(FakeBackend, "availability",
                        classmethod(lambda cls: Availability(False, "no runtime", "pip it")))
    r = measure_generation(fake, MODEL, "q4_0", CONFIG, tmp_path)[0]
    assert r.status == "unavailable" and "no runtime" in r.reason


def test_a_context_longer_than_the_model_is_a_user_error_before_any_work(fake, tmp_path):
    config = GenerationConfig(prompt_tokens=128, gen_tokens=64, depths=(0, 128))
    with pytest.raises(UserError, match="longer than tiny-test's maximum of 256"):
        measure_generation(fake, MODEL, "q4_0", config, tmp_path)
    assert fake.built == 0 and not fake.prompts


def test_backend_by_name_or_class(fake, tmp_path, monkeypatch):
    class Reg:
        def backend(self, name):
            if name != "fake_llm":
                raise UnknownNameError("backend", name, ["fake_llm"])
            return FakeBackend

    monkeypatch.setattr(FakeBackend, "clock", fake.clock, raising=False)
    r = measure_generation("fake_llm", MODEL, "q8_0", CONFIG, tmp_path, registry=Reg())
    assert r[0].ok and r[0].model_size == 2000
    r = measure_generation(FakeBackend, MODEL, "q8_0", CONFIG, tmp_path)
    assert r[0].ok
    with pytest.raises(UserError, match="unknown backend"):
        measure_generation("nope", MODEL, "q8_0", CONFIG, tmp_path, registry=Reg())

    from edgeprof.backends.torch_eager import TorchEagerBackend

    with pytest.raises(UserError, match="tensor models"):
        measure_generation(TorchEagerBackend, MODEL, "q8_0", CONFIG, tmp_path)


def test_threads_default_to_physical_cores(fake, tmp_path):
    import psutil

    r = measure_generation(fake, MODEL, "q4_0",
                           GenerationConfig(prompt_tokens=8, gen_tokens=4, repetitions=1),
                           tmp_path)[0]
    assert r.n_threads == (psutil.cpu_count(logical=False) or psutil.cpu_count())


def test_rate_statistics():
    s = generate.rate_stats([10.0, 30.0, 20.0])
    assert s == {"median": 20.0, "mean": 20.0, "stddev": 10.0, "min": 10.0, "max": 30.0}
    assert generate.rate_stats([5.0])["stddev"] == 0.0
    t = generate.tpot_stats([1.0] * 9 + [11.0])
    assert t["p50"] == 1.0 and t["p90"] == pytest.approx(2.0) and t["mean"] == 2.0


def test_a_model_too_big_for_this_machine_is_not_materialised(fake, tmp_path, monkeypatch):
    big = LLMModel(spec=LLMSpec(**{**SPEC.to_dict(), "published_parameters": 3_000_000_000}),
                   source_kind="preset", given="llm:big")
    monkeypatch.setattr(generate, "_n_params", lambda model: model.spec.published_parameters)
    monkeypatch.setattr(generate, "available_memory", lambda: 16 * 10 ** 9)
    records = measure_generation(fake, big, "q4_0", CONFIG, tmp_path)
    assert [r.status for r in records] == ["skipped", "skipped"]
    assert "fp32 weights (12.00 GB" in records[0].reason and "16.00 GB" in records[0].reason
    assert fake.built == 0 and not fake.prompts
    monkeypatch.setattr(generate, "available_memory", lambda: 32 * 10 ** 9)
    assert measure_generation(fake, big, "q4_0", CONFIG, tmp_path)[0].ok


def test_a_gguf_larger_than_the_memory_is_not_loaded(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"\0" * 1000)
    m = LLMModel(spec=SPEC, source_kind="gguf", given=str(f), path=f, random_weights=False)
    assert generate.too_big_reason(m, "q4_0", None, available=1000) is not None
    assert generate.too_big_reason(m, "q4_0", None, available=2000) is None

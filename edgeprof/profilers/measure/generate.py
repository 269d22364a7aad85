"""Measure a generative model: prefill and decode tokens/s, time to first token, time per
output token, load time and peak RSS, with llama-bench's definitions.

:func:`measure_generation` builds the runtime's artifact (``build_llm``, timed apart as
``build_s``), loads it (``load_llm``, timed: ``load_s``), and for each depth ``D`` runs
``warmup`` untimed and ``repetitions`` timed repetitions of two tests (llama-bench's ``pp``
and ``tg``), each on a fresh sequence:

* **pp** (prefill): ``reset()``; fill the cache with ``D`` tokens (untimed); then time
  ``prefill`` of a fresh random prompt of ``n_prompt`` tokens: ``pp = n_prompt / t``. The
  clock keeps running until the first generated token exists (``decode(1)``, its
  ``on_token`` callback): that is the **time to first token** (prefill + first token).
* **tg** (decode): ``reset()``; fill ``D`` tokens (untimed); prefill one token (untimed);
  then time ``decode(n_gen)``: ``tg = (n_gen - 1) / t`` between the first and the last
  token (one forward pass per token, see :func:`run_tg`). The gaps between consecutive ``on_token``
  timestamps give the **time per output token** (inter-token time, as optimum-benchmark and
  vLLM define it; p50/p90 over all tokens of all repetitions).

Two rules hold for every run:

* **forced length** — ``on_token`` calls are counted; a backend that produced fewer or more
  tokens than asked fails the run (``failed``, saying how many it gave).
* **varied prompts** — every prompt, depth fill and warm-up is drawn afresh (seeded by
  ``config.seed``, the depth, the repetition and the test) from the token ids
  ``[lo, hi)`` of the vocabulary (:func:`token_range`: the first and last ids, where
  tokenizers keep their special tokens, are avoided), so a runtime that caches an
  identical prompt (OpenVINO GenAI answered a repeated 512-token prompt in 2 ms) cannot
  answer from its cache.

Each rate is summarized over the repetitions as median, mean, stddev (sample), min and max
(llama-bench's ``avg_ts``/``stddev_ts`` are the mean and stddev).

**Peak RSS** is this process's absolute resident-set peak from just before ``load_llm`` to
the end of the last depth: on Linux the kernel's VmHWM mark, reset before loading
(``/proc/self/clear_refs``), combined with psutil RSS sampling and ``ru_maxrss`` where it grew
(:class:`edgeprof.profilers.measure.memory.PeakMemory`); it includes the Python interpreter
and the runtime's libraries, like ``top``'s RES of ``llama-cli`` does. One figure per load,
so every depth of one (backend, format) carries the same peak.

Errors never crash the harness: what the backend raised becomes the record's status through
:func:`edgeprof.profilers.measure.harness.status_of` (the one rule: ``unsupported``,
``unavailable``, ``failed``); a ``UserError`` (a context longer than the model's maximum)
propagates before anything runs. A model too big for this machine
(:func:`too_big_reason`) is not built: its records are ``skipped`` with the reason.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from edgeprof.core.errors import BackendUnavailableError, UnsupportedError, UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.llm import GenerationConfig, GenerativeBackend, LLMModel
from edgeprof.core.results import GenerationRecord, GenerativeRunRecord
from edgeprof.core.workload import Workload
from edgeprof.profilers.measure.harness import (BACKEND_FAILURES, failing_in, one_line,
                                                status_of)

#: psutil RSS sampling interval while generating (the fallback to the kernel's peak mark)
SAMPLER_INTERVAL_S = 0.25
#: the clock the harness reads (seconds, monotonic); tests may replace it with a fake clock
clock: Callable[[], float] = time.perf_counter
Progress = Callable[[str], None]


# ------------------------------------------------------------------------------ inputs
def token_range(vocab_size: int) -> tuple[int, int]:
    """The token ids prompts are drawn from, ``[lo, hi)``: the vocabulary without its first
    ids (unk/bos/eos/pad and Gemma's control tokens live there) and its last ones (Qwen's
    special tokens follow the regular vocabulary)."""
    lo = min(256, vocab_size // 8)
    hi = vocab_size - min(512, vocab_size // 8)
    if hi - lo < 2:
        lo, hi = 0, vocab_size
    return lo, hi


def random_tokens(n: int, vocab_size: int, seed: Sequence[int]) -> list[int]:
    """``n`` token ids drawn uniformly from :func:`token_range`, seeded by ``seed`` (a tuple of
    non-negative ints: run seed, depth index, warm-up or timed, repetition, test, purpose), so
    every prompt of a run is different."""
    import numpy as np

    lo, hi = token_range(vocab_size)
    rng = np.random.default_rng([int(s) for s in seed])
    return [int(t) for t in rng.integers(lo, hi, size=n)]


def context_tokens(config: GenerationConfig) -> int:
    """The context the user asked for: the deepest cache plus the prompt plus the generated
    tokens (what must fit the model's maximum)."""
    return config.context_needed()


def session_context(config: GenerationConfig) -> int:
    """The KV cache a session needs for the tests: ``D + n_prompt + 1`` (pp and the first
    token) or ``D + 1 + n_gen`` (tg), at the deepest ``D``."""
    return max(config.depths) + max(config.prompt_tokens, config.gen_tokens) + 1


def check_context(model: LLMModel, config: GenerationConfig) -> None:
    """``UserError`` (exit 2) when depth + prompt + generated tokens exceed the model's
    maximum context (``max_position_embeddings``)."""
    need = context_tokens(config)
    limit = model.spec.max_position_embeddings
    if need > limit:
        raise UserError(f"context of {need} tokens (depth {max(config.depths)} + prompt "
                        f"{config.prompt_tokens} + generated {config.gen_tokens}) is longer than "
                        f"{model.spec.name}'s maximum of {limit}; lower --depth, --prompt-tokens "
                        "or --gen-tokens")


def available_memory() -> int:
    """Bytes of memory available to a new allocation on this machine (psutil)."""
    import psutil

    return int(psutil.virtual_memory().available)


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def too_big_reason(model: LLMModel, fmt: str, n_params: int | None,
                   available: int | None = None) -> str | None:
    """Why ``model`` is not materialised on this machine, or None.

    A model edgeprof builds (a preset or a Hugging Face folder: random or given weights are
    written in fp32 before the runtime converts them) is too big when its fp32 weights exceed
    half the available memory; a GGUF file, which is loaded as it is, when the file exceeds
    90% of it. Its estimate and prediction are still given."""
    available = available_memory() if available is None else available
    if model.source_kind == "gguf" and model.path is not None:
        try:
            size = Path(model.path).stat().st_size
        except OSError:
            return None
        if size > 0.9 * available:
            return (f"not run on this machine: the GGUF file ({_gb(size)}) does not fit its "
                    f"available memory ({_gb(available)}); estimated and predicted only")
        return None
    if n_params is None:
        return None
    fp32 = 4 * n_params
    if fp32 > available / 2:
        return (f"not materialised on this machine: its fp32 weights ({_gb(fp32)}, needed to "
                f"build {fmt}) are more than half its available memory ({_gb(available)}); "
                "estimated and predicted only")
    return None


def default_threads() -> int:
    """The machine's physical cores (psutil), as llama-bench's default."""
    import psutil

    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


# ------------------------------------------------------------------------- statistics
def rate_stats(values: Sequence[float]) -> dict[str, float]:
    """median, mean, stddev (sample; 0 for one value), min, max."""
    v = [float(x) for x in values]
    return {"median": statistics.median(v), "mean": statistics.fmean(v),
            "stddev": statistics.stdev(v) if len(v) > 1 else 0.0, "min": min(v), "max": max(v)}


def tpot_stats(per_token_ms: Sequence[float]) -> dict[str, float]:
    """Time per output token: p50, p90, median, mean (ms) over every inter-token gap."""
    import numpy as np

    p50, p90 = (float(v) for v in np.percentile(np.asarray(per_token_ms, dtype=float), [50, 90]))
    return {"p50": p50, "p90": p90,
            "median": statistics.median(per_token_ms), "mean": statistics.fmean(per_token_ms)}


# ------------------------------------------------------------------------------- tests
class LengthError(RuntimeError):
    """A backend generated a number of tokens other than asked (forced length broken)."""


def _decode(session: Any, n: int) -> list[float]:
    """``decode(n)``; the clock reading at each ``on_token``. Fails unless exactly ``n``."""
    stamps: list[float] = []
    session.decode(n, lambda _token: stamps.append(clock()))
    if len(stamps) != n:
        raise LengthError(f"asked for exactly {n} generated token(s), the backend gave "
                          f"{len(stamps)} (generation length must be forced: end-of-sequence "
                          "ignored)")
    return stamps


def _fill(session: Any, depth: int, vocab: int, seed: tuple[int, ...]) -> None:
    session.reset()
    if depth:
        session.prefill(random_tokens(depth, vocab, seed + (1,)))


def run_pp(session: Any, n_prompt: int, depth: int, vocab: int,
           seed: tuple[int, ...]) -> tuple[float, float, list[int]]:
    """One pp test: ``(prefill seconds, time to first token seconds, prompt)``."""
    _fill(session, depth, vocab, seed)
    prompt = random_tokens(n_prompt, vocab, seed + (2,))
    t0 = clock()
    session.prefill(prompt)
    t1 = clock()
    first = _decode(session, 1)[0]
    return t1 - t0, first - t0, prompt


def run_tg(session: Any, n_gen: int, depth: int, vocab: int,
           seed: tuple[int, ...]) -> tuple[float, int, list[float]]:
    """One tg test: ``(seconds, tokens those seconds produced, inter-token seconds)``.

    The rate is taken between the first and the last token: ``n_gen - 1`` tokens, one
    forward pass each, like llama-bench's ``tg`` (one evaluation per token). The first token
    is left out because runtimes differ there: llama.cpp, ONNX Runtime GenAI and
    transformers sample it from logits the prefill already computed, OpenVINO GenAI runs a
    prefill to make it; counting it would flatter the first three by ``n/(n-1)``."""
    _fill(session, depth, vocab, seed)
    session.prefill(random_tokens(1, vocab, seed + (3,)))
    t0 = clock()
    stamps = _decode(session, n_gen)
    t1 = clock()
    per_token = [b - a for a, b in zip(stamps[:-1], stamps[1:])]
    if not per_token:  # one token: nothing between tokens; time the call
        return t1 - t0, 1, [t1 - t0]
    return stamps[-1] - stamps[0], n_gen - 1, per_token


# ------------------------------------------------------------------------------ runner
def _backend(backend: Any, registry: Any) -> GenerativeBackend:
    if isinstance(backend, str):
        if registry is None:
            from edgeprof.core.plugins import get_registry

            registry = get_registry()
        backend = registry.backend(backend)  # UnknownNameError: the user's to fix
    if isinstance(backend, type):
        backend = backend()
    if getattr(backend, "workload", "tensor") != "generate":
        raise UserError(f"backend '{getattr(backend, 'name', backend)}' runs fixed-shape "
                        "tensor models, not generative ones; 'edgeprof backends' lists both")
    return backend


def _n_params(model: LLMModel) -> int:
    from edgeprof.profilers.estimate.llm import parameter_count

    return int(parameter_count(model.spec))


def measure_generation(backend: Any, model: LLMModel, fmt: str, config: GenerationConfig,
                       workdir: str | Path | None = None, *, registry: Any = None,
                       progress: Progress | None = None,
                       artifact: Any = None) -> list[GenerationRecord]:
    """Build, load and time ``model`` in ``fmt`` on ``backend`` (a name, a
    :class:`GenerativeBackend` class or instance): one :class:`GenerationRecord` per depth of
    ``config``, ``ok`` or with the status the one rule gave (see the module docstring).

    ``workdir``: where ``build_llm`` writes (default: edgeprof's cache folder for the
    backend, so a built file is reused). ``artifact``: an already built
    :class:`~edgeprof.core.artifact.Artifact` (shipped to a board): loaded as it is, not
    built (``build_s`` is then the build's, done elsewhere, or absent). Raises ``UserError``
    (nothing run) for a context longer than the model's maximum or an unknown backend."""
    say = progress or (lambda msg: None)
    check_context(model, config)
    b = _backend(backend, registry)
    threads = config.threads or default_threads()
    records = [GenerationRecord(model=model.spec.name, backend=b.name, format=fmt,
                                device=config.device, status="failed",
                                n_prompt=config.prompt_tokens, n_gen=config.gen_tokens,
                                n_depth=d, n_threads=threads,
                                random_weights=model.random_weights,
                                runtime_version=type(b).runtime_version(),
                                model_n_params=_n_params(model))
               for d in config.depths]
    big = too_big_reason(model, fmt, records[0].model_n_params)
    if big:
        for r in records:
            r.status, r.reason = "skipped", big
        return records
    try:
        _measure(b, model, fmt, config, workdir, threads, records, say, artifact)
    except BACKEND_FAILURES as e:  # status_of re-raises what is not the backend's
        status, reason = status_of(e)
        for r in records:
            if r.status != "ok":
                r.status, r.reason = status, reason
                r.prefill_tokens_per_s = r.decode_tokens_per_s = r.ttft_ms = r.tpot_ms = None
    return records


def _measure(b: GenerativeBackend, model: LLMModel, fmt: str, config: GenerationConfig,
             workdir: Any, threads: int, records: list[GenerationRecord], say: Progress,
             built: Any = None) -> None:
    from edgeprof.profilers.measure.memory import PeakMemory

    a = type(b).availability()
    if not a.available:
        raise BackendUnavailableError(b.name, a.reason, a.hint)
    why = b.supports(model, fmt, config.device)
    if why:
        raise UnsupportedError(why, backend=b.name, precision=fmt)
    # the runtime's modules first: their import is neither load time nor model memory
    with failing_in("import"):
        for mod in type(b).requires:
            importlib.import_module(mod)
    if built is not None:  # built elsewhere (this side of a fleet): load it as it is
        artifact = built
        art = artifact.to_dict()
    else:
        if workdir is None:
            from edgeprof.core.cache import cache_dir

            workdir = cache_dir("llm", b.name)
        say(f"building {model.spec.name} {fmt} for {b.name}")
        with failing_in("build"):
            t0 = time.perf_counter()
            artifact = b.build_llm(model, fmt, Path(workdir))
            build_s = time.perf_counter() - t0
        art = {**artifact.to_dict(), "build_s": build_s}
    size = int(artifact.size_bytes)
    for r in records:
        r.artifact, r.model_size = art, size
    say(f"loading {model.spec.name} {fmt} on {b.name}")
    # the kernel's VmHWM mark (reset at start) is the exact peak on Linux; psutil sampling is
    # only the fallback, at 4 Hz: a 5 ms sampler cost llama.cpp 5-10 % of its tokens/s
    # (benchmarks/llm_overhead.py), 250 ms costs nothing measurable
    mem = PeakMemory(interval_s=SAMPLER_INTERVAL_S, device=config.device).start()
    session = None
    try:
        with failing_in("load"):
            t0 = time.perf_counter()
            session = b.load_llm(artifact, threads=threads, n_ctx=session_context(config),
                                 device=config.device)
            load_s = time.perf_counter() - t0
        commit = str(getattr(session, "build_commit", "") or "")
        for r in records:
            r.load_s, r.build_commit = load_s, commit
            r.runtime_version = r.runtime_version or commit  # a package named unlike its module
        for i, (depth, r) in enumerate(zip(config.depths, records)):
            say(f"{b.name} {fmt}: pp{config.prompt_tokens} tg{config.gen_tokens} @ d{depth}")
            with failing_in("inference"):
                _time_depth(session, model, config, depth, i, r)
            r.status = "ok"
    finally:
        mem.stop()
        peak = mem.peak_rss
        for r in records:
            r.peak_rss_bytes = peak
        if session is not None:
            try:
                session.close()
            except BACKEND_FAILURES as e:
                for r in records:
                    r.warnings.append(f"closing the session failed: {one_line(e)}")


def _time_depth(session: Any, model: LLMModel, config: GenerationConfig, depth: int,
                index: int, r: GenerationRecord) -> None:
    vocab = model.spec.vocab_size
    seed = config.seed
    for w in range(config.warmup):  # warm-up prompts: their own seeds (phase 1), never reused
        run_pp(session, config.prompt_tokens, depth, vocab, (seed, index, 1, w, 0))
        run_tg(session, config.gen_tokens, depth, vocab, (seed, index, 1, w, 1))
    pp_s, ttft_s, tg_s, tg_rates, per_token_s = [], [], [], [], []
    for rep in range(config.repetitions):
        t_pp, t_first, _ = run_pp(session, config.prompt_tokens, depth, vocab,
                                  (seed, index, 0, rep, 0))
        t_tg, n_tg, per_token = run_tg(session, config.gen_tokens, depth, vocab,
                                       (seed, index, 0, rep, 1))
        for t, what in ((t_pp, "prefill"), (t_tg, "decode")):
            if not t > 0:
                raise RuntimeError(f"{what} took no measurable time ({t} s); the clock or the "
                                   "backend is broken")
        pp_s.append(t_pp)
        ttft_s.append(t_first)
        tg_s.append(t_tg)
        tg_rates.append(n_tg / t_tg)
        per_token_s.extend(per_token)
    r.repetitions = config.repetitions
    r.prefill_tokens_per_s = rate_stats([config.prompt_tokens / t for t in pp_s])
    r.decode_tokens_per_s = rate_stats(tg_rates)
    r.ttft_ms = rate_stats([1e3 * t for t in ttft_s])
    r.tpot_ms = tpot_stats([1e3 * t for t in per_token_s])
    r.samples = {"prefill_s": pp_s, "ttft_s": ttft_s, "decode_s": tg_s}


# ---------------------------------------------------------------- the request's path
def request_model(request: Any) -> LLMModel:
    """The generative model a :class:`~edgeprof.core.requests.MeasureRequest` names: its
    ``llm`` (``LLMModel.to_dict()``) when it carries one, else its spec resolved."""
    if request.llm is not None:
        return LLMModel.from_dict(request.llm)
    from edgeprof.zoo.llm import resolve_llm

    return resolve_llm(str(request.model))


def request_records(request: Any, status: str = "failed", reason: str = "",
                    backend_cls: Any = None) -> Any:
    """A :class:`~edgeprof.core.results.GenerativeRunRecord` for ``request`` with one
    record per depth, all of ``status``: what a run that produced nothing reports (the
    model is not resolved: a worker that died says so without a file read)."""
    config = request.generation_config()
    name = str((request.llm or {}).get("spec", {}).get("name") or request.model)
    random = bool((request.llm or {}).get("random_weights", True))
    version = (backend_cls.runtime_version() if hasattr(backend_cls, "runtime_version")
               else "")
    records = [GenerationRecord(model=name, backend=request.backend,
                                format=request.config.precision, device=config.device,
                                status=status, reason=reason, n_prompt=config.prompt_tokens,
                                n_gen=config.gen_tokens, n_depth=d,
                                n_threads=config.threads or default_threads(),
                                random_weights=random, runtime_version=version)
               for d in config.depths]
    return GenerativeRunRecord(backend=request.backend, model=name,
                               format=request.config.precision, status=status,
                               reason=reason or None, device=config.device,
                               records=records)


def run_generation_request(request: Any, backend_cls: Any, *, registry: Any = None,
                           process: str = "inline", progress: Progress | None = None) -> Any:
    """Run a generative :class:`~edgeprof.core.requests.MeasureRequest` in this process
    (what :class:`~edgeprof.profilers.measure.runners.InlineRunner` does for one, and so the
    isolated worker and a fleet board): :func:`measure_generation` of its model, format and
    generation config (a shipped ``artifact`` is loaded, not built), as a
    :class:`~edgeprof.core.results.GenerativeRunRecord`. ``process`` says where it ran
    (``environment``-like note: inline, isolated)."""
    model = request_model(request)
    config = request.generation_config()
    built = None
    if request.artifact is not None:
        from edgeprof.core.artifact import Artifact

        built = Artifact.from_dict(request.artifact)
        built.verify()
    records = measure_generation(backend_cls, model, request.config.precision, config,
                                 request.workdir, registry=registry, progress=progress,
                                 artifact=built)
    run = GenerativeRunRecord(backend=request.backend, model=model.spec.name,
                              format=request.config.precision, device=config.device,
                              records=records, extra={"process": process},
                              config=request_conditions(request),
                              environment=generation_environment(backend_cls, config, records,
                                                                 process))
    return run.settle()


def request_conditions(request: Any) -> dict[str, Any]:
    """What a generative request asked for, as a tensor record's ``config``: the format
    (``precision``), the threads asked (None: the physical cores), device, ``isolate``,
    ``timeout_s`` (None: the runner's default), seed, and the test shape."""
    c = request.config
    gen = request.generation_config().to_dict()
    return {"precision": c.precision, "threads": gen.get("threads"), "device": gen["device"],
            "isolate": bool(c.isolate), "timeout_s": c.timeout_s, "seed": gen["seed"],
            "prompt_tokens": gen["prompt_tokens"], "gen_tokens": gen["gen_tokens"],
            "depths": gen["depths"], "repetitions": gen["repetitions"],
            "warmup": gen["warmup"]}


def generation_environment(backend_cls: Any, config: GenerationConfig,
                           records: Sequence[GenerationRecord], process: str
                           ) -> dict[str, Any]:
    """The machine and process a generative run was measured in, with the keys of a tensor
    record's ``environment`` (``collect_environment``: runtime, runtime_version, threads)
    and its ``conditions`` (``harness._conditions``: process, process_state, threads,
    threads_from, thread_env, affinity, warmup, timing)."""
    from edgeprof.profilers.measure.environment import collect_environment, process_conditions

    requires = tuple(getattr(backend_cls, "requires", ()) or ())
    first = records[0] if records else None
    threads = {"n_threads": int(first.n_threads if first is not None
                                else config.threads or default_threads())}
    version = (first.runtime_version or first.build_commit) if first is not None else ""
    env = collect_environment(runtime=requires[0] if requires else getattr(backend_cls, "name",
                                                                            None),
                              runtime_version=version or None, threads=threads)
    env["build_commit"] = (first.build_commit or None) if first is not None else None
    env["conditions"] = {
        **process_conditions(process, threads, "--threads" if config.threads else
                             f"llama-bench's default (physical cores: {threads['n_threads']})"),
        "warmup": {"policy": "fixed", "repetitions": config.warmup},
        "timing": {"repetitions": config.repetitions, "tests": ["pp", "tg"],
                   "prompt_tokens": config.prompt_tokens, "gen_tokens": config.gen_tokens,
                   "depths": list(config.depths)},
    }
    return env


#: seconds a generative worker may take when no timeout is set (a build from a preset, the
#: load, and every repetition at every depth: no timing plan caps them)
DEFAULT_GENERATION_TIMEOUT_S = 3600.0


class GenerateWorkload(Workload):
    """The ``generate`` workload: a generative model (``llm:NAME``, a GGUF, a Hugging Face
    folder) run the llama-bench way (pp/tg per depth); its record a
    :class:`~edgeprof.core.results.GenerativeRunRecord`, one record per depth, each depth
    taking the run's status when it measured nothing."""

    name = "generate"
    describe = "generative models"
    record_type = GenerativeRunRecord

    def blank_record(self, request: Any, backend_cls: Any = None) -> GenerativeRunRecord:
        return request_records(request, backend_cls=backend_cls)

    def unavailable_record(self, request: Any, backend_cls: Any, availability: Any
                           ) -> GenerativeRunRecord:
        a = availability
        status, reason = status_of(BackendUnavailableError(request.backend, a.reason, a.hint))
        return request_records(request, status, reason, backend_cls=backend_cls)

    def run_here(self, request: Any, backend_cls: Any, *, registry: Any = None,
                 process: str = "inline", progress: Progress | None = None
                 ) -> GenerativeRunRecord:
        return run_generation_request(request, backend_cls, registry=registry,
                                      process=process, progress=progress)

    def run_remote(self, runner: Any, request: Any) -> GenerativeRunRecord:
        return ship_generation(runner, request)

    def default_timeout_s(self, request: Any) -> float:
        return DEFAULT_GENERATION_TIMEOUT_S

    def finish(self, record: GenerativeRunRecord, request: Any) -> GenerativeRunRecord:
        if not record.config:  # what was asked, whatever ran (a tensor record's config)
            record.config = request_conditions(request)
        return record


def ship_generation(runner: Any, request: Any) -> GenerativeRunRecord:
    """A generative request on a board of ``runner``'s fleet: built here (``build_llm``:
    the board never converts), the runtime's file shipped with its sha256 and the model's
    spec (``request.llm``); the board loads and times it in a fresh process
    (``measure_shipment``), and its :class:`~edgeprof.core.results.GenerativeRunRecord`
    comes back with ``extra["fleet"]`` naming the board."""
    import dataclasses as dc

    from edgeprof.core.artifact import Artifact
    from edgeprof.core.errors import MeasurementError
    from edgeprof.core.results import record_from_dict
    from edgeprof.profilers.measure.fleet import Shipment
    from edgeprof.profilers.measure.runners import backend_class

    model = request_model(request)
    if request.artifact is not None:
        artifact = Artifact.from_dict(request.artifact)
    else:
        cls = request.backend_type or backend_class(request)
        workdir = request.workdir
        if workdir is None:
            from edgeprof.core.cache import cache_dir

            workdir = cache_dir("llm", request.backend)
        runner._say(f"building {model.spec.name} {request.config.precision} for {cls.name} "
                    "here (boards never convert)")
        with failing_in("build"):
            artifact = cls().build_llm(model, request.config.precision, Path(workdir))
    shipment = Shipment.of_artifact(artifact)
    wire = dc.replace(request, llm=model.to_dict(), workdir=None, artifact=None)
    timeout = request.config.timeout_s or DEFAULT_GENERATION_TIMEOUT_S
    record = record_from_dict(runner.run_job(
        f"{request.backend}-{request.config.precision}-generate", wire, shipment, timeout))
    if not GenerateWorkload().owns(record):  # the board could not unpack it
        raise MeasurementError(f"on the {runner.target} fleet: {record.reason}")
    return record


@hookimpl
def edgeprof_register_workloads() -> list[type]:
    return [GenerateWorkload]


__all__ = ["DEFAULT_GENERATION_TIMEOUT_S", "GenerateWorkload", "ship_generation", "LengthError", "available_memory", "check_context", "context_tokens", "measure_generation",
           "generation_environment", "random_tokens", "rate_stats", "request_conditions",
           "request_model", "request_records", "run_generation_request", "session_context", "token_range", "too_big_reason",
           "tpot_stats"]

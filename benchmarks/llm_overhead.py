"""edgeprof's llama_cpp prefill/decode tokens/s vs a bare llama-cpp-python loop.

Same GGUF file (edgeprof's cached build of the preset), same threads, same context and
batch sizes, flash attention on in both (what llama.cpp's ``auto`` picks on a CPU).

This machine is shared, and its speed drifts by 2x within seconds, so the arms are compared
in **pairs a few hundred milliseconds apart**, not in rounds a minute apart: edgeprof's
session and a bare ``llama_cpp.Llama`` are loaded side by side and each repetition runs the
same test on each arm in a rotating order, with a fresh random prompt per repetition (the same
tokens for every arm of that repetition). The ratio arm / bare is taken per repetition. The
model loaded second runs faster on this machine (placement, not code: two edgeprof sessions,
or two bare ``Llama``, differ alike), so half the pairs load edgeprof first and half load the
bare loop first. The table gives the ratio's median and interquartile range, and the ratio of
the arms' best repetitions (the fastest run of each arm is the one least disturbed by other
jobs, as ``timeit`` reasons).

Arms:

* **harness** — edgeprof's session timed by the harness's own test functions
  (:func:`edgeprof.profilers.measure.generate.run_pp` / ``run_tg``) with the harness's
  peak-RSS sampler (:class:`~edgeprof.profilers.measure.memory.PeakMemory`) running, as in
  :func:`~edgeprof.profilers.measure.generate.measure_generation`;
* **session** — the same without the sampler;
* **bare** — ``Llama.reset(); Llama.eval(prompt)`` for pp; for tg ``eval([one token])`` then
  ``n_gen`` times argmax of the last logits and ``eval([token])`` (llama-bench's tg:
  ``n_gen`` single-token decodes), timed with ``time.perf_counter``.

A last check runs ``measure_generation`` itself once (the full harness: build from the cache,
load, warm-up, repetitions) and prints its medians beside the pairs' medians.

    .venv/bin/python benchmarks/llm_overhead.py [--model llm:smollm2-135m] [--format q4_k_m]
        [--threads 1] [--pairs 30] [--prompt 128] [--gen 32] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "llm_overhead.md"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Bare:
    """A bare llama-cpp-python loop: ``Llama`` + ``eval`` + numpy argmax."""

    def __init__(self, path: str, *, threads: int, n_ctx: int, vocab: int) -> None:
        import llama_cpp
        import numpy as np

        self.llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=threads,
                                   n_threads_batch=threads, n_batch=min(512, n_ctx),
                                   n_ubatch=min(512, n_ctx), flash_attn=True,
                                   logits_all=False, verbose=False)
        ctx, get = self.llm.ctx, llama_cpp.llama_get_logits_ith
        as_array = np.ctypeslib.as_array
        self.argmax = lambda: int(as_array(get(ctx, -1), shape=(vocab,)).argmax())

    def pp(self, prompt: list[int]) -> float:
        self.llm.reset()
        t0 = time.perf_counter()
        self.llm.eval(prompt)
        t = time.perf_counter() - t0
        self.argmax()
        return t

    def tg(self, first: int, n_gen: int) -> float:
        self.llm.reset()
        self.llm.eval([first])
        t0 = time.perf_counter()
        for _ in range(n_gen):
            self.llm.eval([self.argmax()])
        return time.perf_counter() - t0

    def close(self) -> None:
        self.llm.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llm:smollm2-135m", help="comma-separated specs")
    ap.add_argument("--format", default="q4_k_m", help="one per model (or one for all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=30, help="timed repetitions per arm")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--write", action="store_true", help=f"also write {RESULTS}")
    args = ap.parse_args()

    from edgeprof.backends.llama_cpp import LlamaCppBackend
    from edgeprof.core.llm import GenerationConfig
    from edgeprof.profilers.measure.generate import (SAMPLER_INTERVAL_S, measure_generation,
                                                     random_tokens, run_pp, run_tg,
                                                     session_context)
    from edgeprof.profilers.measure.memory import PeakMemory
    from edgeprof.zoo.llm import resolve_llm

    t_start = time.perf_counter()

    def run_case(spec: str, fmt: str) -> list[str]:
        model = resolve_llm(spec)
        vocab = model.spec.vocab_size
        backend = LlamaCppBackend()
        artifact = backend.build_llm(model, fmt, None)  # cached: every arm uses this file
        config = GenerationConfig(prompt_tokens=args.prompt, gen_tokens=args.gen,
                                  repetitions=5, warmup=1, threads=args.threads)
        n_ctx = session_context(config)
        holder: dict[str, object] = {}

        def edgeprof_arm(sampler: bool):
            def run(seed: tuple[int, ...]) -> tuple[float, float]:
                session = holder["session"]
                mem = PeakMemory(interval_s=SAMPLER_INTERVAL_S).start() if sampler else None
                try:
                    t_pp, _, _ = run_pp(session, args.prompt, 0, vocab, seed)
                    # run_tg times the n-1 token-to-token evaluations; scaled to n evaluations,
                    # the bare loop's count, so both rates are evaluations per second
                    t_tg, n_tg, _ = run_tg(session, args.gen, 0, vocab, seed)
                finally:
                    if mem is not None:
                        mem.stop()
                return t_pp, t_tg * args.gen / n_tg
            return run

        def bare_arm(seed: tuple[int, ...]) -> tuple[float, float]:
            # the very tokens run_pp / run_tg draw for this seed: every arm does the same work
            bare = holder["bare"]
            prompt = random_tokens(args.prompt, vocab, seed + (2,))
            first = random_tokens(1, vocab, seed + (3,))[0]
            return bare.pp(prompt), bare.tg(first, args.gen)

        arms = {"harness": edgeprof_arm(True), "session": edgeprof_arm(False), "bare": bare_arm}
        names = list(arms)
        times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        load_before = os.getloadavg()
        # the model loaded second runs faster here (its memory, not its code: two sessions, or two
        # bare Llamas, differ the same way), so half the pairs load edgeprof first, half bare first
        for block in range(2):
            loaders = [("session", lambda: backend.load_llm(artifact, threads=args.threads,
                                                             n_ctx=n_ctx)),
                       ("bare", lambda: Bare(str(artifact.entry_path), threads=args.threads,
                                             n_ctx=n_ctx, vocab=vocab))]
            for key, load in (loaders if block == 0 else loaders[::-1]):
                holder[key] = load()
            for i in range(args.pairs // 2 + 1):  # the first is the warm-up
                order = names[i % 3:] + names[:i % 3]  # rotate who goes first
                got = {n: arms[n]((7, block, i)) for n in order}
                if i:
                    for n in names:
                        times[n].append(got[n])
            holder.pop("session").close()
            holder.pop("bare").close()
        [rec] = measure_generation(backend, model, fmt, config)
        load_after = os.getloadavg()
        if not rec.ok:
            raise SystemExit(f"measure_generation failed: {rec.status}: {rec.reason}")

        def rates(n: str, k: int, tokens: int) -> list[float]:
            return [tokens / t[k] for t in times[n]]

        def ratio(n: str, k: int, tokens: int) -> str:
            q = [a / b for a, b in zip(rates(n, k, tokens), rates("bare", k, tokens))]
            q1, _, q3 = statistics.quantiles(q, n=4)
            return f"{statistics.median(q):.3f} ({q1:.3f}..{q3:.3f})"

        def best(n: str, k: int, tokens: int) -> float:
            return max(rates(n, k, tokens))

        def line(test: str, k: int, tokens: int, full: dict[str, float]) -> str:
            med = {n: statistics.median(rates(n, k, tokens)) for n in names}
            b = best("bare", k, tokens)
            return (f"| {test} | {med['harness']:.1f} | {med['session']:.1f} | "
                    f"{med['bare']:.1f} | {ratio('harness', k, tokens)} | "
                    f"{ratio('session', k, tokens)} | {best('harness', k, tokens) / b:.3f} / "
                    f"{best('session', k, tokens) / b:.3f} | {full['median']:.1f} |")

        table = [
            f"model {model.spec.name} ({fmt}, {artifact.size_bytes / 1e6:.1f} MB GGUF, "
            f"random weights), threads {args.threads}, n_ctx {n_ctx}, {args.pairs} paired "
            f"repetitions per arm (2 load orders, +1 warm-up each), {backend.runtime_version()}",
            f"load average (1/5/15 min) before {'/'.join(f'{x:.2f}' for x in load_before)}, "
            f"after {'/'.join(f'{x:.2f}' for x in load_after)}",
            "",
            "| test | harness tok/s | session tok/s | bare tok/s | harness/bare median (IQR) | "
            "session/bare median (IQR) | best-of-N harness/bare / session/bare | "
            "measure_generation tok/s (5 reps) |",
            "|---|---|---|---|---|---|---|---|",
            line(f"pp{args.prompt}", 0, args.prompt, rec.prefill_tokens_per_s),
            line(f"tg{args.gen}", 1, args.gen, rec.decode_tokens_per_s),
            "",
        ]
        print("\n".join(table), flush=True)
        return table

    models, formats = args.model.split(","), args.format.split(",")
    if len(formats) == 1:
        formats *= len(models)
    table = [f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs, shared with other "
             "jobs)", ""]
    for spec, fmt in zip(models, formats):
        table += run_case(spec, fmt)
    text = "\n".join(table)
    print(f"\n({time.perf_counter() - t_start:.0f} s)")
    if args.write:
        from edgeprof.core.io import write_text

        cmd = (f"`.venv/bin/python benchmarks/llm_overhead.py --model {args.model} --format "
               f"{args.format} --threads {args.threads} --pairs {args.pairs} --prompt "
               f"{args.prompt} --gen {args.gen} --write`")
        header = ("# llama_cpp overhead: edgeprof vs a bare llama-cpp-python loop\n\n"
                  f"{cmd} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; see the "
                  "script's docstring for the arms)\n\n")
        write_text(RESULTS, header + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time the analytic LLM estimate of Llama-3.2-3B (the issue's budget: under 5 s).

    .venv/bin/python benchmarks/llm_estimate_speed.py [--rounds 21] [--cli-rounds 5]

Rows: ``estimate_llm`` in-process (cold: the first call, which reads the presets and builds
the tensor table; warm: the median of the later calls), the estimate of every llama.cpp
format, and the whole CLI command the issue names
(``edgeprof estimate llm:llama-3.2-3b --target raspberry_pi_5 --backend llama_cpp
--precision q4_k_m --json``) as a subprocess, interpreter start-up included. When the CLI
does not take generative models yet, its row says so instead of a time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLI = ["estimate", "llm:llama-3.2-3b", "--target", "raspberry_pi_5", "--backend", "llama_cpp",
       "--precision", "q4_k_m", "--prompt-tokens", "512", "--gen-tokens", "128", "--json"]


def _times(fn, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _row(name: str, ts: list[float]) -> str:
    med = statistics.median(ts)
    return f"| {name} | {len(ts)} | {med * 1e3:.2f} | {min(ts) * 1e3:.2f}-{max(ts) * 1e3:.2f} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--cli-rounds", type=int, default=5)
    args = ap.parse_args()

    t0 = time.perf_counter()
    from edgeprof.profilers.estimate.llm import estimate_llm, formats_for
    from edgeprof.targets import get_target

    pi5 = get_target("raspberry_pi_5")
    import_s = time.perf_counter() - t0

    def one():
        return estimate_llm("llm:llama-3.2-3b", "q4_k_m", prompt_tokens=512, gen_tokens=128,
                            target=pi5, backend="llama_cpp")

    cold = _times(one, 1)
    warm = _times(one, args.rounds)
    every = _times(lambda: [estimate_llm("llm:llama-3.2-3b", f, target=pi5, backend="llama_cpp")
                            for f in formats_for("llama_cpp")], max(3, args.rounds // 4))
    est = one()
    print(f"Estimate speed, llama-3.2-3b q4_k_m on raspberry_pi_5 (pp512/tg128); "
          f"Python {sys.version.split()[0]}; import + target load {import_s * 1e3:.0f} ms")
    print()
    print("| what | runs | median ms | min-max ms |")
    print("|---|---|---|---|")
    print(_row("estimate_llm, first call (cold)", cold))
    print(_row("estimate_llm (warm)", warm))
    print(_row(f"estimate_llm x {len(formats_for('llama_cpp'))} llama.cpp formats", every))
    cmd = [sys.executable, "-m", "edgeprof", *CLI]
    probe = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if probe.returncode == 0:
        cli = [probe_time for probe_time in _times(
            lambda: subprocess.run(cmd, capture_output=True, check=True, cwd=ROOT),
            args.cli_rounds)]
        print(_row("`edgeprof " + " ".join(CLI) + "` (subprocess)", cli))
    else:
        last = (probe.stderr or probe.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"| `edgeprof {' '.join(CLI)}` | - | not available (exit {probe.returncode}: "
              f"{last[0][:100]}) | - |")
    print()
    f = est.figures
    print(f"weights {f['weight_bytes']['value'] / 1e9:.3f} GB, decode "
          f"{f['decode_bytes_per_token']['value'] / 1e9:.3f} GB/token, roofline decode "
          f"{f['decode_tokens_per_s']['value']:.1f} tok/s ({est.stages['decode']['bound']}-bound), "
          f"prefill {f['prefill_tokens_per_s']['value']:.1f} tok/s "
          f"({est.stages['prefill']['bound']}-bound), fits: {est.fit['fits']}, max context "
          f"{f['max_context_tokens']['value']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

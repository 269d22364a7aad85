"""Generative runtimes side by side on this machine: one preset, every runtime and format,
llama-bench's pp/tg, time to first token, time per output token, load time, peak RSS, the
file's size against the analytic estimate, and decode's effective bandwidth (file bytes x
tokens/s).

Everything is measured by edgeprof itself (``edgeprof.api.profile_llm``: the harness of
``edgeprof/profilers/measure/generate.py``), one (backend, format) after the other in one run,
random weights in the preset's published shape. Each (backend, format) runs in a child
process of its own so its peak RSS is its own (the harness's RSS is the process's peak).

    .venv/bin/python benchmarks/llm_runtimes.py [--model llm:tinyllama-1.1b] [--threads 2]
        [--prompt 512] [--gen 128] [--repetitions 3] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "llm_runtimes.md"
RUNS = [("llama_cpp", "q4_0"), ("llama_cpp", "q4_k_m"), ("llama_cpp", "q8_0"),
        ("llama_cpp", "f16"), ("onnxruntime_genai", "int4"), ("openvino_genai", "int4"),
        ("transformers", "fp32")]

CHILD = """
import json, sys
from edgeprof import api
a = json.loads(sys.argv[1])
p = api.profile_llm(a["model"], backends=a["backend"], precisions=a["format"],
                    prompt_tokens=a["prompt"], gen_tokens=a["gen"],
                    repetitions=a["repetitions"], warmup=1, threads=a["threads"])
print("RESULT " + json.dumps({"runs": p["runs"], "estimates": p["estimates"]}))
"""


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def one(args, backend: str, fmt: str) -> dict:
    arg = json.dumps({"model": args.model, "backend": backend, "format": fmt,
                      "prompt": args.prompt, "gen": args.gen,
                      "repetitions": args.repetitions, "threads": args.threads})
    proc = subprocess.run([sys.executable, "-c", CHILD, arg], capture_output=True, text=True,
                          timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": tail[0]}


def fmt_rate(d: dict | None) -> str:
    if not d or d.get("median") is None:
        return "-"
    return f"{d['median']:.1f} ± {d.get('stddev') or 0:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llm:tinyllama-1.1b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--runs", default=",".join(f"{b}:{f}" for b, f in RUNS),
                    help="backend:format pairs")
    ap.add_argument("--write", action="store_true", help=f"also write {RESULTS}")
    args = ap.parse_args()
    pairs = [tuple(x.split(":", 1)) for x in args.runs.split(",")]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    rows = []
    for backend, fmt in pairs:
        res = one(args, backend, fmt)
        if "error" in res:
            rows.append(f"| {backend} | {fmt} | error: {res['error'][:120]} |" + " |" * 8)
            print(rows[-1], flush=True)
            continue
        r = res["runs"][0]
        est = res["estimates"][0] if res["estimates"] else {}
        wb = (est.get("figures") or {}).get("weight_bytes", {}).get("value") \
            or est.get("weight_bytes")
        if isinstance(wb, dict):
            wb = wb.get("value")
        size = r.get("model_size")
        tg = (r.get("decode_tokens_per_s") or {}).get("median")
        if r.get("status") != "ok":
            rows.append(f"| {backend} | {fmt} | {r.get('status')}: {r.get('reason', '')[:120]} |"
                        + " |" * 8)
        else:
            rows.append(
                f"| {backend} | {fmt} | {fmt_rate(r.get('prefill_tokens_per_s'))} | "
                f"{fmt_rate(r.get('decode_tokens_per_s'))} | "
                f"{(r.get('ttft_ms') or {}).get('median', float('nan')):.0f} | "
                f"{(r.get('tpot_ms') or {}).get('p50', float('nan')):.1f} / "
                f"{(r.get('tpot_ms') or {}).get('p90', float('nan')):.1f} | "
                f"{r.get('load_s') or float('nan'):.2f} | "
                f"{(r.get('peak_rss_bytes') or 0) / 1e6:.0f} | {(size or 0) / 1e6:.0f} | "
                f"{(size / wb) if size and wb else float('nan'):.3f} | "
                f"{size * tg / 1e9 if size and tg else float('nan'):.1f} |")
        print(rows[-1], flush=True)
    head = [f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs), model {args.model} (random "
            f"weights), threads {args.threads}, pp{args.prompt} / tg{args.gen}, "
            f"{args.repetitions} repetitions after 1 warm-up, each pair in its own process",
            f"load average before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
            f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}; "
            f"{time.perf_counter() - t0:.0f} s in all (builds included, cached ones reused)", "",
            "| backend | format | pp tok/s (median ± sd) | tg tok/s | TTFT ms | TPOT p50 / p90 ms "
            "| load s | peak RSS MB | file MB | file / estimated weight bytes | decode GB/s "
            "(file x tg) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    text = "\n".join(head + rows)
    print("\n" + text)
    if args.write:
        from edgeprof.core.io import write_text

        cmd = " ".join(["`.venv/bin/python benchmarks/llm_runtimes.py", "--model", args.model,
                        "--threads", str(args.threads), "--prompt", str(args.prompt), "--gen",
                        str(args.gen), "--repetitions", str(args.repetitions), "--write`"])
        write_text(RESULTS, "# Generative runtimes on this machine\n\n"
                   f"{cmd} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n"
                   + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

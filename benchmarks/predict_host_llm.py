"""Host LLM calibration held out: calibrate llama_cpp on this machine with small presets, then
predict a bigger model and measure it, side by side in one run.

1. ``edgeprof.api.calibrate_llm("llama_cpp", FMT)`` measures smollm2-135m, smollm2-360m and
   qwen2.5-0.5b (pp128 / tg32) and fits this host's bandwidth fraction, per-layer overhead and
   prefill efficiency (saved in a temporary calibration folder, never the user's).
2. For the held-out model (default TinyLlama-1.1B, about 2x the largest calibration model) and
   each format: the prediction for ``--target host`` with its interval, then the measurement
   (``edgeprof.api.profile_llm``, pp512 / tg128), and the ratio.

    .venv/bin/python benchmarks/predict_host_llm.py [--model llm:tinyllama-1.1b]
        [--formats q4_0,q8_0] [--repetitions 3] [--write]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "predict_host_llm.md"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llm:tinyllama-1.1b")
    ap.add_argument("--formats", default="q4_0,q8_0")
    ap.add_argument("--calibration-format", default="q4_0")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--write", action="store_true", help=f"also write {RESULTS}")
    args = ap.parse_args()
    os.environ["EDGEPROF_CALIBRATIONS_DIR"] = tempfile.mkdtemp(prefix="edgeprof-llmcal-")
    from edgeprof import api

    t0 = time.perf_counter()
    load_before = os.getloadavg()
    cal, records = api.calibrate_llm("llama_cpp", args.calibration_format)
    lines = [f"calibration ({args.calibration_format}, pp128/tg32, measured here):"]
    for r in records:
        lines.append(f"- {r.model}: pp {r.prefill_tokens_per_s['median']:.1f}, "
                     f"tg {r.decode_tokens_per_s['median']:.1f} tok/s")
    for key, e in cal["entries"].items():
        fit = e["decode"]["runtimes"]["llama_cpp"]
        lines.append(f"- fitted {key}: bandwidth fraction {fit['bandwidth_fraction']:.3f} of "
                     f"{e['peak_bandwidth'] / 1e9:.1f} GB/s, per-layer overhead "
                     f"{1e3 * fit['per_layer_s']:.4f} ms")
    lines += ["", f"held out: {args.model}, pp{args.prompt} / tg{args.gen}, "
              f"{args.repetitions} repetitions", "",
              "| format | stage | predicted tok/s [interval] | measured tok/s (median ± sd) | "
              "predicted / measured | inside the interval |", "|---|---|---|---|---|---|"]
    for fmt in args.formats.split(","):
        est = api.estimate_llm(args.model, "host", backends="llama_cpp", precisions=fmt,
                               prompt_tokens=args.prompt, gen_tokens=args.gen)
        [pred] = est["predictions"]
        got = api.profile_llm(args.model, backends="llama_cpp", precisions=fmt,
                              prompt_tokens=args.prompt, gen_tokens=args.gen,
                              repetitions=args.repetitions)
        [run] = got["runs"]
        for stage, name in (("prefill", "prefill_tokens_per_s"), ("decode", "decode_tokens_per_s")):
            p, m = pred[name], run[name]
            inside = p["low"] <= m["median"] <= p["high"]
            lines.append(f"| {fmt} | {stage} | {p['value']:.1f} [{p['low']:.1f}–{p['high']:.1f}]"
                         f" {p['provenance']} | {m['median']:.1f} ± {m['stddev']:.1f} | "
                         f"{p['value'] / m['median']:.2f} | {'yes' if inside else 'no'} |")
        print("\n".join(lines[-2:]), flush=True)
    lines.insert(0, f"load average before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
                 f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}; "
                 f"{time.perf_counter() - t0:.0f} s\n")
    text = "\n".join(lines)
    print("\n" + text)
    if args.write:
        from edgeprof.core.io import write_text

        write_text(RESULTS, "# Host LLM calibration, held out\n\n`.venv/bin/python "
                   f"benchmarks/predict_host_llm.py --model {args.model} --formats "
                   f"{args.formats} --write` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})"
                   "\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Run every benchmark script in turn (one at a time: they share the CPU) and keep each one's
printed table in benchmarks/results/<name>.txt.

    .venv/bin/python benchmarks/run_all.py [--only NAME,...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = [
    ("host_calibration", ["host_calibration.py", "--recalibrate"]),
    ("reference_counts", ["reference_counts.py"]),
    ("harness_accuracy", ["harness_accuracy.py"]),
    ("bare_loop_ort_ov", ["bare_loop_ort_ov.py", "--model", "builtin:small_resnet",
                          "--rounds", "5"]),
    ("bare_loop_tflite_compile", ["bare_loop_tflite_compile.py", "--model",
                                  "builtin:small_resnet"]),
    # ncnn, MNN, ExecuTorch (issue 32)
    ("bare_loop_native", ["bare_loop_native.py", "--model", "builtin:small_resnet",
                          "--rounds", "5"]),
    ("native_runtimes_matrix", ["native_runtimes_matrix.py"]),
    ("backend_matrix", ["backend_matrix.py", "--max-autotune"]),
    ("optimize_vs_sweep", ["optimize_vs_sweep.py"]),
    ("estimate_speed", ["estimate_speed.py", "--rounds", "9"]),
    ("profile_speed", ["profile_speed.py", "--rounds", "3"]),
    ("conversion_routes", ["conversion_routes.py"]),
    ("openvino_vs_benchmark_app", ["openvino_vs_benchmark_app.py"]),
    ("predict_boards", ["predict_boards.py"]),
    ("predict_nb201", ["predict_nb201.py", "--networks", "300"]),
    ("in_eval", ["in_eval.py"]),
    ("html_report", ["html_report.py"]),
    ("sweep_vs_profile", ["sweep_vs_profile.py"]),
    # generative models (issue 14)
    ("llm_estimate_speed", ["llm_estimate_speed.py"]),
    ("predict_llm", ["predict_llm.py"]),
    ("llm_overhead", ["llm_overhead.py", "--model", "llm:smollm2-135m,llm:tinyllama-1.1b",
                      "--format", "q4_k_m,q4_0", "--threads", "1", "--pairs", "20"]),
    ("llm_runtimes", ["llm_runtimes.py"]),
    ("gguf_resolve", ["gguf_resolve.py"]),
    ("tflite_convert_worker", ["tflite_convert_worker.py"]),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated names: " + ", ".join(n for n, _ in RUNS))
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    failed = []
    for name, argv in RUNS:
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        print(f"== {name}: {' '.join(argv)}", flush=True)
        proc = subprocess.run([sys.executable, str(HERE / argv[0]), *argv[1:]],
                              capture_output=True, text=True)
        text = proc.stdout + (f"\n[stderr tail]\n{proc.stderr[-2000:]}" if proc.returncode else "")
        (out_dir / f"{name}.txt").write_text(
            f"$ python benchmarks/{' '.join(argv)}\n# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{time.perf_counter() - t0:.0f} s, exit {proc.returncode}\n\n{text}")
        print(proc.stdout[-4000:], flush=True)
        if proc.returncode:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

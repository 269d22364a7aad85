"""Time the whole `edgeprof profile` of a ResNet-18 .onnx on the CPU backends x fp32,int8,
before and after a change, in the same run.

    .venv/bin/python benchmarks/profile_speed.py [--before aace03b] [--rounds 3]

`--before` is a git revision (default: the last commit before the build/run split). Its tree
is exported with `git archive` into a temporary folder and run with the same interpreter and
packages (PYTHONPATH points at it), so only edgeprof's own code differs. Each side gets its
own cache folder: the first round of each is the *cold* profile (conversions included),
later rounds the *warm* one (conversions cached). Rounds are interleaved (before, after,
before, after ...) so machine noise hits both alike. Printed: median wall seconds and the
spread per side, and after/before as a ratio (goal: <= 1, "no slower than today").

Like for like: before the conversion graph, an .onnx ran only on onnxruntime and openvino
(the torch backends and tflite answered `unsupported` at once), so the ratio is taken on
those two. The five-backend profile, which only the new code can do, is timed on its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOTH = "onnxruntime,openvino"  # what an .onnx could run on before the conversion graph
ALL = "torch_eager,torch_compile,onnxruntime,openvino,tflite"


def _export_resnet18(path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    from edgeprof.zoo.reference import resnet18

    built = resnet18()
    model = built[0] if isinstance(built, tuple) else built
    model.eval()
    torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(path), dynamo=False,
                      input_names=["input"], output_names=["logits"])


def _run(tree: Path, model: Path, cache: Path, out: Path,
         backends: str = BOTH) -> tuple[float, int]:
    env = dict(os.environ, PYTHONPATH=str(tree), EDGEPROF_CACHE_DIR=str(cache))
    argv = [sys.executable, "-m", "edgeprof", "profile", str(model), "--target", "host",
            "--backend", backends, "--precision", "fp32,int8", "--min-time", "0.3",
            "--max-time", "2", "--json"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=out, capture_output=True, text=True)
    return time.perf_counter() - t0, done.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="aace03b")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgeprof-speed-") as tmp:
        tmp = Path(tmp)
        before = tmp / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        model = tmp / "resnet18.onnx"
        _export_resnet18(model)
        sides = {"before": before, "after": ROOT}
        times: dict[str, list[float]] = {k: [] for k in sides}
        codes: dict[str, set[int]] = {k: set() for k in sides}
        for _ in range(args.rounds + 1):  # round 0 is the cold run
            for name, tree in sides.items():
                cache = tmp / f"cache-{name}"
                seconds, code = _run(tree, model, cache, tmp)
                times[name].append(seconds)
                codes[name].add(code)
        five = [_run(ROOT, model, tmp / "cache-five", tmp, ALL) for _ in range(2)]
        load = os.getloadavg()[0]
    print(f"edgeprof profile resnet18.onnx --backend {BOTH} --precision fp32,int8 "
          f"(--min-time 0.3 --max-time 2); before = {args.before}, after = working tree; "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print("| side | cold s | warm median s | warm min-max s | exit codes |")
    print("|---|---|---|---|---|")
    for name in sides:
        warm = times[name][1:]
        print(f"| {name} | {times[name][0]:.1f} | {statistics.median(warm):.1f} | "
              f"{min(warm):.1f}-{max(warm):.1f} | {sorted(codes[name])} |")
    cold = times["after"][0] / times["before"][0]
    warm = statistics.median(times["after"][1:]) / statistics.median(times["before"][1:])
    print(f"ratio after/before: cold {cold:.2f}, warm (medians) {warm:.2f}")
    print(f"new: all five CPU backends ({ALL}) x fp32,int8 on the same .onnx: "
          f"cold {five[0][0]:.1f} s, warm {five[1][0]:.1f} s (exit {five[1][1]}: "
          "the int8 rows the torch backends cannot make are `unsupported`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What ``resolve_model`` spends putting a model in eval mode, per NAS-Bench-201 network
built in eval mode: ``module.eval()`` (a ``nn.Module.__setattr__`` per submodule) against
``edgeprof.core.models.in_eval`` (a check, then ``eval()`` only where a submodule trains).

    .venv/bin/python benchmarks/in_eval.py [--networks 300] [--passes 7] [--write]

Both run interleaved in one process over the same networks; each pass's ms per network,
median and min of the passes. ``--write`` saves benchmarks/results/in_eval.txt.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", type=int, default=300)
    ap.add_argument("--passes", type=int, default=7)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()

    from predict_nb201 import NB201, random_arch

    from edgeprof.core.models import in_eval

    spec = importlib.util.spec_from_file_location("nb201", NB201 / "nb201.py")
    nb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nb)
    rng = random.Random(201)
    nets = [nb.network(random_arch(rng)) for _ in range(args.networks)]
    plain, check = [], []
    for _ in range(args.passes):
        t = time.perf_counter()
        for n in nets:
            n.eval()
        plain.append((time.perf_counter() - t) / len(nets) * 1e3)
        t = time.perf_counter()
        for n in nets:
            in_eval(n)
        check.append((time.perf_counter() - t) / len(nets) * 1e3)
    lines = [f"$ .venv/bin/python benchmarks/in_eval.py --networks {args.networks} "
             f"--passes {args.passes}",
             f"{'ms per network':28s} {'median':>8s} {'min':>8s} {'max':>8s}"]
    for name, xs in (("module.eval()", plain), ("in_eval (check first)", check)):
        lines.append(f"{name:28s} {statistics.median(xs):8.3f} {min(xs):8.3f} {max(xs):8.3f}")
    lines.append(f"ratio of medians: {statistics.median(plain) / statistics.median(check):.2f}x")
    text = "\n".join(lines)
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "in_eval.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the hook dispatch costs the estimate: ResNet-50 (batch 1, 3x224x224) estimated through
``registry.hook.edgeprof_read_graph`` (today's path) next to the torch reader called directly
(what the old format -> "module:function" map did), in the same process.

    .venv/bin/python benchmarks/estimate_dispatch.py [--rounds 7]

Rounds are interleaved so machine noise hits both alike; each round builds a fresh handle,
so every estimate walks the graph. Printed: median and spread (min-max) of each, and the
ratio of medians (hook / direct).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import torch

    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.estimate import analytic, torch_graph
    from edgeprof.targets import get_target
    from reference_models import REFERENCES

    module, shapes = REFERENCES["resnet50"][0]()
    module.eval()
    torch.set_grad_enabled(False)
    registry = get_registry()
    target = get_target("desktop_ddr4")

    def handle():
        return resolve_model(module, input_shapes=[tuple(shapes[0])], registry=registry)

    def through_hook():
        return analytic.estimate_model(handle(), target, "fp32", registry=registry).total_macs

    def direct():
        h = handle()
        walk = torch_graph.walk_model(h)
        return analytic.estimate_from_walk(
            walk, model_name=h.name, input_shapes=[list(s.shape) for s in h.input_specs],
            input_dtypes=[s.dtype for s in h.input_specs], target=target).total_macs

    assert through_hook() == direct()  # same count, and both warmed
    times: dict[str, list[float]] = {"hook": [], "direct": []}
    for _ in range(args.rounds):
        for name, fn in (("hook", through_hook), ("direct", direct)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    print(f"ResNet-50 estimate, {args.rounds} interleaved rounds")
    print(f"{'path':<8} {'median s':>9} {'min-max s':>15}")
    for name, ts in times.items():
        print(f"{name:<8} {statistics.median(ts):>9.3f} {min(ts):>7.3f}-{max(ts):<7.3f}")
    print(f"ratio hook/direct: {statistics.median(times['hook']) / statistics.median(times['direct']):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Print edgeprof's MAC and parameter counts of reference models next to published figures.

    .venv/bin/python benchmarks/reference_counts.py

The models are defined from their papers in ``benchmarks/reference_models.py`` (random
weights, batch 1, 3x224x224), and the MCUNet model-zoo networks in ``edgeprof.zoo.mcunet``
(their own resolutions). MACs are edgeprof's (conv, linear, matmul/attention);
reference MACs are the published figures (see REFERENCES for sources).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def count(name: str) -> dict:
    import torch

    from edgeprof.profilers.estimate.torch_graph import walk_torch
    from reference_models import REFERENCES

    factory, ref_macs, ref_params, _ = REFERENCES[name]
    module, shapes = factory()
    t0 = time.perf_counter()
    walk = walk_torch(module, [torch.randn(*s) for s in shapes])
    seconds = time.perf_counter() - t0
    macs = sum(r.macs for r in walk.layers)
    params = sum(r.parameter_count for r in walk.layers)
    return {"model": name, "macs": macs, "params": params, "ref_macs": ref_macs,
            "ref_params": ref_params, "ratio": macs / ref_macs,
            "torch_params": sum(p.numel() for p in module.parameters()), "rows": len(walk.layers),
            "seconds": seconds}


def main() -> int:
    from reference_models import REFERENCES

    header = (f"{'model':20s} {'edgeprof MACs':>15s} {'edgeprof params':>16s} "
              f"{'reference MACs':>15s} {'reference params':>17s} {'MAC ratio':>10s} {'rows':>5s} "
              f"{'walk s':>7s}")
    print(header)
    print("-" * len(header))
    for name in REFERENCES:
        r = count(name)
        ref_p = f"{r['ref_params']:,}" if r["ref_params"] else "-"
        print(f"{r['model']:20s} {r['macs'] / 1e6:13.1f} M {r['params']:16,d} "
              f"{r['ref_macs'] / 1e6:13.1f} M {ref_p:>17s} {r['ratio']:10.4f} {r['rows']:5d} "
              f"{r['seconds']:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time edgeprof's estimate of a ResNet-50 next to ptflops' aten backend, in the same run.

    .venv/bin/python benchmarks/estimate_speed.py [--rounds 7]

Both count the same model (benchmarks/reference_models.py, batch 1, 3x224x224) in the same
process; the rounds are interleaved so machine noise hits both alike. Printed: the median and
the spread (min-max) of each, and the ratio of medians. ptflops is a benchmark-only
dependency (`pip install ptflops`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _import_ptflops_without_torchvision() -> None:
    """ptflops imports torchvision.ops (only to count torchvision's own detection ops). The
    torchvision wheel that installs beside torch 2.13's CPU build fails to import; for a
    ResNet-50 those ops never occur, so a stand-in module is used while ptflops imports."""
    import types

    try:
        import torchvision  # noqa: F401
        return
    except Exception:
        for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            del sys.modules[name]
    tv, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    tv.ops = ops
    ops.DeformConv2d = type("DeformConv2d", (), {})  # a class no model here instantiates
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = tv, ops
    try:
        import ptflops  # noqa: F401
    finally:
        del sys.modules["torchvision"], sys.modules["torchvision.ops"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import torch

    _import_ptflops_without_torchvision()
    from ptflops import get_model_complexity_info

    import edgeprof
    from reference_models import REFERENCES

    factory = REFERENCES["resnet50"][0]
    module, shapes = factory()
    module.eval()
    torch.set_grad_enabled(False)
    shape = tuple(shapes[0])

    def ours():
        est = edgeprof.estimate(module, "desktop_ddr4", "fp32", input_shapes=[shape])
        return est.total_macs

    def theirs():
        macs, _ = get_model_complexity_info(module, shape[1:], as_strings=False,
                                            backend="aten", print_per_layer_stat=False,
                                            verbose=False)
        return macs

    ours(), theirs()  # warm both (imports, first-call caches)
    t_ours, t_theirs = [], []
    for _ in range(args.rounds):
        for fn, acc in ((ours, t_ours), (theirs, t_theirs)):
            t0 = time.perf_counter()
            macs = fn()
            acc.append(time.perf_counter() - t0)
        last = (ours(), theirs())
    m_o, m_t = statistics.median(t_ours), statistics.median(t_theirs)
    import os

    print(f"ResNet-50 1x3x224x224, {args.rounds} interleaved rounds, torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("edgeprof walks the forward on the meta device (shapes, no values); ptflops runs "
          "the real forward, so a busy CPU slows ptflops and not edgeprof")
    print(f"| tool | median s | min-max s | MACs |")
    print(f"|---|---|---|---|")
    print(f"| edgeprof estimate (graph walk + roofline) | {m_o:.3f} | {min(t_ours):.3f}-{max(t_ours):.3f} | {last[0]/1e9:.3f} G |")
    print(f"| ptflops aten backend | {m_t:.3f} | {min(t_theirs):.3f}-{max(t_theirs):.3f} | {last[1]/1e9:.3f} G |")
    print(f"ratio edgeprof / ptflops (medians): {m_o / m_t:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

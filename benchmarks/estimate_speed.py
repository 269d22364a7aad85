"""Time edgeprof's analytic estimate next to ptflops and fvcore, interleaved in one run, and
its throughput over NAS-Bench-201 networks.

    .venv/bin/python benchmarks/estimate_speed.py [--rounds 9] [--nb201-rounds 5] [--out PATH]

Models: ResNet-50, MobileNetV2 and ViT-B/16 as defined in benchmarks/reference_models.py
(batch 1, 3x224x224), one instance per tool (the same weights), so that what one tool leaves
on a model cannot slow another (ptflops' aten backend leaves forward hooks on the model's
top-level children; hooks left by any tool are removed after each of its calls). Each round
runs every tool on every model, in an order that rotates from round to round, so machine
noise hits all alike; after one warm-up call of each. Printed: the median and the IQR of
each tool's seconds, and the ratios of medians.

* edgeprof: ``edgeprof.estimate(module, "desktop_ddr4", "fp32", input_shapes=...)``, the
  whole public call (model resolution, graph walk, roofline rows);
* edgeprof cold: the same with the walk's meta-op cache and its block memo emptied first, as
  for a model whose op shapes and blocks this process has not seen (its first estimate);
* ptflops 0.7.5: ``get_model_complexity_info`` with its default backend (``pytorch``:
  module hooks) and with ``aten`` (a dispatch mode); both run the real forward on CPU;
* fvcore: ``FlopCountAnalysis(module, x).total()`` (a TorchScript trace).

NAS-Bench-201 (../shared/nb201/nb201.py, 10 cells, input 1x3x32x32): the handles are
resolved first; then ``estimate_model(handle, raspberry_pi_4, "fp32")`` on a fresh copy of
each handle (no walk memo), 10 cells x ``--nb201-rounds`` after a first pass over them: with
both of the walk's caches full (the network walked just before: every cell replays), with the
block memo emptied before each network (a network this process has not seen: each stage's
first cell is walked, the other four replay it), and with both emptied.

A 1-minute load average over 2 (2-core machine) before the run is reported and the goals
are not claimed from it; the value after the run includes this script's own threads
(ptflops and fvcore run the real forward on both cores).
ptflops and fvcore are benchmark-only dependencies (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

NB201 = HERE.parent.parent / "shared" / "nb201" / "nb201.py"
MODELS = (("ResNet-50", "resnet50"), ("MobileNetV2", "mobilenet_v2"), ("ViT-B/16", "vit_b_16"))


def _import_ptflops_without_torchvision() -> None:
    """ptflops imports torchvision.ops (only to count torchvision's own detection ops). The
    torchvision wheel that installs beside torch 2.13's CPU build fails to import; for these
    models those ops never occur, so a stand-in module is used while ptflops imports."""
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


def _drop_hooks(module) -> int:
    """Remove the forward hooks left on ``module``'s submodules; how many there were."""
    n = 0
    for m in module.modules():
        for d in (m._forward_hooks, m._forward_pre_hooks):
            n += len(d)
            d.clear()
    return n


def _empty_block_memo() -> None:
    try:
        from edgeprof.profilers.estimate import torch_memo
    except ImportError:  # (the walk before the block memo had none)
        return
    torch_memo.clear()


def _empty_meta_cache(torch_graph) -> None:
    # (getattr: the walk before the cache had none; this script also times that walk)
    getattr(torch_graph, "_META_CACHE", {}).clear()
    _empty_block_memo()


def _stats(xs: list[float]) -> tuple[float, float, float]:
    """(median, first quartile, third quartile)."""
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return statistics.median(xs), q1, q3


def _fmt(xs: list[float]) -> str:
    m, q1, q3 = _stats(xs)
    return f"{m:.4f} ({q1:.4f}-{q3:.4f})"


def compare(rounds: int) -> tuple[list[str], dict]:
    import torch
    from fvcore.nn import FlopCountAnalysis

    _import_ptflops_without_torchvision()
    from ptflops import get_model_complexity_info

    import edgeprof
    from edgeprof.profilers.estimate import torch_graph
    from reference_models import REFERENCES

    torch.set_grad_enabled(False)
    tools: dict[str, dict] = {}
    models: dict[str, dict] = {}
    macs: dict[str, dict[str, float]] = {}
    first_call = None
    leftovers: dict[str, int] = {}
    for label, key in MODELS:
        # each tool counts its own instance of the model (same weights), so that nothing one
        # tool leaves on a model (ptflops' aten backend leaves forward hooks on its top-level
        # children) slows another; hooks left behind are removed after each call
        mods = {}
        for tool in ("edgeprof", "ptflops", "ptflops aten", "fvcore"):
            mods[tool], shapes = REFERENCES[key][0]()
            mods[tool].eval()
        shape = tuple(shapes[0])
        x = torch.randn(*shape)

        def ours(module=mods["edgeprof"], shape=shape):
            est = edgeprof.estimate(module, "desktop_ddr4", "fp32", input_shapes=[shape])
            return est.total_macs

        def ours_cold(ours=ours):
            _empty_meta_cache(torch_graph)
            return ours()

        def pt(module=mods["ptflops"], shape=shape, backend="pytorch"):
            return get_model_complexity_info(module, shape[1:], as_strings=False,
                                             backend=backend, print_per_layer_stat=False,
                                             verbose=False)[0]

        def pt_aten(pt=pt, module=mods["ptflops aten"]):
            return pt(module=module, backend="aten")

        def fv(module=mods["fvcore"], x=x):
            return FlopCountAnalysis(module, x).unsupported_ops_warnings(False) \
                .uncalled_modules_warnings(False).total()

        tools[label] = {"edgeprof": ours, "edgeprof cold": ours_cold, "ptflops": pt,
                        "ptflops aten": pt_aten, "fvcore": fv}
        models[label] = {"edgeprof": mods["edgeprof"], "edgeprof cold": mods["edgeprof"],
                         "ptflops": mods["ptflops"], "ptflops aten": mods["ptflops aten"],
                         "fvcore": mods["fvcore"]}
        macs[label] = {}
        for name, fn in tools[label].items():  # warm-up: imports, first-call caches
            t0 = time.perf_counter()
            macs[label][name] = fn()
            if first_call is None:
                first_call = time.perf_counter() - t0
            left = _drop_hooks(models[label][name])
            if left:
                leftovers[name] = leftovers.get(name, 0) + left
    times = {label: {name: [] for name in fns} for label, fns in tools.items()}
    jobs = [(label, name) for label, fns in tools.items() for name in fns]
    for r in range(rounds):
        shift = r % len(jobs)
        for label, name in jobs[shift:] + jobs[:shift]:
            t0 = time.perf_counter()
            tools[label][name]()
            times[label][name].append(time.perf_counter() - t0)
            _drop_hooks(models[label][name])

    lines = [
        "| model | edgeprof s, median (IQR) | edgeprof cold s | ptflops s (pytorch) | "
        "ptflops s (aten) | fvcore s | edgeprof / ptflops | edgeprof / fvcore | "
        "cold / ptflops |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdict = {}
    for label, _ in MODELS:
        t = times[label]
        med = {name: statistics.median(v) for name, v in t.items()}
        best_pt = min(med["ptflops"], med["ptflops aten"])
        lines.append(
            f"| {label} | {_fmt(t['edgeprof'])} | {_fmt(t['edgeprof cold'])} | "
            f"{_fmt(t['ptflops'])} | {_fmt(t['ptflops aten'])} | {_fmt(t['fvcore'])} | "
            f"{med['edgeprof'] / best_pt:.2f} | {med['edgeprof'] / med['fvcore']:.2f} | "
            f"{med['edgeprof cold'] / best_pt:.2f} |")
        verdict[label] = med["edgeprof"] <= best_pt and med["edgeprof"] <= med["fvcore"]
    lines.append("")
    lines.append("MACs counted (G): " + "; ".join(
        f"{label}: edgeprof {macs[label]['edgeprof'] / 1e9:.3f}, ptflops "
        f"{macs[label]['ptflops'] / 1e9:.3f} (aten {macs[label]['ptflops aten'] / 1e9:.3f}), "
        f"fvcore {macs[label]['fvcore'] / 1e9:.3f}" for label, _ in MODELS))
    lines.append(f"first edgeprof estimate in this process (imports, torch's lazy set-up): "
                 f"{first_call:.2f} s")
    lines.append("ratios are of medians; edgeprof / ptflops is against the faster ptflops "
                 "backend")
    if leftovers:
        lines.append("forward hooks a tool left on the model in one call (removed after each "
                     "call): " + ", ".join(f"{k} {v}" for k, v in leftovers.items()))
    return lines, verdict


def nb201(rounds: int) -> list[str]:
    if not NB201.is_file():
        return [f"NAS-Bench-201: {NB201} is not here, skipped"]
    sys.path.insert(0, str(NB201.parent))
    import nb201 as nb

    from edgeprof.core.models import resolve_model
    from edgeprof.profilers.estimate import torch_graph
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.targets import get_target

    target = get_target("raspberry_pi_4")
    handles = [resolve_model(f"{NB201}:{cell}", input_shapes=[[1, 3, 32, 32]])
               for cell in nb.CELLS]

    def one(h, cold=False, unseen=False):
        if cold:
            _empty_meta_cache(torch_graph)
        if unseen:
            _empty_block_memo()
        h = replace(h)  # a fresh handle: no walk memo
        t0 = time.perf_counter()
        estimate_model(h, target, "fp32")
        return time.perf_counter() - t0

    first = [one(h) for h in handles]
    warm, unseen, cold = [], [], []
    for _ in range(rounds):
        for h in handles:  # (in this order: the first two leave this network's blocks)
            cold.append(one(h, cold=True))
            unseen.append(one(h, unseen=True))
            warm.append(one(h))
    out = []
    for label, ts in (("after the first pass", warm),
                      ("block memo emptied before each", unseen),
                      ("meta-op cache and block memo emptied before each", cold)):
        m, q1, q3 = _stats(ts)
        out.append(f"| NAS-Bench-201, {label} | {len(ts)} | {len(ts) / sum(ts):.1f} | "
                   f"{m * 1e3:.2f} ({q1 * 1e3:.2f}-{q3 * 1e3:.2f}) | {max(ts) * 1e3:.1f} |")
    return ["| estimate_model over the 10 cells (1x3x32x32, raspberry_pi_4, fp32) | networks "
            "| networks/s | ms per network, median (IQR) | max ms |", "|---|---|---|---|---|",
            *out, f"first pass (the first network pays torch's lazy set-up): "
            f"{first[0] * 1e3:.0f} ms, then {statistics.median(first[1:]) * 1e3:.1f} ms median"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--nb201-rounds", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results" / "estimate_speed.txt"),
                    help="where to write the table too ('-': nowhere)")
    args = ap.parse_args()
    import torch

    load0 = os.getloadavg()
    started = dt.datetime.now(dt.timezone.utc)
    lines, verdict = compare(args.rounds)
    nb_lines = nb201(args.nb201_rounds)
    load1 = os.getloadavg()
    busy = load0[0] > 2
    head = [
        f"estimate speed, {started:%Y-%m-%d %H:%M} UTC, {args.rounds} interleaved rounds, "
        f"torch {torch.__version__}, {os.cpu_count()} cores, load average "
        f"{load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f} at the start, "
        f"{load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f} at the end (with this run's own)"
        + (" -- BUSY (over 2): noted, not used to claim a goal" if busy else ""),
        "",
    ]
    goal = [
        "",
        "goal (edgeprof at most ptflops' and fvcore's time, same run): " + ", ".join(
            f"{label} {'met' if ok else 'NOT met'}" for label, ok in verdict.items())
        + (" (busy machine: not a claim)" if busy else ""),
        "",
    ]
    text = "\n".join(head + lines + goal + nb_lines) + "\n"
    print(text, end="")
    if args.out != "-":
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``edgeprof calibrate --target host``: measure a sampled set of kernels (and a few small
whole models) with the harness on this machine, fit, cross-validate, save.

Each sample is one single-kernel model (a convolution, a depthwise or pointwise convolution,
a linear layer -- two of them larger than the cache --, an LSTM or GRU, pooling, an
elementwise op, an attention block, a conv + BN + ReLU block)
at a size drawn from the ranges mobile CNNs and small transformers use; its features are
the estimate's kernels (class, MACs, bytes moved, roofline), its target value the harness's
median latency. The fit (fit.py, the ``work`` basis) is per kernel class: a cost per GMAC
and per MB moved, plus per-layer and per-inference overheads. A kernel measured while
other processes kept the cores busy (the harness's reading) is measured again, up to twice,
and the quietest measurement kept. ``KERNEL_SETS["tiny"]`` is a handful of kernels for
tests.

``edgeprof calibrate --fleet SCHEDULER --target T`` (``calibrate_fleet``) measures the same
set on a board of T through the fleet's ``RemoteRunner`` (built here, shipped as artifacts,
measured there) and saves the calibration with the board's fingerprint.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgeprof.core.artifact import created_utc
from edgeprof.core.errors import MeasurementError

# (kind, args, input shape) -- NCHW / (tokens, features)
_FULL = [
    ("conv", (3, 32, 3, 2), [1, 3, 112, 112]), ("conv", (16, 16, 3, 1), [1, 16, 56, 56]),
    ("conv", (32, 32, 3, 1), [1, 32, 28, 28]), ("conv", (64, 64, 3, 1), [1, 64, 28, 28]),
    ("conv", (64, 128, 3, 2), [1, 64, 28, 28]), ("conv", (128, 128, 3, 1), [1, 128, 14, 14]),
    ("conv", (32, 64, 5, 1), [1, 32, 28, 28]), ("conv", (256, 256, 3, 1), [1, 256, 7, 7]),
    ("depthwise", (32, 3, 1), [1, 32, 112, 112]), ("depthwise", (96, 3, 2), [1, 96, 56, 56]),
    ("depthwise", (144, 3, 1), [1, 144, 28, 28]), ("depthwise", (384, 3, 1), [1, 384, 14, 14]),
    ("depthwise", (240, 5, 1), [1, 240, 14, 14]), ("depthwise", (576, 3, 2), [1, 576, 14, 14]),
    ("pointwise", (32, 16), [1, 32, 112, 112]), ("pointwise", (16, 96), [1, 16, 56, 56]),
    ("pointwise", (96, 24), [1, 96, 56, 56]), ("pointwise", (144, 32), [1, 144, 28, 28]),
    ("pointwise", (384, 64), [1, 384, 14, 14]), ("pointwise", (960, 160), [1, 960, 7, 7]),
    ("linear", (1024, 1000), [1, 1024]), ("linear", (2048, 2048), [1, 2048]),
    ("linear", (256, 1024), [1, 64, 256]), ("linear", (512, 512), [1, 128, 512]),
    ("maxpool", (3, 2), [1, 64, 112, 112]), ("avgpool", (), [1, 1280, 7, 7]),
    ("avgpool", (), [1, 512, 28, 28]),
    ("add", (), [1, 64, 56, 56]), ("add", (), [1, 256, 28, 28]), ("mul", (), [1, 96, 56, 56]),
    ("attention", (64, 4), [1, 64, 64]), ("attention", (192, 3), [1, 197, 192]),
    ("lstm", (32, 64), [1, 100, 32]), ("lstm", (128, 256), [1, 20, 128]),
    ("gru", (64, 128), [1, 30, 64]),
    ("linear", (4096, 4096), [1, 4096]), ("linear", (3072, 6144), [1, 3072]),
    ("block", (32, 64, 3), [1, 32, 56, 56]), ("block", (128, 128, 3), [1, 128, 14, 14]),
]
_MODELS_FULL = ["small_cnn", "small_resnet", "small_mobilenet", "tiny_resnet8", "tiny_ds_cnn",
                "tiny_vww_mobilenet", "mlp"]
KERNEL_SETS: dict[str, tuple[list, list[str]]] = {
    "default": (_FULL, _MODELS_FULL),
    "tiny": ([("conv", (8, 8, 3, 1), [1, 8, 16, 16]), ("depthwise", (16, 3, 1), [1, 16, 16, 16]),
              ("pointwise", (16, 16), [1, 16, 16, 16]), ("linear", (64, 64), [1, 64]),
              ("add", (), [1, 16, 16, 16])], ["small_cnn"]),
}


def _module(kind: str, args: tuple):
    import torch
    from torch import nn

    if kind == "conv":
        cin, cout, k, s = args
        return nn.Conv2d(cin, cout, k, s, k // 2)
    if kind == "depthwise":
        c, k, s = args
        return nn.Conv2d(c, c, k, s, k // 2, groups=c)
    if kind == "pointwise":
        return nn.Conv2d(args[0], args[1], 1)
    if kind == "linear":
        return nn.Linear(*args)
    if kind == "maxpool":
        return nn.MaxPool2d(args[0], args[1], 1)
    if kind == "avgpool":
        return nn.AdaptiveAvgPool2d(1)
    if kind == "block":
        cin, cout, k = args
        return nn.Sequential(nn.Conv2d(cin, cout, k, 1, k // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU())

    class _Binary(nn.Module):
        def forward(self, x):
            return x + x * 0.5 if kind == "add" else x * torch.sigmoid(x)

    class _Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(
                2, 0, 3, 1, 4)
            a = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(-1)
            return self.proj((a @ v).transpose(1, 2).reshape(b, n, c))

    class _Recurrent(nn.Module):
        def __init__(self, features, hidden):
            super().__init__()
            self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(features, hidden,
                                                                batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    if kind in ("add", "mul"):
        return _Binary()
    if kind in ("lstm", "gru"):
        return _Recurrent(*args)
    if kind == "attention":
        return _Attention(*args)
    raise ValueError(kind)


#: a kernel measured while other processes kept this many cores busy (the harness's own
#: reading) is measured again, up to QUIET_RETRIES times; the quietest measurement is kept
QUIET_CORES = 0.5
QUIET_RETRIES = 2


def busy_cores(result) -> float | None:
    """Cores other processes kept busy while ``result`` was measured (the harness's)."""
    v = ((result.config or {}).get("harness") or {}).get("other_processes_cores")
    return None if v is None else float(v)


def _quietest(run: Callable[[], Any], retries: int = QUIET_RETRIES):
    """``run()`` again while the machine was busy during it; the quietest ok result."""
    best, best_busy = None, math.inf
    for _ in range(1 + retries):
        result = run()
        if not result.ok:
            return best or result
        busy = busy_cores(result)
        if best is None or (busy is not None and busy < best_busy):
            best, best_busy = result, busy if busy is not None else math.inf
        if busy is None or busy < QUIET_CORES:
            break
    return best


def calibrate_host(backend: str, precision: str = "fp32", *, kernels: str = "default",
                   runs: int = 20, max_time_s: float = 2.0, save: bool = True,
                   out_dir: str | Path | None = None, registry=None,
                   progress: Callable[[str], None] | None = None) -> tuple[Any, Path | None]:
    """Measure, fit and (with ``save``) write ``host--<backend>-<precision>.json`` into the
    user's calibration folder. Returns (calibration, path)."""
    return calibrate(backend, precision, target="host", kernels=kernels, runs=runs,
                     max_time_s=max_time_s, save=save, out_dir=out_dir, registry=registry,
                     progress=progress)


def calibrate_fleet(fleet, target: str, backend: str, precision: str = "fp32", *,
                    kernels: str = "default", runs: int = 20, max_time_s: float = 2.0,
                    save: bool = True, out_dir: str | Path | None = None, registry=None,
                    targets_dir=None, client=None,
                    progress: Callable[[str], None] | None = None) -> tuple[Any, Path | None]:
    """The same on a board of ``target`` in the fleet (``fleet``: a FleetSpec or scheduler
    address): each kernel is built here as an artifact, shipped with its sha256 and measured
    there (``RemoteRunner``); the kernels are estimated on the target's descriptor, whose
    datasheet roofline floors the prediction; the calibration carries the board's
    fingerprint (and says so when the board was emulating). Written as
    ``<target>--<backend>-<precision>.json``."""
    from edgeprof.profilers.measure.fleet import RemoteRunner

    if target == "host":
        from edgeprof.core.errors import UserError

        raise UserError("a fleet measures on boards of a target descriptor; 'host' is this "
                        "machine: calibrate it without --fleet")
    with RemoteRunner(fleet, target, client=client, progress=progress) as runner:
        return calibrate(backend, precision, target=target, runner=runner, kernels=kernels,
                         runs=runs, max_time_s=max_time_s, save=save, out_dir=out_dir,
                         registry=registry, targets_dir=targets_dir, progress=progress)


def _last_level_cache_mb(target) -> float | None:
    """The descriptor's largest cache in MB (None when it names none)."""
    sizes = [float(q.value) for q in (getattr(target, "caches", None) or {}).values()
             if getattr(q, "value", None)]
    return max(sizes) / 1e6 if sizes else None


def _board_fingerprint(target, records: list) -> dict[str, Any]:
    """The descriptor's fingerprint plus the board's own (the last record's ``fleet``)."""
    from edgeprof.profilers.predict.predictor import fingerprint_of

    fp = dict(fingerprint_of(target))
    fleet = next((r.extra["fleet"] for r in reversed(records)
                  if (r.extra or {}).get("fleet")), None)
    if fleet:
        board = fleet.get("fingerprint") or {}
        fp.update({"board": fleet.get("board"), "emulating": bool(fleet.get("emulating")),
                   **{k: board.get(k) for k in ("cpu_model", "arch", "physical_cores",
                                                "frequency_hz", "ram_bytes", "os")
                      if board.get(k) is not None}})
    return fp


def calibrate(backend: str, precision: str = "fp32", *, target: str = "host", runner=None,
              kernels: str = "default", runs: int = 20, max_time_s: float = 2.0,
              save: bool = True, out_dir: str | Path | None = None, registry=None,
              targets_dir=None,
              progress: Callable[[str], None] | None = None) -> tuple[Any, Path | None]:
    """Measure the kernel set with ``runner`` (None: here, in this process), estimate each
    kernel on ``target``, fit, cross-validate and (with ``save``) write
    ``<target>--<backend>-<precision>.json``. Returns (calibration, path)."""
    import torch

    from edgeprof._version import __version__
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.core.precision import get_precision
    from edgeprof.core.requests import MeasureRequest
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.measure.measure import measure
    from edgeprof.profilers.predict.calibration import Calibration, user_dir
    from edgeprof.profilers.predict.fit import cv_summary, fit, leave_one_out
    from edgeprof.profilers.predict.kernels import features, kernel_ranges, kernels_of
    from edgeprof.targets import get_target_registry

    say = progress or (lambda msg: None)
    if kernels not in KERNEL_SETS:
        from edgeprof.core.errors import UnknownNameError

        raise UnknownNameError("kernel set", kernels, KERNEL_SETS)
    reg = registry or get_registry()
    reg.backend(backend)  # unknown names fail before any work
    compute = get_precision(precision).compute
    if target == "host":
        say("calibrating host roofline (cached after the first run)")
    tdesc = get_target_registry(targets_dir).get(target)
    where = "this host" if runner is None else f"a {target} board of the fleet"
    kernel_list, model_names = KERNEL_SETS[kernels]
    items = []
    torch.manual_seed(0)
    for kind, args, shape in kernel_list:
        handle = resolve_model(_module(kind, args).eval(), input_shapes=[shape])
        items.append((f"{kind}{args}@{'x'.join(map(str, shape))}", handle))
    for name in model_names:
        items.append((name, resolve_model(f"builtin:{name}", registry=reg)))
    samples, ranges, failures, version, records = [], {}, [], None, []
    for i, (label, handle) in enumerate(items):
        say(f"measuring {label} on {backend} ({i + 1}/{len(items)}) on {where}")
        config = RunConfig(precision=precision, runs=runs, min_time_s=0.05,
                           max_time_s=max_time_s)
        try:
            result = _quietest(lambda: measure(MeasureRequest.for_handle(backend, handle, config),
                                               runner, registry=reg))
        except MeasurementError as e:  # the fleet: no board, a board lost past its retries
            failures.append(f"{label}: {e}")
            continue
        if not result.ok:
            failures.append(f"{label}: {result.status} ({result.reason})")
            continue
        records.append(result)
        version = version or result.runtime_version
        est = estimate_model(handle, tdesc, precision)
        ks = kernels_of(est)
        for c, (lo, hi) in kernel_ranges(ks).items():
            r = ranges.setdefault(c, [lo, hi])
            ranges[c] = [min(r[0], lo), max(r[1], hi)]
        samples.append({"id": i, "model": label, "family": backend, "precision": compute,
                        "latency_ms": float(result.stats.median_ms),
                        "ci_ms": [result.stats.ci_low_ms, result.stats.ci_high_ms],
                        "busy_cores": busy_cores(result),
                        "source": f"measured on {where} with edgeprof {__version__}",
                        "features": features(ks)})
    if len(samples) < 3:
        raise MeasurementError(f"calibrating {target} with {backend} at {precision}: only "
                               f"{len(samples)} of {len(items)} kernels could be measured ("
                               + "; ".join(failures[:3]) + ")")
    # the work basis (fit.py): per class ms per GMAC and per MB; clamped to the roofline on a
    # board's datasheet peaks, not on the host's measured ones
    floor = target != "host"
    cache_mb = _last_level_cache_mb(tdesc)
    params = fit(samples, basis="work", floor=floor, cache_mb=cache_mb)
    say("cross-validating (leave-one-out)")
    cv = cv_summary(samples, leave_one_out(samples, params["grouping"], basis="work",
                                           floor=floor, cache_mb=cache_mb))
    factors = params.pop("factors")
    runtimes = {k: {"family": backend, "precision": compute, "version": version,
                    "factor": v["factor"], "n": v["n"]} for k, v in factors.items()}
    fp = _board_fingerprint(tdesc, records)
    note = (f"{len(samples)} kernels and models measured with the harness on {where} "
            f"(runs>={runs}); " + (f"{len(failures)} could not be measured: "
                                   + "; ".join(failures[:3]) if failures else "all measured"))
    if fp.get("emulating"):
        note += (f"; the board '{fp.get('board')}' was EMULATING {target} (it is a "
                 f"{fp.get('cpu_model')}, {fp.get('arch')}): this calibration describes that "
                 f"machine, not a {target}")
    cal = Calibration(
        name=f"{target}--{backend}-{precision}", target=target, fingerprint=fp,
        runtimes=runtimes, parameters=params, cv=cv, ranges=ranges, samples=samples,
        created_utc=created_utc(),
        edgeprof_version=__version__, note=note)
    path = None
    if save:
        folder = Path(out_dir) if out_dir else user_dir(create=True)
        path = cal.save(folder / f"{target}--{backend}-{precision}.json")
        cal.path = path
    return cal, path

"""The analytic estimate: a graph walk, a precision and a target, joined into a roofline.

``estimate_model(model, target, precision)`` walks the model's graph with the graph reader
that answers the ``edgeprof_read_graph`` hook for its format (the built-in readers are the
``*_graph`` modules here, listed in plugins.toml; a plugin adds a format the same way), then
per layer:

* ``parameter_bytes`` = parameter elements x the precision's weight bytes,
  ``activation_bytes`` = output elements x the precision's activation bytes (the seeds'
  meaning), ``input_bytes`` = activation elements read x activation bytes (integer inputs
  such as token ids are priced like activations, a small overstatement for int8);
* ``flops`` = 2 x ``macs``; ``compute_ms`` = macs / peak MAC/s of the precision's compute
  type; ``memory_ms`` = (parameter + input + output bytes) / memory bandwidth;
  ``roofline_latency_ms`` = max of the two; ``bound`` = ``memory`` when memory time is the
  larger, else ``compute``. ``other_ops`` (elementwise, norm, pooling) are not in the
  compute time: those layers are memory-bound on every target we describe.

If the target has no peak figure for the precision's compute type, the fp32 peak is used
(or, failing that, the first peak the target lists) and ``notes`` says so. The roofline is
a lower bound on latency: it assumes peak compute and full bandwidth, every layer alone.

The estimate also fills ``memory_capacity`` (weights + peak live activations against RAM;
on an MCU-like target with ``sram``/``flash``, activations against SRAM and weights against
flash), ``edge_constraints`` (memory- or compute-bound, cache sensitivity of the largest
layer's working set, batch size) and ``precision_memory`` (fp32/fp16/int8 footprints).
All byte figures are decimal (1 kB = 1000 B).
"""

from __future__ import annotations

import math
from typing import Any

from edgeprof.core.errors import UnsupportedError
from edgeprof.core.precision import PRECISIONS, get_precision
from edgeprof.core.results import Estimate, GraphWalk, LayerEstimate

#: precisions in the ``precision_memory`` table
MEMORY_TABLE_PRECISIONS = ("fp32", "fp16", "int8")


def walk(model, registry=None) -> GraphWalk:
    """The graph walk of ``model`` (a ModelHandle) by the first graph reader that reads its
    format (``registry.hook.edgeprof_read_graph``; default: the default registry's)."""
    if registry is None:
        from edgeprof.core.plugins import get_registry

        registry = get_registry()
    result = registry.hook.edgeprof_read_graph(model=model)
    if result is None:
        readers = sorted({i.plugin_name for i in registry.hook.edgeprof_read_graph.get_hookimpls()
                          if not (i.wrapper or i.hookwrapper)})
        raise UnsupportedError(f"no graph reader reads {model.format} models (the readers "
                               f"loaded: {', '.join(readers) or 'none'}); convert the model to "
                               "ONNX first, or add a plugin implementing edgeprof_read_graph")
    return result


def numel(shape) -> int:
    """The number of elements of a tensor of ``shape`` (1 for a scalar's ``()``)."""
    return math.prod(map(int, shape))


def peak_live(lifetimes) -> int:
    """The largest sum of sizes alive at once, of ``(birth step, last step, size)`` lifetimes
    (a graph reader's tensors). At one step births come before frees: a node's inputs and
    its output are alive together."""
    events: list[tuple[int, int]] = []
    for birth, last, size in lifetimes:
        events += ((birth, size), (max(last, birth), -size))  # freed once its last reader ran
    live = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1] < 0)):
        live += delta
        peak = max(peak, live)
    return peak


def bytes_text(n: float) -> str:
    """A byte count as text in decimal units: "185 kB", "4.29 GB" (never "4.29e+03 MB")."""
    if n >= 1e9:  # a board's RAM: "4.29 GB", not "4.29e+03 MB"
        return f"{n / 1e9:.3g} GB"
    return f"{n / 1e6:.3g} MB" if n >= 1e5 else f"{n / 1e3:.3g} kB"


_mb = bytes_text


def compute_peak(target, compute: str) -> tuple[float | None, str, str | None]:
    """(peak MAC/s, compute precision used, note) for ``compute`` on ``target``."""
    peak = target.peak_macs(compute)
    if peak is not None:
        return peak, compute, None
    fallback = "fp32" if target.peak_macs("fp32") is not None else next(iter(target.peak_compute),
                                                                          None)
    if fallback is None:
        return None, compute, f"target '{target.id}' gives no peak compute figure at all"
    return (target.peak_macs(fallback), fallback,
            f"target '{target.id}' gives no {compute} peak compute; the {fallback} peak is "
            "used for compute time")


def layer_estimates(walk_result: GraphWalk, precision: str, peak_macs_per_s: float | None,
                    bandwidth_bytes_per_s: float) -> list[LayerEstimate]:
    """Apply a precision and a target's peak and bandwidth to a graph walk's layers."""
    p = get_precision(precision)
    weight_bytes, act_bytes = p.weight_bytes, p.activation_bytes
    rows = []
    append = rows.append
    for g in walk_result.layers:
        parameter_bytes = g.parameter_count * weight_bytes
        activation_bytes = g.output_elements * act_bytes
        input_bytes = g.input_elements * act_bytes
        macs = int(g.macs)
        compute_ms = (g.macs / peak_macs_per_s * 1e3) if peak_macs_per_s else 0.0
        memory_ms = (parameter_bytes + input_bytes + activation_bytes) / bandwidth_bytes_per_s * 1e3
        append(LayerEstimate(
            layer=g.name, op_type=g.op_type, output_shape="x".join(map(str, g.output_shape)),
            output_elements=int(g.output_elements), input_bytes=float(input_bytes),
            parameter_count=int(g.parameter_count), parameter_bytes=float(parameter_bytes),
            activation_bytes=float(activation_bytes), macs=macs, flops=2 * macs,
            other_ops=int(g.other_ops), compute_ms=float(compute_ms), memory_ms=float(memory_ms),
            roofline_latency_ms=float(max(compute_ms, memory_ms)),
            bound="memory" if memory_ms > compute_ms else "compute",
        ))
    return rows


def memory_capacity(target, weights_bytes: float, peak_activation_bytes: float) -> dict[str, Any]:
    """Does the model fit? Weights + peak live activations against the target's memories."""
    total = weights_bytes + peak_activation_bytes
    out: dict[str, Any] = {
        "weights_bytes": float(weights_bytes),
        "peak_activation_bytes": float(peak_activation_bytes),
        "total_bytes": float(total),
        "ram_bytes": float(target.ram.value),
    }
    if target.sram is not None or target.flash is not None:  # MCU-like: two memories
        act_limit = float(target.sram.value) if target.sram is not None else float(target.ram.value)
        w_limit = float(target.flash.value) if target.flash is not None else float(target.ram.value)
        out.update({
            "model": "mcu",
            "activation_limit_bytes": act_limit,
            "activation_limit": "sram" if target.sram is not None else "ram",
            "weight_limit_bytes": w_limit,
            "weight_limit": "flash" if target.flash is not None else "ram",
            "activations_fit": peak_activation_bytes <= act_limit,
            "weights_fit": weights_bytes <= w_limit,
        })
        out["fits"] = bool(out["activations_fit"] and out["weights_fit"])
        parts = [f"peak activations {_mb(peak_activation_bytes)} vs {out['activation_limit']} "
                 f"{_mb(act_limit)}", f"weights {_mb(weights_bytes)} vs {out['weight_limit']} "
                 f"{_mb(w_limit)}"]
    else:
        out.update({"model": "ram", "fits_ram": total <= out["ram_bytes"]})
        out["fits"] = bool(out["fits_ram"])
        parts = [f"weights {_mb(weights_bytes)} + peak activations {_mb(peak_activation_bytes)}"
                 f" = {_mb(total)} vs RAM {_mb(out['ram_bytes'])}"]
    out["message"] = ("fits: " if out["fits"] else "does not fit: ") + "; ".join(parts)
    return out


def edge_constraints(target, layers: list[LayerEstimate], weights_bytes: float,
                     batch_size: int) -> dict[str, Any]:
    """Bottleneck, cache sensitivity and batch size, each with a sentence."""
    compute_ms = sum(r.compute_ms for r in layers)
    memory_ms = sum(r.memory_ms for r in layers)
    mem_rows = sum(1 for r in layers if r.bound == "memory")
    bottleneck = "memory" if memory_ms > compute_ms else "compute"
    if bottleneck == "memory":
        why = (f"memory movement dominates: {memory_ms:.3g} ms moving weights and activations "
               f"vs {compute_ms:.3g} ms of MACs at peak; {mem_rows} of {len(layers)} layers are "
               "memory-bound, so fewer bytes (int8/fp16 weights, fused layers) pay off first")
    else:
        why = (f"compute dominates: {compute_ms:.3g} ms of MACs at peak vs {memory_ms:.3g} ms "
               f"moving data; {len(layers) - mem_rows} of {len(layers)} layers are compute-bound,"
               " so faster arithmetic (int8 kernels, an accelerator) pays off first")

    working = max(layers, key=lambda r: r.parameter_bytes + r.input_bytes + r.activation_bytes,
                  default=None)
    ws = (working.parameter_bytes + working.input_bytes + working.activation_bytes) if working else 0.0
    levels = sorted(((k, float(q.value)) for k, q in target.caches.items()), key=lambda kv: kv[1])
    llc = target.last_level_cache_bytes
    out: dict[str, Any] = {
        "bottleneck": bottleneck,
        "bottleneck_reason": why,
        "compute_ms": compute_ms,
        "memory_ms": memory_ms,
        "working_set_bytes": float(ws),
        "working_set_layer": working.layer if working else None,
        "last_level_cache_bytes": llc,
        "weights_bytes": float(weights_bytes),
        "batch_size": int(batch_size),
    }
    if not levels or llc is None:
        out["cache_sensitivity"] = "unknown"
        out["cache_sensitivity_reason"] = (f"target '{target.id}' lists no cache sizes; the "
                                           f"largest working set is {_mb(ws)} "
                                           f"({out['working_set_layer']})")
        return out
    inner = [(k, v) for k, v in levels if v < llc]
    mid_name, mid = (inner[-1] if inner else levels[0])
    if ws <= mid and mid < llc:
        level, where = "low", f"fits in {mid_name.replace('_cache', '')} ({_mb(mid)})"
    elif ws <= llc:
        level, where = "medium", (f"fits only in the last-level cache ({_mb(llc)}), which it "
                                  "shares with everything else running")
    else:
        level, where = "high", (f"exceeds the last-level cache ({_mb(llc)}), so it streams "
                                "from DRAM and latency follows memory bandwidth")
    reuse = ("each weight is used once per inference at batch size 1, so weights are re-read "
             "from memory every run" if batch_size == 1 else
             f"batch size {batch_size} reuses each weight {batch_size} times per read")
    if weights_bytes <= llc:
        reuse += f"; all weights ({_mb(weights_bytes)}) could stay cached between runs"
    out["cache_sensitivity"] = level
    out["cache_sensitivity_reason"] = (f"the largest layer working set, {out['working_set_layer']} "
                                       f"({_mb(ws)} of weights, input and output), {where}; "
                                       f"{reuse}")
    return out


def precision_memory(parameter_count: int, peak_live_elements: int,
                     precisions: tuple[str, ...] = MEMORY_TABLE_PRECISIONS) -> list[dict[str, Any]]:
    """Weights, peak activations and their total per precision, with the saving vs fp32."""
    fp32 = PRECISIONS["fp32"]
    base = parameter_count * fp32.weight_bytes + peak_live_elements * fp32.activation_bytes
    rows = []
    for name in precisions:
        p = PRECISIONS[name]
        w = parameter_count * p.weight_bytes
        a = peak_live_elements * p.activation_bytes
        total = w + a
        rows.append({"precision": name, "weights_bytes": float(w),
                     "peak_activation_bytes": float(a), "total_bytes": float(total),
                     "saving_vs_fp32": float(1 - total / base) if base else 0.0})
    return rows


def parameter_counts(walk_result: GraphWalk, forward_count: int) -> tuple[int, str | None]:
    """(the model's parameter count, a note when the forward uses fewer of them).

    The count is all of the model's parameters where the walker knows them (torch: every
    ``parameters()`` element, as torchinfo and ptflops count), else the graph's.
    """
    total = walk_result.total_parameter_count
    if total is None or total == forward_count:
        return (forward_count if total is None else int(total)), None
    return int(total), (f"parameter_count is all {total:,} parameters of the model (as "
                        f"torchinfo and ptflops count them); this forward uses "
                        f"{forward_count:,} (forward_parameter_count): the rest belong to "
                        "modules this forward does not run, e.g. an auxiliary classifier "
                        "used only in training")


def batchnorm_folding_note(walk_result: GraphWalk, fmt: str) -> str | None:
    """A note for a graph (ONNX, TFLite, IR) whose reader saw batch-norms folded into
    convolutions (``walk_result.folded_batchnorms``: the names an exporter gives the folded
    weights): its parameter count is lower than the framework's. Nothing for a graph that
    shows none (a Conv/ReLU/Pool/Linear model never had one to fold)."""
    folded = walk_result.folded_batchnorms
    if fmt == "torch" or not folded:
        return None
    return (f"{folded} convolution{'s' if folded != 1 else ''} of this {fmt} graph carry a "
            "batch-norm the exporter folded into their weights and bias (their weights are "
            "the exporter's computed constants), so parameter_count is the graph's, lower "
            "than the framework's (torch counts 2 parameters per channel of each batch-norm; "
            "folding adds a bias to a convolution that had none)")


def estimate_from_walk(walk_result: GraphWalk, *, model_name: str, input_shapes: list[list[int]],
                       input_dtypes: list[str], target, precision: str = "fp32",
                       batch_size: int = 1) -> Estimate:
    """Build an :class:`Estimate` from a graph walk (no model needed)."""
    p = get_precision(precision)
    notes = list(walk_result.notes)
    peak, used, note = compute_peak(target, p.compute)
    if note:
        notes.append(note)
    bw = target.bandwidth_bytes_per_s
    layers = layer_estimates(walk_result, precision, peak, bw)
    forward_count = int(sum(r.parameter_count for r in layers))
    parameter_count, count_note = parameter_counts(walk_result, forward_count)
    if count_note:
        notes.append(count_note)
    parameter_bytes = float(parameter_count * p.weight_bytes)
    peak_act = float(walk_result.peak_live_elements * p.activation_bytes)
    if not layers:
        notes.append("the graph walk found no layer that does work")
    return Estimate(
        model=model_name, target=target.id, precision=precision, batch_size=int(batch_size),
        input_shapes=[list(s) for s in input_shapes], input_dtypes=list(input_dtypes),
        layers=layers, peak_activation_bytes=peak_act, parameter_count=parameter_count,
        parameter_bytes=parameter_bytes, compute_precision=used, peak_macs_per_s=peak,
        memory_bandwidth_bytes_per_s=float(bw),
        memory_capacity=memory_capacity(target, parameter_bytes, peak_act),
        edge_constraints=edge_constraints(target, layers, parameter_bytes, batch_size),
        precision_memory=precision_memory(parameter_count, walk_result.peak_live_elements),
        notes=notes, forward_parameter_count=forward_count,
    )


def estimate_model(model, target, precision: str = "fp32", batch_size: int | None = None,
                   registry=None) -> Estimate:
    """The analytic estimate of ``model`` (a ModelHandle) on ``target`` at ``precision``.

    ``batch_size`` replaces the first dimension of every input. A model that rejects its
    input shape raises :class:`~edgeprof.core.errors.InputSpecError`. ``registry``: the
    plugins whose graph readers may walk it (default: the default registry).
    """
    get_precision(precision)  # unknown names fail before any walk
    if batch_size is not None:
        model = model.with_batch(batch_size)
    # the walk (which runs the model) depends only on the model and its inputs: do it once
    # per handle, however many targets and precisions it is estimated for. The memo lives
    # on the instance (not a dataclass field), so copies made with replace() start empty.
    memo = model.__dict__.setdefault("_walk_memo", {})
    key = tuple((s.shape, s.dtype) for s in model.input_specs)
    if key not in memo:
        memo[key] = walk(model, registry)
    result = memo[key]
    est = estimate_from_walk(
        result, model_name=model.name, input_shapes=[list(s.shape) for s in model.input_specs],
        input_dtypes=[s.dtype for s in model.input_specs], target=target, precision=precision,
        batch_size=model.batch_size,
    )
    folded = batchnorm_folding_note(result, model.format)
    if folded:
        est.notes.append(folded)
    return est

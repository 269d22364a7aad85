"""Compression applied for real on torch modules: always on a copy, never in place.

Each method returns ``(module, CompressionRecord)``:

* :func:`prune_magnitude` - unstructured L1 (magnitude) pruning with
  ``torch.nn.utils.prune``, made permanent; the tensors keep their shapes, zeros are real.
* :func:`prune_channels` - structured channel pruning that really shrinks layers: new,
  smaller ``Conv2d`` / ``BatchNorm`` / ``Linear`` modules. Only channels that one producer
  hands to one consumer are pruned (found by tracing the model with ``torch.fx``): in a
  residual block that is conv1's outputs / conv2's inputs, so the residual additions keep
  matching shapes; a producer whose output is also added, concatenated or reused is left
  alone. Depthwise convolutions and BatchNorms on the way are pruned along.
* :func:`prune_n_m` - N:M semi-structured sparsity (2:4 by default): in every group of M
  consecutive weights along the input dimension, the N largest are kept.
* :func:`to_channels_last` - the NHWC memory format for 4-D weights.

Quantization is not here: the backends quantize (int8 etc.) as part of ``prepare``.
torch is imported inside the functions only.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgeprof.core.errors import UnknownNameError, UnsupportedError, UserError
from edgeprof.core.results import clean


@dataclass
class CompressionRecord:
    """What a compression method did. ``sparsity`` is the fraction of zeros among the
    weights the method touched; ``parameters_*`` count elements (zeros included),
    ``nonzero_*`` count non-zero elements; MACs are given when example inputs were."""

    method: str
    settings: dict[str, Any]
    parameters_before: int
    parameters_after: int
    nonzero_before: int
    nonzero_after: int
    sparsity: float
    layers: list[dict[str, Any]] = field(default_factory=list)
    macs_before: int | None = None
    macs_after: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def parameter_reduction(self) -> float:
        return 1 - self.parameters_after / self.parameters_before if self.parameters_before else 0.0

    def to_dict(self) -> dict[str, Any]:
        return clean({
            "method": self.method, "settings": self.settings,
            "parameters_before": self.parameters_before,
            "parameters_after": self.parameters_after,
            "parameter_reduction": self.parameter_reduction,
            "nonzero_before": self.nonzero_before, "nonzero_after": self.nonzero_after,
            "sparsity": self.sparsity, "macs_before": self.macs_before,
            "macs_after": self.macs_after, "layers": self.layers, "notes": self.notes,
        })


# ---------------------------------------------------------------------------- helpers
def _check_module(module: Any) -> None:
    if not (hasattr(module, "parameters") and hasattr(module, "forward")):
        raise UserError(f"compression needs a torch nn.Module, got {type(module).__name__}")


def _check_ratio(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise UserError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def count_parameters(module: Any) -> tuple[int, int]:
    """(elements, non-zero elements) over all parameters."""
    total = nonzero = 0
    for p in module.parameters():
        total += p.numel()
        nonzero += int((p != 0).sum())
    return total, nonzero


def _as_tuple(example_inputs: Any) -> tuple:
    return tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)


def count_macs(module: Any, example_inputs: Any) -> int:
    """Multiply-accumulates of one forward pass (``FlopCounterMode`` FLOPs / 2)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(*_as_tuple(example_inputs))
    return int(counter.get_total_flops() // 2)


def _weight_layers(model: Any) -> list[tuple[str, Any]]:
    import torch.nn as nn

    return [(n, m) for n, m in model.named_modules()
            if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear))
            and getattr(m, "weight", None) is not None]


def _finish(method: str, settings: dict, original: Any, model: Any, touched: list,
            layers: list, notes: list, example_inputs: Any = None) -> CompressionRecord:
    pb, nb = count_parameters(original)
    pa, na = count_parameters(model)
    t_total = sum(w.numel() for w in touched)
    t_zero = sum(int((w == 0).sum()) for w in touched)
    rec = CompressionRecord(method, settings, pb, pa, nb, na,
                            t_zero / t_total if t_total else 0.0, layers, notes=notes)
    if example_inputs is not None:
        rec.macs_before = count_macs(original, example_inputs)
        rec.macs_after = count_macs(model, example_inputs)
    return rec


# ----------------------------------------------------------------- magnitude pruning
def prune_magnitude(module: Any, amount: float = 0.5, *, scope: str = "global",
                    example_inputs: Any = None) -> tuple[Any, CompressionRecord]:
    """Zero the ``amount`` fraction of Conv/Linear weights with the smallest magnitude
    (``scope="global"`` across layers, ``"layer"`` per layer), made permanent."""
    import torch
    from torch.nn.utils import prune

    _check_module(module)
    amount = _check_ratio("amount", amount)
    if scope not in ("global", "layer"):
        raise UserError(f"scope must be 'global' or 'layer', got {scope!r}")
    model = copy.deepcopy(module).eval()
    layers = _weight_layers(model)
    if not layers:
        raise UnsupportedError("magnitude pruning found no Conv or Linear weights in the model")
    params = [(m, "weight") for _, m in layers]
    with torch.no_grad():
        if scope == "global":
            prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=amount)
        else:
            for m, n in params:
                prune.l1_unstructured(m, n, amount=amount)
        for m, n in params:
            prune.remove(m, n)
    info = [{"layer": n, "shape": list(m.weight.shape),
             "sparsity": float((m.weight == 0).float().mean())} for n, m in layers]
    notes = ["shapes are unchanged: dense kernels do the same work; the zeros pay off only "
             "with sparse kernels or compressed storage"]
    return model, _finish("magnitude", {"amount": amount, "scope": scope}, module, model,
                          [m.weight for _, m in layers], info, notes, example_inputs)


# ----------------------------------------------------------------------- N:M sparsity
def n_m_mask(weight: Any, n: int = 2, m: int = 4):
    """The N:M mask of a Linear (out, in) or Conv (out, in, kh, kw) weight: groups of ``m``
    consecutive input channels (for each kernel position), keeping the ``n`` largest."""
    import torch

    w = weight.detach()
    if w.dim() == 4:  # (out, in, kh, kw) -> (out, kh, kw, in): group along input channels
        w = w.permute(0, 2, 3, 1)
    groups = w.reshape(-1, m).abs()
    keep = groups.topk(n, dim=1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, keep, True)
    mask = mask.reshape(w.shape)
    if weight.dim() == 4:
        mask = mask.permute(0, 3, 1, 2)
    return mask.contiguous()


def is_n_m_sparse(weight: Any, n: int = 2, m: int = 4) -> bool:
    """True when every group of ``m`` along the input dimension has at most ``n`` non-zeros."""
    w = weight.detach()
    if w.dim() == 4:
        w = w.permute(0, 2, 3, 1)
    if w.shape[-1] % m:
        return False
    return bool(((w.reshape(-1, m) != 0).sum(dim=1) <= n).all())


def prune_n_m(module: Any, n: int = 2, m: int = 4, *,
              example_inputs: Any = None) -> tuple[Any, CompressionRecord]:
    """N:M semi-structured sparsity on every Conv2d/Linear whose input dimension divides by
    ``m`` (others are skipped and listed in the notes)."""
    import torch
    import torch.nn as nn

    _check_module(module)
    if not (isinstance(n, int) and isinstance(m, int) and 0 < n < m):
        raise UserError(f"N:M needs integers 0 < N < M, got {n}:{m}")
    model = copy.deepcopy(module).eval()
    touched, info, skipped = [], [], []
    for name, layer in _weight_layers(model):
        if not isinstance(layer, (nn.Conv2d, nn.Linear)):
            skipped.append(f"{name} ({type(layer).__name__})")
            continue
        if isinstance(layer, nn.Conv2d) and layer.groups != 1:
            skipped.append(f"{name} (grouped convolution)")
            continue
        cin = layer.weight.shape[1]
        if cin % m:
            skipped.append(f"{name} (input dimension {cin} is not a multiple of {m})")
            continue
        with torch.no_grad():
            layer.weight.mul_(n_m_mask(layer.weight, n, m))
        touched.append(layer.weight)
        info.append({"layer": name, "shape": list(layer.weight.shape),
                     "sparsity": float((layer.weight == 0).float().mean())})
    if not touched:
        raise UnsupportedError(f"no Conv2d/Linear layer has an input dimension divisible by {m}")
    notes = [f"skipped: {', '.join(skipped)}"] if skipped else []
    notes.append(f"{n}:{m} sparsity speeds up only on kernels that use it (sparse tensor "
                 "cores, Ampere and later); elsewhere it runs dense")
    return model, _finish(f"{n}:{m}", {"n": n, "m": m}, module, model, touched, info, notes,
                          example_inputs)


# --------------------------------------------------------------------- channels last
def to_channels_last(module: Any, *, example_inputs: Any = None) -> tuple[Any, CompressionRecord]:
    """A copy whose 4-D parameters are in the channels-last (NHWC) memory format. Inputs
    must be converted too (``x.to(memory_format=torch.channels_last)``)."""
    import torch

    _check_module(module)
    model = copy.deepcopy(module).eval().to(memory_format=torch.channels_last)
    four_d = [(n, p) for n, p in model.named_parameters() if p.dim() == 4]
    info = [{"parameter": n, "channels_last": p.is_contiguous(memory_format=torch.channels_last)}
            for n, p in four_d]
    notes = ["layout only: parameters and MACs are unchanged; pass channels-last inputs"]
    if not four_d:
        notes.append("the model has no 4-D weights: channels-last changes nothing")
    return model, _finish("channels_last", {"memory_format": "channels_last"}, module, model,
                          [], info, notes, example_inputs)


# ---------------------------------------------------------------- structured pruning
_PASS_MODULES = ("ReLU", "ReLU6", "GELU", "SiLU", "Hardswish", "Hardsigmoid", "LeakyReLU",
                 "Tanh", "Sigmoid", "ELU", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
                 "Dropout", "Identity")
_PASS_FUNCTIONS = ("relu", "relu6", "gelu", "silu", "hardswish", "sigmoid", "tanh",
                   "leaky_relu", "elu", "max_pool2d", "avg_pool2d", "dropout")


@dataclass
class _Chain:
    producer: str
    passthrough: list[tuple[str, str]]  # (kind: "bn" | "dw", module name)
    consumer: str
    spatial: int  # features per channel at the consumer (flatten before a Linear)


def _find_chains(gm: Any) -> list[_Chain]:
    import torch.nn as nn

    mods = dict(gm.named_modules())
    chains = []
    for node in gm.graph.nodes:
        if node.op != "call_module":
            continue
        prod = mods[node.target]
        if not ((isinstance(prod, nn.Conv2d) and prod.groups == 1) or isinstance(prod, nn.Linear)):
            continue
        cur, passthrough, spatial, flattened = node, [], 1, False
        consumer = None
        while True:
            users = list(cur.users)
            if len(users) != 1 or not users[0].args or users[0].args[0] is not cur:
                break
            u = users[0]
            if u.op == "call_module":
                m = mods[u.target]
                tname = type(m).__name__
                if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) and not flattened:
                    passthrough.append(("bn", u.target))
                elif tname in _PASS_MODULES:
                    pass
                elif (isinstance(m, nn.Conv2d) and m.groups > 1 and m.groups == m.in_channels
                      == m.out_channels and not flattened):
                    passthrough.append(("dw", u.target))
                elif isinstance(m, nn.Flatten) and m.start_dim == 1:
                    spatial, flattened = _spatial(cur), True
                elif isinstance(m, nn.Conv2d) and m.groups == 1 and not flattened \
                        and isinstance(prod, nn.Conv2d):
                    consumer = u.target
                    break
                elif isinstance(m, nn.Linear) and (flattened or isinstance(prod, nn.Linear)):
                    consumer = u.target
                    break
                else:
                    break
            elif u.op in ("call_function", "call_method"):
                fname = getattr(u.target, "__name__", str(u.target))
                if fname in _PASS_FUNCTIONS:
                    pass
                elif fname == "flatten" and _flatten_start(u) == 1:
                    spatial, flattened = _spatial(cur), True
                else:
                    break
            else:
                break
            cur = u
        if consumer is not None and spatial is not None:
            chains.append(_Chain(node.target, passthrough, consumer, spatial))
    return chains


def _flatten_start(node: Any) -> int:
    if len(node.args) > 1:
        return int(node.args[1])
    return int(node.kwargs.get("start_dim", 0))


def _spatial(node: Any) -> int | None:
    meta = node.meta.get("tensor_meta")
    if meta is None or len(meta.shape) < 2:
        return None
    return int(math.prod(meta.shape[2:])) if len(meta.shape) > 2 else 1


def _set_module(model: Any, name: str, new: Any) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def _conv_like(layer: Any, cin: int, cout: int, groups: int) -> Any:
    """A Conv2d with ``layer``'s kernel, stride, padding, dilation, bias and padding mode."""
    import torch.nn as nn

    return nn.Conv2d(cin, cout, layer.kernel_size, layer.stride, layer.padding, layer.dilation,
                     groups, layer.bias is not None, layer.padding_mode)


def _slice_out(layer: Any, idx: Any) -> Any:
    """The output channels ``idx`` of a Linear or Conv2d; a depthwise convolution (groups
    == channels) keeps the same channels on its input, one group each."""
    import torch.nn as nn

    k = len(idx)
    if isinstance(layer, nn.Linear):
        new = nn.Linear(layer.in_features, k, bias=layer.bias is not None)
    elif layer.groups > 1:
        new = _conv_like(layer, k, k, k)
    else:
        new = _conv_like(layer, layer.in_channels, k, layer.groups)
    new.weight.data = layer.weight.data[idx].clone()
    if layer.bias is not None:
        new.bias.data = layer.bias.data[idx].clone()
    return new


def _slice_in(layer: Any, idx: Any, spatial: int) -> Any:
    import torch
    import torch.nn as nn

    if isinstance(layer, nn.Linear):
        cols = (idx[:, None] * spatial + torch.arange(spatial)[None, :]).reshape(-1)
        new = nn.Linear(len(cols), layer.out_features, bias=layer.bias is not None)
        new.weight.data = layer.weight.data[:, cols].clone()
    else:
        new = _conv_like(layer, len(idx), layer.out_channels, layer.groups)
        new.weight.data = layer.weight.data[:, idx].clone()
    if layer.bias is not None:
        new.bias.data = layer.bias.data.clone()
    return new


def _slice_bn(bn: Any, idx: Any) -> Any:
    new = type(bn)(len(idx), bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
    if bn.affine:
        new.weight.data = bn.weight.data[idx].clone()
        new.bias.data = bn.bias.data[idx].clone()
    if bn.track_running_stats:
        new.running_mean.data = bn.running_mean.data[idx].clone()
        new.running_var.data = bn.running_var.data[idx].clone()
        new.num_batches_tracked.data = bn.num_batches_tracked.data.clone()
    return new


def prune_channels(module: Any, example_inputs: Any, ratio: float = 0.5, *,
                   channel_multiple: int = 1, min_channels: int = 1,
                   measure_macs: bool = True) -> tuple[Any, CompressionRecord]:
    """Remove the ``ratio`` fraction of output channels (L1 norm of the filter, times
    |BN gamma| where a BatchNorm follows) of every producer whose channels flow to exactly
    one consumer, rebuilding the producer, the BatchNorms / depthwise convolutions between,
    and the consumer as smaller modules. Kept counts are rounded up to ``channel_multiple``.
    ``example_inputs`` (a tensor or a tuple) gives the shapes a flatten needs; with
    ``measure_macs`` the record carries the MACs before and after (FlopCounterMode)."""
    import torch
    import torch.fx

    _check_module(module)
    ratio = _check_ratio("ratio", ratio)
    if isinstance(channel_multiple, bool) or not isinstance(channel_multiple, int) \
            or channel_multiple < 1:
        raise UserError(f"channel_multiple must be a positive integer, got {channel_multiple!r}")
    model = copy.deepcopy(module).eval()
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:
        raise UnsupportedError(f"structured pruning traces the model with torch.fx and "
                               f"{type(model).__name__} cannot be traced: "
                               f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
    from torch.fx.passes.shape_prop import ShapeProp

    with torch.no_grad():
        ShapeProp(gm).propagate(*_as_tuple(example_inputs))
    chains = _find_chains(gm)
    if not chains:
        raise UnsupportedError(f"{type(model).__name__} has no channels that one layer hands to "
                               "exactly one other; nothing can be pruned structurally")
    info = []
    with torch.no_grad():
        for ch in chains:
            prod = model.get_submodule(ch.producer)
            c = prod.weight.shape[0]
            keep = max(min_channels, int(round(c * (1 - ratio))))
            keep = min(c, int(math.ceil(keep / channel_multiple) * channel_multiple))
            if keep >= c:
                continue
            score = prod.weight.detach().abs().reshape(c, -1).sum(dim=1)
            first = next((name for kind, name in ch.passthrough if kind == "bn"), None)
            if first is not None and model.get_submodule(first).affine:
                score = score * model.get_submodule(first).weight.detach().abs()
            idx = torch.sort(torch.topk(score, keep).indices).values
            _set_module(model, ch.producer, _slice_out(prod, idx))
            for kind, name in ch.passthrough:
                sub = model.get_submodule(name)
                _set_module(model, name, _slice_bn(sub, idx) if kind == "bn"
                            else _slice_out(sub, idx))
            _set_module(model, ch.consumer,
                        _slice_in(model.get_submodule(ch.consumer), idx, ch.spatial))
            info.append({"producer": ch.producer, "consumer": ch.consumer,
                         "through": [n for _, n in ch.passthrough],
                         "channels_before": c, "channels_after": keep})
    notes = [f"pruned {len(info)} channel group(s); channels that feed residual additions, "
             "concatenations or several layers were left unchanged",
             "accuracy drops until the model is fine-tuned"]
    rec = _finish("channels", {"ratio": ratio, "channel_multiple": channel_multiple},
                  module, model, [], info, notes,
                  example_inputs if measure_macs else None)
    rec.sparsity = 0.0
    return model, rec


# -------------------------------------------------------------------------- dispatch
METHODS: dict[str, Callable[..., tuple[Any, CompressionRecord]]] = {
    "magnitude": prune_magnitude,
    "channels": prune_channels,
    "2:4": prune_n_m,
    "n:m": prune_n_m,
    "channels_last": to_channels_last,
}


def compress(model: Any, method: str, **options: Any) -> tuple[Any, CompressionRecord]:
    """Apply ``method`` (one of :data:`METHODS`) to a torch module or a torch
    :class:`~edgeprof.core.models.ModelHandle` (whose sample inputs serve as example inputs)."""
    if method not in METHODS:
        raise UnknownNameError("compression method", method, METHODS)
    if hasattr(model, "torch_module") and hasattr(model, "make_inputs"):
        import torch

        inputs = tuple(torch.from_numpy(a) for a in model.make_inputs())
        module = model.torch_module()
        options.setdefault("example_inputs", inputs)
    else:
        module = model
    if method == "channels" and "example_inputs" not in options:
        raise UserError("channel pruning needs example_inputs (a tensor of the model's "
                        "input shape)")
    return METHODS[method](module, **options)


__all__ = ["CompressionRecord", "METHODS", "compress", "count_macs", "count_parameters",
           "is_n_m_sparse", "n_m_mask", "prune_channels", "prune_magnitude", "prune_n_m",
           "to_channels_last"]

"""From an estimate's rows to the kernels a runtime runs, each in one latency class.

The classes (nn-Meter's kernel split, reduced to what the estimate's rows can tell):

* ``conv`` -- a dense convolution with a kernel larger than 1x1 (or grouped),
* ``depthwise`` -- one filter per channel,
* ``pointwise`` -- 1x1 (``macs == input elements x output channels``),
* ``linear`` -- fully connected on one row (a batch-1 classifier: a matrix-vector product
  that reads every weight once), and any GEMM-like op we do not know by name; a linear
  layer over ``LINEAR_ROWS_AS_POINTWISE`` rows or more (a transformer's tokens) is the
  same GEMM as a 1x1 convolution over as many pixels, and is classed ``pointwise``,
* ``recurrent`` -- LSTM / GRU / RNN layers (a small GEMM per time step, in sequence),
* ``attention`` -- activation x activation matmuls and attention blocks,
* ``pooling`` -- max/average/global pooling and reductions,
* ``elementwise`` -- everything else that moves data (add, mul, concat, softmax, norms ...).

The shape of a convolution is read from the row's figures (format-agnostic: torch, ONNX,
TFLite and OpenVINO rows look alike): ``macs / output elements`` is the reduction depth
(in/groups x k x k); ``parameters / depth`` is the number of output channels; ``macs /
(input elements x output channels)`` is k^2/s^2, which is 1 for a pointwise convolution.

Fusion, as each runtime family does it (``data/runtimes.toml``, key ``fuse``): most runtimes
fold batch-norm and fuse the activation into the kernel before it (conv + BN + ReLU runs as
one kernel); graph compilers (TensorRT, OpenVINO, TVM, torch.compile) also fuse an
elementwise add or mul (a residual) into the convolution before it; eager PyTorch fuses
nothing. A row the family fuses, right after a kernel with the same number of output
elements, costs no time and no per-layer overhead of its own. Without a family, the
activation and batch-norm fusions apply (what every shipped board calibration before
families had fusions assumed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CLASSES = ("conv", "depthwise", "pointwise", "linear", "recurrent", "attention", "pooling",
           "elementwise")

_CONV = {"conv1d", "conv2d", "conv3d", "conv", "convolution", "conv_2d", "conv_3d",
         "depthwise_conv_2d", "groupconvolution", "convtranspose2d", "conv_transpose",
         "convtranspose", "transpose_conv", "convolutionbackpropdata", "_convolution"}
_LINEAR = {"linear", "gemm", "fully_connected", "addmm", "mm", "embedding_lookup"}
_RECURRENT = {"lstm", "gru", "rnn", "unidirectional_sequence_lstm",
              "bidirectional_sequence_lstm", "lstmcell", "grucell", "rnncell",
              "unidirectional_sequence_rnn", "bidirectional_sequence_rnn", "rnn_tanh", "rnn_relu"}
_MATMUL = {"matmul", "bmm", "batch_matmul", "einsum", "baddbmm"}
_ATTENTION = {"multiheadattention", "scaled_dot_product_attention", "attention",
              "multiheadattention_", "_scaled_dot_product_flash_attention"}
_POOL = {"maxpool1d", "maxpool2d", "maxpool3d", "avgpool1d", "avgpool2d", "avgpool3d",
         "adaptiveavgpool1d", "adaptiveavgpool2d", "adaptivemaxpool2d", "mean", "max_pool_2d",
         "average_pool_2d", "globalaveragepool", "globalmaxpool", "maxpool", "averagepool",
         "reducemean", "reduce_max", "sum", "avg_pool", "max_pool", "reducemax"}
_BATCHNORM = {"batchnorm1d", "batchnorm2d", "batchnorm3d", "batchnormalization", "batch_norm",
              "fusedbatchnorm"}
_ACTIVATION = {"relu", "relu6", "leakyrelu", "leaky_relu", "silu", "swish", "hardswish",
               "hard_swish", "hardsigmoid", "gelu", "clip", "clamp", "prelu", "elu", "mish",
               "sigmoid", "tanh", "hardtanh", "relu_", "relu6_", "relu_n1_to_1", "logistic"}
_ELEMENTWISE_FUSABLE = {"add", "mul", "sub", "add_", "mul_", "iadd", "imul"}
_IDENTITY = {"identity", "dropout", "flatten", "reshape", "view", "squeeze", "unsqueeze"}
_FUSABLE = _BATCHNORM | _ACTIVATION
_FUSION_SETS = {"activation": _ACTIVATION, "batchnorm": _BATCHNORM,
                "elementwise": _ELEMENTWISE_FUSABLE, "identity": _IDENTITY}
_CONV_ANCHORS = {"conv", "depthwise", "pointwise", "linear"}
_ANCHORS = {"conv", "depthwise", "pointwise", "linear", "recurrent", "elementwise",
            "attention"}


@dataclass
class Kernel:
    """One estimate row as a kernel: its class, its work on the target, fused or not."""

    layer: str
    op_type: str
    kclass: str
    macs: int
    bytes: float
    roofline_ms: float
    fused_into: str | None = None
    param_bytes: float = 0.0
    compute_ms: float = 0.0
    memory_ms: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)
    #: whether the runtime runs a dense 3x3 stride-1 convolution by Winograd on this
    #: processor (runtimes.toml ``winograd``); the geometry alone does not make it so
    runtime_winograd: bool = True

    @property
    def fused(self) -> bool:
        return self.fused_into is not None

    @property
    def winograd(self) -> bool:
        """A dense 3x3 stride-1 convolution (the kind GPU libraries run by Winograd):
        reduction depth a multiple of 9 (in/groups x 3 x 3) and k^2/s^2 about 9 (7.5-9.5:
        'same' padding gives 9, no padding 9 (H-2)^2/H^2, 8.4 on a 28x28 map; 3x3/2 is
        2.25, 5x5/2 6.25, 7x7/2 12.25, AlexNet's 11x11/4 7.3 with a depth of 363)."""
        if self.kclass != "conv" or not self.runtime_winograd:
            return False
        depth = float(self.detail.get("depth", 0.0))
        k2s = float(self.detail.get("k2_over_s2", 0.0))
        return 7.5 <= k2s <= 9.5 and round(depth) >= 9 and round(depth) % 9 == 0


def _conv_class(row) -> tuple[str, dict[str, Any]]:
    out = max(int(row.output_elements), 1)
    depth = row.macs / out  # (in / groups) x kernel area
    cout = row.parameter_count / depth if depth else 0.0
    in_elems = row.input_bytes / row.activation_bytes * out if row.activation_bytes else 0.0
    k2s = row.macs / (in_elems * cout) if in_elems and cout else 0.0
    detail = {"depth": round(depth, 3), "out_channels": round(cout, 1), "k2_over_s2": round(k2s, 3)}
    k = round(depth ** 0.5)
    # one k x k filter per channel (k odd, 3 to 9): a 1x1 convolution whose input channels
    # are a square (64 -> 128, stride 2, in a ResNet's downsampling) is not one
    if depth <= 81 and in_elems and 0.7 <= in_elems / out <= 5.0 and \
            k * k == round(depth) and k % 2 == 1 and k >= 3:
        return "depthwise", detail
    if 0 < k2s <= 1.2:
        return "pointwise", detail  # 1x1 (k2s 1), strided (1/s^2) or grouped (1/groups)
    return "conv", detail


#: a weighted GEMM over this many rows or more reuses each weight like a 1x1 convolution:
#: ``pointwise``, not the weight-streaming ``linear`` of a batch-1 classifier
LINEAR_ROWS_AS_POINTWISE = 8


def _linear_class(row) -> tuple[str, dict[str, Any]]:
    """``linear`` for a matrix-vector product (one row of activations), ``pointwise`` for
    a GEMM over many rows (macs / weights = the rows that share each weight)."""
    weights = float(row.parameter_count or 0)
    rows = float(row.macs) / weights if weights > 0 and row.macs > 0 else 1.0
    detail = {"rows": round(rows, 2)}
    return ("pointwise" if rows >= LINEAR_ROWS_AS_POINTWISE else "linear"), detail


def classify(row) -> tuple[str, dict[str, Any]]:
    """The latency class of one estimate row (see the module docstring)."""
    op = row.op_type.lower()
    if op in _CONV or (op.startswith("conv") and row.macs > 0):
        return _conv_class(row) if row.macs > 0 else ("elementwise", {})
    if op in _ATTENTION:
        return "attention", {}
    if op in _MATMUL and row.parameter_count <= 0:
        return "attention", {}
    if op in _RECURRENT:
        return "recurrent", {}
    if op in _LINEAR or op in _MATMUL:
        return _linear_class(row)
    if op in _POOL:
        return "pooling", {}
    if row.macs > 0:  # an op with MACs we do not know by name: a GEMM-like kernel
        return "linear", {}
    return "elementwise", {}


def fusions_of(family: str | None) -> tuple[frozenset[str], bool, bool]:
    """(op types ``family`` fuses into the kernel before them, whether it removes identity
    ops, whether it fuses an elementwise add/mul into a convolution)."""
    if family is None:
        return frozenset(_FUSABLE), True, False
    from edgeprof.profilers.predict.threads import family_info

    kinds = set(family_info(family).get("fuse", ()))
    ops: set[str] = set()
    for kind in kinds - {"identity", "elementwise"}:
        ops |= _FUSION_SETS[kind]
    return frozenset(ops), "identity" in kinds, "elementwise" in kinds


def runs_winograd(family: str | None, kind: str | None) -> bool:
    """Whether ``family`` runs dense 3x3 stride-1 convolutions by Winograd on a processor of
    ``kind`` (runtimes.toml ``winograd``: the processor kinds where it does; GPU libraries
    by default). Unknown family or kind: True (the fit's groupings decide)."""
    if family is None or kind is None:
        return True
    from edgeprof.profilers.predict.threads import family_info

    return kind in family_info(family).get("winograd", ("gpu",))


def kernels_of(estimate, family: str | None = None, kind: str | None = None) -> list[Kernel]:
    """The estimate's rows as kernels, with the rows ``family`` fuses marked, and whether it
    runs 3x3 convolutions by Winograd on a processor of ``kind`` (cpu, gpu ...)."""
    wino = runs_winograd(family, kind)
    fusable, drop_identity, fuse_elementwise = fusions_of(family)
    out: list[Kernel] = []
    anchor: Kernel | None = None
    anchor_elems = -1
    for row in estimate.layers:
        kclass, detail = classify(row)
        op = row.op_type.lower()
        k = Kernel(layer=row.layer, op_type=row.op_type, kclass=kclass, macs=int(row.macs),
                   bytes=float(row.parameter_bytes + row.input_bytes + row.activation_bytes),
                   roofline_ms=float(row.roofline_latency_ms), detail=detail,
                   param_bytes=float(row.parameter_bytes),
                   compute_ms=float(getattr(row, "compute_ms", 0.0) or 0.0),
                   memory_ms=float(getattr(row, "memory_ms", 0.0) or 0.0),
                   runtime_winograd=wino)
        same = anchor is not None and int(row.output_elements) == anchor_elems
        if drop_identity and op in _IDENTITY and row.macs == 0:
            k.fused_into = "(removed)"
        elif same and (op in fusable or (fuse_elementwise and op in _ELEMENTWISE_FUSABLE
                                         and anchor.kclass in _CONV_ANCHORS)):
            k.fused_into = anchor.layer
        else:
            anchor = k if kclass in _ANCHORS else None
            anchor_elems = int(row.output_elements)
        out.append(k)
    return out


def features(kernels: list[Kernel]) -> dict[str, Any]:
    """Aggregates a calibration is fitted on: unfused kernel count, and per class the
    roofline (the ``roofline`` basis), the work in GMACs and the MB moved (``work``), the
    model's parameter MB (its weights spill out of the caches when larger), and the roofline
    of the dense 3x3 stride-1 convolutions (``conv3x3_roofline_ms``, a part of ``conv``'s:
    the kernels GPU runtimes run by Winograd)."""
    roof = {c: 0.0 for c in CLASSES}
    comp = {c: 0.0 for c in CLASSES}
    mem = {c: 0.0 for c in CLASSES}
    count = {c: 0 for c in CLASSES}
    gmacs = {c: 0.0 for c in CLASSES}
    mbytes = {c: 0.0 for c in CLASSES}
    conv3x3 = 0.0
    for k in kernels:
        if k.fused:
            continue
        if k.winograd:
            conv3x3 += k.roofline_ms
        roof[k.kclass] += k.roofline_ms
        comp[k.kclass] += k.compute_ms
        mem[k.kclass] += k.memory_ms
        count[k.kclass] += 1
        gmacs[k.kclass] += k.macs / 1e9
        mbytes[k.kclass] += k.bytes / 1e6
    return {"n_kernels": int(sum(count.values())), "roofline_ms": roof, "count": count,
            "compute_ms": comp, "memory_ms": mem,
            "gmacs": gmacs, "mbytes": mbytes,
            "params_mb": float(sum(k.param_bytes for k in kernels)) / 1e6,
            "conv3x3_roofline_ms": conv3x3,
            "roofline_total_ms": float(sum(k.roofline_ms for k in kernels))}


def kernel_ranges(kernels: list[Kernel]) -> dict[str, list[float]]:
    """Per class: [min, max] roofline ms of the unfused kernels (for extrapolation checks)."""
    out: dict[str, list[float]] = {}
    for k in kernels:
        if k.fused:
            continue
        lo, hi = out.get(k.kclass, [k.roofline_ms, k.roofline_ms])
        out[k.kclass] = [min(lo, k.roofline_ms), max(hi, k.roofline_ms)]
    return out

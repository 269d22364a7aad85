"""The analytic graph walk of an ONNX model file, and its input specs.

``walk`` fixes the graph inputs to the handle's shapes, runs ONNX shape inference, and gives
one :class:`GraphLayer` per node that does work, named by the node's name (TorchScript
exports name nodes ``/conv1/Conv``; ORT's operator profile uses the same names):

- MACs for Conv (grouped and depthwise: ``out x Cin/groups x kH x kW``), ConvTranspose
  (``in x Cout/groups x kH x kW``), Gemm, MatMul (batched and activation x activation, as in
  attention: ``out x K``), ``QLinearConv``/``QLinearMatMul``/``MatMulInteger``/``ConvInteger``;
- ``other_ops`` = output elements for the rest, output x kernel area for pooling, input
  elements for global pooling and reductions; data movement (Transpose, Concat, Gather ...)
  counts 0;
- shape bookkeeping (Shape, Reshape, Squeeze, Constant ...) is no row, and views alias
  their input in the lifetime count;
- floating/int8 initializers (ndim >= 1) are parameters, each counted once, at the first
  node that reads it.

Peak live elements come from producer/consumer lifetimes, model inputs included.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from edgeprof.core.errors import InputSpecError, ModelError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.models import DeclaredInput, InputSpec, ModelHandle, load_model_file
from edgeprof.core.results import GraphLayer, GraphWalk
from edgeprof.profilers.estimate.analytic import numel, peak_live

#: no arithmetic and (logically) no new data: not a row; outputs alias the first input
VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}
#: shape bookkeeping: not a row
SHAPE_OPS = {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "EyeLike"}
#: data movement: a row (bytes move) with other_ops = 0
MOVE_OPS = {"Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND",
            "Pad", "Expand", "Tile", "Cast", "DepthToSpace", "SpaceToDepth", "Resize",
            "QuantizeLinear", "DequantizeLinear", "ScatterND", "ScatterElements"}
POOL_OPS = {"MaxPool", "AveragePool", "LpPool"}
GLOBAL_OPS = {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "ReduceMean", "ReduceSum",
              "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1", "ReduceLogSumExp",
              "ReduceSumSquare"}
PARAM_TYPES = {1, 2, 3, 10, 11, 16}  # FLOAT, UINT8, INT8, FLOAT16, DOUBLE, BFLOAT16
CONV_NODES = {"Conv", "ConvTranspose", "QLinearConv", "ConvInteger"}
#: a convolution's constant input that shows a batch-norm folded into it: the TorchScript
#: exporter names a constant it computed ``onnx::Conv_<n>`` (an eval-mode export folds the
#: batch-norm after a convolution into new weights and bias; a plain convolution keeps its
#: parameters' names, ``conv1.weight``), and tf2onnx keeps the fused batch-norm's name
FOLDED_BATCHNORM_NAME = re.compile(r"^onnx::Conv_\d+$|batch_?norm", re.IGNORECASE)


def _dim_sizes(tensor_type) -> tuple[int | str, ...]:
    """Each dimension's size, or where dynamic its symbolic name (``''`` when unnamed)."""
    return tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0
                 else d.dim_param for d in tensor_type.shape.dim)


def _dims(value_info) -> tuple[int, ...] | None:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = _dim_sizes(t)
    return dims if all(isinstance(d, int) for d in dims) else None


def _graph_inputs(path: str | Path) -> list[tuple[str, tuple[int | str, ...], str]]:
    """(name, dims, dtype) of each graph input of an ONNX file, initializers excluded: a
    dimension is its size, or where dynamic its symbolic name (``''`` when unnamed). An
    unreadable file is a one-line :class:`ModelError`."""
    import onnx

    from edgeprof.backends.onnx_export import load_onnx

    model = load_onnx(path, check=False, load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        out.append((vi.name, _dim_sizes(t),
                    onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name))
    return out


def declared_inputs(path: str | Path) -> list[DeclaredInput]:
    """What an ONNX file says its inputs take (a dynamic dimension None), checked against the
    user's shapes by :func:`edgeprof.core.models.check_declared_inputs`."""
    return [DeclaredInput(name, tuple(d if isinstance(d, int) else None for d in dims),
                          (dtype,)) for name, dims, dtype in _graph_inputs(path)]


def input_specs(path: str | Path) -> list[InputSpec]:
    """The graph inputs of an ONNX file (initializers excluded), batch dimension included.

    Raises :class:`InputSpecError` for a dynamic dimension, naming it.
    """
    specs = []
    for name, dims, dtype in _graph_inputs(path):
        for i, d in enumerate(dims):
            if not isinstance(d, int):
                what = f"'{d}'" if d else "unknown"
                raise InputSpecError(f"input '{name}' of '{path}' has a dynamic dimension "
                                     f"{i} ({what}); pass --input-shape (batch first, e.g. "
                                     "1x3x224x224; once per input)")
        specs.append(InputSpec(tuple(dims), dtype, name))
    if not specs:
        raise ModelError(f"ONNX model '{path}' has no graph inputs", spec=str(path))
    return specs


def _attr(node, name: str, default: Any = None) -> Any:
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def walk(model: Any) -> GraphWalk:
    """Walk ``model`` (a ModelHandle of format ``onnx``) with its input shapes."""
    import onnx

    from edgeprof.backends.onnx_export import load_onnx

    proto = load_onnx(model.path, check=False)
    graph = proto.graph
    inits = {i.name: i for i in graph.initializer}
    real_inputs = [vi for vi in graph.input if vi.name not in inits]
    if len(real_inputs) != len(model.input_specs):
        raise InputSpecError(f"'{model.path}' has {len(real_inputs)} inputs but "
                             f"{len(model.input_specs)} input shapes were given")
    for vi, spec in zip(real_inputs, model.input_specs):
        dims = vi.type.tensor_type.shape.dim
        del dims[:]
        for d in spec.shape:
            dims.add().dim_value = int(d)
    try:
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception as e:
        raise InputSpecError(f"the input shapes {[list(s.shape) for s in model.input_specs]} "
                             f"do not fit '{model.path}': {str(e).splitlines()[0][:200]}"
                             ) from None
    graph = proto.graph
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
        s = _dims(vi)
        if s is not None:
            shapes[vi.name] = s
    for name, t in inits.items():
        shapes[name] = tuple(int(d) for d in t.dims)
    const_outputs: set[str] = set(inits)  # values computable without the model inputs
    for n in graph.node:
        if n.op_type == "Constant":
            const_outputs.update(n.output)

    layers: list[GraphLayer] = []
    notes: list[str] = []
    counted: set[str] = set()
    alias: dict[str, str] = {}  # view output -> the tensor whose storage it shares
    birth: dict[str, int] = {vi.name: -1 for vi in real_inputs}
    last_use: dict[str, int] = {}
    unknown_shapes = 0
    nodes = list(graph.node)
    for idx, n in enumerate(nodes):
        ins = [i for i in n.input if i]
        # with fixed input shapes, Shape outputs are constants; so is all that only reads them
        if n.op_type in SHAPE_OPS or (ins and all(i in const_outputs for i in ins)):
            const_outputs.update(n.output)
            continue
        acts = [i for i in ins if i not in const_outputs]
        for a in acts:
            last_use[alias.get(a, a)] = idx
        if n.op_type in VIEW_OPS:
            if ins:
                alias.update(dict.fromkeys(n.output, alias.get(ins[0], ins[0])))
            continue
        for o in n.output:
            if o:
                birth[o] = idx
        out = n.output[0]
        out_shape = shapes.get(out)
        if out_shape is None:
            unknown_shapes += 1
            out_shape = ()
        out_el = numel(out_shape) if out_shape else 0
        in_el = sum(numel(shapes.get(a, ())) for a in acts if a in shapes)
        params = 0
        for i in ins:
            t = inits.get(i)
            if t is not None and i not in counted and t.data_type in PARAM_TYPES and len(t.dims):
                counted.add(i)
                params += numel(t.dims)
        macs, other = _work(n, shapes, out_el, in_el, ins)
        layers.append(GraphLayer(
            name=n.name or f"{n.op_type}_{idx}", op_type=n.op_type, output_shape=tuple(out_shape),
            output_elements=out_el, input_elements=in_el, parameter_count=params, macs=macs,
            other_ops=other))
    if unknown_shapes:
        notes.append(f"{unknown_shapes} node output shapes could not be inferred; their rows "
                     "count 0 elements")
    end = len(nodes)
    for o in graph.output:
        last_use[alias.get(o.name, o.name)] = end
    peak = peak_live((b, last_use.get(t, b), numel(shapes[t])) for t, b in birth.items()
                     if shapes.get(t))
    input_elements = sum(numel(s.shape) for s in model.input_specs)
    folded = sum(1 for n in nodes if n.op_type in CONV_NODES
                 and any(i in inits and FOLDED_BATCHNORM_NAME.search(i) for i in n.input[1:]))
    return GraphWalk(layers=layers, peak_live_elements=int(peak), input_elements=input_elements,
                     notes=notes, folded_batchnorms=folded or None)


def _work(n, shapes: dict, out_el: int, in_el: int, ins: list[str]) -> tuple[int, int]:
    op = n.op_type
    if op in ("Conv", "ConvInteger", "QLinearConv"):
        w = shapes.get(ins[3] if op == "QLinearConv" else ins[1], ())
        return out_el * numel(w[1:]), 0
    if op == "ConvTranspose":
        x, w = shapes.get(ins[0], ()), shapes.get(ins[1], ())
        return numel(x) * numel(w[1:]), 0
    if op == "Gemm":
        a = shapes.get(ins[0], ())
        k = a[0] if _attr(n, "transA", 0) else a[-1]
        return out_el * int(k), 0
    if op in ("MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul"):
        a = shapes.get(ins[0], ())
        k = a[-1] if a else 0
        return out_el * int(k), 0
    if op in POOL_OPS:
        k = _attr(n, "kernel_shape", []) or []
        return 0, out_el * max(1, numel(k))
    if op in GLOBAL_OPS:
        return 0, in_el
    if op in MOVE_OPS:
        return 0, 0
    return 0, out_el


# -- edgeprof's hooks (listed in plugins.toml): this module reads .onnx files ----------------
@hookimpl
def edgeprof_load_model(spec: str, input_shapes, input_dtypes) -> ModelHandle | None:
    return load_model_file(spec, (".onnx",), "onnx", input_specs, input_shapes, input_dtypes,
                           read_declared=declared_inputs)


@hookimpl
def edgeprof_read_graph(model) -> GraphWalk | None:
    return walk(model) if model.format == "onnx" else None

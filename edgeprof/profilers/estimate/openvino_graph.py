"""Input specs and the analytic graph walk of an OpenVINO IR (``.xml`` + ``.bin``).

The walk reshapes the ``ov.Model`` to the handle's input shapes and visits its ops in
topological order: MACs for Convolution, GroupConvolution, ConvolutionBackpropData, MatMul
(batched and activation x activation); ``other_ops`` = output elements for the rest, output x
kernel area for pooling. Weights are ``Constant`` ops of a float or integer-weight type with
at least one dimension, counted once at the first op that reads them (through a
decompression chain of Convert / Subtract / Multiply / Reshape, as NNCF writes it).
Rows are named by the op's friendly name (for IR converted from a TorchScript ONNX export:
``/conv1/Conv``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprof.core.errors import InputSpecError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.models import InputSpec, ModelHandle, load_model_file
from edgeprof.core.results import GraphLayer, GraphWalk
from edgeprof.profilers.estimate.analytic import numel, peak_live

SKIP = {"Parameter", "Result", "Constant", "ShapeOf", "Reshape", "Squeeze", "Unsqueeze",
        "Convert"}
MOVE = {"Transpose", "Concat", "Split", "VariadicSplit", "StridedSlice", "Slice", "Gather",
        "Pad", "Broadcast", "Tile", "FakeQuantize"}
POOL = {"MaxPool", "AvgPool"}
WEIGHT_TYPES = {"f32", "f16", "bf16", "i8", "u8", "i4", "u4", "nf4", "f64"}
DECOMPRESS = {"Convert", "Subtract", "Multiply", "Reshape"}


def input_specs(path: str | Path) -> list[InputSpec]:
    """The inputs of an IR, batch dimension included; dynamic dims raise InputSpecError."""
    from edgeprof.backends.openvino import read_ov_model

    model = read_ov_model(path)
    specs = []
    for i, port in enumerate(model.inputs):
        ps = port.get_partial_shape()
        name = port.get_any_name() if port.get_names() else f"input_{i}"
        if not ps.is_static:
            raise InputSpecError(f"input '{name}' of '{path}' has a dynamic shape {ps}; pass "
                                 "--input-shape (batch first, e.g. 1x3x224x224; once per input)")
        dtype = port.get_element_type().to_dtype().name
        specs.append(InputSpec(tuple(int(d) for d in ps.to_shape()), dtype, name))
    return specs


def _weight_source(output) -> Any | None:
    """The Constant behind a (possibly decompressed) weight input, or None."""
    node = output.get_node()
    for _ in range(6):
        if node.get_type_name() == "Constant":
            return node
        if node.get_type_name() not in DECOMPRESS:
            return None
        node = node.input_value(0).get_node()
    return None


def walk(model: Any) -> GraphWalk:
    """Walk ``model`` (a ModelHandle of format ``openvino``) with its input shapes."""
    from edgeprof.backends.openvino import read_ov_model

    ov_model = read_ov_model(model.path)
    if len(ov_model.inputs) != len(model.input_specs):
        raise InputSpecError(f"'{model.path}' has {len(ov_model.inputs)} inputs but "
                             f"{len(model.input_specs)} input shapes were given")
    try:
        ov_model.reshape({p: list(s.shape) for p, s in zip(ov_model.inputs, model.input_specs)})
    except Exception as e:
        raise InputSpecError(f"the input shapes do not fit '{model.path}': "
                             f"{str(e).splitlines()[0][:200]}") from None
    layers: list[GraphLayer] = []
    counted: set[str] = set()
    ops = list(ov_model.get_ordered_ops())
    birth: dict[str, tuple[int, int]] = {}  # op name -> (index, elements)
    last_use: dict[str, int] = {}
    for i, op in enumerate(ops):
        kind = op.get_type_name()
        name = op.get_friendly_name()
        acts, weights = [], []
        for inp in op.inputs():
            src = inp.get_source_output()
            c = _weight_source(src)  # (a Constant is its own source)
            if c is None:
                acts.append(src)
                last_use[src.get_node().get_friendly_name()] = i
            else:
                weights.append(c)
        if kind == "Parameter":
            birth[name] = (-1, numel(op.get_output_shape(0)))
            continue
        if kind in SKIP or op.get_output_size() == 0:
            continue
        out_shape = tuple(int(d) for d in op.get_output_partial_shape(0).get_min_shape())
        out_el = numel(out_shape)
        birth[name] = (i, out_el)
        in_el = sum(numel(a.get_partial_shape().get_min_shape()) for a in acts)
        params = 0
        for c in weights:
            size = numel(c.get_output_shape(0))  # (a scalar's 1)
            if c.get_friendly_name() not in counted and size > 1 \
                    and c.get_element_type().get_type_name() in WEIGHT_TYPES:
                counted.add(c.get_friendly_name())
                params += size
        macs, other = 0, out_el
        if kind in ("Convolution", "GroupConvolution", "ConvolutionBackpropData",
                    "GroupConvolutionBackpropData", "MatMul"):
            other = 0
            w = [int(d) for d in op.input_value(1).get_partial_shape().get_min_shape()]
            x = [int(d) for d in op.input_value(0).get_partial_shape().get_min_shape()]
            if kind == "MatMul":
                ta = op.get_attributes().get("transpose_a", False)
                k = (x[-2] if ta and len(x) >= 2 else x[-1]) if x else 0
                macs = out_el * k
            else:  # weights [Cout, Cin, k...] ([Cin, Cout, k...] backprop), a group dim first
                per_element = numel(w[2:] if kind.startswith("Group") else w[1:])
                macs = (numel(x) if kind.endswith("BackpropData") else out_el) * per_element
        elif kind in POOL:
            other = out_el * numel(op.get_attributes().get("kernel", [1]))
        elif kind in MOVE:
            other = 0
        layers.append(GraphLayer(name=name, op_type=kind, output_shape=out_shape,
                                 output_elements=out_el, input_elements=in_el,
                                 parameter_count=params, macs=macs, other_ops=other))
    end = len(ops)
    for r in ov_model.get_results():
        last_use[r.input_value(0).get_node().get_friendly_name()] = end
    peak = peak_live((b, last_use.get(name, b), size) for name, (b, size) in birth.items())
    return GraphWalk(layers=layers, peak_live_elements=int(peak),
                     input_elements=sum(numel(s.shape) for s in model.input_specs),
                     notes=["views (Reshape, Squeeze, Unsqueeze) alias their input and are "
                            "not counted in peak memory"])


# -- edgeprof's hooks (listed in plugins.toml): this module reads OpenVINO IR -----------------
@hookimpl
def edgeprof_load_model(spec: str, input_shapes, input_dtypes) -> ModelHandle | None:
    return load_model_file(spec, (".xml",), "openvino", input_specs, input_shapes, input_dtypes)


@hookimpl
def edgeprof_read_graph(model) -> GraphWalk | None:
    return walk(model) if model.format == "openvino" else None

"""The analytic graph walk of a ``.tflite`` model, read from its flatbuffer.

One :class:`GraphLayer` per operator of the primary subgraph, in execution order:

* MACs for CONV_2D (``out x KH x KW x Cin/groups``), DEPTHWISE_CONV_2D (``out x KH x KW``),
  FULLY_CONNECTED (``out x K``), BATCH_MATMUL (``out x K``), TRANSPOSE_CONV
  (``input x KH x KW x Cout``) and CONV_3D;
* constant tensors (weights, biases, fp16/int8 weights feeding a DEQUANTIZE) are parameters,
  counted once per stored buffer, at the first operator that reads them (converters
  deduplicate identical constants: torch's ``nn.TransformerEncoder`` deep-copies one layer,
  so until trained its layers' weights are identical and stored once); integer constants
  that only describe shapes, axes or permutations are not parameters. BatchNorm folded into
  a convolution leaves a bias of C where torch had 2C (gamma and beta);
* ``other_ops`` follows the torch walker: one operation per element of an op's largest
  activation tensor (elementwise, activations, norms, pooling, softmax, reductions,
  (de)quantize), nothing for pure data movement (reshape, transpose, concatenation,
  gather, pad ...); a MAC op's bias addition and fused activation (TFLite fuses ReLU into
  the conv) add one per output element each;
* the peak of live activation elements comes from tensor lifetimes (model inputs included;
  constants excluded).

The flatbuffer is read with the schema LiteRT ships (``ai_edge_litert.schema_py_generated``);
the file is first checked by the LiteRT interpreter's flatbuffer verifier, so a truncated or
foreign file is a one-line :class:`ModelError`, not a traceback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from edgeprof.core.errors import InputSpecError, ModelError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.models import InputSpec, ModelHandle, specs_from_shapes, load_model_file
from edgeprof.core.results import GraphLayer, GraphWalk
from edgeprof.profilers.estimate.analytic import peak_live

#: numpy dtype names of TFLite tensor types
_TENSOR_DTYPES = {
    "FLOAT32": "float32", "FLOAT16": "float16", "INT32": "int32", "UINT8": "uint8",
    "INT64": "int64", "BOOL": "bool", "INT16": "int16", "INT8": "int8", "FLOAT64": "float64",
    "BFLOAT16": "bfloat16", "UINT16": "uint16", "UINT32": "uint32",
}

MAC_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL", "TRANSPOSE_CONV",
           "CONV_3D"}
#: ops that move or re-describe data without arithmetic
DATA_MOVEMENT_OPS = {
    "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "CONCATENATION", "GATHER", "GATHER_ND",
    "PAD", "PADV2", "MIRROR_PAD", "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "PACK",
    "UNPACK", "TILE", "BROADCAST_TO", "SHAPE", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE",
    "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "SELECT", "SELECT_V2", "EMBEDDING_LOOKUP",
    "RESIZE_NEAREST_NEIGHBOR", "CAST", "ZEROS_LIKE", "FILL", "REVERSE_V2",
}


# ------------------------------------------------------------------------------- reading
def _load(path: str | Path):
    """Verify (through the LiteRT interpreter) and unpack a .tflite flatbuffer."""
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"model file '{p}' does not exist", spec=str(p))
    data = p.read_bytes()
    _verify(data, p)
    from ai_edge_litert import schema_py_generated as schema

    try:
        model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    except Exception as e:  # a buffer the verifier accepted but the reader cannot unpack
        raise ModelError(f"'{p}' is not a readable .tflite model ({type(e).__name__}); "
                         "re-export it", spec=str(p)) from None
    if not model.subgraphs:
        raise ModelError(f"'{p}' has no subgraph; re-export the model", spec=str(p))
    return model, schema


def _verify(data: bytes, path: Path) -> None:
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelError(f"'{path}' is not a .tflite model (no TFL3 identifier; the file is "
                         "truncated or of another format); re-export it", spec=str(path))
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    try:  # LiteRT verifies the flatbuffer before it builds anything
        Interpreter(model_content=data,
                    experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    except ValueError as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else "invalid model"
        raise ModelError(f"'{path}' cannot be loaded by LiteRT: {msg}; the file is truncated "
                         "or corrupted, re-export it", spec=str(path)) from None


def _enum_names(enum_cls) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


def _shape(t) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape) if t.shape is not None else ()


def _n(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 1)
    return n


def _name(t) -> str:
    n = t.name
    return n.decode("utf-8", "replace") if isinstance(n, (bytes, bytearray)) else str(n or "")


def input_specs(path: str | Path) -> list[InputSpec]:
    """The input specs (shape with batch first, dtype, name) of a ``.tflite`` model.

    A quantized input (int8/uint8 with a scale) is reported as ``float32``: edgeprof feeds
    float data and the tflite backend quantizes it with the model's own scale in ``prepare``.
    """
    model, schema = _load(path)
    types = _enum_names(schema.TensorType)
    sg = model.subgraphs[0]
    specs = []
    for i in sg.inputs:
        t = sg.tensors[int(i)]
        shape = _shape(t)
        if t.shapeSignature is not None and any(int(d) < 0 for d in t.shapeSignature):
            shape = tuple(max(int(d), 1) for d in shape)
        dtype = _TENSOR_DTYPES.get(types.get(t.type, ""), "float32")
        q = t.quantization
        if dtype in ("int8", "uint8", "int16") and q is not None and q.scale is not None \
                and len(q.scale) and float(q.scale[0]) > 0:
            dtype = "float32"  # a quantized input: edgeprof feeds floats, the backend quantizes
        specs.append(InputSpec(shape=shape, dtype=dtype, name=_name(t)))
    return specs


# ---------------------------------------------------------------------------- the walk
_MODULE_PART = re.compile(r"(?:[\w.]+\.)?[A-Za-z_]\w*?_([\w.]+)$")


def _module_path(tensor_name: str) -> str | None:
    """The torch module path litert-torch names a tensor after
    (``pkg.SmallCNN/torch.nn.modules.conv.Conv2d_conv1;``) -> ``conv1``; nested modules give
    dotted paths (``stem.0``) as in the torch walker. None for another converter's name."""
    first = next((s for s in tensor_name.split(";") if s), tensor_name)
    matches = [_MODULE_PART.match(p) for p in first.split("/")[1:]]
    return ".".join(m.group(1) for m in matches) if matches and all(matches) else None


def layer_name(tensor_name: str) -> str:
    """A readable layer name from a tensor name: its torch module path
    (:func:`_module_path`); other converters' names are kept (first location only).
    """
    path = _module_path(tensor_name)
    if path is not None:
        return path
    first = next((s for s in tensor_name.split(";") if s), tensor_name)
    parts = first.split("/")
    if "<locals>" in first or "<lambda>" in first:
        return ""  # a tracing wrapper's name says nothing; the caller uses the op type
    if len(parts) == 1 and re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", first):
        return first.rsplit(".", 1)[1]  # a qualified class name: keep the class
    return first


def _mac_count(op_type: str, op, sg, out_elems: int, opts) -> int:
    ins = [int(i) for i in op.inputs]

    def shp(k):
        return _shape(sg.tensors[ins[k]]) if k < len(ins) and ins[k] >= 0 else ()

    if op_type == "CONV_2D":  # filter [O, KH, KW, I/groups]
        f = shp(1)
        return out_elems * f[1] * f[2] * f[3] if len(f) == 4 else 0
    if op_type == "DEPTHWISE_CONV_2D":  # filter [1, KH, KW, I*multiplier]
        f = shp(1)
        return out_elems * f[1] * f[2] if len(f) == 4 else 0
    if op_type == "CONV_3D":  # filter [KD, KH, KW, I, O]
        f = shp(1)
        return out_elems * f[0] * f[1] * f[2] * f[3] if len(f) == 5 else 0
    if op_type == "FULLY_CONNECTED":  # weights [O, K]
        f = shp(1)
        return out_elems * f[-1] if f else 0
    if op_type == "BATCH_MATMUL":
        a = shp(0)
        if len(a) < 2:
            return 0
        adj_x = bool(getattr(opts, "adjX", False))
        return out_elems * (a[-2] if adj_x else a[-1])
    if op_type == "TRANSPOSE_CONV":  # inputs: output_shape, filter [O, KH, KW, I], input
        f, x = shp(1), shp(2)
        return _n(x) * f[0] * f[1] * f[2] if len(f) == 4 and x else 0
    return 0


def _other_ops(op_type: str, largest: int, out_elems: int, has_bias: bool,
               fused_activation: bool) -> int:
    """Non-MAC operations, by the torch walker's convention: one per element of the op's
    largest activation tensor (input or output), nothing for pure data movement; for MAC
    ops, a bias addition and a fused activation each add one per output element."""
    if op_type in MAC_OPS:
        return out_elems * (int(has_bias) + int(fused_activation))
    if op_type in DATA_MOVEMENT_OPS:
        return 0
    return largest + (out_elems if fused_activation else 0)


def _is_constant(t, model) -> bool:
    if t.buffer <= 0 or t.buffer >= len(model.buffers):
        return False
    b = model.buffers[t.buffer]
    return (b.data is not None and len(b.data) > 0) or int(getattr(b, "size", 0) or 0) > 0


def _dedupe_names(layers: list[GraphLayer]) -> None:
    """Unique names: the MAC op keeps the module's name (``conv1``), the ops around it that
    carry the same name (a layout RESHAPE, a weight DEQUANTIZE) get ``conv1#1``, ``#2`` ..."""
    groups: dict[str, list[GraphLayer]] = {}
    for layer in layers:
        groups.setdefault(layer.name, []).append(layer)
    for name, group in groups.items():
        owner = next((l for l in group if l.macs), group[0])
        for k, layer in enumerate((l for l in group if l is not owner), 1):
            layer.name = f"{name}#{k}"


CONV_TYPES = {"CONV_2D", "CONV_3D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"}
FOLDED_BATCHNORM_NAME = re.compile(r"batch_?norm", re.IGNORECASE)


def walk(model: Any) -> GraphWalk:
    """Walk a ``.tflite`` model (a ModelHandle with ``path``, or a path) op by op."""
    path = getattr(model, "path", None) or model
    if path is None:
        raise ModelError("the tflite graph walk needs a .tflite file")
    fb, schema = _load(path)
    ops_names = _enum_names(schema.BuiltinOperator)
    sg = fb.subgraphs[0]
    notes: list[str] = []
    if len(fb.subgraphs) > 1:
        notes.append(f"{len(fb.subgraphs) - 1} further subgraph(s) (control flow or extra "
                     "signatures) are not walked; rows cover the primary subgraph")

    n_tensors = len(sg.tensors)
    constant = [_is_constant(sg.tensors[i], fb) for i in range(n_tensors)]
    model_inputs = [int(i) for i in sg.inputs]
    model_outputs = {int(i) for i in sg.outputs}
    operators = list(sg.operators or [])

    # the tensors MAC ops read (to tell weights from shape/axis constants)
    mac_read: set[int] = set()
    op_types: list[str] = []
    for op in operators:
        code = fb.operatorCodes[op.opcodeIndex]
        builtin = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
        op_type = ops_names.get(builtin, f"OP_{builtin}")
        if op_type == "CUSTOM" and code.customCode:
            cc = code.customCode
            op_type = "CUSTOM:" + (cc.decode() if isinstance(cc, (bytes, bytearray)) else str(cc))
        op_types.append(op_type)
        if op_type in MAC_OPS:
            mac_read.update(int(i) for i in op.inputs)

    types = _enum_names(schema.TensorType)

    def is_parameter(idx: int) -> bool:
        # integer constants are parameters only where a MAC op reads them (int32 biases)
        return types.get(sg.tensors[idx].type) not in ("INT32", "INT64") or idx in mac_read

    # tensors computed from constants only (e.g. fp16 weights -> DEQUANTIZE) are weights too
    derived_constant = list(constant)
    for op in operators:
        ins = [int(i) for i in op.inputs if int(i) >= 0]
        if ins and all(derived_constant[i] for i in ins):
            for o in op.outputs:
                derived_constant[int(o)] = True

    # lifetimes of activation tensors (index -> first and last op step)
    start: dict[int, int] = {i: 0 for i in model_inputs}
    end: dict[int, int] = {i: 0 for i in model_inputs}
    for step, op in enumerate(operators):
        for i in op.inputs:
            i = int(i)
            if i >= 0 and not derived_constant[i]:
                end[i] = step
                start.setdefault(i, step)
        for o in op.outputs:
            o = int(o)
            if not derived_constant[o]:
                start.setdefault(o, step)
                end[o] = max(end.get(o, step), step)
    last = max(len(operators) - 1, 0)
    for o in model_outputs:
        if o in start:
            end[o] = last
    sizes = [_n(_shape(t)) for t in sg.tensors]
    peak = peak_live((start[i], end[i], sizes[i]) for i in start)

    counted: set[int] = set()
    layers: list[GraphLayer] = []
    for op, op_type in zip(operators, op_types):
        ins = [int(i) for i in op.inputs if int(i) >= 0]
        outs = [int(o) for o in op.outputs if int(o) >= 0]
        acts = [i for i in ins if not derived_constant[i]]
        mac = op_type in MAC_OPS
        opts = op.builtinOptions
        out_shape = _shape(sg.tensors[outs[0]]) if outs else ()
        out_elems = sum(sizes[o] for o in outs)
        act_in = sum(sizes[i] for i in acts)
        params = 0
        for i in ins:
            buf = sg.tensors[i].buffer  # count stored data once (shared buffers too)
            if constant[i] and buf not in counted and is_parameter(i):
                counted.add(buf)
                params += sizes[i]
        if all(derived_constant[o] for o in outs) and outs:
            macs, other = 0, 0  # weight unpacking (e.g. DEQUANTIZE of fp16 weights): load-time
        else:
            macs = _mac_count(op_type, op, sg, out_elems, opts)
            largest = max([*(sizes[i] for i in acts), *(sizes[o] for o in outs), 0])
            bias_at = 3 if op_type == "TRANSPOSE_CONV" else 2
            raw_ins = [int(i) for i in op.inputs]
            has_bias = mac and len(raw_ins) > bias_at and raw_ins[bias_at] >= 0
            fused = int(getattr(opts, "fusedActivationFunction", 0) or 0) != 0
            other = _other_ops(op_type, largest, out_elems, has_bias, fused)
        # name: the weight tensor for MAC ops (it carries the module), else the output;
        # the first candidate that reads as a torch module path wins
        cands = (ins[1:2] if mac else []) + outs[:1] + (ins[2:3] if mac else [])
        raws = [_name(sg.tensors[i]) for i in cands]
        name = next(filter(None, map(_module_path, raws)), None)
        if name is None:
            name = layer_name(raws[1] if mac and len(raws) > 1 else (raws[0] if raws else op_type))
        name = name or op_type.lower()
        layers.append(GraphLayer(name=name, op_type=op_type, output_shape=out_shape,
                                 output_elements=out_elems, input_elements=act_in,
                                 parameter_count=params, macs=int(macs), other_ops=int(other)))
    _dedupe_names(layers)
    # a batch-norm folded into a convolution leaves its name in the fused weights' name
    # (litert-torch: '...BatchNorm2d_bn1;;...Conv2d_conv1;', TF: '.../FusedBatchNormV3;...')
    folded = sum(1 for op, op_type in zip(operators, op_types) if op_type in CONV_TYPES
                 and any(int(i) >= 0 and constant[int(i)] and
                         FOLDED_BATCHNORM_NAME.search(_name(sg.tensors[int(i)]))
                         for i in op.inputs))
    return GraphWalk(layers=layers, peak_live_elements=int(peak),
                     input_elements=sum(sizes[i] for i in model_inputs),
                     notes=notes, folded_batchnorms=folded or None)


__all__ = ["input_specs", "layer_name", "walk"]


def walk_converted(model: Any) -> GraphWalk:
    """Keras / SavedModel: walk the fp32 ``.tflite`` that TensorFlow's TFLiteConverter makes
    of it (cached by content), so the estimate has the same columns as for any model."""
    from edgeprof.backends.tflite_convert import convert

    conversion = convert(model, "fp32")
    result = walk(conversion.path)
    result.notes.append(f"estimated from the fp32 .tflite that TFLiteConverter made of "
                        f"{model.spec}")
    return result


def keras_input_specs(path: Any) -> list:
    """Input specs of a Keras model file (batch dimension 1 where it is unset)."""
    from edgeprof.backends.tflite_convert import load_keras

    model = load_keras(path)
    specs = []
    for t in model.inputs:
        dims = list(t.shape)
        if any(d is None for d in dims[1:]):
            raise InputSpecError(f"Keras model '{path}' has dynamic input dimensions {dims}; "
                                 "give --input-shape (batch first, e.g. 1x28x28x1)")
        specs.append(InputSpec((1 if dims[0] is None else int(dims[0]), *map(int, dims[1:])),
                               str(t.dtype.name if hasattr(t.dtype, "name") else t.dtype),
                               getattr(t, "name", None)))
    return specs


# -- edgeprof's hooks (listed in plugins.toml): .tflite, Keras files and SavedModel folders --
@hookimpl
def edgeprof_load_model(spec: str, input_shapes, input_dtypes) -> ModelHandle | None:
    handle = (load_model_file(spec, (".tflite",), "tflite", input_specs, input_shapes,
                              input_dtypes)
              or load_model_file(spec, (".keras", ".h5"), "keras", keras_input_specs,
                                 input_shapes, input_dtypes))
    path = Path(spec)
    if handle is None and (path / "saved_model.pb").is_file():  # a SavedModel folder
        if not input_shapes:
            raise InputSpecError(f"give --input-shape for saved_model model '{spec}'")
        handle = ModelHandle(spec=spec, name=path.stem, format="saved_model", path=path,
                             input_specs=specs_from_shapes(input_shapes, input_dtypes, spec))
    return handle


@hookimpl
def edgeprof_read_graph(model) -> GraphWalk | None:
    if model.format == "tflite":
        return walk(model)
    if model.format in ("keras", "saved_model"):
        return walk_converted(model)
    return None

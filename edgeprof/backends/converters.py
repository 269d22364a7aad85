"""The built-in formats and converters of the conversion graph (``edgeprof.core.formats``).

Registered through the same hooks a plugin uses (``edgeprof_register_formats``,
``edgeprof_register_converters``). Converters and why they were chosen
(``benchmarks/conversion_routes.py`` measured success and output agreement on ResNet-,
MobileNet-, EfficientNet- and ViT-class graphs; README "Conversion routes"):

========================  ===========================  ==================================
edge                      converter                    notes
========================  ===========================  ==================================
torch -> onnx             torch.onnx (TorchScript,     node names keep module paths
                          dynamo as fallback)
torch -> tflite           litert-torch                 fp32, fp16, int8 dynamic / static
keras, saved_model ->     TensorFlow TFLiteConverter   fp32, fp16, int8 dynamic / static
tflite
onnx -> openvino          ov.convert_model
tflite -> openvino        ov.convert_model (reads .tflite)
onnx -> torch             onnx2torch, then torch.export  the torch artifact is a .pt2
tflite -> onnx            tf2onnx (from_tflite)
========================  ===========================  ==================================

Every function here imports its converter inside it.
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
import warnings
from pathlib import Path
from typing import Any

from edgeprof.core.formats import Converter, Format
from edgeprof.core.hookspecs import registers

TFLITE_PRECISIONS = ("fp32", "fp16", "int8", "int8_static", "int8_dynamic")

FORMATS = [
    Format("torch", "torch modules", (".pt2",),
           opener="edgeprof.backends.converters:open_torch_program"),
    Format("onnx", ".onnx files", (".onnx",)),
    Format("tflite", ".tflite files", (".tflite",)),
    Format("openvino", "OpenVINO IR (.xml)", (".xml",), companions=(".bin",)),
    Format("keras", "Keras models", (".keras", ".h5")),
    Format("saved_model", "TensorFlow SavedModels"),
]

CONVERTERS = [
    Converter("torch", "onnx", "torch.onnx", "torch",
              "edgeprof.backends.onnx_export:torch_to_onnx", cost=1.0,
              modules=("torch", "onnx"), install_hint="pip install 'edgeprof[onnx]'"),
    Converter("torch", "tflite", "litert-torch", "litert-torch",
              "edgeprof.backends.tflite_convert:torch_to_tflite", TFLITE_PRECISIONS, cost=2.0,
              modules=("litert_torch",), install_hint="pip install 'edgeprof[tflite]'"),
    Converter("keras", "tflite", "TFLiteConverter", "tensorflow",
              "edgeprof.backends.tflite_convert:tf_to_tflite", TFLITE_PRECISIONS, cost=1.0,
              install_hint="pip install 'edgeprof[tensorflow]'"),
    Converter("saved_model", "tflite", "TFLiteConverter", "tensorflow",
              "edgeprof.backends.tflite_convert:tf_to_tflite", TFLITE_PRECISIONS, cost=1.0,
              install_hint="pip install 'edgeprof[tensorflow]'"),
    Converter("onnx", "openvino", "ov.convert_model", "openvino",
              "edgeprof.backends.openvino:to_ir", cost=1.0,
              install_hint="pip install 'edgeprof[openvino]'"),
    Converter("tflite", "openvino", "ov.convert_model", "openvino",
              "edgeprof.backends.openvino:to_ir", cost=1.0,
              install_hint="pip install 'edgeprof[openvino]'"),
    Converter("onnx", "torch", "onnx2torch", "onnx2torch",
              "edgeprof.backends.converters:onnx_to_torch", cost=2.0,
              modules=("onnx2torch", "torch"), install_hint="pip install 'edgeprof[convert]'"),
    Converter("tflite", "onnx", "tf2onnx", "tf2onnx",
              "edgeprof.backends.converters:tflite_to_onnx", cost=2.0,
              modules=("tf2onnx", "tensorflow"), install_hint="pip install 'edgeprof[convert]'"),
]


edgeprof_register_formats = registers(FORMATS)
edgeprof_register_converters = registers(CONVERTERS)


# --------------------------------------------------------------------------- torch format
def open_torch_program(path: Path):
    """The module of a ``torch.export`` program saved as ``.pt2`` (no pickle)."""
    import torch

    path = Path(path)
    if path.suffix == ".onnx":  # onnx2torch's module, rebuilt (torch.export could not take it)
        import onnx

        onnx2torch, _ = _import_onnx2torch()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return specialize_constants(onnx2torch.convert(onnx.load(str(path)))).eval()
    module = torch.export.load(str(path)).module()
    # an exported program's module refuses .eval()/.train() (it has no training mode to
    # switch: it was exported in eval mode); the callers (and converters) ask for eval mode
    module.eval = lambda: module
    module.train = lambda mode=True: module
    return module


def save_torch_program(module: Any, handle: Any, out: Path) -> None:
    import torch

    args = tuple(torch.from_numpy(a) for a in handle.make_inputs(0))
    with torch.no_grad():
        program = torch.export.export(module.eval(), args)
    torch.export.save(program, str(out))


# ------------------------------------------------------------------------- onnx -> torch
def _import_onnx2torch():
    """onnx2torch imports torchvision (for NonMaxSuppression and RoiAlign only). A torchvision
    built for another torch (a CUDA wheel beside the CPU torch) fails to import; then those
    two ops are left out instead of the whole converter."""
    try:
        import onnx2torch
        return onnx2torch, None
    except (ImportError, RuntimeError, OSError) as e:
        reason = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    for name in [m for m in sys.modules if m.split(".")[0] in ("onnx2torch", "torchvision")]:
        del sys.modules[name]

    def unavailable(*args: Any, **kwargs: Any):
        raise RuntimeError(f"torchvision cannot be imported here ({reason})")

    tv, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    ops.nms = ops.roi_align = ops.box_convert = unavailable
    tv.ops = ops
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = tv, ops
    try:
        import onnx2torch
    finally:
        del sys.modules["torchvision"], sys.modules["torchvision.ops"]
    return onnx2torch, (f"torchvision could not be imported ({reason}); onnx2torch ran "
                        "without its NonMaxSuppression and RoiAlign converters")


def initializers_for_onnx2torch(model):
    """onnx2torch reads weights from initializers only; torch's exporter shares weights
    through Identity nodes and may emit Constant nodes: make both initializers."""
    import onnx

    keep, added = [], []
    by_name = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in by_name:
            value = by_name[node.input[0]]
        elif node.op_type == "Constant" and len(node.attribute) == 1 \
                and node.attribute[0].name == "value":
            value = node.attribute[0].t
        else:
            keep.append(node)
            continue
        t = onnx.TensorProto()
        t.CopyFrom(value)
        t.name = node.output[0]
        added.append(t)
    if added:
        model.graph.initializer.extend(added)
        del model.graph.node[:]
        model.graph.node.extend(keep)
    return model


def fold_constants(path: Path, out: Path) -> Path:
    """ONNX Runtime's basic graph optimizations (constant folding, shape computations of
    fixed-shape inputs included), saved to ``out``: what is left is the model's arithmetic."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 3
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return out


def specialize_constants(gm: Any) -> Any:
    """onnx2torch keeps Reshape shapes and opset-13 Squeeze/Unsqueeze axes as tensors read
    at run time, which ``torch.export`` (and so litert-torch) cannot trace; where they are
    constants (initializers), replace those modules by ones holding the values."""
    import torch

    class StaticReshape(torch.nn.Module):
        def __init__(self, shape):
            super().__init__()
            self.shape = shape

        def forward(self, x):
            return x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(self.shape)])

    class StaticAxes(torch.nn.Module):
        def __init__(self, axes, squeeze):
            super().__init__()
            self.axes, self.squeeze = axes, squeeze

        def forward(self, x):
            if self.squeeze:
                return torch.squeeze(x, dim=tuple(self.axes)) if self.axes else torch.squeeze(x)
            for a in sorted(self.axes):
                x = torch.unsqueeze(x, a)
            return x

    kinds = {"OnnxReshape": "reshape", "OnnxSqueezeDynamicAxes": "squeeze",
             "OnnxUnsqueezeDynamicAxes": "unsqueeze"}
    changed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module":
            continue
        kind = kinds.get(type(gm.get_submodule(node.target)).__name__)
        if kind is None or len(node.args) != 2 or getattr(node.args[1], "op", None) != "get_attr":
            continue
        value = [int(v) for v in _attr(gm, node.args[1].target).reshape(-1).tolist()]
        new = StaticReshape(value) if kind == "reshape" else StaticAxes(value, kind == "squeeze")
        name = f"edgeprof_static_{changed}"
        gm.add_submodule(name, new)
        node.target, node.args = name, (node.args[0],)
        changed += 1
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return gm


def _attr(gm: Any, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def onnx_to_torch(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """onnx2torch on the constant-folded model, constants specialized, then ``torch.export``
    of the module (saved as ``model.pt2``; where export fails, the ONNX model is kept and the
    module rebuilt from it when loaded)."""
    import tempfile

    import onnx

    from edgeprof.backends.onnx_export import load_onnx

    onnx2torch, note = _import_onnx2torch()
    load_onnx(source.path, check=False)  # one-line ModelError for a broken file
    with tempfile.TemporaryDirectory(prefix="edgeprof-onnx2torch-") as tmp:
        model = initializers_for_onnx2torch(
            onnx.load(str(fold_constants(source.path, Path(tmp) / "folded.onnx"))))
    notes = [note] if note else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = specialize_constants(onnx2torch.convert(model))
        try:
            save_torch_program(module, source, out / "model.pt2")
            open_torch_program(out / "model.pt2")  # it must load back, or it is not kept
            return {"entry": "model.pt2", "notes": notes}
        except Exception as e:  # noqa: BLE001 - e.g. data-dependent shapes (opset-13 Squeeze)
            (out / "model.pt2").unlink(missing_ok=True)
            why = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:120]}"
    onnx.save(model, str(out / "model.onnx"))
    notes.append(f"torch.export could not capture onnx2torch's module ({why}); the artifact keeps the ONNX model that onnx2torch rebuilds the "
                 "module from when it is loaded")
    return {"entry": "model.onnx", "notes": notes}


# ------------------------------------------------------------------------ tflite -> onnx
def tflite_to_onnx(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """tf2onnx's ``from_tflite`` (opset 17)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tf2onnx

        import logging

        logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)
        model, _ = tf2onnx.convert.from_tflite(str(source.path), opset=17)
    # tf2onnx keeps an op it cannot convert as a "TFL_<OP>" node and writes an invalid model
    left = sorted({n.op_type[4:] for n in model.graph.node if n.op_type.startswith("TFL_")})
    if left:
        from edgeprof.core.errors import UnsupportedError

        raise UnsupportedError(f"tf2onnx {tf2onnx.__version__} cannot convert the TFLite "
                               f"operator(s) {', '.join(left)} of '{source.spec}' to ONNX")
    import onnx

    onnx.save(model, str(out / "model.onnx"))
    return {"entry": "model.onnx"}

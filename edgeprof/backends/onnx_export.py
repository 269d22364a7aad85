"""torch -> ONNX conversion (cached), ONNX file loading and feeds.

Shared by the ONNX Runtime and OpenVINO backends (and usable by any backend that starts
from ONNX, e.g. TensorRT).

Exporter choice: the TorchScript exporter (``torch.onnx.export(..., dynamo=False)``) is the
default. On torch 2.13 both exporters convert all five built-in models with fixed shapes
(the int64-token transformer included) and agree with eager to ~1e-7, but the TorchScript
exporter is ~10x faster (0.3 s vs 3 s per small model) and names nodes after the modules
that produced them (``/encoder/layers.0/self_attn/MatMul``), which lets per-operator
timings be joined to the estimate's per-module rows. ``exporter="dynamo"`` (the
``torch.export``-based exporter) is available through ``export_onnx(..., exporter="dynamo")``
and is tried automatically when the TorchScript exporter fails.

Every conversion is cached with :func:`edgeprof.core.cache.cached_artifact`, keyed by the
model's content fingerprint, the opset, the exporter and the torch/onnx versions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import ModelError, UnsupportedError

#: the opset the exports target (ORT 1.20+, OpenVINO 2025+ and NNCF all read it)
DEFAULT_OPSET = 17
EXPORTERS = ("torchscript", "dynamo")


@dataclass
class OnnxModel:
    """An ONNX model on disk, where it came from, and a key for caches built on top of it."""

    path: Path
    converted: bool  # True when edgeprof exported it from torch
    cache_hit: bool
    key: dict[str, Any] = field(default_factory=dict)
    exporter: str | None = None
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- loading
def load_onnx(path: str | Path, *, check: bool = True, load_external_data: bool = True):
    """``onnx.load`` with a one-line :class:`ModelError` for unreadable or invalid files."""
    import onnx

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"ONNX model '{path}' does not exist", spec=str(path))
    try:
        model = onnx.load(str(path), load_external_data=load_external_data)
    except Exception as e:  # DecodeError, truncated file, missing external data
        raise ModelError(f"cannot read ONNX model '{path}': {_first_line(e)} (the file is "
                         "truncated or not an ONNX protobuf; re-export it)", spec=str(path)
                         ) from None
    if not model.graph.node:
        raise ModelError(f"ONNX model '{path}' has an empty graph (truncated or not an ONNX "
                         "model; re-export it)", spec=str(path))
    if check:
        try:
            onnx.checker.check_model(model if load_external_data else str(path))
        except Exception as e:
            raise ModelError(f"ONNX model '{path}' is invalid: {_first_line(e)}; re-export it",
                             spec=str(path)) from None
    return model


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


# ----------------------------------------------------------------------------- export
def _unsupported_op(message: str) -> str | None:
    for pattern in (r"operator '([\w:.]+)'", r"(aten::\w+(?:\.\w+)?)", r"(prims::\w+)",
                    r"(torchvision::\w+)", r"target ([\w.:]+)", r"\b(\w+::\w+)\b"):
        m = re.search(pattern, message)
        if m:
            return m.group(1)
    return None


def _export(module: Any, sample: tuple, path: Path, *, opset: int, exporter: str,
            input_names: list[str]) -> None:
    import contextlib
    import io
    import warnings

    import torch

    # Grad mode stays on: under no_grad, torch's fused fast paths (e.g.
    # aten::_transformer_encoder_layer_fwd) replace the module's ops and cannot be exported.
    # The exporters' chatter (and the TorchScript exporter's IR dump on failure) is dropped;
    # the exception carries the reason.
    with warnings.catch_warnings(), torch.enable_grad(), \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")  # the TorchScript exporter's DeprecationWarning etc.
        if exporter == "torchscript":
            torch.onnx.export(module, sample, str(path), dynamo=False, opset_version=opset,
                              input_names=input_names, do_constant_folding=True)
        else:
            program = torch.onnx.export(module, sample, dynamo=True, opset_version=max(opset, 18),
                                        input_names=input_names, verbose=False)
            program.save(str(path), external_data=False)


def export_onnx(handle: Any, *, opset: int = DEFAULT_OPSET, exporter: str | None = None,
                backend: str = "onnx") -> OnnxModel:
    """The ONNX model for ``handle``: the file itself for ``.onnx`` handles, else a cached
    export of the torch module with the handle's fixed input shapes.

    Raises :class:`UnsupportedError` naming the operator the exporter could not convert.
    """
    from edgeprof.core.cache import cached_artifact, model_fingerprint

    if handle.format == "onnx":
        load_onnx(handle.path, load_external_data=False, check=False)  # one-line ModelError
        return OnnxModel(Path(handle.path), converted=False, cache_hit=True,
                         key={"onnx_file": model_fingerprint(handle)})
    if handle.format != "torch":
        raise UnsupportedError(f"backend '{backend}' cannot convert a {handle.format} model to "
                               "ONNX; give a torch model or an .onnx file", backend=backend)
    if exporter is not None and exporter not in EXPORTERS:
        raise UnsupportedError(f"unknown ONNX exporter '{exporter}'; use one of "
                               f"{', '.join(EXPORTERS)}", backend=backend)
    import onnx
    import torch

    module = handle.torch_module()
    arrays = handle.make_inputs(0)
    sample = tuple(torch.from_numpy(a) for a in arrays)
    names = [s.name or (f"input_{i}" if len(arrays) > 1 else "input")
             for i, s in enumerate(handle.input_specs)]
    fingerprint = model_fingerprint(handle)
    order = [exporter] if exporter else list(EXPORTERS)
    errors: list[str] = []
    for which in order:
        key = {"source": fingerprint, "opset": opset, "exporter": which,
               "torch": torch.__version__, "onnx": onnx.__version__}

        def build(tmp: Path, which=which) -> None:
            _export(module, sample, tmp, opset=opset, exporter=which, input_names=names)
            load_onnx(tmp)  # checker: a broken export never enters the cache

        try:
            path, hit = cached_artifact("onnx", key, "model.onnx", build)
        except ModelError as e:
            errors.append(f"{which}: {e}")
            continue
        except Exception as e:  # the exporters raise many types; the message names the op
            errors.append(f"{which}: {_first_line(e)}")
            continue
        notes = [f"exported to ONNX opset {opset} with the {which} exporter"]
        if errors:
            notes.append(f"the {order[0]} exporter failed ({errors[0]}); used {which}")
        return OnnxModel(path, converted=True, cache_hit=hit, key=key, exporter=which,
                         notes=notes)
    op = _unsupported_op(" ".join(errors))
    what = f"operator '{op}'" if op else "an operator"
    raise UnsupportedError(f"backend '{backend}': exporting model '{handle.spec}' to ONNX failed "
                           f"at {what} ({errors[-1][:200]}); this model cannot run on "
                           f"'{backend}' — try torch_eager", backend=backend)


def torch_to_onnx(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """The torch -> onnx converter of the conversion graph: the TorchScript exporter, the
    dynamo exporter when it fails; the export is checked before it is kept."""
    import torch

    module = source.torch_module()
    arrays = source.make_inputs(0)
    sample = tuple(torch.from_numpy(a) for a in arrays)
    names = [s.name or (f"input_{i}" if len(arrays) > 1 else "input")
             for i, s in enumerate(source.input_specs)]
    errors: list[str] = []
    for which in EXPORTERS:
        path = out / "model.onnx"
        try:
            _export(module, sample, path, opset=DEFAULT_OPSET, exporter=which, input_names=names)
            load_onnx(path)
        except Exception as e:  # noqa: BLE001 - the exporters raise many types
            errors.append(f"{which}: {_first_line(e)}")
            path.unlink(missing_ok=True)
            continue
        notes = [f"exported to ONNX opset {DEFAULT_OPSET} with the {which} exporter"]
        if errors:
            notes.append(f"the {EXPORTERS[0]} exporter failed ({errors[0]}); used {which}")
        return {"entry": "model.onnx", "notes": notes}
    op = _unsupported_op(" ".join(errors))
    what = f"operator '{op}'" if op else "an operator"
    raise UnsupportedError(f"exporting model '{source.spec}' to ONNX failed at {what} "
                           f"({errors[-1][:200]})")


def onnx_feed(input_names: Sequence[str], inputs: Sequence[Any]) -> dict[str, Any]:
    if len(input_names) != len(inputs):
        from edgeprof.core.errors import InputSpecError

        raise InputSpecError(f"the model takes {len(input_names)} inputs "
                             f"({', '.join(input_names)}) but {len(inputs)} were given; "
                             "repeat --input-shape once per input")
    return dict(zip(input_names, inputs))


def module_path(node_name: str) -> str | None:
    """The torch module path in a TorchScript-exported node name, or None.

    ``/encoder/layers.0/self_attn/MatMul_1`` -> ``encoder.layers.0.self_attn``; runtimes that
    rename nodes keep the path inside (``InsertedPrecisionFreeCast_/relu1/Relu_output_0``).
    """
    i = node_name.find("/")
    j = node_name.rfind("/")
    if i < 0 or j <= i:
        return None
    return node_name[i + 1:j].replace("/", ".") or None

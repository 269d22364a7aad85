"""LiteRT (TensorFlow Lite) backend: the LiteRT interpreter with its default XNNPACK delegate.

Models: ``.tflite`` files as they are, torch modules (converted with litert-torch) and Keras /
SavedModel models (converted with TensorFlow's ``TFLiteConverter``); conversions are cached
and their outputs checked against the source model (``extra["agreement"]``).

Precisions: fp32; fp16 (fp16 *weights*: XNNPACK unpacks them to fp32 at load and computes in
fp32 with its default options, so the executed precision is recorded as fp32); int8_dynamic
(int8 weights, activations quantized at run time); int8 / int8_static (full integer,
calibrated). A model with quantized inputs gets its float inputs quantized in ``prepare``
(outside the timed run); outputs are dequantized by ``to_numpy``.

XNNPACK: LiteRT applies it by default; ``prepare`` checks that it really did (delegate nodes
in the graph) and records which operators stayed on LiteRT's own kernels.
The backend option ``xnnpack=false`` (:class:`TFLiteOptions`) runs without the default
delegates (for comparison).

Per-operator profiling: LiteRT's Python API exposes no op profiler (the C++
``benchmark_model --enable_op_profiling`` tool has one), so ``operator_profile`` returns None.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import InputSpecError, ModelError, UnsupportedError
from edgeprof.core.importing import dist_version
from edgeprof.core.hookspecs import hookimpl

_QUANTIZED = ("int8", "uint8", "int16")


def file_precision(path: str | Path) -> str:
    """What a ``.tflite`` file stores: int8_static (integer activations), int8_dynamic (int8
    weights, float activations), fp16 (fp16 weights) or fp32."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ops = it._get_ops_details()
    mac = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL", "TRANSPOSE_CONV"}
    has_fp16 = has_int8_weight = has_int_act = False
    for op in ops:
        types = list(op["operand_types"])
        if op["op_name"] == "DEQUANTIZE" and types and types[0] == np.float16:
            has_fp16 = True
        if op["op_name"] not in mac:
            continue
        act = types[0] if types else None
        if act in (np.int8, np.uint8, np.int16):
            has_int_act = True
        if len(types) > 1 and types[1] in (np.int8, np.uint8) and act == np.float32:
            has_int8_weight = True
    if has_int_act:
        return "int8_static"
    if has_int8_weight:
        return "int8_dynamic"
    if has_fp16:
        return "fp16"
    return "fp32"


def _delegation(interpreter) -> dict[str, Any]:
    """Whether XNNPACK (or another delegate) took the graph, read from the node list.

    After delegation LiteRT appends one DELEGATE node per delegated partition; an original
    operator still runs on LiteRT's kernels when it feeds or reads a delegate partition's
    boundary tensors, or produces a model output itself.
    """
    ops = interpreter._get_ops_details()
    delegates = [o for o in ops if o["op_name"] == "DELEGATE"]
    originals = [o for o in ops if o["op_name"] != "DELEGATE"]
    if not delegates:
        return {"xnnpack_applied": False, "delegate_partitions": 0,
                "ops_total": len(originals), "ops_delegated": 0,
                "ops_outside_delegate": sorted({o["op_name"] for o in originals})}
    d_in = {int(t) for d in delegates for t in d["inputs"]}
    d_out = {int(t) for d in delegates for t in d["outputs"]}
    model_outputs = {int(d["index"]) for d in interpreter.get_output_details()}
    outside = []
    for o in originals:
        outs = {int(t) for t in o["outputs"]}
        ins = {int(t) for t in o["inputs"] if int(t) >= 0}
        if outs & d_in or ins & d_out or \
                (outs & model_outputs and not outs & d_out):
            outside.append(o)
    return {"xnnpack_applied": True, "delegate_partitions": len(delegates),
            "ops_total": len(originals), "ops_delegated": len(originals) - len(outside),
            "ops_outside_delegate": [o["op_name"] for o in outside]}


def _quantize(x, detail):
    import numpy as np

    scale, zero = detail["quantization"]
    dtype = detail["dtype"]
    info = np.iinfo(dtype)
    q = np.round(np.asarray(x, dtype=np.float64) / scale + zero)
    return np.clip(q, info.min, info.max).astype(dtype)


def _dequantize(y, detail):
    import numpy as np

    scale, zero = detail["quantization"]
    if np.dtype(detail["dtype"]).name in _QUANTIZED and scale:
        return (y.astype(np.float32) - zero) * np.float32(scale)
    return np.asarray(y, dtype=np.float32) if np.asarray(y).dtype.kind == "f" else np.asarray(y)


@dataclass(frozen=True)
class TFLiteOptions:
    """LiteRT interpreter knobs. Threads are ``RunConfig.threads`` (``--threads``; default
    the physical cores), passed as the interpreter's ``num_threads``, which XNNPACK uses too."""

    #: apply the default delegates (XNNPACK); False: LiteRT's builtin kernels only
    xnnpack: bool = True


class TFLiteBackend(Backend):
    name = "tflite"
    description = "LiteRT (TensorFlow Lite) interpreter with the XNNPACK delegate"
    capabilities = Capabilities(
        precisions=("fp32", "fp16", "int8", "int8_static", "int8_dynamic"),
        devices=("cpu",),
        model_formats=("tflite",),
    )
    requires = ("ai_edge_litert",)
    install_hint = "pip install 'edgeprof[tflite]'"
    Options = TFLiteOptions

    def build(self, model, precision: str, calibration: Any = None):
        """Any format -> .tflite by the conversion graph (the last converter produces the
        precision: LiteRT does not quantize a .tflite itself)."""
        from edgeprof.backends.common import built, converted
        from edgeprof.backends.tflite_convert import canonical_precision

        requested = canonical_precision(precision)
        model, artifact = converted(self, model, precision, calibration)
        stored = self._file_precision(artifact.entry_path)
        if not artifact.manifest.route and stored != requested:
            raise UnsupportedError(
                f"'{Path(model.path).name}' is a {stored} .tflite model; edgeprof does not "
                f"re-quantize .tflite files, ask for precision {stored} (or give the source "
                "model)", backend=self.name, precision=precision)
        return built(self, artifact, model, precision, stored)

    def load(self, artifact, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """The LiteRT interpreter on the artifact's .tflite (imports only ai_edge_litert)."""
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        from edgeprof.backends.common import (describe_artifact, native_info_filtered,
                                              physical_cores)
        from edgeprof.backends.tflite_convert import canonical_precision

        requested = canonical_precision(config.precision)
        t0 = time.perf_counter()
        notes: list[str] = []
        path = artifact.entry_path
        converted = bool(artifact.manifest.route)
        stored = self._file_precision(path)
        threads = int(config.threads or physical_cores())
        use_xnnpack = self.options_for(config).xnnpack
        resolver = OpResolverType.AUTO if use_xnnpack else \
            OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        try:
            with native_info_filtered():  # the XNNPACK delegate's INFO line (quiet CLI)
                interpreter = Interpreter(model_path=str(path), num_threads=threads,
                                          experimental_op_resolver_type=resolver)
                in_details = interpreter.get_input_details()
                self._fit_inputs(interpreter, in_details, inputs, path)
                interpreter.allocate_tensors()
        except (InputSpecError, ModelError):
            raise
        except (ValueError, RuntimeError) as e:
            msg = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip()) or \
                "invalid model"
            if len(msg) > 240:
                msg = msg[:237] + "..."
            if converted:  # our own conversion produced a model LiteRT rejects
                op = re.search(r"\((\w+)\) failed to prepare", msg)
                raise UnsupportedError(
                    f"backend '{self.name}': the {requested} model converted by "
                    f"{artifact.manifest.route_text()} does not run on LiteRT"
                    + (f" (operator {op.group(1)})" if op else "") + f": {msg}; try another "
                    "precision or backend", backend=self.name,
                    precision=config.precision) from None
            raise ModelError(f"LiteRT cannot load '{path}': {msg}; the file is truncated, "
                             "corrupted or needs ops this runtime lacks", spec=str(path)) from None
        in_details = interpreter.get_input_details()
        out_details = interpreter.get_output_details()

        delegation = _delegation(interpreter)
        if use_xnnpack and not delegation["xnnpack_applied"]:
            notes.append("XNNPACK was not applied: every operator ran on LiteRT's own kernels")
        elif delegation["ops_outside_delegate"] and use_xnnpack:
            notes.append("operators outside XNNPACK (LiteRT kernels): "
                         + ", ".join(delegation["ops_outside_delegate"]))

        def feed(xs: Sequence[Any]) -> list:
            """Inputs in the model's own types, quantized here, not in the timed run."""
            out = []
            for x, d in zip(xs, in_details):
                dt = np.dtype(d["dtype"])
                x = np.asarray(x)
                if dt.name in _QUANTIZED and d["quantization"][0] and x.dtype.kind == "f":
                    out.append(np.ascontiguousarray(_quantize(x, d)))
                else:
                    out.append(np.ascontiguousarray(x.astype(dt, copy=False)))
            return out

        prepared_inputs = feed(inputs)
        in_idx = [int(d["index"]) for d in in_details]
        out_idx = [int(d["index"]) for d in out_details]
        set_tensor, invoke, get_tensor = (interpreter.set_tensor, interpreter.invoke,
                                          interpreter.get_tensor)

        def run(xs):
            for i, x in zip(in_idx, xs):
                set_tensor(i, x)
            invoke()
            return [get_tensor(i) for i in out_idx]

        def to_numpy(outputs) -> list:
            return [_dequantize(y, d) for y, d in zip(outputs, out_details)]

        if converted and stored != requested:
            notes.append(f"asked for {requested} but the converted model holds {stored} "
                         "(the converter left its tensors as they were; TFLite skips weights "
                         "under 1024 elements for dynamic-range quantization)")
        executed = {"fp32": "fp32", "fp16": "fp32", "int8_dynamic": "int8_dynamic",
                    "int8_static": "int8_static"}[stored]
        if stored == "fp16":
            notes.append("fp16 weights are unpacked to fp32 at load (DEQUANTIZE); "
                         + ("XNNPACK" if use_xnnpack else "LiteRT")
                         + " computes in fp32, so the executed precision is fp32")
        load_time = time.perf_counter() - t0

        def close():
            nonlocal interpreter
            interpreter = None

        prepared = PreparedModel(
            run=run, inputs=prepared_inputs, runtime="litert",
            runtime_version=dist_version("ai-edge-litert", "unknown"), executed_precision=executed,
            threads={"intra_op": threads}, device="cpu", load_time_s=load_time, notes=notes,
            close=close, to_numpy=to_numpy, feed=feed,
            extra={"delegation": delegation, "stored_precision": stored,
                   "xnnpack_requested": use_xnnpack, "tflite_path": str(path),
                   "requested_precision": config.precision})
        describe_artifact(prepared, artifact, self.name)
        return prepared

    # ----------------------------------------------------------------------------------
    @staticmethod
    def _file_precision(path: Path) -> str:
        try:
            return file_precision(path)
        except ValueError as e:
            msg = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "invalid model")
            raise ModelError(f"LiteRT cannot load '{path}': {msg}; the file is truncated or "
                             "corrupted, re-export it", spec=str(path)) from None

    @staticmethod
    def _fit_inputs(interpreter, details, inputs: Sequence[Any], path: Path) -> None:
        import numpy as np

        if len(inputs) != len(details):
            raise InputSpecError(f"'{path.name}' takes {len(details)} input(s), got "
                                 f"{len(inputs)}")
        for x, d in zip(inputs, details):
            shape = tuple(np.shape(x))
            if shape != tuple(int(s) for s in d["shape"]):
                try:
                    interpreter.resize_tensor_input(d["index"], list(shape), strict=True)
                except (ValueError, RuntimeError):
                    raise InputSpecError(
                        f"'{path.name}' input '{d['name']}' has shape "
                        f"{'x'.join(str(int(s)) for s in d['shape'])}, got "
                        f"{'x'.join(map(str, shape))}; it has fixed dimensions, so use that "
                        "shape (or re-export with a dynamic batch)") from None

    def operator_profile(self, prepared: PreparedModel, runs: int = 10,
                         trace_path: str | None = None):
        """None: LiteRT's Python interpreter exposes no per-operator profiler."""
        return None


@hookimpl
def edgeprof_register_backends():
    return [TFLiteBackend]

"""Conversions to ``.tflite``: torch (litert-torch) and Keras / SavedModel (TensorFlow).

Precisions (canonical names, ``int8`` means full-integer ``int8_static`` here):

==============  =====================================================================
fp32            torch: ``litert_torch.convert``; TF: ``TFLiteConverter`` defaults
fp16            fp16 weights, fp32 activations. torch: the fp32 model's weights cast by
                ai-edge-quantizer (``FLOAT_CASTING``, 16 bits; DEQUANTIZE ops unpack them);
                TF: ``supported_types = [tf.float16]``
int8_dynamic    int8 weights, activations quantized at run time. torch: PT2E with
                litert-torch's ``PT2EQuantizer`` (``is_dynamic=True``, per channel);
                TF: ``optimizations = [DEFAULT]``
int8_static     int8 weights and activations, calibrated on a representative dataset.
                torch: PT2E static (per channel, histogram observers); TF: full integer
                with int8 inputs and outputs
==============  =====================================================================

The representative dataset is ``handle.calibration_inputs(n, seed + 1)`` (real samples when
the handle carries calibration data, else ``handle.make_inputs(seed + 1 + i)``) for ``i <
calibration_samples`` (random data of the model's input shapes: enough to exercise the
conversion and to measure speed and size, not to judge accuracy; calibrate on real data for
that). The functions here are the conversion graph's edges (``edgeprof/backends/converters.py``):
every result is cached by content there, keyed by the model's digest, the precision, the
calibration data and the tool versions.

torch and TensorFlow are imported only inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import io
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import BackendUnavailableError, ModelError, UnsupportedError

BACKEND = "tflite"
CONVERTIBLE_PRECISIONS = ("fp32", "fp16", "int8_dynamic", "int8_static")
DEFAULT_CALIBRATION_SAMPLES = 16


@dataclass
class Conversion:
    """A converted model on disk and how it was made."""

    path: Path
    precision: str  # canonical: fp32 | fp16 | int8_dynamic | int8_static
    source_format: str
    converter: str
    cache_hit: bool
    convert_time_s: float  # 0 on a cache hit
    key: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size


def canonical_precision(precision: str) -> str:
    """``int8`` is full-integer (static) where the converter can calibrate, which it can."""
    p = "int8_static" if precision == "int8" else precision
    if p not in CONVERTIBLE_PRECISIONS:
        raise UnsupportedError(
            f"backend '{BACKEND}' cannot convert to precision '{precision}'; it converts to "
            f"{', '.join(CONVERTIBLE_PRECISIONS)} (and int8 = int8_static)",
            backend=BACKEND, precision=precision)
    return p


def _need(module: str, hint: str) -> None:
    from edgeprof.core.importing import modules_present

    if modules_present(module):
        raise BackendUnavailableError(BACKEND, f"Python package '{module}' is not installed",
                                      hint)


_OP_PATTERNS = (
    re.compile(r"\baten[.:]{1,2}[A-Za-z_][\w.]*"),
    re.compile(r"'((?:tfl?|tf|stablehlo|mhlo|torch)\.[\w.]+)'"),
    re.compile(r"\b((?:tfl|stablehlo|mhlo)\.[A-Za-z_][\w.]*)"),
    re.compile(r"(?:op|operator|Op type)[:\s]+'?([A-Za-z_][\w.:]+)'?", re.IGNORECASE),
)


def op_from_error(err: BaseException) -> str | None:
    """The operator an error names: from its message, else from the fx node being lowered
    (a ``torch.fx.Node`` local in the failing frames, innermost first)."""
    text = f"{err}"
    for pat in _OP_PATTERNS:
        m = pat.search(text)
        if m:
            return m.group(1) if m.groups() else m.group(0)
    frames = []
    tb = err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in list(frame.f_locals.values()):
            if type(value).__name__ == "Node" and getattr(value, "op", None) == "call_function":
                return str(value.target)
    return None


def _conversion_failed(err: BaseException, source: str, precision: str) -> UnsupportedError:
    op = op_from_error(err)
    first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
    if len(first) > 200:
        first = first[:197] + "..."
    what = f"operator '{op}'" if op else "an operator or construct"
    return UnsupportedError(
        f"backend '{BACKEND}' cannot convert this {source} model to .tflite at {precision}: "
        f"{what} is not supported ({type(err).__name__}: {first}); try another backend or "
        "precision", backend=BACKEND, precision=precision)


@contextlib.contextmanager
def _quiet():
    """Converters print progress to stdout; edgeprof keeps stdout for --json."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


# --------------------------------------------------------------------------------- torch
def _calibration_note(handle, n: int) -> str:
    if handle.calibration is not None:
        return f"int8_static calibrated on {n} batches of real samples from {handle.calibration}"
    return (f"int8_static calibrated on {n} random inputs of the model's shapes (not real "
            "data): fine for speed and size, not for accuracy")


def _pt2e(module, args, handle, dynamic: bool, seed: int, n: int):
    import litert_torch
    import torch
    from litert_torch.quantize import pt2e_quantizer, quant_config
    from torchao.quantization.pt2e import move_exported_model_to_eval, quantize_pt2e

    quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
        pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True,
                                                         is_dynamic=dynamic))
    exported = torch.export.export(module, args).module()
    prepared = quantize_pt2e.prepare_pt2e(exported, quantizer)
    move_exported_model_to_eval(prepared)
    sets = [handle.make_inputs(seed)] if dynamic else handle.calibration_inputs(n, seed + 1)
    with torch.no_grad():
        for arrays in sets:
            prepared(*(torch.from_numpy(a) for a in arrays))
    converted = quantize_pt2e.convert_pt2e(prepared, fold_quantize=False)
    move_exported_model_to_eval(converted)
    for m in converted.modules():  # an exported GraphModule refuses .eval(); the flag is ours
        m.training = False
    return litert_torch.convert(converted, args,
                                quant_config=quant_config.QuantConfig(pt2e_quantizer=quantizer))


def _fp16_weights(src: Path, dst: Path) -> None:
    from ai_edge_quantizer import qtyping, quantizer
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    q = quantizer.Quantizer(str(src))
    q.add_weight_only_config(regex=".*", operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
                             num_bits=16, algorithm_key=AlgorithmName.FLOAT_CASTING)
    result = q.quantize()
    dst.write_bytes(bytes(result.quantized_model))


# ---------------------------------------------------------------------------- TensorFlow
def _tf():
    _need("tensorflow", "pip install 'edgeprof[tensorflow]'")
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def load_keras(path: Path):
    tf = _tf()
    try:
        with _quiet():
            return tf.keras.models.load_model(str(path), compile=False)
    except Exception as e:
        first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise ModelError(f"Keras cannot load '{path}': {first[:200]}; save it with "
                         "model.save('model.keras')", spec=str(path)) from None


def _tf_converter(handle):
    tf = _tf()
    if handle.format == "keras":
        return tf.lite.TFLiteConverter.from_keras_model(load_keras(handle.path))
    try:
        return tf.lite.TFLiteConverter.from_saved_model(str(handle.path))
    except Exception as e:
        first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise ModelError(f"TensorFlow cannot load SavedModel '{handle.path}': {first[:200]}",
                         spec=str(handle.path)) from None


@contextlib.contextmanager
def _silence_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ----------------------------------------------------------- conversion-graph converters
def torch_to_tflite(source, out: Path, precision: str) -> dict[str, Any]:
    """The torch -> tflite converter of the conversion graph (litert-torch).

    litert-torch can abort, segfault or call ``sys.exit`` inside the process; so when the
    model can be rebuilt from its spec (``builtin:``, ``file.py:factory``, ``module:factory``,
    a model file or an earlier route step's file) the conversion runs in a spawned
    subprocess that writes the .tflite into ``out`` (the cache's staging folder; the parent
    publishes it). A crash there is a :class:`MeasurementError` naming the converter: that
    run fails and the others go on. An ``nn.Module`` object given to the Python API, or a
    module built in this process, has no spec to rebuild it from: it converts in this
    process (said in a note)."""
    _need("litert_torch", "pip install 'edgeprof[tflite]'")
    recipe = _child_recipe(source)
    if recipe is None:
        result = _torch_to_tflite_here(source, out, precision)
        result["notes"].append("converted in this process (an in-memory module has no spec "
                               "to rebuild it in a subprocess): a converter crash here ends "
                               "the whole run")
        return result
    return _convert_in_child(recipe, source, out, precision)


#: the converter, as a crash names it
_TORCH_CONVERTER = "litert-torch (torch -> tflite)"


def _child_recipe(source) -> dict[str, Any] | None:
    """How a subprocess rebuilds ``source`` (None: it cannot, convert in this process)."""
    spec = str(source.spec)
    base = {"spec": spec, "name": source.name, "inputs": [s.to_dict() for s in source.input_specs],
            "calibration": str(source.calibration) if source.calibration else None}
    if spec.startswith("object:"):
        return None
    if source.path is not None:
        return {**base, "kind": "resolve", "spec": str(Path(source.path).resolve())}
    if getattr(source, "_factory", None) is None:
        return None  # a module built here (trained, compressed)
    if Path(spec).is_file():  # an earlier route step's file, opened by its format's opener
        from edgeprof.core.plugins import get_graph

        fmt = get_graph().formats.get(source.format)
        opener = getattr(fmt, "opener", None)
        return {**base, "kind": "open", "opener": opener} if isinstance(opener, str) else None
    return {**base, "kind": "resolve"}


def _rebuild(recipe: dict[str, Any]):
    """The model handle ``recipe`` describes (in the subprocess)."""
    import importlib

    from edgeprof.core.models import InputSpec, ModelHandle, resolve_model

    specs = [InputSpec(tuple(d["shape"]), d["dtype"], d.get("name")) for d in recipe["inputs"]]
    calibration = Path(recipe["calibration"]) if recipe["calibration"] else None
    if recipe["kind"] == "open":
        module, _, attr = recipe["opener"].partition(":")
        opener = getattr(importlib.import_module(module), attr)
        path = Path(recipe["spec"])
        return ModelHandle(spec=recipe["spec"], name=recipe["name"], format="torch",
                           input_specs=specs, calibration=calibration,
                           _factory=lambda: opener(path))
    handle = resolve_model(recipe["spec"], input_shapes=[s.shape for s in specs],
                           input_dtypes=[s.dtype for s in specs], calibration=calibration)
    return handle


class _ConverterWorker:
    """The spawned interpreter that converts torch models to .tflite for this process, kept
    for its next conversion: importing torch, litert-torch and TensorFlow costs ~9 s an
    interpreter on a 2-core host, which three precisions of one model paid three times.

    One request a line on its stdin, one JSON reply a line on a pipe of its own (the
    converters' prints go to its stderr, a file whose tail names a crash). It is replaced
    when it died, when this process's working folder or environment changed since it
    started (the spec it rebuilds may depend on them), and after a converter called
    ``sys.exit``; it closes at this process's exit (``atexit``), when its stdin closes (this
    process died), or after :data:`_IDLE_S` idle."""

    def __init__(self) -> None:
        import atexit
        import subprocess
        import sys
        import tempfile

        self.key = _worker_key()
        self.log = tempfile.TemporaryFile(mode="w+b", prefix="edgeprof-tflite-convert-")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from edgeprof.backends.tflite_convert import _child_main; "
             f"_child_main({_IDLE_S})"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True)
        atexit.register(self.close)

    def usable(self) -> bool:
        return self.proc.poll() is None and self.key == _worker_key()

    def ask(self, request: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """The reply to ``request``; (None, the log's new lines) when the worker ended first.
        One request at a time (the caller holds :data:`_WORKERS_LOCK`)."""
        import json

        start = self.log.seek(0, 2)
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        except BaseException:  # Ctrl-C: the worker, in this process group, got it too
            self.proc.kill()
            self.close()
            raise
        if line:
            return json.loads(line), ""
        self.proc.wait()
        self.log.seek(start)
        return None, self.log.read().decode("utf-8", "replace")

    def close(self) -> None:
        import atexit
        import subprocess

        atexit.unregister(self.close)
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _worker_key() -> tuple[Any, ...]:
    """What a worker inherited that a rebuilt spec may depend on: this process (a fork
    starts its own), its working folder and its environment."""
    import os

    return os.getpid(), os.getcwd(), tuple(sorted(os.environ.items()))


#: seconds a converter worker waits for its next conversion before it exits
_IDLE_S = 300
_WORKERS: list[_ConverterWorker] = []
_WORKERS_LOCK = threading.Lock()


def _ask_worker(request: dict[str, Any]) -> tuple[dict[str, Any] | None, str,
                                                  _ConverterWorker]:
    """The reply of this process's converter worker (started, or replaced, as needed), the
    log it left when it ended first, and the worker."""
    retry = True
    while True:
        if _WORKERS and not _WORKERS[0].usable():
            _WORKERS.pop().close()
        if not _WORKERS:
            _WORKERS.append(_ConverterWorker())
        worker = _WORKERS[0]
        reply, log = worker.ask(request)
        if reply is None or reply["status"] == "exit":  # it ended (after a converter's exit)
            _WORKERS.remove(worker)
            worker.close()
            if reply is None and retry and worker.proc.returncode == 0:
                retry = False  # it left idle as this request came: a fresh one takes it
                continue
        return reply, log, worker


def _convert_in_child(recipe: dict[str, Any], source, out: Path, precision: str
                      ) -> dict[str, Any]:
    """Run the conversion in the converter worker (:class:`_ConverterWorker`); its crash is
    this conversion's error."""
    import signal

    from edgeprof.core.cache import model_fingerprint
    from edgeprof.core.errors import MeasurementError

    request = {"recipe": recipe, "out": str(out), "precision": precision,
               "fingerprint": model_fingerprint(source)}
    with _WORKERS_LOCK:
        reply, log, worker = _ask_worker(request)
    if reply is None:  # died before replying: a crash, an abort, a kill
        code = worker.proc.returncode
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        # the last error line it printed, if any (not the libraries' warnings)
        last = next((ln.strip() for ln in reversed(log.splitlines())
                     if re.search(r"Error|error:|Fatal|Abort", ln)), "")
        raise MeasurementError(f"converter {_TORCH_CONVERTER} crashed on '{source.spec}' at "
                               f"{precision}: its subprocess {how}"
                               + (f" ({last[:160]})" if last else ""))
    if reply["status"] == "ok":
        return reply["result"]
    if reply["status"] == "mismatch":  # the spec rebuilt another model (unseeded weights ...)
        result = _torch_to_tflite_here(source, out, precision)
        result["notes"].append("converted in this process: the model rebuilt from its spec in "
                               "a subprocess differed from this one (unseeded weights?)")
        return result
    if reply["status"] == "exit":
        raise MeasurementError(f"converter {_TORCH_CONVERTER} called sys.exit({reply['code']}) "
                               f"on '{source.spec}' at {precision}")
    kind, message = reply["type"], reply["message"]
    if kind == "UnsupportedError":
        raise UnsupportedError(message, backend=BACKEND, precision=precision)
    if kind == "BackendUnavailableError":
        raise BackendUnavailableError(BACKEND, message)
    if kind == "ModelError":
        raise ModelError(message, spec=str(source.spec))
    raise RuntimeError(f"{kind}: {message}")


def _child_main(idle_s: float | None = None) -> None:
    """The worker side of :class:`_ConverterWorker`: a request a line on stdin, a reply a
    line on the process's original stdout (the converters' own prints go to stderr); ends
    when stdin closes, after ``idle_s`` without a request, or after a converter's
    ``sys.exit``."""
    import json
    import os
    import select
    import sys

    from edgeprof.core.cache import model_fingerprint

    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # print() and C code writing to fd 1 land in the log, not in a reply
    sys.stdout = sys.stderr

    def reply(status: str, **fields: Any) -> None:
        replies.write(json.dumps({"status": status, **fields}) + "\n")
        replies.flush()

    while True:
        if idle_s and os.name == "posix" and not select.select([sys.stdin], [], [], idle_s)[0]:
            os._exit(0)  # idle: the parent starts another when it needs one
        line = sys.stdin.readline()
        if not line:  # the parent closed it or died; no teardown (TF's can crash)
            os._exit(0)
        request = json.loads(line)
        try:
            handle = _rebuild(request["recipe"])
            if model_fingerprint(handle) != request["fingerprint"]:
                reply("mismatch")
                continue
            result = _torch_to_tflite_here(handle, Path(request["out"]), request["precision"])
        except SystemExit as e:
            reply("exit", code=e.code if isinstance(e.code, int) else str(e.code))
            os._exit(0)
        except Exception as e:  # every error is reported to the parent; Ctrl-C ends the child
            if isinstance(e, BackendUnavailableError):
                message = getattr(e, "reason", None) or str(e)
            else:
                message = str(e)
            reply("error", type=type(e).__name__, message=message)
            continue
        reply("ok", result=result)


def _torch_to_tflite_here(source, out: Path, precision: str) -> dict[str, Any]:
    """The conversion itself, in this process."""
    import litert_torch
    import torch

    precision = canonical_precision(precision)
    module = source.torch_module()
    args = tuple(torch.from_numpy(a) for a in source.make_inputs(0))
    path = out / "model.tflite"
    try:
        with _quiet(), torch.no_grad():
            if precision == "fp32":
                litert_torch.convert(module, args).export(str(path))
            elif precision == "fp16":
                litert_torch.convert(module, args).export(str(out / "fp32.tflite"))
                _fp16_weights(out / "fp32.tflite", path)
                (out / "fp32.tflite").unlink()
            else:
                _pt2e(module, args, source, precision == "int8_dynamic", 0,
                      DEFAULT_CALIBRATION_SAMPLES).export(str(path))
    except (UnsupportedError, BackendUnavailableError):
        raise
    except Exception as e:  # the converters raise many types; name the op if we can
        raise _conversion_failed(e, "torch", precision) from e
    notes = [_calibration_note(source, DEFAULT_CALIBRATION_SAMPLES)] \
        if precision == "int8_static" else []
    return {"entry": "model.tflite", "notes": notes, "stored_precision": precision}


def tf_to_tflite(source, out: Path, precision: str) -> dict[str, Any]:
    """The keras / saved_model -> tflite converter of the conversion graph."""
    precision = canonical_precision(precision)
    tf = _tf()
    converter = _tf_converter(source)
    if precision != "fp32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if precision == "fp16":
        converter.target_spec.supported_types = [tf.float16]
    elif precision == "int8_static":
        sets = source.calibration_inputs(DEFAULT_CALIBRATION_SAMPLES, 1)

        def representative():
            yield from ([a.astype("float32") if a.dtype.kind == "f" else a for a in s]
                        for s in sets)

        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    try:
        with _quiet(), _silence_warnings():
            (out / "model.tflite").write_bytes(converter.convert())
    except Exception as e:
        raise _conversion_failed(e, source.format, precision) from e
    notes = [_calibration_note(source, DEFAULT_CALIBRATION_SAMPLES)] \
        if precision == "int8_static" else []
    return {"entry": "model.tflite", "notes": notes, "stored_precision": precision}


# ------------------------------------------------------------------------------ dispatch
def convert(handle, precision: str) -> Conversion:
    """Convert ``handle`` (torch, keras, saved_model, or any format a route reaches) to
    ``.tflite`` at ``precision``, by the conversion graph (cached by content), on the route
    the registered tflite backend would take."""
    from edgeprof.core.plugins import get_graph
    from edgeprof.core.plugins import get_registry

    precision = canonical_precision(precision)
    route = get_registry().backend(BACKEND).route(handle.format, precision)
    t0 = time.perf_counter()
    art = get_graph().convert(handle, route, backend=BACKEND, requested_precision=precision)
    m = art.manifest
    return Conversion(path=art.entry_path, precision=precision, source_format=handle.format,
                      converter=m.route_text(), cache_hit=art.cache_hit,
                      convert_time_s=0.0 if art.cache_hit else time.perf_counter() - t0,
                      key=dict(m.key), notes=list(m.notes))


def reference_outputs(handle, inputs: Sequence[Any]) -> tuple[list, str]:
    """A Keras or SavedModel source's fp32 outputs on ``inputs`` (numpy) and what produced
    them (``common.reference_outputs`` answers for the other formats)."""
    import numpy as np

    if handle.format == "keras":
        model = load_keras(handle.path)
        out = model(inputs[0] if len(inputs) == 1 else list(inputs), training=False)
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o) for o in outs], "keras fp32"
    if handle.format == "saved_model":
        tf = _tf()
        loaded = tf.saved_model.load(str(handle.path))
        fn = loaded.signatures["serving_default"]
        names = list(fn.structured_input_signature[1].keys())
        out = fn(**{n: tf.constant(a) for n, a in zip(names, inputs)})
        return [np.asarray(out[k]) for k in sorted(out)], "saved_model fp32"
    raise UnsupportedError(f"no reference for {handle.format} models", backend=BACKEND)


__all__ = [
    "CONVERTIBLE_PRECISIONS", "Conversion", "canonical_precision", "convert", "load_keras",
    "op_from_error", "reference_outputs", "tf_to_tflite", "torch_to_tflite",
]

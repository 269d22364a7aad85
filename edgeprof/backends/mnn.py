"""MNN backend: Alibaba's MNN (the ``mnn`` wheel) on the CPU, through its Module API.

Conversion: .onnx -> .mnn with MNN's own converter (the wheel's MNNConvert, run in its own
process so a converter abort is one line), an edge of the conversion graph; a torch model
reaches it through torch -> onnx. Cached like the others.

Precisions:

- ``fp32``: MNN's ``precision=normal`` (``high`` on a CPU with fp16 arithmetic, where
  ``normal`` would compute in fp16).
- ``fp16``: fp16 weights on disk (``MNNConvert --fp16``) and ``precision=low``; only a CPU
  with fp16 arithmetic (ARMv8.2) computes in fp16, elsewhere MNN unpacks the weights and
  computes in fp32, and the executed precision says so.
- ``int8_weight``: int8 weights (``MNNConvert --weightQuantBits 8``), dequantized at load.
- ``int8`` / ``int8_static``: not offered; MNN's calibration tool (``mnnquant``) in the
  3.6.1 wheel aborts on non-image calibration data (``std::length_error``).

Threads: ``RunConfig.threads`` as MNN's ``numThread``. MNN prints its CPU features to
descriptor 1 when imported (the harness imports it before the memory baseline): under the
CLI, ``cli/quiet.native_output_to_stderr`` keeps every runtime's native output off stdout
for the whole command (``--json`` stays a document); ``load`` also sends it to stderr for
callers of the Python API.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgeprof.backends.native_runtimes import NativeRuntime
from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import InputSpecError, ModelError, UnsupportedError
from edgeprof.core.importing import dist_version
from edgeprof.core.formats import Converter, Format
from edgeprof.core.hookspecs import registers

INSTALL_HINT = "pip install 'edgeprof[mnn]'"
PRECISIONS = ("fp32", "fp16", "int8_weight")
FORMATS = [Format("mnn", "MNN models (.mnn)", (".mnn",))]
CONVERTERS = [
    Converter("onnx", "mnn", "MNNConvert", "mnn", "edgeprof.backends.mnn:onnx_to_mnn",
              PRECISIONS, cost=1.0, modules=("MNN",), install_hint=INSTALL_HINT),
]
#: MNNConvert flags per stored precision
_CONVERT_FLAGS = {"fp32": [], "fp16": ["--fp16"], "int8_weight": ["--weightQuantBits", "8"]}
_CONVERT = ("import sys, _tools; ok = _tools.mnnconvert(['MNNConvert'] + sys.argv[1:]); "
            "sys.exit(0 if ok in (True, 0, None) else 1)")


def onnx_to_mnn(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """MNNConvert -f ONNX (fp16 / int8 weights as the precision asks)."""
    from edgeprof.backends.native_runtimes import last_lines, python_tool
    from edgeprof.backends.onnx_export import load_onnx

    load_onnx(source.path, check=False)  # one-line ModelError for a broken file
    dst = out / "model.mnn"
    rc, text = python_tool(_CONVERT, "-f", "ONNX", "--modelFile", str(source.path),
                           "--MNNModel", str(dst), "--bizCode", "edgeprof",
                           *_CONVERT_FLAGS[precision])
    if rc != 0 or not dst.is_file() or dst.stat().st_size == 0 or "Converted Success" not in text:
        import re

        ops = sorted(set(re.findall(r"(?:not support|unsupported)\w*\s*(?:op\w*)?[\s:=]*"
                                    r"([A-Za-z_][\w]*)", text, flags=re.I)))
        raise UnsupportedError(
            f"MNNConvert cannot convert '{source.spec}' to MNN"
            + (f" (operator {', '.join(ops)})" if ops else "")
            + f": exit {rc}: {last_lines(text)}", backend="mnn", precision=precision)
    return {"entry": "model.mnn", "stored_precision": precision}


class MnnBackend(NativeRuntime, Backend):
    name = "mnn"
    description = "Alibaba MNN on the CPU (models converted from ONNX by MNNConvert)"
    capabilities = Capabilities(precisions=PRECISIONS, devices=("cpu",),
                                model_formats=("mnn",))
    requires = ("MNN",)
    install_hint = INSTALL_HINT
    unoffered = {p: "MNN's calibration tool (mnnquant) in the mnn 3.6.1 wheel aborts with "
                    "std::length_error on non-image calibration data; int8_weight "
                    "(MNNConvert --weightQuantBits 8) is offered, or calibrate on images with "
                    "mnnquant model.mnn int8.mnn config.json"
                 for p in ("int8", "int8_static")}

    native = "an .mnn file"
    one_sample = True
    fp16_fallback = "MNN unpacked the fp16 weights and computed in fp32"

    def load(self, artifact, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """An MNN Module on the artifact's .mnn (imports only MNN and numpy)."""
        import numpy as np

        from edgeprof.backends.common import describe_artifact, physical_cores
        from edgeprof.backends.native_runtimes import cpu_has_fp16_arithmetic, stdout_to_stderr

        t0 = time.perf_counter()
        path = Path(artifact.entry_path)
        stored = artifact.manifest.stored_precision or config.precision
        threads = int(config.threads or physical_cores())
        mode = "low" if stored == "fp16" else ("high" if cpu_has_fp16_arithmetic() else "normal")
        with stdout_to_stderr():
            import MNN
            import MNN.expr as F
            import MNN.nn as nn

            try:
                # the names first: a module loaded without a runtime manager after ours was
                # created slowed ours down by 1.5x (small_resnet, 1 thread: 0.72 vs 0.47 ms)
                meta = _model_io(path)
                rt = nn.create_runtime_manager(({"backend": "CPU", "precision": mode,
                                                 "numThread": threads},))
                module = nn.load_module_from_file(str(path), meta["inputNames"],
                                                  meta["outputNames"], runtime_manager=rt)
            except (RuntimeError, ValueError, TypeError) as e:
                raise ModelError(f"MNN cannot load '{path}': {e}; the file is truncated or not "
                                 "an MNN model", spec=str(path)) from None
        in_names = meta["inputNames"]
        if len(in_names) != len(inputs):
            raise InputSpecError(f"'{path.name}' takes {len(in_names)} input(s), got "
                                 f"{len(inputs)}")

        def feed(xs: Sequence[Any]) -> list:
            """numpy -> MNN variables (NCHW), outside the timed run: integer inputs (token
            ids) as MNN's int32, which MNNConvert makes of an int64 graph input (fed as
            floats, an embedding's gather failed its shape check and MNN returned no
            output), the rest as float32."""
            out = []
            for x in xs:
                a = np.asarray(x)
                if np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
                    a = np.ascontiguousarray(a, dtype=np.int32)
                    out.append(F.const(a, list(a.shape), F.NCHW, F.int))
                else:
                    a = np.ascontiguousarray(a, dtype=np.float32)
                    out.append(F.const(a, list(a.shape), F.NCHW))
            return out

        n_out = len(meta["outputNames"])

        def run(vs):
            ys = module.forward(vs)
            if len(ys) < n_out:  # MNN reports a failed forward on stderr and returns nothing
                raise UnsupportedError(f"MNN ran '{path.name}' and returned {len(ys)} of its "
                                       f"{n_out} output(s): its own error is on stderr "
                                       "(--debug)", backend="mnn")
            return [y.read() for y in ys]  # read() waits for the result: the work is timed

        def to_numpy(outputs) -> list:
            return [np.array(y) for y in outputs]

        executed, note = self.executed(stored)
        notes = [note] if note else []
        if stored == "int8_weight":
            notes.append("int8 weights (MNNConvert --weightQuantBits 8) are dequantized at load "
                         "and computed in float")
        load_time = time.perf_counter() - t0

        def close():
            nonlocal module
            module = None

        prepared = PreparedModel(
            run=run, inputs=feed(inputs), runtime="mnn",
            runtime_version=dist_version("mnn", "unknown"), executed_precision=executed,
            threads={"intra_op": threads}, device="cpu", load_time_s=load_time, notes=notes,
            close=close, to_numpy=to_numpy, feed=feed,
            extra={"requested_precision": config.precision, "mnn_precision_mode": mode,
                   "stored_precision": stored, "mnn": getattr(MNN, "version", lambda: "")()})
        describe_artifact(prepared, artifact, self.name)
        return prepared


def _model_io(path: Path) -> dict[str, Any]:
    """Input and output names of an .mnn file (MNN's own reader)."""
    import MNN.nn as nn

    module = nn.load_module_from_file(str(path), [], [])
    info = module.get_info() if hasattr(module, "get_info") else {}
    if not info.get("inputNames") or not info.get("outputNames"):
        raise ModelError(f"MNN cannot read the inputs/outputs of '{path}'", spec=str(path))
    return info


edgeprof_register_formats = registers(FORMATS)
edgeprof_register_converters = registers(CONVERTERS)
edgeprof_register_backends = registers([MnnBackend])

"""ONNX Runtime backend: the model's ONNX export (or an ``.onnx`` file) in an
``InferenceSession`` on the CPU provider (CUDA provider with ``device="cuda"``).

Precisions:

- ``fp32``: the export as is.
- ``fp16``: ``onnxruntime.transformers.float16`` (keeps fp32 graph inputs/outputs). ORT's CPU
  provider has no fp16 kernel for Conv/Gemm/MatMul on x86; it then inserts casts and runs
  those nodes in fp32. The backend finds out what ran from one profiled inference and
  reports that as the executed precision.
- ``int8_dynamic``: ``quantize_dynamic`` (int8 weights, activations quantized at run time).
- ``int8_static`` / ``int8``: QDQ ``quantize_static`` calibrated on sample inputs.

Every variant is cached and its outputs are compared with the torch fp32 reference; the
result is ``PreparedModel.extra["agreement"]``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from edgeprof.backends.common import arrays_to_numpy as _to_numpy
from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import ModelError, UnsupportedError
from edgeprof.core.hookspecs import hookimpl

#: op types whose executed input type decides the executed precision
MAC_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "FusedConv", "FusedGemm", "FusedMatMul",
           "NchwcConv", "QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger",
           "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "Attention", "MultiHeadAttention")
#: sample-input seeds used to calibrate static int8 (distinct from the evaluation seed)
CALIBRATION_SEEDS = tuple(range(1001, 1017))


#: the ``graph_optimization`` option -> ORT's GraphOptimizationLevel
GRAPH_OPTIMIZATION = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                      "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


@dataclass(frozen=True)
class OnnxRuntimeOptions:
    """ONNX Runtime session knobs."""

    #: execution providers in order, names or ``[name, {provider options}]``; None: the CPU
    #: provider (CUDA first on ``cuda`` devices)
    providers: tuple[str | tuple[str, dict[str, Any]], ...] | None = None
    #: graph optimization level (ORT_DISABLE_ALL / ENABLE_BASIC / ENABLE_EXTENDED / ENABLE_ALL)
    graph_optimization: Literal["disable", "basic", "extended", "all"] = "all"


def session_options(threads: dict[str, int], *, profile_prefix: str | None = None,
                    graph_optimization: str = "all"):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                          GRAPH_OPTIMIZATION[graph_optimization])
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = threads["intra_op"]
    so.inter_op_num_threads = threads["inter_op"]
    so.log_severity_level = 3  # errors only; the constant folder's warnings are noise
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return so


def _providers(device: str, override: list | None = None) -> list:
    """Execution providers: ``override`` (the ``providers`` option, e.g. TensorRT's
    with its options) when given, else CUDA on ``cuda`` devices, else the CPU."""
    if override:
        return [tuple(p) if isinstance(p, list) else p for p in override]
    return ["CUDAExecutionProvider", "CPUExecutionProvider"] if device.startswith("cuda") \
        else ["CPUExecutionProvider"]


def _session(path: str | Path, so, device: str, providers: list | None = None):
    import onnxruntime as ort

    try:
        return ort.InferenceSession(str(path), so, providers=_providers(device, providers))
    except Exception as e:
        text = str(e)
        if "INVALID_PROTOBUF" in text or "Protobuf parsing failed" in text or "Load model" in text:
            raise ModelError(f"onnxruntime cannot load '{path}': {text.splitlines()[0][:200]} "
                             "(truncated or not an ONNX model; re-export it)", spec=str(path)
                             ) from None
        raise UnsupportedError(f"onnxruntime cannot create a session for '{path}': "
                               f"{text.splitlines()[0][:300]}", backend="onnxruntime") from None



def graph_input_names(path: str | Path) -> list[str]:
    """Names of an ONNX graph's real inputs (initializers listed as inputs excluded)."""
    from edgeprof.backends.onnx_export import load_onnx

    graph = load_onnx(path, check=False, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    return [i.name for i in graph.input if i.name not in inits]


# ------------------------------------------------------------------- quantized variants
QUANTIZERS = {"fp16": "onnxruntime.transformers.float16", "int8_dynamic": "quantize_dynamic",
              "int8_static": "quantize_static (QDQ)"}


def quantized_artifact(base, precision: str, handle: Any, *, backend: str = "onnxruntime",
                       requested: str | None = None):
    """The ``precision`` variant of an fp32 ONNX artifact (cached by content)."""
    import onnxruntime as ort

    from edgeprof.core.cache import cached_entry, key_digest

    reduce_range = x86_without_vnni()
    src = base.entry_path
    if precision == "fp16":
        build = _build_fp16(src)
    elif precision == "int8_dynamic":
        build = _build_int8_dynamic(src, reduce_range)
    else:
        build = _build_int8_static(src, handle, graph_input_names(src), reduce_range)
    key = {"previous": key_digest(base.manifest.key or {"source": base.manifest.source_digest}),
           "precision": precision, "onnxruntime": ort.__version__,
           "calibration_seeds": list(CALIBRATION_SEEDS) if precision == "int8_static" else None,
           "calibration": str(handle.calibration) if handle.calibration else None,
           "reduce_range": reduce_range if precision.startswith("int8") else None}
    notes = []
    if precision.startswith("int8") and reduce_range:
        notes.append("int8 weights quantized to 7 bits (reduce_range): this x86 CPU has no "
                     "VNNI, and ORT's u8s8 kernels can saturate with 8-bit weights")
    step = {"src": "onnx", "dst": "onnx", "converter": f"onnxruntime {QUANTIZERS[precision]}",
            "package": "onnxruntime", "version": ort.__version__}

    def build_entry(folder: Path) -> dict[str, Any]:
        build(folder / "model.onnx")
        return {"notes": list(base.manifest.notes) + notes, "stored_precision": precision}

    try:
        return cached_entry("onnx", key, build_entry, entry="model.onnx", manifest={
            "format": "onnx", "backend": backend, "requested_precision": requested or precision,
            "route": [*base.manifest.route, step], "source_digest": base.manifest.source_digest})
    except Exception as e:
        line = (str(e).strip().splitlines() or [""])[0][:300]
        raise UnsupportedError(f"onnxruntime cannot produce a {precision} model: "
                               f"{type(e).__name__}: {line}", backend=backend,
                               precision=precision) from e


def _build_fp16(src: Path):
    def build(tmp: Path) -> None:
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = onnx.load(str(src))
        onnx.save(convert_float_to_float16(model, keep_io_types=True), str(tmp))
    return build


def x86_without_vnni() -> bool:
    """True on an x86 CPU without VNNI, where ORT's u8s8 int8 kernels can saturate, so
    weights are quantized to 7 bits (``reduce_range``, as ORT's documentation advises)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return True  # unknown x86: the safe choice
    return not any(f in flags for f in ("avx512_vnni", "avx_vnni", "avx512vnni"))


def _build_int8_dynamic(src: Path, reduce_range: bool):
    def build(tmp: Path) -> None:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8,
                         reduce_range=reduce_range)
    return build


def _build_int8_static(src: Path, handle: Any, input_names: list[str], reduce_range: bool):
    def build(tmp: Path) -> None:
        from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod,
                                              QuantFormat, QuantType, quantize_static)

        class SampleReader(CalibrationDataReader):
            """Calibration inputs: the handle's real samples, or synthetic ones per seed."""

            def __init__(self) -> None:
                self._it = iter(handle.calibration_inputs(len(CALIBRATION_SEEDS),
                                                          CALIBRATION_SEEDS[0]))

            def get_next(self):
                arrays = next(self._it, None)
                return None if arrays is None else dict(zip(input_names, arrays))

        quantize_static(str(src), str(tmp), SampleReader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        per_channel=True, reduce_range=reduce_range,
                        calibrate_method=CalibrationMethod.MinMax)
    return build


# ------------------------------------------------------------------------- profiling
def _profile_events(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def node_events(events: list[dict], skip_runs: int = 0) -> list[dict]:
    """Kernel events of ORT's profile, without those of the first ``skip_runs`` runs."""
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    start = runs[skip_runs]["ts"] if skip_runs and len(runs) > skip_runs else None
    out = []
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        if start is not None and e["ts"] < start:
            continue
        out.append(e)
    return out


def _executed_input_types(events: list[dict]) -> dict[str, set[str]]:
    """op type -> element types of its first input, as the kernels saw them."""
    seen: dict[str, set[str]] = {}
    for e in events:
        args = e.get("args", {})
        op = args.get("op_name")
        shapes = args.get("input_type_shape") or []
        if op in MAC_OPS and shapes:
            seen.setdefault(op, set()).add(next(iter(shapes[0])))
    return seen


def _probe_fp16(path: Path, threads: dict[str, int], device: str, feed: dict,
                graph_optimization: str = "all") -> tuple[str, str | None]:
    """Run one profiled inference of the fp16 model; return (executed precision, note)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="edgeprof-ort-probe-") as d:
        sess = _session(path, session_options(threads, profile_prefix=os.path.join(d, "probe"),
                                              graph_optimization=graph_optimization), device)
        sess.run(None, feed)
        events = node_events(_profile_events(sess.end_profiling()))
    types = _executed_input_types(events)
    half = sorted(op for op, ts in types.items() if "float16" in ts)
    full = sorted(op for op, ts in types.items() if "float" in ts)
    if half and not full:
        return "fp16", None
    if not half:
        return "fp32", (f"onnxruntime's {device.upper()} provider has no fp16 kernel for "
                        f"{', '.join(full) or 'the MAC ops'} here; it inserted casts and ran them "
                        "in fp32 (weights stored as fp16)")
    return "fp16", (f"mixed: {', '.join(half)} ran in fp16, {', '.join(full)} in fp32 "
                    "(onnxruntime inserted casts where it has no fp16 kernel)")


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    description = "ONNX Runtime on the model's ONNX export (CPU provider; CUDA provider on GPUs)"
    capabilities = Capabilities(precisions=("fp32", "fp16", "int8", "int8_static", "int8_dynamic"),
                                devices=("cpu", "cuda"), model_formats=("onnx",))
    quantizes = ("fp16", "int8", "int8_static", "int8_dynamic")
    requires = ("onnxruntime", "onnx")
    install_hint = "pip install 'edgeprof[onnx]'"
    Options = OnnxRuntimeOptions

    def build(self, model, precision: str, calibration: Any = None):
        """torch/tflite/... -> ONNX by the conversion graph, then ORT's own quantization."""
        from edgeprof.backends.common import built, converted

        self.check_precision(precision)
        canonical = "int8_static" if precision == "int8" else precision
        model, artifact = converted(self, model, precision, calibration)
        if canonical in QUANTIZERS:
            artifact = quantized_artifact(artifact, canonical, model, backend=self.name,
                                          requested=precision)
        return built(self, artifact, model, precision, canonical)

    def load(self, artifact, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """An InferenceSession on the artifact's .onnx (imports only onnxruntime)."""
        import onnxruntime as ort

        from edgeprof.backends.common import describe_artifact, physical_cores
        from edgeprof.backends.onnx_export import onnx_feed

        if config.device.startswith("cuda") and \
                "CUDAExecutionProvider" not in ort.get_available_providers():
            raise UnsupportedError("CUDA was asked for but this onnxruntime build has no CUDA "
                                   "provider (pip install onnxruntime-gpu on a machine with an "
                                   "NVIDIA GPU)", backend=self.name)
        threads = {"intra_op": config.threads or physical_cores(),
                   "inter_op": config.interop_threads}
        t0 = time.perf_counter()
        path = artifact.entry_path
        precision = artifact.manifest.stored_precision or "fp32"
        opts = self.options_for(config)
        sess = _session(path, session_options(threads, graph_optimization=opts.graph_optimization),
                        config.device, list(opts.providers) if opts.providers else None)
        names = [i.name for i in sess.get_inputs()]
        feed = onnx_feed(names, inputs)
        output_names = [o.name for o in sess.get_outputs()]
        load_time = time.perf_counter() - t0
        notes: list[str] = []
        executed = precision
        if precision == "fp16":
            executed, note = _probe_fp16(path, threads, config.device, feed,
                                         opts.graph_optimization)
            if note:
                notes.append(note)
        providers = sess.get_providers()
        device = "cuda" if providers and providers[0] in ("CUDAExecutionProvider",
                                                          "TensorrtExecutionProvider") else "cpu"

        def run(x):
            return sess.run(output_names, x)

        prepared = PreparedModel(
            run=run, inputs=feed, runtime="onnxruntime", runtime_version=ort.__version__,
            executed_precision=executed, threads=threads, device=device, load_time_s=load_time,
            notes=notes, to_numpy=_to_numpy, feed=lambda xs: onnx_feed(names, xs),
            extra={"providers": providers, "requested_precision": config.precision,
                   "graph_optimization_level": GRAPH_OPTIMIZATION[opts.graph_optimization]})
        describe_artifact(prepared, artifact, self.name)
        return prepared

    def operator_profile(self, prepared: PreparedModel, runs: int = 10,
                         trace_path: str | None = None):
        """Per-node kernel times from ORT's own profiler (``enable_profiling``), one warm-up
        run excluded. ``calls`` is calls per inference. The Chrome trace ORT writes is copied
        to ``trace_path``."""
        import shutil
        import tempfile

        from edgeprof.backends.common import operator_frame

        if runs < 1:
            raise UnsupportedError("operator_profile needs runs >= 1", backend=self.name)
        with tempfile.TemporaryDirectory(prefix="edgeprof-ort-prof-") as d:
            level = {v: k for k, v in GRAPH_OPTIMIZATION.items()}.get(
                prepared.extra.get("graph_optimization_level"), "all")
            so = session_options(prepared.threads, profile_prefix=os.path.join(d, "ort"),
                                 graph_optimization=level)
            sess = _session(prepared.extra["model_path"], so, prepared.device)
            for _ in range(runs + 1):
                sess.run(None, prepared.inputs)
            trace = sess.end_profiling()
            events = node_events(_profile_events(trace), skip_runs=1)
            if trace_path:
                tmp = f"{trace_path}.tmp"
                shutil.copyfile(trace, tmp)
                os.replace(tmp, trace_path)
        return operator_frame(
            [{"operator": e["name"][: -len("_kernel_time")],
              "op_type": e["args"].get("op_name", ""),
              "provider": e["args"].get("provider", ""), "us": e["dur"]} for e in events],
            runs, ["operator", "op_type", "latency_ms", "calls", "provider", "layer"])


@hookimpl
def edgeprof_register_backends():
    return [OnnxRuntimeBackend]

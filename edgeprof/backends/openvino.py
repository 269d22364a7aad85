"""OpenVINO backend: CPU plugin, latency hint, one infer request.

Models: torch modules go through edgeprof's cached ONNX export (one conversion path shared
with ONNX Runtime, node names that keep the torch module paths) and ``ov.convert_model``;
``.onnx`` files are converted the same way; IR ``.xml`` files are read as they are. The fp32
IR is cached (saved with ``compress_to_fp16=False``, so fp32 stays fp32).

Precisions: fp32 (``INFERENCE_PRECISION_HINT=f32``: CPUs with AVX-512 BF16 or AMX otherwise
run bf16), bf16 and fp16 through the hint, int8 / int8_static (NNCF post-training
quantization), int8_weight and int4_weight (NNCF weight compression). The executed precision
is read back from the compiled model and its execution graph, never assumed.
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
# _physical_cores: kept for benchmarks/openvino_vs_benchmark_app.py
from edgeprof.backends.common import physical_cores as _physical_cores
from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import ModelError, UnsupportedError, UserError
from edgeprof.core.hookspecs import hookimpl

#: requested precision -> INFERENCE_PRECISION_HINT
PRECISION_HINT = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "int8_static": "f32",
                  "int8_weight": "f32", "int4_weight": "f32"}
#: execution-graph layer types whose runtime precision says what the MACs ran in
MAC_LAYERS = ("Convolution", "GroupConvolution", "Deconvolution", "FullyConnected", "MatMul",
              "ScaledDotProductAttention", "Gemm")
OV_TO_PRECISION = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "i8": "int8_static",
                   "u8": "int8_static"}
CALIBRATION_SEEDS = tuple(range(1001, 1017))


def _quiet_nncf():
    import logging

    import nncf

    nncf.set_log_level(logging.ERROR)
    return nncf


def read_ov_model(path: str | Path):
    """``Core.read_model`` with a one-line :class:`ModelError` for unreadable files."""
    import openvino as ov

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file '{path}' does not exist", spec=str(path))
    if path.suffix == ".xml" and not path.with_suffix(".bin").is_file():
        raise ModelError(f"OpenVINO IR '{path}' has no weights file '{path.with_suffix('.bin').name}'"
                         " next to it; copy the .bin with the .xml", spec=str(path))
    try:
        return ov.Core().read_model(str(path))
    except Exception as e:
        line = (str(e).strip().splitlines() or [""])[0][:200]
        kind = "OpenVINO IR" if path.suffix == ".xml" else "model"
        raise ModelError(f"OpenVINO cannot read {kind} '{path}': {line} (the file is truncated "
                         "or not a valid model; re-export it)", spec=str(path)) from None


def _save(model, tmp: Path) -> None:
    import openvino as ov

    ov.save_model(model, str(tmp), compress_to_fp16=False)


def to_ir(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """The onnx/tflite -> openvino converter of the conversion graph: ``ov.convert_model``,
    saved as fp32 IR (``compress_to_fp16=False``, so fp32 stays fp32)."""
    import openvino as ov

    try:
        model = ov.convert_model(str(source.path))
    except Exception as e:
        line = (str(e).strip().splitlines() or [""])[0][:300]
        raise UnsupportedError(f"OpenVINO cannot convert the {source.format} model "
                               f"'{source.spec}': {line}", backend="openvino") from None
    _save(model, out / "model.xml")
    return {"entry": "model.xml"}


NNCF_PRECISIONS = ("int8_static", "int8_weight", "int4_weight")


def fp32_ir(handle: Any) -> tuple[Path, bool, dict, list[str]]:
    """The fp32 OpenVINO IR for ``handle`` by the conversion graph: (path, cache hit, cache
    key, notes)."""
    from edgeprof.core.plugins import get_graph

    route = OpenVINOBackend.route(handle.format, "fp32")
    art = get_graph().convert(handle, route, backend="openvino")
    return art.entry_path, art.cache_hit, dict(art.manifest.key), list(art.manifest.notes)


def _compressed_types(model) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in model.get_ops():
        if op.get_type_name() == "Constant":
            t = op.get_element_type().get_type_name()
            counts[t] = counts.get(t, 0) + 1
    return counts


def nncf_artifact(base, precision: str, handle: Any, *, requested: str | None = None):
    """The NNCF ``precision`` variant of an fp32 IR artifact (cached by content)."""
    import openvino as ov

    from edgeprof.core.cache import cached_entry, key_digest

    from edgeprof.backends.onnxruntime import x86_without_vnni

    nncf = _quiet_nncf()
    # Without VNNI, x86 int8 kernels can saturate; NNCF's overflow fix (7-bit weights) for
    # all layers avoids it (on AVX2 it cut the transformer's error from 0.36 to 0.03).
    overflow_fix = "enable" if x86_without_vnni() else "first_layer_only"
    ir = base.entry_path
    vkey = {"previous": key_digest(base.manifest.key or {"source": base.manifest.source_digest}),
            "calibration": str(handle.calibration) if handle.calibration else None,
            "precision": precision, "nncf": nncf.__version__,
            "openvino": ov.__version__, "overflow_fix": overflow_fix,
            "calibration_seeds": list(CALIBRATION_SEEDS) if precision == "int8_static" else None}

    step = {"src": "openvino", "dst": "openvino", "converter": f"nncf {precision}",
            "package": "nncf", "version": nncf.__version__}

    def build(folder: Path) -> dict[str, Any]:
        tmp = folder / "model.xml"
        model = ov.Core().read_model(str(ir))
        if precision == "int8_static":
            from nncf.quantization.advanced_parameters import (AdvancedQuantizationParameters,
                                                               OverflowFix)

            samples = handle.calibration_inputs(len(CALIBRATION_SEEDS), CALIBRATION_SEEDS[0])
            # one input: the array itself; several: a tuple, in the model's input order
            items = [s[0] if len(s) == 1 else tuple(s) for s in samples]
            out = nncf.quantize(model, nncf.Dataset(items), subset_size=len(items),
                                advanced_parameters=AdvancedQuantizationParameters(
                                    overflow_fix=OverflowFix(overflow_fix)))
        elif precision == "int8_weight":
            out = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
        else:  # int4_weight
            from nncf.quantization.advanced_parameters import AdvancedCompressionParameters

            out = nncf.compress_weights(
                model, mode=nncf.CompressWeightsMode.INT4_SYM, ratio=1.0, group_size=128,
                advanced_parameters=AdvancedCompressionParameters(
                    group_size_fallback_mode=nncf.GroupSizeFallbackMode.ADJUST))
            types = _compressed_types(out)
            if not (types.get("i4") or types.get("u4")):
                raise UnsupportedError(
                    f"model '{handle.spec}' has no layer eligible for 4-bit weights: NNCF "
                    "compresses MatMul/Linear weights to 4 bit but keeps the first and last "
                    "weighted layers and all convolutions at 8 bit; use int8_weight",
                    backend="openvino", precision="int4_weight")
        _save(out, tmp)
        return {"stored_precision": precision, "notes": list(base.manifest.notes)}

    import contextlib
    import io

    try:
        # NNCF draws progress bars on the console; edgeprof's progress goes elsewhere
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return cached_entry("openvino", vkey, build, entry="model.xml", manifest={
                "format": "openvino", "backend": "openvino",
                "requested_precision": requested or precision,
                "route": [*base.manifest.route, step],
                "source_digest": base.manifest.source_digest})
    except UnsupportedError:
        raise
    except Exception as e:
        line = (str(e).strip().splitlines() or [""])[0][:300]
        raise UnsupportedError(f"NNCF cannot produce a {precision} model of '{handle.spec}': "
                               f"{type(e).__name__}: {line}", backend="openvino",
                               precision=precision) from e


def runtime_precisions(compiled) -> dict[str, set[str]]:
    """Execution-graph layer type -> runtime precisions, for the MAC layers."""
    seen: dict[str, set[str]] = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        layer = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        if layer in MAC_LAYERS and "runtimePrecision" in info:
            seen.setdefault(layer, set()).add(info["runtimePrecision"].astype(str).lower())
    return seen


def executed_precision(compiled, requested: str) -> tuple[str, str, dict[str, list[str]]]:
    """(executed precision, the hint read back, runtime precisions of the MAC layers)."""
    hint = compiled.get_property("INFERENCE_PRECISION_HINT")
    hint_name = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    seen = runtime_precisions(compiled)
    counts: dict[str, int] = {}
    for precisions in seen.values():
        for p in precisions:
            counts[p] = counts.get(p, 0) + 1
    main = max(counts, key=counts.get) if counts else hint_name
    executed = OV_TO_PRECISION.get(main, OV_TO_PRECISION.get(hint_name, "fp32"))
    if requested in ("int8_weight", "int4_weight"):
        # compressed weights are decompressed inside the kernels (their runtime precision
        # reads u8/i4); the arithmetic runs in the inference precision
        executed = requested if hint_name == "f32" else OV_TO_PRECISION.get(hint_name, hint_name)
    return executed, hint_name, {k: sorted(v) for k, v in seen.items()}


def _ov_inputs(compiled, inputs: Sequence[Any]) -> list:
    if len(compiled.inputs) != len(inputs):
        from edgeprof.core.errors import InputSpecError

        raise InputSpecError(f"the model takes {len(compiled.inputs)} inputs but {len(inputs)} "
                             "were given; repeat --input-shape once per input")
    return list(inputs)


def _bind_inputs(ov, request, feed: Sequence[Any]) -> bool:
    """Bind ``feed`` to ``request``'s inputs once, sharing the arrays' memory; False (and
    nothing bound) when OpenVINO does not take them as they are."""
    try:
        for i, a in enumerate(feed):
            request.set_input_tensor(i, ov.Tensor(a, shared_memory=True))
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class OpenVINOOptions:
    """CPU plugin knobs. The defaults are how ``benchmark_app -hint none -nstreams 1 -api sync``
    measures latency (benchmarks/results/openvino_vs_benchmark_app.txt); the harness runs one
    synchronous infer request whatever these say, so more streams only split the threads."""

    #: the plugin's PERFORMANCE_HINT; "none" sets none (measured faster than "latency" here)
    performance_hint: Literal["none", "latency", "throughput"] = "none"
    #: NUM_STREAMS (CPU streams the threads are split into)
    num_streams: int = 1


class OpenVINOBackend(Backend):
    name = "openvino"
    description = ("OpenVINO CPU plugin (latency: 1 stream, inputs bound once); NNCF for int8 "
                   "and weight compression")
    capabilities = Capabilities(
        precisions=("fp32", "fp16", "bf16", "int8", "int8_static", "int8_weight", "int4_weight"),
        devices=("cpu",), model_formats=("openvino",))
    quantizes = ("fp16", "bf16", "int8", "int8_static", "int8_weight", "int4_weight")
    requires = ("openvino",)
    install_hint = "pip install 'edgeprof[openvino]'"
    Options = OpenVINOOptions

    def build(self, model, precision: str, calibration: Any = None):
        """Any format -> IR by the conversion graph, then NNCF for int8 / weight compression."""
        from edgeprof.backends.common import built, converted
        from edgeprof.core.importing import modules_present

        self.check_precision(precision)
        canonical = "int8_static" if precision == "int8" else precision
        missing = modules_present("nncf") if canonical in NNCF_PRECISIONS else None
        if missing:
            raise UnsupportedError(f"{canonical} on openvino needs '{missing}': "
                                   f"{self.install_hint}", backend=self.name, precision=precision)
        model, artifact = converted(self, model, precision, calibration)
        read_ov_model(artifact.entry_path)  # one-line ModelError for an unreadable IR
        if canonical in NNCF_PRECISIONS:
            artifact = nncf_artifact(artifact, canonical, model, requested=precision)
        return built(self, artifact, model, precision, canonical)

    def load(self, artifact, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """Compile the artifact's IR on the CPU plugin (imports only openvino)."""
        import openvino as ov

        from edgeprof.backends.common import describe_artifact

        precision = "int8_static" if config.precision == "int8" else config.precision
        threads = {"intra_op": config.threads or _physical_cores(), "inter_op": 1}
        t0 = time.perf_counter()
        notes: list[str] = []
        core = ov.Core()
        ov_model = read_ov_model(artifact.entry_path)
        opts = self.options_for(config)
        if opts.num_streams < 1:
            raise UserError(f"backend '{self.name}' option 'num_streams' must be >= 1, got "
                            f"{opts.num_streams}")
        properties = self.compile_properties(precision, threads["intra_op"],
                                             num_streams=opts.num_streams,
                                             performance_hint=opts.performance_hint)
        compiled = core.compile_model(ov_model, "CPU", properties)
        request = compiled.create_infer_request()
        load_time = time.perf_counter() - t0
        executed, hint, seen = executed_precision(compiled, precision)
        if PRECISION_HINT[precision] != hint:
            notes.append(f"asked OpenVINO for {PRECISION_HINT[precision]}; the CPU plugin runs "
                         f"{hint} (this CPU has no {PRECISION_HINT[precision]} arithmetic)")
        threads["intra_op"] = int(compiled.get_property("INFERENCE_NUM_THREADS"))
        feed = _ov_inputs(compiled, inputs)
        bound = _bind_inputs(ov, request, feed)

        def run(xs):
            # the timed inputs are bound once, as benchmark_app does: infer() with arguments
            # wraps each array again on every call, ~15% of a small model's latency here
            # (benchmarks/results/openvino_vs_benchmark_app.txt)
            if bound and xs is feed:
                return request.infer()
            return request.infer(xs, share_inputs=True)

        prepared = PreparedModel(
            run=run, inputs=feed, runtime="openvino", runtime_version=ov.get_version(),
            executed_precision=executed, threads=threads, device="cpu", load_time_s=load_time,
            notes=notes, to_numpy=_to_numpy, feed=lambda xs: _ov_inputs(compiled, xs),
            extra={"inference_precision_hint": hint, "runtime_precisions": seen,
                   "requested_precision": config.precision,
                   "compile_properties": {k: str(v) for k, v in properties.items()}})
        describe_artifact(prepared, artifact, self.name)
        return prepared

    @staticmethod
    def compile_properties(precision: str, threads: int, *, perf_count: bool = False,
                           num_streams: int = 1, performance_hint: str = "none"
                           ) -> dict[str, Any]:
        # latency as `benchmark_app -hint none -nstreams 1 -nthreads n -api sync` runs it: no
        # performance hint (the plugin's default mode is latency; setting the hint explicitly
        # measured slower here), one stream, the threads asked for, and the precision asked
        # for (left alone, the CPU plugin runs bf16 where the CPU has it, as benchmark_app
        # does by default). benchmarks/results/openvino_vs_benchmark_app.txt
        properties = {"NUM_STREAMS": num_streams, "INFERENCE_NUM_THREADS": threads,
                      "INFERENCE_PRECISION_HINT": PRECISION_HINT[precision],
                      "PERF_COUNT": perf_count}
        if performance_hint != "none":
            properties["PERFORMANCE_HINT"] = performance_hint.upper()
        return properties

    def operator_profile(self, prepared: PreparedModel, runs: int = 10,
                         trace_path: str | None = None):
        """Per-node times from OpenVINO's performance counters (``PERF_COUNT``), one warm-up
        run excluded; ``calls`` is executions per inference. The Chrome trace written to
        ``trace_path`` lays each run's nodes end to end in execution order: durations are
        measured, start times are reconstructed (OpenVINO reports no timestamps)."""
        import openvino as ov

        from edgeprof.backends.common import operator_frame

        if runs < 1:
            raise UnsupportedError("operator_profile needs runs >= 1", backend=self.name)
        precision = prepared.extra["requested_precision"]
        precision = "int8_static" if precision == "int8" else precision
        used = prepared.extra.get("compile_properties") or {}  # the timed run's streams/hint
        compiled = ov.Core().compile_model(
            read_ov_model(prepared.extra["model_path"]), "CPU",
            self.compile_properties(precision, prepared.threads["intra_op"], perf_count=True,
                                    num_streams=int(used.get("NUM_STREAMS", 1)),
                                    performance_hint=str(used.get("PERFORMANCE_HINT",
                                                                  "none")).lower()))
        request = compiled.create_infer_request()
        request.infer(prepared.inputs)  # warm-up
        measured: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        clock = 0.0
        for r in range(runs):
            request.infer(prepared.inputs)
            for info in request.get_profiling_info():
                if info.status != info.Status.EXECUTED:
                    continue
                us = info.real_time.total_seconds() * 1e6
                measured.append({"operator": info.node_name, "op_type": info.node_type,
                                 "exec_type": info.exec_type, "us": us})
                events.append({"name": info.node_name, "cat": info.node_type, "ph": "X",
                               "ts": round(clock, 3), "dur": round(us, 3), "pid": 0, "tid": 0,
                               "args": {"exec_type": info.exec_type, "run": r}})
                clock += us
        if trace_path:
            doc = {"traceEvents": events, "displayTimeUnit": "ms",
                   "otherData": {"runtime": "openvino", "version": ov.get_version(),
                                 "note": "durations measured by OpenVINO performance counters; "
                                         "start times laid end to end"}}
            tmp = f"{trace_path}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(tmp, trace_path)
        return operator_frame(measured, runs, ["operator", "op_type", "latency_ms", "calls",
                                               "exec_type", "layer"])



@hookimpl
def edgeprof_register_backends():
    return [OpenVINOBackend]

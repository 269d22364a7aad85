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
from pathlib import Path
from typing import Any

from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import ModelError, UnsupportedError
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


def _physical_cores() -> int:
    import psutil

    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


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


def fp32_ir(handle: Any, *, exporter: str | None = None) -> tuple[Path, bool, dict, list[str]]:
    """The fp32 OpenVINO IR for ``handle``: (path, cache hit, cache key, notes)."""
    import openvino as ov

    from edgeprof.core.cache import cached_artifact, model_fingerprint

    if handle.format == "openvino":
        read_ov_model(handle.path)
        return Path(handle.path), True, {"ir_file": model_fingerprint(handle)}, []
    from edgeprof.backends.onnx_export import export_onnx

    source = export_onnx(handle, exporter=exporter, backend="openvino")
    key = {"source": source.key, "openvino": ov.__version__}

    def build(tmp: Path) -> None:
        try:
            model = ov.convert_model(str(source.path))
        except Exception as e:
            line = (str(e).strip().splitlines() or [""])[0][:300]
            raise UnsupportedError(f"OpenVINO cannot convert the ONNX model of '{handle.spec}': "
                                   f"{line}", backend="openvino") from None
        _save(model, tmp)

    path, hit = cached_artifact("openvino", key, "model.xml", build)
    return path, hit, key, list(source.notes)


def _compressed_types(model) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in model.get_ops():
        if op.get_type_name() == "Constant":
            t = op.get_element_type().get_type_name()
            counts[t] = counts.get(t, 0) + 1
    return counts


def _variant(ir: Path, key: dict, precision: str, handle: Any) -> tuple[Path, bool]:
    import openvino as ov

    from edgeprof.core.cache import cached_artifact

    from edgeprof.backends.onnxruntime import x86_without_vnni

    nncf = _quiet_nncf()
    # Without VNNI, x86 int8 kernels can saturate; NNCF's overflow fix (7-bit weights) for
    # all layers avoids it (on AVX2 it cut the transformer's error from 0.36 to 0.03).
    overflow_fix = "enable" if x86_without_vnni() else "first_layer_only"
    vkey = {"source": key, "precision": precision, "nncf": nncf.__version__,
            "openvino": ov.__version__, "overflow_fix": overflow_fix,
            "calibration_seeds": list(CALIBRATION_SEEDS) if precision == "int8_static" else None}

    def build(tmp: Path) -> None:
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

    import contextlib
    import io

    try:
        # NNCF draws progress bars on the console; edgeprof's progress goes elsewhere
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return cached_artifact("openvino", vkey, "model.xml", build)
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


class OpenVINOBackend(Backend):
    name = "openvino"
    description = "OpenVINO CPU plugin (latency hint); NNCF for int8 and weight compression"
    capabilities = Capabilities(
        precisions=("fp32", "fp16", "bf16", "int8", "int8_static", "int8_weight", "int4_weight"),
        devices=("cpu",), model_formats=("torch", "onnx", "openvino"), per_operator_profile=True)
    requires = ("openvino",)
    install_hint = "pip install 'edgeprof[openvino]'"

    def prepare(self, model, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        self.check_request(model, config)
        precision = "int8_static" if config.precision == "int8" else config.precision
        needs = (["onnx"] if model.format != "openvino" else []) + \
            (["nncf"] if precision.startswith("int") else [])
        from edgeprof.core.backend import modules_present

        missing = modules_present(*needs)
        if missing:
            raise UnsupportedError(f"{precision} on openvino needs '{missing}': "
                                   f"{self.install_hint}", backend=self.name, precision=precision)
        import openvino as ov

        from edgeprof.backends.onnx_export import check_against_source

        threads = {"intra_op": config.threads or _physical_cores(), "inter_op": 1}
        t0 = time.perf_counter()
        ir, hit, key, notes = fp32_ir(model, exporter=config.options.get("onnx_exporter"))
        path = ir
        if precision in ("int8_static", "int8_weight", "int4_weight"):
            path, hit = _variant(ir, key, precision, model)
        core = ov.Core()
        ov_model = read_ov_model(path)
        properties = self.compile_properties(precision, threads["intra_op"])
        compiled = core.compile_model(ov_model, "CPU", properties)
        request = compiled.create_infer_request()
        load_time = time.perf_counter() - t0
        executed, hint, seen = executed_precision(compiled, precision)
        if PRECISION_HINT[precision] != hint:
            notes.append(f"asked OpenVINO for {PRECISION_HINT[precision]}; the CPU plugin runs "
                         f"{hint} (this CPU has no {PRECISION_HINT[precision]} arithmetic)")
        threads["intra_op"] = int(compiled.get_property("INFERENCE_NUM_THREADS"))
        feed = _ov_inputs(compiled, inputs)

        def run(xs):
            return request.infer(xs, share_inputs=True)

        outputs = _to_numpy(run(feed))
        agreement: dict[str, Any]
        if model.format == "openvino":
            agreement = {"reference": None, "precision": precision,
                         "reason": "an IR file has no source model to check against"}
        elif model.format == "onnx" and modules_present("onnxruntime"):
            agreement = {"reference": None, "precision": precision,
                         "reason": "checking an .onnx file's conversion needs onnxruntime"}
        else:
            agreement = check_against_source(model, inputs, outputs, precision, executed,
                                             self.name, notes)
        size = sum(p.stat().st_size for p in (Path(path), Path(path).with_suffix(".bin"))
                   if p.is_file())
        return PreparedModel(
            run=run, inputs=feed, runtime="openvino", runtime_version=ov.get_version(),
            executed_precision=executed, threads=threads, device="cpu", load_time_s=load_time,
            notes=notes, to_numpy=_to_numpy,
            extra={"agreement": agreement, "model_path": str(path), "cache_hit": hit,
                   "model_bytes": size, "inference_precision_hint": hint,
                   "runtime_precisions": seen, "requested_precision": config.precision,
                   "compile_properties": {k: str(v) for k, v in properties.items()}})

    @staticmethod
    def compile_properties(precision: str, threads: int, *, perf_count: bool = False
                           ) -> dict[str, Any]:
        return {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
                "INFERENCE_PRECISION_HINT": PRECISION_HINT[precision],
                "PERF_COUNT": perf_count}

    def operator_profile(self, prepared: PreparedModel, runs: int = 10,
                         trace_path: str | None = None):
        """Per-node times from OpenVINO's performance counters (``PERF_COUNT``), one warm-up
        run excluded; ``calls`` is executions per inference. The Chrome trace written to
        ``trace_path`` lays each run's nodes end to end in execution order: durations are
        measured, start times are reconstructed (OpenVINO reports no timestamps)."""
        import openvino as ov
        import pandas as pd

        from edgeprof.backends.onnx_export import module_path

        if runs < 1:
            raise UnsupportedError("operator_profile needs runs >= 1", backend=self.name)
        precision = prepared.extra["requested_precision"]
        precision = "int8_static" if precision == "int8" else precision
        compiled = ov.Core().compile_model(
            read_ov_model(prepared.extra["model_path"]), "CPU",
            self.compile_properties(precision, prepared.threads["intra_op"], perf_count=True))
        request = compiled.create_infer_request()
        request.infer(prepared.inputs)  # warm-up
        rows: dict[str, dict[str, Any]] = {}
        events: list[dict[str, Any]] = []
        clock = 0.0
        for r in range(runs):
            request.infer(prepared.inputs)
            for info in request.get_profiling_info():
                if info.status != info.Status.EXECUTED:
                    continue
                us = info.real_time.total_seconds() * 1e6
                row = rows.setdefault(info.node_name, {
                    "operator": info.node_name, "op_type": info.node_type, "latency_ms": 0.0,
                    "calls": 0, "exec_type": info.exec_type,
                    "layer": module_path(info.node_name)})
                row["latency_ms"] += us / 1000.0
                row["calls"] += 1
                events.append({"name": info.node_name, "cat": info.node_type, "ph": "X",
                               "ts": round(clock, 3), "dur": round(us, 3), "pid": 0, "tid": 0,
                               "args": {"exec_type": info.exec_type, "run": r}})
                clock += us
        for row in rows.values():
            row["latency_ms"] /= runs
            row["calls"] = row["calls"] / runs
        if trace_path:
            doc = {"traceEvents": events, "displayTimeUnit": "ms",
                   "otherData": {"runtime": "openvino", "version": ov.get_version(),
                                 "note": "durations measured by OpenVINO performance counters; "
                                         "start times laid end to end"}}
            tmp = f"{trace_path}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(tmp, trace_path)
        return pd.DataFrame(list(rows.values()),
                            columns=["operator", "op_type", "latency_ms", "calls", "exec_type",
                                     "layer"])


def _to_numpy(outputs: Any) -> list:
    import numpy as np

    values = outputs.values() if hasattr(outputs, "values") else outputs
    return [np.array(v) for v in values]


@hookimpl
def edgeprof_register_backends():
    return [OpenVINOBackend]

"""ncnn backend: Tencent's ncnn (the ``ncnn`` wheel) on the CPU, models converted by pnnx.

Conversion (two edges of the conversion graph, cached like the others): torch -> ncnn (the
module traced to TorchScript, then the ``pnnx`` tool) and .onnx -> ncnn (``pnnx`` reads
ONNX). The artifact is ncnn's ``model.ncnn.param`` + ``model.ncnn.bin``; a layer type that
pnnx left in the graph and ncnn does not have is refused at conversion, naming it.

Precisions:

- ``fp32``: fp16 storage/packing/arithmetic switched off (ncnn's defaults turn them on where
  the CPU has them).
- ``fp16``: ncnn's fp16 storage, packing and arithmetic options. Only a CPU with fp16
  arithmetic (ARMv8.2 ``asimdhp``) computes in fp16; elsewhere (x86 here) ncnn runs the
  model in fp32 and the executed precision says so.
- ``int8``: not offered. ncnn's post-training quantization is the ``ncnn2table`` +
  ``ncnn2int8`` tools of its source build, which the wheel does not carry.

Threads: ``RunConfig.threads`` as ncnn's ``opt.num_threads`` (default: physical cores).
``--device vulkan``: ncnn's Vulkan compute, refused with the reason where no Vulkan device
is found. Per-layer timing: ncnn times layers only when built with ``NCNN_BENCHMARK``, which
the wheel is not, so ``operator_profile`` returns None.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgeprof.backends.native_runtimes import NativeRuntime
from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import ModelError, UnsupportedError
from edgeprof.core.importing import dist_version
from edgeprof.core.formats import Converter, Format
from edgeprof.core.hookspecs import registers

INSTALL_HINT = "pip install 'edgeprof[ncnn]'"
FORMATS = [Format("ncnn", "ncnn .param/.bin", (".param",), companions=(".bin",))]
CONVERTERS = [
    Converter("torch", "ncnn", "pnnx", "pnnx", "edgeprof.backends.ncnn:torch_to_ncnn",
              cost=1.0, modules=("pnnx", "torch", "ncnn"), install_hint=INSTALL_HINT),
    Converter("onnx", "ncnn", "pnnx", "pnnx", "edgeprof.backends.ncnn:onnx_to_ncnn",
              cost=1.0, modules=("pnnx", "ncnn"), install_hint=INSTALL_HINT),
]
#: pnnx's input type suffixes by numpy dtype
_PNNX_TYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64",
               "int32": "i32", "int8": "i8", "uint8": "u8", "bool": "u8"}
#: ncnn .param lines that are not layers of the model
_NOT_LAYERS = {"Input", "Split"}


def ncnn_version() -> str:
    return dist_version("ncnn", "unknown")


# -------------------------------------------------------------------------- conversion
def _inputshape(handle: Any) -> str:
    return ",".join("[" + ",".join(str(int(d)) for d in s.shape) + "]"
                    + _PNNX_TYPES.get(s.dtype, "f32") for s in handle.input_specs)


def _pnnx(model_file: Path, handle: Any, out: Path, work: Path) -> dict[str, Any]:
    """Run pnnx on ``model_file`` (TorchScript .pt or .onnx); ncnn's files land in ``out``,
    pnnx's own intermediates in ``work``."""
    import pnnx

    from edgeprof.backends.native_runtimes import last_lines, run_tool

    stem = work / "m"
    argv = [pnnx.EXEC_PATH, str(model_file), f"inputshape={_inputshape(handle)}",
            f"ncnnparam={out / 'model.ncnn.param'}", f"ncnnbin={out / 'model.ncnn.bin'}",
            f"pnnxparam={stem}.pnnx.param", f"pnnxbin={stem}.pnnx.bin",
            f"pnnxpy={stem}_pnnx.py", f"pnnxonnx={stem}.pnnx.onnx", f"ncnnpy={stem}_ncnn.py",
            "fp16=0"]  # fp32 weights on disk: the run options choose fp16 storage
    rc, text = run_tool(argv, cwd=work)
    param = out / "model.ncnn.param"
    if rc != 0 or not param.is_file() or not (out / "model.ncnn.bin").is_file():
        ops = sorted(set(re.findall(r"(?:unsupported|not supported|unknown)\s+\w*\s*op\w*\s*[=:]?\s*"
                                    r"([\w.:]+)", text, flags=re.I)))
        raise UnsupportedError(
            f"pnnx cannot convert '{handle.spec}' to ncnn"
            + (f" (operator {', '.join(ops)})" if ops else "")
            + f": exit {rc}: {last_lines(text)}", backend="ncnn")
    unknown = unknown_layers(param)
    if unknown:
        raise UnsupportedError(
            f"pnnx converted '{handle.spec}' but left operator(s) ncnn {ncnn_version()} has no "
            f"layer for: {', '.join(unknown)}; rewrite them with supported ops or use another "
            "backend", backend="ncnn")
    return {"entry": "model.ncnn.param"}


def param_layers(param: Path) -> list[tuple[str, str]]:
    """(type, name) of each layer of an ncnn .param file."""
    lines = Path(param).read_text(encoding="utf-8", errors="replace").splitlines()
    rows = [line.split() for line in lines[2:]]
    return [(parts[0], parts[1]) for parts in rows if len(parts) >= 2]


def unknown_layers(param: Path) -> list[str]:
    """Layer types of ``param`` that this ncnn cannot create (what pnnx could not lower)."""
    import ncnn

    return sorted({t for t, _ in param_layers(param) if ncnn.layer_to_index(t) < 0})


def torch_to_ncnn(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """torch module -> TorchScript (``torch.jit.trace``) -> pnnx -> ncnn."""
    import warnings

    import torch

    module = source.torch_module().eval()
    args = tuple(torch.from_numpy(a) for a in source.make_inputs(0))
    with tempfile.TemporaryDirectory(prefix="edgeprof-pnnx-") as d:
        work = Path(d)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            try:
                traced = torch.jit.trace(module, args, check_trace=False)
            except Exception as e:  # noqa: BLE001 - tracing names what it could not take
                from edgeprof.backends.common import first_line

                raise UnsupportedError(f"pnnx needs a TorchScript trace of '{source.spec}', "
                                       f"and tracing failed: {first_line(e)}",
                                       backend="ncnn") from None
        traced.save(str(work / "m.pt"))
        return _pnnx(work / "m.pt", source, out, work)


def onnx_to_ncnn(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """.onnx -> pnnx -> ncnn."""
    from edgeprof.backends.onnx_export import load_onnx

    load_onnx(source.path, check=False)  # one-line ModelError for a broken file
    with tempfile.TemporaryDirectory(prefix="edgeprof-pnnx-") as d:
        work = Path(d)
        shutil.copyfile(source.path, work / "m.onnx")
        return _pnnx(work / "m.onnx", source, out, work)


# ---------------------------------------------------------------------------- backend
def _vulkan_devices() -> int:
    import ncnn

    try:
        return int(ncnn.get_gpu_count())
    except Exception:  # noqa: BLE001 - a wheel built without Vulkan
        return 0


class NcnnBackend(NativeRuntime, Backend):
    name = "ncnn"
    description = "Tencent ncnn on the CPU (models converted by pnnx; Vulkan where a GPU has it)"
    capabilities = Capabilities(precisions=("fp32", "fp16"), devices=("cpu", "vulkan"),
                                model_formats=("ncnn",))
    quantizes = ("fp16",)
    requires = ("ncnn",)
    install_hint = INSTALL_HINT
    unoffered = {
        "int8": "ncnn's post-training quantization is the ncnn2table and ncnn2int8 tools of "
                "its source build, which the ncnn wheel does not carry (build ncnn with "
                "-DNCNN_BUILD_TOOLS=ON, then: ncnn2table model.ncnn.param model.ncnn.bin "
                "imagelist.txt model.table mean=... norm=... shape=... method=kl; "
                "ncnn2int8 model.ncnn.param model.ncnn.bin int8.param int8.bin model.table)",
    }
    unoffered["int8_static"] = unoffered["int8"]

    one_sample = True
    fp16_fallback = "ncnn ran the fp16 request in fp32"

    @staticmethod
    def agreement(stored: str, requested: str) -> str:
        """fp32 weights on disk; fp16 is a run option, so the check takes the requested
        precision's tolerance."""
        return requested

    @classmethod
    def check_request(cls, model, config: RunConfig) -> None:
        super().check_request(model, config)
        if config.device.startswith("vulkan") and _vulkan_devices() == 0:
            raise UnsupportedError("ncnn found no Vulkan device on this machine (no GPU with a "
                                   "Vulkan driver, or libvulkan is missing); use --device cpu",
                                   backend=cls.name)

    def load(self, artifact, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """An ncnn Net on the artifact's .param/.bin (imports only ncnn and numpy)."""
        import ncnn
        import numpy as np

        from edgeprof.backends.common import describe_artifact, physical_cores

        t0 = time.perf_counter()
        param = Path(artifact.entry_path)
        weights = param.with_suffix(".bin")
        threads = int(config.threads or physical_cores())
        fp16 = config.precision == "fp16"
        vulkan = config.device.startswith("vulkan")
        net = ncnn.Net()
        opt = net.opt
        opt.num_threads = threads
        opt.use_vulkan_compute = vulkan
        opt.use_fp16_storage = opt.use_fp16_packed = opt.use_fp16_arithmetic = fp16
        opt.use_bf16_storage = False
        if net.load_param(str(param)) != 0 or net.load_model(str(weights)) != 0:
            unknown = unknown_layers(param) if param.is_file() else []
            raise ModelError(f"ncnn cannot load '{param}'"
                             + (f": no layer for {', '.join(unknown)}" if unknown else
                                f" with its weights '{weights.name}' (truncated, or a .bin of "
                                "another .param)"), spec=str(param))
        in_names, out_names = list(net.input_names()), list(net.output_names())
        if len(in_names) != len(inputs):
            from edgeprof.core.errors import InputSpecError

            raise InputSpecError(f"'{param.name}' takes {len(in_names)} input(s), got "
                                 f"{len(inputs)}")

        def feed(xs: Sequence[Any]) -> list:
            """numpy -> ncnn Mats without the batch axis (ncnn has none), outside the timed
            run."""
            return [ncnn.Mat(np.ascontiguousarray(np.asarray(x, dtype=np.float32)[0])).clone()
                    for x in xs]

        def run(mats):
            ex = net.create_extractor()
            for name, m in zip(in_names, mats):
                ex.input(name, m)
            outs = []
            for name in out_names:
                rc, y = ex.extract(name)
                if rc != 0:
                    raise RuntimeError(f"ncnn extract('{name}') returned {rc}")
                outs.append(y)
            return outs

        def to_numpy(outputs) -> list:
            return [np.array(y)[None] for y in outputs]

        executed, note = self.executed(config.precision)
        notes = [note] if note else []
        notes.append("per-layer times: the ncnn wheel is built without NCNN_BENCHMARK, so ncnn "
                     "exposes none")
        load_time = time.perf_counter() - t0

        def close():
            nonlocal net
            net = None

        prepared = PreparedModel(
            run=run, inputs=feed(inputs), runtime="ncnn", runtime_version=ncnn_version(),
            executed_precision=executed, threads={"intra_op": threads},
            device="vulkan" if vulkan else "cpu", load_time_s=load_time, notes=notes,
            close=close, to_numpy=to_numpy, feed=feed,
            extra={"requested_precision": config.precision, "fp16_storage": fp16,
                   "fp16_arithmetic": fp16 and executed == "fp16",
                   "layers": len([t for t, _ in param_layers(param) if t not in _NOT_LAYERS])})
        describe_artifact(prepared, artifact, self.name)
        return prepared


edgeprof_register_formats = registers(FORMATS)
edgeprof_register_converters = registers(CONVERTERS)
edgeprof_register_backends = registers([NcnnBackend])

"""ExecuTorch backend: PyTorch's on-device runtime with the XNNPACK delegate, run through
its Python runtime (``executorch.runtime``).

Build (an edge of the conversion graph, cached like the others): ``torch.export`` ->
``to_edge_transform_and_lower`` with the XNNPACK partitioner -> ``.to_executorch()`` ->
``model.pte``. An .onnx model gets there through onnx -> torch (onnx2torch).

Precisions: ``fp32``; ``int8`` / ``int8_static``: the XNNPACK PT2E quantizer (symmetric,
per-channel weights, static activations calibrated on sample inputs) before lowering.

Operators the partitioner leaves outside XNNPACK run on ExecuTorch's portable kernels: the
build lists them, and each run warns (``undelegated_ops``) naming them.

Threads: ``RunConfig.threads`` resets ExecuTorch's process-wide thread pool
(``_unsafe_reset_threadpool``), which XNNPACK uses. Per-operator timing: the Python runtime
exposes no profiler (ETDump needs a runtime built with event tracing), so
``operator_profile`` returns None.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgeprof.backends.native_runtimes import NativeRuntime
from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig, add_warning
from edgeprof.core.errors import InputSpecError, ModelError, UnsupportedError
from edgeprof.core.importing import dist_version
from edgeprof.core.formats import Converter, Format
from edgeprof.core.hookspecs import registers

INSTALL_HINT = "pip install 'edgeprof[executorch]'"
PRECISIONS = ("fp32", "int8", "int8_static")
FORMATS = [Format("executorch", "ExecuTorch programs (.pte)", (".pte",))]
CONVERTERS = [
    Converter("torch", "executorch", "executorch XNNPACK", "executorch",
              "edgeprof.backends.executorch:torch_to_pte", PRECISIONS, cost=1.0,
              modules=("executorch", "torch"), install_hint=INSTALL_HINT),
]
#: calibration inputs of the PT2E quantizer (seeds distinct from the agreement's)
CALIBRATION_SEEDS = tuple(range(1001, 1017))
#: graph nodes of a lowered program that are not operators
_NOT_OPS = ("getitem", "executorch_call_delegate")
DELEGATION_FILE = "delegation.json"


def _quiet_imports():
    """ExecuTorch and torchao warn at import (missing CUDA kernels of torchao, deprecations);
    none of it concerns a CPU build."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", module=r"(torchao|executorch|torch)\b.*")
    logging.getLogger("torchao").setLevel(logging.ERROR)


def undelegated(program: Any) -> list[str]:
    """Operators of a lowered ExecuTorch program left outside the delegate."""
    gm = program.exported_program().graph_module
    ops = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if not any(n in name for n in _NOT_OPS):
            ops.append(str(node.target).replace("aten.", "").split(".default")[0])
    return sorted(set(ops))


def torch_to_pte(source: Any, out: Path, precision: str) -> dict[str, Any]:
    """torch.export -> (PT2E int8) -> edge, XNNPACK partitioner -> .pte."""
    import warnings

    _quiet_imports()
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from edgeprof.backends.common import first_line

    module = source.torch_module().eval()
    args = tuple(torch.from_numpy(a) for a in source.make_inputs(0))
    notes = []
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            exported = torch.export.export(module, args)
        except Exception as e:  # noqa: BLE001 - export names what it could not capture
            raise UnsupportedError(f"torch.export cannot capture '{source.spec}' for "
                                   f"ExecuTorch: {first_line(e)}", backend="executorch",
                                   precision=precision) from None
        if precision in ("int8", "int8_static"):
            from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
                XNNPACKQuantizer, get_symmetric_quantization_config)
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

            quantizer = XNNPACKQuantizer().set_global(
                get_symmetric_quantization_config(is_per_channel=True))
            prepared = prepare_pt2e(exported.module(), quantizer)
            for sample in source.calibration_inputs(len(CALIBRATION_SEEDS),
                                                    CALIBRATION_SEEDS[0]):
                prepared(*[torch.from_numpy(a) for a in sample])
            exported = torch.export.export(convert_pt2e(prepared), args)
            notes.append("int8: XNNPACK PT2E quantizer (symmetric, per-channel weights, static "
                         f"activations calibrated on {len(CALIBRATION_SEEDS)} samples)")
        try:
            program = to_edge_transform_and_lower(
                exported, partitioner=[XnnpackPartitioner()]).to_executorch()
        except Exception as e:  # noqa: BLE001 - lowering names the operator it cannot take
            raise UnsupportedError(f"ExecuTorch cannot lower '{source.spec}': {first_line(e)}",
                                   backend="executorch", precision=precision) from None
    (out / "model.pte").write_bytes(program.buffer)
    left = undelegated(program)
    (out / DELEGATION_FILE).write_text(json.dumps({"undelegated": left}))
    if left:
        notes.append("operators XNNPACK did not take, run on ExecuTorch's portable kernels: "
                     + ", ".join(left))
    return {"entry": "model.pte", "notes": notes, "stored_precision": precision}


def _threadpool(threads: int) -> int:
    """Set ExecuTorch's thread pool (process-wide) to ``threads``; the count it now has."""
    from executorch.extension.pybindings import portable_lib

    get = getattr(portable_lib, "_threadpool_get_thread_count", None)
    reset = getattr(portable_lib, "_unsafe_reset_threadpool", None)
    if reset is not None and (get is None or get() != threads):
        reset(int(threads))
    return int(get()) if get is not None else threads


class ExecuTorchBackend(NativeRuntime, Backend):
    name = "executorch"
    description = "ExecuTorch (PyTorch's on-device runtime) with the XNNPACK delegate"
    capabilities = Capabilities(precisions=PRECISIONS, devices=("cpu",),
                                model_formats=("executorch",))
    requires = ("executorch",)
    install_hint = INSTALL_HINT
    unoffered = {"fp16": "edgeprof lowers to XNNPACK in fp32 or PT2E int8; ExecuTorch's fp16 "
                         "path (a half-precision model lowered with XNNPACK's fp16 kernels) "
                         "needs a CPU with fp16 arithmetic and is not built here"}

    native = "a .pte program"

    @staticmethod
    def agreement(stored: str, requested: str) -> str:
        return "int8_static" if stored == "int8" else stored

    def load(self, artifact, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        """The .pte's forward method in ExecuTorch's Python runtime."""
        import numpy as np

        _quiet_imports()
        import torch
        from executorch.runtime import Runtime

        from edgeprof.backends.common import describe_artifact, physical_cores, torch_to_numpy

        t0 = time.perf_counter()
        path = Path(artifact.entry_path)
        threads = _threadpool(int(config.threads or physical_cores()))
        try:
            method = Runtime.get().load_program(str(path)).load_method("forward")
        except Exception as e:  # noqa: BLE001 - the runtime's own error, one line
            raise ModelError(f"ExecuTorch cannot load '{path}': {str(e).splitlines()[0][:200]}"
                             "; the file is truncated or not a .pte program",
                             spec=str(path)) from None
        meta = method.metadata
        n_in = meta.num_inputs() if hasattr(meta, "num_inputs") else len(inputs)
        if n_in != len(inputs):
            raise InputSpecError(f"'{path.name}' takes {n_in} input(s), got {len(inputs)}")

        def feed(xs: Sequence[Any]) -> list:
            return [torch.from_numpy(np.ascontiguousarray(np.asarray(x))) for x in xs]

        def run(ts):
            return method.execute(ts)

        stored = artifact.manifest.stored_precision or "fp32"
        executed = "int8_static" if stored in ("int8", "int8_static") else stored
        side = path.parent / DELEGATION_FILE
        left = json.loads(side.read_text()).get("undelegated", []) if side.is_file() else []
        load_time = time.perf_counter() - t0
        notes = ["per-operator times: ExecuTorch's Python runtime exposes no profiler (ETDump "
                 "needs a runtime built with event tracing)"]
        prepared = PreparedModel(
            run=run, inputs=feed(inputs), runtime="executorch",
            runtime_version=dist_version("executorch", "unknown"), executed_precision=executed,
            threads={"intra_op": threads}, device="cpu", load_time_s=load_time, notes=notes,
            to_numpy=torch_to_numpy, feed=feed,
            extra={"requested_precision": config.precision, "delegate": "XnnpackBackend",
                   "undelegated_ops": left})
        describe_artifact(prepared, artifact, self.name)
        if left:
            add_warning(prepared, "undelegated_ops",
                        f"executorch: {len(left)} operator type(s) left outside XNNPACK run on "
                        f"the portable kernels: {', '.join(left)}")
        return prepared


edgeprof_register_formats = registers(FORMATS)
edgeprof_register_converters = registers(CONVERTERS)
edgeprof_register_backends = registers([ExecuTorchBackend])

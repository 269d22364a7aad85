"""PyTorch eager backend: the model as written, run under ``torch.inference_mode``.

Precisions: fp32, bf16 (weights and inputs cast; CPU kernels with AVX-512 BF16/AMX run it
natively), int8_dynamic (``torch.ao`` dynamic quantization of Linear/LSTM/GRU layers; convs
stay fp32, so the executed precision says so).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

from edgeprof.backends.common import (describe_artifact, physical_cores, require_torch_cuda,
                                      torch_source, torch_to_numpy)
from edgeprof.core.backend import Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import UnsupportedError
from edgeprof.core.hookspecs import hookimpl


def tf32_note(torch, device: str, precision: str) -> str | None:
    """What an fp32 run on a CUDA device really computes in: torch lets cuDNN run fp32
    convolutions in TF32 on tensor cores by default (``torch.backends.cudnn.allow_tf32``),
    and matmuls too where ``float32_matmul_precision`` is not "highest". Then the run can
    beat the fp32 (CUDA-core) peak, and the note says why. None on a CPU or another
    precision."""
    if not str(device).startswith("cuda") or precision != "fp32":
        return None
    ops = []
    if torch.backends.cudnn.allow_tf32:
        ops.append("convolutions (torch.backends.cudnn.allow_tf32, torch's default)")
    if torch.get_float32_matmul_precision() != "highest":
        ops.append(f"matmuls (float32_matmul_precision '{torch.get_float32_matmul_precision()}')")
    if not ops:
        return None
    return (f"fp32 on CUDA: {' and '.join(ops)} may run in TF32 on tensor cores, so the run "
            "can exceed the fp32 CUDA-core peak")


def set_torch_threads(config: RunConfig) -> dict[str, int]:
    """Fix torch's thread settings for a run (intra-op = physical cores unless asked)."""
    import torch

    intra = config.threads or physical_cores()
    torch.set_num_threads(intra)
    try:
        torch.set_num_interop_threads(config.interop_threads)
    except RuntimeError:  # can only be set once per process, before parallel work starts
        pass
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}


def torch_inputs(arrays: Sequence[Any], device: str = "cpu", dtype=None) -> list:
    import torch

    out = []
    for a in arrays:
        t = torch.from_numpy(a).to(device)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        out.append(t)
    return out


def _state_bytes(module) -> int:
    """Bytes of the module's weights and buffers as they run (quantized packed weights too)."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save(module.state_dict(), buf)
    return buf.tell()


class TorchEagerBackend(Backend):
    name = "torch_eager"
    description = "PyTorch eager mode (the reference every conversion is checked against)"
    # fp16: the module and its float inputs in half precision (CUDA's fp16 kernels; on a CPU
    # PyTorch's own fp16 kernels, which x86 cores without AVX512-FP16 emulate, so it is
    # measured, and often slower than fp32 there)
    capabilities = Capabilities(precisions=("fp32", "fp16", "bf16", "int8", "int8_dynamic"),
                                devices=("cpu", "cuda"), model_formats=("torch",))
    requires = ("torch",)
    install_hint = "pip install 'edgeprof[torch]'"

    def prepare(self, model, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        import torch

        self.check_request(model, config)
        model, artifact = torch_source(self, model, config.precision)
        require_torch_cuda(config.device, self.name)
        threads = set_torch_threads(config)
        t0 = time.perf_counter()
        module = model.torch_module()
        notes: list[str] = []
        dtype = None
        executed = config.precision
        if config.precision in ("bf16", "fp16"):
            dtype = torch.bfloat16 if config.precision == "bf16" else torch.float16
            module = copy.deepcopy(module).to(dtype)
        elif config.precision in ("int8", "int8_dynamic"):
            from torch.ao.quantization import quantize_dynamic

            targets = {torch.nn.Linear, torch.nn.LSTM, torch.nn.GRU}
            if not any(isinstance(m, tuple(targets)) for m in module.modules()):
                raise UnsupportedError("torch dynamic int8 quantizes Linear/LSTM/GRU layers and "
                                       "this model has none", backend=self.name,
                                       precision=config.precision)
            import warnings

            with warnings.catch_warnings():  # torch.ao's deprecation notice, not the user's concern
                warnings.simplefilter("ignore", UserWarning)
                module = quantize_dynamic(copy.deepcopy(module), targets, dtype=torch.qint8)
            executed = "int8_dynamic"
            if any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in module.modules()):
                notes.append("dynamic int8 covers Linear/LSTM/GRU only; convolutions ran in fp32")
        if config.device != "cpu" and module is model.torch_module():
            # .to() moves in place: the handle's module stays on the CPU for later runs
            module = copy.deepcopy(module)
        module = module.to(config.device).eval()
        notes += [n for n in [tf32_note(torch, config.device, executed)] if n]
        sample = torch_inputs(inputs, config.device, dtype)
        load_time = time.perf_counter() - t0

        def run(xs):
            with torch.inference_mode():
                return module(*xs)

        if executed == "int8_dynamic" and any(
                isinstance(m, (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer))
                for m in module.modules()):
            # the attention fast path reads Linear.weight as a tensor; dynamically quantized
            # Linear layers expose it as a method, so that path must stay off for this model
            mha = torch.backends.mha
            notes.append("attention fast path disabled: it does not take quantized Linear layers")

            def run(xs, _plain=run):  # noqa: F811 - the fast-path-free variant
                previous = mha.get_fastpath_enabled()
                mha.set_fastpath_enabled(False)
                try:
                    return _plain(xs)
                finally:
                    mha.set_fastpath_enabled(previous)

        sync = torch.cuda.synchronize if config.device.startswith("cuda") else None
        prepared = PreparedModel(run=run, inputs=sample, runtime="torch",
                                 runtime_version=torch.__version__, executed_precision=executed,
                                 threads=threads, device=config.device, sync=sync,
                                 load_time_s=load_time, notes=notes, to_numpy=torch_to_numpy,
                                 feed=lambda xs: torch_inputs(xs, config.device, dtype),
                                 extra={"module": module})
        if artifact is not None:
            describe_artifact(prepared, artifact, self.name)
        prepared.extra["model_bytes"] = _state_bytes(module)
        return prepared

    def operator_profile(self, prepared: PreparedModel, runs: int = 10,
                         trace_path: str | None = None):
        """torch.profiler over ``runs`` inferences; each leaf module is wrapped in a
        ``record_function`` named after it, so rows join the estimate's layers by name."""
        import pandas as pd
        from torch.profiler import ProfilerActivity, profile, record_function

        module = prepared.extra["module"]
        handles, ctx = [], {}
        for name, m in module.named_modules():
            if name and not any(True for _ in m.children()):
                def pre(mod, args, _name=name):
                    ctx[_name] = record_function(f"layer::{_name}")
                    ctx[_name].__enter__()

                def post(mod, args, out, _name=name):
                    ctx.pop(_name).__exit__(None, None, None)

                handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
        kinds = {n: type(m).__name__ for n, m in module.named_modules()}
        try:
            prepared.run(prepared.inputs)  # warm
            activities = [ProfilerActivity.CPU]
            if prepared.device.startswith("cuda"):
                activities.append(ProfilerActivity.CUDA)
            with profile(activities=activities) as prof:
                for _ in range(runs):
                    prepared.run(prepared.inputs)
                    if prepared.sync:
                        prepared.sync()
        finally:
            for h in handles:
                h.remove()
        rows = []
        for ev in prof.key_averages():
            if not ev.key.startswith("layer::"):
                continue
            layer = ev.key[len("layer::"):]
            rows.append({"operator": layer, "op_type": kinds.get(layer, ""),
                         "latency_ms": ev.cpu_time_total / 1e3 / runs,
                         "calls": ev.count / runs, "layer": layer})
        if trace_path:
            prof.export_chrome_trace(str(trace_path))
        return pd.DataFrame(rows, columns=["operator", "op_type", "latency_ms", "calls", "layer"])


@hookimpl
def edgeprof_register_backends():
    return [TorchEagerBackend]

"""PyTorch ``torch.compile`` backend (TorchInductor).

Options (:class:`TorchCompileOptions`): ``mode`` ("default" unless given; "max-autotune",
"reduce-overhead" and "max-autotune-no-cudagraphs" are torch's others). Precisions: fp32 and
bf16 (weights and float inputs cast). Inductor compiles on the first call, so ``prepare``
makes that call itself and reports it apart from the steady state: ``load_time_s`` and
``extra["compile_time_s"]`` hold the first call (compile + one run), ``extra["second_call_s"]``
the next one (CUDA-graph recording or a recompile shows there). The harness then times only
compiled calls. CPU always; "cuda" when torch sees a device.

The outputs of the compiled model are compared with torch eager fp32 on the same inputs
(``extra["agreement"]``).
"""

from __future__ import annotations

import copy
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from edgeprof.core.backend import Availability, Backend, Capabilities, PreparedModel, RunConfig
from edgeprof.core.errors import UnsupportedError
from edgeprof.core.hookspecs import hookimpl

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TorchCompileOptions:
    """``torch.compile``'s mode (torch's own names)."""

    mode: Literal["default", "reduce-overhead", "max-autotune",
                  "max-autotune-no-cudagraphs"] = "default"


class TorchCompileBackend(Backend):
    name = "torch_compile"
    description = "PyTorch torch.compile (TorchInductor), compile time reported apart"
    capabilities = Capabilities(precisions=("fp32", "bf16"), devices=("cpu", "cuda"),
                                model_formats=("torch",))
    requires = ("torch",)
    install_hint = "pip install 'edgeprof[torch]'"
    Options = TorchCompileOptions

    @classmethod
    def availability(cls) -> Availability:
        base = super().availability()
        if not base.available:
            return base
        # Inductor generates C++ for the CPU; without a compiler every compile fails
        if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
            return Availability(False, "no C++ compiler found (TorchInductor needs one for the "
                                "CPU)", "install g++ or clang++")
        return base

    def prepare(self, model, config: RunConfig, inputs: Sequence[Any]) -> PreparedModel:
        import torch

        from edgeprof.backends.common import (compare_outputs, describe_artifact,
                                              require_torch_cuda, torch_outputs, torch_source,
                                              torch_to_numpy as _to_numpy)
        from edgeprof.backends.torch_eager import set_torch_threads, tf32_note, torch_inputs

        self.ensure_available()
        self.check_request(model, config)
        model, artifact = torch_source(self, model, config.precision)
        mode = self.options_for(config).mode  # validated: one of MODES
        device = config.device
        require_torch_cuda(device, self.name)
        threads = set_torch_threads(config)
        sync = torch.cuda.synchronize if device.startswith("cuda") else None

        t0 = time.perf_counter()
        reference_module = model.torch_module()
        module = copy.deepcopy(reference_module)
        dtype = None
        if config.precision == "bf16":
            module = module.to(torch.bfloat16)
            dtype = torch.bfloat16
        module = module.to(device).eval()
        sample = torch_inputs(inputs, device, dtype)
        compiled = torch.compile(module, mode=None if mode == "default" else mode,
                                 backend="inductor", dynamic=False)

        def run(xs):
            with torch.inference_mode():
                return compiled(*xs)

        def timed_call() -> tuple[Any, float]:
            t = time.perf_counter()
            out = run(sample)
            if sync:
                sync()
            return out, time.perf_counter() - t

        try:
            out, compile_time = timed_call()
            out, second_call = timed_call()
        except Exception as e:  # dynamo / inductor raise many types
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()),
                         type(e).__name__)
            raise UnsupportedError(f"torch.compile (inductor, mode {mode}) failed on this model "
                                   f"at {config.precision}: {type(e).__name__}: {first[:200]}",
                                   backend=self.name, precision=config.precision) from e
        load_time = time.perf_counter() - t0

        ref = torch_outputs(reference_module, [inputs])[0]
        agreement = compare_outputs(ref, _to_numpy(out), config.precision).to_dict()
        agreement["reference"] = "torch_eager fp32" + (" (of the converted module)" if artifact else "")
        notes = [f"compiled with inductor, mode {mode}: the first call ({compile_time:.2f} s) "
                 "is compile time, reported apart from the steady-state latency"]
        if not agreement["passed"]:
            notes.append(f"compiled outputs disagree with torch eager fp32: relative error "
                         f"{agreement['relative_error']:.3g} > {agreement['tolerance']}")
        notes += [n for n in [tf32_note(torch, device, config.precision)] if n]
        prepared = PreparedModel(
            run=run, inputs=sample, runtime="torch.compile/inductor",
            runtime_version=torch.__version__, executed_precision=config.precision,
            threads=threads, device=device, sync=sync, load_time_s=load_time, notes=notes,
            to_numpy=_to_numpy,
            extra={"compile_time_s": compile_time, "second_call_s": second_call, "mode": mode,
                   "compiler_backend": "inductor", "agreement": agreement, "module": compiled})
        if artifact is not None:
            describe_artifact(prepared, artifact, self.name)
            prepared.extra["agreement"] = agreement  # compiled vs the converted module
        return prepared


@hookimpl
def edgeprof_register_backends():
    return [TorchCompileBackend]

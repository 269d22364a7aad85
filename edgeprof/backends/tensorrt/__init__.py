"""TensorRT backend: the worked example of a third-party backend.

It uses only edgeprof's public API (``edgeprof.Backend``, ``edgeprof.hookimpl`` ...) and is
registered through ``plugins.toml`` exactly as a user's plugin would be. It needs the
``tensorrt`` Python package and an NVIDIA GPU; without them it stays listed as unavailable
with the reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from edgeprof import Availability, Backend, Capabilities, hookimpl
from edgeprof.core.backend import modules_present


def nvidia_gpu_present() -> tuple[bool, str]:
    """True when an NVIDIA GPU is visible: a driver device node or nvidia-smi that lists one."""
    if Path("/proc/driver/nvidia/gpus").is_dir() and any(Path("/proc/driver/nvidia/gpus").iterdir()):
        return True, ""
    if shutil.which("nvidia-smi"):
        import subprocess

        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and "GPU" in out.stdout:
                return True, ""
        except (OSError, subprocess.SubprocessError):
            pass
    return False, "no NVIDIA GPU found (no /proc/driver/nvidia/gpus, nvidia-smi lists none)"


class TensorRTBackend(Backend):
    name = "tensorrt"
    description = "NVIDIA TensorRT engine built from the model's ONNX export (GPU only)"
    capabilities = Capabilities(precisions=("fp32", "fp16", "int8"), devices=("cuda",),
                                model_formats=("torch", "onnx"))
    requires = ("tensorrt",)
    install_hint = "needs an NVIDIA GPU with its driver, then: pip install tensorrt"

    @classmethod
    def availability(cls) -> Availability:
        missing = modules_present(*cls.requires)
        gpu, why = nvidia_gpu_present()
        if not gpu:
            return Availability(False, why, cls.install_hint)
        if missing:
            return Availability(False, f"Python package '{missing}' is not installed",
                                "pip install tensorrt")
        return Availability(True)


@hookimpl
def edgeprof_register_backends():
    return [TensorRTBackend]

"""TensorRT backend: the worked example of a third-party backend.

It is registered through ``plugins.toml`` exactly as a user's plugin would be, and builds on
edgeprof's public pieces: ``Backend``, ``Capabilities``, ``hookimpl`` and an existing
backend's ``prepare`` (the ONNX Runtime backend, whose cached ONNX export, agreement check and
session handling it reuses). The engine is built by ONNX Runtime's TensorRT execution
provider (``onnxruntime-gpu`` with the TensorRT libraries): fp32, fp16
(``trt_fp16_enable``), int8 from the static QDQ model (``trt_int8_enable``, explicit
quantization). Engines are cached in edgeprof's cache folder.

It needs an NVIDIA GPU; without one it stays listed as unavailable with the reason. This
machine has none, so this path has not been run here (say so in any figure you report).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from edgeprof import Availability, Backend, Capabilities, UnsupportedError, hookimpl
from edgeprof.core.importing import modules_present

TRT_PROVIDER = "TensorrtExecutionProvider"


def nvidia_gpu_present() -> tuple[bool, str]:
    """True when an NVIDIA GPU is visible: a driver device node or nvidia-smi that lists one."""
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir() and any(gpus.iterdir()):
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


@dataclass(frozen=True)
class TensorRTOptions:
    """TensorRT (through ONNX Runtime's TensorRT provider) knobs."""

    #: reuse built engines from edgeprof's cache (``trt_engine_cache_enable``)
    engine_cache: bool = True


class TensorRTBackend(Backend):
    name = "tensorrt"
    description = "NVIDIA TensorRT engines via ONNX Runtime's TensorRT provider (GPU only)"
    capabilities = Capabilities(precisions=("fp32", "fp16", "int8"), devices=("cuda",),
                                model_formats=("onnx",))
    quantizes = ("fp16", "int8")
    requires = ("onnxruntime", "onnx")
    install_hint = ("needs an NVIDIA GPU with its driver, then: pip install onnxruntime-gpu "
                    "tensorrt")
    Options = TensorRTOptions

    @classmethod
    def availability(cls) -> Availability:
        gpu, why = nvidia_gpu_present()
        if not gpu:  # checked first: cheap, and the usual reason
            return Availability(False, why, cls.install_hint)
        missing = modules_present(*cls.requires)
        if missing:
            return Availability(False, f"Python package '{missing}' is not installed",
                                cls.install_hint)
        import onnxruntime as ort  # only reached on a machine with an NVIDIA GPU

        if TRT_PROVIDER not in ort.get_available_providers():
            return Availability(False, f"this onnxruntime build has no {TRT_PROVIDER}",
                                cls.install_hint)
        return Availability(True)

    @classmethod
    def check_request(cls, model, config) -> None:
        """Precision, availability and the model's route; the device is always the GPU."""
        cls.check_precision(config.precision)
        cls.ensure_available()
        if model.format not in cls.capabilities.model_formats:
            cls.route(model.format, config.precision)

    def build(self, model, precision, calibration=None):
        """ONNX Runtime's artifact: the fp32 ONNX model (TensorRT makes fp16 itself), or the
        static QDQ model for int8 (TensorRT reads its scales)."""
        from edgeprof.backends.onnxruntime import OnnxRuntimeBackend

        self.check_precision(precision)
        artifact = OnnxRuntimeBackend().build(
            model, "int8_static" if precision == "int8" else "fp32", calibration)
        artifact.manifest.backend, artifact.manifest.requested_precision = self.name, precision
        return artifact

    def load(self, artifact, config, inputs):
        from edgeprof.backends.onnxruntime import OnnxRuntimeBackend
        from edgeprof.core.cache import cache_dir

        self.ensure_available()
        opts = self.options_for(config)
        engines = cache_dir("tensorrt")
        trt_options = {
            "device_id": int(config.device.partition(":")[2] or 0),
            "trt_fp16_enable": config.precision == "fp16",
            "trt_int8_enable": config.precision == "int8",  # explicit: reads the QDQ scales
            "trt_engine_cache_enable": opts.engine_cache,
            "trt_engine_cache_path": str(engines),
        }
        ort_config = replace(
            config, device="cuda", precision="int8_static" if config.precision == "int8" else "fp32",
            options={"providers": [(TRT_PROVIDER, trt_options), "CUDAExecutionProvider"]})
        prepared = OnnxRuntimeBackend().load(artifact, ort_config, inputs)
        providers = prepared.extra.get("providers") or []
        if not providers or providers[0] != TRT_PROVIDER:
            raise UnsupportedError(f"ONNX Runtime did not put {TRT_PROVIDER} first (got "
                                   f"{providers}); the TensorRT libraries may be missing",
                                   backend=self.name, precision=config.precision)
        prepared.executed_precision = config.precision
        prepared.runtime = "tensorrt (onnxruntime TensorRT provider)"
        prepared.device = config.device if config.device.startswith("cuda") else "cuda"
        prepared.notes.append(f"TensorRT engine built by ONNX Runtime's {TRT_PROVIDER} "
                              f"({'fp16' if trt_options['trt_fp16_enable'] else ''}"
                              f"{'int8 from QDQ scales' if trt_options['trt_int8_enable'] else ''}"
                              f"{'fp32' if config.precision == 'fp32' else ''}); engines cached "
                              f"in {engines}; output agreement is the ONNX model's on the CPU")
        return prepared


@hookimpl
def edgeprof_register_backends():
    return [TensorRTBackend]

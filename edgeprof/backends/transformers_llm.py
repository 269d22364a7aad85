"""transformers (torch eager) as the reference generative backend.

Build: the model's Hugging Face folder (a preset's random weights written in the format's
dtype, ``float32`` or ``bfloat16``, and cached; a user's folder as given). Load:
``AutoModelForCausalLM.from_pretrained(folder, dtype=...)`` with ``torch.set_num_threads``,
moved to ``--device`` (``cuda`` where this machine's torch sees a GPU).
``prefill`` runs the prompt through the model with a ``DynamicCache`` (only the last
position's logits are computed); ``decode`` picks the argmax, hands it to ``on_token`` and
runs the model on it, ``n`` times, never stopping at end-of-sequence. As in the other
generative backends, after ``n`` tokens the last one has been sampled but not yet run
through the model (``n - 1`` forward passes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from edgeprof.backends.common import require_torch_cuda
from edgeprof.backends.llm_layout import GENERIC_FORMATS
from edgeprof.core.backend import Capabilities
from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.llm import GenerativeBackend, LLMModel, check_room

FORMATS = ("fp32", "bf16")
DTYPE = {"fp32": "float32", "bf16": "bfloat16"}
#: each format's byte layout: every weight in the format's dtype
FORMAT_LAYOUTS = {n: dataclasses.replace(GENERIC_FORMATS[n], backend="transformers")
                  for n in FORMATS}


class TransformersBackend(GenerativeBackend):
    name = "transformers"
    description = "transformers on torch (eager, greedy with a DynamicCache): the reference"
    requires = ("transformers", "torch")
    install_hint = "pip install transformers torch"
    formats = FORMATS
    format_layouts = FORMAT_LAYOUTS
    #: torch eager runs on a CUDA device where torch sees one (checked when loading, so
    #: listing backends imports no torch), as the torch_eager backend does
    devices = ("cpu", "cuda")
    #: torch eager runs on a board's CPU or, with a CUDA torch (a Jetson's), its GPU
    board_devices = ("cpu", "cuda")
    #: it builds from a Hugging Face folder (a preset's is written), never from a GGUF
    sources = ("preset", "hf_folder")
    capabilities = Capabilities(precisions=FORMATS, devices=("cpu", "cuda"),
                                model_formats=("llm",))

    def architecture_reason(self, model: LLMModel, fmt: str) -> str | None:
        reason = super().architecture_reason(model, fmt)
        if reason:
            return reason
        from edgeprof.backends.hf_folder import ARCHITECTURES

        if model.source_kind == "preset" and model.spec.family not in ARCHITECTURES:
            return f"transformers: no architecture for family '{model.spec.family}' here"
        return None

    def build_llm(self, model: LLMModel, fmt: str, workdir: Path):
        from edgeprof.backends.hf_folder import hf_source

        self.check_buildable(model, fmt)
        src = hf_source(model, dtype=DTYPE[fmt], as_artifact=True)
        art = src.artifact
        m = art.manifest
        m.backend, m.requested_precision = self.name, fmt
        if model.source_kind == "preset":
            m.stored_precision = fmt
        if model.random_weights and "random weights" not in " ".join(m.notes):
            m.notes.append("random weights")
        return art

    def load_llm(self, artifact, *, threads: int, n_ctx: int, device: str = "cpu"):
        from edgeprof.backends.hf_folder import folder_max_context, guard_torchvision

        folder = Path(artifact.path)
        self.check_loadable(n_ctx, folder_max_context(folder), device)
        fmt = artifact.manifest.requested_precision
        if fmt not in DTYPE:
            raise UnsupportedError(f"transformers cannot run format '{fmt}'; it runs "
                                   f"{', '.join(FORMATS)}", backend=self.name)
        require_torch_cuda(device, self.name)  # before transformers is imported
        guard_torchvision()
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        torch.set_num_threads(int(threads))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, DTYPE[fmt]))
        model.to(device).eval()
        version = metadata.version("transformers")
        return TorchSession(model, n_ctx, f"transformers {version} torch {torch.__version__}",
                            device=device)


class TorchSession:
    """One sequence on a transformers model (see the module docstring)."""

    def __init__(self, model: Any, n_ctx: int, build_commit: str, device: str = "cpu") -> None:
        self._model = model
        self.n_ctx = int(n_ctx)
        self.build_commit = build_commit
        self._device = device
        self.reset()

    def reset(self) -> None:
        from transformers import DynamicCache

        self._cache = DynamicCache(config=self._model.config)
        self._logits = None
        self._count = 0

    def _forward(self, ids: list[int]) -> None:
        import torch

        with torch.inference_mode():
            out = self._model(input_ids=torch.tensor([ids], dtype=torch.long,
                                                     device=self._device),
                              past_key_values=self._cache, use_cache=True, logits_to_keep=1)
        self._cache = out.past_key_values
        self._logits = out.logits[0, -1]

    def prefill(self, token_ids: Sequence[int]) -> None:
        ids = [int(t) for t in token_ids]
        if not ids:
            return
        check_room(self._count, len(ids), self.n_ctx)
        self._forward(ids)
        if self._device.startswith("cuda"):  # a GPU runs ahead: the prompt ends when it ends
            import torch

            torch.cuda.synchronize(self._device)
        self._count += len(ids)

    def decode(self, n: int, on_token: Callable[[int], None]) -> None:
        if self._logits is None:
            raise UserError("decode needs a prefilled prompt first")
        check_room(self._count, n, self.n_ctx)
        for i in range(n):
            token = int(self._logits.argmax())
            on_token(token)
            if i < n - 1:
                self._forward([token])
        self._count += n

    def close(self) -> None:
        self._model = None
        self._cache = None
        self._logits = None


@hookimpl
def edgeprof_register_backends():
    return [TransformersBackend]

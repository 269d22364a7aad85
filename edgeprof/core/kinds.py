"""The two kinds of model, told apart once: :func:`model_kind`.

``edgeprof.profile``, ``predict``, ``estimate``, ``recommend``, ``optimize`` and
``calibrate`` (:mod:`edgeprof.api.kinds`) and the CLI's one parser
(:func:`edgeprof.cli.common.resolve_kind`) ask it which implementation a model goes to; past
that front door the code asks the model's workload (:mod:`edgeprof.core.workload`) or its
report member (:mod:`edgeprof.profilers.report.family`). Imports nothing heavy.
"""

from __future__ import annotations

import os
from typing import Any

TENSOR, GENERATIVE = "tensor", "generative"
#: what each kind of model is, as the errors and the CLI's help groups name it
KIND_WORDS = {TENSOR: "tensor models (builtin:NAME, package.module:factory, .onnx, .tflite, "
                      ".xml, .keras)",
              GENERATIVE: "generative models (llm:NAME, .gguf, HF folder)"}


def model_kind(model: Any) -> str:
    """``generative`` for an ``LLMModel``, ``llm:NAME``, a .gguf file or a Hugging Face folder;
    else ``tensor`` (a spec, a path, an ``nn.Module``, a ``ModelHandle``)."""
    from edgeprof.core.llm import LLMModel, is_llm_spec

    if isinstance(model, LLMModel):
        return GENERATIVE
    if isinstance(model, (str, os.PathLike)) and is_llm_spec(str(model)):
        return GENERATIVE
    return TENSOR


__all__ = ["GENERATIVE", "KIND_WORDS", "TENSOR", "model_kind"]

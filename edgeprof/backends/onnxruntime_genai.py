"""ONNX Runtime GenAI: a decoder-only model built by its own model builder, generated with
``og.Generator``.

Build: the model's Hugging Face folder (random weights for a preset, see
:mod:`edgeprof.backends.hf_folder`) -> ``python -m onnxruntime_genai.models.builder -p FMT -e
cpu`` -> a folder with ``model.onnx`` (+ ``.data``) and ``genai_config.json``, cached by
content. ``int4``/``int8``: group-wise symmetric RTN weights (block 32) in ``MatMulNBits``
with ``accuracy_level=4`` (the CPU default: int8 compute); ``fp32``: plain weights.

Run: one ``og.Generator`` per sequence, greedy, ``min_length = max_length = n_ctx`` so the
end-of-sequence token can never end a run early (the runtime masks it until the sequence is
full); ``prefill`` is ``append_tokens`` (runs the model on the tokens, continuing whatever
the sequence holds, so ``--depth`` works), ``decode`` calls ``generate_next_token`` ``n``
times. After a prefill the logits are ready, so the first ``generate_next_token`` only
samples; each later one runs the model on the previous token and samples.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.backends.llm_layout import GENERIC_FORMATS, NoFileLayout, groupwise_bytes
from edgeprof.core.backend import Capabilities
from edgeprof.core.errors import UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.importing import dist_version
from edgeprof.core.llm import FormatInfo, GenerativeBackend, LLMModel, LLMSpec, WeightTensor, \
    check_room

#: model_type -> what the builder calls it (checked against its dispatch table)
FAMILIES = ("llama", "qwen2", "gemma", "gemma2", "gemma3_text", "phi3")
FORMATS = ("int4", "int8", "fp32")
#: the weight-quantization options passed to the builder (its CPU defaults, made explicit)
QUANT_OPTIONS = {"block_size": 32, "is_symmetric": "true", "accuracy_level": 4}


@dataclass(frozen=True)
class MatMulNBitsLayout(NoFileLayout):
    """The model builder's int4/int8 (onnxruntime-genai 0.18, ``models/builders/base.py``):
    every MatMul becomes ``MatMulNBits`` (``fmt.weight_bits`` values in groups of
    ``fmt.group_size``, symmetric: no zero points), its scales in the I/O dtype, K padded to
    whole groups; the embedding stays a float Gather in the I/O dtype, except int4 with tied
    embeddings, where the embedding reads the LM head's int4 groups (GatherBlockQuantized;
    counted once; int8 keeps a quantized head beside the float embedding); norms and biases
    in the I/O dtype."""

    #: device -> (bytes, name) of the I/O dtype: fp32 on CPU, fp16 on CUDA
    io_dtypes: tuple[tuple[str, int, str], ...] = (("cpu", 4, "fp32"), ("cuda", 2, "fp16"))

    def storage(self, spec: LLMSpec, tensors: Sequence[WeightTensor], fmt: FormatInfo,
                device: str = "cpu") -> dict[str, tuple[int, str]]:
        io, io_type = next(((b, n) for d, b, n in self.io_dtypes if d == device),
                           self.io_dtypes[0][1:])
        bits = fmt.weight_bits or 4
        zp = 0 if fmt.symmetric else (4 if bits == 4 else 8)
        group = fmt.group_size or QUANT_OPTIONS["block_size"]
        head = (spec.hidden_size, spec.vocab_size)  # the LM head in ggml order

        def q(ne: Sequence[int]) -> tuple[int, str]:
            return groupwise_bytes(ne, bits, group, io, zp), f"int{bits}_b{fmt.group_size}"

        tied_int4 = spec.tie_word_embeddings and bits == 4
        out: dict[str, tuple[int, str]] = {}
        for t in tensors:
            if t.kind == "embedding":
                out[t.name] = q(head) if tied_int4 else (t.numel * io, io_type)
            elif t.is_matrix:
                out[t.name] = q(t.ne)
            else:
                out[t.name] = (t.numel * io, io_type)
        if spec.tie_word_embeddings and not tied_int4:
            out["output.weight"] = q(head)  # int8: a quantized head beside the float embedding
        return out


MATMUL_NBITS = MatMulNBitsLayout()
_BLOCK = QUANT_OPTIONS["block_size"]
_SYMMETRIC = QUANT_OPTIONS["is_symmetric"] == "true"
#: each format's byte layout (what the estimate reads: ``format_layouts``)
FORMAT_LAYOUTS: dict[str, FormatInfo] = {
    "int4": FormatInfo("int4", "genai", 5.0, "fp32", "int8",
                       f"ONNX Runtime GenAI builder int4: MatMulNBits block {_BLOCK} symmetric, "
                       "fp32 scales on CPU; embedding float unless tied", weight_bits=4,
                       group_size=_BLOCK, symmetric=_SYMMETRIC, backend="onnxruntime_genai",
                       layout=MATMUL_NBITS),
    "int8": FormatInfo("int8", "genai", 9.0, "fp32", "int8",
                       f"ONNX Runtime GenAI builder int8: MatMulNBits block {_BLOCK} symmetric, "
                       "fp32 scales on CPU; embedding float", weight_bits=8, group_size=_BLOCK,
                       symmetric=_SYMMETRIC, backend="onnxruntime_genai", layout=MATMUL_NBITS),
    "fp32": dataclasses.replace(GENERIC_FORMATS["fp32"], backend="onnxruntime_genai"),
}
#: seconds the model builder may run
BUILD_TIMEOUT_S = 3600


def _version() -> str:
    return dist_version("onnxruntime-genai") or dist_version("onnxruntime-genai-cuda")


#: the CUDA build of the package ships as its own distribution
_DEVICES = ("cpu", "cuda") if dist_version("onnxruntime-genai-cuda") else ("cpu",)


def run_builder(hf_folder: Path, out: Path, fmt: str, scratch: Path,
                execution_provider: str = "cpu") -> None:
    """Run the model builder in a child process (it imports torch and transformers and
    prints a lot); raise UnsupportedError with its last error line when it fails."""
    from edgeprof.backends.hf_folder import GUARDED_MAIN, run_child

    cmd = [sys.executable, "-c", GUARDED_MAIN, "onnxruntime_genai.models.builder",
           "-i", str(hf_folder), "-o", str(out), "-p", fmt, "-e", execution_provider,
           "-c", str(scratch)]
    if fmt in ("int4", "int8"):
        cmd += ["--extra_options", *(f"{k}={v}" for k, v in QUANT_OPTIONS.items())]
    run_child(cmd, out / "genai_config.json", "onnxruntime_genai's model builder",
              backend="onnxruntime_genai", precision=fmt, timeout=BUILD_TIMEOUT_S, cwd=scratch)


class OnnxruntimeGenaiBackend(GenerativeBackend):
    name = "onnxruntime_genai"
    description = ("ONNX Runtime GenAI: its model builder's int4/int8/fp32 ONNX model, "
                   "generated with og.Generator")
    requires = ("onnxruntime_genai",)
    install_hint = "pip install onnxruntime-genai"
    formats = FORMATS
    format_layouts = FORMAT_LAYOUTS
    devices = _DEVICES
    #: onnxruntime-genai has CPU and CUDA builds (onnxruntime-genai-cuda)
    board_devices = ("cpu", "cuda")
    #: it builds from a Hugging Face folder (a preset's is written), never from a GGUF
    sources = ("preset", "hf_folder")
    capabilities = Capabilities(precisions=FORMATS, devices=_DEVICES, model_formats=("llm",))

    def architecture_reason(self, model: LLMModel, fmt: str) -> str | None:
        reason = super().architecture_reason(model, fmt)
        if reason:
            return reason
        if model.spec.family == "gemma3_text":
            return ("onnxruntime_genai 0.18's model builder cannot read the Gemma-3 config "
                    "transformers 5.23 writes (per-layer-type rope_parameters: KeyError "
                    "'rope_type')")
        if model.spec.family not in FAMILIES:
            return (f"onnxruntime_genai's builder here covers {', '.join(FAMILIES)}, not "
                    f"'{model.spec.family}'")
        return None

    # -- build ---------------------------------------------------------------------------
    def build_llm(self, model: LLMModel, fmt: str, workdir: Path):
        from edgeprof.backends.hf_folder import hf_source
        from edgeprof.core.cache import cached_entry

        self.check_buildable(model, fmt)
        src = hf_source(model)
        version = _version()
        key = {"source": src.digest, "format": fmt, "execution_provider": "cpu",
               "onnxruntime_genai": version, "onnxruntime": dist_version("onnxruntime"),
               "quant": QUANT_OPTIONS if fmt != "fp32" else None, "precision": fmt}
        step = {"src": "hf-folder", "dst": f"ort-genai-{fmt}",
                "converter": "onnxruntime_genai.models.builder",
                "package": "onnxruntime-genai", "version": version,
                "options": {"precision": fmt, "execution_provider": "cpu",
                            **(QUANT_OPTIONS if fmt != "fp32" else {})}}
        notes = []
        if src.random_weights:
            notes.append("random weights")
        if fmt != "fp32":
            notes.append(f"{fmt} weights group-wise (block {QUANT_OPTIONS['block_size']}, "
                         "symmetric, round-to-nearest) in MatMulNBits; accuracy_level "
                         f"{QUANT_OPTIONS['accuracy_level']} (int8 compute on CPU); "
                         "embeddings and norms stay fp32")
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)

        def build(folder: Path) -> dict[str, Any]:
            scratch = workdir / f".ort-genai-{uuid.uuid4().hex[:8]}"
            scratch.mkdir()
            try:
                run_builder(src.path, folder, fmt, scratch)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return {}

        return cached_entry("onnxruntime_genai", key, build, entry="genai_config.json",
                            manifest={"format": "onnxruntime_genai", "backend": self.name,
                                      "requested_precision": fmt, "stored_precision": fmt,
                                      "route": [*src.route, step],
                                      "source_digest": src.digest, "notes": notes})

    # -- load ----------------------------------------------------------------------------
    def load_llm(self, artifact, *, threads: int, n_ctx: int, device: str = "cpu"):
        import onnxruntime_genai as og

        folder = Path(artifact.path)
        context = json.loads((folder / "genai_config.json").read_text(encoding="utf-8")
                             )["model"]["context_length"]
        self.check_loadable(n_ctx, int(context), device)
        cfg = og.Config(str(folder))
        cfg.overlay(json.dumps({"model": {"decoder": {"session_options": {
            "intra_op_num_threads": int(threads), "inter_op_num_threads": 1}}}}))
        cfg.clear_providers()
        if device == "cuda":
            cfg.append_provider("cuda")
        model = og.Model(cfg)
        commit = getattr(og, "__commit__", "") or ""
        return OgSession(model, n_ctx, commit[:8] or og.__version__)



class OgSession:
    """One sequence on an ``og.Model`` (see the module docstring)."""

    def __init__(self, model: Any, n_ctx: int, build_commit: str) -> None:
        self._model = model
        self.n_ctx = int(n_ctx)
        self.build_commit = build_commit
        self.reset()

    def reset(self) -> None:
        import onnxruntime_genai as og

        self._gen = None  # free the old KV cache first
        params = og.GeneratorParams(self._model)
        # min_length = max_length: the runtime masks end-of-sequence until the sequence is
        # full, so a run always produces the tokens asked for
        params.set_search_options(max_length=self.n_ctx, min_length=self.n_ctx,
                                  do_sample=False, batch_size=1)
        self._gen = og.Generator(self._model, params)
        self._count = 0

    def prefill(self, token_ids: Sequence[int]) -> None:
        import numpy as np

        ids = np.asarray(list(token_ids), dtype=np.int32)
        if ids.size == 0:
            return
        check_room(self._count, int(ids.size), self.n_ctx)
        self._gen.append_tokens(ids)
        self._count += int(ids.size)

    def decode(self, n: int, on_token: Callable[[int], None]) -> None:
        if self._count == 0:
            raise UserError("decode needs a prefilled prompt first")
        check_room(self._count, n, self.n_ctx)
        gen = self._gen
        for _ in range(n):
            gen.generate_next_token()
            on_token(int(gen.get_next_tokens()[0]))
        self._count += n

    def close(self) -> None:
        self._gen = None
        self._model = None


@hookimpl
def edgeprof_register_backends():
    return [OnnxruntimeGenaiBackend]

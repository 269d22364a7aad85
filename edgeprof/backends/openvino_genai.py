"""OpenVINO GenAI: a stateful OpenVINO IR of the model run by ``openvino_genai.LLMPipeline``.

Export (no optimum-intel: every optimum-intel release that supports transformers 5 needs
transformers < 5.6, and this project pins 5.23). The export does what ``optimum-cli export
openvino`` does, with OpenVINO's own tools, in a child process:

1. the Hugging Face folder (random weights for a preset) is loaded with transformers;
2. a wrapper with flat KV inputs/outputs (``past_key_values.N.key`` -> ``present.N.key``) is
   exported with ``torch.export`` (dynamic batch, sequence and past lengths; a TorchScript
   trace when ``torch.export`` fails) and converted with ``openvino.convert_model``;
3. a ``beam_idx`` input gathers the cache (what LLMPipeline feeds) and
   ``apply_make_stateful_transformation`` hides the cache in state variables;
4. weights: ``int4`` = NNCF ``INT4_SYM`` group-wise (group 128, or the largest power of two
   dividing every input width) on every matrix, with the embedding and the LM head in
   8 bits (NNCF's default, as optimum-intel); ``int8`` = NNCF ``INT8_ASYM`` per channel;
   ``fp16`` = weights stored in fp16 (``compress_to_fp16``), computed as the CPU decides;
5. the tokenizer and detokenizer IRs via ``openvino_tokenizers.convert_tokenizer``.

Run: ``generate`` on an ``ov.Tensor`` of token ids, greedy, ``ignore_eos=True``,
``min_new_tokens = max_new_tokens = n``, a streamer calling ``on_token`` per token. LLMPipeline
owns the sequence, so:

- ``prefill`` is a generate call with ``max_new_tokens=1``: the time to first token includes
  sampling that one token (the harness's TTFT is still prompt -> first token);
- ``decode(n)`` generates ``n`` tokens after the last prefilled prompt: a second generate
  call on the same prompt, whose KV LLMPipeline's paged-attention CPU path (its default)
  serves from its prefix cache (on a tiny model 10 tokens took 8 ms this way, 29 ms with
  ``ATTENTION_BACKEND=SDPA``, which has no prefix cache); the first ``on_token`` therefore
  also covers that lookup and the last prompt token's re-evaluation;
- a cache filled before a prompt (``--depth`` > 0) cannot be expressed: a prefill on a
  sequence that already holds tokens raises UnsupportedError.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.backends.llm_layout import FLOAT, NoFileLayout, groupwise_bytes
from edgeprof.core.backend import Capabilities
from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.importing import dist_version
from edgeprof.core.llm import FormatInfo, GenerativeBackend, LLMModel, LLMSpec, WeightTensor, \
    check_room

FORMATS = ("int4", "int8", "fp16")
#: families whose transformers implementation exports with a DynamicCache of plain layers
FAMILIES = ("llama", "qwen2", "gemma", "phi3")
SLIDING = ("gemma2", "gemma3_text")
INT4_GROUP = 128
MODEL_XML = "openvino_model.xml"
EXPORT_TIMEOUT_S = 3600
#: version of the export recipe; bump when the IR it writes changes
EXPORT_VERSION = 1



def int4_group_size(spec_or_cfg: Any) -> int:
    """NNCF's group size here: 128, halved until it divides every matrix's input width."""
    get = (spec_or_cfg.get if isinstance(spec_or_cfg, dict)
           else lambda k, d=None: getattr(spec_or_cfg, k, d))
    widths = [get("hidden_size"), get("intermediate_size"),
              (get("num_heads") or get("num_attention_heads")) * get("head_dim")]
    g = INT4_GROUP
    while g > 1 and any(w % g for w in widths):
        g //= 2
    return g


@dataclass(frozen=True)
class NNCFLayout(NoFileLayout):
    """NNCF's weight compression as the export applies it: ``int4`` = INT4_SYM groups of
    :func:`int4_group_size` (an f16 scale per group, no zero point) on every matrix, with
    the tensors of ``backup_kinds`` (and any matrix whose input size doesn't divide into the
    group) in the backup precision INT8_ASYM per output channel (u8 weights, f16 scale, u8
    zero point: NNCF's default, as optimum-intel); ``int8`` = INT8_ASYM per channel
    everywhere. 1-D tensors stay f32."""

    scale_bytes: int = 2  # f16
    backup_kinds: tuple[str, ...] = ("embedding", "lm_head")
    vector_bytes: int = 4  # f32

    def storage(self, spec: LLMSpec, tensors: Sequence[WeightTensor], fmt: FormatInfo,
                device: str = "cpu") -> dict[str, tuple[int, str]]:
        g = int4_group_size(spec)
        out: dict[str, tuple[int, str]] = {}
        for t in tensors:
            if not t.is_matrix:
                out[t.name] = (t.numel * self.vector_bytes, "f32")
            elif fmt.weight_bits == 8 or t.kind in self.backup_kinds or t.ne[0] % g:
                out[t.name] = (groupwise_bytes(t.ne, 8, 0, self.scale_bytes, 8), "int8_asym")
            else:
                out[t.name] = (groupwise_bytes(t.ne, 4, g, self.scale_bytes, 0),
                               f"int4_sym_g{g}")
        return out


NNCF = NNCFLayout()
#: each format's byte layout (what the estimate reads: ``format_layouts``)
FORMAT_LAYOUTS: dict[str, FormatInfo] = {
    "int4": FormatInfo("int4", "genai", 4.125, "f16", "int8",
                       f"OpenVINO GenAI / NNCF INT4_SYM, group {INT4_GROUP} halved until it "
                       "divides every matrix's input width (f16 scale per group, no zero "
                       "point), as the openvino_genai backend builds it; embedding and LM head "
                       "INT8_ASYM per channel (NNCF's default)", weight_bits=4,
                       group_size=INT4_GROUP, symmetric=True, backend="openvino_genai",
                       layout=NNCF),
    "int8": FormatInfo("int8", "genai", 8.0, "f16", "int8",
                       "OpenVINO GenAI / NNCF INT8_ASYM per output channel (f16 scale + u8 zero "
                       "point)", weight_bits=8, group_size=0, symmetric=False,
                       backend="openvino_genai", layout=NNCF),
    "fp16": FormatInfo("fp16", "float", 16, "f16", "fp16", "OpenVINO IR with fp16 weights",
                       backend="openvino_genai", layout=FLOAT),
}


# ------------------------------------------------------------------------------- export
def _kv_wrapper(model):
    """A module with flat cache tensors in and out around a transformers causal LM."""
    import torch
    from transformers import DynamicCache

    class FlatKV(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, position_ids, past):
            cache = DynamicCache(config=self.m.config)
            for i, layer in enumerate(cache.layers):
                # prefill the layer directly: its lazy init makes an empty tensor that the
                # converters cannot concatenate
                layer.dtype, layer.device = past[2 * i].dtype, past[2 * i].device
                layer.keys, layer.values = past[2 * i], past[2 * i + 1]
                layer.is_initialized = True
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True,
                         return_dict=True)
            flat = []
            for layer in out.past_key_values.layers:
                flat += [layer.keys, layer.values]
            return (out.logits, *flat)

    return FlatKV(model)


def _convert(model) -> Any:
    """transformers model -> ov.Model with named inputs/outputs (stateless)."""
    import openvino as ov
    import torch

    cfg = model.config
    n_layers = cfg.num_hidden_layers
    kvh = cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    wrapper = _kv_wrapper(model).eval()
    b, s, p = 2, 5, 3  # not 0/1: torch.export specialises dimensions of size 0 or 1
    ids = torch.randint(3, cfg.vocab_size, (b, s))
    mask = torch.ones(b, p + s, dtype=torch.int64)
    pos = torch.arange(p, p + s).unsqueeze(0).expand(b, s).contiguous()
    past = tuple(torch.randn(b, kvh, p, head_dim) for _ in range(2 * n_layers))
    with torch.no_grad():
        try:
            from torch.export import Dim

            dyn = Dim.DYNAMIC
            program = torch.export.export(
                wrapper, (ids, mask, pos, past), strict=False,
                dynamic_shapes=({0: dyn, 1: dyn}, {0: dyn, 1: dyn}, {0: dyn, 1: dyn},
                                tuple({0: dyn, 2: dyn} for _ in past)))
            ovm = ov.convert_model(program)
            how = "torch.export"
        except Exception:  # noqa: BLE001 - fall back to TorchScript tracing
            ovm = ov.convert_model(wrapper, example_input=(ids, mask, pos, past))
            how = "torch.jit.trace"
    names = ["input_ids", "attention_mask", "position_ids"] + [
        f"past_key_values.{i}.{kind}" for i in range(n_layers) for kind in ("key", "value")]
    for port, name in zip(ovm.inputs, names):
        port.get_tensor().set_names({name})
        if name.startswith("past_key_values"):
            # the converter leaves the heads dimension dynamic; LLMPipeline's paged-attention
            # transformation reads the number of KV heads and the head size from it
            port.get_node().set_partial_shape(ov.PartialShape([-1, kvh, -1, head_dim]))
    out_names = ["logits"] + [f"present.{i}.{kind}" for i in range(n_layers)
                              for kind in ("key", "value")]
    for port, name in zip(ovm.outputs, out_names):
        port.get_tensor().set_names({name})
    ovm.validate_nodes_and_infer_types()
    return ovm, how


def _make_stateful(ovm) -> None:
    """Add ``beam_idx`` (gathers the cache's batch) and hide the cache in variables."""
    import numpy as np
    import openvino as ov
    from openvino import opset13
    from openvino._offline_transformations import apply_make_stateful_transformation

    kv_in = [p.get_any_name() for p in ovm.inputs if p.get_any_name().startswith("past_key")]
    kv_out = [p.get_any_name() for p in ovm.outputs if p.get_any_name().startswith("present")]
    batch = ovm.input("input_ids").get_partial_shape()[0]
    beam_idx = opset13.parameter(ov.PartialShape([batch]), ov.Type.i32, name="beam_idx")
    beam_idx.output(0).get_tensor().set_names({"beam_idx"})
    ovm.add_parameters([beam_idx])
    for name in kv_in:
        port = ovm.input(name)
        consumers = port.get_target_inputs()
        gather = opset13.gather(port, beam_idx, opset13.constant(0))
        for c in consumers:
            c.replace_source_output(gather.output(0))
    ovm.validate_nodes_and_infer_types()
    apply_make_stateful_transformation(ovm, dict(zip(kv_in, kv_out)))
    # the variables start as zeros of [batch, heads, 0, head_dim]
    ids = ovm.input("input_ids")
    nbatch = opset13.gather(opset13.shape_of(ids, output_type="i64"), opset13.constant([0]),
                            opset13.constant(0))
    for op in ovm.get_ops():
        if op.get_type_name() == "ReadValue":
            dims = [d.min_length for d in op.get_output_partial_shape(0)]
            parts = [nbatch if i == 0 else opset13.constant(np.array([d], dtype=np.int64))
                     for i, d in enumerate(dims)]
            zeros = opset13.broadcast(opset13.constant(0.0, dtype=op.get_output_element_type(0)),
                                      opset13.concat(parts, axis=0))
            op.set_arguments([zeros])
    ovm.validate_nodes_and_infer_types()


def export(hf_folder: str | os.PathLike, out: str | os.PathLike, fmt: str) -> dict[str, Any]:
    """Write the OpenVINO GenAI folder for ``hf_folder`` in ``fmt`` into ``out`` (an existing
    empty folder). Returns what was done (for the manifest)."""
    from edgeprof.backends.hf_folder import guard_torchvision

    guard_torchvision()
    import openvino as ov
    import torch
    from openvino_tokenizers import convert_tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf_folder, out = Path(hf_folder), Path(out)
    torch.set_grad_enabled(False)
    model = AutoModelForCausalLM.from_pretrained(str(hf_folder), dtype=torch.float32)
    model.eval()
    cfg = model.config.to_dict()
    ovm, how = _convert(model)
    del model
    _make_stateful(ovm)
    done: dict[str, Any] = {"traced_with": how}
    if fmt == "int4":
        import nncf

        group = int4_group_size(cfg)
        ovm = nncf.compress_weights(ovm, mode=nncf.CompressWeightsMode.INT4_SYM,
                                    group_size=group, ratio=1.0)
        done.update(weights="INT4_SYM", group_size=group, nncf=dist_version("nncf"),
                    backup="embedding and LM head 8-bit (NNCF default)")
    elif fmt == "int8":
        import nncf

        ovm = nncf.compress_weights(ovm, mode=nncf.CompressWeightsMode.INT8_ASYM)
        done.update(weights="INT8_ASYM per channel", nncf=dist_version("nncf"))
    ov.save_model(ovm, str(out / MODEL_XML), compress_to_fp16=(fmt == "fp16"))
    tok = AutoTokenizer.from_pretrained(str(hf_folder))
    ov_tok, ov_detok = convert_tokenizer(tok, with_detokenizer=True)
    ov.save_model(ov_tok, str(out / "openvino_tokenizer.xml"))
    ov.save_model(ov_detok, str(out / "openvino_detokenizer.xml"))
    for name in ("config.json", "generation_config.json", "tokenizer.json",
                 "tokenizer_config.json", "special_tokens_map.json"):
        if (hf_folder / name).is_file():
            shutil.copyfile(hf_folder / name, out / name)
    return done


def _export_main(argv: list[str]) -> None:
    hf, out, fmt = argv
    done = export(hf, out, fmt)
    Path(out, ".export.json").write_text(json.dumps(done), encoding="utf-8")


def run_export(hf_folder: Path, out: Path, fmt: str) -> dict[str, Any]:
    """:func:`export` in a child process (torch and transformers stay out of this one)."""
    code = ("import sys; from edgeprof.backends.openvino_genai import _export_main; "
            "_export_main(sys.argv[1:])")
    from edgeprof.backends.hf_folder import run_child

    marker = out / ".export.json"
    run_child([sys.executable, "-c", code, str(hf_folder), str(out), fmt], marker,
              "the OpenVINO GenAI export", backend="openvino_genai", precision=fmt,
              timeout=EXPORT_TIMEOUT_S)
    done = json.loads(marker.read_text(encoding="utf-8"))
    marker.unlink()
    return done


# ------------------------------------------------------------------------------ backend
class OpenvinoGenaiBackend(GenerativeBackend):
    name = "openvino_genai"
    description = ("OpenVINO GenAI LLMPipeline on a stateful OpenVINO IR exported here "
                   "(torch.export + convert_model + NNCF weight compression)")
    requires = ("openvino_genai", "openvino_tokenizers", "openvino")
    install_hint = "pip install openvino-genai openvino-tokenizers"
    formats = FORMATS
    format_layouts = FORMAT_LAYOUTS
    devices = ("cpu",)
    #: OpenVINO offloads to Intel GPUs and NPUs, never to CUDA: on the boards here, the CPU
    board_devices = ("cpu",)
    #: it builds from a Hugging Face folder (a preset's is written), never from a GGUF
    sources = ("preset", "hf_folder")
    capabilities = Capabilities(precisions=FORMATS, devices=("cpu",), model_formats=("llm",))

    def architecture_reason(self, model: LLMModel, fmt: str) -> str | None:
        reason = super().architecture_reason(model, fmt)
        if reason:
            return reason
        if model.spec.family in SLIDING:
            return (f"openvino_genai: the '{model.spec.family}' sliding-window cache does not "
                    "export here without optimum-intel (not installable beside transformers "
                    "5.23: it needs transformers < 5.6)")
        if model.spec.family not in FAMILIES:
            return f"openvino_genai exports {', '.join(FAMILIES)} here, not '{model.spec.family}'"
        return None

    def build_llm(self, model: LLMModel, fmt: str, workdir: Path):
        from edgeprof.backends.hf_folder import hf_source
        from edgeprof.core.cache import cached_entry

        self.check_buildable(model, fmt)
        src = hf_source(model)
        versions = {k: dist_version(k) for k in ("openvino", "openvino-genai",
                                                  "openvino-tokenizers", "nncf", "torch",
                                                  "transformers")}
        key = {"source": src.digest, "format": fmt, **versions, "recipe": EXPORT_VERSION,
               "precision": fmt}

        def build(folder: Path) -> dict[str, Any]:
            done = run_export(src.path, folder, fmt)
            step = {"src": "hf-folder", "dst": f"ov-genai-{fmt}",
                    "converter": f"{done.get('traced_with', 'torch.export')} + "
                                 "openvino.convert_model + make_stateful"
                                 + (" + nncf.compress_weights" if fmt != "fp16" else ""),
                    "package": "openvino", "version": versions["openvino"], "options": done}
            notes = ["random weights"] if src.random_weights else []
            if fmt == "int4":
                notes.append(f"int4: NNCF INT4_SYM group {done.get('group_size')} on every "
                             "matrix; embedding and LM head 8-bit (NNCF's default)")
            elif fmt == "int8":
                notes.append("int8: NNCF INT8_ASYM per output channel")
            else:
                notes.append("fp16: weights stored in fp16; the CPU plugin computes in its "
                             "default inference precision")
            notes.append("prefill = generate(max_new_tokens=1): TTFT includes sampling one "
                         "token; --depth > 0 is not supported (LLMPipeline owns the cache)")
            return {"route": [*src.route, step], "notes": notes}

        return cached_entry("openvino_genai", key, build, entry=MODEL_XML, manifest={
            "format": "openvino_genai", "backend": self.name, "requested_precision": fmt,
            "stored_precision": fmt, "source_digest": src.digest})

    def load_llm(self, artifact, *, threads: int, n_ctx: int, device: str = "cpu"):
        import openvino_genai as ov_genai

        from edgeprof.backends.hf_folder import folder_max_context

        folder = Path(artifact.path)
        self.check_loadable(n_ctx, folder_max_context(folder), device)
        pipe = ov_genai.LLMPipeline(str(folder), "CPU", INFERENCE_NUM_THREADS=int(threads))
        return OvGenaiSession(pipe, n_ctx, dist_version("openvino-genai"))


class OvGenaiSession:
    """One sequence on an ``LLMPipeline`` (see the module docstring)."""

    def __init__(self, pipe: Any, n_ctx: int, build_commit: str) -> None:
        self._pipe = pipe
        self.n_ctx = int(n_ctx)
        self.build_commit = build_commit
        self._prompt: list[int] | None = None
        self._count = 0

    def reset(self) -> None:
        self._prompt = None
        self._count = 0

    def _generate(self, ids: list[int], n: int, on_token: Callable[[int], None] | None) -> None:
        check_room(len(ids), n, self.n_ctx)  # LLMPipeline re-reads the prompt each call
        import numpy as np
        import openvino as ov
        import openvino_genai as ov_genai

        config = ov_genai.GenerationConfig()
        config.max_new_tokens = n
        config.min_new_tokens = n
        config.ignore_eos = True
        config.do_sample = False
        tensor = ov.Tensor(np.asarray([ids], dtype=np.int64))
        self._pipe.generate(tensor, config, streamer=_TokenStreamer(on_token))

    def prefill(self, token_ids: Sequence[int]) -> None:
        ids = [int(t) for t in token_ids]
        if self._count:
            raise UnsupportedError("openvino_genai cannot evaluate a prompt after tokens "
                                   "already in the cache (LLMPipeline owns the KV cache): "
                                   "--depth > 0 is not supported", backend="openvino_genai")
        self._generate(ids, 1, None)
        self._prompt = ids
        self._count = len(ids)

    def decode(self, n: int, on_token: Callable[[int], None]) -> None:
        if self._prompt is None:
            raise UserError("decode needs a prefilled prompt first")
        self._generate(self._prompt, n, on_token)
        self._count += n

    def close(self) -> None:
        self._pipe = None


def _TokenStreamer(  # noqa: N802 - a class made at run time
        on_token: Callable[[int], None] | None):
    """A ``StreamerBase`` that hands each token id to ``on_token`` (write() gets ids)."""
    import openvino_genai as ov_genai

    class TokenStreamer(ov_genai.StreamerBase):
        def write(self, token):  # token: int or list[int]
            if on_token is not None:
                for t in (token if isinstance(token, list) else [token]):
                    on_token(int(t))
            return ov_genai.StreamingStatus.RUNNING

        def end(self):
            return None

    return TokenStreamer()


@hookimpl
def edgeprof_register_backends():
    return [OpenvinoGenaiBackend]

"""ONNX Runtime GenAI and OpenVINO GenAI backends on a tiny llama: build (cached, with its
route), load, prefill + decode exactly n tokens even when end-of-sequence is the argmax."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgeprof.backends.hf_folder import EOS_ID, bias_to_token, write_random_hf_folder
from edgeprof.backends.onnxruntime_genai import OnnxruntimeGenaiBackend
from edgeprof.backends.openvino_genai import OpenvinoGenaiBackend
from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.core.llm import LLMModel, LLMSpec

import onnxruntime_genai  # noqa: F401  (installed by make test: a missing runtime must fail)
import openvino_genai  # noqa: F401

TINY = LLMSpec(name="tiny-llama", family="llama", hidden_size=64, num_layers=2, num_heads=4,
               num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=256,
               max_position_embeddings=256, tie_word_embeddings=False)
PROMPT = list(range(3, 35))


@pytest.fixture(scope="module")
def eos_folder(tmp_path_factory) -> Path:
    """A tiny llama whose greedy argmax is end-of-sequence after any prompt."""
    folder = tmp_path_factory.mktemp("genai") / "eos-llama"
    write_random_hf_folder(TINY, folder)
    bias_to_token(folder, EOS_ID)
    return folder


@pytest.fixture(scope="module")
def eos_model(eos_folder) -> LLMModel:
    return LLMModel(TINY, "hf_folder", str(eos_folder), path=eos_folder, random_weights=True)


def _run(session, prompt, n):
    got: list[int] = []
    session.prefill(prompt)
    session.decode(n, got.append)
    return got


# ----------------------------------------------------------------------- onnxruntime_genai
def test_ort_genai_registered_formats_and_refusals(registry):
    cls = registry.backend("onnxruntime_genai")
    assert cls is OnnxruntimeGenaiBackend and cls.workload == "generate"
    assert cls.availability().available
    assert set(cls.formats) == {"int4", "int8", "fp32"} and "cpu" in cls.devices
    b = cls()
    preset = LLMModel(TINY, "preset", "llm:tiny")
    assert b.supports(preset, "int4") is None
    assert "q4_k_m" in b.supports(preset, "q4_k_m")
    assert "GGUF" in b.supports(LLMModel(TINY, "gguf", "x.gguf", path=Path("x.gguf")), "int4")
    with pytest.raises(UnsupportedError, match="does not make format"):
        b.build_llm(preset, "f16", Path("."))


def test_ort_genai_preset_int4_route_cache_and_reset(tmp_path):
    b = OnnxruntimeGenaiBackend()
    preset = LLMModel(TINY, "preset", "llm:tiny")
    art = b.build_llm(preset, "int4", tmp_path)
    m = art.manifest
    assert (m.format, m.backend, m.requested_precision) == ("onnxruntime_genai",
                                                            "onnxruntime_genai", "int4")
    assert m.entry == "genai_config.json" and (art.path / "model.onnx").is_file()
    assert [(s["src"], s["dst"]) for s in m.route] == [("llm-spec", "hf-folder"),
                                                        ("hf-folder", "ort-genai-int4")]
    assert m.route[1]["converter"] == "onnxruntime_genai.models.builder"
    assert m.route[1]["version"] == onnxruntime_genai.__version__
    assert "random weights" in m.notes
    art.verify()
    assert not art.cache_hit and b.build_llm(preset, "int4", tmp_path).cache_hit
    assert not list(tmp_path.iterdir())  # the builder's scratch folder is gone

    s = b.load_llm(art, threads=1, n_ctx=len(PROMPT) + 8)
    first = _run(s, PROMPT, 8)
    assert len(first) == 8 and all(0 <= t < TINY.vocab_size for t in first)
    s.reset()
    assert _run(s, PROMPT, 8) == first  # a fresh sequence, greedy: the same tokens
    with pytest.raises(UserError, match="context of 40"):
        s.decode(1, lambda t: None)  # the sequence is full
    s.reset()
    s.prefill(PROMPT[:4])  # a cache filled first (--depth), then the prompt
    assert len(_run(s, PROMPT[4:12], 5)) == 5
    s.close()
    with pytest.raises(UserError, match="longer than the model's maximum"):
        b.load_llm(art, threads=1, n_ctx=TINY.max_position_embeddings + 1)


def test_the_eos_folder_makes_eos_the_argmax(eos_folder):
    """The premise of the forced-length tests below: greedy decoding would stop at once."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(eos_folder), dtype=torch.float32)
    with torch.inference_mode():
        logits = model(torch.tensor([PROMPT])).logits[0]
    assert (logits.argmax(-1) == EOS_ID).all()


def test_ort_genai_generates_exactly_n_when_eos_is_the_argmax(eos_model, tmp_path):
    fmt = "fp32"  # int4 runs on the preset above; one EOS build keeps this module fast
    b = OnnxruntimeGenaiBackend()
    art = b.build_llm(eos_model, fmt, tmp_path)
    assert [(s["src"], s["dst"]) for s in art.manifest.route] == [("hf-folder",
                                                                   f"ort-genai-{fmt}")]
    genai_cfg = json.loads(art.entry_path.read_text())
    assert genai_cfg["model"]["eos_token_id"] == EOS_ID
    s = b.load_llm(art, threads=1, n_ctx=len(PROMPT) + 12)
    got = _run(s, PROMPT, 12)
    # the runtime masks EOS (min_length = max_length), so the run never ends early
    assert len(got) == 12 and EOS_ID not in got
    s.close()


# --------------------------------------------------------------------------- openvino_genai
def test_ov_genai_refuses_what_it_cannot_export(registry):
    cls = registry.backend("openvino_genai")
    assert cls is OpenvinoGenaiBackend and set(cls.formats) == {"int4", "int8", "fp16"}
    b = cls()
    gemma2 = LLMSpec(name="g2", family="gemma2", hidden_size=64, num_layers=2, num_heads=4,
                     num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=256,
                     max_position_embeddings=256, tie_word_embeddings=True, sliding_window=64,
                     sliding_window_pattern=2)
    reason = b.supports(LLMModel(gemma2, "preset", "llm:g2"), "int4")
    assert "sliding-window" in reason and "optimum-intel" in reason
    assert "int4" in b.supports(LLMModel(TINY, "preset", "llm:tiny"), "q8_0")


def test_ov_genai_int4_exactly_n_with_eos_argmax_and_no_depth(eos_model, tmp_path):
    b = OpenvinoGenaiBackend()
    art = b.build_llm(eos_model, "int4", tmp_path)
    m = art.manifest
    assert m.format == "openvino_genai" and m.entry == "openvino_model.xml"
    assert {"openvino_tokenizer.xml", "openvino_detokenizer.xml"} <= set(m.files)
    assert m.route[-1]["dst"] == "ov-genai-int4" and "nncf" in m.route[-1]["converter"]
    assert m.route[-1]["options"]["weights"] == "INT4_SYM"
    # the estimator's byte model of this layout is the weights file the export wrote
    from edgeprof.profilers.estimate.llm import estimate_llm

    est = estimate_llm(TINY, "int4", backend="openvino_genai", prompt_tokens=8, gen_tokens=8)
    assert m.files["openvino_model.bin"]["size"] == pytest.approx(
        est.figure("weight_bytes"), rel=0.01)
    s = b.load_llm(art, threads=1, n_ctx=len(PROMPT) + 10)
    got = _run(s, PROMPT, 10)
    # ignore_eos + min_new_tokens: EOS is masked, the run never ends early
    assert len(got) == 10 and EOS_ID not in got
    with pytest.raises(UnsupportedError, match="--depth"):
        s.prefill(PROMPT[:3])
    s.reset()
    assert _run(s, PROMPT, 10) == got  # a fresh sequence, greedy: the same tokens
    s.close()

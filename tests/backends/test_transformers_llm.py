"""The random-weight Hugging Face folder and the transformers (torch eager) reference
backend: the folder round-trips through transformers in the spec's shape, is written
atomically, and the backend generates exactly n tokens even when EOS is the argmax."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgeprof.backends.hf_folder import (BOS_ID, EOS_ID, bias_to_token, hf_config, hf_source,
                                         write_random_hf_folder)
from edgeprof.backends.transformers_llm import TransformersBackend
from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.core.llm import LLMModel, LLMSpec

import torch  # noqa: F401  (installed by make test: a missing runtime must fail)
import transformers  # noqa: F401

TINY = LLMSpec(name="tiny-llama", family="llama", hidden_size=64, num_layers=2, num_heads=4,
               num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=300,
               max_position_embeddings=128, tie_word_embeddings=False)
PROMPT = list(range(3, 23))


def _parameters(spec: LLMSpec) -> int:
    """The parameter count of a llama-family spec, counted by hand."""
    h, kv = spec.hidden_size, spec.num_kv_heads * spec.head_dim
    q = spec.num_heads * spec.head_dim
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * spec.intermediate_size + 2 * h
    head = 0 if spec.tie_word_embeddings else spec.vocab_size * h
    return spec.vocab_size * h + spec.num_layers * per_layer + h + head


@pytest.mark.parametrize("family,tied", [("llama", False), ("qwen2", True), ("phi3", False),
                                         ("gemma2", True)])
def test_hf_folder_round_trips_through_transformers(tmp_path, family, tied):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = LLMSpec(**{**TINY.to_dict(), "family": family, "tie_word_embeddings": tied,
                      "sliding_window": 32 if family == "gemma2" else None,
                      "sliding_window_pattern": 2 if family == "gemma2" else 0})
    folder = write_random_hf_folder(spec, tmp_path / "m", seed=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no staging folder left
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == family and cfg["num_key_value_heads"] == 2
    assert cfg["tie_word_embeddings"] is tied and cfg["eos_token_id"] == EOS_ID
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    n = sum(p.numel() for p in model.parameters())
    if family == "llama":
        assert n == _parameters(spec)
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert len(tok) == spec.vocab_size
    assert (tok.bos_token_id, tok.eos_token_id) == (BOS_ID, EOS_ID)
    if family == "llama":  # other families' tokenizer classes re-wire the pre-tokenizer;
        # the benchmarks feed token ids, so only the vocab and special ids matter there
        assert tok("w5 w299")["input_ids"][-2:] == [5, 299]
    # the same seed writes the same weights
    again = write_random_hf_folder(spec, tmp_path / "again", seed=3)
    assert (again / "model.safetensors").read_bytes() == (folder / "model.safetensors"
                                                           ).read_bytes()


def test_hf_folder_refuses_and_leaves_nothing(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(UserError, match="it exists"):
        write_random_hf_folder(TINY, tmp_path / "taken")
    with pytest.raises(UserError, match="dtype"):
        write_random_hf_folder(TINY, tmp_path / "x", dtype="int3")
    odd = LLMSpec(**{**TINY.to_dict(), "family": "mamba"})
    with pytest.raises(UnsupportedError, match="mamba"):
        hf_config(odd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_transformers_backend_exactly_n_with_eos_argmax(tmp_path):
    folder = write_random_hf_folder(TINY, tmp_path / "eos")
    bias_to_token(folder, EOS_ID)
    model = LLMModel(TINY, "hf_folder", str(folder), path=folder, random_weights=True)
    b = TransformersBackend()
    assert b.supports(model, "fp32") is None
    assert "GGUF" in b.supports(LLMModel(TINY, "gguf", "m.gguf", path=Path("m.gguf")), "fp32")
    art = b.build_llm(model, "fp32", tmp_path / "work")
    assert art.path == folder and art.manifest.format == "hf"
    assert art.manifest.backend == "transformers" and "config.json" in art.manifest.files
    s = b.load_llm(art, threads=1, n_ctx=len(PROMPT) + 16)
    got: list[int] = []
    s.prefill(PROMPT)
    s.decode(16, got.append)
    assert got == [EOS_ID] * 16  # EOS is the argmax every time and never stops the run
    with pytest.raises(UserError, match="context of 36"):
        s.prefill([5])
    s.reset()
    s.prefill(PROMPT[:10])  # a filled cache (--depth), then more prompt, then tokens
    s.prefill(PROMPT[10:])
    more: list[int] = []
    s.decode(3, more.append)
    assert more == [EOS_ID] * 3
    s.close()
    with pytest.raises(UserError, match="longer than the model's maximum"):
        b.load_llm(art, threads=1, n_ctx=TINY.max_position_embeddings + 1)


def test_transformers_backend_preset_bf16_is_cached_and_half_size(tmp_path):
    b = TransformersBackend()
    preset = LLMModel(TINY, "preset", "llm:tiny")
    art = b.build_llm(preset, "bf16", tmp_path)
    m = art.manifest
    assert [(s["src"], s["dst"]) for s in m.route] == [("llm-spec", "hf-folder")]
    assert m.route[0]["dtype"] == "bfloat16" and m.requested_precision == "bf16"
    assert "random weights" in m.notes
    art.verify()
    weights = (art.path / "model.safetensors").stat().st_size
    assert weights < 2 * _parameters(TINY) + 4096  # two bytes a parameter (+ header)
    assert hf_source(preset, dtype="bfloat16").path == art.path  # cached
    s = b.load_llm(art, threads=1, n_ctx=len(PROMPT) + 4)
    got: list[int] = []
    s.prefill(PROMPT)
    s.decode(4, got.append)
    assert len(got) == 4
    s.close()

"""llama_cpp backend: random-weight GGUFs for every family load in llama.cpp, a preset builds
in every format with llama.cpp's quantizer (sizes and per-tensor types as the estimator
says), decoding forces its length past end-of-sequence, and bad files and formats get
one-line answers."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGUFReader

import llama_cpp  # noqa: F401 - `make test` installs it: a missing runtime must fail here
from edgeprof.backends.gguf_write import EOS_ID, tensor_plan, write_random_gguf
from edgeprof.backends.llama_cpp import LlamaCppBackend, gguf_file_format, quantize_gguf
from edgeprof.core.gguf import read_gguf_header
from edgeprof.core.errors import ModelError, UnsupportedError, UserError
from edgeprof.core.llm import LLMModel, LLMSpec

#: tiny shapes of each family llama.cpp runs (hidden 256 so K-quant super-blocks fit)
FAMILIES = {
    "llama": dict(family="llama", tie_word_embeddings=False),
    "qwen2": dict(family="qwen2", tie_word_embeddings=True, qkv_bias=True),
    "gemma": dict(family="gemma", tie_word_embeddings=True, hidden_act="gelu_pytorch_tanh"),
    "gemma2": dict(family="gemma2", tie_word_embeddings=True, sliding_window=16,
                   sliding_window_pattern=2, hidden_act="gelu_pytorch_tanh"),
    "gemma3_text": dict(family="gemma3_text", tie_word_embeddings=True, sliding_window=16,
                        sliding_window_pattern=6, hidden_act="gelu_pytorch_tanh"),
    "phi3": dict(family="phi3", tie_word_embeddings=False, fused_qkv=True, fused_gate_up=True),
}
LAYERS = {"gemma3_text": 6, "gemma2": 2}


def tiny(family: str, **kw) -> LLMSpec:
    base = dict(name=f"tiny-{family}", hidden_size=256, num_layers=LAYERS.get(family, 2),
                num_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=512,
                vocab_size=512, max_position_embeddings=256)
    return LLMSpec(**{**base, **FAMILIES[family], **kw})


def preset_model(spec: LLMSpec) -> LLMModel:
    return LLMModel(spec=spec, source_kind="preset", given=f"llm:{spec.name}")


def gguf_model(path, spec: LLMSpec, **kw) -> LLMModel:
    return LLMModel(spec=spec, source_kind="gguf", given=str(path), path=path, **kw)


@pytest.fixture(scope="module")
def backend():
    return LlamaCppBackend()


# ------------------------------------------------------------------------ the writer
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_and_generates(family, backend, tmp_path):
    spec = tiny(family)
    path = write_random_gguf(spec, tmp_path / "m.gguf", dtype="f32")
    reader = GGUFReader(path)
    names = {t.name for t in reader.tensors}
    assert names == {p.name for p in tensor_plan(spec)}
    assert len(reader.get_field("tokenizer.ggml.tokens").data) == spec.vocab_size
    model = gguf_model(path, spec)
    art = backend.build_llm(model, "f32", tmp_path)
    assert art.entry_path == path.resolve() and art.manifest.route == []  # used as given
    with backend.load_llm(art, threads=1, n_ctx=64) as session:
        assert session.n_vocab == spec.vocab_size
        session.prefill([5, 6, 7, 8])
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(session._ctx, -1),
                                       shape=(session.n_vocab,))
        assert np.isfinite(logits).all() and logits.std() > 0
        got: list[int] = []
        session.decode(5, got.append)
        assert len(got) == 5 and all(0 <= t < spec.vocab_size for t in got)
        assert session.n_past == 9


def test_every_presets_tensors_add_up_to_its_published_parameters():
    """What the GGUF holds plus what the llama-family build does not represent (qwen3's and
    olmo2's per-head q/k norms: zoo/llm_presets.toml) is the published count."""
    from edgeprof.zoo.llm import PRESETS, preset_representation

    for name, spec in PRESETS.items():
        written = sum(p.n_elements for p in tensor_plan(spec))
        extra = preset_representation(name)["unrepresented_parameters"]
        assert written + extra == spec.published_parameters, name


def test_fused_projections_and_sliding_window_metadata(tmp_path):
    phi = GGUFReader(write_random_gguf(tiny("phi3"), tmp_path / "phi.gguf", dtype="f16"))
    shapes = {t.name: (list(t.shape), t.tensor_type.name) for t in phi.tensors}
    # ggml order (cols, rows): qkv rows = q + 2 kv, up rows = 2 x intermediate
    assert shapes["blk.0.attn_qkv.weight"] == ([256, 256 + 2 * 128], "F16")
    assert shapes["blk.0.ffn_up.weight"] == ([256, 2 * 512], "F16")
    assert shapes["blk.0.attn_norm.weight"] == ([256], "F32")  # 1-D stays F32 in an F16 file
    assert "blk.0.ffn_gate.weight" not in shapes
    g2 = GGUFReader(write_random_gguf(tiny("gemma2"), tmp_path / "g2.gguf"))
    assert g2.get_field("gemma2.attention.sliding_window").contents() == 16
    assert g2.get_field("gemma2.final_logit_softcapping").contents() == 30.0
    assert gguf_file_format(tmp_path / "phi.gguf") == "f16"


def test_write_is_atomic_and_refuses_an_unknown_architecture(tmp_path, backend):
    spec = LLMSpec(name="mystery", family="mamba", hidden_size=64, num_layers=1, num_heads=1,
                   num_kv_heads=1, head_dim=64, intermediate_size=64, vocab_size=300,
                   max_position_embeddings=64, tie_word_embeddings=True)
    with pytest.raises(UnsupportedError, match="architecture 'mamba'"):
        write_random_gguf(spec, tmp_path / "m.gguf")
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    reason = backend.supports(preset_model(spec), "q4_0")
    assert reason and "mamba" in reason and "\n" not in reason


# --------------------------------------------------------------- a preset, every format
@pytest.fixture(scope="module")
def smollm2(backend):
    from edgeprof.zoo.llm import resolve_llm

    model = resolve_llm("llm:smollm2-135m")
    return model, {fmt: backend.build_llm(model, fmt, None) for fmt in backend.formats}


def test_preset_builds_in_every_format_with_llama_cpps_quantizer(smollm2, backend):
    model, arts = smollm2
    for fmt, art in arts.items():
        m = art.manifest
        assert m.format == "gguf" and m.backend == "llama_cpp" and m.requested_precision == fmt
        assert m.route[0]["src"] == "llm-spec" and m.route[0]["converter"] == "edgeprof gguf_write"
        assert m.route[-1]["dst"] == f"gguf-{fmt}"
        if fmt not in ("f16", "f32"):
            assert m.route[-1]["converter"] == "llama_model_quantize"
            assert m.route[-1]["package"] == "llama-cpp-python"
        assert any("random weights" in n for n in m.notes)
        assert gguf_file_format(art.entry_path) == fmt
        # the file itself says so (llama.cpp's quantizer keeps the key): given back by
        # path, it is still reported as random weights
        from edgeprof.zoo.llm import resolve_llm

        again = resolve_llm(str(art.entry_path))
        assert again.random_weights and again.file_format == fmt
    again = backend.build_llm(model, "q4_k_m", None)  # content-keyed cache: no rebuild
    assert again.cache_hit and again.path == arts["q4_k_m"].path


def test_file_sizes_and_tensor_types_match_the_estimate(smollm2):
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    from edgeprof.backends.llama_cpp_formats import gguf_file_bytes, gguf_tensor_types
    from edgeprof.profilers.estimate.llm import weight_bytes

    model, arts = smollm2
    for fmt, art in arts.items():
        table = read_gguf_header(art.entry_path).tensors
        actual = {name: GGMLQuantizationType(t).name.upper() for name, (_, t, _) in table.items()}
        expected = {k: str(getattr(v, "name", v)).upper()
                    for k, v in gguf_tensor_types(model.spec, fmt).items()}
        assert expected == actual, fmt
        data = 0
        for dims, t, _ in table.values():
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(t)]
            data += int(np.prod(dims)) // block * size
        assert abs(weight_bytes(model.spec, fmt) - data) <= 0.01 * data, fmt
        size = art.entry_path.stat().st_size
        assert abs(gguf_file_bytes(model.spec, fmt) - size) <= 0.01 * size, fmt


def test_a_built_preset_runs(smollm2, backend):
    _, arts = smollm2
    with backend.load_llm(arts["q4_0"], threads=1, n_ctx=64) as session:
        assert session.build_commit.startswith("llama-cpp-python ")
        session.prefill(list(range(10, 42)))
        got: list[int] = []
        session.decode(4, got.append)
        assert len(got) == 4 and session.n_past == 36


# ---------------------------------------------------------------------- the session
def test_decode_forces_the_length_past_end_of_sequence(tmp_path, backend):
    spec = tiny("qwen2")
    bias = np.zeros(spec.vocab_size, np.float32)
    bias[EOS_ID] = 100.0  # argmax is always </s>
    path = write_random_gguf(spec, tmp_path / "eos.gguf", dtype="f16",
                             overrides={"output.bias": bias})
    art = backend.build_llm(gguf_model(path, spec), "f16", tmp_path)
    with backend.load_llm(art, threads=1, n_ctx=64) as session:
        session.prefill([5, 6, 7])
        got: list[int] = []
        session.decode(12, got.append)
    assert got == [EOS_ID] * 12


def test_prefill_then_decode_reset_and_depth(tmp_path, backend):
    spec = tiny("llama")
    art = backend.build_llm(gguf_model(write_random_gguf(spec, tmp_path / "m.gguf"), spec),
                            "f32", tmp_path)
    with backend.load_llm(art, threads=1, n_ctx=64) as session:
        prompt = [9, 40, 41, 300, 7]
        session.prefill(prompt)
        first: list[int] = []
        session.decode(6, first.append)
        assert session.n_past == 11
        session.prefill([3, 4])  # continues the sequence (a filled cache: depth)
        assert session.n_past == 13
        session.reset()
        assert session.n_past == 0
        with pytest.raises(Exception, match="before prefill"):
            session.decode(1, lambda t: None)
        session.prefill(prompt)
        second: list[int] = []
        session.decode(6, second.append)
        assert second == first  # greedy from an empty cache: the same tokens
        with pytest.raises(UserError, match="loaded for a context of 256"):
            session.decode(session.n_ctx, lambda t: None)
        with pytest.raises(UserError, match="outside the vocabulary"):
            session.prefill([spec.vocab_size])


def test_context_longer_than_the_model_allows(tmp_path, backend):
    spec = tiny("llama")
    art = backend.build_llm(gguf_model(write_random_gguf(spec, tmp_path / "m.gguf"), spec),
                            "f32", tmp_path)
    with pytest.raises(UserError, match="longer than the model's maximum"):
        backend.load_llm(art, threads=1, n_ctx=spec.max_position_embeddings + 1)


# ------------------------------------------------------------------- bad files, formats
def test_truncated_gguf_is_a_one_line_error(tmp_path, backend):
    spec = tiny("llama")
    whole = write_random_gguf(spec, tmp_path / "whole.gguf", dtype="f16").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    model = gguf_model(cut, spec, file_format="f16")
    with pytest.raises(ModelError) as load:
        backend.load_llm(backend.build_llm(model, "f16", tmp_path), threads=1, n_ctx=32)
    with pytest.raises(ModelError) as requant:  # the in-process quantizer fails too
        backend.build_llm(model, "q8_0", tmp_path)
    for err in (load.value, requant.value):
        text = str(err)
        assert "\n" not in text and "cut.gguf" in text and "not within the file bounds" in text
    assert err.exit_code == 2
    stub = tmp_path / "stub.gguf"
    stub.write_bytes(whole[:100])  # the header itself is cut
    with pytest.raises(ModelError, match="not a readable GGUF file .*past the end"):
        backend.build_llm(gguf_model(stub, spec), "q8_0", tmp_path)


def test_a_users_gguf_is_requantized_and_says_so(tmp_path, backend):
    spec = tiny("llama")
    path = write_random_gguf(spec, tmp_path / "user.gguf", dtype="f16")
    art = backend.build_llm(gguf_model(path, spec, random_weights=False), "q8_0", tmp_path)
    assert gguf_file_format(art.entry_path) == "q8_0"
    assert art.manifest.route[-1]["src"] == "gguf-f16"
    assert any("quantized from the file's f16" in n for n in art.manifest.notes)
    again = backend.build_llm(gguf_model(art.entry_path, spec, random_weights=False), "q4_0",
                              tmp_path)
    assert any("requantized" in n and "quality is worse" in n for n in again.manifest.notes)


def test_formats_devices_and_folders_it_does_not_take(backend):
    model = preset_model(tiny("llama"))
    reason = backend.supports(model, "int4")
    assert "does not make format 'int4'" in reason and "q4_k_m" in reason
    with pytest.raises(UnsupportedError, match="int4"):
        backend.build_llm(model, "int4", None)
    if not llama_cpp.llama_supports_gpu_offload():
        assert backend.devices == ("cpu",)
        assert "not 'cuda'" in backend.supports(model, "q4_0", "cuda")
    folder = LLMModel(spec=model.spec, source_kind="hf_folder", given="x", random_weights=False)
    assert "convert_hf_to_gguf" in backend.supports(folder, "q4_0")
    with pytest.raises(UnsupportedError, match="does not make"):
        quantize_gguf("a.gguf", "b.gguf", "int4")


def test_registered_as_a_generative_backend(registry):
    assert registry.backends_for("generate")["llama_cpp"].cls is LlamaCppBackend
    assert "llama_cpp" not in registry.backends_for("tensor")

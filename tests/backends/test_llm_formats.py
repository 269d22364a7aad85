"""Each generative backend declares its formats and their byte layouts as data
(``format_layouts``), importable without its runtime."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from edgeprof.core.llm import DeclaresFormats, FormatInfo, WeightLayout
from edgeprof.core.plugins import get_registry

RUNTIMES = ["llama_cpp", "onnxruntime_genai", "openvino_genai", "transformers", "torch",
            "openvino", "onnxruntime", "nncf"]


def _generative():
    return {n: e.cls for n, e in get_registry().backends_for("generate").items()}


def test_every_built_in_generative_backend_declares_its_formats():
    classes = _generative()
    assert set(classes) >= {"llama_cpp", "onnxruntime_genai", "openvino_genai", "transformers"}
    for name, cls in classes.items():
        assert isinstance(cls, DeclaresFormats), name
        layouts = cls.format_layouts
        assert set(cls.formats) <= set(layouts), name  # every format it makes has a layout
        for fmt, info in layouts.items():
            assert isinstance(info, FormatInfo) and info.name == fmt, (name, fmt)
            assert info.backend == name, (name, fmt)
            assert isinstance(info.layout, WeightLayout), (name, fmt)
            assert "layout" not in info.to_dict()


def test_layouts_follow_what_the_backends_build():
    from edgeprof.backends import onnxruntime_genai as ort
    from edgeprof.backends import openvino_genai as ov
    from edgeprof.backends.llama_cpp import FTYPES, LlamaCppBackend

    # llama.cpp: the ftype each format declares is the quantizer's target the build asks for
    from gguf import LlamaFileType

    assert tuple(FTYPES) == LlamaCppBackend.formats
    for fmt in LlamaCppBackend.formats:
        ftype = LlamaCppBackend.format_layouts[fmt].ftype
        assert FTYPES[fmt].endswith(LlamaFileType(ftype).name), fmt
    # ONNX Runtime GenAI: the builder's block size and symmetry
    for fmt in ("int4", "int8"):
        info = ort.FORMAT_LAYOUTS[fmt]
        assert info.group_size == ort.QUANT_OPTIONS["block_size"]
        assert info.symmetric == (ort.QUANT_OPTIONS["is_symmetric"] == "true")
    # OpenVINO GenAI: NNCF's int4 group the export asks for
    assert ov.FORMAT_LAYOUTS["int4"].group_size == ov.INT4_GROUP


def test_format_data_imports_no_runtime():
    probe = ("import json, sys\n"
             "import edgeprof.backends.llama_cpp_formats, edgeprof.backends.llm_layout\n"
             "from edgeprof.core.plugins import get_registry\n"
             "for e in get_registry().backends_for('generate').values():\n"
             "    assert e.cls.format_layouts\n"
             f"print(json.dumps(sorted(m for m in {RUNTIMES!r} if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("fmt", ["q2_k", "q4_k_m", "q8_0"])
def test_gguf_sizes_live_with_llama_cpp(fmt):
    from edgeprof.backends.llama_cpp_formats import gguf_file_bytes, gguf_tensor_bytes
    from edgeprof.zoo.llm import get_preset

    spec = get_preset("smollm2-135m")
    data = sum(gguf_tensor_bytes(spec, fmt).values())
    assert 0 < gguf_file_bytes(spec, fmt) - data < 0.02 * data


def test_one_weight_tensor_type():
    """``WeightTensor`` (core's contract) and ``TensorInfo`` (the layout module's dataclass)
    were the same five fields and two properties written twice (issue 31): one definition,
    in core, which the layout module lists tensors as."""
    import edgeprof.backends.llm_layout as layout
    import edgeprof.profilers.estimate.llm as estimate
    from edgeprof.core.llm import WeightTensor
    from edgeprof.zoo.llm import resolve_llm

    ts = layout.tensors(resolve_llm("llm:smollm2-135m").spec)
    assert ts and all(type(t) is WeightTensor for t in ts)
    assert not hasattr(layout, "TensorInfo") and not hasattr(estimate, "TensorInfo")
    emb = ts[0]
    assert (emb.name, emb.is_matrix, emb.numel) == ("token_embd.weight", True,
                                                   emb.ne[0] * emb.ne[1])

"""The LLM estimate reads each format's byte layout from the backend that declares it
(through the plugin registry): pinned figures, a plugin's backend, and no runtime named."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgeprof.backends.llm_layout import FLOAT
from edgeprof.core.errors import UserError
from edgeprof.core.llm import FormatInfo, GenerativeBackend
from edgeprof.profilers.estimate import llm as E
from edgeprof.zoo.llm import get_preset

#: (preset, backend, format) -> (weight bytes, decode bytes/token, GGUF file bytes, weight
#: bytes on CUDA, max context in 8 GB): the figures before the formats moved to the backends
#: (prompt 512, generated 128, depth 0)
PINNED = {
    ("tinyllama-1.1b", "llama_cpp", "q4_k_m"): (667078656, 631667712, 667862688, 667078656,
                                                2048),
    ("smollm2-135m", "llama_cpp", "q2_k"): (86416128, 87902208, 87616064, 86416128, 8192),
    ("gemma-3-1b", "llama_cpp", "q4_0"): (713892352, 715609600, 720208096, 713892352, 32768),
    ("tinyllama-1.1b", "onnxruntime_genai", "int4"): (909025280, 649787392, None, 713117696,
                                                      2048),
    ("qwen2.5-0.5b", "onnxruntime_genai", "int8"): (1100531200, 557577728, None, 797246208,
                                                    32768),
    ("smollm-135m", "openvino_genai", "int4"): (85001472, 86487552, None, 85001472, 2048),
    ("llama-3.2-1b", "openvino_genai", "int8"): (1237532416, 1239645952, None, 1237532416,
                                                 131072),
    ("gemma-2-2b", "openvino_genai", "fp16"): (5228683776, 5235552768, None, 5228683776, 8192),
    ("phi-3.5-mini", "transformers", "bf16"): (7642159104, 7470520320, None, 7642159104, 0),
    ("qwen2.5-0.5b", None, "int4"): (309011968, 310597120, None, 277996288, 32768),
}


@pytest.mark.parametrize("key", PINNED, ids=lambda k: "-".join(map(str, k)))
def test_figures_are_the_ones_before_the_move(key):
    preset, backend, fmt = key
    spec = get_preset(preset)
    e = E.estimate_llm(spec, fmt, backend=backend)
    got = (e.figure("weight_bytes"), e.figure("decode_bytes_per_token"),
           e.figures.get("file_bytes", {}).get("value"),
           E.weight_bytes(spec, fmt, backend=backend, device="cuda"),
           E.max_context_tokens(spec, fmt, 8e9, backend=backend))
    assert got == PINNED[key]
    d = e.to_dict()
    assert "layout" not in d["format_info"] and json.dumps(d)  # serialisable as before


def test_formats_are_read_from_the_backends():
    from edgeprof.core.plugins import get_registry

    for name, entry in get_registry().backends_for("generate").items():
        table = E.formats_for(name)
        assert list(table) == [f for f in entry.cls.formats if f in entry.cls.format_layouts]
        assert all(table[f] is entry.cls.format_layouts[f] for f in table)
        assert E.formats_for(entry.cls) == table  # a class reads the same
    assert E.backend_formats()["openvino_genai"]["int4"].group_size == 128
    # the generic table: floats as such, then the first backend declaring each name
    generic = E.generic_formats()
    assert generic["fp32"].backend is None and generic["int4"].backend == "onnxruntime_genai"
    assert generic["bf16_gguf"].ggml_type == "BF16"
    # old names, read from the registry
    assert E.BACKEND_FORMATS["transformers"] == ("fp32", "bf16")
    assert E.FORMATS == generic


class _Fp8Layout:
    """A plugin's own layout: every matrix 1 B a value, vectors fp32."""

    def storage(self, spec, tensors, fmt, device="cpu"):
        return {t.name: (t.numel * (1 if t.is_matrix else 4), "fp8" if t.is_matrix else "f32")
                for t in tensors}

    def file_bytes(self, spec, tensors, fmt):
        return sum(b for b, _ in self.storage(spec, tensors, fmt).values()) + 100, "file"


class _Declaring(GenerativeBackend):
    name = "plugin_llm"
    formats = ("fp8", "fp16")
    format_layouts = {
        "fp8": FormatInfo("fp8", "plugin", 8, "f16", "fp16", "fp8 matrices",
                          backend="plugin_llm", layout=_Fp8Layout()),
        "fp16": FormatInfo("fp16", "float", 16, "f16", "fp16", "fp16",
                           backend="plugin_llm", layout=FLOAT),
    }


class _Silent(GenerativeBackend):
    name = "silent_llm"
    formats = ("q4_0", "int4")


def test_a_plugins_backend_that_declares_formats_is_estimated_with_them():
    spec = get_preset("smollm2-135m")
    e = E.estimate_llm(spec, "fp8", backend=_Declaring)
    vec = sum(t.numel for t in E.tensors(spec) if not t.is_matrix)
    assert e.figure("weight_bytes") == E.parameter_count(spec) - vec + 4 * vec
    assert e.figure("file_bytes") == e.figure("weight_bytes") + 100
    assert e.backend == "plugin_llm" and e.format_info.family == "plugin"
    assert list(E.formats_for(_Declaring())) == ["fp8", "fp16"]
    with pytest.raises(UserError) as err:
        E.estimate_llm(spec, "q4_0", backend=_Declaring)
    assert "unknown format for backend 'plugin_llm' 'q4_0'" in str(err.value)


def test_a_plugins_backend_that_declares_none_gets_the_generic_accounting():
    spec = get_preset("smollm2-135m")
    for fmt in _Silent.formats:
        mine = E.estimate_llm(spec, fmt, backend=_Silent).to_dict()
        generic = E.estimate_llm(spec, fmt).to_dict()
        assert mine == generic
    assert not E.declares_formats(_Silent) and E.declares_formats("llama_cpp")
    with pytest.raises(UserError):
        E.formats_for(_Silent)


def test_through_a_plugins_file(tmp_path, monkeypatch):
    """Registered by a user's plugins.toml, the backend's formats reach formats_for by name."""
    (tmp_path / "my_llm.py").write_text(
        "from edgeprof.core.hookspecs import hookimpl\n"
        "from edgeprof.core.llm import GenerativeBackend\n"
        "from edgeprof.backends.onnxruntime_genai import FORMAT_LAYOUTS\n"
        "import dataclasses\n"
        "class MyLlm(GenerativeBackend):\n"
        "    name = 'my_llm'\n"
        "    formats = ('int4',)\n"
        "    format_layouts = {'int4': dataclasses.replace(FORMAT_LAYOUTS['int4'],\n"
        "                      backend='my_llm', group_size=64)}\n"
        "@hookimpl\n"
        "def edgeprof_register_backends():\n"
        "    return [MyLlm]\n")
    (tmp_path / "plugins.toml").write_text('[plugins]\nmodules = ["my_llm.py"]\n')
    from edgeprof.core.plugins import get_registry

    reg = get_registry(tmp_path / "plugins.toml")
    spec = get_preset("smollm2-135m")
    assert E.formats_for("my_llm", registry=reg)["int4"].group_size == 64
    mine = E.weight_bytes(spec, E.resolve_format("int4", "my_llm", registry=reg))
    assert mine < E.weight_bytes(spec, "int4", backend="onnxruntime_genai")  # fewer scales


def test_the_estimate_names_no_backend():
    """No backend-name branch: no string constant in the estimate equals a generative
    backend's name."""
    from edgeprof.core.plugins import get_registry

    names = set(get_registry().backends_for("generate"))
    tree = ast.parse(Path(E.__file__).read_text(encoding="utf-8"))
    found = {n.value for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and n.value in names}
    assert not found


def test_estimating_every_backend_format_imports_no_runtime():
    probe = (
        "import json, sys\n"
        "from edgeprof.profilers.estimate.llm import backend_formats, estimate_llm\n"
        "from edgeprof.targets import get_target\n"
        "t = get_target('raspberry_pi_5')\n"
        "for b, fmts in backend_formats().items():\n"
        "    for f in fmts:\n"
        "        estimate_llm('llm:smollm2-135m', f, backend=b, target=t)\n"
        "heavy = ['llama_cpp', 'onnxruntime_genai', 'openvino_genai', 'transformers', 'torch',\n"
        "         'openvino', 'onnxruntime', 'nncf']\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_broken_plugins_file_leaves_the_built_in_formats_known(tmp_path, monkeypatch):
    bad = tmp_path / "plugins.toml"
    bad.write_text('[plugins]\nmodules = ["no_such_module_here"]\n')
    monkeypatch.setenv("EDGEPROF_PLUGINS", str(bad))
    spec = get_preset("smollm2-135m")
    assert E.formats_for("openvino_genai")["int4"].backend == "openvino_genai"
    assert (E.weight_bytes(spec, "q4_k_m")
            == E.weight_bytes(spec, E.formats_for("llama_cpp")["q4_k_m"]))

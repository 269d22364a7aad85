"""The conversion graph: routes, missing edges, plugins adding formats and converters."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from edgeprof.core.errors import PluginError, UnsupportedError
from edgeprof.core.formats import ConversionGraph, Converter, Format
from edgeprof.core.plugins import get_graph

README = Path(__file__).resolve().parents[2] / "README.md"


def _toy_graph(**missing):
    fmts = [Format(n) for n in ("a", "b", "c", "d")]

    def conv(src, dst, cost, precisions=("fp32",)):
        c = Converter(src, dst, f"{src}2{dst}", package=f"pkg-{src}{dst}",
                      function=lambda s, o, p: "x", precisions=precisions, cost=cost)
        if (src, dst) in missing.get("absent", ()):
            object.__setattr__(c, "missing", lambda: f"pkg_{src}{dst}")
        else:
            object.__setattr__(c, "missing", lambda: None)
        return c

    return ConversionGraph(fmts, [conv("a", "b", 1), conv("b", "c", 1), conv("a", "c", 5),
                                  conv("a", "d", 1, ("int8",)), conv("d", "c", 1)], )


def test_cheapest_route_and_precision_on_the_last_edge_only():
    g = _toy_graph()
    r = g.route("a", ["c"], "fp32")
    assert [c.name for c in r.steps] == ["a2b", "b2c"]  # 2 < 5
    # int8 needs the backend to apply it, or a last edge that produces it
    assert g.route("a", ["c"], "int8", applies=("int8",)).steps[-1].name == "b2c"
    assert g.route("a", ["d"], "int8").precisions == ["int8"]
    assert g.route("a", ["c"], "int8") is None  # a->d produces int8 but cannot be followed
    assert g.route("c", ["c"], "int8").steps == []  # loaded as is: the backend decides


def test_missing_package_and_missing_edge_are_named():
    g = _toy_graph(absent={("b", "c"), ("a", "c")})
    assert g.route("a", ["c"]) is None  # a -> d makes int8 only
    with pytest.raises(UnsupportedError, match=r"edge b -> c \(b2c\) needs the Python package "
                                               r"'pkg-bc': pip install pkg-bc"):
        g.plan("a", ["c"], "fp32", (), "x")
    with pytest.raises(UnsupportedError, match="missing edge is c -> a"):
        g.plan("c", ["a"], "fp32", (), "x")


def test_a_converter_on_an_unknown_format_is_refused():
    with pytest.raises(PluginError, match="format 'zz'"):
        ConversionGraph([Format("a")], [Converter("a", "zz", "n", "p", "m:f")])


def test_builtin_routes_reach_every_cpu_backend_where_a_converter_exists():
    from edgeprof.core.plugins import get_registry

    reg = get_registry()
    text = {}
    for src in ("onnx", "tflite", "openvino"):
        for name in ("onnxruntime", "openvino", "tflite", "torch_eager", "torch_compile"):
            cls = reg.backend(name)
            try:
                text[src, name] = cls.route(src, "fp32").text()
            except UnsupportedError as e:
                text[src, name] = str(e)
    assert text["onnx", "tflite"].startswith("onnx -> torch (onnx2torch ")
    assert "-> tflite (litert-torch" in text["onnx", "tflite"]
    assert text["onnx", "torch_eager"].startswith("onnx -> torch (onnx2torch")
    assert text["tflite", "onnxruntime"].startswith("tflite -> onnx (tf2onnx")
    assert text["tflite", "openvino"].startswith("tflite -> openvino (ov.convert_model")
    assert text["openvino", "openvino"] == "openvino (as given)"
    assert "missing edge is openvino -> onnx" in text["openvino", "onnxruntime"]
    assert "missing edge is openvino -> torch" in text["openvino", "torch_eager"]


def _readme_block(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(f"## {title}"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_add_a_converter_walkthrough_runs(tmp_path):
    from edgeprof.backends.onnxruntime import OnnxRuntimeBackend
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry

    (tmp_path / "linear_json.py").write_text(_readme_block("Adding a converter"))
    (tmp_path / "plugins.toml").write_text('[plugins]\nmodules = ["linear_json.py"]\n')
    layer = tmp_path / "layer.json"
    layer.write_text(json.dumps({"weight": [[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]],
                                 "bias": [0.5, -0.5]}))
    reg = get_registry(tmp_path / "plugins.toml", refresh=True)
    graph = get_graph(registry=reg)
    assert "linear_json" in graph.formats
    handle = resolve_model(str(layer), registry=reg)
    assert handle.format == "linear_json" and handle.input_specs[0].shape == (1, 3)
    pm = OnnxRuntimeBackend().prepare(handle, RunConfig(threads=1), [
        __import__("numpy").array([[1.0, 1.0, 1.0]], dtype="float32")])
    assert pm.notes[0].startswith("route: linear_json -> onnx (linear2onnx ")
    assert pm.extra["route"][0]["converter"] == "linear2onnx"
    assert pm.to_numpy(pm.run(pm.inputs))[0].tolist() == [[6.5, -1.0]]
    manifest = json.loads((Path(pm.extra["artifact"]["path"]) / "manifest.json").read_text())
    assert manifest["route"][0]["src"] == "linear_json" and manifest["format"] == "onnx"
    # a format edgeprof cannot run itself has no reference: said, not faked
    assert pm.extra["agreement"]["reference"] is None
    assert "no fp32 reference" in pm.extra["agreement"]["reason"]


def test_the_registry_owns_its_conversion_graph():
    """One graph per registry, kept by the registry (no module-level cache keyed by id):
    a registry with another plugin list has its own."""
    from edgeprof.core.plugins import PluginManager, get_registry

    reg = get_registry()
    assert get_graph(registry=reg) is reg.conversion_graph is reg.conversion_graph
    other = PluginManager(use_env=False, entry_points=False).build_registry()
    assert other.conversion_graph is not reg.conversion_graph
    assert set(other.conversion_graph.formats) == set(reg.conversion_graph.formats)

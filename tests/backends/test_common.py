"""Shared backend helpers: agreement over varied inputs, and what an artifact run imports."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from edgeprof.backends.common import agreement_over, reference_outputs, varied_inputs
from edgeprof.core.backend import RunConfig


def test_agreement_uses_several_inputs_of_different_distributions(registry):
    from edgeprof.core.models import resolve_model

    handle = resolve_model("builtin:small_cnn", registry=registry)
    sets, kinds = varied_inputs(handle)
    assert len(sets) == 4 and len(set(kinds)) == 4
    flat = [s[0].ravel() for s in sets]
    assert len({round(float(np.std(f)), 2) for f in flat} | {round(float(np.abs(f).max()), 1)
                                                               for f in flat}) > 4
    ref, name = reference_outputs(handle, sets)
    record = agreement_over(ref, ref, "fp32", name, kinds)
    assert record["inputs"] == 4 and record["passed"] and record["informative"]
    assert record["warning"] is None


def test_agreement_warns_when_the_reference_barely_varies(registry):
    """Random-weight small_mobilenet: another input changes its output by ~1e-4 of its
    scale, so agreement on it certifies nothing (issue 9, item 5)."""
    from edgeprof.core.models import resolve_model

    handle = resolve_model("builtin:small_mobilenet", registry=registry)
    sets, kinds = varied_inputs(handle)
    ref, name = reference_outputs(handle, sets)
    record = agreement_over(ref, ref, "fp32", name, kinds)
    assert record["reference_variation"] < 1e-2
    assert record["informative"] is False
    assert record["warning"]["code"] == "agreement_uninformative"


def test_a_run_reports_the_uninformative_agreement_as_a_warning(registry):
    from edgeprof.core.models import resolve_model

    handle = resolve_model("builtin:small_mobilenet", registry=registry)
    pm = registry.backend("onnxruntime")().prepare(handle, RunConfig(threads=1),
                                                   handle.make_inputs(0))
    assert {"code": "agreement_uninformative"}.items() <= pm.warnings[0].items()


def test_loading_an_onnx_artifact_imports_no_torch(registry, tmp_path):
    from edgeprof.core.models import resolve_model

    handle = resolve_model("builtin:small_cnn", registry=registry)
    art = registry.backend("onnxruntime")().build(handle, "fp32")
    code = f"""
import json, sys
import numpy as np
from edgeprof.core.artifact import Artifact
from edgeprof.core.backend import RunConfig
from edgeprof.backends.onnxruntime import OnnxRuntimeBackend
art = Artifact.from_dict(json.loads({json.dumps(json.dumps(art.to_dict()))}))
pm = OnnxRuntimeBackend().load(art, RunConfig(threads=1), [np.zeros((1, 1, 28, 28), 'float32')])
pm.run(pm.inputs)
print(json.dumps([m for m in ("torch", "tensorflow") if m in sys.modules]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("backend_name", ["torch_eager", "tflite", "openvino"])
def test_an_onnx_file_reaches_other_backends_with_the_route_recorded(registry, tmp_path,
                                                                    backend_name):
    import shutil

    from edgeprof.backends.onnx_export import export_onnx
    from edgeprof.core.models import resolve_model

    src = resolve_model("builtin:small_cnn", registry=registry)
    onnx_path = shutil.copy(export_onnx(src).path, tmp_path / "cnn.onnx")
    handle = resolve_model(str(onnx_path), registry=registry)
    pm = registry.backend(backend_name)().prepare(handle, RunConfig(threads=1),
                                                 handle.make_inputs(0))
    assert pm.notes[0].startswith("route: onnx -> ")
    assert pm.extra["route"][0]["src"] == "onnx"
    agreement = pm.extra["agreement"]
    assert agreement["reference"] == "onnxruntime fp32 (source file)" and agreement["passed"]
    assert pm.to_numpy(pm.run(pm.inputs))[0].shape == (1, 10)

"""ExecuTorch backend: torch.export -> XNNPACK -> .pte, run in ExecuTorch's Python runtime,
fp32 and PT2E int8 agree with torch; undelegated operators are named."""

from __future__ import annotations

import pytest

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UnsupportedError

import executorch  # noqa: F401  (installed by make test; a missing runtime must fail, not skip)


@pytest.fixture(scope="module")
def backend(registry):
    return registry.backend("executorch")()


@pytest.fixture(scope="module")
def prepared(backend, cnn):
    return {p: backend.prepare(cnn, RunConfig(precision=p, threads=1), cnn.make_inputs(0))
            for p in ("fp32", "int8")}


def test_registered_as_a_plugin_with_capabilities_as_data(registry):
    cls = registry.backend("executorch")
    assert cls.availability().available
    assert cls.capabilities.precisions == ("fp32", "int8", "int8_static")
    assert cls.install_hint == "pip install 'edgeprof[executorch]'"
    assert [c.dst for c in cls.route("torch").steps] == ["executorch"]


@pytest.mark.parametrize("precision,executed", [("fp32", "fp32"), ("int8", "int8_static")])
def test_precisions_build_run_and_agree_with_torch(prepared, precision, executed):
    pm = prepared[precision]
    assert pm.runtime == "executorch" and pm.executed_precision == executed
    assert pm.threads == {"intra_op": 1}
    a = pm.extra["agreement"]
    assert a["reference"] == "torch_eager fp32" and a["passed"], a
    assert pm.extra["undelegated_ops"] == []  # small_cnn lowers entirely to XNNPACK
    assert pm.extra["route_text"].startswith("torch -> executorch")
    assert pm.extra["model_bytes"] > 0


def test_int8_program_is_smaller(prepared):
    assert prepared["int8"].extra["model_bytes"] < prepared["fp32"].extra["model_bytes"]


def test_fp16_is_refused_with_the_reason(backend, cnn):
    with pytest.raises(UnsupportedError, match="does not offer fp16"):
        backend.prepare(cnn, RunConfig(precision="fp16"), cnn.make_inputs(0))


def test_undelegated_operators_are_named(backend, cnn, prepared):
    """The build's side file lists what XNNPACK did not take; the run warns with it."""
    import json
    from pathlib import Path

    from edgeprof.backends.executorch import DELEGATION_FILE
    from edgeprof.core.artifact import Artifact

    art = Artifact.open(Path(prepared["fp32"].extra["model_path"]).parent)
    (art.path / DELEGATION_FILE).write_text(json.dumps({"undelegated": ["cumsum"]}))
    try:
        pm = backend.load(art, RunConfig(threads=1), cnn.make_inputs(0))
    finally:
        (art.path / DELEGATION_FILE).write_text(json.dumps({"undelegated": []}))
    assert pm.extra["undelegated_ops"] == ["cumsum"]
    assert any(w["code"] == "undelegated_ops" and "cumsum" in w["message"]
               for w in pm.warnings)

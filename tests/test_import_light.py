"""`import edgeprof` and `edgeprof --help` must not import a deep-learning framework."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["torch", "tensorflow", "openvino", "onnxruntime", "onnx", "ai_edge_litert", "nncf",
         "litert_torch", "keras", "jax"]

PROBE = """
import json, sys, io, contextlib
import edgeprof
from edgeprof.core import plugins
reg = plugins.get_registry()
import edgeprof.api, edgeprof.targets, edgeprof.cli.main
for name in edgeprof.__all__:
    if name not in ("profile", "estimate", "benchmark", "summarize") and not name.startswith("estimate_"):
        pass
try:
    with contextlib.redirect_stdout(io.StringIO()):
        edgeprof.cli.main.main(["--help"])
except SystemExit:
    pass
with contextlib.redirect_stdout(io.StringIO()):
    edgeprof.cli.main.main(["backends"])
print(json.dumps(sorted(m for m in %r if m in sys.modules)))
""" % (HEAVY,)


def test_import_and_help_and_backends_listing_stay_light():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_public_api_all_is_explicit_and_resolvable():
    import edgeprof

    assert len(edgeprof.__all__) == len(set(edgeprof.__all__))
    for name in edgeprof.__all__:
        assert hasattr(edgeprof, name), name

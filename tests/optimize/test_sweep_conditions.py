"""One job, one answer (issue 20, item 2): the same job measured through ``profile`` and
through a sweep runs under the same conditions — threads, warm-up, input binding, process
kind, affinity — recorded in each record, and edgeprof's own ``compare`` can set the two
side by side. Timings are not asserted (a noisy shared machine); conditions are."""

from __future__ import annotations

import json

import pytest

from edgeprof.optimize.sweep import run_sweep
from edgeprof.profilers.measure.environment import COMPARABLE_CONDITIONS, comparable_conditions
from edgeprof.profilers.report.compare import compare_results

RUN = {"min_time_s": 0.05, "max_time_s": 0.3, "runs": 20}
SWEEP = """models = ["builtin:mlp"]
targets = ["raspberry_pi_4"]
backends = ["onnxruntime"]
precisions = ["fp32"]

[run]
runs = 20
min_time = 0.05
max_time = 0.3
"""


def _conditions(doc: dict) -> dict:
    (run,) = doc["runs"]
    assert run["status"] == "ok", run["reason"]
    return run["benchmark"]["environment"]["conditions"]


def test_a_job_through_profile_and_through_a_sweep_is_measured_the_same_way(tmp_path):
    pytest.importorskip("onnxruntime")
    from edgeprof.api import profile

    prof = profile("builtin:mlp", target="raspberry_pi_4", backends="onnxruntime",
                   precisions="fp32", run_options=dict(RUN)).to_dict()
    (tmp_path / "one.toml").write_text(SWEEP)
    report = run_sweep(tmp_path / "one.toml")
    swept = report.profile_document("builtin:mlp", "raspberry_pi_4")

    # what a user would do: compare the two with edgeprof's own compare
    (row,) = compare_results(prof, swept)
    assert row.status == "compared" and row.n_a >= 20 and row.n_b >= 20, row
    assert not [n for n in row.notes if "NOT LIKE FOR LIKE" in n]

    a, b = _conditions(prof), _conditions(swept)
    assert set(COMPARABLE_CONDITIONS) <= set(a) and set(COMPARABLE_CONDITIONS) <= set(b)
    assert comparable_conditions(a) == comparable_conditions(b)
    # the ones the issue names, spelled out
    assert a["process"] == b["process"] == "inline"
    assert a["threads"] == b["threads"] and a["threads"]["intra_op"] >= 1
    assert a["warmup"] == b["warmup"] and a["warmup"]["policy"] == "adaptive"
    assert a["inputs"] == b["inputs"] and a["affinity"] == b["affinity"]
    assert a["load"] == b["load"] and a["load"].startswith("timed after one untimed set-up")
    assert a["build"]["when"] == b["build"]["when"] == \
        "before the load clock and the memory baseline"
    # profile.json documents the conditions it now carries
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads((resources.files("edgeprof") / "schema" / "profile.schema.json")
                        .read_text(encoding="utf-8"))
    jsonschema.validate(json.loads(json.dumps(prof)), schema)
    # and the sweep's row still says where it was measured
    assert list(report.frame["board"]) == ["local"]
    assert report.frame["measured_on"][0].startswith("measured on this host")


def test_a_sweep_with_a_timeout_is_isolated_as_profile_is_and_says_so(tmp_path):
    """``[run] timeout`` (``profile --timeout``) puts each job in a fresh worker process, on
    both paths: the record's process kind says so."""
    pytest.importorskip("onnxruntime")
    (tmp_path / "iso.toml").write_text(SWEEP + "timeout = 120\n")
    report = run_sweep(tmp_path / "iso.toml")
    doc = report.profile_document("builtin:mlp", "raspberry_pi_4")
    cond = _conditions(doc)
    assert cond["process"] == "isolated"
    assert any("isolated worker process" in n for n in doc["runs"][0]["benchmark"]["notes"])

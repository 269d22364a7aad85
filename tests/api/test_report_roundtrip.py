"""Reports load back (issue 31): one ``ProfileReport`` family; a tensor report
(``TensorReport``) and a generative one (``GenerativeReport``) go to their dict
(profile.json) and back, and through ``save``/``load``, unchanged, whichever member reads
them."""

from __future__ import annotations

import json

import pytest

import edgeprof
from edgeprof.core.errors import ConfigError
from tests.cli.test_llm_cli import cache, plugins  # noqa: F401 - fixtures

FAST = {"runs": 3, "min_time": 0.01, "max_time": 0.2, "warmup": 1}


@pytest.fixture(scope="module")
def tensor_report():
    """A board target (the summaries carry the prediction), two runs: one measured, one
    whose runtime is not here (tensorrt: unavailable, named, so exit 3)."""
    return edgeprof.profile("builtin:small_cnn", "raspberry_pi_4", "torch_eager,tensorrt",
                            run_options=FAST, stream_rate_fps=30.0)


def _json(d: dict) -> dict:
    return json.loads(json.dumps(d, allow_nan=False))


def test_a_tensor_report_round_trips_through_its_dict(tensor_report):
    d = _json(tensor_report.to_dict())
    again = edgeprof.ProfileReport.from_dict(d)
    assert again.to_dict() == d
    assert again.exit_code == tensor_report.exit_code == 3
    assert [(r.backend, r.status, r.explicit) for r in again.runs] == [
        ("torch_eager", "ok", True), ("tensorrt", "unavailable", True)]
    ok = again.runs[0]
    assert ok.benchmark.stats.median_ms == tensor_report.runs[0].benchmark.stats.median_ms
    assert ok.summary.figures["latency_ms"].provenance in ("predicted", "uncalibrated")
    assert again.estimate.total_macs == tensor_report.estimate.total_macs
    assert again.target.id == "raspberry_pi_4" and not again.target.is_host
    assert again.model.name == tensor_report.model.name
    assert again.model.batch_size == tensor_report.model.batch_size


def test_a_tensor_report_saves_and_loads(tensor_report, tmp_path):
    out = tmp_path / "out"
    tensor_report.save(out)
    written = json.loads((out / "profile.json").read_text())
    for path in (out, out / "profile.json"):  # the folder or the file
        loaded = edgeprof.ProfileReport.load(path)
        assert loaded.to_dict() == written == _json(tensor_report.to_dict())
    # a loaded report saves again: the same document, and the CSV files
    loaded.save(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "profile.json").read_text()) == written
    assert (tmp_path / "again" / "hardware_summary.csv").read_text() == \
        (out / "hardware_summary.csv").read_text()


def test_which_backends_were_named_survives_the_round_trip(tensor_report):
    """A run under --backend all that produced nothing does not make the exit status 3,
    loaded or not."""
    d = _json(tensor_report.to_dict())
    d["runs"][1]["explicit"] = False
    loaded = edgeprof.ProfileReport.from_dict(d)
    assert loaded.exit_code == 0 and loaded.to_dict() == d


def test_loading_what_is_not_a_tensor_profile_names_the_file(tmp_path, plugins, cache):
    with pytest.raises(ConfigError, match="file not found"):
        edgeprof.ProfileReport.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="bad.json"):
        edgeprof.ProfileReport.load(bad)
    llm = edgeprof.profile("llm:smollm2-135m", backends="fake_llm", precisions="q4_0",
                           plugins=plugins, prompt_tokens=16, gen_tokens=4, repetitions=1)
    (tmp_path / "llm.json").write_text(json.dumps(llm.to_dict()))
    # the family reads it as what it is; the tensor member refuses it, naming who reads it
    assert isinstance(edgeprof.ProfileReport.load(tmp_path / "llm.json"),
                      edgeprof.GenerativeReport)
    with pytest.raises(ConfigError, match="llm.json: not a tensor profile.json but a "
                                          "generative one: read it with edgeprof.GenerativeReport"):
        edgeprof.TensorReport.load(tmp_path / "llm.json")


def test_a_generative_report_saves_and_loads(tmp_path, plugins, cache):
    report = edgeprof.profile("llm:smollm2-135m", backends="fake_llm", precisions="q4_0",
                              depths=(0, 8), plugins=plugins, prompt_tokens=16, gen_tokens=4,
                              repetitions=2)
    d = _json(report.to_dict())
    assert edgeprof.GenerativeReport.from_dict(d).to_dict() == d
    out = tmp_path / "out"
    report.save(out)
    for path in (out, out / "profile.json"):  # the folder or the file
        loaded = edgeprof.GenerativeReport.load(path)
        assert loaded.to_dict() == d
    assert loaded.runs[1].decode_tokens_per_s.samples == report.runs[1].decode_tokens_per_s.samples


def test_both_kinds_are_one_family(tensor_report, tmp_path, plugins, cache):
    """``edgeprof.profile`` returns a ProfileReport for either kind; the family's ``load``
    gives back the member that wrote the file."""
    llm = edgeprof.profile("llm:smollm2-135m", backends="fake_llm", precisions="q4_0",
                           plugins=plugins, prompt_tokens=16, gen_tokens=4, repetitions=1)
    for report, member in ((tensor_report, edgeprof.TensorReport),
                           (llm, edgeprof.GenerativeReport)):
        assert isinstance(report, edgeprof.ProfileReport) and type(report) is member
        out = tmp_path / member.__name__
        report.save(out)
        loaded = edgeprof.ProfileReport.load(out)
        assert type(loaded) is member
        assert loaded.to_dict() == _json(report.to_dict())
        assert loaded.exit_code == report.exit_code
    with pytest.raises(ConfigError, match="not a generative profile.json but a tensor one"):
        edgeprof.GenerativeReport.from_dict(_json(tensor_report.to_dict()))


def test_the_done_when_of_issue_31(tmp_path):
    """llama.cpp (built by make test) on smollm2-135m q8_0 with random weights, read against
    the Pi 5: a ProfileReport that save/load round-trips, like a CNN's, its run records the
    conditions it ran under."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python: make test builds it")
    report = edgeprof.profile("llm:smollm2-135m", target="raspberry_pi_5", backends="llama_cpp",
                              precisions="q8_0", prompt_tokens=32, gen_tokens=8,
                              repetitions=2, workdir=tmp_path / "work")
    assert isinstance(report, edgeprof.ProfileReport)
    (run,) = report.runs
    assert run.status == "ok", run.to_dict().get("reason")
    report.save(tmp_path / "out")
    loaded = edgeprof.ProfileReport.load(tmp_path / "out")
    assert loaded.to_dict() == _json(report.to_dict())
    doc = loaded.to_dict()["runs"][0]
    assert doc["config"]["isolate"] is False and doc["environment"]["conditions"]["process"]

"""A generative sweep job read back as a generative profile document
(``SweepReport.profile_document`` on a ``[generate]`` model), so ``edgeprof compare`` sets a
sweep's measurement beside another sweep job's or a ``profile llm:X``'s; a tensor document
beside a generative one is still refused (one line, exit 2). Kept small: smollm2-135m,
llama.cpp q4_0, prompt 16, gen 4, four repetitions (the fewest that allow a verdict)."""

from __future__ import annotations

import json
import textwrap

import pytest

from edgeprof.cli.main import main
from edgeprof.core.errors import UserError
from edgeprof.optimize.sweep import run_sweep
from tests.optimize.test_sweep_generate import needs_llama


pytestmark = needs_llama

SWEEP = """
targets = ["host"]
models = ["builtin:small_cnn"]
backends = ["onnxruntime"]
precisions = ["fp32"]
[run]
runs = 5
max_time = 0.3
[generate]
models = ["llm:smollm2-135m"]
backends = ["llama_cpp"]
formats = ["q4_0"]
threads = [1, 2]
prompt_tokens = 16
gen_tokens = 4
repetitions = 4
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweepdocs")
    path = tmp / "sweep.toml"
    path.write_text(textwrap.dedent(SWEEP), encoding="utf-8")
    rep = run_sweep(path)
    assert list(rep.frame["status"]) == ["ok"] * 3, rep.frame[["job_key", "reason"]]
    return rep


def _write(path, doc) -> str:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def test_a_generative_jobs_document_is_a_generative_profile(report):
    doc = report.profile_document("llm:smollm2-135m", "host")  # the first threads listed
    assert doc["schema"] == "edgeprof.llm/1" and doc["kind"] == "llm"
    assert doc["command"] == "profile" and doc["target"]["id"] == "host"
    assert doc["config"]["threads"] == 1 and doc["config"]["prompt_tokens"] == 16
    [run] = doc["runs"]
    assert run["status"] == "ok" and run["n_threads"] == 1 and run["repetitions"] == 4
    assert len(run["samples"]["decode_s"]) == 4
    assert run["board"]["board"] == "local" and run["measured_on"]
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads((resources.files("edgeprof") / "schema" / "profile.schema.json")
                        .read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema)
    two = report.profile_document("llm:smollm2-135m", "host", threads=2)
    assert [r["n_threads"] for r in two["runs"]] == [2]


def test_compare_reads_two_generative_sweep_documents(report, tmp_path, capsys):
    a = _write(tmp_path / "a.json", report.profile_document("llm:smollm2-135m", "host"))
    b = _write(tmp_path / "b.json",
               report.profile_document("llm:smollm2-135m", "host", threads=2))
    code = main(["compare", a, b, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = json.loads(captured.out)
    assert {r["figure"] for r in rows} == {"prefill_tokens_per_s", "decode_tokens_per_s",
                                           "ttft_ms", "tpot_ms"}
    assert all(r["status"] == "compared" and r["n_a"] == r["n_b"] == 4 for r in rows), rows
    assert all("threads 1 (A) vs 2 (B)" in r["notes"] for r in rows)


def test_a_sweep_job_and_a_profile_of_the_same_job_compare_like_for_like(report, tmp_path,
                                                                         capsys):
    from edgeprof.api import profile_llm

    prof = profile_llm("llm:smollm2-135m", backends="llama_cpp", precisions="q4_0",
                       prompt_tokens=16, gen_tokens=4, repetitions=4, threads=1,
                       target="host")
    a = _write(tmp_path / "profile.json", prof)
    b = _write(tmp_path / "swept.json", report.profile_document("llm:smollm2-135m", "host"))
    code = main(["compare", a, b, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = json.loads(captured.out)
    assert rows and all(r["status"] == "compared" for r in rows), rows
    assert not [n for r in rows for n in r["notes"] if "NOT LIKE FOR LIKE" in n]


def test_a_tensor_document_beside_a_generative_one_is_exit_2(report, tmp_path, capsys):
    gen = _write(tmp_path / "gen.json", report.profile_document("llm:smollm2-135m", "host"))
    tensor = _write(tmp_path / "tensor.json",
                    report.profile_document("builtin:small_cnn", "host"))
    code = main(["compare", tensor, gen])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "tensor latency and generative tokens/s" in err[0]


@pytest.mark.parametrize("kw, words", [
    ({"threads": 3}, "threads 1, 2; not 3"),
    ({"prompt_tokens": 512}, "prompt tokens 16; not 512"),
    ({"batch_size": 4}, "no batch size"),
])
def test_a_shape_the_sweep_did_not_run_is_a_user_error(report, kw, words):
    with pytest.raises(UserError, match=words):
        report.profile_document("llm:smollm2-135m", "host", **kw)
    with pytest.raises(UserError, match="not in the sweep's \\[generate\\] models"):
        report.profile_document("builtin:small_cnn", "host", threads=1)
    with pytest.raises(UserError, match="not 'llm:smollm2-135m' on 'raspberry_pi_5'"):
        report.profile_document("llm:smollm2-135m", "raspberry_pi_5")

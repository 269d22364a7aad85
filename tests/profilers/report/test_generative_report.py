"""The generative report: real payloads (an estimate for a Raspberry Pi 5, small llama.cpp
runs of smollm2-135m) validate against edgeprof/schema/profile.schema.json, read into
GenerativeReport and back unchanged, expose their figures typed (the per-repetition samples
agree with the harness's summaries), save atomically, and two measured profiles compare
through the CLI."""

from __future__ import annotations

import copy
import json
import statistics
from importlib import resources

import pytest

from edgeprof.core.errors import ConfigError
from edgeprof.profilers.report.family import document_workload
from edgeprof.profilers.report.generative import (STAGE_FIGURES, FigureValue,
                                                  GenerativeReport, GenerativeRun,
                                                  RepetitionStats)

MODEL = "llm:smollm2-135m"
SMALL = dict(backends="llama_cpp", precisions="q4_0", prompt_tokens=16, gen_tokens=4)


def schema() -> dict:
    return json.loads((resources.files("edgeprof") / "schema" / "profile.schema.json")
                      .read_text(encoding="utf-8"))


def errors(doc: dict) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{e.json_path}: {e.message[:120]}" for e in validator.iter_errors(doc)]


@pytest.fixture(scope="module")
def estimated():
    from edgeprof.api import estimate_llm

    return estimate_llm(MODEL, "raspberry_pi_5", backends="llama_cpp", precisions="q4_0")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Two small measured profiles (4 repetitions each: the fewest that can give a verdict)
    and their output folders."""
    from edgeprof.api import profile_llm

    outs = []
    for name in ("a", "b"):
        out = tmp_path_factory.mktemp("llm") / name
        payload = profile_llm(MODEL, **SMALL, repetitions=4, out=out)
        assert payload["runs"][0]["status"] == "ok", payload["runs"][0]["reason"]
        outs.append((payload, out))
    return outs


# ----------------------------------------------------------------------------- schema
def test_the_schema_is_the_one_profile_schema():
    import jsonschema

    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["then"] == {"$ref": "#/$defs/generative_profile"}
    generative = s["$defs"]["generative_profile"]["properties"]
    assert generative["schema_version"] == {"const": "1.0"}
    assert generative["schema"] == {"const": "edgeprof.llm/1"}


def test_an_estimate_validates(estimated):
    assert estimated["schema_version"] == "1.0" and estimated["command"] == "estimate"
    assert errors(estimated) == []


def test_a_measured_profile_validates(measured):
    payload, out = measured[0]
    assert errors(payload) == []
    written = json.loads((out / "profile.json").read_text(encoding="utf-8"))
    assert errors(written) == [] and written == json.loads(json.dumps(payload))


@pytest.mark.parametrize("mutate, where", [
    (lambda d: d.update(schema_version="2.0"), "schema_version"),
    (lambda d: d.pop("runs"), "runs"),
    (lambda d: d["runs"][0].update(status="fine"), "status"),
    (lambda d: d["runs"][0]["samples"]["decode_s"].append(-0.01), "decode_s"),
    (lambda d: d["runs"][0].update(prefill_tokens_per_s=None), "prefill_tokens_per_s"),
    (lambda d: d["runs"][0]["decode_tokens_per_s"].pop("median"), "decode_tokens_per_s"),
    (lambda d: d["estimates"][0]["figures"]["weight_bytes"].pop("provenance"), "weight_bytes"),
    (lambda d: d["predictions"][0]["decode_tokens_per_s"].update(provenance="guessed"),
     "decode_tokens_per_s"),
    (lambda d: d["model"].update(source_kind="pickle"), "source_kind"),
])
def test_the_schema_refuses_what_edgeprof_never_writes(measured, estimated, mutate, where):
    doc = copy.deepcopy(measured[0][0])
    doc["predictions"] = copy.deepcopy(estimated["predictions"])  # a profile with a target
    assert errors(doc) == []
    mutate(doc)
    found = errors(doc)
    assert found and any(where in e for e in found), found


def test_a_failed_run_needs_its_reason(measured):
    doc = copy.deepcopy(measured[0][0])
    run = doc["runs"][0]
    run.update(status="failed", reason="", prefill_tokens_per_s=None, decode_tokens_per_s=None,
               ttft_ms=None, tpot_ms=None, samples={})
    assert any("reason" in e for e in errors(doc))
    run["reason"] = "llama.cpp: failed to load the model"
    assert errors(doc) == []


# ------------------------------------------------------------------------ typed report
def test_round_trip_is_exact(measured, estimated):
    for payload in (measured[0][0], estimated):
        report = GenerativeReport.from_dict(payload)
        assert report.to_dict() == payload
        again = GenerativeReport.from_dict(json.loads(json.dumps(report.to_dict())))
        assert again.to_dict() == json.loads(json.dumps(payload))


def test_run_figures_are_typed_with_one_sample_per_repetition(measured):
    payload = measured[0][0]
    report = GenerativeReport.from_dict(payload)
    (run,) = report.runs
    raw = payload["runs"][0]
    assert isinstance(run, GenerativeRun) and run.ok and run.key == ("llama_cpp", "q4_0", 0)
    assert report.run("llama_cpp", "q4_0") is run and report.run("llama_cpp", "q8_0") is None
    assert (run.n_prompt, run.n_gen, run.repetitions, run.decode_tokens) == (16, 4, 4, 3)
    for name, (unit, higher) in STAGE_FIGURES.items():
        stats = getattr(run, name)
        assert isinstance(stats, RepetitionStats), name
        assert stats.unit == unit and stats.higher_is_better is higher
        assert stats.n == 4 and all(v > 0 for v in stats.samples)
        assert stats.median == raw[name]["median"] and stats.mean == raw[name]["mean"]
    # the samples follow the harness's definitions: their summaries are the written ones
    for name in ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms"):
        stats = getattr(run, name)
        assert statistics.median(stats.samples) == pytest.approx(stats.median, rel=1e-12)
        assert min(stats.samples) == pytest.approx(stats.min, rel=1e-12)
        assert max(stats.samples) == pytest.approx(stats.max, rel=1e-12)
    # TPOT: each repetition's mean gap; their mean is the mean over every gap
    assert statistics.fmean(run.tpot_ms.samples) == pytest.approx(run.tpot_ms.mean, rel=1e-9)
    assert run.tpot_ms.p90 == raw["tpot_ms"]["p90"] and run.tpot_ms.stddev is None
    assert run.load_s > 0 and run.peak_rss_bytes > 0 and run.model_size > 0
    assert run.to_dict() == raw
    assert report.exit_code == 0 and report.command == "profile"


def test_estimate_and_prediction_figures_are_typed(estimated):
    report = GenerativeReport.from_dict(estimated)
    assert report.model_name == "smollm2-135m" and report.target_id == "raspberry_pi_5"
    assert report.schema_version == "1.0" and report.runs == []
    assert report.parameters.value == 134515008 and report.parameters.provenance == "analytic"
    cfg = report.generation_config
    assert (cfg.prompt_tokens, cfg.gen_tokens, cfg.depths) == (512, 128, (0,))
    est = report.estimate("llama_cpp", "q4_0")
    assert est.weight_bytes.unit == "B" and est.weight_bytes.value > 0
    assert est.kv_cache_bytes_per_token.value > 0 and est.fit["fits"] is True
    assert est.decode_tokens_per_s.provenance == "estimated"
    pred = report.prediction("llama_cpp", "q4_0")
    assert pred.target == "raspberry_pi_5" and pred.device == "cpu"
    for name in STAGE_FIGURES:
        f = getattr(pred, name)
        assert isinstance(f, FigureValue) and f.provenance in ("predicted", "estimated")
        assert f.low <= f.value <= f.high, name
    assert pred.decode_tokens_per_s.extra["basis"]
    # the roofline is a bound: no prediction is faster than it
    assert pred.decode_tokens_per_s.value <= est.decode_tokens_per_s.value * (1 + 1e-9)


def test_save_writes_the_folder_and_load_reads_it(measured, tmp_path):
    report = GenerativeReport.from_dict(measured[0][0])
    written = report.save(tmp_path / "out")
    assert {p.name for p in written} == {"profile.json", "llm_bench.csv", "estimate.csv",
                                         "report.html"}
    again = GenerativeReport.load(tmp_path / "out" / "profile.json")
    assert again.to_dict() == report.to_dict()
    with pytest.raises(ConfigError, match="not found"):
        GenerativeReport.load(tmp_path / "missing.json")


def test_unknown_keys_and_older_payloads_survive(measured):
    doc = copy.deepcopy(measured[0][0])
    doc["future_top"] = {"x": 1}
    doc["runs"][0]["future_field"] = [1, 2]
    assert GenerativeReport.from_dict(doc).to_dict() == doc
    old = copy.deepcopy(measured[0][0])
    del old["schema_version"]  # written before the field existed
    report = GenerativeReport.from_dict(old)
    assert report.schema_version is None and report.to_dict() == old


def test_a_tensor_profile_is_not_a_generative_report():
    tensor = {"schema_version": "1.0", "runs": [], "model": {"name": "small_cnn"}}
    assert document_workload(tensor) == "tensor"
    with pytest.raises(ConfigError, match="not a generative profile"):
        GenerativeReport.from_dict(tensor)


# ---------------------------------------------------------------------------- compare
def test_two_measured_profiles_compare_through_the_cli(measured, capsys):
    from edgeprof.cli.main import main

    (_, a), (_, b) = measured
    assert main(["compare", str(a / "profile.json"), str(b / "profile.json"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["figure"] for r in rows] == list(STAGE_FIGURES)
    for r in rows:
        assert r["status"] == "compared" and r["n_a"] == r["n_b"] == 4
        assert r["verdict"] in ("faster", "slower", "no significant change")
        assert 0 < r["p_value"] <= 1 and r["median_a"] > 0 and r["median_b"] > 0
    assert main(["compare", str(a / "profile.json"), str(b / "profile.json")]) == 0
    text = capsys.readouterr().out
    assert "prefill tok/s" in text and "TPOT ms" in text and "Mann-Whitney" in text

"""One schema for both kinds of profile.json (issue 31): edgeprof/schema/profile.schema.json
(2.0) validates a tensor profile (``schema_version`` 1.0) and a generative one (``schema``
edgeprof.llm/1, ``kind`` llm) as written by the command line; a document with ``"kind":
"llm"`` is judged by the generative branch only, so its errors point there."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from importlib import resources

import pytest

from edgeprof.cli.main import main

jsonschema = pytest.importorskip("jsonschema")

FAST = ["--runs", "20", "--min-time", "0.05", "--max-time", "1"]


def schema() -> dict:
    return json.loads((resources.files("edgeprof") / "schema" / "profile.schema.json")
                      .read_text(encoding="utf-8"))


def errors(doc: dict) -> list:
    return list(jsonschema.Draft202012Validator(schema()).iter_errors(doc))


def cli_json(*argv: str) -> dict:
    """What ``edgeprof ARGV --json`` prints: the document a user gets."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main([*argv, "--json"])
    assert code == 0
    return json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def tensor_doc() -> dict:
    return cli_json("profile", "builtin:mlp", "--target", "desktop_ddr4", *FAST)


@pytest.fixture(scope="module")
def generative_doc() -> dict:
    return cli_json("estimate", "llm:smollm2-135m", "--target", "raspberry_pi_5", "--backend",
                    "llama_cpp", "--precision", "q4_0")


def test_one_schema_version_2_ships_alone():
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["$id"] == "https://edgeprof.dev/schema/profile-2.0.json"
    assert s["$defs"]["tensor_profile"]["properties"]["schema_version"] == {"const": "1.0"}
    gen = s["$defs"]["generative_profile"]["properties"]
    assert gen["schema"] == {"const": "edgeprof.llm/1"} and gen["kind"] == {"const": "llm"}
    assert gen["runs"]["items"] == {"$ref": "#/$defs/llm_run"}
    folder = resources.files("edgeprof") / "schema"
    assert sorted(p.name for p in folder.iterdir() if p.name.endswith(".json")) == \
        ["profile.schema.json"]


def test_a_tensor_and_a_generative_profile_both_validate(tensor_doc, generative_doc):
    assert tensor_doc["schema_version"] == "1.0" and "kind" not in tensor_doc
    assert generative_doc["schema"] == "edgeprof.llm/1" and generative_doc["kind"] == "llm"
    assert errors(tensor_doc) == []
    assert errors(generative_doc) == []
    jsonschema.validate(tensor_doc, schema())
    jsonschema.validate(generative_doc, schema())


def test_a_generative_document_with_broken_runs_fails_in_the_generative_branch(generative_doc):
    doc = copy.deepcopy(generative_doc)
    doc["runs"] = [{"backend": "llama_cpp", "format": "q4_0", "status": "fine"}]
    found = errors(doc)
    assert found
    for e in found:
        assert e.relative_schema_path[0] == "then", list(e.relative_schema_path)
        assert list(e.absolute_path)[:2] == ["runs", 0], e.json_path
    # a generative run's own keys and statuses, not a tensor profile's (request, estimate...)
    messages = {e.message for e in found}
    assert {"'n_prompt' is a required property", "'decode_tokens_per_s' is a required property",
            "'fine' is not one of ['ok', 'unsupported', 'unavailable', 'failed', 'skipped']"} \
        <= messages, messages
    assert jsonschema.exceptions.best_match(found).json_path.startswith("$.runs[0]")
    doc["runs"] = "none"
    (e,) = errors(doc)
    assert list(e.relative_schema_path)[:3] == ["then", "properties", "runs"]
    assert e.validator == "type"


def test_each_kind_is_held_to_its_own_branch(tensor_doc, generative_doc):
    # a generative document missing its schema name, or of another schema, fails
    doc = copy.deepcopy(generative_doc)
    del doc["schema"]
    assert [e.message for e in errors(doc)] == ["'schema' is a required property"]
    doc["schema"] = "edgeprof.llm/2"
    (e,) = errors(doc)
    assert e.json_path == "$.schema" and e.relative_schema_path[0] == "then"
    # a tensor document of another version, or missing a key, fails in the tensor branch
    doc = copy.deepcopy(tensor_doc)
    doc["schema_version"] = "2.0"
    (e,) = errors(doc)
    assert e.json_path == "$.schema_version" and e.relative_schema_path[0] == "else"
    del doc["schema_version"], doc["warnings"]
    doc["schema_version"] = "1.0"
    assert [e.message for e in errors(doc)] == ["'warnings' is a required property"]
    # a tensor document is not a generative one merely by lacking "kind"
    assert errors({"kind": "llm"}) and all(e.relative_schema_path[0] == "then"
                                           for e in errors({"kind": "llm"}))


def test_a_mixture_of_experts_validates_with_its_expert_fields():
    """qwen3-30b-a3b's estimate names its experts in the spec; experts without how many run
    per token is refused."""
    doc = cli_json("estimate", "llm:qwen3-30b-a3b", "--target", "raspberry_pi_5",
                   "--backend", "llama_cpp", "-p", "q4_k_m")
    spec = doc["model"]["spec"]
    assert spec["num_experts"] == 128 and spec["num_experts_per_tok"] == 8
    assert errors(doc) == []
    broken = copy.deepcopy(doc)
    del broken["model"]["spec"]["num_experts_per_tok"]
    found = [(c.validator, c.message) for e in errors(broken) for c in (e, *e.context)]
    assert ("dependentRequired", "'num_experts_per_tok' is a dependency of 'num_experts'") \
        in found, found

"""LLMSpec's mixture-of-experts fields: validation (one-line UserErrors), the dict round trip,
and a dense spec's dict without them (unchanged, as every cache key made from it)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from edgeprof.core.errors import UserError
from edgeprof.core.llm import MOE_FIELDS, LLMSpec


def spec(**kw) -> LLMSpec:
    base = dict(name="m", family="llama", hidden_size=64, num_layers=2, num_heads=4,
                num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=300,
                max_position_embeddings=128, tie_word_embeddings=False)
    return LLMSpec(**{**base, **kw})


MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)


def test_a_dense_spec_is_not_moe_and_its_dict_has_no_expert_fields():
    s = spec()
    assert not s.is_moe and s.num_experts == 0
    d = s.to_dict()
    assert not set(MOE_FIELDS) & set(d)
    assert LLMSpec.from_dict(d) == s


def test_none_experts_is_dense():
    assert spec(num_experts=None, num_experts_per_tok=None, moe_intermediate_size=None) == spec()


def test_an_moe_spec_round_trips_through_its_dict_and_json():
    s = spec(**MOE, shared_expert_intermediate_size=48, norm_topk_prob=False)
    assert s.is_moe
    d = json.loads(json.dumps(s.to_dict()))
    assert {k: d[k] for k in MOE_FIELDS} == {**MOE, "shared_expert_intermediate_size": 48,
                                             "norm_topk_prob": False}
    assert LLMSpec.from_dict(d) == s


@pytest.mark.parametrize("kw, words", [
    (dict(num_experts=4, num_experts_per_tok=5, moe_intermediate_size=32),
     "num_experts_per_tok must be from 1 to num_experts (4), got 5"),
    (dict(num_experts=4, num_experts_per_tok=0, moe_intermediate_size=32),
     "num_experts_per_tok must be from 1"),
    (dict(num_experts=4, num_experts_per_tok=2), "needs moe_intermediate_size"),
    (dict(num_experts=-1), "num_experts must be an integer of at least 0"),
    (dict(**MOE, shared_expert_intermediate_size=-8), "shared_expert_intermediate_size must"),
    (dict(num_experts=2.5), "num_experts must be an integer"),
    (dict(num_experts_per_tok=2, moe_intermediate_size=32),
     "num_experts_per_tok, moe_intermediate_size set but num_experts is 0"),
    (dict(**MOE, norm_topk_prob="yes"), "norm_topk_prob must be true or false"),
])
def test_bad_expert_fields_are_one_line_user_errors(kw, words):
    with pytest.raises(UserError) as e:
        spec(**kw)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_replace_keeps_validating():
    with pytest.raises(UserError, match="num_experts_per_tok"):
        dataclasses.replace(spec(**MOE), num_experts_per_tok=9)

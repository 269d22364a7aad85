"""The router for generative models (edgeprof.optimize.llm.choose_llm_format).

The rule: formats that fit the target's RAM with the context asked (analytic), then those
whose predicted decode reaches the tokens/s budget, then the most bits (a tie goes to the
faster prediction). Most tests use the real estimate and the shipped prediction, and check
the rule as invariants over the candidate table (they hold whatever the figures are); two
use a stand-in predictor to pin the interval rule and the tie-break on chosen numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from edgeprof.core.errors import UnknownNameError, UserError
from edgeprof.optimize.llm import CANDIDATE_STATUSES, VERDICTS, choose_llm_format
from edgeprof.profilers.estimate import llm as E
from edgeprof.zoo.llm import resolve_llm


@pytest.fixture(scope="module")
def tinyllama():
    return resolve_llm("llm:tinyllama-1.1b")


@pytest.fixture(scope="module")
def llama3b():
    return resolve_llm("llm:llama-3.2-3b")


def _check_table(choice, model, target_ram, context):
    """Every candidate's bytes are the estimate's, and fits is weights + KV + runtime <=
    the usable RAM."""
    usable = E.usable_ram_bytes(target_ram)
    assert choice.usable_bytes == usable
    for c in choice.candidates:
        assert c.status in CANDIDATE_STATUSES
        if c.status == "unsupported":
            continue
        info = E.formats_for(c.backend)[c.format]
        # most bits: the quantized width, then the stored bits per parameter
        assert c.weight_bits == (info.weight_bits or int(info.bits))
        assert c.bits_per_weight == pytest.approx(
            8 * E.weight_bytes(model.spec, info) / E.parameter_count(model.spec), abs=1e-3)
        assert c.weight_bytes == E.weight_bytes(model.spec, info)
        assert c.kv_cache_bytes == E.kv_cache_bytes(model.spec, context, info.kv_dtype)
        assert c.runtime_overhead_bytes == E.runtime_overhead_bytes(model.spec, 512)
        assert c.total_bytes == c.weight_bytes + c.kv_cache_bytes + c.runtime_overhead_bytes
        assert c.fits == (c.total_bytes <= usable)
        assert c.fits == (c.max_context_tokens >= context)


def test_ram_bound_keeps_the_most_bits_that_fit(llama3b):
    from edgeprof.targets import get_target

    t = get_target("raspberry_pi_4")
    # a budget every format reaches: RAM alone binds (no format reaches the default 10 tok/s
    # interactive floor on a Pi 4 with a 3B model)
    choice = choose_llm_format(llama3b, t, context_tokens=8192, tokens_per_s=0.1)
    _check_table(choice, llama3b, t.ram.value, 8192)
    chosen = choice.chosen
    assert choice.verdict == "ok" and chosen is not None and chosen.fits
    assert (choice.backend, choice.format) == (chosen.backend, chosen.format)
    fitting = [c for c in choice.candidates if c.fits]
    assert chosen.rank == max(c.rank for c in fitting)
    bigger = [c for c in choice.candidates if c.rank > chosen.rank
              and c.status != "unsupported"]
    assert bigger and not any(c.fits for c in bigger)  # RAM is what stopped them
    assert choice.reasons[0].startswith("RAM fit bound:")
    assert f"{chosen.format} on {chosen.backend}" in choice.reasons[0]
    assert "8192 tokens of context" in choice.reasons[0]


def test_budget_bound_takes_the_most_bits_that_reach_it(tinyllama):
    choice = choose_llm_format(tinyllama, "raspberry_pi_5", context_tokens=2048,
                               tokens_per_s=10)
    chosen = choice.chosen
    assert choice.verdict == "ok" and chosen.fits and chosen.decode >= 10
    assert chosen.decode_tokens_per_s["provenance"] in ("predicted", "estimated")
    meeting = [c for c in choice.candidates if c.fits and c.decode is not None
               and c.decode >= 10]
    assert chosen.rank == max(c.rank for c in meeting)
    slower = [c for c in choice.candidates if c.fits and c.rank > chosen.rank]
    assert slower and all(c.status == "below_budget" and c.decode < 10 for c in slower)
    assert choice.reasons[0].startswith("tokens/s budget bound:")
    near = [c for c in slower if c.decode_high >= 10]  # the interval alone would reach it
    for c in near:
        assert "its interval's high end would meet it" in c.why
        assert any(f"{c.format} on {c.backend}" in r and "upper end" in r
                   for r in choice.reasons[1:])


def test_nothing_binds_most_bits_that_fit():
    model = resolve_llm("llm:qwen2.5-0.5b")
    choice = choose_llm_format(model, "raspberry_pi_5", context_tokens=2048, tokens_per_s=0.1)
    assert choice.verdict == "ok"
    assert choice.chosen.weight_bits == 8  # the ladder's top (issue 31): floats when asked
    assert all(c.fits for c in choice.candidates if c.status != "unsupported")
    assert choice.reasons[0].startswith("most bits that fit:")
    # a tie on bits goes to the faster prediction; the reason names it only when the
    # predictions differ (an equal rate broke nothing)
    choice = choose_llm_format(model, "raspberry_pi_5", context_tokens=2048, tokens_per_s=0.1,
                               precisions="f32,fp32")
    assert choice.chosen.weight_bits == 32
    ties = [c for c in choice.candidates if c.rank == choice.chosen.rank
            and c is not choice.chosen and c.status != "unsupported"]
    assert ties and all(c.decode <= choice.chosen.decode for c in ties)
    slower = any(c.decode < choice.chosen.decode for c in ties)
    assert slower == any(r.startswith("tie on bits/weight") for r in choice.reasons)


def test_does_not_fit_names_the_smallest_format(llama3b):
    choice = choose_llm_format(llama3b, "raspberry_pi_4", context_tokens=131072)
    assert choice.verdict == "does_not_fit"
    assert choice.backend is None and choice.format is None and choice.chosen is None
    assert not any(c.fits for c in choice.candidates)
    small = min((c for c in choice.candidates if c.status != "unsupported"),
                key=lambda c: c.total_bytes)
    first = choice.reasons[0]
    assert first.startswith("RAM fit bound: no format fits")
    assert f"{small.format} on {small.backend}" in first
    assert f"{small.total_bytes / 1e9:.2f} GB" in first
    assert f"at most {small.max_context_tokens} tokens" in first
    json.dumps(choice.to_dict(), allow_nan=False)


def test_budget_not_met_gives_the_fastest_that_fits(tinyllama):
    choice = choose_llm_format(tinyllama, "raspberry_pi_4", context_tokens=1024,
                               tokens_per_s=1000)
    assert choice.verdict == "budget_not_met"
    fitting = [c for c in choice.candidates if c.fits]
    assert choice.chosen.decode == max(c.decode for c in fitting)
    assert choice.reasons[0].startswith("tokens/s budget bound: no format that fits")


def _fake_predictor(rates):
    """A stand-in for predict_llm: decode {value, low, high} per format from ``rates``."""
    def predict(est, target, *, device="cpu", runtime="llama_cpp", threads=None,
                calibration=None):
        v, lo, hi = rates.get(est.format, (1.0, 0.5, 2.0))
        fig = {"value": v, "low": lo, "high": hi, "unit": "tokens/s",
               "provenance": "predicted", "calibration": "fake", "basis": "test"}
        return {"decode_tokens_per_s": fig, "prefill_tokens_per_s": dict(fig)}
    return predict


def test_only_the_value_decides_and_the_interval_is_said(tinyllama, monkeypatch):
    import edgeprof.profilers.predict.llm as P

    monkeypatch.setattr(P, "predict_llm", _fake_predictor({
        "f32": (3.0, 2.0, 4.0), "f16": (9.0, 6.0, 12.0), "q8_0": (9.5, 7.0, 11.0),
        "q6_k": (10.5, 8.0, 13.0), "q5_k_m": (12.0, 9.0, 15.0)}))
    choice = choose_llm_format(tinyllama, "raspberry_pi_5", backends=["llama_cpp"],
                               context_tokens=1024, tokens_per_s=10)
    assert (choice.backend, choice.format, choice.verdict) == ("llama_cpp", "q6_k", "ok")
    by = {c.format: c for c in choice.candidates}
    assert by["q8_0"].status == by["f16"].status == by["f32"].status == "below_budget"
    high_end = "its interval's high end would meet it"
    assert high_end in by["q8_0"].why and high_end in by["f16"].why
    assert high_end not in by["f32"].why
    assert choice.reasons[0].startswith("tokens/s budget bound: q8_0 on llama_cpp (8.5")
    assert ("bits/weight) fits but 9.5 tok/s [7-11] (predicted) misses the 10 tok/s budget"
            in choice.reasons[0])
    upper = next(r for r in choice.reasons if "upper end" in r)
    assert "q8_0 on llama_cpp" in upper
    # f16 and f32 are above the ladder's top (q8_0), held out as not asked for
    assert "f16 on llama_cpp" not in upper and "f32 on llama_cpp" not in upper


def test_tie_on_bits_goes_to_the_faster_prediction(tinyllama, monkeypatch):
    import edgeprof.profilers.predict.llm as P

    monkeypatch.setattr(P, "predict_llm", _fake_predictor({"fp32": (2.0, 1.0, 3.0),
                                                           "f32": (1.5, 1.0, 3.0)}))
    choice = choose_llm_format(tinyllama, "raspberry_pi_5",
                               backends=["llama_cpp", "onnxruntime_genai"],
                               precisions="fp32,f32", context_tokens=1024, tokens_per_s=1.0)
    assert (choice.backend, choice.format) == ("onnxruntime_genai", "fp32")
    assert "over f32 on llama_cpp" in choice.reasons[1]


def test_a_backend_that_cannot_run_the_architecture_is_left_out():
    from edgeprof.core.plugins import get_registry

    assert "openvino_genai" in get_registry().backends_for("generate")
    model = resolve_llm("llm:gemma-2-2b")  # sliding windows: openvino_genai can't export it
    choice = choose_llm_format(model, "raspberry_pi_5", context_tokens=2048,
                               backends=["llama_cpp", "openvino_genai"])
    ov = [c for c in choice.candidates if c.backend == "openvino_genai"]
    assert ov and all(c.status == "unsupported" and "sliding" in c.why for c in ov)
    assert choice.backend == "llama_cpp"


def test_to_dict_is_the_documented_shape(tinyllama):
    d = choose_llm_format(tinyllama, "raspberry_pi_5", context_tokens=640).to_dict()
    json.dumps(d, allow_nan=False)
    assert d["verdict"] in VERDICTS and d["reasons"]
    assert {"backend", "format", "reasons", "candidates", "verdict", "context_tokens",
            "tokens_per_s", "target", "device"} <= set(d)
    row = d["candidates"][0]
    assert {"backend", "format", "bits_per_weight", "weight_bytes", "kv_cache_bytes",
            "total_bytes", "fits", "decode_tokens_per_s", "max_context_tokens"} <= set(row)
    assert {"value", "low", "high", "provenance"} <= set(row["decode_tokens_per_s"])
    assert row["provenance"]["bytes"] == "analytic"


@pytest.mark.parametrize("kwargs,match", [
    ({"context_tokens": 4096}, "longer than tinyllama-1.1b's maximum of 2048"),
    ({"context_tokens": 0}, "--context must be a positive"),
    ({"tokens_per_s": 0}, "--tokens-per-s must be a positive"),
    ({"tokens_per_s": float("nan")}, "--tokens-per-s must be a positive"),
    ({"backends": ["no_such_runtime"]}, "no_such_runtime"),
])
def test_bad_input_is_a_user_error(tinyllama, kwargs, match):
    with pytest.raises(UserError, match=match):
        choose_llm_format(tinyllama, "raspberry_pi_5", **kwargs)


def test_a_device_the_target_lacks_is_a_user_error(tinyllama):
    with pytest.raises(UnknownNameError, match="cuda"):
        choose_llm_format(tinyllama, "raspberry_pi_5", device="cuda")


def test_recommend_command_prints_the_choice():
    proc = subprocess.run([sys.executable, "-m", "edgeprof", "recommend", "llm:tinyllama-1.1b",
                           "--target", "raspberry_pi_4", "--context", "1024", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["verdict"] == "ok" and d["context_tokens"] == 1024 and d["reasons"]
    proc = subprocess.run([sys.executable, "-m", "edgeprof", "recommend", "llm:tinyllama-1.1b",
                           "--target", "raspberry_pi_4", "--context", "4096"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# ------------------------------------------------- generative decisions (issue 21, item 3)
def test_without_a_budget_the_interactive_floor_keeps_f32_out():
    """'Most bits' alone picked f32 on llama_cpp, ~6x slower than q4_0 and never measured."""
    from edgeprof.optimize.llm import INTERACTIVE_FLOOR_TOKENS_PER_S

    model = resolve_llm("llm:qwen2.5-0.5b")
    choice = choose_llm_format(model, "raspberry_pi_5", context_tokens=2048)
    assert choice.verdict == "ok" and choice.tokens_per_s is None
    assert choice.chosen.decode >= INTERACTIVE_FLOOR_TOKENS_PER_S
    assert "interactive floor" in " ".join(choice.reasons)
    f32 = [c for c in choice.candidates if c.format in ("f32", "fp32") and c.decode is not None
           and c.decode < INTERACTIVE_FLOOR_TOKENS_PER_S]
    assert all(c.status == "below_budget" for c in f32)


def test_a_jetson_defaults_to_its_gpu_and_shows_the_cpu_beside_it():
    model = resolve_llm("llm:llama-3.2-1b")
    choice = choose_llm_format(model, "jetson_orin_nano", tokens_per_s=30)
    assert choice.device == "cuda"
    assert any("cuda" in n and "--device cpu" in n for n in choice.notes)
    assert any(" cpu instead: decode" in n for n in choice.notes)
    cpu = choose_llm_format(model, "jetson_orin_nano", tokens_per_s=30, device="cpu")
    assert cpu.device == "cpu"


def test_below_four_bits_carries_a_quality_caveat():
    model = resolve_llm("llm:llama-3.2-1b")
    choice = choose_llm_format(model, "raspberry_pi_5", tokens_per_s=15,
                               backends=["llama_cpp"])
    if choice.chosen is not None and choice.chosen.weight_bits < 4:
        assert any(r.startswith("quality caveat") for r in choice.reasons)
    two_bit = choose_llm_format(model, "raspberry_pi_5", tokens_per_s=0.1,
                                backends=["llama_cpp"], precisions=["q2_k"])
    assert two_bit.format == "q2_k"
    assert any(r.startswith("quality caveat: q2_k stores 2-bit") for r in two_bit.reasons)


def test_precisions_narrow_the_choice_and_unknown_ones_are_refused():
    from edgeprof.core.errors import UnknownNameError

    model = resolve_llm("llm:smollm2-135m")
    choice = choose_llm_format(model, "raspberry_pi_5", backends=["llama_cpp"],
                               precisions="q4_0,q8_0")
    assert {c.format for c in choice.candidates} == {"q4_0", "q8_0"}
    with pytest.raises(UnknownNameError, match="q3_x"):
        choose_llm_format(model, "raspberry_pi_5", backends=["llama_cpp"], precisions=["q3_x"])


def test_recommend_exits_4_when_a_constraint_cannot_be_met(capsys):
    from edgeprof.cli.main import main

    code = main(["recommend", "llm:llama-3.2-3b", "--target", "raspberry_pi_4",
                 "--tokens-per-s", "500", "--backend", "llama_cpp"])
    out, err = capsys.readouterr()
    assert code == 4 and "budget bound" in err and err.count("\n") == 1
    code = main(["recommend", "llm:llama-3.2-3b", "--target", "raspberry_pi_4",
                 "--context", "131072", "--backend", "llama_cpp", "--json"])
    assert code == 4 and json.loads(capsys.readouterr().out)["verdict"] == "does_not_fit"
    # optimize honours --precision and measures the shortlisted formats here
    assert main(["optimize", "llm:smollm2-135m", "--target", "raspberry_pi_5", "--precision",
                 "q4_0,q8_0", "--backend", "llama_cpp", "--prompt-tokens", "16",
                 "--gen-tokens", "4", "--repetitions", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {c["format"] for c in doc["candidates"]} == {"q4_0", "q8_0"}
    measured = doc["measured_here"]
    assert measured and measured[0]["format"] == doc["format"]  # the choice first
    assert {r["format"] for r in measured} <= {"q4_0", "q8_0"}
    assert all(r["status"] == "ok" and r["decode_tokens_per_s"]["median"] > 0 for r in measured)


# --------------------------------------------- generative decisions (issue 31, item 5)
def test_most_bits_stops_at_q8_0_and_floats_come_only_when_asked():
    """'Most bits that fit' picked f32 for smollm2-135m on a Pi 5 (13.9 tok/s predicted
    against q8_0's 52) for no quality a user can see: the ladder stops at 8-bit weights."""
    from edgeprof.optimize.llm import LADDER_TOP_BITS

    model = resolve_llm("llm:smollm2-135m")
    choice = choose_llm_format(model, "raspberry_pi_5", backends=["llama_cpp"])
    assert LADDER_TOP_BITS == 8
    assert (choice.format, choice.verdict) == ("q8_0", "ok")
    assert choice.reasons[0].startswith("most bits that fit: q8_0 on llama_cpp")
    assert "up to 8-bit weights, the ladder's top" in choice.reasons[0]
    left_out = next(r for r in choice.reasons if r.startswith("left out unless asked"))
    assert "f16 on llama_cpp, f32 on llama_cpp" in left_out and "near-lossless" in left_out
    by = {c.format: c for c in choice.candidates}
    for fmt in ("f16", "f32"):  # both fit and reach the floor: held out, and said why
        assert by[fmt].fits and by[fmt].status == "not_asked"
        assert "near-lossless" in by[fmt].why and f"--precision {fmt}" in by[fmt].why
    # named explicitly, a float format is on the ladder again
    asked = choose_llm_format(model, "raspberry_pi_5", backends=["llama_cpp"],
                              precisions="q8_0,f16")
    assert asked.format == "f16" and asked.chosen.status == "chosen"
    # a backend that makes float formats only: they are what there is
    only = choose_llm_format(model, "raspberry_pi_5", backends=["transformers"])
    assert only.chosen is not None and only.chosen.weight_bits > LADDER_TOP_BITS


def test_recommend_smollm2_on_a_pi5_picks_an_8_bit_format():
    model = resolve_llm("llm:smollm2-135m")
    choice = choose_llm_format(model, "raspberry_pi_5")
    assert choice.chosen.weight_bits == 8
    assert not any(c.status == "ok" and c.weight_bits > 8 for c in choice.candidates)


def test_the_budget_verdict_is_the_interval_aware_one_tensor_plans_use(tinyllama,
                                                                         monkeypatch):
    import edgeprof.profilers.predict.llm as P
    from edgeprof.core.provenance import rate_verdict

    rates = {"q8_0": (9.5, 7.0, 11.0), "q6_k": (10.5, 8.0, 13.0), "q5_k_m": (12.0, 10.5, 15.0)}
    monkeypatch.setattr(P, "predict_llm", _fake_predictor(rates))
    choice = choose_llm_format(tinyllama, "raspberry_pi_5", backends=["llama_cpp"],
                               precisions="q8_0,q6_k,q5_k_m", context_tokens=1024,
                               tokens_per_s=10)
    by = {c.format: c for c in choice.candidates}
    for fmt, (v, lo, hi) in rates.items():
        verdict = rate_verdict(v, 10, "predicted", low=lo, high=hi)
        assert by[fmt].budget_verdict == verdict.to_dict()
        assert by[fmt].to_dict()["budget_verdict"] == verdict.to_dict()
    assert by["q8_0"].status == "below_budget"
    assert by["q8_0"].why == rate_verdict(9.5, 10, "predicted", low=7.0, high=11.0).text
    assert "its interval's high end would meet it" in by["q8_0"].why
    assert choice.format == "q6_k" and by["q6_k"].budget_verdict["certainty"] == "likely"
    assert any("q6_k" in r and "likely meets the 10 tok/s budget" in r for r in choice.reasons)
    # without a budget the interactive floor is judged the same way, and named
    floor = choose_llm_format(tinyllama, "raspberry_pi_5", backends=["llama_cpp"],
                              precisions="q8_0", context_tokens=1024)
    assert floor.candidates[0].why.endswith("misses the 10 tok/s interactive floor (its "
                                            "interval's high end would meet it)")

"""LLM prediction per (target, device, runtime, format): the shipped calibration is a
deterministic fit to the published training rows only, predictions carry their provenance
and interval, and a host calibration recovers known parameters from measured records."""

from __future__ import annotations

import csv
import json
import math

import pytest

from edgeprof.core.errors import UserError
from edgeprof.core.llm import GenerationRecord
from edgeprof.profilers.estimate.llm import estimate_llm
from edgeprof.profilers.predict import llm as L
from edgeprof.targets import get_target
from edgeprof.zoo.llm import PRESETS

FIGS = ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms")


@pytest.fixture(scope="module")
def shipped():
    return json.loads(L.SHIPPED_FILE.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def no_user_calibrations(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "user-cals"))


def _predict(tid, device, preset, fmt, runtime="llama_cpp", **kw):
    t = get_target(tid)
    est = estimate_llm(PRESETS[preset], fmt, prompt_tokens=512, gen_tokens=128, target=t,
                       device=device)
    return L.predict_llm(est, t, device=device, runtime=runtime, **kw), est, t


# ------------------------------------------------------------------ the shipped fit
def test_training_file_is_the_published_rows_each_mapped():
    with L.TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 20 == len(L.ROWS)
    for r in rows:
        assert "http" in r["source"] and r["quote"].strip() and float(r["value"]) > 0
    left_out = [i for i, m in L.ROWS.items() if m.preset is None]
    assert left_out == [17] and "size is not stated" in L.ROWS[17].note
    assert L.ROWS[19].bandwidth == L.SUPER_MODE_BANDWIDTH  # the Super-mode row


def test_shipped_calibration_is_what_the_fit_regenerates(shipped):
    """No hand-typed fitted numbers: a re-fit gives the shipped file (timestamp aside)."""
    _same(L.comparable(L.build_calibration()), L.comparable(shipped))


def _same(a, b, where="$"):
    """Equal structures; floats within 1e-9 (libm may differ in the last bit elsewhere)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-15), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (where, set(a) ^ set(b))
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_fitted_fractions_match_the_issue_and_pi_5_decode_is_memory_bound(shipped):
    e = shipped["entries"]
    assert set(e) == {"raspberry_pi_5/cpu", "raspberry_pi_4/cpu", "jetson_nano/cpu",
                      "jetson_nano/cuda", "jetson_orin_nano/cuda"}
    pi4 = e["raspberry_pi_4/cpu"]["decode"]["base"]["bandwidth_fraction"]
    nano = e["jetson_nano/cpu"]["decode"]["base"]["bandwidth_fraction"]
    assert 0.2 <= pi4 <= 0.35  # "about 30% of peak on a Pi 4"
    assert 0.1 <= nano <= 0.18  # "about 14% on a Jetson Nano's CPU"
    orin = e["jetson_orin_nano/cuda"]["decode"]
    assert orin["overhead_identified"] and orin["base"]["per_layer_s"] > 0  # 135M vs 3B
    assert not e["raspberry_pi_5/cpu"]["decode"]["overhead_identified"]  # one model size
    pre = e["raspberry_pi_5/cpu"]["prefill"]["runtimes"]
    assert pre["llamafile"]["efficiency"] != pre["llama_cpp"]["efficiency"]  # per runtime
    p, est, t = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q8_0")
    assert p["decode_bound"] == "memory" and p["decode_bound_calibrated"] == "memory"
    p3, _, _ = _predict("raspberry_pi_5", "cpu", "llama-3.2-3b", "q4_k_m")
    assert p3["decode_bound"] == p3["decode_bound_calibrated"] == "memory"


def test_leave_one_out_is_reported_per_row_and_board(shipped):
    cv = shipped["cv"]
    assert cv["method"] == "leave-one-out" and cv["n"] == 19 == len(cv["rows"])
    boards = {b["board"]: b for b in cv["boards"]}
    assert set(boards) >= {"raspberry_pi_5/cpu", "raspberry_pi_4/cpu", "all"}
    for r in cv["rows"]:
        assert r["predicted"] > 0 and r["error"] == pytest.approx(r["predicted"] / r["measured"]
                                                                  - 1)
    # a board seen once is predicted by the prior in leave-one-out
    nano = [r for r in cv["rows"] if r["target"] == "jetson_nano"]
    assert nano and all(r["provenance"] == "estimated" for r in nano)


def test_training_rows_reproduce_within_the_reported_interval(shipped):
    figure = {"decode": "decode_tokens_per_s", "prefill": "prefill_tokens_per_s"}
    for s in shipped["samples"]:
        p, _, _ = _predict(s["target"], s["device"], s["model"], s["format"], s["runtime"])
        f = p[figure[s["stage"]]]
        assert f["provenance"] == "predicted" and f["calibration"] == "llm--published"
        assert f["low"] <= s["rate"] <= f["high"], (s["id"], f)


# ------------------------------------------------------------------ provenance
def test_prediction_figures_have_value_interval_unit_and_basis():
    p, est, t = _predict("raspberry_pi_4", "cpu", "tinyllama-1.1b", "q8_0")
    bw, peaks, _ = t.processor_figures("cpu")
    for k in FIGS:
        f = p[k]
        assert set(f) >= {"value", "low", "high", "unit", "provenance", "calibration", "basis"}
        assert f["low"] <= f["value"] <= f["high"] and f["provenance"] == "predicted"
    assert p["decode_tokens_per_s"]["value"] == pytest.approx(3.0, rel=0.02)
    assert p["tpot_ms"]["value"] == pytest.approx(1e3 / p["decode_tokens_per_s"]["value"])
    # never faster than the datasheet roofline
    roof = est.figure("decode_bytes_per_token") / bw
    assert 1 / p["decode_tokens_per_s"]["high"] >= roof * (1 - 1e-9)
    # the first token comes from the prefill's logits, as the harness measures it
    assert p["ttft_ms"]["value"] == pytest.approx(1e3 * 512 / p["prefill_tokens_per_s"]["value"])


def test_uncalibrated_target_is_estimated_with_a_wide_interval_and_the_reason(shipped):
    p, est, t = _predict("desktop_ddr4", "cpu", "qwen2.5-0.5b", "q4_k_m")
    for k in FIGS:
        f = p[k]
        assert f["provenance"] == "estimated" and f["calibration"] is None
        assert f["high"] / f["value"] >= 2.9 or f["value"] / f["low"] >= 2.9
    assert p["calibration"] is None and "no LLM calibration for desktop_ddr4" in p["notes"][0]
    prior = shipped["prior"]
    bw = t.processor_figures("cpu")[0]
    expect = 1 / (est.figure("decode_bytes_per_token") / (prior["bandwidth_fraction"] * bw))
    assert p["decode_tokens_per_s"]["value"] == pytest.approx(expect)


def test_mixed_provenance_when_a_board_has_only_decode_rows():
    p, _, _ = _predict("jetson_nano", "cuda", "tinyllama-1.1b", "q4_k_m")
    assert p["decode_tokens_per_s"]["provenance"] == p["tpot_ms"]["provenance"] == "predicted"
    assert p["prefill_tokens_per_s"]["provenance"] == p["ttft_ms"]["provenance"] == "estimated"
    assert any("no prefill rows" in n for n in p["notes"])
    p_cpu, _, _ = _predict("jetson_nano", "cpu", "tinyllama-1.1b", "q4_k_m")
    assert p_cpu["decode_tokens_per_s"]["value"] == pytest.approx(5.25, rel=0.02)


def test_runtime_or_size_outside_the_rows_widens_the_interval_and_says_so():
    base, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q8_0")
    other, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q8_0",
                           runtime="onnxruntime_genai")
    f0, f1 = base["decode_tokens_per_s"], other["decode_tokens_per_s"]
    assert f1["provenance"] == "predicted"
    assert f1["high"] / f1["low"] > f0["high"] / f0["low"] * 1.5
    assert any("onnxruntime_genai has no decode rows" in n for n in other["notes"])
    small, _, _ = _predict("raspberry_pi_5", "cpu", "smollm2-135m", "q8_0")
    assert any("outside the rows'" in n for n in small["notes"])


def test_unknown_device_and_corrupted_calibration_are_one_line_errors(tmp_path):
    t = get_target("raspberry_pi_5")
    est = estimate_llm(PRESETS["tinyllama-1.1b"], "q8_0", target=t)
    with pytest.raises(UserError) as e:
        L.predict_llm(est, t, device="cuda")
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
    bad = tmp_path / "llm--broken.json"
    bad.write_text("{not json")
    with pytest.raises(L.LLMCalibrationError) as e:
        L.predict_llm(est, t, dirs=[tmp_path])
    assert e.value.exit_code == 2 and "llm--broken.json" in str(e.value)
    assert "\n" not in str(e.value)
    data = json.loads(L.SHIPPED_FILE.read_text())
    data["entries"]["raspberry_pi_5/cpu"]["decode"]["base"]["bandwidth_fraction"] = -0.5
    bad.write_text(json.dumps(data))
    with pytest.raises(L.LLMCalibrationError, match="negative"):
        L.predict_llm(est, t, dirs=[tmp_path])


# ------------------------------------------------------------------ host calibration
TRUE = {"llama_cpp": {"fraction": 0.45, "per_layer_s": 40e-6, "efficiency": 0.30},
        "onnxruntime_genai": {"fraction": 0.30, "per_layer_s": 120e-6, "efficiency": 0.15}}
MODELS = [("smollm2-135m", "q8_0"), ("qwen2.5-0.5b", "q4_0"), ("tinyllama-1.1b", "q4_k_m"),
          ("smollm2-360m", "q8_0")]


def _synthetic_records(target):
    bw, peaks, _ = target.processor_figures("cpu")
    recs = []
    for rt, p in TRUE.items():
        for name, fmt in MODELS:
            est = estimate_llm(PRESETS[name], fmt, prompt_tokens=128, gen_tokens=32,
                               target=target)
            n = L.estimate_numbers(est)
            peak = peaks[L.compute_precision(n["format_compute"], peaks)]
            o = p["per_layer_s"] * n["num_layers"]
            t_dec = n["decode_bytes_per_token"] / (p["fraction"] * bw) + o
            t_pre = max(n["prefill_macs"] / (p["efficiency"] * peak),
                        n["prefill_bytes"] / (p["fraction"] * bw)) + o
            recs.append(GenerationRecord(
                model=f"llm:{name}", backend=rt, format=fmt, n_prompt=128, n_gen=32,
                n_threads=2, repetitions=3, prefill_tokens_per_s={"median": 128 / t_pre},
                decode_tokens_per_s={"median": 1 / t_dec}, runtime_version="1.0"))
    recs.append(GenerationRecord(model="llm:gemma-2-2b", backend="llama_cpp", format="q8_0",
                                 status="failed", reason="out of memory"))
    return recs


def _spec(model: str):
    return PRESETS[model.removeprefix("llm:")]


def test_calibrate_llm_host_recovers_known_parameters_and_writes_atomically(tmp_path):
    target = get_target("desktop_ddr4")  # stands in for this machine's detected target
    path = tmp_path / "cals" / "llm--desktop_ddr4--measured.json"
    cal = L.calibrate_llm_host(_synthetic_records(target), _spec, target=target, path=path)
    assert path.is_file() and not list(path.parent.glob(".*.tmp"))
    saved = L.load_llm_calibration(path)
    entry = saved["entries"]["desktop_ddr4/cpu"]
    for rt, p in TRUE.items():
        d = entry["decode"]["runtimes"][rt]
        assert d["bandwidth_fraction"] == pytest.approx(p["fraction"], rel=0.01)
        assert d["per_layer_s"] == pytest.approx(p["per_layer_s"], rel=0.02)
        assert d["overhead_identified"]
        assert entry["prefill"]["runtimes"][rt]["efficiency"] == pytest.approx(
            p["efficiency"], rel=0.01)
    assert cal["left_out"][0]["reason"].startswith("status failed")
    # noiseless: leave-one-out is exact wherever the rest still separate overhead from
    # bandwidth (leaving out the smallest or the largest model does not: then 0 overhead)
    for r in cal["cv"]["rows"]:
        inner = r["model"] in ("llm:qwen2.5-0.5b", "llm:smollm2-360m") or r["stage"] == "prefill"
        assert abs(r["error"]) < (0.02 if inner else 0.3), r
    # the user's calibration is found and used: predicted, named
    est = estimate_llm(PRESETS["tinyllama-1.1b"], "q4_k_m", prompt_tokens=128, gen_tokens=32,
                       target=target)
    p = L.predict_llm(est, target, runtime="llama_cpp", dirs=[path.parent])
    assert p["decode_tokens_per_s"]["provenance"] == "predicted"
    assert p["calibration"] == "llm--desktop_ddr4--measured"
    n = L.estimate_numbers(est)
    bw = target.processor_figures("cpu")[0]
    expect = 1 / (n["decode_bytes_per_token"] / (0.45 * bw) + 40e-6 * n["num_layers"])
    assert p["decode_tokens_per_s"]["value"] == pytest.approx(expect, rel=0.01)


def test_calibrate_llm_host_with_one_model_size_sets_no_overhead(tmp_path):
    target = get_target("desktop_ddr4")
    recs = [r for r in _synthetic_records(target)
            if r.model == "llm:tinyllama-1.1b" and r.backend == "llama_cpp"]
    cal = L.calibrate_llm_host(recs, _spec, target=target, write=False)
    d = cal["entries"]["desktop_ddr4/cpu"]["decode"]["runtimes"]["llama_cpp"]
    assert not d["overhead_identified"] and d["per_layer_s"] == 0
    assert 0.3 < d["bandwidth_fraction"] <= 0.45  # the overhead folded into the fraction


def test_calibrate_llm_host_without_successful_runs_is_a_user_error():
    target = get_target("desktop_ddr4")
    failed = [GenerationRecord(model="llm:tinyllama-1.1b", backend="llama_cpp", format="q8_0",
                               status="failed", reason="boom")]
    with pytest.raises(UserError) as e:
        L.calibrate_llm_host(failed, _spec, target=target, write=False)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)


def test_intervals_are_finite_and_ordered_everywhere():
    for tid in ("raspberry_pi_4", "raspberry_pi_5", "jetson_nano", "jetson_orin_nano"):
        t = get_target(tid)
        for dev in t.devices:
            p, _, _ = _predict(tid, dev, "llama-3.2-1b", "q4_k_m")
            for k in FIGS:
                f = p[k]
                assert all(math.isfinite(f[x]) and f[x] > 0 for x in ("value", "low", "high"))
                assert f["low"] <= f["value"] <= f["high"], (tid, dev, k)

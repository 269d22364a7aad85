"""LLM prediction per (target and mode, device, runtime and build, format, threads): the
shipped calibration is a deterministic fit to the published training rows only (each read as
data/llm/rows.toml says, keyed on its content), predictions carry their provenance, build,
threads and interval, the intervals report their leave-one-out coverage and width, and a host
calibration recovers known parameters (and a thread law) from measured records."""

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
from tools import build_llm_calibration as B  # reading the published rows is build-only

FIGS = ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms")


@pytest.fixture(scope="module")
def shipped():
    return json.loads(L.SHIPPED_FILE.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def no_user_calibrations(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CALIBRATIONS_DIR", str(tmp_path / "user-cals"))


def _predict(tid, device, preset, fmt, runtime="llama_cpp", prompt=512, **kw):
    t = get_target(tid)
    # a format no backend makes (q3_k_m, RKLLM's w8a8) as the rows read it: L.row_format
    est = estimate_llm(PRESETS[preset], L.row_format(fmt), prompt_tokens=prompt,
                       gen_tokens=128, target=t, device=device)
    return L.predict_llm(est, t, device=device, runtime=runtime, **kw), est, t


# ------------------------------------------------------------------ the shipped fit
def test_training_file_is_the_published_rows_each_mapped_by_content():
    with L.TRAIN_CSV.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 79  # issue 30 grew it from 28
    for r in rows:
        assert "http" in r["source"] and r["quote"].strip() and float(r["value"]) > 0
    maps = B.row_maps()
    read = [B.map_row(r, maps) for r in rows]  # exactly one [[row]] each, or ValueError
    left_out = [(r["model"], m.note) for r, m in zip(rows, read) if m.preset is None]
    # the SmolLM2 of unstated size: no preset
    assert sorted(m for m, _ in left_out) == ["SmolLM2 (size not stated)"]
    assert all("size is not stated" in n for _, n in left_out)
    # keyed on content, not position: any order maps each row the same way
    for r, m in zip(reversed(rows), reversed(read)):
        assert B.map_row(r, maps) is m
    with pytest.raises(ValueError, match="no"):
        B.map_row({**rows[0], "device": "Raspberry Pi 9"}, maps)


def test_the_shared_training_file_is_the_packaged_one():
    shared = L.TRAIN_CSV.parents[6] / "shared" / "llm_measurements_train.csv"  # ../shared
    if not shared.is_file():  # outside the workspace: nothing to compare with
        pytest.skip("no ../shared/llm_measurements_train.csv here")
    assert shared.read_bytes() == L.TRAIN_CSV.read_bytes()


def test_new_rows_are_used_with_their_build_threads_and_mode(shipped):
    by_build = {}
    for s in shipped["samples"]:
        by_build.setdefault((s["target"], s["device"], s["build"]["label"]), []).append(s)
    pi5 = by_build[("raspberry_pi_5", "cpu", "b9307")]
    assert {s["stage"] for s in pi5} == {"prefill", "decode"}
    assert all(s["threads"] == 4 and s["format"] == "q4_k_m" for s in pi5)
    assert {s["stage"] for s in by_build[("jetson_nano", "cpu", "b4970")]} == {"prefill",
                                                                                 "decode"}
    assert {s["stage"] for s in by_build[("jetson_nano", "cuda", "b5043")]} == {"prefill",
                                                                                  "decode"}
    orin = by_build[("jetson_orin_nano", "cuda", "b9518")]
    assert {s["stage"] for s in orin} == {"prefill", "decode"}
    # Super-mode rows are read as jetson_orin_nano:super and fitted against its peaks
    super_t = get_target("jetson_orin_nano:super")
    bw, peaks, _ = super_t.processor_figures("cuda")
    for s in orin:
        assert s["mode"] == "super" and s["target_id"] == "jetson_orin_nano:super"
        assert s["peak_bandwidth"] == bw == 102e9 and s["threads"] is None
    pre = next(s for s in orin if s["stage"] == "prefill")
    assert pre["precision"] == "fp16" and pre["peak_macs"] == peaks["fp16"]
    # every shipped board now has prefill rows: the Jetsons are no longer datasheet estimates
    assert all(e["prefill"] for e in shipped["entries"].values())
    # a row that states no thread count is read at the runtime's default (all cores)
    justine = [s for s in shipped["samples"] if s["version"] == "0.7"]
    assert justine and all(s["threads"] == 4 for s in justine)


def test_shipped_calibration_is_what_the_fit_regenerates(shipped):
    """No hand-typed fitted numbers: a re-fit gives the shipped file (timestamp aside)."""
    from tools.build_llm_calibration import build_calibration, comparable

    _same(comparable(build_calibration()), comparable(shipped))
    assert shipped["format_version"] == L.FORMAT_VERSION == 2


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
                      "jetson_nano/cuda", "jetson_orin_nano/cuda", "rk3588/cpu", "rk3588/npu"}
    pi4 = e["raspberry_pi_4/cpu"]["decode"]["base"]["bandwidth_fraction"]
    nano = e["jetson_nano/cpu"]["decode"]["base"]["bandwidth_fraction"]
    assert 0.2 <= pi4 <= 0.35  # "about 30% of peak on a Pi 4"
    assert 0.1 <= nano <= 0.18  # "about 14% on a Jetson Nano's CPU"
    orin = e["jetson_orin_nano/cuda"]["decode"]
    assert orin["overhead_identified"] and orin["base"]["per_layer_s"] > 0  # 135M vs 3B
    assert orin["modes"] == ["base", "super"]
    # llama.cpp's own rows on the Orin (135M and 1.1B) separate its fraction and overhead
    assert orin["runtimes"]["llama_cpp"]["overhead_identified"]
    # TinyLlama and Phi-4-mini: layers per byte within 4x of each other, so not separable
    assert not e["raspberry_pi_5/cpu"]["decode"]["overhead_identified"]
    pre = e["raspberry_pi_5/cpu"]["prefill"]["runtimes"]
    assert pre["llamafile"]["efficiency"] != pre["llama_cpp"]["efficiency"]  # per runtime
    # the GPUs' prefill is measured against their fp16 (tensor-core) rate, and lands close
    gpu = [e[k]["prefill"]["base"]["efficiency"] for k in ("jetson_nano/cuda",
                                                           "jetson_orin_nano/cuda")]
    assert all(0.2 < x < 0.45 for x in gpu)
    assert e["jetson_nano/cuda"]["prefill"]["precisions"] == ["fp16"]
    # the RK3588's NPU (issue 30): RKLLM's w8a8 rows and the rk-llama.cpp fork's, one entry,
    # each runtime with its own fraction and per-layer overhead (0.5B to 3.8B models); int8
    npu = e["rk3588/npu"]
    assert npu["kind"] == "npu" and npu["prefill"]["precisions"] == ["int8"]
    assert set(npu["decode"]["runtimes"]) == {"rkllm", "llama_cpp"}
    rk = npu["decode"]["runtimes"]["rkllm"]
    assert rk["overhead_identified"] and 0.6 < rk["bandwidth_fraction"] <= 1.0
    assert rk["builds"] == ["1.2.1", "1.2.2", "1.3.0"] and not rk["eras"]  # no era split
    # the RK3588's A76 cluster reads its LPDDR4X at a larger fraction than the Pi 5's
    assert (e["rk3588/cpu"]["decode"]["base"]["bandwidth_fraction"]
            > e["raspberry_pi_5/cpu"]["decode"]["base"]["bandwidth_fraction"])
    p, est, t = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q8_0")
    assert p["decode_bound"] == "memory" and p["decode_bound_calibrated"] == "memory"
    p3, _, _ = _predict("raspberry_pi_5", "cpu", "llama-3.2-3b", "q4_k_m")
    assert p3["decode_bound"] == p3["decode_bound_calibrated"] == "memory"


def test_leave_one_out_is_reported_per_row_board_and_stage_with_interval_coverage(shipped):
    cv = shipped["cv"]
    assert cv["method"] == "leave-one-out" and cv["n"] == 78 == len(cv["rows"])
    # a model measured at two builds of one era is held out with its twin (not predicted
    # from it): the errors are those of a model the fit has not seen
    assert "held out together" in cv["grouped"]
    by_id = {r["id"]: r for r in cv["rows"]}
    assert by_id[12]["provenance"] == by_id[23]["provenance"] == "estimated"  # the Nano's two
    for r in cv["rows"]:
        assert r["predicted"] > 0 and r["error"] == pytest.approx(r["predicted"] / r["measured"]
                                                                  - 1)
        # nested: each held-out row carries the interval a fit without it states
        assert r["low"] <= r["predicted"] <= r["high"] and r["width"] == pytest.approx(
            r["high"] / r["low"])
        assert r["covered"] == (r["low"] <= r["measured"] <= r["high"])
    boards = {(b["board"], b["stage"]): b for b in cv["boards"]}
    assert {("raspberry_pi_5/cpu", "prefill"), ("raspberry_pi_5/cpu", "decode"),
            ("jetson_nano/cuda", "prefill"), ("rk3588/npu", "decode"), ("rk3588/npu", "prefill"),
            ("rk3588/cpu", "decode"), ("all", "decode"), ("all", "prefill"),
            ("all", "all")} <= set(boards)
    for b in cv["boards"]:
        assert 0 <= b["coverage"] <= 1 and b["median_width"] >= 1
        if b["stage"] != "all":
            assert b["within_bound"] == (0.25 if b["stage"] == "decode" else 0.5)
    iv = cv["intervals"]
    assert iv["goal"] == {"coverage": 0.8, "median_width": 2.0}
    for st in ("decode", "prefill", "all"):
        r = iv[st]
        assert set(r) >= {"n", "coverage", "median_width", "meets_goal", "why"}
        # a stage that misses the goal says why instead of widening silently
        assert r["meets_goal"] or r["why"]
    assert iv["decode"]["coverage"] >= 0.8 and iv["prefill"]["coverage"] >= 0.8
    # keep decode where it was: at least 3 of 4 held-out decode rows within +-25 %
    assert boards[("all", "decode")]["within"] >= 0.75
    assert boards[("all", "prefill")]["within"] >= 0.8


def test_training_rows_reproduce_within_the_reported_interval(shipped):
    """Each training row, predicted by the fit that includes it, within the 80 % interval it
    states -- all but at most one in twenty (78 rows: Gemma-3-270M's pp256 on the Pi 4, 61 tok/s
    against 83 predicted, its small matrices below the board's efficiency, is outside)."""
    figure = {"decode": "decode_tokens_per_s", "prefill": "prefill_tokens_per_s"}
    outside = []
    for s in shipped["samples"]:
        p, _, _ = _predict(s["target_id"], s["device"], s["model"], s["format"], s["runtime"],
                           prompt=s["prompt_tokens"], build=s["build"]["label"],
                           threads=s["threads"])
        f = p[figure[s["stage"]]]
        assert f["provenance"] == "predicted" and f["calibration"] == "llm--published"
        if not f["low"] <= s["rate"] <= f["high"]:
            outside.append((s["id"], s["rate"], f["low"], f["high"]))
    assert len(outside) <= len(shipped["samples"]) / 20, outside


# ------------------------------------------------------------------ provenance
def test_prediction_figures_have_value_interval_unit_and_basis():
    p, est, t = _predict("raspberry_pi_4", "cpu", "tinyllama-1.1b", "q8_0")
    bw, peaks, _ = t.processor_figures("cpu")
    for k in FIGS:
        f = p[k]
        assert set(f) >= {"value", "low", "high", "unit", "provenance", "calibration", "basis"}
        assert f["low"] <= f["value"] <= f["high"] and f["provenance"] == "predicted"
    # the TinyLlama q8_0 row's build (the board has 2025+ builds' rows too, at their level)
    p, est, t = _predict("raspberry_pi_4", "cpu", "tinyllama-1.1b", "q8_0", build="2024-03-26")
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
        assert f["high"] / f["value"] >= 1.9 or f["value"] / f["low"] >= 1.9
    assert p["calibration"] is None and "no LLM calibration for desktop_ddr4" in p["notes"][0]
    prior = shipped["prior"]["by_kind"]["cpu"]  # the CPU boards' prior, not the GPUs'
    bw = t.processor_figures("cpu")[0]
    # plus the CPU per-layer overhead where a board identified one (the RK3588's A76s, whose
    # rows span 350M to 3.4B parameters)
    over = shipped["prior"]["per_layer_s"]["cpu"]
    assert over > 0
    expect = 1 / (est.figure("decode_bytes_per_token") / (prior["bandwidth_fraction"] * bw)
                  + PRESETS["qwen2.5-0.5b"].num_layers * over)
    assert p["decode_tokens_per_s"]["value"] == pytest.approx(expect)


def test_mixed_provenance_when_a_board_has_only_decode_rows(tmp_path):
    data = json.loads(L.SHIPPED_FILE.read_text(encoding="utf-8"))
    data["entries"]["jetson_nano/cuda"]["prefill"] = None
    (tmp_path / "llm--no-nano-prefill.json").write_text(json.dumps(data))
    p, _, _ = _predict("jetson_nano", "cuda", "tinyllama-1.1b", "q4_k_m", dirs=[tmp_path])
    assert p["decode_tokens_per_s"]["provenance"] == p["tpot_ms"]["provenance"] == "predicted"
    assert p["prefill_tokens_per_s"]["provenance"] == p["ttft_ms"]["provenance"] == "estimated"
    assert any("no prefill rows" in n for n in p["notes"])
    p_cpu, _, _ = _predict("jetson_nano", "cpu", "tinyllama-1.1b", "q4_k_m")
    assert p_cpu["decode_tokens_per_s"]["value"] == pytest.approx(5.1, rel=0.05)


def test_runtime_or_size_outside_the_rows_widens_the_interval_and_says_so():
    base, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q8_0")
    other, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q8_0",
                           runtime="onnxruntime_genai")
    f0, f1 = base["decode_tokens_per_s"], other["decode_tokens_per_s"]
    assert f1["provenance"] == "predicted"
    assert f1["high"] / f1["low"] > f0["high"] / f0["low"] * 1.2
    assert any("onnxruntime_genai has no decode rows" in n for n in other["notes"])
    small, _, _ = _predict("raspberry_pi_5", "cpu", "smollm2-135m", "q8_0")
    # outside the sizes of the runtime's own rows (which set its level)
    assert any("outside the llama_cpp rows'" in n and n.startswith("decode")
               for n in small["notes"])
    assert any("GMAC for the prompt is outside" in n for n in small["notes"])  # prefill too
    # a figure wider than the 2x goal says where its width comes from
    assert any("goal: 2x" in n for n in small["notes"])


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


def _synthetic_records(target, threads=None):
    """Records made by the model itself at all of the target's big cores (``threads``)."""
    bw, peaks, _ = target.processor_figures("cpu")
    threads = threads or L.board_of(target, "cpu")["n_ref"]
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
                n_threads=threads, repetitions=3, prefill_tokens_per_s={"median": 128 / t_pre},
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


def test_intervals_are_finite_ordered_and_never_faster_than_the_roofline_everywhere():
    from edgeprof.targets import get_target_registry

    ids = [t.id for t in get_target_registry().all()] + ["jetson_orin_nano:super",
                                                         "jetson_nano:5w"]
    for tid in ids:
        t = get_target(tid)
        for dev in t.devices:
            try:
                t.processor_figures(dev)
            except Exception:  # noqa: BLE001 - an NPU without figures
                continue
            cores = L.board_of(t, dev)["cores"]
            for preset, fmt in (("llama-3.2-1b", "q4_k_m"), ("smollm2-135m", "q8_0"),
                                ("llama-3.2-3b", "f16")):
                for threads in {None, 1, cores}:
                    p, est, _ = _predict(tid, dev, preset, fmt, threads=threads)
                    for k in FIGS:
                        f = p[k]
                        assert all(math.isfinite(f[x]) and f[x] > 0
                                   for x in ("value", "low", "high"))
                        assert f["low"] <= f["value"] <= f["high"], (tid, dev, k)
                        # no 48x intervals: capped at x/ MAX_SPREAD each side
                        assert f["high"] / f["low"] <= L.MAX_SPREAD ** 2 * (1 + 1e-9)
                    roof = p["roofline"]
                    assert 1e3 / p["decode_tokens_per_s"]["high"] >= roof["decode_ms"] * (1 - 1e-9)
                    assert p["ttft_ms"]["low"] >= roof["prefill_ms"] * (1 - 1e-9)
                    assert p["tpot_ms"]["value"] >= roof["decode_ms"] * (1 - 1e-9)


# ------------------------------------------------------------------ builds
@pytest.mark.parametrize("runtime, text, label, era", [
    ("llama_cpp", "b4970 (c7b43ab6)", "b4970", "from 2025-01-01"),
    ("llama_cpp", "b9307", "b9307", "from 2025-01-01"),
    ("llama_cpp", "2024-03-26", "2024-03-26", "before 2025-01-01"),
    ("llama_cpp", "b2000", "b2000", "before 2025-01-01"),
    ("llama_cpp", "llama-cpp-python 0.3.36", "llama-cpp-python 0.3.36 (llama.cpp 0c1e57098, "
     "ggml 0.25.3)", "from 2025-01-01"),
    ("llamafile", "0.6.2", "0.6.2", "before 0.7"),
    ("llamafile", "llamafile 0.8.13", "0.8.13", "from 0.7"),
    ("mlc", "JetPack 6.2", "JetPack 6.2", None),
    ("llama_cpp", "not stated", None, None),
])
def test_builds_are_normalised_to_a_label_date_and_era(runtime, text, label, era):
    b = L.normalize_build(runtime, text)
    assert b["label"] == label and b["era"] == era
    if b["number"]:
        assert b["date"] == L.llama_cpp_build_date(b["number"]) and b["approx"]


def test_the_build_is_a_calibration_dimension(shipped):
    builds = {b["label"] for b in shipped["builds"]["llama_cpp"]}
    assert {"2024-03-26", "b4970", "b5043", "b9307", "b9518"} <= builds
    eras = shipped["entries"]["raspberry_pi_5/cpu"]["prefill"]["runtimes"]["llama_cpp"]["eras"]
    assert set(eras) == {"before 2025-01-01", "from 2025-01-01"}
    assert eras["from 2025-01-01"]["factor"] > 1 > eras["before 2025-01-01"]["factor"]
    new, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m", build="b9307")
    old, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m", build="2024-03-26")
    ratio = new["prefill_tokens_per_s"]["value"] / old["prefill_tokens_per_s"]["value"]
    assert 1.3 < ratio < 1.8  # the rows: 61.8 (b9307) vs 35 (2024-03-26) tok/s, shrunk
    # within 25 % of the 2026 row, where the old calibration was ~2x too slow
    assert new["prefill_tokens_per_s"]["value"] == pytest.approx(61.81, rel=0.25)
    assert new["build"]["label"] == "b9307" and "as asked" in new["build"]["why"]
    assert not any("predicting for" in n for n in old["notes"])  # a build it learned
    # a build the board has no rows of: the runtime's level, said, and a wider interval (the
    # Jetson Nano's CPU rows are all 2025 builds; issue 30 gave the Pi 4 2025+ rows too)
    nano_old, _, _ = _predict("jetson_nano", "cpu", "tinyllama-1.1b", "q4_k_m",
                              build="2024-03-26")
    nano_new, _, _ = _predict("jetson_nano", "cpu", "tinyllama-1.1b", "q4_k_m", build="b4970")
    assert any("build era before 2025-01-01 has no prefill rows of llama_cpp" in n
               for n in nano_old["notes"])
    assert any("learned llama_cpp builds b4970, b5036; predicting for 2024-03-26" in n
               for n in nano_old["notes"])
    w = lambda p: p["prefill_tokens_per_s"]["high"] / p["prefill_tokens_per_s"]["low"]  # noqa
    assert w(nano_old) > w(nano_new)
    assert nano_old["prefill_tokens_per_s"]["value"] == pytest.approx(
        nano_new["prefill_tokens_per_s"]["value"], rel=0.05)


def test_builds_of_one_era_measured_the_same():
    """Why the build era, not each build, is the calibration's build dimension: where the
    rows ran one board, runtime, model, format, stage and prompt at two builds of one era
    (llama.cpp b9333 and b9518 on the Orin, b4970/b5036 and b5000/b5043 on the Jetson Nano;
    RKLLM 1.2.1, 1.2.2 and 1.3.0, which have no eras), the rates agree within 7 % (the Nano's
    pairs are llama-cli's average of a short prompt against llama-bench's tg128), where the
    eras' factors are 0.7-1.3."""
    samples, _ = B.published_samples()
    groups = {}
    for s in samples:
        key = (s["target_id"], s["device"], s["runtime"], s["model"], s["format"], s["stage"],
               s["prompt_tokens"], s["build"]["era"])
        groups.setdefault(key, {})[s["build"]["label"]] = s["rate"]
    pairs = {k: v for k, v in groups.items() if len(v) >= 2}
    assert len(pairs) >= 5
    assert {k[2] for k in pairs} == {"llama_cpp", "rkllm"}
    for k, rates in pairs.items():
        assert max(rates.values()) / min(rates.values()) < 1.07, (k, rates)


def test_the_default_build_is_the_installed_one_or_the_newest_known(monkeypatch):
    p, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m")
    installed = L.installed_build("llama_cpp")
    if installed is not None and installed.get("era"):
        assert "installed here" in p["build"]["why"]
        assert p["build"]["label"] == installed["label"]
    monkeypatch.setattr(L, "installed_build", lambda runtime: None)
    p, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m")
    assert p["build"]["label"] == "b9518" and "newest the calibration knows" in p["build"]["why"]
    assert p["build"]["era"] == "from 2025-01-01"
    assert any("build b9518" in n for n in p["notes"])


# ------------------------------------------------------------------ threads
def test_threads_transfer_prefill_by_amdahl_and_decode_saturates():
    four, _, t = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m")
    assert four["threads"] == {"value": 4, "default": True,
                               "why": "all of raspberry_pi_5's 4 big cores (the default)"}
    one, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m", threads=1)
    two, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m", threads=2)
    s = L.PREFILL_SERIAL_PRIOR
    amdahl = (4 / (1 + s * 3)) / 1.0
    pre = lambda p: p["prefill_tokens_per_s"]["value"]  # noqa: E731
    dec = lambda p: p["decode_tokens_per_s"]["value"]  # noqa: E731
    assert pre(four) / pre(one) == pytest.approx(amdahl, rel=0.01)
    assert pre(one) < pre(two) < pre(four)
    assert dec(two) == pytest.approx(dec(four))  # bandwidth-bound: 2 threads saturate
    assert dec(one) == pytest.approx(dec(four) / L.DECODE_SATURATION_PRIOR)
    for p in (one, two):
        assert any("prefill: transferred from 4 threads" in n and "Amdahl" in n
                   for n in p["notes"])
        f0, f1 = four["prefill_tokens_per_s"], p["prefill_tokens_per_s"]
        assert f1["high"] / f1["low"] > f0["high"] / f0["low"]  # a transfer widens
    with pytest.raises(UserError) as e:
        _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m", threads=5)
    assert e.value.exit_code == 2 and "4 cores" in str(e.value)
    # a GPU runs the layers: threads do not change it, and it says so
    g, _, _ = _predict("jetson_nano", "cuda", "tinyllama-1.1b", "q4_k_m")
    g8, _, _ = _predict("jetson_nano", "cuda", "tinyllama-1.1b", "q4_k_m", threads=8)
    assert g["threads"]["value"] is None and "ignored" in g8["threads"]["why"]
    assert pre(g8) == pre(g) and dec(g8) == dec(g)


def test_a_host_calibration_fits_the_thread_law_where_records_ran_at_several_counts():
    target = get_target("desktop_ddr4")
    n_ref = L.board_of(target, "cpu")["n_ref"]
    serial = 0.25
    recs = []
    for threads in (1, 2, n_ref):
        for r in _synthetic_records(target, threads=n_ref):
            if r.status != "ok" or r.backend != "llama_cpp":
                continue
            sp = L.prefill_speed(threads, {"kind": "cpu", "n_ref": n_ref, "little_ratio": 0},
                                 serial) / L.prefill_speed(
                n_ref, {"kind": "cpu", "n_ref": n_ref, "little_ratio": 0}, serial)
            recs.append(GenerationRecord(
                model=r.model, backend=r.backend, format=r.format, n_prompt=128, n_gen=32,
                n_threads=threads, repetitions=3,
                prefill_tokens_per_s={"median": r.prefill_tokens_per_s["median"] * sp},
                decode_tokens_per_s=r.decode_tokens_per_s, runtime_version="1.0"))
    cal = L.calibrate_llm_host(recs, _spec, target=target, write=False)
    th = cal["entries"]["desktop_ddr4/cpu"]["prefill"]["threads"]
    assert th["fitted"] and th["serial_share"] == pytest.approx(serial, abs=0.011)
    eff = cal["entries"]["desktop_ddr4/cpu"]["prefill"]["runtimes"]["llama_cpp"]["efficiency"]
    assert eff == pytest.approx(TRUE["llama_cpp"]["efficiency"], rel=0.02)


# ------------------------------------------------------------------ modes
def test_a_mode_row_fits_the_modes_peaks_and_the_base_mode_scales_by_them():
    sup, est_s, ts = _predict("jetson_orin_nano:super", "cuda", "tinyllama-1.1b", "q4_k_m")
    base, est_b, tb = _predict("jetson_orin_nano", "cuda", "tinyllama-1.1b", "q4_k_m")
    assert sup["mode"] == "super" and sup["target"] == "jetson_orin_nano:super"
    assert any("mode super" in n for n in sup["notes"])
    for p in (sup, base):
        assert p["prefill_tokens_per_s"]["provenance"] == "predicted"
    # the Super row itself (2265 tok/s prefill, 66.55 decode) is reproduced in its mode
    assert sup["prefill_tokens_per_s"]["value"] == pytest.approx(2265, rel=0.05)
    assert sup["decode_tokens_per_s"]["value"] == pytest.approx(66.55, rel=0.2)
    # the base mode: the same fitted efficiency on the base peaks (fp16 5e12 vs 8.375e12)
    ratio = sup["prefill_tokens_per_s"]["value"] / base["prefill_tokens_per_s"]["value"]
    assert ratio == pytest.approx(8.375e12 / 5e12, rel=0.02)
    assert 1.0 < sup["decode_tokens_per_s"]["value"] / base["decode_tokens_per_s"]["value"] \
        < 102 / 68 + 1e-9
    assert any("rows ran in mode super" in n for n in base["notes"])


# ------------------------------------------------------------------ a board without rows
def test_rk3588_has_rows_of_its_own_cpu_and_npu():
    """Issue 30: the RK3588's A76 cluster (rk-llama.cpp's CPU backend) and its NPU (RKLLM
    w8a8, rk-llama.cpp's RKNPU2 backend) are predicted from their own rows."""
    p, _, _ = _predict("rk3588", "cpu", "tinyllama-1.1b", "q4_k_m")
    for k in FIGS:
        assert p[k]["provenance"] == "predicted" and p[k]["calibration"] == "llm--published"
    assert not p["estimated_from"] and p["threads"]["value"] == 4
    n, _, t = _predict("rk3588", "npu", "qwen2.5-1.5b", "w8a8", runtime="rkllm", prompt=128)
    for k in FIGS:
        assert n[k]["provenance"] == "predicted"
    assert n["compute_precision"] == "int8" and n["threads"]["value"] is None
    assert "an NPU runs the layers" in n["threads"]["why"]
    # the row itself: RKLLM 16.3 tok/s decode (v1.2.1), 378 ms TTFT for 128 tokens (v1.3.0)
    assert n["decode_tokens_per_s"]["value"] == pytest.approx(16.32, rel=0.1)
    assert n["ttft_ms"]["low"] <= 378.31 <= n["ttft_ms"]["high"]


def test_decode_without_rows_on_a_processor_comes_from_the_boards_other_one(tmp_path):
    """Decode streams the weights from the board's one DRAM: with no Jetson Nano CPU rows
    (here: the shipped calibration less that entry), its decode is estimated from the Nano
    GPU's fitted fraction times the CPU's share beside an accelerator (fitted on the boards
    with both, the Nano and the RK3588: CPU 0.126 / GPU 0.160, 0.707 / 0.907); prefill, a
    fraction of a processor's own peak, is not transferred. It used to come from the prior
    of all CPU boards: 18 tok/s where the Nano's CPU measured 5.0-5.25."""
    data = json.loads(L.SHIPPED_FILE.read_text(encoding="utf-8"))
    share = data["prior"]["cpu_share"]
    assert share["boards"] == ["jetson_nano", "rk3588"] and 0.7 < share["ratio"] < 0.85
    del data["entries"]["jetson_nano/cpu"]
    (tmp_path / "llm--no-nano-cpu.json").write_text(json.dumps(data))
    p, _, _ = _predict("jetson_nano", "cpu", "tinyllama-1.1b", "q4_k_m", dirs=[tmp_path])
    gpu, _, _ = _predict("jetson_nano", "cuda", "tinyllama-1.1b", "q4_k_m", dirs=[tmp_path])
    assert p["estimated_from"]["decode"] == "jetson_nano/cuda"
    assert not p["estimated_from"].get("prefill")
    assert p["decode_tokens_per_s"]["provenance"] == "estimated"
    assert p["decode_tokens_per_s"]["value"] == pytest.approx(
        gpu["decode_tokens_per_s"]["value"] * share["ratio"], rel=1e-6)  # one DRAM, 25.6 GB/s
    assert 5.0 / 1.25 < p["decode_tokens_per_s"]["value"] < 5.25 * 1.25
    assert any("another processor of the same board" in n and "the CPU's share" in n
               for n in p["notes"])


def test_a_board_without_rows_is_estimated_from_one_of_the_same_core(tmp_path):
    """Without its own rows (here: the shipped calibration less its rk3588 entries), the
    RK3588's A76 cluster is estimated from the Raspberry Pi 5's, the same core."""
    data = json.loads(L.SHIPPED_FILE.read_text(encoding="utf-8"))
    del data["entries"]["rk3588/cpu"], data["entries"]["rk3588/npu"]
    (tmp_path / "llm--no-rk3588.json").write_text(json.dumps(data))
    p, est, t = _predict("rk3588", "cpu", "tinyllama-1.1b", "q4_k_m", dirs=[tmp_path])
    pi5, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m", dirs=[tmp_path])
    for k in FIGS:
        assert p[k]["provenance"] == "estimated" and p[k]["calibration"] is None
    assert p["estimated_from"] == {"decode": "raspberry_pi_5/cpu",
                                   "prefill": "raspberry_pi_5/cpu"}
    assert any("estimated from raspberry_pi_5/cpu (the same core, cortex-a76)" in n
               and "not validated" in n for n in p["notes"])
    assert p["threads"]["value"] == 4  # its big cores, not all 8
    # the same A76 cluster at the same clock: the Pi 5's prefill; twice the bus: faster decode
    assert p["prefill_tokens_per_s"]["value"] == pytest.approx(
        pi5["prefill_tokens_per_s"]["value"], rel=1e-6)
    bw_ratio = t.processor_figures("cpu")[0] / get_target("raspberry_pi_5").processor_figures(
        "cpu")[0]
    assert p["decode_tokens_per_s"]["value"] == pytest.approx(
        pi5["decode_tokens_per_s"]["value"] * bw_ratio, rel=1e-6)
    for k in ("prefill_tokens_per_s", "decode_tokens_per_s"):  # wider than the Pi 5's own
        f, g = p[k], pi5[k]
        assert f["high"] / f["low"] > g["high"] / g["low"]
    # threads beyond the big cores add the A55s at their peak ratio (0.375 of an A76)
    p8, _, _ = _predict("rk3588", "cpu", "tinyllama-1.1b", "q4_k_m", threads=8, dirs=[tmp_path])
    assert L.board_of(t, "cpu")["little_ratio"] == pytest.approx(0.375)
    assert p["prefill_tokens_per_s"]["value"] < p8["prefill_tokens_per_s"]["value"] < \
        p["prefill_tokens_per_s"]["value"] * 1.2


def test_gpus_measure_quantized_prefill_against_their_fp16_rate():
    peaks = {"fp32": 1.0, "fp16": 2.0, "int8": 4.0}
    assert L.compute_precision("int8", peaks, "gpu") == "fp16"
    assert L.compute_precision("int8", peaks) == "int8"
    assert L.compute_precision("int8", {"fp32": 1.0}) == "fp32"  # A72/A57: no SDOT
    assert L.compute_precision("fp16", peaks, "gpu") == "fp16"


def test_a_version_1_calibration_file_still_reads(tmp_path):
    data = json.loads(L.SHIPPED_FILE.read_text(encoding="utf-8"))
    data["format_version"] = 1
    for e in data["entries"].values():
        for st in ("decode", "prefill"):
            for k in ("modes", "threads", "thread_counts", "macs_range"):
                e[st].pop(k, None)
            for r in e[st]["runtimes"].values():
                r.pop("eras", None)
                r.pop("builds", None)
    data.pop("builds")
    data.pop("extrapolation_sigma")
    (tmp_path / "llm--old.json").write_text(json.dumps(data))
    p, _, _ = _predict("raspberry_pi_5", "cpu", "tinyllama-1.1b", "q4_k_m", dirs=[tmp_path])
    assert p["calibration"] == "llm--published" and p["decode_tokens_per_s"]["value"] > 0

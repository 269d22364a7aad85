"""Comparing two profile.json documents: matching, significance, bad input, the text table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprof.core.errors import ConfigError, UserError
from edgeprof.profilers.report.compare import (Comparison, check_profile, compare_results,
                                        compare_samples, format_comparison, load_profile)


def run(backend, samples, precision="fp32", status="ok", reason=None, block_size=1):
    stats = None if samples is None else {"samples_ms": [float(v) for v in samples],
                                          "median_ms": float(np.median(samples)),
                                          "block_size": block_size}
    return {"backend": backend, "requested_precision": precision, "status": status,
            "reason": reason, "benchmark": {"status": status, "stats": stats}}


def doc(*runs):
    return {"schema_version": 1, "runs": list(runs)}


rng = np.random.default_rng(2024)


def lat(median, n=400, spread=0.03):
    return median * (1 + spread * rng.standard_normal(n))


def test_a_five_percent_slowdown_is_significant():
    rows = compare_results(doc(run("ort", lat(10.0))), doc(run("ort", lat(10.5))))
    (r,) = rows
    assert r.status == "compared" and r.significant is True and r.verdict == "slower"
    assert r.delta_pct == pytest.approx(5.0, abs=1.0)
    assert r.p_value < 1e-6 and r.cliffs_delta > 0.147
    assert r.ci_overlap is False


def test_a_speedup_is_faster():
    (r,) = compare_results(doc(run("ort", lat(10.0))), doc(run("ort", lat(8.0))))
    assert r.verdict == "faster" and r.significant and r.cliffs_delta < 0


def test_the_same_distribution_is_no_change():
    (r,) = compare_results(doc(run("ort", lat(10.0))), doc(run("ort", lat(10.0))))
    assert r.significant is False and r.verdict == "no significant change"


def test_a_tiny_but_detectable_shift_is_not_significant():
    # 1% apart with 20k samples: the U test alone calls it, the 2% effect floor does not
    a, b = lat(10.0, n=20_000, spread=0.01), lat(10.1, n=20_000, spread=0.01)
    figures = compare_samples(a, b)
    assert figures["p_value"] < 0.05
    assert figures["significant"] is False
    # and with the effect floor lowered to 0.5% it is
    assert compare_samples(a, b, min_rel_change=0.005)["significant"] is True


def test_a_shifted_tail_alone_is_not_significant():
    # same bulk, B has 10% of runs 2.5x slower: the median moves < 2%, Cliff's delta is small
    a = lat(10.0, n=2000)
    b = lat(10.0, n=2000)
    b[:200] *= 2.5
    figures = compare_samples(a, b)
    assert abs(figures["cliffs_delta"]) < 0.147 and figures["significant"] is False


def test_runs_are_matched_by_backend_and_precision():
    a = doc(run("ort", lat(5.0)), run("ort", lat(3.0), "int8"), run("tflite", lat(7.0)))
    b = doc(run("ort", lat(5.0), "int8"), run("ort", lat(5.0)), run("openvino", lat(4.0)))
    rows = {(r.backend, r.precision): r for r in compare_results(a, b)}
    assert set(rows) == {("ort", "fp32"), ("ort", "int8"), ("tflite", "fp32"),
                         ("openvino", "fp32")}
    assert rows[("ort", "fp32")].significant is False
    assert rows[("ort", "int8")].verdict == "slower"  # 3 ms -> 5 ms
    assert rows[("tflite", "fp32")].status == "only_in_a"
    assert rows[("openvino", "fp32")].status == "only_in_b"


def test_runs_without_samples_are_listed_with_the_reason():
    a = doc(run("trt", None, status="unavailable", reason="no CUDA device"), run("ort", [1.0]))
    b = doc(run("trt", lat(1.0)), run("ort", lat(1.0)))
    rows = {r.backend: r for r in compare_results(a, b)}
    assert rows["trt"].status == "no_samples" and "no CUDA device" in rows["trt"].reason
    assert rows["ort"].status == "no_samples" and "no latency samples" in rows["ort"].reason
    assert rows["trt"].significant is None


def test_different_block_sizes_are_noted():
    (r,) = compare_results(doc(run("ort", lat(0.01), block_size=10)),
                           doc(run("ort", lat(0.01), block_size=20)))
    assert any("block means" in n for n in r.notes)


def test_a_side_whose_machine_changed_speed_is_noted():
    """A measurement with the harness's speed_drift warning: the verdict stands (the samples
    do differ) but the row says the difference may be the machine's moment."""
    own = np.random.default_rng(7)  # not the module's generator: later tests draw from it
    a, b = (run("ort", m * (1 + 0.03 * own.standard_normal(400))) for m in (10.0, 15.0))
    b["benchmark"]["warnings"] = [{"code": "speed_drift", "message": "..."}]
    (r,) = compare_results(doc(a), doc(b))
    assert r.verdict == "slower"
    assert [n for n in r.notes if n.startswith("B: the machine changed speed")]
    # the terminal's table says it too (it had shown "slower" and dropped the note)
    text = format_comparison([r])
    assert "B: the machine changed speed" in text and "speed_drift" in text
    assert [line for line in text.splitlines() if line.startswith("ort") and "slower" in line]
    b["benchmark"]["warnings"] = []
    (r,) = compare_results(doc(a), doc(b))
    assert not [n for n in r.notes if "speed_drift" in n]
    assert "speed_drift" not in format_comparison([r])


def test_real_benchmark_results_can_be_compared():

    from edgeprof.core.backend import RunConfig
    from edgeprof.profilers.measure.measure import benchmark_backend

    from tests import fakes

    def profile(ms):
        r = benchmark_backend(fakes.FakeBusyBackend(), fakes.fake_handle(),
                              RunConfig(min_time_s=0.1, runs=50, options={"fake_ms": ms}))
        return {"runs": [{"backend": r.backend, "requested_precision": r.requested_precision,
                          "status": r.status, "benchmark": json.loads(json.dumps(r.to_dict()))}]}

    (r,) = compare_results(profile(0.3), profile(0.6))
    assert r.significant is True and r.verdict == "slower"
    assert r.delta_pct == pytest.approx(100, abs=40)


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("bad", [[], {}, {"runs": "x"}, {"runs": [{"status": "ok"}]},
                                 {"runs": [3]}])
def test_documents_that_are_not_profiles(bad):
    with pytest.raises(ConfigError, match="profile"):
        check_profile(bad)
    with pytest.raises(UserError):
        compare_results(bad, doc())


def test_load_profile_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json.*not valid JSON"):
        load_profile(bad)
    other = tmp_path / "package.json"
    other.write_text('{"name": "left-pad"}')
    with pytest.raises(ConfigError, match="not an edgeprof profile.json"):
        load_profile(other)
    good = tmp_path / "profile.json"
    good.write_text(json.dumps(doc(run("ort", [1.0, 2.0]))))
    assert load_profile(good)["runs"][0]["backend"] == "ort"


# ----------------------------------------------------------------------------- text
def test_format_comparison_is_a_plain_table():
    rows = compare_results(doc(run("ort", lat(10.0)), run("tflite", lat(7.0))),
                           doc(run("ort", lat(12.0))))
    text = format_comparison(rows, "before", "after")
    lines = text.splitlines()
    assert lines[0].startswith("backend") and "before median ms" in lines[0]
    assert "after median ms" in lines[0]
    assert set(lines[1]) <= {"-", " "}
    change = f"{rows[0].delta_pct:+.1f}%"  # ~+20%: medians of 400 draws with 3 % spread
    assert rows[0].delta_pct == pytest.approx(20.0, abs=1.5)
    assert any(line.startswith("ort") and "slower" in line and change in line for line in lines)
    assert any(line.startswith("tflite") and "only in A" in line for line in lines)
    assert "Mann-Whitney" in lines[-1]
    assert "\x1b" not in text  # no colour codes
    assert isinstance(rows[0], Comparison)
    json.dumps([r.to_dict() for r in rows], allow_nan=False)


# ------------------------------------------------------------ inputs that can't be trusted
def described(runs, model="small_cnn", target="raspberry_pi_4", shape=(1, 1, 28, 28),
              version="1.0"):
    return {"schema_version": version, "runs": runs, "target": {"id": target},
            "model": {"name": model, "format": "torch",
                      "inputs": [{"name": "input", "shape": list(shape), "dtype": "float32"}]}}


@pytest.mark.parametrize("change, needle", [
    ({"model": "mlp"}, "model name"),
    ({"target": "jetson_nano"}, "target"),
    ({"shape": (8, 1, 28, 28)}, "input shapes"),
])
def test_profiles_of_different_things_are_refused(change, needle):
    a = described([run("ort", lat(10.0))])
    b = described([run("ort", lat(8.0))], **change)
    with pytest.raises(ConfigError, match=needle) as err:
        compare_results(a, b)
    assert "--force" in str(err.value)
    (row,) = compare_results(a, b, force=True)  # forced: compared, and says so on the row
    assert row.status == "compared"
    assert row.notes and row.notes[0].startswith("NOT LIKE FOR LIKE") and needle in row.notes[0]
    assert "NOT LIKE FOR LIKE" in format_comparison([row])
    assert compare_results(a, described([run("ort", lat(8.0))]))[0].notes == []


@pytest.mark.parametrize("version", [99, "99.0", "2.0", "x", None, True])
def test_an_unknown_schema_version_is_refused(version):
    with pytest.raises(ConfigError, match="schema_version"):
        check_profile(described([run("ort", lat(1.0))], version=version))
    check_profile(described([run("ort", lat(1.0))], version="1.3"))  # a later 1.x reads


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1.5", None, True, -1.0])
def test_samples_that_are_not_finite_numbers_are_refused(bad):
    broken = run("ort", lat(10.0))
    broken["benchmark"]["stats"]["samples_ms"][3] = bad
    with pytest.raises(ConfigError, match="sample 3 of run 0"):
        compare_results(doc(broken), doc(run("ort", lat(10.0))))


def test_nan_samples_never_read_as_no_change():
    a = lat(10.0)
    a[::2] = np.nan
    with pytest.raises(UserError, match="not finite"):
        compare_samples(a, lat(10.0))


def _write(path, document):
    path.write_text(json.dumps(document))  # allow_nan: a NaN literal, as a damaged file has
    return str(path)


def _cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "edgeprof", "compare", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_compare_refuses_with_exit_2_and_one_line(tmp_path):
    a = _write(tmp_path / "a.json", described([run("ort", lat(10.0))]))
    other_target = _write(tmp_path / "b.json", described([run("ort", lat(8.0))],
                                                         target="jetson_nano"))
    proc = _cli(a, other_target)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "target" in lines[0] and "Traceback" not in proc.stderr
    forced = _cli(a, other_target, "--force")
    assert forced.returncode == 0 and "NOT LIKE FOR LIKE" in forced.stdout
    assert "WARNING" in forced.stderr and "jetson_nano" in forced.stderr
    for name, mutate in (("v99", lambda d: d.update(schema_version=99)),
                         ("nan", lambda d: d["runs"][0]["benchmark"]["stats"]["samples_ms"]
                          .__setitem__(0, float("nan"))),
                         ("str", lambda d: d["runs"][0]["benchmark"]["stats"]["samples_ms"]
                          .__setitem__(0, "fast"))):
        d = described([run("ort", lat(10.0))])
        mutate(d)
        proc = _cli(a, _write(tmp_path / f"{name}.json", d))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (name, proc.stderr)
        assert len(lines) == 1 and "internal error" not in lines[0], (name, proc.stderr)


# ------------------------------------------------------------------- generative profiles
def gen_run(backend="llama_cpp", fmt="q4_0", depth=0, *, prefill_s=0.040, decode_s=0.030,
            n=6, n_prompt=16, n_gen=4, threads=2, status="ok", reason="", spread=0.01,
            runtime="llama-cpp-python 0.3.36"):
    """A generation record as the harness writes it: raw seconds per repetition (with a
    little noise) and the summaries generate.py computes from them."""
    from edgeprof.core.llm import GenerationRecord
    from edgeprof.profilers.measure.generate import rate_stats, tpot_stats

    rec = GenerationRecord(model="smollm2-135m", backend=backend, format=fmt, status=status,
                           reason=reason, n_prompt=n_prompt, n_gen=n_gen, n_depth=depth,
                           n_threads=threads, runtime_version=runtime)
    if status != "ok":
        return rec
    def noise(base):
        return [float(base * (1 + spread * rng.standard_normal())) for _ in range(n)]

    pp, tg = noise(prefill_s), noise(decode_s)
    ttft = [t + decode_s / (n_gen - 1) for t in pp]
    rec.repetitions = n
    rec.prefill_tokens_per_s = rate_stats([n_prompt / t for t in pp])
    rec.decode_tokens_per_s = rate_stats([(n_gen - 1) / t for t in tg])
    rec.ttft_ms = rate_stats([1e3 * t for t in ttft])
    rec.tpot_ms = tpot_stats([1e3 * t / (n_gen - 1) for t in tg])
    rec.samples = {"prefill_s": pp, "ttft_s": ttft, "decode_s": tg}
    return rec


def gen_doc(*runs, prompt_tokens=16, gen_tokens=4, target=None, model="llm:smollm2-135m"):
    """A generative profile.json document (GenerativeReport.create), from records."""
    from edgeprof.core.llm import GenerationConfig
    from edgeprof.profilers.report.generative import GenerativeReport
    from edgeprof.zoo.llm import resolve_llm

    config = GenerationConfig(prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
                              repetitions=max((r.repetitions for r in runs), default=1))
    report = GenerativeReport.create(resolve_llm(model), config=config, runs=runs, target=target)
    return json.loads(json.dumps(report.to_dict()))


def by_figure(rows):
    return {(r.backend, r.format, r.depth, r.figure): r for r in rows}


def test_generative_profiles_compare_per_run_and_figure():
    # B: prefill 20% quicker (faster), decode 25% slower (rate falls, TPOT rises)
    a = gen_doc(gen_run(prefill_s=0.040, decode_s=0.030))
    b = gen_doc(gen_run(prefill_s=0.032, decode_s=0.0375))
    rows = compare_results(a, b)
    figures = by_figure(rows)
    assert set(figures) == {("llama_cpp", "q4_0", 0, f) for f in
                            ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms")}
    pp, tg, ttft, tpot = (figures[("llama_cpp", "q4_0", 0, f)] for f in
                          ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms"))
    assert all(r.status == "compared" and r.significant for r in rows)
    assert pp.verdict == "faster" and pp.delta_pct == pytest.approx(25, abs=3)  # 1/0.8
    assert pp.cliffs_delta > 0 and pp.unit == "tokens/s" and pp.higher_is_better
    assert tg.verdict == "slower" and tg.delta_pct == pytest.approx(-20, abs=3)
    assert ttft.verdict == "faster" and ttft.delta < 0 and ttft.unit == "ms"
    assert tpot.verdict == "slower" and tpot.delta_pct == pytest.approx(25, abs=3)
    assert pp.n_a == pp.n_b == 6 and pp.p_value < 0.05
    assert pp.median_a == pytest.approx(a["runs"][0]["prefill_tokens_per_s"]["median"])
    json.dumps([r.to_dict() for r in rows], allow_nan=False)


def test_generative_same_runs_are_no_significant_change():
    a = gen_doc(gen_run())
    rows = compare_results(a, json.loads(json.dumps(a)))
    assert {r.verdict for r in rows} == {"no significant change"}
    assert all(r.significant is False for r in rows)


def test_generative_runs_are_matched_by_backend_format_and_depth():
    a = gen_doc(gen_run(fmt="q4_0"), gen_run(fmt="q8_0"), gen_run(fmt="q4_0", depth=128),
                gen_run(backend="ort_genai", fmt="int4", status="unavailable",
                        reason="onnxruntime-genai is not installed"))
    b = gen_doc(gen_run(fmt="q4_0"), gen_run(fmt="q4_0", depth=512),
                gen_run(fmt="q8_0", n=1), gen_run(backend="ort_genai", fmt="int4"))
    rows = compare_results(a, b)
    whole = {(r.backend, r.format, r.depth): r for r in rows if r.figure is None}
    assert whole[("llama_cpp", "q4_0", 128)].status == "only_in_a"
    assert whole[("llama_cpp", "q4_0", 512)].status == "only_in_b"
    assert whole[("llama_cpp", "q8_0", 0)].status == "no_samples"
    assert "B: 1 repetition" in whole[("llama_cpp", "q8_0", 0)].reason
    gone = whole[("ort_genai", "int4", 0)]
    assert gone.status == "no_samples" and "unavailable" in gone.reason \
        and "not installed" in gone.reason
    assert len([r for r in rows if r.figure and r.format == "q4_0" and r.depth == 0]) == 4


def test_too_few_repetitions_give_medians_without_a_verdict():
    from edgeprof.profilers.report.compare import min_p_value

    assert min_p_value(2, 2) == pytest.approx(1 / 3) and min_p_value(4, 4) < 0.05 \
        <= min_p_value(3, 3)
    rows = compare_results(gen_doc(gen_run(n=2)), gen_doc(gen_run(n=2, decode_s=0.3)))
    assert len(rows) == 4 and {r.status for r in rows} == {"too_few_samples"}
    assert {r.verdict for r in rows} == {"not compared"}
    tg = by_figure(rows)[("llama_cpp", "q4_0", 0, "decode_tokens_per_s")]
    assert tg.delta_pct == pytest.approx(-90, abs=2) and tg.significant is None
    assert "--repetitions 4" in tg.reason
    text = format_comparison(rows)
    assert "2 and 2 repetitions" in text and "too few repetitions" in text


def test_generative_threads_and_runtime_differences_are_noted():
    rows = compare_results(gen_doc(gen_run(threads=2)),
                           gen_doc(gen_run(threads=4, runtime="llama-cpp-python 0.3.40")))
    notes = rows[0].notes
    assert "threads 2 (A) vs 4 (B)" in notes and any(n.startswith("runtime") for n in notes)
    text = format_comparison(rows, "before", "after")
    assert "[threads 2 (A) vs 4 (B)" in text.splitlines()[2]


@pytest.mark.parametrize("change, needle", [
    ({"prompt_tokens": 512}, "prompt tokens"),
    ({"gen_tokens": 128}, "generated tokens"),
    ({"model": "llm:qwen2.5-0.5b"}, "model name"),
])
def test_generative_profiles_of_different_things_are_refused(change, needle):
    a = gen_doc(gen_run())
    b = gen_doc(gen_run(), **change)
    with pytest.raises(ConfigError, match=needle) as err:
        compare_results(a, b)
    assert "--force" in str(err.value)
    rows = compare_results(a, b, force=True)
    assert all(r.notes[0].startswith("NOT LIKE FOR LIKE") for r in rows)
    assert "NOT LIKE FOR LIKE" in format_comparison(rows)


def test_a_tensor_and_a_generative_profile_are_refused():
    tensor, generative = doc(run("ort", lat(10.0))), gen_doc(gen_run())
    for a, b in ((tensor, generative), (generative, tensor)):
        with pytest.raises(ConfigError, match="tensor .*generative|generative .*tensor"):
            compare_results(a, b)
        with pytest.raises(ConfigError):
            compare_results(a, b, force=True)  # never like for like


def test_generative_estimates_have_nothing_to_compare():
    est = gen_doc()
    est["command"] = "estimate"
    with pytest.raises(ConfigError, match="no measured runs.*edgeprof estimate"):
        compare_results(est, gen_doc(gen_run()))


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["runs"][0]["samples"]["decode_s"].__setitem__(1, 0.0), "decode_s sample 1"),
    (lambda d: d["runs"][0]["samples"]["prefill_s"].__setitem__(0, "fast"), "prefill_s sample 0"),
    (lambda d: d["runs"][0]["samples"].__setitem__("ttft_s", 3.0), "ttft_s of run 0"),
    (lambda d: d["runs"][0].__setitem__("samples", [1.0]), "samples of run 0"),
    (lambda d: d["runs"][0].pop("format"), "'format'"),
    (lambda d: d.update(schema="edgeprof.llm/2"), "schema"),
    (lambda d: d.update(schema_version="2.0"), "schema_version"),
])
def test_damaged_generative_profiles_are_refused(mutate, needle):
    bad = gen_doc(gen_run())
    mutate(bad)
    with pytest.raises(ConfigError, match=needle):
        check_profile(bad)


def test_generative_table_and_json_through_the_cli(tmp_path, capsys):
    from edgeprof.cli.main import main

    a = _write(tmp_path / "a.json", gen_doc(gen_run(decode_s=0.030)))
    b = _write(tmp_path / "b.json", gen_doc(gen_run(decode_s=0.020)))
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["backend", "format", "depth", "figure"]
    decode = next(line for line in out if "decode tok/s" in line)
    assert decode.startswith("llama_cpp") and decode.rstrip().endswith("faster")
    change = next(cell for cell in decode.split() if cell.endswith("%"))
    assert float(change.rstrip("%")) == pytest.approx(50, abs=5)  # 0.030 s -> 0.020 s
    assert any("higher is faster" in line for line in out)
    assert main(["compare", a, b, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 4 and {r["kind"] for r in rows} == {"generative"}
    tg = next(r for r in rows if r["figure"] == "decode_tokens_per_s")
    assert tg["verdict"] == "faster" and tg["significant"] is True


def test_cli_refuses_a_tensor_and_a_generative_profile_with_exit_2(tmp_path, capsys):
    from edgeprof.cli.main import main

    tensor = _write(tmp_path / "tensor.json", described([run("ort", lat(10.0))]))
    generative = _write(tmp_path / "llm.json", gen_doc(gen_run()))
    for args in ([tensor, generative], [generative, tensor], [generative, tensor, "--force"],
                 [tensor, generative, "--json"]):
        assert main(["compare", *args]) == 2, args
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert captured.out == "" and len(lines) == 1, (args, captured)
        assert "tensor" in lines[0] and "generative" in lines[0]
        assert "Traceback" not in captured.err
    # and the before/after page draws tensor profiles only: exit 2 before anything is printed
    assert main(["compare", generative, generative, "--html",
                 str(tmp_path / "c.html")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--html" in captured.err
    assert not (tmp_path / "c.html").exists()


@pytest.mark.parametrize("kind", ["tensor", "generative"])
def test_both_kinds_of_profile_are_checked_by_the_same_rules(kind):
    """compare_inputs checked a tensor profile and a generative one with two copies of the
    same rules (issue 31): one check per rule, one wording, whatever the kind."""
    def fresh():
        return gen_doc(gen_run()) if kind == "generative" else \
            described([run("ort", lat(1.0))])

    bad = fresh()
    bad["runs"][0].pop("backend")
    with pytest.raises(ConfigError, match=r"run 0 has no 'backend'(| and 'format'); is "
                                          "this an edgeprof profile.json"):
        check_profile(bad)
    bad = fresh()
    bad["schema_version"] = "7.0"
    with pytest.raises(ConfigError, match="schema_version '7.0' is not one this edgeprof reads "
                                          r"\(1\.x\); compare it with the edgeprof version"):
        check_profile(bad)
    bad = fresh()
    if kind == "generative":
        bad["runs"][0]["samples"] = [1.0]
        name, expected = "samples", "a dict of lists of seconds"
    else:
        bad["runs"][0]["benchmark"]["stats"]["samples_ms"] = {"a": 1.0}
        name, expected = "samples_ms", "a list of ms"
    with pytest.raises(ConfigError, match=f"{name} of run 0 \\((ort|llama_cpp)\\) is a "
                                          f"(list|dict), not {expected}; the file is damaged"):
        check_profile(bad)

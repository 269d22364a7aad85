"""Comparing two profile.json documents: matching, significance, bad input, the text table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprof.core.errors import ConfigError, UserError
from edgeprof.profilers.report.compare import (Comparison, check_profile, compare_results,
                                        compare_samples, format_comparison, load_profile,
                                        mann_whitney)


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


def test_mann_whitney_matches_scipy_without_it(monkeypatch):
    a, b = np.round(lat(10.0, 300), 1), np.round(lat(10.4, 250), 1)  # with ties
    u, p = mann_whitney(a, b)
    import builtins

    real = builtins.__import__

    def no_scipy(name, *args, **kw):
        if name.startswith("scipy"):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    u2, p2 = mann_whitney(a, b)
    assert u2 == u and p2 == pytest.approx(p, rel=1e-6)


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
    assert any(line.startswith("ort") and "slower" in line and "+2" in line for line in lines)
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

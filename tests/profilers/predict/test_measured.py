"""Calibrate from your own measurements (issue 18, item 4): the CSV, its bad inputs, the fit
(one row moves the level, ten move the shape), the file, and predictions that use it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from edgeprof.cli.main import main
from edgeprof.profilers.predict.measured import MeasurementsError, read_measurements

NB201 = Path(__file__).resolve().parents[3] / "examples" / "nb201"


@pytest.fixture(scope="module")
def pi():
    from edgeprof.targets import get_target

    return get_target("raspberry_pi_4")


@pytest.fixture(scope="module")
def nb201_cal(tmp_path_factory):
    """The README's worked example: ten NAS-Bench-201 networks timed on a Pi 4."""
    import edgeprof

    folder = tmp_path_factory.mktemp("nb201")
    for f in NB201.iterdir():
        shutil.copy(f, folder / f.name)
    out = folder / "cal.json"
    cal, path, summary = edgeprof.calibrate_measurements(
        folder / "raspberry_pi_4_tflite.csv", "raspberry_pi_4", "tflite", out=out)
    return cal, path, summary, folder


def _csv(tmp_path, text: str, name="m.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize("text,expected", [
    ("", "empty"),
    ("model\nbuiltin:small_cnn\n", "line 1: missing column 'latency_ms'"),
    ("model,latency_ms,colour\nbuiltin:small_cnn,1\n", "line 1: unknown column 'colour'"),
    ("model,latency_ms\nbuiltin:small_cnn,-1\n", "line 2: latency_ms '-1'"),
    ("model,latency_ms\nbuiltin:small_cnn,0\n", "line 2: latency_ms '0'"),
    ("model,latency_ms\nbuiltin:small_cnn,nan\n", "line 2: latency_ms 'nan'"),
    ("model,latency_ms\nbuiltin:small_cnn,inf\n", "line 2: latency_ms 'inf'"),
    ("model,latency_ms\nbuiltin:small_cnn,fast\n", "line 2: latency_ms 'fast'"),
    ("model,latency_ms\nbuiltin:small_cnn,1\nbuiltin:mlp,2\nbuiltin:small_cnn,1.1\n",
     "line 4: duplicate of line 2"),
    ("model,latency_ms,precision\nbuiltin:small_cnn,1,int8\n", "precision int8 contradicts"),
    ("model,latency_ms,threads\nbuiltin:small_cnn,1,2\n", "threads 2 contradicts --threads 4"),
    ("model,latency_ms,threads\nbuiltin:small_cnn,1,two\n", "line 2: threads 'two'"),
    ("model,latency_ms\n", "no rows"),
    ("model,latency_ms,precision\nbuiltin:small_cnn,1,fp32\nbuiltin:mlp,1,int8\n",
     "several precisions"),
])
def test_bad_measurements_name_file_and_line(tmp_path, pi, text, expected):
    p = _csv(tmp_path, text)
    flags = {"precision": "fp32"} if "contradicts --precision" in expected or \
        "int8 contradicts" in expected else {}
    if "--threads" in expected:
        flags["threads"] = 4
    with pytest.raises(MeasurementsError) as e:
        read_measurements(p, pi, "tflite", **flags)
    assert str(p) in str(e.value) and expected in str(e.value)


@pytest.mark.parametrize("text,extra,expected", [
    ("model,latency_ms\nbuiltin:no_such_model,1\n", [], "line 2: model 'builtin:no_such_model' "
                                                        "does not load"),
    ("model,latency_ms\nmissing.py:net,1\n", [], "line 2: model 'missing.py:net' does not load"),
    ("model,latency_ms,threads\nbuiltin:small_cnn,1,16\n", [], "line 2: raspberry_pi_4 has 4 "
                                                               "cores"),
    ("", [], "empty"),
    ("model,latency_ms\nbuiltin:small_cnn,1\n", ["--threads", "9"], "has 4 cores"),
])
def test_cli_bad_measurements_exit_2_and_write_nothing(tmp_path, user_dir, capsys, text,
                                                       extra, expected):
    p = _csv(tmp_path, text)
    out = tmp_path / "cal.json"
    code = main(["calibrate", "--target", "raspberry_pi_4", "--backend", "tflite",
                 "--measurements", str(p), "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists() and not any(user_dir.iterdir())


def test_relative_model_paths_resolve_from_the_csv_folder(tmp_path, pi):
    shutil.copy(NB201 / "nb201.py", tmp_path / "nb201.py")
    p = _csv(tmp_path, "model,latency_ms,input_shape\nnb201.py:cell_532,14.9,1x3x32x32\n")
    rows = read_measurements(p, pi, "tflite")
    assert rows[0].spec == str(tmp_path / "nb201.py") + ":cell_532"
    assert rows[0].input_shape == (1, 3, 32, 32) and rows[0].threads == 1  # TFLite's default


# ---------------------------------------------------------------------------- the fit
def test_one_row_moves_the_level_and_says_how_little_it_learns(tmp_path, user_dir, capsys):
    import edgeprof

    p = _csv(tmp_path, "model,latency_ms,threads\nbuiltin:small_mobilenet,7.5,4\n")
    assert main(["calibrate", "--target", "raspberry_pi_4", "--backend", "tflite",
                 "--measurements", str(p)]) == 0
    out = capsys.readouterr().out
    assert "one row" in out and "level" in out
    files = list(user_dir.glob("raspberry_pi_4--measured-tflite-fp32-t4.json"))
    assert len(files) == 1
    # the user's calibration is found first and reproduces the row at its thread count
    pred = edgeprof.predict("builtin:small_mobilenet", "raspberry_pi_4", "tflite")
    assert pred.calibration == "raspberry_pi_4--measured-tflite-fp32-t4"
    assert pred.value_ms == pytest.approx(7.5, rel=1e-6)
    assert pred.threads == 4
    # another model moves by the prior's shape, not by the one row
    other = edgeprof.predict("builtin:small_resnet", "raspberry_pi_4", "tflite")
    shipped = edgeprof.predict("builtin:small_resnet", "raspberry_pi_4", "tflite",
                               calibration=Path(edgeprof.__file__).parent / "profilers" /
                               "predict" / "data" / "calibrations" /
                               "raspberry_pi_4--published.json")
    assert other.value_ms != pytest.approx(shipped.value_ms)


def test_nb201_worked_example(nb201_cal, user_dir):
    cal, path, summary, folder = nb201_cal
    assert path.exists() and json.loads(path.read_text())["format"] == "edgeprof-calibration"
    assert summary["rows"] == 10 and summary["threads"] == [1]
    assert "level" in summary["learned"]
    cv = summary["cv"]
    assert cv["method"] == "nested leave-one-out" and cv["n"] == 10
    # the fit must do better than the shipped ImageNet-sized prior on these small networks
    # (its level is 2x off: 43 % median error at one thread)
    assert cv["median_abs_error"] < 0.15 and cv["within_25"] >= 0.7
    assert cv["spearman"] > 0.8
    # the Pi 4 prior fitted to issue 30's 51 rows (33 of them ncnn) ranks these networks less
    # well than the 14-row one did, and leave-one-out keeps its shape (level only): the
    # interval is what that spread gives (benchmarks/results/predict_nb201.txt)
    assert cv["coverage"] >= 0.7 and cv["median_width"] <= 3.5
    for s in cal.samples:
        assert s["threads"] == 1 and "default" in s["threads_note"]


def test_the_interval_pools_the_rows_spread_with_the_priors(nb201_cal):
    """A spread measured on a few rows is itself a guess: the interval's sigma pools it with
    the prior's calibrated spread, which counts as two rows."""
    from edgeprof.profilers.predict.calibration import SHIPPED_DIR, calibrations_for
    from edgeprof.profilers.predict.measured import PRIOR_SIGMA_WEIGHT, pooled_sigma

    cal, _, summary, _ = nb201_cal
    (prior,) = calibrations_for("raspberry_pi_4", [SHIPPED_DIR])
    cv = summary["cv"]
    assert cv["log_sigma_prior"] == pytest.approx(prior.cv["log_sigma_calibrated"])
    assert cv["prior_sigma_weight"] == PRIOR_SIGMA_WEIGHT == 2.0
    assert cv["log_sigma"] == pytest.approx(math.sqrt(
        (10 * cv["log_sigma_own"] ** 2 + 2 * cv["log_sigma_prior"] ** 2) / 12))
    assert cal.cv["log_sigma"] == cv["log_sigma"]  # what predictions with it use
    assert pooled_sigma(0.05, 3, 0.2) > 0.05 and pooled_sigma(0.05, 1000, 0.2) < 0.06


def test_predictions_with_the_calibration_rank_like_the_measurements(nb201_cal):
    """One by one and in a batch give the same figures (issue 20's screening path)."""
    import csv

    import edgeprof
    from scipy.stats import spearmanr

    cal, path, _, folder = nb201_cal
    rows = list(csv.DictReader((folder / "raspberry_pi_4_tflite.csv").open()))
    specs = [str(folder / r["model"]) for r in rows]
    many = edgeprof.predict_many(specs, "raspberry_pi_4", "tflite", calibration=path,
                                 input_shapes=[(1, 3, 32, 32)])
    one = [edgeprof.predict(s, "raspberry_pi_4", "tflite", calibration=path,
                            input_shapes=[(1, 3, 32, 32)]) for s in specs[:3]]
    assert [p.value_ms for p in many[:3]] == [p.value_ms for p in one]
    measured = [float(r["latency_ms"]) for r in rows]
    assert spearmanr(measured, [p.value_ms for p in many]).statistic > 0.8  # fitted rows
    for p in many:
        assert p.provenance == "predicted" and p.threads == 1
        assert p.low_ms <= p.value_ms <= p.high_ms and p.value_ms >= p.roofline_ms
    # another thread count transfers from the rows' one
    four = edgeprof.predict(specs[0], "raspberry_pi_4", "tflite", threads=4, calibration=path,
                            input_shapes=[(1, 3, 32, 32)])
    assert four.value_ms < many[0].value_ms and "thread transfer" in four.method


def test_calibration_for_another_target_is_refused(nb201_cal):
    import edgeprof
    from edgeprof.core.errors import UserError

    _, path, _, _ = nb201_cal
    with pytest.raises(UserError, match="is for target raspberry_pi_4"):
        edgeprof.predict("builtin:small_cnn", "jetson_nano", "tflite", calibration=path)
    with pytest.raises(UserError, match="no rows for onnxruntime"):
        edgeprof.predict("builtin:small_cnn", "raspberry_pi_4", "onnxruntime",
                         calibration=path)


# ------------------------------------------------------------------------------- CLI
def test_predict_and_estimate_commands(nb201_cal, capsys, user_dir):
    _, path, _, folder = nb201_cal
    spec = str(folder / "nb201.py") + ":cell_532"
    assert main(["predict", spec, "--input-shape", "1x3x32x32", "--target", "raspberry_pi_4",
                 "--backend", "tflite", "--calibration", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["provenance"] == "predicted" and doc["threads"] == 1
    assert set(doc) >= {"value_ms", "low_ms", "high_ms", "method", "calibration", "notes"}
    assert main(["estimate", spec, "--input-shape", "1x3x32x32", "--target", "raspberry_pi_4",
                 "--backend", "tflite", "--calibration", str(path), "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert math.isclose(est["prediction"]["value_ms"], doc["value_ms"])
    assert main(["predict", "builtin:small_cnn", "--target", "raspberry_pi_4", "--backend",
                 "tflite", "--threads", "2"]) == 0
    text = capsys.readouterr().out
    assert "(2 threads)" in text and "predicted" in text
    assert main(["estimate", "builtin:small_cnn", "--target", "raspberry_pi_4",
                 "--threads", "2"]) == 2
    assert "give --backend" in capsys.readouterr().err


def test_a_calibration_from_another_runtime_build_warns_naming_both(tmp_path, user_dir):
    import edgeprof

    p = _csv(tmp_path, "model,latency_ms,runtime\nbuiltin:small_cnn,0.5,2.14\n")
    cal, path, _ = edgeprof.calibrate_measurements(p, "raspberry_pi_4", "tflite",
                                                   out=tmp_path / "c.json")
    pred = edgeprof.predict("builtin:small_cnn", "raspberry_pi_4", "tflite", calibration=path,
                            runtime_version="2.16")
    (w,) = [w for w in pred.warnings if w.code == "calibration_runtime_differs"]
    assert "'2.14'" in w.message and "'2.16'" in w.message
    same = edgeprof.predict("builtin:small_cnn", "raspberry_pi_4", "tflite", calibration=path,
                            runtime_version="2.14")
    assert not same.warnings

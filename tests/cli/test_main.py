"""The CLI end to end: exit codes, one-line errors, artifacts, JSON document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgeprof.cli.main import main

FAST = ["--runs", "20", "--min-time", "0.05", "--max-time", "1"]
SCHEMA = Path(__file__).resolve().parents[2] / "edgeprof" / "schema" / "profile.schema.json"


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgeprof", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600)


def validate(doc: dict) -> None:
    import jsonschema

    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    code = main(["profile", "builtin:small_cnn", "--target", "raspberry_pi_4", "--backend",
                 "torch_eager", "--out", str(out), *FAST])
    assert code == 0
    return out


def test_profile_writes_every_seed_artifact(demo_out):
    import pandas as pd

    names = {p.name for p in demo_out.iterdir()}
    assert {"layerwise_breakdown.csv", "operator_profile.csv", "hardware_totals.csv",
            "hardware_summary.csv", "precision_tradeoffs.csv", "layerwise_macs.png",
            "layerwise_activation_memory.png", "profile.json"} <= names
    assert not [n for n in names if n.startswith(".")], "staging files left behind"
    layers = pd.read_csv(demo_out / "layerwise_breakdown.csv")
    assert list(layers["layer"][:2]) == ["conv1", "relu1"]
    assert {"layer", "output_elements", "parameter_bytes", "activation_bytes", "macs"} <= set(layers)
    trade = pd.read_csv(demo_out / "precision_tradeoffs.csv")
    assert list(trade.columns[:6]) == ["precision", "accuracy_mean", "latency_ms_mean",
                                       "memory_mb_mean", "energy_proxy_j_mean", "accepted_ratio"]
    assert trade["accuracy_mean"].isna().all()  # not measured yet: empty, not invented
    # raspberry_pi_4 is not this host: torch_eager fp32 is predicted there from the Pi's
    # torch_eager int8 rows (precision transfer), never measured
    assert trade["latency_provenance"].iloc[0] == "predicted"
    totals = pd.read_csv(demo_out / "hardware_totals.csv")
    assert {"latency_ms", "memory_kb", "estimated_bandwidth_mb_s", "stream_utilization"} <= set(totals)
    png = (demo_out / "layerwise_macs.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_json_follows_the_schema_and_labels_provenance(demo_out):
    doc = json.loads((demo_out / "profile.json").read_text())
    validate(doc)
    assert doc["schema_version"] == "1.0"
    assert doc["target"]["id"] == "raspberry_pi_4" and len(doc["target"]["descriptor_sha256"]) == 64
    run = doc["runs"][0]
    assert run["status"] == "ok" and run["executed_precision"] == "fp32"
    figs = run["summary"]["figures"]
    assert figs["latency_ms"]["provenance"] == "predicted"
    assert figs["latency_low_ms"]["value"] <= figs["latency_ms"]["value"] <= \
        figs["latency_high_ms"]["value"]
    assert figs["host_latency_ms"]["provenance"] == "measured"
    assert figs["roofline_latency_ms"]["provenance"] == "analytic"
    assert run["host_summary"]["figures"]["latency_ms"]["provenance"] == "measured"


def test_json_flag_prints_the_document(capsys):
    code = main(["profile", "builtin:mlp", "--target", "desktop_ddr4", "--json", *FAST])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    validate(doc)
    assert doc["model"]["name"] == "mlp"


def test_unavailable_backend_still_estimates_and_exits_3(tmp_path, capsys):
    out = tmp_path / "o"
    code = main(["profile", "builtin:small_cnn", "--target", "jetson_nano", "--backend",
                 "tensorrt", "--out", str(out), *FAST])
    captured = capsys.readouterr()
    assert code == 3
    assert "tensorrt" in captured.err and "unavailable" in captured.err
    doc = json.loads((out / "profile.json").read_text())
    validate(doc)
    assert doc["runs"][0]["status"] == "unavailable"
    assert doc["estimate"]["totals"]["macs"] > 0
    # nothing was measured, yet the target latency is still predicted (issue 11): from the
    # shipped jetson_nano calibration of the TensorRT family, never labelled measured
    lat = doc["runs"][0]["summary"]["figures"]["latency_ms"]
    assert lat["value"] is not None and lat["value"] > 0
    assert lat["provenance"] in ("predicted", "uncalibrated")
    assert doc["runs"][0]["benchmark"]["stats"] is None


@pytest.mark.parametrize("args, needle", [
    (["profile", "builtin:small_cnn", "--target", "raspbery_pi_4"], "raspberry_pi_4"),
    (["profile", "builtin:small_cnn", "--backend", "torch_eagr"], "torch_eager"),
    (["profile", "missing_file.onnx"], "does not exist"),
    (["profile", "no_such_pkg.mod:make"], "cannot import"),
    (["profile", "builtin:small_cnn", "--input-shape", "1x3x224x224"], "1x3x224x224"),
    (["profile", "builtin:small_cnn", "--batch-size", "0"], "positive"),
    (["profile", "builtin:small_cnn", "--precision", "fp8"], "fp8"),
    (["profile", "builtin:small_cnn", "--latency-budget-ms", "fast"], "not a number"),
])
def test_user_mistakes_are_one_line_exit_2_and_write_nothing(tmp_path, args, needle):
    out = tmp_path / "out"
    proc = run_cli(*args, "--out", str(out), *FAST)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and needle in lines[0]
    assert not out.exists() or not any(out.iterdir())


def test_malformed_user_target_names_file(tmp_path):
    d = tmp_path / "targets"
    d.mkdir()
    (d / "broken.toml").write_text("name = [unclosed\n")
    proc = run_cli("targets", "show", "broken", "--targets-dir", str(d))
    assert proc.returncode == 2
    assert "broken.toml" in proc.stderr and "Traceback" not in proc.stderr


def test_targets_and_backends_listings(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    for t in ("raspberry_pi_4", "jetson_nano", "desktop_ddr4", "mcu", "nvidia_gpu", "mobile_npu"):
        assert t in out
    assert main(["targets", "show", "jetson_nano"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "source" in out
    # the board calibrations predict uses: which runtimes, how many rows, how good
    assert "calibration jetson_nano--published: runtimes tensorrt/fp16 (4 rows)" in out
    # its CPU cluster has its own (ncnn's Cortex-A57 tables)
    assert "calibration jetson_nano--published-cpu: runtimes ncnn/fp32 (25 rows)" in out
    assert "% within ±25 %" in out
    assert "LLM calibration llm--published, jetson_nano/cuda: decode llama_cpp (2 rows)" in out
    import edgeprof

    cals = edgeprof.api.calibrations_of("jetson_orin_nano:super")  # a mode: its board's
    assert [c["name"] for c in cals["llm"]] == ["llm--published"] and cals["tensor"] == []
    assert main(["targets", "show", "rk3588"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no calibration for tensor models: their predictions are 'uncalibrated'" in out
    assert main(["backends", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["torch_eager"]["available"] is True
    assert rows["tensorrt"]["available"] is False and rows["tensorrt"]["reason"]


def test_estimate_command_on_a_token_model(capsys):
    assert main(["estimate", "builtin:tiny_transformer", "--target", "mobile_npu", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["totals"]["macs"] > 0 and est["input_dtypes"] == ["int64"]


def test_model_files_profile_with_the_same_estimate_columns(tmp_path, capsys):
    """An .onnx and a .tflite file: estimate from the file's own graph, run on its runtimes."""
    import shutil

    from edgeprof.backends.onnx_export import export_onnx
    from edgeprof.backends.tflite_convert import convert
    from edgeprof.core.models import resolve_model

    handle = resolve_model("builtin:small_cnn")
    onnx_path = shutil.copy(export_onnx(handle).path, tmp_path / "net.onnx")
    tfl_path = shutil.copy(convert(handle, "fp32").path, tmp_path / "net.tflite")
    assert main(["estimate", "builtin:small_cnn", "--target", "raspberry_pi_4", "--json"]) == 0
    torch_est = json.loads(capsys.readouterr().out)
    for path, backends in ((onnx_path, "onnxruntime,openvino"), (tfl_path, "tflite")):
        code = main(["profile", str(path), "--target", "raspberry_pi_4", "--backend", backends,
                     "--json", *FAST])
        doc = json.loads(capsys.readouterr().out)
        assert code == 0, [r["reason"] for r in doc["runs"]]
        validate(doc)
        assert doc["model"]["format"] == Path(path).suffix[1:]
        assert doc["estimate"]["totals"]["macs"] == torch_est["totals"]["macs"]
        assert set(doc["estimate"]["layers"][0]) == set(torch_est["layers"][0])
        assert all(r["status"] == "ok" for r in doc["runs"])


def test_trace_writes_operator_tables_joined_to_layers(tmp_path):
    import pandas as pd

    out = tmp_path / "t"
    assert main(["profile", "builtin:small_cnn", "--backend", "torch_eager,onnxruntime",
                 "--trace", "--out", str(out), *FAST]) == 0
    for backend in ("torch_eager", "onnxruntime"):
        ops = pd.read_csv(out / f"operators_{backend}_fp32.csv")
        assert (ops["latency_ms"] > 0).all()
        joined = set(ops.dropna(subset=["macs"])["layer"])
        # joined to the estimate's rows by name (ORT fuses Conv+Relu into a node named after
        # the ReLU's output, so its conv time lands on relu1)
        assert {"pool1", "classifier"} <= joined, backend
        if backend == "torch_eager":
            assert "conv1" in joined
        trace = json.loads((out / f"trace_{backend}_fp32.json").read_text())
        assert trace  # a Chrome trace (list of events or {"traceEvents": ...})


def test_batch_sizes_measured_and_target_choice(tmp_path, capsys):
    out = tmp_path / "b"
    assert main(["batch", "builtin:small_cnn", "--target", "mcu", "--batch-sizes", "1,2,4",
                 "--out", str(out), "--json", *FAST]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["batch_size"] for r in doc["rows"]] == [1, 2, 4]
    assert all(r["status"] == "ok" and r["throughput_per_s"] > 0 for r in doc["rows"])
    choice = doc["target_choice"]
    # the MCU's ~1 MB SRAM holds small_cnn's 82 kB of weights plus a few batches of activations
    assert choice["memory_bytes"] <= choice["memory_limit_bytes"]
    assert (out / "batch_sizes.csv").exists() and (out / "batch_sizes.json").exists()
    proc = run_cli("batch", "builtin:small_cnn", "--batch-sizes", "0,2")
    assert proc.returncode == 2 and "positive" in proc.stderr and "Traceback" not in proc.stderr


def test_compare_two_profiles(demo_out, tmp_path, capsys):
    second = tmp_path / "again"
    assert main(["profile", "builtin:small_cnn", "--target", "raspberry_pi_4", "--backend",
                 "torch_eager", "--out", str(second), *FAST]) == 0
    capsys.readouterr()
    assert main(["compare", str(demo_out / "profile.json"), str(second / "profile.json")]) == 0
    text = capsys.readouterr().out
    assert "torch_eager" in text and "Mann-Whitney" in text
    assert main(["compare", str(demo_out / "profile.json"), str(second / "profile.json"),
                 "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["backend"] == "torch_eager" and isinstance(row["significant"], bool)
    proc = run_cli("compare", str(demo_out / "profile.json"),
                   str(demo_out / "layerwise_breakdown.csv"))
    assert proc.returncode == 2 and "profile.json" in proc.stderr and "Traceback" not in proc.stderr

"""How the board fit reads the published rows (tools/build_board_calibrations.py,
data/board_rows.toml): by their content, every row by one rule of each table; builds, thread
pairs and processors."""

from __future__ import annotations

import pytest

import tools.build_board_calibrations as B


def test_every_training_row_is_read_by_one_rule_of_each_table():
    rows = B.training_rows()
    readings = B.readings()
    assert len(readings) == len(rows) == 241
    for r in readings:
        assert r["target"] and r["family"] and r["precision"] in ("fp32", "fp16", "int8")
        assert (r["builtin"] is None) != (r["left_out"] is None)
    used = [r for r in readings if r["builtin"]]
    assert len(used) >= 230  # only networks edgeprof cannot rebuild are left out


def test_a_row_no_rule_reads_is_an_error_naming_the_cell():
    row = dict(B.training_rows()[0], framework="SomeRuntime 9.1")
    with pytest.raises(ValueError, match="no \\[\\[runtime\\]\\] rule .*'SomeRuntime 9.1'"):
        B.read_row(row)


def test_rows_are_read_by_content_not_position():
    rows = B.training_rows()
    assert [B.read_row(r) for r in reversed(rows)] == \
        list(reversed([B.read_row(r) for r in rows]))


def test_processors_come_from_the_rows_runtime_and_board():
    by = {}
    for r in B.readings():
        by.setdefault((r["target"], r["family"]), set()).add(r["device"])
    assert by[("raspberry_pi_5", "ncnn_vulkan")] == {"gpu"}  # the VideoCore VII
    assert by[("raspberry_pi_5", "ncnn")] == {"cpu"}
    assert by[("jetson_nano", "ncnn")] == {"cpu"}  # ncnn on a Jetson means its CPU
    assert by[("jetson_nano", "ncnn_vulkan")] == {"cuda"}  # its Maxwell GPU
    assert by[("jetson_nano", "tensorrt")] == {"cuda"}
    assert ("nucleo_l4r5zi", "cpu") in B.groups() and ("disco_f746ng", "cpu") in B.groups()


def test_an_older_build_gets_its_own_key_the_newest_the_familys():
    rs = [{"id": 0, "target": "t", "family": "ncnn", "build": "2020-05"},
          {"id": 1, "target": "t", "family": "ncnn", "build": "2023-06"},
          {"id": 2, "target": "t", "family": "ncnn", "build": None},
          {"id": 3, "target": "u", "family": "ncnn", "build": "2020-05"}]
    assert B.build_keys(rs) == {0: "ncnn@2020-05", 1: "ncnn", 2: "ncnn", 3: "ncnn"}


def test_serial_share_from_one_and_four_thread_pairs():
    rows = [{"threads": "1", "latency_ms": "100"}, {"threads": "4", "latency_ms": "40"},
            {"threads": "1", "latency_ms": "60"}, {"threads": "4", "latency_ms": "20"}]
    rs = [{"id": i, "target": "raspberry_pi_4", "family": "ncnn", "build": "b",
           "precision": "fp32", "builtin": m} for i, m in enumerate("aabb")]
    got = B.serial_shares(rs, rows, 4)["ncnn"]
    assert got["n"] == 2 and got["median_speedup"] == pytest.approx(2.75)
    # speedup 2.75 on 4 cores: serial = (4 / 2.75 - 1) / 3
    assert got["serial_share"] == pytest.approx((4 / 2.75 - 1) / 3)


def test_the_shipped_ncnn_serial_share_follows_the_board():
    from edgeprof.profilers.predict.calibration import SHIPPED_DIR, calibrations_for

    share = {}
    for t in ("jetson_nano", "raspberry_pi_4", "raspberry_pi_5"):
        (cal,) = [c for c in calibrations_for(t, [SHIPPED_DIR])
                  if c.fingerprint.get("device") == "cpu"]
        share[t] = cal.parameters["serial_share"]["ncnn"]
    # ncnn's own tables: 4 threads speed a Cortex-A57 up most, a Cortex-A76 least
    assert share["jetson_nano"] < share["raspberry_pi_4"] < share["raspberry_pi_5"]


def test_builds_are_ordered_by_release_and_read_from_the_text():
    assert B.build_order("ultralytics-8.3.152") > B.build_order("ultralytics-8.3.39")
    assert B.build_order("2023-06") > B.build_order("2020-05")
    ov = {r["build"] for r in B.readings() if r["family"] == "openvino"}
    assert {"ultralytics-8.3.39", "ultralytics-8.4.108", "ultralytics-8.2"} <= ov


# ---------------------------------------------------------------- predictions from them
def test_an_older_build_is_predicted_from_its_own_rows():
    """ncnn's May 2020 table on the Pi 4 is its own key: asking for that build reads it, the
    default reads the newest build's rows, and an unknown build warns."""
    import edgeprof

    new = edgeprof.predict("builtin:resnet18", "raspberry_pi_4", "ncnn", threads=4)
    old = edgeprof.predict("builtin:resnet18", "raspberry_pi_4", "ncnn", threads=4,
                           runtime_version="2020-05")
    assert new.provenance == old.provenance == "predicted"
    assert old.value_ms != pytest.approx(new.value_ms, rel=0.02)
    assert any("build 2020-05" in n for n in old.notes)
    odd = edgeprof.predict("builtin:resnet18", "raspberry_pi_4", "ncnn", threads=4,
                           runtime_version="1999-01")
    assert odd.value_ms == pytest.approx(new.value_ms)
    assert any(w.code == "calibration_runtime_differs" for w in odd.warnings)


def test_tflite_on_a_microcontroller_is_predicted_from_cmsis_nn_rows():
    import edgeprof

    p = edgeprof.predict("builtin:mcunet_proxyless_w03", "mcu", "tflite", "int8")
    q = edgeprof.predict("builtin:mcunet_proxyless_w03", "mcu", "cmsis_nn", "int8")
    assert p.provenance == "predicted" and p.value_ms == pytest.approx(q.value_ms)
    assert any("cmsis_nn's kernels" in n for n in p.notes)


def test_ncnn_on_the_pi_5_gpu_and_cpu_have_their_own_calibrations():
    import edgeprof

    gpu = edgeprof.predict("builtin:mobilenet_v2", "raspberry_pi_5", "ncnn_vulkan", "fp16")
    cpu = edgeprof.predict("builtin:mobilenet_v2", "raspberry_pi_5", "ncnn", "fp16")
    assert gpu.device == "gpu" and gpu.calibration == "raspberry_pi_5--published-gpu"
    assert cpu.device == "cpu" and cpu.calibration == "raspberry_pi_5--published"
    assert gpu.provenance == cpu.provenance == "predicted"


def test_ncnn_int8_on_the_nano_cpu_is_predicted_not_refused():
    import edgeprof

    p = edgeprof.predict("builtin:resnet18", "jetson_nano", "ncnn", "int8", threads=4)
    assert p.device == "cpu" and p.calibration == "jetson_nano--published-cpu"
    assert p.provenance == "predicted"


def test_the_shared_training_file_is_the_packaged_one():
    from pathlib import Path

    from edgeprof.profilers.predict.boards import __file__ as boards_file

    packaged = Path(boards_file).parent / "data" / "device_measurements_train.csv"
    shared = Path(boards_file).parents[4] / "shared" / "device_measurements_train.csv"
    if not shared.is_file():  # outside the workspace: nothing to compare with
        pytest.skip("no ../shared/device_measurements_train.csv here")
    assert shared.read_bytes() == packaged.read_bytes()

"""Input shapes are checked before anything is estimated or run (issue 21), with a small
ONNX CNN fixed at 1x3x96x96: exit 2 and one line naming the input and the shape it accepts;
`batch` gives each failed row its reason and exits 3."""

from __future__ import annotations

import pytest

from edgeprof.cli.main import main
from tests.core.test_input_shapes import make_tiny_onnx

FAST = ["--runs", "5", "--min-time", "0.02", "--max-time", "0.5"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(make_tiny_onnx(tmp_path_factory.mktemp("m") / "tinynet.onnx"))


def _one_line_error(capsys) -> str:
    cap = capsys.readouterr()
    assert cap.out == ""  # nothing estimated, nothing printed
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeprof: error: "), cap.err
    assert "internal error" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["estimate", "profile"])
def test_a_wrong_rank_is_exit_2_naming_the_input_and_its_shape(tiny, capsys, command):
    extra = ["--backend", "onnxruntime", *FAST] if command == "profile" else []
    assert main([command, tiny, "--input-shape", "1x3x224", *extra]) == 2
    line = _one_line_error(capsys)
    assert "'x'" in line and "1x3x96x96" in line and "1x3x224" in line


def test_a_shape_against_the_fixed_one_is_exit_2_before_the_estimate(tiny, capsys):
    assert main(["profile", tiny, "--input-shape", "1x3x224x224", "--backend", "onnxruntime",
                 *FAST]) == 2
    line = _one_line_error(capsys)
    assert "'x'" in line and "fixed shape, 1x3x96x96" in line and "1x3x224x224" in line


def test_a_batch_the_fixed_batch_model_cannot_take_is_exit_2(tiny, capsys):
    assert main(["profile", tiny, "--batch-size", "4", "--backend", "onnxruntime", *FAST]) == 2
    line = _one_line_error(capsys)
    assert "fixed at batch 1" in line and "batch 4" in line


def test_a_dtype_the_model_does_not_accept_is_exit_2(tiny, capsys):
    assert main(["estimate", tiny, "--input-dtype", "int64"]) == 2
    line = _one_line_error(capsys)
    assert "'x'" in line and "float32" in line and "int64" in line


def test_batch_on_a_fixed_batch_model_gives_each_failed_row_its_reason_and_exits_3(tiny, capsys):
    code = main(["batch", tiny, "--batch-sizes", "1,2,4", "--backend", "onnxruntime", *FAST])
    out = capsys.readouterr().out
    assert code == 3
    assert "nan" not in out
    assert "batch 2: unsupported: input 'x' of tinynet is fixed at batch 1" in out
    assert "batch 4: unsupported:" in out


def test_batch_json_keeps_the_reason_and_exits_3(tiny, capsys):
    import json

    code = main(["batch", tiny, "--batch-sizes", "1,2", "--backend", "onnxruntime", "--json",
                 *FAST])
    cap = capsys.readouterr()
    assert code == 3
    rows = json.loads(cap.out)["rows"]
    assert rows[0]["status"] == "ok" and "fixed at batch 1" in rows[1]["reason"]
    assert "batch 2: unsupported" in cap.err

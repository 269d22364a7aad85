"""Bad input through the command line: one line, exit 2, nothing measured or written."""

from __future__ import annotations

import pytest

from tests.faults.inject import FAST, MODEL, launch


@pytest.mark.parametrize("args, needle", [
    (["profile", MODEL, "--input-shape", "99999x99999x99999x99"], "need 396 PB of memory"),
    (["profile", MODEL, "--backend", "torch_eager,,onnxruntime"], "empty name"),
    (["profile", MODEL, "--backend", "torch_eager,"], "empty name"),
    (["profile", MODEL, "--precision", "fp32,,int8"], "empty name"),
    (["optimize", MODEL, "--backend", "torch_eager,,onnxruntime"], "empty name"),
    (["optimize", MODEL, "--compression", "magnitude,,channels"], "empty name"),
], ids=["huge-input", "empty-backend", "trailing-comma", "empty-precision",
        "optimize-empty-backend", "optimize-empty-compression"])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, needle):
    out = tmp_path / "out"
    res = launch([*args, *FAST, "--out", str(out)], tmp_path).wait(timeout=120)
    assert res.rc == 2, res.stderr[-2000:]
    assert len(res.messages) == 1 and needle in res.messages[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert res.stdout == "" and not out.exists()


def test_the_api_refuses_empty_names_too():
    from edgeprof.api import profile
    from edgeprof.core.errors import UserError

    with pytest.raises(UserError, match="empty name"):
        profile(MODEL, backends="torch_eager,,onnxruntime")
    with pytest.raises(UserError, match="empty name"):
        profile(MODEL, precisions=["fp32", ""])

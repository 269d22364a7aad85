"""An output FILE (``calibrate --out FILE.json``, ``--html FILE``): checked before any work
as an output folder is, and an existing folder means "write the file in it" (issue 29,
finding 11)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgeprof.core import io
from edgeprof.core.errors import OutputError


def test_a_folder_means_the_file_inside_it(tmp_path):
    folder = tmp_path / "cals"
    folder.mkdir()
    assert io.prepare_out_file(folder) == folder.resolve()
    assert io.out_file(folder, "x.json") == folder / "x.json"
    assert io.out_file(f"{tmp_path / 'new'}{os.sep}", "x.json") == tmp_path / "new" / "x.json"
    assert io.out_file(tmp_path / "mine.json", "x.json") == tmp_path / "mine.json"


def test_a_new_file_an_existing_file_and_missing_folders_are_accepted(tmp_path):
    (tmp_path / "old.json").write_text("{}")
    for out in (tmp_path / "new.json", tmp_path / "old.json", tmp_path / "a" / "b" / "c.json"):
        io.prepare_out_file(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]  # nothing made yet


def _read_only(tmp_path) -> Path:
    if os.geteuid() == 0:  # chmod does not stop root; /sys refuses even root
        return Path("/sys/edgeprof-test.json")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro / "cal.json"


@pytest.mark.parametrize("case,needle", [("under-a-file", "lies under a file"),
                                         ("read-only", "cannot be written"),
                                         ("a-device", "not a regular file")])
def test_an_unusable_file_is_refused_naming_it(tmp_path, case, needle):
    (tmp_path / "f").write_text("x")
    out = {"under-a-file": tmp_path / "f" / "cal.json", "read-only": _read_only(tmp_path),
           "a-device": Path(os.devnull)}[case]
    with pytest.raises(OutputError, match=needle) as err:
        io.prepare_out_file(out, flag="--out")
    assert f"--out '{out}'" in str(err.value) and "\n" not in str(err.value)
    assert (tmp_path / "f").read_text() == "x"


def test_a_folder_can_be_refused_where_a_file_name_is_needed(tmp_path):
    with pytest.raises(OutputError, match="is a folder; give a file name$"):
        io.prepare_out_file(tmp_path, flag="--html", folder_ok=False)

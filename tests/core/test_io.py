"""Output folders: published as a whole, checked before measuring, modes honour the umask."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from edgeprof.core import io
from edgeprof.core.errors import OutputError

OLD = {"a.csv": "old a\n", "b.csv": "old b\n", "c.png": "old c\n"}
NEW = {"a.csv": "new a\n"}


def writer(files: dict[str, str]):
    def write(stage: Path) -> list[str]:
        for name, text in files.items():
            io.write_text(stage / name, text)
        return list(files)
    return write


def contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.name != io.MANIFEST}


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}"))


def test_a_second_run_replaces_the_whole_folder(tmp_path):
    out = tmp_path / "out"
    io.publish_staged(out, writer(OLD))
    io.publish_staged(out, writer(NEW))
    assert contents(out) == NEW  # b.csv and c.png of the earlier run are gone
    assert leftovers(out) == []
    manifest = json.loads((out / io.MANIFEST).read_text())
    assert set(manifest["files"]) == {"a.csv"}
    assert len(manifest["files"]["a.csv"]["sha256"]) == 64


def test_without_renameat2_the_old_folder_is_moved_aside_then_removed(tmp_path, monkeypatch):
    out = tmp_path / "out"
    io.publish_staged(out, writer(OLD))
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)
    io.publish_staged(out, writer(NEW))
    assert contents(out) == NEW and leftovers(out) == []


KILL_SCRIPT = """
import os, sys
from pathlib import Path
from edgeprof.core import io
out, n, exchange = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
if not exchange:
    io._exchange = lambda a, b: False
calls = [0]
def dying(real):
    def call(*args, **kw):
        calls[0] += 1
        if calls[0] == n:
            os._exit(9)  # a kill: no finally, no cleanup
        return real(*args, **kw)
    return call
io.publish_staged(out, lambda stage: [io.write_text(stage / k, t) and k for k, t in
                                      {"a.csv": "old a\\n", "b.csv": "old b\\n",
                                       "c.png": "old c\\n"}.items()])
os.rename, os.replace = dying(os.rename), dying(os.replace)
io._exchange = dying(io._exchange) if exchange else io._exchange
io.publish_staged(out, lambda stage: [io.write_text(stage / "a.csv", "new a\\n") and "a.csv"])
sys.exit(0)
"""


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_kill_at_any_rename_leaves_the_old_or_the_new_folder_never_a_mix(tmp_path, exchange):
    for n in range(1, 12):
        out = tmp_path / f"out{n}"
        proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(out), str(n),
                               "1" if exchange else "0"], capture_output=True, text=True,
                              timeout=60)
        io.prepare_out_dir(out)  # the next run starts: cleans up what the kill left
        assert contents(out) in (OLD, NEW), (n, proc.stderr)
        assert leftovers(out) == [], n
        if proc.returncode == 0:
            assert contents(out) == NEW
            break
    else:
        pytest.fail("publishing never completed")


def test_a_failed_write_keeps_the_old_folder_and_names_it(tmp_path):
    out = tmp_path / "out"
    io.publish_staged(out, writer(OLD))

    def full(stage: Path) -> list[str]:
        io.write_text(stage / "a.csv", "new a\n")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OutputError, match="No space left on device") as err:
        io.publish_staged(out, full)
    assert str(out) in str(err.value) and err.value.exit_code == 2
    assert contents(out) == OLD and leftovers(out) == []


def test_stale_staging_folders_are_removed_at_start(tmp_path):
    out = tmp_path / "out"
    io.publish_staged(out, writer(OLD))
    stale = tmp_path / f".out{io.STAGE_TAG}dead"
    stale.mkdir()
    (stale / "a.csv").write_text("half")
    io.prepare_out_dir(out)
    assert leftovers(out) == [] and contents(out) == OLD


def test_a_folder_with_files_edgeprof_did_not_write_is_refused_untouched(tmp_path):
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("precious")
    with pytest.raises(OutputError, match="chapter1.tex") as err:
        io.prepare_out_dir(out)
    assert "thesis" in str(err.value)
    with pytest.raises(OutputError):
        io.publish_staged(out, writer(NEW))
    assert (out / "chapter1.tex").read_text() == "precious"
    # a file added later to a folder edgeprof wrote counts too
    mine = tmp_path / "mine"
    io.publish_staged(mine, writer(NEW))
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="notes.txt"):
        io.prepare_out_dir(mine)


def test_an_empty_folder_and_an_older_edgeprof_output_are_accepted(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    io.publish_staged(empty, writer(NEW))
    assert contents(empty) == NEW
    legacy = tmp_path / "legacy"  # written before the manifest existed
    legacy.mkdir()
    (legacy / "profile.json").write_text(json.dumps({"schema_version": "1.0", "runs": []}))
    (legacy / "backend_comparison.csv").write_text("x\n")
    io.publish_staged(legacy, writer(NEW))
    assert contents(legacy) == NEW


@pytest.mark.parametrize("case", ["file", "under-file"])
def test_a_file_in_the_way_is_refused_before_anything(tmp_path, case):
    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" if case == "file" else tmp_path / "f" / "sub"
    with pytest.raises(OutputError, match="file") as err:
        io.prepare_out_dir(out)
    assert str(out) in str(err.value)


def read_only_dir(tmp_path) -> Path:
    """A folder this process cannot write: /sys as root (chmod does not stop root)."""
    if os.geteuid() == 0:
        return Path("/sys/edgeprof-test-out")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro / "out"


def test_a_read_only_location_is_refused(tmp_path):
    out = read_only_dir(tmp_path)
    with pytest.raises(OutputError, match="cannot be written") as err:
        io.prepare_out_dir(out)
    assert str(out) in str(err.value)


def test_a_full_disk_is_refused_before_measuring(tmp_path, monkeypatch):
    real = os.write

    def full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OutputError, match="No space left on device"):
        io.prepare_out_dir(tmp_path / "out")
    assert list(tmp_path.iterdir()) == []  # the probe cleaned up after itself


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_and_folders_honour_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        out = tmp_path / "out"
        io.publish_staged(out, writer(NEW))
        single = io.write_text(tmp_path / "single.json", "{}")
    finally:
        os.umask(old)
    assert (out / "a.csv").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (out / io.MANIFEST).stat().st_mode & 0o777 == 0o666 & ~umask
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask
    assert single.stat().st_mode & 0o777 == 0o666 & ~umask


def test_concurrent_writers_take_turns_and_leave_one_complete_result(tmp_path):
    out = tmp_path / "out"
    io.publish_staged(out, writer(OLD))
    started = threading.Event()

    def slow(files):
        def write(stage):
            started.set()
            names = []
            for name, text in files.items():
                io.write_text(stage / name, text)
                names.append(name)
                time.sleep(0.05)
            return names
        return write

    errors: list[BaseException] = []

    def run(files):
        try:
            io.publish_staged(out, slow(files))
        except BaseException as e:  # noqa: BLE001 - reported by the assert below
            errors.append(e)
            raise

    a = threading.Thread(target=run, args=(OLD,))
    b = threading.Thread(target=run, args=(NEW,))
    a.start()
    started.wait(5)
    b.start()
    a.join(10)
    b.join(10)
    assert errors == []
    assert contents(out) in (OLD, NEW) and leftovers(out) == []
    manifest = json.loads((out / io.MANIFEST).read_text())
    assert set(manifest["files"]) == set(contents(out))

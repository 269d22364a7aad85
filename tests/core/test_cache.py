"""The conversion cache under faults: races, corrupted entries, unwritable folders, modes."""

from __future__ import annotations

import multiprocessing as mp
import os
import stat
import time
from pathlib import Path

import pytest

from edgeprof.core import cache
from edgeprof.core.backend import RunConfig


def _fill(args):
    """One process filling the cache (module level: 'spawn' imports it by name)."""
    root, key = args
    os.environ["EDGEPROF_CACHE_DIR"] = root

    def build(path: Path) -> None:
        time.sleep(0.2)  # widen the race window
        path.write_bytes(b"model" * 1000)
        path.with_suffix(".bin").write_bytes(b"weights" * 1000)  # a side file, as OpenVINO's

    path, hit = cache.cached_artifact("race", {"k": key}, "model.xml", build)
    return str(path), path.read_bytes() == b"model" * 1000, \
        path.with_suffix(".bin").stat().st_size


def test_two_processes_filling_one_cache_both_succeed(tmp_path):
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        for round_ in range(3):
            results = pool.map(_fill, [(str(tmp_path), round_)] * 4)
            assert len({r[0] for r in results}) == 1, results  # all use one entry
            assert all(r[1] and r[2] == 7000 for r in results)
    entries = tmp_path / "conversions" / "race"
    assert len([p for p in entries.iterdir() if not p.name.startswith(".")]) == 3
    assert not [p for p in entries.iterdir() if p.name.startswith(".")]  # no leftovers


def test_a_corrupted_entry_is_rebuilt_once_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path))
    calls = []

    def build(path: Path) -> None:
        calls.append(1)
        path.write_bytes(b"abc" * 100)

    path, hit = cache.cached_artifact("k", {"a": 1}, "m.onnx", build)
    cache.drain_warnings()
    assert cache.cached_artifact("k", {"a": 1}, "m.onnx", build)[1] is True
    path.write_bytes(b"abc" * 10)  # truncated
    again, hit = cache.cached_artifact("k", {"a": 1}, "m.onnx", build)
    assert hit is False and again.read_bytes() == b"abc" * 100 and len(calls) == 2
    assert any("unusable" in w and "300" in w for w in cache.drain_warnings())


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def _tflite_file(folder: Path) -> Path:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(4)])
    path = folder / "tiny.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    return path


@pytest.mark.parametrize("backend_name,suffix", [("onnxruntime", ".onnx"),
                                                 ("openvino", ".bin"),
                                                 ("tflite", ".tflite")])
def test_truncated_cached_model_file_works_next_run_with_a_warning(
        tmp_path, monkeypatch, registry, backend_name, suffix):
    from edgeprof.core.models import resolve_model

    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    spec = str(_tflite_file(tmp_path)) if suffix == ".tflite" else "builtin:small_cnn"
    handle = resolve_model(spec, registry=registry)
    backend = registry.backend(backend_name)()
    config = RunConfig(precision="fp32", threads=1)
    first = backend.prepare(handle, config, handle.make_inputs(0))
    expected = first.to_numpy(first.run(first.inputs))[0]
    folder = Path(first.extra["artifact"]["path"])
    if first.close:
        first.close()
    del first  # a runtime may map the file: truncating it under a live session is not the case
    victim = next(folder.glob(f"*{suffix}"))
    _truncate(victim)
    again = backend.prepare(handle, config, handle.make_inputs(0))
    out = again.to_numpy(again.run(again.inputs))
    assert out[0].shape == expected.shape
    assert any(w["code"].startswith("cache") and "rebuilt" in w["message"]
               for w in again.warnings), again.warnings
    assert not any(n.startswith("warning: cache") for n in again.notes)  # said once, as a warning


def _unwritable(tmp_path: Path) -> Path:
    """A folder this user cannot write: read-only for normal users; for root (who bypasses
    permissions) a path under a file, which fails for root too."""
    if os.geteuid() == 0:
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        return blocker / "cache"
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    return ro / "cache"


def test_unwritable_cache_dir_falls_back_to_a_temporary_cache(tmp_path, monkeypatch, registry):
    from edgeprof.core.models import resolve_model

    bad = _unwritable(tmp_path)
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(bad))
    cache.drain_warnings()
    folder = cache.cache_dir("host")
    assert folder.is_dir() and not folder.is_relative_to(bad)
    warnings = cache.drain_warnings()
    assert any(str(bad) in w and "temporary cache" in w for w in warnings), warnings
    handle = resolve_model("builtin:small_cnn", registry=registry)
    pm = registry.backend("onnxruntime")().prepare(handle, RunConfig(threads=1),
                                                   handle.make_inputs(0))
    assert pm.to_numpy(pm.run(pm.inputs))[0].shape == (1, 10)


def test_unwritable_home_falls_back_too(tmp_path, monkeypatch):
    monkeypatch.delenv("EDGEPROF_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(_unwritable(tmp_path)))
    cache.drain_warnings()
    assert cache.cache_dir("conversions").is_dir()
    assert any("temporary cache" in w for w in cache.drain_warnings())


def test_entries_keep_the_umask_permissions(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path))
    old = os.umask(0o022)
    try:
        path, _ = cache.cached_artifact("modes", {"a": 1}, "m.tflite",
                                        lambda p: p.write_bytes(b"x"))
    finally:
        os.umask(old)
    for p in (path, path.parent / "manifest.json"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755


def test_leftovers_of_a_dead_build_are_swept(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path))
    parent = cache.cache_dir("conversions", "sweep")
    dead = parent / ".tmp-999999999-abcd-key"  # a pid that does not exist
    dead.mkdir()
    cache.cached_artifact("sweep", {"a": 1}, "m.bin", lambda p: p.write_bytes(b"x"))
    assert not dead.exists()


def test_an_entry_that_verifies_but_does_not_load_is_rebuilt(tmp_path, monkeypatch, registry):
    """Sizes and hashes match (the manifest was rewritten too), yet the runtime refuses the
    file: the load failure itself triggers the one rebuild."""
    from edgeprof.core.artifact import Artifact, file_records
    from edgeprof.core.models import resolve_model

    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    handle = resolve_model("builtin:small_cnn", registry=registry)
    backend = registry.backend("onnxruntime")()
    art = backend.build(handle, "fp32")
    art.entry_path.write_bytes(b"not an onnx model")
    art.manifest.files = file_records(art.path)
    art.write_manifest()
    Artifact.open(art.path)  # verifies
    pm = backend.prepare(handle, RunConfig(threads=1), handle.make_inputs(0))
    assert pm.to_numpy(pm.run(pm.inputs))[0].shape == (1, 10)
    assert [w["code"] for w in pm.warnings] == ["cache_rebuilt"]

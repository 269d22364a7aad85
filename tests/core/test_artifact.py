"""Artifacts: manifest values, verification, and packing checked against a digest."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile

import pytest

from edgeprof.core.artifact import Artifact, ArtifactError, Manifest, file_records


def _artifact(folder):
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"onnx-bytes" * 100)
    (folder / "sub").mkdir()
    (folder / "sub" / "weights.bin").write_bytes(b"\x00\x01" * 50)
    m = Manifest(format="onnx", backend="onnxruntime", requested_precision="int8",
                 route=[{"src": "torch", "dst": "onnx", "converter": "torch.onnx",
                         "package": "torch", "version": "2.13.0"}],
                 source_digest="abc", entry="model.onnx")
    art = Artifact(folder, m)
    art.write_manifest()
    return art


def test_manifest_round_trips_and_lists_sizes_and_hashes(tmp_path):
    art = _artifact(tmp_path / "a")
    again = Artifact.from_dict(json.loads(json.dumps(art.to_dict())))
    assert again.manifest == art.manifest and again.path == art.path
    assert set(art.manifest.files) == {"model.onnx", "sub/weights.bin"}
    assert art.manifest.files["model.onnx"]["size"] == 1000
    assert Artifact.open(art.path).manifest == art.manifest
    assert art.manifest.route_text() == "torch -> onnx (torch.onnx 2.13.0)"
    with pytest.raises(ArtifactError, match="lacks field"):
        Manifest.from_dict({"format": "onnx"})


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_verify_names_the_damaged_file(tmp_path, damage):
    art = _artifact(tmp_path / "a")
    f = art.path / "sub" / "weights.bin"
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:10])
    elif damage == "flip":
        f.write_bytes(b"\x07" + f.read_bytes()[1:])
    else:
        f.unlink()
    with pytest.raises(ArtifactError, match="sub/weights.bin"):
        art.verify()


def test_pack_unpack_checks_the_digest_and_the_manifest(tmp_path):
    art = _artifact(tmp_path / "a")
    data = art.pack()
    assert art.pack() == data  # deterministic
    digest = Artifact.digest(data)
    got = Artifact.unpack(data, tmp_path / "b", digest)
    assert got.manifest == art.manifest
    assert file_records(got.path) == art.manifest.files
    with pytest.raises(ArtifactError, match="sha256"):
        Artifact.unpack(data[:-1] + b"x", tmp_path / "c", digest)
    assert not (tmp_path / "c").exists()
    with pytest.raises(ArtifactError, match="exists"):
        Artifact.unpack(data, tmp_path / "b", digest)


def test_unpack_refuses_unsafe_or_inconsistent_archives(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../evil")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    data = buf.getvalue()
    with pytest.raises(ArtifactError, match="unsafe"):
        Artifact.unpack(data, tmp_path / "d", Artifact.digest(data))
    # an archive whose files do not match its own manifest
    art = _artifact(tmp_path / "a")
    (art.path / "model.onnx").write_bytes(b"changed")
    art.manifest.files = file_records(art.path)  # pack() verifies; forge the manifest after
    data = art.pack()
    forged = data.replace(b'"size": 7', b'"size": 8')
    with pytest.raises(ArtifactError):
        Artifact.unpack(forged, tmp_path / "e", Artifact.digest(forged))
    assert not (tmp_path / "e").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_manifest_is_written_with_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        art = _artifact(tmp_path / "a")
    finally:
        os.umask(old)
    assert stat.S_IMODE((art.path / "manifest.json").stat().st_mode) == 0o644

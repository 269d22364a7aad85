"""What travels to a board and how a board measures it: a :class:`Shipment` (a built artifact
packed as bytes, or a model file as it is, with the bytes' sha256: boards never convert and
nothing is pickled), the job's payload, and :func:`measure_shipment`, which checks and
unpacks the bytes there and measures them in a fresh process. Part of the fleet
(:mod:`edgeprof.profilers.measure.fleet`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import UnsupportedError
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult

@dataclass
class Shipment:
    """What travels to a board: a built artifact packed as bytes (``Artifact.pack()``), or a
    model file the runtime loads as it is, with the bytes' sha256."""

    kind: str  # "artifact" | "file"
    name: str  # the file's name, or the artifact's entry
    data: bytes
    sha256: str
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of_file(cls, path: Path, notes: list[str] | None = None) -> Shipment:
        data = Path(path).read_bytes()
        return cls("file", Path(path).name, data, hashlib.sha256(data).hexdigest(),
                   list(notes or []))

    @classmethod
    def of_artifact(cls, artifact) -> Shipment:
        data = artifact.pack()
        notes = [f"built here: {artifact.manifest.route_text()}"]
        return cls("artifact", artifact.manifest.entry, data, hashlib.sha256(data).hexdigest(),
                   notes)


def build_shipment(backend: str | type, handle, precision: str, *, registry=None) -> Shipment:
    """Build, here, what ``backend`` loads on a board (``Backend.build`` -> an Artifact,
    packed): boards never convert, and nothing is pickled."""
    cls = backend
    if isinstance(backend, str):
        from edgeprof.core.plugins import get_registry

        cls = (registry or get_registry()).backend(backend)
    try:
        artifact = cls().build(handle, precision, handle.calibration)
    except NotImplementedError:
        return _model_file(cls, handle, precision)
    if artifact.format == "torch":
        raise UnsupportedError(
            f"backend '{cls.name}' runs torch programs, which need torch on the board; the "
            "device extra holds no torch: use onnxruntime, openvino or tflite on the fleet",
            backend=cls.name)
    return Shipment.of_artifact(artifact)


def _model_file(cls: type, handle, precision: str) -> Shipment:
    """For a backend without ``build``: the model file it loads, as it is (.onnx, .tflite)."""
    if handle.path is not None and handle.format in ("onnx", "tflite") \
            and handle.format in cls.capabilities.model_formats and Path(handle.path).is_file():
        return Shipment.of_file(Path(handle.path))
    raise UnsupportedError(
        f"backend '{cls.name}' builds no artifact from a {handle.format} model, so it cannot "
        "run it on a board: edgeprof ships built artifacts (or .onnx/.tflite files) to boards, "
        "never a pickled model", backend=cls.name)


def job_payload(request: MeasureRequest, shipment: Shipment, target: str) -> dict[str, Any]:
    """What travels to a board: the request as plain data, the built bytes, their sha256,
    and the target the job measures for."""
    d = request.to_dict()
    d["model"] = None
    d["artifact"] = None
    d["calibration"] = None  # calibration is applied where the model is built: here
    d["plugins_file"] = None  # a board uses its own installed plugins
    d["backend_class"] = None
    return {"request": d, "target": target, "kind": shipment.kind, "name": shipment.name,
            "data": shipment.data, "sha256": shipment.sha256, "notes": list(shipment.notes)}


def measure_shipment(payload: dict[str, Any], workdir: Path, *, isolate: bool = True,
                     progress: Callable[[str], None] | None = None) -> BenchmarkResult:
    """Unpack the shipped bytes (checked against their sha256) into ``workdir`` and measure
    them: in a fresh process by default (``IsolatedRunner``: only the measuring thread runs
    there, not Dask's event loop and monitors, and a crash or hang fails the job, not the
    board; the job's timeout applies), else inline. ``measure()`` makes the status; the
    runner reports the run's steps to ``progress`` (a generative run's load, pp/tg)."""
    from edgeprof.core.artifact import Artifact, ArtifactError
    from edgeprof.profilers.measure.measure import measure
    from edgeprof.profilers.measure.runners import InlineRunner, IsolatedRunner

    d = dict(payload["request"])
    data = payload["data"]
    try:
        if payload.get("kind") == "artifact":
            art = Artifact.unpack(data, workdir / "artifact", payload["sha256"])
            d["artifact"] = art.to_dict()
        else:
            got = hashlib.sha256(data).hexdigest()
            if got != payload["sha256"]:
                raise ArtifactError(f"model bytes have sha256 {got[:16]}..., expected "
                                    f"{payload['sha256'][:16]}... (corrupted in transit)")
            path = workdir / Path(payload["name"]).name
            path.write_bytes(data)
            d["model"] = str(path)
    except ArtifactError as e:
        c = d.get("config") or {}
        return BenchmarkResult(backend=d["backend"], model=payload.get("name", "?"),
                               requested_precision=c.get("precision", "fp32"),
                               executed_precision=None, status="failed",
                               reason=f"{e}; not measured")
    timeout = payload.get("timeout_s")
    runner = IsolatedRunner(timeout, progress=progress) if isolate else \
        InlineRunner(progress=progress)
    return measure(MeasureRequest.from_dict(d), runner)

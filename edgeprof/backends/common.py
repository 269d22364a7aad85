"""What the backends share: thread counts, torch -> numpy, per-operator tables, reference
outputs and output agreement (on several varied inputs).

Nothing heavy is imported at module level: a backend that runs an .onnx/.tflite/IR artifact
imports this module without importing torch or tensorflow.
"""

from __future__ import annotations

import contextlib
import os

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: max-abs-error tolerance relative to the reference's max magnitude, by executed precision
RELATIVE_TOLERANCE = {
    "fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2, "int8": 0.15, "int8_static": 0.15,
    "int8_dynamic": 0.15, "int8_weight": 0.05, "int4_weight": 0.25,
}
#: the agreement inputs: (seed, distribution) pairs, different in seed *and* distribution
#: (all of about unit scale, like the synthetic calibration data, so that an int8 model is
#: judged inside the range it was calibrated for)
AGREEMENT_INPUTS = ((0, "normal"), (1, "uniform"), (2, "laplace"), (3, "logistic"))
#: below this spread across inputs (relative to the reference's scale, and never below the
#: precision's tolerance) the reference barely depends on its input: agreement is uninformative
MIN_REFERENCE_VARIATION = 1e-2


# ------------------------------------------------------------------------- small helpers
def physical_cores() -> int:
    import psutil

    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def first_line(e: BaseException, limit: int = 240) -> str:
    text = (str(e).strip().splitlines() or [""])[0][:limit]
    return f"{type(e).__name__}: {text}".rstrip(": ")


def require_torch_cuda(device: str, backend: str) -> None:
    """UnsupportedError, before any work, when ``device`` is CUDA and torch sees none (the
    torch backends' one check, eager, compiled and generative alike)."""
    if not str(device).startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        from edgeprof.core.errors import UnsupportedError

        raise UnsupportedError("CUDA was asked for but torch sees no CUDA device",
                               backend=backend)


def torch_to_numpy(outputs: Any) -> list:
    """A torch model's outputs (tensor, tuple/list or dict of tensors) as float numpy arrays."""
    import torch

    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    elif isinstance(outputs, dict):
        outputs = list(outputs.values())
    return [o.detach().float().cpu().numpy() for o in outputs if isinstance(o, torch.Tensor)]


def torch_outputs(module: Any, input_sets: Sequence[Sequence[Any]]) -> list[list]:
    """``module``'s outputs (:func:`torch_to_numpy`) for each set of numpy inputs, run under
    ``torch.inference_mode``."""
    import torch

    with torch.inference_mode():
        return [torch_to_numpy(module(*[torch.from_numpy(a) for a in s])) for s in input_sets]


def arrays_to_numpy(outputs: Any) -> list:
    """A runtime's outputs (list, tuple or mapping of arrays) as numpy arrays."""
    import numpy as np

    values = outputs.values() if hasattr(outputs, "values") else outputs
    return [np.array(v) for v in values]


def operator_frame(events: Sequence[dict[str, Any]], runs: int, columns: Sequence[str]):
    """The per-operator table from a runtime's profiler events.

    ``events``: one dict per executed node per run with ``operator``, ``op_type``, ``us``
    (duration) and any extra columns; rows are summed per operator and divided by ``runs``
    (``latency_ms`` = mean per inference, ``calls`` = calls per inference); ``layer`` is the
    torch module path in the node's name, where there is one."""
    import pandas as pd

    from edgeprof.backends.onnx_export import module_path

    rows: dict[str, dict[str, Any]] = {}
    for e in events:
        row = rows.setdefault(e["operator"], {
            **{k: v for k, v in e.items() if k != "us"}, "latency_ms": 0.0, "calls": 0,
            "layer": module_path(e["operator"])})
        row["latency_ms"] += e["us"] / 1000.0
        row["calls"] += 1
    for row in rows.values():
        row["latency_ms"] /= runs
        row["calls"] = row["calls"] / runs
    return pd.DataFrame(list(rows.values()), columns=list(columns))


# ------------------------------------------------------------------------------ agreement
@dataclass
class Agreement:
    max_abs_error: float
    relative_error: float  # max abs error / max |reference|
    cosine_similarity: float
    top1_agreement: float | None  # fraction of rows whose argmax matches (classifier outputs)
    tolerance: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_outputs(reference: Any, candidate: Any, precision: str = "fp32") -> Agreement:
    """Compare the first output of two models (numpy arrays or lists of them)."""
    import numpy as np

    ref = np.asarray(reference[0] if isinstance(reference, (list, tuple)) else reference,
                     dtype=np.float64)
    got = np.asarray(candidate[0] if isinstance(candidate, (list, tuple)) else candidate,
                     dtype=np.float64)
    if ref.shape != got.shape:
        if ref.size == got.size:
            got = got.reshape(ref.shape)
        else:
            raise ValueError(f"output shapes differ: reference {ref.shape}, candidate {got.shape}")
    err = float(np.max(np.abs(ref - got))) if ref.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    rel = err / scale if scale > 0 else err
    a, b = ref.ravel(), got.ravel()
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    cos = float(a @ b / denom) if denom > 0 else (1.0 if err == 0 else 0.0)
    top1 = None
    if ref.ndim >= 2 and ref.shape[-1] > 1:
        top1 = float(np.mean(ref.reshape(-1, ref.shape[-1]).argmax(-1)
                             == got.reshape(-1, got.shape[-1]).argmax(-1)))
    tol = RELATIVE_TOLERANCE.get(precision, 0.15)
    return Agreement(err, rel, cos, top1, tol, bool(rel <= tol))


def varied_inputs(handle: Any) -> tuple[list[list], list[str]]:
    """The agreement inputs for ``handle``: one set per :data:`AGREEMENT_INPUTS` entry, each
    of a different seed and distribution (standard normal, uniform [-1.7, 1.7), Laplace,
    logistic; all of about unit variance); integer inputs get token ids of different seeds
    and ranges. A model with real calibration samples is compared on other real samples."""
    import numpy as np

    if getattr(handle, "calibration", None) is not None:  # real samples, not the calibration's
        sets = handle.calibration_inputs(len(AGREEMENT_INPUTS), 5000)
        return sets, [f"real samples ({handle.calibration})"] * len(sets)
    sets, kinds = [], []
    for seed, kind in AGREEMENT_INPUTS:
        rng = np.random.default_rng(1000 + seed)
        arrays = []
        for spec in handle.input_specs:
            shape, dtype = tuple(spec.shape), spec.dtype
            if dtype.startswith("int") or dtype.startswith("uint"):
                high = (100, 50, 100, 10)[seed % 4]
                arrays.append(rng.integers(0, high, size=shape).astype(dtype))
                continue
            if dtype == "bool":
                arrays.append(rng.random(shape) > 0.5)
                continue
            if kind == "normal":
                x = rng.standard_normal(shape)
            elif kind == "uniform":
                x = rng.uniform(-1.7, 1.7, shape)
            elif kind == "laplace":
                x = rng.laplace(0.0, 0.7, shape)
            else:
                x = rng.logistic(0.0, 0.55, shape)
            arrays.append(x.astype("float32" if dtype == "bfloat16" else dtype))
        sets.append(arrays)
        kinds.append(kind)
    return sets, kinds


def reference_variation(reference_sets: Sequence[Sequence[Any]]) -> float:
    """How much the reference's first output changes across the inputs: the largest
    difference from the first input's output, relative to the outputs' largest magnitude."""
    import numpy as np

    outs = [np.asarray(r[0], dtype=np.float64) for r in reference_sets]
    scale = max((float(np.max(np.abs(o))) for o in outs if o.size), default=0.0)
    if scale == 0 or len(outs) < 2:
        return 0.0
    return max(float(np.max(np.abs(o - outs[0]))) for o in outs[1:]) / scale


def agreement_over(reference_sets: Sequence[Sequence[Any]],
                   candidate_sets: Sequence[Sequence[Any]], precision: str,
                   reference_name: str, kinds: Sequence[str] = ()) -> dict[str, Any]:
    """Agreement over several inputs: the worst relative error and cosine, the mean top-1
    agreement; ``informative`` is False (with a ``warning`` of code
    ``agreement_uninformative``) when the reference barely varies across the inputs."""
    per = [compare_outputs(list(r), list(c), precision)
           for r, c in zip(reference_sets, candidate_sets)]
    worst = max(per, key=lambda a: a.relative_error)
    top1 = [a.top1_agreement for a in per if a.top1_agreement is not None]
    variation = reference_variation(reference_sets)
    floor = max(MIN_REFERENCE_VARIATION, worst.tolerance)
    record: dict[str, Any] = {
        "max_abs_error": max(a.max_abs_error for a in per),
        "relative_error": worst.relative_error,
        "cosine_similarity": min(a.cosine_similarity for a in per),
        "top1_agreement": sum(top1) / len(top1) if top1 else None,
        "tolerance": worst.tolerance, "passed": all(a.passed for a in per),
        "precision": precision, "reference": reference_name, "inputs": len(per),
        "input_kinds": list(kinds), "reference_variation": variation,
        "informative": variation >= floor, "warning": None}
    if not record["informative"]:
        record["warning"] = {
            "code": "agreement_uninformative",
            "message": f"the reference ({reference_name}) output changes by only "
                       f"{variation:.2g} of its scale across {len(per)} varied inputs (< "
                       f"{floor:.2g}): it barely depends on the input, so agreement says little "
                       "about the conversion (random weights?); check accuracy on real data"}
    return record


def agreement_notes(record: dict[str, Any] | None, backend: str) -> list[str]:
    """Notes for a run: a disagreement beyond tolerance, and the uninformative warning."""
    if not record or record.get("relative_error") is None:
        return []
    notes = []
    if not record.get("passed", True):
        notes.append(f"{backend} {record['precision']} outputs differ from "
                     f"{record['reference']}: relative error {record['relative_error']:.3g} > "
                     f"tolerance {record['tolerance']:.3g} (cosine "
                     f"{record['cosine_similarity']:.4f}, worst of {record.get('inputs', 1)} "
                     "inputs)")
    return notes


def reference_outputs(handle: Any, input_sets: Sequence[Sequence[Any]]) -> tuple[list, str]:
    """The source model's fp32 outputs for each input set, and what produced them: torch
    eager, ONNX Runtime (no graph rewrites), LiteRT without delegates, OpenVINO fp32, or
    Keras / SavedModel."""
    fmt = handle.format
    if fmt == "torch":
        return torch_outputs(handle.torch_module(), input_sets), "torch_eager fp32"
    if fmt == "onnx":
        import onnxruntime as ort

        from edgeprof.backends.onnx_export import onnx_feed

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 3
        sess = ort.InferenceSession(str(handle.path), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        return [sess.run(None, onnx_feed(names, s)) for s in input_sets], \
            "onnxruntime fp32 (source file)"
    if fmt == "tflite":
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        it = Interpreter(model_path=str(handle.path), experimental_op_resolver_type=
                         OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        ins, outs_d = it.get_input_details(), it.get_output_details()
        outs = []
        for s in input_sets:
            for d, a in zip(ins, s):
                it.set_tensor(d["index"], np.asarray(a, dtype=d["dtype"]))
            it.invoke()
            outs.append([np.array(it.get_tensor(d["index"])) for d in outs_d])
        return outs, "litert fp32 (source file, no delegate)"
    if fmt == "openvino":
        import openvino as ov

        compiled = ov.Core().compile_model(str(handle.path), "CPU",
                                           {"INFERENCE_PRECISION_HINT": "f32"})
        return [arrays_to_numpy(compiled(list(s))) for s in input_sets], \
            "openvino fp32 (source IR)"
    if fmt in ("keras", "saved_model"):
        from edgeprof.backends.tflite_convert import reference_outputs as tf_reference

        outs, name = [], ""
        for s in input_sets:
            out, name = tf_reference(handle, s)
            outs.append(out)
        return outs, name
    from edgeprof.core.errors import UnsupportedError

    raise UnsupportedError(f"no fp32 reference for a {fmt} model: edgeprof runs no {fmt} "
                           "model itself, so the conversion's outputs are not compared")


def converted(backend: Any, model: Any, precision: str,
              calibration: Any = None) -> tuple[Any, Any]:
    """``(model, artifact)``: ``model``, with the real samples of ``calibration`` (a .npz)
    where given, converted by the conversion graph along ``backend``'s route to its format at
    ``precision`` (cached): the first step of a backend's ``build``."""
    from dataclasses import replace
    from pathlib import Path

    from edgeprof.core.plugins import get_graph

    if calibration is not None:
        model = replace(model, calibration=Path(calibration))
    route = backend.route(model.format, precision)
    return model, get_graph().convert(model, route, backend=backend.name,
                                      requested_precision=precision)


def built(backend: Any, artifact: Any, model: Any, precision: str, checked: str) -> Any:
    """The last step of a backend's ``build``: ``artifact`` marked as ``backend``'s for the
    requested ``precision``, its agreement with ``model`` measured at the tolerance of
    ``checked`` (:func:`ensure_agreement`)."""
    artifact.manifest.backend, artifact.manifest.requested_precision = backend.name, precision
    ensure_agreement(backend, artifact, model, checked)
    return artifact


def ensure_agreement(backend: Any, artifact: Any, model: Any, precision: str) -> dict[str, Any]:
    """The artifact's agreement with its source model, measured once (at build) and kept in
    its manifest: the artifact runs on :func:`varied_inputs` through ``backend.load``."""
    if artifact.manifest.agreement is not None:
        return artifact.manifest.agreement
    if not artifact.manifest.route:
        record: dict[str, Any] = {
            "reference": None, "precision": precision,
            "reason": f"the {model.format} file runs as given; there is no conversion to check"}
    else:
        from edgeprof.core.backend import RunConfig

        from edgeprof.core.errors import UnsupportedError

        sets, kinds = varied_inputs(model)
        try:
            reference, name = reference_outputs(model, sets)
        except UnsupportedError as e:
            artifact.manifest.agreement = {"reference": None, "precision": precision,
                                           "reason": str(e)}
            return artifact.manifest.agreement
        prepared = backend.load(artifact, RunConfig(precision=precision), sets[0])
        try:
            feed = prepared.feed or (lambda s: s)
            got = [prepared.to_numpy(prepared.run(feed(s))) for s in sets]
        finally:
            if prepared.close is not None:
                prepared.close()
        record = agreement_over(reference, got, precision, name, kinds)
    return _keep_agreement(artifact, record)


def _keep_agreement(artifact: Any, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as the artifact's agreement, in its manifest on disk where it can be."""
    artifact.manifest.agreement = record
    try:
        artifact.write_manifest()
    except OSError:  # a read-only cache keeps the figure for this run only
        pass
    return record


def describe_artifact(prepared: Any, artifact: Any, backend: str) -> None:
    """Record an artifact on a prepared model: the route (one note line, and in ``extra``),
    the manifest, its size, the agreement and its warnings."""
    m = artifact.manifest
    prepared.notes.insert(0, f"route: {m.route_text()}")
    prepared.notes.extend(m.notes)
    agreement = m.agreement
    prepared.notes.extend(agreement_notes(agreement, backend))
    if agreement and agreement.get("warning"):
        from edgeprof.core.backend import add_warning

        add_warning(prepared, agreement["warning"]["code"], agreement["warning"]["message"])
    prepared.extra.update({
        "route": list(m.route), "route_text": m.route_text(), "artifact": artifact.to_dict(),
        "converter": (f"{m.route[-1]['converter']} {m.route[-1]['version'] or ''}".strip()
                      if m.route else None),
        "convert_time_s": 0.0 if artifact.cache_hit else (m.build_time_s or 0.0),
        "agreement": agreement, "cache_hit": artifact.cache_hit,
        "model_bytes": artifact.size_bytes, "model_path": str(artifact.entry_path)})


def torch_source(backend: Any, model: Any, precision: str) -> tuple[Any, Any]:
    """For the torch backends: ``(handle of a torch module, artifact or None)``. A model of
    another format is routed to torch by the conversion graph (e.g. onnx -> torch with
    onnx2torch); the module's agreement with the source is measured once and kept."""
    if model.format == "torch":
        return model, None
    from edgeprof.core.plugins import get_graph

    _, artifact = converted(backend, model, precision)
    handle = get_graph().handle_for(artifact, model)
    if artifact.manifest.agreement is None:
        sets, kinds = varied_inputs(model)
        reference, name = reference_outputs(model, sets)
        got = torch_outputs(handle.torch_module(), sets)
        _keep_agreement(artifact, agreement_over(reference, got, "fp32", name, kinds))
    return handle, artifact


@contextlib.contextmanager
def native_info_filtered():
    """While a runtime's native code loads a model, drop its ``INFO:`` lines from the process's
    stderr (file descriptor 2: C++ logging that no Python logger or environment variable
    controls, e.g. LiteRT's "Created TensorFlow Lite XNNPACK delegate for CPU"); warnings
    and errors pass through. Active only where the CLI asked for quiet output
    (``EDGEPROF_QUIET_NATIVE=1``, not under ``--debug``)."""
    if os.environ.get("EDGEPROF_QUIET_NATIVE") != "1":
        yield
        return
    import sys
    import tempfile

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (an embedding host): leave it alone
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            for line in tmp.read().decode("utf-8", "replace").splitlines():
                if not line.startswith("INFO: "):
                    sys.stderr.write(line + "\n")

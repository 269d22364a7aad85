"""Output agreement between a converted/compressed model and its fp32 reference."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: max-abs-error tolerance relative to the reference's max magnitude, by executed precision
RELATIVE_TOLERANCE = {
    "fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2, "int8": 0.15, "int8_static": 0.15,
    "int8_dynamic": 0.15, "int8_weight": 0.05, "int4_weight": 0.25,
}


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

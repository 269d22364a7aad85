"""Canonical precision names and what each one stores and computes in.

The estimate needs, for each precision, how many bytes a weight and an activation take
and which peak-compute figure of a target applies. Backends record both the requested and
the executed precision by these names.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgeprof.core.errors import UnknownNameError


@dataclass(frozen=True)
class Precision:
    name: str
    weight_bytes: float  # bytes per stored weight element
    activation_bytes: float  # bytes per activation element moved between layers
    compute: str  # which peak-compute entry of a target applies (fp32, fp16, bf16, int8)
    description: str


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", 4, 4, "fp32", "32-bit float weights and activations"),
        Precision("fp16", 2, 2, "fp16", "16-bit float weights and activations"),
        Precision("bf16", 2, 2, "bf16", "bfloat16 weights and activations"),
        Precision(
            "int8", 1, 1, "int8",
            "8-bit integer; static where the backend can calibrate, else dynamic",
        ),
        Precision("int8_static", 1, 1, "int8", "8-bit weights and activations, calibrated scales"),
        Precision(
            "int8_dynamic", 1, 4, "int8",
            "8-bit weights; activations quantized at run time, stored as fp32 between layers",
        ),
        Precision("int8_weight", 1, 4, "fp32", "8-bit weights dequantized to fp32 for compute"),
        Precision("int4_weight", 0.5, 4, "fp32", "4-bit weights dequantized for compute"),
    )
}

#: element sizes of input dtypes (bytes), by numpy-style name
DTYPE_BYTES = {
    "float32": 4, "float16": 2, "bfloat16": 2, "float64": 8,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}


def get_precision(name: str) -> Precision:
    """Return the canonical precision called ``name`` (raises UnknownNameError)."""
    try:
        return PRECISIONS[name]
    except KeyError:
        raise UnknownNameError("precision", name, PRECISIONS) from None


"""What a prediction reads: the numbers of an LLM estimate (:func:`estimate_numbers`), the
peak its matrix products are measured against (:func:`compute_precision`), the board's
processor (:func:`board_of`) and the thread laws on its cores (:func:`prefill_speed`,
:func:`decode_speed`) with their priors; and what a fit reads, one measured rate with those
figures (:func:`sample_from`: a host's runs, or a published row in the build,
``tools/build_llm_calibration.py``)."""

from __future__ import annotations

import re
from typing import Any

from edgeprof.profilers.predict.llm.builds import normalize_build

# ------------------------------------------------------------------ threads
#: Amdahl serial share of a CPU prefill (prompt GEMMs) where no rows at several thread
#: counts fit one
PREFILL_SERIAL_PRIOR = 0.10
PREFILL_SERIAL_SOURCE = (
    "prior: OpenMathLib/OpenBLAS#4581 (2024) measured SGEMM on 1-4 Cortex-A76 threads: "
    "15.9 -> 59.7 GFLOP/s on an RK3588 (serial share 0.02) and 15.3 -> 39.2 on a Raspberry "
    "Pi 5 (0.19); 0.10 is between them. Compute-bound prompt GEMMs scale with the cores")
#: threads that saturate the memory bandwidth in decode where no rows fit it
DECODE_SATURATION_PRIOR = 2.0
DECODE_SATURATION_SOURCE = (
    "prior: decode streams every weight and is bandwidth-bound; one Cortex-A76 thread "
    "copies 4.64 GB/s on a Raspberry Pi 5 (ggml-org/whisper.cpp#89, memcpy benchmark: 4.6 GB/s "
    "read + 4.6 written), against the ~9 GB/s llama.cpp's 4-thread decode reads there (this "
    "calibration), and each thread also dequantises its share of the weights: two threads "
    "saturate the bus, D(n) = min(1, n / 2) (one thread: half the rate, the cautious end)")


# ------------------------------------------------------------------ estimate adapter
def _num(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, dict):
        v = v.get("value")
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _dig(d: Any, *path: str) -> Any:
    for p in path:
        if isinstance(d, dict):
            d = d.get(p)
        else:
            d = getattr(d, p, None)
        if d is None:
            return None
    return d


def estimate_numbers(estimate: Any) -> dict[str, Any]:
    """What the predictor needs from an :class:`~edgeprof.profilers.estimate.llm.LLMEstimate`
    (or its ``to_dict()``): format and its compute precision, prompt tokens, layers, decode
    bytes and MACs per token, prefill MACs and bytes."""
    d = estimate.to_dict() if hasattr(estimate, "to_dict") else estimate
    if not isinstance(d, dict) or "stages" not in d:
        raise TypeError(f"not an LLM estimate: {type(estimate).__name__}")
    layer_ids = [r.get("layer") for r in d.get("layers") or [] if r.get("layer") is not None]
    layers = (max(layer_ids) + 1) if layer_ids else _num(_dig(d, "spec", "num_layers"))
    prompt = _num(d.get("prompt_tokens"))
    dec_bytes = (_num(_dig(d, "figures", "decode_bytes_per_token"))
                 or _num(_dig(d, "stages", "decode", "bytes")))
    dec_macs = _num(_dig(d, "stages", "decode", "macs"))
    pre_macs = _num(_dig(d, "stages", "prefill", "macs"))
    pre_bytes = _num(_dig(d, "stages", "prefill", "bytes"))
    missing = [n for n, v in (("layers", layers), ("prompt_tokens", prompt),
                              ("decode_bytes_per_token", dec_bytes), ("prefill macs", pre_macs))
               if not v]
    if missing:
        raise ValueError(f"LLM estimate lacks {', '.join(missing)}")
    return {"format": str(d.get("format") or ""),
            "format_compute": _dig(d, "format_info", "compute") or "fp32",
            "num_layers": int(layers), "prompt_tokens": int(prompt),
            "decode_bytes_per_token": dec_bytes, "decode_macs_per_token": dec_macs or 0.0,
            "prefill_macs": pre_macs, "prefill_bytes": pre_bytes or dec_bytes,
            "model": d.get("model")}


def compute_precision(fmt_compute: str, peaks: dict[str, float], kind: str = "cpu") -> str:
    """The peak a format's matrix products are measured against. On a CPU: the format's
    compute precision (the estimator's ``FormatInfo.compute``: int8 for llama.cpp's quantized
    types and the genai int4/int8, fp16/bf16 for half formats) where the processor has that
    peak, else fp32 -- the estimator's roofline rule (a Cortex-A72/A57 has no SDOT: its
    quantized dot products run at the fp32 rate). On a GPU (``kind="gpu"``) a quantized
    format is measured against the fp16 (tensor-core) rate where there is one: GPU runtimes
    dequantize weight tiles into half precision (MLC's q4f16, llama.cpp's cuBLAS path) or
    scale int8 MMA per block (llama.cpp's MMQ), and the shipped GPU prefill rows reach 0.27
    (Orin, Super) and 0.34 (Maxwell) of their fp16 peaks against 0.14 of Orin's int8 and 0.68
    of the Nano's fp32 -- one efficiency carries across GPUs only on the fp16 rate."""
    if kind == "gpu" and fmt_compute in ("int8", "int4") and "fp16" in peaks:
        return "fp16"
    if fmt_compute in peaks:
        return fmt_compute
    return "fp32" if "fp32" in peaks else next(iter(peaks))


# ------------------------------------------------------------------ boards
_CORE = re.compile(r"Cortex-(A\d+[A-Z]*)", re.I)
_GPU_ARCH = re.compile(r"\b(Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)\b", re.I)


def core_type(name: str, kind: str) -> str | None:
    """The (big) core a processor's name names: ``cortex-a76``, ``ampere``; None if none."""
    m = (_CORE if kind == "cpu" else _GPU_ARCH).search(name or "")
    if not m:
        return None
    return f"cortex-{m.group(1).lower()}" if kind == "cpu" else m.group(1).lower()


def board_of(target, device: str) -> dict[str, Any]:
    """What the predictor needs of a target's processor: peaks (at the target's mode), the
    bandwidth, the processor kind, its cores, the reference thread count (all of the board's
    big cores; None on a GPU) and the share of the processor's peak the big cores have
    (little cores at their clock ratio where the descriptor says big_cores < cores)."""
    bw, peaks, cores = target.processor_figures(device)
    proc = target.get_processor(device)
    kind = proc.kind
    name = proc.name or target.processor
    out = {"id": target.id, "base_id": getattr(target, "base_id", None) or target.id,
           "mode": getattr(target, "mode", None), "device": device, "kind": kind,
           "bandwidth": float(bw), "peaks": dict(peaks), "cores": int(cores),
           "core_type": core_type(name, kind) or core_type(target.processor, kind),
           "n_ref": None, "big_share": 1.0, "little_ratio": 0.0,
           "sha256": getattr(target, "sha256", None),
           "is_host": bool(getattr(target, "is_host", False))}
    if kind == "cpu":
        # the board's CPU cores: the top-level count where the top level is the CPU (an
        # edge_cpu board: rk3588's 8 beside its 4-core big-cluster table), else the table's
        total = int(cores)
        if getattr(target, "kind", "") in ("edge_cpu", "cpu") and device == "cpu":
            total = max(total, int(target.cores.value))
        big = getattr(target, "big_cores", None) or cores
        big = int(min(max(1, int(big)), total))
        out.update(n_ref=big, cores=total)
        if big < total:
            ratio = _little_ratio(target, device)
            out["little_ratio"] = ratio
            if cores > big:  # the processor's peak counts little cores too
                out["big_share"] = big / (big + (cores - big) * ratio)
    return out


def _little_ratio(target, device: str) -> float:
    """Per-core peak of a little core over a big one, from the descriptor's stated core
    types and clocks (``... Cortex-A76 @ 2.4 GHz + ... Cortex-A55 @ 1.8 GHz``): the clock
    ratio x the 128-bit-pipe ratio (:data:`NEON_PIPES`), else 0.5 (assumed)."""
    name = f"{target.get_processor(device).name} {target.processor}"
    parts = re.findall(r"Cortex-(A\d+)[^@+,;]*@\s*([\d.]+)\s*GHz", name, re.I)
    parts = [p for i, p in enumerate(parts) if p[0] not in [q[0] for q in parts[:i]]]
    if len(parts) >= 2:
        (b, bf), (lt, lf) = parts[0], parts[1]
        pb, pl = NEON_PIPES.get(b.upper()), NEON_PIPES.get(lt.upper())
        if pb and pl:
            return (pl * float(lf)) / (pb * float(bf))
    return 0.5


#: 128-bit ASIMD issue per cycle of a core (Arm software optimization guides: A76/A78 two
#: 128-bit pipes; A55 two 64-bit pipes = one 128-bit op per cycle)
NEON_PIPES = {"A76": 2.0, "A78": 2.0, "A78AE": 2.0, "A72": 2.0, "A57": 1.0, "A55": 1.0,
              "A53": 1.0}


def _n_eff(n: int, board: dict[str, Any]) -> float:
    big = board["n_ref"] or n
    return min(n, big) + max(0, n - big) * board["little_ratio"]


def prefill_speed(n: int | None, board: dict[str, Any], serial: float) -> float:
    """Amdahl's throughput of ``n`` threads on the board's cores (big first), in big-core
    units: ``n_eff / (1 + serial (n - 1))``; 1 on a GPU."""
    if n is None or board["kind"] != "cpu":
        return 1.0
    return _n_eff(n, board) / (1.0 + serial * (n - 1))


def decode_speed(n: int | None, board: dict[str, Any], n_sat: float) -> float:
    """Decode throughput of ``n`` threads relative to a saturated memory bus:
    ``min(1, n_eff / n_sat)``; 1 on a GPU."""
    if n is None or board["kind"] != "cpu":
        return 1.0
    return min(1.0, _n_eff(n, board) / n_sat)


def registry_target(target_id: str):
    from edgeprof.targets import get_target

    return get_target(target_id)


def sample_from(*, sid: Any, target, device: str, runtime: str, stage: str, rate: float,
                estimate: Any, bandwidth: float | None = None, threads: int | None = None,
                build: dict[str, Any] | None = None, compute_scale: float = 1.0,
                mode: str | None = None, **extra: Any) -> dict[str, Any]:
    """One measured (stage, rate) with the figures of its model and the board it ran on: a
    fitting sample (peaks at the target's mode: a mode row is fitted against its peaks)."""
    n = estimate_numbers(estimate)
    b = board_of(target, device)
    prec = compute_precision(n["format_compute"], b["peaks"], b["kind"])
    s = {"id": sid, "target": b["base_id"], "target_id": b["id"],
         "mode": mode if mode is not None else b["mode"], "device": device,
         "kind": b["kind"], "core_type": b["core_type"], "runtime": runtime, "stage": stage,
         "rate": float(rate), "format": n["format"], "format_compute": n["format_compute"],
         "num_layers": n["num_layers"],
         "prompt_tokens": n["prompt_tokens"], "decode_bytes_per_token": n["decode_bytes_per_token"],
         "decode_macs_per_token": n["decode_macs_per_token"], "prefill_macs": n["prefill_macs"],
         "prefill_bytes": n["prefill_bytes"],
         "peak_bandwidth": float(bandwidth or b["bandwidth"]), "precision": prec,
         "peak_macs": b["peaks"][prec] * compute_scale * b["big_share"],
         "threads": threads if b["kind"] == "cpu" else None, "n_ref": b["n_ref"],
         "cores": b["cores"], "little_ratio": b["little_ratio"],
         "build": build or normalize_build(runtime, None)}
    s.update(extra)
    return s

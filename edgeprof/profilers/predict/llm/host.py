"""Host calibration: the predictor's parameters fitted per runtime to
:class:`~edgeprof.core.llm.GenerationRecord` s measured on this machine
(:func:`calibrate_llm_host`), written to the user's calibration folder."""

from __future__ import annotations

import os
from typing import Any, Callable

from edgeprof.core.artifact import created_utc
from edgeprof.profilers.predict.calibration import user_file
from edgeprof.profilers.predict.llm.builds import BUILD_ERAS, learned_builds, normalize_build
from edgeprof.profilers.predict.llm.constants import (FILE_PREFIX, FORMAT, FORMAT_VERSION,
                                                      SHIPPED_FILE)
from edgeprof.profilers.predict.llm.crossval import (fit_all, attach_cv, cv_table,
                                                     interval_report, leave_one_out)
from edgeprof.profilers.predict.llm.files import (LLMCalibrationError, edgeprof_version,
                                                  load_llm_calibration, strip_samples)
from edgeprof.profilers.predict.llm.inputs import board_of, sample_from


def _rate(d: dict[str, float] | None) -> float | None:
    if not d:
        return None
    v = d.get("median", d.get("mean"))
    return float(v) if v and v > 0 else None


def host_samples(records: list[Any], spec_for_model: Callable[[str], Any], target, *,
                 device: str = "cpu", where: str = "this machine") -> list[dict[str, Any]]:
    """Fitting samples from measured GenerationRecords (ok ones only), at the thread count
    and build each ran with; each sample's source says ``measured on <where>``."""
    from edgeprof.profilers.estimate.llm import backend_formats, estimate_llm

    out: list[dict[str, Any]] = []
    for i, r in enumerate(records):
        if getattr(r, "status", "ok") != "ok":
            continue
        spec = spec_for_model(r.model)
        # the record's own runtime's layout (OpenVINO's int4 is not ONNX Runtime GenAI's)
        layout = {"backend": r.backend} \
            if r.format in backend_formats().get(r.backend, {}) else {}
        est = estimate_llm(spec, r.format, prompt_tokens=max(1, int(r.n_prompt or 1)),
                           gen_tokens=max(1, int(r.n_gen or 1)), depth=int(r.n_depth or 0),
                           target=target, device=device, **layout)
        threads = int(r.n_threads) if getattr(r, "n_threads", None) else None
        common = {"target": target, "device": device, "runtime": r.backend, "estimate": est,
                  "model": r.model, "version": r.runtime_version, "n_depth": r.n_depth,
                  "n_threads": r.n_threads, "threads": threads,
                  "build": normalize_build(r.backend, r.runtime_version),
                  "source": f"measured on {where}"}
        dr, pr = _rate(r.decode_tokens_per_s), _rate(r.prefill_tokens_per_s)
        if dr:
            out.append(sample_from(sid=f"{i}:decode", stage="decode", rate=dr, **common))
        if pr and r.n_prompt:
            out.append(sample_from(sid=f"{i}:prefill", stage="prefill", rate=pr, **common))
    return out


def calibrate_llm_host(records: list[Any], spec_for_model: Callable[[str], Any], *,
                       target=None, device: str = "cpu", label: str = "measured",
                       path: str | os.PathLike | None = None, write: bool = True,
                       where: str = "this machine") -> dict[str, Any]:
    """Fit this machine's effective bandwidth fraction and per-layer overhead (least squares
    across model sizes) and prefill efficiency, per runtime, to measured
    :class:`~edgeprof.core.llm.GenerationRecord` s (and the thread law where the records ran
    at several thread counts); ``spec_for_model(record.model)`` gives the LLMSpec. Returns
    the calibration (the shipped file's format, entry ``<target>/<device>``) and, with
    ``write``, saves it atomically to ``path`` (default: the user's calibration folder,
    ``llm--<target>--<label>.json``). ``where`` names the machine that measured the records
    (a fleet board), in the note and in each sample's source."""
    from edgeprof.core.errors import UserError
    from edgeprof.core.io import write_json

    if target is None:
        from edgeprof.targets import get_target

        target = get_target("host")
    samples = host_samples(records, spec_for_model, target, device=device, where=where)
    if not any(s["stage"] == "decode" for s in samples):
        raise UserError("no successful generation run to calibrate from: measure at least "
                        "one model first (edgeprof profile llm:NAME --backend ...)")
    targets = {target.id: target}
    if getattr(target, "base_id", None):
        targets[target.base_id] = target
    # the prior for leave-one-out on the host: the shipped one (what an uncalibrated host
    # prediction would use)
    try:
        prior = load_llm_calibration(SHIPPED_FILE)["prior"]
    except LLMCalibrationError:
        prior = None
    cal = fit_all(samples, per_runtime=True, targets=targets, prior=prior)
    nested = len(samples) <= 60  # n^2 refits: plain leave-one-out for many records
    loo = leave_one_out(samples, per_runtime=True, targets=targets, prior=prior,
                        nested=nested) if len(samples) > 1 else []
    attach_cv(cal, loo)
    for e in cal["entries"].values():
        for st in ("decode", "prefill"):
            if e[st] and "sigma" not in e[st]:
                e[st]["sigma"] = e[st]["sigma_pooled"] = 0.0
                e[st]["sigma_own"] = None
    tid = board_of(target, device)["base_id"]
    name = f"{FILE_PREFIX}{tid}--{label}"
    out = {"format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
           "entries": cal["entries"], "prior": cal["prior"],
           "extrapolation_sigma": cal.get("extrapolation_sigma") or {},
           "builds": learned_builds(samples), "build_eras": BUILD_ERAS,
           "cv": {"method": "leave-one-out", "n": len(loo), "rows": loo,
                  "boards": cv_table(loo) if loo else [],
                  "intervals": interval_report(loo) if nested and loo else {}},
           "samples": strip_samples(samples), "left_out": [
               {"id": i, "model": r.model, "reason": f"status {r.status}: {r.reason}"}
               for i, r in enumerate(records) if getattr(r, "status", "ok") != "ok"],
           "created_utc": created_utc(), "edgeprof_version": edgeprof_version(),
           "note": (f"fitted to {len(samples)} measurements on {where} "
                    f"({target.processor}); per runtime: bandwidth fraction of "
                    f"{target.processor_figures(device)[0] / 1e9:.1f} GB/s and per-layer "
                    "overhead (least squares across model sizes), prefill efficiency")}
    if write:
        if path is None:
            path = user_file(name)
        write_json(path, out)
        out["path"] = str(path)
    return out

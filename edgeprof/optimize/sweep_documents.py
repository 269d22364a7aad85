"""A sweep's jobs of one model as a profile document, so ``edgeprof compare`` can set a
sweep's measurement beside a profile's, or beside another sweep's: same job, same answer?
:data:`DOCUMENTS` holds each workload's (``SweepReport.profile_document`` asks it).

A tensor model's document (:func:`tensor_document`) is profile.json-shaped: one run per
backend x precision at one batch size, each with its whole record.

A generative model's (:func:`generative_document`) is what ``edgeprof profile llm:X --json``
writes (``edgeprof.llm/1``). One document holds the jobs of one model on one target at one test shape (threads, prompt
and generated tokens): one run per (backend, format, depth), each the job's record as a
profile's run — with where it was measured (``measured_on``, ``board``; a sweep without a
fleet measures here, as board ``local``) and, for an emulating board, the warning that its
figures are that host's, not the target's. It has no estimate or prediction: a sweep
measures only.
"""

from __future__ import annotations

import json
from typing import Any

from edgeprof.core.errors import EdgeprofError, UserError


def _pick(given: int | None, values: list[Any], flag: str, model: str) -> Any:
    """``given`` when the sweep ran it, else the first value it lists; UserError naming the
    values otherwise."""
    if given is None:
        return values[0]
    if given not in values:
        listed = ", ".join("auto" if v is None else str(v) for v in values)
        raise UserError(f"the sweep measured {model} with {flag} {listed}; not {given}")
    return given


def _target_dict(target: str) -> dict[str, Any]:
    """The target's descriptor as a profile carries it (its id only, when the registry
    cannot load it: a sweep run with --targets-dir)."""
    from edgeprof.targets import get_target_registry

    try:
        return get_target_registry().get(target).to_dict()
    except EdgeprofError:
        return {"id": target, "name": target, "kind": "unknown"}


def tensor_document(report: Any, model: str, target: str, batch_size: int | None = None,
                    **shape: int | None) -> dict[str, Any]:
    """``report``'s jobs of ``model`` on ``target`` at one batch size (by default the first
    the sweep lists) as a profile.json-shaped document (the model, the target, one run per
    backend x precision with its whole record)."""
    from edgeprof._version import __version__
    from edgeprof.core.results import clean
    from edgeprof.core.artifact import created_utc
    from edgeprof.optimize.sweep_store import SweepStore, record_measured_on

    spec = report.spec
    if shape:
        raise UserError(f"{', '.join(sorted(shape))} choose a generative job's test shape; "
                        f"'{model}' is not in the sweep's [generate] models")
    if model not in spec.handles or target not in spec.targets:
        raise UserError(f"the sweep measured models {', '.join(spec.models)} on targets "
                        f"{', '.join(spec.targets)}; not '{model}' on '{target}'")
    bs = batch_size if batch_size is not None else spec.batch_sizes[0]
    handle = spec.handles[model] if bs is None else spec.handles[model].with_batch(bs)
    store = SweepStore(report.store)
    try:
        rows = [r for r in store.rows() if r["model"] == model and r["target"] == target
                and r["batch_size"] == bs]
    finally:
        store.close()
    runs = []
    for r in rows:
        rec = json.loads(r["record"])
        runs.append({"backend": r["backend"], "requested_precision": r["precision"],
                     "executed_precision": rec.get("executed_precision"),
                     "status": r["status"], "reason": r["reason"],
                     "provenance": {"benchmark": "measured", "measured_on":
                                    record_measured_on(rec),
                                    "board": (rec.get("extra") or {}).get("fleet")},
                     "benchmark": rec, "summary": None})
    return clean({"schema_version": "1.0", "edgeprof_version": __version__,
                  "created_utc": created_utc(), "model": handle.to_dict(),
                  "target": {"id": target},
                  "request": {"sweep": str(spec.path)}, "runs": runs, "warnings": []})


def generative_document(report: Any, model: str, target: str, batch_size: int | None = None,
                        *, threads: int | None = None, prompt_tokens: int | None = None,
                        gen_tokens: int | None = None) -> dict[str, Any]:
    """``report``'s (a :class:`~edgeprof.optimize.sweep.SweepReport`) generative jobs of
    ``model`` on ``target`` at one test shape (by default the first threads, prompt and
    generated tokens the sweep lists), every depth, as a generative profile document. A
    model, target or shape the sweep did not run is a UserError naming what it ran."""
    from edgeprof.core.llm import GenerationConfig
    from edgeprof.core.plugins import get_registry
    from edgeprof.core.results import record_from_dict
    from edgeprof.optimize.sweep_store import SweepStore
    from edgeprof.profilers.estimate.llm import parameter_count
    from edgeprof.profilers.measure.llm_runs import run_dicts
    from edgeprof.profilers.report.generative import GenerativeReport

    if batch_size is not None:
        raise UserError(f"'{model}' is a generative model: its jobs have no batch size (give "
                        "threads, prompt_tokens or gen_tokens)")
    spec = report.spec
    grid = spec.generate
    if grid is None or model not in grid.models or target not in grid.targets:
        models = ", ".join(grid.models) if grid is not None else "(none)"
        targets = ", ".join(grid.targets) if grid is not None else "(none)"
        raise UserError(f"the sweep's generative jobs measured models {models} on targets "
                        f"{targets}; not '{model}' on '{target}'")
    jobs = [j for j in grid.jobs(spec.run.get("threads"))
            if j.model == model and j.target == target]
    threads = _pick(threads, list(dict.fromkeys(j.opts["threads"] for j in jobs)), "threads",
                    model)
    prompt = _pick(prompt_tokens, grid.prompt_tokens, "prompt tokens", model)
    gen = _pick(gen_tokens, grid.gen_tokens, "generated tokens", model)
    shape = {"threads": threads, "prompt_tokens": prompt, "gen_tokens": gen}
    keys = {j.key: j for j in jobs if shape.items() <= j.opts.items()}
    store = SweepStore(report.store)
    try:
        rows = [r for r in store.rows() if r["job_key"] in keys]
    finally:
        store.close()
    runs, depths = [], []
    workload = get_registry().workloads["generate"]
    for r in rows:
        record = record_from_dict(json.loads(r["record"]))
        if not workload.owns(record):  # not measured: a bare failure row
            continue
        for run in run_dicts(record):
            runs.append(run)
            depths.append(int(run.get("n_depth") or 0))
    llm = grid.llms[model]
    config = GenerationConfig(prompt_tokens=prompt, gen_tokens=gen,
                              depths=tuple(sorted(set(depths))) or tuple(grid.depths),
                              repetitions=grid.repetitions, warmup=grid.warmup,
                              threads=threads)
    note = (f"measured by the sweep {spec.path} ({len(rows)} of {len(keys)} job(s) in its "
            "store): measurements only, no estimate or prediction")
    return GenerativeReport.create(
        llm, target=_target_dict(target), device=config.device, config=config,
        parameters=int(parameter_count(llm.spec)), runs=runs, notes=[llm.note, note],
        command="profile").to_dict()


#: per workload, the profile document of one model's jobs
DOCUMENTS = {"tensor": tensor_document, "generate": generative_document}

__all__ = ["DOCUMENTS", "generative_document", "tensor_document"]

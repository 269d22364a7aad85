"""Sweeps: a grid of models x targets x backends x precisions (x batch sizes), one
measurement per job, on the fleet's boards or here, the way ``profile`` measures.

``SWEEP.toml``::

    models = ["builtin:small_cnn", "models/net.onnx"]   # paths relative to this file
    targets = ["raspberry_pi_4", "jetson_nano"]
    backends = ["onnxruntime", "openvino", "tflite"]
    precisions = ["fp32", "int8"]
    batch_sizes = [1, 4]         # optional; default: each model's own
    store = "sweep.sqlite"       # optional; default: <this file's name>.sqlite beside it
    out = "sweep_out"            # optional; best.csv, results.csv, report.html; default <name>_out

    [run]                        # optional measurement settings
    runs = 30
    min_time = 0.3               # seconds
    max_time = 2.0
    warmup = 10                  # fixed warm-up calls (default adaptive)
    threads = 4
    device = "cuda"              # the processor the jobs run on: cpu (default), cuda, cuda:N
                                 # (generative jobs: cpu or cuda), here or on each board
    timeout = 300                # per job, seconds (on a board from its start; here it puts
                                 # each job in an isolated worker, as profile --timeout does)
    retries = 2                  # after a board's death, on any board of the same target
    no_board_wait = 120          # seconds a job waits for a board that went away

    [generate]                   # optional: generative jobs (llama-bench's shape)
    models = ["llm:smollm2-135m", "models/qwen.gguf"]   # presets, .gguf files, HF folders
    backends = ["llama_cpp"]     # generative backends
    formats = ["q4_0", "q8_0"]   # each runs on the listed backends that make it
    targets = ["raspberry_pi_5"] # optional; default: the top-level targets
    threads = [2, 4]             # optional; default [run] threads, else the physical cores
    prompt_tokens = [128]        # default 512
    gen_tokens = [32]            # default 128
    depths = [0, 1024]           # default [0]: tokens already in the KV cache
    repetitions = 3              # default 5
    warmup = 1                   # default 1

With a ``[generate]`` table the top-level ``models``/``backends``/``precisions`` are
optional (a purely generative sweep); ``targets`` is still needed (top level or in the
table). Each generative job is (model, target, backend, format, threads, prompt, gen,
depth): one ``measure(MeasureRequest.for_generation(...))`` with one depth, its
``GenerativeRunRecord`` stored like a tensor job's record (the store's ``precision`` column
holds the format). Its row in results.csv carries llama-bench's figures (``pp_*_ts``,
``tg_*_ts``, ``ttft_ms``, ``tpot_ms``, ``n_prompt``, ``n_gen``, ``n_depth``, ``n_threads``);
best.csv has one generative row per (model, target, prompt, gen, depth): the fastest decode,
with the fastest prefill of the same jobs in its own columns (``best_prefill``).

Every result goes into the **store** the moment it arrives (``sweep_store``: SQLite, one
committed row per job, keyed by the job key), so ``--resume`` skips finished jobs and can
never add a second row for one.

Without a fleet, each job is measured here, one at a time, by the very call ``profile``
makes (``measure(MeasureRequest.for_handle(...))`` with the same runner rule: in this
process, or in an isolated worker when ``[run] timeout`` is given), so a job gives the same
answer through either command: the same threads, warm-up, input binding, process kind and
affinity, recorded in each record's ``environment["conditions"]``. Nothing else runs beside a
measurement: no build of the next job, no scheduler, no Dask worker. (A LocalCluster used to
measure each job in a fresh process under a Dask worker, while this process built the next
job and polled the scheduler: on a 2-core machine its medians differed from ``profile``'s by
up to 1.6x, and a process per job made it 2.5x slower.) Its results are measurements of this
host, and say so (board ``local``, ``measured on this host``): nothing here emulates a board.
For a board target, the job's figure on the target (``target_*`` in results.csv, what best.csv
and the page rank) is then the board's prediction, the one ``edgeprof predict`` gives
(:func:`board_prediction`), or none where the predictor refuses the configuration. On a fleet,
a board measures each job in a fresh process there (its figure on the target is that
measurement, as is an ``--emulate`` worker's, which says so): that path must differ, and its
records say ``isolated`` and name the board.

This module runs the jobs (here, or on the fleet); the rest lives beside it, each importing
only the ones after it: ``sweep_outputs`` (:class:`SweepReport`, results.csv, best.csv,
report.html), ``sweep_store`` (the store, :func:`results_frame`, :func:`best_frame`),
``sweep_spec`` (the file's validation, :class:`SweepSpec` and its jobs). Every name stays
importable from here.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult
from edgeprof.optimize.sweep_outputs import SweepReport, write_outputs, sweep_html
from edgeprof.optimize.sweep_spec import (GEN_KEYS, RUN_KEYS, TOP_KEYS, WORKLOAD_OPTIONS,
                                          GenerateGrid, Job, SweepSpec, load_sweep)
from edgeprof.optimize.sweep_store import (BEST_COLUMNS, COLUMNS, GEN_COLUMNS, SweepStore,
                                           best_frame, results_frame)


# ------------------------------------------------------------------------ the driver
Progress = Callable[[int, int, dict[str, Any] | None], None]
#: (job key, one line): a step of a job while it is measured (``board NAME: step`` from a
#: board, the step alone from this host); progress only, it never changes an outcome
Steps = Callable[[str, str], None]


def _failed_record(job: Job, status: str, reason: str, handle=None) -> BenchmarkResult:
    return BenchmarkResult(backend=job.backend, model=job.model,
                           requested_precision=job.precision, executed_precision=None,
                           status=status, reason=reason,
                           batch_size=job.batch_size or (handle.batch_size if handle else 1))


def _build_failure(job: Job, error: Exception, handle) -> BenchmarkResult:
    """A job that failed here, before any board: its status and reason by the same rules
    as every measurement (``measure.status_of``; a ``UserError`` is raised, not recorded)."""
    from edgeprof.profilers.measure.harness import MeasureFailure
    from edgeprof.profilers.measure.measure import status_of

    status, reason = status_of(MeasureFailure("build", error))
    return _failed_record(job, status, reason, handle)


def run_sweep(path: str | os.PathLike, *, fleet=None, resume: bool = False,
              overrides: dict[str, Any] | None = None, progress: Progress | None = None,
              plugins=None, targets_dir=None, say: Callable[[str], None] | None = None,
              steps: Steps | None = None) -> SweepReport:
    """Run (or resume) the sweep in ``path``; see the module's docstring. ``progress``
    hears each finished job; ``steps`` each step of a job while it is measured."""
    from edgeprof.profilers.measure.fleet import (DEFAULT_NO_BOARD_S, DEFAULT_RETRIES,
                                                  Dispatcher, FleetSpec, SchedulerLostError)

    say = say or (lambda m: None)
    t0 = time.perf_counter()
    spec = load_sweep(path, overrides=overrides, plugins=plugins, targets_dir=targets_dir)
    from edgeprof.core.io import prepare_out_dir

    prepare_out_dir(spec.out)  # an unusable output folder is refused before any measuring
    if isinstance(fleet, str):
        fleet = FleetSpec.from_options(fleet)
    jobs = spec.jobs()
    store = SweepStore(spec.store)
    try:
        done = store.keys()
        settings = store.meta("settings")
        if done and not resume:
            raise UserError(f"results store '{spec.store}' already holds {len(done)} result(s): "
                            "add --resume to continue this sweep, or remove the store to start "
                            "again")
        if settings is not None and settings != spec.settings():
            raise UserError(f"results store '{spec.store}' was written with run settings "
                            f"{settings}, this sweep has {spec.settings()}: a resumed sweep "
                            "must measure the same way; give another 'store'")
        store.set_meta("settings", spec.settings())
        todo = [j for j in jobs if j.key not in done]
        skipped = len(jobs) - len(todo)
        retries = int(spec.run.get("retries", DEFAULT_RETRIES))
        finished = skipped
        if progress:
            progress(finished, len(jobs), None)

        def record(job: Job, rec: BenchmarkResult, board: str | None, attempts: int) -> None:
            nonlocal finished
            if store.append(job, rec, board=board, attempts=attempts):
                finished += 1
                if progress:
                    progress(finished, len(jobs), {"job": job.key, "status": rec.status,
                                                   "board": board, "reason": rec.reason})

        where = f"fleet {fleet.url}" if fleet is not None else LOCAL_WHERE
        say(f"{len(todo)} job(s) to run on " + (f"the {where}" if fleet is not None else where) +
            (f"; {skipped} already in {spec.store}" if skipped else ""))
        if todo and fleet is None:
            _drive_here(spec, todo, record, plugins, steps, targets_dir)
        elif todo:
            no_board_s = float(spec.run.get("no_board_wait", DEFAULT_NO_BOARD_S))
            with _fleet_client(fleet) as client:
                d = Dispatcher(client, retries=retries, no_board_s=no_board_s)
                try:
                    _drive_fleet(spec, todo, fleet, d, record, plugins, steps)
                except SchedulerLostError as e:
                    raise SchedulerLostError(
                        f"{e}; {len(store)} of {len(jobs)} job(s) are safe in {spec.store}: "
                        "start the scheduler again and rerun with --resume") from None
        frame = results_frame(store)
    finally:
        store.close()
    frame = frame[frame["job_key"].isin({j.key for j in jobs})].reset_index(drop=True)
    best = best_frame(frame)
    files = write_outputs(spec.out, frame, best)
    return SweepReport(spec, spec.store, len(jobs), skipped, len(jobs) - skipped, frame, best,
                       files, where, time.perf_counter() - t0)


@contextlib.contextmanager
def _fleet_client(fleet):
    client = fleet.connect()
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close()


#: where a sweep without a fleet measures (``SweepReport.where``)
LOCAL_WHERE = "this host (one job at a time, measured as profile measures)"


def _step_of(steps: Steps | None, key: str) -> Callable[[str], None] | None:
    """The one-line progress callback of job ``key`` (None without ``steps``)."""
    if steps is None:
        return None
    return lambda line: steps(key, line)


def board_prediction(handle, target, backend: str, precision: str, *, threads=None,
                     device: str | None = None, registry=None,
                     cache: dict | None = None) -> dict[str, Any]:
    """The board figure of one configuration that was not measured on the board: the
    prediction ``edgeprof.predict`` gives (``ConfigPredictor``: its number, interval and
    label), or, where the predictor refuses the configuration (a runtime the target's
    processors do not run, a thread count it lacks ...), no figure and why."""
    from edgeprof.core.errors import EdgeprofError
    from edgeprof.profilers.predict import config

    # the board's processor is the runtime's own there, as profile and predict take it:
    # ``device`` is where this host measured the job (its CPU or its GPU), not where the
    # runtime runs on the board (onnxruntime on a Jetson: its GPU, whatever ran it here)
    dev = None
    key = (target.id, backend, precision, threads, dev)
    try:
        pred = (cache or {}).get(key)
        if pred is None:
            pred = config.ConfigPredictor(target, backend, precision, threads=threads,
                                          device=dev, registry=registry)
            if cache is not None:
                cache[key] = pred
        p = pred(handle)
    except EdgeprofError as e:
        return {"value_ms": None, "provenance": None,
                "source": f"no board figure: {e}"}
    return {"value_ms": p.value_ms, "low_ms": p.low_ms, "high_ms": p.high_ms,
            "provenance": p.provenance,
            "source": f"{p.provenance} by {p.calibration or p.method} for {target.id} "
                      "(as edgeprof predict gives it; not measured on the board)"}


def _tensor_request(spec: SweepSpec, job: Job, plugins) -> MeasureRequest:
    handle = spec.handles[job.model]
    if job.batch_size is not None:
        handle = handle.with_batch(job.batch_size)
    return MeasureRequest.for_handle(job.backend, handle,
                                     spec.config(job.precision, handle.batch_size),
                                     plugins_file=plugins)


def _generate_request(spec: SweepSpec, job: Job, plugins) -> MeasureRequest:
    grid = spec.generate
    assert grid is not None
    timeout = spec.run.get("timeout")  # as for profile --timeout: an isolated worker
    return MeasureRequest.for_generation(job.backend, grid.llms[job.model], job.precision,
                                         grid.config(job, spec.run.get("device", "cpu")),
                                         timeout_s=timeout,
                                         isolate=timeout is not None, plugins_file=plugins)


#: per workload (:data:`WORKLOAD_OPTIONS`), the request ``profile`` makes for a job
REQUESTS: dict[str, Callable[[SweepSpec, Job, Any], MeasureRequest]] = {
    "tensor": _tensor_request, "generate": _generate_request}


def job_request(spec: SweepSpec, job: Job, plugins=None) -> MeasureRequest:
    """The request ``profile`` makes for ``job``, with the sweep's ``[run]`` settings: its
    workload's fields (:data:`REQUESTS`). Every job, here or on the fleet, is measured from
    it."""
    return REQUESTS[job.workload](spec, job, plugins)


def _drive_here(spec: SweepSpec, todo: list[Job], record, plugins,
                steps: Steps | None = None, targets_dir=None) -> None:
    """Measure each job here, one at a time, by the call ``profile`` makes (see the module
    docstring); store each record the moment it is made. The measurement is this host's and
    says so; a board target's figure is its prediction (:func:`board_prediction`), kept
    beside it in the record (``extra["target_figure"]``)."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.fleet import fingerprint
    from edgeprof.profilers.measure.measure import measure
    from edgeprof.targets import get_target_registry

    reg = get_registry(plugins)
    treg = get_target_registry(targets_dir, plugins)
    predictors: dict = {}
    here = fingerprint("host", "local", False)
    for job in todo:
        request = job_request(spec, job, plugins)
        rec = measure(request, registry=reg,  # the runner rule of profile
                      progress=_step_of(steps, job.key))
        # the host's timing is the host's: nothing here emulates a board
        rec.notes.append("measured on this host" + ("" if job.target == "host" else
                                                    f", not on {job.target}"))
        if spec.run.get("device", "cpu") != "cpu":
            rec.notes.append(f"run on this host's {spec.run['device']} device")
        extra = dict(rec.extra or {}, fleet={"board": "local", "target": "host",
                                             "emulating": False, "fingerprint": here})
        if request.handle is not None:  # a model handle: named as the sweep names it, and
            rec.model = job.model       # predicted for a board target
            tgt = treg.get(job.target) if job.target != "host" and rec.ok else None
            if tgt is not None and not getattr(tgt, "is_host", False):
                extra["target_figure"] = board_prediction(
                    request.handle, tgt, job.backend, job.precision,
                    threads=spec.run.get("threads"), device=spec.run.get("device"),
                    registry=reg, cache=predictors)
        rec.extra = extra
        record(job, rec, "local", 1)


def _drive_fleet(spec: SweepSpec, todo: list[Job], fleet, d, record, plugins,
                 steps: Steps | None = None) -> None:
    """Each job's request (:func:`job_request`) on a board of its target, stored the moment
    its outcome arrives. A tensor job is built here and submitted (:func:`_prepare`: one
    build per model, batch size, backend and precision; several jobs in flight); any other
    is measured by ``measure()`` on the target's ``RemoteRunner`` (built here, measured
    there in a fresh process) once the jobs in flight are in."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.fleet import RemoteRunner
    from edgeprof.profilers.measure.measure import measure

    reg = get_registry(plugins)
    queue = deque(todo)
    jobs_by_key: dict[str, Job] = {}
    shipments: OrderedDict[tuple, Any] = OrderedDict()
    runners: dict[str, Any] = {}
    cap = max(1, len(d.boards(refresh=True))) + 1  # one job built ahead per board

    def collect(wait_s: float) -> None:
        for o in d.poll(wait_s):
            job = jobs_by_key.pop(o.job.key)
            if o.record is not None:
                rec = BenchmarkResult.from_dict(o.record)
                rec.model = job.model
                fleet_ = (rec.extra or {}).get("fleet") or {}
                record(job, rec, fleet_.get("board"), o.attempts)
            else:
                rec = _failed_record(job, "failed", o.reason or "no result")
                rec.extra["fleet"] = {"attempts": o.attempts, "history": o.history}
                record(job, rec, None, o.attempts)

    def submit(job: Job, request: MeasureRequest) -> None:
        fj = _prepare(spec, job, request, d, reg, shipments, record, steps)
        if fj is not None:
            jobs_by_key[fj.key] = job
            d.submit(fj)

    def remote(job: Job, request: MeasureRequest) -> None:
        while d.pending:
            collect(0.5)
        runner = runners.get(job.target)
        if runner is None:
            runner = runners[job.target] = RemoteRunner(fleet, job.target, client=d.client,
                                                        retries=d.retries,
                                                        no_board_s=d.no_board_s)
        runner.progress = _step_of(steps, job.key)
        rec = measure(request, runner, registry=reg)
        record(job, rec, ((rec.extra or {}).get("fleet") or {}).get("board"), 1)

    how = {"tensor": submit, "generate": remote}  # per workload (WORKLOAD_OPTIONS)
    while queue or d.pending:
        while queue and d.pending < cap:
            job = queue.popleft()
            how[job.workload](job, job_request(spec, job, plugins))
            collect(0.0)
        collect(0.5)


def _prepare(spec: SweepSpec, job: Job, request: MeasureRequest, d, reg, shipments, record,
             steps: Steps | None = None):
    """The tensor job ready to submit, or None when it was recorded here (unsupported, no
    board, build failed)."""
    from edgeprof.profilers.measure.fleet import (FleetJob, build_shipment, job_payload,
                                                  job_timeout_s)

    handle, config = request.handle, request.config
    try:
        reg.backend(job.backend).check_request(handle, config)
    except Exception as e:  # noqa: BLE001 - measure's status rules decide (UserError raises)
        record(job, _build_failure(job, e, handle), None, 0)
        return None
    why = d.unroutable(job.target, job.backend)
    if why:
        record(job, _failed_record(job, "unavailable", why, handle), None, 0)
        return None
    skey = (job.model, job.batch_size, job.backend, job.precision)
    try:
        if skey not in shipments:
            shipments[skey] = build_shipment(job.backend, handle, job.precision)
            while len(shipments) > 8:
                shipments.popitem(last=False)
        shipment = shipments[skey]
    except Exception as e:  # noqa: BLE001 - a conversion's failure is this job's failure
        record(job, _build_failure(job, e, handle), None, 0)
        return None
    payload = job_payload(request, shipment, job.target)
    return FleetJob(key=job.key, target=job.target, backend=job.backend, payload=payload,
                    timeout_s=config.timeout_s or job_timeout_s(config),
                    progress=_step_of(steps, job.key))


__all__ = ["BEST_COLUMNS", "COLUMNS", "GEN_COLUMNS", "GEN_KEYS", "LOCAL_WHERE", "REQUESTS",
           "RUN_KEYS", "TOP_KEYS", "WORKLOAD_OPTIONS", "GenerateGrid", "Job", "Steps",
           "SweepReport", "SweepSpec", "board_prediction", "job_request",
           "SweepStore", "best_frame", "load_sweep", "results_frame", "run_sweep", "sweep_html"]

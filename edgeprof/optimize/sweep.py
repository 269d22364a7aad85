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

Every result goes into the **store** the moment it arrives: an SQLite database (stdlib) with
one row per job — its unique job key, its coordinates, the status and the whole RunRecord as
JSON. One row is one committed transaction, so a killed driver leaves a consistent store, and
the job key is the primary key, so ``--resume`` skips finished jobs and can never add a
second row for one. (A Parquet file cannot be appended to in place: it would need one file
per result or a rewrite per result, and no uniqueness check.)

Without a fleet, each job is measured here, one at a time, by the very call ``profile``
makes (``measure(MeasureRequest.for_handle(...))`` with the same runner rule: in this
process, or in an isolated worker when ``[run] timeout`` is given), so a job gives the same
answer through either command: the same threads, warm-up, input binding, process kind and
affinity, recorded in each record's ``environment["conditions"]``. Nothing else runs beside a
measurement: no build of the next job, no scheduler, no Dask worker. (A LocalCluster used to
measure each job in a fresh process under a Dask worker, while this process built the next
job and polled the scheduler: on a 2-core machine its medians differed from ``profile``'s by
up to 1.6x, and a process per job made it 2.5x slower.) Its results are measurements of this
host, and say so (board ``local``). On a fleet, a board measures each job in a fresh process
there: that path must differ, and its records say ``isolated`` and name the board.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sqlite3
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import ConfigError, EdgeprofError, UserError
from edgeprof.core.requests import MeasureRequest
from edgeprof.core.results import BenchmarkResult, clean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOP_KEYS = {"models", "targets", "backends", "precisions", "batch_sizes", "store", "out", "run",
            "generate"}
#: the ``[generate]`` table: key -> (item type, is a list, required)
GEN_KEYS: dict[str, tuple[type, bool, bool]] = {
    "models": (str, True, True), "backends": (str, True, True), "formats": (str, True, True),
    "targets": (str, True, False), "threads": (int, True, False),
    "prompt_tokens": (int, True, False), "gen_tokens": (int, True, False),
    "depths": (int, True, False), "repetitions": (int, False, False),
    "warmup": (int, False, False)}
#: what a generative job's row adds to :data:`COLUMNS` (llama-bench's figures: ``pp`` is the
#: prefill test, ``tg`` the decode test, ``*_ts`` tokens per second over the repetitions)
GEN_COLUMNS = ["n_threads", "n_prompt", "n_gen", "n_depth", "repetitions", "pp_median_ts",
               "pp_stddev_ts", "pp_min_ts", "pp_max_ts", "tg_median_ts", "tg_stddev_ts",
               "tg_min_ts", "tg_max_ts", "ttft_ms", "tpot_ms", "model_size", "build_commit"]
RUN_KEYS = {"runs": int, "min_time": float, "max_time": float, "warmup": int, "threads": int,
            "timeout": float, "retries": int, "no_board_wait": float}
#: the DataFrame the HTML report renders (one row per job)
COLUMNS = ["model", "target", "backend", "precision", "batch_size", "status", "reason",
           "median_ms", "ci_low_ms", "ci_high_ms", "provenance", "board", "measured_on",
           "attempts", "job_key", "workload", *GEN_COLUMNS]
#: a generative row: ``precision`` is the format; the tensor figures are empty, the ``tg_`` /
#: ``pp_`` ones filled (runner-up and ``clearly_faster`` by decode: the best's slowest
#: repetition beats the runner-up's fastest)
BEST_COLUMNS = ["model", "target", "backend", "precision", "batch_size", "median_ms",
                "ci_low_ms", "ci_high_ms", "board", "measured_on", "runner_up",
                "runner_up_median_ms", "clearly_faster", "ok_jobs", "workload", "n_threads",
                "n_prompt", "n_gen", "n_depth", "tg_median_ts", "tg_stddev_ts", "pp_median_ts",
                "pp_stddev_ts", "ttft_ms", "tpot_ms", "runner_up_tg_median_ts", "best_prefill",
                "best_prefill_pp_median_ts"]


# ------------------------------------------------------------------------- the file
@dataclass
class SweepSpec:
    path: Path
    models: list[str]
    targets: list[str]
    backends: list[str]
    precisions: list[str]
    batch_sizes: list[int | None]
    store: Path
    out: Path
    run: dict[str, Any] = field(default_factory=dict)
    handles: dict[str, Any] = field(default_factory=dict, repr=False)
    generate: GenerateGrid | None = None

    def config(self, precision: str, batch_size: int) -> RunConfig:
        r = self.run
        return RunConfig(precision=precision, batch_size=batch_size, threads=r.get("threads"),
                         warmup=r.get("warmup"), runs=r.get("runs"),
                         min_time_s=r.get("min_time"), max_time_s=r.get("max_time"),
                         timeout_s=r.get("timeout"))

    def settings(self) -> dict[str, Any]:
        """What a resumed sweep must share with the store's first run."""
        out = {k: v for k, v in sorted(self.run.items()) if k not in ("retries",
                                                                      "no_board_wait")}
        if self.generate is not None:  # only then: a tensor sweep's store keeps its settings
            out["generate"] = {"repetitions": self.generate.repetitions,
                               "warmup": self.generate.warmup}
        return out

    def jobs(self) -> list[Job | GenJob]:
        out: list[Job | GenJob] = []
        for model in self.models:
            for bs in self.batch_sizes:
                for target in self.targets:
                    for backend in self.backends:
                        for precision in self.precisions:
                            out.append(Job(model, target, backend, precision, bs))
        if self.generate is not None:
            out.extend(self.generate.jobs(self.run.get("threads")))
        return out


@dataclass(frozen=True)
class Job:
    model: str
    target: str
    backend: str
    precision: str
    batch_size: int | None  # None: the model's own

    @property
    def key(self) -> str:
        bs = "model" if self.batch_size is None else str(self.batch_size)
        return f"{self.model}|{self.target}|{self.backend}|{self.precision}|b{bs}"


@dataclass(frozen=True)
class GenJob:
    """One generative job: llama-bench's test shape (``pp n_prompt``, ``tg n_gen`` at one
    depth) for one model x target x backend x format x threads."""

    model: str
    target: str
    backend: str
    precision: str  # the format (q4_0, int4 ...): the store's precision column
    threads: int | None  # None: the machine's physical cores
    prompt_tokens: int
    gen_tokens: int
    depth: int
    batch_size: None = None  # the store's column; a generative job has none

    @property
    def key(self) -> str:
        t = "auto" if self.threads is None else str(self.threads)
        return (f"{self.model}|{self.target}|{self.backend}|{self.precision}|t{t}|"
                f"pp{self.prompt_tokens}|tg{self.gen_tokens}|d{self.depth}")


@dataclass
class GenerateGrid:
    """The ``[generate]`` table, validated: ``pairs`` are the (backend, format) pairs that
    run (each format on the listed backends that make it)."""

    models: list[str]
    targets: list[str]
    pairs: list[tuple[str, str]]
    threads: list[int | None]
    prompt_tokens: list[int]
    gen_tokens: list[int]
    depths: list[int]
    repetitions: int = 5
    warmup: int = 1
    llms: dict[str, Any] = field(default_factory=dict, repr=False)  # model -> LLMModel
    classes: dict[str, type] = field(default_factory=dict, repr=False)

    def jobs(self, run_threads: int | None = None) -> list[GenJob]:
        threads = self.threads if self.threads != [None] else [run_threads]
        return [GenJob(m, t, b, f, th, p, g, d)
                for m in self.models for t in self.targets for b, f in self.pairs
                for th in threads for p in self.prompt_tokens for g in self.gen_tokens
                for d in self.depths]

    def config(self, job: GenJob) -> Any:
        from edgeprof.core.llm import GenerationConfig

        return GenerationConfig(prompt_tokens=job.prompt_tokens, gen_tokens=job.gen_tokens,
                                depths=(job.depth,), repetitions=self.repetitions,
                                warmup=self.warmup, threads=job.threads)


def _list(raw: dict, key: str, path: Path, kind: type, *, required: bool = True,
          prefix: str = "") -> list:
    name = prefix + key
    if key not in raw:
        if required:
            raise ConfigError(f"missing; give a list of {key}", path=path, field=name)
        return []
    v = raw[key]
    if isinstance(v, (str, int)) and not isinstance(v, bool):
        v = [v]
    if not isinstance(v, list):
        raise ConfigError(f"must be a list, got {type(v).__name__}", path=path, field=name)
    if not v:
        raise ConfigError("is empty: the grid would have no jobs", path=path, field=name)
    for item in v:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise ConfigError(f"items must be {kind.__name__}s, got {item!r}", path=path,
                              field=name)
    if len(set(v)) != len(v):
        raise ConfigError("lists an item twice", path=path, field=name)
    return list(v)


def _load_generate(table: Any, path: Path, top_targets: list[str], run_threads: Any, reg,
                   check_target: Callable[[str], Any]) -> GenerateGrid:
    """The ``[generate]`` table: every mistake a ConfigError naming ``generate.KEY``."""
    from edgeprof.core.llm import backend_workload
    from edgeprof.zoo.llm import resolve_llm

    if not isinstance(table, dict):
        raise ConfigError("must be a table ([generate])", path=path, field="generate")
    unknown = sorted(set(table) - set(GEN_KEYS))
    if unknown:
        raise ConfigError(f"unknown key; known: {', '.join(sorted(GEN_KEYS))}", path=path,
                          field=f"generate.{unknown[0]}")
    got: dict[str, Any] = {}
    for key, (kind, is_list, required) in GEN_KEYS.items():
        if is_list:
            got[key] = _list(table, key, path, kind, required=required, prefix="generate.")
        elif key in table:
            v = table[key]
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"must be an integer, got {v!r}", path=path,
                                  field=f"generate.{key}")
            got[key] = v
    for key, least in (("threads", 1), ("prompt_tokens", 1), ("gen_tokens", 1), ("depths", 0),
                       ("repetitions", 1), ("warmup", 0)):
        vals = got.get(key)
        vals = vals if isinstance(vals, list) else [] if vals is None else [vals]
        bad = [v for v in vals if v < least]
        if bad:
            raise ConfigError(f"must be {'positive' if least else '0 or more'}, got {bad[0]!r}",
                              path=path, field=f"generate.{key}")
    targets = got["targets"] or top_targets
    if not targets:
        raise ConfigError("missing; give a list of targets (top level or in [generate])",
                          path=path, field="targets")
    for t in got["targets"]:
        try:
            check_target(t)
        except EdgeprofError as e:
            raise ConfigError(str(e), path=path, field="generate.targets") from None
    classes: dict[str, type] = {}
    for b in got["backends"]:
        try:
            cls = reg.backend(b)
        except EdgeprofError as e:
            raise ConfigError(str(e), path=path, field="generate.backends") from None
        if backend_workload(cls) != "generate":
            known = ", ".join(reg.backends_for("generate")) or "(none)"
            raise ConfigError(f"backend '{b}' runs fixed-shape tensor models, not generative "
                              f"ones; generative backends: {known}", path=path,
                              field="generate.backends")
        classes[b] = cls
    pairs = []
    for fmt in got["formats"]:
        makers = [b for b, cls in classes.items() if fmt in tuple(cls.formats)]
        if not makers:
            made = "; ".join(f"{b} makes {', '.join(cls.formats)}" for b, cls in classes.items())
            raise ConfigError(f"no backend listed makes format '{fmt}' ({made})", path=path,
                              field="generate.formats")
        pairs.extend((b, fmt) for b in makers)
    llms = {}
    for m in got["models"]:
        spec = m
        if not m.startswith("llm:") and not Path(m).expanduser().is_absolute():
            spec = str(path.parent / m)  # a .gguf file or an HF folder beside the sweep file
        try:
            llms[m] = resolve_llm(spec)
        except EdgeprofError as e:
            raise ConfigError(f"model '{m}' cannot be read: {e}", path=path,
                              field="generate.models") from None
    threads: list[int | None] = got["threads"] or [None]
    return GenerateGrid(models=got["models"], targets=targets, pairs=pairs, threads=threads,
                        prompt_tokens=got["prompt_tokens"] or [512],
                        gen_tokens=got["gen_tokens"] or [128], depths=got["depths"] or [0],
                        repetitions=got.get("repetitions", 5), warmup=got.get("warmup", 1),
                        llms=llms, classes=classes)


def load_sweep(path: str | os.PathLike, *, overrides: dict[str, Any] | None = None,
               plugins=None, targets_dir=None) -> SweepSpec:
    """Read and validate SWEEP.toml; every mistake is a ConfigError naming the field."""
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.core.precision import get_precision
    from edgeprof.targets import get_target_registry

    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("sweep file does not exist", path=path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read: {e}", path=path) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML: {e}", path=path) from None
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise ConfigError(f"unknown key; known: {', '.join(sorted(TOP_KEYS))}", path=path,
                          field=unknown[0])
    base = path.parent
    # a tensor grid unless the file holds only a [generate] table
    tensor = "generate" not in raw or any(k in raw for k in ("models", "backends",
                                                             "precisions", "batch_sizes"))
    models = _list(raw, "models", path, str, required=tensor)
    targets = _list(raw, "targets", path, str, required=tensor)
    backends = _list(raw, "backends", path, str, required=tensor)
    precisions = _list(raw, "precisions", path, str, required=tensor)
    sizes = _list(raw, "batch_sizes", path, int, required=False)
    from edgeprof.core.llm import is_llm_spec

    for m in models:
        if is_llm_spec(m) or m.lower().endswith(".gguf"):
            raise ConfigError(f"'{m}' is a generative model: list it under [generate] models "
                              "(with its backends and formats)", path=path, field="models")
    if any(b <= 0 for b in sizes):
        raise ConfigError("batch sizes must be positive", path=path, field="batch_sizes")
    run = raw.get("run", {})
    if not isinstance(run, dict):
        raise ConfigError("must be a table ([run])", path=path, field="run")
    run = dict(run)
    run.update({k: v for k, v in (overrides or {}).items() if v is not None})
    for k, v in run.items():
        if k not in RUN_KEYS:
            raise ConfigError(f"unknown key; known: {', '.join(sorted(RUN_KEYS))}", path=path,
                              field=f"run.{k}")
        kind = RUN_KEYS[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (
                kind is int and not isinstance(v, int)):
            raise ConfigError(f"must be a{'n integer' if kind is int else ' number'}, got "
                              f"{v!r}", path=path, field=f"run.{k}")
        if v < 0 or (v == 0 and k not in ("retries",)):
            raise ConfigError(f"must be positive, got {v!r}", path=path, field=f"run.{k}")
    reg = get_registry(plugins)
    treg = get_target_registry(targets_dir, plugins)

    def known(kind: str, field_: str, check: Callable[[str], Any], items: list[str]) -> None:
        for item in items:
            try:
                check(item)
            except EdgeprofError as e:
                raise ConfigError(str(e), path=path, field=field_) from None

    known("target", "targets", lambda t: t in treg.ids() or treg.get(t), targets)
    known("backend", "backends", reg.backend, backends)
    known("precision", "precisions", get_precision, precisions)
    handles = {}
    for m in models:
        spec = m
        if not m.startswith("builtin:") and not Path(m).is_absolute():
            cand = base / m.split(":", 1)[0]
            if cand.exists():
                spec = str(base / m)
        try:
            handles[m] = resolve_model(spec, registry=reg)
        except EdgeprofError as e:
            raise ConfigError(f"model '{m}' cannot be read: {e}", path=path,
                              field="models") from None
        except Exception as e:  # a factory's own failure  # noqa: BLE001
            raise ConfigError(f"model '{m}' cannot be read: {type(e).__name__}: {e}",
                              path=path, field="models") from None
    for key in ("store", "out"):
        if key in raw and not isinstance(raw[key], str):
            raise ConfigError("must be a path string", path=path, field=key)
    generate = None
    if "generate" in raw:
        generate = _load_generate(raw["generate"], path, targets, run.get("threads"), reg,
                                  lambda t: t in treg.ids() or treg.get(t))
    store = base / raw.get("store", f"{path.stem}.sqlite")
    out = base / raw.get("out", f"{path.stem}_out")
    return SweepSpec(path, models, targets, backends, precisions, sizes or [None], store, out,
                     run, handles, generate)


# ------------------------------------------------------------------------ the store
def _utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class SweepStore:
    """The results store: SQLite, one committed row per job, keyed by the job key."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS results (
        job_key TEXT PRIMARY KEY,
        model TEXT NOT NULL, target TEXT NOT NULL, backend TEXT NOT NULL,
        precision TEXT NOT NULL, batch_size INTEGER,
        status TEXT NOT NULL, reason TEXT, board TEXT, attempts INTEGER NOT NULL,
        finished_utc TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(self.SCHEMA)
        except sqlite3.DatabaseError as e:
            raise UserError(f"results store '{self.path}' is not an edgeprof sweep store "
                            f"({e}); give another 'store' in the sweep file") from None

    def close(self) -> None:
        self.db.close()

    def keys(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT job_key FROM results")}

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                        (key, json.dumps(value, sort_keys=True)))

    def append(self, job: Job, record: BenchmarkResult, *, board: str | None,
               attempts: int) -> bool:
        """Commit one job's row; False (and nothing written) when the job is already in."""
        try:
            self.db.execute(
                "INSERT INTO results (job_key, model, target, backend, precision, batch_size, "
                "status, reason, board, attempts, finished_utc, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job.key, job.model, job.target, job.backend, job.precision, job.batch_size,
                 record.status, record.reason, board, attempts, _utc(),
                 json.dumps(record.to_dict(), allow_nan=False)))
        except sqlite3.IntegrityError:
            return False
        return True

    def rows(self) -> list[dict[str, Any]]:
        cur = self.db.execute("SELECT job_key, model, target, backend, precision, batch_size, "
                              "status, reason, board, attempts, record FROM results "
                              "ORDER BY rowid")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def results_frame(store: SweepStore | str | os.PathLike):
    """The sweep as a DataFrame (:data:`COLUMNS`), one row per job — what the HTML report
    renders."""
    import pandas as pd

    own = not isinstance(store, SweepStore)
    s = SweepStore(store) if own else store
    try:
        rows = []
        for r in s.rows():
            rec = json.loads(r["record"])
            if rec.get("kind") == "generate":
                rows.append(_generative_row(r, rec))
                continue
            stats = rec.get("stats") or {}
            rows.append({
                "model": r["model"], "target": r["target"], "backend": r["backend"],
                "precision": r["precision"],
                "batch_size": r["batch_size"] if r["batch_size"] is not None
                else rec.get("batch_size"),
                "status": r["status"], "reason": r["reason"],
                "median_ms": stats.get("median_ms"), "ci_low_ms": stats.get("ci_low_ms"),
                "ci_high_ms": stats.get("ci_high_ms"),
                "provenance": rec.get("provenance", "measured") if stats else None,
                "board": r["board"], "measured_on": _measured_on(rec),
                "attempts": r["attempts"], "job_key": r["job_key"], "workload": "tensor"})
    finally:
        if own:
            s.close()
    return pd.DataFrame(rows, columns=COLUMNS)


def _job_shape(job_key: str) -> dict[str, Any]:
    """n_threads/n_prompt/n_gen/n_depth from a generative job's key (its coordinates, for a
    job that failed before any record said them)."""
    out: dict[str, Any] = {}
    for part in job_key.split("|")[4:]:
        for prefix, name in (("pp", "n_prompt"), ("tg", "n_gen"), ("d", "n_depth"),
                             ("t", "n_threads")):
            if part.startswith(prefix) and part[len(prefix):].isdigit():
                out[name] = int(part[len(prefix):])
                break
    return out


def _generative_row(r: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    """One generative job's row: its (one depth's) GenerationRecord's llama-bench figures."""
    recs = rec.get("records") or []
    g = recs[0] if recs else {}
    ok = r["status"] == "ok" and bool(g)

    def fig(name: str, key: str) -> Any:
        return (g.get(name) or {}).get(key) if ok else None

    shape = _job_shape(r["job_key"])
    row = {k: None for k in COLUMNS}
    row.update({
        "model": r["model"], "target": r["target"], "backend": r["backend"],
        "precision": r["precision"], "status": r["status"], "reason": r["reason"],
        "provenance": (g.get("provenance") or rec.get("provenance") or "measured")
        if ok else None,
        "board": r["board"], "measured_on": _generative_measured_on(rec) if ok else None,
        "attempts": r["attempts"], "job_key": r["job_key"], "workload": "generate",
        "n_threads": g.get("n_threads") or shape.get("n_threads"),
        "n_prompt": g.get("n_prompt") or shape.get("n_prompt"),
        "n_gen": g.get("n_gen") or shape.get("n_gen"),
        "n_depth": g.get("n_depth", shape.get("n_depth")),
        "repetitions": g.get("repetitions") or None,
        "pp_median_ts": fig("prefill_tokens_per_s", "median"),
        "pp_stddev_ts": fig("prefill_tokens_per_s", "stddev"),
        "pp_min_ts": fig("prefill_tokens_per_s", "min"),
        "pp_max_ts": fig("prefill_tokens_per_s", "max"),
        "tg_median_ts": fig("decode_tokens_per_s", "median"),
        "tg_stddev_ts": fig("decode_tokens_per_s", "stddev"),
        "tg_min_ts": fig("decode_tokens_per_s", "min"),
        "tg_max_ts": fig("decode_tokens_per_s", "max"),
        "ttft_ms": fig("ttft_ms", "median"), "tpot_ms": fig("tpot_ms", "median"),
        "model_size": g.get("model_size"), "build_commit": g.get("build_commit") or None})
    return row


def _generative_measured_on(rec: dict[str, Any]) -> str | None:
    from edgeprof.profilers.measure.fleet import measured_on

    return measured_on(rec)


def _measured_on(rec: dict[str, Any]) -> str | None:
    from edgeprof.profilers.measure.fleet import measured_on

    return measured_on(rec) if rec.get("stats") else None


def best_frame(frame):
    """The fastest ok configuration per (model, target), with the runner-up and whether the
    best is clearly faster (its CI's upper end below the runner-up's lower end)."""
    import pandas as pd

    ok = frame[(frame["status"] == "ok") & frame["median_ms"].notna()]
    if "workload" in ok:
        ok = ok[ok["workload"] != "generate"]
    rows = []
    for (model, target), g in ok.groupby(["model", "target"], sort=False):
        g = g.sort_values("median_ms")
        best = g.iloc[0]
        row = {k: best[k] for k in ("model", "target", "backend", "precision", "batch_size",
                                    "median_ms", "ci_low_ms", "ci_high_ms", "board",
                                    "measured_on")}
        row["ok_jobs"] = len(g)
        if len(g) > 1:
            ru = g.iloc[1]
            row["runner_up"] = f"{ru['backend']} {ru['precision']} b{ru['batch_size']}"
            row["runner_up_median_ms"] = ru["median_ms"]
            hi, lo = best["ci_high_ms"], ru["ci_low_ms"]
            row["clearly_faster"] = bool(pd.notna(hi) and pd.notna(lo) and hi < lo)
        else:
            row.update(runner_up=None, runner_up_median_ms=None, clearly_faster=None)
        row["workload"] = "tensor"
        rows.append(row)
    rows.extend(_best_generative(frame))
    return pd.DataFrame(rows, columns=BEST_COLUMNS)


def _gen_label(r) -> str:
    t = "auto" if r["n_threads"] is None or r["n_threads"] != r["n_threads"] else \
        int(r["n_threads"])
    return f"{r['backend']} {r['precision']} t{t}"


def _best_generative(frame) -> list[dict[str, Any]]:
    """Per (model, target) and test shape (n_prompt, n_gen, n_depth: rates at different
    depths or lengths are not comparable): the fastest decode (``tg_median_ts``) with its
    runner-up, and the fastest prefill of the same jobs in its own columns
    (``best_prefill``, ``best_prefill_pp_median_ts``): decode is what a chat's speed is,
    prefill what its first-token wait is; the two may pick different configurations."""
    import pandas as pd

    if "workload" not in frame:
        return []
    ok = frame[(frame["workload"] == "generate") & (frame["status"] == "ok")
               & frame["tg_median_ts"].notna()]
    rows = []
    keys = ["model", "target", "n_prompt", "n_gen", "n_depth"]
    for _, g in ok.groupby(keys, sort=False, dropna=False):
        g = g.sort_values("tg_median_ts", ascending=False)
        best = g.iloc[0]
        row = {k: best[k] for k in ("model", "target", "backend", "precision", "board",
                                    "measured_on", "workload", "n_threads", "n_prompt",
                                    "n_gen", "n_depth", "tg_median_ts", "tg_stddev_ts",
                                    "pp_median_ts", "pp_stddev_ts", "ttft_ms", "tpot_ms")}
        row["ok_jobs"] = len(g)
        if len(g) > 1:
            ru = g.iloc[1]
            row["runner_up"] = _gen_label(ru)
            row["runner_up_tg_median_ts"] = ru["tg_median_ts"]
            lo, hi = best["tg_min_ts"], ru["tg_max_ts"]  # the best's slowest vs its fastest
            row["clearly_faster"] = bool(pd.notna(lo) and pd.notna(hi) and lo > hi)
        else:
            row.update(runner_up=None, runner_up_tg_median_ts=None, clearly_faster=None)
        pp = g[g["pp_median_ts"].notna()]
        if len(pp):
            bp = pp.sort_values("pp_median_ts", ascending=False).iloc[0]
            row["best_prefill"] = _gen_label(bp)
            row["best_prefill_pp_median_ts"] = bp["pp_median_ts"]
        rows.append(row)
    return rows


# ------------------------------------------------------------------------ the driver
@dataclass
class SweepReport:
    spec: SweepSpec
    store: Path
    total: int
    skipped: int  # finished before this run (--resume)
    ran: int
    frame: Any  # DataFrame, COLUMNS
    best: Any  # DataFrame, BEST_COLUMNS
    files: list[Path]
    where: str  # "fleet tcp://..." or LOCAL_WHERE
    wall_s: float

    @property
    def exit_code(self) -> int:
        """3 when a job that should have run produced no measurement (``failed``); a grid's
        unsupported or unavailable combinations are listed, not failures."""
        return 3 if (self.frame["status"] == "failed").any() else 0

    def profile_document(self, model: str, target: str, batch_size: int | None = None,
                         **shape: int | None) -> dict[str, Any]:
        """The sweep's jobs of one model, target (and batch size: by default the first the
        sweep lists) as a profile.json-shaped document (the model, the target, one run per
        backend x precision with its whole record), so
        ``edgeprof.profilers.report.compare.compare_results`` (``edgeprof compare``) can set
        a sweep's measurement beside a profile's: same job, same answer?

        A model of the ``[generate]`` table gives a generative profile document (one run per
        backend x format x depth at one test shape: ``threads``, ``prompt_tokens``,
        ``gen_tokens``, by default the first the sweep lists;
        ``edgeprof.optimize.sweep_documents``)."""
        grid = self.spec.generate
        if grid is not None and model in grid.models:
            if batch_size is not None:
                raise UserError(f"'{model}' is a generative model: its jobs have no batch "
                                "size (give threads, prompt_tokens or gen_tokens)")
            from edgeprof.optimize.sweep_documents import generative_document

            return generative_document(self, model, target, **shape)
        if shape:
            raise UserError(f"{', '.join(sorted(shape))} choose a generative job's test shape; "
                            f"'{model}' is not in the sweep's [generate] models")
        if model not in self.spec.handles or target not in self.spec.targets:
            raise UserError(f"the sweep measured models {', '.join(self.spec.models)} on "
                            f"targets {', '.join(self.spec.targets)}; not '{model}' on "
                            f"'{target}'")
        handle = self.spec.handles[model]
        bs = batch_size if batch_size is not None else self.spec.batch_sizes[0]
        if bs is not None:
            handle = handle.with_batch(bs)
        store = SweepStore(self.store)
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
                         "provenance": {"benchmark": "measured",
                                        "measured_on": _measured_on(rec),
                                        "board": (rec.get("extra") or {}).get("fleet")},
                         "benchmark": rec, "summary": None})
        from edgeprof._version import __version__

        return clean({"schema_version": "1.0", "edgeprof_version": __version__,
                      "created_utc": _utc(), "model": handle.to_dict(),
                      "target": {"id": target}, "request": {"sweep": str(self.spec.path)},
                      "runs": runs, "warnings": []})

    def to_dict(self) -> dict[str, Any]:
        return clean({"store": str(self.store), "total": self.total, "skipped": self.skipped,
                      "ran": self.ran, "where": self.where, "wall_s": self.wall_s,
                      "files": [str(f) for f in self.files],
                      "best": self.best.to_dict(orient="records"),
                      "results": self.frame.to_dict(orient="records")})


Progress = Callable[[int, int, dict[str, Any] | None], None]


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
              plugins=None, targets_dir=None, say: Callable[[str], None] | None = None
              ) -> SweepReport:
    """Run (or resume) the sweep in ``path``; see the module's docstring."""
    from edgeprof.profilers.measure.fleet import (DEFAULT_NO_BOARD_S, DEFAULT_RETRIES,
                                                  Dispatcher, FleetJob, FleetSpec,
                                                  SchedulerLostError, build_shipment,
                                                  job_payload, job_timeout_s)

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
            _drive_here(spec, todo, record, plugins)
        elif todo:
            tensor_todo = [j for j in todo if isinstance(j, Job)]
            gen_todo = [j for j in todo if isinstance(j, GenJob)]
            no_board_s = float(spec.run.get("no_board_wait", DEFAULT_NO_BOARD_S))
            with _fleet_client(fleet) as client:
                d = Dispatcher(client, retries=retries, no_board_s=no_board_s)
                try:
                    if tensor_todo:
                        _drive(spec, tensor_todo, d, record, build_shipment, job_payload,
                               job_timeout_s, FleetJob)
                    if gen_todo:
                        _drive_generative_fleet(spec, gen_todo, fleet, client, record,
                                                retries, no_board_s, plugins)
                except SchedulerLostError as e:
                    raise SchedulerLostError(
                        f"{e}; {len(store)} of {len(jobs)} job(s) are safe in {spec.store}: "
                        "start the scheduler again and rerun with --resume") from None
        frame = results_frame(store)
    finally:
        store.close()
    frame = frame[frame["job_key"].isin({j.key for j in jobs})].reset_index(drop=True)
    best = best_frame(frame)
    files = _write_outputs(spec.out, frame, best)
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


def _drive_here(spec: SweepSpec, todo: list[Job], record, plugins) -> None:
    """Measure each job here, one at a time, by the call ``profile`` makes (see the module
    docstring); store each record the moment it is made."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.fleet import emulation_note, fingerprint
    from edgeprof.profilers.measure.measure import measure

    reg = get_registry(plugins)
    here = fingerprint("host", "local", True)
    for job in todo:
        if isinstance(job, GenJob):
            rec = measure(_generative_request(spec, job, plugins), registry=reg)
        else:
            handle = spec.handles[job.model]
            if job.batch_size is not None:
                handle = handle.with_batch(job.batch_size)
            config = spec.config(job.precision, handle.batch_size)
            request = MeasureRequest.for_handle(job.backend, handle, config,
                                                plugins_file=plugins)
            rec = measure(request, registry=reg)  # the runner rule of profile
            rec.model = job.model
        emulating = job.target != "host"
        board = dict(here, target=job.target, emulating=emulating)
        rec.notes.append(emulation_note(board) if emulating else "measured on this host")
        rec.extra = dict(rec.extra or {}, fleet={"board": "local", "target": job.target,
                                                 "emulating": emulating,
                                                 "fingerprint": board})
        record(job, rec, "local", 1)


def _generative_request(spec: SweepSpec, job: GenJob, plugins) -> MeasureRequest:
    """The request ``profile llm:X`` makes for this job (one depth), with the sweep's
    ``[run] timeout`` (which, as for ``profile --timeout``, runs it in an isolated worker)."""
    grid = spec.generate
    assert grid is not None
    timeout = spec.run.get("timeout")
    return MeasureRequest.for_generation(job.backend, grid.llms[job.model], job.precision,
                                         grid.config(job), timeout_s=timeout,
                                         isolate=timeout is not None, plugins_file=plugins)


def _drive_generative_fleet(spec: SweepSpec, todo: list[GenJob], fleet, client, record,
                            retries: int, no_board_s: float, plugins) -> None:
    """Each generative job on a board of its target through ``RemoteRunner`` (built here,
    measured there in a fresh process), one at a time, stored the moment it returns."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.measure.fleet import RemoteRunner
    from edgeprof.profilers.measure.measure import measure

    reg = get_registry(plugins)
    runners: dict[str, Any] = {}
    for job in todo:
        runner = runners.get(job.target)
        if runner is None:
            runner = runners[job.target] = RemoteRunner(fleet, job.target, client=client,
                                                        retries=retries, no_board_s=no_board_s)
        rec = measure(_generative_request(spec, job, plugins), runner, registry=reg)
        board = ((rec.extra or {}).get("fleet") or {}).get("board")
        record(job, rec, board, 1)


def _drive(spec: SweepSpec, todo: list[Job], d, record, build_shipment, job_payload,
           job_timeout_s, FleetJob) -> None:
    """Build each job here and submit it to the fleet; store each outcome the moment it
    arrives."""
    from edgeprof.core.plugins import get_registry

    reg = get_registry()
    queue = deque(todo)
    jobs_by_key: dict[str, Job] = {}
    shipments: OrderedDict[tuple, Any] = OrderedDict()
    slots = max(1, len(d.boards(refresh=True)))
    cap = slots + 1  # one job built ahead per slot: builds overlap measurements

    def collect(wait_s: float) -> None:
        for o in d.poll(wait_s):
            job = jobs_by_key.pop(o.job.key)
            if o.record is not None:
                rec = BenchmarkResult.from_dict(o.record)
                rec.model = job.model
                fleet = (rec.extra or {}).get("fleet") or {}
                record(job, rec, fleet.get("board"), o.attempts)
            else:
                rec = _failed_record(job, "failed", o.reason or "no result")
                rec.extra["fleet"] = {"attempts": o.attempts, "history": o.history}
                record(job, rec, None, o.attempts)

    while queue or d.pending:
        while queue and d.pending < cap:
            job = queue.popleft()
            fj = _prepare(spec, job, d, reg, shipments, record, build_shipment, job_payload,
                          job_timeout_s, FleetJob)
            if fj is not None:
                jobs_by_key[fj.key] = job
                d.submit(fj)
            collect(0.0)
        collect(0.5)


def _prepare(spec: SweepSpec, job: Job, d, reg, shipments, record, build_shipment,
             job_payload, job_timeout_s, FleetJob):
    """The job ready to submit, or None when it was recorded here (unsupported, no board,
    build failed)."""
    handle = spec.handles[job.model]
    if job.batch_size is not None:
        handle = handle.with_batch(job.batch_size)
    cls = reg.backend(job.backend)
    config = spec.config(job.precision, handle.batch_size)
    try:
        cls.check_request(handle, config)
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
    request = MeasureRequest.for_handle(job.backend, handle, config)
    payload = job_payload(request, shipment, job.target)
    return FleetJob(key=job.key, target=job.target, backend=job.backend, payload=payload,
                    timeout_s=config.timeout_s or job_timeout_s(config))


def _write_outputs(out: Path, frame, best) -> list[Path]:
    """results.csv, best.csv and the grid page report.html, published as one folder (a
    complete sibling swapped in with one rename: never a mix of two sweeps' files)."""
    from edgeprof.core.io import publish_staged, write_csv, write_text

    def write(stage: Path) -> list[str]:
        write_csv(stage / "results.csv", _int_columns(frame))
        write_csv(stage / "best.csv", _int_columns(best))
        write_text(stage / "report.html", sweep_html(frame, best))
        return ["results.csv", "best.csv", "report.html"]

    return publish_staged(out, write)


#: columns that hold counts: written as integers even where another kind of row leaves them
#: empty (a tensor row has no n_prompt, a generative row no batch size)
_INT_COLUMNS = ("batch_size", "attempts", "n_threads", "n_prompt", "n_gen", "n_depth",
                "repetitions", "model_size", "ok_jobs")


def _int_columns(frame):
    frame = frame.copy()
    for c in _INT_COLUMNS:
        if c in frame:
            col = frame[c]
            vals = col.dropna()
            try:
                if all(float(v).is_integer() for v in vals):
                    frame[c] = col.astype("Int64")
            except (TypeError, ValueError):
                pass
    return frame


def sweep_html(frame, best) -> str:
    """The sweep's page: ``render_sweep_html`` of the tensor jobs (its heatmaps, best bars and
    row table), and, when the sweep has generative jobs, a section of them: per target and
    model a table of every job with its prefill and decode tok/s (median, standard
    deviation), TTFT and TPOT, a bar for decode, and the best of each test shape."""
    import html as _h

    from edgeprof.profilers.report.html import render_sweep_html

    gen_mask = frame["workload"] == "generate" if "workload" in frame else None
    if gen_mask is None or not gen_mask.any():
        return render_sweep_html(frame)
    tensor = frame[~gen_mask].reset_index(drop=True)
    gen = frame[gen_mask].reset_index(drop=True)
    targets = list(dict.fromkeys(frame["target"]))
    page = render_sweep_html(tensor, title=f"sweep: {len(frame)} runs ({len(tensor)} tensor, "
                                           f"{len(gen)} generative) on {len(targets)} "
                                           "target(s)")
    section = _generative_section(gen, best, _h.escape)
    for anchor in ('<h2 id="rows">', "</body>"):
        if anchor in page:
            return page.replace(anchor, section + anchor, 1)
    return page + section


def _generative_section(gen, best, esc) -> str:
    from edgeprof.profilers.report.html import fmt

    def num(v) -> float | None:
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        return f if f == f else None

    def rate(med, sd) -> str:
        m = num(med)
        if m is None:
            return "—"
        s = num(sd)
        return esc(fmt(m)) + (f" ± {esc(fmt(s))}" if s is not None else "")

    def cell(v) -> str:
        return esc(fmt(v)) if num(v) is not None else esc(v) if v not in (None, "") and \
            v == v else "—"

    out = ['<section id="generative"><h2 id="generate">Generative jobs '
           f'({len(gen)})</h2><p class="note">llama-bench\'s tests: <code>pp</code> the '
           "prefill of n_prompt tokens, <code>tg</code> the decode of n_gen tokens at depth "
           "n_depth; tokens per second, median ± standard deviation over the repetitions "
           "(provenance: measured, on the machine each row names). The bar is decode, against "
           "the fastest decode of that target and model.</p>"]
    heads = ["target", "model", "backend", "format", "threads", "n_prompt", "n_gen",
             "n_depth", "status", "pp tok/s", "tg tok/s", "", "TTFT ms", "TPOT ms",
             "measured on", "reason"]
    out.append('<div class="scroll"><table id="generative-table" data-rows="'
               f'{len(gen)}"><thead><tr>' + "".join(
                   f'<th{" class=num" if h.endswith(("/s", "ms")) or h.startswith("n_") else ""}>'
                   f"{esc(h)}</th>" for h in heads) + "</tr></thead><tbody>")
    top: dict[tuple, float] = {}
    for r in gen.to_dict(orient="records"):
        v = num(r.get("tg_median_ts"))
        if v is not None:
            k = (r["target"], r["model"])
            top[k] = max(top.get(k, 0.0), v)
    for r in gen.to_dict(orient="records"):
        v = num(r.get("tg_median_ts"))
        peak = top.get((r["target"], r["model"]))
        width = 0 if v is None or not peak else max(1, round(100 * v / peak))
        bar = (f'<div title="{esc(fmt(v))} tok/s" style="width:{width * 1.2:.0f}px;height:10px;'
               'background:#4c78a8"></div>' if width else "")
        cells = [cell(r.get("target")), cell(r.get("model")), cell(r.get("backend")),
                 cell(r.get("precision")), cell(r.get("n_threads")), cell(r.get("n_prompt")),
                 cell(r.get("n_gen")), cell(r.get("n_depth")), cell(r.get("status")),
                 rate(r.get("pp_median_ts"), r.get("pp_stddev_ts")),
                 rate(r.get("tg_median_ts"), r.get("tg_stddev_ts")), bar,
                 cell(r.get("ttft_ms")), cell(r.get("tpot_ms")),
                 cell(r.get("measured_on") or r.get("board")), cell(r.get("reason"))]
        out.append(f'<tr data-status="{esc(str(r.get("status")))}" data-workload="generate">'
                   + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    gbest = best[best["workload"] == "generate"] if "workload" in best else best.iloc[0:0]
    out.append('<h3 id="generative-best">Fastest decode per target, model and test</h3>'
               '<div class="scroll"><table id="generative-best-table"><thead><tr><th>target'
               "</th><th>model</th><th>test</th><th>fastest decode</th><th class=num>tg tok/s"
               "</th><th>runner-up</th><th>clearly faster</th><th>fastest prefill</th>"
               "<th class=num>pp tok/s</th></tr></thead><tbody>")
    for b in gbest.to_dict(orient="records"):
        test = f"pp{cell(b.get('n_prompt'))} tg{cell(b.get('n_gen'))} @ d{cell(b.get('n_depth'))}"
        t = "auto" if num(b.get("n_threads")) is None else fmt(b.get("n_threads"))
        cf = b.get("clearly_faster")
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            cell(b.get("target")), cell(b.get("model")), test,
            esc(f"{b.get('backend')} {b.get('precision')} t{t}"),
            rate(b.get("tg_median_ts"), b.get("tg_stddev_ts")), cell(b.get("runner_up")),
            {True: "yes", False: "no (repetitions overlap)"}.get(cf, "—")
            if isinstance(cf, bool) else "—",
            cell(b.get("best_prefill")), cell(b.get("best_prefill_pp_median_ts")))) + "</tr>")
    if not len(gbest):
        out.append('<tr><td colspan="9" class="muted">no generative job ran</td></tr>')
    out.append("</tbody></table></div></section>")
    return "".join(out)


__all__ = ["BEST_COLUMNS", "COLUMNS", "GEN_COLUMNS", "GenJob", "GenerateGrid", "Job",
           "SweepReport", "SweepSpec", "SweepStore", "best_frame", "load_sweep", "results_frame",
           "run_sweep"]

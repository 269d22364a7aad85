"""The sweep's results store and the frames read from it.

Every result goes into the **store** the moment it arrives: an SQLite database (stdlib) with
one row per job — its unique job key, its coordinates, the status and the whole RunRecord as
JSON. One row is one committed transaction, so a killed driver leaves a consistent store, and
the job key is the primary key, so ``--resume`` skips finished jobs and can never add a
second row for one. (A Parquet file cannot be appended to in place: it would need one file
per result or a rewrite per result, and no uniqueness check.)

:func:`results_frame` reads it as one row per job (:data:`COLUMNS`), :func:`best_frame` the
fastest configuration per model and target (:data:`BEST_COLUMNS`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeprof.core.artifact import created_utc
from edgeprof.core.errors import UserError
from edgeprof.core.results import BenchmarkResult

if TYPE_CHECKING:
    from edgeprof.optimize.sweep_spec import Job

#: what a generative job's row adds to :data:`COLUMNS` (llama-bench's figures: ``pp`` is the
#: prefill test, ``tg`` the decode test, ``*_ts`` tokens per second over the repetitions)
GEN_COLUMNS = ["n_threads", "n_prompt", "n_gen", "n_depth", "repetitions", "pp_median_ts",
               "pp_stddev_ts", "pp_min_ts", "pp_max_ts", "tg_median_ts", "tg_stddev_ts",
               "tg_min_ts", "tg_max_ts", "ttft_ms", "tpot_ms", "model_size", "build_commit"]
#: the DataFrame the HTML report renders (one row per job)
#: the figure a job is ranked by on its target (``target_*``): the measurement where a board
#: of the target (or a worker started with ``--emulate``) or, for target ``host``, this
#: machine measured it; otherwise the board's prediction (predict's number, interval and
#: label), or none where the predictor refuses the configuration (``target_source`` says why)
TARGET_COLUMNS = ["target_ms", "target_low_ms", "target_high_ms", "target_provenance",
                  "target_source"]
#: the DataFrame the HTML report renders (one row per job); ``median_ms``/``ci_*``/
#: ``provenance`` are the measurement, on the machine ``measured_on`` names
COLUMNS = ["model", "target", "backend", "precision", "batch_size", "device", "status",
           "reason", "median_ms", "ci_low_ms", "ci_high_ms", "provenance", "board", "measured_on",
           *TARGET_COLUMNS, "attempts", "job_key", "workload", *GEN_COLUMNS]
#: a generative row: ``precision`` is the format; the tensor figures are empty, the ``tg_`` /
#: ``pp_`` ones filled (runner-up and ``clearly_faster`` by decode: the best's slowest
#: repetition beats the runner-up's fastest)
BEST_COLUMNS = ["model", "target", "backend", "precision", "batch_size", *TARGET_COLUMNS[:4],
                "median_ms", "ci_low_ms", "ci_high_ms", "board", "measured_on", "runner_up",
                "runner_up_target_ms", "runner_up_median_ms", "clearly_faster", "ok_jobs",
                "workload", "n_threads",
                "n_prompt", "n_gen", "n_depth", "tg_median_ts", "tg_stddev_ts", "pp_median_ts",
                "pp_stddev_ts", "ttft_ms", "tpot_ms", "runner_up_tg_median_ts", "best_prefill",
                "best_prefill_pp_median_ts"]


# ------------------------------------------------------------------------ the store
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
                 record.status, record.reason, board, attempts, created_utc(),
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
            rows.append(ROWS[rec.get("kind", "tensor")](r, rec))  # the record's own kind
    finally:
        if own:
            s.close()
    return pd.DataFrame(rows, columns=COLUMNS)


def _tensor_row(r: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    """One tensor job's row: its BenchmarkResult's statistics and its figure on the target."""
    stats = rec.get("stats") or {}
    measured_on = record_measured_on(rec)
    return {"model": r["model"], "target": r["target"], "backend": r["backend"],
            "precision": r["precision"],
            "batch_size": r["batch_size"] if r["batch_size"] is not None
            else rec.get("batch_size"), "device": _device_of(rec),
            "status": r["status"], "reason": r["reason"],
            "median_ms": stats.get("median_ms"), "ci_low_ms": stats.get("ci_low_ms"),
            "ci_high_ms": stats.get("ci_high_ms"),
            "provenance": rec.get("provenance", "measured") if stats else None,
            "board": r["board"], "measured_on": measured_on,
            **_target_figure(r, rec, stats, measured_on),
            "attempts": r["attempts"], "job_key": r["job_key"], "workload": "tensor"}


def _device_of(rec: dict[str, Any], g: dict[str, Any] | None = None) -> str:
    """The processor a job ran on (``[run] device``): its request's, else its record's;
    cpu for a store written before sweeps named one."""
    for d in ((rec.get("config") or {}).get("device"), (g or {}).get("device"),
              rec.get("device")):
        if d:
            return str(d)
    return "cpu"


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
    return {
        **dict.fromkeys(COLUMNS),  # every column, in COLUMNS' order
        "model": r["model"], "target": r["target"], "backend": r["backend"],
        "precision": r["precision"], "device": _device_of(rec, g),
        "status": r["status"], "reason": r["reason"],
        "provenance": (g.get("provenance") or rec.get("provenance") or "measured")
        if ok else None,
        "board": r["board"], "measured_on": _where(rec) if ok else None,
        "attempts": r["attempts"], "job_key": r["job_key"], "workload": "generate",
        "n_threads": g.get("n_threads") or shape.get("n_threads"),
        "n_prompt": g.get("n_prompt") or shape.get("n_prompt"),
        "n_gen": g.get("n_gen") or shape.get("n_gen"),
        "n_depth": g.get("n_depth", shape.get("n_depth")),
        "repetitions": g.get("repetitions") or None,
        **{f"{test}_{stat}_ts": fig(name, stat) for test, name in (
            ("pp", "prefill_tokens_per_s"), ("tg", "decode_tokens_per_s"))
           for stat in ("median", "stddev", "min", "max")},
        "ttft_ms": fig("ttft_ms", "median"), "tpot_ms": fig("tpot_ms", "median"),
        "model_size": g.get("model_size"), "build_commit": g.get("build_commit") or None}


def record_measured_on(rec: dict[str, Any]) -> str | None:
    return _where(rec) if rec.get("stats") else None


def _where(rec: dict[str, Any]) -> str | None:
    """Where a record was measured: a board (or an emulating worker) says which; a job of a
    sweep without a fleet (board ``local``, including stores written when such jobs were
    said to emulate their target) was measured on this host, whatever its target."""
    from edgeprof.profilers.measure.fleet import measured_on

    fleet = (rec.get("extra") or {}).get("fleet") or {}
    if fleet.get("board") == "local":
        fp = fleet.get("fingerprint") or {}
        who = ", ".join(str(v) for v in (fp.get("hostname"), fp.get("cpu_model")) if v)
        return f"measured on this host (local{': ' + who if who else ''})"
    return measured_on(rec)


def _target_figure(r: dict[str, Any], rec: dict[str, Any], stats: dict[str, Any],
                   measured_on: str | None) -> dict[str, Any]:
    """The job's figure on its target (:data:`TARGET_COLUMNS`)."""
    none = dict.fromkeys(TARGET_COLUMNS)
    if r["status"] != "ok" or not stats:
        return none
    extra = rec.get("extra") or {}
    tf = extra.get("target_figure")
    if tf is not None:  # a prediction, made when the job was measured elsewhere
        return {"target_ms": tf.get("value_ms"), "target_low_ms": tf.get("low_ms"),
                "target_high_ms": tf.get("high_ms"), "target_provenance": tf.get("provenance"),
                "target_source": tf.get("source")}
    fleet = extra.get("fleet") or {}
    if (fleet and fleet.get("board") != "local") or r["target"] == "host":
        return {"target_ms": stats.get("median_ms"), "target_low_ms": stats.get("ci_low_ms"),
                "target_high_ms": stats.get("ci_high_ms"),
                "target_provenance": rec.get("provenance", "measured"),
                "target_source": measured_on or "measured on this host"}
    return dict(none, target_source=f"no board figure: measured on this host only, by a sweep "
                                    f"that did not yet predict {r['target']}; run it again")


def best_frame(frame):
    """The best ok configuration per model and target, each workload by its own figure
    (:data:`BESTS`), with the runner-up and whether the best is clearly faster."""
    import pandas as pd

    rows = [row for workload, best in BESTS.items()
            for row in best(frame[(frame["workload"] == workload) & (frame["status"] == "ok")])]
    return pd.DataFrame(rows, columns=BEST_COLUMNS)


def _best_tensor(ok) -> list[dict[str, Any]]:
    """Per (model, target): the best by its figure on the target (``target_ms``: the
    best-founded figure first, then the fastest), with the runner-up and whether the best is
    clearly faster (its interval's upper end below the runner-up's lower end)."""
    import pandas as pd

    from edgeprof.core.provenance import sort_key

    ok = ok[ok["target_ms"].notna()]
    rows = []
    for (model, target), g in ok.groupby(["model", "target"], sort=False):
        # the best-founded figure first (measured, predicted, estimated, uncalibrated), then
        # the fastest: the order recommend and optimize rank by
        order = sorted(range(len(g)), key=lambda i: sort_key(g.iloc[i]["target_provenance"],
                                                             g.iloc[i]["target_ms"]))
        g = g.iloc[order]
        best = g.iloc[0]
        row = {k: best[k] for k in ("model", "target", "backend", "precision", "batch_size",
                                    *TARGET_COLUMNS[:4], "median_ms", "ci_low_ms",
                                    "ci_high_ms", "board", "measured_on")}
        row["ok_jobs"] = len(g)
        if len(g) > 1:
            ru = g.iloc[1]
            row["runner_up"] = f"{ru['backend']} {ru['precision']} b{ru['batch_size']}"
            row["runner_up_target_ms"] = ru["target_ms"]
            row["runner_up_median_ms"] = ru["median_ms"]
            hi, lo = best["target_high_ms"], ru["target_low_ms"]
            row["clearly_faster"] = bool(pd.notna(hi) and pd.notna(lo) and hi < lo)
        else:
            row.update(runner_up=None, runner_up_target_ms=None, runner_up_median_ms=None,
                       clearly_faster=None)
        row["workload"] = "tensor"
        rows.append(row)
    return rows


def _gen_label(r) -> str:
    t = "auto" if r["n_threads"] is None or r["n_threads"] != r["n_threads"] else \
        int(r["n_threads"])
    return f"{r['backend']} {r['precision']} t{t}"


def _best_generative(ok) -> list[dict[str, Any]]:
    """Per (model, target) and test shape (n_prompt, n_gen, n_depth: rates at different
    depths or lengths are not comparable): the fastest decode (``tg_median_ts``) with its
    runner-up, and the fastest prefill of the same jobs in its own columns
    (``best_prefill``, ``best_prefill_pp_median_ts``): decode is what a chat's speed is,
    prefill what its first-token wait is; the two may pick different configurations."""
    import pandas as pd

    ok = ok[ok["tg_median_ts"].notna()]
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


#: per workload, the row of a stored record (by its kind) and the best rows of its jobs
ROWS = {"tensor": _tensor_row, "generate": _generative_row}
BESTS = {"tensor": _best_tensor, "generate": _best_generative}

__all__ = ["BESTS", "BEST_COLUMNS", "ROWS", "COLUMNS", "GEN_COLUMNS", "SweepStore", "TARGET_COLUMNS",
           "best_frame", "results_frame"]

"""The fleet's commands: ``edgeprof worker`` (on a board), ``edgeprof fleet`` (list the
boards), ``edgeprof sweep`` (a grid of measurements), and the ``--fleet`` options that
``profile`` shares. Parsing and printing only: the work is in
``edgeprof.profilers.measure.fleet`` and ``edgeprof.optimize.sweep``."""

from __future__ import annotations

import json
import sys
from typing import Any

from edgeprof.cli.common import device, make_console, non_negative_int, positive_float, positive_int
from edgeprof.cli.render import fmt_number, si
from edgeprof.core.errors import UserError


def add_tls_args(sp) -> None:
    """TLS to the scheduler (distributed.security.Security), or the explicit opt-out."""
    sp.add_argument("--tls-ca", metavar="FILE", help="CA certificate the scheduler's "
                    "certificate is signed with (also $EDGEPROF_FLEET_TLS_CA)")
    sp.add_argument("--tls-cert", metavar="FILE", help="this machine's certificate "
                    "(also $EDGEPROF_FLEET_TLS_CERT)")
    sp.add_argument("--tls-key", metavar="FILE", help="its private key "
                    "(also $EDGEPROF_FLEET_TLS_KEY)")
    sp.add_argument("--insecure", action="store_true", default=None,
                    help="allow a scheduler beyond loopback without TLS (a network you trust)")


def add_fleet_flag(sp) -> None:
    """``--fleet SCHEDULER`` and the TLS options, for commands that measure."""
    sp.add_argument("--fleet", metavar="SCHEDULER",
                    help="measure on a board of the target connected to this Dask scheduler "
                         "(HOST:PORT; also $EDGEPROF_FLEET)")
    add_tls_args(sp)


def quiet_distributed() -> None:
    """distributed logs a lost connection with a traceback; edgeprof says it in one line."""
    import logging

    try:
        import distributed  # noqa: F401 - its import configures its loggers; then quiet them
    except ImportError:
        raise UserError("the fleet needs Dask distributed: pip install 'edgeprof[device]' "
                        "(a board) or 'edgeprof[all]'") from None

    for name in ("distributed", "distributed.client", "distributed.comm", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def fleet_spec(args, address: str | None = None):
    """The FleetSpec the arguments name (``--fleet`` or $EDGEPROF_FLEET), or None."""
    from edgeprof.profilers.measure.fleet import FleetSpec

    quiet_distributed()

    return FleetSpec.from_options(address or getattr(args, "fleet", None),
                                  tls_ca=args.tls_ca, tls_cert=args.tls_cert,
                                  tls_key=args.tls_key, insecure=args.insecure)


# ----------------------------------------------------------------------------- worker
def cmd_worker(args) -> int:
    from edgeprof.api import target_registry
    from edgeprof.profilers.measure.fleet import serve_worker

    spec = fleet_spec(args, args.scheduler)
    if args.target == "host":
        raise UserError("a board serves a target descriptor (raspberry_pi_4, jetson_nano ...), "
                        "not 'host'; run 'edgeprof targets' to list them")
    target = target_registry(args.targets_dir, args.plugins).get(args.target)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    return serve_worker(spec, target, name=args.name, emulate=args.emulate, say=say)


# ------------------------------------------------------------------------------ fleet
def cmd_fleet(args) -> int:
    from edgeprof.profilers.measure.fleet import list_boards

    spec = fleet_spec(args, args.scheduler)
    client = spec.connect()
    try:
        boards = list_boards(client)
    finally:
        client.close()
    if args.json:
        print(json.dumps(boards, indent=2, default=str))
        return 0
    from rich.table import Table

    table = Table("board", "target", "state", "cpu", "arch", "cores", "GHz", "RAM",
                  "runtimes", "edgeprof", title=f"{len(boards)} board(s) on {spec.url}",
                  title_justify="left")
    for b in boards:
        fp = b["fingerprint"]
        freq = fp.get("frequency_hz")
        target = ", ".join(b["targets"]) or "-"
        if fp.get("emulating"):
            target += " (emulated)"
        runtimes = ", ".join(f"{k} {v}" for k, v in sorted((fp.get("runtimes") or {}).items())
                             if k not in ("numpy", "distributed", "onnx"))
        table.add_row(b["name"], target, b["state"] + (f" ({b['jobs']})" if b["jobs"] else ""),
                      str(fp.get("cpu_model", "?")), str(fp.get("arch", "?")),
                      fmt_number(fp.get("physical_cores")),
                      fmt_number(freq / 1e9) if freq else "-",
                      si(fp.get("ram_bytes"), "B") if fp.get("ram_bytes") else "-",
                      runtimes or "-", str(fp.get("edgeprof_version", "not edgeprof")))
    make_console().print(table)
    return 0


# ------------------------------------------------------------------------------ sweep
def cmd_sweep(args) -> int:
    from edgeprof.optimize.sweep import run_sweep

    spec = fleet_spec(args)
    overrides: dict[str, Any] = {"runs": args.runs, "min_time": args.min_time,
                                 "max_time": args.max_time, "warmup": args.warmup,
                                 "timeout": args.timeout, "retries": args.retries,
                                 "device": args.device}
    err = make_console(stderr=True)
    bar = None
    task = None
    if not args.json:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        bar = Progress(TextColumn("[bold]sweep[/bold]"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                       TextColumn("{task.description}"), console=err, transient=False)

    def progress(done: int, total: int, row: dict | None) -> None:
        nonlocal task
        if bar is None:
            return
        if task is None:
            task = bar.add_task("", total=total, completed=done)
            bar.start()
        desc = ""
        if row is not None:
            desc = f"{row['job']}: {row['status']}"
            if row["status"] != "ok" and row.get("reason"):
                bar.console.print(f"{row['job']}: {row['status']}: {row['reason']}",
                                  markup=False, highlight=False)
        bar.update(task, completed=done, total=total, description=desc)

    def step(job: str, line: str) -> None:  # the latest step of a job being measured
        if bar is not None and task is not None:
            bar.update(task, description=f"{job}: {line}")

    try:
        report = run_sweep(args.sweep, fleet=spec, resume=args.resume, overrides=overrides,
                           progress=progress, steps=step, plugins=args.plugins,
                           targets_dir=args.targets_dir,
                           say=None if args.json else (lambda m: err.print(m, markup=False)))
    finally:
        if bar is not None:
            bar.stop()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False, default=str))
        return report.exit_code
    from rich.table import Table

    best = report.best.to_dict(orient="records")
    tensor = [r for r in best if r.get("workload") != "generate"]
    generative = [r for r in best if r.get("workload") == "generate"]
    stamp = f"{report.ran} job(s) run, {report.skipped} resumed, {report.wall_s:.1f} s"
    out = make_console()
    if tensor or not generative:
        # ranked by the figure on the target (measured on a board of it, else predicted for
        # it); the host's own median stays beside it, under the machine that measured it
        table = Table("model", "target", "best", "on target ms", "interval ms", "runner-up",
                      "clearly faster", "measured (ms, where)",
                      title=f"best configuration per model and target ({stamp})",
                      title_justify="left")
        for r in tensor:
            table.add_row(str(r["model"]), str(r["target"]),
                          f"{r['backend']} {r['precision']} b{_count(r['batch_size'])}",
                          f"{fmt_number(r.get('target_ms'))} ({r.get('target_provenance') or '-'})",
                          f"{fmt_number(r.get('target_low_ms'))}–"
                          f"{fmt_number(r.get('target_high_ms'))}",
                          str(r["runner_up"] or "-"),
                          {True: "yes", False: "no (intervals overlap)"}.get(
                              r["clearly_faster"], "-"),
                          f"{fmt_number(r['median_ms'])}, {r['measured_on'] or '-'}")
        out.print(table)
    if generative:
        table = Table("model", "target", "test", "fastest decode", "tg tok/s", "pp tok/s",
                      "runner-up", "clearly faster", "fastest prefill", "pp tok/s ",
                      "measured on",
                      title=f"fastest decode per generative model, target and test ({stamp})",
                      title_justify="left")
        for r in generative:
            table.add_row(str(r["model"]), str(r["target"]),
                          f"pp{_count(r['n_prompt'])} tg{_count(r['n_gen'])} "
                          f"d{_count(r['n_depth'])}",
                          f"{r['backend']} {r['precision']} t{_count(r['n_threads'])}",
                          _rate(r["tg_median_ts"], r["tg_stddev_ts"]),
                          _rate(r["pp_median_ts"], r["pp_stddev_ts"]),
                          str(r["runner_up"] or "-"),
                          {True: "yes", False: "no (repetitions overlap)"}.get(
                              r["clearly_faster"], "-"),
                          str(r["best_prefill"] or "-"), fmt_number(r["best_prefill_pp_median_ts"]),
                          str(r["measured_on"] or "-"))
        out.print(table)
    counts = report.frame["status"].value_counts().to_dict()
    out.print(", ".join(f"{v} {k}" for k, v in sorted(counts.items())), markup=False)
    err.print(f"results store: {report.store}; tables: "
              + ", ".join(str(f) for f in report.files), markup=False)
    return report.exit_code


def _count(v: Any) -> str:
    """An integer cell that pandas may hold as a float (NaN: none)."""
    if v is None or (isinstance(v, float) and v != v):
        return "auto" if v is None else "-"
    return str(int(v))


def _rate(median: Any, sd: Any) -> str:
    if median is None or (isinstance(median, float) and median != median):
        return "-"
    return fmt_number(median) + ("" if sd is None or sd != sd else f" ± {fmt_number(sd)}")


# ------------------------------------------------------------------------ the parsers
def add_parsers(sub, common) -> None:
    w = sub.add_parser("worker", parents=[common],
                       help="serve this board to a Dask scheduler: measure artifacts for its "
                            "target")
    w.add_argument("scheduler", help="the scheduler's address, HOST:PORT (tls://HOST:PORT)")
    w.add_argument("--target", "-t", required=True,
                   help="the target descriptor this board is (e.g. raspberry_pi_4)")
    w.add_argument("--name", help="the board's name in the fleet (default HOSTNAME-TARGET)")
    w.add_argument("--emulate", action="store_true",
                   help="serve even when this machine contradicts the descriptor (its CPU "
                        "architecture); every result then says it was measured on this host")
    add_tls_args(w)
    w.set_defaults(func=cmd_worker)

    f = sub.add_parser("fleet", parents=[common],
                       help="list the boards connected to a Dask scheduler")
    f.add_argument("scheduler", help="the scheduler's address, HOST:PORT")
    add_tls_args(f)
    f.set_defaults(func=cmd_fleet)

    s = sub.add_parser("sweep", parents=[common],
                       help="measure a grid (models x targets x backends x precisions, and "
                            "generative jobs: formats x threads x prompt/gen lengths x depths) "
                            "on the fleet, or here one job at a time in-process as profile "
                            "measures; results go to an SQLite store")
    s.add_argument("sweep", metavar="SWEEP.toml", help="the grid and its settings")
    s.add_argument("--resume", action="store_true",
                   help="continue a sweep whose store already holds results: skip finished "
                        "jobs")
    s.add_argument("--runs", type=positive_int, help="minimum timed runs per job")
    s.add_argument("--min-time", type=positive_float, metavar="S",
                   help="minimum timed seconds per job")
    s.add_argument("--max-time", type=positive_float, metavar="S", help="cap on timed seconds")
    s.add_argument("--warmup", type=positive_int, help="fixed warm-up runs (default adaptive)")
    s.add_argument("--timeout", type=positive_float, metavar="S",
                   help="per-job timeout, from its start on a board (here: each job then runs "
                        "in an isolated worker, as profile --timeout)")
    s.add_argument("--device", type=device, default=None,
                   help="the processor the jobs run on, here or on each board: cpu, cuda or "
                        "cuda:N (the file's [run] device; generative jobs: cpu or cuda)")
    s.add_argument("--retries", type=non_negative_int,
                   help="times a job is submitted again after its board died (default 2)")
    add_fleet_flag(s)
    s.set_defaults(func=cmd_sweep)


# ---------------------------------------------------------------------------- profile
def profile_fleet(args):
    """The fleet ``profile`` measures on: ``--fleet``, else $EDGEPROF_FLEET for a target
    that is not this host (a generative model without --target: none); None: measure
    here."""
    import os

    from edgeprof.profilers.measure.fleet import FLEET_ENV

    if not args.fleet and (not os.environ.get(FLEET_ENV) or args.target in (None, "host")):
        return None
    return fleet_spec(args)


def print_boards(report, console) -> None:
    """Where each run was measured, when a board of the fleet measured it."""
    from edgeprof.profilers.measure.fleet import measured_on

    for r in report.runs:
        where = measured_on(r.benchmark)
        if where:
            fleet = r.benchmark.extra["fleet"]
            fp = fleet.get("fingerprint") or {}
            console.print(f"{r.backend} {r.requested_precision}: {where}; latency on "
                          f"{report.target.id} is "
                          f"{'measured' if r.summary and r.summary.on_host else 'estimated'} "
                          f"(board {fleet.get('board')}: {fp.get('arch')}, "
                          f"{fp.get('physical_cores')} cores, edgeprof "
                          f"{fp.get('edgeprof_version')})", markup=False)

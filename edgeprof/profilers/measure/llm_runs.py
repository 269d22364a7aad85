"""Generative runs for the commands that measure them (``profile llm:X``, ``calibrate`` with a
generative backend, a sweep's generative jobs): the runner ``profile`` chooses — this process,
an isolated worker, or a board of the target's fleet — and the records as a generative
profile's runs, each saying where it was measured.

Where a run was measured decides whose figures they are:

* here (inline or in an isolated worker): this host's;
* on a board of the fleet that *is* the target (a worker started without ``--emulate``): the
  target's own, ``measured``, with the board's name (``measured_on``, ``board``);
* on an emulating worker: the machine that worker runs on, not the target's; each run carries
  a warning saying so, and the target's figure stays predicted.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from edgeprof.core.errors import UserError

Progress = Callable[[str], None]


def runner_phrase(runner: Any, target: Any = None) -> str:
    """Where ``runner`` measures, for a progress line (empty for this process)."""
    from edgeprof.profilers.measure.runners import IsolatedRunner

    if getattr(runner, "name", None) == "remote":
        return f" on the {getattr(runner, 'target', None) or getattr(target, 'id', '?')} fleet"
    return " in a worker process" if isinstance(runner, IsolatedRunner) else ""


def board_of(record: Any) -> dict[str, Any] | None:
    """The fleet board a record (or its dict) was measured on (its ``extra["fleet"]``)."""
    extra = record.get("extra") if isinstance(record, dict) else getattr(record, "extra", None)
    board = (extra or {}).get("fleet")
    return board if isinstance(board, dict) and board else None


def on_target(board: dict[str, Any] | None, target_id: str | None) -> bool:
    """Whether ``board`` is a real board of ``target_id`` (a fleet worker that does not
    emulate it): its measurement is then the target's own figure."""
    return bool(board and target_id and not board.get("emulating")
                and board.get("board") not in (None, "local")
                and board.get("target") == target_id)


def run_dicts(record: Any) -> list[dict[str, Any]]:
    """A :class:`~edgeprof.core.results.GenerativeRunRecord` as a profile's runs, one per
    depth; a board's run says where (``measured_on``: one line, ``board``: the fleet's
    record of it), and an emulating worker's carries the warning that its figures are that
    host's, not the target's. Each carries the run's conditions with a tensor record's
    keys: ``config`` (what was asked: isolate, timeout_s, threads ...), ``environment``
    (runtime, runtime_version, threads and ``conditions``: process inline or isolated ...)
    and ``notes`` (e.g. the isolated worker's pid)."""
    from edgeprof.profilers.measure.fleet import measured_on

    board = board_of(record)
    line = measured_on(record)
    runs = []
    for r in record.records:
        if line and board and board.get("emulating"):
            warning = f"{line}: this host's figures, not the target's"
            if warning not in r.warnings:
                r.warnings.append(warning)
        run = r.to_dict()
        if board:
            run["measured_on"], run["board"] = line, board
        run["config"] = dict(getattr(record, "config", None) or {})
        run["environment"] = dict(getattr(record, "environment", None) or {})
        run["notes"] = list(getattr(record, "notes", None) or [])
        runs.append(run)
    return runs


def measure_pairs(model: Any, pairs: Any, classes: dict[str, type], config: Any, *,
                  registry: Any, target: Any = None, say: Progress | None = None,
                  isolate: bool = False, timeout_s: float | None = None, fleet: Any = None,
                  plugins: Any = None, workdir: Any = None) -> list[dict[str, Any]]:
    """``measure()`` of one generative request per (backend, format) of ``pairs`` on the
    runner :func:`~edgeprof.profilers.measure.choice.chosen_runner` chooses; the profile's
    runs (:func:`run_dicts`)."""
    from edgeprof.core.requests import MeasureRequest
    from edgeprof.profilers.measure.measure import measure
    from edgeprof.profilers.measure.choice import chosen_runner

    say = say or (lambda msg: None)
    runs: list[dict[str, Any]] = []
    with chosen_runner(target, fleet=fleet, isolate=isolate, timeout_s=timeout_s,
                           progress=say, registry=registry) as runner:
        for backend, fmt in pairs:
            say(f"measuring {backend} {fmt}{runner_phrase(runner, target)}")
            request = MeasureRequest.for_generation(
                classes[backend], model, fmt, config, timeout_s=timeout_s, isolate=isolate,
                plugins_file=plugins, workdir=workdir)
            runs.extend(run_dicts(measure(request, runner, registry=registry)))
    return runs


def calibration_subject(records: list[Any], target_id: str | None
                        ) -> tuple[str, dict[str, Any] | None, list[Any]]:
    """Which machine a calibration fitted to ``records`` (``GenerativeRunRecord`` s)
    describes: ``("here", None, records)`` for runs on this host; ``("board", fleet,
    records)`` when real boards of ``target_id`` measured them (the records of emulating
    workers among them are left out); ``("host", fleet, records)`` when only emulating
    workers on this machine measured them (their figures are this host's). UserError when
    an emulating worker on another machine measured them: its tokens/s describe neither."""
    boards = [board_of(r) for r in records]
    if not any(boards):
        return "here", None, list(records)
    real = [r for r, b in zip(records, boards) if on_target(b, target_id)]
    if real:
        return "board", board_of(real[-1]), real
    here = socket.gethostname()
    away = sorted({f"{b.get('board')} on {(b.get('fingerprint') or {}).get('hostname')}"
                   for b in boards if b and (b.get('fingerprint') or {}).get("hostname") != here})
    if away:
        raise UserError(f"the {target_id} boards that measured ({', '.join(away)}) emulate "
                        f"{target_id} on another machine: their tokens/s describe neither a "
                        f"{target_id} nor this host; connect a real {target_id} board (edgeprof "
                        "worker without --emulate), or calibrate that machine on it")
    return "host", next(b for b in reversed(boards) if b), list(records)


#: the board's fingerprint fields a calibration keeps (as a tensor calibration's)
FINGERPRINT_FIELDS = ("hostname", "cpu_model", "arch", "physical_cores", "frequency_hz",
                      "ram_bytes", "os")


def measured_where(subject: str, board: dict[str, Any], target: Any) -> str:
    """The machine a calibration's runs were measured on, as its note and samples name it:
    ``subject`` is :func:`calibration_subject`'s, ``board`` the fleet board that measured."""
    fp = board.get("fingerprint") or {}
    tid = getattr(target, "id", target)
    if subject == "board":
        return f"board {board.get('board')} ({tid}: {fp.get('cpu_model')}, {fp.get('arch')})"
    return (f"this host (worker {board.get('board')}, emulating {tid}: "
            f"{fp.get('cpu_model')}, {fp.get('arch')})")


def label_calibration(cal: dict[str, Any], subject: str, board: dict[str, Any], target: Any,
                      *, left_out: int = 0) -> dict[str, Any]:
    """Say in an LLM calibration (``calibrate_llm_host``'s dict, fitted with ``where=``
    :func:`measured_where` to runs a fleet board measured) which machine measured it: its
    ``fingerprint`` (the board, whether it emulated, its processor) and what its figures are.
    ``subject`` is :func:`calibration_subject`'s: ``board`` (a real board of ``target``: the
    board's own calibration) or ``host`` (an emulating worker on this machine: this
    host's)."""
    fp = board.get("fingerprint") or {}
    tid = getattr(target, "id", target)
    cal["fingerprint"] = {"board": board.get("board"), "target": board.get("target"),
                          "emulating": bool(board.get("emulating")),
                          **{k: fp.get(k) for k in FINGERPRINT_FIELDS if fp.get(k) is not None}}
    if subject == "board":
        what = "through the fleet: the board's own figures"
        if left_out:
            what += (f"; {left_out} run(s) measured on emulating workers are left out (their "
                     f"figures are not a {tid}'s)")
    else:
        what = f"this host's calibration, not a {tid}'s"
    cal["note"] = f"{cal.get('note')}; {what}"
    return cal


__all__ = ["FINGERPRINT_FIELDS", "board_of", "calibration_subject",
           "label_calibration", "measure_pairs", "measured_where",
           "on_target", "run_dicts", "runner_phrase"]

"""The isolated worker: the child side of
:class:`~edgeprof.profilers.measure.runners.IsolatedRunner`.

The runner starts ``python -c`` with a short boot script (SIGINT and SIGTERM exit quietly,
with status 130 and 143, before anything is imported; ``sys.path`` is the parent's) that calls
:func:`main` with two arguments: the file descriptor to write the answer to and the parent's
pid. The worker

1. arranges to die with its parent (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, and a thread
   polling the parent's pid as a fallback elsewhere), so a killed ``edgeprof`` leaves no
   orphan;
2. reads the request (``MeasureRequest.to_dict()``, JSON) from stdin and runs it with
   :class:`~edgeprof.profilers.measure.runners.InlineRunner` (the plugins file travels in the
   request, so a plugin's backend is found here as in the parent);
3. while it runs, writes each progress step of a generative run as one JSON line
   (``{"progress": text}`` and a newline) on the same descriptor;
4. writes one JSON message: ``{"result": record}``, ``{"failure": {"phase", "error",
   "partial"}}`` (a :class:`~edgeprof.profilers.measure.harness.MeasureFailure`) or
   ``{"error": ...}`` (anything else raised, a ``UserError`` included), and exits at once.

It makes no status: the parent's ``measure()`` does, from what it raised.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` (our parent) goes away."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the poll remains
            pass
    if os.getppid() != parent_pid:  # the parent went before the request was even read
        os._exit(1)

    def poll() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=poll, name="edgeprof-parent-watch", daemon=True).start()


def serve(wire: dict, progress=None) -> dict:
    """Run one request (its steps to ``progress``); the message for the parent."""
    from edgeprof.core.requests import MeasureRequest
    from edgeprof.profilers.measure.harness import MeasureFailure
    from edgeprof.profilers.measure.runners import InlineRunner, encode_error

    note = f"ran in an isolated worker process (pid {os.getpid()})"
    try:
        record = InlineRunner(process="isolated", progress=progress).run(
            MeasureRequest.from_dict(wire))
        record.notes.append(note)
        return {"result": record.to_dict()}
    except MeasureFailure as f:
        partial = None
        if f.partial is not None:
            f.partial.notes.append(note)
            partial = f.partial.to_dict()
        return {"failure": {"phase": f.phase, "error": encode_error(f.error),
                            "partial": partial}}
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the parent decides what it means
        return {"error": encode_error(e)}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    fd, parent_pid = int(argv[0]), int(argv[1])
    die_with_parent(parent_pid)
    wire = json.loads(sys.stdin.read())
    out = os.fdopen(fd, "wb")  # buffered: a large answer is written whole

    def progress(msg: str) -> None:  # one line each, whole: the parent reads lines
        try:
            out.write((json.dumps({"progress": str(msg)}) + "\n").encode())
            out.flush()
        except OSError:  # the parent stopped reading: the answer will say so
            pass

    message = serve(wire, progress)
    data = json.dumps(message).encode()
    with out:
        out.write(data)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: some runtimes crash in their atexit handlers


__all__ = ["die_with_parent", "main", "serve"]

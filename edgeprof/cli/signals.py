"""Ctrl-C and SIGTERM on the command line: one line, exit 130 / 143, nothing half-written;
and a closed output pipe (``edgeprof ... | head -1``): quiet, exit 141.

While a command runs, edgeprof's own handlers turn SIGINT and SIGTERM into
:class:`Interrupted`, a ``KeyboardInterrupt``: ``finally`` blocks and cleanup written for
Ctrl-C (the staged ``--out`` folder, worker processes) run for SIGTERM too, and
``except Exception`` cannot swallow it.

Python cannot raise out of a gc callback, a ``__del__`` or a weakref callback: an exception
there is printed as "Exception ignored" and dropped. JAX registers a gc callback that runs
long enough to catch about a third of all Ctrl-Cs, which then vanished and the run finished
with exit 0. :func:`handling_signals` hooks ``sys.unraisablehook``: an :class:`Interrupted`
dropped there is delivered again a moment later, in ordinary code.

Python ignores SIGPIPE, so a write to a pipe whose reader has gone (``head`` has read its
line) raises ``BrokenPipeError`` wherever the output is flushed: in a command, in rich, or
at interpreter exit ("Exception ignored ..."). :func:`output_closed` tells that case from a
broken pipe to a worker (an internal error), and :func:`end_on_closed_output` ends the
command as a Unix tool that SIGPIPE ended: nothing on stderr, exit 141 (128 + SIGPIPE).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: seconds before a dropped interrupt is delivered again (the gc callback has returned)
REDELIVER_S = 0.02


#: exit status when the reader of the output has gone: what the shell reports for a tool that
#: SIGPIPE ended (128 + 13)
CLOSED_OUTPUT_EXIT = 128 + getattr(signal, "SIGPIPE", 13)


def output_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone: a ``BrokenPipeError`` is
    then the closed output, not an internal error (a worker's pipe)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): not ours
        return False
    try:
        import select

        poller = select.poll()
    except (ImportError, AttributeError):  # no poll (Windows): trust the error
        return True
    poller.register(fd, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))


def end_on_closed_output() -> int:
    """The reader of stdout has gone: point stdout at the null device, so what is still
    buffered is dropped (not reported as "Exception ignored" at exit), and return
    :data:`CLOSED_OUTPUT_EXIT`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass
    return CLOSED_OUTPUT_EXIT


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``exit_code`` is 128 + the signal number (130, 143)."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signal.Signals(signum).name)

    @property
    def message(self) -> str:
        if self.signum == signal.SIGINT:
            return "edgeprof: interrupted"
        return f"edgeprof: interrupted ({signal.Signals(self.signum).name})"


def _on_signal(signum: int, frame) -> None:
    if isinstance(sys.exc_info()[1], Interrupted):
        return  # already unwinding from one: let the cleanup finish
    raise Interrupted(signum)


def _redeliver(signum: int) -> None:
    main = threading.main_thread()
    timer = threading.Timer(REDELIVER_S, signal.pthread_kill, (main.ident, signum))
    timer.daemon = True
    timer.start()


@contextmanager
def handling_signals() -> Iterator[None]:
    """Install the handlers (main thread only) and restore the previous ones afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    previous_hook = sys.unraisablehook

    def unraisable(info) -> None:
        if isinstance(info.exc_value, Interrupted):
            _redeliver(info.exc_value.signum)
            return
        previous_hook(info)

    for s in SIGNALS:
        signal.signal(s, _on_signal)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)

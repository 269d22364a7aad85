"""The one place a runner is chosen, for every workload and command (``profile``,
``calibrate``, a generative profile; ``measure()`` without a runner asks
:func:`~edgeprof.profilers.measure.runners.default_runner`, the same choice without a fleet):
a board of the target's fleet, else an isolated worker, else this process. Above both the
runners and the fleet (which imports the runners), so neither imports the other's chooser.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.profilers.measure.fleet import fleet_runner
from edgeprof.profilers.measure.runners import check_timeout, local_runner


def choose_runner(target: Any = None, *, fleet: Any = None, isolate: bool = False,
                  timeout_s: float | None = None, progress: Callable[[str], None] | None = None,
                  registry: Any = None):
    """A board of ``target`` on the Dask scheduler ``fleet`` (``RemoteRunner``: built here,
    loaded and timed there), else :func:`~.runners.local_runner` (an isolated worker for
    ``isolate`` or a ``timeout_s``, else this process). Each reports the run's steps to
    ``progress``."""
    if fleet is not None:
        check_timeout(timeout_s)
        if target is None:
            raise UserError("a fleet measures on a board of a target: give --target (e.g. "
                            "raspberry_pi_5)")
        return fleet_runner(fleet, target, progress=progress)
    return local_runner(isolate=isolate, timeout_s=timeout_s, progress=progress,
                        registry=registry)


@contextlib.contextmanager
def chosen_runner(target: Any = None, **how: Any) -> Iterator[Any]:
    """:func:`choose_runner`'s runner, closed on exit (a fleet's client)."""
    runner = choose_runner(target, **how)
    try:
        yield runner
    finally:
        if hasattr(runner, "close"):
            runner.close()


__all__ = ["choose_runner", "chosen_runner"]

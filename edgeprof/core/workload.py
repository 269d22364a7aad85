"""A workload: what one kind of model's run is, registered through the plugin manager.

A backend says which workload it runs (``Backend.workload``: a name). The workload owns what
differs between kinds of run, so the code that runs requests (``measure()``, the runners, the
isolated worker, a fleet board, sweeps) asks it and never tests the kind itself:

* ``describe`` — how messages name the models it runs;
* ``record_type`` — its run record (``BenchmarkResult``, ``GenerativeRunRecord``), and
  :meth:`Workload.owns`, whether a record read back (from a board, a sweep's store) is one;
* :meth:`Workload.blank_record` — the record of a run that produced nothing (a worker that
  died, a backend that raised before timing anything);
* :meth:`Workload.prepare` and :meth:`Workload.check` — defaults, then cheap checks, before
  any work (a worker is started only for a request that passes);
* :meth:`Workload.run_here` — run the request in this process (the inline runner, the
  isolated worker and a fleet board all call it);
* :meth:`Workload.run_remote` — build here and ship to a board of the fleet;
* :meth:`Workload.default_timeout_s` — an isolated worker's timeout when none is asked;
* :meth:`Workload.finish` — the conditions a finished record carries.

Built in: ``tensor`` (:mod:`edgeprof.profilers.measure.tensor`) and ``generate``
(:mod:`edgeprof.profilers.measure.generate`), each registered by the
``edgeprof_register_workloads`` hook of its module, listed in ``plugins.toml``; a third is
one new module that registers its class the same way. This module imports nothing heavy.
"""

from __future__ import annotations

from typing import Any, ClassVar

from edgeprof.core.errors import PluginError


class Workload:
    """The base a workload subclasses; see the module docstring. An instance holds no
    state: the registry keeps one per name."""

    #: the name backends give as ``Backend.workload`` (``tensor``, ``generate``)
    name: ClassVar[str] = ""
    #: how a message names the models it runs ("fixed-shape tensor models")
    describe: ClassVar[str] = ""
    #: its run record's class
    record_type: ClassVar[type] = object

    def owns(self, record: Any) -> bool:
        """Whether ``record`` is this workload's run record (a board or a sweep's store can
        hold a bare failure record of another type instead: one that never reached the
        workload)."""
        return isinstance(record, self.record_type)

    def blank_record(self, request: Any, backend_cls: Any = None) -> Any:
        """The ``failed`` record of a run of ``request`` that measured nothing."""
        raise NotImplementedError

    def unavailable_record(self, request: Any, backend_cls: Any, availability: Any) -> Any:
        """The record of a run whose runtime this host lacks (``availability``: the
        backend's :class:`~edgeprof.core.backend.Availability`)."""
        raise NotImplementedError

    def prepare(self, request: Any, backend_cls: Any) -> Any:
        """The request as it will run (defaults filled in); never raises."""
        return request

    def check(self, request: Any, backend_cls: Any) -> None:
        """Raise ``UnsupportedError`` for what the backend rules out, before any worker
        starts (the error becomes the record's status)."""

    def run_here(self, request: Any, backend_cls: Any, *, registry: Any = None,
                 process: str = "inline", progress: Any = None) -> Any:
        """Run ``request`` in this process and return its record (raise otherwise)."""
        raise NotImplementedError

    def run_remote(self, runner: Any, request: Any) -> Any:
        """Run ``request`` on a board of ``runner``'s fleet (a ``RemoteRunner``)."""
        raise NotImplementedError

    def default_timeout_s(self, request: Any) -> float:
        """Seconds an isolated worker may take when the request sets no timeout."""
        raise NotImplementedError

    def finish(self, record: Any, request: Any) -> Any:
        """``record`` with the conditions of ``request`` it must carry."""
        return record


def workload_name(backend_cls: Any) -> str:
    """The workload a backend class runs (``tensor`` unless it says otherwise)."""
    return getattr(backend_cls, "workload", "tensor") or "tensor"


def workload_of(request_or_cls: Any, registry: Any = None) -> Workload:
    """The registered workload of a request (its ``workload``, else its backend's) or of a
    backend class. ``registry``: where to look (default: the request's plugins file)."""
    name = getattr(request_or_cls, "workload", None) if not isinstance(request_or_cls, type) \
        else None
    if name is None:
        cls = request_or_cls if isinstance(request_or_cls, type) \
            else getattr(request_or_cls, "backend_type", None)
        name = workload_name(cls)
    table = getattr(registry, "workloads", None)
    if not table or name not in table:  # a registry built by hand: the default one's
        from edgeprof.core.plugins import get_registry

        table = get_registry(getattr(request_or_cls, "plugins_file", None)).workloads
    try:
        return table[name]
    except KeyError:
        raise PluginError(f"no plugin registers the workload '{name}' (known: "
                          f"{', '.join(sorted(table)) or 'none'}); add the module that "
                          "registers it to plugins.toml") from None


__all__ = ["Workload", "workload_name", "workload_of"]

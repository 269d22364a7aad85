"""All of edgeprof's hooks. A plugin is a module (or object) with functions of these names,
decorated with ``edgeprof.hookimpl``. Built-in backends, model loaders and graph readers use
the same hooks, listed in the root ``plugins.toml``.

Hooks are called through pluggy (``registry.hook.<name>(...)``), so pluggy's ordering and
wrappers apply: implementations run last-registered first (a user's plugins after the
built-ins, so before them), ``@hookimpl(tryfirst=True)`` ones before all others and
``@hookimpl(trylast=True)`` ones after; ``@hookimpl(wrapper=True)`` wraps the whole call and
can observe or change its result.

Two kinds of hooks:

* **Registration hooks** (``edgeprof_register_*``, ``edgeprof_router_rules``) return lists;
  the plugin manager merges them in call order and keeps which plugin returned what. A name
  (backend or built-in model) registered twice is settled by rank: an implementation marked
  ``tryfirst`` outranks a plain one, which outranks a ``trylast`` one; the higher rank
  *overrides* the lower (this is how a plugin replaces a built-in backend), and two
  registrations of equal rank are an error naming both plugins.
* **Answer hooks** (``firstresult=True``: ``edgeprof_load_model``, ``edgeprof_read_graph``)
  want one answer: each implementation returns None for what it does not handle, and the
  first non-None answer wins. A later-registered plugin is asked before the built-ins, so it
  can take over a format; ``tryfirst`` makes sure of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from edgeprof.core.models import ModelHandle
    from edgeprof.core.results import GraphWalk

PROJECT = "edgeprof"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


def registers(values: Any) -> Any:
    """A registration hook's implementation that returns ``values`` (a new list each call),
    for a plugin module whose hook only lists what the module defines:
    ``edgeprof_register_backends = registers([MyBackend])`` is the ``@hookimpl`` function
    returning that list. pluggy finds it by the name it is assigned to."""
    items = list(values)

    @hookimpl
    def registration() -> list[Any]:
        return list(items)

    return registration


@hookspec
def edgeprof_register_backends() -> list[type]:
    """Return backend classes (subclasses of ``edgeprof.Backend``).

    Each class names itself with its ``name`` ClassVar. To replace a backend of the same
    name (a built-in, say), return your class from an ``@hookimpl(tryfirst=True)``
    implementation; two plain registrations of one name are an error naming both plugins.
    """


@hookspec
def edgeprof_register_targets() -> list[Any]:
    """Return target sources: paths to ``.toml`` descriptor files or folders of them.

    A path may be a ``str`` or ``pathlib.Path``. Descriptors are looked up in
    ``--targets-dir`` first, then in the plugins' sources in call order (a plugin loaded
    later, or ``tryfirst``, first), then the built-ins; the first file for an id wins.
    """


@hookspec
def edgeprof_register_models() -> dict[str, Any]:
    """Return built-in models as ``{name: factory}``, usable as ``builtin:NAME``.

    A name registered twice follows the backends' rule: a ``tryfirst`` implementation
    overrides, equal ranks are an error naming both plugins.

    ``factory`` is a zero-argument callable returning ``(nn.Module, input_shapes)`` where
    ``input_shapes`` is a list of shapes including the batch dimension, or a
    ``package.module:function`` string naming such a callable (imported only when used).
    """


@hookspec
def edgeprof_router_rules() -> list[Any]:
    """Return router rules (objects with ``name`` and ``apply(context) -> list[Step]``).

    Rules read the target descriptor and the model's estimate; they are data and small
    functions, not branches on target names.
    """


@hookspec(firstresult=True)
def edgeprof_load_model(spec: str, input_shapes: list[tuple[int, ...]] | None,
                        input_dtypes: list[str] | None) -> ModelHandle | None:
    """Resolve a model spec this plugin reads (a file format, a scheme) into a ModelHandle.

    ``spec``: the user's model string (a path, or anything but ``builtin:NAME``, which the
    ``edgeprof_register_models`` hook serves); ``input_shapes``: the shapes the user gave
    (batch first), or None to read them from the model; ``input_dtypes``: their dtypes, or
    None. Return None for a spec you do not read, so the next loader is asked;
    ``edgeprof.core.models.load_model_file`` does the checks for a file format. When no
    loader answers, ``package.module:factory`` specs are imported as torch factories.
    """


@hookspec(firstresult=True)
def edgeprof_read_graph(model: ModelHandle) -> GraphWalk | None:
    """Walk the graph of ``model`` (a ModelHandle of a format this plugin reads).

    Return a ``GraphWalk``: per layer its MACs, other ops, parameter count and element
    counts; the analytic estimate prices it for any target and precision (one walk per
    model and input shape, however many targets). Return None for a format you do not read.
    """


@hookspec
def edgeprof_register_formats() -> list[Any]:
    """Return model formats (``edgeprof.core.formats.Format``): the nodes of the conversion
    graph. A format is a name (``onnx``), a description for messages and the file suffixes
    that hold it. Two plugins registering one name is an error naming both.
    """


@hookspec
def edgeprof_register_converters() -> list[Any]:
    """Return converters (``edgeprof.core.formats.Converter``): the edges of the conversion
    graph, each from one format to another, with the precisions it can produce, a cost (the
    route is the cheapest path) and the Python package that provides it (named when the
    package is missing). A backend declares the formats it loads
    (``Capabilities.model_formats``); edgeprof routes any model to them.
    """


@hookspec
def edgeprof_register_workloads() -> list[type]:
    """Return workload classes (:class:`edgeprof.core.workload.Workload` subclasses): what
    one kind of model's run is (its record, its blank record, how it runs here and on a
    board, its default timeout). A backend names the one it runs (``Backend.workload``).
    Built in: ``tensor`` and ``generate``. Two plugins registering one name is an error
    naming both, unless one is marked ``tryfirst`` (it overrides).
    """


@hookspec(firstresult=True)
def edgeprof_measure(request: Any, runner: Any) -> Any:
    """Measure one :class:`~edgeprof.core.requests.MeasureRequest` on ``runner`` (a
    :class:`~edgeprof.core.requests.Runner`) and return its ``RunRecord``.

    ``edgeprof.profilers.measure.measure.measure`` calls this for every run (profile,
    benchmark, batch sizes, optimize, a generative profile); the built-in implementation
    runs the request and turns a failure into the record's status. ``request.workload`` says
    which workload it is (filled in from the backend's): ``tensor`` (the record a
    ``BenchmarkResult``) or ``generate`` (a ``GenerativeRunRecord``). ``@hookimpl(wrapper=True)`` observes or
    adjusts every run (``record = yield``); an implementation returning a record takes the
    run over (``tryfirst=True`` to be asked before the built-in).
    """

"""One family of profile reports: :class:`ProfileReport`, one subclass per workload.

``edgeprof.profile`` returns a ``ProfileReport`` for either kind of model: a
:class:`~edgeprof.profilers.report.tensor_report.TensorReport` (a tensor model: estimate per
layer, runs timed by the harness, summaries against the target) or a
:class:`~edgeprof.profilers.report.generative.GenerativeReport` (a generative model:
estimate per stage, llama-bench's pp/tg runs, the target's predictions). Every member has
the same interface:

* ``to_dict()`` — its profile.json, validated by the one ``edgeprof/schema/profile.schema.json``;
* ``ProfileReport.from_dict(doc)`` / ``ProfileReport.load(path)`` — the member a document
  belongs to, read back (``from_dict(d).to_dict() == d``); called on a member, a document of
  the other workload is a ``ConfigError`` naming the class that reads it;
* ``save(out_dir)`` — every artifact, written atomically; ``load`` reads the folder back;
* ``exit_code`` and ``runs``.

A document's workload is its ``kind`` (``llm``: generative; none: tensor, unless its
``schema`` is a generative one). Each member
module is named here by its import path and imported when a document of its workload is
read, as plugins are: this module imports neither.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, ClassVar

#: the member class of each workload: "module:Class", imported on first use
MEMBERS: dict[str, str] = {
    "tensor": "edgeprof.profilers.report.tensor_report:TensorReport",
    "generate": "edgeprof.profilers.report.generative:GenerativeReport",
}
#: what a document's ``kind`` says its workload is (no kind: a tensor profile)
KINDS: dict[str | None, str] = {None: "tensor", "tensor": "tensor", "llm": "generate"}


def document_workload(doc: Any) -> str:
    """The workload a profile.json document (a dict) belongs to: its ``kind``, or a
    generative schema name (``edgeprof.llm/N``) on a document written without one."""
    if not isinstance(doc, Mapping):
        return "tensor"
    schema = doc.get("schema")
    if doc.get("kind") is None and isinstance(schema, str) and schema.startswith("edgeprof.llm/"):
        return "generate"
    return KINDS.get(doc.get("kind"), "tensor")


def member(workload: str) -> type:
    """The report class of ``workload``."""
    mod, _, name = MEMBERS[workload].partition(":")
    return getattr(importlib.import_module(mod), name)


class ProfileReport:
    """The base of every profile report (see the module docstring). Members are dataclasses
    that set ``workload`` and implement ``to_dict``, ``_read`` (their own document, already
    known to be theirs), ``save`` and ``exit_code``."""

    #: the workload whose runs this member reports (``tensor``, ``generate``)
    workload: ClassVar[str] = ""
    #: how messages name its profiles ("tensor", "generative")
    word: ClassVar[str] = ""
    #: the module that compares two of its documents (``edgeprof compare``): it defines
    #: ``check_document(doc, where)``, ``identity(doc)`` and ``compare(a, b, **thresholds)``
    comparison: ClassVar[str] = ""
    #: whether ``compare --html`` draws a before/after page of two of its documents
    comparison_page: ClassVar[bool] = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProfileReport:
        """The report of a profile.json document: the member of its workload (on the base),
        or this member (a document of the other workload: ``ConfigError``)."""
        from edgeprof.core.errors import ConfigError

        workload = document_workload(d)
        if cls.workload and cls.workload != workload:
            other = member(workload).__name__
            raise ConfigError(f"not a {cls.word} profile.json but a "
                              f"{member(workload).word} one: read it with edgeprof.{other} or "
                              "edgeprof.ProfileReport")
        return member(workload)._read(d)

    @classmethod
    def load(cls, path: str | os.PathLike) -> ProfileReport:
        """Read a profile.json (``path``: the file, or the ``save``/``--out`` folder holding
        it) as the report it is; a missing, unreadable or foreign file is a ``ConfigError``
        naming it."""
        from edgeprof.core.errors import ConfigError
        from edgeprof.core.io import read_json_document

        p, doc = read_json_document(path)
        if not isinstance(doc, dict):
            raise ConfigError("not an edgeprof profile.json (not a JSON object)", path=p)
        try:
            return cls.from_dict(doc)
        except ConfigError as e:
            raise ConfigError(str(e), path=p) from None
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"not an edgeprof profile.json ({type(e).__name__}: {e})",
                              path=p) from None

    @classmethod
    def _read(cls, d: Mapping[str, Any]) -> ProfileReport:  # pragma: no cover - members
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - members
        raise NotImplementedError

    def save(self, out_dir: str | os.PathLike) -> Any:  # pragma: no cover - members
        raise NotImplementedError

    @property
    def exit_code(self) -> int:  # pragma: no cover - members
        raise NotImplementedError


def member_of(doc: Any) -> type:
    """The report class that reads the profile.json document ``doc``."""
    return member(document_workload(doc))


def comparison_of(doc: Any) -> Any:
    """The module comparing documents of ``doc``'s workload (its member's ``comparison``)."""
    return importlib.import_module(member_of(doc).comparison)

__all__ = ["KINDS", "MEMBERS", "ProfileReport", "comparison_of", "document_workload", "member",
           "member_of"]

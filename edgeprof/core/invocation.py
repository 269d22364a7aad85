"""The command line this process is running, as the CLI received it.

``edgeprof.cli.main`` records its argv once the parser has accepted it; a document made
during the run (profile.json's ``request.command``, optimize.json's ``command``) carries
:func:`command`, so a report's "Reproduce" line is the command that ran, every flag as
typed, not one rebuilt from the results (which had dropped flags that leave no trace in the
results, such as ``--train-seconds``, and added the baseline backend to ``--backend``).
Called from Python (no CLI), :func:`command` is None and a report rebuilds the command.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

_ARGV: list[str] | None = None


def record(argv: Sequence[str] | None) -> None:
    """Remember the CLI's arguments (without the program name); None forgets them."""
    global _ARGV
    _ARGV = None if argv is None else [str(a) for a in argv]


def command() -> str | None:
    """``edgeprof ARGS...`` as one shell-quoted line, or None outside the CLI."""
    return None if _ARGV is None else shlex.join(["edgeprof", *_ARGV])


__all__ = ["command", "record"]

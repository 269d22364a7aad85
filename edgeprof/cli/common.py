"""What every command module of the CLI shares: the consoles, progress, the argument types,
the parser class, flags that apply to one kind of model (tensor or generative) and the
defaults that differ by kind. Imports nothing of the CLI but ``render``; the command modules
(``main``, ``llm``, ``fleet``) import it, never each other's private helpers.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
from collections.abc import Mapping
from typing import Any

from edgeprof.cli.render import si
from edgeprof.core.errors import EdgeprofError, OutputError
from edgeprof.core.kinds import GENERATIVE, KIND_WORDS, TENSOR, model_kind

# ----------------------------------------------------------------------------- output
#: the Python API's constraint names, as the terminal names them: the flag that sets each
#: (plans, verdicts and errors are worded in the API's names; the JSON keeps those)
_FLAG_WORDS = {"latency_budget_ms": "--latency-budget-ms",
               "memory_budget_bytes": "--memory-budget-mb",
               "memory_budget_mb": "--memory-budget-mb",
               "max_accuracy_drop": "--max-accuracy-drop", "stream_rate_fps": "--stream-rate",
               "device_memory": "the device's memory"}


def in_flag_words(text: str) -> str:
    """``text`` with the API's field names as flags, and an architecture step's targets
    (``latency_reduction=14.094, max_macs=931217``) in words."""
    text = re.sub(r"(?<![\w-])(" + "|".join(_FLAG_WORDS) + r")(?![\w-])",
                  lambda m: _FLAG_WORDS[m.group(1)], text)
    text = re.sub(r"\blatency_reduction=([\d.]+)",
                  lambda m: f"latency {float(m.group(1)):.3g}x lower", text)
    text = re.sub(r"\bmax_macs=(\d+)", lambda m: f"at most {si(int(m.group(1)), 'MAC')}",
                  text)
    return re.sub(r"\bmax_parameter_bytes=(\d+)",
                  lambda m: f"at most {si(int(m.group(1)), 'B')} of weights", text)


def make_console(stderr: bool = False):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich's own exits 1: let main end quietly (141)
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the output's reader has gone")

    console = _Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = 160  # logs and pipes: wide enough that tables stay readable
    return console


class Progress:
    """Progress on stderr for steps that take more than a moment."""

    def __init__(self, enabled: bool = True):
        self.console = make_console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.status = None

    def __call__(self, msg: str) -> None:
        if not self.enabled:
            return
        if self.status is None:
            self.status = self.console.status(msg)
            self.status.start()
        else:
            self.status.update(msg)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


def api_options(args: argparse.Namespace, names: Mapping[str, str]) -> dict[str, Any]:
    """The API keywords (``names``: argparse dest -> keyword) of the flags that hold a value:
    given, or defaulted for this kind of model by :func:`resolve_kind`. A flag left None
    (not given, or of the other kind), an unset switch and an empty list are left out."""
    values = ((key, getattr(args, dest, None)) for dest, key in names.items())
    return {key: v for key, v in values if v is not None and v is not False and v != []}


def keeping_results(progress, call):
    """Run ``call``; when it measured but ``--out`` could not be written, keep the results
    (to print them) and the error (to raise after printing). ``progress`` (or None) is
    stopped either way."""
    try:
        return call(), None
    except OutputError as e:
        if e.result is None:
            raise
        return e.result, e
    finally:
        if progress is not None:
            progress.stop()


# ----------------------------------------------------------------------- argument types
def shape(text: str):
    from edgeprof.core.models import parse_shape

    try:
        return parse_shape(text)
    except EdgeprofError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def dtype(text: str) -> str:
    from edgeprof.core.models import parse_dtype

    try:
        return parse_dtype(text)
    except EdgeprofError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def device(text: str) -> str:
    from edgeprof.core.backend import DEVICE_PATTERN, DEVICE_WORDS

    if not re.fullmatch(DEVICE_PATTERN, text):
        raise argparse.ArgumentTypeError(f"device must be {DEVICE_WORDS}, got '{text}'")
    return text


def names(text: str) -> str:
    """A comma-separated list of names: no empty name ('a,,b'); returned as given."""
    if text.strip() and any(not part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(f"'{text}' has an empty name; separate names with "
                                         "single commas")
    return text


def _number(kind: type, minimum: float, inclusive: bool, words: str):
    """An argparse type: ``kind`` parsed from text, at least ``minimum``, finite."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{text}' is not {'an integer' if kind is int else 'a number'}") from None
        if v != v or v in (float("inf"), float("-inf")) or v < minimum \
                or (not inclusive and v == minimum):
            raise argparse.ArgumentTypeError(f"must be {words}, got {text}")
        return v

    return parse


positive_int = _number(int, 0, False, "a positive integer")
positive_float = _number(float, 0.0, False, "a positive number")
non_negative_int = _number(int, 0, True, "zero or a positive integer")


def add_isolation_flags(sp, each: str = "benchmark") -> None:
    """``--isolate`` and ``--timeout``: where each run of the command runs."""
    sp.add_argument("--isolate", action="store_true",
                    help=f"run each {each} in its own worker process (a crash inside the "
                         "runtime fails that run, not edgeprof)")
    sp.add_argument("--timeout", type=positive_float, metavar="S",
                    help=f"per-{each} timeout in seconds; implies --isolate (only a "
                         "separate process can be stopped)")


def batch_list(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        out.append(positive_int(part.strip()))
    if not out:
        raise argparse.ArgumentTypeError("give batch sizes like 1,2,4,8")
    return out


def depths(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"give depths like 0,2048, got '{text}'")
    return [non_negative_int(p) for p in parts]


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` or ``BACKEND.KEY=VALUE`` (a backend option; its type is the backend's)."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"backend option must be KEY=VALUE (or "
                                         f"BACKEND.KEY=VALUE), got '{text}'")
    return key.strip(), value


def html_file(text: str) -> str:  # html helper: --html FILE, checked before any work
    from pathlib import Path

    if not text or text.endswith(("/", "\\")) or Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"--html needs a file name, got the folder '{text}'")
    return out_file(text, folder_ok=False)


def out_file(text: str, *, folder_ok: bool = True) -> str:
    """An output FILE option (``calibrate --out FILE.json``, ``--html FILE``), checked when
    parsed, before any work: under a file, read-only, a device ... is one line, exit 2
    (``core.io.prepare_out_file``); an existing folder means "write the file in it"."""
    from edgeprof.core.io import prepare_out_file

    try:  # argparse's message names the flag ("argument --out: ...")
        prepare_out_file(text, flag=None, folder_ok=folder_ok)
    except OutputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's own code for usage errors)
        self.exit(2, f"edgeprof: error: {message} (see '{self.prog} --help')\n")


# ------------------------------------------------------------------ the kinds of model
def for_kinds(action: argparse.Action, *, only: str | None = None,
              **defaults: Any) -> argparse.Action:
    """Mark a flag: it applies to ``only`` one kind of model (None: both), and its default
    depends on the kind (``tensor=``, ``generative=``), resolved after parsing by
    :func:`resolve_kind`. The flag's argparse default must be None, so that a flag given
    is told from one left out."""
    assert action.default is None, f"{action.dest}: give its defaults by kind"
    action.kinds = (only,) if only else (TENSOR, GENERATIVE)  # type: ignore[attr-defined]
    action.kind_defaults = defaults  # type: ignore[attr-defined]
    return action


class KindGroup:
    """An argument group of flags that apply to one kind of model: ``add_argument`` takes a
    ``default`` as that kind's default (resolved after parsing) and marks the flag."""

    def __init__(self, parser: argparse.ArgumentParser, kind: str, title: str | None = None):
        self.kind = kind
        self.group = parser.add_argument_group(title or KIND_WORDS[kind])

    def add_argument(self, *flags: str, **kw: Any) -> argparse.Action:
        store_true = kw.get("action") == "store_true"
        default = kw.pop("default", False if store_true else None)
        action = self.group.add_argument(*flags, default=None, **kw)
        return for_kinds(action, only=self.kind, **{self.kind: default})


def kind_groups(parser: argparse.ArgumentParser) -> tuple[KindGroup, KindGroup]:
    """The two groups of a command that takes either kind: (tensor, generative)."""
    return KindGroup(parser, TENSOR), KindGroup(parser, GENERATIVE)


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]
    raise LookupError(command)


def resolve_kind(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """For a command that takes either kind of model (its flags marked by :func:`for_kinds`):
    refuse a flag of the other kind (exit 2, one line naming the flag and the kind it
    applies to) and fill the defaults of this kind; ``args.kind`` is the model's kind."""
    sub = _subparser(parser, args.command)
    marked = [a for a in sub._actions if getattr(a, "kinds", None) is not None]
    if not marked:
        return
    kind = model_kind(args.model)
    for action in marked:
        value = getattr(args, action.dest, None)
        if kind not in action.kinds:
            if value is not None:
                flag = max(action.option_strings, key=len)
                sub.error(f"{flag} applies to {KIND_WORDS[action.kinds[0]]}; {args.model} is "
                          f"a {kind} model")
            continue
        if value is None:
            setattr(args, action.dest, action.kind_defaults.get(kind))
    args.kind = kind


__all__ = ["GENERATIVE", "KIND_WORDS", "KindGroup", "Parser", "Progress", "TENSOR", "api_options",
           "batch_list", "depths", "device", "dtype", "for_kinds", "html_file", "in_flag_words",
           "keeping_results", "key_value", "kind_groups", "make_console", "model_kind", "names",
           "non_negative_int", "out_file", "positive_float", "positive_int", "resolve_kind",
           "shape"]

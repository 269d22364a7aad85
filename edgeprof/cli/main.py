"""The command line: parse, call the API, print, map errors to exit codes. No logic here.

One parser (:func:`build_parser`, ``cli/parser.py``). profile, estimate, predict, recommend
and optimize take a tensor model or a generative one (llm:NAME, .gguf, HF folder): each
kind's own flags are a group of the command, and after parsing ``common.resolve_kind``
refuses the other kind's flags and fills the defaults that differ by kind. Each command is
one function (``cli/commands.py``) that passes the flags to its API verb as keywords
(``common.api_options``) and shows the answer with the view of the model's kind
(``cli/llm.py`` has the generative ones). Shared helpers are in ``cli/common.py``; rendering
in ``cli/render.py``, ``cli/render_llm.py`` and ``cli/render_listings.py``. The parser and
the command functions stay importable from here.

Exit codes (docs/design.md): 0 complete; 2 user input or configuration error; 3 partial (a
backend named explicitly is unavailable, or a requested run produced no measurement);
4 constraints cannot be met; 1 internal error; 130/143 interrupted; 141 the output pipe was
closed (``| head``: quiet, as a Unix tool; ``cli/signals.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from edgeprof.cli.commands import (cmd_backends, cmd_batch, cmd_calibrate, cmd_compare,
                                   cmd_estimate, cmd_optimize, cmd_plugins, cmd_predict,
                                   cmd_profile, cmd_recommend, cmd_targets)
from edgeprof.cli.common import in_flag_words, resolve_kind
from edgeprof.cli.parser import build_parser
from edgeprof.cli.signals import (Interrupted, end_on_closed_output, handling_signals,
                                  output_closed)
from edgeprof.core.errors import EdgeprofError


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from edgeprof.cli.quiet import quieted

    try:
        # the runtimes' own log noise off the terminal unless --debug (cli/quiet.py)
        with quieted(debug="--debug" in argv):
            try:
                return _main(argv)
            finally:  # a closed pipe shows here, not as "Exception ignored" at exit
                sys.stdout.flush()
    except BrokenPipeError:  # e.g. '| head -1': the reader has gone; quiet, exit 141
        if not output_closed():
            raise
        return end_on_closed_output()


def _main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    resolve_kind(parser, args)  # a command taking either kind: its flags checked, defaulted
    from edgeprof.core.invocation import record

    record(argv)  # the documents of this run carry the command that ran (their Reproduce)
    try:
        with handling_signals():  # SIGINT/SIGTERM -> Interrupted: one line, exit 130/143
            return _run(args)
    finally:  # a later call from Python (no CLI) rebuilds its command
        record(None)


def _run(args) -> int:
    try:
        if getattr(args, "out", None):  # before any measuring: exit 2 naming the path
            from edgeprof.core.io import prepare_out_dir

            prepare_out_dir(args.out)
        return int(args.func(args) or 0)
    except EdgeprofError as e:
        if args.debug:
            raise
        print(f"edgeprof: error: {in_flag_words(str(e))}", file=sys.stderr)
        return e.exit_code
    except Interrupted as e:
        print(e.message, file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("edgeprof: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # internal error: one line, exit 1; --debug shows the traceback
        if args.debug or (isinstance(e, BrokenPipeError) and output_closed()):
            raise  # the output's reader has gone: main ends quietly
        print(f"edgeprof: internal error: {type(e).__name__}: {e} (rerun with --debug for the "
              "traceback, and please report it)", file=sys.stderr)
        return 1


__all__ = ["build_parser", "cmd_backends", "cmd_batch", "cmd_calibrate", "cmd_compare",
           "cmd_estimate", "cmd_optimize", "cmd_plugins", "cmd_predict", "cmd_profile",
           "cmd_recommend", "cmd_targets", "in_flag_words", "main"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

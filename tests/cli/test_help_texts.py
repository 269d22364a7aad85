"""Every flag of every subcommand has a help line (issue 21: batch's and compare's had none),
and the shared flags say whose they are."""

from __future__ import annotations

import argparse

import pytest

from edgeprof.cli.llm import build_llm_parser
from edgeprof.cli.main import build_parser


def _walk(parser: argparse.ArgumentParser, prog: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{prog} {name}")
        elif not isinstance(action, (argparse._HelpAction,)):
            yield prog, action


def _parsers():
    return [("edgeprof", build_parser()), ("edgeprof (generative)", build_llm_parser())]


@pytest.mark.parametrize("name,parser", _parsers())
def test_every_flag_of_every_subcommand_has_help(name, parser):
    missing = [f"{prog}: {'/'.join(a.option_strings) or a.dest}"
               for prog, a in _walk(parser, name)
               if not (a.help and a.help.strip()) or a.help == argparse.SUPPRESS]
    assert not missing, "flags without help:\n" + "\n".join(missing)


def _help_of(parser, command: str, flag: str) -> str:
    for prog, a in _walk(parser, "edgeprof"):
        if prog == f"edgeprof {command}" and flag in a.option_strings:
            return a.help
    raise AssertionError(f"{command} has no {flag}")


def test_device_and_threads_say_whose():
    p, g = build_parser(), build_llm_parser()
    assert "this machine" in _help_of(p, "profile", "--device")
    assert "board" in _help_of(p, "predict", "--device")
    for command in ("profile",):
        h = _help_of(p, command, "--threads")
        assert "here" in h and "board" in h
    for command in ("profile", "estimate", "recommend"):
        try:
            h = _help_of(g, command, "--device")
        except AssertionError:
            continue
        assert "board" in h or "processor" in h, (command, h)


def test_min_time_defaults_say_why_they_differ():
    p = build_parser()
    prof, opt = _help_of(p, "profile", "--min-time"), _help_of(p, "optimize", "--min-time")
    assert "default 1" in prof and "default 0.3" in opt
    assert "candidate" in opt  # why optimize's is shorter
    assert "lowered to --max-time" in prof


def test_warmup_says_what_it_counts():
    p, g = build_parser(), build_llm_parser()
    assert "runs" in _help_of(p, "profile", "--warmup")
    assert "repetitions" in _help_of(g, "profile", "--warmup")

"""Every flag of every subcommand has a help line (issue 21: batch's and compare's had none),
and the shared flags say whose they are: the one parser (issue 19), where a generative
model's flags are a group of profile, estimate, recommend and optimize."""

from __future__ import annotations

import argparse

import pytest

from edgeprof.cli.main import build_parser


def _walk(parser: argparse.ArgumentParser, prog: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{prog} {name}")
        elif not isinstance(action, (argparse._HelpAction,)):
            yield prog, action


def test_every_flag_of_every_subcommand_has_help():
    missing = [f"{prog}: {'/'.join(a.option_strings) or a.dest}"
               for prog, a in _walk(build_parser(), "edgeprof")
               if not (a.help and a.help.strip()) or a.help == argparse.SUPPRESS]
    assert not missing, "flags without help:\n" + "\n".join(missing)


def _help_of(parser, command: str, flag: str) -> str:
    for prog, a in _walk(parser, "edgeprof"):
        if prog == f"edgeprof {command}" and flag in a.option_strings:
            return a.help
    raise AssertionError(f"{command} has no {flag}")


def test_device_and_threads_say_whose():
    p = build_parser()
    assert "this machine" in _help_of(p, "profile", "--device")
    assert "board" in _help_of(p, "predict", "--device")
    for command in ("profile",):
        h = _help_of(p, command, "--threads")
        assert "here" in h and "board" in h
    for command in ("profile", "estimate", "recommend", "optimize"):
        h = _help_of(p, command, "--device")
        assert "board" in h or "processor" in h, (command, h)


def test_min_time_defaults_say_why_they_differ():
    p = build_parser()
    prof, opt = _help_of(p, "profile", "--min-time"), _help_of(p, "optimize", "--min-time")
    assert "default 1" in prof and "default 0.3" in opt
    assert "candidate" in opt  # why optimize's is shorter
    assert "lowered to --max-time" in prof


def test_warmup_says_what_it_counts():
    h = _help_of(build_parser(), "profile", "--warmup")
    assert "single inferences" in h and "tensor" in h  # a tensor model's: single runs
    assert "repetitions" in h and "generative" in h  # a generative model's: whole tests


def test_defaults_that_differ_by_kind_say_so():
    p = build_parser()
    h = _help_of(p, "profile", "--backend")
    assert "default torch_eager" in h and "default llama_cpp" in h
    assert "default host" in _help_of(p, "profile", "--target")


def _group_of(parser, command: str, flag: str) -> str:
    sub = next(a for a in parser._actions
               if isinstance(a, argparse._SubParsersAction)).choices[command]
    for group in sub._action_groups:
        if any(flag in a.option_strings for a in group._group_actions):
            return group.title
    raise AssertionError(f"{command} has no {flag}")


@pytest.mark.parametrize("command", ["profile", "estimate", "recommend", "optimize"])
def test_generative_flags_are_a_group_of_the_same_commands(command):
    p = build_parser()
    title = _group_of(p, command, "--prompt-tokens")
    assert title.startswith("generative models") and "llm:NAME" in title
    assert _group_of(p, command, "--batch-size").startswith("tensor models")

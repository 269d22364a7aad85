"""A generative run's record carries its conditions as a tensor run's does (issue 31): what
was asked (``config``: isolate, timeout_s, threads ...), where and how it ran
(``environment``: runtime, runtime_version, threads, ``conditions.process`` inline or
isolated ...) and the isolated worker's note, with the same keys as a tensor record's.

The fake generative plugin of tests/cli/test_llm_cli.py, and llama.cpp where installed."""

from __future__ import annotations

import json

import pytest

from edgeprof.cli.main import main
from tests.cli.test_llm_cli import TINY, _llama_cpp, cache, plugins  # noqa: F401 - fixtures

#: the keys a tensor run's record says its conditions with (benchmark.config, .environment)
SHARED = (("config", "isolate"), ("config", "timeout_s"), ("config", "threads"),
          ("config", "device"), ("config", "precision"), ("environment", "runtime"),
          ("environment", "runtime_version"), ("environment", "threads"),
          ("environment", "conditions", "process"), ("environment", "conditions", "threads"),
          ("environment", "conditions", "threads_from"),
          ("environment", "conditions", "affinity"), ("environment", "cpu_model"))


def _get(d: dict, path: tuple[str, ...]):
    for key in path:
        assert isinstance(d, dict) and key in d, f"no {'.'.join(path)}"
        d = d[key]
    return d


def _run(capsys, argv: list[str]) -> dict:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [run] = json.loads(captured.out)["runs"]
    return run


def _isolated_tensor_run(capsys) -> dict:
    return _run(capsys, ["profile", "builtin:mlp", "--isolate", "--timeout", "600", "--runs",
                         "3", "--min-time", "0.01", "--max-time", "0.2", "--json"])["benchmark"]


def _says_it_ran_isolated(run: dict, tensor: dict) -> None:
    for path in SHARED:  # the tensor record's keys, and they say the same of the run
        _get(run, path), _get(tensor, path)
    assert run["config"]["isolate"] is True and run["config"]["timeout_s"] == 600
    assert run["environment"]["conditions"]["process"] == "isolated"
    assert any(n.startswith("ran in an isolated worker process (pid ") for n in run["notes"])
    assert any(n.startswith("ran in an isolated worker process (pid ") for n in tensor["notes"])
    assert run["environment"]["threads"] == {"n_threads": run["n_threads"]}
    assert run["environment"]["runtime_version"]


def test_an_isolated_generative_run_says_so_as_a_tensor_run_does(capsys, plugins, cache):
    tensor = _isolated_tensor_run(capsys)
    run = _run(capsys, ["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision",
                        "q4_0", "--isolate", "--timeout", "600", "--threads", "1", *TINY,
                        "--plugins", plugins, "--json"])
    _says_it_ran_isolated(run, tensor)
    assert run["config"]["threads"] == 1 and run["environment"]["threads"] == {"n_threads": 1}
    assert run["environment"]["conditions"]["threads_from"] == "--threads"
    assert run["config"]["prompt_tokens"] == 16 and run["config"]["repetitions"] == 2
    assert run["environment"]["conditions"]["process_state"]["pid"] != \
        tensor["environment"]["conditions"]["process_state"]["pid"]


def test_an_inline_generative_run_says_inline(capsys, plugins, cache):
    run = _run(capsys, ["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision",
                        "q4_0", *TINY, "--plugins", plugins, "--json"])
    assert run["config"]["isolate"] is False and run["config"]["timeout_s"] is None
    assert run["environment"]["conditions"]["process"] == "inline" and run["notes"] == []


def test_a_generative_run_that_produced_nothing_still_says_what_was_asked(capsys, plugins,
                                                                         cache):
    code = main(["profile", "llm:smollm2-135m", "--backend", "fake_llm", "--precision", "q8_0",
                 "--isolate", "--timeout", "600", *TINY, "--plugins", plugins, "--json"])
    captured = capsys.readouterr()
    assert code == 3
    [run] = json.loads(captured.out)["runs"]
    assert run["status"] == "failed"
    assert run["config"]["isolate"] is True and run["config"]["timeout_s"] == 600


@pytest.mark.skipif(not _llama_cpp(), reason="llama-cpp-python is not installed")
def test_llama_cpp_isolated_with_a_timeout_records_its_conditions(capsys):
    """``edgeprof profile llm:smollm2-135m --backend llama_cpp --isolate --timeout 600
    --json``, with a tiny test shape."""
    tensor = _isolated_tensor_run(capsys)
    run = _run(capsys, ["profile", "llm:smollm2-135m", "--backend", "llama_cpp", "--isolate",
                        "--timeout", "600", "--prompt-tokens", "8", "--gen-tokens", "4",
                        "--repetitions", "1", "--json"])
    _says_it_ran_isolated(run, tensor)
    assert run["environment"]["runtime"] == "llama_cpp"
    assert run["environment"]["runtime_version"].startswith("llama")
    assert "llama_cpp" in run["environment"]["conditions"]["process_state"]["frameworks_loaded"]

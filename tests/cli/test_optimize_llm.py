"""``optimize`` of a generative model: its help says what it does (recommend's choice, then
the shortlist measured here), and ``--out DIR`` writes its report there as a whole (issue 29,
finding 14: the help said "analytically, as recommend" while it measured three formats, and
``--out`` was refused)."""

from __future__ import annotations

import argparse
import json

from edgeprof.cli.main import build_parser, main

ARGV = ["optimize", "llm:qwen2.5-0.5b", "--target", "raspberry_pi_5", "--backend",
        "llama_cpp", "--tokens-per-s", "5"]


def _sub(command: str):
    p = build_parser()
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    summary = next(a.help for a in action._choices_actions if a.dest == command)
    return summary, action.choices[command]


def test_the_help_says_a_generative_model_is_measured_here():
    summary, sub = _sub("optimize")
    assert "analytically" not in summary.split("generative model")[1]
    assert "measured here" in summary.split("generative model")[1]
    shortlist = next(a for a in sub._actions if "--shortlist" in a.option_strings)
    assert "measure here" in shortlist.help and "0: the choice alone" in shortlist.help
    out = next(a for a in sub._actions if "--out" in a.option_strings)
    assert not hasattr(out, "kinds") or "generative" in out.kinds  # both kinds take it
    assert "optimize.json" in out.help


def test_shortlist_0_is_the_choice_alone_measured_nowhere(capsys, monkeypatch):
    import edgeprof.api.generative as G

    def no_run(*a, **k):
        raise AssertionError("--shortlist 0 measured")

    monkeypatch.setattr(G, "profile_llm", no_run)
    assert main([*ARGV, "--shortlist", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["measured_here"] == [] and doc["format"]


def test_out_writes_the_report_as_a_whole(tmp_path, capsys):
    out = tmp_path / "opt"
    assert main([*ARGV, "--shortlist", "0", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    written = json.loads((out / "optimize.json").read_text())
    assert written == json.loads(json.dumps(doc, default=str))
    manifest = json.loads((out / "edgeprof-out.json").read_text())
    assert "optimize.json" in manifest["files"]
    assert not [p.name for p in tmp_path.iterdir() if p.name != "opt"]  # no staging left


def test_an_unusable_out_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    import edgeprof.api as api

    def no_work(*a, **k):
        raise AssertionError("optimize ran before --out was checked")

    monkeypatch.setattr(api, "optimize_llm", no_work)
    (tmp_path / "f").write_text("x")
    assert main([*ARGV, "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(tmp_path / "f") in err


def test_device_reaches_the_choice_not_the_tensor_harness(capsys):
    """--device of a generative optimize is the board's processor for the choice; the one
    command function once passed it on as the tensor harness's run_options too, which the
    generative verb refused ("takes no option 'run_options'")."""
    assert main([*ARGV, "--device", "cpu", "--shortlist", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "cpu" and doc["measured_here"] == []

"""The timing flags in flag words (issue 21): `--max-time 0.5` alone used to fail with
"max_time_s (0.5 s) is below min_time_s (1 s)" for a --min-time the user never set."""

from __future__ import annotations

import json

from edgeprof.cli.main import main


def test_max_time_alone_below_the_default_min_time_runs(capsys):
    assert main(["profile", "builtin:small_cnn", "--max-time", "0.3", "--runs", "5",
                 "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["status"] == "ok"
    assert run["benchmark"]["config"]["max_time_s"] == 0.3


def test_max_time_below_min_time_names_the_flags(capsys):
    assert main(["profile", "builtin:small_cnn", "--max-time", "0.3", "--min-time", "2",
                 "--runs", "5"]) == 2
    err = capsys.readouterr().err
    assert "--max-time 0.3 s is below --min-time 2 s" in err and err.count("\n") == 1

"""Messages the terminal shows name flags and plain words, not the API's field names
(issue 21: "memory_budget_bytes", "latency_reduction=14.094, max_macs=931217")."""

from __future__ import annotations

from edgeprof.cli.main import in_flag_words, main


def test_field_names_become_flags_and_words():
    text = ("FAILS memory_budget_bytes: projected 0.26 MB > budget 0.01 MB; the closest to "
            "latency_budget_ms, memory_budget_bytes; architecture: latency_reduction=14.094, "
            "max_macs=931217, max_parameter_bytes=6734 (smaller)")
    out = in_flag_words(text)
    assert "FAILS --memory-budget-mb:" in out and "closest to --latency-budget-ms, " in out
    assert "latency 14.1x lower" in out and "at most 931 kMAC" in out
    assert "at most 6.73 kB of weights" in out
    for internal in ("_budget_", "latency_reduction", "max_macs", "max_parameter_bytes"):
        assert internal not in out
    assert in_flag_words("--latency-budget-ms 3") == "--latency-budget-ms 3"


def test_recommend_out_of_reach_names_flags(capsys):
    code = main(["recommend", "builtin:small_resnet", "--target", "mcu", "--latency-budget-ms",
                 "0.5", "--memory-budget-mb", "0.01"])
    out, err = capsys.readouterr()
    assert code == 4
    for internal in ("memory_budget_bytes", "latency_budget_ms", "latency_reduction=",
                     "max_macs="):
        assert internal not in out and internal not in err, internal
    assert "--memory-budget-mb" in out and "--latency-budget-ms" in err

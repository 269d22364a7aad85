"""The --out writer: the seed 000 totals carry the provenance of the figure they use."""

from __future__ import annotations

import dataclasses

import pytest

import pandas as pd

import edgeprof
from edgeprof.profilers.report.artifacts import totals_latency, write_artifacts

FAST = {"runs": 20, "min_time_s": 0.05, "max_time_s": 1.0}


@pytest.fixture(scope="module")
def report():
    """A real profile for a target that is not this host: two precisions, fp32 first."""
    return edgeprof.profile("builtin:small_cnn", target="raspberry_pi_4",
                            backends=["torch_eager"], precisions=["fp32", "bf16"],
                            run_options=FAST)


def test_hardware_totals_provenance_is_the_summary_figures(report, tmp_path):
    write_artifacts(report, tmp_path)
    totals = pd.read_csv(tmp_path / "hardware_totals.csv")
    fig = report.runs[0].summary.figures["latency_ms"]
    assert fig.provenance != "measured"  # raspberry_pi_4 is not this machine
    assert totals["provenance"].iloc[0] == fig.provenance
    assert totals["latency_ms"].iloc[0] == pytest.approx(fig.value)
    ops = pd.read_csv(tmp_path / "operator_profile.csv")
    assert "measured" not in set(ops["provenance"])


def test_totals_come_from_the_run_with_the_estimates_precision(report, tmp_path):
    fp32 = next(r for r in report.runs if r.requested_precision == "fp32")
    flipped = dataclasses.replace(report, runs=list(reversed(report.runs)))
    assert flipped.runs[0].requested_precision != report.estimate.precision
    value, provenance = totals_latency(flipped)
    assert value == fp32.summary.figures["latency_ms"].value
    assert provenance == fp32.summary.figures["latency_ms"].provenance
    write_artifacts(flipped, tmp_path)
    totals = pd.read_csv(tmp_path / "hardware_totals.csv")
    assert totals["latency_ms"].iloc[0] == pytest.approx(value)


def test_no_run_of_that_precision_gives_the_analytic_totals(report, tmp_path):
    only_bf16 = dataclasses.replace(
        report, runs=[r for r in report.runs if r.requested_precision != "fp32"])
    assert totals_latency(only_bf16) == (None, None)
    write_artifacts(only_bf16, tmp_path)
    totals = pd.read_csv(tmp_path / "hardware_totals.csv")
    assert totals["provenance"].iloc[0] == "analytic"
    assert totals["latency_ms"].iloc[0] == pytest.approx(report.estimate.roofline_latency_ms)

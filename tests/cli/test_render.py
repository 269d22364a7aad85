"""The terminal rendering (edgeprof/cli/render.py): every figure under its true label."""

from __future__ import annotations

import pytest

FAST = {"runs": 20, "min_time_s": 0.05, "max_time_s": 1}


def _text(render, *args, **kw) -> str:
    from rich.console import Console

    console = Console(width=400, record=True, color_system=None)
    render(*args, console, **kw)
    return console.export_text()


@pytest.fixture(scope="module")
def pi_report():
    import edgeprof

    return edgeprof.profile("builtin:small_cnn", target="raspberry_pi_4",
                            backends=["torch_eager"], run_options=FAST)


def _runs_table(text: str) -> tuple[list[str], list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Runs"))
    rows = [line for line in lines[start:] if "│" in line or "┃" in line]
    header = [c.strip() for c in rows[0].split("┃")[1:-1]]
    row = [c.strip() for c in rows[1].split("│")[1:-1]]
    return header, row


def test_figures_derived_from_the_board_latency_carry_its_label(pi_report):
    """GB/s, BW util and GMAC/s come from the Pi 4's predicted latency, not from this host's
    measurement: their columns say so (they read '1.035' for four backends, unlabelled)."""
    from edgeprof.cli.render import render_profile

    header, row = _runs_table(_text(render_profile, pi_report))
    lat = pi_report.runs[0].summary.figures["latency_ms"]
    assert lat.provenance == "predicted"
    for name in ("GB/s", "BW util", "GMAC/s"):
        (col,) = [h for h in header if name in h]
        assert "raspberry_pi_4" in col and "predicted" in col, col
    (col,) = [h for h in header if "reading" in h]
    assert "raspberry_pi_4" in col and "predicted" in row[header.index(col)]


def test_the_row_reading_agrees_with_the_bottleneck_line(pi_report):
    from edgeprof.cli.render import render_profile

    text = _text(render_profile, pi_report)
    bottleneck = pi_report.estimate.edge_constraints["bottleneck"]
    assert f"bottleneck: {bottleneck}" in text
    header, row = _runs_table(text)
    reading = row[header.index(next(h for h in header if "reading" in h))]
    other = {"memory": "compute", "compute": "memory"}[bottleneck]
    assert f"{bottleneck}-bound" in reading and f"{other}-bound" not in reading


def test_a_generative_prediction_shows_its_calibration_and_why_its_interval_is_wide():
    """predict llm:X showed a 4x decode interval; its reason and the calibration used were
    only in --json."""
    from edgeprof.api import estimate_llm
    from edgeprof.cli.render_llm import render_llm
    from edgeprof.profilers.report.generative import GenerativeReport

    payload = estimate_llm("llm:tinyllama-1.1b", "raspberry_pi_4", backends="llama_cpp",
                           precisions="q4_k_m", threads=1)
    (p,) = payload["predictions"]
    assert p["calibration"] == "llm--published"
    wide = [n for n in p["notes"] if "interval" in n and "wide" in n]
    assert wide
    text = _text(render_llm, GenerativeReport.from_dict(payload))
    assert "calibration llm--published" in text
    for n in wide:
        assert n in text.replace("\n", " ") or n in text

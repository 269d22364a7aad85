"""A comparison as plain text for the terminal (no colour, no rich): one line per run for
tensor profiles, one per run and figure for generative ones. Part of
:mod:`edgeprof.profilers.report.compare`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from edgeprof.profilers.report.compare_stats import (ALPHA, MIN_CLIFFS_DELTA, MIN_REL_CHANGE,
                                                     Comparison, GenerativeComparison)

#: what the generative table calls each figure
FIGURE_LABELS = {"prefill_tokens_per_s": "prefill tok/s", "decode_tokens_per_s": "decode tok/s",
                 "ttft_ms": "TTFT ms", "tpot_ms": "TPOT ms"}


# --------------------------------------------------------------------------- text
def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    return lines


def _verdict_cell(r: Any) -> str:
    verdict = r.verdict if r.status == "compared" else f"{r.verdict}: {r.reason}"
    if any(n.startswith("NOT LIKE FOR LIKE") for n in r.notes):
        verdict += " (NOT LIKE FOR LIKE)"
    return verdict


def format_generative_comparison(rows: list[GenerativeComparison], label_a: str = "A",
                                 label_b: str = "B") -> str:
    """The generative comparison as a plain-text table: one line per run and figure."""
    header = ["backend", "format", "depth", "figure", f"{label_a} median", f"{label_b} median",
              "change", "p", "cliff's d", "verdict"]
    body = []
    for r in rows:
        first = r.figure in (None, "prefill_tokens_per_s")  # a run's first line
        verdict = _verdict_cell(r if first or r.status != "too_few_samples"
                                else replace(r, reason="too few repetitions"))
        extra = [n for n in r.notes if not n.startswith("NOT LIKE FOR LIKE")]
        if extra and first:
            verdict += f" [{'; '.join(extra)}]"
        body.append([r.backend, r.format, str(r.depth),
                     FIGURE_LABELS.get(r.figure or "", "-"), _fmt(r.median_a),
                     _fmt(r.median_b),
                     "-" if r.delta_pct is None else f"{r.delta_pct:+.1f}%",
                     "-" if r.p_value is None else f"{r.p_value:.2g}",
                     "-" if r.cliffs_delta is None else f"{r.cliffs_delta:+.2f}", verdict])
    lines = _table(header, body)
    lines.append("samples: one per timed repetition; tok/s: higher is faster, ms: lower is "
                 "faster; cliff's d > 0: B's values tend to be larger")
    lines.append(f"significant = Mann-Whitney p < {ALPHA:g}, |change| >= "
                 f"{MIN_REL_CHANGE:.0%} and |cliff's d| >= {MIN_CLIFFS_DELTA:g}")
    return "\n".join(lines)


def format_comparison(rows: list[Comparison] | list[GenerativeComparison], label_a: str = "A",
                      label_b: str = "B") -> str:
    """A plain-text table for the terminal (no colour, no rich), the one its rows' type
    names (``table``): :func:`format_tensor_comparison`,
    :func:`format_generative_comparison`."""
    kind = type(rows[0]) if rows else Comparison
    return globals()[kind.table](rows, label_a, label_b)


def format_tensor_comparison(rows: list[Comparison], label_a: str = "A",
                             label_b: str = "B") -> str:
    """Tensor rows as a plain-text table: one line per (backend, precision)."""
    header = ["backend", "precision", f"{label_a} median ms", f"{label_b} median ms",
              "change", "p", "cliff's d", "verdict"]
    body = []
    for r in rows:
        change = "-" if r.delta_pct is None else f"{r.delta_pct:+.1f}%"
        body.append([r.backend, r.precision, _fmt(r.median_a_ms), _fmt(r.median_b_ms), change,
                     "-" if r.p_value is None else f"{r.p_value:.2g}",
                     "-" if r.cliffs_delta is None else f"{r.cliffs_delta:+.2f}",
                     _verdict_cell(r)])
    lines = _table(header, body)
    lines += _row_notes(rows)
    lines.append(f"significant = Mann-Whitney p < {ALPHA:g}, |change| >= "
                 f"{MIN_REL_CHANGE:.0%} and |cliff's d| >= {MIN_CLIFFS_DELTA:g}")
    return "\n".join(lines)


def _row_notes(rows: list[Comparison]) -> list[str]:
    """Each row's notes under the table (what explains its verdict: a speed_drift, block
    sizes that differ), naming the row; a note every row carries (a forced comparison's)
    once."""
    every = set.intersection(*(set(r.notes) for r in rows)) if len(rows) > 1 else set()
    lines = [f"note: {n}" for n in rows[0].notes if n in every] if rows else []
    for r in rows:
        lines += [f"note: {r.backend} {r.precision}: {n}" for n in r.notes if n not in every]
    return lines

"""Compare two profile.json documents run by run: is B faster or slower than A, really?

Runs are matched by ``(backend, requested precision)``. For each pair with latency samples
(``benchmark.stats.samples_ms``) the difference is called **significant** when all hold:

1. the two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``) gives ``p < alpha``
   (0.05): the two samples are not from one distribution;
2. the medians differ by at least ``min_rel_change`` (2%) of A's median: smaller changes are
   within what a rebuild, a reboot or a thermal state moves;
3. Cliff's delta (from the same U: ``delta = 1 - 2 U_a / (n_a n_b)``) is at least ``min_cliffs``
   (0.147, the conventional "small" effect) in absolute value: a typical B sample is really
   on one side of a typical A sample, not just a shifted tail.

With thousands of samples the U test alone flags differences of a fraction of a percent;
conditions 2 and 3 keep the verdict to changes that matter and that hold for most runs. The
medians' confidence intervals are reported too (``ci_overlap``) but do not decide.

A run without samples (not ``ok``, or written with ``keep_samples`` off) is listed with the
reason and no verdict. Samples that are block means (``block_size > 1``) are compared as they
are; a note says when the two sides used different block sizes, and when either side's
measurement saw the machine change speed (the harness's ``speed_drift`` warning): on a shared
machine two runs minutes apart can differ by that much with nothing changed.

The inputs are checked before anything is compared (:class:`ConfigError`, exit 2):

* a ``schema_version`` whose major version this edgeprof does not read;
* latency samples that are not finite non-negative numbers (a NaN, a string): edgeprof never
  writes them, so the file is damaged or not edgeprof's;
* profiles of a different model (name, format), target or input shapes/dtypes
  (:func:`profile_differences`): a speed-up between two different things means nothing.
  ``force=True`` compares anyway, and every row carries a note saying what differs.
* a tensor profile and a generative one (``kind`` "llm"): they measure different things.

**Generative profiles** (``edgeprof profile llm:NAME``) are compared the same way, run by run
matched by ``(backend, format, depth)``, each of four figures in its own row
(:class:`GenerativeComparison`): prefill and decode tokens/s, time to first token and time per
output token. The samples are one value per timed repetition
(:meth:`edgeprof.profilers.report.generative.GenerativeRun.samples`), and the same three
conditions decide; for the rates higher is faster (B's larger tokens/s is "faster"), for the
times lower is. When the repetitions are too few for the U test ever to reach ``p < alpha``
(:func:`min_p_value`: 2 and 2 give 0.33; 4 and 4 are the fewest at 0.05) the medians are given
without a verdict. Generative profiles of a different model, file format, target, device,
prompt or generated length are refused like tensor ones (``force``); a different thread
count or runtime build is noted on the row.

The pieces: :mod:`~edgeprof.profilers.report.compare_stats` (the statistics and the row
types), :mod:`~edgeprof.profilers.report.compare_inputs` (reading and checking the profiles),
:mod:`~edgeprof.profilers.report.compare_generative` (generative profiles) and
:mod:`~edgeprof.profilers.report.compare_text` (the terminal table); here the tensor
comparison and :func:`compare_results`. Every name is importable from here.
"""

from __future__ import annotations

from typing import Any

from edgeprof.profilers.report.compare_generative import compare_generative
from edgeprof.profilers.report.compare_inputs import (SCHEMA_MAJORS, check_profile,
                                                      check_same_kind, load_profile,
                                                      profile_differences, profile_kind)
from edgeprof.profilers.report.compare_stats import (ALPHA, MIN_CLIFFS_DELTA, MIN_REL_CHANGE,
                                                     Comparison, GenerativeComparison,
                                                     cliffs_delta_from_u, compare_samples,
                                                     mann_whitney, min_p_value)
from edgeprof.profilers.report.compare_text import (FIGURE_LABELS, format_comparison,
                                                    format_generative_comparison)
from edgeprof.profilers.report.family import comparison_of


def compare_results(a: dict[str, Any], b: dict[str, Any], *, alpha: float = ALPHA,
                    min_rel_change: float = MIN_REL_CHANGE,
                    min_cliffs: float = MIN_CLIFFS_DELTA,
                    force: bool = False) -> list[Comparison] | list[GenerativeComparison]:
    """Compare two profile.json documents (dicts) with their workload's comparison
    (:func:`~.family.comparison_of`): one row per (backend, precision) of two tensor
    profiles (:func:`~.compare_tensor.compare`), one per (backend, format, depth) and figure
    of two generative ones (:func:`compare_generative`).

    Profiles of a different model, target or input shape raise :class:`ConfigError`;
    ``force=True`` compares them anyway and notes the difference on every row. A tensor
    profile and a generative one raise :class:`ConfigError`, forced or not."""
    check_profile(a, "first profile")
    check_profile(b, "second profile")
    check_same_kind(a, b)
    return comparison_of(a).compare(a, b, alpha=alpha, min_rel_change=min_rel_change,
                                    min_cliffs=min_cliffs, force=force)


__all__ = ["ALPHA", "FIGURE_LABELS", "MIN_CLIFFS_DELTA", "MIN_REL_CHANGE", "SCHEMA_MAJORS",
           "Comparison", "GenerativeComparison", "check_profile", "check_same_kind",
           "cliffs_delta_from_u", "compare_generative", "compare_results", "compare_samples",
           "format_comparison", "format_generative_comparison", "load_profile",
           "mann_whitney", "min_p_value", "profile_differences", "profile_kind"]

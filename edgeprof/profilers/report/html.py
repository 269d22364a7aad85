"""Self-contained HTML reports: one file a user opens offline and sends to a colleague.

``render_profile_html(doc)`` takes profile.json's dict, ``render_optimize_html(doc)``
optimize.json's, ``render_compare_html(a, b)`` two profile.json dicts and
``render_sweep_html(frame)`` a sweep's DataFrame (columns :data:`SWEEP_COLUMNS`). Each returns
one HTML document with its scripts and styles inline: plotly.js is embedded once per page
(no CDN, nothing is fetched when the page is viewed), the smallest of plotly.js's own partial
bundles that draws every trace type on the page (vendored in ``vendor/``, :func:`plotly_bundle`:
1.2 MB for scatter and bar, against the full 4.8 MB), the charts are Plotly figures built
here, the page is a Jinja2 template with autoescaping on (a layer named ``<script>`` is
shown, never run), and the per-layer table is sorted, filtered and paged by a few lines of
inline JavaScript (:data:`PAGE_ROWS` rows a page, so a 1,000-layer model stays fast).

Every number carries the provenance the document gives it (measured / predicted /
estimated / analytic / uncalibrated / descriptor); nothing here invents one. A number the
document has as null is shown as "—" with the document's reason.

Each page is a module of its own, on shared helpers: :mod:`~edgeprof.profilers.report.html_common`
(number formats, provenances, plotly.js bundles, charts' HTML, templates, tables, warnings,
writing), :mod:`~edgeprof.profilers.report.html_figures` (roofline, latency bars),
:mod:`~edgeprof.profilers.report.html_profile`, :mod:`~edgeprof.profilers.report.html_compare`,
:mod:`~edgeprof.profilers.report.html_optimize` and :mod:`~edgeprof.profilers.report.html_sweep`.
Every name is importable from here.
"""

from __future__ import annotations

from edgeprof.profilers.report.html_common import (PAGE_ROWS, PLOTLY_BUNDLES, PLOTLY_JS_VERSION,
                                                   PROVENANCE_MEANING, PROVENANCES, VENDOR,
                                                   WARNING_EXPLANATIONS, chart_html, esc, fmt, sig,
                                                   num, plotly_bundle, plotly_bundle_path,
                                                   plotly_js, render, table_data, write_html)
from edgeprof.profilers.report.html_compare import render_compare_html
from edgeprof.profilers.report.html_optimize import (optimize_command, pareto_front,
                                                     render_optimize_html)
from edgeprof.profilers.report.html_profile import (LAYER_BARS, LAYER_COLUMNS, profile_command,
                                                    render_profile_html)
from edgeprof.profilers.report.html_sweep import SWEEP_COLUMNS, render_sweep_html

__all__ = ["LAYER_BARS", "LAYER_COLUMNS", "PAGE_ROWS", "PLOTLY_BUNDLES", "PLOTLY_JS_VERSION",
           "PROVENANCES", "PROVENANCE_MEANING", "SWEEP_COLUMNS", "VENDOR",
           "WARNING_EXPLANATIONS", "chart_html", "esc", "fmt", "num", "sig", "plotly_bundle",
           "plotly_bundle_path", "plotly_js", "render", "table_data",
           "optimize_command", "pareto_front", "profile_command", "render_compare_html",
           "render_optimize_html", "render_profile_html", "render_sweep_html", "write_html"]

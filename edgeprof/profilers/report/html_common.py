"""What every HTML page shares: how a number is shown (:func:`fmt`, decimal units, "—" for
None), the provenances and their meanings, plotly.js (the smallest vendored bundle that draws
the page's trace types, inlined once), a chart's HTML (:func:`chart_html`), the Jinja2 templates
(autoescaping on), the data of the sortable/filterable/paged tables, the warnings grouped by
code with what each means, and the atomic write (:func:`write_html`). The pages are
:mod:`~edgeprof.profilers.report.html`'s (profile, compare, optimize, sweep) and the
generative one (:mod:`~edgeprof.profilers.report.llm_html`)."""

from __future__ import annotations

import functools
import html as _html
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PAGE_ROWS = 200
PROVENANCES = ("measured", "predicted", "estimated", "analytic", "uncalibrated", "descriptor")
PROVENANCE_MEANING = {
    "measured": "measured by edgeprof: on this host, or on the board itself through a fleet "
                "worker (the page says which)",
    "predicted": "predicted by a calibration fitted to measurements of that target and runtime",
    "estimated": "derived from other figures by a named method (e.g. the host's measured "
                 "efficiency carried over to the target's roofline)",
    "analytic": "computed from the model's graph and the target's descriptor alone",
    "uncalibrated": "the roofline with a documented prior: no calibration exists for this "
                    "target and runtime",
    "descriptor": "a figure from the target's descriptor file (its source is in the tooltip)",
}
WARNING_EXPLANATIONS = {
    "high_cv": "Run-to-run variation is large (coefficient of variation above 10%): another "
               "program, frequency scaling or too few threads moved the timings. Medians and "
               "their confidence intervals are robust to a few outliers, small differences "
               "are not trustworthy.",
    "high_iqr": "The middle half of the samples is spread wide: the latency has two or more "
                "regimes (caches, scheduling). Compare medians with their intervals.",
    "slow_first_run": "The first inference took much longer than the steady state "
                      "(lazy initialisation, compilation, page faults). It is reported apart "
                      "as first_inference_ms and not mixed into the statistics.",
    "warmup_not_settled": "Warm-up ended at its cap before successive windows agreed: the "
                          "steady state may still include warm-up effects.",
    "time_cap_reached": "The timed phase stopped at --max-time before reaching its sample "
                        "target: the interval is wider than asked.",
    "ci_width_not_reached": "The confidence interval of the median did not get as narrow as "
                            "asked before the time cap.",
    "machine_busy": "Other processes used the CPU during the measurement: latencies may be "
                    "inflated. Rerun on an idle machine before trusting small differences.",
    "cpu_frequency_scaling": "The CPU clock governor can change frequency during the run; "
                             "pin it to 'performance' for stable timings.",
    "thread_oversubscription": "More threads were asked for than cores exist: threads "
                               "compete and latency grows.",
    "speed_drift": "The first, middle and last third of the timed samples have different "
                   "medians: the machine ran at another speed for part of the measurement "
                   "(another guest on a VM's host, frequency scaling). The interval of the "
                   "median does not cover that; a run at another time can land elsewhere. "
                   "With a thread on every core, one core taken by the host stalls them all: "
                   "fewer threads than cores (--threads) hold steadier.",
    "cpu_steal": "The hypervisor took CPU time from this VM during the run: timings include "
                 "time the VM did not run.",
    "measurement_below_roofline": "A measurement came out faster than the roofline allows: a "
                                  "figure in the target's descriptor (peak compute or "
                                  "bandwidth) is probably too low.",
    "host_uncalibrated": "The host could not be calibrated, so no figure for another target "
                         "could be estimated from the measurements.",
    "operator_profile_failed": "The runtime's per-operator profiler failed: that run has no "
                               "operator breakdown; its latency is unaffected.",
    "noisy_measurements": "Several measurements were flagged by the harness: rankings between "
                          "close candidates may flip on a rerun.",
}


# ----------------------------------------------------------------------------- values
def num(v: Any) -> float | None:
    """A finite float, or None (bools and strings are not numbers here)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def sig(v: float, digits: int = 4) -> str:
    """``v`` to ``digits`` significant digits (``%g``: no trailing zeros)."""
    return format(v, f".{digits}g")


def fmt(value: Any, unit: str | None = None) -> str:
    """How a number is shown on the page (decimal units: 1 MB = 1e6 B). None/NaN -> "—"."""
    if unit == "bool":
        f = num(value) if not isinstance(value, bool) else float(value)
        return "—" if f is None else ("yes" if f else "no")
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = num(value)
    if v is None:
        return "—" if value is None or isinstance(value, (int, float)) else str(value)
    scaled = {"B": ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")),
              "B/s": ((1e9, "GB/s"), (1e6, "MB/s")),
              "MAC/s": ((1e12, "TMAC/s"), (1e9, "GMAC/s"), (1e6, "MMAC/s")),
              "MAC": ((1e9, "GMAC"), (1e6, "MMAC"), (1e3, "kMAC")),
              "Hz": ((1e9, "GHz"), (1e6, "MHz"))}
    if unit in scaled:
        for factor, name in scaled[unit]:
            if abs(v) >= factor:
                return f"{sig(v / factor)} {name}"
        return f"{sig(v)} {unit}"
    if unit == "fraction":
        return f"{v * 100:.3g}%"
    if unit == "count" or (unit is None and float(v).is_integer() and abs(v) < 1e15):
        return f"{int(v):,}" + ("" if unit in (None, "count") else f" {unit}")
    if 1e4 <= abs(v) < 1e15:  # 37,810 ms, not 3.781e+04 ms
        return f"{v:,.0f}" + (f" {unit}" if unit else "")
    return sig(v) + (f" {unit}" if unit else "")


def esc(text: Any) -> str:
    """Text for Plotly's hover/labels: Plotly reads a small HTML subset, so escape it."""
    return _html.escape(str(text), quote=False)


# ----------------------------------------------------------------------------- charts
#: the plotly.js version of the bundles in ``vendor/``: the one the pinned python plotly writes
#: its figure JSON for (``plotly.offline.get_plotlyjs_version()``; a test checks they agree)
PLOTLY_JS_VERSION = "4.1.1"
VENDOR = Path(__file__).parent / "vendor"
#: plotly.js's partial bundles (npm plotly.js-<name>-dist-min, vendored unmodified, MIT), the
#: smallest first, with the trace types each registers; "full" is python plotly's own copy
PLOTLY_BUNDLES: dict[str, frozenset[str]] = {
    "basic": frozenset({"bar", "pie", "scatter"}),
    "cartesian": frozenset({"bar", "box", "contour", "heatmap", "histogram", "histogram2d",
                            "histogram2dcontour", "image", "pie", "scatter", "scatterternary",
                            "violin"}),
}


class _Chart(str):
    """A chart's HTML, remembering the trace types it draws (to pick the page's bundle)."""

    trace_types: frozenset[str] = frozenset()


def plotly_bundle(trace_types: Iterable[str] | None) -> str:
    """The smallest plotly.js bundle that draws every trace type in ``trace_types``:
    "basic", "cartesian", or "full" (a type neither partial bundle has, or ``None``: not
    known)."""
    if trace_types is None:
        return "full"
    need = set(trace_types)
    return next((name for name, has in PLOTLY_BUNDLES.items() if need <= has), "full")


def plotly_bundle_path(bundle: str) -> Path:
    return VENDOR / f"plotly-{bundle}-{PLOTLY_JS_VERSION}.min.js"


@functools.lru_cache(maxsize=4)
def plotly_js(bundle: str = "basic") -> str:
    """plotly.js to inline: the vendored partial bundle, or python plotly's full copy where
    the page needs a trace type no partial bundle has, or where python plotly writes figures
    for another major version of plotly.js than the one vendored."""
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    if bundle != "full" and get_plotlyjs_version().split(".")[0] == \
            PLOTLY_JS_VERSION.split(".")[0]:
        return plotly_bundle_path(bundle).read_text(encoding="utf-8")
    return get_plotlyjs()


def chart_html(fig, div_id: str) -> str:
    """A Plotly figure as a <div id="chart-{div_id}"> plus its newPlot call; plotly.js itself
    is in the page's head once. Each chart counts itself (``window.edgeprofChartDone``) when
    drawn, and the page marks ``<html data-charts-ready>`` when all are."""
    import plotly.io as pio

    fig.update_layout(template="plotly_white", margin=dict(l=60, r=20, t=50, b=60),
                      font=dict(size=12))
    out = _Chart(pio.to_html(fig, include_plotlyjs=False, full_html=False,
                             div_id=f"chart-{div_id}",
                             config={"displaylogo": False, "responsive": True},
                             post_script="window.edgeprofChartDone('{plot_id}');"))
    out.trace_types = frozenset(t.type or "scatter" for t in fig.data)
    return out


# ----------------------------------------------------------------------------- template
@functools.lru_cache(maxsize=1)
def _env():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "templates")),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(fmt=fmt, PROVENANCES=PROVENANCES, PROVENANCE_MEANING=PROVENANCE_MEANING,
                       num=num, setting=setting_text, breakable=breakable)
    return env


def breakable(label: Any) -> Any:
    """A column label that may wrap after its underscores (``parameter_<wbr>count``), so a
    wide table's headers fold instead of pushing it past the page's right edge."""
    from markupsafe import Markup, escape

    return Markup(str(escape(str(label))).replace("_", "_<wbr>"))


def setting_text(value: Any) -> str:
    """A setting (a plan step's value) as a reader writes it: ``inter_op 1, intra_op 4``
    for a mapping, ``a, b`` for a list, the text itself otherwise (never raw JSON)."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {setting_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "—" if value is None else str(value)


def render(template: str, **context: Any) -> str:
    from markupsafe import Markup

    charts = [c for c in context.get("charts", {}).values() if c]
    context["charts"] = {k: Markup(v) if v else None for k, v in context.get("charts", {}).items()}
    types: set[str] | None = set()
    for c in charts:  # a chart not made by chart_html: its trace types are not known
        t = getattr(c, "trace_types", None)
        types = None if t is None or types is None else types | t
    context.setdefault("plotly_bundle", plotly_bundle(types) if charts else None)
    context.setdefault("plotly_js", Markup(plotly_js(context["plotly_bundle"])
                                           if charts else ""))  # no chart, no plotly.js
    context["chart_count"] = len(charts)
    context.setdefault("tables", {})
    context.setdefault("page_rows", PAGE_ROWS)
    return _env().get_template(template).render(**context)


def table_data(columns: Sequence[dict[str, Any]], rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """Data for the inline sortable/filterable/paged table (rendered by JS from JSON)."""
    return {"columns": list(columns), "rows": [[json_safe(v) for v in r] for r in rows],
            "page": PAGE_ROWS}


def json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 1) == 0:
        return json_safe(v.item())
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def warning_groups(warnings: Iterable[Any]) -> list[dict[str, Any]]:
    """Warnings grouped by code: how often each occurred, its distinct messages and what the
    code means (:data:`WARNING_EXPLANATIONS`; unknown codes keep their messages only)."""
    seen: dict[str, dict[str, Any]] = {}
    for w in warnings or []:
        if not isinstance(w, dict):
            continue
        code, msg = str(w.get("code") or "warning"), str(w.get("message") or "")
        item = seen.setdefault(code, {"code": code, "messages": [], "count": 0,
                                      "explanation": WARNING_EXPLANATIONS.get(code)})
        item["count"] += 1
        if msg and msg not in item["messages"]:
            item["messages"].append(msg)
    return list(seen.values())


# ----------------------------------------------------------------------------- output
def write_html(path: str | Path, text: str) -> Path:
    """Write a report atomically; a path that cannot be written is the user's error (exit 2,
    one line), not a traceback."""
    from edgeprof.core.errors import OutputError
    from edgeprof.core.io import write_text

    p = Path(path)
    if p.is_dir():
        raise OutputError(f"--html needs a file name, got the folder '{p}'", path=p)
    try:
        return write_text(p, text)
    except OSError as e:
        raise OutputError(f"cannot write the HTML report to '{p}': {e.strerror or e}; give a "
                          "writable file path", path=p) from None

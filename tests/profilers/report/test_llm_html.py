"""The HTML report of a generative model (edgeprof.profilers.report.llm_html).

The payload is real where it can be without running a model: the estimate and the
prediction of tinyllama-1.1b on raspberry_pi_5 (``edgeprof.api.estimate_llm``) and the
router's recommendation. The runs are synthetic GenerationRecords (one ok, one failed):
they exist only to check that the page draws measured bars, whiskers and reasons, and
are never shown as anyone's measurement. The browser checks reuse the Chromium driver of
tests/profilers/report/test_html.py.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from edgeprof.core.llm import RANDOM_WEIGHTS_NOTE, GenerationRecord
from edgeprof.profilers.report import llm_html as L
from edgeprof.profilers.report.html import PAGE_ROWS
from tests.profilers.report.test_html import (PAYLOAD, assert_frames, axis_frame,  # noqa: F401
                                              browser, count, esc, fig_spans, show,
                                              table_spec)

MODEL = "llm:tinyllama-1.1b"
FORMATS = "q4_k_m,q8_0,int4"


def synthetic_runs():
    ok = GenerationRecord(
        model="tinyllama-1.1b", backend="llama_cpp", format="q4_k_m", n_prompt=512,
        n_gen=128, n_threads=2, repetitions=5,
        prefill_tokens_per_s={"median": 48.0, "mean": 47.6, "stddev": 1.1, "min": 46.0,
                              "max": 49.0},
        decode_tokens_per_s={"median": 21.0, "mean": 21.0, "stddev": 0.3, "min": 20.5,
                             "max": 21.4},
        ttft_ms={"median": 10700.0, "mean": 10750.0}, tpot_ms={"p50": 47.6, "p90": 49.9},
        load_s=0.4, peak_rss_bytes=900_000_000, model_size=667_078_656)
    failed = GenerationRecord(model="tinyllama-1.1b", backend="onnxruntime_genai",
                              format="int4", status="failed", reason="builder crashed")
    return [ok.to_dict(), failed.to_dict()]


@pytest.fixture(scope="module")
def payload():
    from edgeprof.api import estimate_llm, recommend_llm

    p = estimate_llm(MODEL, "raspberry_pi_5", backends=["llama_cpp", "onnxruntime_genai"],
                     precisions=FORMATS)
    p["recommendation"] = recommend_llm(MODEL, "raspberry_pi_5", context_tokens=2048,
                                        tokens_per_s=10).to_dict()
    p["runs"] = synthetic_runs()
    return p


@pytest.fixture(scope="module")
def html(payload):
    return L.render_llm_html(payload)


def bad_payload(p):
    d = copy.deepcopy(p)
    d["model"]["spec"]["name"] = PAYLOAD
    d["model"]["given"] = PAYLOAD
    d["runs"][1]["reason"] = f"crashed: {PAYLOAD}"
    d["recommendation"]["reasons"].insert(0, PAYLOAD)
    d["notes"].append(PAYLOAD)
    d["estimates"][0]["layers"][1]["name"] = PAYLOAD
    return d


# ----------------------------------------------------------------------------- unit
def test_page_has_the_four_charts_with_their_points(payload, html):
    ests = payload["estimates"]
    ok_runs = [r for r in payload["runs"] if r["status"] == "ok"]
    for chart in ("roofline", "memory", "rates"):
        assert f'id="chart-{chart}"' in html
    roof = re.search(r'data-chart="roofline" data-analytic-points="(\d+)" '
                     r'data-predicted-points="(\d+)" data-measured-points="(\d+)"', html)
    assert [int(x) for x in roof.groups()] == [2 * len(ests), 2 * len(payload["predictions"]),
                                              2 * len(ok_runs)]
    mem = re.search(r'data-chart="memory" data-curves="(\d+)" data-marks="(\d+)"', html)
    assert [int(x) for x in mem.groups()] == [len(ests), len(ests)]
    rates = re.search(r'data-measured-bars="(\d+)" data-predicted-bars="(\d+)"', html)
    assert [int(x) for x in rates.groups()] == [2 * len(ok_runs), 2 * len(payload["predictions"])]


def test_labels_say_where_each_number_comes_from(html):
    for label in ("prefill on raspberry_pi_5 roof (analytic)",
                  "decode on raspberry_pi_5 (predicted)", "decode measured on this host",
                  "measured on this host (median; whiskers: min–max)",
                  "predicted on raspberry_pi_5 cpu (whiskers: interval)",
                  "longest context that fits (max_context_tokens)",
                  "usable after the OS reserve", "(descriptor)"):
        # chart text sits in the figure's JSON (non-ASCII as \\u escapes)
        assert label in html or json.dumps(label)[1:-1] in html, label
    spans = fig_spans(html)
    assert spans and all(s["data-prov"] for s in spans if not s["na"])
    assert {s["data-prov"] for s in spans if s.get("data-key") == "decode_median"} == \
        {"measured"}


def test_random_weights_banner(payload, html):
    assert 'id="random-weights"' in html and RANDOM_WEIGHTS_NOTE in html
    real = copy.deepcopy(payload)
    real["model"]["random_weights"] = False
    assert 'id="random-weights"' not in L.render_llm_html(real)


def test_numbers_equal_the_payload(payload, html):
    spans = fig_spans(html)
    for name in ("weight_bytes", "max_context_tokens", "kv_cache_bytes_per_token"):
        shown = [float(s["data-value"]) for s in spans if s.get("data-key") == name]
        assert shown == [float(e["figures"][name]["value"]) for e in payload["estimates"]]
    shown = [float(s["data-value"]) for s in spans if s.get("data-key") == "decode_tokens_per_s"]
    assert shown == [p["decode_tokens_per_s"]["value"] for p in payload["predictions"]]
    assert {s["data-prov"] for s in spans if s.get("data-key") == "decode_tokens_per_s"} == \
        {p["decode_tokens_per_s"]["provenance"] for p in payload["predictions"]}


def test_recommendation_and_candidates(payload, html):
    rec = payload["recommendation"]
    assert f'class="verdict-{rec["verdict"]}">{rec["verdict"]}<' in html
    assert f"<b>{rec['format']}</b> on <b>{rec['backend']}</b>" in html
    for r in rec["reasons"]:
        assert esc(r) in html
    spec = table_spec(html, "candidates")
    assert [(r[0], r[1], r[2]) for r in spec["rows"]] == \
        [(c["backend"], c["format"], c["status"]) for c in rec["candidates"]]


def test_layer_table_holds_every_estimate_row(payload, html):
    spec = table_spec(html, "layers")
    assert [c["key"] for c in spec["columns"]] == list(L.LLM_LAYER_COLUMNS)
    assert len(spec["rows"]) == sum(len(e["layers"]) for e in payload["estimates"])
    first = payload["estimates"][0]
    assert spec["rows"][1][:4] == [first["backend"], first["format"], first["depth"],
                                   first["layers"][1]["name"]]


def test_runs_with_status_and_reason(html):
    assert 'data-status="ok"' in html and 'data-status="failed"' in html
    assert "builder crashed" in html


def test_page_is_small_and_self_contained(html):
    from edgeprof.profilers.report.html import plotly_js

    basic = plotly_js("basic")  # scatter and bar: the light bundle (issue 20)
    assert html.count(basic) == 1
    ours = html.replace(basic, "")
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|https?://", ours, re.I)
    assert len(ours) < 400_000  # no per-token dumps: the page is plotly.js plus ~100 kB
    assert len(html.encode()) < 1.5e6


@pytest.mark.parametrize("context", [None, 180, 2048, 100_000])
def test_memory_chart_places_the_asked_context_on_the_log_axis(payload, context):
    """The context asked is a line at that many tokens and its label at log10 of it (plotly
    reads an annotation's x in log10 units on a log axis: 180 tokens, placed as 180, stretched
    the axis to 10^180)."""
    import math

    p = copy.deepcopy(payload)
    p["recommendation"]["context_tokens"] = context
    chart, _ = L._memory_chart(p, p["estimates"])
    fig = json.loads(re.search(r"Plotly\.newPlot\(\s*\"chart-memory\",\s*(\[.*?\]),\s*(\{.*?\}),"
                               r"\s*\{\"displaylogo\"", chart, re.S).group(2))
    asked = [a for a in fig.get("annotations", []) if "context asked" in a["text"]]
    lines = [s for s in fig.get("shapes", []) if s.get("xref") == "x"]
    if context is None:
        assert asked == [] and lines == []
        return
    assert [a["x"] for a in asked] == [pytest.approx(math.log10(context))]
    assert [(s["x0"], s["x1"]) for s in lines] == [(context, context)]


def test_command_reproduces_the_payload(payload, html):
    cmd = L.llm_command(payload)
    assert cmd == ("edgeprof estimate llm:tinyllama-1.1b --backend llama_cpp,onnxruntime_genai "
                   "--precision q4_k_m,q8_0,int4 --prompt-tokens 512 --gen-tokens 128 "
                   "--target raspberry_pi_5")
    assert esc(cmd) in html


def test_bad_input_is_escaped(payload):
    page = L.render_llm_html(bad_payload(payload))
    assert PAYLOAD not in page and "window.__pwned=2</script>" not in page
    assert "&lt;img src=x onerror=" in page


def test_estimate_only_and_empty_payloads_render():
    from edgeprof.api import estimate_llm

    bare = estimate_llm(MODEL, None, backends=["llama_cpp"], precisions="q4_0")
    page = L.render_llm_html(bare)
    assert 'data-key="no-runs"' in page and 'id="chart-memory"' in page
    assert 'id="chart-roofline"' not in page and 'id="chart-rates"' not in page
    assert "<html" in L.render_llm_html({})


def test_write_is_atomic_and_a_folder_is_a_user_error(tmp_path, payload):
    from edgeprof.core.errors import OutputError

    out = L.write_llm_html(tmp_path / "sub" / "llm.html", payload)
    assert out.read_text(encoding="utf-8") == L.render_llm_html(payload)
    assert sorted(p.name for p in out.parent.iterdir()) == ["llm.html"]
    with pytest.raises(OutputError, match="needs a file name"):
        L.write_llm_html(tmp_path, payload)


def test_out_folder_gets_the_page(tmp_path, payload):
    from edgeprof.profilers.report.llm_outputs import write_llm_outputs

    from edgeprof.profilers.report.generative import GenerativeReport

    write_llm_outputs(tmp_path / "out", GenerativeReport.from_dict(copy.deepcopy(payload)))
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert 'id="chart-roofline"' in page and 'id="random-weights"' in page


# ----------------------------------------------------------------------------- browser
def test_llm_page_in_the_browser(browser, tmp_path, payload, html):  # noqa: F811
    show(browser, tmp_path, "llm", html)
    ests, preds = payload["estimates"], payload["predictions"]
    ok_runs = [r for r in payload["runs"] if r["status"] == "ok"]
    assert count(browser, "#chart-roofline path.point") == \
        2 * len(ests) + 2 * len(preds) + 2 * len(ok_runs)
    assert count(browser, "#chart-rates .trace.bars .point path") == \
        2 * len(ok_runs) + 2 * len(preds)
    assert count(browser, "#chart-rates .errorbar") >= 2 * len(ok_runs) + 2 * len(preds)
    assert browser.eval("document.getElementById('chart-memory').data.length") == len(ests) + 1
    assert browser.eval("document.getElementById('random-weights').offsetHeight") > 0
    assert count(browser, "#candidates tbody tr") == len(payload["recommendation"]["candidates"])
    assert count(browser, "#layers tbody tr") == min(PAGE_ROWS,
                                                     sum(len(e["layers"]) for e in ests))


@pytest.mark.parametrize("context", [180, 2048])
def test_memory_chart_axes_frame_the_data(browser, tmp_path, payload, context):  # noqa: F811
    """Read back from the drawn page: the memory chart's log x axis spans the curves and the
    context asked, not 10^180; the y axis from 0 to a bit above the curves and the RAM line;
    the label of the context asked is inside the plot."""
    p = copy.deepcopy(payload)
    p["recommendation"]["context_tokens"] = context
    show(browser, tmp_path, f"llm_context_{context}", L.render_llm_html(p))
    x = axis_frame(browser, "chart-memory", "xaxis")
    assert x["type"] == "log"
    assert_frames(x, min(x["min"], context), max(x["max"], context))
    y = axis_frame(browser, "chart-memory", "yaxis")
    ram = p["target"]["figures"]["ram"]["value"] / 1e9
    assert_frames(y, 0, max(y["max"], ram))
    for chart in ("roofline", "rates"):
        assert_frames(axis_frame(browser, f"chart-{chart}", "yaxis"), 0 if chart == "rates"
                      else None, slack=0.6)
    assert_frames(axis_frame(browser, "chart-roofline", "xaxis"))
    label = browser.eval("(() => { const plot = document.querySelector('#chart-memory "
                         ".nsewdrag').getBoundingClientRect(); const a = [...document."
                         "querySelectorAll('#chart-memory .annotation')].find(e => e."
                         "textContent.startsWith('context asked')); if (!a) return null; "
                         "const r = a.getBoundingClientRect(); return [r.left >= plot.left - 1,"
                         " r.right <= plot.right + 1, a.textContent]; })()")
    assert label == [True, True, f"context asked: {context:,} tokens"]


def test_bad_input_page_in_the_browser(browser, tmp_path, payload):  # noqa: F811
    show(browser, tmp_path, "llm_bad", L.render_llm_html(bad_payload(payload)))
    assert browser.eval("window.__pwned === undefined")
    assert browser.eval("document.querySelector('#reasons li').textContent").startswith(
        "<img src=x onerror=")


def test_a_mixture_of_experts_page_shows_its_experts_and_active_parameters():
    """The header of an MoE's page says how many experts a token runs and the parameters
    that reads, beside the total held; a dense model's says neither."""
    from edgeprof.api import estimate_llm

    moe = L.render_llm_html(estimate_llm("llm:qwen3-30b-a3b", "raspberry_pi_5",
                                         backends="llama_cpp", precisions="q4_k_m"))
    assert "128 experts × FFN 768, 8 per token" in moe
    assert re.search(r'active per token</dt><dd><span class="fig" '
                     r'data-key="active_parameters_per_token" data-value="3353020416"', moe)
    dense = L.render_llm_html(estimate_llm("llm:qwen3-0.6b", "raspberry_pi_5",
                                           backends="llama_cpp", precisions="q4_k_m"))
    assert "active per token" not in dense and "experts" not in dense.split("<h2")[0]

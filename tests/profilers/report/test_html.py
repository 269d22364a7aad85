"""The HTML reports (edgeprof.profilers.report.html).

Unit tests read the HTML string; a few tests open each kind of page in headless Chromium
(driven over the DevTools protocol with websocket-client) and check what a user would see:
no console errors, no network request, the charts drawn as SVG with the expected number of
points and bars, and the key numbers equal to the document's. A screenshot per kind is kept
in the test's temporary folder. The browser tests fail (never skip) when Chromium is
missing: `make install` installs Debian's chromium.

The documents are real: a profile of small_cnn (torch_eager fp32/int8 measured with
--trace, int4_weight unsupported, tensorrt unavailable here) and a small optimize run; the
bad inputs are those documents with runs failed, figures nulled, names holding HTML, and the
estimate's rows repeated to 1,000 layers.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from edgeprof.profilers.report import html as H

TINY = {"runs": 20, "min_time_s": 0.05, "max_time_s": 0.5}
PAYLOAD = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>'
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


# ----------------------------------------------------------------------------- documents
@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    from edgeprof.api import profile

    out = tmp_path_factory.mktemp("profile") / "out"
    report = profile("builtin:small_cnn", target="raspberry_pi_4",
                     backends=["torch_eager", "tensorrt"], precisions=["fp32", "int8",
                                                                       "int4_weight"],
                     run_options=TINY, latency_budget_ms=0.5, trace=True, out=out)
    return report.to_dict(), out


@pytest.fixture(scope="module")
def doc(profiled):
    return profiled[0]


@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    from edgeprof.optimize.loop import optimize

    out = tmp_path_factory.mktemp("optimize") / "out"
    report = optimize("builtin:mlp", "raspberry_pi_4", latency_budget_ms=2.0,
                      run_options=TINY, candidates=["torch_eager:fp32", "torch_eager:int8_dynamic",
                                                    "torch_eager:bf16"],
                      train_seconds=1, finetune_steps=0, out=out)
    return report.to_dict(), out


@pytest.fixture(scope="module")
def host_doc():
    from edgeprof.api import profile

    return profile("builtin:mlp", target="host", backends=["torch_eager"],
                   precisions=["fp32", "int8"], run_options=TINY).to_dict()


def sweep_frame(*docs):
    """A sweep's frame from real profiles: the latency each run has for its target, with
    that figure's own provenance (measured on the host, estimated for another target)."""
    import pandas as pd

    rows = []
    for d in docs:
        for r in d["runs"]:
            fig = ((r.get("summary") or {}).get("figures") or {}).get("latency_ms") or {}
            stats = r["benchmark"].get("stats") or {}
            on_host = bool((r.get("summary") or {}).get("on_host"))
            rows.append({"model": d["model"]["name"], "target": d["target"]["id"],
                         "backend": r["backend"], "precision": r["requested_precision"],
                         "batch_size": d["request"]["batch_size"], "status": r["status"],
                         "reason": r["reason"], "median_ms": fig.get("value"),
                         "ci_low_ms": stats.get("ci_low_ms") if on_host else None,
                         "ci_high_ms": stats.get("ci_high_ms") if on_host else None,
                         "provenance": fig.get("provenance"), "board": "this host"})
    return pd.DataFrame(rows, columns=list(H.SWEEP_COLUMNS))


def bad_doc(doc, layers=1000):
    """The profile with every kind of bad input at once: HTML in names and reasons, a failed
    run, null figures and stats, and the estimate's rows repeated to ``layers`` rows."""
    d = copy.deepcopy(doc)
    d["model"]["name"] = PAYLOAD
    d["target"]["name"] = PAYLOAD
    base = d["estimate"]["layers"]
    d["estimate"]["layers"] = []
    for i in range(layers):
        row = dict(base[i % len(base)])
        row["layer"] = f"{PAYLOAD}{i}" if i < 3 else f"{row['layer']}.{i}"
        d["estimate"]["layers"].append(row)
    ok = [r for r in d["runs"] if r["status"] == "ok"]
    failed = ok[-1]
    failed["status"] = failed["benchmark"]["status"] = "failed"
    failed["reason"] = failed["benchmark"]["reason"] = f"worker crashed: {PAYLOAD}"
    failed["benchmark"]["stats"] = None
    failed["operators"] = [{"layer": PAYLOAD, "latency_ms": None}]
    for f in failed["summary"]["figures"].values():
        f["value"], f["reason"] = None, f"no measurement: {PAYLOAD}"
    d["warnings"].append({"code": "high_cv", "message": PAYLOAD})
    d["warnings"].append({"code": "made_up_code", "message": "a code the page does not know"})
    d["estimate"]["totals"]["roofline_latency_ms"] = None
    return d


# ----------------------------------------------------------------------------- helpers
def fig_spans(html: str) -> list[dict[str, str]]:
    """Every number shown with provenance: its key, value, provenance and shown text."""
    out = []
    for m in re.finditer(r'<span class="fig( na)?"([^>]*)>(.*?)</span>(</span>)?', html):
        attrs = dict(re.findall(r'(data-[a-z]+)="([^"]*)"', m.group(2)))
        text = re.sub(r"<[^>]+>", " ", m.group(3)).split()
        out.append({**attrs, "text": text[0] if text else "", "na": bool(m.group(1))})
    return out


def esc(text: str) -> str:
    """Text as the templates write it (Jinja2's autoescape)."""
    from markupsafe import escape

    return str(escape(text))


def table_spec(html: str, table_id: str) -> dict:
    """The JSON a sortable table is drawn from."""
    m = re.search(rf'id="{table_id}">.*?<script type="application/json">(.*?)</script>', html,
                  re.S)
    assert m, f"no table {table_id}"
    return json.loads(m.group(1))


def key(html: str, name: str) -> dict[str, str]:
    found = [f for f in fig_spans(html) if f.get("data-key") == name]
    assert found, f"no number with data-key={name}"
    return found[0]


def run_figure(doc, backend, precision, name="latency_ms"):
    run = next(r for r in doc["runs"] if r["backend"] == backend
               and r["requested_precision"] == precision)
    return run["summary"]["figures"][name]


# ----------------------------------------------------------------------------- unit: values
@pytest.mark.parametrize("value,unit,shown", [
    (None, "ms", "—"), (float("nan"), "ms", "—"), (0.1304, "ms", "0.1304 ms"),
    (4.3e9, "B/s", "4.3 GB/s"), (48e9, "MAC/s", "48 GMAC/s"), (81960.0, "B", "81.96 kB"),
    (1031744, "MAC", "1.032 MMAC"), (0.0763, "fraction", "7.63%"), (20490, "count", "20,490"),
    (1.0, "bool", "yes"), (0.0, "bool", "no"), (12, None, "12"),
    (37809.62, "ms", "37,810 ms")])  # was 3.781e+04 ms
def test_fmt_shows_units_decimal(value, unit, shown):
    assert H.fmt(value, unit) == shown


def test_log_axes_label_full_numbers_and_wide_bars_go_log():
    """Plotly's dtick "D2" labelled 0.5 and 0.05 both "5"; and a board's prediction with a
    37,810 ms whisker beside a 12.9 ms host bar flattened the host bar to nothing."""
    from edgeprof.profilers.report.html_figures import latency_bars, log_ticks

    ticks = log_ticks([0.04, 0.48])
    labels = dict(zip(ticks["tickvals"], ticks["ticktext"]))
    assert labels[0.05] == "0.05" and labels[0.5] == "0.5" and labels[0.2] == "0.2"
    assert log_ticks([1e-3, 1e6])["ticktext"].count("2") == 0  # 1 x 10^k over many decades
    assert "20,000" in log_ticks([12.9, 37810])["ticktext"]
    rows = [{"label": "torch_eager fp32", "host": 12.93, "host_lo": 12.8, "host_hi": 13.1,
             "board": 931.0, "board_lo": 158.0, "board_hi": 37810.0}]
    series = [("host", "host", "host_lo", "host_hi"), ("board", "board", "board_lo", "board_hi")]
    html, bars = latency_bars(rows, "t", "c", series)
    assert bars == 2 and '"type":"log"' in html.replace(" ", "")
    rows[0].update(board=20.0, board_lo=15.0, board_hi=30.0)  # within 30x: a linear axis
    html, _ = latency_bars(rows, "t", "c", series)
    assert '"type":"log"' not in html.replace(" ", "")


def test_pareto_front_keeps_only_undominated_points():
    pts = [{"label": "a", "latency_ms": 1.0, "accuracy": 0.90},
           {"label": "b", "latency_ms": 2.0, "accuracy": 0.95},
           {"label": "c", "latency_ms": 3.0, "accuracy": 0.93},  # slower and worse than b
           {"label": "d", "latency_ms": 0.5, "accuracy": 0.80},
           {"label": "e", "latency_ms": None, "accuracy": 0.99}]
    assert [p["label"] for p in H.pareto_front(pts)] == ["d", "a", "b"]


def test_roofline_points_are_the_estimates_roofline(doc):
    from edgeprof.profilers.report.plots import roofline_points

    est = doc["estimate"]
    peak, bw = est["peak_macs_per_s"], est["memory_bandwidth_bytes_per_s"]
    pts = roofline_points(est["layers"])
    assert len(pts) == sum(1 for r in est["layers"] if r["macs"] > 0)
    for p in pts:
        assert p["attainable"] == pytest.approx(min(peak, p["intensity"] * bw), rel=1e-9)


def test_roofline_png_at_180_dpi(profiled):
    from PIL import Image

    _, out = profiled
    with Image.open(out / "roofline.png") as im:
        assert im.format == "PNG"
        assert [round(x) for x in im.info["dpi"]] == [180, 180]


# ----------------------------------------------------------------------------- unit: profile
def test_out_has_the_report_and_it_is_self_contained(profiled):
    doc, out = profiled
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html == H.render_profile_html(json.loads((out / "profile.json").read_text()))
    basic = H.plotly_js("basic")
    assert html.count(basic) == 1  # plotly.js inlined, once: the basic bundle (scatter, bar)
    ours = html.replace(basic, "")  # (its code names URLs it never fetches here)
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|@import|<iframe", ours, re.I)
    assert not re.search(r"https?://", ours, re.I)
    assert len(html.encode()) < 1.5e6  # the light report (issue 20): was 4.9 MB


# ----------------------------------------------------------------------------- unit: plotly.js
def test_vendored_bundles_are_pinned_to_python_plotlys_version_with_their_licence():
    import hashlib

    from plotly.offline import get_plotlyjs_version

    assert H.PLOTLY_JS_VERSION == get_plotlyjs_version()  # figure JSON and plotly.js agree
    licence = (H.VENDOR / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and "Plotly" in licence
    readme = (H.VENDOR / "README.md").read_text(encoding="utf-8")
    for bundle, types in H.PLOTLY_BUNDLES.items():
        path = H.plotly_bundle_path(bundle)
        head = path.read_text(encoding="utf-8")[:200]
        assert f"plotly.js ({bundle} - minified) v{H.PLOTLY_JS_VERSION}" in head
        assert "Licensed under the MIT license" in head
        assert hashlib.sha256(path.read_bytes()).hexdigest() in readme  # unmodified, as listed
        assert f"plotly.js-{bundle}-dist-min@{H.PLOTLY_JS_VERSION}" in readme
        assert path.stat().st_size < 1.6e6
    assert H.plotly_js("basic") == H.plotly_bundle_path("basic").read_text(encoding="utf-8")


def test_vendored_bundles_ship_in_the_wheel():
    """hatchling puts every file under edgeprof/ that git does not ignore into the wheel:
    the bundles and their licence must be neither ignored nor excluded."""
    root = Path(H.__file__).resolve().parents[3]
    files = [H.plotly_bundle_path(b) for b in H.PLOTLY_BUNDLES] + [H.VENDOR / "LICENSE"]
    if not (root / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "-C", str(root), "check-ignore", *map(str, files)],
                             capture_output=True, text=True).stdout.split()
    assert ignored == []
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    wheel = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"]["wheel"]
    assert wheel["packages"] == ["edgeprof"] and "exclude" not in wheel


@pytest.mark.parametrize("types,bundle", [
    ({"scatter"}, "basic"), ({"scatter", "bar"}, "basic"), (set(), "basic"),
    ({"heatmap", "bar"}, "cartesian"), ({"scatter3d"}, "full"), (None, "full")])
def test_the_smallest_bundle_that_draws_the_page(types, bundle):
    assert H.plotly_bundle(types) == bundle


def test_each_page_inlines_the_bundle_its_charts_need(doc, host_doc):
    basic, cartesian = H.plotly_js("basic"), H.plotly_js("cartesian")
    for html in (H.render_profile_html(doc), H.render_compare_html(doc, doc)):
        assert html.count(basic) == 1 and cartesian not in html
    sweep = H.render_sweep_html(sweep_frame(doc, host_doc))  # a heatmap: cartesian
    assert sweep.count(cartesian) == 1 and basic not in sweep
    bare = H.render_profile_html({"runs": [], "estimate": {"layers": []}, "target": {},
                                  "model": {}})
    assert "plotly.js" not in bare and len(bare) < 100_000  # no chart, no plotly.js


def test_header_numbers_equal_the_document(doc):
    html = H.render_profile_html(doc)
    totals = doc["estimate"]["totals"]
    assert float(key(html, "total_macs")["data-value"]) == totals["macs"]
    assert key(html, "total_macs")["data-prov"] == "analytic"
    assert float(key(html, "peak_macs_per_s")["data-value"]) == doc["estimate"]["peak_macs_per_s"]
    assert key(html, "peak_macs_per_s")["data-prov"] == "descriptor"
    timed = [(r["summary"]["figures"]["latency_ms"], r) for r in doc["runs"] if r["status"] == "ok"]
    best_fig, best = min(timed, key=lambda t: t[0]["value"])
    shown = key(html, "fastest_latency_ms")
    assert float(shown["data-value"]) == best_fig["value"]
    assert shown["data-prov"] == best_fig["provenance"] != "measured"  # rpi4 is not this host
    assert H.fmt(best_fig["value"], "ms").startswith(shown["text"])
    assert f"{best['backend']} {best['requested_precision']}" in html
    budget = "met" if best["summary"]["figures"]["meets_latency_budget"]["value"] else "not met"
    assert re.search(rf'data-key="budget">[^<]*<span class="(good|bad)">{budget}<', html)


def test_every_run_is_listed_with_status_and_reason(doc):
    html = H.render_profile_html(doc)
    for r in doc["runs"]:
        row = re.search(rf'<tr data-run="{r["backend"]} {r["requested_precision"]}" '
                        rf'data-status="{r["status"]}">', html)
        assert row, (r["backend"], r["requested_precision"])
        if r["status"] != "ok":
            assert esc(r["reason"]) in html
    assert {r["status"] for r in doc["runs"]} == {"ok", "unsupported", "unavailable"}


def test_provenance_badges_are_the_documents(doc):
    html = H.render_profile_html(doc)
    spans = fig_spans(html)
    assert spans and all(s["data-prov"] for s in spans if not s["na"])
    shown = {float(s["data-value"]): s["data-prov"] for s in spans
             if s.get("data-key") == "target_latency_ms" and s["data-value"]}
    for r in doc["runs"]:
        f = r["summary"]["figures"]["latency_ms"]
        if f["value"] is not None:
            assert shown[f["value"]] == f["provenance"]
    medians = [s for s in spans if s.get("data-key") == "median_ms"]
    assert medians and {s["data-prov"] for s in medians} == {"measured"}
    for s in spans:  # every badge is a provenance the document uses, or the target's file
        assert s["data-prov"] in H.PROVENANCES


def test_layer_table_has_every_layer_and_the_layerwise_columns(doc):
    html = H.render_profile_html(doc)
    spec = table_spec(html, "layers")
    cols = [c["key"] for c in spec["columns"]]
    assert cols[:len(H.LAYER_COLUMNS)] == list(H.LAYER_COLUMNS)
    assert [r[0] for r in spec["rows"]] == [r["layer"] for r in doc["estimate"]["layers"]]
    i = cols.index("macs")
    assert [r[i] for r in spec["rows"]] == [r["macs"] for r in doc["estimate"]["layers"]]
    measured = [c for c in cols if c.startswith("measured:")]  # --trace ran
    assert measured == ["measured:torch_eager fp32", "measured:torch_eager int8→int8_dynamic"]


def test_warnings_are_grouped_and_explained(doc):
    html = H.render_profile_html(bad_doc(doc, layers=10))
    assert 'data-code="high_cv"' in html and H.WARNING_EXPLANATIONS["high_cv"] in html
    assert 'data-code="made_up_code"' in html and "a code the page does not know" in html


def test_command_reproduces_the_request(doc):
    from edgeprof.cli.main import build_parser

    cmd = H.profile_command(doc)
    args = build_parser().parse_args(shlex.split(cmd)[1:])
    req = doc["request"]
    assert (args.model, args.target) == (req["model"], req["target"])
    assert args.backend.split(",") == req["backends"]
    assert args.precision.split(",") == req["precisions"]
    assert args.latency_budget_ms == req["latency_budget_ms"]
    assert (args.runs, args.min_time, args.max_time) == (20, 0.05, 0.5)
    assert args.trace is True
    assert cmd in H.render_profile_html(doc)


# ----------------------------------------------------------------------------- unit: bad input
def test_bad_input_renders_escaped_and_paged(doc):
    d = bad_doc(doc)
    html = H.render_profile_html(d)
    assert PAYLOAD not in html and "window.__pwned=2</script>" not in html
    assert "&lt;img src=x onerror=" in html  # shown as text
    spec = table_spec(html, "layers")
    assert len(spec["rows"]) == 1000 and spec["page"] == H.PAGE_ROWS
    failed = re.search(r'data-status="failed"', html)
    assert failed and "worker crashed: &lt;img" in html
    assert key(html, "roofline_latency_ms")["na"]  # a null figure is "—", not 0
    assert len(html.encode()) < 1.7e6  # 1,000 rows of JSON on top of the basic bundle


def test_estimate_only_and_empty_documents_render(doc):
    d = copy.deepcopy(doc)
    d["runs"], d["warnings"] = [], []
    html = H.render_profile_html(d)
    assert 'data-key="no-runs"' in html and "no configuration produced a latency" in html
    assert 'id="chart-roofline"' in html and 'id="chart-runs"' not in html
    bare = {"runs": [], "estimate": {"layers": []}, "target": {}, "model": {}}
    assert "<html" in H.render_profile_html(bare)


def test_optimize_page(optimized):
    d, out = optimized
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html == H.render_optimize_html(json.loads((out / "optimize.json").read_text()))
    chosen = d["chosen"]
    assert float(key(html, "chosen_latency_ms")["data-value"]) == chosen["latency_ms"]
    assert key(html, "chosen_latency_ms")["data-prov"] == chosen["latency_provenance"]
    assert float(key(html, "chosen_accuracy")["data-value"]) == chosen["accuracy"]
    for step in d["plan"]["steps"]:
        assert esc(step["reason"]) in html
    spec = table_spec(html, "candidates")
    reasons = {r[0]: (r[1], r[-1]) for r in spec["rows"]}
    skipped = [c for c in d["candidates"] if c["status"] != "ok"]
    assert skipped and all(reasons[c["label"]] == (c["status"], c["reason"]) for c in skipped)


def test_sweep_page_needs_the_columns(doc):
    with pytest.raises(ValueError, match="missing: .*median_ms"):
        H.render_sweep_html(sweep_frame(doc).drop(columns=["median_ms"]))


def test_write_html_to_a_folder_is_a_user_error(tmp_path, doc):
    from edgeprof.cli.main import main
    from edgeprof.core.errors import OutputError

    with pytest.raises(OutputError, match="needs a file name"):
        H.write_html(tmp_path, "<html></html>")
    a = tmp_path / "a.json"
    a.write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "edgeprof", "compare", str(a), str(a),
                           "--html", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--html needs a file name" in proc.stderr
    assert main(["compare", str(a), str(a), "--html", str(tmp_path / "c" / "cmp.html")]) == 0
    assert "no significant change" in (tmp_path / "c" / "cmp.html").read_text()


def test_profile_html_flag_writes_the_page(tmp_path, capsys):
    from edgeprof.cli.main import main

    page = tmp_path / "sub" / "mlp.html"
    code = main(["profile", "builtin:mlp", "--target", "host", "--backend", "torch_eager",
                 "--runs", "20", "--min-time", "0.05", "--max-time", "0.5", "--json",
                 "--html", str(page)])
    doc = json.loads(capsys.readouterr().out)
    html = page.read_text(encoding="utf-8")
    assert code == 0 and html.startswith("<!DOCTYPE html>")
    assert float(key(html, "median_ms")["data-value"]) == \
        doc["runs"][0]["benchmark"]["stats"]["median_ms"]
    assert "edgeprof profile builtin:mlp --target host --backend torch_eager" in html


# ----------------------------------------------------------------------------- the browser
def chromium_binary() -> str:
    for name in (os.environ.get("EDGEPROF_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.fail("Chromium is not installed: the HTML report's browser tests need it. Run "
                "'make install' (it runs apt-get install chromium) or set EDGEPROF_CHROMIUM.")


class Chromium:
    """Headless Chromium over the DevTools protocol: open a file, evaluate JavaScript,
    collect console errors, exceptions and network requests, take screenshots."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900):
        import websocket  # websocket-client (dev extra)

        self.width = width
        self.profile = tempfile.mkdtemp(prefix="edgeprof-chromium-")
        self.proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError(f"{binary} did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
            page = next(p for p in json.load(r) if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self._id, self.events = 0, []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params):
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def eval(self, expr: str):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def open(self, path: Path, timeout: float = 60) -> float:
        """Load ``path``; return the seconds until every chart and table was drawn."""
        self.events = []
        t0 = time.perf_counter()
        self.call("Page.navigate", url=Path(path).resolve().as_uri())
        deadline = time.monotonic() + timeout
        ready = ("!!document.documentElement && document.documentElement.dataset.chartsReady "
                 "=== 'true' && document.documentElement.dataset.tablesReady === 'true' && "
                 f"location.href === {json.dumps(Path(path).resolve().as_uri())}")
        while time.monotonic() < deadline:
            if self.eval(ready):
                return time.perf_counter() - t0
            time.sleep(0.02)
        raise TimeoutError(f"{path} did not finish drawing in {timeout} s; errors: "
                           f"{self.errors()}")

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(d.get("exception", {}).get("description") or d.get("text"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description")))
                                    for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text"))
            elif m == "Page.javascriptDialogOpening":
                out.append(f"dialog: {p.get('message')}")
        return out

    def remote_requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"
                and not e["params"]["request"]["url"].startswith(("file:", "data:", "blob:"))]

    def screenshot(self, path: Path) -> Path:
        height = self.eval("Math.min(document.documentElement.scrollHeight, 16000)")
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": self.width, "height": height,
                               "scale": 1})["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    b = Chromium(chromium_binary())
    yield b
    b.close()


def show(browser, tmp_path, name: str, html: str) -> None:
    """Open ``html`` in the browser, keep a screenshot, assert a clean load."""
    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    browser.open(page)
    browser.screenshot(tmp_path / f"{name}.png")
    assert browser.errors() == []
    assert browser.remote_requests() == []


def count(browser, selector: str) -> int:
    return browser.eval(f"document.querySelectorAll({json.dumps(selector)}).length")


def axis_frame(browser, chart: str, axis: str = "xaxis") -> dict:
    """A drawn chart's axis as plotly.js laid it out (``range`` in log10 units on a log axis)
    and the extent of its traces' data along it (x or y, positive values on a log axis)."""
    return browser.eval(f"""(() => {{
        const gd = document.getElementById({json.dumps(chart)});
        const ax = gd._fullLayout[{json.dumps(axis)}], key = {json.dumps(axis[0])};
        const vs = gd.data.flatMap(t => t[key] || []).filter(v => typeof v === "number" &&
                                                                  (ax.type !== "log" || v > 0));
        return {{type: ax.type, range: ax.range, min: Math.min(...vs), max: Math.max(...vs)}};
    }})()""")


def assert_frames(frame: dict, lo: float | None = None, hi: float | None = None,
                  slack: float = 0.5) -> None:
    """The axis shows all of [lo, hi] (the data's extent unless given), and at most ``slack``
    of the shown span more on each side (log10 units, i.e. decades, on a log axis)."""
    import math

    lo = frame["min"] if lo is None else lo
    hi = frame["max"] if hi is None else hi
    if frame["type"] == "log":
        lo, hi = math.log10(lo), math.log10(hi)
    r0, r1 = frame["range"]
    span = max(hi - lo, 1e-9)
    eps = 1e-9 * span  # a line drawn to the edge: the range is its end, to rounding
    assert r0 <= lo + eps and r1 >= hi - eps, (frame, lo, hi)
    assert lo - r0 <= slack * span + (slack if frame["type"] == "log" else 0), (frame, lo, hi)
    assert r1 - hi <= slack * span + (slack if frame["type"] == "log" else 0), (frame, lo, hi)


def mouse(browser, kind: str, x: float, y: float, buttons: int = 0) -> None:
    browser.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left" if
                 kind != "mouseMoved" or buttons else "none", buttons=buttons, clickCount=1)


def test_profile_page_in_the_browser(browser, tmp_path, doc):
    show(browser, tmp_path, "profile", H.render_profile_html(doc))
    layers = doc["estimate"]["layers"]
    with_macs = sum(1 for r in layers if r["macs"] > 0)
    by_layer = {r["layer"]: r for r in layers}
    measured = sum(len({o["layer"] for o in r["operators"] or []
                        if o.get("layer") in by_layer and by_layer[o["layer"]]["macs"] > 0
                        and (o.get("latency_ms") or 0) > 0}) for r in doc["runs"])
    assert measured > 0  # --trace ran
    assert count(browser, "#chart-roofline path.point") == with_macs + measured
    ok = [r for r in doc["runs"] if r["status"] == "ok"]
    assert count(browser, "#chart-runs .trace.bars .point path") == 2 * len(ok)  # host, rpi4
    assert count(browser, "#chart-runs .errorbar") >= len(ok)  # CI whiskers
    # the key numbers as shown
    best = min((r["summary"]["figures"]["latency_ms"]["value"] for r in ok))
    shown = browser.eval("(() => { const e = document.querySelector("
                         "'[data-key=fastest_latency_ms]'); return [e.dataset.value, "
                         "e.dataset.prov, e.querySelector('.v').textContent] })()")
    prov = next(r["summary"]["figures"]["latency_ms"]["provenance"] for r in ok
                if r["summary"]["figures"]["latency_ms"]["value"] == best)
    assert [float(shown[0]), shown[1], shown[2]] == [best, prov, H.fmt(best, "ms")]
    # the layer table: values, sorting, filtering
    first = browser.eval("[...document.querySelectorAll('#layers tbody tr:first-child td')]"
                         ".map(td => td.dataset.value ?? td.textContent)")
    assert first[0] == layers[0]["layer"]
    assert float(first[list(H.LAYER_COLUMNS).index("macs")]) == layers[0]["macs"]
    macs_col = list(H.LAYER_COLUMNS).index("macs")
    browser.eval(f"document.querySelectorAll('#layers th')[{macs_col}].click()")
    top = browser.eval("document.querySelector('#layers tbody tr td').textContent")
    assert top == max(layers, key=lambda r: r["macs"])["layer"]
    assert count(browser, "#layers tbody tr .spark") > 0
    browser.eval("(() => { const i = document.querySelector('#layers .filter'); i.value = 'conv';"
                 " i.dispatchEvent(new Event('input')); })()")
    assert count(browser, "#layers tbody tr") == sum("conv" in r["layer"] or "conv" in
                                                     r["op_type"].lower() for r in layers)


def test_roofline_is_interactive_with_the_light_bundle(browser, tmp_path, doc):
    """Hover names a layer with its values, dragging zooms in (the basic bundle keeps plotly's
    hover and zoom), and the log axes frame the points."""
    show(browser, tmp_path, "interactive", H.render_profile_html(doc))
    for axis in ("xaxis", "yaxis"):
        assert_frames(axis_frame(browser, "chart-roofline", axis))
    browser.eval("document.getElementById('chart-roofline').scrollIntoView()")
    x, y = browser.eval("(() => { const r = document.querySelector('#chart-roofline "
                        "path.point').getBoundingClientRect(); return [r.x + r.width / 2, "
                        "r.y + r.height / 2]; })()")
    text = ""
    for dx in (0, 1, 0):  # plotly.js throttles hover: move, then read the tooltip
        mouse(browser, "mouseMoved", x + dx, y)
        time.sleep(0.3)
        text = browser.eval("[...document.querySelectorAll('#chart-roofline .hoverlayer "
                            ".hovertext')].map(e => e.textContent).join(' | ')")
        if text:
            break
    assert "MAC/B" in text and "(analytic)" in text
    assert any(r["layer"] in text for r in doc["estimate"]["layers"])
    before = browser.eval("document.getElementById('chart-roofline')._fullLayout.xaxis.range")
    box = browser.eval("(() => { const r = document.querySelector('#chart-roofline "
                       ".nsewdrag').getBoundingClientRect(); return [r.x, r.y, r.width, "
                       "r.height]; })()")
    x0, y0 = box[0] + box[2] * 0.3, box[1] + box[3] * 0.3
    mouse(browser, "mousePressed", x0, y0, buttons=1)
    for f in (0.35, 0.45, 0.55, 0.6):
        mouse(browser, "mouseMoved", box[0] + box[2] * f, box[1] + box[3] * f, buttons=1)
    mouse(browser, "mouseReleased", box[0] + box[2] * 0.6, box[1] + box[3] * 0.6)
    time.sleep(0.3)
    after = browser.eval("document.getElementById('chart-roofline')._fullLayout.xaxis.range")
    assert before[0] < after[0] < after[1] < before[1]  # zoomed in on the dragged box
    assert browser.errors() == []


def test_bad_input_page_in_the_browser(browser, tmp_path, doc):
    d = bad_doc(doc)
    show(browser, tmp_path, "bad_input", H.render_profile_html(d))
    assert browser.eval("window.__pwned === undefined")
    assert browser.eval("document.querySelector('h1').textContent").startswith(
        "<img src=x onerror=")  # the name is shown as text
    assert count(browser, "#layers tbody tr") == H.PAGE_ROWS
    assert browser.eval("document.querySelector('#layers .info').textContent") == \
        f"rows 1–{H.PAGE_ROWS} of 1000"
    browser.eval("document.querySelector('#layers .next').click()")
    assert browser.eval("document.querySelector('#layers tbody td').textContent") == \
        d["estimate"]["layers"][H.PAGE_ROWS]["layer"]
    with_macs = sum(1 for r in d["estimate"]["layers"] if r["macs"] > 0)
    assert count(browser, "#chart-roofline g.trace.scatter path.point") >= with_macs
    assert browser.eval("document.querySelector('tr[data-status=failed]') !== null")


def test_optimize_page_in_the_browser(browser, tmp_path, optimized):
    d, _ = optimized
    show(browser, tmp_path, "optimize", H.render_optimize_html(d))
    pts = [c for c in d["candidates"] if c["status"] == "ok" and c["latency_ms"] is not None
           and c["accuracy"] is not None]
    chosen = 1 if d["chosen"] else 0
    assert count(browser, "#chart-pareto path.point") == len(pts) + chosen
    assert count(browser, "#candidates tbody tr") == len(d["candidates"])
    text = browser.eval("document.querySelector('[data-key=chosen_latency_ms] .v').textContent")
    assert text == H.fmt(d["chosen"]["latency_ms"], "ms")


def test_compare_page_in_the_browser(browser, tmp_path, doc):
    from edgeprof.profilers.report.compare import compare_results

    b = copy.deepcopy(doc)
    b["runs"] = [r for r in b["runs"] if r["requested_precision"] != "int8"]
    rows = compare_results(doc, b)
    show(browser, tmp_path, "compare", H.render_compare_html(doc, b, rows, label_a="before",
                                                              label_b="after"))
    compared = [r for r in rows if r.status == "compared"]
    assert compared and count(browser, "#chart-compare .trace.bars .point path") == \
        2 * len(compared)
    for r in rows:
        assert browser.eval(f"document.querySelector('tr[data-pair=\"{r.backend} {r.precision}\"]')"
                            f".dataset.status") == r.status


def test_sweep_page_in_the_browser(browser, tmp_path, doc, host_doc):
    frame = sweep_frame(doc, host_doc)
    show(browser, tmp_path, "sweep", H.render_sweep_html(frame))
    targets = list(dict.fromkeys(frame["target"]))
    assert count(browser, "[id^=chart-heatmap] .hm") == len(targets) == 2
    for i, t in enumerate(targets):
        part = frame[frame["target"] == t]
        shape = browser.eval(f"(() => {{ const z = document.getElementById('chart-heatmap-{i}')"
                             ".data[0].z; return [z.length, z[0].length]; })()")
        assert shape == [part["model"].nunique(),
                         part[["backend", "precision", "batch_size"]].drop_duplicates().shape[0]]
    best = frame[frame["status"] == "ok"].groupby(["target", "model"]).size().shape[0]
    assert count(browser, "#chart-best .trace.bars .point path") == best
    assert count(browser, "#sweep tbody tr") == len(frame)
    for (t, m), part in frame[frame["status"] == "ok"].groupby(["target", "model"]):
        shown = browser.eval(f"document.querySelector('tr[data-target=\"{t}\"][data-model=\"{m}\"] "
                             "[data-key=best_median_ms]').dataset.value")
        assert float(shown) == part["median_ms"].min()


def test_tables_fit_a_1400_px_window(tmp_path, doc, optimized):
    """At 1400 px the Backends, Layers and Candidates tables ran past the right edge and cut
    their reasons off: headers now fold (after underscores), text cells wrap, and the page
    uses the window's width, so each table fits its box and the page never scrolls sideways."""
    wide = Chromium(chromium_binary(), width=1400, height=1000)
    try:
        for name, html in (("profile", H.render_profile_html(doc)),
                           ("optimize", H.render_optimize_html(optimized[0]))):
            show(wide, tmp_path, name, html)
            layout = wide.eval("""(() => ({
                page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
                tables: [...document.querySelectorAll('table')].map(t => {
                    const box = t.closest('.scroll');
                    return [t.id || t.closest('[id]').id, box.scrollWidth - box.clientWidth];
                })}))()""")
            assert layout["page"] <= 0, (name, layout)
            for table, overflow in layout["tables"]:
                assert overflow <= 1, (name, table, overflow)
    finally:
        wide.close()

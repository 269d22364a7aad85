"""The optimize page shows the plan's figures under their own provenance (issue 29, item 2):
a baseline the terminal calls predicted is not "estimated" on the page."""

from __future__ import annotations

import re

from edgeprof.profilers.report.html import render_optimize_html


def _projection(ms, prov, lo=None, hi=None):
    return {"latency_ms": ms, "latency_provenance": prov, "latency_low_ms": lo,
            "latency_high_ms": hi, "latency_basis": "tflite fp32, calibrated by "
            "raspberry_pi_4--published", "memory_bytes": 185000.0, "precision": "fp32",
            "provenance": "estimated", "device_memory_note": "0.185 MB needed"}


def test_the_plans_latency_carries_its_own_provenance():
    doc = {"target": {"id": "raspberry_pi_4"}, "model": {"name": "small_cnn"},
           "candidates": [], "constraints": {}, "verdict": {},
           "plan": {"model": "small_cnn", "target": "raspberry_pi_4", "bound": "memory",
                    "steps": [], "baseline": _projection(0.3233, "predicted", 0.2301, 0.4328),
                    "projected": _projection(0.3233, "predicted", 0.2301, 0.4328)}}
    html = render_optimize_html(doc)
    for key in ("baseline", "projected"):
        m = re.search(rf'data-key="plan_{key}_latency_ms" data-value="([^"]+)" '
                      r'data-prov="([^"]*)"', html)
        assert m, key
        assert float(m.group(1)) == 0.3233 and m.group(2) == "predicted"
    assert "0.2301" in html or "0.23" in html  # the interval is shown with it


def test_the_plan_shows_threads_and_memory_readably():
    """The plan showed threads as raw JSON ({"inter_op": 1, "intra_op": 4}) and the Pi's RAM
    as "4.29e+03 MB"."""
    from types import SimpleNamespace

    from edgeprof.optimize.router_context import RouterContext
    from edgeprof.targets import get_target

    fits, note = RouterContext.device_fit(SimpleNamespace(target=get_target("raspberry_pi_4")),
                                          150000.0, 35000.0)
    assert fits and note == "0.185 MB needed of 4.29 GB RAM"
    proj = {**_projection(0.3233, "predicted"), "device_memory_note": note}
    doc = {"target": {"id": "raspberry_pi_4"}, "model": {"name": "small_cnn"},
           "candidates": [], "constraints": {}, "verdict": {},
           "plan": {"model": "small_cnn", "target": "raspberry_pi_4", "bound": "memory",
                    "steps": [{"kind": "threads", "value": {"inter_op": 1, "intra_op": 4},
                               "reason": "r", "stage": "s", "rule": "x"},
                              {"kind": "layout", "value": "NHWC", "reason": "r",
                               "stage": "s", "rule": "y"}],
                    "baseline": proj, "projected": proj}}
    html = render_optimize_html(doc)
    steps = html[html.index('id="plan-steps"'):]
    steps = steps[:steps.index("</ol>")]
    assert "inter_op 1, intra_op 4" in steps and "{" not in steps and "&#34;" not in steps
    assert "NHWC" in steps
    assert "e+0" not in html[html.index('id="plan"'):html.index('id="candidates-section"')]


def _shown_command(page) -> str:
    import html as _html

    text = page.read_text(encoding="utf-8")
    m = re.search(r'<pre class="cmd" data-key="command">(.*?)</pre>', text, re.S)
    assert m, "no Reproduce command on the page"
    return _html.unescape(m.group(1))


def test_the_optimize_page_reproduces_the_command_that_ran(tmp_path):
    """The page's Reproduce command dropped --train-seconds 2 and added torch_eager (the
    baseline) to --backend: it was rebuilt from the results, not the command that ran."""
    import shlex

    from edgeprof.cli.main import main

    argv = ["optimize", "builtin:small_cnn", "--target", "raspberry_pi_4", "--backend",
            "onnxruntime", "--compression", "none", "--train-seconds", "2", "--runs", "20",
            "--min-time", "0.05", "--max-time", "0.5", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    assert _shown_command(tmp_path / "out" / "report.html") == shlex.join(["edgeprof", *argv])


def test_the_profile_page_reproduces_the_command_that_ran(tmp_path):
    import shlex

    from edgeprof.cli.main import main

    argv = ["profile", "builtin:mlp", "--target", "raspberry_pi_4", "-b", "torch_eager",
            "--runs", "20", "--min-time", "0.050", "--max-time", "0.5", "--html",
            str(tmp_path / "p.html")]
    assert main(argv) == 0
    assert _shown_command(tmp_path / "p.html") == shlex.join(["edgeprof", *argv])
    from edgeprof.core.invocation import command

    assert command() is None  # a later report made from Python rebuilds its own


def test_the_compare_and_sweep_pages_reproduce_the_command_that_ran(tmp_path):
    """compare's page rebuilt 'edgeprof compare A B' without its flags, and a sweep's page
    had no command at all (issue 29, finding 15: the command that ran)."""
    import shlex

    from edgeprof.cli.main import main

    for name in ("a", "b"):
        assert main(["profile", "builtin:mlp", "-b", "torch_eager", "--runs", "10",
                     "--min-time", "0.02", "--max-time", "0.2", "--out",
                     str(tmp_path / name)]) == 0
    argv = ["compare", str(tmp_path / "a" / "profile.json"), str(tmp_path / "b" / "profile.json"),
            "--html", str(tmp_path / "c.html")]
    assert main(argv) == 0
    assert _shown_command(tmp_path / "c.html") == shlex.join(["edgeprof", *argv])
    (tmp_path / "s.toml").write_text(f'models = ["builtin:mlp"]\ntargets = ["host"]\n'
                                     'backends = ["torch_eager"]\nprecisions = ["fp32"]\n'
                                     f'out = "{tmp_path / "sw"}"\n'
                                     "[run]\nruns = 5\nmin_time = 0.01\nmax_time = 0.05\n")
    argv = ["sweep", str(tmp_path / "s.toml"), "--runs", "5"]
    assert main(argv) == 0
    assert _shown_command(tmp_path / "sw" / "report.html") == shlex.join(["edgeprof", *argv])


def test_an_llm_page_reproduces_the_command_that_ran():
    from edgeprof.profilers.report.llm_html import llm_command

    assert llm_command({"command_line": "edgeprof estimate llm:x --target raspberry_pi_5 "
                                        "--prompt-tokens 7"}).endswith("--prompt-tokens 7")
    assert llm_command({"command": "estimate", "model": {"given": "llm:x"}}).startswith(
        "edgeprof estimate llm:x")

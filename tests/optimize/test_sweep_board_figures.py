"""A sweep without a fleet measures this host, and says so (issue 29, item 1): the host's
timing stays under the host (``measured_on`` names this machine, never "emulating"), the
figure a board target is ranked by is predict's prediction for that configuration, with its
label and interval, and a configuration the predictor refuses gets no board figure."""

from __future__ import annotations

import pytest

from edgeprof.api import predict
from edgeprof.core.errors import UserError
from edgeprof.optimize.sweep import run_sweep

SWEEP = """models = ["builtin:mlp"]
targets = ["raspberry_pi_4", "mcu", "host"]
backends = ["onnxruntime"]
precisions = ["fp32", "int8"]

[run]
runs = 5
min_time = 0.01
max_time = 0.1
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    tmp = tmp_path_factory.mktemp("board")
    (tmp / "s.toml").write_text(SWEEP)
    return run_sweep(tmp / "s.toml"), tmp


def test_a_host_timing_is_the_hosts(swept):
    report, _ = swept
    f = report.frame
    assert (f["status"] == "ok").all(), f["reason"].tolist()
    assert not f["measured_on"].str.contains("emulating").any()
    assert f["measured_on"].str.startswith("measured on this host").all()
    assert (f["provenance"] == "measured").all()  # the host's timing, as measured


def test_a_board_target_is_ranked_by_predicts_figure(swept):
    report, _ = swept
    f = report.frame
    for _, r in f[f["target"] != "host"].iterrows():
        try:
            want = predict("builtin:mlp", r["target"], r["backend"], r["precision"])
        except UserError as e:  # what predict refuses has no board figure, and says why
            assert r["target_ms"] is None or r["target_ms"] != r["target_ms"]
            assert str(e) in r["target_source"]
            continue
        assert r["target_ms"] == pytest.approx(want.value_ms, rel=1e-12)
        assert r["target_low_ms"] == pytest.approx(want.low_ms, rel=1e-12)
        assert r["target_high_ms"] == pytest.approx(want.high_ms, rel=1e-12)
        assert r["target_provenance"] == want.provenance != "measured"
        assert r["target_ms"] != r["median_ms"]
    host = f[f["target"] == "host"]
    assert (host["target_ms"] == host["median_ms"]).all()
    assert (host["target_provenance"] == "measured").all()
    best = report.best.set_index("target")
    for t in ("raspberry_pi_4", "mcu"):
        rows = f[f["target"] == t]
        if rows["target_ms"].isna().all():  # nothing that runs there: no best
            assert t not in best.index
            continue
        assert best.loc[t, "target_provenance"] != "measured"
        assert best.loc[t, "target_ms"] in set(rows["target_ms"])


def test_the_page_titles_a_board_by_its_predictions(swept):
    report, tmp = swept
    html = (report.spec.out / "report.html").read_text(encoding="utf-8")
    assert "mcu: median latency (ms; measured)" not in html
    assert "raspberry_pi_4: latency (ms; " in html and "host: latency (ms; measured)" in html
    best = (report.spec.out / "best.csv").read_text(encoding="utf-8")
    assert "emulating" not in best


def test_a_configuration_the_predictor_refuses_gets_no_board_figure(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    import edgeprof.profilers.predict.config as config

    real = config.ConfigPredictor

    class Refusing(real):
        def __init__(self, target, backend, *a, **kw):
            if getattr(target, "id", "") == "mcu":
                raise UserError(f"{backend} does not run on mcu's processors")
            super().__init__(target, backend, *a, **kw)

    monkeypatch.setattr(config, "ConfigPredictor", Refusing)
    (tmp_path / "s.toml").write_text(SWEEP.replace('"raspberry_pi_4", "mcu", "host"', '"mcu"')
                                     .replace('"fp32", "int8"', '"fp32"'))
    report = run_sweep(tmp_path / "s.toml")
    (row,) = report.frame.to_dict(orient="records")
    assert row["status"] == "ok" and row["target_ms"] != row["target_ms"] or \
        row["target_ms"] is None
    assert "does not run on mcu" in row["target_source"]
    assert report.best.empty or "mcu" not in set(report.best["target"])

"""One truth across the tool (issue 29): for a grid of (model, target, backend, precision,
device) over every board and every runtime a prediction can name,

* ``predict``'s figure, ``profile``'s board figure (``summarize``), and the figures that
  ``recommend``, ``optimize`` and a ``sweep`` show for the same configuration are one number
  with one label;
* no configuration that cannot run is given a figure (a runtime on a processor it does not
  run on, a precision it does not offer), and a board's figure is for a processor the
  runtime runs on there;
* no figure measured on this host is labelled with a board.

The grid is analytic (no runtime is built), so it runs in seconds; the end-to-end checks
(profile, a local sweep) measure small models for a few milliseconds each.
"""

from __future__ import annotations

import math

import pytest

import edgeprof
from edgeprof.core.errors import UserError
from edgeprof.core.models import resolve_model
from edgeprof.core.plugins import get_registry
from edgeprof.profilers.estimate.analytic import estimate_model
from edgeprof.profilers.predict import runtimes
from edgeprof.profilers.predict.config import ConfigPredictor
from edgeprof.profilers.report.summary import summarize

MODEL = "builtin:small_cnn"
PRECISIONS = ("fp32", "fp16", "bf16", "int8", "int8_static", "int8_dynamic", "int8_weight",
              "int4_weight")
#: what a board figure may be labelled: never 'measured' (nothing here ran on a board)
BOARD_LABELS = {"predicted", "estimated", "uncalibrated"}


def _boards():
    return [t for t in edgeprof.list_targets() if not getattr(t, "is_host", False)]


@pytest.fixture(scope="module")
def grid():
    """Every (board, device, runtime, precision): predict's answer (a Prediction or the
    UserError it refused with) and the estimate it rests on."""
    reg = get_registry()
    handle = resolve_model(MODEL, registry=reg)
    ests: dict = {}
    out = []
    for tgt in _boards():
        for device in (None, *tgt.devices):
            for backend in runtimes.families(reg):
                for precision in PRECISIONS:
                    try:
                        cp = ConfigPredictor(tgt, backend, precision, device=device,
                                             registry=reg)
                        key = (tgt.id, cp.device, precision)
                        if key not in ests:
                            ests[key] = cp.estimate(handle)
                        result = cp.from_estimate(ests[key])
                    except UserError as e:
                        result = e
                    out.append((tgt, device, backend, precision, result))
    return handle, out


def _ok(result) -> bool:
    return not isinstance(result, Exception)


def test_the_grid_covers_every_board_runtime_and_refuses_some(grid):
    _, rows = grid
    assert {r[0].id for r in rows} == {t.id for t in _boards()}
    given = [r for r in rows if _ok(r[4])]
    refused = [r for r in rows if not _ok(r[4])]
    assert given and refused
    # each board gets at least one runnable configuration
    assert {r[0].id for r in given} == {t.id for t in _boards()}


def test_a_figure_is_only_given_where_the_runtime_runs_and_offers_the_precision(grid):
    reg = get_registry()
    for tgt, device, backend, precision, result in grid[1]:
        where = runtimes.runs_on(tgt, backend, device, reg)
        offered = runtimes.offers(backend, precision, reg)
        if not where or not offered:
            assert not _ok(result), (tgt.id, device, backend, precision, result.value_ms)
            continue
        assert _ok(result), (tgt.id, device, backend, precision, str(result))
        # the processor predicted for is one the runtime runs on there (its default first)
        assert result.device in where, (tgt.id, device, backend, result.device, where)
        if device is None:
            assert result.device == where[0]


def test_a_cuda_runtime_is_never_predicted_on_a_gpu_without_cuda(grid):
    """The Raspberry Pi 5's VideoCore VII speaks Vulkan, not CUDA: ONNX Runtime, PyTorch or
    TensorRT are not predicted there; ncnn's Vulkan path is."""
    pi5 = [r for r in grid[1] if r[0].id == "raspberry_pi_5"]
    assert pi5, "raspberry_pi_5 is a shipped target"
    by = {(d, b, p): res for _, d, b, p, res in pi5}
    for backend in ("onnxruntime", "torch_eager", "torch_compile", "tensorrt", "tensorflow"):
        assert not _ok(by[("gpu", backend, "fp32")]), backend
        if _ok(by[(None, backend, "fp32")]):
            assert by[(None, backend, "fp32")].device == "cpu", backend
    if "gpu" in next(r[0] for r in pi5).devices:
        assert _ok(by[(None, "ncnn_vulkan", "fp32")])
        assert by[(None, "ncnn_vulkan", "fp32")].device == "gpu"


def test_every_figure_is_a_board_label_never_below_the_roofline(grid):
    for tgt, device, backend, precision, result in grid[1]:
        if not _ok(result):
            continue
        assert result.provenance in BOARD_LABELS, (tgt.id, backend, result.provenance)
        assert math.isfinite(result.value_ms) and result.value_ms > 0
        assert result.value_ms >= result.roofline_ms * (1 - 1e-9), (tgt.id, backend, precision)
        assert result.low_ms <= result.value_ms <= result.high_ms


def test_a_precision_the_processor_falls_back_from_is_the_figure_it_runs(grid):
    """fp16 on a board with no fp16 rate is the fp32 figure, and says it executed fp32."""
    rows = {(t.id, d, b, p): r for t, d, b, p, r in grid[1]}
    checked = 0
    for (tid, d, b, p), r in rows.items():
        if p != "fp16" or not _ok(r) or r.executed_precision == "fp16":
            continue
        twin = rows.get((tid, d, b, r.executed_precision))
        if twin is None or not _ok(twin):
            continue
        assert r.value_ms == pytest.approx(twin.value_ms), (tid, d, b)
        assert r.provenance == twin.provenance
        checked += 1
    assert checked  # the Pi 4 has no fp16 rate: some rows fall back


def test_profiles_board_figure_is_predicts(grid):
    """What ``profile`` shows for the board (``summarize`` of the estimate on the target,
    the runtime named) is predict's number under predict's label, or no figure at all where
    predict refuses."""
    handle, rows = grid
    ests: dict = {}
    for tgt, device, backend, precision, result in rows:
        if device is not None:  # profile predicts for the board as named (its default processor)
            continue
        key = (tgt.id, precision)
        if key not in ests:
            ests[key] = estimate_model(handle, tgt, precision)
        fig = summarize(ests[key], None, tgt, backend=backend).figures["latency_ms"]
        if _ok(result):
            assert fig.value == pytest.approx(result.value_ms), (tgt.id, backend, precision)
            assert fig.provenance == result.provenance
        else:
            assert fig.value is None, (tgt.id, backend, precision, fig.value)
            assert fig.reason


def test_the_public_predict_is_the_grid(grid):
    """``edgeprof.predict`` is the same call (a sample of the grid: one per board x runtime)."""
    seen = set()
    for tgt, device, backend, precision, result in grid[1]:
        if (tgt.id, backend) in seen or device is not None:
            continue
        seen.add((tgt.id, backend))
        try:
            got = edgeprof.predict(MODEL, tgt, backend, precision)
        except UserError as e:
            assert not _ok(result), (tgt.id, backend, precision, str(e))
            continue
        assert _ok(result)
        assert got.value_ms == pytest.approx(result.value_ms), (tgt.id, backend, precision)
        assert got.provenance == result.provenance


@pytest.mark.parametrize("target,budget", [("raspberry_pi_4", 1.5), ("mcu", 5.0),
                                           ("jetson_nano", 0.05), ("raspberry_pi_5", 0.2)])
def test_recommends_projection_is_predicts_figure_for_the_plans_configuration(target, budget):
    """A plan's projection is predict's figure for the plan's final configuration (same
    number, same label) unless a step predict can't see (pruning, a batch) scales it, and
    then it is labelled estimated; each step's projection composes into the next."""
    plan = edgeprof.recommend_plan("builtin:small_resnet", target, latency_budget_ms=budget)
    final = plan.projected
    backend, precision = final.backend, final.precision
    unseen = [s for s in plan.steps if s.kind in ("pruning", "batch_size")]
    if backend is None or final.latency_ms is None:
        pytest.skip(f"the plan on {target} names no backend")
    # every compress step's 'after' is the next one's 'before'; the last is the projection
    steps = [s for s in plan.steps if "projected_latency_ms" in s.details]
    if steps and not unseen:
        assert steps[-1].details["projected_latency_ms"] == pytest.approx(final.latency_ms)
    reg = get_registry()
    assert runtimes.runs_on(edgeprof.get_target(target), backend, None, reg), backend
    assert runtimes.offers(backend, precision, reg), (backend, precision)
    if unseen:
        assert final.latency_provenance == "estimated"
        return
    p = edgeprof.predict("builtin:small_resnet", target, backend, precision)
    assert final.latency_ms == pytest.approx(p.value_ms, rel=1e-6), (backend, precision)
    assert final.latency_provenance == p.provenance


# ------------------------------------------------------------------ end to end: measured runs
E2E_TARGETS = ("raspberry_pi_5", "jetson_nano", "mcu")
E2E_BACKENDS = ("onnxruntime", "tflite")
E2E_PRECISIONS = ("fp32", "fp16", "int8")
E2E_RUN = {"min_time_s": 0.01, "max_time_s": 0.05, "warmup": 1}


def _predicted(target, backend, precision):
    try:
        return edgeprof.predict(MODEL, target, backend, precision)
    except UserError as e:
        return e


@pytest.fixture(scope="module")
def profiled():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("ai_edge_litert")
    return {t: edgeprof.profile(MODEL, target=t, backends=",".join(E2E_BACKENDS),
                                precisions=",".join(E2E_PRECISIONS), run_options=E2E_RUN)
            for t in E2E_TARGETS}


def test_a_profiles_board_figures_are_predicts_and_its_host_timing_stays_the_hosts(profiled):
    """fp16 on a Raspberry Pi 5 computes in fp32 on this x86 host: the board's figure is
    still predict's fp16 figure (the board has fp16 arithmetic), not the host's fallback."""
    for target, rep in profiled.items():
        doc = rep.to_dict()
        for run, r in zip(rep.runs, doc["runs"]):
            assert r["status"] == "ok", (target, run.backend, r["reason"])
            want = _predicted(target, run.backend, run.requested_precision)
            fig = run.summary.figures["latency_ms"]
            # nothing measured here is filed under the board
            assert r["provenance"]["target_figures"] != "measured"
            assert r["provenance"]["measured_on"] is None or "emulating" not in \
                r["provenance"]["measured_on"]
            assert run.summary.figures["host_latency_ms"].provenance == "measured"
            if isinstance(want, Exception):
                assert fig.value is None and fig.reason, (target, run.backend)
                continue
            assert fig.value == pytest.approx(want.value_ms), (target, run.backend,
                                                               run.requested_precision)
            assert fig.provenance == want.provenance
            assert fig.value != run.benchmark.stats.median_ms


def test_a_sweeps_board_figures_are_the_profiles(profiled, tmp_path):
    from edgeprof.optimize.sweep import run_sweep

    spec = tmp_path / "s.toml"
    spec.write_text(
        f'models = ["{MODEL}"]\ntargets = {list(E2E_TARGETS)!r}\n'
        f"backends = {list(E2E_BACKENDS)!r}\nprecisions = {list(E2E_PRECISIONS)!r}\n"
        "[run]\nruns = 3\nmin_time = 0.01\nmax_time = 0.05\n".replace("'", '"'))
    frame = run_sweep(spec).frame
    assert len(frame) == len(E2E_TARGETS) * len(E2E_BACKENDS) * len(E2E_PRECISIONS)
    for _, row in frame.iterrows():
        run = next(r for r in profiled[row["target"]].runs
                   if (r.backend, r.requested_precision) == (row["backend"], row["precision"]))
        fig = run.summary.figures["latency_ms"]
        assert not str(row["measured_on"]).count("emulating")
        if fig.value is None:
            assert row["target_ms"] is None or row["target_ms"] != row["target_ms"]
            continue
        assert row["target_ms"] == pytest.approx(fig.value), tuple(row[["target", "backend",
                                                                         "precision"]])
        assert row["target_provenance"] == fig.provenance

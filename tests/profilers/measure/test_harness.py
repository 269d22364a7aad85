"""The timing harness: phases, stopping rules, blocking, warnings, statuses, memory.

Timing assertions are loose on purpose (the test machine is shared); they check the rules
(counts, which rule stopped, which warning fired), not tight wall-clock figures.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from edgeprof.core.backend import HarnessOptions, RunConfig
from edgeprof.core.errors import UserError
from edgeprof.core.results import LatencyStats
from edgeprof.profilers.measure import environment as envmod
from edgeprof.profilers.measure.measure import benchmark_backend
from edgeprof.profilers.measure.timing import (TimingPlan, block_size_for, plan_from_config,
                                               time_callable, timer_overhead_ns,
                                               timing_warnings)


from tests import fakes  # noqa: E402
FAST = dict(min_time_s=0.05, max_time_s=1.0, runs=20)


def busy(ms: float):
    ns = int(ms * 1e6)
    return lambda _x: fakes.busy_wait_ns(ns)


def bench(backend=None, **opts):
    cfg = {**FAST, **{k: opts.pop(k) for k in list(opts) if k in RunConfig.__dataclass_fields__}}
    harness = {k: opts.pop(k) for k in list(opts) if k in HarnessOptions.__dataclass_fields__}
    return benchmark_backend(backend or fakes.FakeBusyBackend(), fakes.fake_handle(),
                             RunConfig(**cfg, options=opts, harness_options=harness))


# ------------------------------------------------------------------------- config
@pytest.mark.parametrize("cfg,word", [
    (RunConfig(runs=0), "runs"), (RunConfig(runs=2.5), "runs"),
    (RunConfig(min_time_s=-1), "min_time_s"), (RunConfig(max_time_s=0), "max_time_s"),
    (RunConfig(min_time_s=5, max_time_s=1), "max_time_s"), (RunConfig(warmup=-1), "warmup"),
    (RunConfig(harness_options={"ci_width": "narrow"}), "ci_width"),
    (RunConfig(harness_options={"ci_width": 0}), "ci_width"),
    (RunConfig(harness_options={"block_size": 0}), "block_size"),
])
def test_bad_timing_knobs_are_user_errors(cfg, word):
    with pytest.raises(UserError, match=word):
        plan_from_config(cfg)


def test_defaults_follow_the_issue():
    p = plan_from_config(RunConfig())
    assert (p.min_runs, p.min_time_s, p.max_time_s) == (100, 1.0, 10.0)
    assert p.warmup is None and p.ci_width is None and p.max_timer_overhead == 0.001


# ----------------------------------------------------------------- stopping rules
def test_stops_at_min_count_when_time_is_already_met():
    t = time_callable(busy(0.2), plan=TimingPlan(min_runs=37, min_time_s=0, max_time_s=5,
                                                 block_size=1))
    assert len(t.samples_ns) == 37
    assert t.stop_reason == "min_runs_and_time"


def test_stops_only_after_min_time():
    t = time_callable(busy(0.2), plan=TimingPlan(min_runs=2, min_time_s=0.15, max_time_s=5,
                                                 block_size=1))
    assert t.steady_time_s >= 0.15
    assert len(t.samples_ns) > 2
    assert t.stop_reason == "min_runs_and_time"


def test_time_cap_cuts_a_long_request_short_and_warns():
    plan = TimingPlan(min_runs=10**9, min_time_s=0, max_time_s=0.1, block_size=1)
    t = time_callable(busy(0.5), plan=plan)
    assert t.stop_reason == "max_time"
    assert 0.1 <= t.steady_time_s < 2.0
    from edgeprof.profilers.measure.stats import latency_stats

    stats = latency_stats([s / 1e6 for s in t.samples_ns])
    assert "time_cap_reached" in {w.code for w in timing_warnings(stats, t, plan)}


def test_ci_width_rule_runs_until_the_ci_is_narrow_enough():
    # a noisy callable: 0.1-0.3 ms uniformly; CI of its median must reach 5% of it
    import random

    rng = random.Random(3)

    def noisy(_x):
        fakes.busy_wait_ns(int(1e5 + 2e5 * rng.random()))

    plan = TimingPlan(min_runs=10, min_time_s=0, max_time_s=5, ci_width=0.05, block_size=1)
    t = time_callable(noisy, plan=plan)
    assert t.stop_reason == "ci_width"
    assert t.ci_rel_width <= 0.05
    from edgeprof.profilers.measure.stats import relative_ci_width

    assert relative_ci_width([s / 1e6 for s in t.samples_ns]) <= 0.05
    assert len(t.samples_ns) > 10  # 10 noisy samples cannot give a 5% CI


def test_unreachable_ci_width_stops_at_the_cap_with_a_warning():
    r = bench(ci_width=1e-9, max_time_s=0.2, fake_ms=0.2, fake_noise=0.5)
    assert r.status == "ok"
    assert r.config["harness"]["stop_reason"] == "max_time"
    assert "ci_width_not_reached" in {w.code for w in r.warnings}


# ------------------------------------------------------------------------ blocking
def test_block_size_rule():
    assert block_size_for(1_000_000, 50) == 1  # 1 ms call, 50 ns clock: 0.005%
    assert block_size_for(10_000, 50) == 5  # 10 us: 50 / (0.001 * 10000)
    assert block_size_for(100, 50) == 500
    assert block_size_for(10_000, 50, max_overhead=0.01) == 1


def test_very_short_calls_are_timed_in_blocks_without_tail_percentiles():
    calls = [0]

    def tiny(_x):
        calls[0] += 1

    t = time_callable(tiny, plan=TimingPlan(min_runs=50, min_time_s=0.05, max_time_s=2))
    assert t.block_size > 1
    # the clock read is below 0.1% of a timed block (measured per-call time, some slack for
    # the warm-up estimate it was chosen from)
    per_call = sorted(t.samples_ns)[len(t.samples_ns) // 2]
    assert timer_overhead_ns() / (t.block_size * per_call) < 0.003
    assert t.steady_calls == t.block_size * len(t.samples_ns)
    assert calls[0] >= t.steady_calls
    r = bench(fake_ms=0.0)
    assert r.stats.block_size > 1
    assert r.stats.p90_ms is None and "blocks" in r.stats.null_reasons["p90_ms"]


def test_long_calls_are_timed_one_by_one():
    r = bench(fake_ms=1.0)
    assert r.stats.block_size == 1
    assert r.stats.p90_ms is not None or r.stats.n < 64


def test_sync_is_inside_the_timed_region():
    syncs = [0]

    def sync():
        syncs[0] += 1
        fakes.busy_wait_ns(1_000_000)

    t = time_callable(lambda _x: None, sync=sync,
                      plan=TimingPlan(min_runs=20, min_time_s=0, max_time_s=2))
    assert min(t.samples_ns) >= 1_000_000  # every sample includes the 1 ms sync
    assert syncs[0] >= len(t.samples_ns)


# ------------------------------------------------------------------------- warm-up
def test_warmup_lasts_until_timings_settle():
    # call n takes 0.3 ms x (1 + 9 x 0.95^n): 10x slow at first, within 5% only after ~100
    # calls. Warm-up must outlast that, and the steady state must be the fast regime.
    r = bench(fake_ms=0.3, fake_warm_factor=9.0, fake_warm_rate=0.95, block_size=1)
    assert r.status == "ok"
    assert r.warmup_runs >= 100
    assert r.config["harness"]["warmup_settled"] is True
    assert r.stats.median_ms < 0.3 * 1.3  # loose: a shared machine
    assert r.first_inference_ms > 5 * 0.3 * 0.9


def test_fixed_warmup_count_is_respected():
    t = time_callable(busy(0.1), plan=TimingPlan(warmup=7, min_runs=5, min_time_s=0))
    assert t.warmup_runs == 7 and t.warmup_settled is None


def test_warmup_cap_gives_a_warning_when_timings_keep_drifting():
    state = [0]

    def drifting(_x):  # every call 3% slower than the one before: never settles
        state[0] += 1
        fakes.busy_wait_ns(int(20_000 * 1.03 ** min(state[0], 150)))

    plan = TimingPlan(min_runs=5, min_time_s=0, max_time_s=2, warmup_max_time_s=0.1,
                      block_size=1)
    t = time_callable(drifting, plan=plan)
    assert t.warmup_settled is False
    assert t.warmup_time_s < 1.0
    from edgeprof.profilers.measure.stats import latency_stats

    stats = latency_stats([s / 1e6 for s in t.samples_ns])
    assert "warmup_not_settled" in {w.code for w in timing_warnings(stats, t, plan)}


# ------------------------------------------------------------------------ warnings
def _stats(median=1.0, cv=0.01, iqr=0.01):
    return LatencyStats(n=100, median_ms=median, mean_ms=median, std_ms=cv * median, cv=cv,
                        iqr_ms=iqr, min_ms=median, max_ms=median, p50_ms=median, p90_ms=median,
                        p99_ms=None, ci_low_ms=median, ci_high_ms=median)


def _timing(first_ms=1.0):
    from edgeprof.profilers.measure.timing import Timing

    return Timing(first_ns=int(first_ms * 1e6), warmup_runs=10, warmup_time_s=0.1,
                  warmup_settled=True, block_size=1, samples_ns=[1e6] * 100, steady_calls=100,
                  steady_time_s=1.0, stop_reason="min_runs_and_time", timer_overhead_ns=50)


def test_quiet_measurement_has_no_timing_warnings():
    assert timing_warnings(_stats(), _timing(), TimingPlan()) == []


@pytest.mark.parametrize("stats,timing,code", [
    (_stats(cv=0.25), _timing(), "high_cv"),
    (_stats(iqr=0.3), _timing(), "high_iqr"),
    (_stats(), _timing(first_ms=50), "slow_first_run"),
])
def test_each_timing_warning(stats, timing, code):
    assert [w.code for w in timing_warnings(stats, timing, TimingPlan())] == [code]


def test_speed_drift_is_seen_when_the_machine_changes_speed_mid_run():
    """Samples that agree within each third but not across thirds (a VM whose host got busy
    half-way): the spread checks stay quiet, the drift check does not."""
    from edgeprof.profilers.measure.timing import thirds_medians

    steady = _timing()
    assert thirds_medians(steady.samples_ns) == [1e6, 1e6, 1e6]
    assert thirds_medians([1e6] * 8) is None  # too few to split
    steady.samples_ns = [1e6] * 60 + [1.5e6] * 40
    codes = [w for w in timing_warnings(_stats(), steady, TimingPlan())]
    assert [w.code for w in codes] == ["speed_drift"]
    assert "1, 1, 1.5 ms" in codes[0].message and "1.50x" in codes[0].message
    steady.samples_ns = [1e6, 1.05e6] * 50  # alternating noise is not drift
    assert timing_warnings(_stats(), steady, TimingPlan()) == []


def test_measured_warnings_fire_on_real_runs():
    r = bench(fake_ms=0.3, fake_first_ms=30.0)
    assert "slow_first_run" in {w.code for w in r.warnings}
    assert r.first_inference_ms >= 30.0
    r = bench(fake_ms=0.2, fake_noise=1.0)  # uniform 0.2-0.4 ms: CV ~ 0.19, IQR/median ~ 0.33
    codes = {w.code for w in r.warnings}
    assert {"high_cv", "high_iqr"} <= codes


def test_machine_busy_warning():
    assert envmod.load_warning(other_cores=0.1, load_avg_1min=0.5, cores=4) is None
    w = envmod.load_warning(other_cores=1.5, load_avg_1min=0.5, cores=2)
    assert w.code == "machine_busy" and "1.5 of 2 cores" in w.message
    w = envmod.load_warning(other_cores=None, load_avg_1min=9.0, cores=4)
    assert w.code == "machine_busy" and "load average 9.00" in w.message


def test_machine_busy_is_detected_from_cpu_usage():
    # another process spinning on a core during the measurement
    import subprocess

    code = ("import sys, time\nprint('spinning', flush=True)\nend = time.time() + 30\n"
            "while time.time() < end:\n    pass\n")
    spinner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout.readline().strip() == "spinning"
        time.sleep(0.05)
        usage = envmod.CpuUsage().start()
        fakes.busy_wait_ns(int(0.3e9))
        usage.stop()
    finally:
        spinner.kill()
        spinner.wait(5)
    assert usage.other_cores is not None and usage.other_cores >= 0.5
    assert envmod.load_warning(other_cores=usage.other_cores, load_avg_1min=None,
                               cores=envmod.usable_cores()) is not None


def test_frequency_scaling_warning(tmp_path):
    assert envmod.governor_warning(None) is None
    assert envmod.governor_warning("performance") is None
    w = envmod.governor_warning("powersave")
    assert w.code == "cpu_frequency_scaling" and "powersave" in w.message
    gov = tmp_path / "scaling_governor"
    gov.write_text("ondemand\n")
    assert envmod.read_governor(gov) == "ondemand"
    assert envmod.read_governor(tmp_path / "missing") is None
    env = {"usable_cores": 4, "governor": "schedutil", "load_average": [0.1], "threads": {}}
    assert [w.code for w in envmod.environment_warnings(env)] == ["cpu_frequency_scaling"]


def test_thread_oversubscription_warning():
    assert envmod.oversubscription_warning({"intra_op": 2}, 2, 4) is None
    w = envmod.oversubscription_warning({"intra_op": 4, "inter_op": 1}, 2, 4)
    assert w.code == "thread_oversubscription" and "4 threads x 2" in w.message
    cores = envmod.usable_cores()
    r = bench(fake_ms=0.2, fake_threads=cores + 1)
    assert "thread_oversubscription" in {w.code for w in r.warnings}
    r = bench(fake_ms=0.2, fake_threads=1, concurrent_workers=cores + 1)
    assert "thread_oversubscription" in {w.code for w in r.warnings}


# -------------------------------------------------------------- result and phases
def test_result_records_phases_environment_and_is_json_ready():
    r = bench(fake_ms=0.5, fake_prepare_s=0.05)
    assert r.status == "ok" and r.ok and r.reason is None
    assert r.load_time_s >= 0.05
    assert r.first_inference_ms > 0 and r.warmup_runs > 0 and r.warmup_time_s > 0
    assert r.steady_time_s >= 0.05
    assert r.stats.n >= 20
    assert r.stats.median_ms == pytest.approx(0.5, rel=0.5)  # loose: a shared machine
    assert r.throughput_per_s == pytest.approx(1e3 / r.stats.median_ms)
    assert r.stats.ci_low_ms <= r.stats.median_ms <= r.stats.ci_high_ms
    env = r.environment
    for key in ("cpu_model", "physical_cores", "logical_cores", "usable_cores", "governor",
                "load_average", "python_version", "numpy_version"):
        assert key in env
    assert env["runtime"] == "fake" and env["runtime_version"] == "0.0"
    assert env["threads"] == {"intra_op": 1}
    assert r.executed_precision == "fp32" and r.runtime == "fake"
    assert r.config["harness"]["block_size"] == r.stats.block_size
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize("backend,status,text", [
    (fakes.FakeUnsupportedBackend(), "unsupported", "cannot run anything"),
    (fakes.FakeUnavailableBackend(), "unavailable", "edgeprof_no_such_runtime_pkg"),
])
def test_unsupported_and_unavailable_statuses(backend, status, text):
    r = bench(backend)
    assert r.status == status and text in r.reason
    assert r.stats is None


@pytest.mark.parametrize("when,phase", [("prepare", "prepare"), ("run", "inference")])
def test_exceptions_become_failed_with_a_one_line_reason(when, phase):
    r = bench(fakes.FakeRaiseBackend(), fake_when=when)
    assert r.status == "failed" and r.stats is None
    assert r.reason.startswith(f"{phase} failed: RuntimeError: fake failure")
    assert "\n" not in r.reason and "second line" not in r.reason


def test_unsupported_precision_is_unsupported():
    r = bench(precision="int4_weight")
    assert r.status == "unsupported" and "int4_weight" in r.reason


def test_memory_error_is_reported_as_out_of_memory():
    r = benchmark_backend(fakes.FakeBusyBackend(), fakes.fake_handle(batch_size=8),
                          RunConfig(**FAST, options={"fake_oom_above_batch": 4}))
    assert r.status == "failed" and r.reason.startswith("out of memory during inference")


def test_peak_memory_above_baseline():
    alloc = 64_000_000
    r = bench(fakes.FakeMemoryBackend(), fake_alloc_bytes=alloc)
    assert r.status == "ok"
    assert alloc * 0.9 <= r.peak_memory_bytes <= alloc * 1.5 + 32e6
    d = r.memory_detail
    assert d["method"] in ("rss_sampling", "ru_maxrss", "vmhwm")
    assert d["peak_rss_bytes"] - d["baseline_rss_bytes"] == r.peak_memory_bytes


def test_memory_can_be_switched_off():
    r = bench(fake_ms=0.2, memory=False)
    assert r.peak_memory_bytes is None and r.memory_detail == {}


def test_module_object_with_isolate_runs_in_process_with_a_note():
    from edgeprof.core.models import resolve_model

    handle = resolve_model(fakes.FakeModule(), input_shapes=[[1, 8]])
    r = benchmark_backend(fakes.FakeBusyBackend(), handle,
                          RunConfig(**FAST, isolate=True, options={"fake_ms": 0.2}))
    assert r.status == "ok"
    assert any("cannot cross to a worker" in n for n in r.notes)


def test_transient_peak_is_caught_by_the_kernel_peak_mark():
    from edgeprof.profilers.measure.memory import reset_peak_mark

    if not reset_peak_mark():
        pytest.skip("/proc/self/clear_refs is not writable here (not Linux, or restricted)")
    # 40 MB allocated and freed inside every run; sampling effectively off (every 100 s)
    r = bench(fakes.FakeMemoryBackend(), fake_alloc_bytes=1000, fake_run_alloc_bytes=40_000_000,
              memory_interval_s=100.0)
    assert r.status == "ok"
    assert r.memory_detail["method"] == "vmhwm"
    assert r.peak_memory_bytes >= 0.9 * 40_000_000


def test_cpu_steal_warning():
    assert envmod.steal_warning(None, 2) is None
    assert envmod.steal_warning(0.01, 2) is None  # 0.5% of two cores: noise
    w = envmod.steal_warning(0.2, 2)
    assert w.code == "cpu_steal" and "10.0%" in w.message
    env = {"usable_cores": 2, "governor": None, "load_average": [0.1], "threads": {}}
    assert [w.code for w in envmod.environment_warnings(env, steal_cores=0.5)] == ["cpu_steal"]
    usage = envmod.CpuUsage().start()
    fakes.busy_wait_ns(int(0.1e9))
    usage.stop()
    assert usage.steal_cores is not None and usage.steal_cores >= 0

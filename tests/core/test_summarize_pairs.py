"""summarize() refuses an estimate and a benchmark of different models or precisions unless
force=True (issue 21): it used to join them without a word."""

from __future__ import annotations

import pytest

import edgeprof
from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import UserError

FAST = RunConfig(runs=5, min_time_s=0.02, max_time_s=0.3)


@pytest.fixture(scope="module")
def cnn_run():
    return edgeprof.benchmark("builtin:small_cnn", backend="torch_eager", config=FAST)


def test_a_matching_pair_is_summarized(cnn_run):
    est = edgeprof.estimate("builtin:small_cnn", "raspberry_pi_4", "fp32")
    assert edgeprof.summarize(est, cnn_run, "raspberry_pi_4").figures["latency_ms"].value


def test_another_model_is_refused_unless_forced(cnn_run):
    est = edgeprof.estimate("builtin:mlp", "raspberry_pi_4", "fp32")
    with pytest.raises(UserError) as e:
        edgeprof.summarize(est, cnn_run, "raspberry_pi_4")
    msg = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in msg
    assert "mlp" in msg and "small_cnn" in msg and "force=True" in msg
    assert edgeprof.summarize(est, cnn_run, "raspberry_pi_4", force=True) is not None


def test_another_precision_is_refused_unless_forced(cnn_run):
    est = edgeprof.estimate("builtin:small_cnn", "raspberry_pi_4", "fp16")
    with pytest.raises(UserError, match="fp16.*fp32"):
        edgeprof.summarize(est, cnn_run, "raspberry_pi_4")
    assert edgeprof.summarize(est, cnn_run, "raspberry_pi_4", force=True) is not None

"""A batch sweep over a model with a fixed batch (issue 21): the batches it cannot take are
rows with their reason, not 'failed | nan', and nothing is run for them."""

from __future__ import annotations

from dataclasses import replace

from edgeprof.core.backend import RunConfig
from edgeprof.core.models import DeclaredInput
from edgeprof.profilers.measure.batching import benchmark_batch_sizes

from tests import fakes


def test_batches_a_fixed_batch_model_cannot_take_are_rows_with_the_reason():
    handle = fakes.fake_handle()
    shape = handle.input_specs[0].shape
    fixed = replace(handle, declared_inputs=(DeclaredInput("x", (1, *shape[1:]), ()),))
    results: list = []
    df = benchmark_batch_sizes(fakes.FakeBusyBackend(), fixed, [1, 2, 4],
                               RunConfig(min_time_s=0.02, max_time_s=0.5, runs=10,
                                         options={"fake_ms": 0.1}), results=results)
    rows = df.to_dict(orient="records")
    assert [r["status"] for r in rows] == ["ok", "unsupported", "unsupported"]
    for r in rows[1:]:
        assert "fixed at batch 1" in r["reason"] and "'x'" in r["reason"]
        assert r["latency_ms"] is None or r["latency_ms"] != r["latency_ms"]
    assert [r.status for r in results] == ["ok", "unsupported", "unsupported"]
    assert df.attrs["failed_batches"] == [2, 4]

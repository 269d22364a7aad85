"""The API's verbs (``edgeprof.api.verbs``): ``benchmark`` takes the run options ``profile``
takes (issue 29, finding 16)."""

from __future__ import annotations

import pytest

import edgeprof
from edgeprof.core.backend import RunConfig
from edgeprof.core.errors import ConfigError

FAST = {"runs": 3, "min_time": 0.01, "max_time": 0.2, "warmup": 1}


def test_benchmark_takes_profiles_run_options():
    """``benchmark(..., run_options=...)`` raised TypeError while ``profile`` took it."""
    result = edgeprof.benchmark("builtin:mlp", "torch_eager", run_options=FAST)
    assert result.status == "ok"
    assert result.config["max_time_s"] == 0.2 and result.config["warmup"] == 1
    with pytest.raises(ConfigError, match="unknown run option 'max_tme'"):
        edgeprof.benchmark("builtin:mlp", run_options={"max_tme": 1})
    with pytest.raises(ConfigError, match="precision= argument"):
        edgeprof.benchmark("builtin:mlp", run_options={"precision": "int8"})


def test_run_options_refine_a_config_without_changing_it():
    config = RunConfig(runs=3, min_time_s=0.01, max_time_s=0.5, warmup=1)
    result = edgeprof.benchmark("builtin:mlp", config=config, run_options={"max_time": 0.2})
    assert result.config["max_time_s"] == 0.2 and result.config["runs"] == 3
    assert config.max_time_s == 0.5  # the caller's config is left as it was

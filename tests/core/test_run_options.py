"""One vocabulary for the Python API and the timing knobs (issue 21): run_options takes the
flags' names (and RunConfig's), a wrong name is a one-line ConfigError naming the valid ones;
--max-time alone below the default --min-time lowers the minimum; messages name flags."""

from __future__ import annotations

import pytest

import edgeprof
from edgeprof.core.backend import RunConfig, run_config_options
from edgeprof.core.errors import ConfigError, UserError
from edgeprof.profilers.measure.harness import plan_from_config


def test_run_options_take_the_flags_names_and_the_fields():
    assert run_config_options({"runs": 5, "min_time": 0.1, "max_time": 2, "timeout": 9,
                               "warmup": 3}) == {"runs": 5, "min_time_s": 0.1,
                                                 "max_time_s": 2, "timeout_s": 9, "warmup": 3}
    assert run_config_options({"min_time_s": 0.1}) == {"min_time_s": 0.1}
    assert run_config_options(None) == {}


def test_a_wrong_run_option_name_is_a_one_line_config_error_naming_the_valid_ones():
    with pytest.raises(ConfigError) as e:
        run_config_options({"max_tme": 1})
    msg = str(e.value)
    assert "\n" not in msg and "'max_tme'" in msg
    for name in ("runs", "min_time", "max_time", "warmup", "device", "options"):
        assert name in msg
    with pytest.raises(ConfigError, match="threads= argument"):
        run_config_options({"threads": 2})
    with pytest.raises(ConfigError, match="twice"):
        run_config_options({"min_time": 1, "min_time_s": 1})


def test_profile_with_the_readme_run_options(tmp_path):
    """`run_options={"max_time": 1}` raised a raw TypeError; now it is the flag's name."""
    report = edgeprof.profile("builtin:small_cnn", run_options={"runs": 5, "min_time": 0.05,
                                                                 "max_time": 0.5})
    run = report.runs[0]
    assert run.status == "ok"
    assert run.benchmark.config["max_time_s"] == 0.5
    assert run.executed_precision == run.benchmark.executed_precision == "fp32"
    assert run.to_dict()["executed_precision"] == run.executed_precision
    with pytest.raises(ConfigError, match="unknown run option 'max_tme'"):
        edgeprof.profile("builtin:small_cnn", run_options={"max_tme": 1})


def test_max_time_alone_below_the_default_min_time_lowers_it():
    plan = plan_from_config(RunConfig(max_time_s=0.5))
    assert (plan.min_time_s, plan.max_time_s) == (0.5, 0.5)
    assert plan_from_config(RunConfig(max_time_s=5)).min_time_s == 1.0


def test_timing_messages_name_the_flags():
    with pytest.raises(UserError) as e:
        plan_from_config(RunConfig(min_time_s=2, max_time_s=1))
    assert "--max-time 1 s is below --min-time 2 s" in str(e.value)
    with pytest.raises(UserError, match="--runs"):
        plan_from_config(RunConfig(runs=0))

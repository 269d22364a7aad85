"""ncnn, MNN and ExecuTorch in data/runtimes.toml (issue 32): each is an edgeprof backend,
so its precisions are the ones its class declares (no list in the TOML to contradict it),
except where the runtime runs more on a board than the wheel here builds (ncnn's int8);
the TOML gives what only a runtime's documentation says: where it runs, its default thread
count (for published rows that do not state one), its thread scaling and what it fuses,
each with a source."""

from __future__ import annotations

import tomllib

import pytest

from edgeprof.profilers.predict.threads import RUNTIMES_FILE, default_threads, family_info
from edgeprof.targets import get_target

FAMILIES = ("ncnn", "mnn", "executorch")


@pytest.mark.parametrize("family", ("mnn", "executorch"))
def test_an_edgeprof_backends_entry_carries_no_precisions_of_its_own(family, registry):
    from edgeprof.profilers.predict.runtimes import family_processors, offered_precisions

    entry = tomllib.loads(RUNTIMES_FILE.read_text())[family]
    assert "precisions" not in entry
    offered, source = offered_precisions(family, registry)
    assert offered == registry.backend(family).capabilities.precisions
    assert "backend declares" in source
    assert family_processors(family, registry)[0] == ["cpu"]
    for key in ("processors", "default_threads"):
        assert entry.get(f"{key}_source"), (family, key)
    assert set(entry["fuse"]) == {"activation", "batchnorm", "identity"}


def test_default_threads_follow_each_runtimes_documentation():
    orin = get_target("jetson_orin_nano")  # 6 cores: MNN's fixed 4 shows
    n, why = default_threads("mnn", orin)
    assert n == 4 and "numThread" in why
    n, why = default_threads("executorch", orin)
    assert n == 6 and "cpuinfo_get_processors_count" in why
    assert family_info("executorch")["serial_share"] == 0.15
    assert "XNNPACK README" in family_info("executorch")["serial_share_source"]


@pytest.mark.parametrize("family", FAMILIES)
def test_predict_gives_a_pi5_figure_from_the_board_rows(family):
    """Issue 32's 'done when': their Pi 5 figures are predicted from the board rows
    (Ultralytics' Raspberry Pi 5 benchmarks time ncnn, MNN and ExecuTorch)."""
    from edgeprof.api import predict

    p = predict("builtin:small_mobilenet", "raspberry_pi_5", family, "fp32")
    assert p.value_ms > 0 and p.provenance == "predicted", p.note
    assert p.calibration == "raspberry_pi_5--published" and p.device == "cpu"


def test_ncnn_int8_is_predicted_though_the_wheel_here_cannot_build_it(registry):
    from edgeprof.api import predict
    from edgeprof.profilers.predict.runtimes import offered_precisions

    offered, source = offered_precisions("ncnn", registry)
    assert "int8" in offered and "int8" not in registry.backend("ncnn").capabilities.precisions
    assert "benchmark" in source
    p = predict("builtin:small_mobilenet", "raspberry_pi_5", "ncnn", "int8")
    assert p.provenance == "predicted" and p.method.startswith("calibrated")

"""The energy proxy (estimated) and the RAPL reader (measured) on a fake powercap tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.core.errors import UserError
from edgeprof.profilers.measure.energy import RaplReader, energy_proxy_j, measure_energy
from edgeprof.targets.schema import Quantity


class FakeTarget:
    id = "fake"
    typical_power = Quantity(6.4, "W", "test")


def test_energy_proxy_is_power_times_latency_and_estimated():
    f = energy_proxy_j(FakeTarget(), 0.25)
    assert f.value == pytest.approx(1.6) and f.unit == "J" and f.provenance == "estimated"
    assert energy_proxy_j(FakeTarget(), 0.0).value == 0.0


def test_energy_proxy_is_empty_with_the_reason_when_power_is_not_known():
    class UnknownPower:
        id = "host"
        typical_power = Quantity(float("nan"), "W", "not known: no sourced figure for 'AMD "
                                                         "EPYC'")

    f = energy_proxy_j(UnknownPower(), 0.25)
    assert f.value is None and f.provenance == "estimated"
    assert "not known" in f.reason and "AMD EPYC" in f.reason
    assert f.to_dict()["value"] is None


@pytest.mark.parametrize("bad", [-1.0, "1", None, float("inf")])
def test_energy_proxy_rejects_bad_latency(bad):
    with pytest.raises(UserError):
        energy_proxy_j(FakeTarget(), bad)


def make_zone(root: Path, name: str, energy: int, max_range: int, label: str = "package-0"):
    z = root / name
    z.mkdir(parents=True)
    (z / "energy_uj").write_text(f"{energy}\n")
    (z / "max_energy_range_uj").write_text(f"{max_range}\n")
    (z / "name").write_text(label + "\n")
    return z


def test_rapl_measures_energy_around_a_callable(tmp_path):
    z0 = make_zone(tmp_path, "intel-rapl:0", 1_000_000, 10_000_000)
    z1 = make_zone(tmp_path, "intel-rapl:1", 9_900_000, 10_000_000, "package-1")
    make_zone(tmp_path, "intel-rapl:0:0", 5, 10_000_000, "core")  # a sub-zone: not summed

    def work():  # the counters advance while the callable runs; zone 1 wraps around
        (z0 / "energy_uj").write_text("3500000\n")
        (z1 / "energy_uj").write_text("400000\n")
        (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("999999999\n")
        return 42

    m = measure_energy(work, root=tmp_path)
    assert m.energy_j == pytest.approx(2.5 + 0.5)  # 2.5 J + (10 - 9.9 + 0.4) J
    assert m.provenance == "measured" and m.result == 42 and m.reason is None
    assert len(m.zones) == 2 and m.figure().value == pytest.approx(3.0)
    assert m.average_power_w is not None and m.average_power_w > 0
    assert m.to_dict()["energy_j"] == pytest.approx(3.0)


def test_rapl_repeat_divides_per_call(tmp_path):
    z = make_zone(tmp_path, "intel-rapl:0", 0, 10**9)
    calls = []

    def work():
        calls.append(1)
        (z / "energy_uj").write_text(str(len(calls) * 1_000_000))

    m = measure_energy(work, repeat=4, root=tmp_path)
    assert len(calls) == 4 and m.energy_j == pytest.approx(4.0)
    assert m.energy_per_call_j == pytest.approx(1.0)


def test_rapl_missing_gives_none_with_reason(tmp_path):
    m = measure_energy(lambda: "ran", root=tmp_path / "absent")
    assert m.energy_j is None and "no powercap" in m.reason and m.result == "ran"
    assert m.figure().to_dict()["value"] is None and m.figure().to_dict()["reason"]
    (tmp_path / "empty").mkdir()
    assert "no intel-rapl" in RaplReader(tmp_path / "empty").reason


def test_rapl_unreadable_says_permission(tmp_path, monkeypatch):
    """energy_uj is root-only on recent kernels; root reads anything, so the denial is
    simulated rather than made with chmod."""
    from pathlib import Path

    z = make_zone(tmp_path, "intel-rapl:0", 1, 10)
    real = Path.read_text

    def denied(self, *args, **kwargs):
        if self == z / "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    reader = RaplReader(tmp_path)
    assert not reader.available and "root" in reader.reason


def test_this_machine_rapl_is_reported_honestly():
    m = measure_energy(lambda: None)
    assert (m.energy_j is None) == (m.reason is not None)

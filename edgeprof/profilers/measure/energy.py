"""Energy: an *estimated* proxy for any target, and a *measured* reading where the host has
Intel RAPL counters.

* :func:`energy_proxy_j` - the target's typical power x latency. A proxy: it assumes the
  device draws its typical power for the whole inference, which is what seed 001's
  ``energy_proxy_j`` column means. Provenance ``estimated``. A target whose power is not
  known (the host without RAPL, on a CPU with no sourced figure: power NaN, the reason in
  its source; see ``edgeprof.targets.host.host_power``) gets no value, with that reason.
* :class:`RaplReader` / :func:`measure_energy` - the package-level counters under
  ``/sys/class/powercap/intel-rapl:N/energy_uj`` (microjoules, wrapping at
  ``max_energy_range_uj``) read around a callable. Provenance ``measured``. Only top-level
  zones (packages) are summed: their sub-zones (core, uncore, dram) are parts of them.
  When the counters are missing or unreadable (no Intel CPU, a VM, or the files readable by
  root only) the value is None with the reason.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.core.results import Figure, clean

POWERCAP_ROOT = "/sys/class/powercap"
_TOP_ZONE = re.compile(r"^intel-rapl:\d+$")


def energy_proxy_j(target: Any, latency_s: float) -> Figure:
    """Estimated energy of one inference: the target's typical power (W) x ``latency_s``."""
    if isinstance(latency_s, bool) or not isinstance(latency_s, (int, float)) \
            or not math.isfinite(latency_s) or latency_s < 0:
        raise UserError(f"latency_s must be a non-negative number of seconds, got {latency_s!r}")
    power = getattr(target, "typical_power", None)
    if power is None:
        return Figure(None, "J", "estimated", reason=f"target '{getattr(target, 'id', target)}' "
                      "has no typical power figure")
    if not math.isfinite(float(power.value)):  # a host whose power is not known: no guess
        return Figure(None, "J", "estimated", reason=f"target '{getattr(target, 'id', target)}' "
                      f"has no power figure: {power.source}")
    return Figure(float(power.value) * float(latency_s), "J", "estimated",
                  reason=f"typical power {power.value:g} W ({power.source}) x latency; a proxy, "
                         "not a measurement")


@dataclass
class RaplZone:
    name: str
    path: Path
    max_range_uj: int


@dataclass
class EnergyMeasurement:
    """Energy measured around one call (or ``repeat`` calls). ``energy_j`` is None when the
    counters could not be read; ``reason`` says why."""

    energy_j: float | None
    seconds: float | None
    calls: int = 1
    zones: list[str] = field(default_factory=list)
    reason: str | None = None
    provenance: str = "measured"
    result: Any = field(default=None, repr=False)

    @property
    def energy_per_call_j(self) -> float | None:
        return None if self.energy_j is None else self.energy_j / max(self.calls, 1)

    @property
    def average_power_w(self) -> float | None:
        if self.energy_j is None or not self.seconds:
            return None
        return self.energy_j / self.seconds

    def figure(self) -> Figure:
        """Energy per call as a Figure (provenance ``measured``)."""
        return Figure(self.energy_per_call_j, "J", "measured", reason=self.reason)

    def to_dict(self) -> dict[str, Any]:
        return clean({"energy_j": self.energy_j, "energy_per_call_j": self.energy_per_call_j,
                      "seconds": self.seconds, "calls": self.calls,
                      "average_power_w": self.average_power_w, "zones": self.zones,
                      "reason": self.reason, "provenance": self.provenance})


class RaplReader:
    """Reads the top-level Intel RAPL zones under ``root`` (a parameter, for tests)."""

    def __init__(self, root: str | Path = POWERCAP_ROOT):
        self.root = Path(root)
        self.zones: list[RaplZone] = []
        self.reason: str | None = None
        self._discover()

    def _discover(self) -> None:
        if not self.root.is_dir():
            self.reason = f"no powercap folder {self.root} (no RAPL on this machine)"
            return
        found = sorted(p for p in self.root.iterdir() if _TOP_ZONE.match(p.name))
        if not found:
            self.reason = f"no intel-rapl zones under {self.root} (not an Intel CPU, or a VM)"
            return
        for z in found:
            try:
                max_range = int((z / "max_energy_range_uj").read_text().strip())
                int((z / "energy_uj").read_text().strip())
            except PermissionError:
                self.reason = (f"{z / 'energy_uj'} is readable by root only; run as root or "
                               "grant read access (e.g. chmod o+r) to measure energy")
                self.zones = []
                return
            except (OSError, ValueError) as e:
                self.reason = f"cannot read RAPL zone {z.name}: {e}"
                self.zones = []
                return
            name_file = z / "name"
            name = name_file.read_text().strip() if name_file.is_file() else z.name
            self.zones.append(RaplZone(f"{z.name} ({name})", z, max_range))

    @property
    def available(self) -> bool:
        return bool(self.zones) and self.reason is None

    def read_uj(self) -> list[int]:
        return [int((z.path / "energy_uj").read_text().strip()) for z in self.zones]

    def delta_j(self, before: list[int], after: list[int]) -> float:
        """Joules between two readings; a counter that wrapped adds its range."""
        return sum(b - a + (z.max_range_uj if b < a else 0)
                   for z, a, b in zip(self.zones, before, after)) / 1e6


def measure_energy(fn: Callable[[], Any], *, repeat: int = 1,
                   root: str | Path = POWERCAP_ROOT) -> EnergyMeasurement:
    """Call ``fn`` ``repeat`` times between two RAPL readings (package energy: the whole CPU,
    so other load on the machine is counted too). Counters update about every millisecond:
    repeat short calls. Without readable counters ``fn`` still runs, ``energy_j`` is None."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UserError(f"repeat must be a positive integer, got {repeat!r}")
    reader = RaplReader(root)
    before = reader.read_uj() if reader.available else None
    t0 = time.perf_counter()
    result = None
    for _ in range(repeat):
        result = fn()
    seconds = time.perf_counter() - t0
    if before is None:
        return EnergyMeasurement(None, seconds, repeat, reason=reader.reason, result=result)
    after = reader.read_uj()
    return EnergyMeasurement(reader.delta_j(before, after), seconds, repeat,
                             [z.name for z in reader.zones], result=result)


__all__ = ["EnergyMeasurement", "POWERCAP_ROOT", "RaplReader", "energy_proxy_j",
           "measure_energy"]

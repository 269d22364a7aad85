"""Target descriptors: frozen dataclasses loaded from TOML and validated on load.

A descriptor file ``<id>.toml`` looks like this (every figure is a table with a value in
base units, the unit spelled out, and where the figure comes from)::

    name = "Raspberry Pi 4 Model B (4 GB)"
    kind = "edge_cpu"              # cpu | edge_cpu | gpu | edge_gpu | npu | mcu
    strategy_class = "cpu"         # seed 003 strategy family: nvidia_gpu | cpu | mobile_npu | embedded_mcu
    processor = "Broadcom BCM2711, 4x Cortex-A72"
    supported_precisions = ["fp32", "int8", "int8_dynamic"]
    preferred_backends = ["tflite", "onnxruntime"]

    [compute]
    cores = { value = 4, unit = "count", source = "..." }
    frequency = { value = 1.5e9, unit = "Hz", source = "..." }   # optional
    [compute.peak]                 # MAC/s per compute precision (1 MAC = 2 FLOP)
    fp32 = { value = 4.8e10, unit = "MAC/s", source = "..." }

    [memory]
    ram = { value = 4e9, unit = "B", source = "..." }
    bandwidth = { value = 4.3e9, unit = "B/s", source = "..." }
    # optional: l1d_cache, l2_cache, l3_cache, sram, flash (all "B")

    [power]
    typical = { value = 6.4, unit = "W", source = "..." }

    [strategy]                     # the recommended compression strategy for this device
    quantization_bits = 8
    pruning_type = "structured"    # none | unstructured | structured | channel | n:m
    layout = "NHWC"
    precision = "int8"
    reason = "..."

    # optional: one table per processor a runtime can be told to use (``--device``), e.g. a
    # Jetson's GPU and its CPU cluster. The figures above describe the processor the
    # target's kind implies (cpu for cpu/edge_cpu/mcu, cuda for gpu/edge_gpu, npu for npu);
    # a table for that device overrides them, a table for another device adds one.
    [processors.cpu]
    kind = "cpu"                   # cpu | gpu | npu
    name = "4x Arm Cortex-A57 @ 1.43 GHz"
    cores = { value = 4, unit = "count", source = "..." }
    frequency = { value = 1.43e9, unit = "Hz", source = "..." }  # optional
    bandwidth = { value = 2.56e10, unit = "B/s", source = "..." }  # optional: memory.bandwidth
    [processors.cpu.peak]          # MAC/s per compute precision
    fp32 = { value = 2.288e10, unit = "MAC/s", source = "..." }

    # optional: modes (power/clock settings of the same board), named TARGET:MODE wherever a
    # target is accepted (``--target jetson_orin_nano:super``). A mode gives only what it
    # changes: clocks, cores online, bandwidth, power, peaks, and the same per processor.
    [modes.super]
    description = "..."            # required: what the mode is and how it is set
    name = "..."                   # optional: the board's name in this mode
    processor = "..."              # optional: the processor line at the mode's clocks
    [modes.super.compute]          # cores, big_cores, frequency, peak.<precision>
    frequency = { value = 1.02e9, unit = "Hz", source = "..." }
    [modes.super.memory]
    bandwidth = { value = 1.02e11, unit = "B/s", source = "..." }
    [modes.super.power]
    typical = { value = 25.0, unit = "W", source = "..." }
    [modes.super.processors.cpu]   # name, cores, frequency, bandwidth, peak.<precision>
    frequency = { value = 1.7e9, unit = "Hz", source = "..." }

Applying a mode (:func:`apply_mode`): a peak the mode does not give, on a processor whose
clock or cores online change, is scaled from the base figure by the clock (and core-count)
ratio (peak = cores x MAC/cycle x Hz), and its source says so. Bandwidth is never scaled: a
mode that changes it gives it. The top-level figures and the table of the device the kind
implies (``[processors.cpu]`` of an edge_cpu) describe the same processor where their base
values agree, so a mode's change to one applies to the other. ``big_cores`` (optional, in
``[compute]``) is the number of the board's big CPU cores, the ones a runtime's threads
should use (default: the ``[processors.cpu]`` cores, else ``cores``).
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgeprof.core.errors import TargetError, UnknownNameError
from edgeprof.core.precision import PRECISIONS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KINDS = ("cpu", "edge_cpu", "gpu", "edge_gpu", "npu", "mcu")
STRATEGY_CLASSES = ("nvidia_gpu", "cpu", "mobile_npu", "embedded_mcu")
PRUNING_TYPES = ("none", "unstructured", "structured", "channel", "n:m")
LAYOUTS = ("NCHW", "NHWC")
COMPUTE_PRECISIONS = ("fp32", "fp16", "bf16", "int8", "int4")

# section -> field -> (expected unit, required)
FIGURES: dict[str, dict[str, tuple[str, bool]]] = {
    "compute": {"cores": ("count", True), "frequency": ("Hz", False),
                "big_cores": ("count", False)},
    "memory": {
        "ram": ("B", True), "bandwidth": ("B/s", True), "l1d_cache": ("B", False),
        "l2_cache": ("B", False), "l3_cache": ("B", False), "sram": ("B", False),
        "flash": ("B", False),
    },
    "power": {"typical": ("W", True)},
}
TOP_KEYS = {"name", "kind", "strategy_class", "processor", "description",
            "supported_precisions", "preferred_backends", "compute", "memory", "power",
            "strategy", "processors", "modes"}
#: the device names a processor table may have (what ``--device`` chooses)
DEVICES = ("cpu", "cuda", "npu")
PROCESSOR_KINDS = ("cpu", "gpu", "npu")
#: the device a target's top-level figures describe, by the target's kind
IMPLIED_DEVICE = {"cpu": "cpu", "edge_cpu": "cpu", "mcu": "cpu", "gpu": "cuda",
                  "edge_gpu": "cuda", "npu": "npu"}
PROCESSOR_KEYS = {"kind", "name", "cores", "frequency", "bandwidth", "peak"}
#: what a ``[modes.<name>]`` table may hold; figures: section -> field -> unit
MODE_KEYS = {"description", "name", "processor", "compute", "memory", "power", "processors"}
MODE_FIGURES: dict[str, dict[str, str]] = {
    "compute": {"cores": "count", "frequency": "Hz", "big_cores": "count"},
    "memory": {"bandwidth": "B/s"},
    "power": {"typical": "W"},
}
MODE_PROCESSOR_FIGURES = {"cores": "count", "frequency": "Hz", "bandwidth": "B/s"}
MODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
STRATEGY_KEYS = {"quantization_bits": int, "pruning_type": str, "layout": str,
                 "precision": str, "reason": str}


@dataclass(frozen=True)
class Quantity:
    """A figure in base units with its unit and its source."""

    value: float
    unit: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "source": self.source}


@dataclass(frozen=True)
class Strategy:
    quantization_bits: int
    pruning_type: str
    layout: str
    precision: str
    reason: str


@dataclass(frozen=True)
class Processor:
    """One processor of a target (``[processors.<device>]``): its own cores, clock and
    peaks, and its own bandwidth where it differs from the target's memory."""

    device: str  # cpu | cuda | npu: what --device names
    kind: str  # cpu | gpu | npu
    name: str
    cores: Quantity
    peak_compute: dict[str, Quantity]
    frequency: Quantity | None = None
    bandwidth: Quantity | None = None  # None: the target's memory.bandwidth

    def figures(self) -> dict[str, Quantity]:
        out = {"cores": self.cores}
        if self.frequency is not None:
            out["frequency"] = self.frequency
        if self.bandwidth is not None:
            out["bandwidth"] = self.bandwidth
        out.update({f"peak_{k}": v for k, v in self.peak_compute.items()})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "kind": self.kind, "name": self.name,
                "figures": {k: v.to_dict() for k, v in self.figures().items()}}


@dataclass(frozen=True)
class ProcessorOverride:
    """What a mode changes in one ``[processors.<device>]`` table."""

    name: str | None = None
    cores: Quantity | None = None
    frequency: Quantity | None = None
    bandwidth: Quantity | None = None
    peak: dict[str, Quantity] = field(default_factory=dict)


@dataclass(frozen=True)
class Mode:
    """One ``[modes.<name>]`` table: the figures a power/clock mode changes, validated on
    load like the base figures. :func:`apply_mode` turns a base target and a mode into the
    target ``<id>:<name>``."""

    name: str
    description: str
    processor: str | None = None
    title: str | None = None  # the board's name in this mode (``name`` in the table)
    cores: Quantity | None = None
    frequency: Quantity | None = None
    big_cores: Quantity | None = None
    peak: dict[str, Quantity] = field(default_factory=dict)
    bandwidth: Quantity | None = None
    typical_power: Quantity | None = None
    processors: dict[str, ProcessorOverride] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description}


@dataclass(frozen=True)
class Target:
    """A device edgeprof reports for. Built from a descriptor file, or detected (``host``)."""

    id: str
    name: str
    kind: str
    strategy_class: str
    processor: str
    supported_precisions: tuple[str, ...]
    preferred_backends: tuple[str, ...]
    cores: Quantity
    frequency: Quantity | None  # optional: an NPU's or a VM's clock may be unpublished
    peak_compute: dict[str, Quantity]
    ram: Quantity
    bandwidth: Quantity
    typical_power: Quantity
    strategy: Strategy
    caches: dict[str, Quantity] = field(default_factory=dict)  # l1d_cache, l2_cache, l3_cache
    sram: Quantity | None = None
    flash: Quantity | None = None
    description: str = ""
    path: str | None = None
    sha256: str | None = None
    is_host: bool = False
    #: optional per-processor tables (``[processors.cpu]``, ``[processors.cuda]``)
    processors: dict[str, Processor] = field(default_factory=dict)
    #: optional ``[compute] big_cores``: the board's big CPU cores (see :attr:`big_cores`)
    big_cores_figure: Quantity | None = None
    #: the modes the descriptor defines (``[modes.<name>]``), by name; a mode target keeps
    #: its base's, so either lists them
    modes: dict[str, Mode] = field(default_factory=dict)
    #: the mode this target is (``None``: the base descriptor); its id is ``<base>:<mode>``
    mode: str | None = None

    # -- convenience ----------------------------------------------------------------
    @property
    def base_id(self) -> str:
        """The descriptor's id without the mode (``jetson_orin_nano`` for
        ``jetson_orin_nano:super``); calibrations are looked up by it."""
        return self.id[: -len(self.mode) - 1] if self.mode else self.id

    @property
    def mode_names(self) -> tuple[str, ...]:
        return tuple(self.modes)

    @property
    def big_cores(self) -> int:
        """All of the board's big CPU cores (the ones a runtime's threads should use): the
        ``big_cores`` figure where the descriptor gives one, else the ``[processors.cpu]``
        table's cores, else ``cores``."""
        if self.big_cores_figure is not None:
            return int(self.big_cores_figure.value)
        if "cpu" in self.processors:
            return int(self.processors["cpu"].cores.value)
        return int(self.cores.value)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return float(self.bandwidth.value)

    @property
    def implied_device(self) -> str:
        """The device the top-level figures describe (by the target's kind)."""
        return IMPLIED_DEVICE.get(self.kind, "cpu")

    @property
    def devices(self) -> tuple[str, ...]:
        """The processors ``--device`` can choose: the implied one first, then the tables."""
        return tuple(dict.fromkeys([self.implied_device, *self.processors]))

    def get_processor(self, device: str) -> Processor:
        """The processor called ``device`` (the top-level figures for the implied one);
        :class:`UnknownNameError` (exit 2) for a device the target does not have."""
        if device in self.processors:
            return self.processors[device]
        if device == self.implied_device:
            return Processor(device=device, kind="gpu" if device == "cuda" else device,
                             name=self.processor, cores=self.cores,
                             peak_compute=dict(self.peak_compute), frequency=self.frequency,
                             bandwidth=None)
        raise UnknownNameError("device", device, self.devices,
                               f"Target '{self.id}' has these processors")

    def processor_figures(self, device: str) -> tuple[float, dict[str, float], int]:
        """(bandwidth B/s, {compute precision: MAC/s}, cores) of processor ``device``; the
        bandwidth is the processor's own where its table gives one, else the target's."""
        p = self.get_processor(device)
        bw = p.bandwidth if p.bandwidth is not None else self.bandwidth
        return (float(bw.value), {k: float(q.value) for k, q in p.peak_compute.items()},
                int(p.cores.value))

    def peak_macs(self, compute_precision: str) -> float | None:
        q = self.peak_compute.get(compute_precision)
        return None if q is None else float(q.value)

    @property
    def last_level_cache_bytes(self) -> float | None:
        for key in ("l3_cache", "l2_cache", "l1d_cache"):
            if key in self.caches:
                return float(self.caches[key].value)
        return None

    def supports(self, precision: str) -> bool:
        return precision in self.supported_precisions

    def with_overrides(self, **changes: Any) -> Target:
        """A copy with some fields replaced (e.g. ``bandwidth=Quantity(...)``)."""
        return replace(self, **changes)

    def figures(self) -> dict[str, Quantity]:
        out = {"cores": self.cores, "ram": self.ram, "bandwidth": self.bandwidth,
               "typical_power": self.typical_power}
        if self.big_cores_figure is not None:
            out["big_cores"] = self.big_cores_figure
        if self.frequency is not None:
            out["frequency"] = self.frequency
        out.update(self.caches)
        if self.sram:
            out["sram"] = self.sram
        if self.flash:
            out["flash"] = self.flash
        out.update({f"peak_{k}": v for k, v in self.peak_compute.items()})
        for dev, proc in self.processors.items():
            out.update({f"{dev}.{k}": v for k, v in proc.figures().items()})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "base_id": self.base_id, "mode": self.mode,
            "modes": {n: m.description for n, m in self.modes.items()},
            "big_cores": self.big_cores, "name": self.name, "kind": self.kind,
            "strategy_class": self.strategy_class, "processor": self.processor,
            "description": self.description, "is_host": self.is_host,
            "supported_precisions": list(self.supported_precisions),
            "preferred_backends": list(self.preferred_backends),
            "figures": {k: v.to_dict() for k, v in self.figures().items()},
            "strategy": {
                "quantization_bits": self.strategy.quantization_bits,
                "pruning_type": self.strategy.pruning_type, "layout": self.strategy.layout,
                "precision": self.strategy.precision, "reason": self.strategy.reason,
            },
            "descriptor_path": self.path, "descriptor_sha256": self.sha256,
            "devices": list(self.devices),
            "processors": {d: {"kind": p.kind, "name": p.name}
                           for d, p in self.processors.items()},
        }


# ------------------------------------------------------------------------ validation
def _quantity(raw: Any, path: Path, fld: str, unit: str) -> Quantity:
    if not isinstance(raw, dict):
        raise TargetError("must be a table {value, unit, source}", path=path, field=fld)
    extra = set(raw) - {"value", "unit", "source"}
    if extra:
        raise TargetError(f"unknown key(s) {sorted(extra)}", path=path, field=fld)
    for k in ("value", "unit", "source"):
        if k not in raw:
            raise TargetError(f"missing '{k}'", path=path, field=fld)
    v = raw["value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TargetError(f"value must be a number, got {type(v).__name__} {v!r}", path=path,
                          field=fld)
    if v <= 0:
        raise TargetError(f"value must be positive, got {v}", path=path, field=fld)
    if raw["unit"] != unit:
        raise TargetError(f"unit must be '{unit}' (base units), got '{raw['unit']}'",
                          path=path, field=fld)
    if not isinstance(raw["source"], str) or not raw["source"].strip():
        raise TargetError("source must be a non-empty string saying where the figure comes "
                          "from", path=path, field=fld)
    return Quantity(float(v), unit, raw["source"])


def _str(data: dict, key: str, path: Path, choices: tuple[str, ...] | None = None,
         required: bool = True) -> str:
    if key not in data:
        if required:
            raise TargetError("missing", path=path, field=key)
        return ""
    v = data[key]
    if not isinstance(v, str):
        raise TargetError(f"must be a string, got {type(v).__name__}", path=path, field=key)
    if choices and v not in choices:
        raise TargetError(f"'{v}' is not one of {', '.join(choices)}", path=path, field=key)
    return v


def _str_list(data: dict, key: str, path: Path) -> tuple[str, ...]:
    v = data.get(key)
    if v is None:
        raise TargetError("missing", path=path, field=key)
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise TargetError("must be a list of strings", path=path, field=key)
    return tuple(v)


def _peak_table(raw: Any, path: Path, fld: str) -> dict[str, Quantity]:
    if not isinstance(raw, dict) or not raw:
        raise TargetError("missing table of MAC/s per precision", path=path, field=fld)
    peak: dict[str, Quantity] = {}
    for k, v in raw.items():
        if k not in COMPUTE_PRECISIONS:
            raise TargetError(f"unknown compute precision; allowed: {', '.join(COMPUTE_PRECISIONS)}",
                              path=path, field=f"{fld}.{k}")
        peak[k] = _quantity(v, path, f"{fld}.{k}", "MAC/s")
    return peak


def _processors(raw: Any, path: Path) -> dict[str, Processor]:
    """The optional ``[processors.<device>]`` tables."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise TargetError(f"must be tables [processors.<device>] with device one of "
                          f"{', '.join(DEVICES)}", path=path, field="processors")
    out: dict[str, Processor] = {}
    for device, table in raw.items():
        fld = f"processors.{device}"
        if device not in DEVICES:
            raise TargetError(f"unknown device '{device}'; allowed: {', '.join(DEVICES)}",
                              path=path, field=fld)
        if not isinstance(table, dict):
            raise TargetError("must be a table with kind, name, cores, peak (and optionally "
                              "frequency, bandwidth)", path=path, field=fld)
        extra = set(table) - PROCESSOR_KEYS
        if extra:
            raise TargetError(f"unknown key; allowed: {', '.join(sorted(PROCESSOR_KEYS))}",
                              path=path, field=f"{fld}.{sorted(extra)[0]}")
        kind = table.get("kind")
        if kind is None:
            raise TargetError("missing", path=path, field=f"{fld}.kind")
        if kind not in PROCESSOR_KINDS:
            raise TargetError(f"{kind!r} is not one of {', '.join(PROCESSOR_KINDS)}", path=path,
                              field=f"{fld}.kind")
        if "name" not in table:
            raise TargetError("missing", path=path, field=f"{fld}.name")
        name = table["name"]
        if not isinstance(name, str) or not name.strip():
            raise TargetError("must be a non-empty string", path=path, field=f"{fld}.name")
        if "cores" not in table:
            raise TargetError("missing", path=path, field=f"{fld}.cores")
        cores = _quantity(table["cores"], path, f"{fld}.cores", "count")
        freq = (_quantity(table["frequency"], path, f"{fld}.frequency", "Hz")
                if "frequency" in table else None)
        bw = (_quantity(table["bandwidth"], path, f"{fld}.bandwidth", "B/s")
              if "bandwidth" in table else None)
        peak = _peak_table(table.get("peak"), path, f"{fld}.peak")
        out[device] = Processor(device=device, kind=kind, name=name, cores=cores,
                                peak_compute=peak, frequency=freq, bandwidth=bw)
    return out


def _whole_count(q: Quantity, path: Path, fld: str) -> Quantity:
    if q.value != int(q.value):
        raise TargetError(f"must be a whole number of cores, got {q.value:g}", path=path,
                          field=fld)
    return q


def _mode_figures(raw: Any, section: str, path: Path, fld: str) -> dict[str, Quantity]:
    if not isinstance(raw, dict):
        raise TargetError("must be a table", path=path, field=fld)
    spec = MODE_FIGURES[section]
    allowed = set(spec) | ({"peak"} if section == "compute" else set())
    extra = set(raw) - allowed
    if extra:
        raise TargetError(f"unknown key; a mode may change: {', '.join(sorted(allowed))}",
                          path=path, field=f"{fld}.{sorted(extra)[0]}")
    return {k: _quantity(raw[k], path, f"{fld}.{k}", unit) for k, unit in spec.items()
            if k in raw}


def _mode_peak(raw: Any, base_peaks: dict[str, Quantity], path: Path,
               fld: str) -> dict[str, Quantity]:
    peak = _peak_table(raw, path, fld)
    for prec in peak:
        if prec not in base_peaks:
            raise TargetError(f"the base descriptor has no {prec} peak here; a mode changes "
                              f"figures, it does not add them (base has: "
                              f"{', '.join(base_peaks)})", path=path, field=f"{fld}.{prec}")
    return peak


def _mode(name: Any, raw: Any, path: Path, base: Target) -> Mode:
    """Validate one ``[modes.<name>]`` table against its base target."""
    fld = f"modes.{name}"
    if not isinstance(name, str) or not MODE_NAME.match(name):
        raise TargetError("a mode name is letters, digits, '_', '.', '+' or '-' (no ':', "
                          "which separates it from the target id)", path=path, field=fld)
    if not isinstance(raw, dict):
        raise TargetError("must be a table [modes.<name>]", path=path, field=fld)
    extra = set(raw) - MODE_KEYS
    if extra:
        raise TargetError(f"unknown key; allowed: {', '.join(sorted(MODE_KEYS))}", path=path,
                          field=f"{fld}.{sorted(extra)[0]}")
    desc = raw.get("description")
    if not isinstance(desc, str) or not desc.strip():
        raise TargetError("missing: a non-empty string saying what the mode is and how it "
                          "is set", path=path, field=f"{fld}.description")
    processor, title = raw.get("processor"), raw.get("name")
    for key, text in (("processor", processor), ("name", title)):
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise TargetError("must be a non-empty string", path=path, field=f"{fld}.{key}")
    figs: dict[str, Quantity] = {}
    peak: dict[str, Quantity] = {}
    for section in MODE_FIGURES:
        if section in raw:
            figs.update(_mode_figures(raw[section], section, path, f"{fld}.{section}"))
    if "compute" in raw and "peak" in raw["compute"]:
        peak = _mode_peak(raw["compute"]["peak"], base.peak_compute, path,
                          f"{fld}.compute.peak")
    for key in ("cores", "big_cores"):
        if key in figs:
            _whole_count(figs[key], path, f"{fld}.compute.{key}")
    if "frequency" in figs and base.frequency is None:
        raise TargetError("the base descriptor gives no compute.frequency, so its peaks "
                          "cannot be scaled by a clock ratio; give the base's clock first",
                          path=path, field=f"{fld}.compute.frequency")
    procs: dict[str, ProcessorOverride] = {}
    raw_procs = raw.get("processors", {})
    if not isinstance(raw_procs, dict):
        raise TargetError("must be tables [modes.<name>.processors.<device>]", path=path,
                          field=f"{fld}.processors")
    for device, table in raw_procs.items():
        pfld = f"{fld}.processors.{device}"
        if device not in base.processors:
            raise TargetError(f"the base descriptor has no [processors.{device}] table (it has: "
                              f"{', '.join(base.processors) or 'none'}); a mode changes "
                              f"tables, it does not add them", path=path, field=pfld)
        if not isinstance(table, dict):
            raise TargetError("must be a table", path=path, field=pfld)
        allowed = {"name", "peak", *MODE_PROCESSOR_FIGURES}
        extra = set(table) - allowed
        if extra:
            raise TargetError(f"unknown key; a mode may change: {', '.join(sorted(allowed))}",
                              path=path, field=f"{pfld}.{sorted(extra)[0]}")
        pname = table.get("name")
        if pname is not None and (not isinstance(pname, str) or not pname.strip()):
            raise TargetError("must be a non-empty string", path=path, field=f"{pfld}.name")
        q = {k: _quantity(table[k], path, f"{pfld}.{k}", unit)
             for k, unit in MODE_PROCESSOR_FIGURES.items() if k in table}
        if "cores" in q:
            _whole_count(q["cores"], path, f"{pfld}.cores")
        base_proc = base.processors[device]
        if "frequency" in q and base_proc.frequency is None:
            raise TargetError(f"the base [processors.{device}] gives no frequency, so its peaks "
                              "cannot be scaled by a clock ratio", path=path,
                              field=f"{pfld}.frequency")
        ppeak = (_mode_peak(table["peak"], base_proc.peak_compute, path, f"{pfld}.peak")
                 if "peak" in table else {})
        procs[device] = ProcessorOverride(name=pname, cores=q.get("cores"),
                                          frequency=q.get("frequency"),
                                          bandwidth=q.get("bandwidth"), peak=ppeak)
    if not figs and not peak and not procs and processor is None and title is None:
        raise TargetError("a mode must change at least one figure", path=path, field=fld)
    return Mode(name=name, description=desc.strip(), processor=processor, title=title,
                cores=figs.get("cores"), frequency=figs.get("frequency"),
                big_cores=figs.get("big_cores"), peak=peak, bandwidth=figs.get("bandwidth"),
                typical_power=figs.get("typical"), processors=procs)


def _modes(raw: Any, path: Path, base: Target) -> dict[str, Mode]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise TargetError("must be tables [modes.<name>]", path=path, field="modes")
    return {name: _mode(name, table, path, base) for name, table in raw.items()}


# ----------------------------------------------------------------------------- modes
def _num(v: float) -> str:
    """A figure as the descriptors write it: ``7.344e9``, ``2``."""
    text = f"{v:.6g}"
    if "e" in text:
        mantissa, exp = text.split("e")
        return f"{mantissa}e{int(exp)}"
    return text


def _same(a: Quantity | None, b: Quantity | None) -> bool:
    return a is not None and b is not None and a.value == b.value


def _scaled_peaks(base_peaks: dict[str, Quantity], given: dict[str, Quantity],
                  c0: Quantity, c1: Quantity, f0: Quantity | None, f1: Quantity | None,
                  mode: str) -> dict[str, Quantity]:
    """The processor's peaks in ``mode``: the mode's own where it gives them, else the base
    figure scaled by the core-count and clock ratios (peak = cores x MAC/cycle x Hz), with a
    source that says so."""
    cores_changed = c1.value != c0.value
    clock_changed = f0 is not None and f1 is not None and f1.value != f0.value
    out: dict[str, Quantity] = {}
    for prec, q in base_peaks.items():
        if prec in given:
            out[prec] = given[prec]
            continue
        if not (cores_changed or clock_changed):
            out[prec] = q
            continue
        factor, steps, what = 1.0, "", []
        if cores_changed:
            factor *= c1.value / c0.value
            steps += f" x {_num(c1.value)}/{_num(c0.value)} cores"
            what.append("core-count")
        if clock_changed:
            factor *= f1.value / f0.value
            steps += f" / {_num(f0.value)} Hz x {_num(f1.value)} Hz"
            what.append("clock")
        value = q.value * factor
        out[prec] = Quantity(value, q.unit, (
            f"scaled for mode '{mode}' from the base figure by the {' and '.join(what)} "
            f"ratio (peak = cores x MAC/cycle x Hz; the mode gives no {prec} peak of its "
            f"own): {_num(q.value)} MAC/s{steps} = {_num(value)}. Base figure's source: "
            f"{q.source}"))
    return out


def apply_mode(base: Target, mode: str) -> Target:
    """The target ``<base.id>:<mode>``: the base's figures with the mode's overrides applied.

    Figures the mode does not give stay the base's, except the peaks of a processor whose
    clock or cores online change: those are scaled (see :func:`_scaled_peaks`). Bandwidth is
    never scaled. Where the top-level figures and the table of the implied device had the
    same base value, a change to either applies to both. :class:`UnknownNameError` (exit 2)
    names the target's modes when ``mode`` is not one of them."""
    if base.mode is not None:
        raise UnknownNameError("mode", f"{base.id}:{mode}", [], "A mode applies to a base "
                               f"target: use {base.base_id}:{mode}")
    if mode not in base.modes:
        hint = (f"'{base.id}' has no modes" if not base.modes else
                "A mode is named TARGET:MODE; 'edgeprof targets' lists each target's modes")
        raise UnknownNameError("mode", f"{base.id}:{mode}",
                               [f"{base.id}:{m}" for m in base.modes], hint)
    m = base.modes[mode]
    overrides = dict(m.processors)
    cores, freq, peak_given = m.cores, m.frequency, dict(m.peak)
    implied = base.implied_device
    table = base.processors.get(implied)
    if table is not None:  # the top level and the implied device's table: one processor
        o = overrides.get(implied, ProcessorOverride())
        if cores is None and o.cores is not None and _same(base.cores, table.cores):
            cores = o.cores
        if freq is None and o.frequency is not None and _same(base.frequency, table.frequency):
            freq = o.frequency
        for prec, q in o.peak.items():
            if prec not in peak_given and _same(base.peak_compute.get(prec),
                                                table.peak_compute.get(prec)):
                peak_given[prec] = q
        tpeak = dict(o.peak)
        for prec, q in m.peak.items():
            if prec not in tpeak and _same(base.peak_compute.get(prec),
                                           table.peak_compute.get(prec)):
                tpeak[prec] = q
        overrides[implied] = ProcessorOverride(
            name=o.name,
            cores=o.cores or (m.cores if _same(base.cores, table.cores) else None),
            frequency=o.frequency or (m.frequency if _same(base.frequency, table.frequency)
                                      else None),
            bandwidth=o.bandwidth, peak=tpeak)
    new_cores = cores or base.cores
    new_freq = freq or base.frequency
    peaks = _scaled_peaks(base.peak_compute, peak_given, base.cores, new_cores,
                          base.frequency, new_freq, mode)
    processors: dict[str, Processor] = {}
    for device, proc in base.processors.items():
        o = overrides.get(device)
        if o is None:
            processors[device] = proc
            continue
        pc, pf = o.cores or proc.cores, o.frequency or proc.frequency
        processors[device] = replace(
            proc, name=o.name or proc.name, cores=pc, frequency=pf,
            bandwidth=o.bandwidth or proc.bandwidth,
            peak_compute=_scaled_peaks(proc.peak_compute, o.peak, proc.cores, pc,
                                       proc.frequency, pf, mode))
    return replace(
        base, id=f"{base.id}:{mode}", mode=mode, name=m.title or f"{base.name}, {mode} mode",
        processor=m.processor or base.processor,
        description=(f"Mode '{mode}': {m.description} Base descriptor: "
                     f"{base.description}").strip(),
        cores=new_cores, frequency=new_freq, peak_compute=peaks,
        bandwidth=m.bandwidth or base.bandwidth,
        typical_power=m.typical_power or base.typical_power,
        big_cores_figure=m.big_cores or base.big_cores_figure, processors=processors,
        # a fingerprint of its own: a calibration fitted for the base is not silently the mode's
        sha256=(hashlib.sha256(f"{base.sha256}:{mode}".encode()).hexdigest()
                if base.sha256 else None))


def target_from_dict(data: dict[str, Any], *, target_id: str, path: Path,
                     sha256: str | None = None, is_host: bool = False) -> Target:
    """Validate a parsed descriptor and build a :class:`Target`."""
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise TargetError(f"unknown key; allowed: {', '.join(sorted(TOP_KEYS))}", path=path,
                          field=sorted(unknown)[0])
    name = _str(data, "name", path)
    kind = _str(data, "kind", path, KINDS)
    strategy_class = _str(data, "strategy_class", path, STRATEGY_CLASSES)
    processor = _str(data, "processor", path)
    description = _str(data, "description", path, required=False)
    precisions = _str_list(data, "supported_precisions", path)
    for p in precisions:
        if p not in PRECISIONS:
            raise TargetError(f"unknown precision '{p}'; known: {', '.join(PRECISIONS)}",
                              path=path, field="supported_precisions")
    backends = _str_list(data, "preferred_backends", path)

    sections: dict[str, dict[str, Quantity]] = {}
    for section, spec in FIGURES.items():
        raw = data.get(section)
        if not isinstance(raw, dict):
            raise TargetError("missing table", path=path, field=section)
        allowed = set(spec) | ({"peak"} if section == "compute" else set())
        extra = set(raw) - allowed
        if extra:
            raise TargetError(f"unknown key; allowed: {', '.join(sorted(allowed))}", path=path,
                              field=f"{section}.{sorted(extra)[0]}")
        got: dict[str, Quantity] = {}
        for fld, (unit, required) in spec.items():
            if fld in raw:
                got[fld] = _quantity(raw[fld], path, f"{section}.{fld}", unit)
            elif required:
                raise TargetError("missing", path=path, field=f"{section}.{fld}")
        sections[section] = got

    peak = _peak_table(data["compute"].get("peak"), path, "compute.peak")
    for p in precisions:
        needed = PRECISIONS[p].compute
        if needed not in peak:
            raise TargetError(f"precision '{p}' is supported but compute.peak.{needed} is missing",
                              path=path, field=f"compute.peak.{needed}")

    s = data.get("strategy")
    if not isinstance(s, dict):
        raise TargetError("missing table", path=path, field="strategy")
    extra = set(s) - set(STRATEGY_KEYS)
    if extra:
        raise TargetError(f"unknown key; allowed: {', '.join(STRATEGY_KEYS)}", path=path,
                          field=f"strategy.{sorted(extra)[0]}")
    for k, typ in STRATEGY_KEYS.items():
        if k not in s:
            raise TargetError("missing", path=path, field=f"strategy.{k}")
        if not isinstance(s[k], typ) or isinstance(s[k], bool):
            raise TargetError(f"must be {typ.__name__}", path=path, field=f"strategy.{k}")
    if s["pruning_type"] not in PRUNING_TYPES:
        raise TargetError(f"'{s['pruning_type']}' is not one of {', '.join(PRUNING_TYPES)}",
                          path=path, field="strategy.pruning_type")
    if s["layout"] not in LAYOUTS:
        raise TargetError(f"'{s['layout']}' is not one of {', '.join(LAYOUTS)}", path=path,
                          field="strategy.layout")
    if s["precision"] not in precisions:
        raise TargetError(f"recommended precision '{s['precision']}' is not in "
                          "supported_precisions: the strategy must not contradict the hardware",
                          path=path, field="strategy.precision")
    strategy = Strategy(s["quantization_bits"], s["pruning_type"], s["layout"], s["precision"],
                        s["reason"])

    processors = _processors(data.get("processors"), path)
    mem = sections["memory"]
    caches = {k: mem[k] for k in ("l1d_cache", "l2_cache", "l3_cache") if k in mem}
    big = sections["compute"].get("big_cores")
    if big is not None:
        _whole_count(big, path, "compute.big_cores")
    base = Target(
        id=target_id, name=name, kind=kind, strategy_class=strategy_class, processor=processor,
        supported_precisions=precisions, preferred_backends=backends,
        cores=sections["compute"]["cores"], frequency=sections["compute"].get("frequency"),
        peak_compute=peak, ram=mem["ram"], bandwidth=mem["bandwidth"],
        typical_power=sections["power"]["typical"], strategy=strategy, caches=caches,
        sram=mem.get("sram"), flash=mem.get("flash"), description=description,
        path=str(path), sha256=sha256, is_host=is_host, processors=processors,
        big_cores_figure=big,
    )
    if "modes" not in data:
        return base
    if is_host:
        raise TargetError("'host' is detected on this machine and has no modes", path=path,
                          field="modes")
    base = replace(base, modes=_modes(data["modes"], path, base))
    for name in base.modes:  # every mode applies cleanly (errors name the file, on load)
        apply_mode(base, name)
    return base


def load_target_file(path: str | Path, mode: str | None = None) -> Target:
    """Load and validate one descriptor; its file name (without .toml) is its id. With
    ``mode``, the target ``<id>:<mode>`` (:func:`apply_mode`)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TargetError(f"cannot read: {e.strerror}", path=path) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TargetError(f"malformed TOML: {e}", path=path) from None
    base = target_from_dict(data, target_id=path.stem, path=path,
                            sha256=hashlib.sha256(raw).hexdigest())
    return base if mode is None else apply_mode(base, mode)

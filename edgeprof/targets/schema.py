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
"""

from __future__ import annotations

import hashlib
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
    "compute": {"cores": ("count", True), "frequency": ("Hz", False)},
    "memory": {
        "ram": ("B", True), "bandwidth": ("B/s", True), "l1d_cache": ("B", False),
        "l2_cache": ("B", False), "l3_cache": ("B", False), "sram": ("B", False),
        "flash": ("B", False),
    },
    "power": {"typical": ("W", True)},
}
TOP_KEYS = {"name", "kind", "strategy_class", "processor", "description",
            "supported_precisions", "preferred_backends", "compute", "memory", "power",
            "strategy", "processors"}
#: the device names a processor table may have (what ``--device`` chooses)
DEVICES = ("cpu", "cuda", "npu")
PROCESSOR_KINDS = ("cpu", "gpu", "npu")
#: the device a target's top-level figures describe, by the target's kind
IMPLIED_DEVICE = {"cpu": "cpu", "edge_cpu": "cpu", "mcu": "cpu", "gpu": "cuda",
                  "edge_gpu": "cuda", "npu": "npu"}
PROCESSOR_KEYS = {"kind", "name", "cores", "frequency", "bandwidth", "peak"}
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

    # -- convenience ----------------------------------------------------------------
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
            "id": self.id, "name": self.name, "kind": self.kind,
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
    return Target(
        id=target_id, name=name, kind=kind, strategy_class=strategy_class, processor=processor,
        supported_precisions=precisions, preferred_backends=backends,
        cores=sections["compute"]["cores"], frequency=sections["compute"].get("frequency"),
        peak_compute=peak, ram=mem["ram"], bandwidth=mem["bandwidth"],
        typical_power=sections["power"]["typical"], strategy=strategy, caches=caches,
        sram=mem.get("sram"), flash=mem.get("flash"), description=description,
        path=str(path), sha256=sha256, is_host=is_host, processors=processors,
    )


def load_target_file(path: str | Path) -> Target:
    """Load and validate one descriptor; its file name (without .toml) is its id."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TargetError(f"cannot read: {e.strerror}", path=path) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TargetError(f"malformed TOML: {e}", path=path) from None
    return target_from_dict(data, target_id=path.stem, path=path,
                            sha256=hashlib.sha256(raw).hexdigest())

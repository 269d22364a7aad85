"""A target descriptor's vocabulary and its frozen dataclasses: the kinds, figures, units and
keys a descriptor may have (:data:`FIGURES`, :data:`TOP_KEYS`, ...), and :class:`Target`
with its :class:`Quantity` figures, :class:`Processor` tables, :class:`Mode` s and
:class:`Strategy` (:mod:`edgeprof.targets.schema` describes the file format)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from edgeprof.core.errors import UnknownNameError

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
            "strategy", "processors", "modes", "apis"}
#: the device names a processor table may have (what ``--device`` chooses): ``cuda`` an
#: NVIDIA GPU (CUDA runtimes), ``gpu`` another GPU (Vulkan/OpenCL runtimes: a Raspberry Pi 5's
#: VideoCore VII), ``npu`` a neural accelerator
DEVICES = ("cpu", "cuda", "gpu", "npu")
PROCESSOR_KINDS = ("cpu", "gpu", "npu")
#: the device a target's top-level figures describe, by the target's kind
IMPLIED_DEVICE = {"cpu": "cpu", "edge_cpu": "cpu", "mcu": "cpu", "gpu": "cuda",
                  "edge_gpu": "cuda", "npu": "npu"}
PROCESSOR_KEYS = {"kind", "name", "cores", "frequency", "bandwidth", "peak", "apis"}
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
    #: the programming interfaces its drivers offer (``vulkan``, ``coreml``, ``rknn`` ...):
    #: what a runtime that needs one (``gpu:vulkan`` in runtimes.toml) looks for; a ``cuda``
    #: device offers ``cuda`` by its name
    apis: tuple[str, ...] = ()

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
                "apis": list(self.apis),
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
    #: the programming interfaces of the processor the top-level figures describe (top-level
    #: ``apis``; see :attr:`Processor.apis`)
    apis: tuple[str, ...] = ()
    #: set on a processor's view of the board (``runtimes.on_device``): the device the view's
    #: figures describe (``gpu`` for a Raspberry Pi 5's VideoCore VII), which its kind alone
    #: cannot name
    view_device: str | None = None

    # -- convenience ----------------------------------------------------------------
    @property
    def base_id(self) -> str:
        """The descriptor's id without the mode (``jetson_orin_nano`` for
        ``jetson_orin_nano:super``); calibrations are looked up by it."""
        return self.id[: -len(self.mode) - 1] if self.mode else self.id

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
        """The device the top-level figures describe (by the target's kind; a processor's
        view: that processor)."""
        if self.view_device is not None:
            return self.view_device
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
                             bandwidth=None, apis=self.apis)
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
            "processors": {d: {"kind": p.kind, "name": p.name, "apis": list(p.apis)}
                           for d, p in self.processors.items()},
            "apis": list(self.apis),
        }

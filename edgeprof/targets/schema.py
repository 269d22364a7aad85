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
    [processors.cpu]               # device: cpu | cuda (NVIDIA) | gpu (Vulkan/OpenCL) | npu
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

The vocabulary and the dataclasses are in :mod:`edgeprof.targets.descriptor`, validation and
loading in :mod:`edgeprof.targets.validate`, modes in :mod:`edgeprof.targets.modes`; every
name is importable from here.
"""

from __future__ import annotations

from edgeprof.targets.descriptor import (COMPUTE_PRECISIONS, DEVICES, FIGURES, IMPLIED_DEVICE,
                                         KINDS, LAYOUTS, MODE_FIGURES, MODE_KEYS, MODE_NAME,
                                         MODE_PROCESSOR_FIGURES, PROCESSOR_KEYS,
                                         PROCESSOR_KINDS, PRUNING_TYPES, STRATEGY_CLASSES,
                                         STRATEGY_KEYS, TOP_KEYS, Mode, Processor,
                                         ProcessorOverride, Quantity, Strategy, Target)
from edgeprof.targets.modes import apply_mode
from edgeprof.targets.validate import load_target_file, target_from_dict

__all__ = ["COMPUTE_PRECISIONS", "DEVICES", "FIGURES", "IMPLIED_DEVICE", "KINDS", "LAYOUTS",
           "MODE_FIGURES", "MODE_KEYS", "MODE_NAME", "MODE_PROCESSOR_FIGURES", "Mode",
           "PROCESSOR_KEYS", "PROCESSOR_KINDS", "PRUNING_TYPES", "Processor",
           "ProcessorOverride", "Quantity", "STRATEGY_CLASSES", "STRATEGY_KEYS", "Strategy",
           "TOP_KEYS", "Target", "apply_mode", "load_target_file", "target_from_dict"]

"""A descriptor's modes applied (:func:`apply_mode`): the target ``<id>:<mode>`` is the base
target with the mode's figures, peaks of a processor whose clock or cores online change
scaled from the base figure, and a fingerprint of its own."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from edgeprof.core.errors import UnknownNameError
from edgeprof.targets.descriptor import Processor, ProcessorOverride, Quantity, Target


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

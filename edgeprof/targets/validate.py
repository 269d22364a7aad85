"""Validating a parsed descriptor into a :class:`~edgeprof.targets.descriptor.Target`
(:func:`target_from_dict`) and loading a descriptor file (:func:`load_target_file`): every
figure a table with a value in base units, its unit and its source; unknown keys and wrong
units are errors that name the file and the field; each mode table is checked against its
base and applied once on load."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgeprof.core.errors import TargetError
from edgeprof.core.precision import PRECISIONS
from edgeprof.targets.descriptor import (COMPUTE_PRECISIONS, DEVICES, FIGURES, KINDS, LAYOUTS,
                                         MODE_FIGURES, MODE_KEYS, MODE_NAME,
                                         MODE_PROCESSOR_FIGURES, PROCESSOR_KEYS,
                                         PROCESSOR_KINDS, PRUNING_TYPES, STRATEGY_CLASSES,
                                         STRATEGY_KEYS, TOP_KEYS, Mode, Processor,
                                         ProcessorOverride, Quantity, Strategy, Target)
from edgeprof.targets.modes import apply_mode

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


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


def _known_keys(raw: dict, allowed: Sequence[str], path: Path, fld: str | None,
                say: str = "allowed") -> None:
    """A ``TargetError`` naming the first key of ``raw`` (sorted) not in ``allowed`` (under
    ``fld``); the message lists ``allowed`` in its order after ``say``."""
    extra = sorted(set(raw) - set(allowed))
    if extra:
        raise TargetError(f"unknown key; {say}: {', '.join(allowed)}", path=path,
                          field=f"{fld}.{extra[0]}" if fld else extra[0])


def _text(table: dict, key: str, path: Path, fld: str, required: bool = False) -> str | None:
    """``table[key]``, a non-empty string; None where it is not given (a ``TargetError``
    where it is ``required``)."""
    if required and key not in table:
        raise TargetError("missing", path=path, field=f"{fld}.{key}")
    value = table.get(key)
    if (required or value is not None) and (not isinstance(value, str) or not value.strip()):
        raise TargetError("must be a non-empty string", path=path, field=f"{fld}.{key}")
    return value


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


def _str_list(data: dict, key: str, path: Path, required: bool = True) -> tuple[str, ...]:
    v = data.get(key)
    if v is None:
        if not required:
            return ()
        raise TargetError("missing", path=path, field=key)
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise TargetError("must be a list of non-empty strings", path=path, field=key)
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
        _known_keys(table, sorted(PROCESSOR_KEYS), path, fld)
        kind = table.get("kind")
        if kind is None:
            raise TargetError("missing", path=path, field=f"{fld}.kind")
        if kind not in PROCESSOR_KINDS:
            raise TargetError(f"{kind!r} is not one of {', '.join(PROCESSOR_KINDS)}", path=path,
                              field=f"{fld}.kind")
        name = _text(table, "name", path, fld, required=True)
        if "cores" not in table:
            raise TargetError("missing", path=path, field=f"{fld}.cores")
        cores = _quantity(table["cores"], path, f"{fld}.cores", "count")
        freq = (_quantity(table["frequency"], path, f"{fld}.frequency", "Hz")
                if "frequency" in table else None)
        bw = (_quantity(table["bandwidth"], path, f"{fld}.bandwidth", "B/s")
              if "bandwidth" in table else None)
        peak = _peak_table(table.get("peak"), path, f"{fld}.peak")
        apis = _str_list({f"{fld}.apis": table.get("apis")}, f"{fld}.apis", path,
                         required=False)
        out[device] = Processor(device=device, kind=kind, name=name, cores=cores,
                                peak_compute=peak, frequency=freq, bandwidth=bw, apis=apis)
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
    _known_keys(raw, sorted(allowed), path, fld, "a mode may change")
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
    _known_keys(raw, sorted(MODE_KEYS), path, fld)
    desc = raw.get("description")
    if not isinstance(desc, str) or not desc.strip():
        raise TargetError("missing: a non-empty string saying what the mode is and how it "
                          "is set", path=path, field=f"{fld}.description")
    processor, title = _text(raw, "processor", path, fld), _text(raw, "name", path, fld)
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
        _known_keys(table, sorted({"name", "peak", *MODE_PROCESSOR_FIGURES}), path, pfld,
                    "a mode may change")
        pname = _text(table, "name", path, pfld)
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


def target_from_dict(data: dict[str, Any], *, target_id: str, path: Path,
                     sha256: str | None = None, is_host: bool = False) -> Target:
    """Validate a parsed descriptor and build a :class:`Target`."""
    _known_keys(data, sorted(TOP_KEYS), path, None)
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
        _known_keys(raw, sorted(set(spec) | ({"peak"} if section == "compute" else set())),
                    path, section)
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
    _known_keys(s, list(STRATEGY_KEYS), path, "strategy")
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
        big_cores_figure=big, apis=_str_list(data, "apis", path, required=False),
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

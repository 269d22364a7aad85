"""The target registry: descriptor files (one per device, file name = id) plus ``host``.

Search order for an id: the user's folder (``targets_dir`` or ``$EDGEPROF_TARGETS_DIR``),
then folders/files registered by plugins, then the built-in ``data/`` folder. ``host`` is
detected and calibrated on this machine (``edgeprof.targets.host``), ``host_gpu`` is this
machine's CUDA GPU, likewise (``edgeprof.targets.host_gpu``; what ``--device cuda`` runs on).

A descriptor's modes (``[modes.<name>]``) are named ``<id>:<mode>`` wherever a target is
accepted: ``get("jetson_orin_nano:super")`` is the base target with the mode applied
(:func:`edgeprof.targets.schema.apply_mode`); an unknown mode is an
:class:`~edgeprof.core.errors.UnknownNameError` naming the target's modes. ``host`` has none.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgeprof.core.errors import TargetError, UnknownNameError
from edgeprof.targets.schema import (Mode, Quantity, Strategy, Target, apply_mode,
                                     load_target_file)

BUILTIN_DIR = Path(__file__).parent / "data"
ENV_DIR = "EDGEPROF_TARGETS_DIR"
HOST_ID = "host"
HOST_GPU_ID = "host_gpu"
MODE_SEP = ":"


def _files_in(source: Path) -> list[Path]:
    if source.is_dir():
        return sorted(source.glob("*.toml"))
    if source.suffix == ".toml":
        if not source.is_file():
            raise TargetError("target file does not exist", path=source)
        return [source]
    raise TargetError("not a .toml file or a folder of them", path=source)


class TargetRegistry:
    """Finds descriptor files by id and loads them (validated) on demand."""

    def __init__(self, targets_dir: str | os.PathLike | None = None,
                 plugin_sources: list[Path] | None = None):
        user_dir = targets_dir or os.environ.get(ENV_DIR)
        self.sources: list[Path] = []
        if user_dir:
            p = Path(user_dir)
            if not p.is_dir():
                raise TargetError("targets folder does not exist", path=p)
            self.sources.append(p)
        self.sources.extend(plugin_sources or [])
        self.sources.append(BUILTIN_DIR)
        self._files: dict[str, Path] = {}
        for source in self.sources:
            for f in _files_in(source):
                self._files.setdefault(f.stem, f)  # first found wins: user, plugins, built-in
        self._cache: dict[str, Target] = {}

    def ids(self) -> list[str]:
        return sorted({*self._files, HOST_ID, HOST_GPU_ID})

    def path_of(self, target_id: str) -> Path | None:
        return self._files.get(target_id)

    def get(self, target_id: str, *, recalibrate: bool = False) -> Target:
        """The target ``target_id``, or ``<id>:<mode>`` for one of its modes."""
        if MODE_SEP in target_id:
            return self._get_mode(target_id)
        if target_id == HOST_ID:
            from edgeprof.targets.host import host_target

            return host_target(recalibrate=recalibrate)
        if target_id == HOST_GPU_ID:
            from edgeprof.targets.host_gpu import host_gpu_target

            return host_gpu_target(recalibrate=recalibrate)
        if target_id not in self._files:
            raise UnknownNameError("target", target_id, self.ids(),
                                   "Run 'edgeprof targets' to list them")
        if target_id not in self._cache:
            self._cache[target_id] = load_target_file(self._files[target_id])
        return self._cache[target_id]

    def _get_mode(self, target_id: str) -> Target:
        base_id, _, mode = target_id.partition(MODE_SEP)
        if base_id in (HOST_ID, HOST_GPU_ID):
            raise UnknownNameError("mode", target_id, [],
                                   f"'{base_id}' is this machine, detected and calibrated: it "
                                   "has no modes")
        if target_id not in self._cache:
            base = self.get(base_id)  # an unknown id is an unknown target
            if not mode:
                raise UnknownNameError("mode", target_id,
                                       [f"{base_id}{MODE_SEP}{m}" for m in base.modes],
                                       "Give the mode after the colon (TARGET:MODE)")
            self._cache[target_id] = apply_mode(base, mode)
        return self._cache[target_id]

    def all(self, *, include_host: bool = False) -> list[Target]:
        out = [self.get(i) for i in sorted(self._files)]
        if include_host:
            out.append(self.get(HOST_ID))
        return out


def get_target_registry(targets_dir: str | os.PathLike | None = None,
                        plugins_file: str | os.PathLike | None = None) -> TargetRegistry:
    from edgeprof.core.plugins import get_registry

    reg = get_registry(plugins_file)
    return TargetRegistry(targets_dir, [p for p, _ in reg.target_sources])


def get_target(target_id: str, **kwargs) -> Target:
    """Load the target called ``target_id`` (``host`` is detected on this machine)."""
    recalibrate = kwargs.pop("recalibrate", False)
    return get_target_registry(**kwargs).get(target_id, recalibrate=recalibrate)


__all__ = ["Mode", "Quantity", "Strategy", "Target", "TargetRegistry", "apply_mode",
           "get_target", "get_target_registry", "load_target_file"]

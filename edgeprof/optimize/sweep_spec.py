"""The sweep file (``SWEEP.toml``, its format in :mod:`edgeprof.optimize.sweep`): its keys,
its validation (:func:`load_sweep`: every mistake a ConfigError naming the field) into a
:class:`SweepSpec`, and the jobs the grid expands to (:class:`Job`, of either workload)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.backend import DEVICE_PATTERN, DEVICE_WORDS, RunConfig
from edgeprof.core.errors import ConfigError, EdgeprofError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOP_KEYS = {"models", "targets", "backends", "precisions", "batch_sizes", "store", "out", "run",
            "generate"}
#: the ``[generate]`` table: key -> (item type, is a list, required)
GEN_KEYS: dict[str, tuple[type, bool, bool]] = {
    "models": (str, True, True), "backends": (str, True, True), "formats": (str, True, True),
    "targets": (str, True, False), "threads": (int, True, False),
    "prompt_tokens": (int, True, False), "gen_tokens": (int, True, False),
    "depths": (int, True, False), "repetitions": (int, False, False),
    "warmup": (int, False, False)}
RUN_KEYS = {"runs": int, "min_time": float, "max_time": float, "warmup": int, "threads": int,
            "timeout": float, "retries": int, "no_board_wait": float, "device": str}


# ------------------------------------------------------------------------- the file
@dataclass
class SweepSpec:
    path: Path
    models: list[str]
    targets: list[str]
    backends: list[str]
    precisions: list[str]
    batch_sizes: list[int | None]
    store: Path
    out: Path
    run: dict[str, Any] = field(default_factory=dict)
    handles: dict[str, Any] = field(default_factory=dict, repr=False)
    generate: GenerateGrid | None = None

    def config(self, precision: str, batch_size: int) -> RunConfig:
        r = self.run
        return RunConfig(precision=precision, batch_size=batch_size, threads=r.get("threads"),
                         device=r.get("device", "cpu"), warmup=r.get("warmup"), runs=r.get("runs"),
                         min_time_s=r.get("min_time"), max_time_s=r.get("max_time"),
                         timeout_s=r.get("timeout"))

    def settings(self) -> dict[str, Any]:
        """What a resumed sweep must share with the store's first run."""
        out = {k: v for k, v in sorted(self.run.items()) if k not in ("retries",
                                                                      "no_board_wait")}
        if self.generate is not None:  # only then: a tensor sweep's store keeps its settings
            out["generate"] = {"repetitions": self.generate.repetitions,
                               "warmup": self.generate.warmup}
        return out

    def jobs(self) -> list[Job]:
        out = [Job(m, t, b, p, "tensor", {"batch_size": bs}) for m in self.models
               for bs in self.batch_sizes for t in self.targets for b in self.backends
               for p in self.precisions]
        if self.generate is not None:
            out.extend(self.generate.jobs(self.run.get("threads")))
        return out


#: each workload's job options, in the order its key writes them: (name, the key's prefix,
#: the key's word for None). A tensor job's batch size (None: the model's own); a generative
#: job's llama-bench test shape (threads None: the machine's physical cores)
WORKLOAD_OPTIONS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "tensor": (("batch_size", "b", "model"),),
    "generate": (("threads", "t", "auto"), ("prompt_tokens", "pp", ""), ("gen_tokens", "tg", ""),
                 ("depth", "d", ""))}


@dataclass(frozen=True)
class Job:
    """One job of the grid: ``model`` on ``target`` by ``backend`` at ``precision`` (a
    generative job's format: the store's precision column), with its ``workload``'s options
    (:data:`WORKLOAD_OPTIONS`; given as a mapping, kept as a tuple of pairs in that order)."""

    model: str
    target: str
    backend: str
    precision: str
    workload: str = "tensor"
    options: Any = ()

    def __post_init__(self) -> None:
        given, names = dict(self.options), [n for n, _, _ in WORKLOAD_OPTIONS[self.workload]]
        if set(given) - set(names):
            raise ValueError(f"a {self.workload} job's options are {names}, not {sorted(given)}")
        object.__setattr__(self, "options", tuple((n, given.get(n)) for n in names))

    @property
    def opts(self) -> dict[str, Any]:
        return dict(self.options)

    @property
    def batch_size(self) -> int | None:
        """The store's batch_size column (a generative job has none)."""
        return self.opts.get("batch_size")

    @property
    def key(self) -> str:
        """The job's unique key: its coordinates, then each option (``|b4``, ``|t2|pp512``)."""
        shape = (f"{prefix}{none if v is None else v}" for (_, prefix, none), (_, v)
                 in zip(WORKLOAD_OPTIONS[self.workload], self.options))
        return "|".join((self.model, self.target, self.backend, self.precision, *shape))


@dataclass
class GenerateGrid:
    """The ``[generate]`` table, validated: ``pairs`` are the (backend, format) pairs that
    run (each format on the listed backends that make it)."""

    models: list[str]
    targets: list[str]
    pairs: list[tuple[str, str]]
    threads: list[int | None]
    prompt_tokens: list[int]
    gen_tokens: list[int]
    depths: list[int]
    repetitions: int = 5
    warmup: int = 1
    llms: dict[str, Any] = field(default_factory=dict, repr=False)  # model -> LLMModel
    classes: dict[str, type] = field(default_factory=dict, repr=False)

    def jobs(self, run_threads: int | None = None) -> list[Job]:
        threads = self.threads if self.threads != [None] else [run_threads]
        return [Job(m, t, b, f, "generate", {"threads": th, "prompt_tokens": p,
                                             "gen_tokens": g, "depth": d})
                for m in self.models for t in self.targets for b, f in self.pairs
                for th in threads for p in self.prompt_tokens for g in self.gen_tokens
                for d in self.depths]

    def config(self, job: Job, device: str = "cpu") -> Any:
        from edgeprof.core.llm import GenerationConfig

        o = job.opts
        return GenerationConfig(prompt_tokens=o["prompt_tokens"], gen_tokens=o["gen_tokens"],
                                depths=(o["depth"],), repetitions=self.repetitions,
                                warmup=self.warmup, threads=o["threads"], device=device)


def _list(raw: dict, key: str, path: Path, kind: type, *, required: bool = True,
          prefix: str = "") -> list:
    name = prefix + key
    if key not in raw:
        if required:
            raise ConfigError(f"missing; give a list of {key}", path=path, field=name)
        return []
    v = raw[key]
    if isinstance(v, (str, int)) and not isinstance(v, bool):
        v = [v]
    if not isinstance(v, list):
        raise ConfigError(f"must be a list, got {type(v).__name__}", path=path, field=name)
    if not v:
        raise ConfigError("is empty: the grid would have no jobs", path=path, field=name)
    for item in v:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise ConfigError(f"items must be {kind.__name__}s, got {item!r}", path=path,
                              field=name)
    if len(set(v)) != len(v):
        raise ConfigError("lists an item twice", path=path, field=name)
    return list(v)


def _known(path: Path, field_: str, check: Callable[[str], Any], items: list[str]) -> None:
    """Each item through ``check`` (a lookup): its EdgeprofError, a ConfigError naming field_."""
    for item in items:
        try:
            check(item)
        except EdgeprofError as e:
            raise ConfigError(str(e), path=path, field=field_) from None


def _load_generate(table: Any, path: Path, top_targets: list[str], run_threads: Any, reg,
                   check_target: Callable[[str], Any]) -> GenerateGrid:
    """The ``[generate]`` table: every mistake a ConfigError naming ``generate.KEY``."""
    from edgeprof.core.workload import workload_of
    from edgeprof.zoo.llm import resolve_llm

    if not isinstance(table, dict):
        raise ConfigError("must be a table ([generate])", path=path, field="generate")
    unknown = sorted(set(table) - set(GEN_KEYS))
    if unknown:
        raise ConfigError(f"unknown key; known: {', '.join(sorted(GEN_KEYS))}", path=path,
                          field=f"generate.{unknown[0]}")
    got: dict[str, Any] = {}
    for key, (kind, is_list, required) in GEN_KEYS.items():
        if is_list:
            got[key] = _list(table, key, path, kind, required=required, prefix="generate.")
        elif key in table:
            v = table[key]
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"must be an integer, got {v!r}", path=path,
                                  field=f"generate.{key}")
            got[key] = v
    for key, least in (("threads", 1), ("prompt_tokens", 1), ("gen_tokens", 1), ("depths", 0),
                       ("repetitions", 1), ("warmup", 0)):
        vals = got.get(key)
        vals = vals if isinstance(vals, list) else [] if vals is None else [vals]
        bad = [v for v in vals if v < least]
        if bad:
            raise ConfigError(f"must be {'positive' if least else '0 or more'}, got {bad[0]!r}",
                              path=path, field=f"generate.{key}")
    targets = got["targets"] or top_targets
    if not targets:
        raise ConfigError("missing; give a list of targets (top level or in [generate])",
                          path=path, field="targets")
    _known(path, "generate.targets", check_target, got["targets"])
    classes: dict[str, type] = {}
    for b in got["backends"]:
        try:
            cls = reg.backend(b)
        except EdgeprofError as e:
            raise ConfigError(str(e), path=path, field="generate.backends") from None
        generative = reg.backends_for("generate")
        if b not in generative:
            raise ConfigError(f"backend '{b}' runs {workload_of(cls, reg).describe}, not "
                              "generative ones; generative backends: "
                              f"{', '.join(generative) or '(none)'}", path=path,
                              field="generate.backends")
        classes[b] = cls
    pairs = []
    for fmt in got["formats"]:
        makers = [b for b, cls in classes.items() if fmt in tuple(cls.formats)]
        if not makers:
            made = "; ".join(f"{b} makes {', '.join(cls.formats)}" for b, cls in classes.items())
            raise ConfigError(f"no backend listed makes format '{fmt}' ({made})", path=path,
                              field="generate.formats")
        pairs.extend((b, fmt) for b in makers)
    llms = {}
    for m in got["models"]:
        spec = m
        if not m.startswith("llm:") and not Path(m).expanduser().is_absolute():
            spec = str(path.parent / m)  # a .gguf file or an HF folder beside the sweep file
        try:
            llms[m] = resolve_llm(spec)
        except EdgeprofError as e:
            raise ConfigError(f"model '{m}' cannot be read: {e}", path=path,
                              field="generate.models") from None
    threads: list[int | None] = got["threads"] or [None]
    return GenerateGrid(models=got["models"], targets=targets, pairs=pairs, threads=threads,
                        prompt_tokens=got["prompt_tokens"] or [512],
                        gen_tokens=got["gen_tokens"] or [128], depths=got["depths"] or [0],
                        repetitions=got.get("repetitions", 5), warmup=got.get("warmup", 1),
                        llms=llms, classes=classes)


def load_sweep(path: str | os.PathLike, *, overrides: dict[str, Any] | None = None,
               plugins=None, targets_dir=None) -> SweepSpec:
    """Read and validate SWEEP.toml; every mistake is a ConfigError naming the field."""
    from edgeprof.core.models import resolve_model
    from edgeprof.core.plugins import get_registry
    from edgeprof.core.precision import get_precision
    from edgeprof.targets import get_target_registry

    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("sweep file does not exist", path=path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read: {e}", path=path) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML: {e}", path=path) from None
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise ConfigError(f"unknown key; known: {', '.join(sorted(TOP_KEYS))}", path=path,
                          field=unknown[0])
    base = path.parent
    # a tensor grid unless the file holds only a [generate] table
    tensor = "generate" not in raw or any(k in raw for k in ("models", "backends",
                                                             "precisions", "batch_sizes"))
    models = _list(raw, "models", path, str, required=tensor)
    targets = _list(raw, "targets", path, str, required=tensor)
    backends = _list(raw, "backends", path, str, required=tensor)
    precisions = _list(raw, "precisions", path, str, required=tensor)
    sizes = _list(raw, "batch_sizes", path, int, required=False)
    from edgeprof.core.kinds import GENERATIVE, model_kind

    for m in models:
        if model_kind(m) == GENERATIVE:
            raise ConfigError(f"'{m}' is a generative model: list it under [generate] models "
                              "(with its backends and formats)", path=path, field="models")
    if any(b <= 0 for b in sizes):
        raise ConfigError("batch sizes must be positive", path=path, field="batch_sizes")
    run = raw.get("run", {})
    if not isinstance(run, dict):
        raise ConfigError("must be a table ([run])", path=path, field="run")
    run = dict(run)
    run.update({k: v for k, v in (overrides or {}).items() if v is not None})
    for k, v in run.items():
        if k not in RUN_KEYS:
            raise ConfigError(f"unknown key; known: {', '.join(sorted(RUN_KEYS))}", path=path,
                              field=f"run.{k}")
        kind = RUN_KEYS[k]
        if kind is str:  # device
            if not isinstance(v, str) or not re.fullmatch(DEVICE_PATTERN, v):
                raise ConfigError(f"must be {DEVICE_WORDS}, got {v!r}", path=path,
                                  field=f"run.{k}")
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (
                kind is int and not isinstance(v, int)):
            raise ConfigError(f"must be a{'n integer' if kind is int else ' number'}, got "
                              f"{v!r}", path=path, field=f"run.{k}")
        if v < 0 or (v == 0 and k not in ("retries",)):
            raise ConfigError(f"must be positive, got {v!r}", path=path, field=f"run.{k}")
    reg = get_registry(plugins)
    treg = get_target_registry(targets_dir, plugins)
    _known(path, "targets", lambda t: t in treg.ids() or treg.get(t), targets)
    _known(path, "backends", reg.backend, backends)
    _known(path, "precisions", get_precision, precisions)
    handles = {}
    for m in models:
        spec = m
        if not m.startswith("builtin:") and not Path(m).is_absolute():
            cand = base / m.split(":", 1)[0]
            if cand.exists():
                spec = str(base / m)
        try:
            handles[m] = resolve_model(spec, registry=reg)
        except EdgeprofError as e:
            raise ConfigError(f"model '{m}' cannot be read: {e}", path=path,
                              field="models") from None
        except Exception as e:  # a factory's own failure  # noqa: BLE001
            raise ConfigError(f"model '{m}' cannot be read: {type(e).__name__}: {e}",
                              path=path, field="models") from None
    for key in ("store", "out"):
        if key in raw and not isinstance(raw[key], str):
            raise ConfigError("must be a path string", path=path, field=key)
    generate = None
    if "generate" in raw:
        generate = _load_generate(raw["generate"], path, targets, run.get("threads"), reg,
                                  lambda t: t in treg.ids() or treg.get(t))
        if str(run.get("device", "")).startswith("cuda:"):
            raise ConfigError(f"{run['device']!r}: the generative runtimes name no CUDA index; "
                              "use cuda (or sweep the tensor and generative jobs apart)",
                              path=path, field="run.device")
    store = base / raw.get("store", f"{path.stem}.sqlite")
    out = base / raw.get("out", f"{path.stem}_out")
    return SweepSpec(path, models, targets, backends, precisions, sizes or [None], store, out,
                     run, handles, generate)


__all__ = ["GEN_KEYS", "RUN_KEYS", "TOP_KEYS", "WORKLOAD_OPTIONS", "GenerateGrid", "Job",
           "SweepSpec", "load_sweep"]

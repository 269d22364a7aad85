"""The generative report: a generative ``profile.json`` (or ``estimate --json``) as a typed
object, with its figures as attributes instead of keys to search for.

:class:`GenerativeReport` is what ``profile`` and ``estimate`` return for a generative model
(made by :meth:`GenerativeReport.create`; its ``to_dict`` is the document, ``schema``
``edgeprof.llm/1``, ``schema_version`` "1.0", validated by the generative branch of
``edgeprof/schema/profile.schema.json``), the generative member of the
profile-report family (:mod:`~edgeprof.profilers.report.family`): ``ProfileReport.from_dict``
reads one, ``to_dict`` gives it back unchanged (keys this version does not know are kept),
``save`` writes the output folder atomically (profile.json, llm_bench.csv, estimate.csv,
report.html).

* ``report.runs`` — :class:`GenerativeRun`, one per measured (backend, format, depth), whose
  ``prefill_tokens_per_s``, ``decode_tokens_per_s``, ``ttft_ms`` and ``tpot_ms`` are
  :class:`RepetitionStats`: the summary the harness wrote (median, mean, stddev, min, max;
  TPOT's p50/p90 over every inter-token gap) plus one **sample per timed repetition**,
  derived from the record's raw times (``samples``: ``prefill_s``, ``ttft_s``, ``decode_s``)
  with the harness's definitions (``profilers/measure/generate.py``):

  - prefill tok/s = ``n_prompt / prefill_s``;
  - decode tok/s = ``decode_tokens / decode_s``, ``decode_tokens = n_gen - 1`` (the rate is
    taken between the first and the last generated token; ``1`` when ``n_gen`` is 1);
  - TTFT ms = ``1000 * ttft_s``;
  - TPOT ms = ``1000 * decode_s / decode_tokens``: the repetition's mean inter-token time
    (the written p50/p90 are over all gaps of all repetitions; these are per repetition).

* ``report.estimates`` / ``report.predictions`` — :class:`GenerativeEstimate` /
  :class:`GenerativePrediction`, whose figures are :class:`FigureValue` (value, unit,
  provenance and, for a prediction, its interval ``low``/``high``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from edgeprof.core.llm import GenerationConfig, GenerationRecord, LLMModel
from edgeprof.core.results import clean
from edgeprof.profilers.report.family import ProfileReport
from edgeprof.profilers.report.llm_payload import SCHEMA, SCHEMA_VERSION, figure, find_figure

#: the payload's ``kind``
KIND = "llm"
#: top-level keys in the order the document is written (``command_line``: the CLI command
#: that ran, as typed, kept with the keys this version reads as they are)
_TOP = ("schema", "schema_version", "kind", "command", "command_line", "edgeprof_version",
        "created_utc", "model", "target", "device", "config", "host", "estimates",
        "predictions", "runs", "recommendation", "notes")
#: the keys read into the report's fields (the rest, ``command_line`` included, in ``extra``)
_FIELDS = tuple(k for k in _TOP if k != "command_line")
#: the per-stage figures a run, an estimate and a prediction all carry: name -> (unit,
#: higher is better)
STAGE_FIGURES: dict[str, tuple[str, bool]] = {
    "prefill_tokens_per_s": ("tokens/s", True),
    "decode_tokens_per_s": ("tokens/s", True),
    "ttft_ms": ("ms", False),
    "tpot_ms": ("ms", False),
}


# ------------------------------------------------------------------------------ figures
@dataclass(frozen=True)
class RepetitionStats:
    """A measured figure over the timed repetitions: the summary the harness wrote and one
    sample per repetition (``samples``; empty when the record has no raw times).

    ``median``/``mean``/``stddev``/``min``/``max`` are the harness's; TPOT has ``p50``/``p90``
    (over every inter-token gap) and no stddev/min/max. ``higher_is_better``: True for rates."""

    unit: str
    higher_is_better: bool
    samples: tuple[float, ...] = ()
    median: float | None = None
    mean: float | None = None
    stddev: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None

    @property
    def n(self) -> int:
        return len(self.samples)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("median", "mean", "stddev", "min", "max", "p50", "p90")
             if getattr(self, k) is not None}
        return {**d, "samples": list(self.samples), "unit": self.unit}


@dataclass(frozen=True)
class FigureValue:
    """A figure of an estimate or a prediction: ``{"value", "unit", "provenance", ...}``;
    ``low``/``high`` the interval of a predicted one, ``extra`` the rest (basis, calibration)."""

    name: str
    value: float | None
    unit: str | None = None
    provenance: str | None = None
    low: float | None = None
    high: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> FigureValue:
        rest = {k: v for k, v in d.items()
                if k not in ("value", "unit", "provenance", "low", "high")}
        return cls(name, d.get("value"), d.get("unit"), d.get("provenance"), d.get("low"),
                   d.get("high"), rest)


class _Figures:
    """What an estimate and a prediction share: their labels and figure lookup."""

    data: dict[str, Any]

    @property
    def backend(self) -> str | None:
        return self.data.get("backend")

    @property
    def format(self) -> str | None:
        return self.data.get("format")

    @property
    def depth(self) -> int:
        return int(self.data.get("depth") or 0)

    @property
    def target(self) -> str | None:
        t = self.data.get("target")
        return t.get("id") if isinstance(t, Mapping) else t

    @property
    def key(self) -> tuple[str | None, str | None, int]:
        return self.backend, self.format, self.depth

    def figure(self, name: str) -> FigureValue | None:
        """The figure ``name`` (None when this entry has none)."""
        f = find_figure(self.data, name)
        return None if f is None else FigureValue.from_dict(name, f)

    @property
    def prefill_tokens_per_s(self) -> FigureValue | None:
        return self.figure("prefill_tokens_per_s")

    @property
    def decode_tokens_per_s(self) -> FigureValue | None:
        return self.figure("decode_tokens_per_s")

    @property
    def ttft_ms(self) -> FigureValue | None:
        return self.figure("ttft_ms")

    @property
    def tpot_ms(self) -> FigureValue | None:
        return self.figure("tpot_ms")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class GenerativeEstimate(_Figures):
    """One (backend, format, depth) estimate: analytic bytes, roofline stage figures, the
    target's fit. ``data`` is the estimate's dict as written."""

    data: dict[str, Any]

    @property
    def weight_bytes(self) -> FigureValue | None:
        return self.figure("weight_bytes")

    @property
    def file_bytes(self) -> FigureValue | None:
        return self.figure("file_bytes")

    @property
    def kv_cache_bytes_per_token(self) -> FigureValue | None:
        return self.figure("kv_cache_bytes_per_token")

    @property
    def decode_bytes_per_token(self) -> FigureValue | None:
        return self.figure("decode_bytes_per_token")

    @property
    def fit(self) -> dict[str, Any] | None:
        """The target's memory fit (``fits``, ``verdict``, bytes), None without a target."""
        f = self.data.get("fit")
        return dict(f) if isinstance(f, Mapping) else None

    @property
    def layers(self) -> list[dict[str, Any]]:
        return list(self.data.get("layers") or [])


@dataclass(frozen=True)
class GenerativePrediction(_Figures):
    """One (backend, format, depth) prediction for the target: each stage figure with its
    interval (``low``/``high``) and provenance (``predicted`` by a calibration, else
    ``estimated``). ``data`` is the prediction's dict as written."""

    data: dict[str, Any]

    @property
    def device(self) -> str | None:
        return self.data.get("device")

    @property
    def calibration(self) -> str | None:
        return self.data.get("calibration")


# --------------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class GenerativeRun:
    """One measured (backend, format, depth): the harness's :class:`GenerationRecord` with
    its figures typed (see the module docstring for the per-repetition samples). ``extra``
    keeps keys of the run this version does not know, so ``to_dict`` gives back what was
    read."""

    record: GenerationRecord
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GenerativeRun:
        rec = GenerationRecord.from_dict({"model": "", **d})  # backend and format: checked
        known = set(rec.to_dict())
        return cls(rec, {k: v for k, v in d.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        return {**self.record.to_dict(), **self.extra}

    # labels
    @property
    def backend(self) -> str:
        return self.record.backend

    @property
    def format(self) -> str:
        return self.record.format

    @property
    def depth(self) -> int:
        return int(self.record.n_depth)

    @property
    def key(self) -> tuple[str, str, int]:
        return self.backend, self.format, self.depth

    @property
    def device(self) -> str:
        return self.record.device

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def reason(self) -> str:
        return self.record.reason

    @property
    def ok(self) -> bool:
        return self.record.ok

    @property
    def provenance(self) -> str:
        return self.record.provenance

    @property
    def measured_on(self) -> str | None:
        """Where a board of the fleet measured it (None: this host)."""
        return self.extra.get("measured_on")

    @property
    def board(self) -> Mapping[str, Any] | None:
        """The fleet's record of the board that measured it (None: this host)."""
        b = self.extra.get("board")
        return b if isinstance(b, Mapping) else None

    def place(self, target_id: str | None) -> tuple[str, bool]:
        """Where it was measured, in words, and whether that is ``target_id`` itself (a real
        board of it: the run is then the target's measured figure; ``llm_payload.run_place``)."""
        from edgeprof.profilers.report.llm_payload import run_place

        return run_place(self.to_dict(), target_id)

    @property
    def n_prompt(self) -> int:
        return int(self.record.n_prompt)

    @property
    def n_gen(self) -> int:
        return int(self.record.n_gen)

    @property
    def n_threads(self) -> int:
        return int(self.record.n_threads)

    @property
    def repetitions(self) -> int:
        return int(self.record.repetitions)

    @property
    def decode_tokens(self) -> int:
        """Tokens each decode time covers: ``n_gen - 1`` (first to last token), 1 for one."""
        return self.n_gen - 1 if self.n_gen > 1 else 1

    # figures
    def _raw(self, name: str) -> list[float]:
        v = (self.record.samples or {}).get(name)
        return [float(x) for x in v] if isinstance(v, list) else []

    def samples(self, name: str) -> tuple[float, ...]:
        """One value of figure ``name`` (a key of :data:`STAGE_FIGURES`) per timed
        repetition, from the record's raw times; () when it has none (not ``ok``, or an
        old record)."""
        if name == "prefill_tokens_per_s":
            out = [self.n_prompt / t for t in self._raw("prefill_s") if t > 0]
        elif name == "decode_tokens_per_s":
            out = [self.decode_tokens / t for t in self._raw("decode_s") if t > 0]
        elif name == "ttft_ms":
            out = [1e3 * t for t in self._raw("ttft_s")]
        elif name == "tpot_ms":
            out = [1e3 * t / self.decode_tokens for t in self._raw("decode_s")]
        else:
            raise KeyError(f"{name!r} is not one of {', '.join(STAGE_FIGURES)}")
        return tuple(v for v in out if math.isfinite(v))

    def stats(self, name: str) -> RepetitionStats | None:
        """Figure ``name`` (a key of :data:`STAGE_FIGURES`) as :class:`RepetitionStats`; None
        when the run measured nothing."""
        unit, higher = STAGE_FIGURES[name]
        summary = getattr(self.record, name, None)
        samples = self.samples(name)
        if not summary and not samples:
            return None
        keep = {k: float(v) for k, v in (summary or {}).items()
                if k in ("median", "mean", "stddev", "min", "max", "p50", "p90")
                and isinstance(v, (int, float)) and not isinstance(v, bool)}
        return RepetitionStats(unit=unit, higher_is_better=higher, samples=samples, **keep)

    @property
    def prefill_tokens_per_s(self) -> RepetitionStats | None:
        return self.stats("prefill_tokens_per_s")

    @property
    def decode_tokens_per_s(self) -> RepetitionStats | None:
        return self.stats("decode_tokens_per_s")

    @property
    def ttft_ms(self) -> RepetitionStats | None:
        return self.stats("ttft_ms")

    @property
    def tpot_ms(self) -> RepetitionStats | None:
        return self.stats("tpot_ms")

    @property
    def load_s(self) -> float | None:
        return self.record.load_s

    @property
    def peak_rss_bytes(self) -> int | None:
        return self.record.peak_rss_bytes

    @property
    def model_size(self) -> int | None:
        return self.record.model_size


# ------------------------------------------------------------------------------- report
@dataclass
class GenerativeReport(ProfileReport):
    """A generative profile or estimate (see the module docstring): the generative member of
    the :class:`~edgeprof.profilers.report.family.ProfileReport` family (``load`` /
    ``from_dict`` there). ``model``, ``target``, ``host``, ``config`` and
    ``recommendation`` are kept as the dicts the payload holds; :attr:`generation_config`
    gives the config typed."""

    workload: ClassVar[str] = "generate"
    word: ClassVar[str] = "generative"
    comparison: ClassVar[str] = "edgeprof.profilers.report.compare_generative"

    model: dict[str, Any]
    command: str = "profile"
    target: dict[str, Any] | None = None
    device: str = "cpu"
    config: dict[str, Any] | None = None
    host: dict[str, Any] | None = None
    estimates: list[GenerativeEstimate] = field(default_factory=list)
    predictions: list[GenerativePrediction] = field(default_factory=list)
    runs: list[GenerativeRun] = field(default_factory=list)
    recommendation: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    edgeprof_version: str | None = None
    created_utc: str | None = None
    #: None for a payload written before schema_version existed (read as 1.0)
    schema_version: str | None = SCHEMA_VERSION
    schema: str = SCHEMA
    kind: str = KIND
    #: top-level keys this version does not know (kept for ``to_dict``)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, model: LLMModel, *, target: Any = None, device: str = "cpu",
               config: GenerationConfig | None = None, parameters: int | None = None,
               estimates: Sequence[Mapping[str, Any]] = (),
               predictions: Sequence[Mapping[str, Any]] = (),
               runs: Iterable[GenerationRecord | Mapping[str, Any]] = (),
               recommendation: Any = None, notes: Iterable[str] = (),
               command: str = "profile", host: Mapping[str, Any] | None = None
               ) -> GenerativeReport:
        """A new report of ``model``, stamped now with this edgeprof and the command that
        ran (``command_line``, None from Python: the page's Reproduce line); every figure
        made JSON-ready (:func:`~edgeprof.core.results.clean`), ``notes`` without repeats."""
        from edgeprof._version import __version__
        from edgeprof.core.artifact import created_utc
        from edgeprof.core.invocation import command as invocation_command

        def doc(x: Any) -> Any:
            return clean(x.to_dict() if hasattr(x, "to_dict") else x)

        m = doc(model)
        m["parameters"] = figure(parameters, "parameters", "analytic")
        return cls(
            model=m, command=command, target=doc(target), device=device, config=doc(config),
            host=doc(dict(host)) if host else None,
            estimates=[GenerativeEstimate(doc(dict(e))) for e in estimates],
            predictions=[GenerativePrediction(doc(dict(p))) for p in predictions],
            runs=[GenerativeRun.from_dict(doc(r)) for r in runs],
            recommendation=doc(recommendation),
            notes=list(dict.fromkeys(n for n in notes if n)), edgeprof_version=__version__,
            created_utc=created_utc(), extra={"command_line": invocation_command()})

    # ---------------------------------------------------------------- dict form
    @classmethod
    def _read(cls, d: Mapping[str, Any]) -> GenerativeReport:
        """The report of a document (a profile.json read back, or its dict)."""
        version = d.get("schema_version")
        return cls(
            model=dict(d.get("model") or {}), command=d.get("command") or "profile",
            target=d.get("target"), device=d.get("device") or "cpu", config=d.get("config"),
            host=d.get("host"),
            estimates=[GenerativeEstimate(dict(e)) for e in d.get("estimates") or []],
            predictions=[GenerativePrediction(dict(p)) for p in d.get("predictions") or []],
            runs=[GenerativeRun.from_dict(r) for r in d.get("runs") or []],
            recommendation=d.get("recommendation"), notes=list(d.get("notes") or []),
            edgeprof_version=d.get("edgeprof_version"), created_utc=d.get("created_utc"),
            schema_version=None if version is None else str(version),
            schema=d.get("schema") or SCHEMA, kind=d.get("kind") or KIND,
            extra={k: v for k, v in d.items() if k not in _FIELDS})

    def to_dict(self) -> dict[str, Any]:
        """The document (profile.json): its keys in :data:`_TOP`'s order, then those this
        version does not know, as they were read."""
        d: dict[str, Any] = {
            "schema": self.schema, "schema_version": self.schema_version, "kind": self.kind,
            "command": self.command, "edgeprof_version": self.edgeprof_version,
            "created_utc": self.created_utc, "model": self.model, "target": self.target,
            "device": self.device, "config": self.config, "host": self.host,
            "estimates": [e.to_dict() for e in self.estimates],
            "predictions": [p.to_dict() for p in self.predictions],
            "runs": [r.to_dict() for r in self.runs],
            "recommendation": self.recommendation, "notes": list(self.notes)}
        if self.schema_version is None:
            del d["schema_version"]
        merged = {**d, **self.extra}
        return {**{k: merged[k] for k in _TOP if k in merged}, **merged}

    def save(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write ``out_dir`` as a whole, atomically: profile.json, llm_bench.csv, estimate.csv,
        report.html (:func:`~edgeprof.profilers.report.llm_outputs.write_llm_outputs`)."""
        from edgeprof.profilers.report.llm_outputs import write_llm_outputs

        return write_llm_outputs(out_dir, self)

    # ---------------------------------------------------------------- accessors
    @property
    def model_name(self) -> str | None:
        return (self.model.get("spec") or {}).get("name")

    @property
    def target_id(self) -> str | None:
        t = self.target
        return t.get("id") if isinstance(t, Mapping) else t

    @property
    def parameters(self) -> FigureValue | None:
        p = self.model.get("parameters")
        return FigureValue.from_dict("parameters", p) if isinstance(p, Mapping) else None

    @property
    def generation_config(self) -> GenerationConfig | None:
        """The test shape (prompt/gen tokens, depths, repetitions...) typed, or None."""
        if not self.config:
            return None
        known = set(GenerationConfig.__dataclass_fields__)
        return GenerationConfig(**{k: v for k, v in self.config.items() if k in known})

    @property
    def exit_code(self) -> int:
        """0 complete (a run skipped as too big for this machine counts as complete); 3 when
        a run produced no measurement (as ``edgeprof.api.llm_exit_code``)."""
        return 3 if any(r.status not in ("ok", "skipped") for r in self.runs) else 0

    def run(self, backend: str, format: str, depth: int = 0) -> GenerativeRun | None:
        return _find(self.runs, (backend, format, depth))

    def estimate(self, backend: str, format: str, depth: int = 0) -> GenerativeEstimate | None:
        return _find(self.estimates, (backend, format, depth))

    def prediction(self, backend: str, format: str,
                   depth: int = 0) -> GenerativePrediction | None:
        return _find(self.predictions, (backend, format, depth))


def _find(items: Sequence[Any], key: tuple[Any, ...]) -> Any:
    return next((i for i in items if i.key == key), None)


__all__ = ["KIND", "STAGE_FIGURES", "FigureValue", "GenerativeEstimate", "GenerativePrediction",
           "GenerativeReport", "GenerativeRun", "RepetitionStats"]

"""The tensor member of the profile-report family: :class:`TensorReport` (a tensor model's
profile: its estimate per layer, one :class:`ProfileRun` per backend x precision with its
summary against the target), its profile.json (``to_dict`` / ``ProfileReport.from_dict``)
and its artifacts (``save``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from edgeprof.core.artifact import created_utc
from edgeprof._version import __version__
from edgeprof.core.models import ModelHandle
from edgeprof.core.results import BenchmarkResult, Estimate, Summary, WarningRecord, clean
from edgeprof.profilers.report.family import ProfileReport

#: the tensor profile.json's ``schema_version``
SCHEMA_VERSION = "1.0"


@dataclass
class ProfileRun:
    """One backend x precision of a profile: the measurement (``benchmark``, the
    :data:`~edgeprof.core.results.RunRecord` that ``measure()`` returned) and its summary for
    the target."""

    backend: str
    requested_precision: str
    benchmark: BenchmarkResult
    summary: Summary | None = None
    host_summary: Summary | None = None
    explicit: bool = True  # named by the user (counts for the exit status)
    operators: Any = None  # DataFrame: the runtime's per-operator profile joined to the estimate
    trace_file: Path | None = None  # Chrome trace written by the runtime's profiler

    @property
    def status(self) -> str:
        return self.benchmark.status

    @property
    def executed_precision(self) -> str | None:
        """The precision that actually ran (``to_dict()``'s ``executed_precision``)."""
        return self.benchmark.executed_precision

    def to_dict(self) -> dict[str, Any]:
        b = self.benchmark
        return clean({
            "backend": self.backend, "requested_precision": self.requested_precision,
            "executed_precision": b.executed_precision, "status": b.status, "reason": b.reason,
            "explicit": self.explicit,
            "provenance": {"benchmark": "measured", "target_figures": (
                self.summary.figures["latency_ms"].provenance if self.summary else None),
                "measured_on": measured_on_line(b), "board": (b.extra or {}).get("fleet")},
            "benchmark": b.to_dict(),
            "summary": self.summary.to_dict() if self.summary else None,
            "host_summary": self.host_summary.to_dict() if self.host_summary else None,
            "operators": (self.operators.to_dict(orient="records")
                          if self.operators is not None else None),
        })

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProfileRun:
        """A run from its ``to_dict()`` form (profile.json's ``runs[]``); the Chrome trace
        stays where ``save`` wrote it (``trace_<backend>_<precision>.json``), not loaded."""
        operators = d.get("operators")
        if operators is not None:
            import pandas as pd

            operators = pd.DataFrame.from_records(operators)
        summary, host_summary = d.get("summary"), d.get("host_summary")
        return cls(backend=d["backend"], requested_precision=d["requested_precision"],
                   benchmark=BenchmarkResult.from_dict(d["benchmark"]),
                   summary=Summary.from_dict(summary) if summary is not None else None,
                   host_summary=(Summary.from_dict(host_summary)
                                 if host_summary is not None else None),
                   explicit=bool(d.get("explicit", True)), operators=operators)


@dataclass
class TensorReport(ProfileReport):
    """Everything ``edgeprof profile`` produces for a tensor model; ``to_dict()`` is its
    profile.json. A member of the :class:`~edgeprof.profilers.report.family.ProfileReport`
    family (``load`` / ``from_dict`` there)."""

    workload: ClassVar[str] = "tensor"
    word: ClassVar[str] = "tensor"
    comparison: ClassVar[str] = "edgeprof.profilers.report.compare_tensor"
    comparison_page: ClassVar[bool] = True

    model: ModelHandle
    target: Any
    host: dict[str, Any]
    estimate: Estimate
    runs: list[ProfileRun]
    request: dict[str, Any]
    warnings: list[WarningRecord] = field(default_factory=list)
    host_target: Any = None
    created_utc: str = field(default_factory=created_utc)
    #: the temporary folder holding the runs' Chrome traces (``trace=True``) until ``save``
    #: copies them; removed when the report is dropped (or at exit)
    trace_folder: Any = field(default=None, repr=False, compare=False)
    #: the document's versions: this edgeprof's for a report made here, the file's for
    #: one loaded (``from_dict`` / ``load``)
    schema_version: str = SCHEMA_VERSION
    edgeprof_version: str = __version__
    #: top-level keys of a loaded document this version does not know (kept by ``to_dict``)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def exit_code(self) -> int:
        """0 complete; 3 partial: a run the user named produced no measurement, or any run
        that should have worked failed (unavailable/unsupported rows under ``all`` don't
        count)."""
        return 3 if any((r.explicit and r.status != "ok") or r.status == "failed"
                        for r in self.runs) else 0

    def to_dict(self) -> dict[str, Any]:
        warnings = list(self.warnings)
        for r in self.runs:
            warnings.extend(r.benchmark.warnings)
            if r.summary:
                warnings.extend(r.summary.warnings)
        return clean({
            "schema_version": self.schema_version,
            "edgeprof_version": self.edgeprof_version,
            "created_utc": self.created_utc,
            "host": self.host,
            "target": self.target.to_dict(),
            "model": self.model.to_dict(),
            "request": self.request,
            "estimate": self.estimate.to_dict(),
            "runs": [r.to_dict() for r in self.runs],
            "warnings": [w.to_dict() for w in warnings],
            **self.extra,
        })

    @classmethod
    def _read(cls, d: dict[str, Any]) -> TensorReport:
        """The report of a tensor profile.json (``to_dict()``'s form): ``from_dict(d).to_dict()
        == d``. The estimate, runs, summaries and warnings come back typed; the model is a
        :class:`~edgeprof.core.models.ModelHandle` without its module (nothing is imported or
        re-resolved) and the target the descriptor as the document recorded it
        (:class:`TargetRecord`: ``id``, ``name``, ``is_host``, ``to_dict()``), not looked up
        again."""
        from edgeprof.core.errors import ConfigError

        missing = [k for k in ("target", "model", "estimate", "runs") if k not in d]
        if missing:
            raise ConfigError(f"not an edgeprof profile.json: no {', '.join(missing)}")
        runs = [ProfileRun.from_dict(r) for r in d.get("runs") or []]
        # to_dict gathers the runs' warnings after the report's own: keep only the own ones
        derived = [w.to_dict() for r in runs for w in
                   (*r.benchmark.warnings, *(r.summary.warnings if r.summary else ()))]
        top = list(d.get("warnings") or [])
        own = top[:len(top) - len(derived)] \
            if derived and top[len(top) - len(derived):] == derived else top
        known = {"schema_version", "edgeprof_version", "created_utc", "host", "target", "model",
                 "request", "estimate", "runs", "warnings"}
        return cls(model=handle_from_dict(d["model"]), target=TargetRecord(dict(d["target"])),
                   host=d.get("host"), estimate=Estimate.from_dict(d["estimate"]), runs=runs,
                   request=d.get("request") or {},
                   warnings=[WarningRecord(w["code"], w["message"]) for w in own],
                   created_utc=d.get("created_utc"),
                   schema_version=d.get("schema_version", SCHEMA_VERSION),
                   edgeprof_version=d.get("edgeprof_version", __version__),
                   extra={k: v for k, v in d.items() if k not in known})

    def save(self, out_dir: str | os.PathLike, *, stream_rate_fps: float | None = None) -> list[Path]:
        """Write every artifact into ``out_dir`` (profile.json, the CSVs, the plots,
        report.html); files appear only when all are written. ``stream_rate_fps``: default
        the request's. :meth:`load` reads the folder back."""
        from edgeprof.core.io import publish_staged
        from edgeprof.profilers.report.artifacts import write_artifacts

        if stream_rate_fps is None:
            stream_rate_fps = (self.request or {}).get("stream_rate_fps")
        return publish_staged(out_dir, lambda stage: write_artifacts(
            self, stage, stream_rate_fps=stream_rate_fps))


class TargetRecord:
    """A target as a loaded profile.json recorded it (its ``to_dict()`` form): the
    attributes a report reads (``id``, ``name``, ``kind``, ``is_host`` ...) and
    ``to_dict()``. Not a :class:`~edgeprof.targets.Target`: the descriptor is not looked up
    again (it may have changed, or be another machine's ``host``)."""

    def __init__(self, data: dict[str, Any]):
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"the recorded target has no '{name}'") from None

    def __repr__(self) -> str:
        return f"TargetRecord({self._data.get('id')!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TargetRecord) and other._data == self._data

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)


def handle_from_dict(d: dict[str, Any]) -> ModelHandle:
    """A :class:`ModelHandle` from its ``to_dict()`` (nothing resolved or imported)."""
    from edgeprof.core.models import InputSpec

    return ModelHandle(spec=d["spec"], name=d["name"], format=d["format"],
                       input_specs=[InputSpec(shape=tuple(s["shape"]), dtype=s["dtype"],
                                              name=s.get("name"))
                                    for s in d.get("inputs") or []],
                       path=Path(d["path"]) if d.get("path") else None,
                       calibration=Path(d["calibration"]) if d.get("calibration") else None)


def measured_on_line(record: BenchmarkResult) -> str:
    """Where a run was measured, in words (a fleet board's line, else ``this host``)."""
    from edgeprof.profilers.measure.fleet import measured_on

    return measured_on(record) or "this host"


__all__ = ["SCHEMA_VERSION", "ProfileRun", "TargetRecord", "TensorReport", "handle_from_dict",
           "measured_on_line"]

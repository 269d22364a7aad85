"""What ``optimize`` produces: a :class:`CandidateResult` per candidate (its optimize.json
entry and its CSV row) and the :class:`OptimizeReport` (optimize.json via ``to_dict``, the
terminal table via ``to_text``) with its artifacts: precision_tradeoffs.csv,
compression_strategies.csv, latency_vs_accuracy.png, optimize.json and report.html."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.core.artifact import created_utc
from edgeprof._version import __version__
from edgeprof.core.errors import ConstraintError
from edgeprof.core.invocation import command as _invocation
from edgeprof.core.results import WarningRecord, clean
from edgeprof.optimize.candidates import Candidate

SCHEMA_VERSION = "1.0"
STRATEGY_COLUMNS = ["strategy", "method", "backend", "precision", "executed_precision",
                    "pruning", "sparsity", "params", "latency_ms", "latency_provenance",
                    "host_latency_ms", "accuracy", "accuracy_drop_pp", "top1_agreement",
                    "max_abs_error", "cosine_similarity", "memory_mb", "host_peak_rss_mb",
                    "energy_proxy_j", "accepted", "status", "source", "reason"]
TRADEOFF_EXTRA_COLUMNS = ["configurations", "accuracy_provenance", "memory_provenance",
                          "energy_provenance"]


@dataclass
class CandidateResult:
    """What was measured for one candidate (``None`` figures carry a reason elsewhere)."""

    candidate: Candidate
    status: str  # ok | unsupported | unavailable | failed | skipped
    reason: str | None = None
    executed_precision: str | None = None
    latency_ms: float | None = None  # on the target
    latency_provenance: str | None = None  # measured (host) | predicted | uncalibrated
    latency_low_ms: float | None = None  # the prediction's interval, where it has one
    latency_high_ms: float | None = None
    latency_verdict: str | None = None  # how sure the budget is met (core/provenance.py)
    host_latency_ms: float | None = None  # measured here
    host_ci_ms: tuple[float | None, float | None] | None = None
    accuracy: float | None = None
    accuracy_drop_pp: float | None = None
    accuracy_ratio: float | None = None
    accuracy_reason: str | None = None
    agreement: dict[str, Any] = field(default_factory=dict)
    memory_bytes: float | None = None  # estimated weights + peak activations
    host_peak_rss_bytes: float | None = None  # measured peak RSS above baseline
    energy_proxy_j: float | None = None
    params: int | None = None
    sparsity: float | None = None
    compression: list[dict[str, Any]] = field(default_factory=list)
    accepted: bool = False
    failing: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.latency_ms is not None

    def to_dict(self) -> dict[str, Any]:
        c = self.candidate
        return clean({
            "label": c.label, "request": c.to_dict(), "status": self.status,
            "reason": self.reason, "executed_precision": self.executed_precision,
            "latency_ms": self.latency_ms, "latency_provenance": self.latency_provenance,
            "latency_low_ms": self.latency_low_ms, "latency_high_ms": self.latency_high_ms,
            "latency_verdict": self.latency_verdict,
            "host_latency_ms": self.host_latency_ms,
            "host_latency_ci_ms": list(self.host_ci_ms) if self.host_ci_ms else None,
            "accuracy": self.accuracy, "accuracy_drop_pp": self.accuracy_drop_pp,
            "accuracy_ratio": self.accuracy_ratio, "accuracy_reason": self.accuracy_reason,
            "accuracy_provenance": "measured" if self.accuracy is not None else None,
            "agreement": self.agreement, "memory_bytes": self.memory_bytes,
            "memory_provenance": "analytic", "host_peak_rss_bytes": self.host_peak_rss_bytes,
            "energy_proxy_j": self.energy_proxy_j, "energy_provenance": "estimated",
            "params": self.params, "sparsity": self.sparsity, "compression": self.compression,
            "accepted": self.accepted, "failing": self.failing, "notes": self.notes,
            "warnings": self.warnings})

    def row(self) -> dict[str, Any]:
        """The candidate's row of compression_strategies.csv."""
        c = self.candidate
        if self.status != "ok":
            reason = f"{self.status}: {self.reason}"
        elif self.accepted:
            reason = "meets every constraint"
        else:
            reason = "; ".join(f"{k}: {v}" for k, v in self.failing.items())
        return {
            "strategy": c.label, "method": c.model_key, "backend": c.backend,
            "precision": c.precision, "executed_precision": self.executed_precision,
            "pruning": c.pruning, "sparsity": self.sparsity, "params": self.params,
            "latency_ms": self.latency_ms, "latency_provenance": self.latency_provenance,
            "latency_low_ms": self.latency_low_ms, "latency_high_ms": self.latency_high_ms,
            "latency_verdict": self.latency_verdict,
            "host_latency_ms": self.host_latency_ms, "accuracy": self.accuracy,
            "accuracy_drop_pp": self.accuracy_drop_pp,
            "top1_agreement": self.agreement.get("top1_agreement"),
            "max_abs_error": self.agreement.get("max_abs_error"),
            "cosine_similarity": self.agreement.get("cosine_similarity"),
            "memory_mb": None if self.memory_bytes is None else self.memory_bytes / 1e6,
            "host_peak_rss_mb": None if self.host_peak_rss_bytes is None
            else self.host_peak_rss_bytes / 1e6,
            "energy_proxy_j": self.energy_proxy_j, "accepted": bool(self.accepted),
            "status": self.status, "source": c.source, "reason": reason}


@dataclass
class OptimizeReport:
    """Everything ``edgeprof optimize`` produces; ``to_dict()`` is optimize.json."""

    model: dict[str, Any]
    target: Any
    host: dict[str, Any]
    constraints: Any
    plan: Any
    candidates: list[CandidateResult]
    reference: dict[str, Any]
    dataset: dict[str, Any]
    chosen: CandidateResult | None
    plan_result: CandidateResult | None
    overruled: list[dict[str, Any]]
    verdict: dict[str, Any]
    run_options: dict[str, Any]
    warnings: list[WarningRecord] = field(default_factory=list)
    elapsed_s: float = 0.0
    created_utc: str = field(default_factory=created_utc)
    #: the CLI command that ran (None from Python: the page rebuilds one)
    command: str | None = field(default_factory=lambda: _invocation())

    @property
    def exit_code(self) -> int:
        """0: a candidate meets every constraint; 4: none does."""
        return 0 if self.chosen is not None else 4

    @property
    def on_host(self) -> bool:
        return bool(getattr(self.target, "is_host", False))

    def constraint_error(self) -> ConstraintError | None:
        """The ConstraintError (exit 4) naming what fails and the closest candidate, or None."""
        if self.chosen is not None:
            return None
        return ConstraintError(self.verdict.get("message", "no candidate meets the constraints"))

    def raise_for_constraints(self) -> OptimizeReport:
        err = self.constraint_error()
        if err is not None:
            raise err
        return self

    # -- tables -------------------------------------------------------------------------
    def strategies_frame(self):
        """compression_strategies.csv: one row per candidate, sorted by latency."""
        import pandas as pd

        df = pd.DataFrame([r.row() for r in self.candidates], columns=STRATEGY_COLUMNS)
        return df.sort_values("latency_ms", kind="stable", na_position="last") \
            .reset_index(drop=True)

    def tradeoffs_frame(self):
        """precision_tradeoffs.csv: seed 001's columns (via ``precision_tradeoff_table``) over
        the measured candidates, plus provenance columns."""
        import pandas as pd

        from edgeprof.profilers.report.seeds import TRADEOFF_COLUMNS, precision_tradeoff_table

        rows = [{"precision": r.candidate.precision, "accuracy": r.accuracy,
                 "latency_ms": r.latency_ms,
                 "memory_mb": None if r.memory_bytes is None else r.memory_bytes / 1e6,
                 "energy_proxy_j": r.energy_proxy_j, "accepted": float(r.accepted),
                 "provenance": r.latency_provenance} for r in self.candidates if r.ok]
        if not rows:
            return pd.DataFrame(columns=[*TRADEOFF_COLUMNS, "provenance",
                                         *TRADEOFF_EXTRA_COLUMNS])
        sweep = pd.DataFrame(rows)
        table = precision_tradeoff_table(sweep)
        counts = sweep.groupby("precision").size()
        table["configurations"] = [int(counts[p]) for p in table["precision"]]
        table["accuracy_provenance"] = "measured"
        table["memory_provenance"] = "analytic"
        table["energy_provenance"] = "estimated"
        return table

    def frames(self) -> dict[str, Any]:
        return {"compression_strategies": self.strategies_frame(),
                "precision_tradeoffs": self.tradeoffs_frame()}

    # -- documents ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return clean({
            "schema_version": SCHEMA_VERSION, "kind": "optimize",
            "edgeprof_version": __version__, "created_utc": self.created_utc,
            "host": self.host, "target": self.target.to_dict(), "model": self.model,
            "constraints": self.constraints.to_dict(),
            "acceptance_rule": {"min_accuracy_ratio": self.verdict.get("min_accuracy_ratio"),
                                "max_accuracy_drop_pp": self.constraints.max_accuracy_drop},
            "run_options": self.run_options, "dataset": self.dataset,
            "reference": self.reference, "plan": self.plan.to_dict() if self.plan else None,
            "plan_candidate": self.plan_result.to_dict() if self.plan_result else None,
            "candidates": [r.to_dict() for r in self.candidates],
            "chosen": self.chosen.to_dict() if self.chosen else None,
            "overruled": self.overruled, "verdict": self.verdict,
            "warnings": [w.to_dict() for w in self.warnings], "elapsed_s": self.elapsed_s,
            "command": self.command,
        })

    def to_text(self) -> str:
        """The terminal rendering: the plan, the measured table, the verdict."""
        lines = []
        if self.plan is not None:
            lines.append(self.plan.to_text())
            lines.append("")
        where = "measured on this host" if self.on_host else \
            (f"timed on this host; latency on {self.target.id} as its 'prov' column says: "
             "pred predicted, est estimated, uncal uncalibrated")
        lines.append(f"Candidates ({where}; accuracy measured on {self.dataset.get('name')} "
                     f"test split, {self.dataset.get('test')} samples):")
        df = self.strategies_frame()
        head = f"  {'strategy':<44} {'latency ms':>11} {'prov':>5} {'acc':>7} {'drop pp':>8} " \
               f"{'agree':>6} {'MB':>7}  ok  reason"
        lines.append(head)
        for _, r in df.iterrows():
            def f(v, spec):
                return "-" if v is None or v != v else format(v, spec)
            prov = {"measured": "meas", "estimated": "est", "predicted": "pred",
                    "uncalibrated": "uncal"}.get(r["latency_provenance"], "-")
            lines.append(f"  {str(r['strategy'])[:44]:<44} {f(r['latency_ms'], '.4g'):>11} "
                         f"{prov:>5} {f(r['accuracy'], '.4f'):>7} "
                         f"{f(r['accuracy_drop_pp'], '.2f'):>8} {f(r['top1_agreement'], '.3f'):>6} "
                         f"{f(r['memory_mb'], '.3g'):>7}  {'yes' if r['accepted'] else 'no ':<3} "
                         f"{'' if r['accepted'] else str(r['reason'])[:90]}")
        lines.append("")
        lines.append(self.verdict.get("message", ""))
        for o in self.overruled:
            lines.append(f"  the candidates overruled the router: {o['message']}")
        for w in self.warnings:
            lines.append(f"  warning [{w.code}]: {w.message}")
        return "\n".join(lines)

    # -- artifacts ------------------------------------------------------------------------
    def save(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write the CSVs, the PNG and optimize.json into ``out_dir``: staged in a temporary
        folder there and moved in only when every file is written."""
        from edgeprof.core.io import publish_staged, write_csv, write_json

        def write(stage: Path) -> list[str]:
            names = ["precision_tradeoffs.csv", "compression_strategies.csv",
                     "latency_vs_accuracy.png", "optimize.json"]
            write_csv(stage / names[0], self.tradeoffs_frame())
            write_csv(stage / names[1], self.strategies_frame())
            plot_latency_vs_accuracy(self, stage / names[2])
            doc = self.to_dict()
            write_json(stage / names[3], doc)
            from edgeprof.core.io import write_text  # html helper: the self-contained report
            from edgeprof.profilers.report.html import render_optimize_html

            write_text(stage / "report.html", render_optimize_html(doc))
            return [*names, "report.html"]

        return publish_staged(out_dir, write)


def plot_latency_vs_accuracy(report: OptimizeReport, path: str | os.PathLike) -> Path:
    """Scatter of latency (x) vs accuracy (y) per measured candidate, accepted ones filled,
    the chosen one marked; 180 DPI, matplotlib's Agg canvas (no pyplot)."""
    from edgeprof.profilers.report.plots import new_axes, save_png

    pts = [r for r in report.candidates if r.ok and r.accuracy is not None]
    fig, ax = new_axes((8.0, 5.5))
    for accepted, marker, color in ((True, "o", "tab:green"), (False, "x", "tab:red")):
        sel = [r for r in pts if r.accepted == accepted]
        if sel:
            ax.scatter([r.latency_ms for r in sel], [r.accuracy * 100 for r in sel],
                       marker=marker, color=color,
                       label="accepted" if accepted else "rejected")
    for r in pts:
        ax.annotate(r.candidate.label, (r.latency_ms, r.accuracy * 100), fontsize=6,
                    xytext=(3, 3), textcoords="offset points")
    if report.chosen is not None and report.chosen.accuracy is not None:
        ax.scatter([report.chosen.latency_ms], [report.chosen.accuracy * 100], s=160,
                   facecolors="none", edgecolors="black", label="chosen")
    ref = report.reference.get("accuracy")
    if ref is not None:
        ax.axhline(ref * 100, color="gray", lw=0.8, ls="--", label="fp32 reference")
    budget = report.constraints.latency_budget_ms
    if budget is not None:
        ax.axvline(budget, color="tab:orange", lw=0.8, ls=":", label="latency budget")
    provs = sorted({r.latency_provenance for r in pts if r.latency_provenance})
    prov = "measured" if report.on_host else (", ".join(provs) or "no figure")
    ax.set_xlabel(f"latency on {report.target.id} (ms, {prov})")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(f"{report.model.get('name')} on {report.target.id}: latency vs accuracy")
    if pts:
        ax.legend(fontsize=7)
    return save_png(fig, path)


__all__ = ["CandidateResult", "OptimizeReport", "SCHEMA_VERSION", "STRATEGY_COLUMNS",
           "plot_latency_vs_accuracy"]

"""``recommend`` and ``optimize``: the router's plan, then the plan checked by measurement.

* :func:`recommend_plan` - the router's ordered plan (backend, precision and quantization
  method, pruning, layout, threads, batch size) for a model on a target under constraints,
  read from the target's descriptor and the model's analytic estimate. Nothing is run; every
  projected figure is an estimate.
* :func:`optimize` - applies candidate configurations **on this machine** and measures each:
  the router's plan, a sweep of backend x precision over the available backends whose
  capabilities fit (precisions the target does not run are listed, not measured), and the
  compressions of :mod:`edgeprof.optimize.compression` (magnitude, channel and 2:4 pruning,
  channels-last) on torch eager and on the plan's backend. For each: latency with the
  harness (for a target that is not the host, ``roofline_target x measured_host /
  roofline_host``, labelled ``estimated``), top-1 accuracy on labelled data and agreement
  with the fp32 reference (both measured on the very artifact that was timed), estimated
  memory (weights + peak activations) and measured peak RSS, the energy proxy, and
  ``accepted`` against the constraints. The chosen configuration is the fastest accepted
  one; where it differs from the router's plan, the report says how the measurement
  overruled it.

Timing is deliberately short by default (:data:`DEFAULT_RUN_OPTIONS`: at least 30 samples
and 0.3 s per configuration, at most 1.5 s) so that a full run on a small model takes a
couple of minutes; pass ``run_options`` for tighter figures.

Accuracy: built-in models are trained on scikit-learn's digits for a few seconds
(:func:`edgeprof.optimize.accuracy.train_builtin`, cached) and evaluated on its fixed test
split; other models need ``data=file.npz`` (``x``: samples, ``y``: integer labels). Static
int8 is calibrated by each backend on its own synthetic sample inputs, not on the data set;
the accuracy column says what that costs.

Candidate requests are small serializable values (:class:`Candidate`), so a sweep can be
shipped to other machines later. No heavy framework is imported at module level.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgeprof._version import __version__
from edgeprof.core.errors import ConstraintError, EdgeprofError, UnsupportedError, UserError
from edgeprof.core.results import WarningRecord, clean
from edgeprof.profilers.report.summary import summarize

SCHEMA_VERSION = "1.0"
Progress = Callable[[str], None]

#: short timing runs: optimize measures many configurations
DEFAULT_RUN_OPTIONS: dict[str, Any] = {"runs": 30, "min_time_s": 0.3, "max_time_s": 1.5}
DEFAULT_TRAIN_SECONDS = 8.0
DEFAULT_PRUNE_RATIO = 0.5
#: compression methods of edgeprof.optimize.compression tried by default
COMPRESSIONS = ("magnitude", "channels", "2:4", "channels_last")
#: what each method is, in the router's pruning vocabulary
PRUNING_OF = {"magnitude": "unstructured", "channels": "structured", "2:4": "n:m",
              "channels_last": None}
#: router pruning type -> compression method
METHOD_OF_PRUNING = {"unstructured": "magnitude", "structured": "channels",
                     "channel": "channels", "n:m": "2:4"}
#: ties: a difference below this fraction of the latency is within noise on a busy machine
TIE_FRACTION = 0.05
#: before choosing, the accepted candidates within this factor of the fastest are timed again,
#: longer and interleaved (short first-pass timings misorder close candidates on a busy host)
RETIME_WITHIN = 1.5
RETIME_MAX = 4
RETIME_ROUNDS = 2
RETIME_RUN_OPTIONS: dict[str, Any] = {"runs": 100, "min_time_s": 1.0, "max_time_s": 3.0}

STRATEGY_COLUMNS = ["strategy", "method", "backend", "precision", "executed_precision",
                    "pruning", "sparsity", "params", "latency_ms", "latency_provenance",
                    "host_latency_ms", "accuracy", "accuracy_drop_pp", "top1_agreement",
                    "max_abs_error", "cosine_similarity", "memory_mb", "host_peak_rss_mb",
                    "energy_proxy_j", "accepted", "status", "source", "reason"]
TRADEOFF_EXTRA_COLUMNS = ["configurations", "accuracy_provenance", "memory_provenance",
                          "energy_provenance"]


# ------------------------------------------------------------------------ constraints
def make_constraints(latency_budget_ms: float | None = None,
                     memory_budget_mb: float | None = None,
                     max_accuracy_drop: float | None = 1.0,
                     stream_rate_fps: float | None = None):
    """The router's :class:`~edgeprof.optimize.router.Constraints` from user units (MB decimal)."""
    from edgeprof.optimize.router import Constraints

    if memory_budget_mb is not None and (isinstance(memory_budget_mb, bool) or not isinstance(
            memory_budget_mb, (int, float)) or not memory_budget_mb > 0):
        raise UserError(f"memory budget must be a positive number of MB, got {memory_budget_mb!r}")
    return Constraints(latency_budget_ms=latency_budget_ms,
                       memory_budget_bytes=None if memory_budget_mb is None
                       else float(memory_budget_mb) * 1e6,
                       max_accuracy_drop=1.0 if max_accuracy_drop is None else max_accuracy_drop,
                       stream_rate_fps=stream_rate_fps)


def _resolve(model, input_shapes, input_dtypes, batch_size, reg):
    from edgeprof.core.models import resolve_model

    return resolve_model(model, input_shapes=input_shapes, input_dtypes=input_dtypes,
                         batch_size=batch_size, registry=reg)


def _target(target, targets_dir=None, plugins=None):
    if isinstance(target, str):
        from edgeprof.targets import get_target_registry

        return get_target_registry(targets_dir, plugins).get(target)
    return target


# -------------------------------------------------------------------------- recommend
def recommend_plan(model: Any, target: Any = "host", *, latency_budget_ms: float | None = None,
                   memory_budget_mb: float | None = None, max_accuracy_drop: float = 1.0,
                   stream_rate_fps: float | None = None, precision: str = "fp32",
                   batch_size: int | None = None, input_shapes: Sequence[Sequence[int]] | None = None,
                   input_dtypes: Sequence[str] | None = None, plugins: Any = None,
                   targets_dir: Any = None):
    """The router's ordered plan for ``model`` on ``target`` under the constraints.

    Returns a :class:`~edgeprof.optimize.router.Plan` (``plan.already_met`` when the baseline
    meets every constraint, ``plan.failing`` when even the most aggressive plan does not;
    :func:`edgeprof.optimize.router.check_feasible` turns that into a ConstraintError)."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.optimize.router import recommend
    from edgeprof.profilers.estimate.analytic import estimate_model

    constraints = make_constraints(latency_budget_ms, memory_budget_mb, max_accuracy_drop,
                                   stream_rate_fps)
    reg = get_registry(plugins)
    tgt = _target(target, targets_dir, plugins)
    handle = _resolve(model, input_shapes, input_dtypes, batch_size, reg)
    est = estimate_model(handle, tgt, precision)
    backends = {n: e.cls for n, e in reg.backends.items()}
    return recommend(est, tgt, constraints, backends=backends, rules=reg)


# ------------------------------------------------------------------------- candidates
@dataclass(frozen=True)
class Candidate:
    """One configuration to measure: a small serializable request.

    ``compression`` is a tuple of :data:`COMPRESSIONS` methods applied in order to the torch
    model before the backend prepares it; ``ratio`` is the pruning ratio (magnitude: the
    fraction of weights zeroed; channels: the fraction of channels removed). ``source`` says
    why it is in the list: ``plan``, ``sweep``, ``compression`` or ``user``."""

    backend: str
    precision: str = "fp32"
    compression: tuple[str, ...] = ()
    ratio: float = DEFAULT_PRUNE_RATIO
    source: str = "user"

    def __post_init__(self) -> None:
        from edgeprof.core.precision import get_precision

        get_precision(self.precision)
        comp = (self.compression,) if isinstance(self.compression, str) else tuple(self.compression)
        comp = tuple(c for c in comp if c and c != "none")
        for c in comp:
            if c not in COMPRESSIONS:
                from edgeprof.core.errors import UnknownNameError

                raise UnknownNameError("compression method", c, COMPRESSIONS)
        object.__setattr__(self, "compression", comp)
        if isinstance(self.ratio, bool) or not isinstance(self.ratio, (int, float)) \
                or not 0 <= self.ratio < 1:
            raise UserError(f"pruning ratio must be in [0, 1), got {self.ratio!r}")

    @property
    def key(self) -> str:
        return f"{self.backend}|{self.precision}|{self.model_key}"

    @property
    def model_key(self) -> str:
        """Which model variant (the compressed module) this candidate runs."""
        return "+".join(f"{c}{self.ratio:g}" if c in ("magnitude", "channels") else c
                        for c in self.compression) or "none"

    @property
    def label(self) -> str:
        return f"{self.backend} {self.precision}" + (
            f" + {self.model_key}" if self.compression else "")

    @property
    def pruning(self) -> str:
        kinds = [PRUNING_OF[c] for c in self.compression if PRUNING_OF[c]]
        return "+".join(kinds) or "none"

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "precision": self.precision,
                "compression": list(self.compression), "ratio": self.ratio,
                "source": self.source}

    @classmethod
    def parse(cls, value: Any, source: str = "user") -> Candidate:
        """A Candidate from itself, a dict (``to_dict``'s form) or ``"backend:precision[:m+m]"``."""
        if isinstance(value, Candidate):
            return value
        if isinstance(value, dict):
            d = dict(value)
            d.setdefault("source", source)
            d["compression"] = tuple(d.get("compression") or ())
            unknown = set(d) - {"backend", "precision", "compression", "ratio", "source"}
            if unknown or "backend" not in d:
                raise UserError(f"a candidate needs 'backend' (and optionally precision, "
                                f"compression, ratio); got {sorted(value)}")
            return cls(**d)
        if isinstance(value, str):
            parts = value.split(":", 2)
            if not 1 <= len(parts) <= 3 or not parts[0]:
                raise UserError(f"candidate '{value}' is not 'backend[:precision[:method+method]]'")
            comp = tuple(parts[2].split("+")) if len(parts) > 2 and parts[2] else ()
            return cls(parts[0], parts[1] if len(parts) > 1 and parts[1] else "fp32", comp,
                       source=source)
        raise UserError(f"a candidate is a Candidate, a dict or a 'backend:precision' string; "
                        f"got {value!r}")


def _converts(cls: type) -> bool:
    """True when a backend converts a torch module into its own graph format (it also loads
    files), so torch memory formats do not reach its kernels; False when it runs the module
    as given. Read from the declared model formats, not from the backend's name."""
    formats = tuple(getattr(cls.capabilities, "model_formats", ()) or ())
    return any(f != "torch" for f in formats)


def _sweep_precisions(cls: type) -> list[str]:
    """A backend's precisions without the ``int8`` alias where it lists what int8 means."""
    precs = list(cls.capabilities.precisions)
    if "int8" in precs and ({"int8_static", "int8_dynamic"} & set(precs)):
        precs.remove("int8")
    return precs


def plan_candidate(plan: Any, reg: Any = None) -> Candidate | None:
    """The router's plan as a measurable configuration (backend, precision, pruning and,
    for a backend that runs torch modules as given, the layout: a backend that converts the
    module lays out its own graph, so the layout step is the runtime's there)."""
    b = plan.step("backend")
    if b is None:
        return None
    p = plan.step("precision")
    comp: list[str] = []
    ratio = DEFAULT_PRUNE_RATIO
    pr = plan.step("pruning")
    if pr is not None and isinstance(pr.value, dict):
        method = METHOD_OF_PRUNING.get(str(pr.value.get("type")))
        if method:
            comp.append(method)
            if method != "2:4":
                ratio = float(pr.value.get("ratio", ratio))
    lay = plan.step("layout")
    if lay is not None and str(lay.value).upper() == "NHWC":
        cls = None
        if reg is not None and str(b.value) in reg.backends:
            cls = reg.backend(str(b.value))
        if cls is None or not _converts(cls):
            comp.append("channels_last")
    return Candidate(str(b.value), str(p.value) if p is not None else "fp32", tuple(comp),
                     ratio, source="plan")


def default_candidates(plan: Any, reg: Any, handle: Any, target: Any, *,
                       backends: Sequence[str] | None = None,
                       compressions: Sequence[str] = COMPRESSIONS,
                       ratio: float = DEFAULT_PRUNE_RATIO) -> list[Candidate]:
    """The router's plan, the backend x precision sweep, and the compression variants on
    torch_eager (the reference runtime) and on the plan's backend (at its precision)."""
    out: list[Candidate] = []
    seen: set[str] = set()

    def add(c: Candidate | None) -> None:
        if c is not None and c.key not in seen:
            seen.add(c.key)
            out.append(c)

    ref = _reference_backend(reg, handle)
    if ref:
        add(Candidate(ref, "fp32", source="baseline"))
    pc = plan_candidate(plan, reg) if plan is not None else None
    if pc is not None and (backends is None or pc.backend in backends):
        add(pc)
    names = list(backends) if backends else list(reg.backends)
    for name in names:
        cls = reg.backend(name)
        for p in _sweep_precisions(cls):
            add(Candidate(name, p, source="sweep"))
    if handle.format == "torch" and compressions:
        others = [ref] if ref and (backends is None or ref in backends) else []
        if pc is not None and pc.backend != ref and (backends is None or pc.backend in backends):
            others.append(pc.backend)
        for name in others:
            prec = "fp32" if name == ref else (pc.precision if pc else "fp32")
            for m in compressions:
                add(Candidate(name, prec, (m,), ratio, source="compression"))
    return out


def _reference_backend(reg: Any, handle: Any) -> str | None:
    """torch_eager for torch models (the reference every conversion is checked against),
    else the first available backend that loads the model's format at fp32."""
    names = list(reg.backends)
    if handle.format == "torch" and "torch_eager" in names:
        return "torch_eager"
    for n in names:
        cls = reg.backend(n)
        if handle.format in cls.capabilities.model_formats and "fp32" in cls.capabilities.precisions \
                and cls.availability().available:
            return n
    return None


# ----------------------------------------------------------------------------- results
@dataclass
class CandidateResult:
    """What was measured for one candidate (``None`` figures carry a reason elsewhere)."""

    candidate: Candidate
    status: str  # ok | unsupported | unavailable | failed | skipped
    reason: str | None = None
    executed_precision: str | None = None
    latency_ms: float | None = None  # on the target
    latency_provenance: str | None = None  # measured (host) | estimated (another target)
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
    created_utc: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc)
                             .isoformat(timespec="seconds"))

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
        })

    def to_text(self) -> str:
        """The terminal rendering: the plan, the measured table, the verdict."""
        lines = []
        if self.plan is not None:
            lines.append(self.plan.to_text())
            lines.append("")
        where = "measured on this host" if self.on_host else \
            f"measured on this host; latency on {self.target.id} estimated"
        lines.append(f"Candidates ({where}; accuracy measured on {self.dataset.get('name')} "
                     f"test split, {self.dataset.get('test')} samples):")
        df = self.strategies_frame()
        head = f"  {'strategy':<44} {'latency ms':>11} {'prov':>5} {'acc':>7} {'drop pp':>8} " \
               f"{'agree':>6} {'MB':>7}  ok  reason"
        lines.append(head)
        for _, r in df.iterrows():
            def f(v, spec):
                return "-" if v is None or v != v else format(v, spec)
            prov = {"measured": "meas", "estimated": "est"}.get(r["latency_provenance"], "-")
            lines.append(f"  {str(r['strategy'])[:44]:<44} {f(r['latency_ms'], '.4g'):>11} "
                         f"{prov:>5} {f(r['accuracy'], '.4f'):>7} "
                         f"{f(r['accuracy_drop_pp'], '.2f'):>8} {f(r['top1_agreement'], '.3f'):>6} "
                         f"{f(r['memory_mb'], '.3g'):>7}  {'yes' if r['accepted'] else 'no ':<3} "
                         f"{'' if r['accepted'] else str(r['reason'])[:90]}")
        lines.append("")
        lines.append(self.verdict.get("message", ""))
        for o in self.overruled:
            lines.append(f"  measurement overruled the router: {o['message']}")
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
            write_json(stage / names[3], self.to_dict())
            return names

        return publish_staged(out_dir, write)


def plot_latency_vs_accuracy(report: OptimizeReport, path: str | os.PathLike) -> Path:
    """Scatter of latency (x) vs accuracy (y) per measured candidate, accepted ones filled,
    the chosen one marked; 180 DPI, matplotlib's Agg canvas (no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from edgeprof.core.io import write_with
    from edgeprof.profilers.report.plots import DPI

    pts = [r for r in report.candidates if r.ok and r.accuracy is not None]
    fig = Figure(figsize=(8.0, 5.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
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
    prov = "measured" if report.on_host else "estimated"
    ax.set_xlabel(f"latency on {report.target.id} (ms, {prov})")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(f"{report.model.get('name')} on {report.target.id}: latency vs accuracy")
    if pts:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return write_with(path, lambda p: fig.savefig(p, dpi=DPI, format="png"))


# --------------------------------------------------------------------------- measuring
def _feeder(template: Any, specs: Sequence[Any]) -> Callable[[list], Any]:
    """Turn numpy arrays into a runtime's native inputs, mirroring the structure and element
    types of the prepared model's own sample inputs (a dict of arrays, a list of arrays, a
    list of torch tensors). Raises UnsupportedError where that needs facts the prepared
    model does not expose (e.g. the scale of quantized inputs)."""
    import numpy as np

    def like(t: Any, spec: Any) -> Callable[[Any], Any]:
        if type(t).__module__.startswith("torch"):
            import torch

            dtype, device = t.dtype, t.device
            last = t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) \
                and not t.is_contiguous()

            def conv(a):
                x = torch.from_numpy(np.ascontiguousarray(a)).to(device)
                if x.is_floating_point():
                    x = x.to(dtype)
                return x.contiguous(memory_format=torch.channels_last) if last else x
            return conv
        if isinstance(t, np.ndarray):
            if t.dtype.kind in "iu" and not str(spec.dtype).startswith(("int", "uint")):
                raise UnsupportedError("the runtime takes quantized inputs whose scale the "
                                       "prepared model does not expose; accuracy not measured")
            dt = t.dtype
            return lambda a: np.ascontiguousarray(np.asarray(a).astype(dt, copy=False))
        raise UnsupportedError(f"cannot feed data to a runtime whose inputs are "
                               f"{type(t).__name__}; accuracy not measured")

    if isinstance(template, dict):
        keys = list(template)
        convs = [like(template[k], s) for k, s in zip(keys, specs)]
        return lambda arrays: {k: c(a) for k, c, a in zip(keys, convs, arrays)}
    if isinstance(template, (list, tuple)):
        convs = [like(t, s) for t, s in zip(template, specs)]
        return lambda arrays: [c(a) for c, a in zip(convs, arrays)]
    raise UnsupportedError(f"cannot feed data to a runtime whose inputs are "
                           f"{type(template).__name__}; accuracy not measured")


def _outputs_to_numpy(prepared: Any, outputs: Any):
    import numpy as np

    if prepared.to_numpy is not None:
        arrays = prepared.to_numpy(outputs)
    elif isinstance(outputs, (list, tuple)):
        arrays = [np.asarray(o) for o in outputs]
    else:
        arrays = [np.asarray(outputs)]
    return np.asarray(arrays[0], dtype=np.float32)


def predict_prepared(prepared: Any, x: Any, batch_size: int, specs: Sequence[Any]):
    """Logits of a prepared model over ``x``, ``batch_size`` samples per call (its fixed
    input batch); a short last batch is padded with repeats and the padding dropped."""
    import numpy as np

    feed = _feeder(prepared.inputs, specs)
    n = len(x)
    outs = []
    for i in range(0, n, batch_size):
        chunk = x[i:i + batch_size]
        k = len(chunk)
        if k < batch_size:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], batch_size - k, axis=0)])
        out = prepared.run(feed([chunk]))
        if prepared.sync is not None:
            prepared.sync()
        outs.append(_outputs_to_numpy(prepared, out).reshape(batch_size, -1)[:k])
    return np.concatenate(outs) if outs else np.zeros((0, 0), dtype=np.float32)


@dataclass
class _Context:
    reg: Any
    handle: Any  # the base model handle (trained weights for built-ins)
    target: Any
    host: Any
    constraints: Any
    dataset: Any
    ref_logits: Any
    ref_accuracy: float
    min_ratio: float
    run_options: dict[str, Any]
    say: Progress
    variants: dict[str, tuple[Any, list[dict[str, Any]]] | Exception] = field(default_factory=dict)
    estimates: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    finetune_steps: int = 200
    prune_source: Any = None  # the module pruning starts from (the reference before its
    # own fine-tuning, so both had the same training budget)


def _variant(ctx: _Context, cand: Candidate):
    """(handle, compression records) for the candidate's model variant, built once."""
    key = cand.model_key
    if key not in ctx.variants:
        try:
            ctx.variants[key] = _build_variant(ctx.handle, cand, ctx.dataset,
                                               ctx.finetune_steps, ctx.prune_source)
        except EdgeprofError as e:
            ctx.variants[key] = e
        except Exception as e:  # a compression method's own failure is that row's reason
            ctx.variants[key] = UnsupportedError(f"{cand.model_key} failed: "
                                                 f"{type(e).__name__}: {e}")
    v = ctx.variants[key]
    if isinstance(v, Exception):
        raise v
    return v


#: fine-tuning after pruning: optimizer steps on the data set's training split (0 = off). The
#: reference gets the same number of plain steps, so every candidate had the same budget.
FINETUNE_STEPS = 200
FINETUNE_MAX_SECONDS = 60.0
PRUNING_METHODS = ("magnitude", "channels", "2:4")


def _build_variant(handle: Any, cand: Candidate, dataset: Any = None,
                   finetune_steps: int = FINETUNE_STEPS, source: Any = None):
    if not cand.compression:
        return handle, []
    if handle.format != "torch":
        raise UnsupportedError(f"{'+'.join(cand.compression)} needs a torch model; "
                               f"{handle.spec} is a {handle.format} file")
    import torch

    from edgeprof.optimize.compression import compress

    prunes = any(m in PRUNING_METHODS for m in cand.compression)
    # pruning starts from the reference as it was before its own fine-tuning steps (then gets
    # as many steps itself); a layout change starts from the reference as it is
    module = source if (source is not None and prunes) else handle.torch_module()
    example = tuple(torch.from_numpy(a) for a in handle.make_inputs())
    records = []
    for method in cand.compression:
        opts: dict[str, Any] = {"example_inputs": example}
        if method == "magnitude":
            opts["amount"] = cand.ratio
        elif method == "channels":
            opts["ratio"] = cand.ratio
        module, rec = compress(module, method, **opts)
        records.append(rec.to_dict())
    if finetune_steps and dataset is not None and \
            any(m in PRUNING_METHODS for m in cand.compression):
        from edgeprof.optimize.accuracy import fine_tune

        info = fine_tune(module, dataset, max_steps=finetune_steps,
                         seconds=FINETUNE_MAX_SECONDS)
        records[-1].setdefault("notes", []).append(
            f"fine-tuned {info['steps']} steps ({info['seconds']:.1f} s) on the training split, "
            f"pruned weights kept at zero: test accuracy {info['accuracy_before']:.4f} -> "
            f"{info['accuracy_after']:.4f}")
        records[-1]["fine_tune"] = info
    new = replace(handle, spec=f"{handle.spec}+{cand.model_key}",
                  name=f"{handle.name}+{cand.model_key}", _factory=None, _module=module.eval())
    return new, records


def _estimate(ctx: _Context, handle: Any, target: Any, precision: str):
    from edgeprof.profilers.estimate.analytic import estimate_model

    key = (handle.spec, target.id, precision)
    if key not in ctx.estimates:
        ctx.estimates[key] = estimate_model(handle, target, precision)
    return ctx.estimates[key]


def _applicable(ctx: _Context, cand: Candidate) -> str | None:
    """Why the candidate cannot run here (before anything is built), or None."""
    try:
        cls = ctx.reg.backend(cand.backend)
    except EdgeprofError as e:
        return f"unavailable: {e}"
    a = cls.availability()
    if not a.available:
        return f"unavailable: {a.reason}" + (f"; {a.hint}" if a.hint else "")
    caps = cls.capabilities
    if "cpu" not in caps.devices:
        return (f"unavailable: {cand.backend} runs on {', '.join(caps.devices)}, and this "
                "host measures on its CPU")
    if cand.precision not in caps.precisions:
        return (f"unsupported: {cand.backend} cannot run {cand.precision}; it runs "
                f"{', '.join(caps.precisions)}")
    if ctx.handle.format not in caps.model_formats:
        return f"unsupported: {cand.backend} does not load {ctx.handle.format} models"
    if cand.precision not in ctx.target.supported_precisions:
        return (f"skipped: {ctx.target.id} does not run {cand.precision} (it runs "
                f"{', '.join(ctx.target.supported_precisions)}); a runtime would fall back")
    if "channels_last" in cand.compression and _converts(cls):
        return (f"unsupported: channels-last is a torch memory format; {cand.backend} converts "
                "the module to its own graph (which it lays out itself), so the layout does "
                "not reach its kernels")
    return None


def measure_candidate(ctx: _Context, cand: Candidate) -> CandidateResult:
    """Benchmark, evaluate and judge one candidate; never raises for the candidate's own
    failure (that becomes the row's status and reason)."""
    from edgeprof.profilers.measure.measure import run_one as _run_one
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.precision import PRECISIONS

    why = _applicable(ctx, cand)
    if why is not None:
        status, _, reason = why.partition(": ")
        return CandidateResult(cand, status, reason)
    try:
        handle, records = _variant(ctx, cand)
    except UserError:
        raise
    except EdgeprofError as e:
        return CandidateResult(cand, "unsupported", str(e))
    res = CandidateResult(cand, "failed", compression=records)
    if records:
        last = records[-1]
        res.params = int(last["parameters_after"])
        res.sparsity = max(float(r.get("sparsity") or 0.0) for r in records)
        res.notes.extend(n for r in records for n in r.get("notes", []))
    else:
        try:
            from edgeprof.optimize.compression import count_parameters

            res.params = count_parameters(handle.torch_module())[0] \
                if handle.format == "torch" else None
        except Exception:  # noqa: BLE001 - a count is a nicety
            res.params = None
    cls = ctx.reg.backend(cand.backend)
    opts = dict(ctx.run_options)
    options = dict(opts.pop("options", {}) or {})
    options.setdefault("keep_samples", False)
    config = RunConfig(precision=cand.precision, batch_size=handle.batch_size, options=options,
                       **opts)
    ctx.say(f"measuring {cand.label}")
    bench = _run_one(cls(), handle, config)
    res.status, res.reason = bench.status, bench.reason
    res.warnings = [w.to_dict() for w in bench.warnings]
    res.notes.extend(bench.notes)
    if not bench.ok:
        return res
    res.executed_precision = bench.executed_precision
    res.host_latency_ms = bench.stats.median_ms
    res.host_ci_ms = (bench.stats.ci_low_ms, bench.stats.ci_high_ms)
    res.host_peak_rss_bytes = bench.peak_memory_bytes
    p = bench.executed_precision if bench.executed_precision in PRECISIONS else cand.precision

    # -- latency, memory and energy on the target ---------------------------------------
    backend = cls()
    est = _estimate(ctx, handle, ctx.target, p)
    host_est = _estimate(ctx, handle, ctx.host, p) if ctx.host is not None else None
    summ = summarize(est, bench, ctx.target, ctx.host, host_est)
    lat = summ.figures["latency_ms"]
    res.latency_ms, res.latency_provenance = lat.value, lat.provenance
    if lat.value is None:
        res.notes.append(f"target latency unavailable: {lat.reason}")
    res.energy_proxy_j = summ.value("energy_proxy_j")
    res.memory_bytes = float(est.parameter_bytes + est.peak_activation_bytes)

    # -- accuracy and agreement on the artifact that was timed -----------------------------
    _accuracy(ctx, cls, handle, config, res)
    _judge(ctx, res, est)
    return res


def _accuracy(ctx: _Context, cls: type, handle: Any, config: Any, res: CandidateResult) -> None:
    from edgeprof.optimize.accuracy import accept
    from edgeprof.backends.common import compare_outputs

    prepared = None
    try:
        backend = cls()
        prepared = backend.prepare(handle, config, handle.make_inputs(config.seed))
        logits = predict_prepared(prepared, ctx.dataset.x_test, handle.batch_size,
                                  handle.input_specs)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - the row says why accuracy is missing
        from edgeprof.profilers.measure.harness import one_line

        res.accuracy_reason = f"accuracy not measured: {one_line(e)}"
        res.notes.append(res.accuracy_reason)
        return
    finally:
        if prepared is not None and prepared.close is not None:
            try:
                prepared.close()
            except Exception:  # noqa: BLE001
                pass
    import numpy as np

    y = ctx.dataset.y_test
    if logits.ndim != 2 or logits.shape[0] != len(y):
        res.accuracy_reason = (f"accuracy not measured: the model returned shape "
                               f"{tuple(logits.shape)} for {len(y)} samples")
        return
    res.accuracy = float(np.mean(logits.argmax(axis=1) == y))
    verdict = accept(res.accuracy, ctx.ref_accuracy, min_ratio=ctx.min_ratio,
                     max_accuracy_drop=ctx.constraints.max_accuracy_drop)
    res.accuracy_drop_pp = verdict.drop_pp
    res.accuracy_ratio = verdict.ratio
    if ctx.ref_logits is not None and ctx.ref_logits.shape == logits.shape:
        a = compare_outputs(ctx.ref_logits, logits, res.executed_precision or "fp32").to_dict()
        res.agreement = {"top1_agreement": a["top1_agreement"],
                         "max_abs_error": a["max_abs_error"],
                         "cosine_similarity": a["cosine_similarity"],
                         "relative_error": a["relative_error"], "reference": "fp32 torch eager"
                         if ctx.handle.format == "torch" else "fp32 reference backend"}


def _judge(ctx: _Context, res: CandidateResult, est: Any) -> None:
    """``accepted`` and, where not, which constraints fail and why (names as the router's)."""
    c = ctx.constraints
    fails: dict[str, str] = {}
    prov = res.latency_provenance or "measured"
    if res.accuracy is None:
        fails["max_accuracy_drop"] = res.accuracy_reason or "accuracy not measured"
    else:
        if res.accuracy_ratio is not None and res.accuracy_ratio < ctx.min_ratio:
            fails["min_accuracy_ratio"] = (f"accuracy {res.accuracy:.4f} is "
                                           f"{res.accuracy_ratio:.2%} of fp32's "
                                           f"{ctx.ref_accuracy:.4f} (needs {ctx.min_ratio:.0%})")
        if res.accuracy_drop_pp is not None and \
                res.accuracy_drop_pp > c.max_accuracy_drop + 1e-9:
            fails["max_accuracy_drop"] = (f"drop {res.accuracy_drop_pp:.2f} pp > "
                                          f"{c.max_accuracy_drop:g} pp")
    if res.latency_ms is None:
        if c.latency_budget_ms is not None or c.stream_rate_fps is not None:
            fails["latency_budget_ms"] = "no latency for the target"
    else:
        if c.latency_budget_ms is not None and res.latency_ms > c.latency_budget_ms:
            fails["latency_budget_ms"] = (f"{res.latency_ms:.4g} ms ({prov}) > budget "
                                          f"{c.latency_budget_ms:g} ms")
        if c.stream_rate_fps is not None:
            rate = est.batch_size * 1e3 / res.latency_ms if res.latency_ms > 0 else float("inf")
            if rate < c.stream_rate_fps:
                fails["stream_rate_fps"] = (f"{rate:.4g} inferences/s ({prov}) < stream rate "
                                            f"{c.stream_rate_fps:g} fps")
    if c.memory_budget_bytes is not None and res.memory_bytes is not None \
            and res.memory_bytes > c.memory_budget_bytes:
        fails["memory_budget_bytes"] = (f"{res.memory_bytes / 1e6:.4g} MB (estimated weights + "
                                        f"peak activations) > budget "
                                        f"{c.memory_budget_bytes / 1e6:g} MB")
    cap = getattr(est, "memory_capacity", None) or {}
    if isinstance(cap, dict) and cap.get("fits") is False:
        fails["device_memory"] = f"does not fit {ctx.target.id}: {cap.get('message', '')}"
    res.failing = fails
    res.accepted = not fails


CALIBRATION_SAMPLES = 256


def with_calibration(handle: Any, dataset: Any) -> Any:
    """The handle with the training split's first samples as its static-int8 calibration
    data (a content-named .npz in the cache, so calibrated conversions are cached too)."""
    import hashlib

    import numpy as np

    from edgeprof.core.cache import cache_dir

    if len(handle.input_specs) != 1:
        return handle
    x = np.ascontiguousarray(dataset.x_train[:CALIBRATION_SAMPLES])
    digest = hashlib.sha256(x.tobytes() + str(x.shape).encode()).hexdigest()[:24]
    path = cache_dir("calibration") / f"{digest}.npz"
    if not path.exists():
        from edgeprof.core.io import write_with

        def save(tmp: Path) -> None:
            with open(tmp, "wb") as f:  # a file object: np.savez would append .npz to a name
                np.savez(f, x=x)

        write_with(path, save)
    return replace(handle, calibration=path)


def retime_finalists(ctx: _Context, results: list[CandidateResult]) -> list[str]:
    """Time the accepted candidates close to the fastest again, longer and interleaved
    (``RETIME_ROUNDS`` rounds of ``RETIME_RUN_OPTIONS``), keep each one's lowest round median
    (the least disturbed), and re-judge them. Returns the labels re-timed."""
    from edgeprof.profilers.measure.measure import run_one as _run_one
    from edgeprof.core.backend import RunConfig
    from edgeprof.core.precision import PRECISIONS

    accepted = [r for r in results if r.ok and r.accepted and r.latency_ms]
    if len(accepted) < 2:
        return []
    fastest = min(r.latency_ms for r in accepted)
    finalists = sorted((r for r in accepted if r.latency_ms <= fastest * RETIME_WITHIN),
                       key=lambda r: r.latency_ms)[:RETIME_MAX]
    if len(finalists) < 2:
        return []
    best: dict[int, Any] = {}
    for _ in range(RETIME_ROUNDS):
        for r in finalists:
            handle, _records = _variant(ctx, r.candidate)
            opts = {**ctx.run_options, **RETIME_RUN_OPTIONS}
            options = dict(opts.pop("options", {}) or {})
            options.setdefault("keep_samples", False)
            config = RunConfig(precision=r.candidate.precision, batch_size=handle.batch_size,
                               options=options, **opts)
            ctx.say(f"re-timing {r.candidate.label}")
            bench = _run_one(ctx.reg.backend(r.candidate.backend)(), handle, config)
            if bench.ok and (id(r) not in best or
                             bench.stats.median_ms < best[id(r)][1].stats.median_ms):
                best[id(r)] = (handle, bench)
    for r in finalists:
        if id(r) not in best:
            continue
        handle, bench = best[id(r)]
        p = bench.executed_precision if bench.executed_precision in PRECISIONS \
            else r.candidate.precision
        est = _estimate(ctx, handle, ctx.target, p)
        host_est = _estimate(ctx, handle, ctx.host, p) if ctx.host is not None else None
        summ = summarize(est, bench, ctx.target, ctx.host, host_est)
        first = r.latency_ms
        r.host_latency_ms = bench.stats.median_ms
        r.host_ci_ms = (bench.stats.ci_low_ms, bench.stats.ci_high_ms)
        r.latency_ms = summ.figures["latency_ms"].value
        r.latency_provenance = summ.figures["latency_ms"].provenance
        r.energy_proxy_j = summ.value("energy_proxy_j")
        r.notes.append(f"re-timed with {RETIME_ROUNDS} interleaved rounds of >= "
                       f"{RETIME_RUN_OPTIONS['min_time_s']} s (lowest round median kept): "
                       f"{first:.4g} -> {r.latency_ms:.4g} ms")
        _judge(ctx, r, est)
    return [r.candidate.label for r in finalists]


# ----------------------------------------------------------------------------- verdict
def _same_config(a: Candidate, b: Candidate) -> bool:
    return a.backend == b.backend and a.precision == b.precision and a.model_key == b.model_key


def _overruled(plan_res: CandidateResult | None, chosen: CandidateResult | None
               ) -> list[dict[str, Any]]:
    """Where the measurement disagreed with the router's plan, in words and as data."""
    if plan_res is None:
        return []
    pc = plan_res.candidate
    out: list[dict[str, Any]] = []
    if not plan_res.ok:
        out.append({"kind": "plan_could_not_run", "plan": pc.label,
                    "message": f"the router's plan ({pc.label}) could not run here: "
                               f"{plan_res.status}: {plan_res.reason}"})
    elif not plan_res.accepted:
        out.append({"kind": "plan_rejected", "plan": pc.label, "failing": plan_res.failing,
                    "message": f"the router's plan ({pc.label}) was measured and fails "
                               + "; ".join(f"{k} ({v})" for k, v in plan_res.failing.items())})
    if chosen is None or _same_config(chosen.candidate, pc):
        return out
    cc = chosen.candidate
    diffs = []
    for name, a, b in (("backend", pc.backend, cc.backend), ("precision", pc.precision,
                                                             cc.precision),
                       ("compression", pc.model_key, cc.model_key)):
        if a != b:
            diffs.append({"field": name, "router": a, "measured": b})
    if plan_res.ok and plan_res.accepted and plan_res.latency_ms and chosen.latency_ms:
        ratio = plan_res.latency_ms / chosen.latency_ms
        tie = abs(1 - chosen.latency_ms / plan_res.latency_ms) < TIE_FRACTION
        msg = (f"the router said {pc.label}, but {cc.label} measured faster: "
               f"{chosen.latency_ms:.4g} ms vs {plan_res.latency_ms:.4g} ms "
               f"({ratio:.2f}x{', within noise' if tie else ''}), both accepted")
        out.append({"kind": "faster_alternative", "plan": pc.label, "chosen": cc.label,
                    "differences": diffs, "plan_latency_ms": plan_res.latency_ms,
                    "chosen_latency_ms": chosen.latency_ms, "speedup": ratio,
                    "within_noise": tie, "message": msg})
    else:
        out.append({"kind": "replaced", "plan": pc.label, "chosen": cc.label,
                    "differences": diffs,
                    "message": f"chose {cc.label} instead of the router's {pc.label} "
                               f"(" + ", ".join(f"{d['field']} {d['router']} -> {d['measured']}"
                                                for d in diffs) + ")"})
    return out


def choose(results: list[CandidateResult]
           ) -> tuple[CandidateResult | None, list[CandidateResult]]:
    """The fastest accepted candidate. Differences within :data:`TIE_FRACTION` of the
    fastest are noise on a busy machine; among those the simplest wins (fewest compression
    steps, then the higher accuracy, then the lower latency). Returns (chosen, the faster
    candidates it was preferred to)."""
    accepted = [r for r in results if r.ok and r.accepted]
    if not accepted:
        return None, []
    fastest = min(r.latency_ms for r in accepted)
    near = [r for r in accepted if r.latency_ms <= fastest * (1 + TIE_FRACTION)]
    chosen = min(near, key=lambda r: (len(r.candidate.compression), -(r.accuracy or 0.0),
                                      r.latency_ms))
    return chosen, [r for r in near if r.latency_ms < chosen.latency_ms]


def _closest(results: list[CandidateResult]) -> CandidateResult | None:
    ok = [r for r in results if r.ok]
    if not ok:
        return None
    return min(ok, key=lambda r: (len(r.failing), r.latency_ms))


def _verdict(results: list[CandidateResult], chosen: CandidateResult | None, ctx: _Context,
             baseline: CandidateResult | None, plan: Any) -> dict[str, Any]:
    v: dict[str, Any] = {"min_accuracy_ratio": ctx.min_ratio,
                         "measured": sum(r.ok for r in results), "candidates": len(results),
                         "accepted": sum(r.accepted for r in results)}
    on_host = bool(getattr(ctx.target, "is_host", False))
    prov = "measured" if on_host else f"estimated for {ctx.target.id}"
    if baseline is not None and baseline.ok:
        v["baseline"] = baseline.candidate.label
        v["baseline_latency_ms"] = baseline.latency_ms
        v["baseline_meets_constraints"] = baseline.accepted
    if chosen is not None:
        speed = (baseline.latency_ms / chosen.latency_ms) if baseline is not None and \
            baseline.ok and chosen.latency_ms else None
        v.update(status="ok", chosen=chosen.candidate.label, latency_ms=chosen.latency_ms,
                 latency_provenance=chosen.latency_provenance, accuracy=chosen.accuracy,
                 speedup_vs_baseline=speed)
        msg = (f"Chosen: {chosen.candidate.label} - {chosen.latency_ms:.4g} ms ({prov}), "
               f"accuracy {chosen.accuracy:.4f} (drop {chosen.accuracy_drop_pp:.2f} pp), "
               f"{(chosen.memory_bytes or 0) / 1e6:.3g} MB estimated")
        if speed:
            msg += f"; {speed:.2f}x the {baseline.candidate.label} baseline"
        if baseline is not None and baseline.accepted and plan is not None and plan.already_met:
            msg += ("; the baseline already meets the constraints (the router said so too), "
                    "so this is an improvement, not a necessity")
        v["message"] = msg
        return v
    counts: dict[str, int] = {}
    for r in results:
        for k in r.failing:
            counts[k] = counts.get(k, 0) + 1
    closest = _closest(results)
    v.update(status="constraints_not_met", failing_counts=counts,
             closest=closest.candidate.label if closest else None,
             closest_failing=closest.failing if closest else None)
    if closest is None:
        v["message"] = ("no candidate produced a measurement on this host; see each row's "
                        "reason")
        return v
    measured = [r for r in results if r.ok]
    binding = [k for k in closest.failing if all(k in r.failing for r in measured)]
    first = (binding or list(closest.failing) or ["constraints"])[0]
    v["binding"] = binding
    acc = "-" if closest.accuracy is None else f"{closest.accuracy:.4f}"
    v["message"] = (f"no candidate meets every constraint: {first} fails "
                    f"({closest.failing.get(first, '')}); closest: {closest.candidate.label} at "
                    f"{closest.latency_ms:.4g} ms ({prov}), accuracy {acc}"
                    + (f"; it also fails {', '.join(k for k in closest.failing if k != first)}"
                       if len(closest.failing) > 1 else "")
                    + (f"; every measured candidate fails {', '.join(binding)}"
                       if binding else ""))
    return v


# ---------------------------------------------------------------------------- optimize
def optimize(model: Any, target: Any = "host", *, latency_budget_ms: float | None = None,
             memory_budget_mb: float | None = None, max_accuracy_drop: float = 1.0,
             stream_rate_fps: float | None = None, min_accuracy_ratio: float | None = None,
             data: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
             run_options: dict[str, Any] | None = None,
             candidates: Sequence[Any] | None = None, backends: Sequence[str] | str | None = None,
             compressions: Sequence[str] | str = COMPRESSIONS, prune_ratio: float = DEFAULT_PRUNE_RATIO,
             train_seconds: float = DEFAULT_TRAIN_SECONDS,
             finetune_steps: int = FINETUNE_STEPS, batch_size: int | None = None,
             input_shapes: Sequence[Sequence[int]] | None = None,
             input_dtypes: Sequence[str] | None = None, plugins: Any = None,
             targets_dir: Any = None, progress: Progress | None = None) -> OptimizeReport:
    """Measure candidate configurations of ``model`` on this host, judge each against the
    constraints for ``target``, and choose the fastest accepted one (see the module
    docstring). ``candidates`` replaces the default list (Candidate objects, dicts or
    ``"backend:precision[:method+method]"`` strings). Writes the artifacts to ``out`` when
    given. Returns the report whatever the outcome: ``report.exit_code`` is 4 when no
    candidate meets the constraints (``report.raise_for_constraints()`` raises then)."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.optimize.router import recommend
    from edgeprof.optimize import accuracy as acc
    from edgeprof.profilers.estimate.analytic import estimate_model

    t_start = time.perf_counter()
    say = progress or (lambda msg: None)
    constraints = make_constraints(latency_budget_ms, memory_budget_mb, max_accuracy_drop,
                                   stream_rate_fps)
    min_ratio = acc.DEFAULT_MIN_RATIO if min_accuracy_ratio is None else float(min_accuracy_ratio)
    if not 0 <= min_ratio <= 1:
        raise UserError(f"min_accuracy_ratio must be in [0, 1], got {min_accuracy_ratio!r}")
    if isinstance(backends, str):
        backends = [b.strip() for b in backends.split(",") if b.strip()]
    if isinstance(compressions, str):
        compressions = [] if compressions.strip() == "none" else \
            [c.strip() for c in compressions.split(",") if c.strip()]
    for c in compressions:
        if c not in COMPRESSIONS:
            from edgeprof.core.errors import UnknownNameError

            raise UnknownNameError("compression method", c, COMPRESSIONS)
    reg = get_registry(plugins)
    for b in backends or ():
        reg.backend(b)  # unknown names: one line, exit 2
    opts = dict(DEFAULT_RUN_OPTIONS)
    opts.update(run_options or {})
    from edgeprof.profilers.measure.harness import plan_from_config
    from edgeprof.core.backend import RunConfig

    try:
        plan_from_config(RunConfig(**{k: v for k, v in opts.items() if k != "options"}))
    except TypeError as e:
        raise UserError(f"run_options: {e}") from None
    treg = None
    if isinstance(target, str):
        from edgeprof.targets import get_target_registry

        treg = get_target_registry(targets_dir, plugins)
        tgt = treg.get(target)
    else:
        tgt = target
    handle = _resolve(model, input_shapes, input_dtypes, batch_size, reg)
    parsed = [Candidate.parse(c) for c in candidates] if candidates is not None else None

    # -- data and the fp32 reference ------------------------------------------------------
    warnings: list[WarningRecord] = []
    training: dict[str, Any] | None = None
    builtin = handle.spec.startswith("builtin:")
    if data is not None:
        dataset = acc.load_npz_dataset(data, handle)
    elif builtin and handle.format == "torch":
        say(f"training {handle.name} on digits (cached after the first run)")
        trained = acc.train_builtin(handle.name, seconds=train_seconds)
        training = trained.to_dict()
        handle = replace(handle, spec=f"{handle.spec}@digits", _factory=None,
                         _module=trained.module.eval())
        dataset = acc.load_digits_dataset(handle)
    else:
        raise UserError(f"optimize measures accuracy on labelled data: give --data FILE.npz "
                        f"(arrays x: samples shaped like {handle.name}'s input, y: integer "
                        "labels); built-in models use scikit-learn's digits")
    handle = with_calibration(handle, dataset)
    prune_source = None
    wants_pruning = (any(m in PRUNING_METHODS for c in parsed for m in c.compression)
                     if parsed is not None else
                     any(m in PRUNING_METHODS for m in compressions))
    if finetune_steps and wants_pruning and handle.format == "torch" and len(dataset.x_train):
        # pruned variants are fine-tuned for finetune_steps; the reference gets as many plain
        # steps first, so accuracy differences are the compression's, not extra training's
        import copy

        prune_source = copy.deepcopy(handle.torch_module())
        say(f"fine-tuning the reference for {finetune_steps} steps (the budget pruned variants get)")
        info = acc.fine_tune(handle.torch_module(), dataset, max_steps=finetune_steps,
                             seconds=FINETUNE_MAX_SECONDS)
        training = {**(training or {}), "reference_fine_tune": info}
    host_t = tgt if getattr(tgt, "is_host", False) else None
    if host_t is None:
        say("calibrating host (cached after the first run)")
        try:
            host_t = (treg or _host_registry(targets_dir, plugins)).get("host")
        except EdgeprofError as e:
            warnings.append(WarningRecord("host_uncalibrated", f"host calibration failed: {e}; "
                                          "target latency cannot be estimated"))

    ref_name = _reference_backend(reg, handle)
    ref_logits = None
    if handle.format == "torch":
        ref_logits = acc.predict(acc.torch_run_fn(handle.torch_module()), dataset.x_test)
        ref_accuracy = float((ref_logits.argmax(axis=1) == dataset.y_test).mean())
        ref_source = "torch eager fp32 on the whole test split"
    elif ref_name is not None:
        ref_logits, ref_accuracy = _file_reference(reg, ref_name, handle, dataset, opts)
        ref_source = f"{ref_name} fp32"
    else:
        raise UserError(f"no available backend loads {handle.format} models at fp32, so there "
                        "is no reference to measure accuracy against")
    if ref_logits is not None and (ref_logits.ndim != 2 or ref_logits.shape[0] != len(dataset.y_test)):
        raise UserError(f"the model returns shape {tuple(ref_logits.shape)} for "
                        f"{len(dataset.y_test)} samples; optimize needs one row of class scores "
                        "per sample")

    # -- the router's plan ------------------------------------------------------------------
    say("planning")
    est = estimate_model(handle, tgt, "fp32")
    plan = recommend(est, tgt, constraints, backends={n: e.cls for n, e in reg.backends.items()},
                     rules=reg)
    if parsed is None:
        parsed = default_candidates(plan, reg, handle, tgt, backends=backends,
                                    compressions=compressions, ratio=prune_ratio)
    ctx = _Context(reg, handle, tgt, host_t, constraints, dataset, ref_logits, ref_accuracy,
                   min_ratio, opts, say, finetune_steps=finetune_steps,
                   prune_source=prune_source)
    with _quiet_root_logger():
        results = [measure_candidate(ctx, c) for c in parsed]

    pc = plan_candidate(plan, reg)
    plan_res = next((r for r in results if pc is not None and _same_config(r.candidate, pc)),
                    None)
    base = next((r for r in results if r.candidate.backend == ref_name
                 and r.candidate.precision == "fp32" and not r.candidate.compression), None)
    retimed = retime_finalists(ctx, results)
    chosen, tied = choose(results)
    verdict = _verdict(results, chosen, ctx, base, plan)
    verdict["retimed"] = retimed
    if tied:
        verdict["within_noise_of_fastest"] = [r.candidate.label for r in tied]
        verdict["message"] += (f" (within {TIE_FRACTION:.0%} of the fastest accepted, "
                               f"{tied[0].candidate.label}: the simplest of those is chosen)")
    if plan is not None and plan.warnings:
        warnings.extend(plan.warnings)
    noisy = [r.candidate.label for r in results
             if any(w.get("code") in ("machine_busy", "high_cv") for w in r.warnings)]
    if noisy:
        warnings.append(WarningRecord(
            "noisy_measurements",
            f"{len(noisy)} of {sum(r.ok for r in results)} measurements were flagged by the "
            "harness (machine_busy or high_cv): latencies on a busy machine can be inflated; "
            "rerun with longer --min-time or on an idle machine before trusting small "
            "differences"))
    from edgeprof.profilers.measure.environment import host_info as _host_info

    report = OptimizeReport(
        model={**handle.to_dict(), "training": training}, target=tgt,
        host=_host_info(host_t), constraints=constraints, plan=plan, candidates=results,
        reference={"backend": ref_name, "precision": "fp32", "accuracy": ref_accuracy,
                   "source": ref_source},
        dataset=dataset.to_dict(), chosen=chosen, plan_result=plan_res,
        overruled=_overruled(plan_res, chosen), verdict=verdict, run_options=opts,
        warnings=warnings)
    report.elapsed_s = time.perf_counter() - t_start
    if out is not None:
        say(f"writing artifacts to {out}")
        report.save(out)
    return report


class _quiet_root_logger:
    """Runtimes' quantizers log advice through the root logger (``WARNING:root:...``); it
    would interleave with the table, so the root logger is raised to ERROR while measuring
    and restored afterwards."""

    def __enter__(self):
        import logging

        self._root = logging.getLogger()
        self._level = self._root.level
        self._root.setLevel(max(self._level, logging.ERROR))
        return self

    def __exit__(self, *exc):
        self._root.setLevel(self._level)
        return False


def _host_registry(targets_dir, plugins):
    from edgeprof.targets import get_target_registry

    return get_target_registry(targets_dir, plugins)


def _file_reference(reg, ref_name, handle, dataset, opts):
    """Reference logits of a model file: its fp32 run on the first backend that loads it."""
    from edgeprof.core.backend import RunConfig

    cls = reg.backend(ref_name)
    config = RunConfig(precision="fp32", batch_size=handle.batch_size)
    prepared = cls().prepare(handle, config, handle.make_inputs(0))
    try:
        logits = predict_prepared(prepared, dataset.x_test, handle.batch_size,
                                  handle.input_specs)
    finally:
        if prepared.close is not None:
            prepared.close()
    return logits, float((logits.argmax(axis=1) == dataset.y_test).mean())


__all__ = ["COMPRESSIONS", "Candidate", "CandidateResult", "DEFAULT_RUN_OPTIONS",
           "OptimizeReport", "default_candidates", "make_constraints", "optimize",
           "plan_candidate", "plot_latency_vs_accuracy", "predict_prepared", "recommend_plan"]

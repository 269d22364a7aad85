"""What the router's rules see and make: the value types (:class:`Constraints`, :class:`Step`,
:class:`LatencyFigure`, :class:`Projection`, :class:`Plan`) and :class:`RouterContext`, the
inputs, data and steps so far with the projector that turns them into figures on the target.
Part of the router (:mod:`edgeprof.optimize.router`, whose docstring describes the whole;
every name here is importable from there too)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from edgeprof.core.errors import ConstraintError, UserError
from edgeprof.core.precision import PRECISIONS
from edgeprof.core.provenance import budget_verdict, rank, sort_key
from edgeprof.core.results import WarningRecord, clean

STEP_KINDS = ("backend", "precision", "pruning", "layout", "threads", "batch_size",
              "architecture")
STAGES = ("deploy", "compress", "check")
#: constraint names as they appear in ``Plan.failing`` (device_memory: the target's own RAM)
CONSTRAINT_NAMES = ("latency_budget_ms", "stream_rate_fps", "memory_budget_bytes",
                    "device_memory", "max_accuracy_drop")


# ---------------------------------------------------------------------------- values
def _number(name: str, value: Any, *, allow_zero: bool = True) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"constraint {name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise UserError(f"constraint {name} must be a {'non-negative' if allow_zero else 'positive'}"
                        f" finite number, got {value!r}")
    return v


@dataclass(frozen=True)
class Constraints:
    """What the user needs. ``None`` means no constraint; ``max_accuracy_drop`` is in
    percentage points of top-1 accuracy (1.0 = one point)."""

    latency_budget_ms: float | None = None
    memory_budget_bytes: float | None = None
    max_accuracy_drop: float = 1.0
    stream_rate_fps: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "latency_budget_ms",
                           _number("latency_budget_ms", self.latency_budget_ms, allow_zero=False))
        object.__setattr__(self, "memory_budget_bytes",
                           _number("memory_budget_bytes", self.memory_budget_bytes,
                                   allow_zero=False))
        drop = _number("max_accuracy_drop", self.max_accuracy_drop)
        object.__setattr__(self, "max_accuracy_drop", 1.0 if drop is None else drop)
        object.__setattr__(self, "stream_rate_fps",
                           _number("stream_rate_fps", self.stream_rate_fps, allow_zero=False))

    def to_dict(self) -> dict[str, Any]:
        return {"latency_budget_ms": self.latency_budget_ms,
                "memory_budget_bytes": self.memory_budget_bytes,
                "max_accuracy_drop": self.max_accuracy_drop,
                "stream_rate_fps": self.stream_rate_fps}


@dataclass
class Step:
    """One thing to do. ``kind`` is one of :data:`STEP_KINDS`; ``value`` what to set it to
    (a backend name, a precision, ``{"type": ..., "ratio": ...}`` for pruning, a layout, a
    thread count table, a batch size, an architecture target); ``method`` how (e.g. the
    quantization method); ``reason`` why, in words."""

    kind: str
    value: Any
    reason: str
    method: str | None = None
    rule: str = ""
    stage: str = "compress"
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return clean({"kind": self.kind, "value": self.value, "method": self.method,
                      "reason": self.reason, "rule": self.rule, "stage": self.stage,
                      "details": self.details})

    def describe(self) -> str:
        v = self.value
        if isinstance(v, dict):
            v = ", ".join(f"{k}={x}" for k, x in v.items())
        return f"{self.kind}: {v}" + (f" ({self.method})" if self.method else "")


@dataclass(frozen=True)
class LatencyFigure:
    """A configuration's latency on the target, as ``latency_of`` gives it: the value, its
    interval, its provenance and what it rests on (``basis``: backend, calibration, method)."""

    value_ms: float
    provenance: str
    low_ms: float | None = None
    high_ms: float | None = None
    basis: str = ""
    backend: str | None = None


@dataclass(frozen=True)
class Projection:
    """The plan's figures on the target as the router projects them. The latency is the
    best figure there is (``latency_provenance``: predicted, uncalibrated, or analytic for the
    bare roofline) with the steps the figure does not see projected on the roofline; memory
    and accuracy are estimated."""

    latency_ms: float  # one request: batch compute plus the wait to collect the batch
    batch_latency_ms: float
    throughput_fps: float | None
    weight_bytes: float
    activation_bytes: float
    accuracy_drop_pp: float
    precision: str
    batch_size: int
    fits_device: bool
    device_memory_note: str
    latency_provenance: str = "analytic"
    latency_low_ms: float | None = None
    latency_high_ms: float | None = None
    latency_basis: str = "the roofline (a lower bound)"
    backend: str | None = None

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.activation_bytes

    def latency_verdict(self, budget_ms: float):
        return budget_verdict(self.latency_ms, budget_ms, self.latency_provenance,
                              low_ms=self.latency_low_ms, high_ms=self.latency_high_ms)

    def to_dict(self) -> dict[str, Any]:
        return clean({"latency_ms": self.latency_ms, "batch_latency_ms": self.batch_latency_ms,
                      "latency_provenance": self.latency_provenance,
                      "latency_low_ms": self.latency_low_ms,
                      "latency_high_ms": self.latency_high_ms,
                      "latency_basis": self.latency_basis, "backend": self.backend,
                      "throughput_fps": self.throughput_fps, "weight_bytes": self.weight_bytes,
                      "activation_bytes": self.activation_bytes,
                      "memory_bytes": self.memory_bytes,
                      "expected_accuracy_drop_pp": self.accuracy_drop_pp,
                      "precision": self.precision, "batch_size": self.batch_size,
                      "fits_device": self.fits_device,
                      "device_memory_note": self.device_memory_note,
                      "provenance": "estimated"})


@dataclass
class Plan:
    """An ordered optimization path for one model on one target under constraints."""

    target: str
    model: str
    bound: str
    constraints: Constraints
    steps: list[Step]
    warnings: list[WarningRecord]
    already_met: bool
    failing: list[str]
    failing_reasons: dict[str, str]
    baseline: Projection
    projected: Projection
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    #: constraints the figures cannot decide (a roofline under the budget), with why
    undecided: dict[str, str] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return not self.failing

    def constraint_error(self) -> ConstraintError | None:
        """The ConstraintError (exit 4) naming the first constraint that cannot be met and
        why, or None when the plan meets them all."""
        if not self.failing:
            return None
        name = self.failing[0]
        more = f" (also: {', '.join(self.failing[1:])})" if len(self.failing) > 1 else ""
        return ConstraintError(f"constraint {name} cannot be met on {self.target} even with the "
                               f"most aggressive plan: {self.failing_reasons.get(name, '')}{more}")

    def step(self, kind: str) -> Step | None:
        return next((s for s in reversed(self.steps) if s.kind == kind), None)

    def to_dict(self) -> dict[str, Any]:
        return clean({
            "target": self.target, "model": self.model, "bound": self.bound,
            "constraints": self.constraints.to_dict(), "already_met": self.already_met,
            "feasible": self.feasible, "failing": list(self.failing),
            "failing_reasons": dict(self.failing_reasons),
            "steps": [s.to_dict() for s in self.steps],
            "warnings": [w.to_dict() for w in self.warnings],
            "baseline": self.baseline.to_dict(), "projected": self.projected.to_dict(),
            "notes": list(self.notes), "rules": list(self.rules),
            "undecided": dict(self.undecided),
        })

    @staticmethod
    def _latency_text(p: Projection) -> str:
        if p.latency_provenance == "analytic":
            return f"{p.latency_ms:.3g} ms (roofline: a lower bound on latency)"
        interval = (f" [{p.latency_low_ms:.3g}-{p.latency_high_ms:.3g}]"
                    if p.latency_low_ms is not None and p.latency_high_ms is not None else "")
        return f"{p.latency_ms:.3g} ms{interval} ({p.latency_provenance}: {p.latency_basis})"

    def to_text(self) -> str:
        b, p = self.baseline, self.projected
        lines = [f"Plan for {self.model} on {self.target} ({self.bound}-bound; latency "
                 f"{'predicted' if b.latency_provenance != 'analytic' else 'on the roofline'}, "
                 "memory and accuracy estimated; nothing measured)"]
        lines.append(f"  baseline: {self._latency_text(b)}, {b.memory_bytes / 1e6:.3g} MB at "
                     f"{b.precision}")
        if self.already_met:
            lines.append("  The baseline already meets the constraints on the figures above: "
                         "no compression needed; confirm with 'edgeprof profile' or "
                         "'edgeprof optimize', which measure.")
        for i, s in enumerate(self.steps, 1):
            lines.append(f"  {i}. {s.describe()} - {s.reason}")
        if not self.already_met:
            lines.append(f"  projected: {self._latency_text(p)}, {p.memory_bytes / 1e6:.3g} MB, "
                         f"expected accuracy drop {p.accuracy_drop_pp:.2g} pp")
        budget = self.constraints.latency_budget_ms
        if budget is not None and "latency_budget_ms" not in self.failing and \
                "latency_budget_ms" not in self.undecided:
            lines.append(f"  latency budget: {p.latency_verdict(budget).text}")
        for name in self.failing:
            lines.append(f"  FAILS {name}: {self.failing_reasons.get(name, '')}")
        for name, why in self.undecided.items():
            lines.append(f"  UNDECIDED {name}: {why}")
        for w in self.warnings:
            lines.append(f"  warning [{w.code}]: {w.message}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


def precision_bits(name: str) -> int:
    """Bit width of a canonical precision's weights (fp32 -> 32, int8_dynamic -> 8)."""
    return int(round(PRECISIONS[name].weight_bytes * 8)) if name in PRECISIONS else 32


# --------------------------------------------------------------------------- context
class RouterContext:
    """What a rule sees: the inputs, the data, the steps chosen so far, and a projector."""

    def __init__(self, estimate: Any, target: Any, constraints: Constraints,
                 backends: dict[str, type], data: dict[str, Any], latency_of: Any = None,
                 threads: int | None = None):
        self.estimate = estimate
        self.target = target
        self.threads = threads  # the board threads asked (None: all its cores)
        self.constraints = constraints
        self.backends = dict(backends)
        self.data = data
        self.latency_of = latency_of  # (precision, backend or None) -> LatencyFigure | None
        self.steps: list[Step] = []
        self.warnings: list[WarningRecord] = []
        self.notes: list[str] = []
        self._base = self._baseline_parts()

    # -- data ---------------------------------------------------------------------
    def param(self, rule: str, key: str, default: Any = None) -> Any:
        return self.data.get("rules", {}).get(rule, {}).get(key, default)

    def by_kind(self, table: Any, default: Any = None) -> Any:
        """Look up the target's kind in a ``{kind: value}`` table from the data."""
        if isinstance(table, dict):
            return table.get(self.target.kind, default)
        return default

    def prior(self, *path: str, default: Any = None) -> Any:
        d: Any = self.data.get("priors", {})
        for k in path:
            if not isinstance(d, dict) or k not in d:
                return default
            d = d[k]
        return d

    @property
    def class_default(self) -> dict[str, Any]:
        """Seed 003's default strategy for the target's strategy class."""
        return dict(self.data.get("defaults", {}).get(self.target.strategy_class, {}))

    @property
    def bound(self) -> str:
        return str(getattr(self.estimate, "bound", "") or "unknown")

    @property
    def device_names(self) -> list[str]:
        return list(self.data.get("kind_devices", {}).get(self.target.kind, []))

    # -- steps --------------------------------------------------------------------
    def step(self, kind: str) -> Step | None:
        return next((s for s in reversed(self.steps) if s.kind == kind), None)

    def replace_step(self, new: Step) -> None:
        for i, s in enumerate(self.steps):
            if s.kind == new.kind:
                self.steps[i] = new
                return
        self.steps.append(new)

    def warn(self, code: str, message: str) -> None:
        if all(w.code != code for w in self.warnings):
            self.warnings.append(WarningRecord(code, message))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # -- backends -----------------------------------------------------------------
    def suitable_backends(self) -> list[tuple[str, type]]:
        """The runtimes (registered backends and prediction-only families) that run on one of
        this target's processors (``data/runtimes.toml``, as ``predict`` reads it), preferred
        first."""
        from edgeprof.profilers.predict.runtimes import runs_on

        host = getattr(self.target, "is_host", False)
        ok = {n: c for n, c in self.backends.items()
              if (host and not getattr(c, "prediction_only", False))
              or (not host and runs_on(self.target, n, cls=c))}
        preferred = [n for n in self.target.preferred_backends if n in ok]
        others = sorted(n for n in ok if n not in preferred)
        return [(n, ok[n]) for n in preferred + others]

    def best_backend(self, precision: str, names: list[str]) -> str | None:
        """Of ``names`` (backends that run ``precision``), the one with the best figure:
        measured, then predicted, then uncalibrated, then the fastest; the first without a
        ``latency_of``."""
        if not names:
            return None
        if self.latency_of is None:
            return names[0]
        scored = []
        for i, n in enumerate(names):
            fig = self.latency_of(precision, n)
            scored.append((sort_key(fig.provenance, fig.value_ms) if fig else (9, 0.0), i, n))
        return min(scored)[2]

    @staticmethod
    def backend_precisions(cls: type) -> tuple[str, ...]:
        return tuple(getattr(getattr(cls, "capabilities", None), "precisions", ()) or ())

    # -- projection ---------------------------------------------------------------
    def _baseline_parts(self) -> dict[str, float]:
        e, t = self.estimate, self.target
        p0 = getattr(e, "precision", "fp32")
        p0 = p0 if p0 in PRECISIONS else "fp32"
        L0 = float(getattr(e, "roofline_latency_ms", 0.0) or 0.0)
        macs = float(getattr(e, "total_macs", 0) or 0)
        param_bytes = float(getattr(e, "parameter_bytes", 0.0) or 0.0)
        peak_act = float(getattr(e, "peak_activation_bytes", 0.0) or 0.0)
        act_traffic = getattr(e, "activation_bytes", None)
        act_traffic = float(act_traffic) if act_traffic is not None else peak_act
        c0 = getattr(e, "compute_ms", None)
        m0 = getattr(e, "memory_ms", None)
        if c0 is None:
            peak = t.peak_macs(PRECISIONS[p0].compute)
            c0 = macs / peak * 1e3 if peak else 0.0
        if m0 is None:
            m0 = (param_bytes + act_traffic) / t.bandwidth_bytes_per_s * 1e3
        c0, m0 = float(c0), float(m0)
        if getattr(e, "bound", None) == "memory" and m0 <= c0:
            m0 = max(L0, c0 * 1.0000001)
        elif getattr(e, "bound", None) == "compute" and c0 < m0:
            c0 = max(L0, m0 * 1.0000001)
        traffic = param_bytes + act_traffic
        return {"precision": p0, "L0": L0, "c0": c0, "m0": m0, "macs": macs,
                "param_bytes": param_bytes, "peak_act": peak_act,
                "w_share": param_bytes / traffic if traffic > 0 else 0.0,
                "batch": float(getattr(e, "batch_size", 1) or 1)}

    def pruning_factors(self, ptype: str, ratio: float) -> tuple[float, float, float, float]:
        """(compute, weights, activations, accuracy drop pp) of pruning ``ptype`` at ``ratio``
        on this target; N:M and unstructured sparsity speed up only where kernels use it."""
        pr = self.prior("pruning", ptype, default={}) or {}
        cc = float(pr.get("compute_coverage", 0.0))
        accel = {"n:m": "nm_accelerated_kinds", "unstructured": "unstructured_accelerated_kinds"}
        if ptype in accel and self.target.kind not in (self.param("pruning", accel[ptype]) or []):
            cc = 0.0
        return (1 - ratio * cc, 1 - ratio * float(pr.get("weight_coverage", 0.0)),
                1 - ratio * float(pr.get("activation_coverage", 0.0)),
                ratio * float(pr.get("accuracy_drop_pp_at_ratio_1", 0.0)))

    def project(self, extra: list[Step] | tuple[Step, ...] = ()) -> Projection:
        """Project the figures after the steps so far plus ``extra`` (later steps of the
        same kind replace earlier ones)."""
        chosen: dict[str, Step] = {}
        for s in [*self.steps, *extra]:
            chosen[s.kind] = s
        b, t = self._base, self.target
        p0 = PRECISIONS[b["precision"]]
        prec = b["precision"]
        if "precision" in chosen and chosen["precision"].value in PRECISIONS:
            prec = chosen["precision"].value
        p = PRECISIONS[prec]
        rw, ra = p.weight_bytes / p0.weight_bytes, p.activation_bytes / p0.activation_bytes
        pk0, pk = t.peak_macs(p0.compute), t.peak_macs(p.compute)
        fc = pk0 / pk if pk0 and pk else 1.0
        kc = kw = ka = 1.0
        drop = float(self.prior("accuracy_drop_pp", prec, default=0.0) or 0.0) - float(
            self.prior("accuracy_drop_pp", b["precision"], default=0.0) or 0.0)
        if "pruning" in chosen and isinstance(chosen["pruning"].value, dict):
            v = chosen["pruning"].value
            kc, kw, ka, d = self.pruning_factors(v.get("type", ""), float(v.get("ratio", 0.0)))
            drop += d
        batch = int(chosen["batch_size"].value) if "batch_size" in chosen else int(b["batch"])
        rel = batch / b["batch"]
        c = b["c0"] * fc * kc * rel
        mem = b["m0"] * (b["w_share"] * rw * kw + (1 - b["w_share"]) * ra * ka * rel)
        denom = max(b["c0"], b["m0"])
        batch_ms = b["L0"] * max(c, mem) / denom if denom > 0 else b["L0"] * rel
        fps = self.constraints.stream_rate_fps
        wait_ms = (batch - 1) / fps * 1e3 if fps and batch > 1 else 0.0
        throughput = batch / batch_ms * 1e3 if batch_ms > 0 else None
        weights = b["param_bytes"] * rw * kw
        acts = b["peak_act"] * ra * ka * rel
        fits, why = self.device_fit(weights, acts)
        backend = chosen["backend"].value if "backend" in chosen else None
        fig = self.latency_of(prec, backend) if self.latency_of is not None else None
        if fig is None:
            return Projection(batch_ms + wait_ms, batch_ms, throughput, weights, acts,
                              max(drop, 0.0), prec, batch, fits, why, backend=backend)
        # the figure is for the model at this precision, batch as estimated, unpruned: the
        # other steps scale it as they scale the roofline
        plain = b["L0"] * max(b["c0"] * fc, b["m0"] * (b["w_share"] * rw + (1 - b["w_share"])
                                                         * ra)) / denom if denom > 0 else 0.0
        scale = batch_ms / plain if plain > 0 else 1.0
        f_ms = fig.value_ms * scale
        lo = fig.low_ms * scale if fig.low_ms is not None else None
        hi = fig.high_ms * scale if fig.high_ms is not None else None
        throughput = batch / f_ms * 1e3 if f_ms > 0 else None
        scaled = abs(scale - 1) > 1e-9
        basis = fig.basis + (f"; x{scale:.3g} for the steps it does not see (roofline)"
                             if scaled else "")
        # scaled (or with a batch's wait) it is no longer the configuration's prediction but
        # a figure derived from it: estimated (a guess or a roofline keeps its lower rank)
        prov = fig.provenance if not (scaled or wait_ms) else \
            max((fig.provenance, "estimated"), key=rank)
        return Projection(f_ms + wait_ms, f_ms, throughput, weights, acts, max(drop, 0.0), prec,
                          batch, fits, why, latency_provenance=prov,
                          latency_low_ms=lo + wait_ms if lo is not None else None,
                          latency_high_ms=hi + wait_ms if hi is not None else None,
                          latency_basis=basis, backend=fig.backend or backend)

    def device_fit(self, weight_bytes: float, activation_bytes: float) -> tuple[bool, str]:
        """Whether weights and activations fit the target's memories: weights in flash and
        activations in SRAM where the descriptor has them, otherwise both in RAM."""
        t = self.target
        flash = float(t.flash.value) if getattr(t, "flash", None) else None
        sram = float(t.sram.value) if getattr(t, "sram", None) else None
        ram = float(t.ram.value)
        if flash is None and sram is None:
            need = weight_bytes + activation_bytes
            from edgeprof.profilers.estimate.analytic import bytes_text

            return need <= ram, f"{bytes_text(need)} needed of {bytes_text(ram)} RAM"
        w_cap = flash if flash is not None else ram
        a_cap = sram if sram is not None else ram
        ok = weight_bytes <= w_cap and activation_bytes <= a_cap
        return ok, (f"weights {weight_bytes / 1e3:.4g} kB of {w_cap / 1e3:.4g} kB "
                    f"{'flash' if flash is not None else 'RAM'}, activations "
                    f"{activation_bytes / 1e3:.4g} kB of {a_cap / 1e3:.4g} kB "
                    f"{'SRAM' if sram is not None else 'RAM'}")

    def undecided(self, proj: Projection) -> dict[str, str]:
        """Constraints the figures cannot decide: a roofline (a lower bound) that meets a
        latency budget or a stream rate says nothing about the real latency."""
        c = self.constraints
        out: dict[str, str] = {}
        if proj.latency_provenance != "analytic":
            return out
        if c.latency_budget_ms is not None:
            v = proj.latency_verdict(c.latency_budget_ms)
            if v.met is None:
                out["latency_budget_ms"] = v.text
        if c.stream_rate_fps is not None and (proj.throughput_fps or 0.0) >= c.stream_rate_fps:
            out["stream_rate_fps"] = (f"the roofline's {proj.throughput_fps:.3g} inferences/s "
                                      "is an upper bound: cannot say the stream rate is kept")
        return out

    def failing(self, proj: Projection) -> dict[str, str]:
        """Which constraints ``proj`` fails, with the figures that say so."""
        c = self.constraints
        out: dict[str, str] = {}
        if c.latency_budget_ms is not None:
            v = proj.latency_verdict(c.latency_budget_ms)
            if v.met is False:
                out["latency_budget_ms"] = "projected " + v.text
        if c.stream_rate_fps is not None and (proj.throughput_fps or 0.0) < c.stream_rate_fps:
            out["stream_rate_fps"] = (f"projected {proj.throughput_fps or 0:.3g} inferences/s "
                                      f"({proj.latency_provenance}) < stream rate "
                                      f"{c.stream_rate_fps:.3g} fps")
        if c.memory_budget_bytes is not None and proj.memory_bytes > c.memory_budget_bytes:
            out["memory_budget_bytes"] = (f"projected {proj.memory_bytes / 1e6:.3g} MB > budget "
                                          f"{c.memory_budget_bytes / 1e6:.3g} MB")
        if not proj.fits_device:
            out["device_memory"] = f"does not fit the target: {proj.device_memory_note}"
        if proj.accuracy_drop_pp > c.max_accuracy_drop + 1e-12:
            out["max_accuracy_drop"] = (f"expected drop {proj.accuracy_drop_pp:.2g} pp > "
                                        f"{c.max_accuracy_drop:.2g} pp")
        return out

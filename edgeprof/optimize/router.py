"""The router: from an estimate, a target and the user's constraints to an ordered plan.

The decision paths are data (``edgeprof/targets/strategies.toml``: seed 003's defaults per
strategy class and its failure-mode table, seed 004's GPU / CPU / edge paths as rule
parameters) plus small rule objects registered through the ``edgeprof_router_rules`` hook
(the built-ins live in :mod:`edgeprof.optimize.rules`). A rule is any object with a
``name`` and ``apply(context) -> list[Step]``; optional ``order`` (lower runs first,
default 50) and ``stage`` (``"deploy"`` runs always, ``"compress"`` only while a constraint
still fails, ``"check"`` always, last). A rule with the name of a built-in replaces it.

Nothing here branches on a target's id or a backend's name: rules read the target's kind,
strategy and figures, the estimate (memory- or compute-bound, roofline latency, bytes) and
the constraints. The router projects each candidate step with the roofline split into its
compute and memory parts (:meth:`RouterContext.project`). Where the caller gives a
``latency_of(precision, backend)`` (``recommend_plan`` does: the calibrated board
prediction of :func:`edgeprof.profilers.predict.predict_latency`), the latency it judges is
that figure -- measured, then predicted, then uncalibrated, in that order of preference
(:mod:`edgeprof.core.provenance`) -- scaled by the roofline's projection of the steps
(pruning, batch) that a prediction does not see; only without one is it the roofline, which
can show a budget missed but never met.

No heavy import: the estimate is duck-typed (``roofline_latency_ms``, ``bound``,
``parameter_bytes``, ``peak_activation_bytes``, ``total_macs``, ``precision`` and, when
present, ``compute_ms``, ``memory_ms``, ``activation_bytes``, ``batch_size``, ``layers``,
``memory_capacity``).

The value types and the rules' context are in :mod:`edgeprof.optimize.router_context`; here
the data file, the rules' collection, :func:`recommend` and :func:`check_feasible`. Every
name is importable from here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from edgeprof.core.errors import PluginError, UserError
from edgeprof.optimize.router_context import (CONSTRAINT_NAMES, STAGES, STEP_KINDS, Constraints,
                                              LatencyFigure, Plan, Projection, RouterContext,
                                              Step, precision_bits)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

STRATEGIES_FILE = Path(__file__).resolve().parents[1] / "targets" / "strategies.toml"


# ------------------------------------------------------------------------------ data
_DATA_CACHE: dict[str, dict[str, Any]] = {}


def load_strategies(path: str | Path | None = None) -> dict[str, Any]:
    """The router's data file (defaults, failure modes, rule parameters, priors)."""
    from edgeprof.core.errors import ConfigError

    p = Path(path) if path else STRATEGIES_FILE
    key = str(p)
    if key not in _DATA_CACHE:
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"cannot read: {e.strerror}", path=p) from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"malformed TOML: {e}", path=p) from None
        for section in ("defaults", "failure_modes", "kind_devices", "rules", "priors"):
            if section not in data:
                raise ConfigError("missing section", path=p, field=section)
        _DATA_CACHE[key] = data
    return _DATA_CACHE[key]


# ----------------------------------------------------------------------------- rules
def _check_rule(rule: Any, plugin: str) -> None:
    if not isinstance(getattr(rule, "name", None), str) or not callable(getattr(rule, "apply", None)):
        raise PluginError(f"plugin '{plugin}' registered router rule {rule!r} without a 'name' "
                          "and an 'apply(context)' method")
    if getattr(rule, "stage", "compress") not in STAGES:
        raise PluginError(f"router rule '{rule.name}' ({plugin}) has stage "
                          f"'{rule.stage}'; use one of {', '.join(STAGES)}")


def collect_rules(registry: Any = None, extra: list[Any] | None = None) -> list[Any]:
    """The built-in rules, then those of ``registry`` (its ``router_rules``), then ``extra``;
    a rule with an existing name replaces that one. Sorted by ``order`` (stable)."""
    from edgeprof.optimize import rules as router_rules

    merged: dict[str, Any] = {}
    sources: list[tuple[Any, str]] = [(r, "edgeprof.optimize.rules")
                                      for r in router_rules.default_rules()]
    if registry is not None:
        sources.extend(getattr(registry, "router_rules", []))
    sources.extend((r, "rules=") for r in (extra or []))
    for rule, plugin in sources:
        _check_rule(rule, plugin)
        merged[rule.name] = rule
    return sorted(merged.values(), key=lambda r: float(getattr(r, "order", 50)))


def runs_on_target(cls: type, name: str, target: Any,
                   data: dict[str, Any] | None = None) -> str | None:
    """Why runtime ``name`` cannot run on ``target``, or None where it can: one of the
    target's processors is of a kind the runtime runs on (``data/runtimes.toml``, the data
    ``predict`` reads: TFLite Micro on an MCU, OpenVINO on a Jetson's CPU cluster, TensorRT
    only on a GPU). This machine runs what its registered backends can; a prediction-only
    family runs nowhere here. ``data`` is accepted for compatibility and unused."""
    from edgeprof.profilers.predict.runtimes import processor_for

    if getattr(target, "is_host", False):
        if getattr(cls, "prediction_only", False):
            return f"{name} is prediction-only: edgeprof predicts it on a board, it can't run here"
        return None
    try:
        processor_for(target, name, cls=cls)
    except UserError as e:
        return str(e)
    return None


def label_prediction_only(ctx: RouterContext) -> None:
    """A plan whose runtime is prediction-only says so: its step and a note (it predicts on
    the board; edgeprof can't build or run it, the vendor's tool deploys it)."""
    step = ctx.step("backend")
    cls = ctx.backends.get(str(step.value)) if step is not None else None
    if cls is None or not getattr(cls, "prediction_only", False):
        return
    label = "prediction-only"
    if label not in step.reason:
        step.reason = f"{step.reason} ({label}: predicted on {ctx.target.id}; edgeprof " \
                      f"can't build or run it, its vendor's tool deploys it)"
    step.details["prediction_only"] = True
    ctx.note(f"{step.value} is a prediction-only runtime: the plan's figures are predictions "
             f"for {ctx.target.id}; 'edgeprof optimize' measures only the runtimes it runs")


def recommend(estimate: Any, target: Any, constraints: Constraints | None = None,
              backends: dict[str, type] | None = None, rules: Any = None,
              data: dict[str, Any] | None = None, latency_of: Any = None,
              threads: int | None = None) -> Plan:
    """Plan how to run ``estimate``'s model on ``target`` within ``constraints``.

    ``backends`` maps names to backend classes (default: the registry's). ``rules`` is a
    list of rule objects merged over the built-ins (see :func:`collect_rules`), or a
    plugin Registry; default: the registry's. ``data`` replaces strategies.toml.
    ``latency_of(precision, backend)``: the best latency figure of that configuration on the
    target (a :class:`LatencyFigure`, or None); without it the plan judges on the roofline.
    ``threads``: the board threads the plan is for (the ``threads`` step and ``latency_of``'s
    figures; default all the target's cores).
    """
    constraints = constraints or Constraints()
    if not isinstance(constraints, Constraints):
        raise UserError(f"constraints must be an edgeprof Constraints, got {type(constraints).__name__}")
    if backends is None or rules is None:  # the registry's
        from edgeprof.core.plugins import get_registry
        from edgeprof.optimize.candidates import runtime_classes

        reg = get_registry()
        backends = runtime_classes(reg) if backends is None else backends
        rules = reg if rules is None else rules
    rule_list = (collect_rules(rules) if hasattr(rules, "router_rules")
                 else collect_rules(extra=list(rules)))
    ctx = RouterContext(estimate, target, constraints, backends, data or load_strategies(),
                        latency_of=latency_of, threads=threads)
    baseline = ctx.project()
    already = not ctx.failing(baseline) and not ctx.undecided(baseline)
    for rule in rule_list:
        stage = getattr(rule, "stage", "compress")
        if stage == "compress" and (already or not ctx.failing(ctx.project())):
            continue
        produced = rule.apply(ctx) or []
        for s in produced:
            if not isinstance(s, Step) or s.kind not in STEP_KINDS:
                raise PluginError(f"router rule '{rule.name}' returned {s!r}; rules return "
                                  f"Step objects of kind {', '.join(STEP_KINDS)}")
            s.rule = s.rule or rule.name
            s.stage = stage
            if stage == "compress":
                after = ctx.project([s])
                s.details.setdefault("projected_latency_ms", after.latency_ms)
                s.details.setdefault("projected_memory_bytes", after.memory_bytes)
            if s.kind == "backend":  # one backend: a later rule's choice replaces it
                ctx.replace_step(s)
            else:
                ctx.steps.append(s)
    label_prediction_only(ctx)
    final = ctx.project()
    failing = ctx.failing(final)
    undecided = ctx.undecided(final)
    if already:
        ctx.note(f"the baseline ({baseline.latency_provenance}) already meets every "
                 "constraint; nothing to compress")
    if latency_of is not None and final.latency_provenance == "analytic":
        ctx.note("no calibrated figure for this target and runtime: the latency is the "
                 "roofline, a lower bound (time a few models on the board and run 'edgeprof "
                 "calibrate --measurements')")
    cap = getattr(estimate, "memory_capacity", None) or {}
    if isinstance(cap, dict) and cap.get("fits") is False and baseline.fits_device:
        ctx.note("the estimate's memory check says the model does not fit this target, "
                 "while the router's weights+activations check says it does; trust the "
                 "estimate's (it may count runtime overheads)")
    order = [n for n in CONSTRAINT_NAMES if n in failing]
    return Plan(target=getattr(target, "id", str(target)),
                model=str(getattr(estimate, "model", "model")), bound=ctx.bound,
                constraints=constraints, steps=ctx.steps, warnings=ctx.warnings,
                already_met=already, failing=order,
                failing_reasons={n: failing[n] for n in order}, baseline=baseline,
                projected=final, notes=ctx.notes, rules=[r.name for r in rule_list],
                undecided=undecided)


def check_feasible(plan: Plan) -> Plan:
    """Return ``plan`` if it meets every constraint, else raise ConstraintError (exit 4)
    naming the first failing constraint and why."""
    err = plan.constraint_error()
    if err is not None:
        raise err
    return plan


__all__ = ["CONSTRAINT_NAMES", "Constraints", "LatencyFigure", "Plan", "Projection",
           "RouterContext", "STAGES", "STEP_KINDS", "STRATEGIES_FILE",
           "Step", "check_feasible", "collect_rules", "label_prediction_only",
           "load_strategies", "precision_bits", "recommend", "runs_on_target"]

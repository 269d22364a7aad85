"""The router's built-in rules, registered as a plugin through ``edgeprof_router_rules``.

Each rule is small and reads data (``edgeprof/targets/strategies.toml`` through the
context), the target's kind / strategy / figures, the estimate and the constraints; none
branches on a target's or a backend's name. A user plugin replaces one by returning a rule
with the same ``name``, or adds its own with a new name and an ``order``::

    from edgeprof import hookimpl
    from edgeprof.optimize.router import Step

    class PreferOnnx:
        name = "backend"           # replaces the built-in backend rule
        order = 10
        stage = "deploy"
        def apply(self, ctx):
            return [Step("backend", "onnxruntime", "our fleet standardizes on ONNX Runtime")]

    @hookimpl
    def edgeprof_router_rules():
        return [PreferOnnx()]

Order follows seed 004's paths: the runtime (backend), threads, layout (deploy stage, always),
then precision, pruning, batch size and architecture (compress stage, only while a
constraint still fails), then the failure-mode check of seed 003's table.
"""

from __future__ import annotations

from typing import Any

from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.precision import PRECISIONS
from edgeprof.core.provenance import rank
from edgeprof.optimize.router_context import RouterContext, Step, precision_bits

_LATENCY_LIKE = ("latency_budget_ms", "stream_rate_fps")
_MEMORY_LIKE = ("memory_budget_bytes", "device_memory")


def _fmt_ms(v: float) -> str:
    return f"{v:.3g} ms"


# ------------------------------------------------------------------------- failure modes
def failure_modes(ctx: RouterContext, *, pruning: str | None = None, bits: int | None = None,
                  include_strategy: bool = False) -> list[dict[str, Any]]:
    """Entries of the failure-mode table that apply on this target to a pruning type or a
    bit width (``include_strategy``: also to the target's own recommended strategy)."""
    out = []
    t = ctx.target
    for fm in ctx.data.get("failure_modes", []):
        if t.kind not in fm.get("kinds", []):
            continue
        prunings = [pruning] if pruning else []
        bit_list = [bits] if bits else []
        if include_strategy and fm.get("check_target_strategy"):
            prunings.append(t.strategy.pruning_type)
            bit_list.append(int(t.strategy.quantization_bits))
        hit = False
        if "when_pruning" in fm:
            hit = any(p in fm["when_pruning"] for p in prunings)
        if "when_bits" in fm:
            hit = any(b == fm["when_bits"] for b in bit_list)
            lacks = fm.get("when_target_lacks_peak")
            if lacks and t.peak_macs(lacks) is not None:
                hit = False
        if "when_bits_at_most" in fm:
            hit = any(b <= fm["when_bits_at_most"] for b in bit_list)
        if hit:
            out.append(fm)
    return out


def _warn_mode(ctx: RouterContext, fm: dict[str, Any], context: str = "") -> None:
    ctx.warn(fm["code"], f"{fm.get('device', ctx.target.kind)}: {fm['failure']}"
             f"{context}; mitigation: {fm['mitigation']}")


# ----------------------------------------------------------------------------- deploy
class BackendRule:
    """The first of the target's preferred backends whose declared devices run on the
    target's kind; others that fit follow in name order. Precision comes later and may
    switch to another fitting backend that runs it."""

    name = "backend"
    order = 10
    stage = "deploy"

    def apply(self, ctx: RouterContext) -> list[Step]:
        fitting = ctx.suitable_backends()
        t = ctx.target
        best = self._best_figure(ctx, fitting)
        if best is not None:
            return [best]
        if fitting:
            name, cls = fitting[0]
            preferred = name in t.preferred_backends
            why = (f"first of the target's preferred backends ({', '.join(t.preferred_backends)})"
                   if preferred else "no preferred backend is registered; first registered")
            if not preferred:
                ctx.note(f"none of the target's preferred backends "
                         f"({', '.join(t.preferred_backends)}) is registered")
            return [Step("backend", name, f"{why} whose devices include "
                         f"{'/'.join(ctx.device_names)}",
                         details={"precisions": list(ctx.backend_precisions(cls)),
                                  "devices": list(cls.capabilities.devices)})]
        registered = [n for n in t.preferred_backends if n in ctx.backends]
        ctx.warn("no_backend_for_device",
                 f"no registered backend declares a device for a {t.kind} target "
                 f"({'/'.join(ctx.device_names) or 'none listed'}); edgeprof can estimate, "
                 "not run, on it")
        if registered:
            name = registered[0]
            return [Step("backend", name, "the target's first preferred backend; it does not "
                         "declare this device, so deploy it with the device's own delegate",
                         details={"precisions": list(ctx.backend_precisions(ctx.backends[name]))})]
        return []


    @staticmethod
    def _best_figure(ctx: RouterContext, fitting: list[tuple[str, type]]) -> Step | None:
        """Where the plan has board figures: the runtime with the best figure for the model
        as it is (its precision), of those the target's processors run -- the runtime the
        plan's baseline is, so that the baseline, this step and the next steps' "before"
        are one configuration. None without figures (this machine) or a runtime with one."""
        if ctx.latency_of is None:
            return None
        prec = ctx.estimate.precision
        names = [n for n, c in fitting if prec in ctx.backend_precisions(c)]
        name = ctx.best_backend(prec, names)
        fig = ctx.latency_of(prec, name) if name else None
        if fig is None:
            return None
        cls = dict(fitting)[name]
        runners = ", ".join(names)
        return Step("backend", name,
                    f"the best figure for {prec} of the runtimes {ctx.target.id}'s processors "
                    f"run ({runners}): {_fmt_ms(fig.value_ms)} ({fig.provenance})",
                    details={"precisions": list(ctx.backend_precisions(cls)),
                             "devices": list(cls.capabilities.devices)})


class ThreadsRule:
    """Seed 004 CPU / edge: intra-op threads = the target's cores, inter-op = 1."""

    name = "threads"
    order = 20
    stage = "deploy"

    def apply(self, ctx: RouterContext) -> list[Step]:
        if ctx.target.kind not in (ctx.param("threads", "kinds") or []):
            if ctx.threads is not None:
                ctx.note(f"--threads {ctx.threads}: {ctx.target.id} runs the model on its "
                         f"{ctx.target.kind.replace('edge_', '').upper()}, whose kernels host "
                         "threads do not change; the plan's figures are the same for any "
                         "thread count")
            return []
        cores = int(ctx.target.cores.value)
        inter = int(ctx.param("threads", "inter_op", 1))
        if ctx.threads is not None:  # asked for (--threads): the plan's figures are for it
            return [Step("threads", {"intra_op": int(ctx.threads), "inter_op": inter},
                         f"use the {ctx.threads} thread(s) asked within an operator (of the "
                         f"board's {cores} cores) and {inter} between operators")]
        return [Step("threads", {"intra_op": cores, "inter_op": inter},
                     f"use all {cores} cores within an operator and {inter} between operators "
                     "(no oversubscription)")]


class LayoutRule:
    """The target strategy's layout when it is not the frameworks' default and the model
    has convolutions (channels-last only changes convolution kernels)."""

    name = "layout"
    order = 30
    stage = "deploy"

    def apply(self, ctx: RouterContext) -> list[Step]:
        layout = ctx.target.strategy.layout
        if layout == ctx.param("layout", "default_layout", "NCHW"):
            return []
        layers = getattr(ctx.estimate, "layers", None)
        needs = ctx.param("layout", "needs_op_types") or []
        if layers and needs and not any(any(n in str(getattr(r, "op_type", "")).lower()
                                            for n in needs) for r in layers):
            return []
        return [Step("layout", layout, f"the target's strategy recommends {layout} for a model "
                     "with convolutions", method="channels_last memory format (model and inputs)",
                     details={"strategy_reason": ctx.target.strategy.reason})]


# --------------------------------------------------------------------------- compress
class PrecisionRule:
    """The least aggressive precision (strategies.toml ladder) that the target supports, a
    fitting backend runs, the accuracy budget allows, and that meets the constraints; if
    none meets them, the one that comes closest."""

    name = "precision"
    order = 40
    stage = "compress"

    @staticmethod
    def _switch_reason(ctx: RouterContext, p: str, new: str, old: str | None) -> str:
        """Why the precision step moves the plan from runtime ``old`` to ``new``: ``old``
        does not offer ``p``, or ``new``'s figure for it is the better one (both shown)."""
        runs = f"runs {p} on this target"
        if old is None:
            return runs
        old_cls = ctx.backends.get(old)
        if old_cls is None or p not in ctx.backend_precisions(old_cls):
            return f"{runs} ({old} does not offer it)"
        a, b = (None, None) if ctx.latency_of is None else (ctx.latency_of(p, new),
                                                             ctx.latency_of(p, old))
        if a is None or b is None:
            return runs
        return (f"the best figure for {p} on this target: {_fmt_ms(a.value_ms)} "
                f"({a.provenance}), {old} {_fmt_ms(b.value_ms)} ({b.provenance})")

    def apply(self, ctx: RouterContext) -> list[Step]:
        ladder = list(ctx.param("precision", "ladder") or [])
        cur = ctx.project().precision
        start = ladder.index(cur) + 1 if cur in ladder else 0
        fitting = ctx.suitable_backends()
        runner: dict[str, str] = {}
        for p in ladder[start:]:
            if p not in ctx.target.supported_precisions:
                continue
            names = [n for n, c in fitting if p in ctx.backend_precisions(c)]
            if names or not fitting:  # no backend runs on this device: the target decides
                runner[p] = ctx.best_backend(p, names) or ""
        if not runner:
            ctx.note(f"no precision beyond {cur} is both supported by the target and run by a "
                     "fitting backend")
            return []
        budget = ctx.constraints.max_accuracy_drop
        base_fail = ctx.failing(ctx.project())
        allowed, too_risky = [], []
        def with_runner(p: str) -> list[Step]:
            # a precision is projected on the backend that would run it (the one the step
            # switches to), so its figure is that configuration's prediction, and the step's
            # "after" is the next step's "before"
            steps = [Step("precision", p, "")]
            if runner.get(p):
                steps.insert(0, Step("backend", runner[p], ""))
            return steps

        for p in runner:
            proj = ctx.project(with_runner(p))
            (too_risky if proj.accuracy_drop_pp > budget + 1e-12 else allowed).append((p, proj))
        if not allowed:
            ctx.note(f"every lower precision's expected accuracy drop exceeds max_accuracy_drop "
                     f"{budget:g} pp")
            return []
        chosen = next(((p, pr) for p, pr in allowed if not ctx.failing(pr)), None)
        meets = chosen is not None
        current = ctx.step("backend")
        if chosen is not None and current is not None:  # an equivalent precision the chosen
            same = [(q, qp) for q, qp in allowed       # backend already runs wins
                    if qp.latency_ms == chosen[1].latency_ms
                    and qp.memory_bytes == chosen[1].memory_bytes
                    and qp.accuracy_drop_pp == chosen[1].accuracy_drop_pp
                    and runner.get(q) == current.value]
            chosen = same[0] if same else chosen
        if chosen is None:  # closest: fewest failing constraints, then the best-founded
            # figure (a calibrated prediction before a guess), then latency, then memory
            chosen = min(allowed, key=lambda x: (len(ctx.failing(x[1])),
                                                 rank(x[1].latency_provenance),
                                                 x[1].latency_ms, x[1].memory_bytes))
        p, proj = chosen
        before = ctx.project()
        if not meets and proj.latency_ms >= before.latency_ms and \
                proj.memory_bytes >= before.memory_bytes:
            return []
        for q, qp in too_risky:
            if not ctx.failing(qp).keys() - {"max_accuracy_drop"}:
                ctx.note(f"{q} would meet the other constraints, but its expected accuracy "
                         f"drop ({qp.accuracy_drop_pp:.2g} pp) exceeds max_accuracy_drop")
                break
        bits = precision_bits(p)
        method = (ctx.param("precision", "methods") or {}).get(p, PRECISIONS[p].description)
        for fm in failure_modes(ctx, bits=bits):
            if fm.get("quantization_method"):
                method = fm["quantization_method"]
        what = ", ".join(sorted(base_fail))
        if meets and ctx.undecided(proj):  # a roofline under a budget: not met, undecided
            verdict = f"its roofline, a lower bound, cannot decide {what}"
        elif meets:
            verdict = f"meets {what}"
        else:
            verdict = f"the closest to {what}"
        reason = (f"{ctx.bound}-bound; {p} brings the projected latency "
                  f"{_fmt_ms(before.latency_ms)} -> {_fmt_ms(proj.latency_ms)} "
                  f"({proj.latency_provenance}) and memory "
                  f"{before.memory_bytes / 1e6:.3g} -> {proj.memory_bytes / 1e6:.3g} MB "
                  f"({verdict}), expected drop {proj.accuracy_drop_pp:.2g} pp")
        if p == ctx.target.strategy.precision:
            reason += "; it is also the target's recommended precision"
        steps = [Step("precision", p, reason, method=method, details={"bits": bits})]
        if runner[p] and (current is None or current.value != runner[p]):
            old = current.value if current else None
            ctx.replace_step(Step("backend", runner[p], self._switch_reason(ctx, p, runner[p], old),
                                  rule=self.name, stage="deploy"))
        return steps


class PruningRule:
    """The target strategy's pruning type (seed 003 table replaces one that fails on this
    device), at the strategies.toml ratio, when it helps the constraints that still fail;
    otherwise the fallback type; the ratio halves until the accuracy budget allows it."""

    name = "pruning"
    order = 50
    stage = "compress"

    def apply(self, ctx: RouterContext) -> list[Step]:
        ptype = ctx.target.strategy.pruning_type
        source = "the target's strategy"
        if ptype == "none":
            ctx.note("the target's strategy recommends no pruning")
            return []
        for fm in failure_modes(ctx, pruning=ptype):
            _warn_mode(ctx, fm, f" (the target recommends {ptype} pruning)")
            if fm.get("replace_with"):
                ptype, source = fm["replace_with"], f"seed 003 mitigation for {fm['code']}"
        before = ctx.project()
        failing = set(ctx.failing(before))
        ratio0 = float(ctx.param("pruning", "ratio", 0.5))
        candidates = [(ptype, source)] + [(f, "fallback: " + ptype + " cannot help here")
                                          for f in ctx.param("pruning", "fallback") or []
                                          if f != ptype]
        for typ, why in candidates:
            for fm in failure_modes(ctx, pruning=typ):
                if fm.get("replace_with"):
                    typ = fm["replace_with"]
            ratio = ratio0
            while ratio >= ratio0 / 8:
                step = self._step(ctx, typ, ratio, why)
                after = ctx.project([step])
                if "max_accuracy_drop" not in ctx.failing(after):
                    break
                ratio /= 2
            else:
                ctx.note(f"{typ} pruning exceeds the accuracy budget at every ratio tried")
                continue
            helps = (failing & set(_LATENCY_LIKE) and after.latency_ms < before.latency_ms) or \
                (failing & set(_MEMORY_LIKE) and after.memory_bytes < before.memory_bytes)
            if helps:
                return [step]
            ctx.note(f"{typ} pruning does not reduce what fails ({', '.join(sorted(failing))}) "
                     f"on a {ctx.target.kind} target with dense kernels")
        return []

    @staticmethod
    def _step(ctx: RouterContext, typ: str, ratio: float, why: str) -> Step:
        value: dict[str, Any] = {"type": typ, "ratio": ratio}
        if typ == "n:m":
            n, m = ctx.param("pruning", "nm", [2, 4])
            value = {"type": typ, "ratio": 1 - n / m, "pattern": f"{n}:{m}"}
        mult = ctx.by_kind(ctx.param("pruning", "channel_multiple"))
        if mult and typ in ("channel", "structured"):
            value["channel_multiple"] = int(mult)
        method = {"n:m": "semi-structured N:M masks along the input dimension",
                  "unstructured": "magnitude (L1) pruning, made permanent",
                  "structured": "L1-norm channel pruning of block-internal channels",
                  "channel": "L1-norm channel pruning of block-internal channels"}.get(typ)
        return Step("pruning", value, f"{why}; {ctx.bound}-bound model, fine-tune afterwards",
                    method=method)


class BatchSizeRule:
    """For a stream rate: the smallest batch (powers of two up to the kind's maximum) whose
    throughput keeps up, within the latency budget and memory. Seed 004: GPUs batch, CPUs
    stay small, edge devices run batch 1."""

    name = "batch_size"
    order = 60
    stage = "compress"

    def apply(self, ctx: RouterContext) -> list[Step]:
        fps = ctx.constraints.stream_rate_fps
        max_batch = int(ctx.by_kind(ctx.param("batch_size", "max_batch"), 1))
        if not fps or max_batch <= 1:
            return []
        before = ctx.project()
        if (before.throughput_fps or 0) >= fps:
            return []
        best = None
        for b in (2 ** k for k in range(1, max_batch.bit_length())):  # powers of 2 <= max
            s = Step("batch_size", b, "")
            proj = ctx.project([s])
            fails = ctx.failing(proj)
            if not fails:
                best = (b, proj)
                break
            if not fails.keys() & {"latency_budget_ms", "memory_budget_bytes", "device_memory"} \
                    and (best is None or (proj.throughput_fps or 0) > (best[1].throughput_fps or 0)):
                best = (b, proj)
        if best is None or (best[1].throughput_fps or 0) <= (before.throughput_fps or 0):
            return []
        b, proj = best
        return [Step("batch_size", b, f"batching amortizes weight traffic: "
                     f"{before.throughput_fps or 0:.3g} -> {proj.throughput_fps or 0:.3g} "
                     f"inferences/s for a {fps:g} fps stream, request latency "
                     f"{_fmt_ms(proj.latency_ms)} including the wait to fill the batch")]


class ArchitectureRule:
    """When compression cannot meet latency or memory: a smaller architecture, with the MAC
    and weight budget it must fit (seed 004: edge "model too large for device", GPU/CPU
    "if still not meeting requirements")."""

    name = "architecture"
    order = 70
    stage = "compress"

    def apply(self, ctx: RouterContext) -> list[Step]:
        proj = ctx.project()
        fails = ctx.failing(proj)
        c = ctx.constraints
        value: dict[str, Any] = {}
        macs = float(getattr(ctx.estimate, "total_macs", 0) or 0)
        if fails.keys() & set(_LATENCY_LIKE):
            if "latency_budget_ms" in fails:
                ratio = c.latency_budget_ms / proj.latency_ms
            else:
                ratio = (proj.throughput_fps or 0) / c.stream_rate_fps
            value["latency_reduction"] = round(1 / ratio, 3) if ratio > 0 else None
            if ctx.bound == "memory":  # time goes to moving bytes: fewer weights
                value["max_parameter_bytes"] = int(proj.weight_bytes * ratio)
            else:  # time goes to arithmetic: fewer MACs
                value["max_macs"] = int(macs * ratio)
        if fails.keys() & set(_MEMORY_LIKE):
            limits = [c.memory_budget_bytes] if c.memory_budget_bytes else []
            cap = ctx.target.flash or ctx.target.ram
            limits.append(float(cap.value))
            scale = min(limits) / proj.memory_bytes if proj.memory_bytes else 1.0
            cap_w = int(proj.weight_bytes * min(scale, 1.0))
            value["max_parameter_bytes"] = min(cap_w, value.get("max_parameter_bytes", cap_w))
        if not value:
            return []
        too_large = ctx.by_kind(ctx.param("architecture", "too_large_ms"))
        reason = (f"{ctx.bound}-bound; compression alone cannot meet "
                  + ", ".join(sorted(fails)))
        if too_large and proj.latency_ms > float(too_large):
            reason += (f"; over {too_large:g} ms per inference on a {ctx.target.kind} target "
                       "the model is too large for the device")
        return [Step("architecture", value, reason,
                     method="a smaller architecture (depthwise-separable, fewer channels or "
                            "layers) retrained or distilled")]


# ------------------------------------------------------------------------------ check
class FailureModeRule:
    """Seed 003's failure-mode table against the plan's steps and the target's strategy."""

    name = "failure_modes"
    order = 90
    stage = "check"

    def apply(self, ctx: RouterContext) -> list[Step]:
        prec = ctx.step("precision")
        prune = ctx.step("pruning")
        bits = precision_bits(prec.value) if prec else None
        ptype = prune.value.get("type") if prune and isinstance(prune.value, dict) else None
        for fm in failure_modes(ctx, pruning=ptype, bits=bits):
            _warn_mode(ctx, fm, " (in this plan)")
        for fm in failure_modes(ctx, include_strategy=True):
            _warn_mode(ctx, fm, " (the target's recommended strategy)")
        return []


def default_rules() -> list[Any]:
    return [BackendRule(), ThreadsRule(), LayoutRule(), PrecisionRule(), PruningRule(),
            BatchSizeRule(), ArchitectureRule(), FailureModeRule()]


@hookimpl
def edgeprof_router_rules():
    return default_rules()

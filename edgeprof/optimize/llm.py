"""The router for a generative model: which weight format (and runtime) to use on a target.

:func:`choose_llm_format` lists every format each generative backend makes
(``edgeprof.profilers.estimate.llm.formats_for``) and applies three rules in order:

1. **RAM**: keep a format when its weights + the KV cache for ``context_tokens`` + the
   runtime allowance fit the target's usable RAM (the estimate's fit rule: RAM less the OS
   reserve; analytic).
2. **tokens/s budget** (``tokens_per_s``, when given): keep a format when its predicted
   decode rate on the target (``edgeprof.profilers.predict.llm.predict_llm``, llama-bench's
   ``tg`` from an empty cache) reaches the budget, judged as tensor plans judge a latency
   budget (:func:`edgeprof.core.provenance.rate_verdict`, :func:`~edgeprof.core.provenance.
   budget_verdict`'s rule for a rate): the prediction's value decides, the interval says how
   sure (met even at its low end, likely, or missed though its high end would meet it), and
   the verdict's text is the candidate's and the reasons' wording.
3. **most bits**: among those left, the format with the widest quantized weights, then the
   most stored bits per parameter (q4_k_m's 6-bit tensors put it above q4_0); a tie
   goes to the faster predicted decode. The ladder stops at 8-bit weights
   (:data:`LADDER_TOP_BITS`: q8_0, which llama.cpp documents as near-lossless): a wider
   format (f16, bf16, f32) is held out (``not_asked``) unless the user names it
   (``precisions``), or no format on the ladder is offered. Without ``tokens_per_s`` the
   interactive floor (:data:`INTERACTIVE_FLOOR_TOKENS_PER_S`, 10 tok/s of decode: about
   reading speed) stands in for it, stated in the reasons; where nothing reaches the floor
   the fastest format that fits is chosen and the reasons say so.
   A chosen format below 4 bits carries a quality caveat.

The processor: ``device=None`` is the one the runtimes would use on the target (its GPU on
a Jetson, where a backend runs it there), said in the notes with the other processor's
figure beside the choice.

The first reason names the constraint that bound the choice (``RAM fit``, ``tokens/s
budget`` or ``most bits that fit``). When nothing fits the verdict is ``does_not_fit``, with
the smallest format's numbers; when formats fit but none reaches the budget it is
``budget_not_met`` and the choice is the fastest format that fits (the closest).

This stays apart from the tensor router (:mod:`edgeprof.optimize.router`): that one plans
compression steps for a fixed-shape graph (backend / precision / pruning ... projected on
the roofline), while a generative model's choice is one pick from a table of ready-made
formats, each with its own bytes and prediction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from edgeprof.core.errors import ConstraintError, EdgeprofError, UnknownNameError, UserError
from edgeprof.core.llm import LLMModel
from edgeprof.core.provenance import rate_verdict

VERDICTS = ("ok", "does_not_fit", "budget_not_met")
#: decode tok/s a format must reach when the user sets no --tokens-per-s (about reading
#: speed: a chat reply appears faster than it is read)
INTERACTIVE_FLOOR_TOKENS_PER_S = 10.0
#: formats whose quantized weights are narrower than this get a quality caveat
QUALITY_CAVEAT_BELOW_BITS = 4
#: the top of the "most bits" ladder: 8-bit weights. llama.cpp documents q8_0 as
#: near-lossless (llama-quantize's table, tools/quantize/quantize.cpp: "Q8_0 7.96G, +0.0026 ppl
#: @ Llama-3-8B", beside "F16 14.00G, +0.0020 ppl @ Mistral-7B"): wider weights cost bytes
#: per token, so decode speed, for no quality a user can see, and are chosen only when asked
LADDER_TOP_BITS = 8
LADDER_WHY = (f"the most-bits ladder stops at {LADDER_TOP_BITS}-bit weights: llama.cpp "
              "documents q8_0 as near-lossless (+0.0026 perplexity on Llama-3-8B in "
              "llama-quantize's table), so wider weights cost decode speed for no quality a "
              "user can see")
CANDIDATE_STATUSES = ("chosen", "ok", "does_not_fit", "below_budget", "no_prediction",
                      "not_asked", "unsupported")


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def _rate(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


@dataclass
class LLMCandidate:
    """One (backend, format) on the target: bytes at the context asked (analytic), whether
    it fits, and its predicted decode rate."""

    backend: str
    format: str
    #: stored bits per parameter (weight bytes x 8 / parameters: scales, zero points and
    #: layers kept wider included); the format's nominal figure until it is estimated
    bits_per_weight: float
    #: the integer width of the quantized layer weights (4 for q4_0, q4_k_m and int4)
    weight_bits: int = 0
    weight_bytes: int | None = None
    kv_cache_bytes: int | None = None
    runtime_overhead_bytes: int | None = None
    total_bytes: int | None = None
    fits: bool | None = None
    max_context_tokens: int | None = None
    decode_tokens_per_s: dict[str, Any] | None = None
    prefill_tokens_per_s: dict[str, Any] | None = None
    meets_budget: bool | None = None
    #: the budget (or interactive floor) verdict on the decode prediction (core/provenance)
    budget_verdict: dict[str, Any] | None = None
    status: str = "ok"
    why: str = ""

    @property
    def decode(self) -> float | None:
        v = (self.decode_tokens_per_s or {}).get("value")
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    @property
    def decode_high(self) -> float | None:
        v = (self.decode_tokens_per_s or {}).get("high")
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    @property
    def label(self) -> str:
        return f"{self.format} on {self.backend}"

    @property
    def rank(self) -> tuple[int, float]:
        """"Most bits": the quantized width first, then the stored bits per parameter (q4_k_m,
        with its 6-bit tensors, above q4_0)."""
        return (self.weight_bits, self.bits_per_weight)

    def rate_text(self) -> str:
        f = self.decode_tokens_per_s or {}
        if self.decode is None:
            return "no prediction"
        lo, hi = f.get("low"), f.get("high")
        iv = f" ({_rate(lo)}–{_rate(hi)})" if lo is not None and hi is not None else ""
        return f"{_rate(self.decode)} tok/s{iv}, {f.get('provenance', 'predicted')}"

    def to_dict(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)},  # in field order
                "provenance": {"bytes": "analytic",
                               "decode_tokens_per_s": (self.decode_tokens_per_s or {}).get(
                                   "provenance")}}


@dataclass
class LLMChoice:
    """The router's answer: the format and backend, the verdict, the reasons (the first
    names the binding constraint) and every candidate considered."""

    model: str
    target: str
    device: str
    context_tokens: int
    tokens_per_s: float | None
    prompt_tokens: int
    gen_tokens: int
    ram_bytes: float
    usable_bytes: int
    verdict: str
    backend: str | None
    format: str | None
    reasons: list[str]
    candidates: list[LLMCandidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    threads: int | None = None  # the board threads asked (None: all its big cores)
    #: ``optimize``: the shortlisted formats' runs measured on this machine (run dicts);
    #: None for ``recommend``, which measures nothing
    measured_here: list[dict[str, Any]] | None = None

    @property
    def chosen(self) -> LLMCandidate | None:
        return next((c for c in self.candidates if c.status == "chosen"), None)

    def constraint_error(self) -> ConstraintError | None:
        """The ConstraintError (exit 4) when the RAM or the asked tokens/s cannot be met (the
        closest choice is still this one), naming the binding constraint; else None."""
        if self.verdict not in ("does_not_fit", "budget_not_met"):
            return None
        return ConstraintError((self.reasons or [self.verdict])[0])

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "edgeprof.llm_choice/1", "model": self.model, "target": self.target,
                "device": self.device, "threads": self.threads,
                "context_tokens": self.context_tokens,
                "tokens_per_s": self.tokens_per_s, "prompt_tokens": self.prompt_tokens,
                "gen_tokens": self.gen_tokens, "ram_bytes": self.ram_bytes,
                "usable_bytes": self.usable_bytes, "verdict": self.verdict,
                "backend": self.backend, "format": self.format,
                "reasons": list(self.reasons),
                "candidates": [c.to_dict() for c in self.candidates],
                "notes": list(self.notes),
                **({} if self.measured_here is None else {"measured_here": self.measured_here})}


# --------------------------------------------------------------------------- inputs
def _target(target: Any) -> Any:
    if isinstance(target, str):
        from edgeprof.targets import get_target

        return get_target(target)
    if target is None or not hasattr(target, "ram"):
        raise UserError("choosing a format for a generative model needs a target (e.g. "
                        "raspberry_pi_5); 'edgeprof targets' lists them")
    return target


def _backend_formats(names: Sequence[str | type] | str | None, notes: list[str]
                     ) -> list[tuple[str, type | None, dict[str, Any]]]:
    """(name, registered class or None, {format: FormatInfo}) per generative backend: the
    formats each makes as it declares them (``format_layouts``), read through the registry.
    ``names`` may also hold backend classes (a user's ``--plugins`` backend the default
    registry does not list): their own declarations are read."""
    from edgeprof.core.plugins import get_registry
    from edgeprof.profilers.estimate.llm import backend_formats, formats_for

    explicit = names is not None
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if explicit and not names:
        raise UserError("no backend given; name one or more generative backends ("
                        f"{', '.join(backend_formats())})")
    try:
        classes = {n: e.cls for n, e in get_registry().backends_for("generate").items()}
    except EdgeprofError:  # a broken plugins file: the built-ins' formats are still known
        if not explicit:
            raise
        classes = {}
    out = []
    for item in dict.fromkeys(names if explicit else classes):
        n, cls = (item, classes.get(item)) if isinstance(item, str) else (item.name, item)
        try:
            table = formats_for(cls if cls is not None else n)
        except UnknownNameError:
            if explicit:
                raise
            notes.append(f"backend {n}: edgeprof has no byte model of its formats; left out")
            continue
        out.append((n, cls, table))
    return out


def _unsupported(cls: type | None, model: LLMModel, fmt: str, device: str) -> str | None:
    """The runtime's own reason it can't run this architecture/source in ``fmt`` on a board's
    ``device`` (``supports_on_board``: its board devices, not this machine's build)."""
    if cls is None:
        return None
    try:
        return cls().supports_on_board(model, fmt, device)
    except EdgeprofError as e:
        return str(e)


# --------------------------------------------------------------------------- the choice
def default_device(model: LLMModel, tgt: Any,
                   backends: Sequence[str] | str | Mapping[str, type] | None,
                   notes: list[str]) -> str:
    """The processor the runtimes would use on ``tgt``: its implied one (the GPU of a Jetson)
    where one of the backends runs there, else its CPU. ``backends``: names, or name ->
    class (a plugin's backend without a byte model of its formats: its own ``formats``)."""
    implied = tgt.implied_device
    if implied == "cpu":
        return "cpu"
    rows = ([(n, c, tuple(getattr(c, "formats", ()))) for n, c in backends.items()]
            if isinstance(backends, Mapping) else _backend_formats(backends, []))
    for name, cls, table in rows:
        if cls is not None and any(_unsupported(cls, model, fmt, implied) is None
                                   for fmt in table):
            notes.append(f"device {implied}: {tgt.id}'s {implied} processor, which {name} "
                         f"runs on; --device cpu for its CPU")
            return implied
    return "cpu"


def choose_llm_format(model: LLMModel | str, target: Any, *, device: str | None = None,
                      backends: Sequence[str] | str | None = None,
                      context_tokens: int | None = None, tokens_per_s: float | None = None,
                      prompt_tokens: int = 512, gen_tokens: int = 128,
                      precisions: Sequence[str] | str | None = None,
                      threads: int | None = None, calibration: Any = None) -> LLMChoice:
    """The format (and backend) for ``model`` (an ``LLMModel`` or its spec, ``llm:NAME``
    ...) on ``target``'s processor ``device`` (on
    ``threads`` of its cores; default all its big cores): fits the
    RAM with room for ``context_tokens`` (default: prompt + generated tokens), reaches
    ``tokens_per_s`` of predicted decode when given, else keeps the most bits. ``backends``:
    names of generative backends (default: every registered one). Bad input (a context
    longer than the model's maximum, a non-positive budget, an unknown device or backend) is
    a one-line :class:`UserError`; a model that fits nowhere is a verdict, not an error.
    ``calibration``: an LLM calibration file used before the search (``predict_llm``)."""
    from edgeprof.profilers.estimate.llm import (estimate_llm, kv_cache_bytes,
                                                 max_context_tokens, parameter_count,
                                                 runtime_overhead_bytes, usable_ram_bytes)
    from edgeprof.zoo.llm import resolve_llm

    model = resolve_llm(model)
    spec = model.spec
    tgt = _target(target)
    notes: list[str] = []
    if device is None:
        device = default_device(model, tgt, backends, notes)
    if device not in tgt.devices:
        raise UnknownNameError("device", device, tgt.devices,
                               f"Target '{tgt.id}' has these processors")
    if context_tokens is None:
        context_tokens = prompt_tokens + gen_tokens
    if isinstance(context_tokens, bool) or not isinstance(context_tokens, int) \
            or context_tokens < 1:
        raise UserError(f"--context must be a positive number of tokens, got {context_tokens!r}")
    if context_tokens > spec.max_position_embeddings:
        raise UserError(f"--context {context_tokens} is longer than {spec.name}'s maximum of "
                        f"{spec.max_position_embeddings} tokens (max_position_embeddings)")
    if tokens_per_s is not None and (isinstance(tokens_per_s, bool) or not isinstance(
            tokens_per_s, (int, float)) or not math.isfinite(tokens_per_s) or tokens_per_s <= 0):
        raise UserError(f"--tokens-per-s must be a positive number, got {tokens_per_s!r}")
    from edgeprof.profilers.predict.llm import predict_llm

    wanted = None
    if precisions is not None:
        wanted = [x.strip() for x in (precisions.split(",") if isinstance(precisions, str)
                                      else precisions) if x.strip()]
    floor = tokens_per_s is None
    budget = INTERACTIVE_FLOOR_TOKENS_PER_S if floor else tokens_per_s

    ram = float(tgt.ram.value)
    usable = usable_ram_bytes(ram)
    over = runtime_overhead_bytes(spec, prompt_tokens)
    parameters = parameter_count(spec)
    cands: list[LLMCandidate] = []
    tables = _backend_formats(backends, notes)
    if wanted is not None:
        known = sorted({f for _, _, t in tables for f in t})
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise UnknownNameError("format", unknown[0], known,
                                   "The backends given make these formats")
        tables = [(n, c, {k: v for k, v in t.items() if k in wanted}) for n, c, t in tables]
    for name, cls, table in tables:
        for fmt, info in table.items():
            c = LLMCandidate(backend=name, format=fmt, bits_per_weight=float(info.bits),
                             weight_bits=int(info.weight_bits or info.bits))
            cands.append(c)
            why = _unsupported(cls, model, fmt, device)
            if why:
                c.status, c.why = "unsupported", why
                continue
            est = estimate_llm(spec, info, prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
                               target=tgt, device=device, backend=name)
            c.weight_bytes = int(est.figure("weight_bytes"))
            c.bits_per_weight = round(8 * c.weight_bytes / parameters, 3)
            c.kv_cache_bytes = int(kv_cache_bytes(spec, context_tokens, est.kv_dtype))
            c.runtime_overhead_bytes = int(over)
            c.total_bytes = c.weight_bytes + c.kv_cache_bytes + c.runtime_overhead_bytes
            c.fits = c.total_bytes <= usable
            c.max_context_tokens = int(max_context_tokens(spec, info, ram, est.kv_dtype,
                                                          device=device,
                                                          prompt_tokens=prompt_tokens))
            try:
                pred = predict_llm(est, tgt, device=device, runtime=name, threads=threads,
                                   calibration=calibration)
            except UserError:
                raise
            except EdgeprofError as e:
                c.why = f"no prediction: {e}"
            else:
                c.decode_tokens_per_s = dict(pred["decode_tokens_per_s"])
                c.prefill_tokens_per_s = dict(pred["prefill_tokens_per_s"])
            if not c.fits:
                c.status = "does_not_fit"
                c.why = (f"needs {_gb(c.total_bytes)} with {context_tokens} tokens of context, "
                         f"{_gb(usable)} usable")
            elif c.decode is None:
                if not floor:
                    c.status = "no_prediction"
                    c.why = c.why or "no decode prediction to hold against the budget"
            else:  # the interval-aware verdict tensor plans use, for a rate
                dec = c.decode_tokens_per_s or {}
                v = rate_verdict(c.decode, budget, dec.get("provenance"), low=dec.get("low"),
                                 high=dec.get("high"), what="decode rate",
                                 budget_name="interactive floor" if floor else "budget")
                c.budget_verdict = v.to_dict()
                c.meets_budget = v.met is True
                if not c.meets_budget:
                    c.status = "below_budget" if v.met is False else "no_prediction"
                    c.why = v.text
    if not cands:
        raise UserError("no generative backend with a known format to choose from; name one "
                        "of llama_cpp, onnxruntime_genai, openvino_genai, transformers")

    def key(c: LLMCandidate) -> tuple[int, float, float]:
        return (*c.rank, c.decode if c.decode is not None else -1.0)

    considered = [c for c in cands if c.status != "unsupported"]
    # the ladder stops at q8_0: wider formats only when named, or when nothing else is offered
    ladder_offered = any(c.weight_bits <= LADDER_TOP_BITS for c in considered)

    def on_ladder(c: LLMCandidate) -> bool:
        return (c.weight_bits <= LADDER_TOP_BITS or not ladder_offered
                or (wanted is not None and c.format in wanted))

    held = [c for c in considered if not on_ladder(c)]
    for c in held:
        if c.status == "ok":
            c.status = "not_asked"
            c.why = (f"{c.weight_bits}-bit weights, above the most-bits ladder's top (q8_0, "
                     f"near-lossless); --precision {c.format} to consider it")
    considered_ladder = [c for c in considered if on_ladder(c)]
    fitting = [c for c in considered_ladder if c.fits]
    meeting = [c for c in fitting if c.meets_budget or (floor and c.decode is None)]
    where = f"{tgt.id} ({device})"
    ram_text = (f"{where}'s {_gb(ram)} RAM ({_gb(usable)} usable after the OS reserve) with "
                f"{context_tokens} tokens of context")
    reasons: list[str] = []
    chosen: LLMCandidate | None = None
    if not considered:
        verdict = "does_not_fit"
        reasons.append("no backend given runs this model: " + "; ".join(
            f"{c.label}: {c.why}" for c in cands[:4]))
    elif not fitting:
        verdict = "does_not_fit"
        small = min(considered, key=lambda c: (c.total_bytes, -c.bits_per_weight))
        text = (f"RAM fit bound: no format fits {ram_text}; the smallest, {small.label} "
                f"({small.bits_per_weight:g} bits/weight), needs {_gb(small.total_bytes)} = "
                f"weights {_gb(small.weight_bytes)} + KV cache {_gb(small.kv_cache_bytes)} at "
                f"{context_tokens} tokens + runtime {_gb(small.runtime_overhead_bytes)}")
        if small.max_context_tokens:
            text += f"; it fits with at most {small.max_context_tokens} tokens of context"
        else:
            text += "; its weights alone leave no room for a context"
        reasons.append(text)
    elif not meeting:
        verdict = "budget_not_met" if not floor else "ok"
        pred = [c for c in fitting if c.decode is not None]
        if floor:  # the floor is out of reach: speed cannot make it interactive, so do not
            # give up 4-bit quality for it (the fastest of the 4-bit-or-wider formats)
            pred = [c for c in pred if c.weight_bits >= QUALITY_CAVEAT_BELOW_BITS] or pred
        chosen = max(pred, key=lambda c: (c.decode, c.bits_per_weight)) if pred else \
            min(fitting, key=lambda c: c.total_bytes)
        if pred:
            text = (f"tokens/s {'floor' if floor else 'budget'} bound: no format that fits "
                    f"{ram_text} is predicted to reach {budget:g} tok/s"
                    + (" (the interactive floor; --tokens-per-s sets another)" if floor
                       else "")
                    + (f"; the fastest with 4-bit or wider weights, {chosen.label}: "
                       if floor else f"; the fastest, {chosen.label}: ")
                    + chosen.why)
        else:
            text = (f"tokens/s budget bound: no format that fits has a decode prediction on "
                    f"{where} to hold against {budget:g} tok/s; {chosen.label} is the "
                    "smallest that fits")
        reasons.append(text)
    else:
        verdict = "ok"
        chosen = max(meeting, key=key)
        more_bits_fit = [c for c in fitting if c.rank > chosen.rank]
        more_bits = [c for c in considered_ladder if c.rank > chosen.rank]
        size = (f"{_gb(chosen.total_bytes)} (weights {_gb(chosen.weight_bytes)} + KV "
                f"{_gb(chosen.kv_cache_bytes)} + runtime {_gb(chosen.runtime_overhead_bytes)})")
        floor_text = " (no --tokens-per-s was given)" if floor else ""
        if more_bits_fit and any(c.status == "below_budget" for c in more_bits_fit):
            next_up = min(more_bits_fit, key=lambda c: (c.rank,
                                                        -(c.decode or -1.0)))
            others = len(more_bits_fit) - 1
            reasons.append(
                f"tokens/s budget bound: {next_up.label} ({next_up.bits_per_weight:g} "
                f"bits/weight) fits but {next_up.why}{floor_text}"
                + (f" (and {others} more fitting format(s) with more bits miss it too)"
                   if others else "")
                + f"; {chosen.label} is the format with the most bits "
                f"({chosen.bits_per_weight:g}/weight) that reaches it: "
                + (chosen.budget_verdict or {}).get("text", chosen.rate_text()))
        elif more_bits:
            big = min(more_bits, key=lambda c: c.rank)
            reasons.append(
                f"RAM fit bound: {big.label} ({big.bits_per_weight:g} bits/weight) and the "
                f"formats with more bits don't fit {ram_text} ({big.label} needs "
                f"{_gb(big.total_bytes)}); {chosen.label} is the format with the most bits "
                f"({chosen.bits_per_weight:g}/weight) that fits: {size}")
        else:
            reasons.append(
                f"most bits that fit: {chosen.label} has the most bits of every format "
                + (f"up to {LADDER_TOP_BITS}-bit weights, the ladder's top " if held else "")
                + f"({chosen.bits_per_weight:g}/weight) and fits {ram_text}: {size}"
                + (f"; {chosen.budget_verdict['text']}{floor_text}"
                   if chosen.budget_verdict else ""))
        ties = [c for c in meeting if c is not chosen and c.rank == chosen.rank
                and c.decode is not None and chosen.decode is not None
                and c.decode < chosen.decode]
        if ties:
            reasons.append("tie on bits/weight broken by the faster predicted decode: "
                           f"{chosen.label} ({chosen.rate_text()}) over " + ", ".join(
                               f"{c.label} ({c.rate_text()})" for c in ties))
        near = [c for c in fitting if c.status == "below_budget" and c.decode_high is not None
                and c.decode_high >= budget
                and c.rank > chosen.rank]
        if near:
            reasons.append("reach the budget only at the upper end of their interval (the "
                           "prediction's value decides, so they are not chosen): " + ", ".join(
                               f"{c.label} ({c.rate_text()})" for c in near))
    if held:
        reasons.append("left out unless asked (--precision): " + ", ".join(
            c.label for c in held) + f"; {LADDER_WHY}")
    if chosen is not None:
        chosen.status = "chosen"
        if not chosen.why:
            chosen.why = "chosen"
        reasons.append(f"{chosen.label}: the longest context that fits {where} is "
                       f"{chosen.max_context_tokens} tokens (analytic; the model's maximum is "
                       f"{spec.max_position_embeddings})")
        if chosen.decode is not None:
            basis = (chosen.decode_tokens_per_s or {}).get("basis")
            reasons.append(f"decode {chosen.rate_text()} on {where}: llama-bench's tg"
                           f"{gen_tokens} from an empty cache" + (f"; {basis}" if basis else ""))
        if chosen.weight_bits and chosen.weight_bits < QUALITY_CAVEAT_BELOW_BITS:
            reasons.append(f"quality caveat: {chosen.format} stores {chosen.weight_bits}-bit "
                           f"weights; below 4 bits small models lose clearly more quality "
                           f"(perplexity) than at 4 bits or more, which edgeprof does not "
                           f"measure (random weights): check it on your task")
        # the board's other processor, where the chosen runtime runs
        _, cls, table = next(row for row in tables if row[0] == chosen.backend)
        other = next((d for d in tgt.devices if d != device
                      and not _unsupported(cls, model, chosen.format, d)), None)
        if other is not None:
            try:
                est = estimate_llm(spec, table[chosen.format],
                                   prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
                                   target=tgt, device=other, backend=chosen.backend)
                alt = predict_llm(est, tgt, device=other, runtime=chosen.backend)
                d = alt["decode_tokens_per_s"]
                notes.append(f"{chosen.label} on {tgt.id}'s {other} instead: decode "
                             f"{_rate(d.get('value'))} tok/s ({_rate(d.get('low'))}–"
                             f"{_rate(d.get('high'))}, {d.get('provenance')})")
            except EdgeprofError:
                pass
    if device != "cpu":
        notes.append(f"--device {device}: whether each runtime's {device} build is installed on "
                     f"{tgt.id} is not checked (this machine's builds say nothing of the board)")
    if model.random_weights:
        notes.append(model.note)
    return LLMChoice(model=spec.name, target=tgt.id, device=device, threads=threads,
                     context_tokens=context_tokens, tokens_per_s=tokens_per_s,
                     prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, ram_bytes=ram,
                     usable_bytes=int(usable), verdict=verdict,
                     backend=chosen.backend if chosen else None,
                     format=chosen.format if chosen else None, reasons=reasons,
                     candidates=cands, notes=notes)


__all__ = ["CANDIDATE_STATUSES", "INTERACTIVE_FLOOR_TOKENS_PER_S", "LADDER_TOP_BITS",
           "LADDER_WHY", "LLMCandidate", "LLMChoice", "VERDICTS", "choose_llm_format",
           "default_device"]

"""Result records. Plain dataclasses: serializable, free of presentation.

Every record offers ``to_dict()`` (JSON-ready: no NaN, missing numbers are ``None`` with a
reason) and, where it is tabular, ``to_frame()`` (a pandas DataFrame, imported lazily).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Literal

Provenance = Literal["measured", "predicted", "estimated", "analytic", "uncalibrated",
                     "descriptor"]
RunStatus = Literal["ok", "unavailable", "unsupported", "failed"]


def clean(obj: Any) -> Any:
    """Make ``obj`` JSON-ready: dataclasses to dicts, NaN/inf to None, tuples to lists."""
    if is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_dict"):
            return obj.to_dict()
        return clean(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        return clean(obj.item())  # numpy scalar
    return obj


def _from_known(cls: type, d: dict[str, Any], **given: Any) -> Any:
    """``cls(**d, **given)``, leaving out the keys of ``d`` that are ``given`` or are not
    fields of ``cls`` (keys this version does not know are ignored)."""
    names = {f.name for f in fields(cls)} - set(given)
    return cls(**{k: v for k, v in d.items() if k in names}, **given)


@dataclass(frozen=True)
class WarningRecord:
    """A named warning: ``code`` is stable (for tools), ``message`` is for people."""

    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class Figure:
    """One number with its unit and where it came from; ``value`` None needs a ``reason``."""

    value: float | None
    unit: str
    provenance: Provenance
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"value": clean(self.value), "unit": self.unit, "provenance": self.provenance}
        if self.value is None or self.reason:
            d["reason"] = self.reason or "not available"
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Figure:
        """A figure from its ``to_dict()`` form."""
        return cls(d.get("value"), d.get("unit", ""), d.get("provenance", "analytic"),
                   d.get("reason"))


# --------------------------------------------------------------------------- estimate
@dataclass
class GraphLayer:
    """A layer as a graph walker sees it (torch module walk, ONNX graph, .tflite ops), before
    a precision and a target are applied. Counts are in elements and operations, not bytes.
    """

    name: str
    op_type: str
    output_shape: tuple[int, ...]
    output_elements: int
    input_elements: int  # activation elements read (all activation inputs)
    parameter_count: int  # weight/bias elements owned by this layer
    macs: int
    other_ops: int  # elementwise / norm / pooling / softmax operations (not MACs)


@dataclass
class GraphWalk:
    """What a graph walker returns: the layers in execution order plus the peak number of
    activation elements alive at once (from tensor lifetimes, model inputs included)."""

    layers: list[GraphLayer]
    peak_live_elements: int
    input_elements: int
    notes: list[str] = field(default_factory=list)
    #: every parameter element of the model as its framework counts them (torch: the sum of
    #: ``numel`` over ``parameters()``, as torchinfo and ptflops report), used by this
    #: forward or not; None when the graph is all there is (ONNX, TFLite, IR)
    total_parameter_count: int | None = None
    #: convolutions whose weights show a batch-norm folded into them (the graph reader's
    #: evidence: names an exporter gives folded constants); None where nothing shows it
    folded_batchnorms: int | None = None


@dataclass
class LayerEstimate:
    """One row of the analytic estimate (docs/design.md, "Estimate rows").

    ``activation_bytes`` is the output tensor's bytes (the seeds' meaning); ``input_bytes``
    is the inputs'. ``macs`` counts multiply-accumulates of conv, linear, matmul, attention
    and recurrent work; ``flops`` = 2 x macs; ``other_ops`` counts elementwise, norm and
    pooling operations, which are not MACs.
    """

    layer: str
    op_type: str
    output_shape: str
    output_elements: int
    input_bytes: float
    parameter_count: int
    parameter_bytes: float
    activation_bytes: float
    macs: int
    flops: int
    other_ops: int
    compute_ms: float = 0.0
    memory_ms: float = 0.0
    roofline_latency_ms: float = 0.0
    bound: str = ""


def _layer_sum(column: str, kind: type) -> property:
    """A property: the sum of the rows' ``column``, as ``kind`` (int or float)."""
    return property(lambda self: kind(sum(getattr(r, column) for r in self.layers)))


@dataclass
class Estimate:
    """The analytic view of one model on one target at one precision."""

    model: str
    target: str
    precision: str
    batch_size: int
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    layers: list[LayerEstimate]
    peak_activation_bytes: float
    parameter_count: int
    parameter_bytes: float
    compute_precision: str
    peak_macs_per_s: float | None
    memory_bandwidth_bytes_per_s: float
    memory_capacity: dict[str, Any] = field(default_factory=dict)
    edge_constraints: dict[str, Any] = field(default_factory=dict)
    precision_memory: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: parameter elements the estimated forward reads (the sum of the rows); differs from
    #: ``parameter_count`` (all of the model's parameters) when part of the model does not
    #: run in this forward, e.g. an auxiliary classifier used only in training
    forward_parameter_count: int | None = None
    #: the board's prediction for a runtime, when the estimate was asked with one
    #: (``edgeprof.estimate(model, target, backend=B)``, ``edgeprof estimate --backend B``):
    #: a ``Prediction``; ``to_dict`` gives it as ``prediction``, only when there is one
    prediction: Any = None

    # totals -------------------------------------------------------------------------
    total_macs = _layer_sum("macs", int)
    total_other_ops = _layer_sum("other_ops", int)
    activation_bytes = _layer_sum("activation_bytes", float)
    roofline_latency_ms = _layer_sum("roofline_latency_ms", float)
    compute_ms = _layer_sum("compute_ms", float)
    memory_ms = _layer_sum("memory_ms", float)

    @property
    def total_flops(self) -> int:
        return 2 * self.total_macs

    @property
    def bound(self) -> str:
        return "memory" if self.memory_ms > self.compute_ms else "compute"

    def totals(self) -> dict[str, Any]:
        return {
            "macs": self.total_macs,
            "flops": self.total_flops,
            "other_ops": self.total_other_ops,
            "parameter_count": self.parameter_count,
            "parameter_bytes": self.parameter_bytes,
            "activation_bytes": self.activation_bytes,
            "peak_activation_bytes": self.peak_activation_bytes,
            "compute_ms": self.compute_ms,
            "memory_ms": self.memory_ms,
            "roofline_latency_ms": self.roofline_latency_ms,
            "bound": self.bound,
        }

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([asdict(r) for r in self.layers],
                            columns=[f.name for f in fields(LayerEstimate)])

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)
             if f.name not in ("layers", "prediction")}
        d["totals"] = self.totals()
        d["layers"] = [asdict(r) for r in self.layers]
        if self.prediction is not None:
            d["prediction"] = self.prediction.to_dict()
        return clean(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Estimate:
        """Rebuild an estimate from its ``to_dict()`` form (``totals`` are recomputed from
        the layers); keys this version does not know are ignored."""
        layers = [_from_known(LayerEstimate, row) for row in d.get("layers") or []]
        return _from_known(cls, d, layers=layers, prediction=None)


# -------------------------------------------------------------------------- benchmark
@dataclass
class LatencyStats:
    """Latency statistics of the steady state, in milliseconds.

    ``p90_ms`` / ``p99_ms`` are None when there are too few samples (or when calls were
    timed in blocks); ``null_reasons`` says why. The confidence interval is of the median.
    """

    n: int
    median_ms: float
    mean_ms: float
    std_ms: float
    cv: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    p50_ms: float
    p90_ms: float | None
    p99_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    ci_level: float = 0.95
    block_size: int = 1
    null_reasons: dict[str, str] = field(default_factory=dict)
    samples_ms: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return clean(asdict(self))


@dataclass
class BenchmarkResult:
    """What the harness measured for one backend x precision on this host."""

    backend: str
    model: str
    requested_precision: str
    executed_precision: str | None
    status: str  # RunStatus
    reason: str | None = None
    batch_size: int = 1
    stats: LatencyStats | None = None
    throughput_per_s: float | None = None
    first_inference_ms: float | None = None
    load_time_s: float | None = None
    warmup_runs: int | None = None
    warmup_time_s: float | None = None
    steady_time_s: float | None = None
    peak_memory_bytes: float | None = None
    memory_detail: dict[str, Any] = field(default_factory=dict)
    runtime: str | None = None
    runtime_version: str | None = None
    threads: dict[str, int] = field(default_factory=dict)
    device: str = "cpu"
    environment: dict[str, Any] = field(default_factory=dict)
    warnings: list[WarningRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # backend facts: agreement, model size ...
    provenance: str = "measured"

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.stats is not None

    @property
    def latency_ms(self) -> float | None:
        return self.stats.median_ms if self.stats else None

    def fail(self, status: str, reason: str) -> BenchmarkResult:
        """The run ended as ``status`` (``failed``, ``unsupported``, ``unavailable``) for
        ``reason``: its timings are dropped (what the partial record learnt stays)."""
        self.status, self.reason, self.stats = status, reason, None
        return self

    def to_dict(self) -> dict[str, Any]:
        return clean({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchmarkResult:
        """Rebuild a result from its ``to_dict()`` form (stats and warnings included);
        keys this version does not know are ignored."""
        stats = d.get("stats")
        stats = None if stats is None else _from_known(LatencyStats, stats)
        return _from_known(cls, d, stats=stats, warnings=[WarningRecord(w["code"], w["message"])
                                                         for w in d.get("warnings") or []])

    def to_frame(self):
        import pandas as pd

        row = {k: v for k, v in self.to_dict().items() if not isinstance(v, (dict, list))}
        if self.stats:
            row.update({k: v for k, v in self.stats.to_dict().items()
                        if not isinstance(v, (dict, list))})
        return pd.DataFrame([row])


#: what one measurement of a tensor model produced (``measure()``'s record); a generative
#: run's record is a :class:`GenerativeRunRecord` (``kind: "generate"`` in its dict)
RunRecord = BenchmarkResult


@dataclass
class GenerationRecord:
    """One (backend, format, depth) measured on this machine (provenance ``measured``).

    Rates are tokens per second, times milliseconds/seconds; each rate is the median over
    repetitions with its standard deviation (llama-bench's ``avg_ts``/``stddev_ts`` use the
    mean; both are kept).
    """

    model: str
    backend: str
    format: str
    device: str = "cpu"
    status: str = "ok"  # ok | unsupported | unavailable | failed | skipped
    reason: str = ""
    n_prompt: int = 0
    n_gen: int = 0
    n_depth: int = 0
    n_threads: int = 0
    repetitions: int = 0
    prefill_tokens_per_s: dict[str, float] | None = None  # median, mean, stddev, min, max
    decode_tokens_per_s: dict[str, float] | None = None
    ttft_ms: dict[str, float] | None = None
    tpot_ms: dict[str, float] | None = None  # p50, p90, median, mean
    load_s: float | None = None
    peak_rss_bytes: int | None = None
    model_size: int | None = None  # bytes of the runtime's weight file(s)
    model_n_params: int | None = None
    build_commit: str = ""
    runtime_version: str = ""
    random_weights: bool = True
    samples: dict[str, list[float]] = field(default_factory=dict)
    artifact: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    provenance: str = "measured"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationRecord:
        return _from_known(cls, d)

    def bench_rows(self) -> list[dict[str, Any]]:
        """Rows in llama-bench's CSV columns: one ``pp`` test and one ``tg`` test."""
        base = {"model": self.model, "backend": self.backend, "format": self.format,
                "device": self.device, "model_size": self.model_size,
                "model_n_params": self.model_n_params, "n_threads": self.n_threads,
                "n_depth": self.n_depth, "build_commit": self.build_commit,
                "status": self.status, "provenance": self.provenance}
        rows = []
        for test, rate, n_prompt, n_gen in (("pp", self.prefill_tokens_per_s, self.n_prompt, 0),
                                            ("tg", self.decode_tokens_per_s, 0, self.n_gen)):
            rows.append({**base, "test": f"{test}{n_prompt or n_gen}", "n_prompt": n_prompt,
                         "n_gen": n_gen,
                         "avg_ts": (rate or {}).get("mean"),
                         "stddev_ts": (rate or {}).get("stddev"),
                         "median_ts": (rate or {}).get("median")})
        return rows


@dataclass
class GenerativeRunRecord:
    """What one generative measurement (one backend x format, every depth of the request)
    produced: ``measure()``'s record for a backend whose workload is ``generate``.

    ``records`` holds one :class:`GenerationRecord` per depth (llama-bench's
    pp/tg, TTFT, TPOT, load time, peak RSS); ``status``/``reason`` are the run's: ``ok`` when
    every depth is, else the first other depth's. Its dict says ``"kind": "generate"``
    (:func:`record_from_dict` reads either kind back).
    """

    backend: str
    model: str
    format: str
    status: str = "failed"
    reason: str | None = None
    device: str = "cpu"
    records: list[Any] = field(default_factory=list)  # GenerationRecord, one per depth
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # fleet: the board that measured it
    provenance: str = "measured"
    #: the request's conditions, as a tensor record's ``config``: precision (the format),
    #: threads asked, device, isolate, timeout_s, seed and the test shape (prompt_tokens,
    #: gen_tokens, depths, repetitions, warmup)
    config: dict[str, Any] = field(default_factory=dict)
    #: the machine and process that measured it, as a tensor record's ``environment``:
    #: runtime, runtime_version, threads and ``conditions`` (process: inline or isolated,
    #: process_state, threads, threads_from, thread_env, affinity, warmup, timing); empty
    #: when nothing ran (a worker that died, a runtime not installed)
    environment: dict[str, Any] = field(default_factory=dict)

    kind = "generate"  # class attribute: the discriminator in to_dict()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def requested_precision(self) -> str:
        return self.format

    def settle(self) -> GenerativeRunRecord:
        """Take the run's status and reason from its records (``ok`` when all are)."""
        bad = [r for r in self.records if r.status != "ok"]
        if not self.records:
            self.status = self.status if self.status != "ok" else "failed"
        elif not bad:
            self.status, self.reason = "ok", None
        else:
            self.status, self.reason = bad[0].status, bad[0].reason or None
        return self

    def fail(self, status: str, reason: str) -> GenerativeRunRecord:
        """Every record that is not ``ok`` (all of them, unless some finished) takes
        ``status`` and ``reason``, its figures dropped; then :meth:`settle`."""
        for r in self.records:
            if r.status != "ok":
                r.status, r.reason = status, reason
                r.prefill_tokens_per_s = r.decode_tokens_per_s = None
                r.ttft_ms = r.tpot_ms = None
        if not self.records:
            self.status, self.reason = status, reason
            return self
        return self.settle()

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "records"}
        d["records"] = [r.to_dict() for r in self.records]
        return clean({"kind": self.kind, **d})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerativeRunRecord:
        records = [GenerationRecord.from_dict(r) for r in d.get("records") or []]
        return _from_known(cls, d, records=records)  # "kind" is no field: left out


def record_from_dict(d: dict[str, Any]) -> BenchmarkResult | GenerativeRunRecord:
    """Either kind of run record from its ``to_dict()`` (``kind: "generate"``: a generative
    one; no kind: a tensor one)."""
    if d.get("kind") == GenerativeRunRecord.kind:
        return GenerativeRunRecord.from_dict(d)
    return BenchmarkResult.from_dict(d)


# ---------------------------------------------------------------------------- summary
@dataclass
class Summary:
    """The estimate and the measurement together, against one target."""

    target: str
    backend: str | None
    precision: str
    on_host: bool
    figures: dict[str, Figure]
    reading: str  # <bound>-bound / <bound>-bound, below roof / inefficient, <bound>-bound / unknown
    warnings: list[WarningRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    prediction: dict[str, Any] | None = None  # the predictor's answer (calibration, interval)

    def value(self, name: str) -> float | None:
        f = self.figures.get(name)
        return None if f is None else f.value

    def to_dict(self) -> dict[str, Any]:
        return clean({
            "target": self.target, "backend": self.backend, "precision": self.precision,
            "on_host": self.on_host, "reading": self.reading,
            "figures": {k: v.to_dict() for k, v in self.figures.items()},
            "warnings": [w.to_dict() for w in self.warnings], "notes": list(self.notes),
            **({"prediction": self.prediction} if self.prediction is not None else {}),
        })

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        """Rebuild a summary from its ``to_dict()`` form."""
        return cls(target=d.get("target"), backend=d.get("backend"),
                   precision=d.get("precision"), on_host=bool(d.get("on_host")),
                   figures={k: Figure.from_dict(v) for k, v in (d.get("figures") or {}).items()},
                   reading=d.get("reading", ""),
                   warnings=[WarningRecord(w["code"], w["message"])
                             for w in d.get("warnings") or []],
                   notes=list(d.get("notes") or []), prediction=d.get("prediction"))

    def to_frame(self):
        import pandas as pd

        row: dict[str, Any] = {"target": self.target, "backend": self.backend,
                               "precision": self.precision, "reading": self.reading}
        for k, f in self.figures.items():
            row[k] = f.value
            row[f"{k}_provenance"] = f.provenance
        return pd.DataFrame([row])

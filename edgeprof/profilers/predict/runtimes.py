"""Which runtime runs where, at which precision: the data every board figure is checked
against before it is given.

* **Processors.** A runtime family runs on kinds of processor (``cpu``, ``gpu``, ``npu``,
  ``mcu``), listed in ``data/runtimes.toml`` (``processors``, with its source) in the order
  it picks them: on a board its default processor is the first of these the board has. A
  target's processors are its devices (:attr:`Target.devices`: the one its kind implies,
  then its ``[processors.X]`` tables), each of a kind (the target's kind for the implied
  one: ``edge_gpu`` -> gpu, ``mcu`` -> mcu ...; a table's ``kind``). A family missing from
  the file takes the devices its backend class declares (cuda -> gpu), else the CPU.
* **Precisions.** A family offers the precisions its ``data/runtimes.toml`` entry lists
  (``precisions``: what the runtime runs on a board, for a prediction-only family -- a
  runtime the published board rows name that no edgeprof backend runs: xcubeai, tinyengine
  ... -- and for a backend whose build here lacks one: ncnn's int8 needs tools its wheel
  does not carry, yet ncnn runs int8 on a board); else the ones its edgeprof backend's
  class declares (``Capabilities.precisions``).
* **Executed precision.** A processor with no rate for a precision's compute type (a
  Cortex-A72 has no fp16 arithmetic) does not run it: the runtime falls back to the
  precision whose peak the roofline takes (fp32), and the prediction is that precision's.

Public: :func:`runtimes_on` (the runtimes a target's processors run), :func:`offers`
(whether a runtime offers a precision), :func:`processor_for` (the processor a runtime runs
on a target, or a one-line exit 2), :func:`executed_precision`, :func:`on_device`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.core.precision import get_precision
from edgeprof.profilers.predict.threads import runtimes_table, family_info, known_families

#: the processor kind a target's implied device has, by the target's kind
KIND_OF_TARGET = {"cpu": "cpu", "edge_cpu": "cpu", "gpu": "gpu", "edge_gpu": "gpu",
                  "npu": "npu", "mcu": "mcu"}
_ARTICLE = {"cpu": "a CPU", "gpu": "a GPU", "npu": "an NPU", "mcu": "an MCU"}
_API_NAMES = {"cuda": "CUDA", "vulkan": "Vulkan", "coreml": "Core ML", "nnapi": "NNAPI",
              "rknn": "RKNN", "opencl": "OpenCL"}
#: this machine's device names (a backend class's ``Capabilities.devices``) -> kinds
_DEVICE_KIND = {"cpu": "cpu", "cuda": "gpu", "npu": "npu", "mcu": "mcu"}
#: what a runtime declaring a device needs of a board's processor: a backend that declares
#: ``cuda`` runs CUDA kernels, so it needs a GPU with CUDA, not any GPU
_NEEDS = {"cpu": "cpu", "cuda": "gpu:cuda", "npu": "npu", "mcu": "mcu"}
_ORDER = ["gpu", "npu", "cpu", "mcu"]


def processor_apis(target: Any, device: str) -> tuple[str, ...]:
    """The programming interfaces ``target``'s processor ``device`` offers: its table's
    ``apis`` (the top-level ``apis`` for the processor the top-level figures describe), and
    ``cuda`` for a device named cuda (an NVIDIA GPU)."""
    try:
        declared = tuple(getattr(target.get_processor(device), "apis", ()) or ())
    except Exception:  # noqa: BLE001 - a device the board lacks offers nothing
        declared = ()
    return tuple(dict.fromkeys((("cuda",) if device.split(":")[0] == "cuda" else ())
                               + declared))


def serves(need: str, device: str, kind: str, apis: tuple[str, ...] = ()) -> bool:
    """Whether a board's processor ``device`` (of ``kind``, offering ``apis``) is one a
    runtime that needs ``need`` runs on. A need is a kind (``cpu``, ``gpu``, ``npu``,
    ``mcu``: any processor of it) or ``kind:api`` (``gpu:cuda``, ``gpu:vulkan``,
    ``npu:coreml``: a processor of that kind whose drivers offer that interface)."""
    want, _, api = need.partition(":")
    return kind == want and (not api or api in apis)


def on_device(target: Any, device: str | None) -> Any:
    """``target`` as seen from processor ``device`` (a Jetson's CPU cluster, say): its peaks,
    bandwidth and cores. The processor the target's kind implies is the target itself."""
    if device is None or getattr(target, "is_host", False):
        return target
    proc = target.get_processor(device)  # UnknownNameError (exit 2) for a device it lacks
    if device == target.implied_device:
        return target
    import dataclasses

    # the view's kind is its processor's (a Raspberry Pi 5's GPU is a GPU: host threads do
    # not drive its kernels), and so are its cores, peaks and clock
    kind = {"cpu": "edge_cpu", "gpu": "edge_gpu"}.get(proc.kind, proc.kind)
    changes: dict[str, Any] = {"peak_compute": dict(proc.peak_compute), "cores": proc.cores,
                               "kind": kind, "view_device": device}
    if proc.bandwidth is not None:
        changes["bandwidth"] = proc.bandwidth
    if proc.frequency is not None:
        changes["frequency"] = proc.frequency
    fields = {f.name for f in dataclasses.fields(target)}
    if "big_cores_figure" in fields:
        changes["big_cores_figure"] = proc.cores
    return dataclasses.replace(target, **{k: v for k, v in changes.items() if k in fields})


class NotOfferedError(UserError):
    """A runtime asked for a precision it does not offer (exit 2); ``offered`` lists them."""

    def __init__(self, backend: str, precision: str, offered: tuple[str, ...], source: str):
        self.backend, self.precision, self.offered = backend, precision, offered
        super().__init__(not_offered_reason(backend, precision, offered, source))


def not_offered_reason(backend: str, precision: str, offered: tuple[str, ...],
                       source: str = "") -> str:
    """The one line that says ``backend`` does not offer ``precision``."""
    return (f"not offered: {backend} does not offer {precision}; it offers "
            f"{', '.join(offered) or 'nothing'}" + (f" ({source})" if source else ""))


def _registry(registry: Any = None) -> Any:
    if registry is not None:
        return registry
    from edgeprof.core.plugins import get_registry

    return get_registry()


def _backend_class(family: str, registry: Any = None) -> type | None:
    reg = _registry(registry)
    entry = reg.backends_for("tensor").get(family)
    return entry.cls if entry is not None else None


def prediction_only(family: str, registry: Any = None) -> bool:
    """True for a runtime family the board rows name that no edgeprof backend runs."""
    return _backend_class(family, registry) is None and family in known_families()


def family_workload(family: str) -> str:
    """What a runtime family of ``data/runtimes.toml`` runs: ``tensor`` (fixed-shape tensor
    models, the default) or ``generate`` (its entry's ``workload``: a generative runtime,
    llm: models: llamafile, mlc, rkllm)."""
    return str(runtimes_table().get(family, {}).get("workload", "tensor"))


def families(registry: Any = None) -> list[str]:
    """Every runtime a tensor prediction can be for: the edgeprof tensor backends, then the
    prediction-only tensor families of ``data/runtimes.toml`` (its generative families,
    ``workload = "generate"``, are :func:`generative_families`)."""
    names = list(_registry(registry).backends_for("tensor"))
    return names + [f for f in known_families()
                    if f not in names and family_workload(f) != "generate"]


def generative_families(registry: Any = None) -> list[str]:
    """The prediction-only generative runtime families of ``data/runtimes.toml``
    (``workload = "generate"``) that no edgeprof backend runs: the LLM predictor is
    calibrated with their published rows (``predict_llm(..., runtime=FAMILY)``)."""
    reg = _registry(registry)
    return [f for f in known_families()
            if family_workload(f) == "generate" and f not in reg.backends]


#: what an unknown runtime name is told: the names a prediction (and profile) takes
UNKNOWN_HINT = ("A prediction takes an edgeprof backend or a runtime family the published "
                "board rows name ('edgeprof backends' lists both)")
#: why a prediction-only family's run can't happen here
PREDICT_ONLY = "predict only: can't run here"


def check_known(name: str, registry: Any = None) -> None:
    """:class:`UnknownNameError` (exit 2) for a name that is neither an edgeprof backend nor
    a runtime family of ``data/runtimes.toml``, listing every name (closest first)."""
    from edgeprof.core.errors import UnknownNameError

    reg = _registry(registry)
    if name not in reg.backends and name not in known_families():
        raise UnknownNameError("backend or runtime family", name,
                               set(reg.backends) | set(known_families()), UNKNOWN_HINT)
    if name not in reg.backends and family_workload(name) == "generate":
        raise UserError(generative_runtime_reason(name))


def generative_runtime_reason(family: str) -> str:
    """The one line a tensor model given a generative runtime family (llamafile, mlc,
    rkllm) reads."""
    return (f"{family} is a generative runtime (it runs llm: models, not tensor models): give "
            f"an llm: model (e.g. 'edgeprof predict llm:tinyllama-1.1b --backend {family} "
            "...'), or a tensor runtime ('edgeprof backends' lists both)")


def prediction_only_reason(family: str, registry: Any = None) -> str:
    """The one line a prediction-only family's run reads: it predicts, it can't run here."""
    kinds, _ = family_processors(family, registry)
    return (f"{PREDICT_ONLY}: no edgeprof backend runs {family} (a runtime family the "
            f"published board rows name; it runs on {kinds_text(kinds)}): 'edgeprof predict' "
            "gives its figure on a board with one")


def prediction_only_backend(family: str, registry: Any = None) -> type:
    """A prediction-only family as a run sees a backend: a :class:`Backend` class named
    ``family``, with the precisions ``data/runtimes.toml`` gives it and no device of this
    machine, whose availability is False with :func:`prediction_only_reason` (so ``measure``
    records the run ``unavailable`` with that reason, as a backend whose runtime is missing,
    and ``profile`` still shows the target's prediction)."""
    from edgeprof.core.backend import Availability, Backend, Capabilities

    precisions, _ = offered_precisions(family, registry)
    kinds, source = family_processors(family, registry)
    reason = prediction_only_reason(family, registry)
    return type(f"PredictionOnly_{family}", (Backend,), {
        "name": family, "prediction_only": True, "workload": "tensor",
        "description": f"prediction-only: runs on {'/'.join(kinds)} ({source})",
        "capabilities": Capabilities(precisions=tuple(precisions or ()), devices=(),
                                     model_formats=()),
        "availability": classmethod(lambda cls: Availability(False, reason))})


def runtime_class(name: str, registry: Any = None) -> type:
    """The class a run of runtime ``name`` uses: the edgeprof backend's, else a
    prediction-only family's (:func:`prediction_only_backend`); an unknown name is exit 2
    with every name (:func:`check_known`)."""
    reg = _registry(registry)
    if name in reg.backends:
        return reg.backend(name)
    check_known(name, reg)
    return prediction_only_backend(name, reg)


def prediction_only_rows(registry: Any = None) -> list[dict[str, Any]]:
    """``edgeprof backends``' rows of the prediction-only families: what they offer and the
    processors they run on (with the source), never available here."""
    reg = _registry(registry)
    rows = []
    for family in families(reg) + generative_families(reg):
        if not prediction_only(family, reg):
            continue
        kinds, source = family_processors(family, reg)
        precisions, why = offered_precisions(family, reg)
        rows.append({"name": family, "available": False, "prediction_only": True,
                     "reason": prediction_only_reason(family, reg), "hint": "",
                     "workload": family_workload(family),
                     "precisions": list(precisions or ()),
                     "precisions_source": why, "devices": [], "processors": kinds,
                     "processors_source": source, "model_formats": [], "plugin": "",
                     "description": f"runs on {kinds_text(kinds)}", "options": []})
    return rows


def family_processors(family: str, registry: Any = None,
                      cls: type | None = None) -> tuple[list[str], str]:
    """(processor kinds, in the order the runtime picks them; their source). A family
    ``data/runtimes.toml`` does not list takes the devices its backend class declares
    (``cls``, else the registry's)."""
    own = runtimes_table().get(family, {})
    if "processors" in own:
        return list(own["processors"]), str(own.get("processors_source", ""))
    cls = cls if cls is not None else _backend_class(family, registry)
    if cls is not None:
        kinds = [_NEEDS[d] for d in getattr(cls.capabilities, "devices", ())
                 if d in _NEEDS]
        kinds = sorted(set(kinds), key=lambda n: _ORDER.index(n.partition(":")[0]))
        if kinds:
            return kinds, f"the devices edgeprof's {family} backend declares"
    info = family_info(family)
    return list(info.get("processors", ["cpu"])), str(info.get(
        "processors_source", "assumed: a runtime that says nothing else runs on a CPU"))


def offered_precisions(family: str, registry: Any = None) -> tuple[tuple[str, ...] | None, str]:
    """(the precisions ``family`` offers, their source); None where nothing says (a family
    of neither an edgeprof backend nor ``data/runtimes.toml``'s precisions)."""
    own = runtimes_table().get(family, {})
    if "precisions" in own:  # what the runtime offers on a board, beyond what is built here
        return tuple(own["precisions"]), str(own.get("precisions_source", ""))
    cls = _backend_class(family, registry)
    if cls is not None:
        return (tuple(cls.capabilities.precisions),
                f"as edgeprof's {family} backend declares")
    return None, ""


def offers(backend: str, precision: str, registry: Any = None) -> bool:
    """Whether runtime ``backend`` offers ``precision`` (an unknown family: True)."""
    offered, _ = offered_precisions(backend, registry)
    return offered is None or precision in offered


def check_offered(backend: str, precision: str, registry: Any = None) -> None:
    """:class:`NotOfferedError` (exit 2) where ``backend`` does not offer ``precision``."""
    offered, source = offered_precisions(backend, registry)
    if offered is not None and precision not in offered:
        raise NotOfferedError(backend, precision, offered, source)


# ---------------------------------------------------------------------------- processors
def processor_kind(target: Any, device: str) -> str:
    """The kind (cpu, gpu, npu, mcu) of ``target``'s processor ``device``."""
    procs = getattr(target, "processors", {}) or {}
    if device in procs and getattr(procs[device], "kind", None):
        return str(procs[device].kind)
    if device == getattr(target, "implied_device", "cpu"):
        return KIND_OF_TARGET.get(getattr(target, "kind", "cpu"), "cpu")
    return _DEVICE_KIND.get(device.split(":")[0], device)


def board_processors(target: Any) -> list[tuple[str, str]]:
    """[(device, kind)] of the target's processors, the implied one first."""
    devices = tuple(getattr(target, "devices", ()) or ()) or \
        (getattr(target, "implied_device", "cpu"),)
    return [(d, processor_kind(target, d)) for d in devices]


def _need_text(need: str) -> str:
    """'GPU', 'GPU with CUDA' for a need (``gpu``, ``gpu:cuda``)."""
    kind, _, api = need.partition(":")
    return kind.upper() + (f" with {_API_NAMES.get(api, api)}" if api else "")


def kinds_text(kinds: list[str]) -> str:
    words = []
    for need in kinds:
        kind, _, api = need.partition(":")
        words.append(_ARTICLE.get(kind, kind)
                     + (f" with {_API_NAMES.get(api, api)}" if api else ""))
    words = list(dict.fromkeys(words))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _device_text(device: str, kind: str) -> str:
    return device if _DEVICE_KIND.get(device.split(":")[0]) == kind else f"{device} ({kind})"


def runs_on(target: Any, family: str, device: str | None = None,
            registry: Any = None, cls: type | None = None) -> list[str]:
    """The devices of ``target`` (or just ``device``) that ``family`` runs on, its default
    first (its processor order)."""
    kinds, _ = family_processors(family, registry, cls)
    procs = board_processors(target)
    if device is not None:
        procs = [(d, k) for d, k in procs if d == device.split(":")[0] or d == device]
    return [d for need in kinds for d, k in procs
            if serves(need, d, k, processor_apis(target, d))]


def processor_for(target: Any, family: str, device: str | None = None,
                  registry: Any = None, cls: type | None = None) -> tuple[str, str]:
    """(device, why) of the processor ``family`` runs on ``target``: ``device`` where asked
    and the runtime runs there, else its default there (the first processor of its list the
    board has). A runtime that runs on none of them, or not on the device asked, is a
    :class:`UserError` (exit 2) naming where it runs."""
    kinds, source = family_processors(family, registry, cls)
    where = kinds_text(kinds)
    board = getattr(target, "base_id", None) or target.id.split(":")[0]
    procs = board_processors(target)
    fits = runs_on(target, family, registry=registry, cls=cls)
    if getattr(target, "is_host", False):
        if fits:
            return fits[0], "this machine"
        kind = procs[0][1]
        if any(k.startswith("gpu") for k in kinds):
            raise UserError(f"{family} runs on {where}, not on this machine's {kind.upper()} "
                            "(--target host): give --target host_gpu on a machine with an "
                            "NVIDIA GPU, or a runtime that runs here ('edgeprof backends')")
        raise UserError(f"{family} runs on {where}, not on this machine's {kind.upper()} "
                        f"(--target host): predict it for a board with one ('edgeprof "
                        "targets')")
    listed = ", ".join(_device_text(d, k) for d, k in procs)
    if not fits:
        lacks = " or ".join(_need_text(k) for k in kinds)
        raise UserError(f"{family} runs on {where}, and {board} has no {lacks} (its "
                        f"processors: {listed}); give a target with one ('edgeprof targets') "
                        f"or a runtime that runs there ('edgeprof backends')")
    if device is not None:
        dev = device.split(":")[0] if device.split(":")[0] in dict(procs) else device
        if dev not in dict(procs):  # a device the board lacks
            target.get_processor(dev)  # UnknownNameError (exit 2) naming its devices
        if dev not in fits:
            alt = " or ".join(f"--device {d}" for d in fits)
            raise UserError(f"{family} runs on {where}, not on {board}'s {dev}: give {alt} "
                            "(or leave --device out)")
        return dev, "as asked"
    dev = fits[0]
    implied = getattr(target, "implied_device", procs[0][0])
    if dev == implied:
        return dev, f"{board}'s {dev}, the processor its figures describe"
    return dev, (f"{board}'s {dev} ({dict(procs)[dev].upper()}), {family}'s processor there: "
                 f"it runs on {where}, not on {board}'s {implied} "
                 f"({dict(procs)[implied].upper()}) ({source}); give --device {dev} to say "
                 "so, or another runtime for the other processor")


def runtimes_on(target: Any, device: str | None = None, registry: Any = None) -> list[str]:
    """The runtimes (edgeprof tensor backends, then prediction-only families) that run on
    ``target``'s processors (or on its processor ``device``); for this machine, those that
    run on its processor."""
    return [f for f in families(registry) if runs_on(target, f, device, registry)]


# ----------------------------------------------------------------------- executed precision
def executed_precision(target: Any, precision: str) -> str:
    """The compute precision ``target``'s processor runs for ``precision``: its own compute
    type where the processor has a rate for it, else the one the roofline falls back to
    (fp32, or the processor's only rate)."""
    from edgeprof.profilers.estimate.analytic import compute_peak

    compute = get_precision(precision).compute
    if target.peak_macs(compute) is not None:
        return compute
    _, used, _ = compute_peak(target, compute)
    return used


def restate(estimate: Any, target: Any, precision: str) -> Any:
    """``estimate`` (of a model at its precision on some view of a board) restated on
    ``target`` at ``precision``: each layer's bytes at that precision's widths and its
    roofline on ``target``'s peak and bandwidth (what ``estimate_model`` would give)."""
    from edgeprof.profilers.estimate.analytic import compute_peak

    p, p0 = get_precision(precision), get_precision(estimate.precision)
    peak, used, _ = compute_peak(target, p.compute)
    bw = float(target.bandwidth_bytes_per_s)
    act = p.activation_bytes / p0.activation_bytes if p0.activation_bytes else 1.0
    layers = []
    for r in estimate.layers:
        pb = float(r.parameter_count * p.weight_bytes)
        ab = float(r.output_elements * p.activation_bytes)
        ib = float(r.input_bytes) * act
        c = r.macs / peak * 1e3 if peak else 0.0
        m = (pb + ib + ab) / bw * 1e3
        layers.append(dataclasses.replace(
            r, parameter_bytes=pb, activation_bytes=ab, input_bytes=ib, compute_ms=float(c),
            memory_ms=float(m), roofline_latency_ms=float(max(c, m)),
            bound="memory" if m > c else "compute"))
    changes = {"layers": layers, "target": target.id, "precision": precision,
               "compute_precision": used, "peak_macs_per_s": peak,
               "memory_bandwidth_bytes_per_s": bw,
               "parameter_bytes": float(estimate.parameter_count * p.weight_bytes),
               "peak_activation_bytes": float(estimate.peak_activation_bytes) * act}
    fields = {f.name for f in dataclasses.fields(estimate)}
    return dataclasses.replace(estimate, **{k: v for k, v in changes.items() if k in fields})


__all__ = ["KIND_OF_TARGET", "NotOfferedError", "PREDICT_ONLY", "UNKNOWN_HINT",
           "board_processors", "check_known", "check_offered", "executed_precision",
           "families", "family_processors", "family_workload", "generative_families",
           "generative_runtime_reason", "not_offered_reason", "offered_precisions",
           "offers", "on_device", "prediction_only", "prediction_only_backend",
           "prediction_only_reason", "prediction_only_rows", "processor_for",
           "processor_kind", "restate", "runs_on", "runtime_class", "runtimes_on"]

"""Model specs and handles.

A model spec is a string: ``builtin:NAME``, ``package.module:factory``, ``path/file.py:factory``
or a model file (``.onnx``, ``.tflite``, OpenVINO ``.xml``, ``.keras``/``.h5``, a SavedModel
folder). Resolving it gives a :class:`ModelHandle`: the format, the input specs (shapes
include the batch dimension) and, for torch models, the module (built lazily).

Model files are read by ``edgeprof_load_model`` hook implementations (the built-in ones sit
next to each format's graph reader in ``edgeprof/profilers/estimate``), so a plugin adds a
format the same way; :func:`load_model_file` does the common checks for one.

A factory returns an ``nn.Module`` or ``(nn.Module, input_shapes)``; without shapes the
user gives ``--input-shape``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgeprof.core.errors import InputSpecError, ModelError, UnknownNameError
from edgeprof.core.importing import import_python_file
from edgeprof.core.precision import DTYPE_BYTES

@dataclass(frozen=True)
class InputSpec:
    shape: tuple[int, ...]
    dtype: str = "float32"
    name: str | None = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES.get(self.dtype, 4)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class DeclaredInput:
    """What a model file says one input takes: ``shape`` with None for a dynamic dimension
    (ONNX ``'batch'``, TFLite/IR ``-1``), ``dtypes`` the element types it accepts (empty:
    not known). Checked against the user's shapes by :func:`check_declared_inputs`."""

    name: str | None
    shape: tuple[int | None, ...]
    dtypes: tuple[str, ...] = ()

    def accepts(self) -> str:
        """The shape it takes, ``N`` for a dynamic dimension: ``Nx3x96x96``."""
        return "x".join("N" if d is None else str(d) for d in self.shape) or "a scalar"


def parse_shape(text: str) -> tuple[int, ...]:
    """Parse ``1x3x224x224`` (also ``1,3,224,224``) into a tuple of positive ints."""
    parts = [p for p in re.split(r"[x,×*]", text.strip().lower()) if p != ""]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise InputSpecError(f"input shape '{text}' is not a list of integers like 1x3x224x224"
                             ) from None
    if not shape or any(d <= 0 for d in shape):
        raise InputSpecError(f"input shape '{text}' must have positive dimensions, batch first "
                             "(e.g. 1x3x224x224)")
    return shape


def parse_dtype(text: str) -> str:
    aliases = {"float": "float32", "fp32": "float32", "f32": "float32", "half": "float16",
               "fp16": "float16", "long": "int64", "int": "int64", "i64": "int64",
               "i32": "int32", "bf16": "bfloat16"}
    d = aliases.get(text.strip().lower(), text.strip().lower())
    if d not in DTYPE_BYTES:
        raise InputSpecError(f"input dtype '{text}' is not one of {', '.join(DTYPE_BYTES)}")
    return d


@dataclass
class ModelHandle:
    """A resolved model: what it is, where it is, and what it takes as input."""

    spec: str
    name: str
    format: str  # torch | onnx | tflite | openvino | keras | saved_model
    input_specs: list[InputSpec]
    path: Path | None = None
    #: a .npz with an array ``x`` of real samples (one per row, shaped like one input
    #: without its batch dimension) used to calibrate static int8; None = synthetic inputs
    calibration: Path | None = None
    #: what the model file declares its inputs take (None: it says nothing, e.g. a torch
    #: module, whose tracer checks the shapes instead)
    declared_inputs: tuple[DeclaredInput, ...] | None = None
    _factory: Callable[[], Any] | None = field(default=None, repr=False)
    _module: Any = field(default=None, repr=False)

    @property
    def batch_size(self) -> int:
        return self.input_specs[0].shape[0] if self.input_specs and self.input_specs[0].shape else 1

    def with_batch(self, batch_size: int) -> ModelHandle:
        """The same model with the first dimension of every input set to ``batch_size``."""
        check_batch_size(batch_size)
        specs = [replace(s, shape=(batch_size, *s.shape[1:])) for s in self.input_specs]
        return replace(self, input_specs=specs)

    def torch_module(self):
        """The ``nn.Module`` in eval mode (built once). Only for torch models."""
        if self.format != "torch":
            raise ModelError(f"model '{self.spec}' is a {self.format} file, not a torch module",
                             spec=self.spec)
        if self._module is None:
            assert self._factory is not None
            module, _ = _call_factory(self._factory, self.spec)
            self._module = in_eval(module)
        return self._module

    def make_inputs(self, seed: int = 0) -> list:
        """Deterministic sample inputs as numpy arrays (token ids in [0, 100) for ints)."""
        import numpy as np

        rng = np.random.default_rng(seed)
        out = []
        for s in self.input_specs:
            if s.dtype.startswith("int") or s.dtype.startswith("uint"):
                out.append(rng.integers(0, 100, size=s.shape).astype(s.dtype))
            elif s.dtype == "bool":
                out.append(rng.random(s.shape) > 0.5)
            elif s.dtype == "bfloat16":
                out.append(rng.standard_normal(s.shape).astype("float32"))
            else:
                out.append(rng.standard_normal(s.shape).astype(s.dtype))
        return out

    def calibration_inputs(self, count: int, seed: int = 0) -> list[list]:
        """``count`` input sets for static-quantization calibration: batches of real samples
        from :attr:`calibration` when given, else ``make_inputs(seed + i)`` (synthetic)."""
        if self.calibration is None:
            return [self.make_inputs(seed + i) for i in range(count)]
        import numpy as np

        x = load_calibration(self.calibration, self)
        batch = self.batch_size
        out = []
        for i in range(count):
            idx = [(seed + i * batch + j) % len(x) for j in range(batch)]
            out.append([x[idx].astype(self.input_specs[0].dtype
                                      if self.input_specs[0].dtype != "bfloat16" else np.float32)])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "name": self.name, "format": self.format,
                "path": str(self.path) if self.path else None,
                "inputs": [s.to_dict() for s in self.input_specs],
                "calibration": str(self.calibration) if self.calibration else None}


def load_calibration(path: str | Path, handle: ModelHandle):
    """The ``x`` array of a calibration .npz, validated against the model's single input."""
    import numpy as np

    path = Path(path)
    if len(handle.input_specs) != 1:
        raise InputSpecError(f"calibration data '{path}' can serve a model with one input; "
                             f"{handle.name} has {len(handle.input_specs)}")
    try:
        with np.load(path) as data:
            if "x" not in data.files:
                raise InputSpecError(f"calibration file '{path}' has no array 'x' (it has "
                                     f"{', '.join(data.files) or 'none'})")
            x = np.asarray(data["x"])
    except (OSError, ValueError) as e:
        raise InputSpecError(f"cannot read calibration file '{path}': {e}") from None
    want = tuple(handle.input_specs[0].shape[1:])
    if tuple(x.shape[1:]) != want or len(x) == 0:
        raise InputSpecError(f"calibration file '{path}': x has shape {tuple(x.shape)}, but "
                             f"{handle.name} takes samples shaped {want} (N x {_shape_text(want)})")
    return x


def check_batch_size(batch_size: Any) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise InputSpecError(f"batch size must be a positive integer, got {batch_size!r}")
    return batch_size


def _call_factory(factory: Callable[[], Any], spec: str) -> tuple[Any, list | None]:
    try:
        result = factory()
    except Exception as e:
        raise ModelError(f"model factory for '{spec}' raised {type(e).__name__}: {e}",
                         spec=spec) from e
    shapes = None
    if isinstance(result, tuple) and len(result) == 2:
        result, shapes = result
    if not (hasattr(result, "forward") and hasattr(result, "parameters")):
        raise ModelError(f"'{spec}' returned {type(result).__name__}, not a torch nn.Module",
                         spec=spec)
    return result, shapes


def _import_callable(spec: str) -> Callable[..., Any]:
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ModelError(f"'{spec}' is not 'package.module:factory'", spec=spec)
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise ModelError(f"model file '{target}' does not exist", spec=spec)
            module = import_python_file(path, f"edgeprof_usermodel_{path.stem}")
        else:
            module = importlib.import_module(target)
    except ModelError:
        raise
    except ModuleNotFoundError as e:
        raise ModelError(f"cannot import '{target}' for model '{spec}': {e}; is it installed "
                         "or on PYTHONPATH?", spec=spec) from None
    except Exception as e:
        raise ModelError(f"importing '{target}' for model '{spec}' failed: "
                         f"{type(e).__name__}: {e}", spec=spec) from e
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise ModelError(f"'{target}' has no callable '{attr}'", spec=spec)
    return fn


def specs_from_shapes(shapes: Sequence[Sequence[int]] | None, dtypes: Sequence[str] | None,
                      spec: str) -> list[InputSpec]:
    """Input specs from the user's shapes (batch first) and dtypes (one for all, or one each)."""
    if not shapes:
        raise InputSpecError(f"model '{spec}' does not say its input shape; give --input-shape "
                             "(batch first, e.g. 1x3x224x224; repeat it for several inputs)")
    shapes = [tuple(int(d) for d in s) for s in shapes]
    dtypes = list(dtypes or [])
    if len(dtypes) == 1 and len(shapes) > 1:
        dtypes = dtypes * len(shapes)
    if dtypes and len(dtypes) != len(shapes):
        raise InputSpecError(f"{len(shapes)} input shapes but {len(dtypes)} input dtypes")
    dtypes = dtypes or ["float32"] * len(shapes)
    return [InputSpec(s, d) for s, d in zip(shapes, dtypes)]


def in_eval(module: Any) -> Any:
    """``module.eval()``, skipped where every submodule is in eval mode already (``eval``
    sets ``training`` through ``nn.Module.__setattr__`` on each of them; the check costs a
    third of that: ``benchmarks/in_eval.py``)."""
    modules = getattr(module, "modules", None)  # a duck-typed module may have eval() only
    if modules is None or any(m.training for m in modules()):
        module.eval()
    return module


def resolve_model(spec: Any, *, input_shapes: Sequence[Sequence[int]] | None = None,
                  input_dtypes: Sequence[str] | None = None, batch_size: int | None = None,
                  registry=None, calibration: str | Path | None = None) -> ModelHandle:
    """Resolve a model spec (or an ``nn.Module`` object) into a :class:`ModelHandle`.

    ``calibration``: a .npz with an array ``x`` of real samples for static int8."""
    if isinstance(spec, ModelHandle):
        handle = spec
    elif hasattr(spec, "forward") and hasattr(spec, "parameters"):  # an nn.Module object
        module = spec
        name = type(module).__name__
        handle = ModelHandle(spec=f"object:{name}", name=name, format="torch",
                             input_specs=specs_from_shapes(input_shapes, input_dtypes, name),
                             _module=in_eval(module))
        input_shapes = None
    elif not isinstance(spec, str) or not spec.strip():
        raise ModelError(f"model must be a spec string or an nn.Module, got {spec!r}")
    else:
        handle = _resolve_string(spec.strip(), input_shapes, input_dtypes, registry)
        input_shapes = None
    if input_shapes:
        handle = replace(handle,
                         input_specs=specs_from_shapes(input_shapes, input_dtypes, handle.spec))
    elif input_dtypes and handle.format == "torch":
        handle = replace(handle, input_specs=specs_from_shapes(
            [s.shape for s in handle.input_specs], input_dtypes, handle.spec))
    if batch_size is not None:
        handle = handle.with_batch(check_batch_size(batch_size))
    if calibration is not None:
        if not Path(calibration).is_file():
            raise InputSpecError(f"calibration file '{calibration}' does not exist")
        handle = replace(handle, calibration=Path(calibration))
        load_calibration(handle.calibration, handle)  # validate now, not mid-conversion
    check_declared_inputs(handle)  # before anything is estimated or run: exit 2, one line
    check_input_memory(handle)
    return handle


def _shape_text(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape))


def check_declared_inputs(handle: ModelHandle) -> None:
    """Refuse input specs the model file says it cannot take (InputSpecError, one line naming
    the input and the shape it accepts): another number of inputs, a wrong rank, a size
    against a fixed dimension (a fixed batch included), a dtype it does not accept. A
    dynamic dimension takes any size; a handle that declares nothing passes."""
    declared = handle.declared_inputs
    if not declared:
        return
    given = handle.input_specs
    if len(given) != len(declared):
        takes = ", ".join(f"'{d.name}' {d.accepts()}" if d.name else d.accepts()
                          for d in declared)
        raise InputSpecError(f"{handle.name} takes {len(declared)} input(s) ({takes}), but "
                             f"{len(given)} input shape(s) were given (one --input-shape per "
                             "input)")
    for i, (g, d) in enumerate(zip(given, declared)):
        label = f"input '{d.name}'" if d.name else f"input {i}"
        where = f"{label} of {handle.name}"
        if len(g.shape) != len(d.shape):
            raise InputSpecError(f"{where} takes {len(d.shape)} dimensions ({d.accepts()}), "
                                 f"got {_shape_text(g.shape)} ({len(g.shape)}); give "
                                 f"--input-shape {d.accepts()} (batch first)")
        wrong = [j for j, (a, b) in enumerate(zip(g.shape, d.shape)) if b is not None and a != b]
        if wrong == [0]:
            raise InputSpecError(f"{where} is fixed at batch {d.shape[0]} ({d.accepts()}); "
                                 f"batch {g.shape[0]} cannot run: use batch {d.shape[0]} or "
                                 "re-export the model with a dynamic batch dimension")
        if wrong:
            fixed = "a fixed shape" if all(b is not None for b in d.shape) else \
                "fixed dimensions"
            raise InputSpecError(f"{where} has {fixed}, {d.accepts()}; "
                                 f"{_shape_text(g.shape)} does not fit it (dimension"
                                 f"{'s' if len(wrong) > 1 else ''} "
                                 f"{', '.join(map(str, wrong))}): give --input-shape "
                                 f"{d.accepts()} or re-export the model for that shape")
        if d.dtypes and g.dtype not in d.dtypes:
            raise InputSpecError(f"{where} takes {' or '.join(d.dtypes)} ({d.accepts()}), "
                                 f"not {g.dtype}: give --input-dtype {d.dtypes[0]}")


def check_input_memory(handle: ModelHandle) -> int:
    """Refuse inputs that cannot fit in this machine's available memory before anything is
    allocated (InputSpecError naming the bytes needed); return the bytes they need."""
    import psutil

    need = sum(s.nbytes for s in handle.input_specs)
    available = psutil.virtual_memory().available
    if need > available:
        shapes = ", ".join(f"{_shape_text(s.shape)} {s.dtype}" for s in handle.input_specs)
        raise InputSpecError(f"the inputs ({shapes}) need {_bytes(need)} of memory; this machine "
                             f"has {_bytes(available)} available: give a smaller --input-shape "
                             "or --batch-size")
    return need


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} PB"  # pragma: no cover


def load_model_file(spec: str, suffixes: Sequence[str], fmt: str,
                    read_inputs: Callable[[Path], Sequence[InputSpec]] | None,
                    input_shapes: Sequence[Sequence[int]] | None = None,
                    input_dtypes: Sequence[str] | None = None,
                    read_declared: Callable[[Path], Sequence[DeclaredInput]] | None = None
                    ) -> ModelHandle | None:
    """A loader's common part: None unless ``spec`` is a path ending in one of ``suffixes``;
    else a handle of format ``fmt`` whose inputs are the user's shapes, or what
    ``read_inputs(path)`` reads from the file (None: the user must give them).

    ``read_declared(path)``: what the file says its inputs take (dynamic dimensions None),
    checked against the user's shapes by :func:`resolve_model` before anything runs; the
    built-in formats (onnx, tflite, openvino) have their own."""
    path = Path(spec)
    if path.suffix.lower() not in suffixes:
        return None
    if not path.exists():
        raise ModelError(f"model file '{spec}' does not exist", spec=spec)
    if input_shapes:
        specs = specs_from_shapes(input_shapes, input_dtypes, spec)
    elif read_inputs is not None:
        specs = read_inputs(path)
    else:
        raise InputSpecError(f"give --input-shape for {fmt} model '{spec}'")
    reader = read_declared or _DECLARED_READERS.get(fmt)
    declared = None
    if reader is not None:
        with contextlib.suppress(Exception):  # the format's own reader reports an unreadable file
            declared = reader(path)
    handle = ModelHandle(spec=spec, name=path.stem, format=fmt, input_specs=list(specs),
                         path=path, declared_inputs=tuple(declared) if declared else None)
    if not input_shapes and input_dtypes:  # the file's shapes, the user's dtypes
        handle = replace(handle, input_specs=specs_from_shapes(
            [s.shape for s in handle.input_specs], input_dtypes, spec))
    return handle


def _tflite_declared(path: Path) -> list[DeclaredInput]:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=
                              OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    out = []
    for d in interpreter.get_input_details():
        sig = d.get("shape_signature")
        sig = d["shape"] if sig is None or len(sig) != len(d["shape"]) else sig
        dtype = np.dtype(d["dtype"]).name
        scales = (d.get("quantization_parameters") or {}).get("scales")
        # a quantized input: edgeprof feeds floats and the backend quantizes them
        dtypes = ("float32", dtype) if scales is not None and len(scales) and \
            dtype in ("int8", "uint8", "int16") else (dtype,)
        out.append(DeclaredInput(d.get("name"), tuple(None if int(x) < 0 else int(x)
                                                      for x in sig), dtypes))
    return out


def _openvino_declared(path: Path) -> list[DeclaredInput]:
    import openvino as ov

    model = ov.Core().read_model(str(path))
    out = []
    for i, port in enumerate(model.inputs):
        dims = tuple(int(d.get_length()) if d.is_static else None
                     for d in port.get_partial_shape()) \
            if port.get_partial_shape().rank.is_static else None
        if dims is None:  # any rank: nothing to check
            return []
        name = port.get_any_name() if port.get_names() else f"input_{i}"
        out.append(DeclaredInput(name, dims, (port.get_element_type().to_dtype().name,)))
    return out


#: how the built-in tflite and OpenVINO files declare their inputs (the ONNX loader passes
#: its own reader, ``onnx_graph.declared_inputs``, as a plugin's loader passes
#: ``read_declared`` to :func:`load_model_file`)
_DECLARED_READERS: dict[str, Callable[[Path], Sequence[DeclaredInput]]] = {
    "tflite": _tflite_declared, "openvino": _openvino_declared}


def _resolve_string(spec: str, input_shapes, input_dtypes, registry) -> ModelHandle:
    from edgeprof.core.kinds import GENERATIVE, model_kind

    if model_kind(spec) == GENERATIVE:  # not a tensor model: say which functions take it
        raise ModelError(f"{spec} is a generative model, and this takes tensor models; "
                         "edgeprof.predict (and profile, estimate, recommend, optimize) take "
                         "either kind", spec=spec)
    if registry is None:
        from edgeprof.core.plugins import get_registry

        registry = get_registry()
    if spec.startswith("builtin:"):
        name = spec.split(":", 1)[1]
        if name not in registry.models:
            raise UnknownNameError("built-in model", name, registry.models,
                                   "Use builtin:NAME with one of these")
        factory = registry.models[name][0]
        if isinstance(factory, str):
            factory = _import_callable(factory)
        return _torch_handle(spec, name, factory, input_shapes, input_dtypes)
    handle = registry.hook.edgeprof_load_model(
        spec=spec, input_shapes=[tuple(int(d) for d in s) for s in input_shapes] if input_shapes
        else None, input_dtypes=list(input_dtypes) if input_dtypes else None)
    if handle is not None:
        if not isinstance(handle, ModelHandle):
            raise ModelError(f"the model loader that took '{spec}' returned "
                             f"{type(handle).__name__}, not a ModelHandle", spec=spec)
        return handle
    if ":" in spec:
        factory = _import_callable(spec)
        return _torch_handle(spec, spec.rpartition(":")[2], factory, input_shapes, input_dtypes)
    if Path(spec).exists():
        raise ModelError(f"'{spec}' is not a model format edgeprof reads; use .onnx, .tflite, "
                         ".xml (OpenVINO IR), .keras/.h5, a SavedModel folder, a format a "
                         "plugin adds, package.module:factory or builtin:NAME", spec=spec)
    raise ModelError(f"model '{spec}' not found: give builtin:NAME, package.module:factory, "
                     "or a model file path", spec=spec)


def _torch_handle(spec: str, name: str, factory: Callable[[], Any], input_shapes,
                  input_dtypes) -> ModelHandle:
    module, shapes = _call_factory(factory, spec)
    dtypes = input_dtypes
    if shapes and not input_shapes and isinstance(shapes, dict):  # {"shapes":..., "dtypes":...}
        dtypes = dtypes or shapes.get("dtypes")
        shapes = shapes["shapes"]
    specs = specs_from_shapes(input_shapes or shapes, dtypes, spec)
    return ModelHandle(spec=spec, name=name, format="torch", input_specs=specs,
                       _factory=factory, _module=in_eval(module))

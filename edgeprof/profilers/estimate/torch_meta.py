"""The torch graph walk on the meta device (the "Speed" notes of
:mod:`edgeprof.profilers.estimate.torch_graph`): the meta-op cache (``_META_CACHE``), the fast
meta kernels (``_fast_meta``), the garbage collector's pause while every op comes from the
cache, one op's call through them (:func:`meta_call`), and a module's parameters and buffers
swapped for their meta twins (:func:`swapped`). ``torch`` is passed in or imported inside
functions only."""

from __future__ import annotations

import contextlib
import functools
import gc
from typing import Any

from edgeprof.profilers.estimate.torch_ops import tensors_in


# ------------------------------------------------------------------- meta-op cache
#: (op, metadata of its arguments) -> how to build its outputs, learned from the op's meta
#: kernel. Many meta kernels are Python decompositions (batch and layer norm, hardtanh,
#: gelu, addmm, broadcasting add/mul: 0.1-1.3 ms a call), far slower than the walk around
#: them; a kernel's output metadata depends only on its arguments' metadata, so an op seen
#: again with the same shapes, strides, dtypes and scalar arguments gets fresh
#: ``empty_strided`` outputs of the recorded shapes instead (the same blocks repeat inside a
#: model, and across models of one search space). Only ops whose outputs are all fresh
#: dense tensors, or that return their own first argument unchanged in shape (in-place
#: ops), are recorded; views, tensor lists and anything else always run the kernel.
_META_CACHE: dict[tuple, Any] = {}
_META_CACHE_MAX = 20_000  # entries (a few hundred bytes each); emptied when full
_UNCACHEABLE = object()
_KEY_ATOMS = {int, float, bool, str, type(None)}
_KEY_TORCH_ATOMS: set = set()  # torch.dtype, device, memory_format, layout (set on first use)


class NoKey(Exception):
    """A value that makes no cache key (here, and in the block memo's keys)."""


def _key_items(items, key: list, T) -> None:
    """Append the metadata of ``items`` to ``key``, flat: each item starts with its type."""
    for x in items:
        kind = type(x)
        if kind is T:
            if not x.is_meta:
                raise NoKey
            # strided tensors only: stride() raises for sparse and nested ones
            key += (T, x.dtype, x.shape, x.stride(), x.storage_offset())
        elif kind in _KEY_ATOMS or kind in _KEY_TORCH_ATOMS:
            key += (kind, x)
        elif kind is list or kind is tuple:
            key += (kind, len(x))
            _key_items(x, key, T)
        else:
            raise NoKey


def _meta_key(func, args, kwargs, torch):
    """The op and its arguments' metadata as one flat tuple, or None (no key: a tensor not on
    the meta device, a tensor subclass, an argument of another kind)."""
    if not _KEY_TORCH_ATOMS:
        _KEY_TORCH_ATOMS.update((torch.dtype, torch.device, torch.memory_format, torch.layout))
    key = [func, torch.get_default_dtype(), len(args)]
    try:
        _key_items(args, key, torch.Tensor)
        if kwargs:
            for k, v in kwargs.items():
                key.append(k)
                _key_items((v,), key, torch.Tensor)
    except (NoKey, RuntimeError, NotImplementedError):
        return None
    return tuple(key)


def _signature(t) -> tuple:
    return (t.dtype, t.shape, t.stride(), t.storage_offset())


def dense_extent(t) -> int:
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) * t.element_size()


def _meta_recipe(func, args, kwargs, before, out, torch):
    """How to rebuild ``out`` without the kernel, or _UNCACHEABLE."""
    schema = getattr(func, "_schema", None)
    if schema is None or getattr(func, "is_view", False):
        return _UNCACHEABLE
    arg_storages = {a.untyped_storage()._cdata for a in tensors_in((args, kwargs))}
    returns = schema.returns
    if isinstance(out, torch.Tensor) and len(returns) == 1:
        ret = returns[0]
        if ret.alias_info is not None:  # in place: the first argument, metadata unchanged
            if (ret.alias_info.is_write and args and out is args[0]
                    and before == _signature(out)):
                return ("self",)
            return _UNCACHEABLE
        outs = (out,)
    elif type(out) is tuple and len(out) == len(returns) and out and all(
            isinstance(o, torch.Tensor) for o in out):
        if any(r.alias_info is not None for r in returns):
            return _UNCACHEABLE
        outs = out
    else:
        return _UNCACHEABLE
    specs, seen = [], set()
    for o in outs:
        if (type(o) is not torch.Tensor or o.device.type != "meta" or o.layout != torch.strided
                or o.storage_offset() != 0 or o.is_conj() or o.is_neg()):
            return _UNCACHEABLE
        st = o.untyped_storage()
        if st._cdata in seen or st._cdata in arg_storages or st.nbytes() != dense_extent(o):
            return _UNCACHEABLE
        seen.add(st._cdata)
        specs.append((tuple(o.shape), o.stride(), o.dtype))
    return ("new", tuple(specs), isinstance(out, torch.Tensor))


# ------------------------------------------------------------- fast meta kernels
# The meta kernels of these ops are Python decompositions (0.3-1.5 ms a call). For the
# plain case -- floating tensors with standard contiguous strides, scalar arguments -- their
# outputs are fresh standard-contiguous tensors (or, in place, the argument itself) whose
# shapes and dtypes follow from the arguments' alone; they are built directly here, the
# same metadata the kernel would give (tests/profilers/estimate/test_meta_fast.py checks
# them against the kernels). Anything else runs the kernel.
_UNARY = frozenset(("relu", "hardtanh", "hardswish", "hardsigmoid", "sigmoid", "leaky_relu",
                    "elu", "gelu", "silu", "tanh", "mish", "celu", "selu", "softplus"))
_UNARY_INPLACE = frozenset(n + "_" for n in _UNARY)
_BINARY = frozenset(("add", "sub", "mul", "div"))
_SCALAR_ARG = (int, float, bool, type(None))
_CONTIGUOUS: dict[tuple, tuple] = {}


def _contiguous_strides(shape) -> tuple:
    strides = _CONTIGUOUS.get(shape)
    if strides is None:
        if len(_CONTIGUOUS) > 10_000:
            _CONTIGUOUS.clear()
        out, step = [], 1
        for n in reversed(shape):
            out.append(step)
            step *= max(n, 1)
        strides = _CONTIGUOUS[tuple(shape)] = tuple(reversed(out))
    return strides


def _plain(t, tensor_type) -> bool:
    """A floating meta tensor with torch.empty's strides (and no offset)."""
    return (type(t) is tensor_type and t.is_meta and t.is_floating_point()
            and t.storage_offset() == 0 and t.stride() == _contiguous_strides(t.shape))


def _scalars(args, kwargs) -> bool:
    return all(type(a) in _SCALAR_ARG for a in args) and \
        all(type(v) in _SCALAR_ARG or (k == "approximate" and v in ("none", "tanh"))
            for k, v in kwargs.items())


def _normalized(x, stat_shape, torch) -> tuple:
    """A normalization's outputs: like ``x``, then two statistics of ``stat_shape`` in the
    computation dtype (float32 for half-precision ``x``)."""
    comp = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    return (torch.empty(x.shape, dtype=x.dtype, device="meta"),
            torch.empty(stat_shape, dtype=comp, device="meta"),
            torch.empty(stat_shape, dtype=comp, device="meta"))


def _fast_meta(func, args, kwargs, torch):
    """The op's outputs without its kernel, or None when this is not the plain case."""
    packet = getattr(func, "_overloadpacket", None)
    if packet is None or not args:
        return None
    name, overload = packet.__name__, func._overloadname
    T = torch.Tensor
    x = args[0]
    if name in _UNARY_INPLACE and overload == "default":
        return x if _plain(x, T) and _scalars(args[1:], kwargs) else None
    if name in _UNARY and overload == "default":
        if _plain(x, T) and _scalars(args[1:], kwargs):
            return torch.empty(x.shape, dtype=x.dtype, device="meta")
        return None
    if name in _BINARY and overload == "Tensor" and len(args) == 2 and \
            all(type(v) in (int, float) for v in kwargs.values()) and \
            set(kwargs) <= ({"alpha"} if name in ("add", "sub") else set()):
        y = args[1]
        if not _plain(x, T):
            return None
        if type(y) in (int, float):
            return torch.empty(x.shape, dtype=x.dtype, device="meta")
        if not (_plain(y, T) and y.dtype == x.dtype):
            return None
        big = x if x.dim() >= y.dim() else y
        # the output takes the larger operand's shape when the other broadcasts into it
        for n_big, n_small in zip(reversed(big.shape), reversed((y if big is x else x).shape)):
            if n_small != n_big and n_small != 1:
                return None
        return torch.empty(big.shape, dtype=x.dtype, device="meta")
    if name in ("native_batch_norm", "_native_batch_norm_legit_no_training") and \
            overload == "default":
        if name == "native_batch_norm":
            if len(args) != 8 or kwargs or args[5] is not False:
                return None
        elif len(args) != 7 or kwargs:
            return None
        if not _plain(x, T) or x.dim() < 2:
            return None
        C = x.shape[1]
        for i, t in enumerate(args[1:5]):
            if t is None and i < 2:
                continue  # no affine weight or bias (the running statistics are needed)
            if not (type(t) is T and t.is_meta and t.is_floating_point()
                    and tuple(t.shape) == (C,)):
                return None
        return _normalized(x, (C,), torch)
    if name == "native_layer_norm" and overload == "default":
        if len(args) != 5 or kwargs or not _plain(x, T):
            return None
        ns = args[1]
        if type(ns) not in (list, tuple) or not ns or not all(type(n) is int for n in ns):
            return None
        k = len(ns)
        if x.dim() < k or tuple(x.shape[-k:]) != tuple(ns):
            return None
        for t in args[2:4]:
            if t is not None and not (type(t) is T and t.is_meta and t.is_floating_point()
                                      and tuple(t.shape) == tuple(ns)):
                return None
        return _normalized(x, tuple(x.shape[:-k]) + (1,) * k, torch)
    if name == "addmm" and overload == "default":
        if len(args) != 3 or not all(type(v) in (int, float) for v in kwargs.values()) or \
                not set(kwargs) <= {"beta", "alpha"}:
            return None
        bias, m1, m2 = args
        for t in args:
            if not (type(t) is T and t.is_meta and t.dtype == m1.dtype and t.is_floating_point()):
                return None
        if m1.dim() != 2 or m2.dim() != 2 or m1.shape[1] != m2.shape[0] or bias.dim() > 2:
            return None
        out = (m1.shape[0], m2.shape[1])
        for n_out, n_b in zip(reversed(out), reversed(bias.shape)):
            if n_b != n_out and n_b != 1:
                return None
        return torch.empty(out, dtype=m1.dtype, device="meta")
    return None


#: the cyclic garbage collector, paused by a meta walk (see torch_graph._walk_once) until an op's
#: kernel has to run
GC_PAUSED = [False]


def gc_resume() -> None:
    if GC_PAUSED[0]:
        GC_PAUSED[0] = False
        gc.enable()


@functools.cache
def _meta_device(torch):
    return torch.device("meta")


def meta_call(func, args, kwargs, torch):
    """``func(*args, **kwargs)`` on meta tensors, from the cache where it can be, and the
    op's cache entry ``[recipe, counts]`` (None when its arguments make no key); the walker
    keeps the op's counts, which depend only on the key, in ``entry[1]``."""
    key = _meta_key(func, args, kwargs, torch)
    if key is None:
        gc_resume()
        return func(*args, **kwargs), None
    entry = _META_CACHE.get(key)
    if entry is None:
        before = _signature(args[0]) if args and type(args[0]) is torch.Tensor else None
        out = _fast_meta(func, args, kwargs, torch)
        if out is None:
            gc_resume()
            out = func(*args, **kwargs)
        if len(_META_CACHE) >= _META_CACHE_MAX:
            _META_CACHE.clear()
        entry = _META_CACHE[key] = [_meta_recipe(func, args, kwargs, before, out, torch), None]
        return out, entry
    recipe = entry[0]
    if recipe is _UNCACHEABLE:
        if not getattr(func, "is_view", False):
            gc_resume()
        return func(*args, **kwargs), entry
    if recipe[0] == "self":
        return args[0], entry
    empty, device = torch.empty_strided, _meta_device(torch)
    made = tuple([empty(shape, stride, dtype=dtype, device=device)
                  for shape, stride, dtype in recipe[1]])
    return (made[0] if recipe[2] else made), entry


@contextlib.contextmanager
def swapped(modules: list, twins: dict[int, Any]):
    """Every parameter and buffer of ``modules`` replaced by its meta twin for the duration
    (what ``torch.func.functional_call(module, twins_by_name, ...)`` does with tied weights,
    writing the modules' ``_parameters``/``_buffers`` dicts, without resolving names)."""
    replaced = []
    for m in modules:
        for d in (m._parameters, m._buffers):
            for k, v in d.items():
                if v is not None and id(v) in twins:
                    replaced.append((d, k, v))
    try:
        for d, k, v in replaced:
            d[k] = twins[id(v)]
        yield
    finally:
        for d, k, v in replaced:
            d[k] = v

"""The analytic graph walk of a torch ``nn.Module``: one forward pass on CPU, observed.

Rows (docs/design.md, "Estimate rows")
---------------------------------
* one row per call of a **leaf module** that does work. A leaf is a module without children,
  or one of :data:`ATOMIC_MODULES` (``nn.MultiheadAttention``, ``nn.LSTM``/``GRU``/``RNN``),
  whose internals are one row. A leaf called twice gives two rows, the second named
  ``name_1`` (as ONNX export names repeated calls);
* one row per **functional op** called outside a leaf module (``x @ w``, ``torch.matmul``,
  ``einsum``, ``F.scaled_dot_product_attention``, a residual ``+``, ``torch.cat`` ...),
  named after the module that called it and the function: ``encoder.layers.0.matmul``,
  ``layer1.0.add``; repeats in the same module get ``_1``, ``_2`` ...

A call "does work" when it runs at least one aten op that computes or writes memory; pure
view/metadata ops (``view``, ``flatten`` of a contiguous tensor, ``transpose``, ``Identity``,
``Dropout`` in eval) make no row.

How it is counted
-----------------
A ``TorchFunctionMode`` sees the user-level calls (to name functional rows) and a
``TorchDispatchMode`` sees every aten op underneath, attributed to the innermost active leaf
(tracked with forward pre/post hooks on every module) or to the functional call it came from.
The MHA/TransformerEncoder fast path is switched off during the walk
(``torch.backends.mha.set_fastpath_enabled(False)``) so attention runs as ops that can be
counted; ``aten._native_multi_head_attention`` is counted too, in case it still runs.

Conventions
-----------
* ``macs`` counts multiply-accumulates of convolution (grouped, depthwise, dilated and
  transposed), ``mm``/``addmm``/``bmm``/``baddbmm``/``mv``/``dot`` (so ``nn.Linear`` on any
  rank, ``matmul``, ``@`` and ``einsum``), fused attention (QK^T and AV: ``B·H·L·S·(E+Ev)``)
  and recurrent layers. Bias additions are not MACs. Recurrent layers (``nn.LSTM``, ``GRU``,
  ``RNN``) use a closed form at module level, because on CPU an LSTM runs as one
  ``mkldnn_rnn_layer`` op whose cost the dispatcher cannot see:
  per layer and direction ``tokens · G·H · (in + H_r)`` (+ ``tokens·P·H`` for an LSTM
  projection), G = 4 (LSTM), 3 (GRU), 1 (RNN).
* ``other_ops`` counts non-MAC arithmetic: for each non-view aten op, one operation per
  element of its largest tensor (input or output) -- elementwise ops, activations, norms,
  pooling (each input element read once), softmax, reductions, bias additions of
  addmm/baddbmm/conv (output elements), the softmax of fused attention (``B·H·L·S``). Pure
  data movement (copies, ``cat``, ``stack``, padding, embedding/index gathers, tensor
  factories) counts 0 other ops but still makes a row, since it moves bytes. Recurrent gate
  arithmetic is per token and hidden unit: 9 (LSTM), 8 (GRU), 1 (RNN).
* ``parameter_count``: a leaf's own parameters (all of them for an atomic leaf); a
  functional row gets the parameters it reads (found by storage, e.g. a ViT ``pos_embed``
  or ``cls_token`` owned by a container). Each parameter is counted once, by the first row
  that uses it (shared/tied weights); parameters never used are named in ``notes``. The
  walk's ``total_parameter_count`` is every parameter of the module, used or not (the sum
  of ``numel`` over ``parameters()``, as torchinfo and ptflops count).
* ``output_elements``: elements of the call's tensor outputs (all of them, e.g. an LSTM's
  ``output, (h, c)``); ``output_shape`` is the first output's shape.
  ``input_elements``: elements of the call's tensor arguments that are activations (not
  parameters or buffers), each distinct tensor once (MHA self-attention reads ``x`` once).
* **Peak live activation elements** come from tensor lifetimes: every storage an aten op
  creates (and the model inputs) is tracked with a weak reference to the storage; after
  each op the storages still alive are summed, and the largest sum is the peak. This is
  what eager PyTorch keeps alive at once (inputs and outputs of the running op, and
  whatever the Python code still refers to); parameters and buffers are not activations.
  Elements of every dtype count (int token ids, bool masks).

The walk runs on CPU under ``torch.no_grad()`` with the module in eval mode (its training
flags are restored after). ``torch`` is imported inside functions only.

Speed (issue 20; ``benchmarks/estimate_speed.py``)
-------------------------------------------------
The walk runs on the meta device, where many ops' meta kernels are Python decompositions
(batch/layer norm, hardtanh, gelu, addmm, broadcasting add: 0.1-1.5 ms each, more than
the rest of the walk). So:

* a **meta-op cache** (``_META_CACHE``) keyed by the op and its arguments' metadata (shapes,
  strides, dtypes, scalars) keeps how to rebuild the outputs; an op seen again gets fresh
  ``empty_strided`` outputs, or its own argument for an in-place op, without its kernel,
  and the counts of its row with them. Views always run their (C++) kernel;
* **fast meta kernels** (``_fast_meta``) build the outputs of those Python-kernel ops
  directly in the plain case (floating, standard-contiguous tensors): an op shape never
  seen costs microseconds too. tests/profilers/estimate/test_meta_fast.py checks them
  against the kernels;
* the hooks are two global module hooks looking modules up in a table (per-module hooks
  only when the model has hooks of its own), the function mode is off the stack while a
  leaf's row is open (every call inside passes through it), the tree is scanned once, and
  the cyclic garbage collector waits while every op comes from the cache.

tests/profilers/estimate/test_pinned_rows.py pins the rows of a set of models to what the
walk gave before these changes, with the cache empty and full.
"""

from __future__ import annotations

import contextlib
import gc
import math
from typing import Any

from edgeprof.core.errors import EdgeprofError, InputSpecError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.results import GraphLayer, GraphWalk

#: gate count per recurrent cell type, and elementwise gate ops per token and hidden unit
_RNN_GATES = {"LSTM": (4, 9), "GRU": (3, 8), "RNN_TANH": (1, 1), "RNN_RELU": (1, 1)}

#: aten op names that move data without arithmetic (0 other ops, but they write memory)
_DATA_MOVEMENT = {
    "clone", "_to_copy", "copy_", "copy", "cat", "stack", "constant_pad_nd", "pad",
    "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
    "replication_pad2d", "replication_pad3d", "embedding", "index_select", "index", "gather",
    "take", "repeat", "flip", "roll", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "empty", "empty_like", "empty_strided", "new_zeros", "new_ones", "new_empty",
    "new_full", "fill_", "fill", "zero_", "arange", "randn", "rand", "randn_like", "rand_like",
    "scalar_tensor", "lift_fresh_copy", "_unsafe_view", "unsafe_split", "split_with_sizes_copy",
    "narrow_copy", "select_copy", "slice_copy", "view_copy", "permute_copy", "t_copy",
    "expand_copy", "unfold_copy", "alias_copy", "detach_copy", "masked_fill", "masked_fill_",
    "where", "tril", "triu", "index_put_", "index_put", "scatter", "scatter_", "_reshape_copy",
    "tensor", "linspace", "one_hot",
}

#: functional names as the function mode reports them -> row name
_DUNDER = {
    "matmul": "matmul", "rmatmul": "matmul", "add": "add", "radd": "add", "iadd": "add_",
    "sub": "sub", "rsub": "sub", "isub": "sub_", "mul": "mul", "rmul": "mul", "imul": "mul_",
    "truediv": "div", "rtruediv": "div", "itruediv": "div_", "floordiv": "floordiv",
    "pow": "pow", "rpow": "pow", "neg": "neg", "getitem": "getitem", "setitem": "setitem",
    "and": "and", "or": "or", "mod": "mod", "lt": "lt", "gt": "gt", "le": "le", "ge": "ge",
    "eq": "eq", "ne": "ne", "invert": "invert", "abs": "abs",
}


def atomic_module_types() -> tuple[type, ...]:
    """Module types whose internals form one row (imports torch)."""
    from torch import nn

    return (nn.MultiheadAttention, nn.RNNBase)


# ---------------------------------------------------------------------------- helpers
def _prod(xs) -> int:
    return int(math.prod(int(x) for x in xs))


def _tensors(obj) -> list:
    """Distinct tensors in a nested structure (args, kwargs, outputs, PackedSequence), in
    ``torch.utils._pytree.tree_leaves`` order. Plain tuples, lists and dicts are walked here
    (most calls); any other container (namedtuples, OrderedDicts, registered pytree nodes)
    goes through ``tree_leaves``."""
    import torch

    T = torch.Tensor
    if isinstance(obj, T):
        return [obj]
    out: list = []
    _collect(obj, out, set(), T)
    return out


_SCALARS = frozenset((int, float, bool, str, complex, type(None)))


def _collect(obj, out: list, seen: set, tensor_type) -> None:
    kind = type(obj)
    if kind is tuple or kind is list:
        items = obj
    elif kind is dict:
        items = obj.values()
    elif kind in _SCALARS:
        return
    elif isinstance(obj, tensor_type):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
        return
    else:
        import torch
        from torch.utils._pytree import tree_leaves

        for leaf in tree_leaves(obj):
            if isinstance(leaf, torch.nn.utils.rnn.PackedSequence):
                leaf = leaf.data
            if isinstance(leaf, tensor_type) and id(leaf) not in seen:
                seen.add(id(leaf))
                out.append(leaf)
        return
    for x in items:
        if isinstance(x, tensor_type):
            if id(x) not in seen:
                seen.add(id(x))
                out.append(x)
        elif type(x) not in _SCALARS:
            _collect(x, out, seen, tensor_type)


def _storage_key(t) -> int | None:
    try:
        st = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse, nested, meta without storage
        return None
    if not st.nbytes():
        return None
    # meta storages hold no data (every data_ptr is 0): key them by the storage itself
    return st._cdata if t.is_meta else st.data_ptr()


def _op_name(func) -> str:
    name = func.__name__ if hasattr(func, "__name__") else str(func)
    # OpOverload names look like "add.Tensor"; the packet name is before the dot
    return getattr(getattr(func, "_overloadpacket", None), "__name__", name.split(".")[0])


_FRIENDLY: dict[Any, str] = {}


def _friendly(func) -> str:
    try:
        return _FRIENDLY[func]
    except (KeyError, TypeError):  # new, or unhashable
        pass
    name = _friendly_name(func)
    try:
        _FRIENDLY[func] = name
    except TypeError:
        pass
    return name


def _friendly_name(func) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":  # a Tensor property getter (x.T, x.mT ...)
        name = getattr(getattr(func, "__self__", None), "__name__", "attr")
    if name.startswith("__") and name.endswith("__"):
        core = name.strip("_")
        return _DUNDER.get(core, core)
    return name.strip("_") or "op"


# ---------------------------------------------------------------------- op cost table
def _mm(a, b) -> int:
    return int(a.shape[0]) * int(a.shape[1]) * int(b.shape[-1])


def _bmm(a, b) -> int:
    return int(a.shape[0]) * int(a.shape[1]) * int(a.shape[2]) * int(b.shape[2])


def _conv(x, w, transposed: bool, out) -> int:
    # weight: (Cout, Cin/g, *k) normally, (Cin, Cout/g, *k) when transposed; each output
    # element (normal) or input element (transposed) meets w[1] * prod(k) weights
    per = int(w.shape[1]) * _prod(w.shape[2:])
    return (x.numel() if transposed else out.numel()) * per


def _attention(q, k, v) -> int:
    # q (..., L, E), k (..., S, E), v (..., S, Ev); batch dims of q (heads included)
    batch = _prod(q.shape[:-2])
    L, E = int(q.shape[-2]), int(q.shape[-1])
    S, Ev = int(k.shape[-2]), int(v.shape[-1])
    return batch * L * S * (E + Ev)


def _first_tensor(out):
    ts = _tensors(out)
    return ts[0] if ts else None


def op_cost(name: str, args: tuple, kwargs: dict, out) -> tuple[int, int | None]:
    """(macs, other_ops) of one aten op; ``other_ops`` None means "use the generic rule"."""
    return _op_cost(name, args, kwargs, _first_tensor(out))


def _op_cost(name: str, args: tuple, kwargs: dict, o) -> tuple[int, int | None]:
    """:func:`op_cost` given the op's first output tensor ``o`` (or None)."""
    if name in ("mm", "_int_mm"):
        return _mm(args[0], args[1]), 0
    if name in ("addmm", "_addmm_activation"):
        return _mm(args[1], args[2]), o.numel() if o is not None else 0
    if name == "bmm":
        return _bmm(args[0], args[1]), 0
    if name == "baddbmm":
        beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
        return _bmm(args[1], args[2]), (o.numel() if beta != 0 and o is not None else 0)
    if name in ("mv",):
        return int(args[0].shape[0]) * int(args[0].shape[1]), 0
    if name == "addmv":
        return int(args[1].shape[0]) * int(args[1].shape[1]), o.numel() if o is not None else 0
    if name in ("dot", "vdot"):
        return int(args[0].numel()), 0
    if name in ("convolution", "_convolution"):
        x, w, bias = args[0], args[1], args[2]
        transposed = bool(args[6]) if len(args) > 6 else bool(kwargs.get("transposed", False))
        return _conv(x, w, transposed, o), (o.numel() if bias is not None else 0)
    if name in ("_scaled_dot_product_flash_attention_for_cpu",
                "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable"):
        q, k, v = args[0], args[1], args[2]
        return _attention(q, k, v), _prod(q.shape[:-1]) * int(k.shape[-2])
    if name == "_native_multi_head_attention":
        q, k, v = args[0], args[1], args[2]
        embed, heads = int(args[3]), int(args[4])
        tokens = (q.numel() + k.numel() + v.numel()) // embed  # rows through q/k/v projections
        L, S = int(q.shape[-2]), int(k.shape[-2])
        batch = q.numel() // (L * embed)
        attn = batch * heads * L * S * (embed // heads) * 2
        return tokens * embed * embed + attn + q.numel() * embed, batch * heads * L * S
    return 0, None


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


class _NoKey(Exception):
    pass


def _key_items(items, key: list, T) -> None:
    """Append the metadata of ``items`` to ``key``, flat: each item starts with its type."""
    for x in items:
        kind = type(x)
        if kind is T:
            if not x.is_meta:
                raise _NoKey
            # strided tensors only: stride() raises for sparse and nested ones
            key += (T, x.dtype, x.shape, x.stride(), x.storage_offset())
        elif kind in _KEY_ATOMS or kind in _KEY_TORCH_ATOMS:
            key += (kind, x)
        elif kind is list or kind is tuple:
            key += (kind, len(x))
            _key_items(x, key, T)
        else:
            raise _NoKey


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
    except (_NoKey, RuntimeError, NotImplementedError):
        return None
    return tuple(key)


def _signature(t) -> tuple:
    return (t.dtype, t.shape, t.stride(), t.storage_offset())


def _dense_extent(t) -> int:
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) * t.element_size()


def _meta_recipe(func, args, kwargs, before, out, torch):
    """How to rebuild ``out`` without the kernel, or _UNCACHEABLE."""
    schema = getattr(func, "_schema", None)
    if schema is None or getattr(func, "is_view", False):
        return _UNCACHEABLE
    arg_storages = {a.untyped_storage()._cdata for a in _tensors((args, kwargs))}
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
        if st._cdata in seen or st._cdata in arg_storages or st.nbytes() != _dense_extent(o):
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


def _computation_dtype(dtype, torch):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


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
        comp = _computation_dtype(x.dtype, torch)
        return (torch.empty(x.shape, dtype=x.dtype, device="meta"),
                torch.empty((C,), dtype=comp, device="meta"),
                torch.empty((C,), dtype=comp, device="meta"))
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
        comp = _computation_dtype(x.dtype, torch)
        stat = tuple(x.shape[:-k]) + (1,) * k
        return (torch.empty(x.shape, dtype=x.dtype, device="meta"),
                torch.empty(stat, dtype=comp, device="meta"),
                torch.empty(stat, dtype=comp, device="meta"))
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


#: the cyclic garbage collector, paused by a meta walk (see _walk_once) until an op's
#: kernel has to run
_GC_PAUSED = [False]


def _gc_resume() -> None:
    if _GC_PAUSED[0]:
        _GC_PAUSED[0] = False
        gc.enable()


_DEVICE: list = []


def _meta_device(torch):
    if not _DEVICE:
        _DEVICE.append(torch.device("meta"))
    return _DEVICE[0]


def _meta_call(func, args, kwargs, torch):
    """``func(*args, **kwargs)`` on meta tensors, from the cache where it can be, and the
    op's cache entry ``[recipe, counts]`` (None when its arguments make no key); the walker
    keeps the op's counts, which depend only on the key, in ``entry[1]``."""
    key = _meta_key(func, args, kwargs, torch)
    if key is None:
        _gc_resume()
        return func(*args, **kwargs), None
    entry = _META_CACHE.get(key)
    if entry is None:
        before = _signature(args[0]) if args and type(args[0]) is torch.Tensor else None
        out = _fast_meta(func, args, kwargs, torch)
        if out is None:
            _gc_resume()
            out = func(*args, **kwargs)
        if len(_META_CACHE) >= _META_CACHE_MAX:
            _META_CACHE.clear()
        entry = _META_CACHE[key] = [_meta_recipe(func, args, kwargs, before, out, torch), None]
        return out, entry
    recipe = entry[0]
    if recipe is _UNCACHEABLE:
        if not getattr(func, "is_view", False):
            _gc_resume()
        return func(*args, **kwargs), entry
    if recipe[0] == "self":
        return args[0], entry
    empty, device = torch.empty_strided, _meta_device(torch)
    made = tuple([empty(shape, stride, dtype=dtype, device=device)
                  for shape, stride, dtype in recipe[1]])
    return (made[0] if recipe[2] else made), entry


# ------------------------------------------------------------------------- liveness
class _Liveness:
    """Storages created during the walk (and the model inputs), tracked with weak references."""

    def __init__(self) -> None:
        import torch
        from torch.multiprocessing.reductions import StorageWeakRef

        self._ref = StorageWeakRef
        self._expired = torch.UntypedStorage._expired
        self.live: dict[int, list] = {}  # storage cdata -> [weak ref, elements]
        self.current = 0
        self.peak = 0
        self.excluded: set[int] = set()  # data_ptrs of parameters and buffers

    def sweep(self) -> None:
        expired = self._expired
        dead = [k for k, (ref, _) in self.live.items() if expired(ref.cdata)]
        for k in dead:
            self.current -= self.live.pop(k)[1]

    def add(self, t) -> bool:
        """Track ``t``'s storage; True if it is new (a fresh allocation)."""
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return False
        nbytes = st.nbytes()
        if nbytes == 0:
            return False
        key = st._cdata
        if (key if t.is_meta else st.data_ptr()) in self.excluded:
            return False
        entry = self.live.get(key)
        if entry is not None:
            if not self._expired(entry[0].cdata):
                return False
            self.current -= entry[1]
        elements = nbytes // max(t.element_size(), 1)
        self.live[key] = [self._ref(st), elements]
        self.current += elements
        return True

    def mark(self) -> None:
        """Record the peak after an op. ``current`` counts dead storages until a sweep, so it
        is never below the true sum: only when it passes the peak does the true sum (after a
        sweep) have to be known, so that is the only time the storages are swept."""
        if self.current > self.peak:
            self.sweep()
            if self.current > self.peak:
                self.peak = self.current


def _named_children(m):
    """``m.named_children()``, read off ``m._modules`` unless the class overrides it."""
    if type(m).named_children is not _module_base().named_children:
        return list(m.named_children())
    out, memo = [], set()
    for name, child in m._modules.items():
        if child is not None and id(child) not in memo:
            memo.add(id(child))
            out.append((name, child))
    return out


def _children(m):
    kind, base = type(m), _module_base()
    if kind.children is not base.children or kind.named_children is not base.named_children:
        return list(m.children())
    return [c for c in m._modules.values() if c is not None]


_BASE: list = []


def _module_base():
    if not _BASE:
        import torch

        _BASE.append(torch.nn.Module)
    return _BASE[0]


def _own_parameters(m) -> list:
    """``list(m.parameters())``; for a module without children, read off its own dict."""
    if m._modules:
        return list(m.parameters())
    out: list = []
    for p in m._parameters.values():
        if p is not None and all(p is not q for q in out):
            out.append(p)
    return out


# --------------------------------------------------------------------------- frames
class _Frame:
    __slots__ = ("name", "op_type", "order", "module", "macs", "other_ops", "work", "params",
                 "input_elements", "output_elements", "output_shape")

    def __init__(self, name: str, op_type: str, order: int, module: Any = None) -> None:
        self.name = name  # base name (before de-duplication)
        self.op_type = op_type
        self.order = order
        self.module = module  # the leaf module, or None for a functional call
        self.macs = 0
        self.other_ops = 0
        self.work = False
        self.params: list = []  # parameters this row reads
        self.input_elements = 0
        self.output_elements = 0
        self.output_shape: tuple[int, ...] = ()


#: per aten op: (packet name, writes its first argument in place, is a view, is a batch norm)
_OP_INFO: dict[Any, tuple[str, bool, bool, bool]] = {}


def _op_info(func) -> tuple[str, bool, bool, bool]:
    info = _OP_INFO.get(func)
    if info is None:
        name = _op_name(func)
        schema = getattr(func, "_schema", None)
        returns = schema.returns if schema is not None else ()
        inplace = any(r.alias_info is not None and r.alias_info.is_write for r in returns)
        info = (name, inplace, bool(getattr(func, "is_view", False)), "batch_norm" in name)
        _OP_INFO[func] = info
    return info


class _Walker:
    def __init__(self, module, extra_atomic: tuple[type, ...] = (),
                 twins: dict[int, Any] | None = None, params=None, buffers=None) -> None:
        import torch

        self.torch = torch
        self.root = module
        self.atomic = atomic_module_types() + tuple(extra_atomic)
        self.rnn_type = torch.nn.RNNBase
        self.tensor_type = torch.Tensor
        self.module_stack: list[tuple[str, Any, bool]] = []  # (name, module, is_leaf)
        self.frame: _Frame | None = None  # the leaf or functional call now running
        self.frames: list[_Frame] = []
        self.order = 0
        self.internal = False
        self.live = _Liveness()
        # parameters and buffers by storage, so reads of them are not activations
        # ``twins``: id of a parameter or buffer -> the meta tensor that stands in for it
        # while the forward runs on the meta device; rows always name the real parameter
        twins = twins or {}
        self.params = list(module.parameters()) if params is None else params
        buffers = list(module.buffers()) if buffers is None else buffers
        self.param_by_ptr: dict[int, list] = {}
        for p in self.params:
            if p.numel():
                self.param_by_ptr.setdefault(_storage_key(twins.get(id(p), p)), []).append(p)
        self.const_ptrs = set(self.param_by_ptr)
        for b in buffers:
            if b.numel():
                self.const_ptrs.add(_storage_key(twins.get(id(b), b)))
        self.live.excluded = set(self.const_ptrs)
        self.counted: set[int] = set()  # ids of parameters already attributed to a row
        self.handles: list = []
        #: id of a module of the tree -> ((name, module, is_leaf), row label, op type,
        #: a leaf's parameters, is recurrent)
        self.info: dict[int, tuple] = {}
        # the function mode, popped while a leaf's frame is open (see _pre)
        self.function_mode = None
        self.function_mode_off = False

    # -- structure ------------------------------------------------------------------
    def is_leaf(self, m) -> bool:
        return isinstance(m, self.atomic) or not any(True for _ in _children(m))

    def install_hooks(self) -> None:
        """Forward pre/post hooks on every module down to the leaves.

        The hooks are two global module hooks (``register_module_forward_pre_hook`` and
        ``register_module_forward_hook``) that look the module up in :attr:`info`, which
        costs one registration instead of two per module. If any module of the tree has hooks
        of its own they go on each module instead, after the user's, as before: then the
        user's hooks run inside the row they belong to, and ours see what theirs return.
        """
        import torch.nn.modules.module as nn_module

        seen: set[int] = set()
        info = self.info
        own_hooks = False
        stack = [("", self.root)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:  # a module shared by two parents keeps its first name
                continue
            seen.add(id(m))
            leaf = self.is_leaf(m)
            own_hooks = own_hooks or bool(m._forward_pre_hooks or m._forward_hooks)
            # a leaf's parameters, read now: during a meta walk the module holds twins
            params = _own_parameters(m) if leaf else None
            info[id(m)] = ((name, m, leaf), name or type(m).__name__.lower(), type(m).__name__,
                           params, isinstance(m, self.rnn_type))
            if leaf:
                continue  # the internals of a leaf (e.g. MHA.out_proj) belong to its row
            children = [(f"{name}.{child_name}" if name else child_name, child)
                        for child_name, child in _named_children(m)]
            stack.extend(reversed(children))  # depth first, in registration order
        if own_hooks:
            for entry in info.values():
                m = entry[0][1]
                self.handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
                self.handles.append(m.register_forward_hook(self._post, with_kwargs=True,
                                                            always_call=True))
        else:
            self.handles.append(nn_module.register_module_forward_pre_hook(self._pre))
            self.handles.append(nn_module.register_module_forward_hook(
                self._post, with_kwargs=True, always_call=True))

    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _activation_elements(self, tensors) -> int:
        n = 0
        for t in tensors:
            if _storage_key(t) not in self.const_ptrs:
                n += t.numel()
        return n

    # While a leaf's frame is open every torch function call inside it passes straight
    # through the function mode, so the mode is taken off the stack for that time (it is
    # the top of the stack: anything pushed inside a forward is popped inside it)
    def _function_mode_off(self) -> None:
        C = self.torch._C
        n = C._len_torch_function_stack()
        if self.function_mode is not None and n and \
                C._get_function_stack_at(n - 1) is self.function_mode:
            C._pop_torch_function_stack()
            self.function_mode_off = True

    def function_mode_on(self) -> None:
        if self.function_mode_off:
            self.torch._C._push_on_torch_function_stack(self.function_mode)
            self.function_mode_off = False

    def _pre(self, module, args, kwargs=None):
        info = self.info.get(id(module))
        if info is None:  # not in the tree, or inside a leaf
            return None
        entry, label, op_type, params, _ = info
        self.module_stack.append(entry)
        if entry[2] and self.frame is None:  # a leaf: its row opens
            self.order += 1
            f = _Frame(label, op_type, self.order, module)
            f.params = list(params)
            self.frame = f
            self._function_mode_off()
        return None

    def _post(self, module, args, *rest):
        # (module, args, kwargs, output); a global hook called after an exception gets
        # (module, args, output)
        info = self.info.get(id(module))
        if info is None:
            return None
        stack = self.module_stack
        if stack and stack[-1][1] is module:
            stack.pop()
        f = self.frame
        if not (info[0][2] and f is not None and f.module is module):
            return None
        kwargs = rest[0] if len(rest) == 2 else {}
        output = rest[-1]
        self.internal = True  # the leaf's row closes
        try:
            self.frame = None
            f.input_elements = self._activation_elements(_tensors((args, kwargs)))
            outs = _tensors(output)
            f.output_elements = sum(t.numel() for t in outs)
            f.output_shape = tuple(int(d) for d in outs[0].shape) if outs else ()
            if info[4]:
                f.macs, f.other_ops = _rnn_closed_form(module, args, kwargs)
                f.work = True
            self._close(f)
        finally:
            self.internal = False
            self.function_mode_on()
        return None

    def _next(self) -> int:
        self.order += 1
        return self.order

    def _caller(self) -> str:
        return self.module_stack[-1][0] if self.module_stack else ""

    def inside_leaf(self) -> bool:
        return bool(self.module_stack) and self.module_stack[-1][2]

    def _close(self, f: _Frame) -> None:
        if f.module is None and not f.work:
            return  # a functional call that only looked at or viewed tensors
        counted = self.counted
        new_params = [p for p in f.params if id(p) not in counted]
        if f.work or new_params:
            for p in new_params:
                counted.add(id(p))
            f.params = new_params
            self.frames.append(f)

    # -- functional calls -------------------------------------------------------------
    def functional(self, func, args, kwargs):
        caller = self._caller()
        base = _friendly(func)
        f = _Frame(f"{caller}.{base}" if caller else base, base, self._next())
        ins = _tensors((args, kwargs))
        self.internal = True
        try:
            f.input_elements = self._activation_elements(ins)
            for t in ins:
                f.params.extend(self.param_by_ptr.get(_storage_key(t), ()))
        finally:
            self.internal = False
        self.frame = f
        try:
            result = func(*args, **kwargs)
        finally:
            self.frame = None
        self.internal = True
        try:
            outs = _tensors(result)
            f.output_elements = sum(t.numel() for t in outs)
            f.output_shape = tuple(int(d) for d in outs[0].shape) if outs else ()
            self._close(f)
        finally:
            self.internal = False
        return result

    # -- aten ops -----------------------------------------------------------------------
    def aten(self, func, args, kwargs, out, entry=None) -> None:
        live = self.live
        name, inplace, is_view, batch_norm = _op_info(func)
        new_storage = False
        outputs = [out] if type(out) is self.tensor_type else _tensors(out)
        # a batch norm's saved statistics are empty on CPU in eval but sized C on the meta
        # device: only the normalized output is an activation either way
        for t in (outputs[:1] if batch_norm else outputs):
            if live.add(t):
                new_storage = True
        live.mark()
        counts = entry[1] if entry is not None else None
        if counts is None:
            macs, other = _op_cost(name, args, kwargs, outputs[0] if outputs else None)
            if entry is not None:  # the generic rule's count, kept for the next call too
                generic = max([t.numel() for t in _tensors((args, kwargs))]
                              + [t.numel() for t in outputs], default=0)
                entry[1] = counts = (macs, other, generic)
        else:
            macs, other = counts[0], counts[1]
        if other is None:
            if is_view or name in _DATA_MOVEMENT or not (new_storage or inplace):
                other = 0
            elif counts is not None:
                other = counts[2]
            else:
                other = max([t.numel() for t in _tensors((args, kwargs))]
                            + [t.numel() for t in outputs], default=0)
        work = macs > 0 or other > 0 or (new_storage and not is_view)
        if not work:
            return
        f = self.frame
        if f is None:  # an op issued without a torch-function call: a row of its own
            caller = self._caller()
            f = _Frame(f"{caller}.{name}" if caller else name, name, self._next())
            f.output_elements = sum(t.numel() for t in outputs)
            o = outputs[0] if outputs else None
            f.output_shape = tuple(int(d) for d in o.shape) if o is not None else ()
            f.input_elements = self._activation_elements(_tensors((args, kwargs)))
            f.macs, f.other_ops, f.work = macs, other, True
            self._close(f)
            return
        if f.module is not None and isinstance(f.module, self.rnn_type):
            return  # closed form at module level
        f.macs += macs
        f.other_ops += other
        f.work = True


def _rnn_closed_form(m, args, kwargs) -> tuple[int, int]:
    """(macs, other_ops) of a whole ``nn.LSTM``/``GRU``/``RNN`` call."""
    import torch

    x = args[0] if args else kwargs.get("input")
    if isinstance(x, torch.nn.utils.rnn.PackedSequence):
        tokens = int(x.data.shape[0])
    else:
        tokens = int(x.numel()) // int(m.input_size)
    gates, gate_ops = _RNN_GATES.get(m.mode, (1, 1))
    H = int(m.hidden_size)
    P = int(getattr(m, "proj_size", 0) or 0)
    Hr = P or H  # size of the recurrent state fed back
    D = 2 if m.bidirectional else 1
    macs = 0
    for layer in range(int(m.num_layers)):
        in_l = int(m.input_size) if layer == 0 else Hr * D
        per = gates * H * (in_l + Hr) + (P * H if P else 0)
        macs += D * tokens * per
    other = int(m.num_layers) * D * tokens * H * gate_ops
    return macs, other


# --------------------------------------------------------------------------- public
def _name_rows(frames: list[_Frame]) -> list[str]:
    used: set[str] = set()
    counts: dict[str, int] = {}
    names = []
    for f in frames:
        n = counts.get(f.name, 0)
        candidate = f.name if n == 0 else f"{f.name}_{n}"
        while candidate in used:
            n += 1
            candidate = f"{f.name}_{n}"
        counts[f.name] = n + 1
        used.add(candidate)
        names.append(candidate)
    return names


def walk_torch(module, inputs: list, *, atomic: tuple[type, ...] = (),
               meta: bool = True) -> GraphWalk:
    """Walk ``module`` on ``inputs`` (a list of CPU tensors) and return its rows.

    ``atomic`` adds module types whose internals form one row. A forward pass that fails
    raises :class:`InputSpecError` naming the input shapes and the model's first error line.

    With ``meta`` (the default) the forward runs on the meta device: parameters, buffers and
    inputs are swapped for meta tensors (``torch.func.functional_call``), so every op yields
    its output's shape and dtype without computing a value, and a ResNet-50 is counted
    without running its convolutions. A model that needs values (data-dependent control
    flow, ``.item()``, CPU constants mixed in) is walked again on the real tensors.
    """
    import torch

    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    inputs = list(inputs)
    if meta:
        try:
            return _walk_once(module, inputs, atomic, meta=True)
        except EdgeprofError:
            raise
        except Exception:  # values were needed: walk the real forward
            pass
    return _walk_once(module, inputs, atomic, meta=False)


def _members(module) -> tuple[list, list, list]:
    """``(list(module.modules()), list(module.parameters()), list(module.buffers()))`` in one
    pass over the tree (``named_modules`` recurses through nested generators, a cost per
    module and level); a module class that overrides any of those methods is asked."""
    import torch

    base = torch.nn.Module
    kind = type(module)
    if any(getattr(kind, n) is not getattr(base, n) for n in (
            "modules", "named_modules", "parameters", "named_parameters", "buffers",
            "named_buffers", "_named_members")):
        return list(module.modules()), list(module.parameters()), list(module.buffers())
    modules: list = []
    seen: set[int] = set()
    stack = [module]
    while stack:  # depth first, children in registration order, each module once
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        modules.append(m)
        stack.extend(reversed([c for c in m._modules.values() if c is not None]))
    params: list = []
    buffers: list = []
    seen_p: set[int] = set()
    seen_b: set[int] = set()
    for m in modules:
        for p in m._parameters.values():
            if p is not None and id(p) not in seen_p:
                seen_p.add(id(p))
                params.append(p)
        for b in m._buffers.values():
            if b is not None and id(b) not in seen_b:
                seen_b.add(id(b))
                buffers.append(b)
    return modules, params, buffers


_MODE_TYPES: tuple = ()


def _mode_types() -> tuple[type, type]:
    """The torch function mode and the dispatch mode of a walk (classes made once)."""
    global _MODE_TYPES
    if _MODE_TYPES:
        return _MODE_TYPES
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Functions(TorchFunctionMode):
        def __init__(self, walker) -> None:
            super().__init__()
            self.walker = walker

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            walker = self.walker
            if walker.frame is not None or walker.internal or walker.inside_leaf():
                return func(*args, **kwargs)
            return walker.functional(func, args, kwargs)

    class _Aten(TorchDispatchMode):
        def __init__(self, walker, meta: bool) -> None:
            super().__init__()
            self.walker = walker
            self.meta = meta

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # no torch._disable_dynamo wrapper around each call: never compiled

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if self.meta:
                out, entry = _meta_call(func, args, kwargs, torch)
            else:
                out, entry = func(*args, **kwargs), None
            walker = self.walker
            if not walker.internal:
                walker.aten(func, args, kwargs, out, entry)
            return out

    _MODE_TYPES = (_Functions, _Aten)
    return _MODE_TYPES


@contextlib.contextmanager
def _swapped(modules: list, twins: dict[int, Any]):
    """Every parameter and buffer of ``modules`` replaced by its meta twin for the duration
    (what ``torch.func.functional_call(module, twins_by_name, ...)`` does with tied weights,
    writing the modules' ``_parameters``/``_buffers`` dicts, without resolving names)."""
    swapped = []
    for m in modules:
        for d in (m._parameters, m._buffers):
            for k, v in d.items():
                if v is not None and id(v) in twins:
                    swapped.append((d, k, v))
    try:
        for d, k, v in swapped:
            d[k] = twins[id(v)]
        yield
    finally:
        for d, k, v in swapped:
            d[k] = v


def _walk_once(module, inputs: list, atomic: tuple[type, ...], *, meta: bool) -> GraphWalk:
    # A walk allocates thousands of small objects (frames, hook records, meta tensors),
    # freed by reference counting, yet they trigger the cyclic collector a few times per
    # walk, and its occasional full passes over every object of the process cost more than
    # the walk. A meta walk pauses it while every op comes from the meta-op cache (or is a
    # view): the first kernel that runs turns it back on, since a Python meta kernel may
    # leave a cycle holding a tensor, whose lifetime (the peak) then follows the collector
    # as it always did.
    pause = meta and gc.isenabled()
    if pause:
        gc.disable()
        _GC_PAUSED[0] = True
    try:
        return _walk(module, inputs, atomic, meta=meta)
    finally:
        if pause:
            _gc_resume()


def _walk(module, inputs: list, atomic: tuple[type, ...], *, meta: bool) -> GraphWalk:
    import torch

    functions_mode, aten_mode = _mode_types()
    modules, params, buffers = _members(module)
    twins: dict[int, Any] = {}  # id of a parameter or buffer -> its meta twin
    run_inputs = inputs
    if meta:
        for t in params + buffers:
            twins[id(t)] = t.to("meta")
        run_inputs = [t if t.is_meta else t.to("meta") for t in inputs]
    walker = _Walker(module, atomic, twins, params, buffers)

    for t in run_inputs:
        walker.live.add(t)
    walker.live.mark()
    input_elements = sum(int(t.numel()) for t in inputs)

    training = [m.training for m in modules]
    fastpath = torch.backends.mha.get_fastpath_enabled()
    walker.install_hooks()
    try:
        if any(training):
            module.eval()
        torch.backends.mha.set_fastpath_enabled(False)
        functions = walker.function_mode = functions_mode(walker)
        with torch.no_grad(), functions, aten_mode(walker, meta):
            try:
                if meta:
                    with _swapped(modules, twins):
                        output = module(*run_inputs)
                else:
                    output = module(*inputs)
            finally:
                walker.function_mode_on()  # back on the stack before the mode exits
        del output
    except EdgeprofError:
        raise
    except Exception as e:  # the model rejected these inputs
        if meta:
            raise
        shapes = ", ".join("x".join(str(d) for d in t.shape) + f" ({str(t.dtype).split('.')[-1]})"
                           for t in inputs)
        first = (str(e).strip().splitlines() or [""])[0]
        raise InputSpecError(f"the model rejected input shape {shapes}: {type(e).__name__}: "
                             f"{first}; give the shape it expects (batch first)") from e
    finally:
        walker.remove_hooks()
        walker.function_mode = None  # no walker <-> mode cycle: freed without the collector
        torch.backends.mha.set_fastpath_enabled(fastpath)
        if any(training):  # restore the training flags (one pass when they were all set)
            if all(training):
                module.train(True)
            else:
                for m, flag in zip(modules, training):
                    m.train(flag)

    frames = sorted(walker.frames, key=lambda f: f.order)
    names = _name_rows(frames)
    layers = [
        GraphLayer(name=n, op_type=f.op_type, output_shape=f.output_shape,
                   output_elements=int(f.output_elements), input_elements=int(f.input_elements),
                   parameter_count=int(sum(p.numel() for p in f.params)), macs=int(f.macs),
                   other_ops=int(f.other_ops))
        for n, f in zip(names, frames)
    ]
    notes = []
    unused = [p for p in params if id(p) not in walker.counted]
    if unused:
        notes.append(f"{sum(p.numel() for p in unused)} parameter elements in {len(unused)} "
                     "tensors were not used by the forward pass and are not in any row")
    return GraphWalk(layers=layers, peak_live_elements=int(walker.live.peak),
                     input_elements=input_elements, notes=notes,
                     total_parameter_count=int(sum(p.numel() for p in params)))


_TORCH_DTYPES = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool",
}


def _torch_dtype(spec):
    import torch

    return getattr(torch, _TORCH_DTYPES.get(spec.dtype, "float32"))


def inputs_for(model) -> list:
    """Deterministic CPU tensors for a :class:`ModelHandle`'s input specs."""
    import torch

    return [torch.from_numpy(arr).to(_torch_dtype(spec))
            for spec, arr in zip(model.input_specs, model.make_inputs())]


def meta_inputs_for(model) -> list:
    """Meta tensors shaped like :func:`inputs_for`'s (no values are drawn)."""
    import torch

    return [torch.empty(tuple(spec.shape), dtype=_torch_dtype(spec), device="meta")
            for spec in model.input_specs]


def walk_model(model) -> GraphWalk:
    """The graph walk of a torch :class:`ModelHandle` on inputs built from its input specs.

    The meta walk needs only the inputs' shapes and dtypes; the sample values are drawn
    only when the model needs them (the real walk)."""
    module = model.torch_module()
    try:
        try:
            return _walk_once(module, meta_inputs_for(model), (), meta=True)
        except EdgeprofError:
            raise
        except Exception:  # values were needed: walk the real forward
            pass
        return _walk_once(module, inputs_for(model), (), meta=False)
    except InputSpecError as e:
        raise InputSpecError(f"model '{model.name}': {e}") from e.__cause__


# -- edgeprof's hooks (listed in plugins.toml): this module walks torch modules --------------
@hookimpl
def edgeprof_read_graph(model) -> GraphWalk | None:
    return walk_model(model) if model.format == "torch" else None

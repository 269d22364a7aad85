"""The torch graph walk's per-op counting rules (:mod:`edgeprof.profilers.estimate.torch_graph`
says what is counted and why): MACs and other ops of an aten op (:func:`op_cost`), of a whole
recurrent layer (:func:`rnn_closed_form`), the ops that only move data, an op's name and a
functional call's row name, and the tensors in a call's arguments and outputs.
``torch`` is imported inside functions only."""

from __future__ import annotations

import math
from typing import Any

#: gate count per recurrent cell type, and elementwise gate ops per token and hidden unit
_RNN_GATES = {"LSTM": (4, 9), "GRU": (3, 8), "RNN_TANH": (1, 1), "RNN_RELU": (1, 1)}

#: aten op names that move data without arithmetic (0 other ops, but they write memory)
DATA_MOVEMENT = {
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


# ---------------------------------------------------------------------------- helpers
def _prod(xs) -> int:
    return int(math.prod(int(x) for x in xs))


def tensors_in(obj) -> list:
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
    else:  # (never a tensor: those are taken before this is called)
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


def tensor_storage_key(t) -> int | None:
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


def friendly(func) -> str:
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


def op_cost(name: str, args: tuple, kwargs: dict, out) -> tuple[int, int | None]:
    """(macs, other_ops) of one aten op; ``other_ops`` None means "use the generic rule"."""
    outs = tensors_in(out)
    return op_cost_given_output(name, args, kwargs, outs[0] if outs else None)


def op_cost_given_output(name: str, args: tuple, kwargs: dict, o) -> tuple[int, int | None]:
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


#: per aten op: (packet name, writes its first argument in place, is a view, is a batch norm)
_OP_INFO: dict[Any, tuple[str, bool, bool, bool]] = {}


def op_info(func) -> tuple[str, bool, bool, bool]:
    info = _OP_INFO.get(func)
    if info is None:
        name = _op_name(func)
        schema = getattr(func, "_schema", None)
        returns = schema.returns if schema is not None else ()
        inplace = any(r.alias_info is not None and r.alias_info.is_write for r in returns)
        info = (name, inplace, bool(getattr(func, "is_view", False)), "batch_norm" in name)
        _OP_INFO[func] = info
    return info


def rnn_closed_form(m, args, kwargs) -> tuple[int, int]:
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

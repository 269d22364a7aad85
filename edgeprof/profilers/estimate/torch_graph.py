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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
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
    """Distinct tensors in a nested structure (args, kwargs, outputs, PackedSequence)."""
    import torch
    from torch.utils._pytree import tree_leaves

    out, seen = [], set()
    for leaf in tree_leaves(obj):
        if isinstance(leaf, torch.nn.utils.rnn.PackedSequence):
            leaf = leaf.data
        if isinstance(leaf, torch.Tensor) and id(leaf) not in seen:
            seen.add(id(leaf))
            out.append(leaf)
    return out


def _storage_key(t) -> int | None:
    try:
        st = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse, nested, meta without storage
        return None
    if not st.nbytes():
        return None
    # meta storages hold no data (every data_ptr is 0): key them by the storage itself
    return st._cdata if st.device.type == "meta" else st.data_ptr()


def _op_name(func) -> str:
    name = func.__name__ if hasattr(func, "__name__") else str(func)
    # OpOverload names look like "add.Tensor"; the packet name is before the dot
    return getattr(getattr(func, "_overloadpacket", None), "__name__", name.split(".")[0])


def _friendly(func) -> str:
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
    o = _first_tensor(out)
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


# ------------------------------------------------------------------------- liveness
class _Liveness:
    """Storages created during the walk (and the model inputs), tracked with weak references."""

    def __init__(self) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        self._ref = StorageWeakRef
        self.live: dict[int, tuple[Any, int]] = {}  # storage cdata -> (weak ref, elements)
        self.current = 0
        self.peak = 0
        self.excluded: set[int] = set()  # data_ptrs of parameters and buffers

    def sweep(self) -> None:
        dead = [k for k, (ref, _) in self.live.items() if ref.expired()]
        for k in dead:
            self.current -= self.live.pop(k)[1]

    def add(self, t) -> bool:
        """Track ``t``'s storage; True if it is new (a fresh allocation)."""
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return False
        if st.nbytes() == 0 or _storage_key(t) in self.excluded:
            return False
        key = st._cdata
        entry = self.live.get(key)
        if entry is not None and not entry[0].expired():
            return False
        if entry is not None:
            self.current -= entry[1]
        elements = st.nbytes() // max(t.element_size(), 1)
        self.live[key] = (self._ref(st), elements)
        self.current += elements
        return True

    def mark(self) -> None:
        self.peak = max(self.peak, self.current)


# --------------------------------------------------------------------------- frames
@dataclass
class _Frame:
    name: str  # base name (before de-duplication)
    op_type: str
    order: int
    module: Any = None  # the leaf module, or None for a functional call
    macs: int = 0
    other_ops: int = 0
    work: bool = False
    params: list = field(default_factory=list)  # parameters this row reads
    input_elements: int = 0
    output_elements: int = 0
    output_shape: tuple[int, ...] = ()


class _Walker:
    def __init__(self, module, extra_atomic: tuple[type, ...] = (),
                 twins: dict[str, Any] | None = None) -> None:
        import torch

        self.torch = torch
        self.root = module
        self.atomic = atomic_module_types() + tuple(extra_atomic)
        self.module_stack: list[tuple[str, Any, bool]] = []  # (name, module, is_leaf)
        self.frame: _Frame | None = None  # the leaf or functional call now running
        self.frames: list[_Frame] = []
        self.order = 0
        self.internal = False
        self.live = _Liveness()
        # parameters and buffers by storage, so reads of them are not activations
        # ``twins``: name -> the meta tensor that stands in for that parameter or buffer
        # while the forward runs on the meta device; rows always name the real parameter
        twins = twins or {}
        self.real_of: dict[int, Any] = {}
        self.param_by_ptr: dict[int, list] = {}
        for n, p in module.named_parameters():
            seen = twins.get(n, p)
            self.real_of[id(seen)] = p
            if p.numel():
                self.param_by_ptr.setdefault(_storage_key(seen), []).append(p)
        self.const_ptrs = set(self.param_by_ptr)
        for n, b in module.named_buffers():
            if b.numel():
                self.const_ptrs.add(_storage_key(twins.get(n, b)))
        self.live.excluded = set(self.const_ptrs)
        self.counted: set[int] = set()  # ids of parameters already attributed to a row
        self.handles: list = []

    # -- structure ------------------------------------------------------------------
    def is_leaf(self, m) -> bool:
        return isinstance(m, self.atomic) or not any(True for _ in m.children())

    def install_hooks(self) -> None:
        seen: set[int] = set()

        def visit(name: str, m) -> None:
            if id(m) in seen:  # a module shared by two parents keeps its first name
                return
            seen.add(id(m))
            leaf = self.is_leaf(m)
            self.handles.append(m.register_forward_pre_hook(self._pre(name, m, leaf),
                                                            with_kwargs=True))
            self.handles.append(m.register_forward_hook(self._post(m, leaf), with_kwargs=True,
                                                        always_call=True))
            if leaf:
                return  # the internals of a leaf (e.g. MHA.out_proj) belong to its row
            for child_name, child in m.named_children():
                visit(f"{name}.{child_name}" if name else child_name, child)

        visit("", self.root)

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

    def _pre(self, name: str, m, leaf: bool):
        def hook(module, args, kwargs):
            self.internal = True
            try:
                self.module_stack.append((name, m, leaf))
                if leaf and self.frame is None:
                    label = name or type(m).__name__.lower()
                    f = _Frame(label, type(m).__name__, self._next(), module=m)
                    f.input_elements = self._activation_elements(_tensors((args, kwargs)))
                    f.params = [self.real_of.get(id(p), p) for p in m.parameters()]
                    self.frame = f
            finally:
                self.internal = False
            return None

        return hook

    def _post(self, m, leaf: bool):
        def hook(module, args, kwargs, output):
            self.internal = True
            try:
                if self.module_stack and self.module_stack[-1][1] is m:
                    self.module_stack.pop()
                f = self.frame
                if leaf and f is not None and f.module is m:
                    self.frame = None
                    outs = _tensors(output)
                    f.output_elements = sum(t.numel() for t in outs)
                    f.output_shape = tuple(int(d) for d in outs[0].shape) if outs else ()
                    if isinstance(m, self.torch.nn.RNNBase):
                        f.macs, f.other_ops = _rnn_closed_form(m, args, kwargs)
                        f.work = True
                    self._close(f)
            finally:
                self.internal = False
            return None

        return hook

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
        new_params = [p for p in f.params if id(p) not in self.counted]
        if f.work or new_params:
            for p in new_params:
                self.counted.add(id(p))
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
    def aten(self, func, args, kwargs, out) -> None:
        self.live.sweep()
        name = _op_name(func)
        new_storage = False
        # a batch norm's saved statistics are empty on CPU in eval but sized C on the meta
        # device: only the normalized output is an activation either way
        outputs = _tensors(out)[:1] if "batch_norm" in name else _tensors(out)
        for t in outputs:
            new_storage |= self.live.add(t)
        self.live.mark()
        macs, other = op_cost(name, args, kwargs, out)
        schema = getattr(func, "_schema", None)
        schema_returns = schema.returns if schema is not None else ()
        inplace = any(r.alias_info is not None and r.alias_info.is_write for r in schema_returns)
        is_view = bool(getattr(func, "is_view", False))
        if other is None:
            if is_view or name in _DATA_MOVEMENT or not (new_storage or inplace):
                other = 0
            else:
                sizes = [t.numel() for t in _tensors((args, kwargs, out))]
                other = max(sizes) if sizes else 0
        work = macs > 0 or other > 0 or (new_storage and not is_view)
        if not work:
            return
        f = self.frame
        if f is None:  # an op issued without a torch-function call: a row of its own
            caller = self._caller()
            f = _Frame(f"{caller}.{name}" if caller else name, name, self._next())
            f.output_elements = sum(t.numel() for t in _tensors(out))
            o = _first_tensor(out)
            f.output_shape = tuple(int(d) for d in o.shape) if o is not None else ()
            f.input_elements = self._activation_elements(_tensors((args, kwargs)))
            f.macs, f.other_ops, f.work = macs, other, True
            self._close(f)
            return
        if isinstance(f.module, self.torch.nn.RNNBase):
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


def _walk_once(module, inputs: list, atomic: tuple[type, ...], *, meta: bool) -> GraphWalk:
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    twins: dict[str, Any] = {}
    run_inputs = inputs
    if meta:
        twins = {n: t.to("meta") for n, t in module.named_parameters()}
        twins.update({n: t.to("meta") for n, t in module.named_buffers()})
        run_inputs = [t.to("meta") for t in inputs]
    walker = _Walker(module, atomic, twins)

    class _Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if walker.internal or walker.frame is not None or walker.inside_leaf():
                return func(*args, **kwargs)
            return walker.functional(func, args, kwargs)

    class _Aten(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if not walker.internal:
                walker.aten(func, args, kwargs, out)
            return out

    for t in run_inputs:
        walker.live.add(t)
    walker.live.mark()
    input_elements = sum(int(t.numel()) for t in inputs)

    training = {m: m.training for m in module.modules()}
    fastpath = torch.backends.mha.get_fastpath_enabled()
    walker.install_hooks()
    try:
        module.eval()
        torch.backends.mha.set_fastpath_enabled(False)
        with torch.no_grad(), _Functions(), _Aten():
            if meta:
                output = torch.func.functional_call(module, twins, tuple(run_inputs))
            else:
                output = module(*inputs)
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
        torch.backends.mha.set_fastpath_enabled(fastpath)
        for m, flag in training.items():
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
    unused = [p for p in module.parameters() if id(p) not in walker.counted]
    if unused:
        notes.append(f"{sum(p.numel() for p in unused)} parameter elements in {len(unused)} "
                     "tensors were not used by the forward pass and are not in any row")
    return GraphWalk(layers=layers, peak_live_elements=int(walker.live.peak),
                     input_elements=input_elements, notes=notes,
                     total_parameter_count=int(sum(p.numel() for p in module.parameters())))


_TORCH_DTYPES = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool",
}


def inputs_for(model) -> list:
    """Deterministic CPU tensors for a :class:`ModelHandle`'s input specs."""
    import torch

    out = []
    for spec, arr in zip(model.input_specs, model.make_inputs()):
        t = torch.from_numpy(arr)
        dtype = getattr(torch, _TORCH_DTYPES.get(spec.dtype, "float32"))
        out.append(t.to(dtype))
    return out


def walk_model(model) -> GraphWalk:
    """The graph walk of a torch :class:`ModelHandle` on inputs built from its input specs."""
    module = model.torch_module()
    try:
        return walk_torch(module, inputs_for(model))
    except InputSpecError as e:
        raise InputSpecError(f"model '{model.name}': {e}") from e.__cause__


# -- edgeprof's hooks (listed in plugins.toml): this module walks torch modules --------------
@hookimpl
def edgeprof_read_graph(model) -> GraphWalk | None:
    return walk_model(model) if model.format == "torch" else None

"""The torch graph walk's tracing: the module tree (leaves, atomic modules, members), the
forward hooks and the torch function and dispatch modes that see each call and each aten op,
the open row (``Frame``) they count into (:class:`Walker`), and tensor lifetimes for the
peak live activations (:class:`_Liveness`). ``torch`` is imported inside functions only."""

from __future__ import annotations

import functools
from typing import Any

from edgeprof.profilers.estimate.torch_meta import meta_call
from edgeprof.profilers.estimate.torch_ops import (DATA_MOVEMENT, friendly, op_cost_given_output,
                                                   op_info, rnn_closed_form, tensor_storage_key,
                                                   tensors_in)


def atomic_module_types() -> tuple[type, ...]:
    """Module types whose internals form one row (imports torch)."""
    from torch import nn

    return (nn.MultiheadAttention, nn.RNNBase)


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
        #: blocks being recorded by the block memo (torch_memo): while there are any, every
        #: mark sweeps, so that each knows the largest true live sum during its call
        self.recs: list = []

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
        sweep) have to be known, so that is the only time the storages are swept (and after
        every op while a block is recorded)."""
        if self.recs:
            self.sweep()
            current = self.current
            if current > self.peak:
                self.peak = current
            for rec in self.recs:
                if current > rec.max_sum:
                    rec.max_sum = current
            return
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


@functools.cache
def _module_base():
    import torch

    return torch.nn.Module


def _distinct(items) -> list:
    """The items that are not None, each object once, in order."""
    out: list = []
    seen: set[int] = set()
    for x in items:
        if x is not None and id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


def _own_parameters(m) -> list:
    """``list(m.parameters())``; for a module without children, read off its own dict."""
    return list(m.parameters()) if m._modules else _distinct(m._parameters.values())


# --------------------------------------------------------------------------- frames
class Frame:
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

    def set_outputs(self, outs: list) -> None:
        """The row's output elements (all of ``outs``) and shape (the first one's)."""
        self.output_elements = sum(t.numel() for t in outs)
        self.output_shape = tuple(int(d) for d in outs[0].shape) if outs else ()


class Walker:
    def __init__(self, module, extra_atomic: tuple[type, ...] = (),
                 twins: dict[int, Any] | None = None, params=None, buffers=None) -> None:
        import torch

        self.torch = torch
        self.root = module
        self.atomic = atomic_module_types() + tuple(extra_atomic)
        self.rnn_type = torch.nn.RNNBase
        self.tensor_type = torch.Tensor
        self.module_stack: list[tuple[str, Any, bool]] = []  # (name, module, is_leaf)
        self.frame: Frame | None = None  # the leaf or functional call now running
        self.frames: list[Frame] = []
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
                self.param_by_ptr.setdefault(tensor_storage_key(twins.get(id(p), p)), []).append(p)
        self.const_ptrs = set(self.param_by_ptr)
        for b in buffers:
            if b.numel():
                self.const_ptrs.add(tensor_storage_key(twins.get(id(b), b)))
        self.live.excluded = set(self.const_ptrs)
        self.counted: set[int] = set()  # ids of parameters already attributed to a row
        self.handles: list = []
        #: id of a module of the tree -> ((name, module, is_leaf), row label, op type,
        #: a leaf's parameters, is recurrent)
        self.info: dict[int, tuple] = {}
        # the function mode, popped while a leaf's frame is open (see _pre)
        self.function_mode = None
        self.function_mode_off = False
        # the block memo (torch_memo.BlockMemo) when this walk uses one; the blocks being
        # recorded and, while there are any, every row closed with the parameters it read
        self.memo = None
        self.recs = self.live.recs
        self.close_log: list = []
        self.own_hooks = False  # a module of the tree has hooks of its own
        self.shared = False  # a module is reached by two paths of the tree

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
                self.shared = True
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
        self.own_hooks = own_hooks
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
        import torch.nn.modules.module as nn_module

        for h in self.handles:
            h.remove()
            # torch's handle of a global hook registered with_kwargs forgets that flag: left
            # behind, it makes every later torch.compile warn of global hooks (torch <= 2.13)
            nn_module._global_forward_hooks_with_kwargs.pop(h.id, None)
        self.handles.clear()

    def _activation_elements(self, tensors) -> int:
        n = 0
        for t in tensors:
            if tensor_storage_key(t) not in self.const_ptrs:
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
            f = Frame(label, op_type, self.order, module)
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
            f.input_elements = self._activation_elements(tensors_in((args, kwargs)))
            f.set_outputs(tensors_in(output))
            if info[4]:
                f.macs, f.other_ops = rnn_closed_form(module, args, kwargs)
                f.work = True
            self._close(f)
        finally:
            self.internal = False
            self.function_mode_on()
        return None

    def _call_frame(self, op_type: str) -> Frame:
        """The next row, of a call outside any leaf: named after the module that called it."""
        caller = self.module_stack[-1][0] if self.module_stack else ""
        self.order += 1
        return Frame(f"{caller}.{op_type}" if caller else op_type, op_type, self.order)

    def inside_leaf(self) -> bool:
        return bool(self.module_stack) and self.module_stack[-1][2]

    def _close(self, f: Frame) -> None:
        if f.module is None and not f.work:
            return  # a functional call that only looked at or viewed tensors
        if self.recs:  # a block is being recorded: the row, before the first-use filter
            self.close_log.append((f, tuple(f.params), f.module is not None))
        self.keep(f)

    def keep(self, f: Frame) -> None:
        """Make ``f`` a row if it does work or reads a parameter not counted yet: each
        parameter is counted once, by the first row that reads it."""
        new_params = [p for p in f.params if id(p) not in self.counted]
        if f.work or new_params:
            self.counted.update(map(id, new_params))
            f.params = new_params
            self.frames.append(f)

    # -- functional calls -------------------------------------------------------------
    def functional(self, func, args, kwargs):
        f = self._call_frame(friendly(func))
        ins = tensors_in((args, kwargs))
        self.internal = True
        try:
            f.input_elements = self._activation_elements(ins)
            for t in ins:
                f.params.extend(self.param_by_ptr.get(tensor_storage_key(t), ()))
        finally:
            self.internal = False
        self.frame = f
        try:
            result = func(*args, **kwargs)
        finally:
            self.frame = None
        self.internal = True
        try:
            f.set_outputs(tensors_in(result))
            self._close(f)
        finally:
            self.internal = False
        return result

    # -- aten ops -----------------------------------------------------------------------
    def aten(self, func, args, kwargs, out, entry=None) -> None:
        live = self.live
        if self.recs:
            self.memo.note_reads(args, kwargs)
        name, inplace, is_view, batch_norm = op_info(func)
        new_storage = False
        outputs = [out] if type(out) is self.tensor_type else tensors_in(out)
        # a batch norm's saved statistics are empty on CPU in eval but sized C on the meta
        # device: only the normalized output is an activation either way
        for t in (outputs[:1] if batch_norm else outputs):
            if live.add(t):
                new_storage = True
        live.mark()
        counts = entry[1] if entry is not None else None
        if counts is None:
            macs, other = op_cost_given_output(name, args, kwargs, outputs[0] if outputs else None)
            if entry is not None:  # the generic rule's count, kept for the next call too
                entry[1] = counts = (macs, other, _largest(args, kwargs, outputs))
        else:
            macs, other = counts[0], counts[1]
        if other is None:
            if is_view or name in DATA_MOVEMENT or not (new_storage or inplace):
                other = 0
            else:
                other = counts[2] if counts is not None else _largest(args, kwargs, outputs)
        work = macs > 0 or other > 0 or (new_storage and not is_view)
        if not work:
            return
        f = self.frame
        if f is None:  # an op issued without a torch-function call: a row of its own
            f = self._call_frame(name)
            f.set_outputs(outputs)
            f.input_elements = self._activation_elements(tensors_in((args, kwargs)))
            f.macs, f.other_ops, f.work = macs, other, True
            self._close(f)
            return
        if f.module is not None and isinstance(f.module, self.rnn_type):
            return  # closed form at module level
        f.macs += macs
        f.other_ops += other
        f.work = True


def _largest(args, kwargs, outputs: list) -> int:
    """The generic rule's other ops: the elements of an op's largest tensor, in or out."""
    return max([t.numel() for t in tensors_in((args, kwargs))] + [t.numel() for t in outputs],
               default=0)


def members(module) -> tuple[list, list, list]:
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
    return (modules, _distinct(p for m in modules for p in m._parameters.values()),
            _distinct(b for m in modules for b in m._buffers.values()))


_MODE_TYPES: tuple = ()


def mode_types() -> tuple[type, type]:
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
                out, entry = meta_call(func, args, kwargs, torch)
            else:
                out, entry = func(*args, **kwargs), None
            walker = self.walker
            if not walker.internal:
                walker.aten(func, args, kwargs, out, entry)
            return out

    _MODE_TYPES = (_Functions, _Aten)
    return _MODE_TYPES

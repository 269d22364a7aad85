"""The torch graph walk's block memo (issue 30): what the walk learnt of a repeated block --
its rows, and what it did to the live activations -- is kept, and a block called again with
the same structure and the same inputs is replayed from it instead of walked op by op.

A NAS-Bench-201 network repeats one cell five times per stage; a ResNet or a transformer
repeats its blocks the same way. Walking a block costs a forward hook pair per module and a
dispatch per aten op (even when the meta-op cache has the op's outputs); replaying it costs
a few microseconds per row.

What a replay depends on, and so what the key holds
---------------------------------------------------
A block is a module of the walked tree that is not a leaf (a leaf is one row: nothing to
save) and not the root. Its key is

* its **structure**, read when it is called: for itself and every module under it, the
  class, the training flag, every plain attribute (``Conv2d.stride``, the NAS cell's edge
  list: numbers, strings, tuples, lists, dicts, dtypes, functions by identity; any other
  value -- a tensor kept outside ``_parameters``/``_buffers``, an object, a bound method --
  makes the block one that is never memoised), each parameter's and buffer's name, dtype,
  shape and strides, and its children by name (:func:`signature`; interned to an int);
* its **arguments**: each tensor's dtype, shape, strides, offset, storage size, which
  earlier argument it shares a storage with, whether it is a parameter or buffer and
  whether the walk already tracks its storage as a live activation; each other argument's
  type and value (numbers, strings, None); anything else (a list of tensors, an object)
  makes the call one that is walked;
* the default dtype.

Only the meta walk memoises (there control flow cannot depend on values: a model that reads
one makes the walk fall back to the real forward, which never memoises). The whole walk goes
without the memo when the model has hooks of its own, when another global module hook is
registered, when a module or a parameter appears twice in the tree (shared or tied weights,
which name rows and count parameters across blocks), or when two parameters share a storage.

What is recorded, and when a recording is thrown away
-----------------------------------------------------
A block is recorded the first time it is called once another module of its class and child
count is in the tree, or once its structure has been met before (in any walk). While it runs:

* every row it closes is logged with the parameters it read, before the "first use counts"
  filter (re-applied at replay against the parameters counted by then), as indices into the
  block's parameter slots (the module tree under it, depth first);
* the walk sweeps dead storages after every op and keeps the largest live sum; the block's
  contribution to the peak is that maximum minus the live sum at its entry.

The recording is kept only if, at the block's exit, every storage alive at its entry is
still alive (so the live sum during a replay is the entry's plus the recorded increase),
every storage the block made and left alive is one of its outputs, its outputs are its
arguments themselves or fresh dense tensors, its arguments' metadata and its own structure
(re-read) and parameter and buffer objects are unchanged, every op read only its arguments,
its own parameters and buffers and tensors it made, and every row is named under the
block's name and reads only the block's parameters. A replay then appends the rows (renamed
under the replayed block's name), raises the peak to the live sum + the recorded increase
where that is higher, and returns outputs of the recorded metadata (or the argument itself).

tests/profilers/estimate/test_block_memo.py checks replays against the walk without the memo
(:data:`ENABLED`), and the cases that must not replay.
"""

from __future__ import annotations

import enum
import itertools
import types
from typing import Any

from edgeprof.profilers.estimate.torch_meta import NoKey, dense_extent
from edgeprof.profilers.estimate.torch_ops import tensor_storage_key, tensors_in
from edgeprof.profilers.estimate.torch_walker import Frame

#: the memo on (True) or off: tests compare the walk with and without it
ENABLED = [True]
#: blocks recorded (kept) and replayed since the process started (tests read them)
STATS = {"recorded": 0, "replayed": 0}

#: (structure id, arguments' key) -> a block's recording (:class:`_Template`)
_MEMO: dict[tuple, Any] = {}
_MEMO_MAX = 4096
#: structure tuple -> its id (ids are never reused: a cleared table cannot alias a key)
_SIG_IDS: dict[tuple, int] = {}
_SIG_MAX = 200_000
_NEXT_ID = itertools.count(1)
#: structure ids met in a call so far (any walk): a block met again is recorded
_SEEN: set[int] = set()
#: (class, number of children) of blocks whose structure was met again or replayed, and how
#: many times the others' structure was read without that: a kind of block that is never
#: met again (a network's one container of all its cells) stops being read after a few
_USEFUL: set[tuple] = set()
_TRIES: dict[tuple, int] = {}
_TRIES_MAX = 3


def clear() -> None:
    """Forget every recording (and the structure ids)."""
    _MEMO.clear()
    _SIG_IDS.clear()
    _SEEN.clear()
    _USEFUL.clear()
    _TRIES.clear()


class _Mark:
    """A section mark in a structure key (compared by identity)."""

    __slots__ = ()


_PARAMETERS, _BUFFERS, _CHILDREN = _Mark(), _Mark(), _Mark()


_INTERNAL: set = set()  # nn.Module's own instance attributes (hooks, _modules, ...)
_ATOMS = frozenset((int, float, bool, str, bytes, complex, type(None)))
_BY_IDENTITY = (types.FunctionType, types.BuiltinFunctionType, type)
_TORCH_ATOMS: set = set()
_SIZE: list = [None]  # torch.Size


def _setup(torch) -> None:
    if not _INTERNAL:
        _TORCH_ATOMS.update((torch.dtype, torch.device, torch.memory_format, torch.layout))
        _SIZE[0] = torch.Size
        _INTERNAL.update(torch.nn.Module().__dict__)


def _value_key(v):
    kind = type(v)
    if kind in _ATOMS or kind in _TORCH_ATOMS:
        return (kind, v)
    if kind is tuple or kind is list:
        for x in v:
            if type(x) is not int:
                return (kind, tuple([_value_key(x) for x in v]))
        return (kind, tuple(v))  # ints only (kernel sizes, strides): the values themselves
    if kind is dict:
        return (kind, tuple([(_value_key(k), _value_key(x)) for k, x in v.items()]))
    if kind is set or kind is frozenset:
        return (kind, frozenset([_value_key(x) for x in v]))
    if kind is _SIZE[0]:
        return (kind, tuple(v))
    if isinstance(v, _BY_IDENTITY) or isinstance(v, enum.Enum):
        return (kind, v)  # compared by identity: the same function (or class, member)
    raise NoKey


def _sig(m, params: list, buffers: list) -> int:
    # one flat tuple: the class, the training flag, then per plain attribute its name and
    # either an atom's type and value or a container's key (a tuple: never a type), then
    # the parameters' and buffers' names and metadata, then the children's names and ids
    key = [type(m), m.training]
    append = key.append
    for k, v in m.__dict__.items():
        if k in _INTERNAL:
            continue
        kind = type(v)
        if kind in _ATOMS:
            key += (k, kind, v)
        elif kind is _Forward and k == "forward":
            continue
        else:
            append(k)
            append(_value_key(v))
    for mark, slots, held in ((_PARAMETERS, m._parameters, params),
                              (_BUFFERS, m._buffers, buffers)):
        append(mark)
        for k, t in slots.items():
            held.append(t)
            key += (k, None) if t is None else (k, t.dtype, t.shape, t.stride())
    append(_CHILDREN)
    for k, c in m._modules.items():
        key += (k, None if c is None else _sig(c, params, buffers))
    key = tuple(key)
    i = _SIG_IDS.get(key)
    if i is None:
        if len(_SIG_IDS) >= _SIG_MAX:
            clear()
        i = _SIG_IDS[key] = next(_NEXT_ID)
    return i


def signature(m, params: list | None = None, buffers: list | None = None) -> int | None:
    """The structure id of ``m`` and the modules under it (see the module docstring), or
    None when a plain attribute has a value that makes no key. ``params`` and ``buffers``
    (lists) receive the tensors now in the modules' ``_parameters`` and ``_buffers``, the
    modules depth first (None where a slot holds None)."""
    try:
        return _sig(m, [] if params is None else params, [] if buffers is None else buffers)
    except (NoKey, TypeError):  # TypeError: an unhashable value inside a frozenset key
        return None


class _Template:
    __slots__ = ("frames", "increase", "outputs", "single", "reads_parameters")

    def __init__(self, frames, increase, outputs, single) -> None:
        self.reads_parameters = any(f[2] for f in frames)
        self.frames = frames      # (relative name, op type, parameter slots, is a leaf's row,
        #                            work, macs, other ops, input el., output el., output shape)
        self.increase = increase  # the largest live sum during the block minus the entry's
        self.outputs = outputs    # ("arg", i) or (shape, stride, dtype) per output
        self.single = single      # a tensor (not a tuple) was returned


class _Recording:
    __slots__ = ("valid", "entry", "entry_sum", "max_sum", "log_start", "allowed")

    def __init__(self) -> None:
        self.valid = True
        self.max_sum = -1


class _Forward:
    """Stands in for a block's ``forward`` (an instance attribute, removed after the walk)."""

    __slots__ = ("memo", "module", "forward")

    def __init__(self, memo, module, forward) -> None:
        self.memo, self.module, self.forward = memo, module, forward

    def __call__(self, *args, **kwargs):
        return self.memo.call(self, args, kwargs)


class BlockMemo:
    """The block memo of one walk: installs the ``forward`` stand-ins and records/replays."""

    def __init__(self, walker, real_of: dict[int, Any]) -> None:
        import torch

        _setup(torch)
        self.torch = torch
        self.walker = walker
        self.live = walker.live
        self.real_of = real_of  # id of a meta twin -> the parameter it stands for
        self.installed: list = []
        self.repeated: set = set()

    # -- set-up ----------------------------------------------------------------------
    @staticmethod
    def usable(walker, modules: list, params: list) -> bool:
        """Whether this walk may memoise (see the module docstring)."""
        import torch.nn.modules.module as nn_module

        if not ENABLED[0] or walker.own_hooks or walker.shared:
            return False
        if len(nn_module._global_forward_pre_hooks) != 1 or \
                len(nn_module._global_forward_hooks) != 1:
            return False  # someone else's global hooks: they would not run in a replay
        slots = sum(1 for m in modules for p in m._parameters.values() if p is not None)
        children = sum(1 for m in modules for c in m._modules.values() if c is not None)
        if slots != len(params) or children != len(modules) - 1:
            return False  # a parameter or a module in two places
        return all(len(v) == 1 for v in walker.param_by_ptr.values())

    def install(self) -> None:
        from torch import nn

        base_forward = nn.Module.forward
        root = self.walker.root
        counts: dict[tuple, int] = {}
        for (name, m, leaf), *_ in self.walker.info.values():
            if leaf or m is root or "forward" in m.__dict__:
                continue
            fwd = getattr(type(m), "forward", None)
            if fwd is base_forward or not isinstance(fwd, types.FunctionType):
                continue
            m.__dict__["forward"] = _Forward(self, m, fwd)
            self.installed.append(m)
            shape = (type(m), len(m._modules))
            counts[shape] = counts.get(shape, 0) + 1
        self.repeated = {k for k, n in counts.items() if n > 1}

    def remove(self) -> None:
        for m in self.installed:
            if type(m.__dict__.get("forward")) is _Forward:
                del m.__dict__["forward"]
        self.installed.clear()

    # -- keys ------------------------------------------------------------------------
    def _args_key(self, args, kwargs):
        T = self.torch.Tensor
        live = self.live.live
        expired = self.live._expired
        const = self.walker.const_ptrs
        parts: list = [self.torch.get_default_dtype()]
        storages: list = []
        items = args if not kwargs else itertools.chain(args, *kwargs.items())
        for a in items:  # (a keyword argument's name is a str: an atom)
            kind = type(a)
            if kind is T:
                if not a.is_meta:
                    return None
                st = a.untyped_storage()
                nbytes = st.nbytes()
                k = st._cdata if nbytes else None
                alias = storages.index(k) if k is not None and k in storages else -1
                storages.append(k)
                ent = live.get(k)
                parts.append((a.dtype, a.shape, a.stride(), a.storage_offset(), nbytes, alias,
                              k in const, ent is not None and not expired(ent[0].cdata)))
            elif kind in _ATOMS:
                parts.append((kind, a))
            else:
                return None
        return tuple(parts)

    def _real(self, held: list) -> list | None:
        """The parameters that the tensors ``held`` in the modules' ``_parameters`` stand for
        (meta twins during the walk), or None if one is not a parameter of the walk."""
        real_of = self.real_of
        params = []
        for t in held:
            if t is None:
                params.append(None)
                continue
            p = real_of.get(id(t))
            if p is None:
                return None
            params.append(p)
        return params

    # -- a block's call --------------------------------------------------------------
    def call(self, stand_in: _Forward, args: tuple, kwargs: dict):
        walker, m = self.walker, stand_in.module
        stack = walker.module_stack
        # only a call through the module (its hooks ran: it is the innermost module), outside
        # any row (a leaf's, or a functional call's) and outside the walk's own work
        if walker.frame is not None or walker.internal or not stack or stack[-1][1] is not m:
            return stand_in.forward(m, *args, **kwargs)
        kind = (type(m), len(m._modules))
        if kind not in _USEFUL and kind not in self.repeated:
            tries = _TRIES.get(kind, 0)
            if tries >= _TRIES_MAX:
                return stand_in.forward(m, *args, **kwargs)
            _TRIES[kind] = tries + 1
        record = False
        # the memo's own reads of tensor metadata (shape, stride, storage) are not the
        # model's: they bypass the walk's torch function mode (the forward never runs here)
        with self.torch._C.DisableTorchFunction():
            held, buffers = [], []
            sig = signature(m, held, buffers)
            akey = self._args_key(args, kwargs) if sig is not None else None
            if akey is not None:
                key = (sig, akey)
                template = _MEMO.get(key)
                if template is not None:
                    _USEFUL.add(kind)
                    out = self._replay(m, template, args, kwargs, held)
                    if out is not None:
                        return out[0]
                elif sig in _SEEN:
                    _USEFUL.add(kind)
                    record = True
                else:
                    _SEEN.add(sig)
                    record = kind in self.repeated
        if record:
            return self._record(stand_in, key, args, kwargs, held, buffers)
        return stand_in.forward(m, *args, **kwargs)

    def _record(self, stand_in: _Forward, key: tuple, args: tuple, kwargs: dict, held: list,
                buffers: list):
        walker, live, m = self.walker, self.live, stand_in.module
        no_functions = self.torch._C.DisableTorchFunction
        with no_functions():
            real = self._real(held)
            slots = None if real is None else (real, held + buffers)
            if slots is not None:
                rec = _Recording()
                live.sweep()
                rec.entry = dict(live.live)
                rec.entry_sum = live.current
                rec.log_start = len(walker.close_log)
                allowed = {tensor_storage_key(t) for t in slots[1] if t is not None}
                allowed.update(tensor_storage_key(t) for t in tensors_in((args, kwargs)))
                allowed.add(None)
                rec.allowed = allowed
        if slots is None:
            return stand_in.forward(m, *args, **kwargs)
        walker.recs.append(rec)
        try:
            out = stand_in.forward(m, *args, **kwargs)
            walker.recs.remove(rec)
            if rec.valid:
                with no_functions():
                    template = self._template(m, rec, key, slots, args, kwargs, out)
                if template is not None:
                    if len(_MEMO) >= _MEMO_MAX:
                        _MEMO.clear()
                    _MEMO[key] = template
                    STATS["recorded"] += 1
        finally:
            if rec in walker.recs:
                walker.recs.remove(rec)
            if not walker.recs:
                del walker.close_log[:]  # nobody else reads the log
        return out

    def note_reads(self, args, kwargs) -> None:
        """While a block is recorded: an op that reads a tensor from outside it (not an
        argument, not its own parameter or buffer, not made inside it) spoils the recording."""
        storage_key, live = tensor_storage_key, self.live.live
        for t in tensors_in((args, kwargs)):
            k = storage_key(t)
            for rec in self.walker.recs:
                if rec.valid and k not in rec.allowed and (k not in live or k in rec.entry):
                    rec.valid = False

    def _template(self, m, rec, key, slots, args, kwargs, out) -> _Template | None:
        torch, walker, live = self.torch, self.walker, self.live
        T = torch.Tensor
        live.sweep()
        alive = live.live
        for k, ent in rec.entry.items():  # everything alive at the entry still is
            if alive.get(k) is not ent:
                return None
        if type(out) is T:
            outs, single = (out,), True
        elif type(out) is tuple and out and all(type(o) is T for o in out):
            outs, single = out, False
        else:
            return None
        specs, fresh = [], set()
        for o in outs:
            same = [i for i, a in enumerate(args) if a is o]
            if same:
                specs.append(("arg", same[0]))
                continue
            st = o.untyped_storage()
            k = st._cdata
            if (not o.is_meta or o.layout != torch.strided or o.storage_offset() != 0
                    or o.is_conj() or o.is_neg() or o.requires_grad or k in fresh
                    or k not in alive or k in rec.entry or st.nbytes() != dense_extent(o)):
                return None
            fresh.add(k)
            specs.append((tuple(o.shape), o.stride(), o.dtype))
        if len(alive) != len(rec.entry) + len(fresh):
            return None  # the block left something else alive (kept on self, or a global)
        held, buffers = [], []
        if self._args_key(args, kwargs) != key[1] or signature(m, held, buffers) != key[0]:
            return None  # it changed its arguments' metadata or its own structure
        now = held + buffers
        if len(now) != len(slots[1]) or any(a is not b for a, b in zip(now, slots[1])):
            return None  # it replaced a parameter or a buffer
        prefix = walker.info[id(m)][0][0] + "."
        n = len(prefix) - 1
        index = {id(p): i for i, p in enumerate(slots[0]) if p is not None}
        frames = []
        for f, params, is_module in walker.close_log[rec.log_start:]:
            if not f.name.startswith(prefix):
                return None
            idx = tuple([index.get(id(p), -1) for p in params])
            if -1 in idx:
                return None  # a parameter from outside the block
            frames.append((f.name[n:], f.op_type, idx, is_module, f.work, f.macs, f.other_ops,
                           f.input_elements, f.output_elements, f.output_shape))
        increase = rec.max_sum - rec.entry_sum if rec.max_sum >= 0 else None
        return _Template(tuple(frames), increase, tuple(specs), single)

    def _replay(self, m, template: _Template, args: tuple, kwargs: dict, held: list):
        walker, live = self.walker, self.live
        params_of = self._real(held) if template.reads_parameters else []
        if params_of is None:
            return None
        recs = walker.recs
        if recs:  # the replayed rows and reads belong to the block being recorded too
            self.note_reads(args, kwargs)
        if template.increase is not None:
            total = live.current + template.increase
            if recs or total > live.peak:
                live.sweep()
                total = live.current + template.increase
                if total > live.peak:
                    live.peak = total
                for rec in recs:
                    if total > rec.max_sum:
                        rec.max_sum = total
        prefix = walker.info[id(m)][0][0]
        for rel, op_type, idx, is_module, work, macs, other, ins, outs, shape in template.frames:
            walker.order += 1
            f = Frame(prefix + rel, op_type, walker.order)
            f.macs, f.other_ops, f.work = macs, other, work
            f.input_elements, f.output_elements, f.output_shape = ins, outs, shape
            f.params = [params_of[i] for i in idx] if idx else []
            if recs:
                walker.close_log.append((f, tuple(f.params), is_module))
            walker.keep(f)
        STATS["replayed"] += 1
        empty = self.torch.empty_strided
        made = []
        walker.internal = True  # the outputs are made by the walk, not by the model
        try:
            for spec in template.outputs:
                if spec[0] == "arg":
                    made.append(args[spec[1]])
                else:
                    t = empty(spec[0], spec[1], dtype=spec[2], device="meta")
                    live.add(t)
                    made.append(t)
        finally:
            walker.internal = False
        return (made[0] if template.single else tuple(made),)

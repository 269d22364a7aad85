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
  the cyclic garbage collector waits while every op comes from the cache;
* a **block memo** (issue 30; :mod:`~edgeprof.profilers.estimate.torch_memo`): a block (a
  module with children) called again with the same structure -- classes, plain attributes,
  parameter and buffer shapes, all the way down -- and the same argument metadata is
  replayed from its recorded rows and its rise of the live activations instead of walked op
  by op (a NAS-Bench-201 network's five cells per stage, a ResNet's bottlenecks, a ViT's
  encoder layers). The module's docstring says what the key holds and when a recording is
  thrown away (hooks, shared modules or tied weights turn it off for the walk);
  tests/profilers/estimate/test_block_memo.py compares it with the walk without it.

tests/profilers/estimate/test_pinned_rows.py pins the rows of a set of models to what the
walk gave before these changes, with the cache empty and full.

Modules
-------
This module runs the walk and assembles its rows (:func:`walk_torch`, :func:`walk_model`,
the graph-reader hook); the per-op counting rules are in
:mod:`~edgeprof.profilers.estimate.torch_ops`, the tracing (hooks, modes, the walker,
liveness) in :mod:`~edgeprof.profilers.estimate.torch_walker`, the meta-op cache and fast
meta kernels in :mod:`~edgeprof.profilers.estimate.torch_meta`, the block memo in
:mod:`~edgeprof.profilers.estimate.torch_memo`.
"""

from __future__ import annotations

import gc
from typing import Any

from edgeprof.core.errors import EdgeprofError, InputSpecError
from edgeprof.core.hookspecs import hookimpl
from edgeprof.core.results import GraphLayer, GraphWalk
from edgeprof.profilers.estimate import torch_meta as _torch_meta
from edgeprof.profilers.estimate.torch_memo import BlockMemo
from edgeprof.profilers.estimate.torch_meta import GC_PAUSED, gc_resume, swapped
from edgeprof.profilers.estimate.torch_ops import op_cost
from edgeprof.profilers.estimate.torch_walker import (Frame, Walker, atomic_module_types, members,
                                                      mode_types)

#: the meta-op cache and its fast kernels under the names they had here, where
#: tests/profilers/estimate/test_meta_fast.py, test_pinned_rows.py and
#: benchmarks/estimate_speed.py reach them (the same objects: clearing one clears the cache)
_META_CACHE, _UNCACHEABLE = _torch_meta._META_CACHE, _torch_meta._UNCACHEABLE
_UNARY, _BINARY = _torch_meta._UNARY, _torch_meta._BINARY
_fast_meta, _meta_key, _meta_call = (_torch_meta._fast_meta, _torch_meta._meta_key,
                                     _torch_meta.meta_call)


# --------------------------------------------------------------------------- public
def _name_rows(frames: list[Frame]) -> list[str]:
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
    if not meta:
        return _walk_once(module, inputs, atomic, meta=False)
    return _meta_or_real(module, inputs, lambda: inputs, atomic)


def _meta_or_real(module, meta_inputs: list, real_inputs, atomic: tuple[type, ...]) -> GraphWalk:
    """The meta walk on ``meta_inputs``, or where the model needs values, the real walk on
    ``real_inputs()``."""
    try:
        return _walk_once(module, meta_inputs, atomic, meta=True)
    except EdgeprofError:
        raise
    except Exception:  # values were needed: walk the real forward
        pass
    return _walk_once(module, real_inputs(), atomic, meta=False)


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
        GC_PAUSED[0] = True
    try:
        return _walk(module, inputs, atomic, meta=meta)
    finally:
        if pause:
            gc_resume()


def _walk(module, inputs: list, atomic: tuple[type, ...], *, meta: bool) -> GraphWalk:
    import torch

    functions_mode, aten_mode = mode_types()
    modules, params, buffers = members(module)
    twins: dict[int, Any] = {}  # id of a parameter or buffer -> its meta twin
    run_inputs = inputs
    if meta:
        for t in params + buffers:
            twins[id(t)] = t.to("meta")
        run_inputs = [t if t.is_meta else t.to("meta") for t in inputs]
    walker = Walker(module, atomic, twins, params, buffers)

    for t in run_inputs:
        walker.live.add(t)
    walker.live.mark()
    input_elements = sum(int(t.numel()) for t in inputs)

    training = [m.training for m in modules]
    fastpath = torch.backends.mha.get_fastpath_enabled()
    walker.install_hooks()
    memo = None
    if meta and BlockMemo.usable(walker, modules, params):
        memo = walker.memo = BlockMemo(walker, {id(twins[id(p)]): p for p in params})
    try:
        if memo is not None:
            memo.install()
        if any(training):
            module.eval()
        torch.backends.mha.set_fastpath_enabled(False)
        functions = walker.function_mode = functions_mode(walker)
        with torch.no_grad(), functions, aten_mode(walker, meta):
            try:
                with swapped(modules, twins):  # (no twins, nothing swapped, for a real walk)
                    output = module(*run_inputs)
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
        if memo is not None:
            memo.remove()
            walker.memo = memo.walker = None  # no cycle: freed without the collector
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


#: the input dtypes given as such (any other is float32)
_TORCH_DTYPES = frozenset(("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16",
                           "int8", "uint8", "bool"))


def _torch_dtype(spec):
    import torch

    return getattr(torch, spec.dtype if spec.dtype in _TORCH_DTYPES else "float32")


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
        return _meta_or_real(module, meta_inputs_for(model), lambda: inputs_for(model), ())
    except InputSpecError as e:
        raise InputSpecError(f"model '{model.name}': {e}") from e.__cause__


# -- edgeprof's hooks (listed in plugins.toml): this module walks torch modules --------------
@hookimpl
def edgeprof_read_graph(model) -> GraphWalk | None:
    return walk_model(model) if model.format == "torch" else None


__all__ = ["atomic_module_types", "edgeprof_read_graph", "inputs_for", "meta_inputs_for",
           "op_cost", "walk_model", "walk_torch"]

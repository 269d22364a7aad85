"""The graph walk's meta-op cache and its fast meta kernels give exactly the metadata the op's
own meta kernel gives (shape, strides, dtype, storage size, aliasing), and refuse (None) every
case the kernel rejects."""

from __future__ import annotations

import itertools

import pytest

import torch

from edgeprof.profilers.estimate import torch_graph as tg

aten = torch.ops.aten
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def meta(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


def describe(out, args):
    outs = out if isinstance(out, tuple) else (out,)
    return [("arg", next(i for i, a in enumerate(args) if a is o))
            if any(a is o for a in args) else
            (tuple(o.shape), o.stride(), o.dtype, o.storage_offset(),
             o.untyped_storage().nbytes(), type(o)) for o in outs]


def check(func, *args, **kwargs):
    """The fast kernel agrees with the op's own kernel, or declines; returns whether it ran."""
    try:
        want = describe(func(*args, **kwargs), args)
    except Exception:
        want = None
    got = tg._fast_meta(func, args, kwargs, torch)
    if got is None:
        return False
    assert want is not None, f"{func} fast path accepted arguments the kernel rejects"
    assert describe(got, args) == want, func
    return True


UNARY_ARGS = {"hardtanh": (0.0, 6.0), "leaky_relu": (0.01,), "elu": (1.0, 1.0, 1.0),
              "celu": (1.0,), "softplus": (1.0, 20.0)}
SHAPES = [(1, 32, 56, 56), (2, 7, 16), (5,), (), (0, 3), (1, 1, 1, 1), (3, 1, 4)]


@pytest.mark.parametrize("name", sorted(tg._UNARY))
def test_unary_ops_match_their_kernels(name):
    ran = 0
    for shape, dtype in itertools.product(SHAPES, FLOATS):
        for op in (name, name + "_"):
            func = getattr(aten, op, None)
            if func is None:
                continue
            extra = UNARY_ARGS.get(name, ())
            ran += check(func.default, meta(*shape, dtype=dtype), *extra)
            if name == "gelu":
                ran += check(func.default, meta(*shape, dtype=dtype), approximate="tanh")
    assert ran
    # not plain: non-contiguous, integer, offset
    x = meta(4, 6).t()
    assert tg._fast_meta(getattr(aten, name).default, (x, *UNARY_ARGS.get(name, ())), {},
                         torch) is None
    i = torch.empty(3, dtype=torch.int64, device="meta")
    assert tg._fast_meta(getattr(aten, name).default, (i,), {}, torch) is None


def test_gelu_rejects_unknown_approximation():
    assert not check(aten.gelu.default, meta(3), approximate="cubic")


BINARY_SHAPES = [((1, 8, 4, 4), (1, 8, 4, 4)), ((1, 8, 4, 4), (8, 1, 1)), ((8, 1, 1), (1, 8, 4, 4)),
                 ((2, 3), (3,)), ((3,), (2, 3)), ((2, 3), ()), ((), (2, 3)), ((4, 1), (1, 4)),
                 ((2, 3), (4, 3)), ((5, 1, 3), (4, 3)), ((1,), (7,)), ((7,), (1,))]


@pytest.mark.parametrize("name", sorted(tg._BINARY))
def test_binary_ops_match_their_kernels(name):
    func = getattr(aten, name).Tensor
    ran = 0
    for (a, b), dtype in itertools.product(BINARY_SHAPES, FLOATS):
        ran += check(func, meta(*a, dtype=dtype), meta(*b, dtype=dtype))
        ran += check(func, meta(*a, dtype=dtype), 2)
        ran += check(func, meta(*a, dtype=dtype), 0.5)
        if name in ("add", "sub"):
            ran += check(func, meta(*a, dtype=dtype), meta(*b, dtype=dtype), alpha=2)
    if name in ("mul", "div"):  # no alpha: the kernel refuses it, so does the fast path
        assert not check(func, meta(2, 3), meta(2, 3), alpha=2)
    # mixed dtypes and an integer tensor are left to the kernel
    assert not check(func, meta(2, 3), meta(2, 3, dtype=torch.float16))
    assert not check(func, meta(2, 3, dtype=torch.int64), 2)
    assert ran


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_matches_its_kernel(dtype):
    x = meta(2, 8, 5, 5, dtype=dtype)
    c = meta(8, dtype=dtype)
    c32 = meta(8)
    for w, b in [(c, c), (None, None), (c32, c32)]:
        assert check(aten.native_batch_norm.default, x, w, b, c, c, False, 0.1, 1e-5)
        assert check(aten._native_batch_norm_legit_no_training.default, x, w, b, c32, c32,
                     0.1, 1e-5)
    assert check(aten.native_batch_norm.default, meta(4, 8, dtype=dtype), c, c, c, c, False,
                 0.1, 1e-5)
    # training, no running statistics, wrong channel count, channels-last: the kernel's
    assert not check(aten.native_batch_norm.default, x, c, c, c, c, True, 0.1, 1e-5)
    assert not check(aten.native_batch_norm.default, x, c, c, None, None, False, 0.1, 1e-5)
    assert not check(aten.native_batch_norm.default, meta(2, 4, 5, 5, dtype=dtype), c, c, c, c,
                     False, 0.1, 1e-5)
    cl = x.contiguous(memory_format=torch.channels_last)
    assert not check(aten.native_batch_norm.default, cl, c, c, c, c, False, 0.1, 1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_matches_its_kernel(dtype):
    x = meta(2, 7, 16, dtype=dtype)
    assert check(aten.native_layer_norm.default, x, [16], meta(16, dtype=dtype),
                 meta(16, dtype=dtype), 1e-5)
    assert check(aten.native_layer_norm.default, x, [7, 16], None, None, 1e-5)
    assert check(aten.native_layer_norm.default, meta(16, dtype=dtype), [16], None, None, 1e-5)
    assert check(aten.native_layer_norm.default, x, [16], meta(16), None, 1e-6)
    assert not check(aten.native_layer_norm.default, x, [8], None, None, 1e-5)
    assert not check(aten.native_layer_norm.default, x, [16], meta(8), None, 1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_addmm_matches_its_kernel(dtype):
    w = meta(10, 6, dtype=dtype)
    for bias in [meta(10, dtype=dtype), meta(1, dtype=dtype), meta(4, 10, dtype=dtype),
                 meta(1, 10, dtype=dtype), meta(4, 1, dtype=dtype)]:
        assert check(aten.addmm.default, bias, meta(4, 6, dtype=dtype), w.t())
        assert check(aten.addmm.default, bias, meta(4, 6, dtype=dtype), w.t(), beta=0.5,
                     alpha=2)
    assert not check(aten.addmm.default, meta(10, dtype=dtype), meta(4, 5, dtype=dtype), w.t())
    assert not check(aten.addmm.default, meta(3, dtype=dtype), meta(4, 6, dtype=dtype), w.t())


def test_cache_rebuilds_what_the_kernel_gave():
    """A second call with the same metadata is served from the cache: fresh outputs of the
    recorded metadata, the argument itself for an in-place op, a view always recomputed."""
    tg._META_CACHE.clear()
    x = meta(1, 4, 3, 3)
    w = meta(4)
    cases = [(aten.native_batch_norm.default, (x, w, w, w, w, False, 0.1, 1e-5), {}),
             (aten.convolution.default, (x, meta(6, 4, 3, 3), None, [1, 1], [1, 1], [1, 1],
                                         False, [0, 0], 1), {}),
             (aten.relu_.default, (x,), {}),
             (aten.max_pool2d_with_indices.default, (x, [2, 2], [2, 2]), {}),
             (aten.view.default, (x, [4, 9]), {}),
             (aten.mean.dim, (x, [-1, -2], True), {})]
    for func, args, kwargs in cases:
        first, entry = tg._meta_call(func, args, kwargs, torch)
        second, entry2 = tg._meta_call(func, args, kwargs, torch)
        assert entry is entry2
        assert describe(first, args) == describe(second, args) == describe(func(*args, **kwargs),
                                                                            args)
        if not any(a is second for a in args) and not getattr(func, "is_view", False):
            outs = second if isinstance(second, tuple) else (second,)
            firsts = first if isinstance(first, tuple) else (first,)
            assert all(a.untyped_storage()._cdata != b.untyped_storage()._cdata
                       for a, b in zip(outs, firsts))
    assert tg._META_CACHE[tg._meta_key(aten.view.default, (x, [4, 9]), {}, torch)][0] \
        is tg._UNCACHEABLE
    # real tensors make no key
    assert tg._meta_key(aten.relu.default, (torch.ones(2),), {}, torch) is None

"""The torch graph walk: MACs per op family against closed forms and FlopCounterMode, rows,
parameters, peak live activations, inputs and errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import torch
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from edgeprof.core.errors import InputSpecError  # noqa: E402
from edgeprof.profilers.estimate.torch_graph import walk_torch  # noqa: E402
from edgeprof.zoo.models import SmallCNN, TinyTransformer  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def walk(module, *inputs):
    return walk_torch(module, list(inputs))


def rows(w):
    return {r.name: r for r in w.layers}


def flop_counter_macs(module, *inputs) -> int:
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            module.eval()(*inputs)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return fc.get_total_flops() // 2


def total_macs(w) -> int:
    return sum(r.macs for r in w.layers)


def n_params(module) -> int:
    return sum(p.numel() for p in module.parameters())


# ------------------------------------------------------------------------ convolution
CONV2D = [
    # cin, cout, k, stride, padding, groups, dilation, H, W
    (3, 8, 3, 1, 1, 1, 1, 16, 16),
    (3, 8, 3, 2, 0, 1, 1, 17, 15),  # stride, no padding, odd sizes
    (8, 12, 5, 1, 2, 4, 1, 12, 12),  # grouped
    (16, 16, 3, 1, 1, 16, 1, 10, 10),  # depthwise
    (16, 32, 3, 2, 1, 16, 1, 10, 10),  # depthwise multiplier 2, strided
    (4, 6, 3, 1, 2, 1, 2, 14, 14),  # dilated
    (4, 6, (3, 1), (2, 1), (1, 0), 2, 1, 9, 7),  # rectangular kernel, per-axis stride
]


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


@pytest.mark.parametrize("cin,cout,k,stride,pad,groups,dil,H,W", CONV2D)
def test_conv2d_macs_closed_form_and_flop_counter(cin, cout, k, stride, pad, groups, dil, H, W):
    conv = nn.Conv2d(cin, cout, k, stride, pad, dilation=dil, groups=groups)
    x = torch.randn(2, cin, H, W)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _pair(k), _pair(stride), _pair(pad), _pair(dil)
    ho = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    expected = 2 * cout * ho * wo * (cin // groups) * kh * kw
    w = walk(conv, x)
    assert len(w.layers) == 1
    r = w.layers[0]
    assert r.macs == expected
    assert r.macs == flop_counter_macs(conv, x)
    assert r.output_shape == (2, cout, ho, wo)
    assert r.output_elements == 2 * cout * ho * wo
    assert r.input_elements == x.numel()
    assert r.parameter_count == n_params(conv)
    assert r.other_ops == r.output_elements  # the bias addition


def test_conv1d_and_transposed_convolutions():
    c1 = nn.Conv1d(4, 8, 5, stride=2, padding=1, bias=False)
    x1 = torch.randn(3, 4, 50)
    lo = (50 + 2 - 5) // 2 + 1
    r = walk(c1, x1).layers[0]
    assert r.macs == 3 * 8 * lo * 4 * 5 == flop_counter_macs(c1, x1)
    assert r.other_ops == 0  # no bias

    # transposed: every input element meets (Cout/groups) * k*k weights
    ct = nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    xt = torch.randn(1, 8, 7, 9)
    r = walk(ct, xt).layers[0]
    assert r.macs == 1 * 8 * 7 * 9 * (6 // 2) * 3 * 3 == flop_counter_macs(ct, xt)
    assert r.output_shape == (1, 6, 14, 18)

    ct1 = nn.ConvTranspose1d(5, 7, 4, stride=3)
    xt1 = torch.randn(2, 5, 11)
    r = walk(ct1, xt1).layers[0]
    assert r.macs == 2 * 5 * 11 * 7 * 4 == flop_counter_macs(ct1, xt1)
    assert r.parameter_count == n_params(ct1)


# ----------------------------------------------------------------------------- linear
@pytest.mark.parametrize("shape", [(4, 32), (2, 7, 32), (2, 3, 5, 32)])
def test_linear_any_rank(shape):
    lin = nn.Linear(32, 24)
    x = torch.randn(*shape)
    tokens = x.numel() // 32
    r = walk(lin, x).layers[0]
    assert r.macs == tokens * 32 * 24 == flop_counter_macs(lin, x)
    assert r.output_shape == (*shape[:-1], 24)
    assert r.parameter_count == 32 * 24 + 24
    assert r.input_elements == x.numel()


# ---------------------------------------------------------------- functional matmuls
class Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.w = nn.Parameter(torch.randn(16, 8))

    def forward(self, x, y):
        a = self.proj(x)  # leaf row
        b = a @ self.w  # functional, reads a container parameter
        c = torch.bmm(a, a.transpose(1, 2))
        d = torch.einsum("bij,bjk->bik", c, b)
        e = torch.matmul(d, y)
        return e + 1.0


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Functional()

    def forward(self, x, y):
        return self.block(x, y)


def test_functional_ops_outside_leaves_are_rows_named_after_the_caller():
    B, T = 2, 5
    x, y = torch.randn(B, T, 16), torch.randn(8, 3)
    model = Outer()
    w = walk(model, x, y)
    names = [r.name for r in w.layers]
    assert names == ["block.proj", "block.matmul", "block.bmm", "block.einsum", "block.matmul_1",
                     "block.add"]
    by = rows(w)
    assert by["block.matmul"].macs == B * T * 16 * 8
    assert by["block.matmul"].parameter_count == 16 * 8  # the container's parameter
    assert by["block.matmul"].input_elements == B * T * 16  # the parameter is not an activation
    assert by["block.bmm"].macs == B * T * 16 * T
    assert by["block.einsum"].macs == B * T * T * 8
    assert by["block.matmul_1"].macs == B * T * 8 * 3
    assert by["block.add"].macs == 0 and by["block.add"].other_ops == B * T * 3
    assert total_macs(w) == flop_counter_macs(model, x, y)
    assert sum(r.parameter_count for r in w.layers) == n_params(model)


# -------------------------------------------------------------------------- attention
class SDPA(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Identity()  # a child, so SDPA is a container and the call is functional

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(self.pre(q), k, v)


def test_scaled_dot_product_attention():
    B, H, L, S, E, Ev = 2, 3, 7, 11, 16, 8
    q, k, v = torch.randn(B, H, L, E), torch.randn(B, H, S, E), torch.randn(B, H, S, Ev)
    w = walk(SDPA(), q, k, v)
    assert [r.name for r in w.layers] == ["scaled_dot_product_attention"]
    r = w.layers[0]
    assert r.macs == B * H * L * S * (E + Ev)
    assert r.other_ops >= B * H * L * S  # the softmax
    # FlopCounterMode does not count CPU flash attention; on the math path it counts bmm
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        assert r.macs == flop_counter_macs(SDPA(), q, k, v)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_is_one_row(need_weights):
    E, heads, B, L, S = 32, 4, 2, 6, 9

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(E, heads, batch_first=True)

        def forward(self, q, kv):
            return self.attn(q, kv, kv, need_weights=need_weights)[0]

    m = Wrap()
    q, kv = torch.randn(B, L, E), torch.randn(B, S, E)
    w = walk(m, q, kv)
    assert [r.name for r in w.layers] == ["attn"]
    r = w.layers[0]
    expected = (B * L * E * E  # q projection
                + 2 * B * S * E * E  # k and v projections
                + 2 * B * heads * L * S * (E // heads)  # QK^T and AV
                + B * L * E * E)  # output projection
    assert r.macs == expected
    assert r.parameter_count == n_params(m)
    assert r.input_elements == q.numel() + kv.numel()  # kv once, though read twice
    if need_weights:  # the math path, which FlopCounterMode can see
        assert r.macs == flop_counter_macs(m, q, kv)


def test_transformer_encoder_attention_counted_and_fastpath_restored():
    model = TinyTransformer().eval()
    tokens = torch.randint(0, 1000, (1, 32))
    before = torch.backends.mha.get_fastpath_enabled()
    w = walk(model, tokens)
    assert torch.backends.mha.get_fastpath_enabled() == before
    by = rows(w)
    D, T, heads = 64, 32, 4
    mha = 4 * T * D * D + 2 * heads * T * T * (D // heads)
    assert by["encoder.layers.0.self_attn"].macs == mha
    assert by["encoder.layers.1.self_attn"].macs == mha
    assert by["embed"].input_elements == T  # token ids
    assert by["embed"].parameter_count == 1000 * D
    assert by["add"].parameter_count == T * D  # the position parameter read by a functional add
    assert sum(r.parameter_count for r in w.layers) == n_params(model)
    ff = 2 * T * D * 4 * D
    assert total_macs(w) == 2 * (mha + ff) + D * 10


# -------------------------------------------------------------------------- recurrent
RNNS = [
    (lambda: nn.LSTM(8, 16, num_layers=2, bidirectional=True), (5, 3, 8), 4),
    (lambda: nn.LSTM(8, 16, proj_size=4, batch_first=True), (3, 5, 8), 4),
    (lambda: nn.GRU(8, 16, num_layers=2), (5, 3, 8), 3),
    (lambda: nn.RNN(8, 16, nonlinearity="relu"), (5, 3, 8), 1),
]


def _rnn_closed_form(m, tokens, gates):
    H, P = m.hidden_size, getattr(m, "proj_size", 0)
    Hr, D = (P or H), (2 if m.bidirectional else 1)
    total = 0
    for layer in range(m.num_layers):
        inp = m.input_size if layer == 0 else Hr * D
        total += D * tokens * (gates * H * (inp + Hr) + P * H)
    return total


@pytest.mark.parametrize("make,shape,gates", RNNS)
def test_recurrent_layers(make, shape, gates):
    m = make()
    x = torch.randn(*shape)
    w = walk(m, x)
    assert len(w.layers) == 1
    r = w.layers[0]
    assert r.macs == _rnn_closed_form(m, shape[0] * shape[1], gates)
    # with oneDNN off the cells run as addmm, which FlopCounterMode counts
    with torch.backends.mkldnn.flags(enabled=False):
        assert r.macs == flop_counter_macs(m, x)
    assert r.parameter_count == n_params(m)
    assert r.output_elements == sum(t.numel() for t in torch.utils._pytree.tree_leaves(m(x)))


def test_lstm_inside_a_model_is_atomic():
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.rnn = nn.LSTM(8, 16, batch_first=True)
            self.out = nn.Linear(16, 5)

        def forward(self, t):
            return self.out(self.rnn(self.emb(t))[0])

    m = Tagger()
    t = torch.randint(0, 50, (2, 7))
    w = walk(m, t)
    assert [r.name for r in w.layers] == ["emb", "rnn", "out"]
    assert rows(w)["rnn"].macs == 2 * 7 * 4 * 16 * (8 + 16)


# ------------------------------------------------------------------- seeds' SmallCNN
def test_small_cnn_rows_closed_form():
    m = SmallCNN()
    for batch in (1, 4):
        by = rows(walk(m, torch.randn(batch, 1, 28, 28)))
        c1, c2, fc = by["conv1"], by["conv2"], by["classifier"]
        assert c1.output_elements == batch * 16 * 28 * 28
        assert c1.macs == batch * 16 * 28 * 28 * 1 * 3 * 3
        assert c1.parameter_count == 16 * 1 * 9 + 16
        assert c2.output_elements == batch * 32 * 14 * 14
        assert c2.macs == batch * 32 * 14 * 14 * 16 * 3 * 3
        assert c2.parameter_count == 32 * 16 * 9 + 32
        assert fc.output_elements == batch * 10
        assert fc.macs == batch * 32 * 7 * 7 * 10
        assert fc.parameter_count == 32 * 7 * 7 * 10 + 10
        assert by["pool1"].output_shape == (batch, 16, 14, 14)
        assert by["pool1"].macs == 0 and by["pool1"].other_ops == batch * 16 * 28 * 28


# ---------------------------------------------------------------------- peak memory
def test_peak_live_elements_simple_chain():
    chain = nn.Sequential(nn.Linear(100, 200), nn.ReLU(), nn.Linear(200, 50))
    w = walk(chain, torch.randn(1, 100))
    # while ReLU runs: the input (100), Linear's output (200) and ReLU's output (200)
    assert w.peak_live_elements == 100 + 200 + 200
    assert w.input_elements == 100

    inplace = nn.Sequential(nn.Linear(100, 200), nn.ReLU(inplace=True), nn.Linear(200, 50))
    w = walk(inplace, torch.randn(1, 100))
    # in place: ReLU allocates nothing; the last Linear adds 50 while 100 + 200 are alive
    assert w.peak_live_elements == 100 + 200 + 50


def test_peak_live_elements_small_cnn():
    w = walk(SmallCNN(), torch.randn(1, 1, 28, 28))
    # pool1(relu1(conv1(x))): x, conv1's output and relu1's output are alive together
    assert w.peak_live_elements == 784 + 2 * 16 * 28 * 28


def test_peak_counts_freed_temporaries_only_while_alive():
    class Temp(nn.Module):
        def forward(self, x):
            big = x.repeat(1, 10)  # 10x the input, dropped before the next op
            s = big.sum(dim=1, keepdim=True)
            del big
            return x * s

    x = torch.randn(4, 100)
    w = walk(Temp(), x)
    assert w.peak_live_elements == 400 + 4000 + 4
    # a module without children is a leaf: its ops are one row (named after its class at the root)
    assert [r.name for r in w.layers] == ["temp"]
    assert w.layers[0].other_ops == 4000 + 400  # sum reads 4000, mul writes 400; repeat copies


# ----------------------------------------------------------------------- structure
def test_reused_modules_give_one_row_per_call_and_count_parameters_once():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.act = nn.ReLU()
            self.drop = nn.Dropout(0.5)
            self.ident = nn.Identity()

        def forward(self, x):
            x = self.ident(self.drop(self.act(self.fc(x))))
            return self.act(self.fc(x)).flatten(1)

    m = Tied()
    m.train()
    w = walk(m, torch.randn(3, 8))
    assert [r.name for r in w.layers] == ["fc", "act", "fc_1", "act_1"]  # no Dropout/Identity
    by = rows(w)
    assert by["fc"].parameter_count == 72 and by["fc_1"].parameter_count == 0
    assert by["fc"].macs == by["fc_1"].macs == 3 * 8 * 8
    assert m.training  # training flags restored after the eval-mode walk


def test_several_inputs_and_int_inputs():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 6)
            self.fc = nn.Linear(6, 4)

        def forward(self, ids, mask):
            return self.fc(self.emb(ids)) * mask.unsqueeze(-1)

    ids = torch.randint(0, 20, (2, 5))
    mask = torch.ones(2, 5)
    w = walk(TwoInputs(), ids, mask)
    by = rows(w)
    assert w.input_elements == 20
    assert by["emb"].input_elements == 10 and by["emb"].output_elements == 60
    assert by["fc"].macs == 10 * 6 * 4
    assert by["mul"].input_elements == 40 + 10


def test_unused_parameters_are_noted():
    class Unused(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(4, 4)
            self.spare = nn.Linear(4, 100)

        def forward(self, x):
            return self.used(x)

    w = walk(Unused(), torch.randn(1, 4))
    assert [r.name for r in w.layers] == ["used"]
    assert any("500 parameter elements" in n for n in w.notes)


def test_wrong_input_shape_raises_input_spec_error():
    with pytest.raises(InputSpecError) as err:
        walk(SmallCNN(), torch.randn(1, 3, 32, 32))
    msg = str(err.value)
    assert "1x3x32x32" in msg and "RuntimeError" in msg and "\n" not in msg


def test_importing_profilers_does_not_import_torch():
    code = ("import sys, edgeprof.profilers.estimate.torch_graph, edgeprof.profilers.estimate.analytic, "
            "edgeprof.profilers.report.seeds, edgeprof.profilers.report.plots; "
            "heavy = [m for m in ('torch', 'onnxruntime', 'openvino', 'tensorflow', "
            "'matplotlib.pyplot') if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# ------------------------------------------------------------------ reference models
def _reference_models():
    spec = importlib.util.spec_from_file_location("edgeprof_reference_models",
                                                  ROOT / "benchmarks" / "reference_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_resnet50_reference_counts():
    refs = _reference_models()
    module, shapes = refs.resnet50()
    w = walk_torch(module, [torch.randn(*shapes[0])])
    params = sum(r.parameter_count for r in w.layers)
    assert params == 25_557_032 == n_params(module)
    assert total_macs(w) == pytest.approx(4.089e9, rel=0.005)


def test_the_walk_leaves_no_global_module_hook_behind():
    """torch's handle of a global forward hook registered ``with_kwargs`` forgets its flag
    in ``_global_forward_hooks_with_kwargs`` (torch 2.11-2.13): left there, every later
    ``torch.compile`` of any module warns that global hooks will fire twice (seen on the
    H100 run of benchmarks/cuda_paths.py). The walk removes what it registered, all of it."""
    import torch.nn.modules.module as module_globals

    walk(SmallCNN(), torch.randn(1, 1, 28, 28))
    assert not module_globals._has_any_global_hook()
    assert not module_globals._global_forward_hooks_with_kwargs

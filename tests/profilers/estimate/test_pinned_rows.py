"""The torch graph walk's rows, pinned: every row of every model below (names, op types,
shapes, element counts, parameters, MACs, other ops), the walk's peak and notes, and the fp32
estimate's per-layer frame (its byte columns pinned, its other columns the walk's) equal what
the walk gave before it was made fast (issue 20: the meta-op cache, the fast meta kernels,
global hooks, the one-pass module scan).

Each model is walked twice: with the meta-op cache emptied first (every kernel or fast meta
kernel runs) and again with the cache full (every op rebuilt from it). Both must give the
pinned rows.

The pinned file (``data/pinned_rows.json``) was written by the walk before that change with
``python tests/profilers/estimate/test_pinned_rows.py --write``; rewrite it only for a change
meant to change rows, and say so.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import torch
from torch import nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[3]
PINNED = Path(__file__).with_name("data") / "pinned_rows.json"
NB201 = ROOT / "examples" / "nb201" / "nb201.py"  # the published definition, shipped

def _reference_models():
    spec = importlib.util.spec_from_file_location("edgeprof_reference_models",
                                                  ROOT / "benchmarks" / "reference_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------- models of this test
class NeedsValues(nn.Module):
    """Data-dependent control flow: the meta walk fails and the real forward is walked."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x):
        y = self.a(x)
        if y.sum().item() > -1e9:
            y = torch.relu(y)
        return self.b(y) * 2


class Mixed(nn.Module):
    """Functional ops outside leaves, a tied weight, a reused module, attention, a buffer,
    an in-place activation, a channels-last tensor and an LSTM."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.norm = nn.LayerNorm(16)
        self.proj = nn.Linear(16, 16)
        self.head = nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight  # tied
        self.act = nn.GELU()
        self.lstm = nn.LSTM(16, 8, batch_first=True)
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pos = nn.Parameter(torch.zeros(1, 6, 16))
        self.register_buffer("scale", torch.ones(16))

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        a, _ = self.attn(x, x, x, need_weights=False)
        x = self.norm(x + a)
        x = self.act(self.proj(x)) * self.scale
        x = self.act(self.proj(x))  # the same modules again
        h = x @ x.transpose(1, 2)
        h = F.softmax(h, dim=-1) @ x
        img = h.reshape(1, 4, 6, 4).contiguous(memory_format=torch.channels_last)
        img = F.relu_(self.bn(self.conv(img)))
        out, _ = self.lstm(h + img.reshape(1, 6, 16))
        return self.head(torch.cat([h, out.repeat(1, 1, 2)], -1)[..., :16])


def _hooked():
    """A model with hooks of its own: a forward hook that computes (its ops belong to the
    leaf's row) and a pre-hook on a container that rewrites the input."""
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 4), nn.Tanh()))
    model[0].register_forward_hook(lambda m, args, out: out * 2)
    model[2].register_forward_pre_hook(lambda m, args: (args[0] + 1,))
    return model.eval(), [[3, 8]]


def _zoo(name):
    def make():
        from edgeprof.zoo import reference

        return getattr(reference, name)()
    return make


def _ref(name):
    def make():
        return getattr(_reference_models(), name)()
    return make


MODELS = {
    "resnet50": _ref("resnet50"),
    "mobilenet_v2": _ref("mobilenet_v2"),
    "vit_b_16": _ref("vit_b_16"),
    "mobilenet_v3_small": _zoo("mobilenet_v3_small"),
    "shufflenet_v2": _zoo("shufflenet_v2"),
    "squeezenet1_1": _zoo("squeezenet1_1"),
    "tiny_ds_cnn": _zoo("tiny_ds_cnn"),
    "yolov4_tiny": _zoo("yolov4_tiny"),
    "vit_tiny_112": _zoo("vit_tiny_112"),
    "lstm": _zoo("lstm"),
    "gru": _zoo("gru"),
    "needs_values": lambda: (NeedsValues().eval(), [[2, 8]]),
    "mixed": lambda: (Mixed().eval(), {"shapes": [[1, 6]], "dtypes": ["int64"]}),
    "hooked": _hooked,
}
NB201_CELLS = ("cell_532", "cell_10439", "cell_4863")


def _handle(name):
    from edgeprof.core.models import resolve_model

    if name.startswith("nb201:"):
        return resolve_model(f"{NB201}:{name.split(':', 1)[1]}", input_shapes=[[1, 3, 32, 32]])
    torch.manual_seed(0)
    module, shapes = MODELS[name]()
    dtypes = None
    if isinstance(shapes, dict):
        shapes, dtypes = shapes["shapes"], shapes["dtypes"]
    return resolve_model(module, input_shapes=shapes, input_dtypes=dtypes)


def _pin(handle) -> dict:
    """What is pinned of one model: its graph walk and its fp32 estimate (the byte columns;
    the estimate's other columns are checked against the walk's rows)."""
    from edgeprof.profilers.estimate.analytic import estimate_model
    from edgeprof.profilers.estimate.torch_graph import walk_model
    from edgeprof.targets import get_target

    w = walk_model(handle)
    est = estimate_model(handle, get_target("raspberry_pi_4"), "fp32")
    same = len(est.layers) == len(w.layers) and all(
        (r.layer, r.op_type, r.output_shape, r.output_elements, r.parameter_count, r.macs,
         r.flops, r.other_ops)
        == (g.name, g.op_type, "x".join(str(d) for d in g.output_shape), g.output_elements,
            g.parameter_count, g.macs, 2 * g.macs, g.other_ops)
        for r, g in zip(est.layers, w.layers))
    return {
        "walk": {"layers": [[g.name, g.op_type, list(g.output_shape), g.output_elements,
                             g.input_elements, g.parameter_count, g.macs, g.other_ops]
                            for g in w.layers],
                 "peak_live_elements": w.peak_live_elements, "input_elements": w.input_elements,
                 "notes": w.notes, "total_parameter_count": w.total_parameter_count},
        "estimate": {"input_parameter_activation_bytes": [
                         [r.input_bytes, r.parameter_bytes, r.activation_bytes]
                         for r in est.layers],
                     "other_columns_are_the_walks": same,
                     "peak_activation_bytes": est.peak_activation_bytes,
                     "parameter_count": est.parameter_count,
                     "forward_parameter_count": est.forward_parameter_count},
    }


def _names() -> list[str]:
    return list(MODELS) + [f"nb201:{c}" for c in NB201_CELLS]


def _first_difference(want: dict, got: dict) -> str:
    for part in ("walk", "estimate"):
        for key, value in want[part].items():
            other = got[part].get(key)
            if value == other:
                continue
            if isinstance(value, list) and isinstance(other, list):
                for i, (a, b) in enumerate(zip(value, other)):
                    if a != b:
                        return f"{part}.{key}[{i}]: pinned {a}, now {b}"
                return f"{part}.{key}: {len(value)} pinned rows, now {len(other)}"
            return f"{part}.{key}: pinned {value}, now {other}"
    return "no difference"


@pytest.fixture(scope="module")
def pinned() -> dict:
    return json.loads(PINNED.read_text())


@pytest.mark.parametrize("name", _names())
def test_rows_are_the_pinned_rows(name, pinned):
    from edgeprof.profilers.estimate import torch_graph

    if name.startswith("nb201:") and not NB201.is_file():
        pytest.skip(f"{NB201} is not here")
    handle = _handle(name)
    torch_graph._META_CACHE.clear()
    cold = _pin(handle)  # every op's kernel (or fast meta kernel) runs
    assert cold == pinned[name], f"{name} (cache empty): {_first_difference(pinned[name], cold)}"
    handle.__dict__.pop("_walk_memo", None)
    warm = _pin(handle)  # every op rebuilt from the meta-op cache
    assert warm == pinned[name], f"{name} (cache full): {_first_difference(pinned[name], warm)}"


def test_the_pinned_file_covers_every_model(pinned):
    assert set(_names()) <= set(pinned)


if __name__ == "__main__" and "--write" in sys.argv:
    # write the pinned rows from the walk as it is now (see the module docstring)
    sys.path.insert(0, str(ROOT))
    out = {n: _pin(_handle(n)) for n in _names()}
    PINNED.parent.mkdir(exist_ok=True)
    PINNED.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                                          for k, v in out.items()) + "\n}\n")
    print(f"wrote {PINNED}: {sum(len(v['walk']['layers']) for v in out.values())} rows")

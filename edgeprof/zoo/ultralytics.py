"""Ultralytics YOLO detectors at 640 x 640 -- YOLOv8s, YOLO11n/s/m and YOLO26n/s/m/x -- rebuilt
in plain ``torch.nn`` (the ``ultralytics`` package does not run here) so that published
Ultralytics benchmark rows (Raspberry Pi 4/5 among them) can be rebuilt and predicted. Random
weights (``torch.manual_seed(0)``), eval mode: only the structure matters for counting and
timing.

Sources (ultralytics/ultralytics on GitHub, read through the code index):

* the model configs ``ultralytics/cfg/models/v8/yolov8.yaml``,
  ``ultralytics/cfg/models/11/yolo11.yaml`` and ``ultralytics/cfg/models/26/yolo26.yaml``
  (the release config, commit d45088cf: ``end2end: True``, ``reg_max: 1``, ``SPPF [1024, 5,
  3, True]``, every head ``C3k2`` with ``c3k=True``, the last one ``[1024, True, 0.5, True]``
  with attention), each with its ``scales`` table ``[depth, width, max_channels]``;
* ``ultralytics/nn/tasks.py`` ``parse_model``: channels ``make_divisible(min(c, max_channels)
  * width, 8)``, repeats ``max(round(n * depth), 1)``, and for scales m/l/x every ``C3k2``
  gets ``c3k=True``;
* ``ultralytics/nn/modules/block.py``: ``Bottleneck`` (``e=0.5`` by default), ``C3``/``C3k``,
  ``C3k2`` (a ``C2f`` whose blocks are ``Bottleneck``, ``C3k``, or ``Bottleneck`` +
  ``PSABlock`` when ``attn``), ``SPPF`` (YOLO26: ``n`` pools, linear ``cv1``, residual when
  ``shortcut``), ``Attention``/``PSABlock``/``C2PSA``. The index holds ultralytics/ultralytics'
  block.py only at a YOLO11-era commit (44cbec18: C3k2 without ``attn``, SPPF without
  ``n``/``shortcut``); the YOLO26 forms of C3k2 and SPPF were read from later copies of the
  same file the index does not attribute to a repository. The exact match of every
  parameter count with yolo26.yaml's own summary lines (below) is the check on them;
* ``ultralytics/nn/modules/head.py`` ``Detect`` (at commit d45088cf, as yolo26.yaml): box
  branch ``Conv 3x3, Conv 3x3, 1x1 -> 4 * reg_max``; class branch 3x3 convs (``legacy``,
  YOLOv8) or ``DWConv 3x3 + Conv 1x1`` twice (YOLO11/26), then 1x1 -> ``nc``;
  ``c2 = max(16, ch[0] // 4, 4 * reg_max)``, ``c3 = max(ch[0], min(nc, 100))``. With
  ``end2end`` the head holds a one-to-many and a one-to-one copy; ``fuse()`` drops the
  one-to-many copy.

What is rebuilt, and what is not:

* The network is the graph that runs at inference: one detection head per model (for YOLO26
  the one-to-one head, as after ``model.fuse()``, which is what the docs count), returning
  one tensor per level, ``cat(box, cls)`` as :class:`edgeprof.zoo.detectors.YOLOv8n` does.
  Post-processing is excluded, as in YOLOv8n: no DFL decode and anchor/stride decode
  (YOLOv8/11), no box decode and top-k selection (YOLO26's NMS-free output) and no NMS.
* Convolutions keep their batch norms (the unfused training graph, as every zoo model here).
  Ultralytics' docs count the fused model; the difference is explained by ``PUBLISHED``.
* The parameter counts equal the configs' own summary lines (``CONFIG_PARAMS``; tests/zoo/
  test_ultralytics.py checks them) once the parts left out are added back: the 16-weight
  DFL conv (YOLOv8/11) or the one-to-many copy of the head (YOLO26).
* YOLOv8s is :class:`YOLOv8`, the existing YOLOv8n's layout (:mod:`edgeprof.zoo.detectors`'
  ``C2f``/``SPPF`` blocks) with yolov8.yaml's width/depth scales; at scale n it is that
  YOLOv8n layer for layer.
* Other scales (YOLOv8n/m/l/x, YOLO11l/x, YOLO26l) are not registered; ``YOLOv8(scale)`` and
  ``YOLO11Family(scale, version)`` build them.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from edgeprof.zoo.cnns import cba, factory, img
from edgeprof.zoo.detectors import C2f, SPPF, cbs, split_chain_forward, v8_neck_forward

#: net -> (published FLOPs, published parameters), Ultralytics' docs tables at 640 x 640:
#: YOLOv8 -- docs.ultralytics.com/models/yolov8 (detection, COCO); YOLO11 --
#: docs.ultralytics.com/models/yolo11 (docs/en/macros/yolo-det-perf.md); YOLO26 --
#: docs.ultralytics.com/tasks/detect and /models/yolo26, whose note reads "Params and FLOPs
#: values are for the fused model after model.fuse(), which merges Conv and BatchNorm layers
#: and removes the auxiliary one-to-many detection head".
#:
#: What is compared. "FLOPs (B)" is Ultralytics' ``get_flops``: thop's count of the fused
#: model's convolution multiply-accumulates (thop sees modules, not the functional ``@`` of
#: the attention blocks), times 2, in billions, rounded to 0.1 B. Our walk's MACs count the
#: convolutions *and* the attention matmuls (C2PSA and YOLO26's attention C3k2, at P5: 20 x 20
#: = 400 tokens; 30.7 M MACs per attention at the n scale: 0.9% of YOLO11n's MACs, 2.2% of
#: YOLO26n's, which has two), so
#: ``2 x MACs`` is the number to set beside FLOPs, and ``2 x (MACs - matmul MACs)`` reproduces
#: every published figure to its rounding (5.36 -> 5.4 for YOLO26n, 193.87 -> 193.9 for
#: YOLO26x, 28.60 for YOLOv8s). "params (M)" is the fused model's count, rounded to 0.1 M:
#: ours is the unfused count, so ours less the batch norms' channels (fusing trades a norm's
#: weight and bias for one conv bias per channel) is the fused count, which rounds to every
#: published figure. Roboflow's model-leaderboard lists 2,408,932 (YOLO26n) and 55,725,948
#: (YOLO26x) parameters for the released weights: our fused-equivalent counts exactly.
PUBLISHED = {
    "yolov8s": (28.6e9, 11.2e6),
    "yolo11n": (6.5e9, 2.6e6), "yolo11s": (21.5e9, 9.4e6), "yolo11m": (68.0e9, 20.1e6),
    "yolo26n": (5.4e9, 2.4e6), "yolo26s": (20.7e9, 9.5e6), "yolo26m": (68.2e9, 20.4e6),
    "yolo26x": (193.9e9, 55.7e6),
}

#: net -> parameters in the config's own summary line (the unfused model ``YOLO("x.yaml")``
#: builds: all heads, batch norms, and for YOLOv8/11 the 16-weight DFL conv)
CONFIG_PARAMS = {
    "yolov8s": 11_166_560,
    "yolo11n": 2_624_080, "yolo11s": 9_458_752, "yolo11m": 20_114_688,
    "yolo26n": 2_572_280, "yolo26s": 10_009_784, "yolo26m": 21_896_248,
    "yolo26x": 58_993_368,
}

#: scale -> (depth, width, max_channels): the configs' ``scales`` tables
V8_SCALES = {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 768),
             "l": (1.00, 1.00, 512), "x": (1.00, 1.25, 512)}
V11_SCALES = {"n": (0.50, 0.25, 1024), "s": (0.50, 0.50, 1024), "m": (0.50, 1.00, 512),
              "l": (1.00, 1.00, 512), "x": (1.00, 1.50, 512)}  # YOLO11 and YOLO26 alike


def _width(c: int, width: float, max_channels: int) -> int:
    """``parse_model``'s channel rule: ``make_divisible(min(c, max) * width, 8)``."""
    return math.ceil(min(c, max_channels) * width / 8) * 8


def _depth(n: int, depth: float) -> int:
    return max(round(n * depth), 1) if n > 1 else n


def _conv(cin, cout, k=1, s=1, groups=1, act=True):
    """Ultralytics ``Conv``: conv (no bias) + batch norm + SiLU (``act=False``: none)."""
    return cba(cin, cout, k, s, groups=groups, act=nn.SiLU if act else None)


def _dwconv(c, k=3):
    """Ultralytics ``DWConv(c, c, k)``: depthwise conv + batch norm + SiLU."""
    return _conv(c, c, k, groups=c)


# ------------------------------------------------------------------------------- blocks
class Bottleneck(nn.Module):
    """``Bottleneck(c1, c2, shortcut, k=(3, 3), e=0.5)``: two k x k convs, hidden c2 * e."""

    def __init__(self, c1, c2, shortcut=True, k=(3, 3), e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = _conv(c1, c_, k[0])
        self.cv2 = _conv(c_, c2, k[1])
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3k(nn.Module):
    """``C3k`` (a ``C3``): two 1x1 branches, ``n`` k x k bottlenecks (e=1) on one, 1x1 fuse."""

    def __init__(self, c1, c2, n=2, shortcut=True, e=0.5, k=3):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = _conv(c1, c_)
        self.cv2 = _conv(c1, c_)
        self.cv3 = _conv(2 * c_, c2)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, (k, k), 1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class Attention(nn.Module):
    """Ultralytics ``Attention``: 1x1 qkv, softmax(q^T k / sqrt(d)) over all pixels, a depthwise
    3x3 positional term on v, 1x1 projection (``key_dim = head_dim * attn_ratio``)."""

    def __init__(self, dim, num_heads=8, attn_ratio=0.5):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.key_dim = int(self.head_dim * attn_ratio)
        self.scale = self.key_dim ** -0.5
        self.qkv = _conv(dim, dim + 2 * self.key_dim * num_heads, act=False)
        self.proj = _conv(dim, dim, act=False)
        self.pe = _conv(dim, dim, 3, groups=dim, act=False)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).view(b, self.num_heads, 2 * self.key_dim + self.head_dim,
                                   h * w).split([self.key_dim, self.key_dim, self.head_dim], 2)
        attn = ((q.transpose(-2, -1) @ k) * self.scale).softmax(dim=-1)
        x = (v @ attn.transpose(-2, -1)).view(b, c, h, w) + self.pe(v.reshape(b, c, h, w))
        return self.proj(x)


class PSABlock(nn.Module):
    """``PSABlock``: x + attention(x), then x + FFN(x) (1x1 to 2c with SiLU, 1x1 back)."""

    def __init__(self, c, attn_ratio=0.5, num_heads=4, shortcut=True):
        super().__init__()
        self.attn = Attention(c, num_heads, attn_ratio)
        self.ffn = nn.Sequential(_conv(c, 2 * c), _conv(2 * c, c, act=False))
        self.add = shortcut

    def forward(self, x):
        x = x + self.attn(x) if self.add else self.attn(x)
        return x + self.ffn(x) if self.add else self.ffn(x)


class C3k2(nn.Module):
    """``C3k2(c1, c2, n, c3k, e, attn)``: a ``C2f`` at expansion ``e`` whose blocks are
    ``Bottleneck`` (e=0.5), ``C3k`` (``c3k``) or ``Bottleneck`` + ``PSABlock`` (``attn``)."""

    def __init__(self, c1, c2, n=1, c3k=False, e=0.5, attn=False, shortcut=True):
        super().__init__()
        self.c = c = int(c2 * e)
        self.cv1 = _conv(c1, 2 * c)
        self.cv2 = _conv((2 + n) * c, c2)

        def block():
            if attn:
                return nn.Sequential(Bottleneck(c, c, shortcut),
                                     PSABlock(c, 0.5, num_heads=max(c // 64, 1)))
            return C3k(c, c, 2, shortcut) if c3k else Bottleneck(c, c, shortcut)
        self.m = nn.ModuleList(block() for _ in range(n))

    def forward(self, x):
        return split_chain_forward(self, x)


class C2PSA(nn.Module):
    """``C2PSA(c, c, n)``: split a 1x1 conv in two, ``n`` PSABlocks on one half, 1x1 fuse."""

    def __init__(self, c1, n=1, e=0.5):
        super().__init__()
        self.c = int(c1 * e)
        self.cv1 = _conv(c1, 2 * self.c)
        self.cv2 = _conv(2 * self.c, c1)
        self.m = nn.Sequential(*(PSABlock(self.c, 0.5, num_heads=self.c // 64) for _ in range(n)))

    def forward(self, x):
        a, b = self.cv1(x).split((self.c, self.c), 1)
        return self.cv2(torch.cat([a, self.m(b)], 1))


class SPPF26(nn.Module):
    """YOLO26's ``SPPF(c1, c2, k, n, shortcut)``: linear 1x1 to c1/2, ``n`` chained k x k max
    pools, 1x1 fuse of the n + 1 maps, plus the input when ``shortcut`` and c1 == c2."""

    def __init__(self, c1, c2, k=5, n=3, shortcut=True):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = _conv(c1, c_, act=False)
        self.cv2 = _conv(c_ * (n + 1), c2)
        self.m = nn.MaxPool2d(k, 1, k // 2)
        self.n = n
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(self.n):
            y.append(self.m(y[-1]))
        out = self.cv2(torch.cat(y, 1))
        return x + out if self.add else out


class DetectHead(nn.Module):
    """Ultralytics ``Detect`` without decoding: per level ``cat(box, cls)`` with 4 * reg_max box
    channels. ``legacy`` (YOLOv8): 3x3 convs in the class branch; otherwise DWConv + 1x1."""

    def __init__(self, ch, nc=80, reg_max=16, legacy=False):
        super().__init__()
        c2, c3 = max(16, ch[0] // 4, 4 * reg_max), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(_conv(c, c2, 3), _conv(c2, c2, 3),
                                               nn.Conv2d(c2, 4 * reg_max, 1)) for c in ch)
        if legacy:
            self.cv3 = nn.ModuleList(nn.Sequential(_conv(c, c3, 3), _conv(c3, c3, 3),
                                                   nn.Conv2d(c3, nc, 1)) for c in ch)
        else:
            self.cv3 = nn.ModuleList(
                nn.Sequential(nn.Sequential(_dwconv(c), _conv(c, c3)),
                              nn.Sequential(_dwconv(c3), _conv(c3, c3)),
                              nn.Conv2d(c3, nc, 1)) for c in ch)

    def forward(self, feats):
        return [torch.cat([a(f), b(f)], 1) for f, a, b in zip(feats, self.cv2, self.cv3)]


# ------------------------------------------------------------------------------ networks
class YOLOv8(nn.Module):
    """``yolov8.yaml`` at a scale (``V8_SCALES``), from :mod:`edgeprof.zoo.detectors`' blocks.
    ``YOLOv8("n")`` is :class:`edgeprof.zoo.detectors.YOLOv8n` layer for layer."""

    def __init__(self, scale="s", nc=80, reg_max=16):
        super().__init__()
        depth, width, max_ch = V8_SCALES[scale]
        w = lambda c: _width(c, width, max_ch)  # noqa: E731
        d = lambda n: _depth(n, depth)  # noqa: E731
        c1, c2, c3, c4, c5 = w(64), w(128), w(256), w(512), w(1024)
        self.b0 = nn.Sequential(cbs(3, c1, 3, 2), cbs(c1, c2, 3, 2), C2f(c2, c2, d(3), True),
                                cbs(c2, c3, 3, 2), C2f(c3, c3, d(6), True))
        self.b1 = nn.Sequential(cbs(c3, c4, 3, 2), C2f(c4, c4, d(6), True))
        self.b2 = nn.Sequential(cbs(c4, c5, 3, 2), C2f(c5, c5, d(3), True), SPPF(c5, c5))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h12, self.h15 = C2f(c5 + c4, c4, d(3)), C2f(c4 + c3, c3, d(3))
        self.d16, self.h18 = cbs(c3, c3, 3, 2), C2f(c3 + c4, c4, d(3))
        self.d19, self.h21 = cbs(c4, c4, 3, 2), C2f(c4 + c5, c5, d(3))
        self.head = DetectHead((c3, c4, c5), nc, reg_max, legacy=True)

    def forward(self, x):
        return self.head(list(v8_neck_forward(self, x)))


class YOLO11Family(nn.Module):
    """``yolo11.yaml`` (``version=11``) or ``yolo26.yaml`` (``version=26``) at a scale.

    The two share the backbone and the PAN neck; YOLO26 differs in its SPPF (``n=3``, linear
    ``cv1``, residual), ``c3k=True`` in every head C3k2, a last C3k2 with a single
    Bottleneck + PSABlock (attention) block, and a DFL-free head (``reg_max=1``) that is the
    one-to-one (NMS-free) head alone."""

    def __init__(self, scale="n", version=11, nc=80):
        super().__init__()
        if version not in (11, 26):
            raise ValueError(f"version must be 11 or 26, not {version!r}")
        depth, width, max_ch = V11_SCALES[scale]
        w = lambda c: _width(c, width, max_ch)  # noqa: E731
        n2 = _depth(2, depth)
        big = scale in "mlx"  # parse_model: C3k2's c3k = True for m/l/x
        v26 = version == 26
        c1, c2, c3, c4, c5 = w(64), w(128), w(256), w(512), w(1024)
        self.b0 = nn.Sequential(
            _conv(3, c1, 3, 2), _conv(c1, c2, 3, 2), C3k2(c2, c3, n2, big, 0.25),
            _conv(c3, c3, 3, 2), C3k2(c3, c4, n2, big, 0.25))  # -> P3 (layer 4)
        self.b1 = nn.Sequential(_conv(c4, c4, 3, 2), C3k2(c4, c4, n2, True))  # P4 (6)
        sppf = SPPF26(c5, c5, 5, 3, True) if v26 else SPPF(c5, c5)
        self.b2 = nn.Sequential(_conv(c4, c5, 3, 2), C3k2(c5, c5, n2, True), sppf,
                                C2PSA(c5, n2))  # P5 (10)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        neck_c3k = big or v26
        self.h13 = C3k2(c5 + c4, c4, n2, neck_c3k)
        self.h16 = C3k2(c4 + c4, c3, n2, neck_c3k)
        self.d17, self.h19 = _conv(c3, c3, 3, 2), C3k2(c3 + c4, c4, n2, neck_c3k)
        self.d20 = _conv(c4, c4, 3, 2)
        self.h22 = (C3k2(c4 + c5, c5, 1, True, 0.5, attn=True) if v26
                    else C3k2(c4 + c5, c5, n2, True))
        self.head = DetectHead((c3, c4, c5), nc, reg_max=1 if v26 else 16)

    def forward(self, x):
        p3 = self.b0(x)
        p4 = self.b1(p3)
        p5 = self.b2(p4)
        h13 = self.h13(torch.cat([self.up(p5), p4], 1))
        o3 = self.h16(torch.cat([self.up(h13), p3], 1))
        o4 = self.h19(torch.cat([self.d17(o3), h13], 1))
        o5 = self.h22(torch.cat([self.d20(o4), p5], 1))
        return self.head([o3, o4, o5])


# ----------------------------------------------------------------------------- factories
def _factory(cls, *args):
    return factory(cls, *args, inputs=img(640))


yolov8s = _factory(YOLOv8, "s")
yolo11n, yolo11s, yolo11m = (_factory(YOLO11Family, scale, 11) for scale in "nsm")
yolo26n, yolo26s, yolo26m, yolo26x = (_factory(YOLO11Family, scale, 26) for scale in "nsmx")

#: the factories, by builtin name
NAMES = tuple(PUBLISHED)

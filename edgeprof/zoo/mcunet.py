"""MCUNet model-zoo networks (Lin et al., NeurIPS 2020; mit-han-lab/mcunet), rebuilt from their
searched architectures so that published microcontroller latencies (TinyEngine's README:
TF-Lite Micro, CMSIS-NN, X-CUBE-AI and TinyEngine on an STM32H743) can be fitted and
predicted. Random weights: only the structure matters for counting and timing.

Every network is a ProxylessNAS-style chain: a 3x3 stride-2 stem, mobile inverted bottleneck
blocks (1x1 expand unless the ratio is 1, k x k depthwise, linear 1x1 project, an identity
shortcut where stride is 1 and the widths agree), an optional 1x1 feature-mix layer, global
average pooling and a linear classifier, ReLU6 throughout. Each block is a row
``(expand ratio, out channels, stride, kernel)``.

Sources and checks (``PUBLISHED`` holds the model zoo's MACs and parameter counts, from
mit-han-lab/mcunet's README; ``tests/zoo/test_mcunet.py`` holds every network to them):

* ``mcunet_in0`` .. ``mcunet_in4`` -- the zoo's searched configs ``mcunet-10fps_imagenet``,
  ``mcunet-5fps_imagenet``, ``mcunet-256kb-1mb_imagenet``, ``mcunet-320kb-1mb_imagenet`` and
  ``mcunet-512kb-2mb_imagenet``, block by block. Each reproduces the published MACs and
  parameters to 0.1% and 1%.
* ``mcunet_mbv2_w035`` -- MobileNetV2 at width 0.35 (channels rounded to multiples of 8,
  the last layer scaled to 448), 144 x 144. Reproduces 23.5 M MACs and 0.75 M parameters.
* ``mcunet_proxyless_w03`` -- ProxylessNAS-Mobile (Cai et al., ICLR 2019: its mobile
  architecture, two skipped blocks in the 32-channel stage) at width 0.3, 176 x 176. The
  zoo's own config was not available here: with the widths rounded up to multiples of 8 and a
  384-channel feature-mix layer it gives 38.28 M MACs and 0.754 M parameters against the
  published 38.3 M and 0.75 M, which is how that rounding was chosen.

The VWW models (``mcunet-*_vww``) are not rebuilt: their searched configs were not available.
"""

from __future__ import annotations

import torch
from torch import nn

from edgeprof.zoo.cnns import cba, factory, img

#: net -> (published MACs, published parameters): mit-han-lab/mcunet README, model list
PUBLISHED = {
    "mcunet_in0": (6.4e6, 0.75e6), "mcunet_in1": (12.8e6, 0.64e6),
    "mcunet_in2": (67.3e6, 0.73e6), "mcunet_in3": (81.8e6, 0.74e6),
    "mcunet_in4": (125.9e6, 1.73e6), "mcunet_mbv2_w035": (23.5e6, 0.75e6),
    "mcunet_proxyless_w03": (38.3e6, 0.75e6)}

_IN = {  # net -> (resolution, stem channels, blocks (expand, out, stride, kernel))
    "mcunet_in0": (48, 24, [
        (1, 16, 1, 3), (4, 16, 2, 5), (3, 16, 1, 3), (4, 16, 1, 3), (5, 24, 2, 7),
        (4, 24, 1, 5), (5, 24, 1, 5), (5, 48, 2, 7), (4, 48, 1, 5), (5, 56, 1, 3),
        (4, 56, 1, 5), (5, 56, 1, 3), (6, 112, 2, 3), (4, 112, 1, 5), (6, 192, 1, 3)]),
    "mcunet_in1": (96, 16, [
        (1, 8, 1, 3), (4, 16, 2, 3), (3, 16, 1, 3), (3, 24, 2, 7), (5, 24, 1, 3),
        (5, 40, 2, 3), (4, 40, 1, 7), (4, 48, 1, 5), (3, 48, 1, 3), (4, 48, 1, 3),
        (5, 96, 2, 7), (4, 96, 1, 5), (4, 96, 1, 5), (6, 160, 1, 3)]),
    "mcunet_in2": (160, 16, [
        (1, 8, 1, 3), (3, 16, 2, 5), (6, 16, 1, 7), (5, 16, 1, 3), (5, 16, 1, 5),
        (5, 24, 2, 3), (6, 24, 1, 7), (6, 24, 1, 5), (4, 40, 2, 7), (5, 40, 1, 5),
        (5, 48, 1, 3), (5, 48, 1, 5), (4, 48, 1, 3), (6, 96, 2, 5), (4, 96, 1, 5),
        (3, 96, 1, 5), (4, 96, 1, 3), (5, 160, 1, 5)]),
    "mcunet_in3": (176, 16, [
        (1, 8, 1, 3), (3, 16, 2, 7), (5, 16, 1, 3), (5, 16, 1, 7), (4, 16, 1, 5),
        (5, 24, 2, 5), (5, 24, 1, 5), (5, 24, 1, 5), (5, 40, 2, 3), (6, 40, 1, 7),
        (4, 40, 1, 5), (5, 48, 1, 5), (5, 48, 1, 7), (5, 48, 1, 3), (6, 96, 2, 3),
        (5, 96, 1, 7), (4, 96, 1, 3), (5, 160, 1, 7)]),
    "mcunet_in4": (160, 32, [
        (1, 16, 1, 3), (3, 24, 2, 7), (5, 24, 1, 3), (4, 24, 1, 5), (5, 40, 2, 7),
        (4, 40, 1, 3), (4, 40, 1, 7), (3, 80, 2, 7), (3, 80, 1, 3), (3, 80, 1, 7),
        (4, 96, 1, 3), (3, 96, 1, 5), (3, 96, 1, 5), (4, 192, 2, 7), (3, 192, 1, 7),
        (3, 192, 1, 5), (4, 320, 1, 5)]),
}

# MobileNetV2 (t, c, n, s) at width 0.35: c -> multiple of 8 (the first block's 16 -> 8)
_MBV2_W035 = [(1, 8, 1, 1), (6, 8, 2, 2), (6, 16, 3, 2), (6, 24, 4, 2), (6, 32, 3, 1),
              (6, 56, 3, 2), (6, 112, 1, 1)]

# ProxylessNAS-Mobile per stage: (stride, [(expand, channels, kernel) or None for a skipped
# block]); the fourth stage's second half (96 channels) keeps stride 1
_PROXYLESS_MOBILE = [
    (1, [(1, 16, 3)]),
    (2, [(3, 32, 5), (3, 32, 3), None, None]),
    (2, [(3, 40, 7), (3, 40, 3), (3, 40, 5), (3, 40, 5)]),
    (2, [(6, 80, 7), (3, 80, 5), (3, 80, 5), (3, 80, 5),
         (6, 96, 5), (3, 96, 5), (3, 96, 5), (3, 96, 5)]),
    (2, [(6, 192, 7), (6, 192, 7), (3, 192, 7), (3, 192, 7), (6, 320, 7)]),
]


def _cba(cin, cout, k, stride=1, groups=1, act=nn.ReLU6):
    return cba(cin, cout, k, stride, groups, act)


class MBBlock(nn.Module):
    """Mobile inverted bottleneck with a k x k depthwise convolution."""

    def __init__(self, cin, cout, kernel, stride, expand):
        super().__init__()
        mid = cin * expand
        layers = [] if expand == 1 else [_cba(cin, mid, 1)]
        layers += [_cba(mid, mid, kernel, stride, groups=mid), _cba(mid, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.shortcut = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.shortcut else self.body(x)


class TinyNASNet(nn.Module):
    """stem -> MB blocks -> optional 1x1 feature mix -> pool -> linear."""

    def __init__(self, stem, blocks, mix=None, num_classes=1000):
        super().__init__()
        layers, c = [_cba(3, stem, 3, 2)], stem
        for expand, cout, stride, kernel in blocks:
            layers.append(MBBlock(c, cout, kernel, stride, expand))
            c = cout
        if mix:
            layers.append(_cba(c, mix, 1))
            c = mix
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def _up8(v: float) -> int:
    return max(8, -(-int(v) // 8) * 8)


def _factory(stem, blocks, mix, resolution):
    return factory(TinyNASNet, stem, blocks, mix, inputs=img(resolution))


def _proxyless_blocks():
    """ProxylessNAS-Mobile's blocks at width 0.3 (skipped blocks dropped)."""
    blocks = []
    for stride, stage in _PROXYLESS_MOBILE:
        kept = [b for b in stage if b is not None]
        for i, (expand, c, kernel) in enumerate(kept):
            first_of_stride = i == 0 and stride != 1
            blocks.append((expand, 8 if c == 16 else _up8(c * 0.3),
                           stride if first_of_stride else 1, kernel))
    return blocks


mcunet_in0, mcunet_in1, mcunet_in2, mcunet_in3, mcunet_in4 = (
    _factory(stem, blocks, None, resolution) for resolution, stem, blocks in _IN.values())
mcunet_mbv2_w035 = _factory(
    16, [(t, c, s if i == 0 else 1, 3) for t, c, n, s in _MBV2_W035 for i in range(n)], 448, 144)
mcunet_proxyless_w03 = _factory(16, _proxyless_blocks(), 384, 176)

#: the factories, by builtin name
NAMES = tuple(PUBLISHED)

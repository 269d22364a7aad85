"""Reference architectures, written from their papers and reference code (torchvision does
not run beside torch 2.13, and nothing is downloaded). Weights are random: only the structure
matters for counting and for timing.

Each factory returns ``(module, input_shapes)`` (NCHW, batch first). Sources:

* ResNet-18/50 -- He et al. 2015, Table 1 (torchvision layout: stride on the 3x3 conv);
  ResNet-50-vd -- He et al. 2018 "Bag of Tricks" (deep stem, average-pool shortcut), as in
  PaddleClas' ResNet50_vd (PP-ResNet50).
* AlexNet, VGG-16, SqueezeNet 1.1, DenseNet-121, ShuffleNetV2 x1.0, MobileNetV2,
  MobileNetV3-Small -- their papers, with torchvision's layer sizes.
* MobileNetV1 -- Howard et al. 2017, Table 1, width multiplier and resolution as arguments.
* MLPerf Tiny v1.x reference models (mlcommons/tiny, benchmark/training): ResNet-8 (image
  classification, 32x32x3), DS-CNN (keyword spotting, 49x10 MFCC), MobileNetV1-0.25 (visual
  wake words, 96x96x3, 2 classes), FC autoencoder (anomaly detection, 640 inputs).
* SSD-MobileNetV2 (TF Object Detection API ssd_mobilenet_v2_coco: 300x300, features at
  block 15's expansion (19x19) and the last conv (10x10) plus four extra layers, 1x1 box
  predictors, 91 classes; post-processing/NMS not included), YOLOv3-416 (Darknet-53),
  YOLOv4-tiny-416 (CSPDarknet53-tiny), YOLOv8n-640 (Ultralytics C2f/SPPF/decoupled head,
  without the DFL decode).
* ViT-Tiny/16 (DeiT-Ti sizes), an LSTM sequence classifier and an MLP for the host zoo.
"""

from __future__ import annotations

import torch
from torch import nn


def _divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _cba(cin, cout, k, stride=1, groups=1, act=nn.ReLU, padding=None, bias=False):
    """conv + batch-norm + activation (``act`` None: no activation)."""
    pad = (k - 1) // 2 if padding is None else padding
    layers = [nn.Conv2d(cin, cout, k, stride, pad, groups=groups, bias=bias), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------- ResNets
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = _cba(cin, cout, 3, stride)
        self.conv2 = _cba(cout, cout, 3, act=None)
        self.down = None if stride == 1 and cin == cout else _cba(cin, cout, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        return self.relu(self.conv2(self.conv1(x)) + idt)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride=1, vd=False):
        super().__init__()
        cout = width * 4
        self.conv1 = _cba(cin, width, 1)
        self.conv2 = _cba(width, width, 3, stride)
        self.conv3 = _cba(width, cout, 1, act=None)
        self.down = None
        if stride != 1 or cin != cout:
            if vd and stride != 1:
                self.down = nn.Sequential(nn.AvgPool2d(2, 2, ceil_mode=True),
                                          _cba(cin, cout, 1, act=None))
            else:
                self.down = _cba(cin, cout, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + idt)


class ResNet(nn.Module):
    def __init__(self, block="basic", layers=(2, 2, 2, 2), num_classes=1000, vd=False):
        super().__init__()
        if vd:
            self.stem = nn.Sequential(_cba(3, 32, 3, 2), _cba(32, 32, 3), _cba(32, 64, 3),
                                      nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(_cba(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        cin, stages = 64, []
        for i, (n, w) in enumerate(zip(layers, (64, 128, 256, 512))):
            blocks = []
            for j in range(n):
                s = 2 if (j == 0 and i > 0) else 1
                if block == "basic":
                    blocks.append(BasicBlock(cin, w, s))
                    cin = w
                else:
                    blocks.append(Bottleneck(cin, w, s, vd=vd))
                    cin = w * 4
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


# -------------------------------------------------------------------- classic CNNs
class AlexNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        self.pool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(256 * 36, 4096), nn.ReLU(), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class VGG16(nn.Module):
    CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M")

    def __init__(self, num_classes=1000):
        super().__init__()
        layers, cin = [], 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
                cin = v
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 49, 4096), nn.ReLU(), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(), nn.Linear(4096, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
        self.e1 = nn.Sequential(nn.Conv2d(squeeze, e1, 1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(squeeze, e3, 3, padding=1), nn.ReLU())

    def forward(self, x):
        s = self.squeeze(x)
        return torch.cat([self.e1(s), self.e3(s)], 1)


class SqueezeNet11(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        mp = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(), mp(), Fire(64, 16, 64, 64), Fire(128, 16, 64, 64),
            mp(), Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), mp(),
            Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256))
        self.classifier = nn.Sequential(nn.Dropout(), nn.Conv2d(512, num_classes, 1), nn.ReLU(),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


class DenseLayer(nn.Module):
    def __init__(self, cin, growth=32, bn_size=4):
        super().__init__()
        self.net = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(),
                                 nn.Conv2d(cin, bn_size * growth, 1, bias=False),
                                 nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
                                 nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

    def forward(self, x):
        return torch.cat([x, self.net(x)], 1)


class DenseNet121(nn.Module):
    def __init__(self, num_classes=1000, growth=32, blocks=(6, 12, 24, 16)):
        super().__init__()
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                  nn.MaxPool2d(3, 2, 1)]
        c = 64
        for i, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(c, growth))
                c += growth
            if i != len(blocks) - 1:
                layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                           nn.AvgPool2d(2, 2)]
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


# --------------------------------------------------------------------- mobile nets
class MobileNetV1(nn.Module):
    BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
              (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))

    def __init__(self, width=1.0, num_classes=1000):
        super().__init__()
        c = int(32 * width)
        layers = [_cba(3, c, 3, 2, act=nn.ReLU6)]
        for cout, s in self.BLOCKS:
            cout = int(cout * width)
            layers += [_cba(c, c, 3, s, groups=c, act=nn.ReLU6), _cba(c, cout, 1, act=nn.ReLU6)]
            c = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = int(round(cin * expand))
        self.use_res = stride == 1 and cin == cout
        layers = [] if expand == 1 else [_cba(cin, hidden, 1, act=nn.ReLU6)]
        layers += [_cba(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   _cba(hidden, cout, 1, act=None)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes=1000, width=1.0):
        super().__init__()
        cin = _divisible(32 * width)
        self.last = _divisible(1280 * max(1.0, width))
        features = [_cba(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.SETTINGS:
            cout = _divisible(c * width)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(_cba(cin, self.last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        s = _divisible(c // 4, 8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, s, 1)
        self.relu = nn.ReLU()
        self.fc2 = nn.Conv2d(s, c, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))


class MBv3Block(nn.Module):
    def __init__(self, cin, k, exp, cout, se, act, stride):
        super().__init__()
        a = nn.Hardswish if act == "HS" else nn.ReLU
        layers = [] if exp == cin else [_cba(cin, exp, 1, act=a)]
        layers.append(_cba(exp, exp, k, stride, groups=exp, act=a))
        if se:
            layers.append(SqueezeExcite(exp))
        layers.append(_cba(exp, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class MobileNetV3Small(nn.Module):
    SETTINGS = ((16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2),
                (24, 3, 88, 24, False, "RE", 1), (24, 5, 96, 40, True, "HS", 2),
                (40, 5, 240, 40, True, "HS", 1), (40, 5, 240, 40, True, "HS", 1),
                (40, 5, 120, 48, True, "HS", 1), (48, 5, 144, 48, True, "HS", 1),
                (48, 5, 288, 96, True, "HS", 2), (96, 5, 576, 96, True, "HS", 1),
                (96, 5, 576, 96, True, "HS", 1))

    def __init__(self, num_classes=1000):
        super().__init__()
        layers = [_cba(3, 16, 3, 2, act=nn.Hardswish)]
        layers += [MBv3Block(*s) for s in self.SETTINGS]
        layers.append(_cba(96, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(1024, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class ShuffleBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        b = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(_cba(cin, cin, 3, stride, groups=cin, act=None),
                                         _cba(cin, b, 1))
        else:
            self.branch1 = None
        c2 = cin if stride > 1 else b
        self.branch2 = nn.Sequential(_cba(c2, b, 1), _cba(b, b, 3, stride, groups=b, act=None),
                                     _cba(b, b, 1))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), 1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), 1)
        n, c, h, w = out.shape
        return out.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleNetV2(nn.Module):
    def __init__(self, num_classes=1000, repeats=(4, 8, 4), channels=(24, 116, 232, 464, 1024)):
        super().__init__()
        layers = [_cba(3, channels[0], 3, 2), nn.MaxPool2d(3, 2, 1)]
        cin = channels[0]
        for n, cout in zip(repeats, channels[1:4]):
            layers += [ShuffleBlock(cin, cout, 2)] + [ShuffleBlock(cout, cout, 1)
                                                      for _ in range(n - 1)]
            cin = cout
        layers.append(_cba(cin, channels[-1], 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x):
        return self.fc(self.features(x).mean([2, 3]))


# ------------------------------------------------------------------- MLPerf Tiny
class ResNet8(nn.Module):
    """MLPerf Tiny image classification reference (CIFAR-10)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = _cba(3, 16, 3)
        self.stack1 = BasicBlock(16, 16, 1)
        self.stack2 = BasicBlock(16, 32, 2)
        self.stack3 = BasicBlock(32, 64, 2)
        self.pool = nn.AvgPool2d(8)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.stack3(self.stack2(self.stack1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class DSCNN(nn.Module):
    """MLPerf Tiny keyword spotting reference (DS-CNN-S, 49x10 MFCC, 12 classes)."""

    def __init__(self, num_classes=12, filters=64):
        super().__init__()
        layers = [_cba(1, filters, (10, 4), 2, padding=(5, 1))]
        for _ in range(4):
            layers += [_cba(filters, filters, 3, groups=filters), _cba(filters, filters, 1)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(filters, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class FCAutoencoder(nn.Module):
    """MLPerf Tiny anomaly detection reference (ToyADMOS, 640 = 5 frames x 128 mels)."""

    def __init__(self, inputs=640, hidden=128, bottleneck=8):
        super().__init__()
        dims = [inputs] + [hidden] * 4 + [bottleneck] + [hidden] * 4
        layers = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
        layers.append(nn.Linear(hidden, inputs))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


# ------------------------------------------------------------------------ detection
class SSDMobileNetV2(nn.Module):
    def __init__(self, num_classes=91):
        super().__init__()
        base = MobileNetV2().features
        # slim's layer_15 = the first 160-channel block (base[14]): its expansion output is
        # 576 x 19 x 19, before the stride-2 depthwise
        self.head15 = base[:14]
        b15 = base[14].conv
        self.b15_expand = b15[0]  # layer_15/expansion_output: 576 x 19 x 19
        self.b15_rest = nn.Sequential(*b15[1:])
        self.tail = base[15:]  # -> 1280 x 10 x 10 (layer_19)
        extras, cin = [], 1280
        for d in (512, 256, 256, 128):
            extras.append(nn.Sequential(_cba(cin, d // 2, 1, act=nn.ReLU6),
                                        _cba(d // 2, d, 3, 2, act=nn.ReLU6)))
            cin = d
        self.extras = nn.ModuleList(extras)
        chans, anchors = (576, 1280, 512, 256, 256, 128), (3, 6, 6, 6, 6, 6)
        self.box = nn.ModuleList(nn.Conv2d(c, a * 4, 1) for c, a in zip(chans, anchors))
        self.cls = nn.ModuleList(nn.Conv2d(c, a * num_classes, 1) for c, a in zip(chans, anchors))

    def forward(self, x):
        x = self.head15(x)
        f1 = self.b15_expand(x)
        x = self.tail(self.b15_rest(f1))
        feats = [f1, x]
        for e in self.extras:
            x = e(x)
            feats.append(x)
        outs = [torch.cat([b(f).flatten(1), c(f).flatten(1)], 1)
                for f, b, c in zip(feats, self.box, self.cls)]
        return torch.cat(outs, 1)


def _leaky():
    return nn.LeakyReLU(0.1)


def _dk(cin, cout, k, s=1):
    return _cba(cin, cout, k, s, act=_leaky)


class DarkRes(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.net = nn.Sequential(_dk(c, c // 2, 1), _dk(c // 2, c, 3))

    def forward(self, x):
        return x + self.net(x)


class YOLOv3(nn.Module):
    def __init__(self, num_outputs=255):
        super().__init__()
        def stage(cin, cout, n):
            return nn.Sequential(_dk(cin, cout, 3, 2), *[DarkRes(cout) for _ in range(n)])
        self.stem = _dk(3, 32, 3)
        self.s1, self.s2 = stage(32, 64, 1), stage(64, 128, 2)
        self.s3, self.s4, self.s5 = stage(128, 256, 8), stage(256, 512, 8), stage(512, 1024, 4)

        def five(cin, c):
            return nn.Sequential(_dk(cin, c, 1), _dk(c, 2 * c, 3), _dk(2 * c, c, 1),
                                 _dk(c, 2 * c, 3), _dk(2 * c, c, 1))
        self.h5, self.h4, self.h3 = five(1024, 512), five(768, 256), five(384, 128)
        self.o5 = nn.Sequential(_dk(512, 1024, 3), nn.Conv2d(1024, num_outputs, 1))
        self.o4 = nn.Sequential(_dk(256, 512, 3), nn.Conv2d(512, num_outputs, 1))
        self.o3 = nn.Sequential(_dk(128, 256, 3), nn.Conv2d(256, num_outputs, 1))
        self.l5, self.l4 = _dk(512, 256, 1), _dk(256, 128, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        c3 = self.s3(self.s2(self.s1(self.stem(x))))
        c4 = self.s4(c3)
        c5 = self.s5(c4)
        p5 = self.h5(c5)
        p4 = self.h4(torch.cat([self.up(self.l5(p5)), c4], 1))
        p3 = self.h3(torch.cat([self.up(self.l4(p4)), c3], 1))
        return self.o5(p5), self.o4(p4), self.o3(p3)


class CSPTiny(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = _dk(c, c, 3)
        self.c2 = _dk(c // 2, c // 2, 3)
        self.c3 = _dk(c // 2, c // 2, 3)
        self.c4 = _dk(c, c, 1)
        self.pool = nn.MaxPool2d(2, 2)

    def forward(self, x):
        x = self.c1(x)
        a = self.c2(x[:, x.shape[1] // 2:])
        b = self.c3(a)
        feat = self.c4(torch.cat([b, a], 1))
        return self.pool(torch.cat([x, feat], 1)), feat


class YOLOv4Tiny(nn.Module):
    def __init__(self, num_outputs=255):
        super().__init__()
        self.stem = nn.Sequential(_dk(3, 32, 3, 2), _dk(32, 64, 3, 2))
        self.b1, self.b2, self.b3 = CSPTiny(64), CSPTiny(128), CSPTiny(256)
        self.c5 = _dk(512, 512, 3)
        self.p5 = _dk(512, 256, 1)
        self.o5 = nn.Sequential(_dk(256, 512, 3), nn.Conv2d(512, num_outputs, 1))
        self.l5 = _dk(256, 128, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.o4 = nn.Sequential(_dk(384, 256, 3), nn.Conv2d(256, num_outputs, 1))

    def forward(self, x):
        x, _ = self.b1(self.stem(x))
        x, _ = self.b2(x)
        x, feat = self.b3(x)
        p5 = self.p5(self.c5(x))
        return self.o5(p5), self.o4(torch.cat([self.up(self.l5(p5)), feat], 1))


def _sc(cin, cout, k=1, s=1):
    return _cba(cin, cout, k, s, act=nn.SiLU)


class V8Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.net = nn.Sequential(_sc(c, c, 3), _sc(c, c, 3))
        self.add = shortcut

    def forward(self, x):
        return x + self.net(x) if self.add else self.net(x)


class C2f(nn.Module):
    def __init__(self, cin, cout, n=1, shortcut=False):
        super().__init__()
        self.c = cout // 2
        self.cv1 = _sc(cin, 2 * self.c)
        self.m = nn.ModuleList(V8Bottleneck(self.c, shortcut) for _ in range(n))
        self.cv2 = _sc((2 + n) * self.c, cout)

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.cv1 = _sc(cin, cin // 2)
        self.cv2 = _sc(cin * 2, cout)
        self.m = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class YOLOv8n(nn.Module):
    def __init__(self, nc=80, reg_max=16):
        super().__init__()
        self.b0 = nn.Sequential(_sc(3, 16, 3, 2), _sc(16, 32, 3, 2), C2f(32, 32, 1, True),
                                _sc(32, 64, 3, 2), C2f(64, 64, 2, True))
        self.b1 = nn.Sequential(_sc(64, 128, 3, 2), C2f(128, 128, 2, True))
        self.b2 = nn.Sequential(_sc(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h12, self.h15 = C2f(384, 128), C2f(192, 64)
        self.d16, self.h18 = _sc(64, 64, 3, 2), C2f(192, 128)
        self.d19, self.h21 = _sc(128, 128, 3, 2), C2f(384, 256)
        c2, c3 = max(16, 64 // 4, 4 * reg_max), max(64, min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(_sc(c, c2, 3), _sc(c2, c2, 3),
                                               nn.Conv2d(c2, 4 * reg_max, 1)) for c in (64, 128, 256))
        self.cv3 = nn.ModuleList(nn.Sequential(_sc(c, c3, 3), _sc(c3, c3, 3),
                                               nn.Conv2d(c3, nc, 1)) for c in (64, 128, 256))

    def forward(self, x):
        p3 = self.b0(x)
        p4 = self.b1(p3)
        p5 = self.b2(p4)
        h12 = self.h12(torch.cat([self.up(p5), p4], 1))
        o3 = self.h15(torch.cat([self.up(h12), p3], 1))
        o4 = self.h18(torch.cat([self.d16(o3), h12], 1))
        o5 = self.h21(torch.cat([self.d19(o4), p5], 1))
        return [torch.cat([a(f), b(f)], 1) for f, a, b in zip((o3, o4, o5), self.cv2, self.cv3)]


# ------------------------------------------------------------------ host-zoo extras
class _Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class _Encoder(nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.n1, self.attn = nn.LayerNorm(dim), _Attention(dim, heads)
        self.n2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class ViT(nn.Module):
    def __init__(self, image=224, patch=16, dim=192, depth=12, heads=3, mlp=768,
                 num_classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, dim))
        self.blocks = nn.Sequential(*[_Encoder(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class LSTMClassifier(nn.Module):
    def __init__(self, features=64, hidden=128, layers=2, num_classes=10):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


class GRUClassifier(nn.Module):
    """A single-layer GRU over a feature sequence (keyword-spotting-sized)."""

    def __init__(self, features=40, hidden=96, num_classes=12):
        super().__init__()
        self.gru = nn.GRU(features, hidden, 1, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.fc(out[:, -1])


class WideMLP(nn.Module):
    def __init__(self, inputs=1024, hidden=2048, depth=3, num_classes=100):
        super().__init__()
        layers, c = [], inputs
        for _ in range(depth):
            layers += [nn.Linear(c, hidden), nn.ReLU()]
            c = hidden
        layers.append(nn.Linear(c, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


# ---------------------------------------------------------------------- factories
def _seeded(cls, *args, **kwargs):
    torch.manual_seed(0)
    return cls(*args, **kwargs).eval()


def _img(n=224, c=3):
    return [[1, c, n, n]]


def resnet18():
    return _seeded(ResNet, "basic", (2, 2, 2, 2)), _img()


def resnet50():
    return _seeded(ResNet, "bottleneck", (3, 4, 6, 3)), _img()


def resnet50_vd():
    return _seeded(ResNet, "bottleneck", (3, 4, 6, 3), vd=True), _img()


def alexnet():
    return _seeded(AlexNet), _img()


def vgg16():
    return _seeded(VGG16), _img()


def squeezenet1_1():
    return _seeded(SqueezeNet11), _img()


def densenet121():
    return _seeded(DenseNet121), _img()


def shufflenet_v2():
    return _seeded(ShuffleNetV2), _img()


def mobilenet_v1():
    return _seeded(MobileNetV1), _img()


def mobilenet_v1_025_160():
    return _seeded(MobileNetV1, 0.25, 1001), _img(160)


def mobilenet_v2():
    return _seeded(MobileNetV2), _img()


def mobilenet_v3_small():
    return _seeded(MobileNetV3Small), _img()


def tiny_resnet8():
    return _seeded(ResNet8), _img(32)


def tiny_ds_cnn():
    return _seeded(DSCNN), [[1, 1, 49, 10]]


def tiny_vww_mobilenet():
    return _seeded(MobileNetV1, 0.25, 2), _img(96)


def tiny_fc_autoencoder():
    return _seeded(FCAutoencoder), [[1, 640]]


def ssd_mobilenet_v2():
    return _seeded(SSDMobileNetV2), _img(300)


def yolov3():
    return _seeded(YOLOv3), _img(416)


def yolov4_tiny():
    return _seeded(YOLOv4Tiny), _img(416)


def yolov8n():
    return _seeded(YOLOv8n), _img(640)


def vit_tiny():
    return _seeded(ViT), _img()


def vit_tiny_112():
    """ViT-Tiny (patch 16, dim 192, depth 12) at 112 x 112: 50 tokens (host-zoo size)."""
    return _seeded(ViT, image=112), _img(112)


def lstm():
    return _seeded(LSTMClassifier), [[1, 50, 64]]


def wide_mlp():
    return _seeded(WideMLP), [[1, 1024]]


def gru():
    return _seeded(GRUClassifier), [[1, 49, 40]]

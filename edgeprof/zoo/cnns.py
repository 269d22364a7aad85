"""Reference image-classification CNNs (:mod:`edgeprof.zoo.reference` lists their sources):
ResNet-18/50/50-vd, AlexNet, VGG-16, SqueezeNet 1.1, DenseNet-121, MobileNetV1/V2/V3-Small,
ShuffleNetV2, and the MLPerf Tiny references (ResNet-8, DS-CNN, FC autoencoder); the
conv + batch-norm + activation block they share with the detectors; and :func:`factory`, which
every zoo module's builtin factories are made with (:func:`img` gives their image inputs)."""

from __future__ import annotations

import copy

import torch
from torch import nn


def factory(build, *args, inputs, **kwargs):
    """A builtin model factory: it seeds torch (``manual_seed(0)``), builds
    ``build(*args, **kwargs)`` in eval mode and returns it with a copy of ``inputs`` (the input
    shapes, batch first, or a dict of shapes and dtypes)."""
    def make():
        torch.manual_seed(0)
        return build(*args, **kwargs).eval(), copy.deepcopy(inputs)
    return make


def img(h=224, w=None, c=3):
    """The input shapes of a one-image network: ``[[1, c, h, w]]`` (``w`` defaults to ``h``)."""
    return [[1, c, h, h if w is None else w]]


def _divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def cba(cin, cout, k, stride=1, groups=1, act=nn.ReLU, padding=None, bias=False):
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
        self.conv1 = cba(cin, cout, 3, stride)
        self.conv2 = cba(cout, cout, 3, act=None)
        self.down = None if stride == 1 and cin == cout else cba(cin, cout, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        return self.relu(self.conv2(self.conv1(x)) + idt)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride=1, vd=False):
        super().__init__()
        cout = width * 4
        self.conv1 = cba(cin, width, 1)
        self.conv2 = cba(width, width, 3, stride)
        self.conv3 = cba(width, cout, 1, act=None)
        self.down = None
        if stride != 1 or cin != cout:
            if vd and stride != 1:
                self.down = nn.Sequential(nn.AvgPool2d(2, 2, ceil_mode=True),
                                          cba(cin, cout, 1, act=None))
            else:
                self.down = cba(cin, cout, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + idt)


class ResNet(nn.Module):
    def __init__(self, block="basic", layers=(2, 2, 2, 2), num_classes=1000, vd=False):
        super().__init__()
        if vd:
            self.stem = nn.Sequential(cba(3, 32, 3, 2), cba(32, 32, 3), cba(32, 64, 3),
                                      nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(cba(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
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
    """torchvision's DenseNet; its defaults are DenseNet-121 (``init`` 96, ``growth`` 48,
    ``blocks`` (6, 12, 36, 24) make DenseNet-161)."""

    def __init__(self, num_classes=1000, growth=32, blocks=(6, 12, 24, 16), init=64):
        super().__init__()
        layers = [nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init), nn.ReLU(),
                  nn.MaxPool2d(3, 2, 1)]
        c = init
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
        layers = [cba(3, c, 3, 2, act=nn.ReLU6)]
        for cout, s in self.BLOCKS:
            cout = int(cout * width)
            layers += [cba(c, c, 3, s, groups=c, act=nn.ReLU6), cba(c, cout, 1, act=nn.ReLU6)]
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
        layers = [] if expand == 1 else [cba(cin, hidden, 1, act=nn.ReLU6)]
        layers += [cba(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   cba(hidden, cout, 1, act=None)]
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
        features = [cba(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.SETTINGS:
            cout = _divisible(c * width)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(cba(cin, self.last, 1, act=nn.ReLU6))
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
        layers = [] if exp == cin else [cba(cin, exp, 1, act=a)]
        layers.append(cba(exp, exp, k, stride, groups=exp, act=a))
        if se:
            layers.append(SqueezeExcite(exp))
        layers.append(cba(exp, cout, 1, act=None))
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
        layers = [cba(3, 16, 3, 2, act=nn.Hardswish)]
        layers += [MBv3Block(*s) for s in self.SETTINGS]
        layers.append(cba(96, 576, 1, act=nn.Hardswish))
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
            self.branch1 = nn.Sequential(cba(cin, cin, 3, stride, groups=cin, act=None),
                                         cba(cin, b, 1))
        else:
            self.branch1 = None
        c2 = cin if stride > 1 else b
        self.branch2 = nn.Sequential(cba(c2, b, 1), cba(b, b, 3, stride, groups=b, act=None),
                                     cba(b, b, 1))

    def forward(self, x):
        return shuffle_unit_forward(self, x)


def shuffle_unit_forward(unit: nn.Module, x):
    """A ShuffleNetV2 unit's forward (``unit.stride``, ``branch1``, ``branch2``): split or
    both branches, concatenate, shuffle the two channel groups."""
    if unit.stride == 1:
        x1, x2 = x.chunk(2, dim=1)
        out = torch.cat((x1, unit.branch2(x2)), 1)
    else:
        out = torch.cat((unit.branch1(x), unit.branch2(x)), 1)
    n, c, h, w = out.shape
    return out.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleNetV2(nn.Module):
    def __init__(self, num_classes=1000, repeats=(4, 8, 4), channels=(24, 116, 232, 464, 1024)):
        super().__init__()
        layers = [cba(3, channels[0], 3, 2), nn.MaxPool2d(3, 2, 1)]
        cin = channels[0]
        for n, cout in zip(repeats, channels[1:4]):
            layers += [ShuffleBlock(cin, cout, 2)] + [ShuffleBlock(cout, cout, 1)
                                                      for _ in range(n - 1)]
            cin = cout
        layers.append(cba(cin, channels[-1], 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x):
        return self.fc(self.features(x).mean([2, 3]))


# ------------------------------------------------------------------- MLPerf Tiny
class ResNet8(nn.Module):
    """MLPerf Tiny image classification reference (CIFAR-10)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = cba(3, 16, 3)
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
        layers = [cba(1, filters, (10, 4), 2, padding=(5, 1))]
        for _ in range(4):
            layers += [cba(filters, filters, 3, groups=filters), cba(filters, filters, 1)]
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

"""Reference detection networks (:mod:`edgeprof.zoo.reference` lists their sources):
SSD-MobileNetV2, YOLOv3 (Darknet-53), YOLOv4-tiny (CSPDarknet53-tiny), YOLOv8n; without
their post-processing."""

from __future__ import annotations

import torch
from torch import nn

from edgeprof.zoo.cnns import MobileNetV2, cba


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
            extras.append(nn.Sequential(cba(cin, d // 2, 1, act=nn.ReLU6),
                                        cba(d // 2, d, 3, 2, act=nn.ReLU6)))
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


def leaky():
    """Darknet's activation, LeakyReLU(0.1) (also the NanoDet and Yolo-Fastest one)."""
    return nn.LeakyReLU(0.1)


def _dk(cin, cout, k, s=1):
    return cba(cin, cout, k, s, act=leaky)


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


def cbs(cin, cout, k=1, s=1):
    """Conv-BN-SiLU (YOLO's ``Conv``)."""
    return cba(cin, cout, k, s, act=nn.SiLU)


class V8Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.net = nn.Sequential(cbs(c, c, 3), cbs(c, c, 3))
        self.add = shortcut

    def forward(self, x):
        return x + self.net(x) if self.add else self.net(x)


class C2f(nn.Module):
    def __init__(self, cin, cout, n=1, shortcut=False):
        super().__init__()
        self.c = cout // 2
        self.cv1 = cbs(cin, 2 * self.c)
        self.m = nn.ModuleList(V8Bottleneck(self.c, shortcut) for _ in range(n))
        self.cv2 = cbs((2 + n) * self.c, cout)

    def forward(self, x):
        return split_chain_forward(self, x)


def split_chain_forward(block: nn.Module, x):
    """C2f's (and YOLO11's C3k2's) forward: split ``cv1``'s output in two, run the blocks
    ``m`` in a chain on the second half, concatenate every output, fuse with ``cv2``."""
    y = list(block.cv1(x).chunk(2, 1))
    for m in block.m:
        y.append(m(y[-1]))
    return block.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.cv1 = cbs(cin, cin // 2)
        self.cv2 = cbs(cin * 2, cout)
        self.m = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class YOLOv8n(nn.Module):
    def __init__(self, nc=80, reg_max=16):
        super().__init__()
        self.b0 = nn.Sequential(cbs(3, 16, 3, 2), cbs(16, 32, 3, 2), C2f(32, 32, 1, True),
                                cbs(32, 64, 3, 2), C2f(64, 64, 2, True))
        self.b1 = nn.Sequential(cbs(64, 128, 3, 2), C2f(128, 128, 2, True))
        self.b2 = nn.Sequential(cbs(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h12, self.h15 = C2f(384, 128), C2f(192, 64)
        self.d16, self.h18 = cbs(64, 64, 3, 2), C2f(192, 128)
        self.d19, self.h21 = cbs(128, 128, 3, 2), C2f(384, 256)
        c2, c3 = max(16, 64 // 4, 4 * reg_max), max(64, min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(cbs(c, c2, 3), cbs(c2, c2, 3),
                                               nn.Conv2d(c2, 4 * reg_max, 1)) for c in (64, 128, 256))
        self.cv3 = nn.ModuleList(nn.Sequential(cbs(c, c3, 3), cbs(c3, c3, 3),
                                               nn.Conv2d(c3, nc, 1)) for c in (64, 128, 256))

    def forward(self, x):
        o3, o4, o5 = v8_neck_forward(self, x)
        return [torch.cat([a(f), b(f)], 1) for f, a, b in zip((o3, o4, o5), self.cv2, self.cv3)]


def v8_neck_forward(net: nn.Module, x):
    """YOLOv8's (n and the scaled ones) backbone stages ``b0``-``b2`` and PAN neck: the three
    feature maps (strides 8, 16, 32) the detection head reads."""
    p3 = net.b0(x)
    p4 = net.b1(p3)
    p5 = net.b2(p4)
    h12 = net.h12(torch.cat([net.up(p5), p4], 1))
    o3 = net.h15(torch.cat([net.up(h12), p3], 1))
    o4 = net.h18(torch.cat([net.d16(o3), h12], 1))
    o5 = net.h21(torch.cat([net.d19(o4), p5], 1))
    return o3, o4, o5

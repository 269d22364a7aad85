"""OpenCV model-zoo networks (opencv/opencv_zoo) and deeper torchvision classifiers, rebuilt
so that published latency rows (the zoo's ``benchmark/README.md``: Intel, Raspberry Pi 4B,
Jetson Nano ... running OpenCV DNN) can be fitted and predicted. Random weights
(``torch.manual_seed(0)``): only the structure matters for counting and timing. Each factory
returns ``(module, [[1, C, H, W]])`` at the input size the zoo's benchmark feeds
(``benchmark/config/*.yaml``); post-processing (decoding, NMS) is not included.

Sources and checks (``PUBLISHED`` holds the figures; ``tests/zoo/test_opencv_zoo.py`` holds
every network to them):

* ``yunet`` -- face_detection_yunet_2023mar = YuNet-n (ShiqiYu/libfacedetection.train,
  ``configs/yunet_n.py``, ``mmdet/models/{backbones/yunet_backbone, necks/tfpn,
  dense_heads/yunet_head, utils/yunet_layer}.py``). The benchmark's 160 x 120 image is padded
  to multiples of 32 by OpenCV's FaceDetectorYN, so the network sees 160 x 128 (W x H).
  75,856 parameters, as the training repo's README states. Its "149 MFlops at 320 x 320" is
  mmcv's get_flops count (MACs plus bias, batch-norm, ReLU, pooling and upsampling
  elements): the walk gives 135.6 M MACs there and 149.8 M counted mmcv's way.
* ``yolox_s`` -- object_detection_yolox_2022nov = YOLOX-S at 640 (Megvii-BaseDetection/YOLOX:
  CSPDarknet 0.33/0.50 with the Focus stem, YOLOPAFPN, decoupled head). README: 9.0 M
  parameters and 26.8 GFLOPs, which YOLOX computes as 2 x thop's MACs: 13.4 G MACs.
* ``nanodet_plus_m`` -- object_detection_nanodet_2022nov = NanoDet-Plus-m 416 (RangiLyu/nanodet
  ``config/nanodet-plus-m_416.yml``: ShuffleNetV2 1.0x, GhostPAN 96 / 5x5 / one extra level,
  NanoDetPlusHead with four levels; the training-only AGM head excluded). The zoo's accuracy
  table (0.304 / 0.459 / 0.317 AP) is that config's, although its README calls the model
  "m-plus-1.5x". README: 1.52 "GFLOPS" = 2 x MACs (the walk: 0.762 G MACs) and 1.17 M
  parameters (the walk: 1.198 M, 1.186 M with batch-norm folded).
* ``mp_handpose`` -- handpose_estimation_mediapipe_2023feb, 224 x 224. The zoo's ONNX is
  4,099,621 bytes, i.e. at most 1.02 M fp32 weights: MediaPipe's *lite* hand landmark model
  (the zoo README points elsewhere "for models of larger scale"), whose structure is not
  published. Built instead: the documented hand_landmark_full topology (3x3 stem, 16 MBConv
  blocks 16 .. 192 channels, a 1152-channel last expansion, global pool and four linear
  heads; as in the public micro-handpose re-implementations that load the official
  weights, HandposeDetector.cpp ``InitLandmarkBlockSpecs``; full width: 2.72 M parameters,
  which a 10.9 MB fp32 hand_landmarks_detector file bears out, and 331 M MACs) at width
  0.6, the multiplier that fits the zoo file's weight count (1.04 M parameters, 1.03 M
  with batch-norm folded; 128 M MACs). Approximate: only the parameter count is matched,
  no MAC figure is published.
* ``mp_persondet`` -- person_detection_mediapipe_2023mar (MediaPipe BlazePose GHUM pose
  detector), 224 x 224. Its backbone is not published; the zoo's ONNX (11,990,159 bytes,
  ~3.0 M fp32 weights, densified) fixes the heads: 2254 anchors = 28^2 x 2 + 14^2 x 2 +
  7^2 x 6, 12 coordinates each. Built: MediaPipe's BlazeBlock detector template (the
  v0.10 palm detector as re-implemented in HandposeDetector.cpp: 5x5 stem, levels of four
  5x5 BlazeBlocks, a projected upsampling path, 1x1 SSD heads; MediaPipePyTorch's BlazePose
  detector uses the same blocks) with a head on each of /8, /16 and /32 and widths
  56-112-216-432-432 fitted to the file: 3.06 M parameters (+2%), 1.18 G MACs. Approximate.
* ``pphumanseg`` -- human_segmentation_pphumanseg_2023mar = PaddleSeg's PP-HumanSeg-Mobile
  (``fcn_hrnetw18_small_v1_humanseg_192x192``, converted from PaddleHub by OpenCV's
  ``paddle_humanseg.py``): FCN head on HRNet_W18_Small_V1 (``paddleseg/models/backbones/
  hrnet.py``, ``paddleseg/models/fcn.py``), 192 x 192. PaddleSeg's HumanSeg README: 1.54 M
  parameters (the walk: 1.537 M; the zoo's ONNX is 6.16 MB) and 584 M FLOPs, paddle.flops'
  count (MACs plus conv-bias and twice the batch-norm elements): 577.5 M MACs, 584.2 M
  counted Paddle's way.
* ``mobilefacenet_fer`` -- facial_expression_recognition_mobilefacenet_2022july (Progressive
  Teacher, 7 expressions), 112 x 112: MobileFaceNet (Chen et al. 2018, Table 1: PReLU,
  linear 7x7 GDConv) with a 512-wide linear embedding and a 7-way classifier. The paper's
  128-wide embedding gives 0.99 M parameters and 221 M MAdds; the zoo's ONNX (4,791,892
  bytes, at most 1.198 M fp32 weights) needs the 512-wide one (1.204 M; 1.194 M with
  batch-norm folded), which adds 0.2 M MACs.
* ``efficientformer_l3`` -- EfficientFormer-L3 (snap-research/EfficientFormer
  ``models/efficientformer.py``: layers 4-4-12-6, widths 64-128-320-512, the last four
  blocks attention, both classifier heads averaged in eval), 224. README: 31.3 M
  parameters, 3.9 G MACs (timm: 31.41 M with the distillation head).
* ``resnet101``, ``resnet152``, ``densenet161``, ``vgg13`` -- torchvision's layer sizes, 224;
  torchvision's model tables: 44,549,160 / 60,192,808 / 28,681,000 / 133,047,848 parameters
  and 7.80 / 11.51 / 7.73 / 11.31 "GFLOPS" (MACs). ResNets reuse
  :class:`edgeprof.zoo.cnns.ResNet`; VGG-13 and DenseNet-161 generalise the zoo's VGG-16 and
  DenseNet-121.
* ``mobilenet_yolov3_lite`` -- eric612/MobileNet-YOLO MobileNet-YOLOv3-Lite (VOC, 20 classes),
  ``benchmark/mobilenet_yolov3_lite_deploy.prototxt`` (batch-norm merged, biased convs,
  ReLU): MobileNetV1 to conv13, one more depthwise-separable 1024 layer, a YOLO head at /32
  and one at /16 after an upsampling path (constant grouped 1x1 deconvolution + 2x2 max
  pool, added to a depthwise-separable branch from conv11). 320 x 320 as in the prototxt
  (the README also times 416: ``mobilenet_yolov3_lite(416)``). README: "20.3 mb" of weights,
  ~5.1 M fp32 parameters (the walk: 5.21 M); no MAC figure is published.

Not built: ``mobilenet_v1_keras`` -- Keras' MobileNet (alpha 1, 224) has the layer sizes of
``edgeprof.zoo.reference:mobilenet_v1`` (4,231,976 trainable parameters in both; its 1x1
classifier convolution counts as the linear layer), so the existing builtin serves.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn
from torch.nn import functional as F

from edgeprof.zoo.cnns import (VGG16, DenseNet121, MobileNetV1, ResNet, cba, factory, img,
                               shuffle_unit_forward)
from edgeprof.zoo.detectors import cbs, leaky


# ============================================================================ YuNet
class _ConvDP(nn.Module):
    """YuNet's ConvDPUnit: 1x1 conv -> 3x3 depthwise conv (both with bias) [-> BN -> ReLU]."""

    def __init__(self, cin, cout, bn_relu=True):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 1)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, groups=cout)
        self.post = nn.Sequential(nn.BatchNorm2d(cout), nn.ReLU()) if bn_relu else nn.Identity()

    def forward(self, x):
        return self.post(self.conv2(self.conv1(x)))


class YuNet(nn.Module):
    """YuNet-n (libfacedetection.train configs/yunet_n.py): YuNetBackbone, TFPN, YuNet_Head."""

    def __init__(self, stages=((16, 64), (64, 64), (64, 64), (64, 64), (64, 64)),
                 downsample=(0, 2, 3, 4), out=(3, 4, 5), ch=64, kps=5):
        super().__init__()
        self.model0 = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
                                    _ConvDP(16, 16))
        self.blocks = nn.ModuleList(nn.Sequential(_ConvDP(a, a), _ConvDP(a, b)) for a, b in stages)
        self.downsample, self.out = downsample, out
        self.lateral = nn.ModuleList(_ConvDP(ch, ch) for _ in out)
        self.share = nn.ModuleList(_ConvDP(ch, ch) for _ in out)
        self.cls = nn.ModuleList(_ConvDP(ch, 1, False) for _ in out)
        self.bbox = nn.ModuleList(_ConvDP(ch, 4, False) for _ in out)
        self.obj = nn.ModuleList(_ConvDP(ch, 1, False) for _ in out)
        self.kps = nn.ModuleList(_ConvDP(ch, 2 * kps, False) for _ in out)

    def forward(self, x):
        feats = []
        for i, block in enumerate([self.model0, *self.blocks]):
            x = block(x)
            if i in self.out:
                feats.append(x)
            if i in self.downsample:
                x = F.max_pool2d(x, 2)
        for i in range(len(feats) - 1, 0, -1):  # TFPN top-down
            feats[i] = self.lateral[i](feats[i])
            feats[i - 1] = feats[i - 1] + F.interpolate(feats[i], scale_factor=2.0)
        feats[0] = self.lateral[0](feats[0])
        outs = []
        for i, f in enumerate(feats):
            f = self.share[i](f)
            outs += [self.cls[i](f).sigmoid(), self.obj[i](f).sigmoid(), self.bbox[i](f),
                     self.kps[i](f)]
        return outs


# ============================================================================ YOLOX
# YOLOX's BaseConv (conv without bias + BN + SiLU) is the detectors' cbs
class _YBottleneck(nn.Module):
    def __init__(self, cin, cout, shortcut=True):
        super().__init__()
        self.conv1, self.conv2 = cbs(cin, cout, 1), cbs(cout, cout, 3)
        self.add = shortcut and cin == cout

    def forward(self, x):
        y = self.conv2(self.conv1(x))
        return x + y if self.add else y


class _CSP(nn.Module):
    """YOLOX CSPLayer (C3): two 1x1 branches, n bottlenecks on one, concat, 1x1."""

    def __init__(self, cin, cout, n, shortcut=True):
        super().__init__()
        h = cout // 2
        self.conv1, self.conv2 = cbs(cin, h, 1), cbs(cin, h, 1)
        self.conv3 = cbs(2 * h, cout, 1)
        self.m = nn.Sequential(*(_YBottleneck(h, h, shortcut) for _ in range(n)))

    def forward(self, x):
        return self.conv3(torch.cat([self.m(self.conv1(x)), self.conv2(x)], 1))


class _SPP(nn.Module):
    def __init__(self, cin, cout, ks=(5, 9, 13)):
        super().__init__()
        h = cin // 2
        self.conv1, self.conv2 = cbs(cin, h, 1), cbs(h * (len(ks) + 1), cout, 1)
        self.pools = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in ks)

    def forward(self, x):
        x = self.conv1(x)
        return self.conv2(torch.cat([x] + [p(x) for p in self.pools], 1))


class YOLOX(nn.Module):
    """YOLOX (Megvii-BaseDetection/YOLOX: CSPDarknet, YOLOPAFPN, decoupled YOLOXHead)."""

    def __init__(self, depth=0.33, width=0.50, num_classes=80):
        super().__init__()
        c, d = int(64 * width), max(round(depth * 3), 1)
        self.stem = cbs(12, c, 3)  # Focus: space-to-depth, then a 3x3 conv
        self.dark2 = nn.Sequential(cbs(c, 2 * c, 3, 2), _CSP(2 * c, 2 * c, d))
        self.dark3 = nn.Sequential(cbs(2 * c, 4 * c, 3, 2), _CSP(4 * c, 4 * c, 3 * d))
        self.dark4 = nn.Sequential(cbs(4 * c, 8 * c, 3, 2), _CSP(8 * c, 8 * c, 3 * d))
        self.dark5 = nn.Sequential(cbs(8 * c, 16 * c, 3, 2), _SPP(16 * c, 16 * c),
                                   _CSP(16 * c, 16 * c, d, shortcut=False))
        c3, c4, c5 = 4 * c, 8 * c, 16 * c
        self.lateral_conv0 = cbs(c5, c4, 1)
        self.C3_p4 = _CSP(2 * c4, c4, d, False)
        self.reduce_conv1 = cbs(c4, c3, 1)
        self.C3_p3 = _CSP(2 * c3, c3, d, False)
        self.bu_conv2 = cbs(c3, c3, 3, 2)
        self.C3_n3 = _CSP(2 * c3, c4, d, False)
        self.bu_conv1 = cbs(c4, c4, 3, 2)
        self.C3_n4 = _CSP(2 * c4, c5, d, False)
        hid = int(256 * width)
        self.stems = nn.ModuleList(cbs(ci, hid, 1) for ci in (c3, c4, c5))
        self.cls_convs = nn.ModuleList(nn.Sequential(cbs(hid, hid, 3), cbs(hid, hid, 3))
                                       for _ in range(3))
        self.reg_convs = nn.ModuleList(nn.Sequential(cbs(hid, hid, 3), cbs(hid, hid, 3))
                                       for _ in range(3))
        self.cls_preds = nn.ModuleList(nn.Conv2d(hid, num_classes, 1) for _ in range(3))
        self.reg_preds = nn.ModuleList(nn.Conv2d(hid, 4, 1) for _ in range(3))
        self.obj_preds = nn.ModuleList(nn.Conv2d(hid, 1, 1) for _ in range(3))

    def forward(self, x):
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                       x[..., 1::2, 1::2]], 1)
        x3 = self.dark3(self.dark2(self.stem(x)))
        x4 = self.dark4(x3)
        x5 = self.dark5(x4)
        fpn0 = self.lateral_conv0(x5)
        f = self.C3_p4(torch.cat([F.interpolate(fpn0, scale_factor=2.0), x4], 1))
        fpn1 = self.reduce_conv1(f)
        p3 = self.C3_p3(torch.cat([F.interpolate(fpn1, scale_factor=2.0), x3], 1))
        p4 = self.C3_n3(torch.cat([self.bu_conv2(p3), fpn1], 1))
        p5 = self.C3_n4(torch.cat([self.bu_conv1(p4), fpn0], 1))
        outs = []
        for i, feat in enumerate((p3, p4, p5)):
            feat = self.stems[i](feat)
            cls, reg = self.cls_convs[i](feat), self.reg_convs[i](feat)
            out = torch.cat([self.reg_preds[i](reg), self.obj_preds[i](reg).sigmoid(),
                             self.cls_preds[i](cls).sigmoid()], 1)
            outs.append(out.flatten(2))
        return torch.cat(outs, 2).permute(0, 2, 1)  # (1, anchors, 85), not decoded


# ========================================================================== NanoDet
class _Shuffle(nn.Module):
    """ShuffleNetV2 unit as in NanoDet's backbone (activation after the branch's last 1x1)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        b = cout // 2
        self.stride = stride
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                cba(cin, b, 1, act=leaky))
        self.branch2 = nn.Sequential(
            cba(cin if stride > 1 else b, b, 1, act=leaky),
            nn.Conv2d(b, b, 3, stride, 1, groups=b, bias=False), nn.BatchNorm2d(b),
            cba(b, b, 1, act=leaky))

    def forward(self, x):
        return shuffle_unit_forward(self, x)


def _dwmodule(cin, cout, k, s=1):
    """NanoDet DepthwiseConvModule: k x k depthwise + BN + act, 1x1 + BN + act."""
    return nn.Sequential(nn.Conv2d(cin, cin, k, s, k // 2, groups=cin, bias=False),
                         nn.BatchNorm2d(cin), leaky(), cba(cin, cout, 1, act=leaky))


class _GhostModule(nn.Module):
    def __init__(self, cin, cout, act=True):
        super().__init__()
        init = math.ceil(cout / 2)
        a = leaky if act else None
        self.primary = cba(cin, init, 1, act=a)
        self.cheap = cba(init, cout - init, 3, groups=init, act=a)

    def forward(self, x):
        x1 = self.primary(x)
        return torch.cat([x1, self.cheap(x1)], 1)


class _GhostBottleneck(nn.Module):
    """GhostPAN's block: GhostBottleneck(in, mid, out, dw 5x5 shortcut), stride 1, no SE."""

    def __init__(self, cin, mid, cout, k=5):
        super().__init__()
        self.ghost1, self.ghost2 = _GhostModule(cin, mid), _GhostModule(mid, cout, act=False)
        self.shortcut = None if cin == cout else nn.Sequential(
            nn.Conv2d(cin, cin, k, 1, k // 2, groups=cin, bias=False), nn.BatchNorm2d(cin),
            cba(cin, cout, 1, act=None))

    def forward(self, x):
        y = self.ghost2(self.ghost1(x))
        return y + (x if self.shortcut is None else self.shortcut(x))


class NanoDetPlus(nn.Module):
    """NanoDet-Plus-m (RangiLyu/nanodet config/nanodet-plus-m_416.yml): ShuffleNetV2 1.0x,
    GhostPAN (96 channels, 5x5, one extra level), NanoDetPlusHead; the training-time
    auxiliary head (AGM) is not part of the deployed model."""

    def __init__(self, stage_out=(116, 232, 464), ch=96, num_classes=80, reg_max=7):
        super().__init__()
        self.conv1 = cba(3, 24, 3, 2, act=leaky)
        stages, cin = [], 24
        for reps, cout in zip((4, 8, 4), stage_out):
            stages.append(nn.Sequential(_Shuffle(cin, cout, 2),
                                        *(_Shuffle(cout, cout, 1) for _ in range(reps - 1))))
            cin = cout
        self.stages = nn.ModuleList(stages)
        self.reduce = nn.ModuleList(cba(c, ch, 1, act=leaky) for c in stage_out)
        self.top_down = nn.ModuleList(_GhostBottleneck(2 * ch, ch, ch) for _ in range(2))
        self.downsamples = nn.ModuleList(_dwmodule(ch, ch, 5, 2) for _ in range(2))
        self.bottom_up = nn.ModuleList(_GhostBottleneck(2 * ch, ch, ch) for _ in range(2))
        self.extra_in, self.extra_out = _dwmodule(ch, ch, 5, 2), _dwmodule(ch, ch, 5, 2)
        self.head_convs = nn.ModuleList(nn.Sequential(_dwmodule(ch, ch, 5), _dwmodule(ch, ch, 5))
                                        for _ in range(4))
        self.gfl_cls = nn.ModuleList(nn.Conv2d(ch, num_classes + 4 * (reg_max + 1), 1)
                                     for _ in range(4))

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 3, 2, 1)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        ins = [r(f) for r, f in zip(self.reduce, feats)]
        inner = [ins[2]]
        for k, idx in enumerate((2, 1)):  # top-down
            up = F.interpolate(inner[0], scale_factor=2.0, mode="bilinear")
            inner.insert(0, self.top_down[k](torch.cat([up, ins[idx - 1]], 1)))
        outs = [inner[0]]
        for k in range(2):  # bottom-up
            outs.append(self.bottom_up[k](torch.cat([self.downsamples[k](outs[-1]),
                                                     inner[k + 1]], 1)))
        outs.append(self.extra_in(ins[2]) + self.extra_out(outs[-1]))
        preds = [cls(convs(f)).flatten(2)
                 for f, convs, cls in zip(outs, self.head_convs, self.gfl_cls)]
        return torch.cat(preds, 2).permute(0, 2, 1)  # (1, points, 80 + 32), not decoded


# ====================================================================== PP-HumanSeg
class _HRBasic(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.conv2 = cba(c, c, 3), cba(c, c, 3, act=None)

    def forward(self, x):
        return F.relu(self.conv2(self.conv1(x)) + x)


class _HRBottleneck(nn.Module):
    def __init__(self, cin, width):
        super().__init__()
        self.body = nn.Sequential(cba(cin, width, 1), cba(width, width, 3),
                                  cba(width, 4 * width, 1, act=None))
        self.down = cba(cin, 4 * width, 1, act=None)

    def forward(self, x):
        return F.relu(self.body(x) + self.down(x))


class _HRModule(nn.Module):
    """PaddleSeg HighResolutionModule: branches of basic blocks, then the fuse layers."""

    def __init__(self, chans, blocks):
        super().__init__()
        self.branches = nn.ModuleList(nn.Sequential(*(_HRBasic(c) for _ in range(n)))
                                      for c, n in zip(chans, blocks))
        self.fuse = nn.ModuleDict()
        for i, ci in enumerate(chans):
            for j, cj in enumerate(chans):
                if j > i:
                    self.fuse[f"{i}_{j}"] = cba(cj, ci, 1, act=None)
                elif j < i:
                    steps, pre = [], cj
                    for k in range(i - j):
                        last = k == i - j - 1
                        steps.append(cba(pre, ci if last else cj, 3, 2,
                                          act=None if last else nn.ReLU))
                        pre = ci if last else cj
                    self.fuse[f"{i}_{j}"] = nn.Sequential(*steps)

    def forward(self, xs):
        xs = [b(x) for b, x in zip(self.branches, xs)]
        outs = []
        for i, xi in enumerate(xs):
            y = xi
            for j, xj in enumerate(xs):
                if j > i:
                    y = y + F.interpolate(self.fuse[f"{i}_{j}"](xj), size=xi.shape[-2:],
                                          mode="bilinear")
                elif j < i:
                    y = y + self.fuse[f"{i}_{j}"](xj)
            outs.append(F.relu(y))
        return outs


class HRNetFCN(nn.Module):
    """PaddleSeg FCN on HRNet_W18_Small_V1 (PP-HumanSeg-Mobile, fcn_hrnetw18_small_v1_humanseg)."""

    def __init__(self, num_classes=2, stages=((16, 32), (16, 32, 64), (16, 32, 64, 128))):
        super().__init__()
        self.stem = nn.Sequential(cba(3, 64, 3, 2), cba(64, 64, 3, 2))
        self.layer1 = _HRBottleneck(64, 32)
        trans, mods, prev = [], [], [128]
        for chans in stages:
            t = nn.ModuleList()
            for i, c in enumerate(chans):
                if i < len(prev):
                    t.append(nn.Identity() if prev[i] == c else cba(prev[i], c, 3))
                else:
                    t.append(cba(prev[-1], c, 3, 2))
            trans.append(t)
            mods.append(_HRModule(chans, (2,) * len(chans)))
            prev = list(chans)
        self.trans, self.mods = nn.ModuleList(trans), nn.ModuleList(mods)
        c = sum(prev)
        self.head = nn.Sequential(cba(c, c, 1, bias=True), nn.Conv2d(c, num_classes, 1))

    def forward(self, inp):
        xs = [self.layer1(self.stem(inp))]
        for t, m in zip(self.trans, self.mods):
            xs = m([layer(xs[min(i, len(xs) - 1)]) for i, layer in enumerate(t)])
        size = xs[0].shape[-2:]
        x = torch.cat([xs[0]] + [F.interpolate(y, size=size, mode="bilinear") for y in xs[1:]], 1)
        return F.interpolate(self.head(x), size=inp.shape[-2:], mode="bilinear")


# ==================================================================== MobileFaceNet
def _cbp(cin, cout, k, s=1, groups=1, act=True):  # conv + BN (+ PReLU)
    layers = [nn.Conv2d(cin, cout, k, s, (k - 1) // 2 if k < 7 else 0, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.PReLU(cout))
    return nn.Sequential(*layers)


class _MFBlock(nn.Module):
    def __init__(self, cin, cout, stride, t):
        super().__init__()
        mid = cin * t
        self.body = nn.Sequential(_cbp(cin, mid, 1), _cbp(mid, mid, 3, stride, groups=mid),
                                  _cbp(mid, cout, 1, act=False))
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.res else self.body(x)


class MobileFaceNet(nn.Module):
    """MobileFaceNet (Chen et al. 2018, Table 1) with a linear classifier."""

    SETTING = ((2, 64, 5, 2), (4, 128, 1, 2), (2, 128, 6, 1), (4, 128, 1, 2), (2, 128, 2, 1))

    def __init__(self, embedding=128, num_classes=7):
        super().__init__()
        layers, c = [_cbp(3, 64, 3, 2), _cbp(64, 64, 3, groups=64)], 64
        for t, cout, n, s in self.SETTING:
            for i in range(n):
                layers.append(_MFBlock(c, cout, s if i == 0 else 1, t))
                c = cout
        layers += [_cbp(c, 512, 1), _cbp(512, 512, 7, groups=512, act=False),  # linear GDConv
                   _cbp(512, embedding, 1, act=False)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(embedding, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


# ======================================================================== MediaPipe
#: MediaPipe hand_landmark_full (224 x 224): per block (in, expand, depthwise kernel, stride,
#: out, residual, project); the last block has no projection and feeds a global pool
_HAND_FULL = (
    (24, 24, 3, 1, 16, False, True), (16, 64, 3, 2, 24, False, True),
    (24, 144, 3, 1, 24, True, True), (24, 144, 5, 2, 40, False, True),
    (40, 240, 5, 1, 40, True, True), (40, 240, 3, 2, 80, False, True),
    (80, 480, 3, 1, 80, True, True), (80, 480, 3, 1, 80, True, True),
    (80, 480, 5, 1, 112, False, True), (112, 672, 5, 1, 112, True, True),
    (112, 672, 5, 1, 112, True, True), (112, 672, 5, 2, 192, False, True),
    (192, 1152, 5, 1, 192, True, True), (192, 1152, 5, 1, 192, True, True),
    (192, 1152, 5, 1, 192, True, True), (192, 1152, 3, 1, 1152, False, False))


def _w8(v: float) -> int:
    return max(8, int(round(v / 8)) * 8)


class _MBConv(nn.Module):
    def __init__(self, cin, expand, k, stride, cout, residual, project):
        super().__init__()
        layers = [] if expand == cin else [cba(cin, expand, 1, act=nn.ReLU6)]
        layers.append(cba(expand, expand, k, stride, groups=expand, act=nn.ReLU6))
        if project:
            layers.append(cba(expand, cout, 1, act=None))
        self.body, self.residual = nn.Sequential(*layers), residual

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MPHandLandmark(nn.Module):
    """MediaPipe hand landmark network: 3x3 stem, 16 MBConv blocks (ReLU6, no SE), global
    average pool, four linear heads (21 x 3 landmarks, hand flag, handedness, 21 x 3 world
    landmarks). ``width`` scales every channel count (rounded to multiples of 8)."""

    def __init__(self, width=1.0):
        super().__init__()
        s = (lambda v: v) if width == 1.0 else (lambda v: _w8(v * width))
        spec = [(s(i), s(e), k, st, s(o), r, p) for i, e, k, st, o, r, p in _HAND_FULL]
        self.features = nn.Sequential(cba(3, s(24), 3, 2, act=nn.ReLU6),
                                      *(_MBConv(*b) for b in spec))
        c = spec[-1][4]
        self.heads = nn.ModuleList(nn.Linear(c, n) for n in (63, 1, 1, 63))

    def forward(self, x):
        x = self.features(x).mean((2, 3))
        return [h(x) for h in self.heads]


class _Blaze(nn.Module):
    """BlazeBlock (MediaPipe detectors): 5x5 depthwise + 1x1 (both with bias, BN folded), a
    max-pooled / zero-padded shortcut, PReLU."""

    def __init__(self, cin, cout, stride=1, k=5):
        super().__init__()
        self.stride, self.pad = stride, cout - cin
        self.dw = nn.Conv2d(cin, cin, k, stride, k // 2, groups=cin)
        self.pw = nn.Conv2d(cin, cout, 1)
        self.act = nn.PReLU(cout)

    def forward(self, x):
        h = self.pw(self.dw(x))
        if self.stride == 2:
            x = F.max_pool2d(x, 2)
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, 0, self.pad))
        return self.act(h + x)


class MPPersonDetector(nn.Module):
    """BlazePose-style person detector at 224 x 224: a 5x5 stride-2 stem, five levels of four
    BlazeBlocks (112 .. 7 pixels, the last block of a level striding into the next), a
    two-step upsampling path (1x1 projection + PReLU, add, two BlazeBlocks) from /32 to /8,
    and 1x1 SSD heads at /8, /16 (2 anchors) and /32 (6 anchors), 12 box coordinates each
    (box + 4 keypoints): 2254 anchors, as in the zoo's ONNX graph."""

    def __init__(self, widths=(56, 112, 216, 432, 432), blocks=4,
                 anchors=(2, 2, 6), coords=12):
        super().__init__()
        w = widths
        self.stem = nn.Sequential(nn.Conv2d(3, w[0], 5, 2, 2), nn.PReLU(w[0]))
        levels = []
        for i, c in enumerate(w):
            layers = [_Blaze(c, c) for _ in range(blocks)]
            if i + 1 < len(w):
                layers.append(_Blaze(c, w[i + 1], 2))
            levels.append(nn.Sequential(*layers))
        self.levels = nn.ModuleList(levels)
        self.proj16 = nn.Sequential(nn.Conv2d(w[4], w[3], 1), nn.PReLU(w[3]))
        self.fpn16 = nn.Sequential(_Blaze(w[3], w[3]), _Blaze(w[3], w[3]))
        self.proj8 = nn.Sequential(nn.Conv2d(w[3], w[2], 1), nn.PReLU(w[2]))
        self.fpn8 = nn.Sequential(_Blaze(w[2], w[2]), _Blaze(w[2], w[2]))
        chans = (w[2], w[3], w[4])
        self.cls = nn.ModuleList(nn.Conv2d(c, a, 1) for c, a in zip(chans, anchors))
        self.reg = nn.ModuleList(nn.Conv2d(c, a * coords, 1) for c, a in zip(chans, anchors))

    def forward(self, x):
        x, feats = self.stem(x), []
        for level in self.levels:
            for block in level:
                if block.stride == 2:
                    feats.append(x)  # the level's output before it strides on
                x = block(x)
        p32 = x
        p16 = self.fpn16(self.proj16(F.interpolate(p32, scale_factor=2.0, mode="bilinear"))
                         + feats[3])
        p8 = self.fpn8(self.proj8(F.interpolate(p16, scale_factor=2.0, mode="bilinear"))
                       + feats[2])
        maps = (p8, p16, p32)
        return ([c(m) for c, m in zip(self.cls, maps)], [r(m) for r, m in zip(self.reg, maps)])


# ================================================================== EfficientFormer
class _EFAttention(nn.Module):
    def __init__(self, dim, key_dim=32, heads=8, ratio=4, res=7):
        super().__init__()
        self.heads, self.key_dim, self.d = heads, key_dim, ratio * key_dim
        self.scale = key_dim ** -0.5
        self.qkv = nn.Linear(dim, heads * (2 * key_dim + self.d))
        self.proj = nn.Linear(heads * self.d, dim)
        points = list(itertools.product(range(res), range(res)))
        offsets, idxs = {}, []
        for p1 in points:
            for p2 in points:
                off = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                idxs.append(offsets.setdefault(off, len(offsets)))
        self.attention_biases = nn.Parameter(torch.zeros(heads, len(offsets)))
        self.register_buffer("bias_idxs", torch.tensor(idxs).view(len(points), len(points)))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, self.heads, -1).split(
            [self.key_dim, self.key_dim, self.d], dim=3)
        q, k, v = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        attn = (q @ k.transpose(-2, -1)) * self.scale + self.attention_biases[:, self.bias_idxs]
        x = (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1)
        return self.proj(x)


class _Meta4D(nn.Module):
    def __init__(self, dim, ratio=4):
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.mlp = nn.Sequential(nn.Conv2d(dim, dim * ratio, 1), nn.BatchNorm2d(dim * ratio),
                                 nn.GELU(), nn.Conv2d(dim * ratio, dim, 1), nn.BatchNorm2d(dim))
        self.ls1 = nn.Parameter(1e-5 * torch.ones(dim, 1, 1))
        self.ls2 = nn.Parameter(1e-5 * torch.ones(dim, 1, 1))

    def forward(self, x):
        x = x + self.ls1 * (self.pool(x) - x)
        return x + self.ls2 * self.mlp(x)


class _Meta3D(nn.Module):
    def __init__(self, dim, ratio=4):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = _EFAttention(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * ratio), nn.GELU(),
                                 nn.Linear(dim * ratio, dim))
        self.ls1 = nn.Parameter(1e-5 * torch.ones(dim))
        self.ls2 = nn.Parameter(1e-5 * torch.ones(dim))

    def forward(self, x):
        x = x + self.ls1 * self.attn(self.norm1(x))
        return x + self.ls2 * self.mlp(self.norm2(x))


class _Flat(nn.Module):
    def forward(self, x):
        return x.flatten(2).transpose(1, 2)


class EfficientFormer(nn.Module):
    """EfficientFormer (snap-research/EfficientFormer models/efficientformer.py)."""

    def __init__(self, layers=(4, 4, 12, 6), dims=(64, 128, 320, 512), vit_num=4,
                 num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(cba(3, dims[0] // 2, 3, 2, bias=True),
                                  cba(dims[0] // 2, dims[0], 3, 2, bias=True))
        net = []
        for i, (n, d) in enumerate(zip(layers, dims)):
            for b in range(n):
                if i == 3 and n - b <= vit_num:
                    if n - b == vit_num:
                        net.append(_Flat())
                    net.append(_Meta3D(d))
                else:
                    net.append(_Meta4D(d))
            if i < 3:
                net.append(nn.Sequential(nn.Conv2d(d, dims[i + 1], 3, 2, 1),
                                         nn.BatchNorm2d(dims[i + 1])))
        self.network = nn.Sequential(*net)
        self.norm = nn.LayerNorm(dims[-1])
        self.head = nn.Linear(dims[-1], num_classes)
        self.dist_head = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        x = self.norm(self.network(self.stem(x))).mean(-2)
        return (self.head(x) + self.dist_head(x)) / 2


# =========================================================== torchvision (deeper nets)
class VGG13(VGG16):
    CFG = (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


# ============================================================ MobileNet-YOLOv3-Lite
def _cr(cin, cout, k=1, s=1, groups=1):  # Caffe conv with bias (BN merged) + ReLU
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups), nn.ReLU())


def _dwsep(cin, cout, s=1):
    return nn.Sequential(_cr(cin, cin, 3, s, cin), _cr(cin, cout))


class MobileNetYOLOv3Lite(nn.Module):
    """eric612/MobileNet-YOLO benchmark/mobilenet_yolov3_lite_deploy.prototxt (VOC, 20 classes)."""

    def __init__(self, num_classes=20, anchors=3):
        super().__init__()
        layers, c = [_cr(3, 32, 3, 2)], 32
        for cout, s in MobileNetV1.BLOCKS:
            layers.append(_dwsep(c, cout, s))
            c = cout
        self.to16 = nn.Sequential(*layers[:12])  # conv0 .. conv11: 512 x /16
        self.to32 = nn.Sequential(*layers[12:], _dwsep(1024, 1024))  # conv12, conv13, conv15
        # Caffe "upsample": constant 1x1 deconvolution (stride 2, 512 groups), then a 2x2 max pool
        self.up = nn.ConvTranspose2d(1024, 512, 1, 2, groups=512, bias=False)
        self.up_pool = nn.MaxPool2d(2, 1, 1)
        self.conv17 = _dwsep(512, 512)
        self.conv18 = _dwsep(512, 1024)
        out = anchors * (5 + num_classes)
        self.conv19, self.conv20 = nn.Conv2d(1024, out, 1), nn.Conv2d(1024, out, 1)

    def forward(self, x):
        c11 = self.to16(x)
        c15 = self.to32(c11)
        p16 = self.conv18(self.up_pool(self.up(c15)) + self.conv17(c11))
        return self.conv19(c15), self.conv20(p16)


# =========================================================================== factories
#: net -> (published MACs, published parameters) at the factory's input size; None where no
#: figure is published. Parameters marked "file" are the zoo's fp32 ONNX size / 4 bytes, an
#: upper bound (the graph itself takes a few kB).
PUBLISHED = {
    "yunet": (None, 75_856),  # libfacedetection.train README (YuNet_n); MFlops: PUBLISHED_FLOPS
    "yolox_s": (26.8e9 / 2, 9.0e6),  # YOLOX README: 26.8 GFLOPs (2 x MACs), 9.0 M
    "nanodet_plus_m": (1.52e9 / 2, 1.17e6),  # nanodet README: 1.52 GFLOPS (2 x MACs), 1.17 M
    "mp_handpose": (None, 4_099_621 / 4),  # file: handpose_estimation_mediapipe_2023feb.onnx
    "mp_persondet": (None, 11_990_159 / 4),  # file: person_detection_mediapipe_2023mar.onnx
    "pphumanseg": (None, 1.54e6),  # PaddleSeg contrib/HumanSeg README; FLOPs: PUBLISHED_FLOPS
    "mobilefacenet_fer": (221e6, 4_791_892 / 4),  # MobileFaceNet paper (MAdds); file (params)
    "efficientformer_l3": (3.9e9, 31.3e6),  # snap-research/EfficientFormer README
    "resnet101": (7.80e9, 44_549_160),  # torchvision model table
    "resnet152": (11.51e9, 60_192_808),
    "densenet161": (7.73e9, 28_681_000),
    "vgg13": (11.31e9, 133_047_848),
    "mobilenet_yolov3_lite": (None, 20.3e6 / 4),  # MobileNet-YOLO README: 20.3 mb weights
}

#: published compute figures that are not plain MACs: net -> (count, (height, width) it was
#: quoted at, counter). "mmcv": mmcv's get_flops (MACs, plus one per element of every conv
#: bias, ReLU output, max-pool input and upsampled output, two per batch-norm element);
#: "paddle": paddle.flops (MACs, plus one per conv-bias element, two per batch-norm element)
PUBLISHED_FLOPS = {
    "yunet": (149e6, (320, 320), "mmcv"),  # libfacedetection.train README: 149 MFlops
    "pphumanseg": (584e6, (192, 192), "paddle"),  # PaddleSeg HumanSeg README: 584M FLOPS
}


def yunet(width=160, height=120):
    """YuNet at the benchmark's 160 x 120, padded (as FaceDetectorYN does) to 160 x 128."""
    pad = lambda v: (v - 1) // 32 * 32 + 32  # noqa: E731
    return factory(YuNet, inputs=img(pad(height), pad(width)))()


yolox_s = factory(YOLOX, 0.33, 0.50, inputs=img(640))
nanodet_plus_m = factory(NanoDetPlus, inputs=img(416))
mp_handpose = factory(MPHandLandmark, 0.6, inputs=img(224))
mp_persondet = factory(MPPersonDetector, inputs=img(224))
pphumanseg = factory(HRNetFCN, inputs=img(192))
mobilefacenet_fer = factory(MobileFaceNet, 512, 7, inputs=img(112))
efficientformer_l3 = factory(EfficientFormer, inputs=img(224))
resnet101 = factory(ResNet, "bottleneck", (3, 4, 23, 3), inputs=img(224))
resnet152 = factory(ResNet, "bottleneck", (3, 8, 36, 3), inputs=img(224))
densenet161 = factory(DenseNet121, growth=48, blocks=(6, 12, 36, 24), init=96, inputs=img(224))
vgg13 = factory(VGG13, inputs=img(224))


def mobilenet_yolov3_lite(size=320):
    return factory(MobileNetYOLOv3Lite, inputs=img(size))()


#: the factories, by builtin name
NAMES = tuple(PUBLISHED)

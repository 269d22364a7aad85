"""The networks of ncnn's ``benchmark/benchncnn.cpp`` (Tencent/ncnn) that the rest of the zoo
lacks, each at the input size benchncnn feeds it, so that published benchncnn tables
(Raspberry Pi 4/5, Jetson Nano, ...) can be rebuilt and fitted. Random weights: only the
structure matters for counting and timing.

Source of every architecture: the ``.param`` file benchncnn loads (``benchmark/*.param`` and
``benchmark/models/*.param`` in Tencent/ncnn), layer by layer -- the kernel, stride, group,
output width and weight size of every convolution, where the shortcuts, splits and upsamplings
are. Where a ``.param`` departs from the paper's network, the ``.param`` wins (it is what
benchncnn times); the departures are listed below. Batch norms that the converters folded into
the convolutions are written back (conv without bias, then ``BatchNorm2d``) wherever the source
framework had them, as in the rest of the zoo; ncnn runs them folded.

Input sizes (benchncnn.cpp's ``ncnn::Mat(w, h, 3)``): 224 x 224 for the classifiers, 227 for
``squeezenet_ncnn`` and ``alexnet_ncnn``, 128 for ``blazeface``, 300 for both SSDs, 416 for
``mobilenet_yolo``, 352 for ``mobilenetv2_yolov3``, ``yolo_fastestv2`` and ``fastestdet``,
320 for ``nanodet_m`` and ``yolo_fastest_1_1``, 384 for ``vision_transformer``.

What each one is, and where it departs from its paper:

* ``mnasnet`` -- MnasNet-B1 1.0 (no squeeze-excite), as torchvision's ``mnasnet1_0``.
* ``googlenet`` -- BVLC GoogLeNet (Inception v1, Caffe): 5x5 branches, LRN, ceil-mode pooling,
  no auxiliary classifiers.
* ``regnety_400m`` -- RegNetY-400MF (pycls/torchvision): widths 48/104/208/440, depths
  1/3/6/6, group width 8, squeeze-excite at 1/4 of the block's input width.
* ``efficientnet_b0`` -- EfficientNet-B0. ``efficientnetv2_b0`` -- EfficientNetV2-B0: fused
  (3x3 conv + 1x1) blocks in its first three stages, squeeze-excite MBConvs after.
* ``mobilenet_v3`` -- ncnn's ``mobilenet_v3.param``: MobileNetV3-Large from a third-party port,
  which differs from the paper in three places: squeeze-excite widths are exactly 1/4 (18, 30,
  120, 168, 240; the reference code rounds to multiples of 8), the squeeze-excite sits between the
  depthwise batch norm and its activation, and the first 160-channel block keeps stride 1 while
  the second (expansion 672, not 960) takes the stride -- so one 672-wide 5x5 block runs at
  14 x 14. Its head: 1x1 conv to 960, pool, h-swish, FC 1280, h-swish, FC 1000.
* ``shufflenet_v1`` -- ncnn's ``shufflenet.param``: ShuffleNet 1x, groups = 3 (240/480/960),
  the first unit's 1x1 ungrouped and unshuffled (bottleneck 54), 3x3/2 average-pool shortcuts.
* ``proxylessnas`` -- ncnn's ``proxylessnasnet.param``: ProxylessNAS-Mobile, except that its
  first separable block keeps 32 channels (the paper's has 16), so the next block expands
  32 -> 48.
* ``blazeface`` -- ncnn's ``blazeface.param`` is MediaPipe's front-camera BlazeFace *backbone*
  only (the two BlazeBlock stacks to 96 x 8 x 8, as in hollance/BlazeFace-PyTorch); the
  classifier/regressor heads are not in it and are not here.
* ``mobilenet_ssd`` -- chuanqi305's Caffe MobileNet-SSD (VOC, 21 classes): MobileNetV1 (ReLU),
  extras conv14..conv17, 1x1 box/class predictors on conv11, conv13 and the extras
  (3, 6, 6, 6, 6, 6 anchors).
* ``squeezenet_ssd`` -- SqueezeNet-SSD (VOC): SqueezeNet 1.1 trunk extended with fire10 and
  fire11 (96/384/384), batch norms from fire9 on, extras conv12/conv13, 3x3 predictors on
  fire5 (behind a batch norm), fire9, fire10, fire11, conv12_2, conv13_2. (Its ``Input``
  line says 227; benchncnn feeds 300, and so does this.)
* ``mobilenet_yolo`` -- eric612's MobileNet-YOLO (YOLOv2 style, VOC, 5 anchors): MobileNetV1,
  a separable 1024 block, a grouped 4x4/2 transposed conv back to 26 x 26 added to conv11,
  a separable 1024 block, 1x1 predictors (125) at 13 and 26.
* ``mobilenetv2_yolov3`` -- eric612's MobileNetV2-YOLOv3-Lite (VOC, 3 anchors per scale):
  MobileNetV2 (ReLU), separable 576 heads at 11 and 22, the 22 x 22 one fed by the 576-wide
  expansion of block 14 and a depthwise 1x1/2 transposed conv + 2x2 max-pool upsampling.
* ``yolo_fastest_1_1`` -- dog-qiuqiu's Yolo-Fastest 1.1 (Darknet, COCO): inverted bottlenecks
  with leaky ReLU, an SPP (3/5/9 max-pools), two separable 5x5 heads (255 outputs) at 10 and 20.
* ``yolo_fastestv2`` -- Yolo-FastestV2: ShuffleNetV2 (24/48/96/192) and a light FPN with
  decoupled separable 5x5 heads; the 1x1 output convs are shared by both scales, as in the
  PyTorch model (ncnn's graph holds a copy per scale).
* ``nanodet_m`` -- NanoDet-m: ShuffleNetV2 1.0x without conv5 (leaky ReLU), PAN with bilinear
  up/down-sampling, GFL heads of two separable 3x3 convs and a 1x1 to 80 + 32 per level.
* ``fastestdet`` -- FastestDet: the same ShuffleNetV2 backbone as Yolo-FastestV2, a
  single-scale 22 x 22 neck (avg-pooled P1 + P2 + upsampled P3, a 5x5 depthwise "SPP") and
  an obj/reg/cls head (sigmoid and softmax kept: they are in the model's forward).
* ``vision_transformer`` -- ncnn's ``vision_transformer.param`` is mmpretrain's ViT-B/**32**
  at 384 x 384 (a 32 x 32 patch conv, 144 patches + class token, 12 layers, 768 wide, 12 heads,
  MLP 3072), not B/16.
* ``squeezenet_ncnn`` -- SqueezeNet 1.1 at benchncnn's 227 x 227, with the DeepScale
  prototxt's padded conv10 (1x1, pad 1: a 16 x 16 class map); the zoo's ``squeezenet1_1`` is
  torchvision's at 224.
* ``alexnet_ncnn`` -- BVLC AlexNet at 227 x 227 (96/256/384/384/256 with the two-group convs
  and LRN); the zoo's ``alexnet`` is torchvision's one-tower 64/192/384/256/256 at 224.

Post-processing (prior boxes, box decode, NMS, ``DetectionOutput``/``Yolo*DetectionOutput``,
the final softmax of the classifiers) is excluded, as in :mod:`edgeprof.zoo.detectors`. Not
here: ``squeezenet`` (see ``squeezenet_ncnn``), ``mobilenet``, ``mobilenet_v2``,
``shufflenet_v2``, ``resnet18``, ``resnet50``, ``vgg16`` and ``yolov4-tiny``, which
:mod:`edgeprof.zoo.reference` has at the same input sizes (their .param graphs were not
compared with it), and the ``*_int8`` rows, which are the same graphs quantized.

Counts: ``PARAM_DERIVED`` holds MACs and parameters worked out by hand from the transcribed
.param files, independently of the modules here (for every network but the five whose
published parameter counts the modules reproduce to the unit or to the source's last digit:
``mnasnet``, ``regnety_400m``, ``efficientnet_b0``, ``efficientnetv2_b0``,
``vision_transformer``); ``PUBLISHED`` the network's own published figures
(torchvision/mmpretrain/OpenVINO model cards, the authors' READMEs) where they describe the
benchmarked graph, else its ``PARAM_DERIVED`` figures -- the comments say which, and how each
source counts (``PARAM_CONVENTION``). MACs are multiply-accumulates of convolutions, matmuls
and attention, as ``edgeprof``'s graph walk counts them. ``tests/zoo/test_ncnn_bench.py``
holds every network to both (counting parameters as each convention does).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from edgeprof.zoo.cnns import (Fire, MobileNetV1, MobileNetV2, ShuffleBlock, SqueezeNet11, cba,
                               factory, img)
from edgeprof.zoo.detectors import leaky
from edgeprof.zoo.extras import ViT

#: net -> (MACs, parameters) derived from its ncnn .param by hand, independently of the
#: modules here: MACs = sum over Convolution/ConvolutionDepthWise/InnerProduct layers of the
#: weight size (``6=``/``2=``) x output positions (input positions for the transposed convs),
#: parameters = weights + one bias per output channel (stored or folded from a batch norm;
#: the ``"deploy"`` convention of tests/zoo/test_ncnn_bench.py). Spatial sizes from the
#: ``-23330`` shape hints where the file has them, else worked out from the strides.
PARAM_DERIVED = {
    "googlenet": (1_582_671_872, 6_998_552),
    "mobilenet_v3": (245_564_768, 5_133_694),
    "shufflenet_v1": (127_061_304, 1_802_866),
    "proxylessnas": (336_483_904, 4_064_560),
    "blazeface": (29_368_320, 88_470),
    "mobilenet_ssd": (1_148_479_168, 5_783_417),
    "squeezenet_ssd": (1_175_969_984, 5_525_600),
    "mobilenet_yolo": (2_605_271_552, 5_058_938),
    "mobilenetv2_yolov3": (1_182_555_264, 3_720_822),
    "yolo_fastest_1_1": (125_437_600, 326_166),
    "yolo_fastestv2": (106_382_232, 245_782),
    "nanodet_m": (342_223_200, 941_818),
    "fastestdet": (121_491_744, 240_301),
    "squeezenet_ncnn": (418_467_520, 1_235_496),
    "alexnet_ncnn": (724_406_816, 60_965_224),
}

#: parameters the module holds once and uses twice, which its .param stores twice:
#: Yolo-FastestV2's three 1x1 output convs, shared by both scales (95 x 72 weights + 95 biases)
SHARED_IN_MODULE = {"yolo_fastestv2": 6_935}

#: net -> (MACs, parameters) as published for the network, where a publication matches the
#: .param; otherwise its PARAM_DERIVED counts. The comment on each line names the source.
PUBLISHED = {
    # torchvision model cards (mnasnet1_0, regnet_y_400mf, efficientnet_b0): num_params and
    # "GFLOPS" (torchvision counts multiply-adds)
    "mnasnet": (0.31e9, 4_383_312),
    "regnety_400m": (0.40e9, 4_344_144),
    "efficientnet_b0": (0.39e9, 5_288_548),
    # OpenVINO OMZ efficientnet-v2-b0 card: 1.4641 GFLOPs (2 per multiply-add, plus the
    # element-wise work) and 7.1094 MParams (counted with the batch norms folded)
    "efficientnetv2_b0": (1.4641e9 / 2, 7.1094e6),
    # mmpretrain vision_transformer README, vit-base-p32_in21k-pre_3rdparty_in1k-384px:
    # 88.30 M params, 13.06 GFlops (fvcore: multiply-adds, and 5 per LayerNorm element)
    "vision_transformer": (13.06e9, 88.30e6),
    # Yolo-FastestV2 README table: FLOPs(G) 0.212 and 0.252 (2 per multiply-add), Params
    # 0.25M and 0.35M (Yolo-Fastest 1.1's counts the Darknet weight file: the batch norms'
    # running statistics too)
    "yolo_fastestv2": (0.212e9 / 2, 0.25e6),
    "yolo_fastest_1_1": (0.252e9 / 2, 0.35e6),
    # NanoDet README: NanoDet-m 320 has 0.95M params; its "0.72G FLOPS" is about twice the
    # multiply-adds of the .param (0.342 G), so the MACs here are PARAM_DERIVED's
    "nanodet_m": (342_223_200, 0.95e6),
    # BVLC GoogLeNet: the paper's Table 1 sums to about 1.5 G ops and 6.8 M params;
    # PARAM_DERIVED (1.58 G, 7.00 M) is the benchmarked graph
    "googlenet": PARAM_DERIVED["googlenet"],
    # the paper's MobileNetV3-Large is 219 M MACs / 5.4 M params; this port runs one 672-wide
    # 5x5 block at 14 x 14 (246 M): PARAM_DERIVED
    "mobilenet_v3": PARAM_DERIVED["mobilenet_v3"],
    # the paper's 137 MFLOPs (g = 3) sizes every bottleneck at 1/4 of the unit's output; the
    # Caffe model ncnn converted uses 1/4 of the branch (54/60/120 in the stride-2 units)
    "shufflenet_v1": PARAM_DERIVED["shufflenet_v1"],
    # the paper's ProxylessNAS-Mobile is 320 M / 4.1 M; the .param's 32-wide first block adds
    # 16 M MACs: PARAM_DERIVED
    "proxylessnas": PARAM_DERIVED["proxylessnas"],
    # no publication gives counts for these graphs: PARAM_DERIVED
    "blazeface": PARAM_DERIVED["blazeface"],
    "mobilenet_ssd": PARAM_DERIVED["mobilenet_ssd"],
    "squeezenet_ssd": PARAM_DERIVED["squeezenet_ssd"],
    "mobilenet_yolo": PARAM_DERIVED["mobilenet_yolo"],
    "mobilenetv2_yolov3": PARAM_DERIVED["mobilenetv2_yolov3"],
    "fastestdet": PARAM_DERIVED["fastestdet"],
    # the parameters are torchvision's squeezenet1_1 (1,235,496) and BVLC AlexNet's
    # (60,965,224) too; the MACs are for benchncnn's 227 x 227
    "squeezenet_ncnn": PARAM_DERIVED["squeezenet_ncnn"],
    "alexnet_ncnn": PARAM_DERIVED["alexnet_ncnn"],
}

#: how PUBLISHED counts a net's parameters ("torch" if not here; the conventions are
#: tests/zoo/test_ncnn_bench.py's count_params)
PARAM_CONVENTION = {
    **{n: "deploy" for n, v in PUBLISHED.items() if v == PARAM_DERIVED.get(n)},
    "efficientnetv2_b0": "deploy",
    "yolo_fastest_1_1": "darknet",
}


# ------------------------------------------------------------------------------ helpers
def _swap(module: nn.Module, old: type, new) -> nn.Module:
    """Replace every ``old`` activation inside ``module`` with ``new()``, in place."""
    for name, child in module.named_children():
        if isinstance(child, old):
            setattr(module, name, new())
        else:
            _swap(child, old, new)
    return module


def _dw(c, k=3, stride=1, act=nn.ReLU):
    return cba(c, c, k, stride, groups=c, act=act)


class SE(nn.Module):
    """Squeeze-and-excitation: global average pool, 1x1 reduce + act, 1x1 expand + gate."""

    def __init__(self, c, mid, act=nn.ReLU, gate=nn.Sigmoid):
        super().__init__()
        self.fc1 = nn.Conv2d(c, mid, 1)
        self.act = act()
        self.fc2 = nn.Conv2d(mid, c, 1)
        self.gate = gate()

    def forward(self, x):
        return x * self.gate(self.fc2(self.act(self.fc1(F.adaptive_avg_pool2d(x, 1)))))


class MBConv(nn.Module):
    """Inverted bottleneck with explicit widths: a 1x1 expansion (unless ``mid == cin``), a
    k x k depthwise, an optional squeeze-excite of width ``se`` (after the depthwise
    activation, or between its batch norm and activation with ``se_before_act``), a linear
    1x1 projection, and an identity shortcut when the stride is 1 and the widths agree."""

    def __init__(self, cin, mid, cout, k, stride, act=nn.ReLU, se=0, se_act=nn.ReLU,
                 se_gate=nn.Sigmoid, se_before_act=False):
        super().__init__()
        layers = [] if mid == cin else [cba(cin, mid, 1, act=act)]
        layers += [nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False),
                   nn.BatchNorm2d(mid)]
        if se and se_before_act:
            layers += [SE(mid, se, se_act, se_gate), act()]
        elif se:
            layers += [act(), SE(mid, se, se_act, se_gate)]
        else:
            layers.append(act())
        layers.append(cba(mid, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.shortcut = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.shortcut else self.body(x)


class _Classifier(nn.Module):
    """features -> global average pool -> flatten -> classifier."""

    def __init__(self, features, classifier):
        super().__init__()
        self.features = features
        self.classifier = classifier

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def _mobile_classifier(first, blocks, act=nn.ReLU, last=1280, **block_kwargs):
    """3x3/2 conv to 32, a depthwise-separable block to ``first`` channels, then ``blocks``
    (rows ``(expansion width, kernel, out, stride)``), a 1x1 conv to ``last``, pool, FC."""
    layers = [cba(3, 32, 3, 2, act=act), _dw(32, act=act), cba(32, first, 1, act=None)]
    c = first
    for mid, k, cout, s in blocks:
        layers.append(MBConv(c, mid, cout, k, s, act=act, **block_kwargs))
        c = cout
    layers.append(cba(c, last, 1, act=act))
    return _Classifier(nn.Sequential(*layers), nn.Linear(last, 1000))


# ----------------------------------------------------------------------- classifiers
# MnasNet-B1 stages: (expansion, kernel, out, repeats, stride)
_MNASNET = ((3, 3, 24, 3, 2), (3, 5, 40, 3, 2), (6, 5, 80, 3, 2), (6, 3, 96, 2, 1),
            (6, 5, 192, 4, 2), (6, 3, 320, 1, 1))

# proxylessnasnet.param, blocks B0..G0: (expansion width, kernel, out, stride)
_PROXYLESS = (
    (48, 5, 32, 2), (96, 3, 32, 1),
    (96, 7, 40, 2), (120, 3, 40, 1), (120, 5, 40, 1), (120, 5, 40, 1),
    (240, 7, 80, 2), (240, 5, 80, 1), (240, 5, 80, 1), (240, 5, 80, 1),
    (480, 5, 96, 1), (288, 5, 96, 1), (288, 5, 96, 1), (288, 5, 96, 1),
    (576, 7, 192, 2), (1152, 7, 192, 1), (576, 7, 192, 1), (576, 7, 192, 1),
    (1152, 7, 320, 1))

# mobilenet_v3.param: (kernel, expansion width, out, SE width, h-swish, stride)
_MBV3_NCNN = (
    (3, 16, 16, 0, False, 1), (3, 64, 24, 0, False, 2), (3, 72, 24, 0, False, 1),
    (5, 72, 40, 18, False, 2), (5, 120, 40, 30, False, 1), (5, 120, 40, 30, False, 1),
    (3, 240, 80, 0, True, 2), (3, 200, 80, 0, True, 1), (3, 184, 80, 0, True, 1),
    (3, 184, 80, 0, True, 1), (3, 480, 112, 120, True, 1), (3, 672, 112, 168, True, 1),
    (5, 672, 160, 168, True, 1), (5, 672, 160, 168, True, 2), (5, 960, 160, 240, True, 1))

# EfficientNet-B0: (expansion, kernel, stride, out, repeats)
_EFFNET_B0 = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
              (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))

# EfficientNetV2-B0: (fused, expansion, stride, out, repeats); all 3x3, SE 1/4 on MBConv
_EFFNETV2_B0 = ((True, 1, 1, 16, 1), (True, 4, 2, 32, 2), (True, 4, 2, 48, 2),
                (False, 4, 2, 96, 3), (False, 6, 1, 112, 5), (False, 6, 2, 192, 8))


class FusedMBConv(nn.Module):
    """EfficientNetV2's fused block: a 3x3 conv to ``cin * expand`` (the whole block when the
    expansion is 1), then a linear 1x1 projection; identity shortcut at stride 1, equal widths."""

    def __init__(self, cin, cout, stride, expand, act=nn.SiLU):
        super().__init__()
        if expand == 1:
            self.body = cba(cin, cout, 3, stride, act=act)
        else:
            self.body = nn.Sequential(cba(cin, cin * expand, 3, stride, act=act),
                                      cba(cin * expand, cout, 1, act=None))
        self.shortcut = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.shortcut else self.body(x)


class RegNetYBlock(nn.Module):
    """RegNetY bottleneck (ratio 1): 1x1, 3x3 grouped (group width 8), SE, 1x1, shortcut."""

    def __init__(self, cin, w, stride, group_width=8, se_ratio=0.25):
        super().__init__()
        self.a = cba(cin, w, 1)
        self.b = cba(w, w, 3, stride, groups=w // group_width)
        self.se = SE(w, int(round(cin * se_ratio)))
        self.c = cba(w, w, 1, act=None)
        self.proj = None if cin == w and stride == 1 else cba(cin, w, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x):
        shortcut = x if self.proj is None else self.proj(x)
        return self.relu(shortcut + self.c(self.se(self.b(self.a(x)))))


class Inception(nn.Module):
    """GoogLeNet's inception module (Caffe): 1x1 | 1x1-3x3 | 1x1-5x5 | 3x3 max-pool-1x1."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, pool_proj):
        super().__init__()
        self.b1 = _conv_relu(cin, c1, 1)
        self.b2 = nn.Sequential(_conv_relu(cin, c3r, 1), _conv_relu(c3r, c3, 3))
        self.b3 = nn.Sequential(_conv_relu(cin, c5r, 1), _conv_relu(c5r, c5, 5))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), _conv_relu(cin, pool_proj, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


def _conv_relu(cin, cout, k, stride=1, groups=1, padding=None):
    pad = k // 2 if padding is None else padding
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, groups=groups), nn.ReLU())


def _caffe_maxpool():
    return nn.MaxPool2d(3, 2, ceil_mode=True)


def _lrn():
    return nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75)


class GoogLeNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(
            _conv_relu(3, 64, 7, 2), _caffe_maxpool(), _lrn(), _conv_relu(64, 64, 1),
            _conv_relu(64, 192, 3), _lrn(), _caffe_maxpool())
        self.blocks = nn.Sequential(
            Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64),
            _caffe_maxpool(),
            Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
            Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
            Inception(528, 256, 160, 320, 32, 128, 128), _caffe_maxpool(),
            Inception(832, 256, 160, 320, 32, 128, 128),
            Inception(832, 384, 192, 384, 48, 128, 128))
        self.dropout = nn.Dropout(0.4)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.fc(self.dropout(torch.flatten(x, 1)))


def _channel_shuffle(x, groups):
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleV1Unit(nn.Module):
    """ShuffleNet (v1) unit: grouped 1x1 + shuffle, 3x3 depthwise, grouped 1x1; a stride-2
    unit concatenates a 3x3/2 average-pooled shortcut, a stride-1 unit adds the input."""

    def __init__(self, cin, cout, stride, groups=3, group_first=True):
        super().__init__()
        branch = cout - cin if stride == 2 else cout
        mid = branch // 4
        self.groups = groups if group_first else 1
        self.conv1 = cba(cin, mid, 1, groups=self.groups)
        self.conv2 = _dw(mid, 3, stride, act=None)
        self.conv3 = cba(mid, branch, 1, groups=groups, act=None)
        self.pool = nn.AvgPool2d(3, 2, ceil_mode=True) if stride == 2 else None
        self.relu = nn.ReLU()

    def forward(self, x):
        y = self.conv1(x)
        if self.groups > 1:
            y = _channel_shuffle(y, self.groups)
        y = self.conv3(self.conv2(y))
        if self.pool is not None:
            return self.relu(torch.cat([self.pool(x), y], 1))
        return self.relu(x + y)


class ShuffleNetV1(nn.Module):
    def __init__(self, groups=3, widths=(240, 480, 960), repeats=(4, 8, 4), num_classes=1000):
        super().__init__()
        layers = [cba(3, 24, 3, 2), _caffe_maxpool()]
        c = 24
        for i, (w, n) in enumerate(zip(widths, repeats)):
            layers.append(ShuffleV1Unit(c, w, 2, groups, group_first=i > 0))
            layers += [ShuffleV1Unit(w, w, 1, groups) for _ in range(n - 1)]
            c = w
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class AlexNetBVLC(nn.Module):
    """BVLC AlexNet (Caffe): 96/256/384/384/256, two-group conv2/4/5, LRN, 227 x 227."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            _conv_relu(3, 96, 11, 4, padding=0), _lrn(), _caffe_maxpool(),
            _conv_relu(96, 256, 5, groups=2), _lrn(), _caffe_maxpool(),
            _conv_relu(256, 384, 3), _conv_relu(384, 384, 3, groups=2),
            _conv_relu(384, 256, 3, groups=2), _caffe_maxpool())
        self.classifier = nn.Sequential(
            nn.Linear(256 * 6 * 6, 4096), nn.ReLU(), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(), nn.Linear(4096, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


# --------------------------------------------------------------------------- BlazeFace
class BlazeBlock(nn.Module):
    """MediaPipe BlazeBlock: 3x3 depthwise + 1x1 (both biased), residual; at stride 2 the
    input is padded (0, 2, 0, 2) for the depthwise and max-pooled 2x2 for the shortcut, whose
    missing channels are zero-padded."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.stride, self.pad_c = stride, cout - cin
        self.dw = nn.Conv2d(cin, cin, 3, stride, 0 if stride == 2 else 1, groups=cin)
        self.pw = nn.Conv2d(cin, cout, 1)
        self.pool = nn.MaxPool2d(2, 2) if stride == 2 else None
        self.act = nn.ReLU()

    def forward(self, x):
        h = F.pad(x, (0, 2, 0, 2)) if self.stride == 2 else x
        if self.pool is not None:
            x = self.pool(x)
        if self.pad_c:
            x = F.pad(x, (0, 0, 0, 0, 0, self.pad_c))
        return self.act(self.pw(self.dw(h)) + x)


class BlazeFaceBackbone(nn.Module):
    BLOCKS = ((24, 24, 1), (24, 28, 1), (28, 32, 2), (32, 36, 1), (36, 42, 1), (42, 48, 2),
              (48, 56, 1), (56, 64, 1), (64, 72, 1), (72, 80, 1), (80, 88, 1), (88, 96, 2),
              (96, 96, 1), (96, 96, 1), (96, 96, 1), (96, 96, 1))

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 24, 5, 2)
        self.act = nn.ReLU()
        self.blocks = nn.Sequential(*[BlazeBlock(*b) for b in self.BLOCKS])

    def forward(self, x):
        return self.blocks(self.act(self.conv(F.pad(x, (1, 2, 1, 2)))))


# ------------------------------------------------------------------------------- SSDs
def _mobilenet_v1_trunk():
    """MobileNetV1 (ReLU) as a list of layers: stem, then a (depthwise, pointwise) pair per
    row of :attr:`MobileNetV1.BLOCKS`; conv11's output is after pair 11, conv13's after 13."""
    layers, c = [cba(3, 32, 3, 2)], 32
    for cout, s in MobileNetV1.BLOCKS:
        layers += [_dw(c, 3, s), cba(c, cout, 1)]
        c = cout
    return layers


def _ssd_heads(chans, anchors, num_classes, k):
    loc = nn.ModuleList(nn.Conv2d(c, a * 4, k, padding=k // 2) for c, a in zip(chans, anchors))
    conf = nn.ModuleList(nn.Conv2d(c, a * num_classes, k, padding=k // 2)
                         for c, a in zip(chans, anchors))
    return loc, conf


def _ssd_outputs(feats, loc, conf):
    """Permute + flatten + concat of every predictor, as the .param does (mbox_loc, mbox_conf)."""
    def flat(t):
        return t.permute(0, 2, 3, 1).flatten(1)
    return (torch.cat([flat(h(f)) for f, h in zip(feats, loc)], 1),
            torch.cat([flat(h(f)) for f, h in zip(feats, conf)], 1))


class MobileNetSSD(nn.Module):
    def __init__(self, num_classes=21):
        super().__init__()
        trunk = _mobilenet_v1_trunk()
        self.to_conv11 = nn.Sequential(*trunk[:23])   # stem + 11 pairs: 512 x 19 x 19
        self.to_conv13 = nn.Sequential(*trunk[23:])   # 1024 x 10 x 10
        extras, c = [], 1024
        for mid, out in ((256, 512), (128, 256), (128, 256), (64, 128)):
            extras.append(nn.Sequential(cba(c, mid, 1), cba(mid, out, 3, 2)))
            c = out
        self.extras = nn.ModuleList(extras)
        self.loc, self.conf = _ssd_heads((512, 1024, 512, 256, 256, 128), (3, 6, 6, 6, 6, 6),
                                         num_classes, 1)

    def forward(self, x):
        c11 = self.to_conv11(x)
        x = self.to_conv13(c11)
        feats = [c11, x]
        for e in self.extras:
            x = e(x)
            feats.append(x)
        return _ssd_outputs(feats, self.loc, self.conf)


class FireBN(Fire):
    """A fire module whose convs are followed by batch norms (squeeze too, with ``squeeze_bn``),
    as squeezenet_ssd's fire9 (expands only), fire10 and fire11."""

    def __init__(self, cin, squeeze, e1, e3, squeeze_bn=True):
        super().__init__(cin, squeeze, e1, e3)
        for seq, c in ((self.squeeze, squeeze), (self.e1, e1), (self.e3, e3)):
            if seq is not self.squeeze or squeeze_bn:
                seq.insert(1, nn.BatchNorm2d(c))


class SqueezeNetSSD(nn.Module):
    def __init__(self, num_classes=21):
        super().__init__()
        mp = _caffe_maxpool
        self.to_fire5 = nn.Sequential(
            _conv_relu(3, 64, 3, 2, padding=0), mp(), Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64), mp(), Fire(128, 32, 128, 128), Fire(256, 32, 128, 128))
        self.to_fire9 = nn.Sequential(
            mp(), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
            FireBN(512, 64, 256, 256, squeeze_bn=False))
        self.to_fire10 = nn.Sequential(mp(), FireBN(512, 96, 384, 384))
        self.to_fire11 = nn.Sequential(mp(), FireBN(768, 96, 384, 384))
        self.conv12 = nn.Sequential(cba(768, 128, 1), cba(128, 256, 3, 2))
        self.conv13 = nn.Sequential(cba(256, 64, 1), cba(64, 128, 3, 2))
        self.norm5 = nn.BatchNorm2d(256)  # fire5/bn + fire5/scale, before its predictors
        self.loc, self.conf = _ssd_heads((256, 512, 768, 768, 256, 128), (4, 6, 6, 6, 6, 4),
                                         num_classes, 3)

    def forward(self, x):
        f5 = self.to_fire5(x)
        f9 = self.to_fire9(f5)
        f10 = self.to_fire10(f9)
        f11 = self.to_fire11(f10)
        c12 = self.conv12(f11)
        c13 = self.conv13(c12)
        return _ssd_outputs([self.norm5(f5), f9, f10, f11, c12, c13], self.loc, self.conf)


# ------------------------------------------------------------------------------ YOLOs
class MobileNetYOLO(nn.Module):
    def __init__(self, num_outputs=125):
        super().__init__()
        trunk = _mobilenet_v1_trunk()
        self.to_conv11 = nn.Sequential(*trunk[:23])   # 512 x 26 x 26
        self.to_conv13 = nn.Sequential(*trunk[23:])   # 1024 x 13 x 13
        self.conv17 = nn.Sequential(_dw(1024), cba(1024, 1024, 1))
        self.up = nn.ConvTranspose2d(1024, 512, 4, 2, 1, groups=512, bias=False)
        self.conv20 = nn.Sequential(_dw(512), cba(512, 1024, 1))
        self.out13 = nn.Conv2d(1024, num_outputs, 1)
        self.out26 = nn.Conv2d(1024, num_outputs, 1)

    def forward(self, x):
        c11 = self.to_conv11(x)
        c17 = self.conv17(self.to_conv13(c11))
        c20 = self.conv20(c11 + self.up(c17))
        return self.out13(c17), self.out26(c20)


class MobileNetV2YOLOv3(nn.Module):
    def __init__(self, num_outputs=75):
        super().__init__()
        base = _swap(MobileNetV2().features, nn.ReLU6, nn.ReLU)
        self.head14 = base[:14]              # -> 96 x 22 x 22
        self.b14_expand = base[14].conv[0]   # conv40: 576 x 22 x 22
        self.b14_rest = nn.Sequential(*base[14].conv[1:])
        self.tail = base[15:]                # -> 1280 x 11 x 11 (conv52)
        self.p5 = nn.Sequential(_dw(1280), cba(1280, 576, 1))
        self.up = nn.ConvTranspose2d(576, 576, 1, 2, groups=576, bias=False)  # 11 -> 21
        self.pool = nn.MaxPool2d(2, 1, 1)                                     # 21 -> 22
        self.lateral = nn.Sequential(_dw(576), cba(576, 576, 1))
        self.p4 = nn.Sequential(_dw(576), cba(576, 576, 1))
        self.out11 = nn.Conv2d(576, num_outputs, 1)
        self.out22 = nn.Conv2d(576, num_outputs, 1)

    def forward(self, x):
        e = self.b14_expand(self.head14(x))
        p5 = self.p5(self.tail(self.b14_rest(e)))
        p4 = self.p4(self.pool(self.up(p5)) + self.lateral(e))
        return self.out11(p5), self.out22(p4)


class DarkIR(nn.Module):
    """Yolo-Fastest block: 1x1 expand (leaky), 3x3 depthwise (leaky), linear 1x1 project."""

    def __init__(self, cin, mid, cout, stride=1, residual=False):
        super().__init__()
        self.body = nn.Sequential(cba(cin, mid, 1, act=leaky), _dw(mid, 3, stride, leaky),
                                  cba(mid, cout, 1, act=None))
        self.residual = residual

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def _sep5(c, act=leaky):
    """Two (5x5 depthwise + act, linear 1x1) pairs: Yolo-Fastest(V2)'s head blocks."""
    return nn.Sequential(_dw(c, 5, act=act), cba(c, c, 1, act=None),
                         _dw(c, 5, act=act), cba(c, c, 1, act=None))


class YoloFastest11(nn.Module):
    # yolo-fastest-1.1.cfg after the stem, per stage: (opening block's expansion width, out,
    # stride, residual blocks' expansion width, residual repeats)
    PLAN = ((8, 4, 1, 8, 1), (24, 8, 2, 32, 2), (32, 8, 2, 48, 2), (48, 16, 1, 96, 4),
            (96, 24, 2, 136, 4), (136, 48, 2, 224, 5))

    def __init__(self, num_outputs=255):
        super().__init__()
        stages, c = [[cba(3, 8, 3, 2, act=leaky)]], 8
        for open_mid, cout, s, mid, n in self.PLAN:
            stages[-1].append(DarkIR(c, open_mid, cout, s))
            stages[-1] += [DarkIR(cout, mid, cout, residual=True) for _ in range(n)]
            stages.append([])
            c = cout
        self.to_20 = nn.Sequential(*[m for st in stages[:5] for m in st])  # 24 x 20 x 20
        self.to_10 = nn.Sequential(*[m for st in stages[5:] for m in st])  # 48 x 10 x 10
        self.spp = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in (9, 5, 3))
        self.p5 = cba(192, 96, 1, act=leaky)
        self.head10 = nn.Sequential(_sep5(96), nn.Conv2d(96, num_outputs, 1))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head20 = nn.Sequential(_sep5(120), nn.Conv2d(120, num_outputs, 1))

    def forward(self, x):
        c20 = self.to_20(x)
        c10 = self.to_10(c20)
        p5 = self.p5(torch.cat([p(c10) for p in self.spp] + [c10], 1))
        return self.head10(p5), self.head20(torch.cat([self.up(p5), c20], 1))


class _ShuffleV2Backbone(nn.Module):
    """ShuffleNetV2 stem (3x3/2 conv, 3x3/2 max-pool) and three stages of
    :class:`~edgeprof.zoo.cnns.ShuffleBlock`; returns every stage's output."""

    def __init__(self, widths=(48, 96, 192), repeats=(4, 8, 4), act=nn.ReLU):
        super().__init__()
        self.stem = nn.Sequential(cba(3, 24, 3, 2, act=act), nn.MaxPool2d(3, 2, 1))
        stages, c = [], 24
        for w, n in zip(widths, repeats):
            stages.append(nn.Sequential(ShuffleBlock(c, w, 2),
                                        *[ShuffleBlock(w, w, 1) for _ in range(n - 1)]))
            c = w
        self.stages = nn.ModuleList(stages)
        if act is not nn.ReLU:
            _swap(self.stages, nn.ReLU, act)

    def forward(self, x):
        x, outs = self.stem(x), []
        for s in self.stages:
            x = s(x)
            outs.append(x)
        return outs


class YoloFastestV2(nn.Module):
    def __init__(self, num_classes=80, anchors=3, width=72):
        super().__init__()
        self.backbone = _ShuffleV2Backbone()
        self.conv1x1_2 = cba(96 + 192, width, 1)
        self.conv1x1_3 = cba(192, width, 1)
        self.cls_head_2, self.reg_head_2 = _sep5(width, nn.ReLU), _sep5(width, nn.ReLU)
        self.cls_head_3, self.reg_head_3 = _sep5(width, nn.ReLU), _sep5(width, nn.ReLU)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        # shared by both scales, as in the PyTorch model
        self.out_reg = nn.Conv2d(width, 4 * anchors, 1)
        self.out_obj = nn.Conv2d(width, anchors, 1)
        self.out_cls = nn.Conv2d(width, num_classes, 1)

    def forward(self, x):
        _, c2, c3 = self.backbone(x)
        s3 = self.conv1x1_3(c3)
        cls3, reg3 = self.cls_head_3(s3), self.reg_head_3(s3)
        s2 = self.conv1x1_2(torch.cat([self.up(c3), c2], 1))
        cls2, reg2 = self.cls_head_2(s2), self.reg_head_2(s2)
        return (self.out_reg(reg2), self.out_obj(cls2), self.out_cls(cls2),
                self.out_reg(reg3), self.out_obj(cls3), self.out_cls(cls3))


class FastestDet(nn.Module):
    def __init__(self, num_classes=80, width=96):
        super().__init__()
        self.backbone = _ShuffleV2Backbone()
        self.avg = nn.AvgPool2d(3, 2, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.spp_in = cba(48 + 96 + 192, width, 1)
        self.spp = nn.ModuleList(nn.Sequential(*[_dw(width, 5) for _ in range(n)])
                                 for n in (1, 2, 3))
        self.spp_out = cba(3 * width, width, 1, act=None)
        self.relu = nn.ReLU()
        self.head_in = cba(width, width, 1)
        self.obj = nn.Sequential(_dw(width, 5), cba(width, 1, 1, act=None))
        self.reg = nn.Sequential(_dw(width, 5), cba(width, 4, 1, act=None))
        self.cls = nn.Sequential(_dw(width, 5), cba(width, num_classes, 1, act=None))

    def forward(self, x):
        p1, p2, p3 = self.backbone(x)
        x = self.spp_in(torch.cat([self.avg(p1), p2, self.up(p3)], 1))
        x = self.relu(x + self.spp_out(torch.cat([s(x) for s in self.spp], 1)))
        x = self.head_in(x)
        return torch.cat([torch.sigmoid(self.obj(x)), self.reg(x),
                          torch.softmax(self.cls(x), 1)], 1)


class NanoDetM(nn.Module):
    def __init__(self, num_classes=80, reg_max=7, width=96):
        super().__init__()
        self.backbone = _ShuffleV2Backbone((116, 232, 464), act=leaky)
        self.lateral = nn.ModuleList(nn.Conv2d(c, width, 1) for c in (116, 232, 464))
        out = num_classes + 4 * (reg_max + 1)
        self.heads = nn.ModuleList(
            nn.Sequential(_dw(width, 3, act=leaky), cba(width, width, 1, act=leaky),
                          _dw(width, 3, act=leaky), cba(width, width, 1, act=leaky),
                          nn.Conv2d(width, out, 1)) for _ in range(3))

    def forward(self, x):
        l3, l4, l5 = (lat(c) for lat, c in zip(self.lateral, self.backbone(x)))

        def resize(t, s):
            return F.interpolate(t, scale_factor=s, mode="bilinear", align_corners=False)
        p4 = l4 + resize(l5, 2)
        p3 = l3 + resize(p4, 2)
        n4 = p4 + resize(p3, 0.5)
        n5 = l5 + resize(n4, 0.5)
        return [h(f) for h, f in zip(self.heads, (p3, n4, n5))]


# ------------------------------------------------------------------------- factories
def _mnasnet():
    blocks, c = [], 16
    for t, k, cout, n, s in _MNASNET:
        for i in range(n):
            blocks.append((c * t, k, cout, s if i == 0 else 1))
            c = cout
    return _mobile_classifier(16, blocks)


def _regnety_400m():
    layers, c = [cba(3, 32, 3, 2)], 32
    for w, d in ((48, 1), (104, 3), (208, 6), (440, 6)):
        for i in range(d):
            layers.append(RegNetYBlock(c, w, 2 if i == 0 else 1))
            c = w
    return _Classifier(nn.Sequential(*layers), nn.Linear(c, 1000))


def _efficientnet_b0():
    layers, c = [cba(3, 32, 3, 2, act=nn.SiLU)], 32
    for t, k, s, cout, n in _EFFNET_B0:
        for i in range(n):
            layers.append(MBConv(c, c * t, cout, k, s if i == 0 else 1, act=nn.SiLU,
                                 se=max(1, int(c * 0.25)), se_act=nn.SiLU))
            c = cout
    layers.append(cba(c, 1280, 1, act=nn.SiLU))
    return _Classifier(nn.Sequential(*layers), nn.Sequential(nn.Dropout(0.2),
                                                             nn.Linear(1280, 1000)))


def _efficientnetv2_b0():
    layers, c = [cba(3, 32, 3, 2, act=nn.SiLU)], 32
    for fused, t, s, cout, n in _EFFNETV2_B0:
        for i in range(n):
            stride = s if i == 0 else 1
            if fused:
                layers.append(FusedMBConv(c, cout, stride, t))
            else:
                layers.append(MBConv(c, c * t, cout, 3, stride, act=nn.SiLU,
                                     se=int(c * 0.25), se_act=nn.SiLU))
            c = cout
    layers.append(cba(c, 1280, 1, act=nn.SiLU))
    return _Classifier(nn.Sequential(*layers), nn.Linear(1280, 1000))


def _mobilenet_v3():
    layers, c = [cba(3, 16, 3, 2, act=nn.Hardswish)], 16
    for k, mid, cout, se, hs, s in _MBV3_NCNN:
        layers.append(MBConv(c, mid, cout, k, s, act=nn.Hardswish if hs else nn.ReLU,
                             se=se, se_act=nn.ReLU, se_gate=nn.Hardsigmoid,
                             se_before_act=True))
        c = cout
    layers.append(cba(c, 960, 1, act=nn.Hardswish))
    return _Classifier(nn.Sequential(*layers), nn.Sequential(
        nn.Hardswish(), nn.Linear(960, 1280), nn.Hardswish(), nn.Linear(1280, 1000)))


def _squeezenet_ncnn():
    m = SqueezeNet11()
    m.classifier[1].padding = (1, 1)  # the DeepScale prototxt's conv10: 1x1, pad 1
    return m


mnasnet = factory(_mnasnet, inputs=img(224))
proxylessnas = factory(_mobile_classifier, 32, _PROXYLESS, inputs=img(224))
googlenet = factory(GoogLeNet, inputs=img(224))
regnety_400m = factory(_regnety_400m, inputs=img(224))
efficientnet_b0 = factory(_efficientnet_b0, inputs=img(224))
efficientnetv2_b0 = factory(_efficientnetv2_b0, inputs=img(224))
mobilenet_v3 = factory(_mobilenet_v3, inputs=img(224))
shufflenet_v1 = factory(ShuffleNetV1, inputs=img(224))
blazeface = factory(BlazeFaceBackbone, inputs=img(128))
mobilenet_ssd = factory(MobileNetSSD, inputs=img(300))
squeezenet_ssd = factory(SqueezeNetSSD, inputs=img(300))
mobilenet_yolo = factory(MobileNetYOLO, inputs=img(416))
mobilenetv2_yolov3 = factory(MobileNetV2YOLOv3, inputs=img(352))
yolo_fastest_1_1 = factory(YoloFastest11, inputs=img(320))
yolo_fastestv2 = factory(YoloFastestV2, inputs=img(352))
nanodet_m = factory(NanoDetM, inputs=img(320))
fastestdet = factory(FastestDet, inputs=img(352))
vision_transformer = factory(ViT, image=384, patch=32, dim=768, depth=12, heads=12, mlp=3072,
                             inputs=img(384))
squeezenet_ncnn = factory(_squeezenet_ncnn, inputs=img(227))
alexnet_ncnn = factory(AlexNetBVLC, inputs=img(227))


#: the factories, by builtin name, in benchncnn's order
NAMES = (
    "squeezenet_ncnn", "mobilenet_v3", "shufflenet_v1", "mnasnet", "proxylessnas",
    "efficientnet_b0", "efficientnetv2_b0", "regnety_400m", "blazeface", "googlenet",
    "alexnet_ncnn", "squeezenet_ssd", "mobilenet_ssd", "mobilenet_yolo", "mobilenetv2_yolov3",
    "nanodet_m", "yolo_fastest_1_1", "yolo_fastestv2", "vision_transformer", "fastestdet")

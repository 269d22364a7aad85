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

The factories are here (``edgeprof.zoo.reference:<name>`` is each one's model spec); the
networks are defined in :mod:`edgeprof.zoo.cnns`, :mod:`edgeprof.zoo.detectors` and
:mod:`edgeprof.zoo.extras`, and each is importable from here too.
"""

from __future__ import annotations

import torch

from edgeprof.zoo.cnns import (DSCNN, VGG16, AlexNet, BasicBlock, Bottleneck, DenseLayer,
                               DenseNet121, FCAutoencoder, Fire, InvertedResidual, MBv3Block,
                               MobileNetV1, MobileNetV2, MobileNetV3Small, ResNet, ResNet8,
                               ShuffleBlock, ShuffleNetV2, SqueezeExcite, SqueezeNet11)
from edgeprof.zoo.detectors import (C2f, CSPTiny, DarkRes, SPPF, SSDMobileNetV2, V8Bottleneck,
                                    YOLOv3, YOLOv4Tiny, YOLOv8n)
from edgeprof.zoo.extras import ViT, GRUClassifier, LSTMClassifier, WideMLP


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


__all__ = [
    # the factories (edgeprof.zoo.REFERENCE_NAMES)
    "alexnet", "densenet121", "gru", "lstm", "mobilenet_v1", "mobilenet_v1_025_160",
    "mobilenet_v2", "mobilenet_v3_small", "resnet18", "resnet50", "resnet50_vd",
    "shufflenet_v2", "squeezenet1_1", "ssd_mobilenet_v2", "tiny_ds_cnn", "tiny_fc_autoencoder",
    "tiny_resnet8", "tiny_vww_mobilenet", "vgg16", "vit_tiny", "vit_tiny_112", "wide_mlp",
    "yolov3", "yolov4_tiny", "yolov8n",
    # the networks and their blocks
    "AlexNet", "BasicBlock", "Bottleneck", "C2f", "CSPTiny", "DSCNN", "DarkRes", "DenseLayer",
    "DenseNet121", "FCAutoencoder", "Fire", "GRUClassifier", "InvertedResidual",
    "LSTMClassifier", "MBv3Block", "MobileNetV1", "MobileNetV2", "MobileNetV3Small", "ResNet",
    "ResNet8", "SPPF", "SSDMobileNetV2", "ShuffleBlock", "ShuffleNetV2", "SqueezeExcite",
    "SqueezeNet11", "V8Bottleneck", "VGG16", "ViT", "WideMLP", "YOLOv3", "YOLOv4Tiny",
    "YOLOv8n"]

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

from edgeprof.zoo.cnns import (DSCNN, VGG16, AlexNet, BasicBlock, Bottleneck, DenseLayer,
                               DenseNet121, FCAutoencoder, Fire, InvertedResidual, MBv3Block,
                               MobileNetV1, MobileNetV2, MobileNetV3Small, ResNet, ResNet8,
                               ShuffleBlock, ShuffleNetV2, SqueezeExcite, SqueezeNet11, factory,
                               img)
from edgeprof.zoo.detectors import (C2f, CSPTiny, DarkRes, SPPF, SSDMobileNetV2, V8Bottleneck,
                                    YOLOv3, YOLOv4Tiny, YOLOv8n)
from edgeprof.zoo.extras import ViT, GRUClassifier, LSTMClassifier, WideMLP


# ---------------------------------------------------------------------- factories
resnet18 = factory(ResNet, "basic", (2, 2, 2, 2), inputs=img())
resnet50 = factory(ResNet, "bottleneck", (3, 4, 6, 3), inputs=img())
resnet50_vd = factory(ResNet, "bottleneck", (3, 4, 6, 3), vd=True, inputs=img())
alexnet = factory(AlexNet, inputs=img())
vgg16 = factory(VGG16, inputs=img())
squeezenet1_1 = factory(SqueezeNet11, inputs=img())
densenet121 = factory(DenseNet121, inputs=img())
shufflenet_v2 = factory(ShuffleNetV2, inputs=img())
mobilenet_v1 = factory(MobileNetV1, inputs=img())
mobilenet_v1_025_160 = factory(MobileNetV1, 0.25, 1001, inputs=img(160))
mobilenet_v2 = factory(MobileNetV2, inputs=img())
mobilenet_v3_small = factory(MobileNetV3Small, inputs=img())
tiny_resnet8 = factory(ResNet8, inputs=img(32))
tiny_ds_cnn = factory(DSCNN, inputs=[[1, 1, 49, 10]])
tiny_vww_mobilenet = factory(MobileNetV1, 0.25, 2, inputs=img(96))
tiny_fc_autoencoder = factory(FCAutoencoder, inputs=[[1, 640]])
ssd_mobilenet_v2 = factory(SSDMobileNetV2, inputs=img(300))
yolov3 = factory(YOLOv3, inputs=img(416))
yolov4_tiny = factory(YOLOv4Tiny, inputs=img(416))
yolov8n = factory(YOLOv8n, inputs=img(640))
vit_tiny = factory(ViT, inputs=img())
# ViT-Tiny (patch 16, dim 192, depth 12) at 112 x 112: 50 tokens (host-zoo size)
vit_tiny_112 = factory(ViT, image=112, inputs=img(112))
lstm = factory(LSTMClassifier, inputs=[[1, 50, 64]])
wide_mlp = factory(WideMLP, inputs=[[1, 1024]])
gru = factory(GRUClassifier, inputs=[[1, 49, 40]])


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

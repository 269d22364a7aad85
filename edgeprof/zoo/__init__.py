"""Built-in example models, registered through the same ``edgeprof_register_models`` hook
a user's plugin would use. The definitions live in ``edgeprof.zoo.models`` and import torch
only when a model is built.
"""

from __future__ import annotations

from edgeprof.core.hookspecs import hookimpl

BUILTIN_MODELS = {
    "small_cnn": "edgeprof.zoo.models:small_cnn",
    "mlp": "edgeprof.zoo.models:mlp",
    "small_resnet": "edgeprof.zoo.models:small_resnet",
    "small_mobilenet": "edgeprof.zoo.models:small_mobilenet",
    "tiny_transformer": "edgeprof.zoo.models:tiny_transformer",
}

#: reference architectures (edgeprof.zoo.reference), named here so listing them imports no torch
REFERENCE_NAMES = (
    "resnet18", "resnet50", "resnet50_vd", "alexnet", "vgg16", "squeezenet1_1", "densenet121",
    "shufflenet_v2", "mobilenet_v1", "mobilenet_v1_025_160", "mobilenet_v2",
    "mobilenet_v3_small", "tiny_resnet8", "tiny_ds_cnn", "tiny_vww_mobilenet",
    "tiny_fc_autoencoder", "ssd_mobilenet_v2", "yolov3", "yolov4_tiny", "yolov8n", "vit_tiny",
    "lstm", "wide_mlp", "vit_tiny_112", "gru")
BUILTIN_MODELS.update({n: f"edgeprof.zoo.reference:{n}" for n in REFERENCE_NAMES})

#: MCUNet model-zoo networks (edgeprof.zoo.mcunet)
MCUNET_NAMES = ("mcunet_in0", "mcunet_in1", "mcunet_in2", "mcunet_in3", "mcunet_in4",
                "mcunet_mbv2_w035", "mcunet_proxyless_w03")
BUILTIN_MODELS.update({n: f"edgeprof.zoo.mcunet:{n}" for n in MCUNET_NAMES})


#: ncnn's benchncnn networks (edgeprof.zoo.ncnn_bench), at benchncnn's input sizes
NCNN_BENCH_NAMES: tuple[str, ...] = (
    "squeezenet_ncnn", "mobilenet_v3", "shufflenet_v1", "mnasnet", "proxylessnas",
    "efficientnet_b0", "efficientnetv2_b0", "regnety_400m", "blazeface", "googlenet",
    "alexnet_ncnn", "squeezenet_ssd", "mobilenet_ssd", "mobilenet_yolo", "mobilenetv2_yolov3",
    "nanodet_m", "yolo_fastest_1_1", "yolo_fastestv2", "vision_transformer", "fastestdet")
BUILTIN_MODELS.update({n: f"edgeprof.zoo.ncnn_bench:{n}" for n in NCNN_BENCH_NAMES})

#: Ultralytics YOLO detectors (edgeprof.zoo.ultralytics), at 640 x 640
ULTRALYTICS_NAMES: tuple[str, ...] = (
    "yolov8s", "yolo11n", "yolo11s", "yolo11m", "yolo26n", "yolo26s", "yolo26m", "yolo26x")
BUILTIN_MODELS.update({n: f"edgeprof.zoo.ultralytics:{n}" for n in ULTRALYTICS_NAMES})

#: OpenCV model-zoo networks and deeper torchvision classifiers (edgeprof.zoo.opencv_zoo)
OPENCV_ZOO_NAMES: tuple[str, ...] = (
    "yunet", "yolox_s", "nanodet_plus_m", "mp_handpose", "mp_persondet", "pphumanseg",
    "mobilefacenet_fer", "efficientformer_l3", "resnet101", "resnet152", "densenet161", "vgg13",
    "mobilenet_yolov3_lite")
BUILTIN_MODELS.update({n: f"edgeprof.zoo.opencv_zoo:{n}" for n in OPENCV_ZOO_NAMES})


@hookimpl
def edgeprof_register_models():
    return dict(BUILTIN_MODELS)

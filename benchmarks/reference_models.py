"""Reference architectures defined from their papers (torchvision is not a dependency).

* ResNet-50 -- He et al., "Deep Residual Learning for Image Recognition" (2015), Table 1,
  bottleneck blocks [3, 4, 6, 3]; the stride-2 sits on the 3x3 convolution ("ResNet v1.5",
  as in torchvision, whose 4.089 GMACs / 25,557,032 parameters are the usual reference).
* MobileNetV2 -- Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks"
  (2018), Table 2, width 1.0, channels rounded to multiples of 8.
* ViT-B/16 -- Dosovitskiy et al., "An Image is Worth 16x16 Words" (2020), Table 1: 12 layers,
  hidden 768, MLP 3072, 12 heads, 16x16 patches, class token, learned position embedding.

Weights are random (no downloads); only the structure matters for counting.
"""

from __future__ import annotations

import torch
from torch import nn


# ------------------------------------------------------------------------- ResNet-50
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000, layers=(3, 4, 6, 3)):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        stages = []
        for i, (n, width) in enumerate(zip(layers, (64, 128, 256, 512))):
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(cin, width, stride=2 if (j == 0 and i > 0) else 1))
                cin = width * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ----------------------------------------------------------------------- MobileNetV2
def _divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:  # do not round down by more than 10 %
        new_v += divisor
    return new_v


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: bool = True):
    layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = int(round(cin * expand))
        self.use_res = stride == 1 and cin == cout
        layers = [] if expand == 1 else [_conv_bn(cin, hidden, 1)]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden),
                   _conv_bn(hidden, cout, 1, act=False)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, stride s) -- the paper's Table 2
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes: int = 1000, width: float = 1.0):
        super().__init__()
        cin = _divisible(32 * width)
        last = _divisible(1280 * max(1.0, width))
        features = [_conv_bn(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _divisible(c * width)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(_conv_bn(cin, last, 1))
        self.features = nn.Sequential(*features)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# --------------------------------------------------------------------------- ViT-B/16
class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, image: int = 224, patch: int = 16, dim: int = 768, depth: int = 12,
                 heads: int = 12, mlp: int = 3072, num_classes: int = 1000):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def _seeded(cls, **kwargs) -> nn.Module:
    torch.manual_seed(0)
    return cls(**kwargs).eval()


def resnet50():
    return _seeded(ResNet50), [[1, 3, 224, 224]]


def mobilenet_v2():
    return _seeded(MobileNetV2), [[1, 3, 224, 224]]


def vit_b_16():
    return _seeded(ViT), [[1, 3, 224, 224]]


#: name -> (factory, reference MACs, reference parameters or None, source)
REFERENCES = {
    "resnet50": (resnet50, 4.089e9, 25_557_032,
                 "torchvision ResNet50_Weights.IMAGENET1K_V1: 4.09 GFLOPS (GMACs), 25,557,032 params"),
    "mobilenet_v2": (mobilenet_v2, 0.301e9, None,
                     "torchvision MobileNet_V2_Weights.IMAGENET1K_V1: 0.30 GMACs; paper: 300M mult-adds"),
    "vit_b_16": (vit_b_16, 17.564e9, None,
                 "torchvision ViT_B_16_Weights.IMAGENET1K_V1: 17.56 GFLOPS (GMACs), attention matmuls counted"),
}


def _mcunet_references() -> dict:
    """The MCUNet zoo networks (edgeprof.zoo.mcunet) against the zoo's published counts."""
    from edgeprof.zoo import mcunet

    return {name: (getattr(mcunet, name), macs, int(params),
                   "mit-han-lab/mcunet README, model list (MACs to 3 figures, params to 2)")
            for name, (macs, params) in mcunet.PUBLISHED.items()}


REFERENCES.update(_mcunet_references())

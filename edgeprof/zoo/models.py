"""Small model definitions (no downloaded weights). Each factory returns
``(module, input_shapes)`` with the batch dimension first, or a dict with dtypes too."""

from __future__ import annotations

import torch
from torch import nn

from edgeprof.zoo.cnns import factory


class SmallCNN(nn.Module):
    """The seeds' SmallCNN: conv1 1->16, conv2 16->32 (3x3, padding 1), ReLU and 2x2 max
    pooling after each, classifier Linear(32*7*7 -> 10); input 1x28x28."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.classifier = nn.Linear(32 * 7 * 7, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        return self.classifier(torch.flatten(x, 1))


class MLP(nn.Module):
    def __init__(self, in_features: int = 784, hidden: int = 256, num_classes: int = 10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class SmallResNet(nn.Module):
    """A ResNet-style CNN for 3x32x32 inputs: stem, three stages of basic blocks."""

    def __init__(self, num_classes: int = 10, widths: tuple[int, int, int] = (16, 32, 64)):
        super().__init__()
        w1, w2, w3 = widths
        self.stem = nn.Sequential(nn.Conv2d(3, w1, 3, 1, 1, bias=False), nn.BatchNorm2d(w1),
                                  nn.ReLU())
        self.layer1 = nn.Sequential(BasicBlock(w1, w1), BasicBlock(w1, w1))
        self.layer2 = nn.Sequential(BasicBlock(w1, w2, 2), BasicBlock(w2, w2))
        self.layer3 = nn.Sequential(BasicBlock(w2, w3, 2), BasicBlock(w3, w3))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(w3, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + out if self.use_res else out


class SmallMobileNet(nn.Module):
    """A MobileNetV2-style CNN (depthwise separable, inverted residuals) for 3x32x32."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU6())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 1, 1), InvertedResidual(16, 24, 2, 4),
            InvertedResidual(24, 24, 1, 4), InvertedResidual(24, 32, 2, 4),
            InvertedResidual(32, 32, 1, 4), InvertedResidual(32, 64, 2, 4),
        )
        self.head = nn.Sequential(nn.Conv2d(64, 128, 1, bias=False), nn.BatchNorm2d(128),
                                  nn.ReLU6())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyTransformer(nn.Module):
    """A small transformer encoder over token ids (vocabulary 1000, 32 tokens)."""

    def __init__(self, vocab: int = 1000, dim: int = 64, heads: int = 4, layers: int = 2,
                 seq_len: int = 32, num_classes: int = 10):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        x = self.encoder(x)
        return self.head(self.norm(x).mean(dim=1))


small_cnn = factory(SmallCNN, inputs=[[1, 1, 28, 28]])
mlp = factory(MLP, inputs=[[1, 1, 28, 28]])
small_resnet = factory(SmallResNet, inputs=[[1, 3, 32, 32]])
small_mobilenet = factory(SmallMobileNet, inputs=[[1, 3, 32, 32]])
tiny_transformer = factory(TinyTransformer, inputs={"shapes": [[1, 32]], "dtypes": ["int64"]})

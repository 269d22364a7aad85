"""The host zoo's extra reference models: ViT-Tiny/16 (DeiT-Ti sizes), LSTM and GRU sequence
classifiers and a wide MLP."""

from __future__ import annotations

import torch
from torch import nn


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

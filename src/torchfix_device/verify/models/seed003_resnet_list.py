"""Seed 003 (a hand-written ResNet): residual blocks kept in a plain Python ``list``.

``nn.Module`` only registers submodules assigned as attributes or held in its containers; the
blocks in ``self.blocks = [...]`` are invisible to ``parameters()``, ``state_dict()`` and
``.to(device)``. After ``model.to(device)`` the stem and the classifier are on the GPU, the
blocks are still on the CPU, and the first block fails with ``Input type (torch.cuda.FloatTensor)
and weight type (torch.FloatTensor) should be the same``.

The rewrite (TFD004) makes the list an ``nn.ModuleList``.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CODEMODS = ("TFD004",)
INTENDED_CHANGE = (
    "the residual blocks become submodules: parameters() and state_dict() now include them, so an "
    "optimizer built from model.parameters() trains them and checkpoints save them; the outputs "
    "are unchanged"
)


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        residual = x
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + residual
        return F.relu(out)


class SmallResNet(nn.Module):
    def __init__(self, n_blocks=3, channels=8, n_classes=10):
        super(SmallResNet, self).__init__()
        self.stem = nn.Conv2d(3, channels, kernel_size=3, padding=1)
        self.blocks = [ResidualBlock(channels) for _ in range(n_blocks)]
        self.fc = nn.Linear(channels, n_classes)

    def forward(self, x):
        out = F.relu(self.stem(x))
        for block in self.blocks:
            out = block(out)
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc(out)


def run(device):
    model = SmallResNet().to(device)
    images = torch.randn(2, 3, 12, 12).to(device)
    logits = model(images)
    return model, logits

"""A small ResNet whose residual blocks live in a Python list (the seed-003 bug)."""
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


class SmallResNet(nn.Module):
    def __init__(self, num_blocks=3, channels=16, num_classes=10):
        super(SmallResNet, self).__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = []
        for _ in range(num_blocks):
            self.blocks.append(BasicBlock(channels))
        self.head = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = F.relu(self.stem(x))
        for block in self.blocks:
            x = block(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)

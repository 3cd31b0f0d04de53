"""Seed 004 (device-agnostic code): ``eval_model()`` forgets to keep the moved batch.

``eval_model(model, loader, device)`` moves the model, then calls ``X.to(device)`` and
``y.to(device)`` as statements of their own. ``Tensor.to`` returns a moved copy, which is thrown
away: ``X`` is still on the CPU and ``model(X)`` fails with ``Expected all tensors to be on the
same device, but found at least two devices, cuda:0 and cpu!``.

The rewrite (TFD002) reassigns ``X = X.to(device)`` and ``y = y.to(device)``.
"""
import torch
import torch.nn as nn

CODEMODS = ("TFD002",)


class Classifier(nn.Module):
    def __init__(self, n_features=6, n_classes=3):
        super(Classifier, self).__init__()
        self.net = nn.Sequential(nn.Linear(n_features, 16), nn.ReLU(), nn.Linear(16, n_classes))

    def forward(self, x):
        return self.net(x)


def eval_model(model, loader, device):
    model.to(device)
    model.eval()
    correct = 0
    total_logits = []
    with torch.no_grad():
        for X, y in loader:
            X.to(device)
            y.to(device)
            logits = model(X)
            correct += (logits.argmax(dim=1) == y).sum()
            total_logits.append(logits)
    return correct, torch.cat(total_logits)


def run(device):
    model = Classifier()
    loader = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)]
    correct, logits = eval_model(model, loader, device)
    return model, (correct, logits)

"""Seed 002 (the six-hour ONNX-export night): a ``.cuda()`` model and a CPU dummy input.

The checkpoint is loaded with ``torch.load(path).cuda()`` — no ``map_location``, so a file saved
on a GPU server cannot even be opened on a CPU-only machine — and the dummy input for the export
is "moved" with ``dummy_input.cuda()`` on a line of its own, which moves nothing. Exporting (here:
calling the model, as the exporter would trace it) fails with ``Input type
(torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same``.

The rewrite: ``torch.load`` gains ``map_location=device`` (TFD005), ``.cuda()`` becomes
``.to(device)`` (TFD001), and the dropped move is reassigned (TFD002).

``weights_only=False``: since PyTorch 2.6 unpickling a whole ``nn.Module`` must be asked for;
the seed's code predates that default.
"""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

CODEMODS = ("TFD001", "TFD002", "TFD005")


class TinyConvNet(nn.Module):
    def __init__(self, n_classes=4):
        super(TinyConvNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, kernel_size=3, stride=2, padding=1)
        self.classifier = nn.Linear(8, n_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


def train_and_save(path):
    """The training server's side: a model saved whole with torch.save."""
    model = TinyConvNet()
    torch.save(model, path)


def run(device):
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "model.pth")
        train_and_save(path)

        model = torch.load(path, weights_only=False).cuda()
        model.eval()
        dummy_input = torch.randn(1, 3, 16, 16)
        dummy_input.cuda()
        # torch.onnx.export(model, dummy_input, "model.onnx") traces exactly this call:
        with torch.no_grad():
            scores = model(dummy_input)
    return model, scores

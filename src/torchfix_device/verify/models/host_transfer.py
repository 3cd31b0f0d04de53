"""No seed article (issue 32, class (a) of the run harness): a tensor the migration puts on the
GPU reaches NumPy.

The legacy evaluation moves its classifier and inputs with ``.cuda()`` and then reads the
scores with ``output.data.numpy()`` to rank the classes in NumPy, as the 0.3 tutorials did on
their authors' CUDA machines (the run harness's ``volatile_eval.py``). Once the moves land, the
output is on the device and ``.numpy()`` raises ``TypeError: can't convert cuda:0 device type
tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.``

The rewrite: ``.cuda()`` becomes ``.to(device)`` (TFD001) and ``output.data.numpy()`` becomes
``output.data.cpu().numpy()`` (TFD018); on the CPU ``.cpu()`` returns the tensor itself, so the
numbers are the same.
"""
import numpy as np
import torch
import torch.nn as nn

CODEMODS = ("TFD001", "TFD018")


class Classifier(nn.Module):
    def __init__(self, n_features=6, n_classes=4):
        super(Classifier, self).__init__()
        self.body = nn.Sequential(nn.Linear(n_features, 12), nn.Tanh(), nn.Linear(12, n_classes))

    def forward(self, x):
        return self.body(x)


def run(device):
    model = Classifier()
    model.cuda()
    inputs = torch.randn(5, 6).cuda()
    output = model(inputs)
    scores = output.data.numpy()
    ranked = np.argsort(-scores, axis=1)
    return model, (output, torch.from_numpy(ranked.copy()))

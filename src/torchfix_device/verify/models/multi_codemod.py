"""Seeds 000, 002 and 003 at once: a model that needs four codemods before it runs on a GPU.

- its hidden layers live in a plain list (seed 003), so ``model.cuda()`` leaves them on the CPU,
  and its checkpoint never contained them;
- ``forward`` draws jitter with ``torch.randn`` and no ``device=`` (seed 000);
- the checkpoint is read with ``torch.load`` and no ``map_location`` (seed 002);
- model and input are moved with ``.cuda()`` (seeds 001 and 002).

Fixed only when all of TFD001, TFD003, TFD004 and TFD005 land together; any one alone still
leaves a CPU tensor in the way.
"""
import os
import tempfile

import torch
import torch.nn as nn

CODEMODS = ("TFD001", "TFD003", "TFD004", "TFD005")
INTENDED_CHANGE = (
    "the hidden layers kept in a list were never saved: after the rewrite (nn.ModuleList) the "
    "checkpoint holds them, so the reloaded encoder computes with the saved weights instead of "
    "freshly initialised ones; its outputs and state_dict change"
)


class JitterEncoder(nn.Module):
    def __init__(self, size=6, n_out=3):
        super(JitterEncoder, self).__init__()
        self.hidden = [nn.Linear(size, size), nn.Linear(size, size)]
        self.head = nn.Linear(size, n_out)

    def forward(self, x):
        h = x
        for layer in self.hidden:
            h = torch.tanh(layer(h))
        jitter = torch.randn(h.size()) * 0.01
        return self.head(h + jitter)


def run(device):
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "encoder.pth")
        torch.save(JitterEncoder().state_dict(), path)
        model = JitterEncoder()
        model.load_state_dict(torch.load(path))
    model.cuda()
    batch = torch.randn(4, 6).cuda()
    return model, model(batch)

"""No seed article (issue 31, the encoders of InferSent in the development corpus): a recurrent
layer's initial state made on the GPU in ``__init__`` and kept as a plain attribute.

``self.init_state = torch.zeros(2, batch, dim).cuda()`` is not a parameter or a buffer, so the
module's moves leave it where it was made: on the GPU from the start. A first call on the CPU
before the model is moved (a dry run to check shapes, as model summaries do) meets the GRU's
weights on the CPU and its initial state on the GPU: ``Input and hidden tensors are not at the
same device``.

The rewrite: TFD007 registers the state as a non-persistent buffer without its ``.cuda()`` (it
now follows ``.to(device)`` and ``.cpu()`` like the weights; ``state_dict`` keys unchanged), and
TFD001 turns the other ``.cuda()`` calls into ``.to(device)``. On the CPU the numbers are the same.
"""
import torch
import torch.nn as nn

CODEMODS = ("TFD001", "TFD007")


class Encoder(nn.Module):
    def __init__(self, dim=5, batch=3):
        super(Encoder, self).__init__()
        self.rnn = nn.GRU(dim, dim, 1, bidirectional=True)
        self.init_state = torch.zeros(2, batch, dim).cuda()

    def forward(self, x):
        _, h = self.rnn(x, self.init_state)
        return torch.cat((h[0], h[1]), 1)


def run(device):
    model = Encoder()
    x = torch.randn(4, 3, 5)
    assert model(x).shape == (3, 10)  # a dry run on the CPU
    model.cuda()
    return model, model(x.cuda())

"""Seed 001 (pitfalls 1 and 2): a dropped ``tensor.cuda()`` and ``total_loss += loss.data[0]``.

``model.cuda()`` moves a module in place, but ``tensor.cuda()`` returns a moved *copy*: the
training loop below calls ``inputs.cuda()`` on a line of its own, so ``inputs`` stays on the CPU
and the first forward pass fails with ``Expected all tensors to be on the same device``. The
loop also sums its losses with ``loss.data[0]``, which read a 1-element loss before PyTorch 0.4
and raises ``IndexError: invalid index of a 0-dim tensor`` since.

The rewrite: ``.cuda()`` becomes ``.to(device)`` (TFD001), the dropped move is reassigned
(TFD002), and ``loss.data[0]`` becomes ``loss.item()`` (TFD006).
"""
import torch
import torch.nn as nn
import torch.optim as optim

CODEMODS = ("TFD001", "TFD002", "TFD006")


class Regressor(nn.Module):
    def __init__(self, n_features=5, hidden=12):
        super(Regressor, self).__init__()
        self.body = nn.Sequential(nn.Linear(n_features, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.body(x)


def make_batches(n_batches=3, batch_size=8, n_features=5):
    true_weight = torch.randn(n_features, 1)
    batches = []
    for _ in range(n_batches):
        x = torch.randn(batch_size, n_features)
        batches.append((x, x.mm(true_weight) + 0.1 * torch.randn(batch_size, 1)))
    return batches


def run(device):
    model = Regressor()
    model.cuda()
    criterion = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = make_batches()
    total_loss = 0.0
    for epoch in range(2):
        for inputs, targets in batches:
            inputs.cuda()
            targets = targets.cuda()
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total_loss += loss.data[0]
    probe = batches[0][0].cuda()
    return model, (model(probe), torch.tensor(total_loss))

"""TFD005 where no device can be chosen but the load is read only by ``load_state_dict``:
``map_location="cpu"``, safe where the receiver is shown to copy the tensors into its own (a
``torch.nn`` module or ``torch.optim`` optimizer, a module class of the file, a module's ``self``),
unsafe otherwise; nothing where the loaded value is read otherwise or kept (``assign=True``)."""

from __future__ import annotations

import pytest

from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.options import RunOptions

TFD005 = [c for c in all_codemods() if c.code == "TFD005"]

TEMPLATE = '''import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, path):
        super().__init__()
{body}
'''


def _rewrite(body: str, *, unsafe: bool = False) -> str:
    source = TEMPLATE.format(body=body)
    return transform_source(source, TFD005, filename="head.py", options=RunOptions(unsafe_fixes=unsafe)).text


@pytest.mark.parametrize("body", [
    "        self.fc = nn.Linear(2, 2)\n        self.fc.load_state_dict(torch.load(path))",
    "        fc = nn.Linear(2, 2).cuda()\n        fc.load_state_dict(torch.load(path))",
    "        self.opt = torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=0.1)\n        self.opt.load_state_dict(torch.load(path))",
    "        self.load_state_dict(state_dict=torch.load(path))",
])
def test_a_torch_receiver_is_a_safe_fix(body: str) -> None:
    assert 'torch.load(path, map_location="cpu")' in _rewrite(body)


@pytest.mark.parametrize("body", [
    "        self.inner = path\n        self.inner.load_state_dict(torch.load(path))",
    "        self.load_state_dict(torch.load(path))\n\n    def load_state_dict(self, state):\n        self.state = state",
])
def test_a_receiver_not_shown_to_copy_is_unsafe(body: str) -> None:
    assert "map_location" not in _rewrite(body)
    assert 'torch.load(path, map_location="cpu")' in _rewrite(body, unsafe=True)


@pytest.mark.parametrize("body", [
    "        self.table = torch.load(path)",
    "        self.fc = nn.Linear(2, 2)\n        self.fc.load_state_dict(torch.load(path), assign=True)",
    "        self.fc = nn.Linear(2, 2)\n        self.fc.load_state_dict(torch.load(path)['fc'])",
])
def test_a_load_read_otherwise_is_left_for_review(body: str) -> None:
    assert "map_location" not in _rewrite(body, unsafe=True)

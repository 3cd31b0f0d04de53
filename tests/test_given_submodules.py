"""A module that keeps the submodules it is given (``self.extractor = extractor``) has the device
``next(self.parameters()).device``, which nothing in the file shows to exist: TFD001 and TFD005
take it only with ``--unsafe-fixes`` (held back, reported, in the safe tier); a given number
(``self.k = k``) is no submodule; TFD003 never takes it (its trap:
``factory_without_device/submodules_given.noop.py``)."""

from __future__ import annotations

import pytest

from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source
from torchfix_device.options import RunOptions

BY_CODE = {c.code: c for c in all_codemods()}

SOURCE = '''import torch
import torch.nn as nn


class Base(nn.Module):
    def __init__(self, extractor, k):
        super(Base, self).__init__()
        self.extractor = extractor
        self.k = k

    def forward(self, x):
        return self.extractor(x)

    def mean(self):
        return torch.ones(self.k).cuda()

    def load(self, path):
        state = torch.load(path)
        return state["epoch"]
'''


@pytest.mark.parametrize("code, fixed", [
    ("TFD001", "torch.ones(self.k).to(next(self.parameters()).device)"),
    ("TFD005", "torch.load(path, map_location=next(self.parameters()).device)"),
])
def test_only_the_unsafe_tier_takes_the_device_of_given_submodules(code: str, fixed: str) -> None:
    safe = transform_source(SOURCE, [BY_CODE[code]], filename="base.py", options=RunOptions())
    assert safe.text == SOURCE
    held = [f for f in safe.findings if f.code == code]
    assert held and all(f.unsafe and not f.fixed for f in held)
    assert "`self.extractor`" in held[0].message and "`self.k`" not in held[0].message
    unsafe = transform_source(SOURCE, [BY_CODE[code]], filename="base.py", options=RunOptions(unsafe_fixes=True))
    assert fixed in unsafe.text


def test_a_module_given_only_numbers_has_no_device() -> None:
    source = SOURCE.replace("self.extractor = extractor", "self.extractor = None")
    out = transform_source(source, [BY_CODE["TFD001"]], filename="base.py", options=RunOptions(unsafe_fixes=True))
    assert out.text == source

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


NETWORK = '''import torch
import torch.nn as nn


class Network(nn.Module):
    def __init__(self):
        super(Network, self).__init__()
        self._layers = {}

    def anchors(self, n):
        return torch.arange(float(n)).cuda()

    def forward(self, x):
        return self.head(x) + self.anchors(x.size(1))
'''
VGG = '''import torch
import torch.nn as nn

from network import Network


class VGG(Network):
    def __init__(self):
        super(VGG, self).__init__()
        self.head = nn.Linear(3, 3)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(VGG()(torch.ones(1, 3)).shape)
'''


def test_a_base_whose_subclasses_in_other_files_build_its_layers(tmp_path) -> None:
    """``Network`` (an abstract base: its layers are built by ``VGG`` in ``vgg.py``) has the
    device ``next(self.parameters()).device`` only with ``--unsafe-fixes``; the script runs after
    it. Named alone, ``network.py`` shows no subclass: no device at all."""
    from conftest import run_cli, run_script

    (tmp_path / "network.py").write_text(NETWORK, encoding="utf-8")
    (tmp_path / "vgg.py").write_text(VGG, encoding="utf-8")
    out = run_cli("check", ".", "--no-cache", "--select", "TFD001", cwd=tmp_path).stdout.decode()
    assert "`Network` is a base whose subclasses build its layers" in out and "[*]" not in out
    alone = run_cli("check", "network.py", "--no-cache", "--select", "TFD001", "--unsafe-fixes", cwd=tmp_path).stdout.decode()
    assert "defines no parameter or buffer" in alone
    assert run_cli("apply", ".", "--no-cache", "--unsafe-fixes", cwd=tmp_path).returncode == 0
    assert "torch.arange(float(n)).to(next(self.parameters()).device)" in (tmp_path / "network.py").read_text(encoding="utf-8")
    after = run_script("vgg.py", cwd=tmp_path)
    assert after.returncode == 0 and "torch.Size([1, 3])" in after.stdout, after.stderr

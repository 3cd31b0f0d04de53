"""The CPU paths of :mod:`torchfix_device.facts.cpu_paths` as TFD018 asks them: the ``else:`` of
the file's one device flag, and the items of a data loader (passed to a parameter of a script no
file imports: every call of the file gives a ``DataLoader``). Each case also shows what rules the
fact out."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.engine import transform_source

TFD018 = [c for c in all_codemods() if c.code == "TFD018"]

FLAGGED = '''import torch


class Sampler(object):
    def __init__(self, net, gpu):
        self.net = net
        self.gpu = gpu
        if self.gpu:
            self.net.cuda()
{extra}
    def sample(self, z):
        out = self.net(z)
        if self.gpu:
            return out.cpu().data.numpy()
        else:
            return out.data.numpy()
'''


def _tfd018(source: str) -> str:
    return transform_source(source, TFD018, filename="sampler.py").text


def test_the_else_of_the_one_flag_is_the_cpu_path() -> None:
    source = FLAGGED.format(extra="")
    assert _tfd018(source) == source
    loads_into_the_module = FLAGGED.format(extra="\n    def load(self, path):\n        self.net.load_state_dict(torch.load(path))\n")
    assert _tfd018(loads_into_the_module) == loads_into_the_module
    casts_on_the_cpu = FLAGGED.format(extra="\n    def labels(self, y):\n        return y.type(torch.LongTensor).to(torch.float32)\n")
    assert _tfd018(casts_on_the_cpu) == casts_on_the_cpu


def test_a_placement_outside_the_flag_rules_the_path_out() -> None:
    for extra in (
        "\n    def load(self, path):\n        self.net = torch.load(path)\n",  # loads where it was saved (TFD005: the device)
        "\n    def reset(self):\n        self.net.to(torch.device('cuda'))\n",
        "\n    def scale(self):\n        return torch.ones(1, device='cuda')\n",
        "\n    def labels(self, y):\n        return y.type(torch.cuda.LongTensor)\n",
        "\n    def labels(self, y):\n        return y.type('torch.cuda.LongTensor')\n",
    ):
        source = FLAGGED.format(extra=extra)
        assert "return out.data.cpu().numpy()" in _tfd018(source), extra


def test_a_flag_set_twice_is_not_one_flag() -> None:
    source = FLAGGED.format(extra="\n    def flip(self):\n        self.gpu = not self.gpu\n")
    assert "return out.data.cpu().numpy()" in _tfd018(source)


SCRIPT = '''import torch
import torch.utils.data as data_utils


def evaluate(dataloader, model):
    seen = []
    for i, (images, labels) in enumerate(dataloader):
        model(images.to("cpu"))
        seen += list(labels.numpy())
    return seen


if __name__ == "__main__":
    net = torch.nn.Linear(4, 2).cuda()
    loader = data_utils.DataLoader(data_utils.TensorDataset(torch.randn(8, 4), torch.zeros(8)), batch_size=2)
    print(len(evaluate(loader, net)))
{extra}'''


def _apply(tmp_path: Path, extra: str = "", **others: str) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "evaluate.py").write_text(SCRIPT.format(extra=extra), encoding="utf-8")
    for name, text in others.items():
        (tmp_path / f"{name}.py").write_text(text, encoding="utf-8")
    assert run_cli("apply", ".", "--no-cache", "--select", "TFD018", cwd=tmp_path).returncode == 0
    return (tmp_path / "evaluate.py").read_text(encoding="utf-8")


def test_items_of_a_loader_every_call_passes_stay(tmp_path: Path) -> None:
    assert "seen += list(labels.numpy())" in _apply(tmp_path / "a")


def test_a_call_with_something_else_or_an_importer_rules_the_loader_out(tmp_path: Path) -> None:
    other_call = "    print(len(evaluate([(torch.ones(2).cuda(), torch.ones(2).cuda())], net)))\n"
    assert "seen += list(labels.cpu().numpy())" in _apply(tmp_path / "b", extra=other_call)
    assert "seen += list(labels.cpu().numpy())" in _apply(tmp_path / "c", report="from evaluate import evaluate\n")


LOADERS = '''import torch
from torch.utils.data import DataLoader


def collate(batch):
    return torch.stack([b[0] for b in batch]){move}, torch.tensor([b[1] for b in batch])


class BatchLoader(DataLoader):
    def __init__(self, *args, **kwargs):
        super(BatchLoader, self).__init__(*args, **kwargs)
        self.collate_fn = collate
'''

TESTING = '''import torch
from loaders import BatchLoader

if __name__ == "__main__":
    net = torch.nn.Linear(4, 2).cuda()
    loader = BatchLoader([(torch.ones(4), 1)] * 4, batch_size=2)
    for i, (batch) in enumerate(loader):
        inputs, lengths = batch
        out = net(inputs.cuda())
        print(out.data.cpu().numpy(), lengths.mul_(2).int().numpy())
'''


def _apply_project(root: Path, move: str) -> str:
    root.mkdir(parents=True)
    (root / "loaders.py").write_text(LOADERS.format(move=move), encoding="utf-8")
    (root / "testing.py").write_text(TESTING, encoding="utf-8")
    assert run_cli("apply", ".", "--no-cache", "--select", "TFD018", cwd=root).returncode == 0
    return (root / "testing.py").read_text(encoding="utf-8")


def test_a_loader_subclass_of_another_file_of_the_run_places_nothing(tmp_path: Path) -> None:
    """Its items are where its collate function put them (the CPU); named alone, the file shows
    nothing of the class and the `.cpu()` goes in."""
    assert "lengths.mul_(2).int().numpy()" in _apply_project(tmp_path / "a", move="")
    assert "lengths.mul_(2).int().cpu().numpy()" in _apply_project(tmp_path / "b", move=".cuda()")
    alone = tmp_path / "c"
    alone.mkdir()
    (alone / "testing.py").write_text(TESTING, encoding="utf-8")
    assert run_cli("apply", "testing.py", "--no-cache", "--select", "TFD018", cwd=alone).returncode == 0
    assert "lengths.mul_(2).int().cpu().numpy()" in (alone / "testing.py").read_text(encoding="utf-8")


def test_a_loader_subclass_of_this_file() -> None:
    source = LOADERS.format(move="") + '''

def evaluate(dataset):
    for images, labels in BatchLoader(dataset, batch_size=2):
        print(labels.numpy(), images.cuda())
'''
    assert _tfd018(source) == source
    moving = source.replace("class BatchLoader(DataLoader):", "class BatchLoader(DataLoader):\n    pin = torch.ones(1).cuda()")
    assert "labels.cpu().numpy()" in _tfd018(moving)

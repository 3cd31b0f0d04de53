"""TFD006 on a loss kept on the object from a constructor's parameter: ``self.criterion =
criterion`` in a ``Trainer``'s ``__init__``, every ``Trainer(..., nn.CrossEntropyLoss(), ...)`` of
the run (this file and the files that import it) passing a loss module. ``loss =
self.criterion(out, y)`` is then a 0-dim loss and ``total_loss += loss.data[0]`` a safe fix, in
the method that calls ``loss.backward()`` and in the one that does not (treelstm's ``test``).
Where a construction passes something else, spells the class otherwise, or a class derives from
it, the loss is not shown and that method's ``.data[0]`` stays for review."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, run_script

pytest.importorskip("torch")

TRAINER = '''import torch
from torch.autograd import Variable


class Trainer(object):
    def __init__(self, args, model, criterion, optimizer):
        super(Trainer, self).__init__()  # names the class: no construction
        self.args = args
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer

    def train(self, batches):
        total_loss = 0.0
        for x, y in batches:
            loss = self.criterion(self.model(Variable(x)), Variable(y))
            total_loss += loss.data[0]
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return total_loss / len(batches)

    def test(self, batches):
        total_loss = 0.0
        for x, y in batches:
            loss = self.criterion(self.model(Variable(x, volatile=True)), Variable(y))
            total_loss += loss.data[0]
        return total_loss / len(batches)
'''

MAIN = '''import torch
import torch.nn as nn

from trainer import Trainer


def main():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(None, model, {criterion}, optimizer)
    batches = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(3)]
    print("%.4f %.4f" % (trainer.train(batches), trainer.test(batches)))


if __name__ == "__main__":
    main()
'''


def _project(root: Path, criterion: str = "nn.CrossEntropyLoss()", **others: str) -> Path:
    root.mkdir(parents=True)
    (root / "trainer.py").write_text(TRAINER, encoding="utf-8")
    (root / "main.py").write_text(MAIN.replace("{criterion}", criterion), encoding="utf-8")
    for name, text in others.items():
        (root / f"{name}.py").write_text(text, encoding="utf-8")
    return root


def _test_line(root: Path) -> str:
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    return next(line for line in out.splitlines() if line.startswith("trainer.py:27:") and "TFD006" in line)


def test_a_loss_every_construction_passes_is_a_safe_fix_and_the_script_runs(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    before = run_script("main.py", cwd=root)
    assert before.returncode != 0 and "invalid index of a 0-dim tensor" in before.stderr, before.stderr
    assert "[*]" in _test_line(root)
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert (root / "trainer.py").read_text(encoding="utf-8").count("total_loss += loss.item()") == 2
    after = run_script("main.py", cwd=root)
    assert after.returncode == 0, after.stderr
    trained, tested = (float(v) for v in after.stdout.split())
    assert 0 < trained < 5 and 0 < tested < 5


@pytest.mark.parametrize("criterion, others", [
    ("nn.Linear(2, 1)", {}),  # not a loss module
    ("nn.CrossEntropyLoss()", {"other": "from trainer import Trainer\nTrainer(None, None, print, None)\n"}),
    ("nn.CrossEntropyLoss()", {"other": "import trainer\nmake = trainer.Trainer\n"}),  # handed on
    ("nn.CrossEntropyLoss()", {"other": "from trainer import Trainer\n\n\nclass Mine(Trainer):\n    pass\n"}),
    ("nn.CrossEntropyLoss()", {"other": "from trainer import Trainer\nTrainer(**{})\n"}),
])
def test_where_a_construction_may_pass_something_else_the_loss_is_not_shown(tmp_path: Path, criterion: str, others: dict) -> None:
    root = _project(tmp_path / "p", criterion, **others)
    line = _test_line(root)
    assert "[*]" not in line and "manual review" in line, line


def _package(root: Path, init: str) -> Path:
    """treelstm's layout: the class in ``pkg/trainer.py``, handed on by ``pkg/__init__.py``."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "trainer.py").write_text(TRAINER, encoding="utf-8")
    (root / "pkg" / "__init__.py").write_text(init, encoding="utf-8")
    (root / "main.py").write_text(MAIN.replace("{criterion}", "nn.CrossEntropyLoss()").replace("from trainer", "from pkg"), encoding="utf-8")
    return root


def test_a_class_a_package_imports_to_hand_on_is_followed_to_its_constructions(tmp_path: Path) -> None:
    root = _package(tmp_path / "p", "from .trainer import Trainer\n\n__all__ = [Trainer]\n")  # objects, not names
    assert run_script("main.py", cwd=root).returncode != 0
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert (root / "pkg" / "trainer.py").read_text(encoding="utf-8").count("total_loss += loss.item()") == 2
    after = run_script("main.py", cwd=root)
    assert after.returncode == 0, after.stderr


@pytest.mark.parametrize("init", [
    "from .trainer import Trainer\n\nDEFAULT = Trainer(None, None, print, None)\n",  # the package constructs one
    "from .trainer import Trainer\n\nmake = Trainer\n",  # and hands the class on under another name
    "from .trainer import Trainer\nTrainer = None\n",  # bound twice: main's `Trainer` is not the class
])
def test_a_package_that_uses_the_class_it_hands_on_leaves_the_loss_unshown(tmp_path: Path, init: str) -> None:
    root = _package(tmp_path / "p", init)
    out = run_cli("check", ".", "--no-cache", cwd=root).stdout.decode()
    line = next(line for line in out.splitlines() if line.startswith("pkg/trainer.py:27:") and "TFD006" in line)
    assert "[*]" not in line and "manual review" in line, line

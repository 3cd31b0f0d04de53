"""A script that no file of the run imports: its functions are called from it alone, so a loss
that every call in the file passes to a parameter is a loss (TFD006's ``loss.data[0]`` through
``def test(loader, model, criterion)``), a safe fix. Imported by another file of the run, the
same site stays unsafe. The run is the project (named alone, a script is its own project). The
script is executed before and after."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, run_script
from torchfix_device.facts.star_imports import Resolver
from torchfix_device.run.runner import unimported_files
from torchfix_device.facts.project_classes import imported_modules
from torchfix_device.facts.project_attributes import resolved_imports

TRAIN = '''import torch
import torch.nn as nn


def evaluate(batches, model, criterion):
    total = 0.0
    for inputs, targets in batches:
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        total += loss.data[0]
    return total / len(batches)


def report(batches, model, criterion):
    return evaluate(batches, model, criterion)


def get_criterion():
    return nn.CrossEntropyLoss()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    batches = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(3)]
    print("%.4f" % evaluate(batches, model, nn.CrossEntropyLoss()))
    print("%.4f" % report(batches, model, get_criterion()))
'''


def _project(root: Path, **others: str) -> Path:
    root.mkdir(parents=True)
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    for name, text in others.items():
        (root / f"{name}.py").write_text(text, encoding="utf-8")
    return root


def _verdict(root: Path, *paths: str) -> str:
    out = run_cli("check", *paths, "--no-cache", cwd=root).stdout.decode()
    return next(l for l in out.splitlines() if "TFD006" in l)


def test_a_loss_passed_by_every_call_of_a_script_no_file_imports_is_a_safe_fix_and_the_script_runs(tmp_path: Path) -> None:
    """Every call of ``evaluate`` passes a loss module: built there, or a parameter of ``report``
    every call of which passes what ``get_criterion()`` builds."""
    root = _project(tmp_path / "p")
    before = run_script("train.py", cwd=root)
    assert before.returncode != 0 and "invalid index of a 0-dim tensor" in before.stderr, before.stderr
    assert "[*]" in _verdict(root, ".")
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    assert "        total += loss.item()\n" in (root / "train.py").read_text(encoding="utf-8")
    after = run_script("train.py", cwd=root)
    assert after.returncode == 0, after.stderr
    direct, passed_on = after.stdout.split()  # the loss reaches `evaluate` directly and through `report`
    assert 0 < float(direct) < 5 and passed_on == direct


@pytest.mark.parametrize("spelt", ["from train import evaluate\n", "import train\n", "import importlib\n"])
def test_where_another_file_may_call_the_function_the_fix_stays_unsafe(tmp_path: Path, spelt: str) -> None:
    root = _project(tmp_path / "p", report=spelt)
    line = _verdict(root, ".")
    assert "[*]" not in line and "a call from another file may pass something else" in line, line
    assert "[*]" in _verdict(root, "train.py")  # named alone: the run is the project


def test_the_files_no_file_of_the_run_imports(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", models="import torch\n", main="import models\n", loader="import importlib\n")
    outside = _project(tmp_path / "q")
    files = [root / "train.py", root / "models.py", root / "main.py", root / "loader.py", outside / "train.py"]
    resolver = Resolver([root])
    absolute = {resolver.absolute(p): p.read_bytes() for p in files}
    shown = {resolver.absolute(p): str(p) for p in files}
    resolved = resolved_imports({p: imported_modules(d) for p, d in absolute.items()}, resolver.module_files)
    found = unimported_files(absolute, shown, resolved, resolver)
    # loader.py imports dynamically: it may import any file of its folder, not q/train.py
    assert found == {str(root / "loader.py"), str(outside / "train.py")}
    plain = {p: d for p, d in absolute.items() if p.name != "loader.py"}
    resolved = resolved_imports({p: imported_modules(d) for p, d in plain.items()}, resolver.module_files)
    found = unimported_files(plain, shown, resolved, resolver)
    assert found == {str(root / "train.py"), str(root / "main.py"), str(outside / "train.py")}


def test_a_file_gaining_an_importer_changes_the_cached_answer(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "pyproject.toml").write_text("[tool.torchfix-device]\n", encoding="utf-8")  # the cache lives here

    def verdict() -> str:
        out = run_cli("check", ".", cwd=root).stdout.decode()
        return next(l for l in out.splitlines() if "TFD006" in l)

    assert "[*]" in verdict()
    (root / "report.py").write_text("from train import evaluate\n", encoding="utf-8")  # train.py is unchanged
    assert "[*]" not in verdict()

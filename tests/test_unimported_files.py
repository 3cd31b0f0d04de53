"""A script that no file of the run imports: its functions are called from it alone, so a loss
that every call in the file passes to a parameter is a loss (TFD006's ``loss.data[0]`` through
``def test(loader, model, criterion)``), a safe fix. Imported by another file of the run, the
same site is safe where every call of that file passes a loss too, and stays unsafe where one
may pass something else. The run is the project (named alone, a script is its own project). The
script is executed before and after."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, run_script
from torchfix_device.facts.star_imports import Resolver
from torchfix_device.run.run_facts import unimported_files
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


@pytest.mark.parametrize("spelt", [
    "import torch.nn as nn\nfrom train import evaluate\nevaluate([], nn.Linear(3, 2), nn.Linear(2, 1))\n",  # not a loss
    "import train\ntrain.evaluate([], None, len)\n",
    "from train import evaluate as ev\n",  # its calls would spell `ev`
    "import train\nprint(train.evaluate)\n",  # not called: passed on
    "import importlib\n",  # may import train and call anything
    # Python 2 (read through its token fixes): what it passes is no loss module
    "import torch.nn as nn\nimport train\nprint 'evaluating'\ntrain.evaluate([], None, nn.Linear(2, 1))\n",
    "import train\nx = train.evaluate([], None, len).cuda(async=True)\n",  # async=: the same
])
def test_where_another_file_may_call_the_function_the_fix_stays_unsafe(tmp_path: Path, spelt: str) -> None:
    root = _project(tmp_path / "p", report=spelt)
    line = _verdict(root, ".")
    assert "[*]" not in line and "a call from another file may pass something else" in line, line
    assert "[*]" in _verdict(root, "train.py")  # named alone: the run is the project


@pytest.mark.parametrize("spelt", [
    "from train import evaluate\n",  # imported, never called
    "import train\n",
    "import torch.nn as nn\nimport train\ncriterion = nn.NLLLoss()\ntrain.evaluate([], None, criterion)\n",
    "import torch.nn as nn\nfrom train import report\nreport([], None, nn.CrossEntropyLoss())\n",  # through `report`
    "import torch.nn as nn\nimport train\nprint 'evaluating'\ntrain.evaluate([], None, nn.NLLLoss())\n",  # Python 2
    "import torch.nn as nn\nfrom train import report\nprint report([], None, nn.CrossEntropyLoss()),\n",
])
def test_where_every_call_of_the_run_passes_a_loss_the_fix_is_safe(tmp_path: Path, spelt: str) -> None:
    """The calls of the other files of the run are read too (the run is the project): where none
    of them passes anything but a loss module, the loss is shown."""
    root = _project(tmp_path / "p", report=spelt)
    assert "[*]" in _verdict(root, "."), _verdict(root, ".")


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
    assert "[*]" in verdict()  # an importer that never calls it: every call still passes a loss
    (root / "report.py").write_text("from train import evaluate\nevaluate([], None, len)\n", encoding="utf-8")
    assert "[*]" not in verdict()  # the cached answer follows the importer's code


ALIASES = '''import torch

USE_CUDA = torch.cuda.is_available()
FloatTensor = torch.cuda.FloatTensor if USE_CUDA else torch.FloatTensor
LongTensor = torch.cuda.LongTensor if USE_CUDA else torch.LongTensor
ByteTensor = torch.cuda.ByteTensor if USE_CUDA else torch.ByteTensor

ids = LongTensor([3, 1, 2])
print(ids.sum().item(), ids.dtype, ids.device)
'''


def test_tensor_type_aliases_nothing_reads_go_from_a_script_no_file_imports(tmp_path: Path) -> None:
    """TFD008: the aliases nothing reads go with the one that is read; the script prints the
    same. Where another file imports the module, the unread alias may be read there: it stays."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "prep.py").write_text(ALIASES, encoding="utf-8")
    before = run_script("prep.py", cwd=root)
    assert before.returncode == 0, before.stderr
    assert run_cli("apply", ".", "--no-cache", cwd=root).returncode == 0
    text = (root / "prep.py").read_text(encoding="utf-8")
    assert "FloatTensor" not in text and "ByteTensor" not in text and "torch.cuda.LongTensor" not in text, text
    after = run_script("prep.py", cwd=root)
    assert after.returncode == 0 and after.stdout == before.stdout, after.stderr

    shared = tmp_path / "q"
    shared.mkdir()
    (shared / "prep.py").write_text(ALIASES, encoding="utf-8")
    (shared / "use.py").write_text("from prep import FloatTensor\nprint(FloatTensor)\n", encoding="utf-8")
    out = run_cli("check", ".", "--no-cache", cwd=shared).stdout.decode()
    assert "`FloatTensor` is a CUDA tensor type alias that is never called: remove it" in out, out
    assert "`ByteTensor` is a CUDA tensor type alias that is never called" in out
    assert run_cli("apply", ".", "--no-cache", cwd=shared).returncode == 0
    kept = (shared / "prep.py").read_text(encoding="utf-8")
    assert "FloatTensor = torch.cuda.FloatTensor if USE_CUDA else torch.FloatTensor" in kept
    assert run_script("use.py", cwd=shared).returncode == 0


def test_importable_answers_the_plain_rule_for_every_pair_of_files(tmp_path: Path) -> None:
    """``Resolver.importable`` (remembered per folder of roots, each file's folders read once):
    a file is importable from another where it lies under one of the importer's roots at a path
    of identifiers, whichever importer asks first and however often."""
    root = tmp_path / "p"
    names = ["a.py", "pkg/__init__.py", "pkg/b.py", "pkg/sub/c.py", "my-dir/d.py", "pkg/my-file.py", "pkg/sub/deep/e.py"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("import importlib\n", encoding="utf-8")
    outside = tmp_path / "q" / "f.py"
    outside.parent.mkdir()
    outside.write_text("x = 1\n", encoding="utf-8")
    files = [root / n for n in names] + [outside]
    resolver = Resolver([root])

    def plain(importer: Path, path: Path) -> bool:
        path = resolver.absolute(path)
        for folder in resolver.roots_of(resolver.absolute(importer)):
            if folder in path.parents and all(p.isidentifier() for p in path.relative_to(folder).with_suffix("").parts):
                return True
        return False

    for _ in range(2):  # the second round is answered from what the first remembered
        for importer in files:
            can = resolver.importable(importer)
            assert {p for p in files if can(p)} == {p for p in files if plain(importer, p)}, importer
    assert resolver.importable(root / "pkg" / "b.py")(root / "pkg" / "sub" / "c.py")
    assert not resolver.importable(root / "a.py")(root / "my-dir" / "d.py")
    assert not resolver.importable(root / "a.py")(outside)

"""The engine over a small real corpus: the installed torch's ``nn/modules`` and ``optim``.

Runs ``scripts/corpus_check.py``'s checks (on a temporary copy): no crash, rewrites compile and
touch only statements with a fixed finding, a second run changes nothing, files without
findings stay byte-identical. About two minutes on two cores.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def _corpus_check():
    spec = importlib.util.spec_from_file_location("corpus_check", ROOT / "scripts" / "corpus_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def _torch_folder() -> Path:
    torch = pytest.importorskip("torch", reason="the corpus is the installed torch package")
    return Path(torch.__file__).parent


def test_torch_nn_modules_and_optim(tmp_path: Path) -> None:
    torch_dir = _torch_folder()
    sources = [torch_dir / "nn" / "modules", torch_dir / "optim"]
    missing = [str(s) for s in sources if not s.is_dir()]
    if missing:
        pytest.skip(f"corpus missing from the installed torch: {missing}")
    corpus = tmp_path / "corpus"
    for source in sources:
        shutil.copytree(source, corpus / source.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    check = _corpus_check()
    report = check.check_tree(corpus, "torch nn/modules + optim")
    print(check.format_reports([report]))
    assert report.files >= 40
    assert report.violations == []
    assert not report.failed, report.failed  # torch's own code parses


def test_bundled_legacy_project_exercises_every_check() -> None:
    """The torch corpus has nothing to rewrite; the bundled legacy project has: its rewrites go
    through the compile, statement-scope, second-run and byte checks."""
    check = _corpus_check()
    report = check.check_tree(ROOT / "examples" / "legacy_project", "legacy_project")
    assert report.changed >= 5 and sum(report.fixed.values()) >= 15
    assert report.violations == [] and not report.failed


def test_statement_scope_check_catches_a_change_without_a_finding() -> None:
    check = _corpus_check()
    old = "import torch\nx = torch.load(p)\nif flag:\n    y = 1\nfrom torch.autograd import Variable\n"
    new = "import torch\nx = torch.load(p, map_location=device)\nif flag:\n    y = 2\n"
    # the `if` header is unchanged, its body statement is not; the dropped import is bookkeeping
    assert check.unexplained_changes(old, new, fix_lines={2}, other_lines={4}) == [
        "statement at lines 4-4 changed without a fixed finding (only a manual-review finding there)",
    ]
    assert check.unexplained_changes(old, new, fix_lines={2, 4}, other_lines=set()) == []
    assert check.unexplained_changes(old, old + "z = 1\n", fix_lines=set(), other_lines=set()) == [
        "statements added at new lines 6-6 in a file without a fix"
    ]

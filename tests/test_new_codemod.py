"""A new codemod is one file: dropped into ``codemods/`` of a copy of the package, a toy codemod
is found by the catalog, asked by stage 1, run by the engine, cached, listed by ``rules``,
documented by ``explain`` and applied by ``apply`` — with nothing registered anywhere else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import torchfix_device

TOY = '''
import ast
import os

import libcst as cst
import libcst.matchers as m

from torchfix_device.codemods.base import Codemod


class ToySpam(Codemod):
    """Calls of ``spam`` become calls of ``eggs``.

    ## What it does
    Rewrites `spam(...)` to `eggs(...)`.

    ## Why is this bad?
    In this toy world `spam` is deprecated.

    ## Example
    ```python
    spam(1)
    ```

    ## Use instead
    ```python
    eggs(1)
    ```

    ## Not rewritten
    Anything that is not a call of the name `spam`.

    ## Fix safety
    Safe: a toy.
    """

    code = "TFD900"
    name = "toy-spam"
    summary = "spam() is deprecated: call eggs()"
    safe = True
    triggers = ("spam",)

    @classmethod
    def sites(cls, facts):
        with open(os.environ["TOY_LOG"], "a", encoding="utf-8") as log:
            log.write("stage 1 asked\\n")
        return (n for n, _, _ in facts.contexts if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "spam")

    def leave_Call(self, original_node, updated_node):
        if m.matches(original_node.func, m.Name("spam")) and self.report(original_node, "spam() is deprecated: call eggs()"):
            return updated_node.with_changes(func=cst.Name("eggs"))
        return updated_node
'''


@pytest.fixture
def package_with_toy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the installed package with the toy codemod added as one file, and the
    environment that runs the CLI from it."""
    site = tmp_path / "site"
    source = Path(torchfix_device.__file__).parent
    shutil.copytree(source, site / "torchfix_device", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "torchfix_device" / "codemods" / "toy_spam.py").write_text(TOY, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "TOY_LOG": str(tmp_path / "toy.log"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return tmp_path, env


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchfix_device", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _asked(tmp: Path) -> int:
    log = tmp / "toy.log"
    return log.read_text(encoding="utf-8").count("stage 1 asked") if log.exists() else 0


def test_a_toy_codemod_in_one_file_goes_through_every_stage(package_with_toy) -> None:
    tmp, env = package_with_toy
    project = tmp / "project"
    project.mkdir()
    (project / "uses.py").write_text("def f():\n    return spam(1)  # a call\n", encoding="utf-8")
    (project / "mentions.py").write_text("# spam is only mentioned here\nx = 1\n", encoding="utf-8")

    rules = _cli(env, project, "rules")
    assert rules.returncode == 0, rules.stderr
    assert "TFD900" in rules.stdout and "toy-spam" in rules.stdout

    explain = _cli(env, project, "explain", "toy-spam")
    assert explain.returncode == 0, explain.stderr
    assert "In this toy world" in explain.stdout and "eggs(1)" in explain.stdout

    check = _cli(env, project, "check", "--select", "TFD900", ".")
    assert check.returncode == 1, check.stderr
    assert "uses.py:2:12: TFD900 [*] spam() is deprecated: call eggs()" in check.stdout
    assert "mentions.py" not in check.stdout
    asked = _asked(tmp)
    assert asked >= 2  # stage 1 asked it about both files holding its trigger

    again = _cli(env, project, "check", "--select", "TFD900", ".")
    assert again.stdout == check.stdout and again.returncode == 1
    assert _asked(tmp) == asked  # both answers came from the cache: stage 1 was not asked again

    diff = _cli(env, project, "apply", "--diff", "--select", "TFD900", ".")
    assert "-    return spam(1)  # a call" in diff.stdout and "+    return eggs(1)  # a call" in diff.stdout

    applied = _cli(env, project, "apply", "--select", "TFD900", ".")
    assert applied.returncode == 0, applied.stderr
    assert (project / "uses.py").read_text(encoding="utf-8") == "def f():\n    return eggs(1)  # a call\n"
    assert (project / "mentions.py").read_text(encoding="utf-8") == "# spam is only mentioned here\nx = 1\n"
    assert _cli(env, project, "check", "--select", "TFD900", ".").returncode == 0

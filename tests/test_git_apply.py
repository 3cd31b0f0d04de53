"""``torchfix-device apply --diff . > fix.patch && git apply fix.patch`` works, and gives exactly
what ``torchfix-device apply`` writes in place (the ``--diff`` contract in the README's Usage
section: a plain unified diff with ``a/`` ``b/`` prefixes that ``git apply`` takes)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, console_script, run_cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LEGACY = """\
import torch
import torch.nn as nn


def train(model, loader, optimizer):
    criterion = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print("step", step, "loss", loss.data[0])


def resume(path):
    return torch.load(path)
"""

CHECKPOINT = 'import torch\n\nweights = torch.load("weights.pth")\n'

FILES: dict[str, bytes] = {
    "train.py": LEGACY.encode(),
    "pkg/sub/checkpoint.py": CHECKPOINT.encode(),
    "pkg/__init__.py": b"",
    "crlf.py": LEGACY.replace("\n", "\r\n").encode(),
    "no_newline.py": LEGACY.rstrip("\n").encode(),
    "crlf_no_newline.py": CHECKPOINT.rstrip("\n").replace("\n", "\r\n").encode(),
    "bom.py": b"\xef\xbb\xbf" + CHECKPOINT.encode(),
    "latin1.py": ("# -*- coding: latin-1 -*-\n# modèle entraîné\n" + CHECKPOINT).encode("latin-1"),
    # a form feed (page break) and U+2028 inside a comment are not line ends for git
    "page_break.py": "import torch\n\x0c\n# note\u2028still the comment\nstate = torch.load('a.pt')\n".encode(),
    "with space.py": CHECKPOINT.encode(),
    "résumé.py": CHECKPOINT.encode(),
    "clean.py": b"import os\r\nprint(os.sep)",
}
CHANGED = sorted(set(FILES) - {"pkg/__init__.py", "clean.py"})


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent),
    }
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr.decode()}"
    return out


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for name, content in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(content)
    git(repo, "init", "-q")
    git(repo, "config", "core.autocrlf", "false")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "legacy code")
    return repo


def _tree(repo: Path) -> dict[str, bytes]:
    return {name: (repo / name).read_bytes() for name in FILES}


def _diff_to_file(repo: Path, patch: Path, where: Path | None = None) -> subprocess.CompletedProcess:
    """Exactly what the README tells users to type, through a shell redirect."""
    command = f"{console_script()[0]} apply --diff . > {patch}"
    return subprocess.run(["bash", "-c", command], cwd=where or repo, capture_output=True, env={**os.environ, "NO_COLOR": "1"})


def test_git_apply_gives_what_apply_writes(repo: Path) -> None:
    patch = repo.parent / "fix.patch"
    out = _diff_to_file(repo, patch)
    assert out.returncode == 1, out.stderr.decode()  # pending changes, as ruff's --diff
    assert b"Traceback" not in out.stderr
    assert _tree(repo) == FILES  # --diff wrote nothing
    text = patch.read_bytes()
    assert text.count(b"\n--- a/") + text.startswith(b"--- a/") == len(CHANGED)
    assert b"\x1b[" not in text
    assert b"--- a/with space.py\t\n+++ b/with space.py\t\n" in text  # as git writes it, for GNU patch

    git(repo, "apply", "--check", str(patch))
    git(repo, "apply", str(patch))
    patched = _tree(repo)
    changed = sorted(name for name in FILES if patched[name] != FILES[name])
    assert changed == CHANGED

    git(repo, "checkout", "-q", "--", ".")
    assert _tree(repo) == FILES
    applied = run_cli("apply", ".", cwd=repo)
    assert applied.returncode == 0, applied.stderr.decode()
    assert _tree(repo) == patched

    # the byte-level properties the patch had to carry
    assert patched["crlf.py"].count(b"\r\n") == patched["crlf.py"].count(b"\n")
    assert not patched["no_newline.py"].endswith(b"\n")
    assert patched["crlf_no_newline.py"].endswith(b"map_location=device)")
    assert patched["bom.py"].startswith(b"\xef\xbb\xbf") and patched["bom.py"].count(b"\xef\xbb\xbf") == 1
    assert "modèle entraîné".encode("latin-1") in patched["latin1.py"]
    assert b"\x0c\n" in patched["page_break.py"] and "\u2028".encode() in patched["page_break.py"]
    assert b"loss.item()" in patched["train.py"] and b"map_location=device" in patched["pkg/sub/checkpoint.py"]

    # and the tree it gives needs nothing more
    assert run_cli("apply", "--diff", ".", cwd=repo).stdout == b""


def test_patch_from_a_subfolder_applies_there(repo: Path) -> None:
    """Paths are relative to the top of the work tree, as git writes them; ``git apply`` in the
    subfolder (or at the top) agrees."""
    patch = repo.parent / "sub.patch"
    assert _diff_to_file(repo, patch, where=repo / "pkg").returncode == 1
    assert patch.read_bytes().startswith(b"--- a/pkg/sub/checkpoint.py\n+++ b/pkg/sub/checkpoint.py\n")
    git(repo, "apply", "--check", str(patch))
    git(repo / "pkg", "apply", str(patch))
    assert b"map_location=device" in (repo / "pkg/sub/checkpoint.py").read_bytes()
    assert (repo / "train.py").read_bytes() == FILES["train.py"]


def test_file_names_git_must_quote(repo: Path) -> None:
    """A tab in a name ends an unquoted name for ``git apply``: the header is C-quoted as git does."""
    name = "tab\tname.py"
    (repo / name).write_text(CHECKPOINT)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "odd name")
    patch = repo.parent / "fix.patch"
    assert _diff_to_file(repo, patch).returncode == 1
    assert b'--- "a/tab\\tname.py"\n+++ "b/tab\\tname.py"\n' in patch.read_bytes()
    git(repo, "apply", "--check", str(patch))
    git(repo, "apply", str(patch))
    assert b"map_location=device" in (repo / name).read_bytes()


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_gnu_patch_accepts_it_too(repo: Path) -> None:
    patch = repo.parent / "fix.patch"
    assert _diff_to_file(repo, patch).returncode == 1
    out = subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch)], cwd=repo, capture_output=True)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def _bash(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, env={**os.environ, "NO_COLOR": "1"})


def test_the_patch_of_every_fixture_and_a_notebook_applies_from_the_repository_root(tmp_path: Path) -> None:
    """Every fixture (unsafe fixes too), the example project and a notebook in one repository;
    the patch is made from a subfolder, and ``git apply --check`` takes it at the top."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    repo = tmp_path / "repo"
    sources = sorted((ROOT / "tests" / "fixtures").glob("*/*.in.py")) + sorted((ROOT / "examples").rglob("*.py"))
    for source in sources:
        target = repo / "src" / source.parent.name / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    nb.cells = [new_code_cell("import torch"), new_code_cell("%time x = 1\nmodel = torch.load('m.pt').cuda()")]
    nbformat.write(nb, str(repo / "src" / "train.ipynb"))
    (repo / "top.py").write_text(CHECKPOINT)  # outside the folder the patch is made from
    git(repo, "init", "-q")
    git(repo, "config", "core.autocrlf", "false")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "fixtures")
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    patch = tmp_path / "all.patch"
    out = _bash(f"{console_script()[0]} apply --diff --unsafe-fixes --no-cache . ../top.py > {patch}", repo / "src")
    assert out.returncode == 1, out.stderr.decode()
    text = patch.read_bytes()
    headers = [line for line in text.splitlines() if line.startswith((b"--- ", b"+++ "))]
    assert len(headers) >= 2 * 40  # the fixtures that change, the notebook and top.py
    assert all(line[4:6] in (b"a/", b"b/", b'"a', b'"b') and b"/../" not in line and b"//" not in line for line in headers)
    assert b"--- a/src/train.ipynb\n" in text and b"--- a/top.py\n" in text
    git(repo, "apply", "--check", str(patch))
    git(repo, "apply", str(patch))
    patched = {p: p.read_bytes() for p in before}
    assert patched != before
    git(repo, "checkout", "-q", "--", ".")
    assert {p: p.read_bytes() for p in before} == before
    applied = run_cli("apply", "--unsafe-fixes", ".", "../top.py", cwd=repo / "src")
    assert applied.returncode == 0, applied.stderr.decode()
    assert {p: p.read_bytes() for p in before} == patched  # the patch gives exactly what apply writes


def test_outside_git_a_file_beyond_the_current_folder_gets_a_root_that_holds_it(tmp_path: Path) -> None:
    """No ``a/../x`` and no ``a//tmp/x``: the paths are relative to the folder holding every
    changed file, and the note says where to apply the patch."""
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    (tmp_path / "here" / "a.py").write_text(CHECKPOINT)
    (tmp_path / "there" / "b.py").write_text(CHECKPOINT)
    outside = tmp_path / "there" / "b.py"
    out = run_cli("apply", "--diff", "a.py", str(outside), "../there/b.py", cwd=tmp_path / "here")
    assert out.returncode == 1
    text = out.stdout
    assert text.count(b"--- a/here/a.py\n") == 1 and text.count(b"--- a/there/b.py\n") == 1
    assert f"the patch paths are relative to {tmp_path.resolve()}" in out.stderr.decode()
    (tmp_path / "fix.patch").write_bytes(text)
    git(tmp_path, "apply", "fix.patch")  # outside a repository, git apply works like patch -p1
    assert b"map_location=device" in (tmp_path / "there" / "b.py").read_bytes()
    assert b"map_location=device" in (tmp_path / "here" / "a.py").read_bytes()

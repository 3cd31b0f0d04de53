"""Git safety (item 10, the model: ``cargo fix``), through the installed console script."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)\n'
)


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)
    return out.stdout.decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("clean.py", "modified.py", "staged.py", "ignored.py"):
        (repo / name).write_text(LEGACY)
    (repo / ".gitignore").write_text("ignored.py\n")
    git(repo, "init", "-q")
    git(repo, "add", "clean.py", "modified.py", "staged.py", ".gitignore")
    git(repo, "commit", "-qm", "legacy")
    (repo / "modified.py").write_text(LEGACY + "# work in progress\n")
    (repo / "staged.py").write_text(LEGACY + "# staged work\n")
    git(repo, "add", "staged.py")
    (repo / "untracked.py").write_text(LEGACY)
    return repo


def test_apply_refuses_files_git_cannot_restore(repo: Path) -> None:
    before = {p.name: p.read_text() for p in repo.glob("*.py")}
    out = run_cli("apply", ".", cwd=repo)
    stderr = out.stderr.decode()
    assert out.returncode == 1, stderr
    assert (repo / "clean.py").read_text() == FIXED  # committed: rewritten
    for name, why in (("modified.py", "has uncommitted changes"), ("staged.py", "has uncommitted changes"),
                      ("untracked.py", "is not tracked by git")):
        assert (repo / name).read_text() == before[name], name
        assert f"refused: {name}: {why}; not rewritten" in stderr, stderr
    assert stderr.count("--allow-dirty") == 1, "what to do, said once"
    assert "hint: commit (or stash) the refused files and run again" in stderr
    assert (repo / "ignored.py").read_text() == before["ignored.py"]  # .gitignore: not taken at all
    assert "ignored.py" not in stderr.replace("1 .gitignore", "")
    assert "4 files scanned, 1 changed, 0 failed, 3 refused (uncommitted changes), 1 skipped (1 .gitignore)" in stderr
    assert "not inside a git work tree" not in stderr


def test_an_ignored_file_taken_anyway_is_refused_too(repo: Path) -> None:
    out = run_cli("apply", "--no-respect-gitignore", ".", cwd=repo)
    stderr = out.stderr.decode()
    assert out.returncode == 1, stderr
    assert "refused: ignored.py: is ignored by git (not tracked); not rewritten" in stderr, stderr
    assert (repo / "ignored.py").read_text() == LEGACY
    assert "5 files scanned, 1 changed, 0 failed, 4 refused (uncommitted changes)" in stderr


def test_a_dirty_file_with_nothing_to_fix_does_not_block_the_run(repo: Path) -> None:
    for name in ("modified.py", "staged.py", "untracked.py", "ignored.py"):
        (repo / name).write_text("import os\n")
    out = run_cli("apply", ".", cwd=repo)
    assert out.returncode == 0, out.stderr.decode()
    assert (repo / "clean.py").read_text() == FIXED
    git(repo, "checkout", "--", "clean.py")  # and git gives the original back
    assert (repo / "clean.py").read_text() == LEGACY


def test_allow_dirty_rewrites_every_file(repo: Path) -> None:
    out = run_cli("apply", "--allow-dirty", ".", cwd=repo)
    assert out.returncode == 0, out.stderr.decode()
    for name in ("clean.py", "untracked.py"):
        assert (repo / name).read_text() == FIXED
    assert (repo / "modified.py").read_text() == FIXED + "# work in progress\n"
    assert (repo / "ignored.py").read_text() == LEGACY  # still left out by .gitignore
    out = run_cli("apply", "--allow-dirty", "--no-respect-gitignore", ".", cwd=repo)
    assert out.returncode == 0, out.stderr.decode()
    assert (repo / "ignored.py").read_text() == FIXED


def test_a_named_file_and_a_subfolder_are_checked_too(repo: Path) -> None:
    (repo / "pkg").mkdir()
    (repo / "pkg" / "new.py").write_text(LEGACY)
    out = run_cli("apply", "modified.py", "pkg", cwd=repo)
    stderr = out.stderr.decode()
    assert out.returncode == 1
    assert "refused: modified.py: has uncommitted changes" in stderr
    assert "refused: pkg/new.py: is not tracked by git" in stderr
    assert (repo / "pkg" / "new.py").read_text() == LEGACY


UNSAFE_TOO = LEGACY + "\n\ndef move(x, gpu_id):\n    return x.cuda(gpu_id)\n"  # an unsafe fix: gpu_id may be a device


def test_apply_then_unsafe_fixes_refuses_the_first_runs_changes_and_counts_them_apart(tmp_path: Path) -> None:
    """Issue 33, item 9: ``apply`` then ``apply --unsafe-fixes`` meets the first run's own
    uncommitted rewrites: a refusal, not a failure; what to do in one line; exit 1 (rewrites
    pending, as ``--diff``), 0 with ``--exit-zero``. Committed in between, the second run
    rewrites."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for index in range(4):
        (repo / f"m{index}.py").write_text(UNSAFE_TOO)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "legacy")
    first = run_cli("apply", ".", cwd=repo)
    assert first.returncode == 0, first.stderr.decode()
    safe = (repo / "m0.py").read_text()
    assert safe != UNSAFE_TOO and "x.cuda(gpu_id)" in safe
    second = run_cli("apply", "--unsafe-fixes", ".", cwd=repo)
    stderr = second.stderr.decode()
    assert second.returncode == 1, stderr
    assert "4 files scanned, 0 changed, 0 failed, 4 refused (uncommitted changes)" in stderr, stderr
    assert "failed:" not in stderr and "4 failed" not in stderr
    hints = [line for line in stderr.splitlines() if "--allow-dirty" in line]
    assert hints == ["hint: commit (or stash) the refused files and run again, so that git can give them back; "
                     "or pass --allow-dirty to rewrite them anyway"], stderr
    assert all((repo / f"m{i}.py").read_text() == safe for i in range(4))
    quiet = run_cli("apply", "--unsafe-fixes", "--exit-zero", ".", cwd=repo)
    assert quiet.returncode == 0, quiet.stderr.decode()
    git(repo, "commit", "-qam", "safe fixes")
    third = run_cli("apply", "--unsafe-fixes", ".", cwd=repo)
    assert third.returncode == 0, third.stderr.decode()
    assert 'x.to(torch.device("cuda", gpu_id))' in (repo / "m0.py").read_text()
    assert "4 changed" in third.stderr.decode()


def test_diff_needs_no_clean_tree(repo: Path) -> None:
    out = run_cli("apply", "--diff", ".", cwd=repo)
    assert out.returncode == 1, out.stderr.decode()  # pending changes (issue 23: as ruff's --diff)
    assert out.stdout.count(b"\n--- a/") + out.stdout.startswith(b"--- a/") == 4  # ignored.py left out
    assert b"uncommitted" not in out.stderr and b"git work tree" not in out.stderr


def test_outside_git_apply_says_it_is_not_protected(tmp_path: Path) -> None:
    if subprocess.run(["git", "rev-parse"], cwd=tmp_path, capture_output=True).returncode == 0:
        pytest.skip("the temporary folder lies inside a git work tree on this machine")
    (tmp_path / "m.py").write_text(LEGACY)
    out = run_cli("apply", ".", cwd=tmp_path)
    stderr = out.stderr.decode()
    assert out.returncode == 0, stderr
    assert "warning: this path is not inside a git work tree, so nothing protects the originals" in stderr
    assert (tmp_path / "m.py").read_text() == FIXED
    diff = run_cli("apply", "--diff", ".", cwd=tmp_path)
    assert b"git work tree" not in diff.stderr

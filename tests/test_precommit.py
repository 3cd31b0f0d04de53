"""pre-commit (item 8): the hooks of ``.pre-commit-hooks.yaml`` run by a real ``pre-commit
try-repo`` in a temporary git repository. pre-commit installs this repository (its committed
state plus uncommitted changes to tracked files) into a fresh virtualenv with pip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)\n'
)
NO_REGISTRY = ("NewConnectionError", "Temporary failure in name resolution", "No matching distribution found")

pytestmark = [
    pytest.mark.skipif(
        shutil.which("pre-commit") is None or shutil.which("git") is None,
        reason="pre-commit (pip install pre-commit, part of the test extra) or git is not installed",
    ),
    pytest.mark.xdist_group("pre-commit-home"),  # one PRE_COMMIT_HOME: its hook environment is reused
]


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "user"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "model.py").write_text(LEGACY)
    (repo / "clean.py").write_text("import os\n")
    (repo / "notes.txt").write_text("torch.load(x).cuda()\n")  # not Python: never passed to the hook
    _git(repo, "add", ".")
    return repo


def try_repo(hook: str, repo: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    out = subprocess.run(
        ["pre-commit", "try-repo", str(ROOT), hook, "--color", "never"],
        cwd=repo, env=env, capture_output=True, timeout=600,
    )
    text = out.stdout.decode() + out.stderr.decode()
    if "An error has occurred" in text and any(marker in text for marker in NO_REGISTRY):
        pytest.skip("pre-commit could not install the hook: the package registry is not reachable")
    return out


def test_check_hook_reports_and_changes_nothing(user_repo: Path, pre_commit_home: Path) -> None:
    out = try_repo("torchfix-device-check", user_repo, pre_commit_home)
    text = out.stdout.decode()
    assert out.returncode == 1, text + out.stderr.decode()
    assert "torchfix-device (check)" in text and "Failed" in text
    assert "model.py:3:9 TFD005 `torch.load` without `map_location`" in text
    assert "notes.txt" not in text
    assert (user_repo / "model.py").read_text() == LEGACY


def test_apply_hook_rewrites_staged_files(user_repo: Path, pre_commit_home: Path) -> None:
    out = try_repo("torchfix-device", user_repo, pre_commit_home)
    text = out.stdout.decode()
    assert out.returncode == 1, text + out.stderr.decode()  # pre-commit fails a hook that modified files
    assert "files were modified by this hook" in text
    assert (user_repo / "model.py").read_text() == FIXED
    assert (user_repo / "clean.py").read_text() == "import os\n"
    assert (user_repo / "notes.txt").read_text() == "torch.load(x).cuda()\n"
    _git(user_repo, "add", ".")
    again = try_repo("torchfix-device", user_repo, pre_commit_home)
    assert again.returncode == 0, again.stdout.decode()
    assert "Passed" in again.stdout.decode()

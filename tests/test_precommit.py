"""pre-commit (item 8): the hooks of ``.pre-commit-hooks.yaml`` run by a real ``pre-commit run``
in a temporary git repository whose ``.pre-commit-config.yaml`` names this repository, as a user's
does. pre-commit installs this repository (what ``pre-commit try-repo`` would take: its tracked
files as they are in the work tree, uncommitted changes included) into a virtualenv with pip, once
for the module: every run names the same commit of the same snapshot in the same
``PRE_COMMIT_HOME``, so pre-commit reuses its hook environment. (``try-repo`` would install it
afresh on every run: it keeps its store in a temporary folder, whatever ``PRE_COMMIT_HOME`` says.)"""

from __future__ import annotations

import json
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


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This repository's tracked (and staged) files as they are in the work tree, committed in a
    new repository: the snapshot ``try-repo`` makes of a repository with uncommitted changes,
    made once. Returns the snapshot and its commit."""
    snapshot = tmp_path_factory.mktemp("hooks-repo")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    copied = 0
    for name in dict.fromkeys(os.fsdecode(n) for n in listed.split(b"\0") if n):
        source, target = ROOT / name, snapshot / name
        if not os.path.lexists(source):  # deleted in the work tree, not yet committed
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
        copied += 1
    assert copied and (snapshot / ".pre-commit-hooks.yaml").is_file()
    _git(snapshot, "init", "-q")
    _git(snapshot, "add", "-A")
    _git(snapshot, "commit", "-q", "--no-verify", "-m", "snapshot")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=snapshot, check=True, capture_output=True, text=True)
    return snapshot, head.stdout.strip()


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


def run_hook(hook: str, repo: Path, home: Path, hooks: tuple[Path, str]) -> subprocess.CompletedProcess:
    """``pre-commit run`` of ``hook`` on the staged files of ``repo``, its config naming ``hooks``
    (a repository and a commit) as a user's ``.pre-commit-config.yaml`` does."""
    hooks_path, rev = hooks
    config = repo.parent / f"{repo.name}-pre-commit-config.yaml"  # outside the repository: not a file to check
    config.write_text(f"repos:\n- repo: {json.dumps(str(hooks_path))}\n  rev: {rev}\n  hooks:\n  - id: {hook}\n")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    out = subprocess.run(
        ["pre-commit", "run", "--config", str(config), hook, "--color", "never"],
        cwd=repo, env=env, capture_output=True, timeout=600,
    )
    text = out.stdout.decode() + out.stderr.decode()
    if "An error has occurred" in text and any(marker in text for marker in NO_REGISTRY):
        pytest.skip("pre-commit could not install the hook: the package registry is not reachable")
    return out


def test_check_hook_reports_and_changes_nothing(user_repo: Path, pre_commit_home: Path, hooks_repo: tuple[Path, str]) -> None:
    out = run_hook("torchfix-device-check", user_repo, pre_commit_home, hooks_repo)
    text = out.stdout.decode()
    assert out.returncode == 1, text + out.stderr.decode()
    assert "torchfix-device (check)" in text and "Failed" in text
    assert "model.py:3:9: TFD005 [*] `torch.load` without `map_location`" in text
    assert "notes.txt" not in text
    assert (user_repo / "model.py").read_text() == LEGACY


def test_apply_hook_rewrites_staged_files(user_repo: Path, pre_commit_home: Path, hooks_repo: tuple[Path, str]) -> None:
    out = run_hook("torchfix-device", user_repo, pre_commit_home, hooks_repo)
    text = out.stdout.decode()
    assert out.returncode == 1, text + out.stderr.decode()  # pre-commit fails a hook that modified files
    assert "files were modified by this hook" in text
    assert (user_repo / "model.py").read_text() == FIXED
    assert (user_repo / "clean.py").read_text() == "import os\n"
    assert (user_repo / "notes.txt").read_text() == "torch.load(x).cuda()\n"
    _git(user_repo, "add", ".")
    again = run_hook("torchfix-device", user_repo, pre_commit_home, hooks_repo)
    assert again.returncode == 0, again.stdout.decode()
    assert "Passed" in again.stdout.decode()

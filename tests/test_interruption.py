"""Interruptions (issue 22, items 10 and 11): a killed or terminated run leaves no worker
process behind; every interruption says what was written and what was not, with the right
exit code, and a second Ctrl-C neither hangs nor miscounts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import run_cli
from faults import INTERRUPTED, children, count_rewritten, make_tree, rewritten, start, temp_files, wait_for, wait_gone

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads worker processes from /proc (Linux)")


def _workers(main: subprocess.Popen, expected: dict, at_least: int = 3) -> set[int]:
    """Wait until ``at_least`` files are rewritten, then the main process's children."""
    wait_for(lambda: count_rewritten(expected) >= at_least, main)
    workers = children(main.pid)
    assert workers, "no worker process to watch: the run was not spread over a pool"
    return workers


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_workers_exit_when_the_main_process_is_killed_or_terminated(tmp_path: Path, how: signal.Signals) -> None:
    """SIGKILL or SIGTERM of the main process left the workers waiting on their pipes for
    ever. They now exit with it (after the file they are writing, if any)."""
    expected = make_tree(tmp_path / "tree", 300)
    main = start(["apply", "--no-cache", "--jobs", "2", "."], tmp_path / "tree")
    workers: set[int] = set()
    try:
        workers = _workers(main, expected)
        main.send_signal(how)
        _, stderr_bytes = main.communicate(timeout=60)
    finally:
        main.kill()
        left = wait_gone(workers)
    assert not left, f"worker processes still running after the main process died: {sorted(left)}"
    done = rewritten(expected)
    stderr = stderr_bytes.decode()
    assert "Traceback" not in stderr, stderr
    if how == signal.SIGKILL:
        assert main.returncode == -signal.SIGKILL
        return
    assert main.returncode == 143, stderr  # 128 + SIGTERM, as shells report it
    lines = [m for m in map(INTERRUPTED.match, stderr.splitlines()) if m]
    assert len(lines) == 1 and lines[0].group(1) == "terminated", stderr
    assert int(lines[0].group(2)) == done and int(lines[0].group(3)) == 300, stderr
    assert f"{done} files scanned, {done} changed, 0 failed" in stderr
    assert temp_files(tmp_path) == []


def test_a_second_ctrl_c_neither_hangs_nor_miscounts(tmp_path: Path) -> None:
    """The first Ctrl-C lets the workers finish the files they are on; a second one, while they
    do, used to abandon their results (a count short of the files written) or hang at exit."""
    expected = make_tree(tmp_path / "tree", 300)
    main = start(["apply", "--no-cache", "--jobs", "2", "."], tmp_path / "tree")
    workers: set[int] = set()
    try:
        workers = _workers(main, expected)
        main.send_signal(signal.SIGINT)
        time.sleep(0.05)
        main.send_signal(signal.SIGINT)
        _, stderr_bytes = main.communicate(timeout=60)
    finally:
        main.kill()
        left = wait_gone(workers)
    stderr = stderr_bytes.decode()
    assert main.returncode == 130, stderr
    assert "Traceback" not in stderr and "Aborted" not in stderr, stderr
    lines = [m for m in map(INTERRUPTED.match, stderr.splitlines()) if m]
    assert len(lines) == 1 and lines[0].group(1) == "interrupted", stderr
    done = int(lines[0].group(2))
    assert done == rewritten(expected), stderr  # every file written is counted, none more
    assert f"{done} files scanned, {done} changed, 0 failed" in stderr
    assert not left and temp_files(tmp_path) == []


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_ctrl_c_while_writes_are_held_for_the_git_check_says_what_was_written(tmp_path: Path) -> None:
    """In a git work tree with an uncommitted file, the rewrites are written after the whole
    run (refusing that file). A Ctrl-C among those writes exited 130 without a word."""
    repo = tmp_path / "repo"
    expected = make_tree(repo, 500, distinct=False)  # four texts: four analyses fill the cache
    (repo / "pyproject.toml").write_text("[project]\nname = 'r'\n")
    (repo / ".gitignore").write_text(".torchfix_device_cache/\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "legacy")
    dirty = repo / "wip.py"
    dirty.write_text("import torch\nx = torch.load('wip')\n")
    assert run_cli("check", "--jobs", "1", ".", cwd=repo).returncode == 1  # cached: the writes come quickly
    main = start(["apply", "."], repo)
    try:
        wait_for(lambda: count_rewritten(expected) >= 3, main)
        main.send_signal(signal.SIGINT)
        _, stderr_bytes = main.communicate(timeout=60)
    finally:
        main.kill()
    stderr = stderr_bytes.decode()
    assert main.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    done = rewritten(expected)
    assert done < 500, "every file was written before the Ctrl-C: the test proves nothing"
    line = [l for l in stderr.splitlines() if l.startswith("interrupted")]
    assert line == [
        f"interrupted after writing {done} of 500 files to rewrite; the other {500 - done} are unchanged; "
        "every file is either unchanged or fully rewritten"
    ], stderr
    assert f"501 files scanned, {done} changed, 0 failed, 1 refused (uncommitted changes), {500 - done} skipped ({500 - done} interrupted)" in stderr, stderr
    assert dirty.read_text() == "import torch\nx = torch.load('wip')\n"
    assert temp_files(repo) == []

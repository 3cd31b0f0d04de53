"""How a rewrite is written (issue 22, items 2 and 4): the file keeps its owner, group and
extended attributes; a file the runner may not write is left alone; temp files are unique to a
run, a killed run's are cleaned up, and a second run on the same tree at once is refused.

The tests run as root here: ``chown`` works (so keeping a user's owner is tested for real), but
permissions do not stop root, so a file the runner may not write is simulated by ``os.access``
saying so, which is what the writer asks.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import console_script, run_cli
from torchfix_device.options import RunOptions
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.files.sources import TEMP_SUFFIX, atomic_write
from torchfix_device.run.runner import run

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)\n'
)


def _temp_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# -- item 2: what a rewritten file keeps ----------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_rewrite_keeps_the_owner_group_and_special_mode_bits(tmp_path: Path) -> None:
    """A run as root left root-owned files in a user's repository."""
    path = tmp_path / "m.py"
    path.write_text(LEGACY)
    os.chown(path, 12345, 23456)
    path.chmod(0o4750)  # chown clears set-id bits: the mode is set after it
    out = run_cli("apply", "m.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert path.read_text() == FIXED
    st = path.stat()
    assert (st.st_uid, st.st_gid) == (12345, 23456)
    assert stat.S_IMODE(st.st_mode) == 0o4750
    assert _temp_files(tmp_path) == []


def _xattrs_supported(folder: Path) -> bool:
    probe = folder / "probe"
    probe.write_text("")
    try:
        os.setxattr(probe, "user.torchfix-device-probe", b"1")
        return True
    except (OSError, AttributeError):
        return False
    finally:
        probe.unlink()


def test_a_rewrite_keeps_extended_attributes(tmp_path: Path) -> None:
    if not _xattrs_supported(tmp_path):
        pytest.skip("no user extended attributes on this file system")
    path = tmp_path / "m.py"
    path.write_text(LEGACY)
    os.setxattr(path, "user.origin", b"https://example.org/repo")
    os.setxattr(path, "user.empty", b"")
    out = run_cli("apply", "m.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert path.read_text() == FIXED
    assert os.getxattr(path, "user.origin") == b"https://example.org/repo"
    assert os.getxattr(path, "user.empty") == b""


def test_a_file_the_runner_may_not_write_is_left_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replacing goes through the folder, so a file owned by someone else (mode 644, folder
    writable) used to be replaced all the same. As an editor would, the writer asks whether it
    may write the file itself."""
    (tmp_path / "theirs.py").write_text(LEGACY)
    (tmp_path / "mine.py").write_text(LEGACY)
    real_access = os.access
    asked = []

    def access(path, mode, **kwargs):
        if mode & os.W_OK and os.fspath(path).endswith("theirs.py"):
            asked.append(path)
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.chdir(tmp_path)
    results = {r.display: r for r in run([Path(".")], all_codemods(), options=RunOptions(write=True))}
    assert asked
    assert results["theirs.py"].status == "failed"
    assert results["theirs.py"].error == "not writable: left unchanged"
    assert (tmp_path / "theirs.py").read_text() == LEGACY
    assert results["mine.py"].status == "changed" and (tmp_path / "mine.py").read_text() == FIXED
    assert _temp_files(tmp_path) == []


# -- item 4: temp files and concurrent runs ----------------------------------------------------
def test_temp_files_are_named_for_the_process_that_writes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real_replace = os.replace

    def replace(src, dst, **kwargs):
        seen.append(os.path.basename(os.fspath(src)))
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    for _ in range(2):
        atomic_write(tmp_path / "m.py", b"x = 1\n")
    assert len(seen) == 2 and seen[0] != seen[1]
    for name in seen:
        assert name.startswith(f".m.py.{os.getpid()}.") and name.endswith(TEMP_SUFFIX), name


def test_a_run_removes_the_temp_files_of_dead_runs_and_leaves_a_live_runs_alone(tmp_path: Path) -> None:
    dead = _dead_pid()
    (tmp_path / "m.py").write_text(LEGACY)
    (tmp_path / "other.py").write_text("x = 1\n")
    stale = [tmp_path / f".m.py.{dead}.0a1b2c3d{TEMP_SUFFIX}", tmp_path / f".other.py.{dead}.99aabbcc{TEMP_SUFFIX}"]
    live = tmp_path / f".m.py.{os.getpid()}.0a1b2c3d{TEMP_SUFFIX}"  # this process: alive
    not_ours = [tmp_path / f".m.py.{dead}.0a1b2c3d.tmp", tmp_path / "notes.txt"]
    for path in [*stale, live, *not_ours]:
        path.write_text("half-written")
    out = run_cli("apply", "m.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert (tmp_path / "m.py").read_text() == FIXED
    assert not any(p.exists() for p in stale)
    assert live.read_text() == "half-written"
    assert all(p.read_text() == "half-written" for p in not_ours)


def _tree(root: Path, count: int) -> None:
    root.mkdir()
    for i in range(count):
        (root / f"m{i:03d}.py").write_text(LEGACY.replace("ckpt.pt", f"ckpt{i}.pt"))


def test_a_second_run_on_the_same_tree_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    """Two runs at once over one tree deleted each other's temp files ("cannot write") and
    raced on the same files. The second now refuses at once, saying which run holds the tree.
    The first run rewrites ``a.py`` and then spends seconds on a large file: the second starts
    in between, on a folder inside the first one's (``zz``, whose file the first run comes to last)."""
    tree = tmp_path / "tree"
    (tree / "zz").mkdir(parents=True)
    (tree / "a.py").write_text(LEGACY)
    lines = ["import torch", "", "def f(model, batch, path):"]
    lines += [f"    x{i} = torch.load(path + '{i}').cuda()" for i in range(800)]
    (tree / "z_large.py").write_text("\n".join(lines) + "\n    return x0\n")
    (tree / "zz" / "late.py").write_text(LEGACY)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    first = subprocess.Popen(
        [*console_script(), "apply", "--no-cache", "--jobs", "1", "."], cwd=tree, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while (tree / "a.py").read_text() == LEGACY:
            assert first.poll() is None and time.monotonic() < deadline, "the first run ended before the second started"
            time.sleep(0.02)
        second = run_cli("apply", "zz", cwd=tree)
        assert first.poll() is None, "the first run ended before the second was refused: the test proves nothing"
        stderr = second.stderr.decode()
        assert second.returncode == 2, stderr
        assert f"another torchfix-device run (pid {first.pid}) is rewriting files in {tree}" in stderr, stderr
        assert (tree / "zz" / "late.py").read_text() == LEGACY
        _, first_err = first.communicate(timeout=300)
    finally:
        first.kill()
    assert first.returncode == 0, first_err.decode()
    assert "3 files scanned, 3 changed, 0 failed" in first_err.decode()
    assert _temp_files(tree) == []
    assert run_cli("apply", "zz", cwd=tree).returncode == 0  # free again
    assert (tree / "zz" / "late.py").read_text() == FIXED


def test_a_killed_runs_lock_does_not_block_the_next_run(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _tree(tree, 3)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from torchfix_device.files import run_lock; "
         "run_lock.hold([Path(sys.argv[1])]); print('held', flush=True); time.sleep(600)", str(tree)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        busy = run_cli("apply", ".", cwd=tree)
        assert busy.returncode == 2 and f"(pid {holder.pid})" in busy.stderr.decode(), busy.stderr.decode()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        holder.kill()
    out = run_cli("apply", ".", cwd=tree)
    assert out.returncode == 0, out.stderr.decode()
    assert (tree / "m000.py").read_text() == FIXED.replace("ckpt.pt", "ckpt0.pt")

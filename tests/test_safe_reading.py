"""What a run reads (issue 22, items 6, 7, 8 and 12): only regular files, never through a
symbolic link, past folders it cannot enter, with a message naming the file and line.

The tests run as root here, where permissions do not stop anything: a folder that cannot be
entered is simulated (as ``test_robustness.py`` does) by making the calls a non-root user would
see fail raise ``PermissionError``.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from torchfix_device.options import RunOptions
from torchfix_device import engine
from torchfix_device.run import runner
from torchfix_device.codemods.catalog import all_codemods
from torchfix_device.run.runner import run

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)\n'
)


def _stderr(out: subprocess.CompletedProcess) -> str:
    text = out.stderr.decode()
    assert "Traceback" not in text, text
    return text


# -- item 6: symbolic links ---------------------------------------------------------------------
def test_a_symlink_to_a_folder_given_as_path_is_refused(tmp_path: Path) -> None:
    """The README promises links are never followed; a folder link named on the command line
    was walked and the files behind it rewritten."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_text(LEGACY)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "linked").symlink_to(outside)
    (tree / "good.py").write_text(LEGACY)
    out = run_cli("apply", "linked", "good.py", cwd=tree)
    stderr = _stderr(out)
    assert "skipped: linked: symbolic link: not followed, never written through" in stderr, stderr
    assert (outside / "victim.py").read_text() == LEGACY
    assert (tree / "good.py").read_text() == FIXED
    assert out.returncode == 0, stderr


def _swap_for_link(folder: Path, target: Path) -> None:
    folder.rename(folder.with_name(folder.name + "-moved"))
    folder.symlink_to(target)


@pytest.fixture
def trap(tmp_path: Path) -> tuple[Path, Path]:
    """A tree with ``pkg/m.py`` and, outside it, a folder holding a file with the same bytes
    (so that no content check can tell them apart)."""
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "m.py").write_text(LEGACY)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "m.py").write_text(LEGACY)
    return tree, outside


def test_a_folder_swapped_for_a_symlink_after_the_read_cannot_redirect_the_write(
    trap: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, outside = trap
    real_transform = engine.transform_source

    def transform_then_swap(text, codemods, **kwargs):
        output = real_transform(text, codemods, **kwargs)
        _swap_for_link(tree / "pkg", outside)
        return output

    monkeypatch.setattr(engine, "transform_source", transform_then_swap)
    monkeypatch.chdir(tree)
    [result] = run([Path(".")], all_codemods(), options=RunOptions(write=True))
    assert (outside / "m.py").read_text() == LEGACY
    assert result.status == "failed"
    assert "pkg" in result.error and "not written" in result.error, result.error
    assert (tree / "pkg-moved" / "m.py").read_text() == LEGACY


def test_a_folder_swapped_for_a_symlink_before_the_read_is_not_followed(
    trap: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, outside = trap
    real_find = runner.find_files

    def find_then_swap(*args, **kwargs):
        found = real_find(*args, **kwargs)
        _swap_for_link(tree / "pkg", outside)
        return found

    monkeypatch.setattr(runner, "find_files", find_then_swap)
    monkeypatch.chdir(tree)
    [result] = run([Path(".")], all_codemods(), options=RunOptions(write=True))
    assert (outside / "m.py").read_text() == LEGACY
    assert result.status == "failed"
    assert result.error.startswith("folder pkg is no longer a folder"), result.error


def test_a_file_swapped_for_a_symlink_before_the_write_is_not_written_through(
    trap: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, outside = trap
    real_transform = engine.transform_source

    def transform_then_swap(text, codemods, **kwargs):
        output = real_transform(text, codemods, **kwargs)
        (tree / "pkg" / "m.py").unlink()
        (tree / "pkg" / "m.py").symlink_to(outside / "m.py")
        return output

    monkeypatch.setattr(engine, "transform_source", transform_then_swap)
    monkeypatch.chdir(tree)
    [result] = run([Path("pkg/m.py")], all_codemods(), options=RunOptions(write=True))
    assert (outside / "m.py").read_text() == LEGACY
    assert (tree / "pkg" / "m.py").is_symlink()
    assert result.status == "failed" and "symbolic link" in result.error, result.error


# -- item 7: only regular files -----------------------------------------------------------------
def test_a_fifo_named_like_python_is_reported_and_skipped(tmp_path: Path) -> None:
    """A FIFO ``x.py`` hung the run forever (reading it waits for a writer)."""
    (tmp_path / "pkg").mkdir()
    os.mkfifo(tmp_path / "pkg" / "pipe.py")
    os.mkfifo(tmp_path / "named.py")
    (tmp_path / "good.py").write_text(LEGACY)
    for args in (("apply", "."), ("check", "named.py", "good.py"), ("apply", "named.py", "good.py")):
        try:
            out = run_cli(*args, cwd=tmp_path) if args[0] == "check" else subprocess.run(
                [sys.executable, "-m", "torchfix_device", *args], cwd=tmp_path, capture_output=True, timeout=60,
                env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(args)}` hangs on a FIFO")
        stderr = _stderr(out)
        assert "named.py: not a regular file (a FIFO (named pipe)): skipped" in stderr, stderr
        if args == ("apply", "."):
            assert "skipped: pkg/pipe.py: not a regular file (a FIFO (named pipe)): skipped" in stderr, stderr
    assert (tmp_path / "good.py").read_text() == FIXED
    assert stat.S_ISFIFO((tmp_path / "named.py").stat().st_mode)


def test_a_device_node_named_like_python_is_not_read(tmp_path: Path) -> None:
    """``/dev/zero`` under the name ``z.py`` was read until memory ran out."""
    try:
        os.mknod(tmp_path / "z.py", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    (tmp_path / "good.py").write_text(LEGACY)
    out = subprocess.run(
        [sys.executable, "-m", "torchfix_device", "apply", "."], cwd=tmp_path, capture_output=True, timeout=60,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    stderr = _stderr(out)
    assert "skipped: z.py: not a regular file (a character device): skipped" in stderr, stderr
    assert (tmp_path / "good.py").read_text() == FIXED
    assert out.returncode == 0


# -- item 8: a folder that cannot be entered ----------------------------------------------------
def test_a_folder_that_cannot_be_entered_is_reported_and_the_rest_processed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder with ``r`` but no ``x`` (``chmod 644``): listing it works, but nothing inside
    can be looked at; ``Path.exists`` and ``Path.is_symlink`` raise ``PermissionError`` on it,
    which ended the run in a traceback with nothing processed. Simulated: every ``stat``,
    ``open`` or listing of a path inside ``locked`` is refused, as for a non-root user."""
    locked = tmp_path / "locked"
    (locked / "sub").mkdir(parents=True)
    (locked / "m.py").write_text(LEGACY)
    (locked / "sub" / "n.py").write_text(LEGACY)
    (tmp_path / "good.py").write_text(LEGACY)
    (tmp_path / "zz").mkdir()
    (tmp_path / "zz" / "last.py").write_text(LEGACY)

    def inside_locked(path) -> bool:
        if isinstance(path, int):
            return False
        absolute = Path(os.path.abspath(os.fspath(path)))
        return locked in absolute.parents

    def refusing(real):
        def call(path, *args, **kwargs):
            if kwargs.get("dir_fd") is None and inside_locked(path):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            if kwargs.get("dir_fd") is not None and os.path.realpath(f"/proc/self/fd/{kwargs['dir_fd']}") == str(locked):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)
        return call

    for name in ("stat", "lstat", "scandir", "open", "listdir"):
        monkeypatch.setattr(os, name, refusing(getattr(os, name)))
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: not (Path(os.fspath(path)).name == "locked" and mode & os.X_OK) and True)
    monkeypatch.chdir(tmp_path)
    results = run([Path(".")], all_codemods(), options=RunOptions(write=True))
    by_name = {r.display: r for r in results}
    assert by_name["locked"].status == "failed", by_name
    assert by_name["locked"].error == "cannot enter folder: Permission denied"
    assert by_name["good.py"].status == "changed" and by_name["zz/last.py"].status == "changed"
    assert (tmp_path / "good.py").read_text() == FIXED
    assert (tmp_path / "zz" / "last.py").read_text() == FIXED
    monkeypatch.undo()
    assert (locked / "m.py").read_text() == LEGACY and (locked / "sub" / "n.py").read_text() == LEGACY


# -- item 12: messages naming the file and line -------------------------------------------------
WIDE = {  # name: (encoding, BOM)
    "le_bom.py": ("utf-16-le", b"\xff\xfe"),
    "be_bom.py": ("utf-16-be", b"\xfe\xff"),
    "le_no_bom.py": ("utf-16-le", b""),
    "utf32.py": ("utf-32-le", b"\xff\xfe\x00\x00"),
}


def test_utf16_and_utf32_files_are_named_as_such(tmp_path: Path) -> None:
    """Not ``contains NUL bytes: not a text file``: say what it is and what to do."""
    contents = {}
    for name, (encoding, bom) in WIDE.items():
        contents[name] = bom + LEGACY.encode(encoding)
        (tmp_path / name).write_bytes(contents[name])
    out = run_cli("apply", ".", cwd=tmp_path)
    stderr = _stderr(out)
    for name, (encoding, _) in WIDE.items():
        kind = "UTF-32" if "32" in encoding else "UTF-16"
        assert f"failed: {name}: {kind} is not supported: convert to UTF-8" in stderr, stderr
        assert (tmp_path / name).read_bytes() == contents[name]
    assert "NUL" not in stderr and out.returncode == 1


def test_a_file_nested_too_deep_for_the_parser_is_named_with_its_line(tmp_path: Path) -> None:
    text = "import torch\nm = torch.load('p')\n\n\nx = " + " + ".join(["a"] * 3000) + "\ny = 1\n"
    (tmp_path / "chain.py").write_text(text)
    out = run_cli("apply", "chain.py", cwd=tmp_path)
    stderr = _stderr(out)
    assert "failed: chain.py:5: expression nested too deeply for the parser; skipped" in stderr, stderr
    assert (tmp_path / "chain.py").read_text() == text


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc (Linux), which even root cannot write in")
def test_an_unwritable_report_path_is_refused_before_any_rewrite(tmp_path: Path) -> None:
    """``--report`` into a folder that cannot be written was found out after every file had
    been rewritten. ``/proc`` cannot be written even by root."""
    (tmp_path / "m.py").write_text(LEGACY)
    out = run_cli("apply", "--report", "/proc/migration.md", "m.py", cwd=tmp_path)
    stderr = _stderr(out)
    assert out.returncode == 2, stderr
    assert "--report /proc/migration.md: cannot write in /proc" in stderr, stderr
    assert (tmp_path / "m.py").read_text() == LEGACY

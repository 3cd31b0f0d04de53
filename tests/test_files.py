"""Bytes survive a rewrite; bad input gets one clear line and loses nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conftest import run_cli
from torchfix_device.fileio import WriteError, atomic_replace

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")  # résumé\n'
FIXED = (
    'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
    'state = torch.load("ckpt.pt", map_location=device)  # résumé\n'
)


def apply(path: Path) -> None:
    out = run_cli("apply", str(path))
    assert out.returncode == 0, out.stderr.decode()


# -- byte preservation ------------------------------------------------------------------------
def test_crlf_line_endings_survive(tmp_path: Path) -> None:
    path = tmp_path / "crlf.py"
    path.write_bytes(LEGACY.replace("\n", "\r\n").encode())
    apply(path)
    assert path.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_utf8_bom_survives(tmp_path: Path) -> None:
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + LEGACY.encode())
    apply(path)
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()


def test_latin1_coding_cookie_survives(tmp_path: Path) -> None:
    cookie = "# -*- coding: latin-1 -*-\n"
    path = tmp_path / "latin.py"
    path.write_bytes((cookie + LEGACY).encode("latin-1"))
    diff = run_cli("apply", "--diff", str(path.name), cwd=tmp_path)
    assert "+state = torch.load(\"ckpt.pt\", map_location=device)  # résumé".encode("latin-1") in diff.stdout
    apply(path)
    assert path.read_bytes() == (cookie + FIXED).encode("latin-1")


def test_file_mode_survives(tmp_path: Path) -> None:
    path = tmp_path / "script.py"
    path.write_text(LEGACY)
    path.chmod(0o751)
    apply(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.read_text() == FIXED


def test_file_without_findings_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "clean.py"
    path.write_bytes(b"import torch\r\nx = torch.zeros(3)  \n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    apply(path)
    assert path.read_bytes() == b"import torch\r\nx = torch.zeros(3)  \n"
    assert path.stat().st_mtime_ns == 1_000_000_000


def test_no_temp_files_are_left_behind(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(LEGACY)
    apply(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"m{i}.py" for i in range(5)]


def test_atomic_replace_never_overwrites_a_newer_version(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"newer\n")
    with pytest.raises(WriteError, match="changed on disk"):
        atomic_replace(path, b"rewrite\n", expected_old=b"older\n")
    assert path.read_bytes() == b"newer\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]
    path.unlink()
    with pytest.raises(WriteError, match="deleted"):
        atomic_replace(path, b"rewrite\n", expected_old=b"newer\n")
    assert list(tmp_path.iterdir()) == []


# -- bad input --------------------------------------------------------------------------------
BAD_INPUTS = {
    "syntax.py": (b"import torch\ndef f(:\n    pass\n", "syntax.py:2:"),
    "py2.py": (b'import torch\nprint "loss", torch.load("x")\n', "Python 2"),
    "undecodable.py": (b"import torch\n# caf\xe9\nx = torch.load('p')\n", "undecodable.py:2"),
    "nul.py": (b"import torch\n\x00\n", "NUL"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_file_is_reported_left_intact_and_others_still_processed(tmp_path: Path, name: str) -> None:
    content, expected = BAD_INPUTS[name]
    bad = tmp_path / name
    bad.write_bytes(content)
    good = tmp_path / "good.py"
    good.write_text(LEGACY)
    out = run_cli("apply", ".", cwd=tmp_path)
    assert out.returncode == 1
    stderr = out.stderr.decode()
    assert expected in stderr and name in stderr
    assert "Traceback" not in stderr
    assert bad.read_bytes() == content
    assert good.read_text() == FIXED


def test_empty_file_and_folder_without_python(tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_bytes(b"")
    assert run_cli("apply", "empty.py", cwd=tmp_path).returncode == 0
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("nothing here")
    out = run_cli("apply", "docs", cwd=tmp_path)
    assert out.returncode == 1 and b"docs: no Python files found" in out.stderr


def test_non_python_file_named_and_same_file_twice(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("torch.load('x')\n")
    (tmp_path / "m.py").write_text(LEGACY)
    out = run_cli("check", "notes.txt", "m.py", "./m.py", cwd=tmp_path)
    assert b"notes.txt: not a Python file" in out.stderr
    assert out.stdout.decode().count("TFD005") == 1  # the same file named twice is read once


def test_symlink_is_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text(LEGACY)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link.py").symlink_to(outside)
    assert run_cli("apply", ".", cwd=tree).returncode == 1  # the folder holds no regular Python file
    out = run_cli("apply", "link.py", cwd=tree)
    assert b"symbolic link" in out.stderr
    assert outside.read_text() == LEGACY and (tree / "link.py").is_symlink()


def test_read_only_file_is_reported_and_left_intact(tmp_path: Path) -> None:
    path = tmp_path / "ro.py"
    path.write_text(LEGACY)
    path.chmod(0o444)
    out = run_cli("apply", "ro.py", cwd=tmp_path)
    assert out.returncode == 1 and b"ro.py: file is read-only" in out.stderr
    assert path.read_text() == LEGACY

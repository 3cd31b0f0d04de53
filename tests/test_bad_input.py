"""Input the tool cannot or must not rewrite: one clear line on stderr naming the file (and the
line, where there is one), never a traceback, the file left byte-identical, every other file
in the run still processed, and the exit code saying so (1; 2 for a path that does not exist)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from torchfix_device.files.sources import TEMP_SUFFIX

LEGACY = """\
import torch
import torch.nn as nn


def evaluate(model, loader):
    criterion = nn.CrossEntropyLoss()
    model.load_state_dict(torch.load("best.pth"))
    for x, y in loader:
        loss = criterion(model(x), y)
        print("val loss", loss.data[0])
"""
FIXED = """\
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def evaluate(model, loader):
    criterion = nn.CrossEntropyLoss()
    model.load_state_dict(torch.load("best.pth", map_location=device))
    for x, y in loader:
        loss = criterion(model(x), y)
        print("val loss", loss.item())
"""

# name: (content, the line on stderr that names it)
BAD_FILES: dict[str, tuple[bytes, str]] = {
    "syntax_error.py": (
        b'import torch\n\ndef train(model:\n    return torch.load("m.pt")\n',
        "failed: syntax_error.py:3:10: syntax error: '(' was never closed",
    ),
    "python2_exec.py": (  # a print statement would be fixed (TFD020): `exec` is left to the user
        b'import torch\n\nloss = torch.load("loss.pt")\nexec "loss = loss.data[0]"\n',
        "failed: python2_exec.py:4:1: syntax error: looks like Python 2 (exec statement at line 4): convert it to "
        "Python 3 first, e.g. with 2to3 or python-modernize, then run torchfix-device again (Python 3 says: Missing "
        "parentheses in call to 'exec'. Did you mean exec(...)?)",
    ),
    "python2_except.py": (
        b'import torch\ntry:\n    state = torch.load("m.pt")\nexcept IOError, e:\n    state = None\n',
        "failed: python2_except.py:4:8: syntax error: looks like Python 2 (`except X, e:` at line 4): convert it to "
        "Python 3 first",
    ),
    "latin1_no_cookie.py": (
        "import torch\n# poids entraînés\nstate = torch.load('m.pt')\n".encode("latin-1"),
        "failed: latin1_no_cookie.py:2: not valid UTF-8 at line 2, column 14 (byte 0xee): `# poids entra\\xeen\\xe9s`; "
        "save the file as UTF-8, or declare its encoding on line 1 or 2 (`# -*- coding: latin-1 -*-`)",
    ),
    "bad_cookie.py": (
        b'# -*- coding: klingon -*-\nimport torch\nstate = torch.load("m.pt")\n',
        "failed: bad_cookie.py: bad coding cookie: unknown encoding: klingon",
    ),
    "latin1_first_line.py": (  # tokenize reads lines 1 and 2 for a cookie: that said "bad coding cookie"
        "# entraîné\nimport torch\n".encode("latin-1"),
        "failed: latin1_first_line.py:1: not valid UTF-8 at line 1, column 8 (byte 0xee): `# entra\\xeen\\xe9`; "
        "save the file as UTF-8, or declare its encoding on line 1 or 2 (`# -*- coding: latin-1 -*-`)",
    ),
    "latin1_code_first.py": (
        "x = 'café'\nimport torch\n".encode("latin-1"),
        "failed: latin1_code_first.py:1: not valid UTF-8 at line 1, column 9 (byte 0xe9): `x = 'caf\\xe9'`;",
    ),
    "nul_bytes.py": (
        b'import torch\nstate = torch.load("m.pt")\n\x00\x00\x00\n',
        "failed: nul_bytes.py:3: contains NUL bytes: not a text file",
    ),
}


def _stderr(out: subprocess.CompletedProcess) -> str:
    text = out.stderr.decode()
    assert "Traceback" not in text and "Error:" not in text, text  # no exception's name either
    return text


def _lines_naming(stderr: str, name: str) -> list[str]:
    return [line for line in stderr.splitlines() if name in line]


def _temp_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX))


# -- files that cannot be read as Python 3 -----------------------------------------------------
@pytest.mark.parametrize("name", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["apply", "check"])
def test_bad_file_is_reported_left_intact_and_the_others_processed(tmp_path: Path, name: str, command: str) -> None:
    content, expected = BAD_FILES[name]
    bad = tmp_path / name
    bad.write_bytes(content)
    (tmp_path / "a_good.py").write_text(LEGACY)
    (tmp_path / "z_good.py").write_text(LEGACY)
    out = run_cli(command, ".", cwd=tmp_path)
    assert out.returncode == 1
    stderr = _stderr(out)
    lines = _lines_naming(stderr, name)
    assert len(lines) == 1 and lines[0].startswith(expected), stderr
    assert bad.read_bytes() == content
    assert name.encode() not in out.stdout  # problems are not findings: stdout stays parseable
    if command == "apply":
        assert (tmp_path / "a_good.py").read_text() == FIXED
        assert (tmp_path / "z_good.py").read_text() == FIXED
        assert "3 files scanned, 2 changed, 1 failed" in stderr
    else:
        assert out.stdout.decode().count("good.py:") == 4  # two findings in each good file


def test_all_bad_files_in_one_run(tmp_path: Path) -> None:
    for name, (content, _) in BAD_FILES.items():
        (tmp_path / "pkg" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "pkg" / name).write_bytes(content)
    (tmp_path / "good.py").write_text(LEGACY)
    (tmp_path / "pkg" / "also_good.py").write_text(LEGACY)
    out = run_cli("apply", ".", cwd=tmp_path)
    assert out.returncode == 1
    stderr = _stderr(out)
    for name, (content, expected) in BAD_FILES.items():
        lines = _lines_naming(stderr, name)
        assert len(lines) == 1 and lines[0].startswith(expected.replace("failed: ", "failed: pkg/")), stderr
        assert (tmp_path / "pkg" / name).read_bytes() == content
    assert (tmp_path / "good.py").read_text() == FIXED
    assert (tmp_path / "pkg" / "also_good.py").read_text() == FIXED
    assert f"{len(BAD_FILES) + 2} files scanned, 2 changed, {len(BAD_FILES)} failed" in stderr
    assert _temp_files(tmp_path) == []


def test_python2_file_is_not_mistaken_for_a_clean_one(tmp_path: Path) -> None:
    """``--diff`` on a Python 2 file with legacy torch code: no diff, the reason, exit 1."""
    content, expected = BAD_FILES["python2_exec.py"]
    (tmp_path / "python2_exec.py").write_bytes(content)
    out = run_cli("apply", "--diff", "python2_exec.py", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == b""
    assert expected in _stderr(out)


# -- files that are fine but empty -------------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"\n", b"# nothing here\n", b"\xef\xbb\xbf"])
def test_empty_file_is_fine_and_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.py"
    path.write_bytes(content)
    for command in ("apply", "check"):
        out = run_cli(command, "empty.py", cwd=tmp_path)
        assert out.returncode == 0 and out.stdout == b""
        assert "1 file scanned" in _stderr(out)
    assert path.read_bytes() == content


# -- paths that are not Python files -----------------------------------------------------------
def test_folder_without_python_files(tmp_path: Path) -> None:
    """A folder with nothing to do is a warning, as in ruff, not a failure (exit 0)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("torch.load('x')\n")
    (tmp_path / "good.py").write_text(LEGACY)
    out = run_cli("apply", "docs", "good.py", cwd=tmp_path)
    assert out.returncode == 0
    assert _lines_naming(_stderr(out), "docs") == ["skipped: docs: no Python files found in this folder"]
    assert (tmp_path / "good.py").read_text() == FIXED
    empty = tmp_path / "empty"
    empty.mkdir()
    alone = run_cli("check", "empty", cwd=tmp_path)
    assert alone.returncode == 0 and "failed" not in _lines_naming(_stderr(alone), "empty")[0]


def test_path_that_does_not_exist_is_reported_and_the_rest_still_run(tmp_path: Path) -> None:
    """Named and exit 2 (an error), but the paths that exist are still processed."""
    (tmp_path / "good.py").write_text(LEGACY)
    out = run_cli("check", "good.py", "missing.py", "gone/", cwd=tmp_path)
    assert out.returncode == 2
    assert "no such file or folder: missing.py, gone" in _stderr(out)
    assert b"good.py:7:27: TFD005" in out.stdout  # the rest still ran
    out = run_cli("apply", "good.py", "missing.py", "gone/", cwd=tmp_path)
    assert out.returncode == 2 and "no such file or folder: missing.py, gone" in _stderr(out)
    assert (tmp_path / "good.py").read_text() == FIXED
    only_missing = run_cli("check", "missing.py", cwd=tmp_path)
    assert only_missing.returncode == 2 and only_missing.stdout == b""


def test_non_python_file_named_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "train.sh").write_text("python -c 'import torch; torch.load(\"m.pt\")'\n")
    (tmp_path / "setup.cfg").write_text("[metadata]\n")
    (tmp_path / "good.py").write_text(LEGACY)
    out = run_cli("apply", "train.sh", "good.py", "setup.cfg", cwd=tmp_path)
    assert out.returncode == 1
    stderr = _stderr(out)
    assert _lines_naming(stderr, "train.sh") == ["failed: train.sh: not a Python file (.py); skipped"]
    assert _lines_naming(stderr, "setup.cfg") == ["failed: setup.cfg: not a Python file (.py); skipped"]
    assert (tmp_path / "train.sh").read_text().startswith("python -c")
    assert (tmp_path / "good.py").read_text() == FIXED


def test_same_file_named_twice_is_processed_once(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "m.py"
    path.write_text(LEGACY)
    names = ("pkg/m.py", "./pkg/m.py", str(path), "pkg", ".")
    check = run_cli("check", *names, cwd=tmp_path)
    assert check.returncode == 1
    assert check.stdout.decode().splitlines() == [
        "pkg/m.py:7:27: TFD005 [*] `torch.load` without `map_location`: add `map_location=device`",
        "pkg/m.py:10:27: TFD006 [*] `.data[0]` on a scalar: use `.item()`",
    ]
    diff = run_cli("apply", "--diff", *names, cwd=tmp_path)
    assert diff.stdout.count(b"--- a/pkg/m.py") == 1
    out = run_cli("apply", *names, cwd=tmp_path)
    assert out.returncode == 0
    assert "1 file scanned, 1 changed, 0 failed" in _stderr(out)
    assert path.read_text() == FIXED


def test_symlinked_file_is_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "shared" / "model.py"
    target.parent.mkdir()
    target.write_text(LEGACY)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "model.py").symlink_to(target)
    (tree / "good.py").write_text(LEGACY)

    walked = run_cli("apply", ".", cwd=tree)  # a folder walk does not follow the link
    assert walked.returncode == 0 and "1 file scanned, 1 changed" in _stderr(walked)

    named = run_cli("apply", "model.py", cwd=tree)  # named: said so, not followed
    stderr = _stderr(named)
    assert named.returncode == 0  # skipped, not failed (like a file over the size limit)
    assert _lines_naming(stderr, "model.py") == ["skipped: model.py: symbolic link: not followed, never written through"]
    assert "1 skipped" in stderr
    assert target.read_text() == LEGACY
    assert (tree / "model.py").is_symlink() and os.readlink(tree / "model.py") == str(target)
    assert (tree / "good.py").read_text() == FIXED


def test_read_only_file_with_a_finding_is_reported_and_left_intact(tmp_path: Path) -> None:
    path = tmp_path / "frozen.py"
    path.write_text(LEGACY)
    path.chmod(0o444)
    (tmp_path / "good.py").write_text(LEGACY)
    try:
        check = run_cli("check", "frozen.py", cwd=tmp_path)
        assert check.returncode == 1 and b"frozen.py:7:27: TFD005" in check.stdout  # still reported
        out = run_cli("apply", ".", cwd=tmp_path)
        assert out.returncode == 1
        stderr = _stderr(out)
        assert _lines_naming(stderr, "frozen.py") == ["failed: frozen.py: not writable: left unchanged"]
        assert "2 files scanned, 1 changed, 1 failed; fixes: TFD005 ×1, TFD006 ×1" in stderr  # the failed write is no fix
        assert path.read_text() == LEGACY
        assert oct(path.stat().st_mode & 0o777) == oct(0o444)
        assert (tmp_path / "good.py").read_text() == FIXED
        assert _temp_files(tmp_path) == []
    finally:
        path.chmod(0o644)

"""``apply --output-dir DIR`` through the console script: rewritten copies of every selected
file, the input untouched."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import run_cli

LEGACY = b"import torch\r\n\r\nstate = torch.load('ckpt.pt').cuda()\r\n"
BROKEN = b"import torch\nx = torch.load(\n"
CLEAN = b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_bytes(LEGACY)
    (src / "pkg" / "clean.py").write_bytes(CLEAN)
    (src / "pkg" / "broken.py").write_bytes(BROKEN)
    (src / "run.py").write_bytes(b"#!/usr/bin/env python\nimport torch\nm = torch.load('m')\n")
    os.chmod(src / "run.py", 0o755)
    return tmp_path


def _tree(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode))
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_copies_every_file_and_leaves_the_input_untouched(project: Path) -> None:
    before = _tree(project / "src")
    out = run_cli("apply", "--output-dir", "migrated", "src", cwd=project)
    assert out.returncode == 1  # broken.py cannot be parsed; it is still copied
    assert "wrote 4 files under migrated; the input is untouched" in out.stderr.decode()
    assert _tree(project / "src") == before
    copies = {p.relative_to(project / "migrated").as_posix() for p in (project / "migrated").rglob("*") if p.is_file()}
    assert copies == {"src/train.py", "src/run.py", "src/pkg/clean.py", "src/pkg/broken.py"}
    assert (project / "migrated/src/pkg/clean.py").read_bytes() == CLEAN
    assert (project / "migrated/src/pkg/broken.py").read_bytes() == BROKEN
    assert stat.S_IMODE((project / "migrated/src/run.py").stat().st_mode) == 0o755

    # the copies are what an in-place apply writes
    in_place = project / "in_place"
    shutil.copytree(project / "src", in_place / "src")
    run_cli("apply", "src", cwd=in_place)
    for name in ("train.py", "run.py"):
        expected = (in_place / "src" / name).read_bytes()
        assert expected != (project / "src" / name).read_bytes()
        assert (project / "migrated" / "src" / name).read_bytes() == expected
    assert b"\r\n" in (project / "migrated/src/train.py").read_bytes()  # line endings kept


def test_copies_of_copies_are_identical(project: Path) -> None:
    """The migrated tree is a fixed point: migrating it again copies it byte for byte."""
    run_cli("apply", "--output-dir", "migrated", "src", cwd=project)
    again = run_cli("apply", "--output-dir", "../migrated2", ".", cwd=project / "migrated")
    assert again.returncode == 1 and "0 changed" in again.stderr.decode()  # only broken.py fails
    first = {k: (data, mode) for k, (data, _, mode) in _tree(project / "migrated").items()}
    second = {k: (data, mode) for k, (data, _, mode) in _tree(project / "migrated2").items()}
    assert second == first and len(first) == 4


@pytest.mark.parametrize(
    "args, message",
    [
        (("--output-dir", "src/out", "src"), "is inside the input folder src"),
        (("--output-dir", ".", "src/train.py", "."), "--output-dir . is the input folder ."),
        (("--output-dir", "out", "--diff", "src"), "--output-dir and --diff cannot be combined"),
        (("--output-dir", "src/train.py", "src/pkg"), "exists and is not a folder"),
    ],
)
def test_bad_output_dirs_are_refused(project: Path, args: tuple[str, ...], message: str) -> None:
    before = _tree(project)
    out = run_cli("apply", *args, cwd=project)
    assert out.returncode == 2
    assert message in out.stderr.decode() and "Traceback" not in out.stderr.decode()
    assert _tree(project) == before


@pytest.mark.parametrize(
    "args, message",
    [
        # the current folder holds the input: the copies would land on the inputs themselves
        (("--output-dir", ".", "src"), "--output-dir . contains the input src"),
        (("--output-dir", ".", "src/train.py"), "--output-dir . contains the input src/train.py"),
        (("--output-dir", "./", "src/pkg"), "--output-dir . contains the input src/pkg"),
        (("--output-dir", "..", "src"), "--output-dir .. contains the input src"),
        # the same folders reached through a symbolic link: checked on real paths
        (("--output-dir", "here", "src"), "--output-dir here contains the input src"),
        (("--output-dir", "here/src/new", "src"), "--output-dir here/src/new is inside the input folder src"),
        (("--output-dir", "src", "here/src"), "--output-dir src is the input folder here/src"),
    ],
)
def test_an_output_dir_that_is_contains_or_lies_inside_an_input_is_refused(
    project: Path, args: tuple[str, ...], message: str
) -> None:
    """Issue 22, item 1: ``--output-dir .`` rewrote the inputs in place (the copy of ``src/x.py``
    under ``.`` is ``src/x.py``), skipped the git check and said the input was untouched."""
    (project / "here").symlink_to(".")
    before = _tree(project / "src")
    out = run_cli("apply", *args, cwd=project)
    stderr = out.stderr.decode()
    assert out.returncode == 2, stderr
    assert message in stderr and "Traceback" not in stderr, stderr
    assert "untouched" not in stderr
    assert _tree(project / "src") == before
    assert not (project / "src" / "new").exists() and not (project / "src" / "src").exists()

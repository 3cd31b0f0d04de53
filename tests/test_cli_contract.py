"""The command-line contract (DESIGN.md), through the installed console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

LEGACY = """\
import torch
import torch.nn as nn


def train(model, loader):
    criterion = nn.CrossEntropyLoss()
    total = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        total += loss.data[0]
    return total


state = torch.load("ckpt.pt")
"""

CLEAN = "import os\n\nprint(os.getcwd())\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_help_and_version() -> None:
    assert run_cli("--help").returncode == 0
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.decode().startswith("torchfix-device ")
    module = subprocess.run([sys.executable, "-m", "torchfix_device", "--help"], capture_output=True)
    assert module.returncode == 0 and b"apply" in module.stdout


def test_rules_lists_every_codemod_with_its_safety() -> None:
    out = run_cli("rules").stdout.decode()
    for code in ("TFD001", "TFD002", "TFD003", "TFD004", "TFD005", "TFD006", "TFD007"):
        assert code in out
    assert "safe" in out and "unsafe" in out


def test_explain_shows_every_section_and_rejects_unknown_codes() -> None:
    out = run_cli("explain", "TFD005")
    assert out.returncode == 0
    text = out.stdout.decode()
    for heading in ("What it does", "Why is this bad?", "Example", "Use instead", "Not rewritten", "Fix safety"):
        assert heading in text
    assert run_cli("explain", "torch-load-without-map-location").returncode == 0
    bad = run_cli("explain", "NOPE")
    assert bad.returncode == 2 and b"unknown codemod 'NOPE'" in bad.stderr and b"Traceback" not in bad.stderr


def test_check_prints_findings_on_stdout_and_exits_1(project: Path) -> None:
    out = run_cli("check", ".", cwd=project)
    assert out.returncode == 1
    lines = out.stdout.decode().splitlines()
    assert "legacy.py:10:18 TFD006 `.data[0]` on a scalar: use `.item()`" in lines
    assert any(line.startswith("legacy.py:14:9 TFD005 ") for line in lines)
    assert b"scanned" in out.stderr and b"scanned" not in out.stdout  # the summary goes to stderr


def test_check_exits_0_without_findings(project: Path) -> None:
    out = run_cli("check", "clean.py", cwd=project)
    assert out.returncode == 0 and out.stdout == b""


def test_diff_writes_nothing_and_apply_is_idempotent(project: Path) -> None:
    path = project / "legacy.py"
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    diff = run_cli("apply", "--diff", ".", cwd=project)
    assert diff.returncode == 0
    assert diff.stdout.startswith(b"--- a/legacy.py\n+++ b/legacy.py\n")
    assert b"+        total += loss.item()" in diff.stdout
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert b"\x1b[" not in diff.stdout  # no colour in a pipe

    assert run_cli("apply", ".", cwd=project).returncode == 0
    rewritten = path.read_bytes()
    assert b"loss.item()" in rewritten and b'map_location=device' in rewritten
    again = run_cli("apply", ".", cwd=project)
    assert again.returncode == 0 and path.read_bytes() == rewritten
    assert run_cli("apply", "--diff", ".", cwd=project).stdout == b""


def test_select_and_ignore_by_code_and_name(project: Path) -> None:
    only_item = run_cli("check", "--select", "loss-data-index", ".", cwd=project).stdout.decode()
    assert "TFD006" in only_item and "TFD005" not in only_item
    both = run_cli("check", "--select", "TFD005,TFD006", ".", cwd=project).stdout.decode()
    assert "TFD006" in both and "TFD005" in both
    ignored = run_cli("check", "--ignore", "TFD006", ".", cwd=project).stdout.decode()
    assert "TFD006" not in ignored and "TFD005" in ignored
    unknown = run_cli("check", "--select", "TFD999", ".", cwd=project)
    assert unknown.returncode == 2 and b"unknown codemod" in unknown.stderr


def test_pyproject_configuration_and_command_line_precedence(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.torchfix-device]\nselect = ["TFD005"]\n')
    configured = run_cli("check", ".", cwd=project).stdout.decode()
    assert "TFD005" in configured and "TFD006" not in configured
    overridden = run_cli("check", "--select", "TFD006", ".", cwd=project).stdout.decode()
    assert "TFD006" in overridden and "TFD005" not in overridden

    (project / "pyproject.toml").write_text('[tool.torchfix-device]\nexclude = ["legacy.py"]\n')
    assert run_cli("check", ".", cwd=project).returncode == 0

    (project / "pyproject.toml").write_text('[tool.torchfix-device]\nselekt = ["TFD005"]\n')
    bad = run_cli("check", ".", cwd=project)
    assert bad.returncode == 2 and b"selekt" in bad.stderr and b"Traceback" not in bad.stderr


def test_missing_path_is_usage_error(project: Path) -> None:
    out = run_cli("apply", "does_not_exist.py", cwd=project)
    assert out.returncode == 2 and b"does_not_exist.py" in out.stderr and b"Traceback" not in out.stderr


def test_git_apply_accepts_the_dry_run(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "legacy.py").write_text(LEGACY)
    (repo / "crlf.py").write_bytes(LEGACY.replace("\n", "\r\n").encode())
    (repo / "no_newline.py").write_text(LEGACY.rstrip("\n"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["config", "core.autocrlf", "false"], ["add", "."], ["commit", "-qm", "legacy"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    patch = run_cli("apply", "--diff", ".", cwd=repo).stdout
    assert patch.count(b"--- a/") == 3
    (repo / "fix.patch").write_bytes(patch)
    subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=repo, check=True)
    subprocess.run(["git", "apply", "fix.patch"], cwd=repo, check=True)
    patched = {p: (repo / p).read_bytes() for p in ("pkg/legacy.py", "crlf.py", "no_newline.py")}
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    assert run_cli("apply", "pkg", "crlf.py", "no_newline.py", cwd=repo).returncode == 0
    for name, content in patched.items():
        assert (repo / name).read_bytes() == content, name
    assert b"\r\n" in patched["crlf.py"] and b"\n" not in patched["crlf.py"].replace(b"\r\n", b"")
    assert not patched["no_newline.py"].endswith(b"\n")

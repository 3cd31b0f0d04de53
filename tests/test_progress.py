"""The progress bar (item 11): on stderr when it is a terminal and the run is long; nothing of it
in non-interactive output. Through the installed console script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import console_script
from torchfix_device.progress import MIN_FILES

LEGACY = 'import torch\n\nstate = torch.load("ckpt.pt")\n'
BAR = "━"  # rich's bar character


def _tree(folder: Path, count: int) -> Path:
    for index in range(count):
        (folder / f"m{index:03d}.py").write_text(LEGACY)
    return folder


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")}
    return {**env, "TERM": "xterm-256color", "COLUMNS": "120"}


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(console_script()[0], args, cwd=str(cwd), env=_env(), timeout=240, encoding="utf-8")
    child.expect(pexpect.EOF)
    child.close()
    return child.before


def test_a_long_run_on_a_terminal_shows_a_bar(tmp_path: Path) -> None:
    count = MIN_FILES + 5
    text = _on_a_terminal(["check", "."], _tree(tmp_path, count))
    assert BAR in text, text
    assert f"{count}/{count}" in text  # files done / files in the run
    assert f"{count} files scanned, {count} would change" in text


def test_a_short_run_on_a_terminal_shows_none(tmp_path: Path) -> None:
    text = _on_a_terminal(["check", "."], _tree(tmp_path, 3))
    assert BAR not in text and "3/3" not in text
    assert "3 files scanned, 3 would change" in text


@pytest.mark.parametrize("command", ["check", "apply"])
def test_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path, command: str) -> None:
    count = MIN_FILES + 5
    out = subprocess.run(
        [*console_script(), command, "."], cwd=_tree(tmp_path, count), env={**_env(), "FORCE_COLOR": "1"},
        capture_output=True, timeout=240,
    )
    stderr = out.stderr.decode()
    assert BAR not in stderr and f"{count}/{count}" not in stderr and "\x1b[?25l" not in stderr, stderr
    summary = [line for line in stderr.splitlines() if "files scanned" in line]
    assert len(summary) == 1, stderr
    assert BAR.encode() not in out.stdout

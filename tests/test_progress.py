"""The progress bar (item 11): on stderr when it is a terminal and the run is long; nothing of it
in non-interactive output. Through the installed console script."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import console_script
from torchfix_device.report.progress import MIN_FILES

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


def test_the_bar_shows_the_path_below_the_folder_given_and_an_eta(tmp_path: Path) -> None:
    """Issue 33, item 10: the file is named by its path below the folder given (``pkg/m007.py``
    for ``proj/pkg/m007.py`` of ``check proj``), not by its bare name, and the bar says how long
    the rest should take."""
    count = MIN_FILES + 5
    _tree((tmp_path / "proj" / "pkg").mkdir(parents=True) or tmp_path / "proj" / "pkg", count)
    text = _on_a_terminal(["check", "--output-file", str(tmp_path / "findings.txt"), "proj"], tmp_path)
    assert BAR in text, text
    assert re.search(r"\d+/25 \d:\d\d:\d\d ETA (\d:\d\d:\d\d|-:--:--) pkg/m0\d\d\.py", text), text
    assert "proj/pkg/" not in text  # the findings went to the file; the bar never names the folder given
    assert re.search(r"25/25 \d:\d\d:\d\d ETA 0:00:00 pkg/m0\d\d\.py", text), text


def test_a_long_path_keeps_its_end_in_a_narrow_terminal(monkeypatch) -> None:
    import io

    from torchfix_device.report import progress
    from torchfix_device.report.progress import _Bar

    monkeypatch.setattr(progress, "REDRAW_S", 0.0)
    monkeypatch.setenv("COLUMNS", "120")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    bar = _Bar(stream, 1, [Path("src")])
    bar.start(2)
    bar.advance(Path("src") / ("deep/" * 40) / "train.py")
    bar.advance(Path("src/pkg/b.py"))
    drawn = stream.getvalue()
    lines = drawn.split("\r\x1b[2K")
    assert re.search(r"1/2 .* …\S*deep/deep/train\.py$", lines[2]), lines  # the start cut, the end kept
    assert len(re.sub(r"\x1b\[[0-9;]*m", "", lines[2])) < 120
    assert lines[3].endswith(" pkg/b.py") and "src/" not in drawn


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


def _slow_first(path: Path, codemods, **settings):
    """The pool's job, with the first file in display order made slow (a pool worker runs it)."""
    from torchfix_device.run.job import process_file

    if path.name == "a00.py":
        import time

        time.sleep(3)
    return process_file(path, codemods, **settings)


class _Recorder:
    def __init__(self) -> None:
        self.total = 0
        self.done: list[str] = []

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, path: Path) -> None:
        self.done.append(path.name)


def test_progress_follows_the_files_as_they_finish_with_jobs(tmp_path: Path, monkeypatch) -> None:
    """With ``--jobs 2`` the files are handed out biggest first and collected in path order: the
    bar stood still while the first file in path order was still running. It now advances as
    each file finishes; the results keep the display order."""
    from torchfix_device.codemods import catalog
    from torchfix_device.run import parallel
    from torchfix_device.run.runner import run

    for index in range(6):
        (tmp_path / f"a{index:02d}.py").write_text(LEGACY)
    monkeypatch.setattr(parallel, "process_file", _slow_first)
    recorder = _Recorder()
    results = run([tmp_path], catalog.refs(), jobs=2, progress=recorder)
    names = [f"a{index:02d}.py" for index in range(6)]
    assert [r.path.name for r in results] == names
    assert recorder.total == 6 and sorted(recorder.done) == names
    assert recorder.done[-1] == "a00.py", recorder.done  # the others were reported as they finished

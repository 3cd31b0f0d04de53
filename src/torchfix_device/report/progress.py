"""A progress bar on stderr for long runs — only when stderr is a terminal.

Nothing of it reaches a pipe or a file: scripts and CI logs see the same output as before. The
bar is one line redrawn in place (``torchfix-device ━━━━━━━━━━━━ 12/25 0:00:01 train.py``) and
erased when the run ends; it is drawn here rather than with rich, so that a run answered from
the cache imports nothing heavy even on a terminal.
"""

from __future__ import annotations

import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from torchfix_device.report.termout import wants_colour

MIN_FILES = 20
"""Runs over fewer files finish before a bar would be worth reading."""
BAR_WIDTH = 30
REDRAW_S = 0.05
"""At most one redraw this often (and always the last)."""
ERASE_LINE, HIDE_CURSOR, SHOW_CURSOR = "\r\x1b[2K", "\x1b[?25l", "\x1b[?25h"


class FileProgress:
    """What :func:`torchfix_device.run.runner.run` calls: ``start`` once, ``advance`` per file."""

    def start(self, total: int) -> None:  # pragma: no cover - the quiet default
        pass

    def advance(self, path: Path) -> None:  # pragma: no cover - the quiet default
        pass


class _Bar(FileProgress):
    def __init__(self, stream: IO[str], min_files: int) -> None:
        self._stream = stream
        self._min_files = min_files
        self._colour = wants_colour(stream)
        self._shown = False
        self._total = self._done = 0
        self._started = self._drawn = 0.0

    def start(self, total: int) -> None:
        self._total, self._done, self._started = total, 0, time.monotonic()
        if total >= self._min_files:
            self._shown = True
            self._stream.write(HIDE_CURSOR)
            self._draw("")

    def advance(self, path: Path) -> None:
        self._done += 1
        if self._shown and (self._done >= self._total or time.monotonic() - self._drawn >= REDRAW_S):
            self._draw(path.name)

    def _draw(self, name: str) -> None:
        self._drawn = time.monotonic()
        filled = BAR_WIDTH * self._done // max(self._total, 1)
        bar = "━" * filled + "╺" * (BAR_WIDTH - filled > 0) + " " * max(BAR_WIDTH - filled - 1, 0)
        seconds = int(self._drawn - self._started)
        label = "\x1b[1mtorchfix-device\x1b[0m" if self._colour else "torchfix-device"
        line = f"{bar} {self._done}/{self._total} {seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d} {name}"
        width = shutil.get_terminal_size().columns - len("torchfix-device ") - 1
        self._stream.write(f"{ERASE_LINE}{label} {line[:max(width, 0)]}")
        self._stream.flush()

    def stop(self) -> None:
        if self._shown:
            self._stream.write(ERASE_LINE + SHOW_CURSOR)
            self._stream.flush()
            self._shown = False


@contextmanager
def file_progress(stream: IO[str] | None = None, min_files: int = MIN_FILES) -> Iterator[FileProgress | None]:
    """A bar on ``stream`` (stderr) when it is a terminal, else None (no output at all)."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield None
        return
    bar = _Bar(stream, min_files)
    try:
        yield bar
    finally:
        bar.stop()

"""A progress bar on stderr for long runs — only when stderr is a terminal.

Nothing of it reaches a pipe or a file: scripts and CI logs see the same output as before. The
bar is one line redrawn in place (``torchfix-device ━━━━━━━━━━╺━ 12/25 0:00:01 ETA 0:00:01
pkg/train.py``: files done, time taken, time left at the pace so far, and the file just done,
relative to the folder given) and erased when the run ends; it is drawn here rather than with
rich, so that a run answered from the cache imports nothing heavy even on a terminal.
"""

from __future__ import annotations

import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator, Sequence

from torchfix_device.files.safe_paths import root_of
from torchfix_device.files.selection import display_path
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


def clock(seconds: float) -> str:
    """``0:01:05``."""
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def shown_path(path: Path, roots: Sequence[Path]) -> str:
    """``path`` relative to the folder given that it was found under (``pkg/train.py`` for
    ``src/pkg/train.py`` of ``check src``), else as the messages show it."""
    root = root_of(path, roots)
    if root is None:
        return display_path(path)
    return Path(*path.parts[len(root.parts):]).as_posix()


class _Bar(FileProgress):
    def __init__(self, stream: IO[str], min_files: int, roots: Sequence[Path] = ()) -> None:
        self._stream = stream
        self._roots = tuple(roots)
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
            self._draw(shown_path(path, self._roots))

    def _draw(self, name: str) -> None:
        self._drawn = time.monotonic()
        filled = BAR_WIDTH * self._done // max(self._total, 1)
        bar = "━" * filled + "╺" * (BAR_WIDTH - filled > 0) + " " * max(BAR_WIDTH - filled - 1, 0)
        elapsed = self._drawn - self._started
        left = clock(elapsed / self._done * (self._total - self._done)) if self._done else "-:--:--"
        label = "\x1b[1mtorchfix-device\x1b[0m" if self._colour else "torchfix-device"
        line = f"{bar} {self._done}/{self._total} {clock(elapsed)} ETA {left} "
        width = shutil.get_terminal_size().columns - len("torchfix-device ") - 1
        room = width - len(line)
        if len(name) > room:  # the file's own name is the end of the path: cut the start
            name = "…" + name[len(name) - room + 1:] if room > 1 else ""
        self._stream.write(f"{ERASE_LINE}{label} {(line + name)[:max(width, 0)]}")
        self._stream.flush()

    def stop(self) -> None:
        if self._shown:
            self._stream.write(ERASE_LINE + SHOW_CURSOR)
            self._stream.flush()
            self._shown = False


@contextmanager
def file_progress(stream: IO[str] | None = None, min_files: int = MIN_FILES,
                  roots: Sequence[Path] = ()) -> Iterator[FileProgress | None]:
    """A bar on ``stream`` (stderr) when it is a terminal, else None (no output at all).
    ``roots``: the paths given, which the bar shows the files relative to."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield None
        return
    bar = _Bar(stream, min_files, [r for r in roots if r.is_dir()])
    try:
        yield bar
    finally:
        bar.stop()

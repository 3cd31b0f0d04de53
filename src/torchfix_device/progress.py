"""A progress bar on stderr for long runs — only when stderr is a terminal.

Nothing of it reaches a pipe or a file: scripts and CI logs see the same output as before. The
bar (and rich) appears only once a run of :data:`MIN_FILES` files or more has taken
:data:`DELAY_S`: a run answered from the cache is over before then and never imports rich.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

MIN_FILES = 20
"""Runs over fewer files finish before a bar would be worth reading."""
DELAY_S = 0.25
"""A run that is over sooner shows no bar."""


class FileProgress:
    """What :func:`torchfix_device.runner.run` calls: ``start`` once, ``advance`` per file."""

    def start(self, total: int) -> None:  # pragma: no cover - the quiet default
        pass

    def advance(self, path: Path) -> None:  # pragma: no cover - the quiet default
        pass


class _Bar(FileProgress):
    def __init__(self, stream: IO[str], min_files: int, delay: float = DELAY_S) -> None:
        self._stream = stream
        self._min_files = min_files
        self._delay = delay
        self._progress: Any = None
        self._task = None
        self._total = 0
        self._done = 0
        self._started = 0.0

    def start(self, total: int) -> None:
        self._total, self._done, self._started = total, 0, time.monotonic()

    def advance(self, path: Path) -> None:
        self._done += 1
        if self._progress is None and self._total >= self._min_files and time.monotonic() - self._started >= self._delay:
            self._show()
        if self._progress is not None:
            self._progress.update(self._task, completed=self._done, description=path.name)

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=self._stream, highlight=False)
        self._progress = Progress(
            TextColumn("[bold]torchfix-device[/]"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.description}"),
            console=console, transient=True,
        )
        self._task = self._progress.add_task("", total=self._total)
        self._progress.start()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


@contextmanager
def file_progress(
    stream: IO[str] | None = None, min_files: int = MIN_FILES, delay: float = DELAY_S
) -> Iterator[FileProgress | None]:
    """A bar on ``stream`` (stderr) when it is a terminal, else None (no output at all)."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield None
        return
    bar = _Bar(stream, min_files, delay)
    try:
        yield bar
    finally:
        bar.stop()

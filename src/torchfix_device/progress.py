"""A progress bar on stderr for long runs — only when stderr is a terminal.

Nothing of it reaches a pipe or a file: scripts and CI logs see the same output as before.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

MIN_FILES = 20
"""Runs over fewer files finish before a bar would be worth reading."""


class FileProgress:
    """What :func:`torchfix_device.runner.run` calls: ``start`` once, ``advance`` per file."""

    def start(self, total: int) -> None:  # pragma: no cover - the quiet default
        pass

    def advance(self, path: Path) -> None:  # pragma: no cover - the quiet default
        pass


class _Bar(FileProgress):
    def __init__(self, stream: IO[str], min_files: int) -> None:
        self._stream = stream
        self._min_files = min_files
        self._progress: Progress | None = None
        self._task = None

    def start(self, total: int) -> None:
        if total < self._min_files:
            return
        console = Console(file=self._stream, highlight=False)
        self._progress = Progress(
            TextColumn("[bold]torchfix-device[/]"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.description}"),
            console=console, transient=True,
        )
        self._task = self._progress.add_task("", total=total)
        self._progress.start()

    def advance(self, path: Path) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=path.name)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


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

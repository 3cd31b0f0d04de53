"""Which files a run leaves out beyond the fixed skip list: files git ignores, files marked
``@generated`` and files marked ``# torchfix-device: skip-file``.

* ``.gitignore``: inside a git work tree, ``git check-ignore`` decides (so nested
  ``.gitignore`` files, ``.git/info/exclude`` and the global excludes file all count, and a
  tracked file is never ignored). A file named on the command line is always processed.
* ``@generated``: only in a comment (read with :mod:`tokenize`); the word inside a string, as in
  a code generator's template, does not mark the file.
"""

from __future__ import annotations

import io
import os
import subprocess
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from torchfix_device.options import RunOptions
from torchfix_device.suppressions import may_hold_directives, parse_suppressions

GENERATED_MARK = "@generated"
SKIP_FILE_MESSAGE = "marked `# torchfix-device: skip-file`; skipped"


@dataclass(frozen=True)
class Skip:
    kind: str
    """Short tag the summary groups by."""
    message: str


def generated_marker_line(text: str) -> int | None:
    """The line of the first comment containing ``@generated``, if any."""
    if GENERATED_MARK not in text:
        return None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and GENERATED_MARK in token.string:
                return token.start[0]
    except (tokenize.TokenError, SyntaxError):
        return None  # the parser reports the file with its own message
    return None


@dataclass(frozen=True)
class Marks:
    """The comments that can make a run skip a file, read once (the result cache keeps them, so
    a file answered from it is not tokenized again)."""

    generated_line: int | None
    """The line of the first comment holding ``@generated``."""
    skip_file: bool
    """A ``# torchfix-device: skip-file`` comment."""


def read_marks(text: str) -> Marks:
    return Marks(generated_marker_line(text), may_hold_directives(text) and parse_suppressions(text).skip_file)


def skip_reason(text: str, options: RunOptions, marks: Marks | None = None) -> Skip | None:
    """Why a file with this text is not to be processed, or None. ``marks``: the file's
    :class:`Marks` when already known (otherwise only what ``options`` asks about is read)."""
    if not options.include_generated:
        line = marks.generated_line if marks is not None else generated_marker_line(text)
        if line is not None:
            return Skip("@generated", f"line {line}: marked @generated; skipped (--include-generated to process it)")
    if not options.report_unused_suppressions:
        skip_file = marks.skip_file if marks is not None else may_hold_directives(text) and parse_suppressions(text).skip_file
        if skip_file:
            return Skip("skip-file", SKIP_FILE_MESSAGE)
    return None


# -- .gitignore ---------------------------------------------------------------------------------
def git_work_tree_of(folder: Path, cache: dict[Path, Path | None]) -> Path | None:
    """The nearest folder at or above ``folder`` holding ``.git`` (a folder, or a file in a
    worktree or submodule), without running git."""
    if folder in cache:
        return cache[folder]
    top: Path | None
    if (folder / ".git").exists():
        top = folder
    elif folder.parent == folder:
        top = None
    else:
        top = git_work_tree_of(folder.parent, cache)
    cache[folder] = top
    return top


def git_ignored(top: Path, files: Sequence[Path]) -> set[Path]:
    """The ``files`` (absolute, below ``top``) that git ignores; none when git cannot tell."""
    relative = [os.path.relpath(f, top) for f in files]
    try:
        done = subprocess.run(
            ["git", "-C", str(top), "check-ignore", "-z", "--stdin"],
            input="\0".join(relative).encode("utf-8", "surrogateescape"),
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode not in (0, 1):  # 128: not a work tree after all, or git failed
        return set()
    ignored = {name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
    return {f for f, rel in zip(files, relative) if rel in ignored}


def drop_gitignored(files: Sequence[Path], named: Iterable[Path] = ()) -> tuple[list[Path], list[Path]]:
    """``files`` split into (kept, ignored by git). Files in ``named`` are always kept."""
    explicit = {p.resolve() for p in named if p.is_file()}
    cache: dict[Path, Path | None] = {}
    by_tree: dict[Path, list[Path]] = {}
    for path in files:
        absolute = path.resolve()
        if absolute in explicit:
            continue
        top = git_work_tree_of(absolute.parent, cache)
        if top is not None:
            by_tree.setdefault(top, []).append(absolute)
    ignored: set[Path] = set()
    for top, members in by_tree.items():
        ignored |= git_ignored(top, members)
    kept = [p for p in files if p.resolve() not in ignored]
    dropped = [p for p in files if p.resolve() in ignored]
    return kept, dropped

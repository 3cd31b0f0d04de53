"""Which files a run processes: the Python files under the paths given, less what it leaves out.

* Found: ``.py``, ``.pyi`` and ``.ipynb`` files named on the command line, and ``.py`` and
  ``.ipynb`` files under the folders named, walked in sorted order without following symbolic
  links, past the folders in :data:`SKIP_DIRS`, virtual environments and ``--exclude``
  patterns (:func:`find_files`). A path that is not such a file or a folder holding one gets a
  ``failed`` or ``skipped`` result saying why.
* ``.gitignore``: inside a git work tree, ``git check-ignore`` decides (so nested
  ``.gitignore`` files, ``.git/info/exclude`` and the global excludes file all count, and a
  tracked file is never ignored). A file named on the command line is always processed.
* Per file: a file over :data:`MAX_FILE_BYTES` (before it is read), and (:func:`skip_reason`)
  a file marked ``@generated`` -- only in a comment (read with :mod:`tokenize`); the word
  inside a string, as in a code generator's template, does not mark the file -- or marked
  ``# torchfix-device: skip-file``.
"""

from __future__ import annotations

import io
import os
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from torchfix_device.options import RunOptions
from torchfix_device.results import FileResult
from torchfix_device.files.safe_paths import not_regular_message
from torchfix_device.syntax.suppressions import may_hold_directives, parse_suppressions

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "__pycache__", "build", "dist", "site-packages", ".tox", ".nox",
        ".venv", "venv", ".eggs", "node_modules", ".mypy_cache", ".pytest_cache",
        ".torchfix_device_cache",
        # as ruff's default exclusions: Jupyter's autosave copies (a stale duplicate of every
        # notebook), other tools' caches
        ".ipynb_checkpoints", ".ruff_cache", ".pytype", "__pypackages__",
    }
)
MAX_FILE_BYTES = 1_000_000
"""Files larger than this are skipped with a message. libcst's Python-level passes handle roughly
0.1-0.5 MB of source a minute, so a bigger file (generated code, data tables) would stall the
whole run for many minutes."""


# -- finding files ------------------------------------------------------------------------------
def find_files(
    paths: Sequence[Path], exclude: Iterable[str] = (), *, respect_gitignore: bool = False, force_exclude: bool = False
) -> tuple[list[Path], list[FileResult]]:
    """The files a run processes (sorted by :func:`display_path`) and the results of the paths
    and files it does not: :func:`collect_files`, less what git ignores when
    ``respect_gitignore``."""
    files, problems = collect_files(paths, exclude, force_exclude=force_exclude)
    if respect_gitignore:
        files, ignored = drop_gitignored(files, paths)
        problems += [FileResult(p, display_path(p), "skipped", error="ignored by .gitignore", skip_kind=".gitignore") for p in ignored]
    return files, problems


def display_path(path: Path) -> str:
    """``path`` relative to the current directory when it is below it (POSIX separators)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path.as_posix()
    return path.as_posix() if relative.startswith("..") else relative.replace(os.sep, "/")


def collect_files(
    paths: Sequence[Path], exclude: Iterable[str] = (), *, force_exclude: bool = False
) -> tuple[list[Path], list[FileResult]]:
    """Python files under ``paths`` (sorted, de-duplicated) and results for paths that are not.

    With ``force_exclude`` a path named in ``paths`` that ``exclude`` matches is left out too
    (skipped quietly, as ruff does). A path named that is a symbolic link (to a file or a
    folder) is refused: links are never followed. Only regular files are taken: a FIFO or a
    device named ``x.py`` is reported and skipped (reading it would block or never end).
    """
    exclude = tuple(exclude)
    found: dict[Path, Path] = {}
    problems: list[FileResult] = []
    for given in paths:
        try:
            mode = os.lstat(given).st_mode
        except OSError as exc:
            error = "no such file or folder" if isinstance(exc, FileNotFoundError) else f"cannot read: {exc.strerror}"
            problems.append(FileResult(given, display_path(given), "failed", error=error))
            continue
        if force_exclude and exclude and _excluded_as_named(given, exclude):
            problems.append(FileResult(given, display_path(given), "skipped", error="excluded", skip_kind="excluded"))
        elif stat.S_ISLNK(mode):
            broken = "" if given.exists() else " (broken or looping link)"
            problems.append(FileResult(given, display_path(given), "skipped", error=f"symbolic link{broken}: not followed, never written through"))
        elif stat.S_ISDIR(mode):
            walked = 0  # counted, not compared with len(found): `m.py pkg` finds pkg/m.py twice
            folders: dict[Path, Path] = {}
            for path in _walk_python_files(given, exclude, problems):
                found.setdefault(_resolved_in(path, folders), path)  # a walked file is never a link
                walked += 1
            if not walked and not any(p.path == given or given in p.path.parents for p in problems):
                problems.append(FileResult(  # a warning, as ruff's: nothing to do is not a failure
                    given, display_path(given), "skipped", error="no Python files found in this folder", skip_kind="no Python files"
                ))
        elif given.suffix not in (".py", ".pyi", ".ipynb"):
            problems.append(FileResult(given, display_path(given), "failed", error="not a Python file (.py); skipped"))
        elif not stat.S_ISREG(mode):
            problems.append(FileResult(given, display_path(given), "skipped", error=not_regular_message(mode), skip_kind="not a regular file"))
        else:
            found.setdefault(given.resolve(), given)
    files = sorted(found.values(), key=lambda p: display_path(p))
    return files, problems


def _walk_python_files(root: Path, exclude: tuple[str, ...], problems: list[FileResult]) -> Iterator[Path]:
    """The ``.py`` and ``.ipynb`` files under ``root``, folder by folder in sorted order, never
    through a symbolic link. A folder that cannot be listed or entered is reported (``failed``)
    and the walk goes on; a Python-named entry that is not a regular file is reported
    (``skipped``). Each entry's type comes from the folder listing (``lstat`` where the file
    system does not give it), so nothing inside a folder is looked at unless it can be."""

    def problem(where: Path, status: str, error: str, kind: str | None = None) -> None:
        problems.append(FileResult(where, display_path(where), status, error=error, skip_kind=kind))  # type: ignore[arg-type]

    pending = [root]
    while pending:
        folder = pending.pop()
        if folder != root and not _may_enter(folder):
            problem(folder, "failed", "cannot enter folder: Permission denied")
            continue
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            problem(folder, "failed", f"cannot read folder: {exc.strerror}")
            continue
        subfolders: list[Path] = []
        for entry in entries:
            path = folder / entry.name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS and not os.path.lexists(path / "pyvenv.cfg") and not _excluded(path, exclude):
                        subfolders.append(path)
                elif entry.name.endswith((".py", ".ipynb")) and not _excluded(path, exclude):
                    if entry.is_file(follow_symlinks=False):
                        yield path
                    else:
                        mode = entry.stat(follow_symlinks=False).st_mode
                        problem(path, "skipped", not_regular_message(mode), "not a regular file")
            except OSError as exc:
                problem(folder, "failed", f"cannot enter folder: {exc.strerror}")
                break
        else:
            pending.extend(reversed(subfolders))


def _may_enter(folder: Path) -> bool:
    """Whether the runner may look inside ``folder`` (``x`` on it): a folder listed but not
    entered (``chmod 644``) is reported once instead of failing on each file in it."""
    extra = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    try:
        return os.access(folder, os.X_OK, **extra)
    except OSError:
        return False


def _excluded_as_named(path: Path, patterns: tuple[str, ...]) -> bool:
    """A path named on the command line matches a pattern: itself, or a folder above it
    (relative to the current folder, as pre-commit names files)."""
    shown = Path(display_path(path))
    return any(_excluded(candidate, patterns) for candidate in (shown, *shown.parents) if str(candidate) != ".")


def _excluded(path: Path, patterns: tuple[str, ...]) -> bool:
    posix = path.as_posix()
    return any(path.match(p) or Path(posix).match(p.rstrip("/") + "/**") or p.rstrip("/") in path.parts for p in patterns)


# -- skipping a file by its content -------------------------------------------------------------
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
    import subprocess  # only inside a git work tree

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
    folders: dict[Path, Path] = {}  # a folder's resolved path: files are never links (found ones are not followed)
    resolved = {path: _resolved_in(path, folders) for path in files}
    by_tree: dict[Path, list[Path]] = {}
    for path in files:
        absolute = resolved[path]
        if absolute in explicit:
            continue
        top = git_work_tree_of(absolute.parent, cache)
        if top is not None:
            by_tree.setdefault(top, []).append(absolute)
    ignored: set[Path] = set()
    for top, members in by_tree.items():
        ignored |= git_ignored(top, members)
    if not ignored:
        return list(files), []
    kept = [p for p in files if resolved[p] not in ignored]
    dropped = [p for p in files if resolved[p] in ignored]
    return kept, dropped


def _resolved_in(path: Path, folders: dict[Path, Path]) -> Path:
    """``path.resolve()``, its folder resolved once for all its files (a link is resolved itself)."""
    if path.is_symlink():
        return path.resolve()
    parent = path.parent
    if parent not in folders:
        folders[parent] = parent.resolve()
    return folders[parent] / path.name

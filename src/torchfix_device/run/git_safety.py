"""Git safety for ``apply`` (the model: ``cargo fix``).

Inside a git work tree, ``apply`` rewrites only files whose current content git can give back
(``git checkout -- FILE``): a file with uncommitted changes — modified, staged, untracked or
ignored — is refused unless ``--allow-dirty``. Outside git nothing can give the old content
back, and ``apply`` says so.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    from torchfix_device.results import FileResult

UNCOMMITTED, UNTRACKED, IGNORED = "has uncommitted changes", "is not tracked by git", "is ignored by git (not tracked)"
"""Why git could not give a file back, as ``git status`` says it."""
REFUSED = "; not rewritten"
REFUSAL_KIND = "uncommitted changes"
"""How the summary counts refused files: ``3 refused (uncommitted changes)``."""


@dataclass
class GitState:
    """What git knows about the paths of one run."""

    dirty: dict[Path, str] = field(default_factory=dict)
    """Resolved paths (files, or folders holding only untracked/ignored files) not safe to
    rewrite, each with why (:data:`UNCOMMITTED`, :data:`UNTRACKED`, :data:`IGNORED`)."""
    outside: list[Path] = field(default_factory=list)
    """Given paths that are not inside any git work tree."""

    def why_dirty(self, path: Path) -> str | None:
        """Why git could not give ``path`` back, or None if it could."""
        resolved = path.resolve()
        for place in (resolved, *resolved.parents):
            if place in self.dirty:
                return self.dirty[place]
        return None


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git installed: nothing is protected


def work_tree_of(path: Path) -> Path | None:
    """The top folder of the git work tree holding ``path``, or None."""
    folder = path if path.is_dir() else path.parent
    out = _git(["rev-parse", "--show-toplevel"], folder.absolute())
    if out is None or out.returncode != 0:
        return None
    top = out.stdout.decode("utf-8", "surrogateescape").strip()
    return Path(top).resolve() if top else None


def _status_entries(top: Path, paths: Iterable[Path]) -> dict[Path, str]:
    """Paths under ``top`` that ``git status`` lists (modified, staged, untracked, ignored), each
    with why it is listed."""
    specs = [os.path.relpath(p.absolute(), top) for p in paths]
    out = _git(["status", "--porcelain=v1", "-z", "--ignored=matching", "--", *specs], top)
    if out is None or out.returncode != 0:
        return {}
    fields = out.stdout.decode("utf-8", "surrogateescape").split("\0")
    entries: dict[Path, str] = {}
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if len(entry) < 4:
            continue
        status, name = entry[:2], entry[3:]
        why = UNTRACKED if status == "??" else IGNORED if status == "!!" else UNCOMMITTED
        entries[(top / name.rstrip("/")).resolve()] = why
        if "R" in status or "C" in status:  # a rename's second field is the old name
            index += 1
    return entries


def inspect(paths: Sequence[Path], *, check_dirty: bool = True) -> GitState:
    """Which of ``paths`` (and the files below them) git cannot restore; with
    ``check_dirty=False`` only which paths lie outside any git work tree."""
    state = GitState()
    by_top: dict[Path, list[Path]] = {}
    for path in paths:
        top = work_tree_of(path)
        if top is None:
            state.outside.append(path)
        else:
            by_top.setdefault(top, []).append(path)
    for top, inside in by_top.items() if check_dirty else ():
        state.dirty.update(_status_entries(top, inside))
    return state


def not_protected_message(outside: Sequence[Path]) -> str:
    where = "these paths are" if len(outside) > 1 else "this path is"
    return (
        f"{where} not inside a git work tree, so nothing protects the originals "
        "(git checkout cannot undo this run); keep a copy or use --diff first"
    )


def write_unless_dirty(results: Sequence["FileResult"], state: GitState) -> None:
    """Write the changed results of a dry run, refusing the files git cannot restore.

    Interrupted (Ctrl-C, SIGTERM), it stops after the file being written and raises
    :class:`~torchfix_device.results.WritesInterrupted`; the results not written are marked
    ``skipped`` (``interrupted``)."""
    from torchfix_device.run.interrupts import signal_of
    from torchfix_device.run.job import finished_before, write_result
    from torchfix_device.results import WritesInterrupted

    pending = [r for r in results if r.status == "changed"]
    for result in pending:
        refuse_if_dirty(result, state)
    pending = [r for r in pending if r.status == "changed"]
    for index, result in enumerate(pending):
        try:
            write_result(result)
        except KeyboardInterrupt as stop:
            rest = pending[index + 1:] if finished_before(stop) is result else pending[index:]
            for left in rest:
                left.status, left.error, left.skip_kind = "skipped", "not written: interrupted", "interrupted"
            written = sum(1 for r in pending if r.status == "changed")
            raise WritesInterrupted(written, len(pending), signal_of(stop)) from None


def refuse_if_dirty(result: "FileResult", state: GitState | None) -> bool:
    """Mark a changed result that git could not restore as ``refused`` (not written, not a
    failure); True if so."""
    why = None if state is None else state.why_dirty(result.path)
    if why is None:
        return False
    result.status, result.error, result.skip_kind = "refused", why + REFUSED, REFUSAL_KIND
    return True

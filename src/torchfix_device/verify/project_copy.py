"""The copies of the user's project that ``verify --run`` runs the command in.

The whole folder is copied (data files, configuration, scripts: whatever the command may need),
except what a run never needs and the copy must not carry:

- version control folders (``.git``, ``.hg``, ``.svn``) and caches (``__pycache__``, the
  tools' caches, ours);
- virtual environments (a folder holding ``pyvenv.cfg``, or named ``.venv``/``venv``) and
  ``node_modules``: installed dependencies, not the project's code. They are *linked*, not
  copied, so that a command such as ``.venv/bin/python train.py`` still finds them; the run
  sets ``PYTHONDONTWRITEBYTECODE`` so that Python writes no bytecode into them.

Symbolic links are copied as links; one whose absolute target lies inside the project points at
the same place in the copy. Only regular files are read (a FIFO or a device is skipped, never
opened). Files keep their mode bits; folders are made writable by their owner in the copy, so
that the copy can be rewritten and removed.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

NOT_COPIED = frozenset(
    {
        ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".torchfix_device_cache", ".tox", ".nox", ".ipynb_checkpoints",
    }
)
"""Folders left out of the copies."""
LINKED_NAMES = frozenset({".venv", "venv", "node_modules"})
"""Folders linked into the copies (with every folder holding ``pyvenv.cfg``)."""


@dataclass
class CopyStats:
    files: int = 0
    bytes: int = 0
    linked: list[str] = field(default_factory=list)
    """Folders linked, not copied (relative to the project)."""
    skipped: list[str] = field(default_factory=list)
    """Entries that are neither files, folders nor links (FIFOs, sockets, devices)."""


def is_linked_folder(path: Path) -> bool:
    return path.name in LINKED_NAMES or os.path.lexists(path / "pyvenv.cfg")


def copy_project(source: Path, destination: Path, *, avoid: tuple[Path, ...] = ()) -> CopyStats:
    """Copy the project folder ``source`` to ``destination`` (which must not exist yet).
    ``avoid``: folders never entered (the temp folder of the run, should it lie inside the
    project)."""
    stats = CopyStats()
    root = Path(os.path.realpath(source))
    avoided = {Path(os.path.realpath(p)) for p in avoid}
    _copy_folder(root, Path(destination), root, Path(destination), avoided, stats)
    return stats


def _copy_folder(folder: Path, target: Path, root: Path, copy_root: Path, avoided: set[Path], stats: CopyStats) -> None:
    mode = stat.S_IMODE(folder.stat().st_mode) | stat.S_IRWXU
    target.mkdir(parents=True)
    with os.scandir(folder) as entries:
        names = sorted(entries, key=lambda e: e.name)
    for entry in names:
        path = Path(entry.path)
        if entry.is_symlink():
            _copy_link(path, target / entry.name, root, copy_root)
        elif entry.is_dir(follow_symlinks=False):
            if entry.name in NOT_COPIED or Path(os.path.realpath(path)) in avoided:
                continue
            if is_linked_folder(path):
                (target / entry.name).symlink_to(path, target_is_directory=True)
                stats.linked.append(path.relative_to(root).as_posix())
                continue
            _copy_folder(path, target / entry.name, root, copy_root, avoided, stats)
        elif entry.is_file(follow_symlinks=False):
            shutil.copy2(path, target / entry.name, follow_symlinks=False)
            stats.files += 1
            stats.bytes += entry.stat(follow_symlinks=False).st_size
        else:
            stats.skipped.append(path.relative_to(root).as_posix())
    os.chmod(target, mode)


def _copy_link(link: Path, target: Path, root: Path, copy_root: Path) -> None:
    pointed = os.readlink(link)
    if os.path.isabs(pointed):
        absolute = Path(os.path.normpath(pointed))
        if absolute == root or root in absolute.parents:
            pointed = str(copy_root / absolute.relative_to(root))
    target.symlink_to(pointed)


def remove_tree(path: Path) -> None:
    """Remove a copy, whatever the command did to its modes (links are removed, never followed)."""

    def retry(function, failed, _info) -> None:  # noqa: ANN001 - shutil's callback
        try:
            os.chmod(os.path.dirname(failed), stat.S_IRWXU)
            if not os.path.islink(failed) and os.path.isdir(failed):
                os.chmod(failed, stat.S_IRWXU)
            function(failed)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


def place_in_copy(path: Path, root: Path, copy_root: Path) -> Path | None:
    """Where ``path`` (inside the project ``root``) is in the copy; None outside the project."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if real == top or top in real.parents:
        return copy_root / real.relative_to(top)
    return None

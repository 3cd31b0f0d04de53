"""Opening the user's files and folders without surprises (see docs/data-safety.md).

* **No link below a named path is followed.** A file found under a folder named on the command
  line (the *root*) is reached by opening the root, then each folder below it, one at a time,
  relative to the one before (``dir_fd``) with ``O_NOFOLLOW``: a folder swapped for a symbolic
  link during the run cannot lead a read or a write elsewhere (``FolderReplaced``).
* **Only regular files are read.** A FIFO would block the run forever, a device node would be
  read until memory runs out: anything but a regular file is refused before it is opened
  (``NotRegularFile``), and checked again on the open descriptor.
* **Identities.** A folder is known by ``(st_dev, st_ino)`` from the moment its file is read, so
  the writer can tell that the folder it is about to write into is the one it read from.

Platforms without ``dir_fd`` support (Windows) open by path, as before; the regular-file checks
still apply.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import NamedTuple, Sequence

from torchfix_device.source import FolderId

O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
DIR_FD = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd and bool(O_NOFOLLOW and O_DIRECTORY)
"""Whether folders can be held open and files reached relative to them (POSIX)."""
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", errno.ELOOP))


class FolderReplaced(OSError):
    """A folder on the way to a file is now a symbolic link (or not a folder), or is another
    folder than the one the file was read from."""


class NotRegularFile(OSError):
    """A FIFO, a device, a socket or a symbolic link where a regular file was expected."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def not_regular_message(mode: int) -> str:
    return f"not a regular file ({kind_of(mode)}): skipped"


def root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    """The longest folder of ``roots`` (the folders named on the command line) that ``path``
    was found under, compared part by part as written; None for a file named itself."""
    best: Path | None = None
    for root in roots:
        parts = root.parts
        if path.parts[: len(parts)] == parts and len(path.parts) > len(parts):
            if best is None or len(parts) > len(best.parts):
                best = root
    return best


def open_folder(folder: Path, root: Path | None = None) -> int:
    """A descriptor of ``folder`` (the caller closes it). With ``root`` (a folder ``folder`` lies
    below, as written), every part below ``root`` is opened relative to the one above without
    following a symbolic link; :class:`FolderReplaced` names the part that is not a folder."""
    flags = os.O_RDONLY | O_DIRECTORY | O_CLOEXEC
    below = folder.parts[len(root.parts):] if root is not None and folder.parts[: len(root.parts)] == root.parts else ()
    start = root if below else folder
    fd = os.open(start if str(start) else ".", flags)
    try:
        for index, part in enumerate(below):
            try:
                inner = os.open(part, flags | O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:
                    where = Path(*start.parts, *below[: index + 1])
                    raise FolderReplaced(
                        exc.errno, f"folder {where.as_posix()} is no longer a folder (replaced by a symbolic link or a file?)"
                    ) from None
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def folder_id(fd: int) -> FolderId:
    st = os.fstat(fd)
    return FolderId(st.st_dev, st.st_ino)


def open_regular(name: str, folder_fd: int, flags: int = os.O_RDONLY) -> tuple[int, os.stat_result]:
    """Open the regular file ``name`` of the folder ``folder_fd`` without following a link,
    checked before and after opening; :class:`NotRegularFile` otherwise."""
    before = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    if not stat.S_ISREG(before.st_mode):
        raise NotRegularFile(errno.EINVAL, not_regular_message(before.st_mode))
    try:
        fd = os.open(name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, dir_fd=folder_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(exc.errno, not_regular_message(stat.S_IFLNK)) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, not_regular_message(st.st_mode))
    return fd, st


class Read(NamedTuple):
    data: bytes
    folder: FolderId | None


def read_regular(path: Path, root: Path | None = None) -> Read:
    """The bytes of the regular file ``path`` (see :func:`open_folder` for ``root``) and the
    identity of its folder. Raises :class:`NotRegularFile`, :class:`FolderReplaced` or
    ``OSError``."""
    if not DIR_FD:
        st = os.stat(path, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, not_regular_message(st.st_mode))
        return Read(path.read_bytes(), None)
    folder_fd = open_folder(path.parent, root)
    try:
        fd, _ = open_regular(path.name, folder_fd)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        return Read(data, folder_id(folder_fd))
    finally:
        os.close(folder_fd)


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (of any user). A pid reused by another process reads as
    alive: whatever depends on this errs on the side of leaving things alone."""
    if pid <= 0:
        return False
    if pid == os.getpid() or os.name == "nt":  # on Windows, os.kill(pid, 0) would end the process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True

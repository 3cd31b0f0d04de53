"""One in-place ``apply`` at a time on any file.

Two runs rewriting the same files at once would race (each sees the other's rewrite as a
change made "during the run"), so an in-place run locks the paths it was given, and a second
run whose paths overlap them (the same folder, a folder inside, a folder around) **refuses at
once** with a message naming the run that holds them (:class:`TreeBusy`; the CLI exits 2,
having changed nothing). Waiting was the alternative; a refusal is immediate and says what to
do, where a wait would look like a hang. Runs over separate folders do not wait for each other.

* **What is locked**: each path given, by its real path, exclusively, and every folder above it,
  shared (so a run on ``src`` and a run on ``src/pkg`` collide on ``src``; runs on ``src/a`` and
  ``src/b`` share ``src`` and both go ahead).
* **The lock** is a file outside the tree (nothing appears in the user's repository):
  ``$XDG_RUNTIME_DIR/torchfix-device/`` or ``<temp dir>/torchfix-device-<uid>/``, named by a
  hash of the real path, the exclusive holder's pid inside. It is an ``flock``: the kernel lets
  go of it when the process ends, however it ends, so a run killed with SIGKILL never blocks
  the next one. The last holder removes the file when it ends. Where ``flock`` does not exist,
  only the paths themselves are locked, and a lock whose pid is no longer running is taken over.
* Held until the process exits; a forked child (a pool worker) closes its inherited copies.

A lock folder that is not a private folder of this user is not used (no lock is taken).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Sequence

from torchfix_device.files.safe_paths import O_CLOEXEC, O_NOFOLLOW, process_alive

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class TreeBusy(Exception):
    """Another run holds the lock of a path this run would write in."""


_held: dict[Path, tuple[Path, int, bool]] = {}
"""Path → (lock file, descriptor, exclusive) for the locks this process holds."""


def lock_folder() -> Path | None:
    """This user's private folder for locks, made if missing; None if it is not private."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    uid = os.getuid() if hasattr(os, "getuid") else None
    base = Path(runtime) / "torchfix-device" if runtime and os.path.isdir(runtime) else Path(
        tempfile.gettempdir(), f"torchfix-device-{uid if uid is not None else 'user'}"
    )
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(base)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or (uid is not None and st.st_uid != uid) or st.st_mode & 0o022:
        return None
    return base


def _targets(paths: Sequence[Path]) -> list[Path]:
    """The real paths of ``paths``, less those inside another of them."""
    real = sorted({Path(os.path.realpath(p)) for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in real:
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return kept


def hold(paths: Sequence[Path]) -> None:
    """Lock ``paths`` for this process until it exits (see the module's documentation); raise
    :class:`TreeBusy` naming the run that holds one, having taken none. Locks this process
    already holds are kept."""
    folder = lock_folder()
    if folder is None:
        return
    plan: dict[Path, bool] = {}
    for target in _targets(paths):
        plan[target] = True
        for above in target.parents if fcntl is not None else ():
            plan.setdefault(above, False)
    taken: list[Path] = []
    try:
        for path in sorted(plan, key=lambda p: len(p.parts)):
            if path not in _held:
                lock = folder / f"{hashlib.sha256(os.fsencode(path)).hexdigest()[:32]}.lock"
                _held[path] = (lock, _acquire(lock, path, exclusive=plan[path]), plan[path])
                taken.append(path)
    except BaseException:
        for path in taken:
            _let_go(path)
        raise


def _acquire(lock: Path, path: Path, *, exclusive: bool) -> int:
    for _ in range(20):  # the file may be removed by its last holder between our open and our lock
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        try:
            if not _lock(fd, exclusive):
                pid = _holder(fd)
                raise TreeBusy(_busy_message(pid if pid and process_alive(pid) else None, path, exclusive))
            if not _same_file(fd, lock):
                os.close(fd)
                continue
            if exclusive:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n{path}\n".encode("utf-8", "surrogateescape"))
            return fd
        except BaseException:
            try:
                os.close(fd)
            except OSError:
                pass
            raise
    raise TreeBusy(_busy_message(None, path, exclusive))


def _lock(fd: int, exclusive: bool) -> bool:
    """Take the lock without waiting for a run; a few quick tries ride out the instant a
    finishing run holds a lock file alone to remove it (:func:`_let_go`)."""
    if fcntl is not None:
        for attempt in range(10):
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                time.sleep(0.02 * (attempt + 1) / 5)
        return False
    pid = _holder(fd)  # pragma: no cover - no flock: a lock of a process still running holds
    return pid is None or pid == os.getpid() or not process_alive(pid)


def _same_file(fd: int, lock: Path) -> bool:
    try:
        st = os.stat(lock, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _holder(fd: int) -> int | None:
    try:
        first = os.pread(fd, 64, 0).split(b"\n", 1)[0] if hasattr(os, "pread") else b""
        return int(first) if first.strip().isdigit() else None
    except (OSError, ValueError):
        return None


def _busy_message(pid: int | None, path: Path, exclusive: bool) -> str:
    who = f"another torchfix-device run (pid {pid})" if pid else "another torchfix-device run"
    where = f"in or below {path}" if exclusive and not pid else f"in {path}"
    return f"{who} is rewriting files {where}; nothing was changed: run again when it has finished"


def _let_go(path: Path) -> None:
    """Release the lock of ``path``; the file goes when no other process holds it (an
    exclusive lock can then be had: removed under it, a newcomer that opened it sees the
    file gone and opens a fresh one)."""
    lock, fd, exclusive = _held.pop(path)
    try:
        if fcntl is not None and not exclusive:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _same_file(fd, lock):
            os.unlink(lock)
    except OSError:
        pass
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def release() -> None:
    """Let go of every lock this process holds (at exit)."""
    for path in sorted(_held, key=lambda p: -len(p.parts)):
        _let_go(path)


def _forget_in_child() -> None:
    """In a forked child: close the inherited descriptors (the parent keeps its locks)."""
    for _, fd, _ in _held.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


atexit.register(release)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)

"""Reading source files byte-faithfully, and the one atomic writer (temp file, fsync, rename).

A file is decoded with its PEP 263 coding cookie (UTF-8 by default), a UTF-8 BOM is remembered,
line endings are left inside the text untouched, and the rewrite is encoded back the same way.
Only regular files are read, never through a symbolic link below the folder named on the
command line (:mod:`torchfix_device.files.safe_paths`); the writer writes into the folder the file was
read from, or not at all. Details and the guarantees: docs/data-safety.md.
"""

from __future__ import annotations

import errno
import io
import os
import re
import secrets
import signal
import stat
import threading
import tokenize
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

from torchfix_device.source import BOM, SourceFile
from torchfix_device.files.safe_paths import (
    DIR_FD, O_CLOEXEC, O_NOFOLLOW, FolderId, FolderReplaced, NotRegularFile, folder_id, open_folder, open_regular,
    process_alive, read_regular,
)

TEMP_SUFFIX = ".torchfix-device.tmp"
NOT_WRITABLE = "not writable: left unchanged"
REPLACED_BY_SPECIAL = "file was replaced by a symbolic link or a special file during the run; not written through"


class SourceError(Exception):
    """A file that cannot be read as Python source; ``line`` where one can be named."""

    def __init__(self, message: str, line: int | None = None, *, skip_kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.skip_kind = skip_kind
        """Set when the file is to be skipped (a FIFO, a device), not reported as failed."""


def decode_source(path: Path, raw: bytes) -> SourceFile:
    """Decode ``raw`` as Python source; raise :class:`SourceError` naming the line on failure."""
    wide = _wide_encoding(raw)
    if wide:
        raise SourceError(f"{wide} is not supported: convert to UTF-8")
    if b"\x00" in raw:
        raise SourceError("contains NUL bytes: not a text file", raw[: raw.index(b"\x00")].count(b"\n") + 1)
    bom = raw.startswith(BOM)
    body = raw[len(BOM):] if bom else raw
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        if not _has_coding_cookie(body):  # no cookie: tokenize found bytes that are not UTF-8
            _raise_not_utf8(body)
        raise SourceError(f"bad coding cookie: {exc.msg if hasattr(exc, 'msg') else exc}", getattr(exc, "lineno", None)) from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        if encoding == "utf-8":
            _raise_not_utf8(body)
        line = body[: exc.start].count(b"\n") + 1
        raise SourceError(f"cannot decode byte 0x{body[exc.start]:02x} as {encoding}", line) from None
    return SourceFile(path=path, raw=raw, text=text, encoding=encoding, bom=bom)


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+", re.ASCII)


def _has_coding_cookie(body: bytes) -> bool:
    """A PEP 263 encoding declaration on line 1 or 2."""
    return any(_COOKIE.match(line) for line in body.splitlines()[:2])


def _raise_not_utf8(body: bytes) -> None:
    """:class:`SourceError` naming the line, column and byte where ``body`` stops being UTF-8,
    with the line as it reads (the byte shown as ``\\xNN``)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = body.rfind(b"\n", 0, exc.start) + 1
        end = body.find(b"\n", exc.start)
        line_bytes = body[start: end if end != -1 else len(body)].rstrip(b"\r")
        shown = line_bytes.decode("utf-8", "backslashreplace")
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        line = body[: exc.start].count(b"\n") + 1
        column = len(body[start:exc.start].decode("utf-8", "replace")) + 1
        raise SourceError(
            f"not valid UTF-8 at line {line}, column {column} (byte 0x{body[exc.start]:02x}): `{shown}`; save the file "
            "as UTF-8, or declare its encoding on line 1 or 2 (`# -*- coding: latin-1 -*-`)", line,
        ) from None
    raise SourceError("not valid UTF-8")  # pragma: no cover - only called for bytes that are not


def _wide_encoding(raw: bytes) -> str | None:
    """``UTF-16`` or ``UTF-32`` for text in those encodings (by its BOM, or by the NUL bytes
    that ASCII text has in every other, or three of four, bytes), else None."""
    if raw.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16"
    head = raw[:400]
    if len(head) >= 8 and b"\x00" in head:
        if head[1::4].count(0) == head[2::4].count(0) == len(head[1::4]) and (head[0::4].count(0) == 0 or head[3::4].count(0) == 0):
            return "UTF-32"
        if head[0::2].count(0) == 0 and head[1::2].count(0) > len(head) // 4 or head[1::2].count(0) == 0 and head[0::2].count(0) > len(head) // 4:
            return "UTF-16"
    return None


def read_source(path: Path, root: Path | None = None) -> SourceFile:
    """Read and decode the regular file ``path`` (``root``: the folder named on the command
    line it was found under; no link below it is followed)."""
    try:
        raw, folder = read_regular(path, root)
    except NotRegularFile as exc:
        raise SourceError(exc.strerror or str(exc), skip_kind="not a regular file") from None
    except FolderReplaced as exc:
        raise SourceError(f"{exc.strerror}; not read") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    source = decode_source(path, raw)
    return SourceFile(path, source.raw, source.text, source.encoding, source.bom, root=root, folder=folder)




class WriteError(Exception):
    pass


class NotWritable(WriteError):
    """A file the runner may not write: left unchanged, as an editor would."""

    def __init__(self) -> None:
        super().__init__(NOT_WRITABLE)


def atomic_replace(
    path: Path, data: bytes, expected_old: bytes, *, root: Path | None = None, folder: FolderId | None = None
) -> None:
    """Replace the source file ``path`` with ``data`` (through :func:`atomic_write`'s temp file),
    keeping its mode, owner and group (where permitted) and extended attributes.

    Nothing is written, and :class:`WriteError` says why, when: the file no longer holds
    ``expected_old`` (changed or deleted while we worked); it is now a symbolic link or not a
    regular file; its folder (reached from ``root`` without following links, see
    :func:`~torchfix_device.files.safe_paths.open_folder`) is not the folder ``folder`` it was read
    from; the runner may not write it (:class:`NotWritable`: read-only for its owner, or
    ``access(W_OK)`` says no), even though replacing goes through the folder.
    """
    try:
        directory = _Folder.open(path.parent, root)
    except FolderReplaced as exc:
        raise WriteError(f"{exc.strerror}; not written") from None
    try:
        if folder is not None and directory.fd is not None and folder_id(directory.fd) != folder:
            raise WriteError(f"folder {path.parent.as_posix()} was replaced during the run; not written")
        meta = _metadata_of(directory, path.name)
        _write_through_temp_file(directory, path.name, data, meta, expected_old, True)
    finally:
        directory.close()


def atomic_write(
    path: Path, data: bytes, mode: int | None = None, *, expected_old: bytes | None = None, durable: bool = True
) -> None:
    """Write ``data`` to ``path`` (new or replaced; its folder is created if missing) through a
    temp file in the same folder, synced to disk (fsync), then renamed into place: a reader, or
    the file after a crash, holds the old content or the new one, never a mix. The one writer
    of the package: source files (:func:`atomic_replace`), cache entries, ``--output-dir``
    copies and reports.

    The temp file is ``.<name>.<pid>.<random>.torchfix-device.tmp``: unique to this process, so
    concurrent runs never touch each other's, and a run killed before the rename leaves one that
    the next run removes once that pid is gone (:func:`remove_stale_temp_files`).

    ``mode``: the file's permission bits (by default those of a new file under the umask).
    ``expected_old``: the bytes ``path`` must still hold just before the rename; otherwise
    nothing is written and :class:`WriteError` says why. ``durable=False`` leaves out the fsync,
    for files whose loss in a crash costs nothing but time (the result cache: an entry lost or
    torn reads as a miss), where it would cost more than the work it saves (about 5 ms a file on
    a virtual disk). A Ctrl-C or SIGTERM during the write takes effect once the file is either
    replaced or untouched (and the temp file gone). Raises ``OSError`` when the folder or the
    file cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = _Metadata(mode if mode is not None else 0o666 & ~_current_umask())
    directory = _Folder.open(path.parent, None)
    try:
        _write_through_temp_file(directory, path.name, data, meta, expected_old, durable)
    finally:
        directory.close()


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _Folder:
    """A folder held open (``fd``, POSIX) or known by its path (elsewhere): names inside it are
    given to ``os`` calls with :meth:`at`."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def open(cls, path: Path, root: Path | None) -> "_Folder":
        return cls(path, open_folder(path, root) if DIR_FD else None)

    def at(self, name: str) -> tuple[str, dict]:
        if self.fd is None:
            return str(self.path / name), {}
        return name, {"dir_fd": self.fd}

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Metadata(NamedTuple):
    mode: int
    owner: tuple[int, int] | None = None
    xattrs: tuple[tuple[str, bytes], ...] = ()


_XATTR_UNSUPPORTED = {errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)}
_NOT_PERMITTED = {errno.EPERM, errno.EACCES}


def _metadata_of(directory: _Folder, name: str) -> _Metadata:
    """The mode, owner and extended attributes of the regular file ``name``, which the runner
    must be allowed to write."""
    where, at = directory.at(name)
    try:
        fd, st = open_regular(where, at["dir_fd"]) if at else _open_by_path(where)
    except FileNotFoundError:
        raise WriteError("file was deleted during the run; not recreated") from None
    except NotRegularFile:
        raise WriteError(REPLACED_BY_SPECIAL) from None
    try:
        if not st.st_mode & stat.S_IWUSR or not _may_write(where, at):
            raise NotWritable()
        xattrs: list[tuple[str, bytes]] = []
        if hasattr(os, "listxattr"):
            try:
                for key in os.listxattr(fd):
                    xattrs.append((key, os.getxattr(fd, key)))
            except OSError as exc:
                if exc.errno not in _XATTR_UNSUPPORTED | _NOT_PERMITTED:
                    raise
        return _Metadata(stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid), tuple(xattrs))
    finally:
        os.close(fd)


def _open_by_path(path: str) -> tuple[int, os.stat_result]:
    st = os.stat(path, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(errno.EINVAL, REPLACED_BY_SPECIAL)
    return os.open(path, os.O_RDONLY | O_CLOEXEC), st


def _may_write(where: str, at: dict) -> bool:
    extra = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    if at and os.access in os.supports_follow_symlinks:
        extra["follow_symlinks"] = False
    return os.access(where, os.W_OK, **at, **extra)


def _copy_metadata(fd: int, meta: _Metadata) -> None:
    """Owner and group (where permitted: a run as root keeps a user's file the user's), the
    extended attributes (where the file system has them), then the mode (after ``chown``,
    which clears set-id bits)."""
    if meta.owner is not None and hasattr(os, "fchown"):
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != meta.owner:
            for uid, gid in (meta.owner, (-1, meta.owner[1])):
                try:
                    os.fchown(fd, uid, gid)
                    break
                except PermissionError:
                    continue
    for key, value in meta.xattrs:
        try:
            os.setxattr(fd, key, value)
        except OSError as exc:
            if exc.errno not in _XATTR_UNSUPPORTED | _NOT_PERMITTED:
                raise WriteError(f"cannot copy extended attribute {key}: {exc.strerror}; not written") from None
    if hasattr(os, "fchmod"):  # not on Windows, which has only a read-only bit
        os.fchmod(fd, meta.mode)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM, SIGHUP and SIGUSR1 (a pool worker's "parent gone") that arrive
    inside the block until it ends, then raise them again for the handlers in place (the default
    ones included). Only the main thread can set a handler; elsewhere nothing changes, and an
    ignored signal stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous: dict[int, object] = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        handler = signal.getsignal(signum)
        if handler in (signal.SIG_IGN, None):
            continue
        previous[signum] = handler
        signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)


def _temp_name(name: str) -> str:
    return f".{name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def _create_temp(directory: _Folder, name: str) -> int:
    where, at = directory.at(name)
    return os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600, **at)


def _write_through_temp_file(
    directory: _Folder, name: str, data: bytes, meta: _Metadata, expected_old: bytes | None, durable: bool
) -> None:
    """The write itself. An interruption held during it is raised at its end; if the file was
    replaced by then, the exception says so (``written = True``), so that the file is counted."""
    replaced = False
    try:
        with signals_deferred():
            tmp_name = _temp_name(name)
            fd = _create_temp(directory, tmp_name)
            tmp, at = directory.at(tmp_name)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    _copy_metadata(handle.fileno(), meta)
                    if durable:
                        os.fsync(handle.fileno())
                if expected_old is not None and _current_bytes(directory, name) != expected_old:
                    raise WriteError("file changed on disk during the run; the newer version was kept")
                target, _ = directory.at(name)
                os.replace(tmp, target, **({"src_dir_fd": directory.fd, "dst_dir_fd": directory.fd} if at else {}))
                replaced = True
            except BaseException:
                try:
                    os.unlink(tmp, **at)
                except OSError:
                    pass
                raise
    except KeyboardInterrupt as stop:
        stop.written = replaced  # type: ignore[attr-defined]
        raise


def _current_bytes(directory: _Folder, name: str) -> bytes:
    where, at = directory.at(name)
    try:
        fd, _ = open_regular(where, at["dir_fd"]) if at else _open_by_path(where)
    except FileNotFoundError:
        raise WriteError("file was deleted during the run; not recreated") from None
    except NotRegularFile:
        raise WriteError(REPLACED_BY_SPECIAL) from None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def temp_owner(name: str) -> tuple[str, int | None] | None:
    """For a temp file's name: the name of the file it was for and the pid of the process that
    made it (None for the names of earlier versions, ``.<name>.<8 random>.torchfix-device.tmp``);
    None for any other name."""
    if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
        return None
    middle = name[1:-len(TEMP_SUFFIX)]
    target, _, token = middle.rpartition(".")
    if not target:
        return None
    base, _, pid = target.rpartition(".")
    if base and pid.isdigit() and len(token) == 8 and all(c in "0123456789abcdef" for c in token):
        return base, int(pid)
    if len(token) == 8 and "." not in token:
        return target, None
    return None


def remove_stale_temp_files(folder: Path, names: frozenset[str] | None = None) -> int:
    """Delete the temp files in ``folder`` that a killed run (SIGKILL, power loss) left between
    creating them and renaming them into place: those whose process is gone, and those of
    earlier versions (no pid in the name) when they belong to a file of ``names``. A live
    run's temp files are never touched. Returns how many were removed."""
    removed = 0
    try:
        entries = os.listdir(folder)
    except OSError:
        return 0
    for entry in entries:
        owner = temp_owner(entry)
        if owner is None:
            continue
        target, pid = owner
        stale = (pid is None and names is not None and target in names) or (pid is not None and not process_alive(pid))
        if stale:
            try:
                os.unlink(folder / entry)
                removed += 1
            except OSError:
                pass
    return removed

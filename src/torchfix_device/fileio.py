"""Reading source files byte-faithfully, and the one atomic writer (temp file, fsync, rename).

A file is decoded with its PEP 263 coding cookie (UTF-8 by default), a UTF-8 BOM is remembered,
line endings are left inside the text untouched, and the rewrite is encoded back the same way.
"""

from __future__ import annotations

import io
import os
import signal
import stat
import tempfile
import threading
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

BOM = b"\xef\xbb\xbf"
TEMP_SUFFIX = ".torchfix-device.tmp"


class SourceError(Exception):
    """A file that cannot be read as Python source; ``line`` where one can be named."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class SourceFile:
    path: Path
    raw: bytes
    text: str
    """Decoded text without the BOM; line endings as in the file."""
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        """``text`` as bytes in this file's encoding, with its BOM if it had one."""
        return (BOM if self.bom else b"") + text.encode(self.encoding)


def decode_source(path: Path, raw: bytes) -> SourceFile:
    """Decode ``raw`` as Python source; raise :class:`SourceError` naming the line on failure."""
    if b"\x00" in raw:
        raise SourceError("contains NUL bytes: not a text file", raw[: raw.index(b"\x00")].count(b"\n") + 1)
    bom = raw.startswith(BOM)
    body = raw[len(BOM):] if bom else raw
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceError(f"bad coding cookie: {exc.msg if hasattr(exc, 'msg') else exc}", getattr(exc, "lineno", None)) from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        hint = "" if encoding != "utf-8" else " (add a `# -*- coding: ... -*-` line if the file uses another encoding)"
        raise SourceError(f"cannot decode byte 0x{body[exc.start]:02x} as {encoding}{hint}", line) from None
    return SourceFile(path=path, raw=raw, text=text, encoding=encoding, bom=bom)


def read_source(path: Path) -> SourceFile:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode_source(path, raw)


class WriteError(Exception):
    pass


def atomic_replace(path: Path, data: bytes, expected_old: bytes) -> None:
    """Replace the source file ``path`` with ``data`` (through :func:`atomic_write`).

    The file mode is kept. If the file on disk no longer holds ``expected_old`` (changed or
    deleted while we worked), nothing is written and :class:`WriteError` is raised; a read-only
    file is refused the same way. Temp files a killed run left for ``path`` are removed first.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise WriteError("file was deleted during the run; not recreated") from None
    if not st.st_mode & stat.S_IWUSR:
        raise WriteError("file is read-only; left unchanged")
    remove_stale_temp_files(path)
    atomic_write(path, data, stat.S_IMODE(st.st_mode), expected_old=expected_old)


def atomic_write(
    path: Path, data: bytes, mode: int | None = None, *, expected_old: bytes | None = None, durable: bool = True
) -> None:
    """Write ``data`` to ``path`` (new or replaced; its folder is created if missing) through a
    temp file in the same folder, synced to disk (fsync), then renamed into place: a reader, or
    the file after a crash, holds the old content or the new one, never a mix. The one writer
    of the package: source files, cache entries, ``--output-dir`` copies and reports.

    ``mode``: the file's permission bits (by default those of a new file under the umask).
    ``expected_old``: the bytes ``path`` must still hold just before the rename; otherwise
    nothing is written and :class:`WriteError` says why. ``durable=False`` leaves out the fsync,
    for files whose loss in a crash costs nothing but time (the result cache: an entry lost or
    torn reads as a miss), where it would cost more than the work it saves (about 5 ms a file on
    a virtual disk). A Ctrl-C during the write takes effect once the file is either replaced or
    untouched (and the temp file gone). Raises ``OSError`` when the folder or the file cannot
    be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = mode if mode is not None else 0o666 & ~_current_umask()
    with _sigint_deferred():
        _write_through_temp_file(path, data, mode, expected_old, durable)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a SIGINT that arrives inside the block until it ends, then raise it again for the
    handler in place (``KeyboardInterrupt`` by default). Only the main thread can set a handler;
    elsewhere (and where SIGINT is ignored, as in pool workers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)


def _write_through_temp_file(path: Path, data: bytes, mode: int, expected_old: bytes | None, durable: bool) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        if expected_old is not None:
            try:
                current = path.read_bytes()
            except FileNotFoundError:
                raise WriteError("file was deleted during the run; not recreated") from None
            if current != expected_old:
                raise WriteError("file changed on disk during the run; the newer version was kept")
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise


def remove_stale_temp_files(path: Path) -> None:
    """Delete the temp files of ``path`` that a killed run (SIGKILL, power loss) left between
    creating them and renaming them into place: ``.<name>.<8 random chars>.torchfix-device.tmp``."""
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        middle = name[len(prefix):-len(TEMP_SUFFIX)]
        if name.startswith(prefix) and name.endswith(TEMP_SUFFIX) and len(middle) == 8 and "." not in middle:
            try:
                os.unlink(path.parent / name)
            except OSError:
                pass

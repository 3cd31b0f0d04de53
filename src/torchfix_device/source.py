"""A source file as it was read: its bytes, its text, encoding and BOM, and the folder it was read
from (the writer writes there or nowhere). Plain data, read by every layer that handles a file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

BOM = b"\xef\xbb\xbf"


class FolderId(NamedTuple):
    """A folder's identity (device, inode), as ``os.fstat`` gives it."""

    dev: int
    ino: int


@dataclass(frozen=True)
class SourceFile:
    path: Path
    raw: bytes
    text: str
    """Decoded text without the BOM; line endings as in the file."""
    encoding: str
    bom: bool
    root: Path | None = None
    """The folder named on the command line the file was found under (None: named itself)."""
    folder: FolderId | None = None
    """The identity of the file's folder when it was read: the writer writes there or nowhere."""

    def encode(self, text: str) -> bytes:
        """``text`` as bytes in this file's encoding, with its BOM if it had one."""
        return (BOM if self.bom else b"") + text.encode(self.encoding)

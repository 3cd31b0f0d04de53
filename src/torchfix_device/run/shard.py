"""``--shard I/N``: a deterministic share of the files, to fan a run out over CI jobs.

A file belongs to shard ``1 + H(path) mod N``, where ``H`` is a SHA-256 of its path as displayed
(relative to the current directory, POSIX separators). The assignment of one file depends on
nothing but its own path, so adding or removing files elsewhere never moves it to another shard;
run every shard from the same directory (the repository root in CI) and the N shards together
cover every file exactly once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardError(ValueError):
    pass


@dataclass(frozen=True)
class Shard:
    index: int
    """1-based: ``1 <= index <= count``."""
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        match = _SHARD_RE.match(text)
        if not match:
            raise ShardError(f"--shard takes I/N (for example 1/4), not {text!r}")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or not 1 <= index <= count:
            raise ShardError(f"--shard {text}: I must be between 1 and N, and N at least 1")
        return cls(index, count)

    def owns(self, key: str) -> bool:
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def select(self, files: Sequence[Path], key: Callable[[Path], str]) -> list[Path]:
        """The files of ``files`` in this shard, in their order."""
        return [f for f in files if self.owns(key(f))]

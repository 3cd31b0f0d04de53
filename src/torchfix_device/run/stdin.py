"""``PATH`` ``-``: read one file from stdin, for editors and pipes.

``apply -`` writes the whole result to stdout: the rewrite, or the input unchanged when there
is nothing to fix, the file is skipped or it cannot be processed (an editor replacing its
buffer with our stdout must never lose it). ``--stdin-filename`` names the file in messages
and decides which ``pyproject.toml`` applies.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Sequence

from torchfix_device.files.sources import SourceError, decode_source
from torchfix_device.options import RunOptions
from torchfix_device.run.job import process_file
from torchfix_device.results import FileResult

if TYPE_CHECKING:
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod

STDIN = "-"


def is_stdin(paths: Sequence[Path]) -> bool:
    return any(str(p) == STDIN for p in paths)


def process_stdin(
    codemods: Sequence["CodemodRef | type[Codemod]"],
    *,
    options: RunOptions,
    stdin_filename: str | None,
    stream: BinaryIO | None = None,
) -> tuple[FileResult, bytes]:
    """The result for the text on stdin, and the bytes read."""
    raw = (stream or sys.stdin.buffer).read()
    shown = stdin_filename or STDIN
    path = Path(shown)
    try:
        source = decode_source(path, raw)
    except SourceError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        return FileResult(path, shown, "failed", error=f"{where}{exc.message}"), raw
    result = process_file(path, codemods, options=dataclasses.replace(options, write=False), source=source, shown=shown)
    return result, raw


def output_bytes(result: FileResult, raw: bytes) -> bytes:
    """What ``apply -`` writes to stdout: the rewrite, else the input as it came."""
    if result.status == "changed" and result.source is not None and result.new_text is not None:
        try:
            return result.source.encode(result.new_text)
        except UnicodeEncodeError as exc:
            result.status, result.error = "failed", f"rewrite cannot be encoded as {result.source.encoding}: {exc.reason}"
    return raw

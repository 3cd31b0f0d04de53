"""``PATH`` ``-``: read one file from stdin, for editors and pipes.

``apply -`` writes the whole result to stdout: the rewrite, or the input unchanged when there
is nothing to fix, the file is skipped or it cannot be processed (an editor replacing its
buffer with our stdout must never lose it). ``--stdin-filename`` names the file in messages
and decides which ``pyproject.toml`` applies.

Stdin is bounded as files are: at most ``max-file-size`` + 1 bytes are read (1 MB by default);
more is skipped with a message naming the limit, and never held in memory: ``apply -`` then
copies the rest of stdin to stdout in chunks (the input unchanged), ``check -`` stops reading.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Sequence

from torchfix_device.files.selection import MAX_FILE_BYTES
from torchfix_device.files.sources import SourceError, decode_source
from torchfix_device.options import RunOptions
from torchfix_device.run.job import process_file
from torchfix_device.results import FileResult

if TYPE_CHECKING:
    from torchfix_device.codemods.catalog import CodemodRef
    from torchfix_device.codemods.base import Codemod

STDIN = "-"
OVER_LIMIT = "over the size limit"
"""The skip kind of an input over ``max-file-size`` (as for a file)."""
CHUNK = 1 << 20


def is_stdin(paths: Sequence[Path]) -> bool:
    return any(str(p) == STDIN for p in paths)


def process_stdin(
    codemods: Sequence["CodemodRef | type[Codemod]"],
    *,
    options: RunOptions,
    stdin_filename: str | None,
    stream: BinaryIO | None = None,
) -> tuple[FileResult, bytes]:
    """The result for the text on stdin, and the bytes read (at most the size limit + 1: an
    input over the limit is skipped, the rest of it left unread)."""
    limit = options.max_file_bytes or MAX_FILE_BYTES
    raw = (stream or sys.stdin.buffer).read(limit + 1)
    shown = stdin_filename or STDIN
    path = Path(shown)
    if len(raw) > limit:
        return FileResult(
            path, shown, "skipped",
            error=f"stdin holds more than {limit / 1e6:g} MB, the limit for one file; skipped "
            "(raise it with --max-file-size or max-file-size in [tool.torchfix-device])",
            skip_kind=OVER_LIMIT,
        ), raw
    try:
        source = decode_source(path, raw)
    except SourceError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        return FileResult(path, shown, "failed", error=f"{where}{exc.message}"), raw
    result = process_file(path, codemods, options=dataclasses.replace(options, write=False), source=source, shown=shown)
    return result, raw


def write_output(result: FileResult, raw: bytes, stdout: BinaryIO, stdin: BinaryIO) -> None:
    """``apply -``: the rewrite, else the input as it came, on ``stdout``; an input over the
    size limit is copied through in chunks (only its first part was read)."""
    stdout.write(output_bytes(result, raw))
    if result.status == "skipped" and result.skip_kind == OVER_LIMIT:
        shutil.copyfileobj(stdin, stdout, CHUNK)
    stdout.flush()


def output_bytes(result: FileResult, raw: bytes) -> bytes:
    """What ``apply -`` writes to stdout: the rewrite, else the input as it came."""
    if result.status == "changed" and result.source is not None and result.new_text is not None:
        try:
            return result.source.encode(result.new_text)
        except UnicodeEncodeError as exc:
            result.status, result.error = "failed", f"rewrite cannot be encoded as {result.source.encoding}: {exc.reason}"
    return raw

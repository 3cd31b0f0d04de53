"""``apply --output-dir DIR``: rewritten copies of the processed files under DIR, the input
left untouched, for reviewing a migration side by side (``diff -r src DIR/src``).

Every Python file the run selected is copied, changed or not (a file that failed or was skipped
is copied as it is), at its path relative to the current directory (a path outside it keeps
its absolute path below DIR). Files keep their mode; each copy is written atomically
(:func:`~torchfix_device.files.sources.atomic_write`: temp file, fsync, rename).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath
from typing import Sequence

from torchfix_device.files.sources import atomic_write
from torchfix_device.results import FileResult


def output_dir_problem(out: Path, inputs: Sequence[Path]) -> str | None:
    """Why ``out`` cannot take the copies of ``inputs``, or None.

    Refused: an output folder that is an input folder, lies inside one (a later run would read
    the copies) or contains an input (``--output-dir .`` with input ``src``: the copy of
    ``src/m.py`` would be ``src/m.py`` itself, rewritten in place without any in-place check).
    Compared on real paths, so a symbolic link to the same folder is no way round it.
    """
    if out.exists() and not out.is_dir():
        return f"--output-dir {out}: exists and is not a folder"
    target = Path(os.path.realpath(out))
    real = [(given, Path(os.path.realpath(given))) for given in inputs]
    for given, source in real:
        if given.is_dir() and target == source:
            return f"--output-dir {out} is the input folder {given}: the copies would replace the input; choose a folder outside it"
        if given.is_dir() and source in target.parents:
            return f"--output-dir {out} is inside the input folder {given}: a later run would read the copies; choose a folder outside it"
        if given.is_file() and target == source:
            return f"--output-dir {out} is an input file"
    for given, source in real:
        if target in source.parents:
            return (
                f"--output-dir {out} contains the input {given}: its copies could land on the input itself; "
                "choose a folder outside the input"
            )
    return None


def relative_destination(path: Path) -> PurePath:
    """Where ``path`` goes below the output folder."""
    absolute = Path(os.path.abspath(path))
    relative = os.path.relpath(absolute)
    if not relative.startswith(".."):
        return PurePath(relative)
    return PurePath(*absolute.parts[1:])  # outside the current directory: the absolute path, rooted in DIR


def _copy_bytes(result: FileResult) -> bytes | None:
    """The bytes the copy of ``result`` holds: the rewrite, or the file as read."""
    if result.source is not None:
        if result.status == "changed" and result.new_text is not None:
            return result.source.encode(result.new_text)
        return result.source.raw
    if result.path.is_symlink() or not result.path.is_file():
        return None
    return result.path.read_bytes()


def write_output_tree(results: Sequence[FileResult], out: Path) -> int:
    """Write the copies; return how many. A copy that cannot be written marks its result
    ``failed`` with the reason (the input is never touched)."""
    written = 0
    for result in results:
        try:
            data = _copy_bytes(result)
        except OSError:
            continue  # unreadable: already reported as failed
        except UnicodeEncodeError as exc:
            result.status, result.error = "failed", f"rewrite cannot be encoded: {exc.reason}"
            continue
        if data is None:
            continue
        destination = out / relative_destination(result.path)
        try:
            mode = stat.S_IMODE(result.path.stat().st_mode)
            atomic_write(destination, data, mode)
            written += 1
        except OSError as exc:
            result.status, result.error = "failed", f"cannot write copy {destination}: {exc.strerror or exc}"
    return written

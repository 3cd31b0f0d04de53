"""``--diff``: one patch that ``git apply`` takes, from the root of the repository.

Each changed file is a plain unified diff of its bytes, with ``a/`` ``b/`` prefixes and paths
relative to the *patch root*: the top of the git work tree holding the current folder (``git
apply`` reads paths relative to it, from the top or from any folder below it), else the current
folder. A changed file outside that root (another repository, a folder above) moves the root to
the top of the work tree holding every changed file, else to the deepest folder holding them
all; the caller then says where to apply it. A path never starts with ``../`` or ``/``.

A notebook is diffed as the JSON file it is (its new text is exactly what ``apply`` writes), so
the patch carries it too; findings name its cells.
"""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import IO, Sequence

from torchfix_device.files.selection import git_work_tree_of
from torchfix_device.results import FileResult
from torchfix_device.report.termout import wants_colour

NO_NEWLINE = "\\ No newline at end of file\n"
_GIT_ESCAPES = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", '"': '"', "\\": "\\"}


def _diff_lines(text: str) -> list[str]:
    """Lines as ``git`` and ``patch`` see them: ended by ``\\n`` only (``str.splitlines`` also
    breaks at form feeds, ``\\x85`` and ``\\u2028``, which would corrupt the patch)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    return out + [lines[-1]] if lines[-1] else out


def _git_path(name: str) -> str:
    """``name`` as git writes it in a patch header: C-quoted when it holds a tab, newline,
    quote, backslash or other control character (``git apply`` stops an unquoted name at a tab);
    followed by a tab when it holds a space (GNU ``patch`` stops an unquoted name at a space)."""
    if not any(ch in _GIT_ESCAPES or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return name + "\t" if " " in name else name
    quoted = "".join(
        "\\" + _GIT_ESCAPES[ch] if ch in _GIT_ESCAPES else f"\\{ord(ch):03o}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch
        for ch in name
    )
    return f'"{quoted}"'


def patch_root(paths: Sequence[Path], cwd: Path | None = None) -> Path:
    """The folder the patch paths of ``paths`` are relative to (see the module docstring)."""
    here = (cwd or Path.cwd()).resolve()
    tops: dict[Path, Path | None] = {}
    files = [p.resolve() for p in paths]
    root = git_work_tree_of(here, tops) or here
    if all(_below(f, root) for f in files):
        return root
    trees = {git_work_tree_of(f.parent, tops) for f in files}
    if len(trees) == 1 and None not in trees:
        return trees.pop()  # type: ignore[return-value]
    return Path(os.path.commonpath([f.parent for f in files]))


def _below(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def patch_name(result: FileResult, root: Path) -> str:
    """The path of ``result``'s file in a patch rooted at ``root`` (POSIX separators)."""
    return Path(os.path.relpath(result.path.resolve(), root)).as_posix()


def unified_diff(result: FileResult, name: str | None = None) -> bytes:
    """A ``git apply``-able unified diff of one changed file, in the file's own encoding;
    ``name``: its path in the patch (default: as displayed)."""
    assert result.source is not None and result.new_text is not None
    name = result.display if name is None else name
    prefix = "\ufeff" if result.source.bom else ""
    old = _diff_lines(prefix + result.source.text)
    new = _diff_lines(prefix + result.new_text)
    out: list[str] = []
    names = _git_path(f"a/{name}"), _git_path(f"b/{name}")
    for index, line in enumerate(difflib.unified_diff(old, new, *names)):
        if index >= 2 and not line.startswith("@@") and not line.endswith("\n"):
            line += "\n" + NO_NEWLINE
        out.append(line)
    headers = "".join(out[:2]).encode("utf-8", "surrogateescape")
    body = "".join(out[2:]).encode(result.source.encoding, "replace")
    return headers + body


def file_diffs(results: Sequence[FileResult], cwd: Path | None = None) -> tuple[list[tuple[FileResult, bytes]], Path | None]:
    """Each changed result with its diff, and the patch root (None when nothing changed)."""
    changed = [r for r in results if r.status == "changed" and r.source is not None and r.new_text is not None]
    if not changed:
        return [], None
    root = patch_root([r.path for r in changed], cwd)
    return [(r, unified_diff(r, patch_name(r, root))) for r in changed], root


def write_diffs(results: Sequence[FileResult], stream: IO[str] | None = None) -> Path | None:
    """The patch on ``stream`` (stdout): coloured where colour is wanted (a terminal without
    ``NO_COLOR``, or ``FORCE_COLOR``), else plain bytes. Returns the patch root (None when
    nothing changed)."""
    stream = stream or sys.stdout
    diffs, root = file_diffs(results)
    if wants_colour(stream):
        from rich.console import Console  # rich and pygments: only for colour
        from rich.syntax import Syntax

        console = Console(file=stream, force_terminal=True)
        for result, data in diffs:
            text = data.decode(result.source.encoding if result.source else "utf-8", "replace")
            console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
        return root
    stream.flush()
    buffer = getattr(stream, "buffer", None)
    for _, data in diffs:
        if buffer is not None:
            buffer.write(data)
        else:
            stream.write(data.decode("utf-8", "replace"))
    if buffer is not None:
        buffer.flush()
    return root


def root_note(root: Path | None, cwd: Path | None = None) -> str | None:
    """What to tell the user when the patch is not to be applied from here (or the top of the
    work tree holding here)."""
    if root is None:
        return None
    here = (cwd or Path.cwd()).resolve()
    if root == here or root == git_work_tree_of(here, {}):
        return None
    return f"the patch paths are relative to {root}: apply it there (git -C {root} apply FILE)"

"""Classes of the project being migrated that move themselves: they define their own ``cuda()``
or ``to()`` (rollout storages, replay buffers, wrappers), which need not return the object.

``storage.cuda()`` on such an object is not ``storage = storage.to(device)``: that calls a
different method, or replaces the object by ``None``. The runner collects these classes once
over every file of the run (a substring test first, CPython's ``ast`` only for files holding
``def cuda`` or ``def to``), so that a codemod in one file knows the classes defined in the
others; the codemods then leave a move on an object that may be one of them for review.
"""

from __future__ import annotations

import ast
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from torchfix_device.files.safe_paths import read_regular

MOVE_METHODS = ("cuda", "to")
_MARKERS = (b"def cuda", b"def to")
TEXT_MARKERS = ("def cuda", "def to")


def classes_with_own_moves(paths: Iterable[Path]) -> frozenset[str]:
    """Names of the classes that define a method ``cuda`` or ``to`` in the ``.py`` files
    ``paths`` (unreadable or unparseable files are left out: the run reports them)."""
    found: set[str] = set()
    for path in paths:
        if path.suffix != ".py":
            continue
        try:
            data = read_regular(path).data  # never a FIFO or a device: a read that never ends
        except OSError:
            continue
        found.update(classes_of_data(data))
    return frozenset(found)


def classes_of_data(data: bytes) -> frozenset[str]:
    """:func:`classes_in` for a file's bytes, after a substring test."""
    if any(marker in data for marker in _MARKERS):
        return classes_in(data)
    return frozenset()


@lru_cache(maxsize=64)
def classes_in(source: str | bytes) -> frozenset[str]:
    """Names of the classes of ``source`` that define a method ``cuda`` or ``to``.

    A line scan first (it runs on every file holding ``def cuda``/``def to``, warm runs
    included): for each ``def cuda(`` / ``def to(`` line, the header of the block it stands in.
    A ``class`` header names a class; a ``def`` header means a nested function, not a method.
    Anything else (the def under an ``if`` in a class body, a continuation or string line with
    less indentation) is not read by guessing: the source is then parsed with ``ast``. A line
    inside a string can only add a class, which makes the codemods more careful, never less."""
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    lines = text.splitlines()
    found: set[str] = set()
    for index, line in enumerate(lines):
        if "def" not in line:  # cheap: a line defining a move holds the word
            continue
        stripped = line.lstrip()
        if not _defines_a_move(stripped):
            continue
        indent = len(line) - len(stripped)
        header = _enclosing_header(lines, index, indent)
        if header is not None and header.startswith("class "):
            name = header[6:].split("(")[0].split(":")[0].strip()
            if name.isidentifier():
                found.add(name)
                continue
        if header is not None and header.split(None, 1)[0] in ("def", "async"):
            continue
        return found | _parsed_classes(text)
    return frozenset(found)


def _defines_a_move(stripped: str) -> bool:
    """``def cuda(`` / ``async def to (`` ...: the line defines a function named cuda or to."""
    words = stripped.split("(", 1)[0].split()
    if words[:1] == ["async"]:
        words = words[1:]
    return len(words) == 2 and words[0] == "def" and words[1] in MOVE_METHODS and "(" in stripped


def _enclosing_header(lines: list[str], index: int, indent: int) -> str | None:
    """The first line above ``index`` indented less than ``indent`` (blank, comment and
    decorator lines passed over), stripped; None at the top of the file."""
    for position in range(index - 1, -1, -1):  # upwards, without copying the lines above
        before = lines[position]
        header = before.lstrip()
        if not header or header.startswith(("#", "@")) or len(before) - len(header) >= indent:
            continue
        return header
    return None


def _parsed_classes(text: str) -> frozenset[str]:
    """The exact answer from CPython's ``ast`` (empty for a file it cannot parse: the run
    reports that file)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in MOVE_METHODS for s in node.body)
    )

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

MOVE_METHODS = ("cuda", "to")
_MARKERS = (b"def cuda(", b"def to(")
TEXT_MARKERS = ("def cuda(", "def to(")


def classes_with_own_moves(paths: Iterable[Path]) -> frozenset[str]:
    """Names of the classes that define a method ``cuda`` or ``to`` in the ``.py`` files
    ``paths`` (unreadable or unparseable files are left out: the run reports them)."""
    found: set[str] = set()
    for path in paths:
        if path.suffix != ".py":
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if any(marker in data for marker in _MARKERS):
            found.update(classes_in(data))
    return frozenset(found)


@lru_cache(maxsize=64)
def classes_in(source: str | bytes) -> frozenset[str]:
    """Names of the classes of ``source`` that define a method ``cuda`` or ``to``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in MOVE_METHODS for s in node.body)
    )

"""What the run-level facts learn from the disk beyond the bytes of the run's own files, kept so
that a later run can tell whether it would learn the same.

The star-import and import resolution (:class:`~torchfix_device.facts.star_imports.Resolver`)
asks whether a module file exists (``pkg/__init__.py``, ``pkg/mod.py``), lists a package's
folder for its submodules, and reads modules the run may not hold (a file ``--exclude`` leaves
out, a module in a folder above the one named). It asks through the three functions here; inside
:func:`recording` each answer is noted. :func:`still_true` asks every noted question again: a
warm run trusts facts it kept (:mod:`torchfix_device.run.run_memo`) only when the files of the
run have the same bytes and every answer here is the same.
"""

from __future__ import annotations

import hashlib
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from torchfix_device.files.safe_paths import read_regular

Observation = tuple[str, str, object]
"""``(question, path, answer)``: ``("file", p, bool)``, ``("listing", folder, [names])``,
``("read", p, sha256 hex or None)``."""


class _Log:
    noted: "dict[tuple[str, str], object] | None" = None


@contextmanager
def recording() -> Iterator["dict[tuple[str, str], object]"]:
    """Note every answer the functions below give until the block ends (nested blocks share the
    outer one's notes)."""
    outer = _Log.noted
    if outer is None:
        _Log.noted = {}
    try:
        yield _Log.noted  # type: ignore[misc]
    finally:
        if outer is None:
            _Log.noted = None


def _note(question: str, path: Path, answer: object) -> None:
    if _Log.noted is not None:
        _Log.noted[(question, str(path))] = answer


def is_file(path: Path | str) -> bool:
    """Whether ``path`` is a file (a link to one too); False where it cannot be asked."""
    try:
        answer = stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        answer = False
    if _Log.noted is not None:
        _Log.noted[("file", str(path))] = answer
    return answer


def submodule_names(folder: Path) -> frozenset[str]:
    """The names of the modules and packages a package folder holds: ``m`` for ``m.py`` (not
    ``__init__.py``), and each sub-folder whose name is an identifier."""
    try:
        entries = os.listdir(folder)
    except OSError:
        entries = []
    names = frozenset(
        e[:-3] if e.endswith(".py") else e for e in entries
        if (e.endswith(".py") and e != "__init__.py") or (os.path.isdir(folder / e) and e.isidentifier())
    )
    _note("listing", folder, sorted(names))
    return names


def module_bytes(path: Path, limit: int) -> bytes | None:
    """The bytes of the module file ``path``; None when it cannot be read, is not a regular file,
    or is over ``limit`` bytes."""
    try:
        data = read_regular(path).data if os.stat(path).st_size <= limit else None
    except OSError:
        data = None
    _note("read", path, hashlib.sha256(data).hexdigest() if data is not None else None)
    return data


def observations(noted: "dict[tuple[str, str], object]", limit: int) -> list[Observation]:
    """The notes, in a stable order, ready to keep as JSON (``limit``: the read limit used)."""
    return [(question, path, answer) for (question, path), answer in sorted(noted.items())] + [("limit", "", limit)]


def still_true(kept: Sequence[Observation]) -> bool:
    """Whether every question of ``kept`` gets the same answer now (nothing is noted meanwhile)."""
    outer, _Log.noted = _Log.noted, None
    try:
        limit = next((a for q, _, a in kept if q == "limit"), None)
        if not isinstance(limit, int):
            return False
        absent: dict[str, list[str]] = {}  # folder → its files found absent (most are in folders that do not exist)
        for question, path, answer in kept:
            if question == "file" and answer is False:
                absent.setdefault(os.path.dirname(path), []).append(path)
        for folder, paths in absent.items():
            if os.path.isdir(folder) and any(is_file(path) for path in paths):  # no folder, no file in it
                return False
        for question, path, answer in kept:
            if question == "file":
                if answer is False:
                    continue  # asked above
                now: object = is_file(path)
            elif question == "listing":
                now = sorted(submodule_names(Path(path)))
            elif question == "read":
                data = module_bytes(Path(path), limit)
                now = hashlib.sha256(data).hexdigest() if data is not None else None
            elif question == "limit":
                continue
            else:
                return False
            if now != answer:
                return False
        return True
    finally:
        _Log.noted = outer

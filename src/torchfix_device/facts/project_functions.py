"""Which functions each file of a run imports from another file of it: the run's part of
:mod:`torchfix_device.facts.returns` (what such a call returns is summarised from the defining
file's own code, in the worker, by the engine).

For each file, :func:`imported_functions` maps the qualified name libcst gives a use of the
function (``utils.accuracy`` for ``from utils import accuracy``, ``.eval.accuracy`` for a
relative import) to the file that defines it and its name there: the module-level, undecorated,
non-async ``def`` of the file an import resolves to, or of a file that file star-imports
(``utils/__init__.py``'s ``from .eval import *``, within its ``__all__`` where it has one, else
the public names). A name the importing module also binds otherwise (assigned, imported again,
defined twice) is left out. Read with CPython's ``ast``, one parse per file
(:func:`~torchfix_device.facts.project_classes.parsed`).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Mapping

from torchfix_device.facts.project_classes import Imports, parsed

Functions = dict[str, tuple[str, str]]
"""Qualified name of a use → (the defining file's absolute path, the function's name there)."""


def module_functions(data: bytes) -> tuple[dict[str, int], list[tuple[str, int]], frozenset[str] | None]:
    """The module-level functions (and undecorated classes) of a file a caller may summarise (name → how many times the
    module binds the name), its star imports ``(module, level)``, and its ``__all__`` (None where
    it has none or it is not a literal)."""
    tree = parsed(data)
    if tree is None:
        return {}, [], None
    bound: dict[str, int] = {}
    plain: set[str] = set()
    stars: list[tuple[str, int]] = []
    exported: frozenset[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            bound[node.name] = bound.get(node.name, 0) + 1
            if not node.decorator_list:
                plain.add(node.name)
        elif isinstance(node, ast.ClassDef):
            bound[node.name] = bound.get(node.name, 0) + 1
            if not node.decorator_list:
                plain.add(node.name)  # a call of it makes an instance (a `DataLoader` subclass's summary)
        elif isinstance(node, ast.AsyncFunctionDef):
            bound[node.name] = bound.get(node.name, 0) + 1
        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            stars.append((node.module or "", node.level))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                bound[name] = bound.get(name, 0) + 1
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound[name.id] = bound.get(name.id, 0) + 1
                if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                    names = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                    exported = frozenset(names) if len(names) == len(node.value.elts) else None
    return {name: 1 for name in plain if bound.get(name) == 1}, stars, exported


def imported_functions(programs: Mapping[Path, bytes], resolved: Imports) -> dict[Path, tuple[Functions, str]]:
    """For each file of ``programs`` that imports a function of another file of the run: its
    :data:`Functions` and a digest of them and of the defining files' code (the cache key)."""
    summaries: dict[Path, tuple[dict[str, int], list[tuple[str, int]], frozenset[str] | None]] = {}
    exports: dict[Path, dict[str, Path]] = {}

    def own(path: Path) -> tuple[dict[str, int], list[tuple[str, int]], frozenset[str] | None]:
        """A file's functions, read only for the files some import reaches (most are scripts)."""
        known = summaries.get(path)
        if known is None:
            data = programs.get(path, b"")
            known = summaries[path] = module_functions(data) if b"def " in data or b"class " in data or b"import *" in data else ({}, [], None)
        return known

    def exported(target: Path) -> dict[str, Path]:
        known = exports.get(target)
        if known is None:
            functions, stars, names = own(target)
            known = exports[target] = {name: target for name in functions if names is None or name in names}
            for module, level in stars:
                for spelt, found_level, other in resolved.get(target) or ():
                    if (spelt, found_level) == (module, level) and other in programs and other != target:
                        other_functions, _, other_names = own(other)
                        for name in other_functions:
                            public = not name.startswith("_") if other_names is None else name in other_names
                            if public and (names is None or name in names):
                                known.setdefault(name, other)
        return known

    found: dict[Path, tuple[Functions, str]] = {}
    for path, imports in resolved.items():
        table: Functions = {}
        for spelt, level, target in imports or ():
            prefix = "." * level + (f"{spelt}." if spelt else "")
            for name, where in exported(target).items():
                table[prefix + name] = (str(where), name)
        if table:
            digest = hashlib.sha256()
            for key in sorted(table):
                where, name = table[key]
                digest.update(f"{key}\0{where}\0{name}\0".encode())
            for where in sorted({w for w, _ in table.values()}):
                digest.update(hashlib.sha256(programs[Path(where)]).digest())
            found[path] = (table, digest.hexdigest()[:16])
    return found

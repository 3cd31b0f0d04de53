"""Which functions each file of a run imports from another file of it: the run's part of
:mod:`torchfix_device.facts.returns` (what such a call returns is summarised from the defining
file's own code, in the worker, by the engine).

For each file, :func:`imported_functions` maps the qualified name libcst gives a use of the
function (``utils.accuracy`` for ``from utils import accuracy``, ``.eval.accuracy`` for a
relative import) to the file that defines it and its name there: the module-level, undecorated,
non-async ``def`` of the file an import resolves to, or of a file that file star-imports
(``utils/__init__.py``'s ``from .eval import *``, within its ``__all__`` where it has one, else
the public names) or imports by name to hand on (a package's ``from .trainer import Trainer``,
followed from package to package; an ``__all__`` of objects, not strings, limits nothing). A
name the importing module also binds otherwise (assigned, imported again, defined twice) is
left out. Read with CPython's ``ast``, one parse per file
(:func:`~torchfix_device.facts.project_classes.parsed`).

The other way round, :func:`function_callers` tells each file which other files may call its
functions (those that import them and spell their names; a file that spells a name it does not
import from there makes that name's callers unknown), for the engine's ``ForeignCallers``
(:mod:`torchfix_device.engine.foreign`): what those calls pass, read in the caller's own module.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from torchfix_device.facts.project_classes import Imports, kept_per_run, parsed

MAX_HOPS = 3
"""How many files a value passed to a function is followed back through its callers."""
Functions = dict[str, tuple[str, str]]
"""Qualified name of a use → (the defining file's absolute path, the function's name there)."""


Summary = tuple[dict[str, int], list[tuple[str, int]], frozenset[str] | None, dict[str, tuple[str, int, str]]]
"""What :func:`module_functions` reads of a file."""


@kept_per_run
def module_functions(data: bytes) -> Summary:
    """The module-level functions (and undecorated classes) of a file a caller may summarise (name → how many times the
    module binds the name), its star imports ``(module, level)``, its ``__all__`` (None where
    it has none or it is not a literal of strings) and the names it imports from a module to
    bind them once (``from .trainer import Trainer``: ``Trainer`` → ``("trainer", 1, "Trainer")``),
    which a package's ``__init__`` hands on."""
    tree = parsed(data)
    if tree is None:
        return {}, [], None, {}
    bound: dict[str, int] = {}
    plain: set[str] = set()
    stars: list[tuple[str, int]] = []
    named: dict[str, tuple[str, int, str]] = {}
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
                if isinstance(node, ast.ImportFrom):
                    named[name] = (node.module or "", node.level, alias.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound[name.id] = bound.get(name.id, 0) + 1
                if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                    names = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                    exported = frozenset(names) if len(names) == len(node.value.elts) else None
    once = {name: 1 for name in plain if bound.get(name) == 1}
    return once, stars, exported, {name: where for name, where in named.items() if bound[name] == 1}


def imported_functions(programs: Mapping[Path, bytes], resolved: Imports) -> dict[Path, tuple[Functions, str]]:
    """For each file of ``programs`` that imports a function of another file of the run: its
    :data:`Functions` and a digest of them and of the defining files' code (the cache key)."""
    summaries: dict[Path, Summary] = {}
    exports: dict[Path, dict[str, tuple[Path, str]]] = {}

    def own(path: Path) -> Summary:
        """A file's functions, read only for the files some import reaches (most are scripts)."""
        known = summaries.get(path)
        if known is None:
            data = programs.get(path, b"")
            known = summaries[path] = module_functions(data) if b"def " in data or b"class " in data or b"import" in data else ({}, [], None, {})
        return known

    def modules(target: Path, module: str, level: int) -> list[Path]:
        return [other for spelt, found_level, other in resolved.get(target) or () if (spelt, found_level) == (module, level) and other in programs and other != target]

    def exported(target: Path) -> dict[str, tuple[Path, str]]:
        """Name a file gives → the file defining that function or class and its name there."""
        known = exports.get(target)
        if known is None:
            exports[target] = {}  # an import cycle hands on nothing more
            functions, stars, names, named = own(target)
            known = {name: (target, name) for name in functions if names is None or name in names}
            for module, level in stars:
                for other in modules(target, module, level):
                    other_functions, _, other_names, _ = own(other)
                    for name in other_functions:
                        public = not name.startswith("_") if other_names is None else name in other_names
                        if public and (names is None or name in names):
                            known.setdefault(name, (other, name))
            for name, (module, level, original) in named.items():  # a package's `from .trainer import Trainer`
                if names is None or name in names:
                    found = [exported(other).get(original) for other in modules(target, module, level)]
                    if len(found) == 1 and found[0] is not None:
                        known.setdefault(name, found[0])
            exports[target] = known
        return known

    found: dict[Path, tuple[Functions, str]] = {}
    for path, imports in resolved.items():
        table: Functions = {}
        for spelt, level, target in imports or ():
            prefix = "." * level + (f"{spelt}." if spelt else "")
            for name, (where, original) in exported(target).items():
                table[prefix + name] = (str(where), original)
        if table:
            digest = hashlib.sha256()
            for key in sorted(table):
                where, name = table[key]
                digest.update(f"{key}\0{where}\0{name}\0".encode())
            for where in sorted({w for w, _ in table.values()}):
                digest.update(hashlib.sha256(programs[Path(where)]).digest())
            found[path] = (table, digest.hexdigest()[:16])
    return found


@dataclass(frozen=True)
class Callers:
    """Where the other files of the run may call a file's functions (:func:`function_callers`)."""

    files: Mapping[str, tuple[tuple[str, str, tuple[str, ...]], ...]]
    """Function name → (a file that imports it: its absolute path, the name the run gives it, the
    qualified names its uses take there), for each such file."""
    unsure: frozenset[str]
    """Names that some other file spells without importing them from this one (its own function
    of that name, a re-export, an alias, a string): their callers are not all known."""
    digest: str
    """A digest of those files' code, and of their own callers' as far as :data:`MAX_HOPS` (the
    defining file's cached answer depends on them)."""


def function_callers(
    programs: Mapping[Path, bytes], functions: Mapping[Path, tuple[Functions, str]], shown: Mapping[Path, str],
    doubtful: "set[Path] | frozenset[Path]" = frozenset(), resolved: "Imports | None" = None,
) -> dict[Path, Callers]:
    """For each file whose functions another file of the run imports (``functions``: the tables
    of :func:`imported_functions`): every other file that spells one of their names and can reach
    the defining file by the run's imports (``resolved``, followed from module to module; a file
    that imports dynamically reaches every file), as a possible caller (the run taken as the
    project, as for the files no file imports: a file of another project in the same run is none).
    In the ``doubtful`` files (which a file that imports dynamically may import), every name is
    unsure. Without ``resolved``, every file that spells a name may call it."""
    reaching = _reaching(resolved, programs) if resolved is not None else None
    importers: dict[tuple[Path, str], dict[Path, list[str]]] = {}
    for path, (table, _) in functions.items():
        for qualified, (where, name) in table.items():
            importers.setdefault((Path(where), name), {}).setdefault(path, []).append(qualified)
    wanted = {name.encode() for _, name in importers}
    holders: dict[bytes, list[Path]] = {}  # each name asked about → the files spelling it
    for path in programs:
        for word in wanted.intersection(re.findall(rb"[A-Za-z_][A-Za-z0-9_]*", programs[path])):
            holders.setdefault(word, []).append(path)
    found: dict[Path, dict[str, list[tuple[str, str, tuple[str, ...]]]]] = {}
    unsure: dict[Path, set[str]] = {}
    readers: dict[Path, set[Path]] = {}
    for (target, name), users in importers.items():
        for path in holders.get(name.encode(), ()):
            if path == target or (reaching is not None and path not in reaching(target)):
                continue
            readers.setdefault(target, set()).add(path)
            if path in users:
                found.setdefault(target, {}).setdefault(name, []).append((str(path), shown[path], tuple(sorted(users[path]))))
            else:
                unsure.setdefault(target, set()).add(name)
    result: dict[Path, Callers] = {}
    codes: dict[Path, bytes] = {}  # each file's own digest, made once (a file reaches many targets)
    for target in {target for target, _ in importers}:
        digest, reached, frontier = hashlib.sha256(), set(), {target}
        for _ in range(MAX_HOPS):  # the callers' callers, as far as a loss is followed
            frontier = {path for step in frontier for path in readers.get(step, ())} - reached - {target}
            reached |= frontier
        for path in sorted(reached):
            code = codes.get(path)
            if code is None:
                code = codes[path] = str(path).encode() + b"\0" + hashlib.sha256(programs[path]).digest()
            digest.update(code)
        files = {name: tuple(sorted(entries)) for name, entries in found.get(target, {}).items()}
        names = {name for known, name in importers if known == target} if target in doubtful else unsure.get(target, ())
        result[target] = Callers(files, frozenset(names), digest.hexdigest()[:16])
    return result


def _reaching(resolved: Imports, programs: Mapping[Path, bytes]):  # noqa: ANN202 - a memoised lookup
    """``reaching(target)``: the files of the run from which ``target`` is imported, directly or
    through other files' imports (a file with dynamic imports reaches every file)."""
    importers: dict[Path, set[Path]] = {}
    dynamic = {path for path, found in resolved.items() if found is None}
    for path, found in resolved.items():
        for _, _, target in found or ():
            importers.setdefault(target, set()).add(path)
    known: dict[Path, frozenset[Path]] = {}

    def reaching(target: Path) -> frozenset[Path]:
        if target not in known:
            seen, stack = set(), [target]
            while stack:
                for importer in importers.get(stack.pop(), ()):
                    if importer not in seen:
                        seen.add(importer)
                        stack.append(importer)
            known[target] = frozenset(seen | (dynamic & programs.keys()))
        return known[target]

    return reaching

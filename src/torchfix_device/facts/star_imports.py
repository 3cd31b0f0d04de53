"""Star imports across the files of a run: which names ``from network import *`` binds in a file,
and whether each is proven to be a torch object (``torch.autograd.Variable``, ``torch``).

A legacy project often gets ``Variable`` and ``torch`` only this way (``agent.py`` does
``from network import *``, ``network/__init__.py`` does ``from .utils import *``,
``network/utils.py`` does ``from torch.autograd import Variable``). The runner resolves these
once over every file of the run (:func:`resolve_star_imports`), as it collects the classes that
move themselves (:mod:`torchfix_device.facts.project_classes`): a byte test first (the word ``import``
followed by ``*``), CPython's ``ast`` only for the files that hold one and for the modules they
name (read from disk, in the run or not). No libcst, no import of anything.

Where modules are looked for (the roots, like ``sys.path`` entries): for a file, its own folder
and each folder above it, up to the outermost of the folders named on the command line and the
current folder that hold it (only its own folder when none does). ``from .m import *`` is
resolved against the file's package. A module found under two roots as two different files,
or that is also the name of a standard module, is ambiguous: not resolved.
A standard module that is not found in the project binds no torch object.
What the found module binds is :mod:`torchfix_device.facts.star_exports`.

Each file holding a star import gets a :class:`FileStars`, which the codemods ask through
``Codemod.qualified_names`` and ``Codemod.star_doubt``: a name bound by a star import to an
import is named as that import names it (``Variable`` → ``torch.autograd.Variable``); a name
a star import may bind without proof (not found, computed ``__all__``, a conditional binding,
an assignment) makes that name's answer not a torch object alone, and the codemods report the
site for review, naming the star import and what could not be resolved.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

from torchfix_device.facts.project_classes import parsed as python_tree
from torchfix_device.files.disk_log import is_file, module_bytes, submodule_names
from torchfix_device.files.safe_paths import read_regular
from torchfix_device.facts.star_exports import DOUBT, IMPORT, OTHER, STDLIB, Bound, Namespace, module_namespace

MAX_MODULE_BYTES = 1_000_000
_STDLIB = frozenset(sys.stdlib_module_names)
_CYCLE = "a cycle of star imports"


def may_hold_star_import(data: bytes) -> bool:
    """A necessary condition for ``from X import *``: the word ``import`` followed, past blanks
    and backslash continuations, by ``*``."""
    start = data.find(b"import")
    while start != -1:
        at = start + 6
        while at < len(data) and data[at:at + 1] in (b" ", b"\t", b"\\", b"\r", b"\n", b"\x0c"):
            at += 1
        if data[at:at + 1] == b"*":
            return True
        start = data.find(b"import", start + 6)
    return False


class Star(NamedTuple):
    """One star import of a file: where, how it is spelt, and what it binds."""

    line: int
    spelt: str
    conditional: bool
    names: tuple[tuple[str, Bound], ...]
    rest: str | None


@dataclass(frozen=True)
class FileStars:
    """The star imports of one file, resolved."""

    stars: tuple[Star, ...]
    digest: str = field(default="", compare=False)
    """A key of everything here (the result cache keys the file's entries with it)."""
    imported_by: tuple[str, ...] = ()
    """Files of the run whose star imports reach this module (its names are theirs too: an
    import it no longer uses itself stays)."""

    @cached_property
    def _tables(self) -> list[dict[str, Bound]]:
        return [dict(star.names) for star in self.stars]

    @cached_property
    def torch_names(self) -> frozenset[str]:
        """The qualified names of the torch objects the star imports bind: the file may use
        them without spelling what the codemods' triggers and stage 1 look for (``nn.Linear``
        with no ``torch`` in the file, ``V`` for ``from torch.autograd import Variable as V``)."""
        return frozenset(
            bound.value for table in self._tables for bound in table.values()
            if bound.kind == IMPORT and bound.value.split(".")[0] == "torch"
        )

    def may_bind(self, name: str) -> bool:
        """Whether some star import of the file may bind ``name``."""
        return any(star.rest is not None for star in self.stars) or self.named_by_a_table(name)

    def named_by_a_table(self, name: str) -> bool:
        """Whether a star import whose names are known binds ``name``."""
        return any(name in table for table in self._tables)

    def lookup(self, name: str, bound_in_file: bool) -> tuple[frozenset[str], list[str], bool]:
        """For ``name`` read at module level: the qualified names star imports prove it may be,
        why some star import may bind it to something not proven (its label and reason), and
        whether one binds it to something that is no torch object. A star import whose names
        are unknown is counted only for a name the file binds nowhere itself (and no builtin)."""
        proven: set[str] = set()
        doubts: list[str] = []
        other = False
        for star, table in zip(self.stars, self._tables):
            label = f"`from {star.spelt} import *` (line {star.line})"
            bound = table.get(name)
            if bound is None:
                if star.rest == STDLIB:
                    other = True if not bound_in_file else other
                elif star.rest is not None and not bound_in_file:
                    doubts.append(f"{label}: {star.rest}")
                continue
            if star.conditional:
                doubts.append(f"{label} is run under a condition")
            elif bound.kind == IMPORT:
                proven.add(bound.value)
            elif bound.kind == OTHER:
                other = True
            else:
                doubts.append(f"{label}: {bound.value}")
        return frozenset(proven), doubts, other


class RunStars:
    """The :class:`FileStars` of the files of a run (by the path as the run names it)."""

    def __init__(self, files: dict[str, FileStars]) -> None:
        self._files = files

    def of(self, path: str | Path) -> FileStars | None:
        return self._files.get(str(path))

    def __bool__(self) -> bool:
        return bool(self._files)


def resolve_star_imports(paths: Iterable[Path], read: dict[Path, bytes] | None = None, roots: Sequence[Path] = ()) -> RunStars:
    """The star imports of the ``.py`` files ``paths`` (the run's; a notebook's too, given in
    ``read`` as the program its code cells make), resolved against ``roots``
    (the folders named) and the current folder. ``read``: the bytes of the files that may hold
    a star import (:func:`may_hold_star_import`), the others holding none; None: read them all.
    A file of the run that the star imports of another reach learns that too
    (:attr:`FileStars.imported_by`)."""
    resolver = Resolver(roots)
    found: dict[Path, FileStars] = {}
    sources = [p for p in paths if p.suffix == ".py" or (p.suffix == ".ipynb" and read is not None and p in read)]
    for path in sources:
        data = read.get(path) if read is not None else _read(path)
        if data is None or not may_hold_star_import(data):
            continue
        stars = resolver.file_stars(path, data)
        if stars is not None:
            found[path] = stars
    files: dict[str, FileStars] = {}
    for path in sources:
        importers = resolver.reached.get(resolver.absolute(path), ())
        stars = found.get(path)
        if importers:
            stars = _with_importers(stars, tuple(sorted(importers)[:3]))
        if stars is not None:
            files[str(path)] = stars
    return RunStars(files)


def _read(path: Path) -> bytes | None:
    try:
        return read_regular(path).data
    except OSError:
        return None


def _with_importers(stars: FileStars | None, importers: tuple[str, ...]) -> FileStars:
    own = stars.stars if stars is not None else ()
    return FileStars(own, hashlib.sha256(repr((own, importers)).encode("utf-8")).hexdigest(), importers)


class Resolver:
    """Finds modules, parses them once, and follows their star imports (cycle-safe)."""

    def __init__(self, roots: Sequence[Path] = ()) -> None:
        self.cwd = Path.cwd()
        self.limits = [self.absolute(r) for r in roots] + [self.cwd]
        self._namespaces: dict[Path, Namespace] = {}
        self._listings: dict[Path, frozenset[str]] = {}
        self._files: dict[tuple[str, int, Path], tuple[Path, ...]] = {}
        """(module, level, folder of the importer) → :meth:`module_files` (asked ~70 times a file)."""
        self.reached: dict[Path, set[str]] = {}
        """Module → the files whose star imports reached it (as shown)."""
        self._importable: dict[tuple[Path, ...], dict[Path, bool]] = {}
        self._ancestors: dict[Path, tuple[Path, frozenset[Path]]] = {}

    @staticmethod
    def absolute(path: Path) -> Path:
        return Path(os.path.normpath(os.path.abspath(path)))

    def shown(self, path: Path) -> str:
        try:
            return path.relative_to(self.cwd).as_posix()
        except ValueError:
            return path.as_posix()

    # -- one file of the run ---------------------------------------------------------------
    def file_stars(self, path: Path, data: bytes) -> FileStars | None:
        tree = python_tree(data)
        if tree is None:
            return None  # the run reports the file
        absolute = self.absolute(path)
        stars: list[Star] = []
        for node, conditional in _star_imports(tree):
            spelt = "." * node.level + (node.module or "")
            found = self.star_namespace(spelt, node.level, absolute, (absolute,))
            stars.append(Star(node.lineno, spelt, conditional, tuple(sorted(found.names.items())), found.rest))
        if not stars:
            return None
        digest = hashlib.sha256(repr(stars).encode("utf-8")).hexdigest()
        return FileStars(tuple(stars), digest)

    # -- modules ---------------------------------------------------------------------------
    def star_namespace(self, spelt: str, level: int, importer: Path, stack: tuple[Path, ...]) -> Namespace:
        """What ``from <spelt> import *`` in ``importer`` binds."""
        target = self.find(spelt, level, importer)
        return target if isinstance(target, Namespace) else self.namespace(target, stack)

    def imported(self, spelt: str, level: int, name: str, importer: Path, stack: tuple[Path, ...]) -> Bound:
        """What ``from <spelt> import <name>`` in ``importer`` binds: followed into a module of
        the project (``from .utils import Variable``), else the name it is imported as."""
        target = self.find(spelt, level, importer)
        if isinstance(target, Namespace):
            if level == 0 and target.rest is not None and (target.rest == STDLIB or " is not found in " in target.rest):
                return Bound(IMPORT, f"{spelt}.{name}")  # a module from outside the project
            return Bound(DOUBT, f"imported from `{spelt}`: {target.rest}")
        if target in stack:
            return Bound(DOUBT, f"imported from {self.shown(target)}, which is still being run then")
        found = self.namespace(target, stack)
        bound = found.names.get(name)
        if bound is not None:
            return bound
        if target.name == "__init__.py" and self.has_submodule(target, name):
            return Bound(OTHER, f"a submodule of {self.shown(target)}")
        return Bound(DOUBT, f"{self.shown(target)} does not show what `{name}` is")

    def find(self, spelt: str, level: int, importer: Path) -> Path | Namespace:
        """The file of module ``spelt`` imported in ``importer``, or why there is none (a
        :class:`Namespace` saying what the star import of it binds)."""
        module = spelt.lstrip(".")
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            target = self._module_file(base, module.split(".") if module else [])
            if target is None:
                return Namespace({}, f"`{spelt}` cannot be found next to {self.shown(importer)}")
            return target
        found = {t for root in self.roots_of(importer) if (t := self._module_file(root, module.split("."))) is not None}
        top = module.partition(".")[0]
        if not found:
            if top in _STDLIB:
                return Namespace({}, STDLIB)
            searched = self.roots_of(importer)
            where = self.shown(searched[0]) or "."
            if len(searched) > 1:
                where += f" or a folder above it up to {self.shown(searched[-1]) or '.'}"
            return Namespace({}, f"`{module}` is not found in {where}")
        if len(found) > 1:
            shown = ", ".join(sorted(self.shown(f) for f in found))
            return Namespace({}, f"`{module}` may be any of {shown}")
        if top in _STDLIB:
            return Namespace({}, f"`{module}` is also the name of a standard module")
        return found.pop()

    def namespace(self, target: Path, stack: tuple[Path, ...]) -> Namespace:
        self.reached.setdefault(target, set()).add(self.shown(stack[0]))
        if target in stack:
            chain = " → ".join(self.shown(p) for p in stack[stack.index(target):] + (target,))
            return Namespace({}, f"{_CYCLE} ({chain})")
        known = self._namespaces.get(target)
        if known is not None:
            return known
        shown = self.shown(target)
        data = module_bytes(target, MAX_MODULE_BYTES)
        tree = python_tree(data) if data is not None else None
        if tree is None:
            result = Namespace({}, f"{shown} cannot be read or parsed")
        else:
            result = module_namespace(self, target, tree, shown, stack + (target,))
        cycle = next((why for why in _reasons(result) if _CYCLE in why), None)
        if cycle is None:
            self._namespaces[target] = result
            return result
        # A module on a cycle of star imports binds what the order of the program's imports
        # makes it bind (a module met half-run binds only its names so far): nothing is known.
        return Namespace({name: Bound(DOUBT, cycle) for name in result.names}, cycle)

    def roots_of(self, importer: Path) -> list[Path]:
        """The folders a module named absolutely in ``importer`` is looked for in."""
        folder = importer.parent
        holding = [limit for limit in self.limits if folder == limit or limit in folder.parents]
        top = min(holding, key=lambda p: len(p.parts)) if holding else folder
        roots = [folder]
        while roots[-1] != top and roots[-1] != roots[-1].parent:
            roots.append(roots[-1].parent)
        return roots

    def module_files(self, spelt: str, level: int, importer: Path) -> list[Path]:
        """Every file module ``spelt`` (``level`` dots before it) may be, imported in
        ``importer``: the one of each folder it is looked for in (several where it is ambiguous)."""
        importer = self.absolute(importer)
        key = (spelt, level, importer.parent)  # the answer depends on the importer's folder only
        found = self._files.get(key)
        if found is None:
            found = self._files[key] = tuple(self._module_files(spelt, level, importer))
        return list(found)

    def _module_files(self, spelt: str, level: int, importer: Path) -> list[Path]:
        parts = spelt.split(".") if spelt else []
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            found = self._module_file(base, parts)
            return [found] if found is not None else []
        if not parts:
            return []
        return [t for root in self.roots_of(importer) if (t := self._module_file(root, parts)) is not None]

    def importable(self, importer: Path):  # noqa: ANN201 - a predicate
        """Whether a file could be imported (by an absolute name) from ``importer``: it lies under
        one of the folders ``importer`` looks for modules in, at a path of identifiers."""
        roots = tuple(self.roots_of(self.absolute(importer)))
        known = self._importable.setdefault(roots, {})  # the files of one folder share their roots

        def can(path: Path) -> bool:
            answer = known.get(path)
            if answer is None:
                answer = known[path] = self._under(roots, path)
            return answer

        return can

    def _under(self, roots: tuple[Path, ...], path: Path) -> bool:
        """``path`` lies under one of ``roots`` at a path of identifiers (asked for every pair of a
        file that imports dynamically and a file of the run: each file's folders are read once)."""
        found = self._ancestors.get(path)
        if found is None:
            absolute = self.absolute(path)
            found = self._ancestors[path] = (absolute, frozenset(absolute.parents))
        absolute, parents = found
        for root in roots:
            if root in parents:
                parts = absolute.relative_to(root).with_suffix("").parts
                if all(part.isidentifier() for part in parts):
                    return True
        return False

    def _module_file(self, base: Path, parts: list[str]) -> Path | None:
        """``base/a/b.py`` or ``base/a/b/__init__.py`` for ``a.b`` (the package first, as
        Python's finder does); ``base/__init__.py`` for no parts."""
        folder = base.joinpath(*parts)
        package = folder / "__init__.py"
        if is_file(package):
            return package
        if parts and all(p.isidentifier() for p in parts):
            module = folder.with_name(parts[-1] + ".py")
            if is_file(module):
                return module
        return None

    def submodules(self, init: Path) -> frozenset[str]:
        """The submodule names of the package whose ``__init__.py`` is ``init``."""
        folder = init.parent
        if folder not in self._listings:
            self._listings[folder] = submodule_names(folder)
        return self._listings[folder]

    def has_submodule(self, init: Path, name: str) -> bool:
        return name in self.submodules(init)


def _reasons(found: Namespace) -> Iterable[str]:
    yield from (b.value for b in found.names.values() if b.kind == DOUBT)
    if found.rest is not None:
        yield found.rest


def _star_imports(tree: ast.Module) -> list[tuple[ast.ImportFrom, bool]]:
    """The module's star imports, each with whether it is run under a condition (inside an
    ``if``, ``try`` or other block at module level)."""
    found: list[tuple[ast.ImportFrom, bool]] = []
    stack: list[tuple[ast.stmt, bool]] = [(s, False) for s in reversed(tree.body)]
    while stack:
        node, conditional = stack.pop()
        if isinstance(node, ast.ImportFrom) and node.names[0].name == "*":
            found.append((node, conditional))
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
            inner += [s for h in getattr(node, "handlers", []) for s in h.body]
            inner += [s for c in getattr(node, "cases", []) for s in c.body]
            stack.extend((s, True) for s in reversed(inner))
    found.sort(key=lambda pair: (pair[0].lineno, pair[0].col_offset))
    return found

"""Classes of the project being migrated that move themselves: they define their own ``cuda()``
or ``to()`` (rollout storages, replay buffers, wrappers), which need not return the object.

``storage.cuda()`` on such an object is not ``storage = storage.to(device)``: that calls a
different method, or replaces the object by ``None``. The runner collects these classes once
over every file of the run (a substring test first, CPython's ``ast`` only for files holding
``def cuda`` or ``def to``), so that a codemod in one file knows the classes defined in the
others; the codemods then leave a move on an object that may be one of them for review.

A subclass of such a class (``class Perplexity(NLLLoss)``, ``class NLLLoss(Loss)``) moves itself
the same way (:func:`subclasses_of`). A class concerns only the files that can reach it: the file
defining it and the files that import its module, directly or through other modules of the run
(:func:`reachable_classes`).
So a run over a folder holding several projects gives each file what a run over its own
project gives it: one project's ``RolloutStorage`` casts no doubt on another's ``.cuda()``.
A file importing modules dynamically (``importlib``, ``__import__``) may reach any of them.
"""

from __future__ import annotations

import ast
from collections import deque
from contextlib import contextmanager
from functools import lru_cache, update_wrapper
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

from torchfix_device.facts.import_graph import ImportGraph, Resolve
from torchfix_device.files.safe_paths import read_regular
from torchfix_device.syntax.legacy import python_tree

MOVE_METHODS = ("cuda", "to")
_MARKERS = (b"def cuda", b"def to")
TEXT_MARKERS = ("def cuda", "def to")


def parsed(source: str | bytes) -> ast.Module | None:
    """CPython's tree of a file's code, None where it does not parse (the run reports that file);
    one parse for the run-level facts that read the same file (its imports, its classes), kept
    for the whole gathering inside :func:`trees_kept`. A Python 2 file, or one with PyTorch 0.3's
    ``async=``, is read through its token fixes (:func:`~torchfix_device.syntax.legacy.python_tree`)."""
    kept = _Kept.trees
    if kept is None:
        return _parsed(source)
    tree = kept.get(source, _Kept)
    if tree is _Kept:
        tree = _parsed(source)
        if _Kept.size + len(source) <= KEPT_SOURCE_BYTES:
            kept[source], _Kept.size = tree, _Kept.size + len(source)
    return tree  # type: ignore[return-value]


KEPT_SOURCE_BYTES = 4_000_000
"""The most source whose trees :func:`trees_kept` keeps (a tree takes ~40 times its source)."""


class _Kept:
    trees: "dict[str | bytes, ast.Module | None] | None" = None
    size = 0
    answers: "dict[Callable, dict] | None" = None


_T = TypeVar("_T")


def kept_per_run(function: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """``function`` of a file's code, its answers kept for the whole gathering inside
    :func:`trees_kept` (the last 64 only outside): the runner asks each file's questions while
    its tree is at hand (:func:`~torchfix_device.run.run_facts.project_facts`), and the later passes
    that ask them again parse nothing (each file was parsed four times on the torch tree)."""
    recent = lru_cache(maxsize=64)(function)

    def asked(source):  # noqa: ANN001, ANN202
        kept = _Kept.answers
        if kept is None:
            return recent(source)
        table = kept.setdefault(function, {})
        answer = table.get(source, _Kept)
        if answer is _Kept:
            answer = table[source] = recent(source)
        return answer

    return update_wrapper(asked, function)  # type: ignore[return-value]


@contextmanager
def trees_kept() -> Iterator[None]:
    """Inside: :func:`parsed` keeps every tree (up to :data:`KEPT_SOURCE_BYTES` of source), so
    that the several passes of the run-level facts over all files parse each once (the last 64
    only were kept: each file was parsed three times)."""
    outer = _Kept.trees
    if outer is None:
        _Kept.trees, _Kept.size, _Kept.answers = {}, 0, {}
    try:
        yield
    finally:
        if outer is None:
            _Kept.trees, _Kept.size, _Kept.answers = None, 0, None


@lru_cache(maxsize=64)
def _parsed(source: str | bytes) -> ast.Module | None:
    return python_tree(source)


_STATEMENT_LIKE = (ast.stmt, ast.excepthandler, ast.match_case)


@lru_cache(maxsize=64)
def statements(tree: ast.Module) -> tuple[ast.AST, ...]:
    """Every statement of ``tree``, with the ``except`` clauses and ``case`` blocks that hold
    statements, in the order ``ast.walk`` gives them. Imports and class definitions are statements, and a statement is
    held only by a statement's list of them (a body, ``orelse``, ``handlers``...): the facts that
    look for them walk these, not the expressions that make most of a file's nodes."""
    found: list[ast.AST] = []
    queue: deque[ast.AST] = deque(tree.body)
    while queue:
        node = queue.popleft()
        found.append(node)
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list and value and isinstance(value[0], _STATEMENT_LIKE):
                queue.extend(value)
    return tuple(found)


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
    tree = parsed(text)
    if tree is None:
        return frozenset()
    return frozenset(
        node.name
        for node in statements(tree)
        if isinstance(node, ast.ClassDef)
        and any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in MOVE_METHODS for s in node.body)
    )


@lru_cache(maxsize=64)
def cuda_taking_nothing(source: str | bytes) -> frozenset[str]:
    """Names of the classes of ``source`` whose own ``cuda`` takes nothing but ``self`` (no other
    parameter, no ``*args``/``**kwargs``, no decorator) and that define no ``to``: on an instance
    of one, ``x.cuda(0)`` or ``x.cuda(non_blocking=True)`` raises ``TypeError``, so a call with
    arguments is never its own ``cuda()`` (DrQA's ``DocReader.cuda(self)`` against
    ``e.cuda(async=True)``). The last binding of ``cuda`` in the class body decides."""
    tree = parsed(source)
    if tree is None:
        return frozenset()
    found: set[str] = set()
    for node in statements(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        last: ast.AST | None = None
        defines_to = False
        for statement in node.body:
            bound = _bound_in_class(statement)
            defines_to = defines_to or "to" in bound
            if "cuda" in bound:
                last = statement
        if not defines_to and isinstance(last, (ast.FunctionDef, ast.AsyncFunctionDef)) and _takes_only_self(last):
            found.add(node.name)
    return frozenset(found)


def _bound_in_class(statement: ast.stmt) -> set[str]:
    """Names a statement of a class body binds (a ``def``, an assignment); every name for one
    that holds statements (an ``if``, a ``try``: what it binds is not read here)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(statement, (ast.Expr, ast.Pass)):
        return set()
    return {"cuda", "to"}  # an ``if``, a ``for``, an import...: it may bind either


def _takes_only_self(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    params = function.args
    return not function.decorator_list and len(params.posonlyargs) + len(params.args) == 1 \
        and params.vararg is None and params.kwarg is None and not params.kwonlyargs


DYNAMIC_IMPORTS = (b"importlib", b"__import__", b"exec(", b"runpy")
"""A file holding one of these may import any module of the run."""

Imports = dict[Path, "list[tuple[str, int, Path]] | None"]
"""Each file of a run → ``(module spelt, level, file it resolves to)`` of its imports; None for a
file that imports dynamically (:func:`~torchfix_device.facts.project_attributes.resolved_imports`)."""


def imported_modules(data: bytes) -> list[tuple[str, int]] | None:
    """``(module, level)`` of every import of a file's code, wherever it stands (``from a import
    b`` gives ``a`` and ``a.b``: ``b`` may be a submodule); None when it imports dynamically or
    cannot be parsed (then it may reach anything)."""
    if any(marker in data for marker in DYNAMIC_IMPORTS):
        return None
    tree = parsed(data)
    if tree is None:
        return _scanned_imports(data)  # legacy syntax (``async=True``, Python 2): its import lines
    found: list[tuple[str, int]] = []
    for node in statements(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            found.append((module, node.level))
            found.extend((f"{module}.{alias.name}" if module else alias.name, node.level) for alias in node.names if alias.name != "*")
    return found


_IMPORT_LINE = __import__("re").compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w, \t]+)|import[ \t]+([\w., \t]+))", __import__("re").M
)


def _scanned_imports(data: bytes) -> list[tuple[str, int]]:
    """The imports of a file ``ast`` cannot read, from its ``import``/``from ... import`` lines."""
    found: list[tuple[str, int]] = []
    for dots, module, names, plain in _IMPORT_LINE.findall(data):
        if plain:
            found.extend((part.split()[0].decode(), 0) for part in plain.split(b",") if part.strip())
            continue
        level, base = len(dots), module.decode()
        found.append((base, level))
        for name in names.split(b","):
            word = name.split()[0].decode() if name.split() else ""
            if word and word != "*":
                found.append((f"{base}.{word}" if base else word, level))
    return found


def reachable_classes(
    defined: Mapping[Path, frozenset[str]], imports: Mapping[Path, "list[tuple[str, int]] | None"], resolve: Resolve,
    importable: Callable[[Path], Callable[[Path], bool]],
) -> dict[Path, frozenset[str]]:
    """For each file of ``imports`` (the run's), the classes with their own moves that it can
    reach: its own (``defined``) and those of every module it imports, followed through the
    run's files. ``imports[f]`` None (a dynamic import): ``f`` may reach every class of a module
    it could import, ``importable(f)``. (One question of an
    :class:`~torchfix_device.facts.import_graph.ImportGraph`.)"""
    return ImportGraph(imports, resolve, importable).reach(defined)


@kept_per_run
def class_bases(data: bytes) -> dict[str, frozenset[str]]:
    """Each class of a file's code → the last names of its bases (``nn.Module`` → ``Module``);
    empty for a file that cannot be parsed."""
    tree = parsed(data)
    if tree is None:
        return {}
    found: dict[str, frozenset[str]] = {}
    for node in statements(tree):
        if isinstance(node, ast.ClassDef):
            names = set()
            for base in node.bases:
                while isinstance(base, ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Attribute):
                    names.add(base.attr)
                elif isinstance(base, ast.Name):
                    names.add(base.id)
            found[node.name] = frozenset(names)
    return found


def subclasses_of(
    defined: dict[Path, frozenset[str]], programs: Mapping[Path, bytes],
    reach: Callable[[dict[Path, frozenset[str]]], dict[Path, frozenset[str]]],
) -> tuple[dict[Path, frozenset[str]], dict[Path, frozenset[str]]]:
    """``defined`` (file → classes with their own moves) grown with the classes of each file whose
    base is such a class it can reach, to a fixpoint; and what each file then reaches
    (``reach(classes)``: :func:`reachable_classes` over the run's imports). Only files naming a
    known class are parsed."""
    grown = dict(defined)
    reached = reach(grown)
    bases_of: dict[Path, dict[str, frozenset[str]]] = {}
    words = {path: frozenset(_WORD.findall(data)) for path, data in programs.items() if b"class " in data}
    while True:
        known = frozenset(name.encode() for name in frozenset().union(*grown.values()))
        changed = False
        for path, data in programs.items():
            if path not in words or known.isdisjoint(words[path]):  # a base it names is a word of it
                continue
            if path not in bases_of:
                bases_of[path] = class_bases(data)
            reachable = reached.get(path, frozenset()) | grown.get(path, frozenset())
            new = {cls for cls, bases in bases_of[path].items() if bases & reachable} - grown.get(path, frozenset())
            if new:
                grown[path] = grown.get(path, frozenset()) | new
                changed = True
        if not changed:
            return grown, reached
        reached = reach(grown)


_WORD = __import__("re").compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_CLASS_LINE = __import__("re").compile(rb"^[ \t]*class[ \t]+([A-Za-z_][A-Za-z_0-9]*)", __import__("re").M)


def class_names(data: bytes) -> frozenset[str]:
    """Names of the classes a file's code defines (a line scan: a ``class`` line inside a string
    adds a name, which only makes a receiver's kind known where it may not be)."""
    return frozenset(match.decode("ascii", "replace") for match in _CLASS_LINE.findall(data))


def subclassed_classes(
    bases: Mapping[Path, Mapping[str, frozenset[str]]], resolved: Mapping[Path, "list[tuple[str, int, Path]] | None"],
) -> dict[Path, frozenset[str]]:
    """For each file, the classes it defines that a class of the run subclasses: in the same file,
    or in a file importing it (``bases``: each file's :func:`class_bases`; ``resolved``: each
    file's imports resolved to the files they may be), by the last part of the base's name
    (``class vgg16(Network)``, ``class Net(network.Network)``). An abstract base whose layers its
    subclasses build."""
    found: dict[Path, set[str]] = {}
    for path, classes in bases.items():
        named = {base for names in classes.values() for base in names}
        for target in ({path} | {t for _, _, t in resolved.get(path) or ()}) & bases.keys():
            found.setdefault(target, set()).update(set(bases[target]) & named)
    return {path: frozenset(names) for path, names in found.items() if names}

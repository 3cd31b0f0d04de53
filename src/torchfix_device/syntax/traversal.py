"""Walking libcst trees fast: children read off the node's fields and remembered, statements
and module-level units, names read and counted, a module's code from rendered pieces."""

from __future__ import annotations

import bisect
import functools
from typing import Callable, Iterator, ParamSpec, Sequence, TypeVar

import libcst as cst
from libcst._nodes.internal import CodegenState

from torchfix_device.syntax import visits

P = ParamSpec("P")

R = TypeVar("R")

_CHILDREN: dict[int, tuple[cst.CSTNode, Sequence[cst.CSTNode]]] = {}
"""id(node) -> (node, its children): keyed by id, as hashing a node is a Python-level call of
libcst's; the node is held, so its id is not reused while remembered."""

def children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """``node.children``, remembered until :func:`forget_children` (the codemods walk the same
    classes and functions many times; nodes are immutable, so the answer never goes stale).
    libcst computes ``children`` by rebuilding the node through a visitor, validation included;
    here they are read from the node's fields, in the order libcst's visit goes through them
    (:func:`~torchfix_device.syntax.visits.fields_of`)."""
    known = _CHILDREN.get(id(node))
    if known is not None:  # the node is held there: no other node has its id meanwhile
        return known[1]
    fields = visits.fields_of(node.__class__)
    if fields is None:
        found: Sequence[cst.CSTNode] = node.children
    else:
        found = []
        for name, _, _ in fields:
            value = getattr(node, name)
            kind = value.__class__
            if kind is tuple or kind is list:
                found.extend(value)
            elif value is not None and kind is not cst.MaybeSentinel:
                found.append(value)
    _CHILDREN[id(node)] = (node, found)
    return found

def forget_children() -> None:
    """Drop what :func:`children` and :func:`of_classes` remember."""
    _CHILDREN.clear()
    _INDEXES.clear()

def forgetting_children(func: Callable[P, R]) -> Callable[P, R]:
    """``func``, forgetting what :func:`children` remembered once it returns (the runner's
    transform of one file: its nodes are not needed afterwards)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        finally:
            forget_children()

    return wrapper

TRIVIA = (
    cst.Dot, cst.Comma, cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace,
    cst.Newline, cst.EmptyLine, cst.Comment, cst.LeftParen, cst.RightParen, cst.AssignEqual,
    cst.Colon, cst.Semicolon,
)
"""Tokens no metadata is asked of (no scope, name or position of theirs is read): libcst's own
node classes share one instance of some as a default (every ``cst.Attribute(value=..., attr=...)``
built without a ``dot`` holds the same ``Dot()``), so a rewritten tree holds them twice."""

def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (itself included), in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))

class _ClassIndex:
    """The nodes of one tree by class, in walk order, each with its number in the walk, and the
    numbers each node's own nodes take (from its own to its last descendant's)."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root  # held: no other tree takes its id meanwhile
        self.nodes: dict[type, list[cst.CSTNode]] = {}
        self.serials: dict[type, list[int]] = {}
        self.spans: dict[int, tuple[int, int]] = {}
        nodes, serials, spans, known = self.nodes, self.serials, self.spans, _CHILDREN
        stack: list = [root]
        serial = 0
        while stack:  # :func:`walk`, inlined (the index is made of every tree a fact asks about),
            node = stack.pop()  # with the id of a node pushed below its children: its span ends there
            kind = node.__class__
            if kind is int:
                spans[node] = (spans[node][0], serial - 1)
                continue
            found = nodes.get(kind)
            if found is None:
                found = nodes[kind] = []
                serials[kind] = []
            found.append(node)
            serials[kind].append(serial)
            held = known.get(id(node))
            below = held[1] if held is not None else children(node)
            if below:
                spans[id(node)] = (serial, serial)
                stack.append(id(node))
                stack.extend(reversed(below))
            serial += 1
        self.last = serial - 1
        self.merged: dict[tuple[type, ...], list[cst.CSTNode]] = {}

    def of(self, classes: tuple[type, ...]) -> list[cst.CSTNode]:
        if len(classes) == 1:
            return self.nodes.get(classes[0], [])
        known = self.merged.get(classes)
        if known is None:
            known = self.merged[classes] = self._between(0, self.last, classes)
        return known

    def under(self, node: cst.CSTNode, classes: tuple[type, ...]) -> list[cst.CSTNode] | None:
        """:meth:`of` for the nodes under ``node`` (itself included); None where ``node`` is no
        inner node of this tree."""
        span = self.spans.get(id(node))
        return None if span is None else self._between(span[0], span[1], classes)

    def _between(self, first: int, last: int, classes: tuple[type, ...]) -> list[cst.CSTNode]:
        """The nodes of ``classes`` numbered ``first`` to ``last``, in the walk's order."""
        runs = []
        for kind in classes:
            serials = self.serials.get(kind, ())
            low = bisect.bisect_left(serials, first)
            high = bisect.bisect_right(serials, last, low)
            if high > low:
                runs.append((serials[low:high], self.nodes[kind][low:high]))
        if len(runs) <= 1:
            return runs[0][1] if runs else []
        return [found for _, found in sorted((pair for run in runs for pair in zip(*run)), key=lambda pair: pair[0])]


_INDEXES: list[_ClassIndex] = []
"""The class indexes of the two trees asked about last (the tree being rewritten and the original,
which the engine visits again), until :func:`forget_children`."""

def of_classes(root: cst.CSTNode, *classes: type) -> list[cst.CSTNode]:
    """The nodes :func:`walk` gives of ``root`` whose class is one of ``classes`` (exact classes:
    ``cst.If``, not ``cst.BaseCompoundStatement``), in the same order. The codemods and facts of
    one file ask this of the same few trees many times: each is walked once, and the answer is a
    list held for the next asker (never to be changed)."""
    return _index_of(root).of(classes)

def of_classes_under(root: cst.CSTNode, node: cst.CSTNode, *classes: type) -> list[cst.CSTNode]:
    """:func:`of_classes` of ``node``, a node of the tree ``root`` (from ``root``'s index; a node
    it does not hold, or a leaf, is walked)."""
    found = _index_of(root).under(node, classes)
    return found if found is not None else [inner for inner in walk(node) if inner.__class__ in classes]

def _index_of(root: cst.CSTNode) -> _ClassIndex:
    index = next((known for known in _INDEXES if known.root is root), None)
    if index is None:
        index = _ClassIndex(root)
        _INDEXES[:] = [index, *_INDEXES[:1]]
    return index

STATEMENT_SCAFFOLD = (
    cst.Module,
    cst.SimpleStatementLine,
    cst.SimpleStatementSuite,
    cst.IndentedBlock,
    cst.BaseCompoundStatement,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)

"""Nodes whose children may be (or hold) statements."""

def walk_statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The statements, small statements (``ClassDef``, ``If``, ``Assign``, ``ImportFrom``,
    ``Global``...) and blocks under ``node``, itself included, in the order :func:`walk` gives
    them, without visiting any expression (no statement is inside one). Children are read from
    the fields that hold statements, not from libcst's ``children`` (which rebuilds the node)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, STATEMENT_SCAFFOLD):
            stack.extend(reversed(statement_children(current)))

def module_scope_statements(module: cst.Module) -> Iterator[cst.CSTNode]:
    """What :func:`walk_statements` gives that is in the module's own scope: top-level
    statements and those in the blocks of ``if``, ``try``, ``with``, loops and ``match`` there,
    not in a function or class body (a function or class defined there is given, its body is
    not)."""
    stack: list[cst.CSTNode] = [module]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, STATEMENT_SCAFFOLD) and not isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            stack.extend(reversed(statement_children(current)))

STATEMENT_FIELDS = ("body", "handlers", "orelse", "finalbody", "cases")

"""The fields of a compound statement or block part that hold statements, in source order."""

def statement_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)):
        return list(node.body)
    found: list[cst.CSTNode] = []
    for name in STATEMENT_FIELDS:
        value = getattr(node, name, None)
        if isinstance(value, cst.CSTNode):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(value)
    return found

def module_code(module: cst.Module, rendered: dict[int, tuple[cst.CSTNode, str]]) -> str:
    """``module.code``, reusing the code of the top-level statements in ``rendered`` (``id`` →
    the statement and its code), which it extends. Between the versions of one file's
    transform most top-level statements are the same objects (a codemod returns those it left
    untouched as they were), so a rewrite is rendered for the statements it changed alone.
    The last statement is always rendered afresh: libcst drops the file's final newline token
    from it when the file has none."""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    for line in module.header:
        line._codegen(state)
    last = len(module.body) - 1
    for index, statement in enumerate(module.body):
        known = rendered.get(id(statement))
        if known is not None and known[0] is statement and index != last:
            state.tokens.append(known[1])
            continue
        start = len(state.tokens)
        statement._codegen(state)
        rendered[id(statement)] = (statement, "".join(state.tokens[start:]))
    for line in module.footer:
        line._codegen(state)
    if module.has_trailing_newline:
        if not state.tokens:
            state.add_token(state.default_newline)
    else:
        state.pop_trailing_newline()
    return "".join(state.tokens)

def all_names(node: cst.CSTNode) -> set[str]:
    """Every identifier spelt as a name under ``node`` (to pick a name that clashes with none,
    or to tell that nothing there can bind a name)."""
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}

def name_reads(module: cst.Module, name: str, callees: set[int] | None = None) -> list[cst.Name] | None:
    """The ``Name`` nodes reading ``name`` in ``module`` outside import statements (attribute
    names, ``x.name``, and keyword names, ``name=...``, are not reads), for a file that binds
    ``name`` nowhere but in one import; None when a string literal holds ``name`` (a string
    annotation may read it). ``callees`` gets the ``id`` of each read that is called without
    ``*args`` (``name(...)``)."""
    found: list[cst.Name] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            if node.value == name:
                found.append(node)
        elif isinstance(node, cst.Call):
            if callees is not None and isinstance(node.func, cst.Name) and node.func.value == name:
                if not any(a.star for a in node.args):
                    callees.add(id(node.func))
            stack.extend(reversed(children(node)))
        elif isinstance(node, cst.SimpleString):
            if name in node.value:
                return None
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)
        elif not isinstance(node, (cst.Import, cst.ImportFrom)):
            stack.extend(reversed(children(node)))
    return found

def count_name(node: cst.CSTNode, name: str, skip: set[int] | frozenset[int] = frozenset()) -> int:
    """How often ``name`` is used as a name under ``node`` (``x.device`` and ``device=...`` do
    not count), leaving out the subtrees whose ``id`` is in ``skip``."""
    count = 0
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in skip:
            continue
        if isinstance(current, cst.Name):
            count += current.value == name
        elif isinstance(current, (cst.Attribute, cst.Arg)):
            stack.append(current.value)
        else:
            stack.extend(children(current))
    return count

def statement_units(module: cst.Module) -> Iterator[cst.CSTNode]:
    """The top-level statements of ``module``, the statements of the bodies of the classes
    among them, and of the classes among those: the parts a codemod returns as they were when
    it changed nothing in them (``Codemod.on_leave``)."""
    for statement in module.body:
        yield statement
        for member in _class_body(statement):
            yield member
            yield from _class_body(member)

def _class_body(node: cst.CSTNode) -> Sequence[cst.BaseStatement]:
    if isinstance(node, cst.ClassDef) and isinstance(node.body, cst.IndentedBlock):
        return node.body.body
    return ()


def function_returns(function: cst.FunctionDef) -> Iterator[cst.Return]:
    """The ``return`` statements of ``function`` itself (not of functions or classes in it)."""
    stack: list[cst.CSTNode] = list(statement_children(function.body))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Return):
            yield node
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(node, STATEMENT_SCAFFOLD):
            stack.extend(statement_children(node))


def yields(function: cst.FunctionDef) -> bool:
    """``function`` is a generator or a coroutine (a ``yield`` or ``await`` of its own)."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Yield, cst.Await)):
            return True
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(node.children)
    return False

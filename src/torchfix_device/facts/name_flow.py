"""Which bindings of a name can reach a place where it is read: reaching definitions over the
statements of one scope (a function's body or the module's), on libcst nodes.

The bindings themselves come from libcst's scope analysis (``Codemod.bindings_visible_at``: which
nodes bind the name in that scope, shadowing and ``global`` included); this module only orders
them. It walks the scope's statements once, in execution order, carrying the set of bindings
that may hold the name's value: an assignment replaces the set, ``if``/``else`` join, a loop
runs its body to a fixpoint (``break``/``continue`` included), ``return``/``raise`` end a path,
and what cannot be followed exactly is over-approximated (every binding inside a ``try`` or a
``with`` may reach past it or its handlers). A walrus may or may not bind, so it adds without
replacing. Where the walk cannot tell at all (a ``match`` statement involved, a binding it never
meets, such as one in a nested function declaring the name ``global``), the answer is None.

A binding a walk over-approximates can only make the caller ask for more evidence, never less.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import libcst as cst
from torchfix_device.syntax import traversal

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]
State = frozenset

STRONG, WEAK = "strong", "weak"
REACHED = -1
"""In a state: the place is reached at all (a state without it follows a ``return``/``break``)."""


class CannotTell(Exception):
    """The walk cannot order the bindings (the answer is None)."""


@dataclass
class _Loop:
    breaks: set[int] = field(default_factory=set)
    continues: set[int] = field(default_factory=set)


def binding_owner(node: cst.CSTNode, parent: Parent) -> tuple[cst.CSTNode, str] | None:
    """Where binding ``node`` (a libcst ``Assignment.node``) takes effect: the small statement or
    the compound statement that binds it, and whether it replaces the name's value (``STRONG``)
    or may not bind at all (``WEAK``: a walrus). None for a binding outside any statement."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.BaseSmallStatement, cst.Param)):
        return node, STRONG
    kind = STRONG
    child, above = node, parent(node)
    while above is not None:
        if isinstance(above, cst.NamedExpr) and above.target is child:
            kind = WEAK
        if isinstance(above, cst.BaseSmallStatement):
            return above, kind
        if isinstance(above, cst.For) and child is above.target:
            return above, kind
        if isinstance(above, cst.WithItem):
            with_statement = parent(above)
            return (with_statement, kind) if with_statement is not None else None
        if isinstance(above, (cst.ExceptHandler, cst.ExceptStarHandler)):
            return above, kind
        if isinstance(above, cst.Param):
            return above, kind
        if isinstance(above, cst.BaseCompoundStatement):
            return above, WEAK  # a walrus in a header
        child, above = above, parent(above)
    return None


def reaching_bindings(
    scope: cst.Module | cst.FunctionDef,
    name: str,
    bindings: Sequence[cst.CSTNode],
    read: cst.CSTNode,
    parent: Parent,
    tree_facet: "Callable[[str, Callable[[], frozenset[int]]], frozenset[int]] | None" = None,
) -> list[cst.CSTNode] | None:
    """The nodes of ``bindings`` (libcst's bindings of ``name`` in ``scope``) that may hold the
    value ``name`` has at ``read``, a place in ``scope``'s own statements (a function's
    parameters are bound on entry). None when the walk cannot tell.

    With ``tree_facet`` (the tree's facts, :meth:`ModuleValues.tree_facet`, which keep the
    statements of ``scope`` that jump, :func:`jumping_statements`, once per tree), the walk passes
    over a statement that holds none of the bindings, not the read, and no jump or ``del`` (it
    leaves the set as it found it): a read in a long module costs no walk of every statement."""
    jumps = tree_facet(f"jumps {id(scope)}", lambda: jumping_statements(scope, parent)) if tree_facet is not None else None
    walk = _Walk(name, bindings, read, parent, jumps)
    initial = [b for b in bindings if isinstance(b, cst.Param)] if isinstance(scope, cst.FunctionDef) else []
    try:
        start = frozenset(id(b) for b in initial) | {REACHED}
        if isinstance(scope, cst.Module):
            walk.block(scope.body, start)
        else:
            walk.suite(scope.body, start)
    except CannotTell:
        return None
    if walk.found is None or walk.unmet(initial):
        return None
    return [b for b in bindings if id(b) in walk.found]


class _Walk:
    def __init__(self, name: str, bindings: Sequence[cst.CSTNode], read: cst.CSTNode, parent: Parent,
                 jumps: frozenset[int] | None = None) -> None:
        self.name = name
        self.jumps = jumps
        self.holding: set[int] = set()
        """The owners of the bindings and every node around one (with ``jumps``)."""
        self.found: frozenset[int] | None = None
        self.loops: list[_Loop] = []
        self.owned: dict[int, list[tuple[int, str]]] = {}
        self.met: set[int] = set()
        self.all_ids = [id(b) for b in bindings]
        for binding in bindings:
            owner = binding_owner(binding, parent)
            if owner is None:
                continue  # never met: the answer is None
            self.owned.setdefault(id(owner[0]), []).append((id(binding), owner[1]))
            around: cst.CSTNode | None = owner[0]
            while jumps is not None and around is not None and id(around) not in self.holding:
                self.holding.add(id(around))
                around = parent(around)
        self.path: set[int] = set()
        node: cst.CSTNode | None = read
        while node is not None:
            self.path.add(id(node))
            node = parent(node)

    def unmet(self, initial: Sequence[cst.CSTNode]) -> bool:
        """A binding the walk never met: it is bound somewhere the walk does not follow."""
        seen = self.met | {id(b) for b in initial}
        return any(i not in seen for i in self.all_ids)

    # -- what a statement does to the set -----------------------------------------------------
    def bind(self, owner: cst.CSTNode, state: State) -> State:
        found = self.owned.get(id(owner))
        if not found:
            return state
        self.met.update(i for i, _ in found)
        if REACHED not in state:
            return state  # not reached: it binds nothing
        strong = frozenset(i for i, kind in found if kind == STRONG)
        weak = frozenset(i for i, kind in found if kind == WEAK)
        return (strong | weak | {REACHED}) if strong else (state | weak)

    def weak_in(self, owner: cst.CSTNode) -> State:
        return frozenset(i for i, kind in self.owned.get(id(owner), ()) if kind == WEAK)

    def record(self, state: State) -> None:
        self.found = state - {REACHED}

    def inside(self, node: cst.CSTNode | None) -> bool:
        return node is not None and id(node) in self.path

    def owned_inside(self, node: cst.CSTNode) -> State:
        """Every binding whose owner is ``node`` or inside it."""
        found: set[int] = set()
        for inner in _walk(node):
            for i, _ in self.owned.get(id(inner), ()):
                found.add(i)
        return frozenset(found)

    # -- statements -----------------------------------------------------------------------------
    def block(self, statements: Sequence[cst.CSTNode], state: State) -> State:
        jumps, holding, path = self.jumps, self.holding, self.path
        for statement in statements:
            if jumps is not None and id(statement) not in holding and id(statement) not in path and id(statement) not in jumps:
                continue  # binds nothing, reads nothing asked, ends no path: the set passes as it is
            state = self.statement(statement, state)
        return state

    def suite(self, node: cst.BaseSuite | None, state: State) -> State:
        if node is None:
            return state
        if isinstance(node, cst.SimpleStatementSuite):
            return self.small(node.body, state)
        return self.block(cst.ensure_type(node, cst.IndentedBlock).body, state)

    def small(self, statements: Sequence[cst.BaseSmallStatement], state: State) -> State:
        for small in statements:
            if self.inside(small):
                self.record(state | self.weak_in(small))
            if isinstance(small, (cst.Return, cst.Raise)):
                self.bind(small, state)
                state = frozenset()
            elif isinstance(small, cst.Break):
                if self.loops:
                    self.loops[-1].breaks.update(state)
                state = frozenset()
            elif isinstance(small, cst.Continue):
                if self.loops:
                    self.loops[-1].continues.update(state)
                state = frozenset()
            elif isinstance(small, cst.Del) and self.name in _deleted_names(small.target):
                state = state & {REACHED}
            else:
                state = self.bind(small, state)
        return state

    def statement(self, node: cst.CSTNode, state: State) -> State:
        if isinstance(node, cst.SimpleStatementLine):
            return self.small(node.body, state)
        if isinstance(node, cst.If):
            return self.if_(node, state)
        if isinstance(node, cst.For):
            return self.for_(node, state)
        if isinstance(node, cst.While):
            return self.while_(node, state)
        if isinstance(node, (cst.Try, cst.TryStar)):
            return self.try_(node, state)
        if isinstance(node, cst.With):
            return self.with_(node, state)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            if self.inside(node):
                self.record(state)  # a decorator, default or base: evaluated here
            return self.bind(node, state)
        if self.inside(node) or self.owned_inside(node):
            raise CannotTell  # match statements
        return state

    def if_(self, node: cst.If, state: State) -> State:
        if self.inside(node.test):
            self.record(state | self.weak_in(node))
        state = self.bind(node, state)
        body = self.suite(node.body, state)
        orelse = node.orelse
        if orelse is None:
            return body | state
        if isinstance(orelse, cst.If):
            return body | self.if_(orelse, state)
        return body | self.suite(orelse.body, state)

    def for_(self, node: cst.For, state: State) -> State:
        if self.inside(node.iter):
            self.record(state | self.weak_in(node))
        head = state
        while True:
            loop = _Loop()
            self.loops.append(loop)
            out = self.suite(node.body, self.bind(node, head))
            self.loops.pop()
            grown = head | out | loop.continues
            if grown == head:
                break
            head = grown
        after = self.suite(node.orelse.body, head) if node.orelse is not None else head
        return after | loop.breaks

    def while_(self, node: cst.While, state: State) -> State:
        head = state
        while True:
            loop = _Loop()
            self.loops.append(loop)
            out = self.suite(node.body, self.bind(node, head))
            self.loops.pop()
            grown = head | out | loop.continues
            if grown == head:
                break
            head = grown
        if self.inside(node.test):
            self.record(head | self.weak_in(node))
        after = self.suite(node.orelse.body, head) if node.orelse is not None else head
        return after | loop.breaks

    def try_(self, node: cst.Try | cst.TryStar, state: State) -> State:
        body_out = self.suite(node.body, state)
        raised = state | (self.owned_inside(node.body) if REACHED in state else frozenset())
        out = frozenset()
        for handler in node.handlers:
            out |= self.suite(handler.body, self.bind(handler, raised))
        out |= self.suite(node.orelse.body, body_out) if node.orelse is not None else body_out
        if node.finalbody is None:
            return out
        if self.owned_inside(node.finalbody) and any(isinstance(n, (cst.Break, cst.Continue)) for n in _walk(node)):
            raise CannotTell  # a jump through `finally`: its bindings would reach the jump's target
        after = self.suite(node.finalbody.body, out)
        everything = self.owned_inside(node) if REACHED in state else frozenset()
        self.suite(node.finalbody.body, out | raised | everything)  # where it may be read
        return after

    def with_(self, node: cst.With, state: State) -> State:
        if any(self.inside(item) for item in node.items):
            self.record(state | self.weak_in(node))
        bound = self.bind(node, state)
        out = self.suite(node.body, bound)
        inner = self.owned_inside(node.body) if REACHED in bound else frozenset()
        return out | bound | inner if inner else out  # a context manager may swallow an exception


def jumping_statements(scope: cst.CSTNode, parent: Parent) -> frozenset[int]:
    """The ids of the statements in ``scope`` (itself included) that hold a ``return``,
    ``raise``, ``break``, ``continue`` or ``del`` (in a function defined there too): those a walk
    must go through even where they bind nothing."""
    found: set[int] = set()
    for node in traversal.walk_statements(scope):
        if isinstance(node, (cst.Return, cst.Raise, cst.Break, cst.Continue, cst.Del)):
            around: cst.CSTNode | None = node
            while around is not None and id(around) not in found:
                found.add(id(around))
                around = None if around is scope else parent(around)
    return frozenset(found)


def _deleted_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _deleted_names(e.value)}
    return set()


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    return traversal.walk(node)

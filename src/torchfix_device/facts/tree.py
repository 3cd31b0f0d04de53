"""What the syntax of one tree says, whoever asks. One of the facts about values
(:mod:`torchfix_device.facts`): each node's parent and place in a walk, and the facets computed
from the tree alone (:meth:`~torchfix_device.facts.values.ModuleValues.tree_facet`), shared by
every codemod that visits the same tree (a codemod that changes nothing hands the next one the
tree as it was), where the facts of names are each codemod's own.

A rewrite rebuilds only the nodes on the way from what it changed up to the module; every other
node of the new tree is a node of the tree it rewrote. So the parents of a rewrite are those of
the tree it came from, but for the nodes it made (walked) and those it dropped (walked in the
old tree, down to the nodes the new one kept): a 10,000-line file rewritten a dozen times is
not walked a dozen times."""

from __future__ import annotations

from typing import Any

import libcst as cst
from torchfix_device.syntax import traversal
from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES

OUTSIDE = ((float("inf"),), 0)
"""The place of a node that is not in the tree: after every node that is."""


class TreeFacts:
    """What the syntax of one tree says, whoever asks: each node's parent and place in a walk,
    and the facets computed from nothing but the tree (:meth:`ModuleValues.tree_facet`).
    ``base``: the facts of the tree ``module`` was rewritten from (whose nodes it shares)."""

    def __init__(self, module: cst.Module, base: "TreeFacts | None" = None) -> None:
        self.module = module
        derived = _derived(module, base) if base is not None and base.once else None
        self.parents, self.once = (derived, True) if derived is not None else _parents(module)
        """Each node's parent (by ``id``); whether no node but a token stands in two places."""
        self._older = (base.module, base._older) if derived is not None and base is not None else None
        """The trees this one's parents come from: alive, so that no node takes the ``id`` of
        one of theirs (a token they held may keep an entry)."""
        if CHECK_FAST_NAMES and derived is not None:
            exact, once = _parents(module)
            assert once, "a rewrite holding a node twice was derived"
            assert all(exact[k] is self.parents.get(k) for k in _untokened(exact)), "a rewrite's parents differ"
            assert _untokened(self.parents) == _untokened(exact), "a rewrite's parents keep a node it dropped"
        self._places: dict[int, tuple] = {}
        self.facets: dict[str, Any] = {}

    def place(self, node: cst.CSTNode) -> tuple:
        """A key that sorts nodes as a walk of the module numbers them: a node's children get
        consecutive numbers when the walk (in source order) reaches the node; ``((), -1)`` for
        the module, :data:`OUTSIDE` for a node not in the tree."""
        if node is self.module:
            return ((), -1)
        climbed: list[cst.CSTNode] = []
        at: cst.CSTNode | None = node
        while at is not None and at is not self.module and id(at) not in self._places:
            climbed.append(at)
            at = self.parents.get(id(at))
        if at is None:
            return OUTSIDE
        path = () if at is self.module else (*self._places[id(at)][0], self._places[id(at)][1])
        for below in reversed(climbed):
            above = self.parents[id(below)]
            index = max(i for i, child in enumerate(traversal.children(above)) if child is below)
            self._places[id(below)] = (path, index)
            path = (*path, index)
        return self._places[id(node)]


def _parents(module: cst.Module) -> tuple[dict[int, cst.CSTNode], bool]:
    """Each node's parent (the last place of a node in two), and whether only tokens stand in two places."""
    parents: dict[int, cst.CSTNode] = {}
    once = True
    for above in traversal.walk(module):
        for child in traversal.children(above):
            if id(child) in parents and not isinstance(child, traversal.TRIVIA):
                once = False
            parents[id(child)] = above
    return parents, once


def _derived(module: cst.Module, base: "TreeFacts") -> dict[int, cst.CSTNode] | None:
    """The parents of ``module`` from those of ``base``'s tree (which holds no node twice): the
    nodes ``module`` shares with it keep theirs (the nodes under them are the same objects); the
    new nodes are walked, and the nodes of the old tree no longer in the new one are dropped
    (walked down to those it keeps; a token may keep a stale entry). None where ``module`` may
    hold a node twice (one it made in two places, or one it kept and also moved): a walk of it
    tells. ``base``'s tree is alive while this runs, so no new node has the ``id`` of one of its."""
    old = base.parents
    parents = dict(old)
    kept: set[int] = set()
    moved: list[cst.CSTNode] = []
    seen: set[int] = set()
    stack: list[cst.CSTNode] = [module]
    while stack:
        above = stack.pop()
        made = []
        for child in traversal.children(above):
            if isinstance(child, traversal.TRIVIA):
                parents[id(child)] = above
                continue
            if id(child) in seen:
                return None  # in two places
            seen.add(id(child))
            parents[id(child)] = above
            if id(child) in old:
                kept.add(id(child))
                if old[id(child)] is not above:
                    moved.append(child)
            else:
                made.append(child)
        stack.extend(reversed(made))  # in the order a walk reaches them
    for child in moved:  # still in its old place too, under a node the new tree kept?
        holder: cst.CSTNode | None = old[id(child)]
        while holder is not None and id(holder) not in kept:
            holder = old.get(id(holder))
        if holder is not None:
            return None
    stack = [base.module]
    while stack:
        above = stack.pop()
        for child in traversal.children(above):
            if id(child) not in kept and not isinstance(child, traversal.TRIVIA):
                del parents[id(child)]
                stack.append(child)
    return parents


def _untokened(parents: dict[int, cst.CSTNode]) -> set[int]:
    """The nodes of ``parents`` other than tokens (whose parent no one asks)."""
    return {k for k, above in parents.items() if not any(id(c) == k and isinstance(c, traversal.TRIVIA) for c in traversal.children(above))}


_TREES: list[TreeFacts] = []
"""The :class:`TreeFacts` of the two trees asked about last (the tree being rewritten and the
original, which the engine visits again for findings): every codemod that visits the same tree
(one that changed nothing hands it on as it was) shares them, and a rewrite of one of them is
derived from it."""


def tree_facts(module: cst.Module) -> TreeFacts:
    for known in _TREES:
        if known.module is module:
            return known
    base = next((known for known in _TREES if _shares_statements(module, known)), None)
    found = TreeFacts(module, base)
    _TREES[:] = [found, *_TREES[:1]]
    return found


def _shares_statements(module: cst.Module, known: TreeFacts) -> bool:
    """``module`` holds a top-level statement of ``known``'s tree: a rewrite of it."""
    return any(id(statement) in known.parents and known.parents[id(statement)] is known.module for statement in module.body)

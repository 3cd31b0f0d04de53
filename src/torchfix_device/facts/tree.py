"""What the syntax of one tree says, whoever asks. One of the facts about values
(:mod:`torchfix_device.facts`): each node's parent and place in a walk, and the facets computed
from the tree alone (:meth:`~torchfix_device.facts.values.ModuleValues.tree_facet`), shared by
every codemod that visits the same tree (a codemod that changes nothing hands the next one the
tree as it was), where the facts of names are each codemod's own."""

from __future__ import annotations

from typing import Any

import libcst as cst
from torchfix_device.syntax import traversal


class TreeFacts:
    """What the syntax of one tree says, whoever asks: each node's parent and place in a walk,
    and the facets computed from nothing but the tree (:meth:`ModuleValues.tree_facet`)."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: dict[int, cst.CSTNode] = {}
        self.order: dict[int, int] = {id(module): 0}
        for above in traversal.walk(module):
            for child in traversal.children(above):
                self.parents[id(child)] = above
                self.order[id(child)] = len(self.order)
        self.facets: dict[str, Any] = {}


_TREES: list[TreeFacts] = []
"""The :class:`TreeFacts` of the two trees asked about last (the tree being rewritten and the
original, which the engine visits again for findings): every codemod that visits the same tree
(one that changed nothing hands it on as it was) shares them."""


def tree_facts(module: cst.Module) -> TreeFacts:
    for known in _TREES:
        if known.module is module:
            return known
    found = TreeFacts(module)
    _TREES[:] = [found, *_TREES[:1]]
    return found

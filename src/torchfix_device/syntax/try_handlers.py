"""Which ``try`` handler around a node could tell one exception from another?

A rewrite that is exact on every run that passes a line may still raise a different exception on
a run that fails there (``.cuda(0)`` without a GPU: ``RuntimeError``; its rewrite:
``AssertionError``). A program can only observe that through a handler that catches the first
and not the second: :func:`telling_handler` finds one in a ``try`` around the node, in its own
function (a caller's ``try`` is not seen).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

BROAD = frozenset({"Exception", "BaseException"})


def telling_handler(codemod: "CodemodView", node: cst.CSTNode, before: set[str], after: set[str]) -> str | None:
    """The code of the type of a handler around ``node`` that names one of ``before`` (the
    exceptions the original raises) and none of ``after`` (those of the rewrite) nor a broad
    class (``except*`` too); None where there is none. A bare ``except:`` catches both alike."""
    child: cst.CSTNode = node
    parent = codemod.parent_of(child)
    while parent is not None and not isinstance(parent, (cst.Module, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if isinstance(parent, (cst.Try, cst.TryStar)) and child is parent.body:
            for handler in parent.handlers:
                if handler.type is None:
                    continue
                names = {n.value for n in traversal.walk(handler.type) if isinstance(n, cst.Name)}
                if names & before and not names & (after | BROAD):
                    return nodes.code_of(handler.type)
        child, parent = parent, codemod.parent_of(parent)
    return None

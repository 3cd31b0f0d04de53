"""Is the argument of ``x.cuda(i)`` an int GPU index (TFD001)?

``x.cuda(i)`` is exactly ``x.to(torch.device("cuda", i))`` when ``i`` is an int (tensors and
``nn.Module``s alike; a negative int raises the same ``RuntimeError`` either way). It is not when
``i`` is a string (``"cuda:1"``), a ``torch.device`` or ``None``: ``torch.device("cuda", i)``
then raises ``TypeError``. The evidence, strongest first:

- :data:`INT`: an int literal (``0``, ``-1``), an int the facts show (:mod:`torchfix_device.facts.counts`:
  a name each of whose bindings assigns one, ``cd = 0``, the target of ``for i in range(n)``, ``len(...)``), or an index ordered against an int literal by a guard
  around the call (``if self.gpu >= 0:``): a string, a ``torch.device`` or ``None`` raise
  ``TypeError`` there, and every number that passes is taken by ``.cuda(i)`` and
  ``torch.device("cuda", i)`` alike (an int-like one) or refused by both with ``TypeError`` (a
  float, a bool; ``tests/test_gpu_index.py`` runs them): the fix is safe;
- :data:`PRESUMED`: the index is named like a GPU index (``gpu``, ``gpu_id``, ``device_id``,
  ``local_rank``): an int is likely, not shown; the fix needs ``--unsafe-fixes``;
- a ``try`` around the call whose handler catches ``RuntimeError`` (not ``AssertionError``):
  without a GPU, torch 2.13's ``.cuda(0)`` raises ``RuntimeError`` and the rewrite the
  ``AssertionError`` of ``.cuda()``, so the fix is unsafe there whatever the index
  (:func:`catching_runtime_error`);
- :data:`UNKNOWN` otherwise (a parameter, a string, ``torch.device(...)``, ``None``, a name bound
  to something else on some path): left for manual review.

Plain syntax and the codemod's scope answers; what ``x`` is stays the codemod's question.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax.try_handlers import telling_handler
from torchfix_device.codemods.cuda_call.guards import rebinds
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.counts import is_count
from torchfix_device.facts.kinds import bound_values

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod

INT = "int"
PRESUMED = "presumed"
UNKNOWN = "unknown"
GPU_INDEX_NAMES = re.compile(r"(gpu|gpu_?(id|idx|index|no|num)|device_?(id|idx|index)|local_rank)", re.IGNORECASE)
"""Names that say "a GPU index" (the last part of ``args.gpu``, ``self.gpu_id``)."""
ORDERING = (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)


def is_int_literal(value: cst.BaseExpression) -> bool:
    """``0``, ``3``, ``-1`` (``True`` is no int literal: it is a ``Name``)."""
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
        value = value.expression
    return isinstance(value, cst.Integer)


def index_evidence(codemod: "Codemod", call: cst.Call, index: cst.BaseExpression) -> tuple[str, str]:
    """(:data:`INT`, :data:`PRESUMED` or :data:`UNKNOWN`, what the evidence is or lacks) for the
    device argument ``index`` of ``call``, ``x.cuda(index)``."""
    shown = nodes.code_of(index)
    if is_int_literal(index):
        return INT, f"`{shown}` is an int literal"
    what = _not_an_index(index)
    if what is not None:
        subject = what if what.startswith("`") else f"`{shown}` is {what}"
        return UNKNOWN, f"{subject}, not an int GPU index"
    if is_count(facts_values.of(codemod), index):
        return INT, f"`{shown}` is shown to be an int (every binding of it that reaches here)"
    if isinstance(index, cst.Name):
        values = bound_values(facts_values.of(codemod), index)
        if values is not None and any(_not_an_index(v) is not None for v in values):
            return UNKNOWN, f"`{shown}` is bound to a non-int on some path"
    guard = _comparing_guard(codemod, call, index)
    if guard is not None:
        return INT, f"`{shown}` is ordered against an int in the guard (`{guard}`), which only a number survives"
    dotted = nodes.dotted_name(index)
    if dotted is not None and GPU_INDEX_NAMES.fullmatch(dotted.rpartition(".")[2]):
        return PRESUMED, f"`{shown}` is only named like a GPU index"
    return UNKNOWN, f"nothing shows `{shown}` is an int GPU index"


def _not_an_index(value: cst.BaseExpression) -> str | None:
    """What ``value`` is when it is plainly no int: a string, ``None``, a float, a device."""
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "a string"
    if isinstance(value, cst.Float):
        return "a float"
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return "a bool"
    if nodes.is_none(value):
        return "`None` (the current device)"
    if isinstance(value, cst.Call) and (nodes.dotted_name(value.func) or "").rpartition(".")[2] == "device":
        return "a `torch.device`"
    return None


def _comparing_guard(codemod: "Codemod", call: cst.Call, index: cst.BaseExpression) -> str | None:
    """The test of an ``if`` (or conditional expression) around ``call``, on the branch it takes
    when true, that orders ``index`` against an int literal (``self.gpu >= 0``) and whose body
    does not rebind it; None if there is none."""
    child: cst.CSTNode = call
    parent = codemod.parent_of(child)
    while parent is not None and not isinstance(parent, cst.Module):
        if isinstance(parent, (cst.If, cst.IfExp)) and child is parent.body and _orders(parent.test, index):
            if isinstance(parent, cst.IfExp) or not rebinds(parent.body, index):
                return nodes.code_of(parent.test)
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        child, parent = parent, codemod.parent_of(parent)
    return None


def _orders(test: cst.BaseExpression, index: cst.BaseExpression) -> bool:
    """``test`` is (or ``and``-joins) a comparison of ``index`` with an int literal by ``<``,
    ``<=``, ``>``, ``>=`` (which a string or a device would not survive)."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (_orders(test.left, index) or _orders(test.right, index))
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, ORDERING):
        return False
    sides = (test.left, target.comparator)
    return any(a.deep_equals(index) and is_int_literal(b) for a, b in (sides, sides[::-1]))


def catching_runtime_error(codemod: "Codemod", call: cst.Call, index: cst.BaseExpression) -> str | None:
    """The handler of a ``try`` around ``call`` (in its function) that may catch the
    ``RuntimeError`` of ``.cuda(i)`` without a GPU but not the ``AssertionError`` of the rewrite.
    None for a negative literal index: both raise ``RuntimeError`` then."""
    if isinstance(index, cst.UnaryOperation) and isinstance(index.operator, cst.Minus):
        return None
    return telling_handler(codemod, call, {"RuntimeError", "Error"}, {"AssertionError"})

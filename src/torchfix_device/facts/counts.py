"""Python integers and numbers where the code shows them (``len(x)``, ``x.size(1)``, ``x.shape[0]``,
literals, arithmetic of those): the sizes, dimensions and indices :mod:`.dims` reads, and the
Python numbers a tensor broadcasts with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.syntax import nodes

from torchfix_device.facts.values import ITEM, VALUE

if TYPE_CHECKING:
    from torchfix_device.facts.values import Bound, ModuleValues

MAX_DEPTH = 16


def is_count(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``expr`` is a Python integer: a literal, ``len(...)``, ``int(...)``, ``x.size(k)``,
    ``x.shape[k]``, ``x.dim()``, arithmetic of those, or a name every binding of which is one
    (an assignment, the whole target of a ``for`` over ``range(...)``, the index of ``enumerate(...)``)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return is_count(values, expr.expression, depth + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)):
        return is_count(values, expr.left, depth + 1) and is_count(values, expr.right, depth + 1)
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        return len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and is_count(values, expr.slice[0].slice.value, depth + 1)
    if isinstance(expr, cst.Call) and not nodes.has_star_args(expr):
        if values.names(expr.func) in ({"builtins.len"}, {"builtins.int"}):
            return True
        if isinstance(expr.func, cst.Attribute) and not values.module_path(expr.func):
            method, args = expr.func.attr.value, expr.args
            return (method == "size" and len(args) == 1 and args[0].keyword is None) or (method in ("dim", "numel") and not args)
        return False
    if isinstance(expr, cst.Name):
        def answer(bound: "Bound") -> bool | None:
            if bound.kind == VALUE:
                return bound.value is not expr and is_count(values, bound.value, depth + 1) or None
            if bound.kind != ITEM or not isinstance(bound.value, cst.Call):
                return None
            made, loop = values.names(bound.value.func), values.parent(bound.node)
            if made == {"builtins.range"}:  # `for i in range(n)`: the whole target
                return isinstance(loop, (cst.For, cst.CompFor)) and loop.target is bound.node or None
            pair = values.parent(loop) if isinstance(loop, cst.Element) else None  # `for i, x in enumerate(xs)`
            return made == {"builtins.enumerate"} and isinstance(pair, (cst.Tuple, cst.List)) and len(pair.elements) == 2 \
                and pair.elements[0] is loop and isinstance(values.parent(pair), (cst.For, cst.CompFor)) or None
        return values.agreed(expr, answer) is True
    return False


def is_number(values: "ModuleValues", expr: cst.BaseExpression, depth: int) -> bool:
    """A Python number: an integer (:func:`is_count`), a float literal, or a name every binding
    of which is one."""
    if isinstance(expr, cst.Float) or is_count(values, expr, depth + 1):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return is_number(values, expr.expression, depth + 1)
    if isinstance(expr, cst.Name) and depth <= MAX_DEPTH:
        found = list(values.values_of(expr))
        return bool(found) and all(v is not None and v is not expr and is_number(values, v, depth + 1) for v in found)
    return False

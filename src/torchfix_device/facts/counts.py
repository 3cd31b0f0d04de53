"""Python integers and numbers where the code shows them (``len(x)``, ``x.size(1)``, ``x.shape[0]``,
literals, arithmetic of those): the sizes, dimensions and indices :mod:`.dims` reads, and the
Python numbers a tensor broadcasts with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.syntax import nodes

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

MAX_DEPTH = 16


def is_count(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``expr`` is a Python integer: a literal, ``len(...)``, ``x.size(k)``, ``x.shape[k]``,
    ``x.dim()``, arithmetic of those, or a name every binding of which is one."""
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
        if values.names(expr.func) == {"builtins.len"}:
            return True
        if isinstance(expr.func, cst.Attribute) and not values.module_path(expr.func):
            method, args = expr.func.attr.value, expr.args
            return (method == "size" and len(args) == 1 and args[0].keyword is None) or (method in ("dim", "numel") and not args)
        return False
    if isinstance(expr, cst.Name):
        found = list(values.values_of(expr))
        return bool(found) and all(v is not None and v is not expr and is_count(values, v, depth + 1) for v in found)
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

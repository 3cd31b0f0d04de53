"""How a tensor lies in memory, where that changed since PyTorch 0.3: the result of an elementwise
operation on a transposed tensor.

In 0.3 an elementwise operation (``pred.eq(y)``, ``x.float()``, ``a.add(b)``) wrote a new tensor
laid out row by row, whatever its operand's strides. Since 0.4 (TensorIterator) the result keeps
the layout of its operand: ``pred.t().eq(y)`` is as transposed as ``pred.t()``, and a ``.view``
that 0.3 accepted on it raises ``RuntimeError: view size is not compatible with input tensor's
size and stride``. :func:`layout` says where an expression may hold such a tensor, through names
(any value reaching the read), basic slices (``correct[:k]``) and further elementwise operations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

PERMUTED = "permuted"
"""A view with other strides (``x.t()``, ``x.transpose(0, 1)``, ``x.permute(...)``, ``x.expand(...)``)."""
RESULT = "result"
"""The result of an elementwise operation on a :data:`PERMUTED` tensor: laid out row by row in 0.3,
as its operand since 0.4."""

PERMUTING = frozenset({"t", "transpose", "permute", "expand", "expand_as"})
TENSOR_ONLY = frozenset({"t", "permute", "expand", "expand_as"})
"""Permuting methods no NumPy array or pandas frame has: their receiver is a tensor."""
ELEMENTWISE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "pow", "abs", "neg", "exp", "log",
    "sqrt", "sigmoid", "tanh", "clamp", "float", "double", "half", "long", "int", "byte", "bool", "type_as",
})
MAX_DEPTH = 8


def layout(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0, tensor_only: bool = False) -> str | None:
    """:data:`RESULT` where ``expr`` may hold the result of an elementwise operation on a permuted
    tensor, :data:`PERMUTED` where it may hold a permuted view, None where neither is shown. With
    ``tensor_only``, only :data:`TENSOR_ONLY` methods permute (``transpose`` is NumPy's too)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, cst.Subscript):
        basic = all(isinstance(e.slice, cst.Slice) for e in expr.slice)
        return layout(values, expr.value, depth + 1, tensor_only) if basic else None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method, receiver = expr.func.attr.value, expr.func.value
        if method in (TENSOR_ONLY if tensor_only else PERMUTING):
            return PERMUTED
        if method in ELEMENTWISE and layout(values, receiver, depth + 1, tensor_only) is not None:
            return RESULT
        return None
    if isinstance(expr, cst.Name):
        found = {layout(values, v, depth + 1, tensor_only) for v in values.values_of(expr) if v is not None and v is not expr}
        return RESULT if RESULT in found else PERMUTED if PERMUTED in found else None
    return None

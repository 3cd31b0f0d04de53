"""How a tensor lies in memory, where that changed since PyTorch 0.3: the result of an elementwise
operation (a method, an arithmetic operator, an elementwise layer) on a transposed tensor.

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
"""A view with other strides (``x.t()``, ``x.transpose(0, 1)``, ``x.permute(...)``)."""
EXPANDED = "expanded"
"""A broadcast view (``x.expand(...)``, ``x.expand_as(y)``): its strides of 0 decide no layout in
2.x, so an operator's result takes the layout of its other operand."""
RESULT = "result"
"""The result of an elementwise operation on a :data:`PERMUTED` tensor: laid out row by row in 0.3,
as its operand since 0.4."""

PERMUTING = frozenset({"t", "transpose", "permute", "expand", "expand_as"})
EXPANDING = frozenset({"expand", "expand_as"})
TENSOR_ONLY = frozenset({"t", "permute", "expand", "expand_as"})
"""Permuting methods no NumPy array or pandas frame has: their receiver is a tensor."""
ELEMENTWISE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "pow", "abs", "neg", "exp", "log",
    "sqrt", "sigmoid", "tanh", "clamp", "float", "double", "half", "long", "int", "byte", "bool", "type_as",
})
ELEMENTWISE_LAYERS = frozenset({
    "Dropout", "AlphaDropout", "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "GELU", "SiLU", "Tanh", "Sigmoid",
    "Softplus", "Hardtanh",
})
"""``torch.nn`` layers whose call is an elementwise operation on its input."""
ARITHMETIC = (
    cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power,
)
"""Operators that are an elementwise operation on tensors (``@`` is not)."""
MAX_DEPTH = 8


def layout(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0, tensor_only: bool = False) -> str | None:
    """:data:`RESULT` where ``expr`` may hold the result of an elementwise operation on a permuted
    tensor (for a method, also on an expanded one), :data:`PERMUTED` or :data:`EXPANDED` where it
    may hold such a view, None where none is shown. With
    ``tensor_only``, only :data:`TENSOR_ONLY` methods permute (``transpose`` is NumPy's too)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, cst.Subscript):
        basic = all(isinstance(e.slice, cst.Slice) for e in expr.slice)
        return layout(values, expr.value, depth + 1, tensor_only) if basic else None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, ARITHMETIC):
        # the result takes the layout of its first operand whose strides decide it: the left
        # one, unless that is a number (`1 - x`)
        first = expr.right if isinstance(expr.left, (cst.Integer, cst.Float)) else expr.left
        return RESULT if layout(values, first, depth + 1, tensor_only) in (PERMUTED, RESULT) else None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return RESULT if layout(values, expr.expression, depth + 1, tensor_only) in (PERMUTED, RESULT) else None
    if isinstance(expr, cst.Call) and elementwise_layer(values, expr.func):
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        found = layout(values, positional[0], depth + 1, tensor_only) if len(positional) == 1 else None
        return RESULT if found in (PERMUTED, RESULT) else None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method, receiver = expr.func.attr.value, expr.func.value
        if method in TENSOR_ONLY or (method in PERMUTING and not (tensor_only and not _tensor(values, receiver))):
            return EXPANDED if method in EXPANDING else PERMUTED
        if method in ELEMENTWISE and layout(values, receiver, depth + 1, tensor_only) is not None:
            return RESULT
        return None
    if isinstance(expr, cst.Name):
        found = {layout(values, v, depth + 1, tensor_only) for v in values.values_of(expr) if v is not None and v is not expr}
        return next((kind for kind in (RESULT, PERMUTED, EXPANDED) if kind in found), None)
    return None


def elementwise_layer(values: "ModuleValues", func: cst.BaseExpression) -> bool:
    """``func`` is a layer of :data:`ELEMENTWISE_LAYERS` (``self.dropout`` where its class only
    ever sets ``nn.Dropout(...)``, a name bound to one)."""
    held = torch_layers(values, func)
    return bool(held) and held <= ELEMENTWISE_LAYERS


def torch_layers(values: "ModuleValues", func: cst.BaseExpression) -> set[str]:
    """The ``torch.nn`` classes (last part) ``func`` holds: a name bound to one layer
    (:func:`~.kinds.layer_class`), ``self.x`` whose class only ever sets such objects
    (:meth:`~.self_attributes.SelfAttributeEvidence.torch_classes_held`); empty otherwise."""
    from torchfix_device.facts.grad import GradEvidence
    from torchfix_device.facts.kinds import layer_class

    if isinstance(func, cst.Name):
        layer = layer_class(values, func)
        return {layer} if layer is not None else set()
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        evidence = values.facet("grad evidence", lambda: GradEvidence(values))  # its attribute index, once per version
        return evidence.torch_classes_held(func)
    return set()


def _tensor(values: "ModuleValues", expr: cst.BaseExpression) -> bool:
    """``expr`` is shown a tensor: as :func:`~.kinds.is_tensor` shows it, or the call of a layer
    of ``self`` that returns one tensor (``self.conv(x)``)."""
    from torchfix_device.facts.kinds import ONE_TENSOR_LAYERS, is_tensor

    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        held = torch_layers(values, expr.func)
        if held and held <= ONE_TENSOR_LAYERS:
            return True
    return is_tensor(values, expr)

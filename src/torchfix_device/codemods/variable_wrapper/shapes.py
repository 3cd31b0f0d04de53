"""The shapes of code TFD009 (:mod:`~torchfix_device.codemods.variable_wrapper`) reads and
writes: which ``Variable(...)`` calls it understands, literal lists ``torch.tensor`` can take,
self-assignments left by an unwrap, and parentheses around a replacement."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes

# Expressions that can stand as the receiver of ``.attr`` / an operand without parentheses.
ATOMS = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.ConcatenatedString,
    cst.FormattedString, cst.Integer, cst.Float, cst.Imaginary, cst.List, cst.Dict, cst.Set,
    cst.ListComp, cst.SetComp, cst.DictComp, cst.Ellipsis,
)
EXACT_INTEGER_LIMIT = 2**24
"""Integers up to this size are exact in float32: ``1`` and ``1.0`` give the same element."""


def unsupported(call: cst.Call) -> str | None:
    """Why ``Variable(...)``'s arguments are left for manual review (None: understood)."""
    if any(a.star for a in call.args):
        return "with `*args`/`**kwargs`"
    positional = nodes.positional_args(call)
    if len(positional) not in (1, 2) or call.args[0].keyword is not None:
        return "without one or two positional arguments"
    if nodes.is_none(positional[0].value):
        return "of `None` (an empty tensor: `torch.empty(0)`)"
    for arg in call.args[len(positional):]:
        keyword = arg.keyword.value if arg.keyword else ""
        if keyword not in ("requires_grad", "volatile") or (keyword == "requires_grad" and len(positional) == 2):
            return f"with `{keyword}=`"
        if keyword == "volatile" and not _without_side_effects(arg.value):
            return "with a `volatile=` whose value runs code"
    return None


def requires_grad_arg(call: cst.Call) -> cst.Arg | None:
    """``Variable(x, requires_grad=r)``'s argument, or the second positional one: ``requires_grad``
    in PyTorch 0.3 as since (``Variable(data, requires_grad, volatile)``)."""
    positional = nodes.positional_args(call)
    return positional[1] if len(positional) == 2 else nodes.keyword_arg(call, "requires_grad")


def _without_side_effects(expr: cst.BaseExpression) -> bool:
    """A name, an attribute chain or a literal: dropping it runs nothing less."""
    if isinstance(expr, cst.Attribute):
        return _without_side_effects(expr.value)
    if isinstance(expr, cst.UnaryOperation):
        return _without_side_effects(expr.expression)
    return isinstance(expr, (cst.Name, cst.Integer, cst.Float))


def is_true(expr: cst.BaseExpression | None) -> bool:
    return expr is not None and m.matches(expr, m.Name("True"))


def literal_data(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``[1.0, -2.5]`` (nested lists too) with every integer written as a float, for
    ``torch.tensor(..., requires_grad=...)`` to give the floating dtype ``torch.Tensor([...])``
    gives; None unless ``expr`` is a non-empty list of number literals (small integers only)."""
    if isinstance(expr, cst.List):
        if not expr.elements or any(not isinstance(e, cst.Element) for e in expr.elements):
            return None
        elements = []
        for element in expr.elements:
            value = literal_data(element.value)
            if value is None:
                return None
            elements.append(element.with_changes(value=value))
        return expr.with_changes(elements=elements)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = literal_data(expr.expression)
        return None if inner is None or isinstance(inner, cst.List) else expr.with_changes(expression=inner)
    if isinstance(expr, cst.Float):
        return expr
    if isinstance(expr, cst.Integer):
        value = expr.evaluated_value
        if abs(value) > EXACT_INTEGER_LIMIT:
            return None
        return cst.Float(f"{value}.0", lpar=expr.lpar, rpar=expr.rpar)
    return None


def is_self_assignment(line: cst.SimpleStatementLine) -> bool:
    """``x = x`` or ``a, b = a, b`` alone on its line."""
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign):
        return False
    assign = line.body[0]
    return len(assign.targets) == 1 and _names(assign.targets[0].target) is not None and (
        _names(assign.targets[0].target) == _names(assign.value)
    )


def _names(expr: cst.BaseExpression) -> list[str] | None:
    """``["x"]`` for ``x``, ``["a", "b"]`` for ``a, b`` (no parentheses, no starred element)."""
    if expr.lpar:
        return None
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, cst.Tuple) and expr.elements and all(
        isinstance(e, cst.Element) and isinstance(e.value, cst.Name) and not e.value.lpar for e in expr.elements
    ):
        return [cst.ensure_type(e.value, cst.Name).value for e in expr.elements]
    return None


def data_receiver(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``h`` for ``h.data``."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data" and not expr.lpar:
        return expr.value
    return None


def atom(expr: cst.BaseExpression, force: bool = False) -> cst.BaseExpression:
    """``expr`` in parentheses unless it can stand as a receiver/operand as it is."""
    if expr.lpar or (isinstance(expr, ATOMS) and not force):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def method_call(receiver: cst.BaseExpression, *methods: tuple[str, list[cst.Arg]]) -> cst.BaseExpression:
    """``receiver.a(...).b(...)``, the receiver parenthesised where it needs it."""
    new = atom(receiver)
    for name, args in methods:
        new = cst.Call(func=cst.Attribute(value=new, attr=cst.Name(name)), args=args)
    return new


def attribute_self_assignment(line: cst.SimpleStatementLine) -> bool:
    """``self.a = self.a`` alone on its line."""
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign) or len(line.body[0].targets) != 1:
        return False
    assign = line.body[0]
    target, value = assign.targets[0].target, assign.value
    return isinstance(target, cst.Attribute) and isinstance(value, cst.Attribute) and nodes.code_of(target) == nodes.code_of(value)

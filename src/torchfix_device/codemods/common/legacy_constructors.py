"""Legacy typed constructors rewritten to factories: ``torch.FloatTensor(2, 3)`` →
``torch.empty(2, 3, dtype=torch.float32, device=...)`` (TFD003, TFD008)."""

from __future__ import annotations


import libcst as cst

from torchfix_device.syntax.nodes import add_keyword_arg, dotted_name

def _is_size_expression(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.BinaryOperation):
        return _is_size_expression(node.left) and _is_size_expression(node.right)
    return isinstance(node, cst.Call) and dotted_name(node.func) == "len"

def legacy_constructor_call(call: cst.Call, torch_name: str, dtype: str, device_code: str, data: bool = False) -> cst.Call | None:
    """``torch.FloatTensor(2, 3)`` → ``torch.empty(2, 3, dtype=torch.float32, device=...)``;
    ``torch.LongTensor([1, 2])`` → ``torch.tensor([1, 2], dtype=torch.int64, device=...)``;
    a lone argument the facts show to be data (``data``: :func:`~torchfix_device.facts.uses.holds_data`,
    ``torch.LongTensor(idx_sort)`` of ``idx_sort = np.argsort(...)``) likewise.

    None when the arguments do not show whether they are a size or data (a lone name).
    """
    if any(a.keyword is not None or a.star for a in call.args):
        return None
    args = list(call.args)
    if len(args) == 1 and (data or isinstance(args[0].value, (cst.List, cst.Tuple))):
        factory = "tensor"
    elif len(args) >= 2 or (len(args) == 1 and _is_size_expression(args[0].value)):
        factory = "empty"
    elif not args:
        factory = "empty"
        call = call.with_changes(args=[cst.Arg(cst.Integer("0"))])
    else:
        return None
    new = call.with_changes(func=cst.parse_expression(f"{torch_name}.{factory}"))
    new = add_keyword_arg(new, "dtype", f"{torch_name}.{dtype}")
    return add_keyword_arg(new, "device", device_code)


def lone_data(codemod, call: cst.Call) -> bool:  # noqa: ANN001
    """The one positional argument of ``call`` is shown to be data (asked of the facts)."""
    from torchfix_device.facts import values as facts_values
    from torchfix_device.facts.uses import holds_data

    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return False
    return holds_data(facts_values.of(codemod), call.args[0].value)

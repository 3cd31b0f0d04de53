"""The value of the inserted module-level device binding, default or configured.

``[tool.torchfix-device] device-expression`` (or ``--device-expression``) replaces
``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` with any Python expression,
e.g. ``torch.accelerator.current_accelerator()``. A ``torch`` in it means the torch module:
it is spelled the way the file imports torch, and ``import torch`` is added when the file has
no torch import and the expression uses ``torch``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

DEFAULT_DEVICE_EXPRESSION = 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'


class DeviceExpressionError(ValueError):
    pass


def validate_device_expression(code: str) -> str:
    """``code`` stripped, or :class:`DeviceExpressionError` saying why it cannot be used."""
    stripped = code.strip()
    if not stripped:
        raise DeviceExpressionError("device-expression is empty")
    if "\n" in stripped or "\r" in stripped:
        raise DeviceExpressionError("device-expression must fit on one line")
    import libcst as cst  # only for a configured expression: the default needs no check

    try:
        cst.parse_expression(stripped)
    except cst.ParserSyntaxError as exc:
        raise DeviceExpressionError(f"device-expression {code!r} is not a Python expression: {exc.message}") from None
    return stripped


def uses_torch(code: str) -> bool:
    import libcst as cst

    return any(isinstance(n, cst.Name) and n.value == "torch" for n in _names(cst.parse_expression(code)))


def device_expression_node(code: str | None, torch_name: str) -> cst.BaseExpression:
    """The expression to insert, with ``torch`` spelled ``torch_name``."""
    import libcst as cst

    node = cst.parse_expression(code or DEFAULT_DEVICE_EXPRESSION)
    if torch_name == "torch":
        return node
    return cst.ensure_type(node.visit(_rename_torch_class()(torch_name)), cst.BaseExpression)


@lru_cache(maxsize=1)
def _rename_torch_class() -> type:
    """The transformer spelling ``torch.x`` as ``<name>.x`` (defined on first use: this module
    is imported by runs that never load libcst)."""
    import libcst as cst

    class RenameTorch(cst.CSTTransformer):
        def __init__(self, torch_name: str) -> None:
            super().__init__()
            self.torch_name = torch_name

        def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
            if isinstance(updated_node.value, cst.Name) and updated_node.value.value == "torch":
                return updated_node.with_changes(value=cst.Name(self.torch_name))
            return updated_node

    return RenameTorch


def _names(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)

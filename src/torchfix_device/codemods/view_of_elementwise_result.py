import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.layout import PERMUTING, RESULT, TENSOR_ONLY, layout
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes
from torchfix_device.syntax.imports import imports_torch

SIZES = frozenset({"size", "shape", "numel", "len"})
"""What a lone argument of ``.view`` that is a size (not a dtype) may be read off."""


class ViewOfElementwiseResult(Codemod):
    """
    ## What it does
    Turns `.view(shape)` into `.reshape(shape)` where the tensor viewed may be the result of an
    elementwise operation (`eq`, `float`, `add`...) on a transposed or permuted tensor:
    `correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))` then
    `correct[:k].view(-1)`, the top-k accuracy of many legacy training scripts.

    ## Why is this bad?
    PyTorch 0.3 wrote the result of an elementwise operation row by row, whatever the layout of its
    operand, so a `.view` of it always worked. Since 0.4 the result keeps its operand's layout: the
    result of `eq` on `pred.t()` is transposed too, and `.view(-1)` raises `RuntimeError: view size
    is not compatible with input tensor's size and stride`.

    ## Example
    ```python
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    correct_k = correct[:k].view(-1).float().sum(0)
    ```

    ## Use instead
    ```python
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    correct_k = correct[:k].reshape(-1).float().sum(0)
    ```

    ## Not rewritten
    In a file that imports no torch, only `t()`, `permute`, `expand` and `expand_as`, which no
    NumPy array or pandas frame has, show a tensor (not `transpose`). A `.view` of a tensor not
    shown to be such a result (a `.view` of a permuted tensor itself
    failed in 0.3 too: a bug of the program, not of the migration); `.view(dtype)` (a lone
    argument that is a name or a call may be a dtype: only a literal, arithmetic, a tuple or list,
    or a size read off with `size`, `shape`, `numel` or `len` is read as a shape).

    ## Fix safety
    Safe: `reshape` returns the same view as `view` wherever `view` succeeds (the same tensor,
    sharing storage, with the same gradient), and copies only where `view` raises, so the fix
    changes only runs that failed.
    """

    code = "TFD025"
    name = "view-of-elementwise-result"
    summary = "`.view` of an elementwise result on a transposed tensor: 0.3 made it contiguous, 2.x keeps the layout and raises"
    safe = True
    triggers = ("view",)

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``.view(...)`` calls in a file that transposes or permutes something (a file importing no
        torch: with a method only tensors have)."""
        methods = PERMUTING if facts.torch_imported else TENSOR_ONLY
        if not any(f".{m}(" in facts.text for m in methods):
            return
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "view" and node.args:
                yield node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "view" or not _shape_arguments(original_node):
            return updated_node
        if layout(self.values, func.value, tensor_only=not imports_torch(self.values.module)) != RESULT:
            return updated_node
        shape = ", ".join(nodes.code_of(a.value) for a in original_node.args)
        message = (
            f"`{nodes.short_text(nodes.code_of(func.value))}` may be the result of an elementwise operation on a transposed "
            "tensor: PyTorch 0.3 laid it out row by row, 2.x keeps the transposed layout and `.view` raises "
            f"(view size is not compatible with input tensor's size and stride): use `.reshape({shape})`, "
            "the same view wherever `.view` works"
        )
        if not self.report(original_node, message):
            return updated_node
        new_func = cst.ensure_type(updated_node.func, cst.Attribute)
        return updated_node.with_changes(func=new_func.with_changes(attr=cst.Name("reshape")))


def _shape_arguments(call: cst.Call) -> bool:
    """Positional arguments that are a shape: several, or one that cannot be a dtype."""
    if not call.args or any(a.keyword is not None or a.star for a in call.args):
        return False
    return len(call.args) > 1 or _a_size(call.args[0].value)


def _a_size(expr: cst.BaseExpression) -> bool:
    """A literal number, arithmetic, a tuple or list, or a size read off a tensor or a sequence
    (``x.size(0)``, ``x.shape[1]``, ``x.numel()``, ``len(xs)``)."""
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    if isinstance(expr, (cst.Integer, cst.BinaryOperation, cst.Tuple, cst.List)):
        return True
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Call):
        expr = expr.func
    name = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else None
    return name in SIZES

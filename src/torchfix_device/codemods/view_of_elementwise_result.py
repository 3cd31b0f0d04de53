import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.layout import PERMUTING, RESULT, TENSOR_ONLY, torch_layers, layout
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes
from torchfix_device.syntax.imports import imports_torch

FRESH_AST = (ast.BinOp, ast.UnaryOp, ast.Call)
"""What a fresh tensor may be made by, in stage 1: an operation or a call."""
SIZES = frozenset({"size", "shape", "numel", "len"})
"""What a lone argument of ``.view`` that is a size (not a dtype) may be read off."""


class ViewOfElementwiseResult(Codemod):
    """
    ## What it does
    Turns `.view(shape)` into `.reshape(shape)` where the tensor viewed may be the result of an
    elementwise operation (`eq`, `float`, `add`...) on a transposed or permuted tensor:
    `correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))` then
    `correct[:k].view(-1)`, the top-k accuracy of many legacy training scripts. Where such a
    result leaves the function before any `.view` — returned, or given to a method of `self` that
    is no `torch.nn` layer or to a function of the project (`self.layer_norm(output + residual)`
    with `output` a transposed convolution output) — it adds `.contiguous()`, the layout 0.3 gave.

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

    An elementwise result here is that of a method (`eq`, `add`, `float`...), of an arithmetic
    operator whose first operand (the left one, unless it is a number) is transposed or such a
    result — 2.x takes the layout of the first operand that decides it: `out + x` keeps `out`'s,
    `x + out` is laid out row by row, and an expanded operand (`mask.expand_as(x) * x`, strides of
    0) decides nothing — or of an elementwise layer (`nn.Dropout`, `nn.ReLU`...).

    ## Not rewritten
    In a file that imports no torch, only `t()`, `permute`, `expand` and `expand_as`, which no
    NumPy array or pandas frame has, show a tensor (not `transpose`); `.contiguous()` is added
    only where that holds, or where the transposed value is shown a tensor (the call of a
    `torch.nn` layer, `self.conv(x).transpose(1, 2)`). A result given to torch (`self.norm(...)`
    of an `nn.LayerNorm`) or to a builtin (`print`), one bound to a name first (something else
    may hold it), and a transposed view itself (0.3 gave the same view). A `.view` of a tensor not
    shown to be such a result (a `.view` of a permuted tensor itself
    failed in 0.3 too: a bug of the program, not of the migration); `.view(dtype)` (a lone
    argument that is a name or a call may be a dtype: only a literal, arithmetic, a tuple or list,
    or a size read off with `size`, `shape`, `numel` or `len` is read as a shape).

    ## Fix safety
    Safe: `reshape` returns the same view as `view` wherever `view` succeeds (the same tensor,
    sharing storage, with the same gradient), and copies only where `view` raises, so the fix
    changes only runs that failed. `.contiguous()` of a fresh result gives the same values in
    the layout 0.3 gave them (a copy only where the layout differs, of a tensor nothing else
    holds; the gradient passes through unchanged).
    """

    code = "TFD025"
    skips_within_statements = True
    name = "view-of-elementwise-result"
    summary = "`.view` of an elementwise result on a transposed tensor: 0.3 made it contiguous, 2.x keeps the layout and raises"
    safe = True
    triggers = tuple(f".{m}(" for m in PERMUTING)

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``.view(...)`` calls in a file that transposes or permutes something (a file importing no
        torch: with a method only tensors have); there, also the ``return`` of an operation and the
        calls given one."""
        methods = PERMUTING if facts.torch_imported else TENSOR_ONLY
        if not any(f".{m}(" in facts.text for m in methods):
            return
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "view" and node.args:
                yield node
            elif isinstance(node, ast.Return) and isinstance(node.value, FRESH_AST):
                yield node
            elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and any(isinstance(a, FRESH_AST) for a in node.args):
                yield node

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        if original_node.value is None or not self._leaves_transposed(original_node.value):
            return updated_node
        if not self.report(original_node, _contiguous_message(original_node.value, "is returned")):
            return updated_node
        return updated_node.with_changes(value=_contiguous(cst.ensure_type(updated_node.value, cst.BaseExpression)))

    def _leaves_transposed(self, expr: cst.BaseExpression) -> bool:
        """``expr`` is an elementwise operation (not a name: the tensor is fresh, nothing else holds
        it) whose result may keep a transposed operand's layout in 2.x, on a tensor shown one."""
        if not isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation, cst.Call)):
            return False
        return layout(self.values, expr, tensor_only=True) == RESULT

    def _unseen_consumer(self, func: cst.BaseExpression) -> bool:
        """``func`` is code this file may not show (a method of ``self`` that is no ``torch.nn``
        layer, a function of the project): not torch's, not a builtin."""
        if isinstance(func, cst.Attribute):
            return isinstance(func.value, cst.Name) and func.value.value == "self" and not torch_layers(self.values, func)
        if not isinstance(func, cst.Name):
            return False
        names = self.values.names(func)
        return not self.values.torch_names(func) and not any(q.startswith("builtins.") for q in names)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        fresh = [i for i, a in enumerate(original_node.args) if a.keyword is None and self._leaves_transposed(a.value)]
        if fresh and not nodes.has_star_args(original_node) and self._unseen_consumer(original_node.func):
            updated_node = self._contiguous_arguments(original_node, updated_node, fresh)
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

    def _contiguous_arguments(self, original: cst.Call, updated: cst.Call, fresh: list[int]) -> cst.Call:
        """``.contiguous()`` on the arguments at ``fresh`` (results that leave the function)."""
        args = list(updated.args)
        code = nodes.short_text(nodes.code_of(original.func))
        for i in fresh:
            value = original.args[i].value
            if self.report(value, _contiguous_message(value, f"is given to `{code}`")):
                args[i] = args[i].with_changes(value=_contiguous(args[i].value))
        return updated.with_changes(args=args)


def _contiguous(expr: cst.BaseExpression) -> cst.Call:
    """``(expr).contiguous()``: parentheses where ``expr`` is an operation."""
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("contiguous")))


def _contiguous_message(expr: cst.BaseExpression, where: str) -> str:
    return (
        f"`{nodes.short_text(nodes.code_of(expr))}` {where}, the result of an elementwise operation on a transposed "
        "tensor: PyTorch 0.3 laid it out row by row, 2.x keeps the transposed layout, and a `.view` of it where it "
        "goes raises (view size is not compatible with input tensor's size and stride): `.contiguous()` gives "
        "the layout 0.3 gave (the same values; a copy of a tensor nothing else holds)"
    )


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

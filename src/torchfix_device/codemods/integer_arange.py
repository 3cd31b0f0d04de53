import ast
from typing import Iterator

import libcst as cst
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.dtypes import integer_refused
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.syntax import nodes

DEFAULT_TYPE_SETTERS = ("set_default_dtype", "set_default_tensor_type")


class IntegerArangeAsFloat(Codemod):
    """
    ## What it does
    Adds `dtype=torch.float` to a `torch.arange` of integers whose result the program then uses
    where only floating point is taken: made to require grad (`requires_grad=True`,
    `Variable(x, requires_grad=True)`, `nn.Parameter(x)`), set as `layer.weight.data`, multiplied
    as a matrix with a floating point tensor (`x.mm(w)`, `x @ w`), or given to a layer that refuses
    integer input (`nn.Linear`, convolutions, normalisation, recurrent layers, a freshly built
    `nn.Dropout`).

    ## Why is this bad?
    In PyTorch 0.3, `torch.arange` always returned a tensor of the default type, a
    `FloatTensor`, so tutorials wrote `x = V(t.arange(-2, 4), requires_grad=True)` or
    `embedding.weight.data = t.arange(0, 20).view(4, 5)`. Since 0.4 it infers its dtype from its
    arguments: integers make an `int64` tensor, and each of those uses raises (`RuntimeError:
    Only Tensors of floating point and complex dtype can require gradients`, `data set to a
    tensor that requires gradients must be floating point`, `expected m1 and m2 to have the same
    dtype`).

    ## Example
    ```python
    x = torch.arange(-2, 4, requires_grad=True)
    embedding.weight.data = torch.arange(0, 20).view(4, 5)
    ```

    ## Use instead
    ```python
    x = torch.arange(-2, 4, dtype=torch.float, requires_grad=True)
    embedding.weight.data = torch.arange(0, 20, dtype=torch.float).view(4, 5)
    ```

    ## Not rewritten
    An `arange` given a `dtype`, an `out`, or a float literal (a float tensor already), and one
    whose first use is not shown to refuse integers: an index (`x[torch.arange(n)]`), arithmetic
    (`torch.arange(n) / n` promotes to float by itself), an argument of another function. A file
    that sets the default type (`torch.set_default_tensor_type`, `torch.set_default_dtype`) gets
    `dtype=torch.get_default_dtype()`, the type 0.3 gave.

    ## Fix safety
    Safe: the use that follows fails for every integer tensor, whatever its values and shape, on
    every path to it (the walk of :mod:`torchfix_device.facts.refusals`, asked with the dtype
    questions of :mod:`torchfix_device.facts.dtypes`), so the fix changes only runs that failed,
    and gives the floating point tensor PyTorch 0.3 gave, the one the code was written for.
    """

    code = "TFD026"
    skips_within_statements = True
    name = "integer-arange-as-float"
    summary = "`torch.arange` of integers was a float tensor in 0.3 and is int64 since 0.4: add `dtype=torch.float` where floating point is needed"
    safe = True
    triggers = ("arange",)

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``arange(...)`` calls with no ``dtype``/``out`` in a file importing torch."""
        if not facts.torch_imported:
            return
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Call) and _ast_name(node.func) == "arange" and not any(
                    k.arg in ("dtype", "out") for k in node.keywords):
                yield node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not self._integer_arange(original_node):
            return updated_node
        place = integer_refused(self.values, original_node)
        if place is None:
            return updated_node
        func = original_node.func
        module = func.value if isinstance(func, cst.Attribute) else None
        code = nodes.short_text(nodes.code_of(original_node))
        where = f"{place.use.value} (`{nodes.short_text(nodes.code_of(place.node))}`)"
        message = f"`{code}` was a float tensor in PyTorch 0.3 and is int64 since 0.4; next it is {where}, where any integer tensor fails"
        if module is None:
            self.report(original_node, f"{message}: add `dtype=torch.float`", fixable=False)
            return updated_node
        prefix = nodes.code_of(module)
        sets_default = any(s in (self.source_code or "") for s in DEFAULT_TYPE_SETTERS)
        dtype = f"{prefix}.get_default_dtype()" if sets_default else f"{prefix}.float"
        if not self.report(original_node, f"{message}: add `dtype={dtype}`"):
            return updated_node
        return _with_dtype(updated_node, cst.parse_expression(dtype))

    def _integer_arange(self, call: cst.Call) -> bool:
        if "torch.arange" not in self.values.torch_names(call.func):
            return False
        positional = [a for a in call.args if a.keyword is None]
        if not 1 <= len(positional) <= 3 or any(a.star for a in call.args):
            return False
        if any(a.keyword is not None and a.keyword.value in ("dtype", "out", "layout") for a in call.args):
            return False
        return not any(_float_literal(a.value) for a in positional)


def _ast_name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _float_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    return isinstance(expr, (cst.Float, cst.Imaginary))


def _with_dtype(call: cst.Call, dtype: cst.BaseExpression) -> cst.Call:
    """``call`` with ``dtype=...`` after its positional arguments, in its own spacing."""
    args = list(call.args)
    last_positional = max(i for i, a in enumerate(args) if a.keyword is None)
    comma = args[last_positional].comma
    spaced = isinstance(comma, cst.Comma) and bool(getattr(comma.whitespace_after, "value", ""))
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if spaced or last_positional == len(args) - 1 \
        else cst.Comma(whitespace_after=cst.SimpleWhitespace(""))
    new = cst.Arg(value=dtype, keyword=cst.Name("dtype"), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    if last_positional == len(args) - 1:
        args[last_positional] = args[last_positional].with_changes(comma=separator)
        args.append(new)
    else:
        args[last_positional] = args[last_positional].with_changes(comma=separator)
        args.insert(last_positional + 1, new.with_changes(comma=comma))
    return call.with_changes(args=args)

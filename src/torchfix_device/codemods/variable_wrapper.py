from __future__ import annotations

from collections import Counter

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor

from torchfix_device import _cst
from torchfix_device.codemod import Codemod
from torchfix_device.candidates import FileFacts
from torchfix_device.import_edits import remove_import_aliases

VARIABLE = {"torch.autograd.Variable", "torch.autograd.variable.Variable"}
VARIABLE_MODULES = ("torch.autograd", "torch.autograd.variable")
VARIABLE_NAME = frozenset({"Variable"})

# torch functions whose result is a new tensor that does not require grad (unless asked to):
# they take no tensor whose graph they could continue.
FACTORIES_WITH_REQUIRES_GRAD = {
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
    "linspace", "logspace", "eye", "tensor", "zeros_like", "ones_like", "empty_like",
    "full_like", "rand_like", "randn_like", "randint_like",
}
FRESH_FUNCTIONS = FACTORIES_WITH_REQUIRES_GRAD | {"from_numpy"}
# Tensor methods that give a tensor that requires grad only when their receiver does.
NO_GRAD_KEEPING_METHODS = {
    "float", "double", "half", "bfloat16", "long", "int", "short", "byte", "char", "bool",
    "cuda", "cpu", "to", "type", "view", "reshape", "unsqueeze", "squeeze", "permute",
    "transpose", "t", "contiguous", "clone", "expand", "flatten", "fill_", "zero_", "normal_",
    "uniform_", "pin_memory",
}
# Expressions that can stand as the receiver of ``.attr`` / an operand without parentheses.
ATOMS = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.ConcatenatedString,
    cst.FormattedString, cst.Integer, cst.Float, cst.Imaginary, cst.List, cst.Dict, cst.Set,
    cst.ListComp, cst.SetComp, cst.DictComp, cst.Ellipsis,
)


class VariableWrapper(Codemod):
    """
    ## What it does
    Removes the `torch.autograd.Variable` wrapper, however it was imported
    (`from torch.autograd import Variable`, `torch.autograd.Variable`):
    `Variable(torch.randn(3))` → `torch.randn(3)`,
    `Variable(torch.randn(3), requires_grad=True)` → `torch.randn(3, requires_grad=True)`,
    `Variable(torch.from_numpy(a).float(), requires_grad=True)` →
    `torch.from_numpy(a).float().requires_grad_()`, and `volatile=True/False` (which has had no
    effect since PyTorch 0.4) is dropped. `Variable(a + b).cuda()` becomes `(a + b).cuda()`.
    `Variable(h.data)` → `h.detach()`; `Variable(torch.Tensor([1.0]), requires_grad=True)` (a
    list of float literals) → `torch.tensor([1.0], requires_grad=True)`.
    `isinstance(x, Variable)` → `isinstance(x, torch.Tensor)`, and `type(h) == Variable` /
    `type(h) is Variable` → `isinstance(h, torch.Tensor)` (`!=` / `is not` → `not isinstance(...)`),
    adding `import torch` where it is missing.
    `Variable` counts only where every binding that reaches the name is
    `torch.autograd.Variable`: a module-level `Variable = lambda ...`, a class or a parameter
    named `Variable`, or a rebinding after the import leave it alone.
    The `Variable` import is removed once the name it binds appears nowhere else (docstrings
    aside), and so is a line `x = Variable(x)` (or `a, b = Variable(a), Variable(b)`) that would
    become `x = x` (kept when a comment is attached to it or it is its block's only statement).

    ## Why is this bad?
    Since PyTorch 0.4 `Variable` and `Tensor` are the same class. `Variable(x)` is a deprecated
    wrapper that today returns `x.detach()` (a new tensor cut from the autograd graph), and
    `volatile=True` only prints `UserWarning: volatile was removed and now has no effect`: code
    that relies on it for inference runs with autograd on. Use `with torch.no_grad():` instead.

    ## Example
    ```python
    from torch.autograd import Variable

    noise = Variable(torch.randn(batch, dim))
    w = Variable(torch.zeros(dim, 1), requires_grad=True)
    state = Variable(torch.from_numpy(obs).float().unsqueeze(0), volatile=True)
    hidden = Variable(h.data)
    if type(hidden) == Variable:  # always False since PyTorch 0.4
        ...
    ```

    ## Use instead
    ```python
    noise = torch.randn(batch, dim)
    w = torch.zeros(dim, 1, requires_grad=True)
    state = torch.from_numpy(obs).float().unsqueeze(0)  # under `with torch.no_grad():`
    hidden = h.detach()
    if isinstance(hidden, torch.Tensor):
        ...
    ```

    ## Not rewritten
    Calls with `*args`/`**kwargs`, `data=` by keyword, more than one positional argument, other
    keywords, or a `volatile=` that is not a literal `True`/`False`: reported for manual review.
    `Variable` used as another value (`issubclass(T, Variable)`, a tuple in `isinstance`) is left
    alone, and so is a `Variable` that may be anything else (a name also bound to a lambda, a
    class or a parameter) or that comes from a star import (`from torch.autograd import *`: what
    it binds is not known, so it is not guessed).

    ## Fix safety
    Safe where the wrapped expression is provably a fresh tensor that does not require grad (a
    factory call such as `torch.randn`/`torch.zeros`/`torch.from_numpy`, a legacy constructor
    given sizes or a list, `x.data`, `x.detach()`, conversions and reshapes of those, or one of
    those times a number): there the `.detach()` that `Variable` does is a no-op.
    `Variable(h.data)` → `h.detach()` gives the same values and storage without grad.
    `torch.tensor([...floats])` takes the default dtype as `torch.Tensor([...])` does.
    `isinstance(x, Variable)` is `isinstance(x, torch.Tensor)` on PyTorch ≥ 0.4. The
    `type(h) == Variable` rewrite changes behaviour on purpose: the comparison is always False
    today (a bug), and the rewrite takes the branch that was meant.
    Unsafe for anything else (`Variable(inputs)` → `inputs`,
    `Variable(w, requires_grad=True)` → `w.requires_grad_()`): if `inputs` already requires grad,
    `Variable` cut it from the graph and the rewrite does not, and `requires_grad_()` now marks
    `w` itself instead of a detached copy. These fixes are applied only with `--unsafe-fixes`;
    where the input may require grad, write `inputs.detach()` by hand.
    """

    code = "TFD009"
    name = "variable-wrapper"
    summary = "`torch.autograd.Variable` is a deprecated no-op wrapper since PyTorch 0.4: use the tensor"
    safe = True
    triggers = ("Variable",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """A call that may be ``torch.autograd.Variable(...)``."""
        # ``isinstance(x, Variable)`` and ``type(x) == Variable`` use ``Variable`` as a value, not
        # a call: the name spelt with a torch import is all that is needed.
        return facts.torch_imported and "Variable" in facts.names

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._tight: set[int] = set()
        self._bool_operands: set[int] = set()
        """``id`` of the operands of ``and``/``or``, where ``not x`` needs no parentheses."""
        self._only_statements: set[int] = set()
        self._rewrote = False
        self._imports: dict[cst.ImportAlias, tuple[cst.ImportFrom, str, str | None]] = {}
        self._import_originals: dict[int, cst.ImportFrom] = {}
        """``id`` of each recorded import (libcst's copy) → the original it was copied from."""
        self._names: Counter[str] = Counter()
        self._removed_names: Counter[str] = Counter()
        self._strings: list[cst.SimpleString] = []
        self._docstrings: set[int] = set()
        return None

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        unused = {alias: found for alias, found in self._imports.items() if self._rewrote and self._unused(found)}
        if unused:
            objects = [(module, "Variable", asname) for _, module, asname in unused.values()]
            aliases = self._aliases_in(updated_node, {alias: statement for alias, (statement, _, _) in unused.items()})
            updated_node = remove_import_aliases(self.context, updated_node, objects, aliases)
        return super().leave_Module(original_node, updated_node)

    # -- the `Variable` import --------------------------------------------------------------
    # The import goes when the name it binds appears nowhere else in the rewritten module:
    # counted during the walk (every Name node, less the import's own and the callees of the
    # rewritten calls), so no scope analysis is needed. A name still spelt somewhere (a use
    # left alone, an attribute or local variable of that name, a string other than a docstring
    # such as an `__all__` entry or a string annotation) keeps it. The count needs every
    # statement visited: this codemod must have no stage-1 site function (candidates.SITES).
    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if updated_node.module is None or updated_node.relative or isinstance(updated_node.names, cst.ImportStar):
            return updated_node
        module = _cst.dotted_name(updated_node.module)
        if module in VARIABLE_MODULES:
            for alias in updated_node.names:
                if _cst.dotted_name(alias.name) == "Variable":
                    asname = _cst.dotted_name(alias.asname.name) if alias.asname else None
                    self._imports[alias] = (updated_node, module, asname)
                    self._import_originals[id(updated_node)] = original_node
        return updated_node

    def _aliases_in(
        self, module: cst.Module, aliases: dict[cst.ImportAlias, cst.ImportFrom]
    ) -> dict[cst.ImportAlias, cst.ImportFrom]:
        """``aliases`` as they are in ``module``: a statement in which nothing was rewritten is
        the original object there, not libcst's copy (``Codemod.on_leave``), so an import in it
        is the original one, its aliases at the same places."""
        present = {id(n) for n in _cst.walk_statements(module) if isinstance(n, cst.ImportFrom)}
        found: dict[cst.ImportAlias, cst.ImportFrom] = {}
        for alias, statement in aliases.items():
            if id(statement) not in present:
                original = self._import_originals[id(statement)]
                alias = original.names[list(statement.names).index(alias)]  # type: ignore[index,arg-type]
                statement = original
            found[alias] = statement
        return found

    def visit_Name(self, node: cst.Name) -> None:
        self._names[node.value] += 1

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._strings.append(node)

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.SimpleString):
            self._docstrings.add(id(node.value))

    def _unused(self, found: tuple[cst.ImportFrom, str, str | None]) -> bool:
        """Whether the name an import of ``Variable`` binds is spelt nowhere but in that import
        (and the imports of ``Variable`` binding the same name) after the rewrite."""
        bound = found[2] or "Variable"
        in_imports = sum(1 for _, _, asname in self._imports.values() if (asname or "Variable") == bound)
        if self._names[bound] - in_imports - self._removed_names[bound] > 0:
            return False
        return not any(bound in s.value for s in self._strings if id(s) not in self._docstrings)

    # -- where a replacement needs parentheses --------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._tight.add(id(node.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._tight.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        self._tight.add(id(node.func))

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        self._tight.add(id(node.expression))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._tight.update((id(node.left), id(node.right)))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._tight.add(id(node.left))
        self._tight.update(id(c.comparator) for c in node.comparisons)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._tight.update((id(node.left), id(node.right)))
        self._bool_operands.update((id(node.left), id(node.right)))

    def visit_Await(self, node: cst.Await) -> None:
        self._tight.add(id(node.expression))

    # -- the rewrite ----------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self._is_isinstance_variable(original_node):
            if not self.report(original_node.args[1].value, "`isinstance(x, Variable)`: `Variable` is `torch.Tensor` since PyTorch 0.4: use `torch.Tensor`"):
                return updated_node
            self._count_removed(original_node.args[1].value)
            self._rewrote = True
            args = list(updated_node.args)
            args[1] = args[1].with_changes(value=self._torch_tensor())
            return updated_node.with_changes(args=args)
        if not self._is_variable(original_node.func):
            return updated_node
        problem = _unsupported(original_node)
        if problem:
            self.report(original_node, f"`Variable(...)` {problem}: remove the wrapper by hand", fixable=False)
            return updated_node
        data = updated_node.args[0].value
        requires = _cst.keyword_arg(updated_node, "requires_grad")
        volatile = _cst.keyword_arg(original_node, "volatile")
        requires_value = None if requires is None or m.matches(requires.value, m.Name("False")) else requires.value
        fresh = self._is_fresh(original_node.args[0].value) or self._float_list_tensor(original_node.args[0].value)

        data_of = _data_receiver(data) if _data_receiver(original_node.args[0].value) is not None else None
        if requires_value is None and data_of is not None:
            new: cst.BaseExpression = cst.Call(func=cst.Attribute(value=_atom(data_of), attr=cst.Name("detach")))
            shown = "`.detach()`"
        elif requires_value is None:
            new = data
            shown = "the tensor itself"
        elif self._float_list_tensor(original_node.args[0].value):
            literal = cst.ensure_type(data, cst.Call)
            new = _cst.add_keyword_arg(
                literal.with_changes(func=cst.Attribute(value=cst.Name("torch"), attr=cst.Name("tensor"))),
                "requires_grad", requires_value,
            )
            AddImportsVisitor.add_needed_import(self.context, "torch")
            shown = "`torch.tensor(..., requires_grad=...)`"
        elif fresh and self._factory_taking_requires_grad(original_node.args[0].value):
            new = _cst.add_keyword_arg(cst.ensure_type(data, cst.Call), "requires_grad", requires_value)
            shown = "`requires_grad=` on the factory call"
        else:
            args = [] if m.matches(requires_value, m.Name("True")) else [cst.Arg(requires_value)]
            new = cst.Call(func=cst.Attribute(value=_atom(data), attr=cst.Name("requires_grad_")), args=args)
            shown = "`.requires_grad_()`"
        message = f"`Variable(...)` is a deprecated wrapper since PyTorch 0.4: use {shown}"
        if volatile is not None and m.matches(volatile.value, m.Name("True")):
            message += "; `volatile=True` has no effect: run inference under `with torch.no_grad():`"
        if not fresh:
            message += " (unsafe: `Variable` also detached the tensor from the autograd graph)"
        if not self.report(original_node, message, safe=None if fresh else False):
            return updated_node
        self._rewrote = True
        if isinstance(original_node.func, cst.Name):
            self._removed_names[original_node.func.value] += 1
        if id(original_node) in self._tight:
            new = _atom(new)
        if isinstance(new, (cst.NamedExpr, cst.Yield)) and not new.lpar:
            new = _atom(new, force=True)
        if updated_node.lpar:
            new = new.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        return new

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        """``x = Variable(x)`` became ``x = x``: the line goes, unless a comment is attached to it
        or it is the only statement of its block."""
        if not (_is_self_assignment(updated_node) and not _is_self_assignment(original_node)):
            return updated_node
        if _has_comment(updated_node) or self._only_statement(original_node):
            return updated_node
        return cst.RemoveFromParent()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if len(node.body) == 1:
            self._only_statements.add(id(node.body[0]))

    def _only_statement(self, node: cst.SimpleStatementLine) -> bool:
        return id(node) in self._only_statements

    def _count_removed(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.Name):
            self._removed_names[expr.value] += 1

    def _torch_tensor(self) -> cst.Attribute:
        """``torch.Tensor``, with ``import torch`` added where the module lacks it."""
        AddImportsVisitor.add_needed_import(self.context, "torch")
        return cst.Attribute(value=cst.Name("torch"), attr=cst.Name("Tensor"))

    def _is_isinstance_variable(self, call: cst.Call) -> bool:
        """``isinstance(x, Variable)``: the builtin, two plain positional arguments."""
        return (
            isinstance(call.func, cst.Name)
            and call.func.value == "isinstance"
            and self.qualified_names(call.func) == {"builtins.isinstance"}
            and len(call.args) == 2
            and all(a.keyword is None and not a.star for a in call.args)
            and self._is_variable(call.args[1].value)
        )

    def _type_of(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """``h`` for ``type(h)`` (the builtin, one plain argument)."""
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "type"):
            return None
        if self.qualified_names(expr.func) != {"builtins.type"} or len(expr.args) != 1:
            return None
        arg = expr.args[0]
        return arg.value if arg.keyword is None and not arg.star else None

    def leave_Comparison(self, original_node: cst.Comparison, updated_node: cst.Comparison) -> cst.BaseExpression:
        """``type(h) == Variable`` / ``type(h) is Variable`` (always False since PyTorch 0.4)
        → ``isinstance(h, torch.Tensor)``; ``!=`` / ``is not`` → ``not isinstance(...)``."""
        if len(original_node.comparisons) != 1:
            return updated_node
        target = original_node.comparisons[0]
        operator = target.operator
        negated = isinstance(operator, (cst.NotEqual, cst.IsNot))
        if not isinstance(operator, (cst.Equal, cst.Is, cst.NotEqual, cst.IsNot)):
            return updated_node
        if not (self._type_of(original_node.left) is not None and self._is_variable(target.comparator)):
            return updated_node
        message = (
            "`type(x) == Variable` is always False since PyTorch 0.4 (`Variable` is no tensor's type):"
            " use `isinstance(x, torch.Tensor)`"
        )
        if not self.report(original_node, message):
            return updated_node
        self._count_removed(target.comparator)
        self._rewrote = True
        subject = self._type_of(cst.ensure_type(updated_node.left, cst.BaseExpression))
        assert subject is not None
        new: cst.BaseExpression = cst.Call(
            func=cst.Name("isinstance"), args=[cst.Arg(subject, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(self._torch_tensor())]
        )
        if negated:
            new = cst.UnaryOperation(operator=cst.Not(), expression=new)
            if id(original_node) in self._tight and id(original_node) not in self._bool_operands:
                new = _atom(new, force=True)
        if updated_node.lpar:
            new = new.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        return new

    def _float_list_tensor(self, expr: cst.BaseExpression) -> bool:
        """``torch.Tensor([1.0, -2.5])``: a flat list of float literals, which ``torch.tensor``
        gives the same default floating dtype."""
        if not (isinstance(expr, cst.Call) and len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star):
            return False
        if self.qualified_names(expr.func) != {"torch.Tensor"}:
            return False
        value = expr.args[0].value
        elements = value.elements if isinstance(value, cst.List) else ()
        return bool(elements) and all(isinstance(e, cst.Element) and _is_float(e.value) for e in elements)

    def _is_variable(self, func: cst.BaseExpression) -> bool:
        """``func`` is ``torch.autograd.Variable`` whatever binding reaches it: a name that may
        also be a lambda, a class or a parameter of that spelling is not."""
        qualified = self.qualified_names(func, ending_in=VARIABLE_NAME)
        return bool(qualified) and qualified <= VARIABLE

    # -- evidence ---------------------------------------------------------------------------
    def _is_fresh(self, expr: cst.BaseExpression) -> bool:
        """A new tensor that does not require grad and that nothing else refers to."""
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "data"
        if isinstance(expr, cst.BinaryOperation):
            return (self._is_fresh(expr.left) and _is_number(expr.right)) or (
                _is_number(expr.left) and self._is_fresh(expr.right)
            )
        if not isinstance(expr, cst.Call) or any(a.star for a in expr.args):
            return False
        if _cst.keyword_arg(expr, "requires_grad") is not None:
            return False
        qualified = self.qualified_names(expr.func)
        if any(q.startswith("torch.") and q.count(".") == 1 and q[6:] in FRESH_FUNCTIONS for q in qualified):
            return True
        legacy = _cst.legacy_tensor_type(qualified)
        if legacy is not None:
            args = list(expr.args)
            return all(a.keyword is None for a in args) and (
                (len(args) == 1 and isinstance(args[0].value, (cst.List, cst.Tuple)))
                or all(isinstance(a.value, cst.Integer) for a in args)
            )
        if isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method == "detach" and not expr.args:
                return True
            if method in NO_GRAD_KEEPING_METHODS:
                return self._is_fresh(expr.func.value)
        return False

    def _factory_taking_requires_grad(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        return any(
            q.startswith("torch.") and q.count(".") == 1 and q[6:] in FACTORIES_WITH_REQUIRES_GRAD
            for q in self.qualified_names(expr.func)
        )


def _unsupported(call: cst.Call) -> str | None:
    if any(a.star for a in call.args):
        return "with `*args`/`**kwargs`"
    positional = _cst.positional_args(call)
    if len(positional) != 1 or call.args[0].keyword is not None:
        return "without exactly one positional argument"
    for arg in call.args[1:]:
        keyword = arg.keyword.value if arg.keyword else ""
        if keyword not in ("requires_grad", "volatile"):
            return f"with `{keyword}=`"
        if keyword == "volatile" and not m.matches(arg.value, m.Name("True") | m.Name("False")):
            return "with a `volatile=` that is not `True`/`False`"
    return None


def _is_self_assignment(line: cst.SimpleStatementLine) -> bool:
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


def _has_comment(line: cst.SimpleStatementLine) -> bool:
    return line.trailing_whitespace.comment is not None or any(
        empty.comment is not None for empty in line.leading_lines
    )


def _data_receiver(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``h`` for ``h.data``."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data" and not expr.lpar:
        return expr.value
    return None


def _is_float(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _is_float(expr.expression)
    return isinstance(expr, cst.Float)


def _is_number(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation):
        return _is_number(expr.expression)
    return isinstance(expr, (cst.Integer, cst.Float))


def _atom(expr: cst.BaseExpression, force: bool = False) -> cst.BaseExpression:
    """``expr`` in parentheses unless it can stand as a receiver/operand as it is."""
    if expr.lpar or (isinstance(expr, ATOMS) and not force):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

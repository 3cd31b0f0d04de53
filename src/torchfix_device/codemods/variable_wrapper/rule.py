from __future__ import annotations

import ast
from typing import Iterator, Sequence

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from torchfix_device.syntax import imports
from torchfix_device.syntax import nodes
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts import values as facts_values
from torchfix_device.codemods.variable_wrapper.exact_detach import unwrapped_without_evidence
from torchfix_device.facts.grad_changes import changed_in_place, refill_line
from torchfix_device.facts.grad import GradEvidence
from torchfix_device.codemods.variable_wrapper.no_grad_loops import loops_to_wrap, under_no_grad, volatile_note
from torchfix_device.facts.kinds import is_tensor
from torchfix_device.codemods.variable_wrapper.import_removal import VariableImportTracking, site_lines
from torchfix_device.codemods.variable_wrapper.star_doubts import StarImportReview, spelt_variable
from torchfix_device.codemods.variable_wrapper.shapes import (
    atom, attribute_self_assignment, data_receiver, is_self_assignment, is_true, literal_data,
    method_call, requires_grad_arg, unsupported,
)

VARIABLE = {"torch.autograd.Variable", "torch.autograd.variable.Variable"}
VARIABLE_NAME = frozenset({"Variable"})

# torch functions that take ``requires_grad=`` and make a new tensor from no tensor's graph.
FACTORIES_WITH_REQUIRES_GRAD = {
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
    "linspace", "logspace", "eye", "tensor", "zeros_like", "ones_like", "empty_like",
    "full_like", "rand_like", "randn_like", "randint_like",
}


class VariableWrapper(VariableImportTracking, StarImportReview, Codemod):
    """
    ## What it does
    Removes the `torch.autograd.Variable` wrapper, however it was imported
    (`from torch.autograd import Variable`, `torch.autograd.Variable`):
    `Variable(x)` → `x` (`x.detach()` where nothing shows that `x` cannot require grad),
    `Variable(torch.randn(3), requires_grad=True)` →
    `torch.randn(3, requires_grad=True)`, `Variable(w, requires_grad=True)` →
    `w.detach().requires_grad_()` (`w.requires_grad_()` where `w` is a new tensor nobody else
    holds), `Variable(torch.Tensor([1, 2]), requires_grad=True)` →
    `torch.tensor([1.0, 2.0], requires_grad=True)`, `Variable(h.data)` → `h.detach()` (where
    `h` is shown to be a tensor; else the exact `h.data.detach()`);
    `Variable(a + b).cuda()` becomes `(a + b).cuda()`. `volatile=` (no effect since PyTorch 0.4)
    is dropped; where `volatile=True` is given in a loop that does not train, the loop is put
    under `with torch.no_grad():`, which is what `volatile` did. `isinstance(x, Variable)` →
    `isinstance(x, torch.Tensor)`, and `type(h) == Variable` / `type(h) is Variable` →
    `isinstance(h, torch.Tensor)` (`!=` / `is not` → `not isinstance(...)`), adding
    `import torch` where it is missing.
    `Variable` counts only where every binding that reaches the name is
    `torch.autograd.Variable`: a module-level `Variable = lambda ...`, a class or a parameter
    named `Variable`, or a rebinding after the import leave it alone.
    The `Variable` import is removed once the name it binds appears nowhere else (docstrings
    aside), and so is a line `x = Variable(x)` (or `a, b = Variable(a), Variable(b)`, or a safe
    `self.a = Variable(self.a)`) that would become `x = x` (its comments above move to the next
    statement; kept when a comment follows it on its line, or it is its block's only statement,
    except in an `else:` that then goes).

    ## Why is this bad?
    Since PyTorch 0.4 `Variable` and `Tensor` are the same class. `Variable(x)` is a deprecated
    wrapper that today returns `x.detach()` (a new tensor cut from the autograd graph), and
    `volatile=True` only prints `UserWarning: volatile was removed and now has no effect`: an
    evaluation loop that relied on it builds an autograd graph it never uses.
    `type(h) == Variable` is always False: the branch meant for tensors is never taken.

    ## Example
    ```python
    from torch.autograd import Variable

    for images, labels in train_loader:  # a torch.utils.data.DataLoader
        images, labels = Variable(images), Variable(labels)
        ...
    w = Variable(torch.zeros(dim, 1), requires_grad=True)
    hidden = Variable(h.data)
    if type(hidden) == Variable:  # always False since PyTorch 0.4
        ...
    for images, labels in test_loader:
        outputs = model(Variable(images, volatile=True))
    ```

    ## Use instead
    ```python
    for images, labels in train_loader:
        ...
    w = torch.zeros(dim, 1, requires_grad=True)
    hidden = h.detach()
    if isinstance(hidden, torch.Tensor):
        ...
    with torch.no_grad():
        for images, labels in test_loader:
            outputs = model(images)
    ```

    ## Not rewritten
    Calls with `*args`/`**kwargs`, `data=` by keyword, more than two positional arguments (the
    second is `requires_grad`, in PyTorch 0.3 as since: `Variable(x, flag)` is
    `Variable(x, requires_grad=flag)`; a third was `volatile`), other keywords, or a `volatile=`
    whose value runs code: reported for manual review.
    `Variable` used as another value (`issubclass(T, Variable)`, a tuple in `isinstance`) is left
    alone, and so is a `Variable` that may be anything else (a lambda, a class or a parameter of
    that name). One bound by a star import counts where the run proves it is torch's (`from net
    import *` followed across files); where not (a module not found, `from torch.autograd import *`,
    a computed `__all__`, a conditional binding) it is reported. A loop with `volatile=True`
    inputs that also trains (`.backward()`, `.step()`, `.zero_grad()`, `torch.autograd.grad`),
    holds a `yield` or `await`, or already runs under `torch.no_grad()` is not wrapped (the
    message says which).

    ## Fix safety
    `Variable(x)` → `x` is safe where `x` provably cannot require grad, so the `.detach()` that
    `Variable` does is a no-op, and its result is not changed in place later (`.requires_grad_()`,
    `.requires_grad = True`, an in-place change by a tensor that may require grad, or of its
    shape: `.unsqueeze_()`, `.resize_()`; an attribute set on it) where it is `x` itself or a
    view of it (`Variable(x).view(3)`, `Variable(x)[i]`); nor is `x`'s shape changed in place.
    The evidence, from this file alone: factories
    (`torch.zeros`, `torch.from_numpy`, `x.new(2, 3)`), `x.data` (of a tensor, in a file that packs
    sequences: a `PackedSequence`'s may require grad), `x.detach()`, integer and
    boolean results, NumPy values, torch functions, tensor methods and operators of such values
    (`torch.as_tensor(a)` and `torch.asarray(a)` too: they require grad only where `a` does;
    `x.normal_(m, s)` and the other random fills take numbers only, so only `x` counts; a
    legacy type alias `T = torch.cuda.FloatTensor if c else torch.FloatTensor` is a legacy
    constructor);
    a batch of a `torch.utils.data.DataLoader` without a `collate_fn` over a `torchvision`
    data set with `torchvision.transforms` (not `Lambda`) or a `TensorDataset` of such tensors;
    an attribute of such a data set; `opt.size` of `opt = parser.parse_args()` where `--size`
    has a builtin `type=` and a literal default, and `opt.size` is never set nor `opt` passed on;
    an attribute of `self` every assignment of which in its class is such a value (and every
    in-place change of an attribute of that name, through any receiver:
    `model.w.requires_grad_()` counts for `self.w`); a name every binding of which that may
    reach the read (flow of the function or module, libcst's bindings) is one, and no change
    in place by a value that may require grad may reach the object read through it.
    `self.a = Variable(self.a)` keeps, unwrapped, the object `self.a` held rather than a copy
    nobody else holds: safe only where that object was made by a torch factory earlier in the
    same block and only filled since (`self.a[i] = v` lines, `for` loops over a `range` of them,
    calling no code of the class), so nothing else holds it either; `self.a = self.a` then goes.
    A parameter, a project function's result, a data set of the project's own is no evidence:
    there the safe fix keeps the detach, `x.detach()`, exactly what `Variable` did, and `x` is
    the unsafe fix; the message says what is missing. Only the unsafe fix is offered where
    `.detach()` could differ: a `try` catching `TypeError` around it (a non-tensor), a file that
    defines a tensor subclass (`.detach()` keeps its class). Not seen: code in other files
    changing a global or an attribute, and a callee that makes its argument require grad in
    place (`Variable(x)` passed to it gave it a new object).
    `Variable(x, requires_grad=True)` is a new leaf sharing `x`'s storage, exactly
    `x.detach().requires_grad_()` (safe); `x.requires_grad_()` is used only where `x` is a new
    tensor nobody else holds, `torch.tensor([...])` only for number literals (integers written as
    floats, so the dtype stays `torch.Tensor`'s default one). `Variable(h.data)` → `h.detach()`
    gives the same values and storage without grad where `h` is a tensor (a guard such as
    `isinstance(h, Variable)`, or torch made it); else `h.data.detach()`, the same for any `h`. `isinstance(x, Variable)` is
    `isinstance(x, torch.Tensor)` on PyTorch ≥ 0.4. Two rewrites change what runs on PyTorch 2.x
    on purpose, back to what the 0.3 program meant: `type(h) == Variable` (always False today)
    takes the branch that was meant, and a loop under `torch.no_grad()` gives the same values
    with no graph, as `volatile=True` did (the loop's results do not require grad).
    """

    code = "TFD009"
    name = "variable-wrapper"
    summary = "`torch.autograd.Variable` is deprecated: since PyTorch 0.4 it only detaches; use the tensor"
    safe = True
    triggers = ("Variable",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """A call that may be ``torch.autograd.Variable(...)``."""
        # ``isinstance(x, Variable)`` and ``type(x) == Variable`` use ``Variable`` as a value, not
        # a call: the name spelt with a torch import is all that is needed.
        return facts.torch_imported and "Variable" in facts.names

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST] | None:
        return site_lines(facts)

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._tight: set[int] = set()
        self._bool_operands: set[int] = set()
        """``id`` of the operands of ``and``/``or``, where ``not x`` needs no parentheses."""
        self._only_statements: set[int] = set()
        self._rewrote = False
        self.start_import_tracking()
        self._grad_evidence: GradEvidence | None = None
        self._wrap: tuple[dict[int, cst.For | cst.While], dict[int, str]] | None = None
        self._volatile_spelt = False
        self._carried = nodes.NodeSet()
        """The ``x = x`` lines left by an unwrap that go once their comments moved."""
        self._no_ops = nodes.NodeSet()
        """The ``x = x`` lines left alone in their block (an ``else:`` holding only them goes)."""
        self._refills: set[int] = set()
        """``id`` of the original ``self.a = Variable(self.a)`` lines whose ``self.a = self.a`` goes."""
        return None

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self._carried:
            updated_node = updated_node.with_changes(body=self._carry_comments(updated_node.body))
        if self._rewrote:
            updated_node = self.without_unused_imports(updated_node)
        return super().leave_Module(original_node, updated_node)

    # -- where a replacement needs parentheses --------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._tight.add(id(node.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._tight.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        self._tight.add(id(node.func))
        if not self._volatile_spelt and any(a.keyword is not None and a.keyword.value == "volatile" for a in node.args):
            self._volatile_spelt = True  # a loop left after this may hold a `volatile=` site

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
            message = "`isinstance(x, Variable)`: `Variable` is `torch.Tensor` since PyTorch 0.4: use `torch.Tensor`"
            if self._torch_doubt(original_node, message, original_node.args[1].value):
                return updated_node
            if not self.report(original_node.args[1].value, message):
                return updated_node
            self._count_removed(original_node.args[1].value)
            self._rewrote = True
            args = list(updated_node.args)
            args[1] = args[1].with_changes(value=self._torch_tensor())
            return updated_node.with_changes(args=args)
        if not self._is_variable(original_node.func):
            if self._is_isinstance_variable(original_node, spelt_only=True):
                self._star_review(original_node.args[1].value, "`isinstance(x, Variable)`")
            else:
                self._star_review(original_node.func, "`Variable(...)`")
            return updated_node
        problem = unsupported(original_node)
        if problem:
            self.report(original_node, f"`Variable(...)` {problem}: remove the wrapper by hand", fixable=False)
            return updated_node
        requires = requires_grad_arg(updated_node)
        requires_value = None if requires is None or m.matches(requires.value, m.Name("False")) else requires.value
        new, shown, why_unsafe = self._unwrapped(original_node, updated_node, requires_value)
        message = f"`Variable(...)` is a deprecated wrapper since PyTorch 0.4: use {shown}"
        message += volatile_note(original_node, self._evidence().parent, self._loops)
        if why_unsafe is not None:
            message += f"; unsafe: `Variable` also detached it from the autograd graph, and {why_unsafe}"
        if not self.report(original_node, message, safe=False if why_unsafe else None):
            return updated_node
        self._rewrote = True
        if isinstance(original_node.func, cst.Name):
            self._removed_names[original_node.func.value] += 1
        if id(original_node) in self._tight:
            new = atom(new)
        if isinstance(new, (cst.NamedExpr, cst.Yield)) and not new.lpar:
            new = atom(new, force=True)
        if updated_node.lpar:
            new = new.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        return new

    def _unwrapped(
        self, original: cst.Call, updated: cst.Call, requires: cst.BaseExpression | None
    ) -> tuple[cst.BaseExpression, str, str | None]:
        """The replacement of ``Variable(x, ...)``, how the message shows it, and why it is
        unsafe (None: it is safe)."""
        given = original.args[0].value
        data = updated.args[0].value
        evidence = self._evidence()
        if requires is None:
            receiver = data_receiver(data) if data_receiver(given) is not None else None
            if receiver is not None and is_tensor(evidence.values, cst.ensure_type(given, cst.Attribute).value):
                return method_call(receiver, ("detach", [])), "`.detach()`", None
            if receiver is not None:  # exactly what ``Variable`` did, for any object with a ``.data``
                shown = f"`.data.detach()` (`{nodes.code_of(receiver)}.detach()` only where it is a tensor: nothing here shows it is)"
                return method_call(data, ("detach", [])), shown, None
            why = evidence.missing(given)
            if why is None and not evidence.fresh(given):
                why = changed_in_place(evidence, original)
            line = refill_line(evidence, original) if why is None and isinstance(given, cst.Attribute) else None
            if line is not None:
                self._refills.add(id(line))
            if why is None:
                return data, "the tensor itself", None
            return unwrapped_without_evidence(self, original, data, why)
        listed = self._default_tensor_of_list(given) and self.star_doubt(original, "torch") is None  # `torch` needed
        literal = literal_data(given.args[0].value) if listed else None
        if literal is not None:
            AddImportsVisitor.add_needed_import(self.context, "torch")
            call = cst.parse_expression("torch.tensor(x)").with_changes(args=[cst.Arg(literal)])
            return nodes.add_keyword_arg(call, "requires_grad", requires), "`torch.tensor(..., requires_grad=...)`", None
        fresh = evidence.fresh(given) and evidence.missing(given) is None
        if fresh and self._factory_taking_requires_grad(given):
            return nodes.add_keyword_arg(cst.ensure_type(data, cst.Call), "requires_grad", requires), "`requires_grad=` on the factory call", None
        args = [] if is_true(requires) else [cst.Arg(requires)]
        if fresh:
            return method_call(data, ("requires_grad_", args)), "`.requires_grad_()`", None
        # ``Variable(x, requires_grad=True)`` is a new leaf sharing ``x``'s storage: exactly this.
        return method_call(data, ("detach", []), ("requires_grad_", args)), "`.detach().requires_grad_()`", None

    # -- `volatile=True` in a loop: the loop under `torch.no_grad()` -----------------------
    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.BaseStatement:
        return self._wrap_loop(original_node, updated_node)

    def leave_While(self, original_node: cst.While, updated_node: cst.While) -> cst.BaseStatement:
        return self._wrap_loop(original_node, updated_node)

    def _wrap_loop(self, original: cst.For | cst.While, updated: cst.For | cst.While) -> cst.BaseStatement:
        if not self._volatile_spelt or id(original) not in self._loops()[0]:
            return updated
        message = (
            "`volatile=True` inputs: in PyTorch 0.3 this loop built no autograd graph; since 0.4 only "
            "`with torch.no_grad():` does that: run the loop under it"
        )
        if not self.report(original, message):
            return updated
        AddImportsVisitor.add_needed_import(self.context, "torch")
        return under_no_grad(updated)

    def _loops(self) -> tuple[dict[int, cst.For | cst.While], dict[int, str]]:
        if self._wrap is None:
            evidence = self._evidence()
            torch_rebound = self.star_doubt(self.visited_module.body[0], "torch") is not None  # by a star import
            self._wrap = ({}, {}) if torch_rebound else loops_to_wrap(self.visited_module, evidence.parent, self._names_anywhere, self._is_volatile_variable)
        return self._wrap

    def _is_volatile_variable(self, call: cst.Call) -> bool:
        names = self._names_anywhere(call.func)
        volatile = nodes.keyword_arg(call, "volatile")
        return bool(names) and names <= VARIABLE and volatile is not None and is_true(volatile.value) and unsupported(call) is None

    def _evidence(self) -> GradEvidence:
        if self._grad_evidence is None:
            self._grad_evidence = GradEvidence(facts_values.of(self))
        return self._grad_evidence

    def _names_anywhere(self, node: cst.CSTNode) -> set[str]:
        """libcst's qualified names of any node of the module (the engine's own answers hold
        for the statement being visited only)."""
        return facts_values.of(self).names(node)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        """``x = Variable(x)`` became ``x = x`` (or ``self.a = Variable(self.a)``, shown to hold
        nothing but a new object, ``self.a = self.a``): the line goes, unless a comment follows
        it on its line or it is the only statement of its block; the comments above it go to the
        statement after it (kept where there is none)."""
        refilled = id(original_node) in self._refills and attribute_self_assignment(updated_node)
        if not (refilled or (is_self_assignment(updated_node) and not is_self_assignment(original_node))):
            return updated_node
        if updated_node.trailing_whitespace.comment is not None:
            return updated_node
        if self._only_statement(original_node):
            if not nodes.has_comment(updated_node):
                self._no_ops.add(updated_node)  # an `else:` holding only it goes (leave_If)
            return updated_node
        if nodes.has_comment(updated_node):
            self._carried.add(updated_node)
            return updated_node
        return cst.RemoveFromParent()

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        """``else:`` left holding nothing but ``x = x`` (or emptied) by unwraps goes."""
        orelse = updated_node.orelse
        if not (isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock)):
            return updated_node
        if orelse.body.header.comment is not None or any(line.comment for line in orelse.leading_lines):
            return updated_node
        if all(statement in self._no_ops for statement in orelse.body.body):
            return updated_node.with_changes(orelse=None)  # also when every statement was removed
        return updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if self._carried and any(statement in self._carried for statement in updated_node.body):
            return updated_node.with_changes(body=self._carry_comments(updated_node.body))
        return updated_node

    def _carry_comments(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """``body`` without the self-assignments marked to go, their comments above the next
        statement (one that is no import, which the import edits must find as it is)."""
        kept: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for index, statement in enumerate(body):
            following = body[index + 1] if index + 1 < len(body) else None
            if statement in self._carried and following is not None and not imports.is_import_statement(following):
                carried.extend(cst.ensure_type(statement, cst.SimpleStatementLine).leading_lines)
                continue
            if carried:
                statement = statement.with_changes(leading_lines=[*carried, *statement.leading_lines])
                carried = []
            kept.append(statement)
        return kept

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

    def _is_isinstance_variable(self, call: cst.Call, *, spelt_only: bool = False) -> bool:
        """``isinstance(x, Variable)``: the builtin, two plain positional arguments
        (``spelt_only``: the second one spelt ``Variable``, whatever it is)."""
        return (
            isinstance(call.func, cst.Name)
            and call.func.value == "isinstance"
            and self.qualified_names(call.func) == {"builtins.isinstance"}
            and len(call.args) == 2
            and all(a.keyword is None and not a.star for a in call.args)
            and (spelt_variable(call.args[1].value) if spelt_only else self._is_variable(call.args[1].value))
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
        if self._type_of(original_node.left) is None:
            return updated_node
        if not self._is_variable(target.comparator):
            self._star_review(target.comparator, "`type(x) == Variable`")
            return updated_node
        message = (
            "`type(x) == Variable` is always False since PyTorch 0.4 (`Variable` is no tensor's type):"
            " use `isinstance(x, torch.Tensor)`"
        )
        if self._torch_doubt(original_node, message) or not self.report(original_node, message):
            return updated_node
        self._count_removed(target.comparator)
        self._rewrote = True
        # ``type(h)`` was checked on the original node (names resolve there); the updated one
        # has the same shape, with ``h`` possibly rewritten inside
        subject = cst.ensure_type(updated_node.left, cst.Call).args[0].value
        new: cst.BaseExpression = cst.Call(
            func=cst.Name("isinstance"), args=[cst.Arg(subject, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(self._torch_tensor())]
        )
        if negated:
            new = cst.UnaryOperation(operator=cst.Not(), expression=new)
            if id(original_node) in self._tight and id(original_node) not in self._bool_operands:
                new = atom(new, force=True)
        if updated_node.lpar:
            new = new.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        return new

    def _default_tensor_of_list(self, expr: cst.BaseExpression) -> bool:
        """``torch.Tensor([...])``: the default floating dtype, whatever the list holds."""
        return (
            isinstance(expr, cst.Call) and len(expr.args) == 1 and expr.args[0].keyword is None
            and not expr.args[0].star and self.qualified_names(expr.func) == {"torch.Tensor"}
        )

    def _is_variable(self, func: cst.BaseExpression) -> bool:
        """``func`` is ``torch.autograd.Variable`` whatever binding reaches it: a name that may
        also be a lambda, a class or a parameter of that spelling is not."""
        qualified = self.qualified_names(func, ending_in=VARIABLE_NAME)
        return bool(qualified) and qualified <= VARIABLE

    def _factory_taking_requires_grad(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        return any(
            q.startswith("torch.") and q.count(".") == 1 and q[6:] in FACTORIES_WITH_REQUIRES_GRAD
            for q in self.qualified_names(expr.func)
        )

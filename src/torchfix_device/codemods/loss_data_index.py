from __future__ import annotations

import ast
import libcst as cst
import libcst.matchers as m
from libcst.metadata import Assignment, FunctionScope

from torchfix_device import _cst
from torchfix_device.codemod import Codemod
from torchfix_device.candidates import FileFacts

LOSS_FUNCTIONS = {
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "margin_ranking_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss",
}
FULL_REDUCTIONS = {"sum", "mean", "prod", "norm", "std", "var", "max", "min", "all", "any", "dot"}
NOT_SCALAR_ATTRS = {"weight", "bias", "grad", "data"}
NOT_SCALAR_LOSSES = {"AdaptiveLogSoftmaxWithLoss"}  # returns (output, loss)
MAX_LOSS_POSITIONALS = 3
"""``F.*_loss`` positional arguments that cannot be ``reduce``/``reduction`` (the earliest is the
fourth, ``F.mse_loss(a, b, size_average, reduce)``)."""

DATA_ZERO = m.Subscript(
    value=m.Attribute(attr=m.Name("data")),
    slice=[m.SubscriptElement(slice=m.Index(value=m.Integer("0")))],
)


class LossDataIndex(Codemod):
    """
    ## What it does
    Rewrites `x.data[0]` to `x.item()` where the code shows that `x` is a scalar: the result
    of a torch loss with its default reduction (`F.cross_entropy(...)`, `F.*_loss(...)`, an
    `nn.*Loss()` instance bound in scope, or set as `self.x = nn.XLoss()` in this class's
    `__init__` and assigned nothing else), a full reduction (`.sum()`, `.mean()`, `.max()`, ...
    with no dimension), a name every assignment of which is one of those, or a name with one
    binding in its function on which `.backward()` is called with no argument.

    ## Why is this bad?
    Before PyTorch 0.4 a loss was a 1-element tensor and `loss.data[0]` read its value. Since 0.4
    a loss is 0-dimensional, and indexing it raises `IndexError: invalid index of a 0-dim tensor.
    Use tensor.item()`. `.item()` returns the Python number, as the old code meant.

    ## Example
    ```python
    loss = criterion(output, target)
    total_loss += loss.data[0]
    ```

    ## Use instead
    ```python
    loss = criterion(output, target)
    total_loss += loss.item()
    ```

    ## Not rewritten
    `images.data[0]` (the first sample of a batch) and `layer.weight.data[0]` are real indexing
    and stay. A loss built with `reduction="none"` or `reduce=False` is not a scalar and stays.
    A name is no evidence: a `criterion` parameter, a `self.criterion` of another class or
    rebound elsewhere, `reduce=False` passed by position, a parameter named `loss`,
    `x.sum(1).data[0]`. Where the code does not show that `x` is a scalar, it is left as it is
    and `check` reports it for manual review, naming the evidence that is missing.

    ## Fix safety
    Safe: the rewrite is only made where `x` is a 0-dim tensor, on which `x.data[0]` raises
    `IndexError` in every PyTorch since 0.4, so no working code changes meaning.
    """

    code = "TFD006"
    name = "loss-data-index"
    summary = "`loss.data[0]` raises on 0-dim tensors since PyTorch 0.4: use `loss.item()`"
    safe = True
    triggers = (".data[",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """``x.data[0]`` (the literal integer 0)."""
        if "data" not in facts.subscripted_attrs:
            return False
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "data":
                index = node.slice
                if isinstance(index, ast.Tuple) and len(index.elts) == 1:
                    index = index.elts[0]
                if isinstance(index, ast.Constant) and type(index.value) is int and index.value == 0:
                    return True
        return False

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._values = self.device_source.assigned_values()
        return None

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        if not m.matches(original_node, DATA_ZERO):
            return updated_node
        subject = cst.ensure_type(original_node.value, cst.Attribute).value
        verdict = self._scalar_verdict(subject)
        if verdict is None:
            return updated_node  # clearly not a scalar: real indexing
        if verdict is not True:
            self.report(original_node, f"`.data[0]`: {verdict}; use `.item()` if it is a 0-dim loss", fixable=False)
            return updated_node
        if self.report(original_node, "`.data[0]` on a scalar: use `.item()`"):
            new_subject = cst.ensure_type(updated_node.value, cst.Attribute).value
            return cst.Call(func=cst.Attribute(value=new_subject, attr=cst.Name("item")))
        return updated_node

    # -- evidence ---------------------------------------------------------------------------
    def _scalar_verdict(self, subject: cst.BaseExpression) -> bool | str | None:
        """True: a scalar. None: clearly not one. A string: cannot tell, and why."""
        if isinstance(subject, cst.Call):
            if self._is_scalar_call(subject):
                return True
            return (
                f"cannot tell whether `{_cst.code_of(subject)}` is a scalar (not shown to be a torch loss "
                "with default reduction or a full reduction)"
            )
        if isinstance(subject, cst.Attribute):
            if subject.attr.value in NOT_SCALAR_ATTRS:
                return None
            return f"cannot tell whether `{_cst.code_of(subject)}` is a scalar"
        if isinstance(subject, cst.Name):
            return self._name_verdict(subject)
        return None

    def _name_verdict(self, name: cst.Name) -> bool | str:
        values = self._bound_values(name)
        if values and all(self._is_scalar_expr(v) for v in values):
            return True
        if self._backward_called(name):
            return True
        what = "it is not bound by a plain assignment here" if values is None else "not every assignment is a loss or full reduction"
        return f"cannot tell whether `{name.value}` is a scalar ({what}, and `{name.value}.backward()` is not called on it)"

    def _is_scalar_expr(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call):
            return self._is_scalar_call(value)
        if isinstance(value, cst.BinaryOperation):
            return self._is_scalar_expr(value.left) and (
                self._is_scalar_expr(value.right) or isinstance(value.right, (cst.Integer, cst.Float))
            ) or (isinstance(value.left, (cst.Integer, cst.Float)) and self._is_scalar_expr(value.right))
        return False

    def _is_scalar_call(self, call: cst.Call) -> bool:
        if _keeps_elements(call) or _cst.has_star_args(call):
            return False
        func = call.func
        if len(_cst.positional_args(call)) <= MAX_LOSS_POSITIONALS:
            for q in self.qualified_names(func):
                if q.startswith("torch.nn.functional.") and q.rsplit(".", 1)[-1] in LOSS_FUNCTIONS:
                    return True
        if isinstance(func, cst.Attribute) and func.attr.value in FULL_REDUCTIONS and not call.args:
            return True
        if isinstance(func, cst.Call):  # nn.MSELoss()(a, b)
            return self._is_loss_constructor(func)
        if isinstance(func, cst.Name):  # criterion(a, b), `criterion = nn.MSELoss()` in scope
            values = self._bound_values(func)
            return bool(values) and all(isinstance(v, cst.Call) and self._is_loss_constructor(v) for v in values)
        if isinstance(func, cst.Attribute):  # self.criterion(a, b), set in this class's __init__
            return self._is_own_loss_attribute(func)
        return False

    def _is_loss_constructor(self, call: cst.Call) -> bool:
        """``nn.XLoss(...)`` with its default (full) reduction: reduction and ``reduce`` not
        given, or not by position (``nn.MSELoss(None, False)`` keeps elements)."""
        if _keeps_elements(call) or _cst.has_star_args(call) or len(_cst.positional_args(call)) > 1:
            return False
        return any(
            q.startswith("torch.nn.") and q.endswith("Loss") and q.rsplit(".", 1)[-1] not in NOT_SCALAR_LOSSES
            for q in self.qualified_names(call.func)
        )

    def _bound_values(self, name: cst.Name) -> list[cst.BaseExpression] | None:
        """The values of every binding of ``name`` visible here; None when one is not a plain
        assignment (a parameter, a loop variable, an import, ``global``)."""
        scope = self.scope_of(name)
        if scope is None:
            return None
        values = []
        for assignment in scope[name.value]:
            if not isinstance(assignment, Assignment) or id(assignment.node) not in self._values:
                return None
            values.append(self._values[id(assignment.node)])
        return values

    def _is_own_loss_attribute(self, func: cst.Attribute) -> bool:
        """``self.x`` in a method of the class whose ``__init__`` sets ``self.x = nn.XLoss()``,
        and nothing in the file assigns any other value to an attribute named ``x``."""
        if not (self.class_stack and self.function_stack and isinstance(func.value, cst.Name)):
            return False
        cls, method = self.class_stack[-1], self.function_stack[-1]
        params = method.params.params
        if method not in cls.body.body or not params or params[0].name.value != func.value.value:
            return False
        attr = func.attr.value
        in_init = False
        for node in _cst.walk_statements(self.visited_module):
            if not isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                continue
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Attribute) and target.attr.value == attr:
                    value = node.value
                    if not (isinstance(node, cst.Assign) and isinstance(value, cst.Call) and self._is_loss_constructor(value)):
                        return False
                    in_init = in_init or self._set_in_init(cls, target)
        return in_init

    @staticmethod
    def _set_in_init(cls: cst.ClassDef, target: cst.Attribute) -> bool:
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__" and stmt.params.params:
                self_name = stmt.params.params[0].name.value
                if isinstance(target.value, cst.Name) and target.value.value == self_name:
                    if any(n is target for n in _targets_in(stmt)):
                        return True
        return False

    def _backward_called(self, name: cst.Name) -> bool:
        """``name`` has one binding, in the function it is read in, and ``name.backward()`` is
        called on it with no gradient argument (which only a one-element tensor allows)."""
        scope = self.scope_of(name)
        if not isinstance(scope, FunctionScope):
            return False
        assignments = list(scope.assignments[name.value])
        if len(assignments) != 1 or not isinstance(assignments[0], Assignment):
            return False
        for access in assignments[0].references:
            attribute = self.parent_of(access.node)
            if isinstance(attribute, cst.Attribute) and attribute.value is access.node and attribute.attr.value == "backward":
                call = self.parent_of(attribute)
                if isinstance(call, cst.Call) and call.func is attribute and not call.args:
                    return True
        return False


def _targets_in(function: cst.FunctionDef):
    for node in _cst.walk_statements(function):
        if isinstance(node, cst.Assign):
            yield from (t.target for t in node.targets)


def _keeps_elements(call: cst.Call) -> bool:
    """``reduction="none"`` / ``reduce=False``: the loss keeps one value per element."""
    reduction = _cst.keyword_arg(call, "reduction")
    if reduction is not None:
        if not isinstance(reduction.value, cst.SimpleString):
            return True  # not a literal: it may be "none"
        if reduction.value.evaluated_value == "none":
            return True
    reduce = _cst.keyword_arg(call, "reduce")
    return reduce is not None and not m.matches(reduce.value, m.Name("True"))

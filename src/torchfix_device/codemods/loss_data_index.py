from __future__ import annotations

import ast
import libcst as cst
import libcst.matchers as m
from libcst.metadata import Assignment, ScopeProvider

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

DATA_ZERO = m.Subscript(
    value=m.Attribute(attr=m.Name("data")),
    slice=[m.SubscriptElement(slice=m.Index(value=m.Integer("0")))],
)


class LossDataIndex(Codemod):
    """
    ## What it does
    Rewrites `x.data[0]` to `x.item()` where `x` is known to be a scalar: the result of a loss
    (an `nn.*Loss` instance called, an `F.*` loss function), a full reduction (`.sum()`,
    `.mean()`, `.max()`, ... with no dimension), or a name every assignment of which is one of
    those.

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
    Where the code does not show that `x` is a scalar (a function argument, a loop variable, an
    attribute), the code is left as it is and `check` reports it for manual review.

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
        self._criteria: set[str] = self._loss_module_names(node)
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
            return True if self._is_scalar_call(subject) else f"cannot tell whether `{_cst.code_of(subject)}` is a scalar"
        if isinstance(subject, cst.Attribute):
            if subject.attr.value in NOT_SCALAR_ATTRS:
                return None
            return f"cannot tell whether `{_cst.code_of(subject)}` is a scalar"
        if isinstance(subject, cst.Name):
            return self._name_verdict(subject)
        return None

    def _name_verdict(self, name: cst.Name) -> bool | str:
        try:
            scope = self.get_metadata(ScopeProvider, name)
        except KeyError:
            scope = None
        assignments = list(scope[name.value]) if scope is not None else []
        values = []
        for assignment in assignments:
            if not isinstance(assignment, Assignment) or id(assignment.node) not in self._values:
                return f"cannot tell whether `{name.value}` is a scalar (it is not bound by a plain assignment here)"
            values.append(self._values[id(assignment.node)])
        if not values:
            return f"cannot tell whether `{name.value}` is a scalar"
        if all(self._is_scalar_expr(v) for v in values):
            return True
        return f"cannot tell whether `{name.value}` is a scalar (not every assignment is a loss or reduction)"

    def _is_scalar_expr(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call):
            return self._is_scalar_call(value)
        if isinstance(value, cst.BinaryOperation):
            return self._is_scalar_expr(value.left) and (
                self._is_scalar_expr(value.right) or isinstance(value.right, (cst.Integer, cst.Float))
            ) or (isinstance(value.left, (cst.Integer, cst.Float)) and self._is_scalar_expr(value.right))
        return False

    def _is_scalar_call(self, call: cst.Call) -> bool:
        if _keeps_elements(call):
            return False
        func = call.func
        qualified = self.qualified_names(func)
        for q in qualified:
            if q.startswith("torch.nn.functional.") and q.rsplit(".", 1)[-1] in LOSS_FUNCTIONS:
                return True
        if isinstance(func, cst.Attribute) and func.attr.value in FULL_REDUCTIONS and not call.args:
            return True
        if isinstance(func, cst.Call):  # nn.MSELoss()(a, b)
            return self._is_loss_constructor(func)
        target = _cst.dotted_name(func)
        return target is not None and target in self._criteria

    def _is_loss_constructor(self, call: cst.Call) -> bool:
        if _keeps_elements(call):
            return False
        return any(q.startswith("torch.nn.") and q.endswith("Loss") for q in self.qualified_names(call.func))

    def _loss_module_names(self, module: cst.Module) -> set[str]:
        """Names (``criterion``, ``self.criterion``) bound to loss-module instances."""
        names = set()
        for node in _cst.walk_statements(module):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and self._is_loss_constructor(node.value):
                names.update(filter(None, (_cst.dotted_name(t.target) for t in node.targets)))
        return names


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

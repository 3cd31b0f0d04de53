from __future__ import annotations

import ast
from typing import Iterator
import libcst as cst
from libcst.metadata import Assignment
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter.candidates import FileFacts, in_module_forward, module_class_possible

OPERATORS: dict[type[cst.BaseAugOp], type[cst.BaseBinaryOp]] = {
    cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.ModuloAssign: cst.Modulo,
}
# Values that are certainly not tensors: a name bound only to these is a counter, not a tensor.
NOT_TENSOR_VALUES = (
    cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
    cst.FormattedString, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.DictComp,
    cst.SetComp,
)
NOT_TENSOR_CALLS = {"len", "int", "float", "str", "list", "tuple", "dict", "set", "range", "sum", "bool"}
ATOMS = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.Imaginary,
    cst.SimpleString, cst.List, cst.Dict,
)


class InplaceOpInForward(Codemod):
    """
    ## What it does
    Finds augmented assignments (`out += residual`, `x *= mask`, `-=`, `/=`, `//=`, `%=`) to a
    plain local name holding a tensor inside the `forward` method of an `nn.Module`, and rewrites
    them out of place: `out = out + residual`.

    ## Why is this bad?
    On a tensor, `+=` modifies the tensor in place. If autograd saved that tensor for the
    backward pass (the input of a `ReLU`, `sigmoid`, a `BatchNorm`, a multiplication, ...),
    `backward()` fails with `RuntimeError: one of the variables needed for gradient computation
    has been modified by an inplace operation`. The classic case is a residual block:
    torchvision's `out += identity` is followed only by a `ReLU`, which is fine; add another layer
    that saves `out` and the same line breaks training.

    ## Example
    ```python
    def forward(self, x):
        out = self.bn(self.conv(x))
        out += self.shortcut(x)
        return self.fc(torch.sigmoid(out))
    ```

    ## Use instead
    ```python
    def forward(self, x):
        out = self.bn(self.conv(x))
        out = out + self.shortcut(x)
        return self.fc(torch.sigmoid(out))
    ```

    ## Not rewritten
    Attribute and subscript targets (`self.total += x`, `out[:, 0] += b`), names bound only to
    numbers, strings or containers (counters), other methods than `forward`, functions nested
    inside `forward`, classes that are not `nn.Module`s, and the operators that do not map to an
    in-place tensor op here (`@=`, `**=`, bitwise): not reported.

    ## Fix safety
    Unsafe, applied only with `--unsafe-fixes` (otherwise reported). The tool cannot prove the
    name holds a tensor that autograd saved, and the out-of-place form differs where the code
    relied on the in-place update: another name or a view aliasing the same tensor no longer
    sees the change, `out + r` may broadcast to a larger shape or promote the dtype where
    `out += r` would have raised, and it allocates a new tensor.
    """

    code = "TFD012"
    name = "inplace-op-in-forward"
    summary = "`out += x` in `forward` modifies a tensor autograd may need: write `out = out + x`"
    safe = False
    triggers = ("forward",)

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``name op= ...`` in a module's ``forward``."""
        if not (module_class_possible(facts) and facts.augassign_to_name_in_forward):
            return
        scan = facts.scan
        for node, klass, func in facts.contexts:
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and in_module_forward(scan, klass, func):
                yield node

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._augmented = {id(n.target) for n in traversal.walk_statements(node) if isinstance(n, cst.AugAssign)}
        return None

    def leave_AugAssign(self, original_node: cst.AugAssign, updated_node: cst.AugAssign) -> cst.BaseSmallStatement:
        binary = OPERATORS.get(type(original_node.operator))
        if binary is None or not isinstance(original_node.target, cst.Name):
            return updated_node
        if not self._in_forward() or not self._holds_tensor(original_node.target):
            return updated_node
        name = original_node.target.value
        symbol = nodes.code_of(binary()).strip()
        message = f"`{name} {symbol}= ...` in `forward` modifies `{name}` in place, which breaks autograd if it was saved for backward: use `{name} = {name} {symbol} ...`"
        if not self.report(original_node, message):
            return updated_node
        value = updated_node.value
        if not value.lpar and not isinstance(value, ATOMS):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Assign(
            targets=[cst.AssignTarget(target=updated_node.target)],
            value=cst.BinaryOperation(left=cst.Name(name), operator=binary(), right=value),
            semicolon=updated_node.semicolon,
        )

    def _in_forward(self) -> bool:
        cls = self.device_source.enclosing_module_class()
        if cls is None or not self.function_stack:
            return False
        func = self.function_stack[-1]
        return func.name.value == "forward" and any(stmt is func for stmt in cls.body.body)

    def _holds_tensor(self, target: cst.Name) -> bool:
        """Every binding of the name in ``forward`` may be a tensor (a parameter other than
        ``self``, an assignment of something that is not a literal or a counter)."""
        scope = self.local_scope_of(target)
        if scope is None:
            return False
        values = self.device_source.assigned_values()
        bindings = [a for a in scope.assignments[target.value]]
        seen_value = False
        for assignment in bindings:
            if not isinstance(assignment, Assignment):
                return False
            node = assignment.node
            if isinstance(node, cst.Param):
                if node.name.value == "self":
                    return False
                seen_value = True
                continue
            value = values.get(id(node))
            if value is None or id(node) in self._augmented:
                continue  # a loop variable, a `with ... as` target: no evidence either way
            if isinstance(value, NOT_TENSOR_VALUES) or (
                isinstance(value, cst.Call) and nodes.dotted_name(value.func) in NOT_TENSOR_CALLS
            ):
                return False
            seen_value = True
        return seen_value

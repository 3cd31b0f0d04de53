from __future__ import annotations

import ast
from typing import Iterator
import libcst as cst
import libcst.matchers as m
from libcst.metadata import Assignment, PositionProvider
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.codemods.base import Codemod
from torchfix_device.facts.kinds import OWN, moves_itself
from torchfix_device.prefilter.candidates import FileFacts
from torchfix_device.devices.source import DEVICE_NAME

DEVICE_WORDS = ("device", "dev", "gpu", "cuda")


class DroppedMove(Codemod):
    """
    ## What it does
    Turns a bare statement `x.to(device)` / `x.cuda()` whose result is thrown away into
    `x = x.to(device)` / `x = x.cuda()` when `x` is a plain name.

    Names known to hold an `nn.Module` (bound to a `torch.nn` layer or a module class of the same
    file) keep the in-place form: `Module.to` moves the module itself, so nothing is lost there.

    ## Why is this bad?
    `Tensor.to()` and `Tensor.cuda()` return a moved *copy* and leave the original where it was,
    unlike `Module.to()` / `Module.cuda()`, which move the module in place. `inputs.cuda()` on a
    line of its own therefore does nothing, and the next operation fails with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!`.

    ## Example
    ```python
    for X, y in loader:
        X.to(device)
        y.to(device)
        loss = criterion(model(X), y)
    ```

    ## Use instead
    ```python
    for X, y in loader:
        X = X.to(device)
        y = y.to(device)
        loss = criterion(model(X), y)
    ```

    ## Not rewritten
    - Results already used: `X, y = X.to(device), y.to(device)`, `model.to(device)(x)`,
      comprehensions.
    - Attributes and items (`self.h.to(device)`, `batch["x"].cuda()`): assigning a plain tensor
      to an `nn.Parameter` attribute raises `TypeError`, so these are reported for manual review
      (use `self.h.data = self.h.data.to(device)` for a parameter, or register it as a buffer).
    - A loop variable that the loop body does not use afterwards (`for t in tensors:
      t.to(device)`): reassigning it would not change the list, so it is reported for manual
      review. (`for X, y in loader: X.to(device); model(X)` is rewritten: the later use then
      sees the moved tensor.)
    - `.to(...)` calls whose arguments do not look like a device (`x.to(other)` could be a dtype
      or a tensor; a `to` method of another library): left alone.

    ## Fix safety
    Safe. For a tensor the name now refers to the moved copy, which the code meant; for a module
    `Module.to` returns the module itself, so the reassignment changes nothing.
    """

    code = "TFD002"
    name = "dropped-move"
    summary = "`x.to(device)` / `x.cuda()` on its own line moves nothing: reassign the result"
    safe = True
    triggers = (".to(", ".cuda(", ".to (", ".cuda (")

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        return bool(facts.statement_call_attrs & {"cuda", "to"})

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """``x.cuda(...)`` / ``x.to(...)`` as a statement."""
        if not facts.statement_call_attrs & {"cuda", "to"}:
            return
        for node, _, _ in facts.contexts:
            if type(node) is ast.Expr and type(node.value) is ast.Call and type(node.value.func) is ast.Attribute:
                if node.value.func.attr in ("cuda", "to"):
                    yield node

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._loops: list[cst.For | None] = []
        """The enclosing ``for`` loops; None marks a function boundary."""
        return None

    def visit_For(self, node: cst.For) -> bool | None:
        self._loops.append(node)
        return None

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.BaseStatement:
        self._loops.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        super().visit_FunctionDef(node)
        self._loops.append(None)
        return None

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.CSTNode:
        self._loops.pop()
        return super().leave_FunctionDef(original_node, updated_node)

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.BaseSmallStatement:
        call = original_node.value
        if not isinstance(call, cst.Call) or not self._is_move(call):
            return updated_node
        receiver = cst.ensure_type(call.func, cst.Attribute).value
        method = cst.ensure_type(call.func, cst.Attribute).attr.value
        if isinstance(receiver, cst.Name):
            if receiver.value in ("self", "cls") or self._is_module(receiver):
                return updated_node
            doubt = moves_itself(self, receiver, call)
            if doubt is not None and doubt[0] == OWN:
                self.report(
                    original_node,
                    f"`{receiver.value}` may be a `{doubt[1]}`, which defines its own `{method}()`: it need not "
                    "return the object, so assigning the result back could replace it; move it by hand",
                    fixable=False,
                )
                return updated_node
            if self._is_loop_variable_not_used_later(receiver.value, original_node):
                self.report(
                    original_node,
                    f"`{receiver.value}.{method}(...)` result is dropped, and `{receiver.value}` is a loop "
                    "variable: reassigning it would not move the tensors it came from",
                    fixable=False,
                )
                return updated_node
            message = f"result of `{receiver.value}.{method}(...)` is dropped: assign it back"
            if doubt is not None:
                message += f"; unsafe: the run defines {doubt[1]} with their own `cuda()`/`to()`, and nothing shows what `{receiver.value}` is"
            if self.report(original_node, message, safe=False if doubt is not None else None):
                return cst.Assign(
                    targets=[cst.AssignTarget(target=receiver.deep_clone())],  # a node stands in one place only
                    value=updated_node.value,
                    semicolon=updated_node.semicolon,
                )
            return updated_node
        if isinstance(receiver, (cst.Attribute, cst.Subscript)):
            if self._is_module_attribute(receiver):
                return updated_node
            shown = nodes.code_of(receiver)
            self.report(  # the same words for `.cuda()` and the `.to(device)` TFD001 makes of it
                original_node,
                f"the moved `{shown}` is dropped: assign it back by hand; for an nn.Parameter "
                "assign its `.data`, for a tensor attribute register a buffer",
                fixable=False,
            )
        return updated_node

    # -- evidence ---------------------------------------------------------------------------
    def _is_move(self, call: cst.Call) -> bool:
        if not isinstance(call.func, cst.Attribute):
            return False
        method = call.func.attr.value
        if method == "cuda":
            return not any(q.split(".")[0] in ("numba", "cupy", "pycuda") for q in self.qualified_names(call.func.value))
        if method != "to" or not call.args:
            return False
        first = call.args[0]
        if first.keyword is not None:
            return first.keyword.value == "device"
        return self._looks_like_device(first.value)

    def _looks_like_device(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            return isinstance(text, str) and text.split(":")[0] in {"cuda", "cpu", "mps", "xpu", "meta"}
        if isinstance(value, cst.Call):
            return "torch.device" in self.qualified_names(value.func, ending_in=DEVICE_NAME)
        dotted = nodes.dotted_name(value)
        if dotted is None:
            return False
        last = dotted.rsplit(".", 1)[-1].lower()
        return any(word in last for word in DEVICE_WORDS)

    def _is_loop_variable_not_used_later(self, name: str, statement: cst.Expr) -> bool:
        """``for t in ts: t.to(device)`` with no later use of ``t`` in the loop body: reassigning
        ``t`` would fix nothing. (``for X, y in loader: X.to(device); model(X)`` is fixed.)"""
        for loop in reversed(self._loops):
            if loop is None:
                return False
            if any(isinstance(n, cst.Name) and n.value == name for n in traversal.walk(loop.target)):
                end = self.get_metadata(PositionProvider, statement).end
                for node in traversal.walk(loop.body):
                    if isinstance(node, cst.Name) and node.value == name:
                        start = self.get_metadata(PositionProvider, node).start
                        if (start.line, start.column) > (end.line, end.column):
                            return False
                return True
        return False

    def _is_module(self, name: cst.Name) -> bool:
        """Every binding of ``name`` visible here builds an ``nn.Module``."""
        assignments = list(self.bindings_visible_at(name.value, name))
        if not assignments:
            return False
        for assignment in assignments:
            if not isinstance(assignment, Assignment):
                return False
            node = assignment.node
            if isinstance(node, cst.Param):
                if node.annotation is None or not (nodes.dotted_name(node.annotation.annotation) or "").endswith("Module"):
                    return False
                continue
            value = self.device_source.assigned_values().get(id(node))
            if value is None or not self._builds_module(value):
                return False
        return True

    def _is_module_attribute(self, receiver: cst.BaseExpression) -> bool:
        """``self.encoder`` where ``__init__`` binds ``self.encoder`` to a layer."""
        if not m.matches(receiver, m.Attribute(m.Name("self"), m.Name())) or not self.class_stack:
            return False
        attr = cst.ensure_type(receiver, cst.Attribute).attr.value
        for node in traversal.walk(self.class_stack[-1]):
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
                if m.matches(target, m.Attribute(m.Name("self"), m.Name(attr))) and self._builds_module(node.value):
                    return True
        return False

    def _builds_module(self, value: cst.BaseExpression) -> bool:
        while isinstance(value, cst.Call) and m.matches(value.func, m.Attribute(attr=m.Name("to") | m.Name("cuda"))):
            value = cst.ensure_type(value.func, cst.Attribute).value
        if not isinstance(value, cst.Call):
            return False
        for q in self.qualified_names(value.func):
            last = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.") and last[:1].isupper() and last not in ("Parameter",):
                return True
        return nodes.dotted_name(value.func) in self.device_source.module_class_names()

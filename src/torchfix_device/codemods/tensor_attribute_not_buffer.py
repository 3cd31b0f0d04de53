from __future__ import annotations

import ast
import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device import torch_api
from torchfix_device.codemods.base import Codemod
from torchfix_device.prefilter import scan as ast_scan
from torchfix_device.prefilter.candidates import FileFacts, is_self_attribute, module_class_possible, values_bound_to
from torchfix_device.codemods.factory_without_device import is_factory_name
from torchfix_device.torch_api import NN_MODULE_ATTRS
from torchfix_device.facts import kinds
from torchfix_device.facts import values as facts_values
from torchfix_device.syntax.bindings import (
    binding_of,
    class_body_names,
    methods,
    names_bound_by,
    registered_names,
    self_attr,
    super_init_index,
    walk_class,
    walk_function,
)

# The calls whose result is a fresh tensor (kept explicit: ``torch.<anything>`` is not enough,
# ``torch.split`` returns a tuple, ``torch.device`` a device, ``torch.Generator`` a generator).
TENSOR_FACTORIES = {f"torch.{name}" for name in kinds.TORCH_FUNCTIONS} | {"torch.Tensor", "torch.autograd.Variable", "torch.autograd.variable.Variable"}
"""What stage 1 takes for a call making a tensor: what :func:`~torchfix_device.facts.kinds.is_tensor` does."""
TENSOR_METHODS = kinds.TENSOR_METHODS
PARAMETER_CLASSES = {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.UninitializedParameter"}
PLAIN_MODULE_BASES = {"torch.nn.Module", "torch.nn.modules.module.Module"}


class TensorAttributeNotBuffer(Codemod):
    """
    ## What it does
    Finds tensors created in `__init__` of an `nn.Module` and stored as plain attributes —
    `self.mask = torch.ones(n, n)`, any of `torch.zeros`, `ones`, `empty`, `full`, `rand`,
    `randn`, `randint`, `randperm`, `arange`, `range`, `linspace`, `logspace`, `eye`, `tensor`,
    `as_tensor`, `from_numpy`, the `*_like` factories, `tril`, `triu`, `cat`, `stack`, `normal`,
    `bernoulli`, `multinomial`, `diag`, `outer`, the legacy `torch.FloatTensor(...)` family, method
    chains on them (`torch.ones(n, n).tril().bool()`) and local tensors built from them
    (`pe = torch.zeros(...)`; `...`; `self.pe = pe.unsqueeze(0)`) — and registers them as
    non-persistent buffers: `self.register_buffer("mask", torch.ones(n, n), persistent=False)`.

    ## Why is this bad?
    `.to(device)`, `.cuda()` and `.cpu()` move parameters, buffers and submodules, not plain
    tensor attributes. After `model.to("cuda")` the mask is still on the CPU and the first
    `forward` that combines it with a CUDA tensor fails with `RuntimeError: Expected all tensors
    to be on the same device, but found at least two devices, cuda:0 and cpu!`. DataParallel
    replicas and `model.buffers()` do not see it either.

    ## Example
    ```python
    class CausalAttention(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.mask = torch.tril(torch.ones(n, n))
    ```

    ## Use instead
    ```python
    class CausalAttention(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("mask", torch.tril(torch.ones(n, n)), persistent=False)
    ```

    ## Not rewritten
    - Attributes already registered (`register_buffer("mask", ...)`, `register_parameter`,
      `add_module` with that name) or assigned an `nn.Parameter` / a layer anywhere in the class;
      values that are not shown to be tensors (other calls, names, numbers, lists of tensors).
    - Assignments in other methods than `__init__` (the factory device codemod TFD003 handles
      those), with several targets (`self.a = self.b = ...`), or not written as a statement of
      their own (`self.a = t; self.b = 2`).
    - Reported for manual review: an assignment made before `super().__init__()` (or in an
      `__init__` without one) — `register_buffer` needs the initialised module; one nested in a
      block of `__init__` (`if`, `for`, `with`); a tensor with `requires_grad=True` (it is a
      trainable weight: make it an `nn.Parameter`); a name that is an `nn.Module` attribute or
      defined in the class body (`self.type = ...`), or already set earlier in `__init__` (or by a
      method it calls first) — `register_buffer` refuses such names.

    ## Fix safety
    Safe. The buffer is registered with `persistent=False`, so `state_dict()` keeps exactly its
    old keys: checkpoints saved before the rewrite still load with `strict=True`, and no
    checkpoint note is emitted (a persistent buffer would add a key). Later assignments to
    `self.mask` of a tensor or `None` keep working: the name is now a buffer. Differences to
    know: the tensor now follows the module's moves *and* floating-point casts (`.half()`,
    `.double()`, `.to(torch.float16)`), is listed by `buffers()` and broadcast by
    DistributedDataParallel (`broadcast_buffers=True`). Requires torch >= 1.6 (`persistent=`).
    The fix is unsafe (applied only with `--unsafe-fixes`) where the class inherits from a base
    other than `nn.Module` that may already own a persistent buffer of that name (it would
    become non-persistent), or where another method assigns the attribute a value that is not
    shown to be a tensor or `None`, on either branch of `a if c else b` (a buffer refuses other
    values). A value ending in `.cuda()` (`Variable(torch.zeros(n)).cuda()`) is registered
    without it where the class also holds layers or parameters of its own: a program that ran
    on the GPU moved the module to use them there, and the buffer now moves with it (and stays
    on the CPU with the module otherwise); TFD001's review item for that `.cuda()` ("inside
    `__init__` the module has no device yet") is then not listed. In a class without any, the
    `.cuda()` stays.
    """

    code = "TFD007"
    name = "tensor-attribute-not-buffer"
    summary = "A tensor stored as a plain attribute in __init__ is not moved by .to(): register it as a buffer"
    safe = True
    # A match needs an nn.Module subclass and a torch factory, both resolved through a torch import.
    triggers = ("torch",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """``self.x = <a tensor>`` in the ``__init__`` of a possible ``nn.Module`` class."""
        if not (module_class_possible(facts) and "__init__" in facts.function_names):
            return False
        scan = facts.scan
        for node, _, _ in facts.contexts:
            if not (isinstance(node, ast.ClassDef) and scan.is_module_class(node)):
                continue
            for init in node.body:
                if isinstance(init, ast_scan.FUNCTIONS) and init.name == "__init__":
                    for stmt in ast.walk(init):
                        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and is_self_attribute(stmt.targets[0]):
                            if _may_be_tensor(stmt.value, init, scan, frozenset()):
                                return True
        return False

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._plan: dict[int, tuple[str, bool]] = {}
        self._top_classes = {s.name.value: s for s in traversal.walk_statements(node) if isinstance(s, cst.ClassDef)}
        return None

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        super().visit_ClassDef(node)
        if self.device_source.is_module_class(node):
            self._analyse_class(node)
        return None

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.BaseSmallStatement:
        planned = self._plan.get(id(original_node))
        if planned is None:
            return updated_node
        name, unmoved = planned
        value = updated_node.value
        if unmoved:  # `<tensor>.cuda()`: the buffer follows the module's moves instead
            value = cst.ensure_type(cst.ensure_type(value, cst.Call).func, cst.Attribute).value
        call = cst.ensure_type(cst.parse_expression(f'self.register_buffer("{name}", x, persistent=False)'), cst.Call)
        args = list(call.args)
        args[1] = args[1].with_changes(value=value)
        return cst.Expr(value=call.with_changes(args=args), semicolon=updated_node.semicolon)

    # -- analysis ---------------------------------------------------------------------------------------
    def _analyse_class(self, cls: cst.ClassDef) -> None:
        init = next((f for f in methods(cls) if f.name.value == "__init__"), None)
        if init is None:
            return
        skip = registered_names(cls) | self._inherited_registered(cls)
        body_names = class_body_names(cls)
        assignments = self._assignments(cls)
        for name in {n for n, _, _ in assignments}:
            if any(self._is_parameter_or_layer(v, f) for n, v, f in assignments if n == name and v is not None):
                skip.add(name)
        holds_state = any(self._is_parameter_or_layer(v, f) for _, v, f in assignments if v is not None)
        super_index = super_init_index(init)
        done: set[str] = set()
        top = {id(s): i for i, s in enumerate(init.body.body)}
        for node in walk_function(init):
            if not isinstance(node, cst.Assign):
                continue
            targets = [self_attr(t.target) for t in node.targets]
            name = targets[0] if len(targets) == 1 else None
            if name is None or name in skip or name in done or not self._is_tensor(node.value, init):
                continue
            done.add(name)
            shown = f"`self.{name} = {_short(node.value)}`"
            statement = self._statement_of(init, node)
            index = top.get(id(statement)) if statement is not None else None
            if index is None:
                self.report(node, f"{shown} is a tensor attribute that .to() does not move, set inside a block of "
                                  f"__init__: register it with self.register_buffer(...) by hand", fixable=False)
                continue
            if len(cst.ensure_type(statement, cst.SimpleStatementLine).body) != 1:
                self.report(node, f"{shown} is a tensor attribute that .to() does not move: put it on a line of its "
                                  f"own and register it with self.register_buffer(...)", fixable=False)
                continue
            if super_index is None or index < super_index:
                where = "before super().__init__()" if super_index is not None else "in an __init__ without super().__init__()"
                self.report(node, f"{shown} is a tensor attribute that .to() does not move, set {where}: "
                                  f"register_buffer needs the initialised module; move it after super().__init__() "
                                  f"and register it as a buffer", fixable=False)
                continue
            if self._requires_grad(node.value, init):
                self.report(node, f"{shown} is a trainable tensor (requires_grad) that .to() does not move and the "
                                  f"optimizer does not see through .parameters(): make it an nn.Parameter", fixable=False)
                continue
            if name in NN_MODULE_ATTRS or name in body_names:
                self.report(node, f"{shown}: `{name}` is also an attribute of the class or of nn.Module, so "
                                  f"register_buffer would refuse the name; rename it and register it as a buffer",
                            fixable=False)
                continue
            earlier = self._set_earlier(cls, init, name, index, node)
            if earlier is not None:
                self.report(node, f"{shown} is a tensor attribute that .to() does not move, but `self.{name}` is "
                                  f"already set by `{_short(earlier)}` before it, so register_buffer would refuse "
                                  f"the name: register the buffer first", fixable=False)
                continue
            reason = self._unsafe_reason(cls, name, node, assignments)
            message = (f"{shown} is a tensor attribute that .to() does not move: register it with "
                       f"`self.register_buffer(\"{name}\", ..., persistent=False)`")
            unmoved = holds_state and m.matches(node.value, m.Call(func=m.Attribute(attr=m.Name("cuda")), args=[]))
            if unmoved:
                message += (", without its `.cuda()`: the buffer then follows the module, whose layers or "
                            "parameters must be moved to the GPU for it to run there")
            if reason is not None:
                message += f"; unsafe: {reason}"
            if self.report(node, message, safe=False if reason is not None else None):
                self._plan[id(node)] = (name, unmoved)
                if unmoved:  # TFD001 leaves a `.cuda()` in __init__ for review
                    self.resolves(node.value, "TFD001")

    def _assignments(self, cls: cst.ClassDef) -> list[tuple[str, cst.BaseExpression | None, cst.FunctionDef | None]]:
        """(name, value, enclosing function) for every assignment to ``self.NAME`` in the class;
        value None when it cannot be followed (tuple unpacking, a loop target)."""
        parents: dict[int, cst.CSTNode] = {}
        found: list[tuple[str, cst.BaseExpression | None, cst.FunctionDef | None]] = []
        for node, parent in walk_class(cls):
            if parent is not None:
                parents[id(node)] = parent
            targets: list[cst.BaseExpression] = []
            value: cst.BaseExpression | None = None
            if isinstance(node, cst.Assign):
                targets, value = [t.target for t in node.targets], node.value
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, (cst.For, cst.CompFor)):
                targets = [node.target]
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                targets = [node.asname.name]
            for target in targets:
                name = self_attr(target)
                function = _enclosing_function(node, parents)
                if name is not None:
                    found.append((name, value, function))
                else:
                    for sub in traversal.walk(target):
                        inner = self_attr(sub)
                        if inner is not None:
                            found.append((inner, None, function))
        return found

    def _is_parameter_or_layer(self, value: cst.BaseExpression, scope) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualified = self.qualified_names(value.func)
        if qualified & PARAMETER_CLASSES:
            return True
        if any(q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper() for q in qualified):
            return True
        dotted = _nodes.dotted_name(value.func)
        return dotted is not None and dotted in self.device_source.module_class_names()

    def _is_tensor(self, value: cst.BaseExpression, scope: cst.FunctionDef | None) -> bool:
        """``value`` is shown to be a tensor (:func:`torchfix_device.facts.kinds.is_tensor`), and
        not a legacy CUDA type's (TFD008 rewrites those)."""
        if isinstance(value, cst.Call):
            qualified = self.qualified_names(value.func)
            if qualified & PARAMETER_CLASSES or (torch_api.legacy_tensor_type(qualified) or ("", False))[1]:
                return False  # a parameter registers itself; TFD008 rewrites a legacy CUDA type
        return kinds.is_tensor(facts_values.of(self), value)

    def _requires_grad(self, value: cst.BaseExpression, scope: cst.FunctionDef) -> bool:
        nodes = list(traversal.walk(value))
        values = self._bound_values(scope)
        for node in list(nodes):
            if isinstance(node, cst.Name) and node.value != "self":
                for bound in values.get(node.value, ()):
                    if bound is not value:
                        nodes.extend(traversal.walk(bound))
        for node in nodes:
            if isinstance(node, cst.Call):
                flag = _nodes.keyword_arg(node, "requires_grad")
                if flag is not None and not m.matches(flag.value, m.Name("False")):
                    return True
                if m.matches(node.func, m.Attribute(attr=m.Name("requires_grad_"))):
                    return True
        return False

    def _bound_values(self, scope: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
        """Name → the values ``scope`` binds it to (``name = value``, :func:`binding_of`), in
        the order of a walk of ``scope``: one walk per function, not one per name read."""
        known: dict[int, tuple[cst.FunctionDef, dict[str, list[cst.BaseExpression]]]] = self.__dict__.setdefault("_bound_values_of", {})
        found = known.get(id(scope))
        if found is None or found[0] is not scope:
            by_name: dict[str, list[cst.BaseExpression]] = {}
            for inner in walk_function(scope):
                for name in dict.fromkeys(names_bound_by(inner)):
                    bound = binding_of(inner, name)
                    if isinstance(bound, cst.BaseExpression):
                        by_name.setdefault(name, []).append(bound)
            found = known[id(scope)] = (scope, by_name)
        return found[1]

    def _statement_of(self, init: cst.FunctionDef, node: cst.Assign) -> cst.BaseStatement | None:
        for stmt in init.body.body:
            if isinstance(stmt, cst.SimpleStatementLine) and any(s is node for s in stmt.body):
                return stmt
        return None

    def _set_earlier(self, cls: cst.ClassDef, init: cst.FunctionDef, name: str, index: int, node: cst.Assign):
        """An assignment to ``self.name`` that runs before statement ``index`` of ``__init__``."""
        class_methods = {f.name.value: f for f in methods(cls)}
        reached: set[str] = set()
        todo: list[cst.CSTNode] = list(init.body.body[:index])
        while todo:
            part = todo.pop()
            for sub in traversal.walk(part):
                if isinstance(sub, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and sub is not node:
                    targets = [t.target for t in sub.targets] if isinstance(sub, cst.Assign) else [sub.target]
                    if any(self_attr(t) == name for t in targets):
                        return sub
                if isinstance(sub, cst.Call):
                    method = self_attr(sub.func)
                    if method in class_methods and method not in reached:
                        reached.add(method)
                        todo.append(class_methods[method].body)
        return None

    def _unsafe_reason(self, cls: cst.ClassDef, name: str, node: cst.Assign, assignments) -> str | None:
        if not self._plain_module_chain(cls, set()):
            return f"a base class other than nn.Module may already own a buffer `{name}`, which would become non-persistent"
        for other, value, scope in assignments:
            if other != name or value is node.value:
                continue
            if value is None:
                return f"`self.{name}` is also bound in a form this tool cannot follow"
            if self._buffer_accepts(value, scope, name):
                continue
            return f"`self.{name}` is also assigned `{_short(value)}`, which a buffer accepts only if it is a tensor or None"
        return None

    def _buffer_accepts(self, value: cst.BaseExpression, scope: cst.FunctionDef | None, name: str) -> bool:
        """``value`` is None or a tensor, on either branch of ``a if c else b``."""
        if isinstance(value, cst.IfExp):
            return self._buffer_accepts(value.body, scope, name) and self._buffer_accepts(value.orelse, scope, name)
        return _nodes.is_none(value) or self._is_tensor(value, scope) or _is_self_tensor_chain(value, name)

    def _plain_module_chain(self, cls: cst.ClassDef, seen: set[str]) -> bool:
        """Every base, through same-file classes, is ``nn.Module`` itself."""
        for base in cls.bases:
            qualified = self.qualified_names(base.value)
            if qualified & PLAIN_MODULE_BASES:
                continue
            dotted = _nodes.dotted_name(base.value)
            parent = self._top_classes.get(dotted or "")
            if parent is None or dotted in seen or not self._plain_module_chain(parent, seen | {dotted or ""}):
                return False
        return True

    def _inherited_registered(self, cls: cst.ClassDef) -> set[str]:
        """Names registered by same-file base classes (assigning those is a buffer update)."""
        names: set[str] = set()
        todo = [cls]
        seen: set[int] = set()
        while todo:
            current = todo.pop()
            for base in current.bases:
                parent = self._top_classes.get(_nodes.dotted_name(base.value) or "")
                if parent is not None and id(parent) not in seen:
                    seen.add(id(parent))
                    names |= registered_names(parent)
                    todo.append(parent)
        return names


def _is_self_tensor_chain(value: cst.BaseExpression, name: str) -> bool:
    """``self.mask.to(x.device)``, ``self.mask * 2``: derived from the buffer itself."""
    if self_attr(value) == name:
        return True
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in TENSOR_METHODS:
        return _is_self_tensor_chain(value.func.value, name)
    if isinstance(value, cst.BinaryOperation):
        return _is_self_tensor_chain(value.left, name) or _is_self_tensor_chain(value.right, name)
    if isinstance(value, cst.Subscript):
        return _is_self_tensor_chain(value.value, name)
    return False


def _enclosing_function(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.FunctionDef | None:
    current = parents.get(id(node))
    while current is not None:
        if isinstance(current, cst.FunctionDef):
            return current
        current = parents.get(id(current))
    return None


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(_nodes.code_of(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- stage 1 ---------------------------------------------------------------------------------
def _may_be_tensor(value: ast.expr, init: ast.AST, scan: ast_scan.AstScan, seen: frozenset[str]) -> bool:
    """The codemod's ``_is_tensor`` with every binding of a local name allowed (it needs all)."""
    if isinstance(value, ast.Call):
        if scan.opaque or any(q in TENSOR_FACTORIES or is_factory_name(q) for q in scan.qualified(value.func)):
            return True
        if isinstance(value.func, ast.Attribute) and value.func.attr in TENSOR_METHODS:
            if value.func.attr in kinds.TENSOR_ONLY_METHODS:
                return True  # a method only tensors have (`t.detach()`): a tensor of any receiver
            return _may_be_tensor(value.func.value, init, scan, seen)
        return False
    if isinstance(value, ast.BinOp):
        return _may_be_tensor(value.left, init, scan, seen) or _may_be_tensor(value.right, init, scan, seen)
    if isinstance(value, ast.UnaryOp):
        return _may_be_tensor(value.operand, init, scan, seen)
    if isinstance(value, ast.Subscript):
        return _may_be_tensor(value.value, init, scan, seen)
    if isinstance(value, ast.Name) and value.id not in seen:
        return any(_may_be_tensor(v, init, scan, seen | {value.id}) for v in values_bound_to(value.id, init))
    return False

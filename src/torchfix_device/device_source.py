"""Where a rewrite gets its device from (one implementation, used by every codemod).

1. Inside a method of an ``nn.Module`` subclass: a tensor argument of the method (an argument
   annotated ``Tensor``, or the first argument of ``forward``) as ``x.device``; else a parameter,
   buffer or weight-bearing layer the module creates in ``__init__`` (``self.weight.device``,
   ``self.fc.weight.device``) that is sure to exist when the method runs; else
   ``next(self.parameters()).device`` when the module has parameters and the method is not run
   during ``__init__``. Never a module-level global: the module may be moved elsewhere.
2. Elsewhere: a ``torch.device`` binding already visible (a ``device``/``DEVICE`` argument, a
   ``device = torch.device(...)`` assignment). Otherwise a module-level
   ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` inserted once after
   the imports (``import torch`` added when missing).
3. A name already bound to something else (``device = args.gpu``) is never reused or clobbered:
   the inserted binding then gets a free name (``torch_device``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import Assignment, PositionProvider, ScopeProvider

from torchfix_device import _cst, torchscript
from torchfix_device.binding_place import binding_place
from torchfix_device.device_expression import device_expression_node, uses_torch

if TYPE_CHECKING:
    from torchfix_device.codemod import Codemod

DEVICE_NAMES = ("device", "DEVICE")
FREE_NAME_CANDIDATES = ("device", "torch_device", "default_device", "device_")

DEVICE_NAME = frozenset({"device"})
PARAMETER_CLASSES = {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}
WEIGHT_LAYERS = {
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "PReLU",
}


@dataclass(frozen=True)
class DeviceExpr:
    """A device expression valid at the site, e.g. ``x.device`` or ``device``."""

    code: str


@dataclass(frozen=True)
class NoDevice:
    """No device can be chosen safely at the site; ``reason`` says why (shown to the user)."""

    reason: str


@dataclass
class _ModuleClassInfo:
    init: cst.FunctionDef | None
    attr_devices: list[tuple[int, str]] = field(default_factory=list)
    """(index of the ``__init__`` statement, device expression) in ``__init__`` order."""
    first_run_in_init: dict[str, int] = field(default_factory=dict)
    """Method name → index of the first ``__init__`` statement that (transitively) calls it."""
    has_parameters: bool = False


class DeviceSource:
    """Chooses the device expression for one site; inserts the module-level binding if needed."""

    def __init__(self, codemod: "Codemod", module: cst.Module) -> None:
        self.codemod = codemod
        self.module = module
        self._module_classes: dict[int, cst.ClassDef] | None = None
        self._class_info: dict[int, _ModuleClassInfo] = {}
        self._assigned_values: dict[int, cst.BaseExpression] | None = None
        self._names: set[str] | None = None
        self._device_names: list[str] | None = None
        self.inserted_name: str | None = None

    # -- public -----------------------------------------------------------------------------
    def in_module_method(self) -> bool:
        """True when the codemod is inside a method of an ``nn.Module`` subclass."""
        return self._enclosing_method() is not None

    def enclosing_module_class(self) -> cst.ClassDef | None:
        """The innermost class being visited, if it is an ``nn.Module`` subclass."""
        if self.codemod.class_stack and self.is_module_class(self.codemod.class_stack[-1]):
            return self.codemod.class_stack[-1]
        return None

    def is_module_class(self, cls: cst.ClassDef) -> bool:
        return id(cls) in self.module_classes()

    def module_class_names(self) -> set[str]:
        return {c.name.value for c in self.module_classes().values()}

    def for_site(self, node: cst.CSTNode, *, allow_global: bool = True) -> DeviceExpr | NoDevice:
        """The device to use at ``node`` (an original node of the tree being visited)."""
        scripted = torchscript.scripted_function(self.codemod)
        if scripted is not None:  # TorchScript cannot read a module-level binding
            tensor = torchscript.tensor_argument(scripted)
            if tensor is None:
                return NoDevice("inside TorchScript, which cannot read a module-level device, and no tensor argument to take it from")
            return DeviceExpr(f"{tensor}.device")
        cls = self.enclosing_module_class()
        if cls is not None:
            return self._module_device(cls)
        if not allow_global:
            return NoDevice("not inside an nn.Module method: no module to take the device from")
        return self._scoped_device(node)

    def finish(self, module: cst.Module) -> cst.Module:
        """Insert the module-level device binding if a rewrite uses it.

        The inserted name was chosen free in the original file, so it occurs in ``module`` only
        where a rewrite put it; a site that asked for a device but was then not rewritten
        (reported, or an unsafe fix held back) inserts nothing.
        """
        if self.inserted_name is None or not self._inserted_name_used(module):
            return module
        configured = self.codemod.device_expression
        torch_name = _cst.torch_module_alias(module)
        if torch_name is None and (configured is None or uses_torch(configured)):
            AddImportsVisitor.add_needed_import(self.codemod.context, "torch")
            torch_name = "torch"
        if configured is None:
            stmt = cst.parse_statement(
                f'{self.inserted_name} = {torch_name}.device("cuda" if {torch_name}.cuda.is_available() else "cpu")\n',
                config=module.config_for_parsing,
            )
        else:
            value = _cst.code_of(device_expression_node(configured, torch_name or "torch"))
            stmt = cst.parse_statement(f"{self.inserted_name} = {value}\n", config=module.config_for_parsing)
        place = binding_place(module, torch_name, self.inserted_name)
        index, body = place.index, list(module.body)
        new = [stmt]
        if place.needs_import:  # the device is read at module level before ``import torch``
            alias = "" if torch_name == "torch" else f" as {torch_name}"
            new.insert(0, cst.parse_statement(f"import torch{alias}\n", config=module.config_for_parsing))
        if index > 0:  # one blank line between the imports and the new line
            new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine()])
        elif body:  # at the very top: keep the file's leading comments (shebang, license) above it
            new[0] = new[0].with_changes(leading_lines=body[0].leading_lines)
            body[0] = body[0].with_changes(leading_lines=[cst.EmptyLine()])
        body[index:index] = new
        return module.with_changes(body=body)

    def _inserted_name_used(self, module: cst.Module) -> bool:
        """A rewrite put the inserted name into ``module``. The name may already occur in the
        file where it binds nothing at module level (a function's ``device`` parameter), so the
        occurrences are counted: a site that asked for a device and then declined (suppressed,
        reported, held back) adds none, nor does a rewrite that wrote ``x.device``."""
        if not self.codemod.replaced_a_node:
            return False  # the tree is the one the name was chosen free in
        name = self.inserted_name or ""
        # Statements and class members left untouched are the same objects in both trees.
        shared = {id(s) for s in _cst.statement_units(module)} & {id(s) for s in _cst.statement_units(self.module)}
        return _cst.count_name(module, name, shared) > _cst.count_name(self.module, name, shared)

    # -- nn.Module methods ------------------------------------------------------------------
    def _enclosing_method(self) -> cst.FunctionDef | None:
        cls = self.enclosing_module_class()
        if cls is None or not self.codemod.function_stack:
            return None
        func = self.codemod.function_stack[-1]
        return func if any(stmt is func for stmt in cls.body.body) else None

    def _module_device(self, cls: cst.ClassDef) -> DeviceExpr | NoDevice:
        method = self._enclosing_method()
        if method is None:
            if not self.codemod.function_stack:
                return NoDevice("in a class body: no module instance to take the device from")
            return NoDevice("in a function nested inside an nn.Module method: pass the device explicitly")
        decorators = _cst.decorator_names(method)
        if "staticmethod" in decorators or "classmethod" in decorators:
            return NoDevice("static or class method: no module to take the device from")
        if method.name.value == "__init__":
            return NoDevice("inside __init__ the module has no device yet")
        tensor_arg = self._tensor_argument(method)
        if tensor_arg is not None:
            return DeviceExpr(f"{tensor_arg}.device")
        info = self._info(cls)
        runs_at = info.first_run_in_init.get(method.name.value)
        for index, expr in info.attr_devices:
            if runs_at is None or index < runs_at:
                return DeviceExpr(expr)
        if info.has_parameters and runs_at is None:
            return DeviceExpr("next(self.parameters()).device")
        if runs_at is not None:
            return NoDevice(
                f"`{method.name.value}` runs during __init__ before any parameter or buffer exists"
            )
        return NoDevice("the module defines no parameter or buffer to take the device from")

    @staticmethod
    def _tensor_argument(method: cst.FunctionDef) -> str | None:
        params = _cst.all_params(method)[1:]
        for param in params:
            if param.annotation is not None:
                name = _cst.dotted_name(param.annotation.annotation) or ""
                if name == "Tensor" or name.endswith(".Tensor"):
                    return param.name.value
        if method.name.value == "forward":
            first = _cst.first_positional_param(method)
            if first is not None and first.annotation is None and not _not_a_tensor(first, method):
                return first.name.value
        return None

    def module_classes(self) -> dict[int, cst.ClassDef]:
        """Classes of this file that subclass ``torch.nn`` classes, directly or through others."""
        if self._module_classes is None:
            classes = [n for n in _cst.walk_statements(self.module) if isinstance(n, cst.ClassDef)]
            in_module_scope = {id(n) for n in _cst.module_scope_statements(self.module) if isinstance(n, cst.ClassDef)}
            found: dict[int, cst.ClassDef] = {}
            names: set[str] = set()
            changed = True
            while changed:
                changed = False
                for cls in classes:
                    if id(cls) in found:
                        continue
                    for base in cls.bases:
                        qualified = self.codemod.qualified_names(base.value, in_module_scope=id(cls) in in_module_scope)
                        dotted = _cst.dotted_name(base.value)
                        if any(is_torch_module_class(q) for q in qualified) or dotted in names:
                            found[id(cls)] = cls
                            names.add(cls.name.value)
                            changed = True
                            break
            self._module_classes = found
        return self._module_classes

    def _info(self, cls: cst.ClassDef) -> _ModuleClassInfo:
        if id(cls) not in self._class_info:
            self._class_info[id(cls)] = self._analyse_class(cls)
        return self._class_info[id(cls)]

    def _analyse_class(self, cls: cst.ClassDef) -> _ModuleClassInfo:
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        info = _ModuleClassInfo(init=methods.get("__init__"))
        calls = {name: _self_method_calls(func) for name, func in methods.items()}
        if info.init is None:
            return info
        module_class_names = self.module_class_names()
        for index, stmt in enumerate(info.init.body.body):
            for called in _self_method_calls(stmt):
                for reached in _reachable(called, calls):
                    info.first_run_in_init.setdefault(reached, index)
            expr, is_param = self._attr_device(stmt, module_class_names)
            if expr is not None:
                info.attr_devices.append((index, expr))
            info.has_parameters = info.has_parameters or is_param
        return info

    def _attr_device(self, stmt: cst.BaseStatement, module_class_names: set[str]) -> tuple[str | None, bool]:
        """For ``self.w = nn.Parameter(...)`` and friends: (device expression, creates params)."""
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None, False
        small = stmt.body[0]
        if m.matches(small, m.Expr(m.Call(func=m.Attribute(m.Name("self"), m.Name("register_buffer"))))):
            call = cst.ensure_type(cst.ensure_type(small, cst.Expr).value, cst.Call)
            args = _cst.positional_args(call)
            if len(args) >= 2 and isinstance(args[0].value, cst.SimpleString) and not m.matches(args[1].value, m.Name("None")):
                name = args[0].value.evaluated_value
                if isinstance(name, str) and name.isidentifier():
                    return f"self.{name}.device", False
            return None, False
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return None, False
        target = small.targets[0].target
        if not m.matches(target, m.Attribute(m.Name("self"), m.Name())) or not isinstance(small.value, cst.Call):
            return None, False
        attr = cst.ensure_type(target, cst.Attribute).attr.value
        qualified = self.codemod.qualified_names(small.value.func)
        if qualified & PARAMETER_CLASSES:
            return f"self.{attr}.device", True
        for q in qualified:
            if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] in WEIGHT_LAYERS:
                return f"self.{attr}.weight.device", True
        called = _cst.dotted_name(small.value.func)
        is_layer = any(q.startswith("torch.nn.") for q in qualified) or called in module_class_names
        return None, is_layer

    # -- everywhere else --------------------------------------------------------------------
    def _scoped_device(self, node: cst.CSTNode) -> DeviceExpr | NoDevice:
        taken: set[str] = set()
        for name in (*DEVICE_NAMES, *self._module_level_device_names()):
            visible = self._visible_bindings(name, node)
            if not visible:
                continue
            if all(self._is_device_binding(a, node) for a in visible):
                return DeviceExpr(name)
            taken.add(name)
        if self.inserted_name is None:
            self.inserted_name = next(
                (n for n in FREE_NAME_CANDIDATES if n not in taken and self._is_free_global(n)),
                None,
            ) or _numbered_free_name(self._all_names())
        elif self._visible_bindings(self.inserted_name, node):
            return NoDevice(f"`{self.inserted_name}` is bound to something else here; pass a device by hand")
        return DeviceExpr(self.inserted_name)

    def _is_free_global(self, name: str) -> bool:
        """``name`` can be bound at module level without changing what any code refers to
        (functions binding it locally just shadow it)."""
        return self.codemod.free_at_module_level(name)

    def _module_level_device_names(self) -> list[str]:
        """Names bound at module level to a device (``dev = torch.device(...)``, an inserted line),
        read once per module (every site asks: a scan per site was quadratic in a large file)."""
        if self._device_names is not None:
            return self._device_names
        names: list[str] = []
        for stmt in self.module.body:
            if m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])):
                assign = cst.ensure_type(cst.ensure_type(stmt, cst.SimpleStatementLine).body[0], cst.Assign)
                name = cst.ensure_type(assign.targets[0].target, cst.Name).value
                if name not in DEVICE_NAMES and self._looks_like_device(assign.value):
                    names.append(name)
        self._device_names = names
        return names

    def _visible_bindings(self, name: str, node: cst.CSTNode) -> set:
        """The bindings of ``name`` visible at ``node``; none, without a scope analysis, when
        the file never spells ``name`` as a name."""
        if self._named_nowhere(name):
            return set()
        return self.codemod.bindings_visible_at(name, node)

    def _named_nowhere(self, name: str) -> bool:
        """No scope of the file binds or reads ``name`` as a name: then no scope analysis is
        needed to know that none of its bindings is visible anywhere. False when that cannot be
        told cheaply."""
        return self.codemod.spelt_nowhere(name)

    def _scope(self, node: cst.CSTNode):
        try:
            return self.codemod.get_metadata(ScopeProvider, node)
        except KeyError:
            return None

    def _is_device_binding(self, assignment: object, use: cst.CSTNode) -> bool:
        if not isinstance(assignment, Assignment):
            return False
        target = assignment.node
        if isinstance(target, cst.Param):
            return self._is_device_param(target)
        value = self.assigned_values().get(id(target))
        if value is None or not self._looks_like_device(value):
            return False
        # A binding made later in the same scope is not there yet when a module-level use runs.
        if not self.codemod.function_stack and assignment.scope is self._scope(use):
            try:
                bound_at = self.codemod.get_metadata(PositionProvider, target).start.line
                used_at = self.codemod.get_metadata(PositionProvider, use).start.line
            except KeyError:
                return False
            return bound_at < used_at
        return True

    def _is_device_param(self, param: cst.Param) -> bool:
        """A ``device`` argument, unless its default or annotation says it is something else
        (``device=0``, ``device=None``, ``device: int``): a device is never a bare integer."""
        if param.default is not None and not self._looks_like_device(param.default):
            return False
        if param.annotation is not None:
            return _cst.dotted_name(param.annotation.annotation) not in NOT_DEVICE_ANNOTATIONS
        return True

    def _looks_like_device(self, value: cst.BaseExpression) -> bool:
        if self.codemod.device_expression is not None and self._is_configured_expression(value):
            return True
        if isinstance(value, cst.Call):
            return "torch.device" in self.codemod.qualified_names(value.func, ending_in=DEVICE_NAME)
        if isinstance(value, cst.IfExp):
            return self._looks_like_device(value.body) and self._looks_like_device(value.orelse)
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            return isinstance(text, str) and text.split(":")[0] in {"cuda", "cpu", "mps", "xpu", "meta"}
        return False

    def _is_configured_expression(self, value: cst.BaseExpression) -> bool:
        """``value`` is the configured device expression (as an earlier run inserted it)."""
        torch_name = _cst.torch_module_alias(self.module) or "torch"
        expected = device_expression_node(self.codemod.device_expression, torch_name)
        return _cst.code_of(value) == _cst.code_of(expected)

    def assigned_values(self) -> dict[int, cst.BaseExpression]:
        """Assigned ``Name`` node (by id) → the value assigned to it (``=``, ``x: T =``, ``+=``)."""
        if self._assigned_values is None:
            values: dict[int, cst.BaseExpression] = {}
            for node in _cst.walk_statements(self.module):
                if isinstance(node, cst.Assign):
                    for t in node.targets:
                        if isinstance(t.target, cst.Name):
                            values[id(t.target)] = node.value
                elif isinstance(node, (cst.AnnAssign, cst.AugAssign)) and node.value is not None and isinstance(node.target, cst.Name):
                    values[id(node.target)] = node.value
            self._assigned_values = values
        return self._assigned_values

    def _all_names(self) -> set[str]:
        if self._names is None:
            self._names = _cst.all_names(self.module)
        return self._names


NOT_MODULE_NAMESPACES = {"utils", "functional", "init", "parameter", "grad", "attention", "common_types"}
NOT_MODULE_CLASSES = {"Parameter", "UninitializedParameter", "Buffer", "UninitializedBuffer"}


def is_torch_module_class(qualified: str) -> bool:
    """``torch.nn.Module``, ``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``: yes;
    ``torch.nn.utils.prune.BasePruningMethod``, ``torch.nn.Parameter``: no."""
    parts = qualified.split(".")
    return (
        len(parts) >= 3 and parts[:2] == ["torch", "nn"]
        and parts[2] not in NOT_MODULE_NAMESPACES and parts[-1] not in NOT_MODULE_CLASSES
        and parts[-1][:1].isupper()
    )


NOT_DEVICE_ANNOTATIONS = {"int", "bool", "float", "None"}
SIZE_NAMES = {"n", "size", "dim", "training", "length", "count", "steps", "batch", "bsz", "bs", "seq_len"}
SIZE_PREFIXES = ("n_", "num_", "max_", "is_", "use_")
SIZE_SUFFIXES = ("_size", "_dim", "_len", "_length", "_count", "_steps", "_num")
SIZE_USES = {
    "zeros", "ones", "empty", "randn", "rand", "randint", "randperm", "full", "arange", "range",
    "eye", "linspace", "logspace", "new_zeros", "new_ones", "new_empty", "new_full", "view",
    "reshape", "expand", "repeat", "FloatTensor", "LongTensor", "Tensor", "ByteTensor",
}


def _not_a_tensor(param: cst.Param, method: cst.FunctionDef) -> bool:
    """``param`` is a size, a count or a flag, by its name (``batch_size``, ``n_*``,
    ``num_*``, ``dim``, ``training``), its default, or its use in the body (a size given to a
    factory or a shape method, ``range(param)``, an ``if param:`` test)."""
    name = param.name.value
    lowered = name.lower()
    if param.default is not None:
        return True
    if lowered in SIZE_NAMES or lowered.startswith(SIZE_PREFIXES) or lowered.endswith(SIZE_SUFFIXES):
        return True
    for node in _cst.walk(method.body):
        if isinstance(node, cst.Call):
            called = _cst.dotted_name(node.func) or ""
            if called.rsplit(".", 1)[-1] in SIZE_USES and any(
                m.matches(a.value, m.Name(name)) or m.matches(a.value, m.Tuple()) and
                any(m.matches(e.value, m.Name(name)) for e in cst.ensure_type(a.value, cst.Tuple).elements)
                for a in node.args
            ):
                return True
        elif isinstance(node, (cst.If, cst.While, cst.IfExp)) and m.matches(node.test, m.Name(name)):
            return True
    return False


def _self_method_calls(node: cst.CSTNode) -> set[str]:
    """Names of ``self.<name>(...)`` calls anywhere under ``node``."""
    found = set()
    for n in _cst.walk(node):
        if m.matches(n, m.Call(func=m.Attribute(m.Name("self"), m.Name()))):
            found.add(cst.ensure_type(cst.ensure_type(n, cst.Call).func, cst.Attribute).attr.value)
    return found


def _reachable(start: str, calls: dict[str, set[str]]) -> list[str]:
    seen = [start]
    todo = [start]
    while todo:
        for nxt in calls.get(todo.pop(), ()):
            if nxt not in seen:
                seen.append(nxt)
                todo.append(nxt)
    return seen


def _numbered_free_name(names: set[str]) -> str:
    i = 2
    while f"device{i}" in names:
        i += 1
    return f"device{i}"

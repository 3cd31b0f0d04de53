"""Rule 1 of where a rewrite gets its device: inside a method of an ``nn.Module`` subclass.

A tensor argument of the method (an argument annotated ``Tensor``, or the first argument of
``forward``, never one that is a size, a count, a flag or a tuple the body unpacks; for a tuple
unpacked by ``forward``'s first statement, its first element) as ``x.device``; else a parameter,
buffer or weight-bearing layer the module creates in ``__init__`` (``self.weight.device``,
``self.fc.weight.device``) that is sure to exist when the method runs; else
``next(self.parameters()).device`` when the module has parameters and the method is not run
during ``__init__`` (also, for a caller that takes an unproven device, an unsafe fix's, when
``__init__`` keeps submodules it is given: ``self.extractor = extractor``, or when classes of
the run subclass it: an abstract base whose subclasses build its layers). Never a module-level
global: the module may be moved elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import imports, nodes
from torchfix_device.syntax import traversal
from torchfix_device.devices.choice import DeviceExpr, NoDevice
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.project_attributes import subclassed_in_run

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

PARAMETER_CLASSES = {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}
WEIGHT_LAYERS = {
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "PReLU",
}


@dataclass
class _ModuleClassInfo:
    init: cst.FunctionDef | None
    attr_devices: list[tuple[int, str]] = field(default_factory=list)
    """(index of the ``__init__`` statement, device expression) in ``__init__`` order."""
    first_run_in_init: dict[str, int] = field(default_factory=dict)
    """Method name → index of the first ``__init__`` statement that (transitively) calls it."""
    has_parameters: bool = False
    given_modules: list[str] = field(default_factory=list)
    """``self.<attr> = <a parameter of __init__>``: what may be submodules given from outside (an
    abstract base whose subclasses, maybe in other files, build them)."""



class ModuleClasses(Protocol):
    """What :class:`ModuleMethodDevice` asks of its :class:`~torchfix_device.devices.source.DeviceSource`."""

    def enclosing_module_class(self) -> cst.ClassDef | None: ...

    def module_class_names(self) -> set[str]: ...

class ModuleMethodDevice:
    """The device of a site inside a method of one of the file's ``nn.Module`` classes."""

    def __init__(self, codemod: "CodemodView", source: "ModuleClasses") -> None:
        self.codemod = codemod
        self.source = source
        self._class_info: dict[int, _ModuleClassInfo] = {}

    def enclosing_method(self) -> cst.FunctionDef | None:
        cls = self.source.enclosing_module_class()
        if cls is None or not self.codemod.function_stack:
            return None
        func = self.codemod.function_stack[-1]
        return func if any(stmt is func for stmt in cls.body.body) else None

    def in_static_or_class_method(self) -> bool:
        """The site is in a static or class method of the class: no instance, as in a function."""
        method = self.enclosing_method()
        return method is not None and bool({"staticmethod", "classmethod"} & set(nodes.decorator_names(method)))

    def device(self, cls: cst.ClassDef, unproven: bool = False) -> DeviceExpr | NoDevice:
        method = self.enclosing_method()
        if method is None:
            if not self.codemod.function_stack:
                return NoDevice("in a class body: no module instance to take the device from")
            return NoDevice("in a function nested inside an nn.Module method: pass the device explicitly")
        decorators = nodes.decorator_names(method)
        if "staticmethod" in decorators or "classmethod" in decorators:
            return NoDevice("static or class method: no module to take the device from")
        if method.name.value == "__init__":
            return NoDevice("inside __init__ the module has no device yet")
        tensor_arg = self._tensor_argument(method, cls)
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
        if unproven and info.given_modules:
            given = ", ".join(f"`self.{a}`" for a in info.given_modules)
            return DeviceExpr("next(self.parameters()).device", unproven=(
                f"the module's submodules are given to `__init__` ({given}): nothing in this file shows it has a "
                "parameter, without which `next(self.parameters())` raises StopIteration"))
        if unproven and subclassed_in_run(facts_values.of(self.codemod), cls.name.value):
            return DeviceExpr("next(self.parameters()).device", unproven=(
                f"`{cls.name.value}` is a base whose subclasses build its layers: nothing shows it has a parameter "
                "when this runs, without which `next(self.parameters())` raises StopIteration"))
        return NoDevice("the module defines no parameter or buffer to take the device from")

    @staticmethod
    def _tensor_argument(method: cst.FunctionDef, cls: cst.ClassDef | None = None) -> str | None:
        params = nodes.all_params(method)[1:]
        for param in params:
            if param.annotation is not None:
                name = nodes.dotted_name(param.annotation.annotation) or ""
                if name == "Tensor" or name.endswith(".Tensor"):
                    return param.name.value
        if method.name.value == "forward":
            first = nodes.first_positional_param(method)
            if first is not None and first.annotation is None and not _not_a_tensor(first, method) \
                    and not (cls is not None and _called_with_a_number(cls)):
                return first.name.value
            if first is not None:
                return _first_unpacked(first, method)
        return None

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
        module_class_names = self.source.module_class_names()
        for index, stmt in enumerate(info.init.body.body):
            for called in _self_method_calls(stmt):
                for reached in _reachable(called, calls):
                    info.first_run_in_init.setdefault(reached, index)
            expr, is_param = self._attr_device(stmt, module_class_names)
            if expr is not None:
                info.attr_devices.append((index, expr))
            info.has_parameters = info.has_parameters or is_param
            given = _given_attribute(stmt, info.init)
            if given is not None and _used_as_module(cls, given):
                info.given_modules.append(given)
        return info

    def _attr_device(self, stmt: cst.BaseStatement, module_class_names: set[str]) -> tuple[str | None, bool]:
        """For ``self.w = nn.Parameter(...)`` and friends: (device expression, creates params)."""
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None, False
        small = stmt.body[0]
        if m.matches(small, m.Expr(m.Call(func=m.Attribute(m.Name("self"), m.Name("register_buffer"))))):
            call = cst.ensure_type(cst.ensure_type(small, cst.Expr).value, cst.Call)
            args = nodes.positional_args(call)
            if len(args) >= 2 and isinstance(args[0].value, cst.SimpleString) and not nodes.is_none(args[1].value):
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
        called = nodes.dotted_name(small.value.func)
        is_layer = any(q.startswith("torch.nn.") for q in qualified) or called in module_class_names
        return None, is_layer


def _used_as_module(cls: cst.ClassDef, attr: str) -> bool:
    """``self.<attr>(...)`` is called, or an attribute of it read, in the class (a submodule, not
    a number or a flag)."""
    for node in traversal.walk(cls):
        if isinstance(node, (cst.Call, cst.Attribute)):
            inner = node.func if isinstance(node, cst.Call) else node.value
            if m.matches(inner, m.Attribute(m.Name("self"), m.Name(attr))):
                return True
    return False


def _given_attribute(stmt: cst.BaseStatement, init: cst.FunctionDef) -> str | None:
    """``self.<attr> = <name>`` where ``<name>`` is a parameter of ``__init__`` other than ``self``
    that is not named like a size or flag."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    assign = stmt.body[0]
    if len(assign.targets) != 1 or not m.matches(assign.targets[0].target, m.Attribute(m.Name("self"), m.Name())) \
            or not isinstance(assign.value, cst.Name):
        return None
    params = nodes.all_params(init)[1:]
    if not any(p.name.value == assign.value.value and p.default is None for p in params) or _named_like_a_size(assign.value.value):
        return None
    return cst.ensure_type(assign.targets[0].target, cst.Attribute).attr.value


SIZE_NAMES = {"n", "size", "dim", "training", "length", "count", "steps", "batch", "bsz", "bs", "seq_len"}
SIZE_PREFIXES = ("n_", "num_", "max_", "is_", "use_")
SIZE_SUFFIXES = ("_size", "_dim", "_len", "_length", "_count", "_steps", "_num")
SIZE_USES = {
    "zeros", "ones", "empty", "randn", "rand", "randint", "randperm", "full", "arange", "range",
    "eye", "linspace", "logspace", "new_zeros", "new_ones", "new_empty", "new_full", "view",
    "reshape", "expand", "repeat", "FloatTensor", "LongTensor", "Tensor", "ByteTensor",
}


def _first_unpacked(param: cst.Param, method: cst.FunctionDef) -> str | None:
    """``loc_data`` where ``forward``'s first statement (after its docstring) unpacks its first
    argument, a tuple (``loc_data, conf_data, priors = predictions``): its first element stands
    where a first argument would, and is bound before anything else in the method runs."""
    statements = list(method.body.body) if isinstance(method.body, cst.IndentedBlock) else []
    if statements and imports.is_docstring(statements[0]):
        statements = statements[1:]
    if not statements or not isinstance(statements[0], cst.SimpleStatementLine) or len(statements[0].body) != 1:
        return None
    assign = statements[0].body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and m.matches(assign.value, m.Name(param.name.value))):
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or not target.elements:
        return None
    first = target.elements[0]
    if isinstance(first, cst.StarredElement) or not isinstance(first.value, cst.Name):
        return None
    name = first.value.value
    return None if _named_like_a_size(name) else name


def _named_like_a_size(name: str) -> bool:
    """``batch_size``, ``n_*``, ``num_*``, ``dim``, ``training``: a size, a count or a flag."""
    lowered = name.lower()
    return lowered in SIZE_NAMES or lowered.startswith(SIZE_PREFIXES) or lowered.endswith(SIZE_SUFFIXES)


def _not_a_tensor(param: cst.Param, method: cst.FunctionDef) -> bool:
    """``param`` is a size, a count or a flag, by its name (``batch_size``, ``n_*``,
    ``num_*``, ``dim``, ``training``), its default, or its use in the body (a size given to a
    factory or a shape method, ``range(param)``, an ``if param:`` test); or a tuple, by its
    unpacking in the body (``sent, sent_len = sent_tuple``: a tuple has no ``.device``); or a
    NumPy array, given to ``torch.from_numpy``."""
    name = param.name.value
    if param.default is not None or _named_like_a_size(name):
        return True
    for node in traversal.walk(method.body):
        if isinstance(node, cst.Call):
            called = nodes.dotted_name(node.func) or ""
            if called.rsplit(".", 1)[-1] in SIZE_USES and any(
                m.matches(a.value, m.Name(name)) or m.matches(a.value, m.Tuple()) and
                any(m.matches(e.value, m.Name(name)) for e in cst.ensure_type(a.value, cst.Tuple).elements)
                for a in node.args
            ):
                return True
        elif isinstance(node, (cst.If, cst.While, cst.IfExp)) and m.matches(node.test, m.Name(name)):
            return True
        if isinstance(node, cst.Call) and (nodes.dotted_name(node.func) or "").rsplit(".", 1)[-1] == "from_numpy" and any(
            isinstance(n, cst.Name) and n.value == name for a in node.args for n in traversal.walk(a.value)
        ):
            return True  # `torch.from_numpy(image...)`: a NumPy array
        elif isinstance(node, cst.Assign) and m.matches(node.value, m.Name(name)) and any(
            isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets
        ):
            return True
    return False


def _called_with_a_number(cls: cst.ClassDef) -> bool:
    """The class calls itself with a number first (``self(0., x)``): ``forward``'s first
    argument is no tensor (a dropout rate, a temperature)."""
    for node in traversal.walk(cls):
        if isinstance(node, cst.Call) and m.matches(node.func, m.Name("self")) and node.args and node.args[0].keyword is None:
            first = node.args[0].value
            if isinstance(first, cst.UnaryOperation):
                first = first.expression
            if isinstance(first, (cst.Integer, cst.Float)):
                return True
    return False


def _self_method_calls(node: cst.CSTNode) -> set[str]:
    """Names of ``self.<name>(...)`` calls anywhere under ``node``."""
    found = set()
    for n in traversal.walk(node):
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

"""Where a rewrite gets its device from (one implementation, used by every codemod).

1. Inside a method of an ``nn.Module`` subclass: the module's own device
   (:mod:`torchfix_device.devices.module_device`), never a module-level global.
   A function nested in such a method (a closure it returns) has no module device of its own:
   a site there under the user's flag takes the flag's device, as in a function (rule 2).
2. Elsewhere: a ``torch.device`` binding already visible (a ``device``/``DEVICE`` argument, a
   ``device = torch.device(...)`` assignment). Otherwise a module-level
   ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` inserted once after
   the imports (``import torch`` added when missing).
3. A name already bound to something else (``device = args.gpu``) is never reused or clobbered:
   the inserted binding then gets a free name (``torch_device``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import Assignment, PositionProvider, ScopeProvider

from torchfix_device.syntax import imports as _imports
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.devices import torchscript
from torchfix_device.devices.binding_place import binding_place
from torchfix_device.devices.choice import DeviceExpr, NoDevice
from torchfix_device.devices.expression import device_expression_node, uses_torch
from torchfix_device.devices.flag_binding import FlagAt, FlagBindings
from torchfix_device.devices.module_device import ModuleMethodDevice
from torchfix_device.facts import kinds
from torchfix_device.facts import values as facts_values

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

DEVICE_NAMES = ("device", "DEVICE")
FREE_NAME_CANDIDATES = ("device", "torch_device", "default_device", "device_")

DEVICE_NAME = frozenset({"device"})
__all__ = ["DEVICE_NAME", "DeviceExpr", "DeviceSource", "NoDevice"]


class DeviceSource:
    """Chooses the device expression for one site; inserts the module-level binding if needed."""

    def __init__(self, codemod: "CodemodView", module: cst.Module) -> None:
        self.codemod = codemod
        self.module = module
        self._module_classes: dict[int, cst.ClassDef] | None = None
        self._module_method = ModuleMethodDevice(codemod, self)
        self.flags = FlagBindings(codemod, module)
        self.reserved_names: set[str] = set()
        """Names a codemod binds itself (a tensor-type alias's device): the inserted binding avoids them."""
        self._assigned_values: dict[int, cst.BaseExpression] | None = None
        self._names: set[str] | None = None
        self._device_names: list[str] | None = None
        self.inserted_name: str | None = None

    # -- public -----------------------------------------------------------------------------
    def enclosing_module_class(self) -> cst.ClassDef | None:
        """The innermost class being visited, if it is an ``nn.Module`` subclass."""
        if self.codemod.class_stack and self.is_module_class(self.codemod.class_stack[-1]):
            return self.codemod.class_stack[-1]
        return None

    def is_module_class(self, cls: cst.ClassDef) -> bool:
        return id(cls) in self.module_classes()

    def module_class_names(self) -> set[str]:
        return {c.name.value for c in self.module_classes().values()}

    def for_site(
        self, node: cst.CSTNode, *, allow_global: bool = True, chooses_location: bool = False, ignore_flag: bool = False,
        unproven: bool = False,
    ) -> DeviceExpr | NoDevice:
        """The device to use at ``node`` (an original node of the tree being visited).

        ``chooses_location``: the code did not put the value on CUDA before (``torch.load``
        kept the saved location), so where a user's flag decides the device but cannot give it
        here, there is no device. ``ignore_flag``: the site is under a guard that asks
        ``torch.cuda.is_available()`` itself, so it takes the default device, not the flag's.
        ``unproven``: the caller also takes a device nothing shows to work there (marked
        :attr:`DeviceExpr.unproven`, for an unsafe fix)."""
        scripted = torchscript.scripted_function(self.codemod)
        if scripted is not None:  # TorchScript cannot read a module-level binding
            tensor = torchscript.tensor_argument(scripted)
            if tensor is None:
                return NoDevice("inside TorchScript, which cannot read a module-level device, and no tensor argument to take it from")
            return DeviceExpr(f"{tensor}.device")
        cls = self.enclosing_module_class()
        static = cls is not None and allow_global and self._module_method.in_static_or_class_method()
        nested = cls is not None and self.codemod.function_stack and self._module_method.enclosing_method() is None
        if nested and not ignore_flag and (at := self.flags.at(node)) is not None and at.applies:
            return self._scoped_device(node, chooses_location)  # a closure's site under the user's flag: its device
        if cls is not None and not static:  # a static or class method finds its device as a function does
            return self._module_method.device(cls, unproven=unproven)
        if not allow_global:
            return NoDevice("not inside an nn.Module method: no module to take the device from")
        return self._scoped_device(node, chooses_location, ignore_flag)

    def finish(self, module: cst.Module) -> cst.Module:
        """Insert the module-level device binding if a rewrite uses it.

        The inserted name was chosen free in the original file, so it occurs in ``module`` only
        where a rewrite put it; a site that asked for a device but was then not rewritten
        (reported, or an unsafe fix held back) inserts nothing.
        """
        module = self.flags.finish_module(module, lambda name: self._name_used(name, module))
        if self.inserted_name is None or not self._name_used(self.inserted_name, module):
            return module
        configured = self.codemod.device_expression
        torch_name = _imports.torch_module_alias(module)
        if torch_name is None and (configured is None or uses_torch(configured)):
            AddImportsVisitor.add_needed_import(self.codemod.context, "torch")
            torch_name = "torch"
        if configured is None:
            stmt = cst.parse_statement(
                f'{self.inserted_name} = {torch_name}.device("cuda" if {torch_name}.cuda.is_available() else "cpu")\n',
                config=module.config_for_parsing,
            )
        else:
            value = nodes.code_of(device_expression_node(configured, torch_name or "torch"))
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

    def _name_used(self, name: str, module: cst.Module) -> bool:
        """A rewrite put the inserted ``name`` into ``module``. The name may already occur in the
        file where it binds nothing at module level (a function's ``device`` parameter), so the
        occurrences are counted: a site that asked for a device and then declined (suppressed,
        reported, held back) adds none, nor does a rewrite that wrote ``x.device``."""
        if not self.codemod.replaced_a_node:
            return False  # the tree is the one the name was chosen free in
        # Statements and class members left untouched are the same objects in both trees.
        shared = {id(s) for s in traversal.statement_units(module)} & {id(s) for s in traversal.statement_units(self.module)}
        return traversal.count_name(module, name, shared) > traversal.count_name(self.module, name, shared)

    def module_classes(self) -> dict[int, cst.ClassDef]:
        """Classes of this file that subclass ``torch.nn`` classes, directly or through others."""
        return kinds.module_classes(facts_values.of(self.codemod))

    # -- everywhere else --------------------------------------------------------------------
    def _scoped_device(self, node: cst.CSTNode, chooses_location: bool = False, ignore_flag: bool = False) -> DeviceExpr | NoDevice:
        at = None if ignore_flag else self.flags.at(node)
        # A device built from a user's flag serves only the sites that follow that flag.
        wanted = at if at is not None and at.applies else None
        # A site that chooses a location (``torch.load``) where a flag decides the device takes
        # only that flag's device: a default device (``torch.cuda.is_available()``, the line an
        # earlier pass inserted for a guarded ``.cuda()`` included) would load onto the GPU
        # against ``--no-cuda``.
        flag_only = chooses_location and at is not None
        taken: set[str] = set()
        for name in (*DEVICE_NAMES, *self._module_level_device_names()):
            visible = self._visible_bindings(name, node)
            if not visible:
                continue
            if all(self._is_device_binding(a, node) and self._serves(a, wanted, flag_only) for a in visible):
                return DeviceExpr(name)
            taken.add(name)
        if at is not None:
            flagged = self._flag_device(node, at, chooses_location)
            if flagged is not None:
                return flagged
        if self.inserted_name is None:
            reserved = self.flags.reserved() | self.reserved_names
            self.inserted_name = next(
                (n for n in FREE_NAME_CANDIDATES if n not in taken and n not in reserved and self._is_free_global(n)),
                None,
            ) or _numbered_free_name(self._all_names() | reserved)
        elif self._visible_bindings(self.inserted_name, node):
            return NoDevice(f"`{self.inserted_name}` is bound to something else here; pass a device by hand")
        return DeviceExpr(self.inserted_name)

    def _flag_device(self, node: cst.CSTNode, at: FlagAt, chooses_location: bool) -> DeviceExpr | NoDevice | None:
        """The device of the user's flag at ``node``; None where the default applies."""
        flag = at.flag
        if at.applies:
            existing = self.flags.existing_name(flag)
            name = self.flags.name_for(flag)
            if existing is None and self._visible_bindings(name, node):
                return NoDevice(f"`{name}` is bound to something else here; pass a device by hand")
            return DeviceExpr(name)
        if not chooses_location:
            return None
        if flag.usable:
            return NoDevice(f"this runs before `{flag.flag}`, the flag that decides the device, is final: choose one by hand")
        return NoDevice(f"`{flag.flag}` decides the device here, but {flag.reason}: choose one by hand")

    def _serves(self, assignment: object, wanted: FlagAt | None, flag_only: bool = False) -> bool:
        """A device binding serves a site unless it is built from a user's flag other than
        the one the site follows (``wanted``; None: it follows none). The user's own
        ``torch.device("cuda" if use_cuda else "cpu")`` serves the sites of ``use_cuda``.
        ``flag_only``: only a binding built from the flag ``wanted`` serves (none when the
        site comes before that flag is final)."""
        value = self.assigned_values().get(id(getattr(assignment, "node", None)))
        test = self.flags.condition_of(value) if value is not None else None
        if test is None:
            return not flag_only
        if wanted is None:
            return False
        return test == self.flags.test_code(wanted.flag) or \
            self.flags.condition_of(value, flag_only=True) == wanted.flag.condition

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
            return nodes.dotted_name(param.annotation.annotation) not in NOT_DEVICE_ANNOTATIONS
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
        torch_name = _imports.torch_module_alias(self.module) or "torch"
        expected = device_expression_node(self.codemod.device_expression, torch_name)
        return nodes.code_of(value) == nodes.code_of(expected)

    def assigned_values(self) -> dict[int, cst.BaseExpression]:
        """Assigned ``Name`` node (by id) → the value assigned to it (``=``, ``x: T =``, ``+=``)."""
        if self._assigned_values is None:
            values: dict[int, cst.BaseExpression] = {}
            for node in traversal.walk_statements(self.module):
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
            self._names = traversal.all_names(self.module)
        return self._names


NOT_DEVICE_ANNOTATIONS = {"int", "bool", "float", "None"}


def _numbered_free_name(names: set[str]) -> str:
    i = 2
    while f"device{i}" in names:
        i += 1
    return f"device{i}"

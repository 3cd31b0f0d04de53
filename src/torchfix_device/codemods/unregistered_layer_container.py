from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor

from torchfix_device import _cst
from torchfix_device.codemod import Codemod
from torchfix_device import ast_scan
from torchfix_device.candidates import FileFacts, is_self_attribute, module_class_possible, values_bound_to
from torchfix_device.codemods._registration import (
    DICT_CONTAINER_ATTRS,
    NN_MODULE_ATTRS,
    binding_of,
    from_import_of,
    methods,
    names_bound_by,
    self_attr,
    unpacked_names,
    walk_class,
    walk_function,
)

_BINDING_OR_FILLING = (
    cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.WithItem, cst.Global, cst.Nonlocal,
    cst.NamedExpr, cst.Import, cst.ImportFrom, cst.Call, cst.Del,
)
"""Node types :func:`binding_of` or ``_local_fill`` can answer for with anything but None."""

# -- what an element of a container is -------------------------------------------------------------
LAYER = "layer"  # an nn.Module built here (torch.nn class, same-file Module subclass, a factory of one)
PARAM = "param"  # an nn.Parameter
NONE = "none"  # the literal None (allowed in ModuleList / ModuleDict)
OTHER = "other"  # certainly not a layer: numbers, strings, shapes, tensors, known functions
OPAQUE = "opaque"  # a value this file does not show (a parameter, a loop variable, ``x[i]``)
REGISTERED = "registered"  # a layer registered elsewhere already (``self.fc1``, a name also stored on self)
UNKNOWN = "unknown"  # a call that may or may not build a layer (``Block()`` imported from elsewhere)
NESTED = "nested"  # a list/tuple/dict holding layers, inside the container

# ``torch.nn.<X>`` capitalised names that are not ``nn.Module`` subclasses.
NN_NON_MODULE_CLASSES = {"Buffer", "UninitializedBuffer", "LinearCrossEntropyOptions"}
NN_PARAMETER_CLASSES = {"Parameter", "UninitializedParameter"}
# ``torch.nn.<sub>.<X>`` packages whose capitalised names are modules.
NN_MODULE_PACKAGES = {"modules", "parallel", "quantized", "qat", "intrinsic", "quantizable"}
# ``torch.nn`` functions that return the module they are given.
NN_MODULE_FUNCTIONS = {
    "torch.nn.utils.weight_norm", "torch.nn.utils.spectral_norm",
    "torch.nn.utils.parametrizations.weight_norm", "torch.nn.utils.parametrizations.spectral_norm",
    "torch.nn.utils.parametrizations.orthogonal",
}
# ``torch`` functions that may return a module (scripted, compiled, loaded, hub models).
TORCH_MAY_BE_MODULE = ("torch.jit.", "torch.compile", "torch.hub.", "torch.load", "torch.fx.", "torch.ao.",
                       "torch.quantization.", "torch.export.")
NON_LAYER_BUILTINS = {
    "int", "float", "complex", "str", "bytes", "bool", "len", "range", "tuple", "list", "dict", "set",
    "frozenset", "abs", "round", "sum", "pow", "divmod", "min", "max", "zip", "enumerate", "map",
    "filter", "sorted", "reversed", "hash", "id", "repr", "format", "ord", "chr", "bin", "hex", "oct",
    "slice", "isinstance", "issubclass", "callable", "hasattr", "any", "all", "print", "open",
}
NON_LAYER_MODULES = ("numpy.", "math.", "random.", "string.", "re.", "os.", "itertools.", "functools.",
                     "operator.", "collections.", "json.", "pathlib.", "typing.")
COPY_FUNCTIONS = {"copy.deepcopy", "copy.copy"}
# ``nn.Module`` methods that return the module itself.
MODULE_RETURNING_METHODS = {
    "to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_",
    "type", "apply", "share_memory", "to_empty", "xpu", "mtia", "ipu",
}

# The container classes, by element kind and container kind.
CONTAINER = {(LAYER, "list"): "ModuleList", (LAYER, "dict"): "ModuleDict",
             (PARAM, "list"): "ParameterList", (PARAM, "dict"): "ParameterDict"}
# Methods of list/dict that the container lacks (torch 2.x; checked by the tests).
UNSUPPORTED_METHODS = {
    "ModuleList": {"clear", "copy", "count", "index", "remove", "reverse", "sort"},
    "ModuleDict": {"copy", "fromkeys", "get", "popitem", "setdefault"},
    "ParameterList": {"clear", "copy", "count", "index", "insert", "pop", "remove", "reverse", "sort"},
    "ParameterDict": set(),
}
REGISTERING_CALLS = {"add_module", "register_module", "register_parameter"}
NN_PACKAGES = ("torch.nn", "torch.nn.modules", "torch.nn.modules.container")
ITERATING_BUILTINS = {"list", "tuple", "reversed", "iter", "sorted", "zip", "enumerate"}


@dataclass
class _Element:
    value: cst.BaseExpression | None
    """None: a value the code does not show (``**other``, ``*rest``, ``update(other)``)."""
    scope: cst.FunctionDef | None
    bound: frozenset[str] = frozenset()
    """Names bound by enclosing comprehensions (not the function's locals)."""
    key: cst.BaseExpression | None = None
    is_dict_item: bool = False
    items: bool = False
    """``value`` is an iterable whose items are the elements (``extend(make_blocks())``)."""


@dataclass
class _Site:
    """One assignment ``self.NAME = value`` (or ``self.NAME: T = value``)."""

    node: cst.Assign | cst.AnnAssign
    value: cst.BaseExpression
    scope: cst.FunctionDef | None
    kind: str | None = None
    """"list" / "dict" for a container this codemod can rewrite, else None."""
    empty: bool = False
    elements: list[_Element] = field(default_factory=list)
    registered_local: bool = False
    problem: str | None = None
    """Why rewriting this site would change behaviour (reported instead)."""


@dataclass
class _Attr:
    sites: list[_Site] = field(default_factory=list)
    fills: list[tuple[str, _Element]] = field(default_factory=list)
    """(container kind the fill implies, element)."""
    uses: dict[str, cst.CSTNode] = field(default_factory=dict)
    """Methods and operators used on ``self.NAME`` → where."""
    complex: bool = False
    """Assigned in a form that cannot be followed (``self.a = self.b = []``, tuple targets)."""


class UnregisteredLayerContainer(Codemod):
    """
    ## What it does
    Finds layers of an `nn.Module` kept on `self` in a plain Python `list` or `dict` and stores
    them in the registered container instead: `nn.ModuleList` / `nn.ModuleDict`, or
    `nn.ParameterList` / `nn.ParameterDict` for `nn.Parameter`s. Rewritten forms, in any method of
    an `nn.Module` subclass of the file (found through its bases, however `torch.nn` was imported):

    - `self.blocks = [Block(c) for _ in range(n)]` and list literals → `nn.ModuleList([...])`;
    - `self.blocks = []` filled later with `.append` / `.extend` / `.insert` / `+=` (in loops,
      in other methods) → `self.blocks = nn.ModuleList()`, the fills kept (the containers have
      those methods);
    - a local `layers = []` filled, then `self.layers = layers` → `nn.ModuleList(layers)`;
    - `{"a": nn.Linear(4, 2)}`, dict comprehensions, `self.heads = {}` filled by
      `self.heads["a"] = ...` / `.update(...)` → `nn.ModuleDict(...)`.

    An element counts as a layer when it is built by a `torch.nn` class, by an `nn.Module`
    subclass of the same file, by a function or method of the file that returns one
    (`self._make_layer(...)`), or is a local name bound only to such a call. The container is
    spelled as the file already spells it (`nn.ModuleList`, `torch.nn.ModuleList`, or the name
    bound by `from torch.nn import ModuleList`); when the file binds neither `nn` nor `torch`,
    `from torch.nn import ModuleList` is added (merged into an existing `from torch.nn import`).

    ## Why is this bad?
    `nn.Module` only sees submodules assigned directly as attributes or held in its own
    containers. Layers in a plain list are invisible to `.parameters()` (the optimizer never
    trains them), to `state_dict()` (checkpoints silently lack them) and to `.to(device)` /
    `.cuda()`: after `model.to("cuda")` the blocks are still on the CPU and the forward pass fails
    with `RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor)
    should be the same` — the two-day bug of seed 003 (a hand-written ResNet).

    ## Example
    ```python
    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [BasicBlock(64) for _ in range(3)]
    ```

    ## Use instead
    ```python
    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([BasicBlock(64) for _ in range(3)])
    ```

    ## Not rewritten
    - Lists of numbers, strings, shapes or plain tensors, empty lists never filled with layers,
      local lists never stored on `self`, lists only passed to `nn.Sequential(*layers)`.
    - Containers whose layers are registered already: elements that are attributes (`[self.fc1,
      self.fc2]`) or names also stored on `self`, lists passed to a layer (`nn.Sequential(
      *self.blocks)`) or walked by `add_module` / `register_module` / `setattr`, and names that
      are not built in the class at all (`[teacher]`: hiding a module in a list can be on purpose).
    - Reported for manual review: a call the file cannot tell builds a layer (a class imported
      from another module, `getattr(nn, name)()`, `copy.deepcopy(arg)`), layers mixed with other
      values or with unknown names, layers mixed with parameters, nested lists of layers,
      `[nn.Linear(4, 4)] * 3` (one layer object repeated: its weights are shared), an attribute
      also assigned a value not shown to be a layer or `None` (`self.blocks = list(...)`: a
      registered container attribute refuses it), list/dict methods the container lacks (`ModuleList.sort`, `.index`,
      `ModuleDict.get`, `.setdefault`, `ParameterList.insert`, ...), `ModuleDict` keys that are
      not strings or that `add_module` refuses (a `.` in the key, `"type"`, `"train"`, ...), and a
      local list assigned to `self` inside a block or mutated after the assignment.
    - Static and class methods, and methods whose first parameter is not `self`.

    ## Fix safety
    Safe: the layers, their order and their forward computation are unchanged. **Checkpoints**:
    the rewrite registers the layers, so `state_dict()` gains keys (`blocks.0.conv1.weight`,
    ...). A checkpoint saved before the rewrite lacks them: `load_state_dict(sd)` (strict by
    default) then fails with `Missing key(s) in state_dict`, and the old checkpoint never held
    those weights anyway (they were freshly initialised at every start). Load old checkpoints
    with `load_state_dict(sd, strict=False)` and retrain or migrate the blocks; every rewritten
    container is listed in the run's checkpoint notes. Where the dict keys are not literal
    strings (`{name: ... for name in names}`, `heads[key] = ...`), `ModuleDict` may refuse a key
    at run time: that fix is unsafe and applied only with `--unsafe-fixes`.
    """

    code = "TFD004"
    name = "unregistered-layer-container"
    summary = "Layers kept in a plain list/dict on self are invisible to .to()/.parameters(): use nn.ModuleList/ModuleDict"
    safe = True
    # A match needs an nn.Module subclass, which needs ``torch.nn`` resolved through an import.
    triggers = ("torch",)

    @classmethod
    def may_match(cls, facts: FileFacts) -> bool:
        """In a method of a possible ``nn.Module`` class, ``self.x = <list or dict>`` (a display,
        a comprehension, ``list()``, or a local bound to a display in the same function), or
        ``[layer] * n``."""
        if not module_class_possible(facts):
            return False
        scan = facts.scan
        for node, klass, func in facts.contexts:
            if func is None or not scan.is_module_class(klass):
                continue
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and is_self_attribute(node.targets[0]):
                value = node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None and is_self_attribute(node.target):
                value = node.value
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                if isinstance(node.left, ast.List) or isinstance(node.right, ast.List):
                    return True
                continue
            else:
                continue
            if _may_be_container(value, func):
                return True
        return False

    # -- module-level state --------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        self._module = node
        self._plan: dict[int, tuple[str, bool]] = {}
        self._names: set[str] | None = None
        self._functions = {s.name.value: s for s in node.body if isinstance(s, cst.FunctionDef)}
        self._classes = {s.name.value for s in node.body if isinstance(s, cst.ClassDef)}
        self._module_imports, self._module_assigned = _module_bindings(node)
        self._where_cache: dict[int, dict[str, str]] = {}
        self._filling_nodes: dict[int, list[cst.CSTNode]] = {}
        self._instance_methods: dict[int, bool] = {}
        self._call_cache: dict[int, str] = {}
        self._returns_cache: dict[int, str] = {}
        self._in_progress: set[object] = set()
        self._registered_cache: dict[int, set[str]] = {}
        self._reported_repeats: set[int] = set()
        return None

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        super().visit_ClassDef(node)
        if self.device_source.is_module_class(node):
            self._analyse_class(node)
        return None

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        return self._rewrite(original_node, updated_node)

    def leave_AnnAssign(self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign) -> cst.AnnAssign:
        return self._rewrite(original_node, updated_node)

    def _rewrite(self, original, updated):
        planned = self._plan.get(id(original))
        if planned is None or updated.value is None:
            return updated
        spelling, empty = planned
        if empty:
            return updated.with_changes(value=cst.parse_expression(f"{spelling}()"))
        call = cst.ensure_type(cst.parse_expression(f"{spelling}(x)"), cst.Call)
        return updated.with_changes(value=call.with_changes(args=[call.args[0].with_changes(value=updated.value)]))

    # -- the class ------------------------------------------------------------------------------------
    def _analyse_class(self, cls: cst.ClassDef) -> None:
        self._class_methods = {f.name.value: f for f in methods(cls)}
        parents: dict[int, cst.CSTNode] = {}
        nodes: list[cst.CSTNode] = []
        # For every node of the class, in the same pass: the innermost function it is or is in
        # (None inside a lambda) and the outermost one (its method). A node's scope and method
        # are its parent's (``_scope_of``, ``_method_of``).
        inner: dict[int, cst.FunctionDef | None] = {id(cls): None}
        outer: dict[int, cst.FunctionDef | None] = {id(cls): None}
        for node, parent in walk_class(cls):
            nodes.append(node)
            scope = method = None
            if parent is not None:
                parents[id(node)] = parent
                scope, method = inner[id(parent)], outer[id(parent)]
            if isinstance(node, cst.FunctionDef):
                inner[id(node)], outer[id(node)] = node, method or node
            else:
                inner[id(node)], outer[id(node)] = (None if isinstance(node, cst.Lambda) else scope), method
        self._parents = parents
        self._inner_function = inner
        self._outer_function = outer
        attrs: dict[str, _Attr] = {}
        registered_attrs: set[str] = set()

        def attr(name: str) -> _Attr:
            return attrs.setdefault(name, _Attr())

        for node in nodes:
            if not self._in_instance_method(node):
                continue  # ``self`` is the instance only inside methods that take it first
            scope = self._scope_of(node)
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    name = self_attr(target.target)
                    if name is not None:
                        if len(node.targets) > 1:
                            attr(name).complex = True
                        else:
                            attr(name).sites.append(self._site(node, node.value, scope))
                    elif isinstance(target.target, cst.Subscript):
                        owner = self_attr(target.target.value)
                        if owner is not None:
                            index = target.target.slice[0].slice if len(target.target.slice) == 1 else None
                            key = index.value if isinstance(index, cst.Index) else None
                            attr(owner).fills.append(("list", _Element(node.value, scope)))
                            attr(owner).fills.append(("dict", _Element(node.value, scope, key=key, is_dict_item=True)))
                    else:
                        for sub in _cst.walk(target.target):
                            name = self_attr(sub)
                            if name is not None:
                                attr(name).complex = True
            elif isinstance(node, cst.AnnAssign):
                name = self_attr(node.target)
                if name is not None and node.value is not None:
                    attr(name).sites.append(self._site(node, node.value, scope))
            elif isinstance(node, cst.AugAssign):
                name = self_attr(node.target)
                if name is not None:
                    if isinstance(node.operator, cst.AddAssign):
                        attr(name).fills.extend(("list", e) for e in self._iterable_elements(node.value, scope))
                        attr(name).uses.setdefault("+=", node)
                    else:
                        attr(name).uses.setdefault(_cst.code_of(node.operator).strip(), node)
            elif isinstance(node, cst.Attribute):
                owner = self_attr(node.value)
                if owner is not None:
                    attr(owner).uses.setdefault(node.attr.value, node)
            elif isinstance(node, cst.BinaryOperation):
                for side, operand in (("left", node.left), ("right", node.right)):
                    owner = self_attr(operand)
                    if owner is not None:
                        op = _cst.code_of(node.operator).strip()
                        attr(owner).uses.setdefault(op if side == "left" else f"r{op}", node)
                self._check_repeat(node, scope)
            elif isinstance(node, cst.Del):
                for sub in _cst.walk(node.target):
                    owner = self_attr(sub.value) if isinstance(sub, cst.Subscript) else None
                    if owner is not None:
                        attr(owner).uses.setdefault("del", node)
            elif isinstance(node, cst.Call):
                self._collect_call(node, scope, attr, registered_attrs)

        for name, info in attrs.items():
            if name not in registered_attrs:
                self._decide(cls, name, info)

    def _collect_call(self, node: cst.Call, scope, attr, registered_attrs: set[str]) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            owner = self_attr(func.value)
            if owner is not None:
                method = func.attr.value
                args = _cst.positional_args(node)
                if method in ("append", "insert") and args and not _cst.has_star_args(node):
                    attr(owner).fills.append(("list", _Element(args[-1].value, scope)))
                elif method == "extend" and len(args) == 1:
                    attr(owner).fills.extend(("list", e) for e in self._iterable_elements(args[0].value, scope))
                elif method == "update":
                    for e in self._dict_elements_of_update(node, scope):
                        attr(owner).fills.append(("dict", e))
        builtin = self._builtin(func, scope)
        if builtin in ("isinstance", "type") and node.args:
            owner = self_attr(node.args[0].value)
            if owner is not None:
                attr(owner).uses.setdefault("isinstance", node)
        # Registration by hand: everything in the loop around it counts as registered.
        registering = (
            m.matches(func, m.Attribute(m.Name("self"), m.Name()))
            and cst.ensure_type(func, cst.Attribute).attr.value in REGISTERING_CALLS
        ) or (builtin == "setattr" and bool(node.args) and m.matches(node.args[0].value, m.Name("self")))
        if registering:
            region = self._loop_region(node)
            for sub in _cst.walk(region):
                name = self_attr(sub)
                if name is not None:
                    registered_attrs.add(name)
            return
        # Passed to a layer (``nn.Sequential(*self.blocks)``) outside ``forward``: registered there.
        if self._classify_call(node, scope) == LAYER:
            method = self._method_of(node)
            if method is None or method.name.value != "forward":
                for arg in node.args:
                    registered_attrs.update(n for k, n in _container_refs(arg.value) if k == "self")

    # -- one attribute ----------------------------------------------------------------------------------
    def _site(self, node: cst.Assign | cst.AnnAssign, value: cst.BaseExpression, scope) -> _Site:
        site = _Site(node, value, scope)
        if isinstance(value, (cst.List, cst.ListComp)):
            site.kind = "list"
            site.elements = self._iterable_elements(value, scope)
            site.empty = isinstance(value, cst.List) and not value.elements and "#" not in _cst.code_of(value)
        elif isinstance(value, (cst.Dict, cst.DictComp)):
            site.kind = "dict"
            site.elements = self._dict_elements(value, scope)
            site.empty = isinstance(value, cst.Dict) and not value.elements and "#" not in _cst.code_of(value)
        elif isinstance(value, cst.Call) and not value.args and self._builtin(value.func, scope) in ("list", "dict"):
            site.kind = "list" if self._builtin(value.func, scope) == "list" else "dict"
            site.empty = True
        elif isinstance(value, cst.Name) and scope is not None:
            local = self._local_container(value.value, node, scope)
            if local is not None:
                site.kind, site.elements, site.registered_local, site.problem = local
        return site

    def _decide(self, cls: cst.ClassDef, name: str, info: _Attr) -> None:
        candidates = [s for s in info.sites if s.kind is not None]
        if not candidates or info.complex:
            return
        kinds = {s.kind for s in candidates}
        if len(kinds) != 1:
            return
        kind = kinds.pop()
        elements = [e for s in candidates for e in s.elements] + [e for k, e in info.fills if k == kind]
        classes: dict[str, cst.CSTNode | None] = {}
        for element in elements:
            found = self._classify_element(element)
            classes.setdefault(found, element.value)
        if any(s.registered_local for s in candidates) or REGISTERED in classes:
            return
        first = candidates[0].node
        shown = f"`self.{name}`"
        container = "list" if kind == "list" else "dict"
        layerish = LAYER in classes or PARAM in classes
        if not layerish and UNKNOWN not in classes and NESTED not in classes:
            return  # not a container of layers: numbers, strings, tensors, names we cannot see
        if OTHER in classes:
            if layerish or NESTED in classes:
                self._manual(first, f"{shown} mixes layers with other values in a plain {container}: "
                                    f".to(), .parameters() and state_dict() do not see the layers; register them by hand")
            return
        if NESTED in classes:
            self._manual(first, f"{shown} holds nested containers of layers: .to(), .parameters() and state_dict() "
                                f"do not see them; use nn.ModuleList of nn.ModuleList (or nn.Sequential) by hand")
            return
        if UNKNOWN in classes:
            call = classes[UNKNOWN]
            what = f"`{_cst.code_of(call.func)}(...)`" if isinstance(call, cst.Call) else "a value"
            self._manual(first, f"{shown} holds {what}, which this file does not show to be a layer: if it is an "
                                f"nn.Module, a plain {container} hides it from .to(), .parameters() and state_dict(); "
                                f"use nn.Module{'List' if kind == 'list' else 'Dict'}")
            return
        if LAYER in classes and PARAM in classes:
            self._manual(first, f"{shown} mixes layers and nn.Parameters in a plain {container}: "
                                f"split it into nn.Module{container.title()} and nn.Parameter{container.title()}")
            return
        if OPAQUE in classes or (PARAM in classes and NONE in classes):
            value = classes.get(OPAQUE) or classes.get(NONE)
            shown_value = f"`{_cst.code_of(value)}`" if value is not None else "values this file does not show"
            self._manual(first, f"{shown} holds layers and {shown_value}, which may not be one: .to(), .parameters() "
                                f"and state_dict() do not see layers in a plain {container}; use a registered container by hand")
            return
        target = CONTAINER[(LAYER if LAYER in classes else PARAM, kind)]
        problem = next((s.problem for s in candidates if s.problem), None) or self._structural_problem(
            name, info, target, candidates
        )
        if problem is not None:
            self._manual(first, f"{shown} holds layers in a plain {container} but is not rewritten to {target}: {problem}")
            return
        safe: bool | None = None
        if kind == "dict":
            status, why = self._keys_status(elements)
            if status == "bad":
                self._manual(first, f"{shown} holds layers in a plain dict but {target} would refuse it: {why}")
                return
            if status == "unsafe":
                safe = False
        spelled = self._spelling(target)
        if spelled is None:
            self._manual(first, f"{shown} should be a {target}, but the name `{target}` is taken in this file "
                                f"and torch.nn is not imported: rewrite it by hand")
            return
        spelling, needs_import = spelled
        applied = False
        for site in candidates:
            message = (f"{shown} keeps {'parameters' if target.startswith('Parameter') else 'layers'} in a plain "
                       f"{container}: .to(), .parameters() and state_dict() do not see them; use `{spelling}`")
            if safe is False:
                message += f" (unsafe: {why})"
            if self.report(site.node, message, safe=safe):
                self._plan[id(site.node)] = (spelling, site.empty)
                applied = True
        if applied:
            if needs_import:
                AddImportsVisitor.add_needed_import(self.context, "torch.nn", target)
            self.checkpoint_notes.append(
                f"TFD004: {cls.name.value}.{name} is now registered: state_dict() gains keys '{name}.*'; "
                f"checkpoints saved before this rewrite need load_state_dict(..., strict=False) or a key migration"
            )

    def _manual(self, node: cst.CSTNode, message: str) -> None:
        self.report(node, message, fixable=False)

    def _structural_problem(self, name: str, info: _Attr, target: str, candidates: list[_Site]) -> str | None:
        for site in info.sites:
            if site.kind is not None or m.matches(site.value, m.Name("None")):
                continue
            if target.startswith("Module") and self._classify(site.value, site.scope, frozenset()) == LAYER:
                continue  # a module replacing the container: fine
            return f"it is also assigned `{_short(site.value)}`, which a registered {target} attribute would refuse"
        for use, where in info.uses.items():
            if use in UNSUPPORTED_METHODS[target]:
                return f"`.{use}()` is used on it and {target} has no such method"
            if use == "isinstance":
                return f"its type is tested (`{_short(where)}`), and it would no longer be a {'list' if 'List' in target else 'dict'}"
            if use.startswith("r") or use in ("*", "*=", "|", "|=") or (use == "+" and target == "ParameterList") or (
                use == "del" and target == "ParameterList"
            ):
                return f"`{_short(where)}` does not work on a {target}"
        return None

    def _keys_status(self, elements: list[_Element]) -> tuple[str, str]:
        status, why = "ok", ""
        for element in elements:
            if not element.is_dict_item:
                continue
            key = element.key
            if key is None:
                return "bad", "a key this file does not show"
            if isinstance(key, (cst.SimpleString, cst.ConcatenatedString)):
                text = key.evaluated_value
                if not isinstance(text, str):
                    return "bad", f"the key {_cst.code_of(key)} is not a str"
                if not text or "." in text or text in NN_MODULE_ATTRS or text in DICT_CONTAINER_ATTRS:
                    return "bad", f"the key {_cst.code_of(key)} is empty, has a '.', or names an nn.Module attribute"
                continue
            if isinstance(key, (cst.Integer, cst.Float, cst.Imaginary, cst.Tuple)) or m.matches(key, m.Name("None") | m.Name("True") | m.Name("False")):
                return "bad", f"the key `{_cst.code_of(key)}` is not a str"
            status, why = "unsafe", f"the key `{_short(key)}` may not be a str accepted by add_module"
        return status, why

    # -- elements ------------------------------------------------------------------------------------
    def _iterable_elements(self, value: cst.BaseExpression, scope) -> list[_Element]:
        if isinstance(value, (cst.List, cst.Tuple)):
            return [
                _Element(None if isinstance(e, cst.StarredElement) else e.value, scope) for e in value.elements
            ]
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            return [_Element(value.elt, scope, _comprehension_names(value))]
        return [_Element(value, scope, items=True)]

    def _dict_elements(self, value: cst.Dict | cst.DictComp, scope) -> list[_Element]:
        if isinstance(value, cst.DictComp):
            return [_Element(value.value, scope, _comprehension_names(value), key=value.key, is_dict_item=True)]
        return [
            _Element(e.value, scope, key=e.key, is_dict_item=True) if isinstance(e, cst.DictElement)
            else _Element(None, scope, is_dict_item=True)
            for e in value.elements
        ]

    def _dict_elements_of_update(self, call: cst.Call, scope) -> list[_Element]:
        found: list[_Element] = []
        for arg in call.args:
            if arg.keyword is not None:
                key = cst.SimpleString(repr(arg.keyword.value))
                found.append(_Element(arg.value, scope, key=key, is_dict_item=True))
            elif isinstance(arg.value, (cst.Dict, cst.DictComp)) and not arg.star:
                found.extend(self._dict_elements(arg.value, scope))
            else:
                found.append(_Element(None, scope, is_dict_item=True))
        return found

    def _classify_element(self, element: _Element) -> str:
        if element.value is None:
            return OPAQUE
        if element.items:
            return self._classify_items(element.value, element.scope)
        return self._classify(element.value, element.scope, element.bound)

    def _classify_items(self, value: cst.BaseExpression, scope) -> str:
        """What the items of the iterable ``value`` are."""
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return _combine(
                self._classify(e.value, scope, frozenset()) if not isinstance(e, cst.StarredElement) else OPAQUE
                for e in value.elements
            ) if value.elements else OTHER
        if isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._classify(value.elt, scope, _comprehension_names(value))
        key = ("items", id(value))
        if key in self._in_progress:
            return OPAQUE
        self._in_progress.add(key)
        try:
            if isinstance(value, cst.Name) and scope is not None:
                if any(p.name.value == value.value for p in _cst.all_params(scope)):
                    return OPAQUE
                bindings = [binding_of(n, value.value) for n in walk_function(scope)]
                if any(b is False for b in bindings):
                    return OPAQUE
                found = [b for b in bindings if b is not None and b is not True]
                return _combine(self._classify_items(b, scope) for b in found) if found else OPAQUE
            if isinstance(value, cst.Call):
                function = self._same_file_function(value.func, scope)
                if function is not None:
                    returns = [n.value for n in walk_function(function) if isinstance(n, cst.Return) and n.value is not None]
                    return _combine(self._classify_items(r, function) for r in returns) if returns else OPAQUE
                found = self._classify_call(value, scope)
                return found if found in (OTHER, UNKNOWN) else OPAQUE
            return OPAQUE
        finally:
            self._in_progress.discard(key)

    def _same_file_function(self, func: cst.BaseExpression, scope) -> cst.FunctionDef | None:
        """The method (``self.f``) or module-level function (``f``) of this file ``func`` names."""
        method = self_attr(func)
        if method is not None:
            return self._class_methods.get(method)
        dotted = _cst.dotted_name(func)
        if isinstance(func, cst.Name) and dotted in self._functions and self._where_bound(func.value, scope) == "module":
            return self._functions[dotted]
        return None

    def _classify(self, value: cst.BaseExpression, scope, bound: frozenset[str]) -> str:
        if m.matches(value, m.Name("None")):
            return NONE
        if isinstance(value, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                              cst.FormattedString, cst.Lambda, cst.Comparison, cst.Ellipsis)):
            return OTHER
        if m.matches(value, m.Name("True") | m.Name("False")):
            return OTHER
        if isinstance(value, cst.UnaryOperation):
            return OTHER if self._classify(value.expression, scope, bound) == OTHER else OPAQUE
        if isinstance(value, cst.BinaryOperation):
            left = self._classify(value.left, scope, bound)
            right = self._classify(value.right, scope, bound)
            if isinstance(value.operator, cst.Multiply) and {left, right} & {NESTED}:
                return REGISTERED  # ``[layer] * n``: reported on its own, never rewritten
            return OTHER if left == right == OTHER else OPAQUE
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            inner = {self._classify(e.value, scope, bound) for e in value.elements if not isinstance(e, cst.StarredElement)}
            return _nested(inner)
        if isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return _nested({self._classify(value.elt, scope, bound | _comprehension_names(value))})
        if isinstance(value, cst.Dict):
            inner = {self._classify(e.value, scope, bound) for e in value.elements if isinstance(e, cst.DictElement)}
            return _nested(inner)
        if isinstance(value, cst.DictComp):
            return _nested({self._classify(value.value, scope, bound | _comprehension_names(value))})
        if isinstance(value, cst.IfExp):
            return _combine({self._classify(value.body, scope, bound), self._classify(value.orelse, scope, bound)})
        if isinstance(value, cst.Call):
            return self._classify_call(value, scope, bound)
        if isinstance(value, cst.Name):
            if value.value in bound or scope is None:
                return OPAQUE
            return self._classify_local(value.value, scope)
        if self_attr(value) is not None:
            return REGISTERED  # ``self.fc1``: an attribute, registered on its own if it is a layer
        return OPAQUE

    def _classify_call(self, call: cst.Call, scope, bound: frozenset[str] = frozenset()) -> str:
        if bound:
            return self._classify_call_uncached(call, scope, bound)
        if id(call) not in self._call_cache:
            self._call_cache[id(call)] = OPAQUE  # recursion guard
            self._call_cache[id(call)] = self._classify_call_uncached(call, scope, bound)
        return self._call_cache[id(call)]

    def _classify_call_uncached(self, call: cst.Call, scope, bound: frozenset[str]) -> str:
        func = call.func
        method = self_attr(func)
        if method is not None:
            target = self._class_methods.get(method)
            return self._classify_returns(target) if target is not None else UNKNOWN
        dotted = _cst.dotted_name(func)
        if dotted is None:
            if isinstance(func, cst.Attribute):  # ``"b{}".format(i)``, ``nn.Linear(2, 2).to(d)``
                return self._method_result(func, scope, bound)
            return UNKNOWN  # ``factories[i]()``, ``make()()``
        root = dotted.split(".")[0]
        where = self._where_bound(root, scope, bound)
        if where == "local":
            if isinstance(func, cst.Name):
                return UNKNOWN  # a callable handed in (``block_cls(c)``): may well build a layer
            return self._method_result(cst.ensure_type(func, cst.Attribute), scope, bound)  # ``k.lower()``
        if where == "imported":
            return self._classify_imported(call, self.qualified_names(func), scope, bound)
        if where == "module":
            if not isinstance(func, cst.Name):
                return UNKNOWN  # ``Block.from_config(...)``
            if dotted in self.device_source.module_class_names():
                return LAYER
            if dotted in self._classes:
                return OTHER
            if dotted in self._functions:
                return self._classify_returns(self._functions[dotted])
            return UNKNOWN  # a module-level variable
        # a builtin (or an undefined name)
        if isinstance(func, cst.Name):
            return OTHER if dotted in NON_LAYER_BUILTINS else UNKNOWN
        return OTHER  # ``dict.fromkeys(...)``, ``str.join(...)``

    def _method_result(self, func: cst.Attribute, scope, bound: frozenset[str]) -> str:
        receiver = self._classify(func.value, scope, bound)
        if receiver == LAYER:
            return LAYER if func.attr.value in MODULE_RETURNING_METHODS else OPAQUE
        return OTHER if receiver == OTHER else OPAQUE

    def _classify_imported(self, call: cst.Call, qualified: set[str], scope, bound: frozenset[str]) -> str:
        for name in sorted(qualified):
            parts = name.split(".")
            if name in NN_MODULE_FUNCTIONS:
                return LAYER
            if parts[:2] == ["torch", "nn"] and len(parts) >= 3:
                last = parts[-1]
                if not last[:1].isupper():
                    return OTHER  # functional, init, utils: tensors
                if last in NN_PARAMETER_CLASSES:
                    return PARAM
                if last in NN_NON_MODULE_CLASSES:
                    return OTHER
                if len(parts) == 3 or parts[2] in NN_MODULE_PACKAGES:
                    return LAYER
                return OTHER
            if name.startswith(TORCH_MAY_BE_MODULE):
                return UNKNOWN
            if parts[0] == "torch":
                return OTHER
            if name in COPY_FUNCTIONS:
                args = _cst.positional_args(call)
                if len(args) == 1:
                    inner = self._classify(args[0].value, scope, bound)
                    return UNKNOWN if inner == OPAQUE else inner
                return UNKNOWN
            if name.startswith(NON_LAYER_MODULES):
                return OTHER
        return UNKNOWN

    def _where_bound(self, name: str, scope, bound: frozenset[str] = frozenset()) -> str:
        """Where ``name`` is bound as seen from ``scope``: "local" (a parameter, an assignment, a
        loop or comprehension variable), "imported" (an import, at module level or local),
        "module" (a module-level class, function or variable) or "builtin" (anything else)."""
        if name in bound:
            return "local"
        if scope is not None:
            found = self._local_bindings(scope).get(name, "global")
            if found != "global":
                return found
        if name in self._module_imports:
            return "imported"
        if name in self._classes or name in self._functions or name in self._module_assigned:
            return "module"
        return "builtin"

    def _local_bindings(self, scope: cst.FunctionDef) -> dict[str, str]:
        """Name → "local" or "imported" for every name ``scope`` binds in its own scope (its
        parameters, then its first binding in source order decides), from one walk of it."""
        if id(scope) not in self._where_cache:
            found = {p.name.value: "local" for p in _cst.all_params(scope)}
            for node in walk_function(scope):
                kind = "imported" if isinstance(node, (cst.Import, cst.ImportFrom)) else "local"
                for name in names_bound_by(node):
                    found.setdefault(name, kind)
            self._where_cache[id(scope)] = found
        return self._where_cache[id(scope)]

    def _builtin(self, func: cst.BaseExpression, scope) -> str | None:
        """``len`` for a call of the builtin ``len`` (a bare name bound nowhere in the file)."""
        if isinstance(func, cst.Name) and self._where_bound(func.value, scope) == "builtin":
            return func.value
        return None

    def _classify_returns(self, func: cst.FunctionDef) -> str:
        if id(func) in self._returns_cache:
            return self._returns_cache[id(func)]
        if id(func) in self._in_progress:
            return OPAQUE
        self._in_progress.add(id(func))
        found = {
            self._classify(n.value, func, frozenset()) if n.value is not None else NONE
            for n in walk_function(func) if isinstance(n, cst.Return)
        }
        self._in_progress.discard(id(func))
        result = _combine(found) if found else OTHER
        if result == NONE:
            result = OTHER
        if result == REGISTERED:
            result = OPAQUE
        self._returns_cache[id(func)] = result
        return result

    def _classify_local(self, name: str, scope: cst.FunctionDef) -> str:
        key = ("local", id(scope), name)
        if key in self._in_progress:
            return OPAQUE
        if any(p.name.value == name for p in _cst.all_params(scope)):
            return OPAQUE
        values: list[cst.BaseExpression] = []
        for node in walk_function(scope):
            binding = binding_of(node, name)
            if binding is False:
                return OPAQUE
            if binding is not None:
                values.append(binding)
            if isinstance(node, cst.Assign) and m.matches(node.value, m.Name(name)) and any(
                self_attr(t.target) is not None for t in node.targets
            ):
                return REGISTERED  # also stored on self: registered there (or a container rewrite of its own)
        if not values:
            return OPAQUE
        self._in_progress.add(key)
        try:
            found = {self._classify(v, scope, frozenset()) for v in values}
        finally:
            self._in_progress.discard(key)
        if name in self._registered_names_in(scope):
            return REGISTERED
        return _combine(found)

    def _registered_names_in(self, scope: cst.FunctionDef) -> set[str]:
        """Names passed to a layer (``nn.Sequential(*layers)``) or walked by ``add_module`` /
        ``register_module`` / ``setattr(self, ...)`` in ``scope``: registered already."""
        if id(scope) in self._registered_cache:
            return self._registered_cache[id(scope)]
        names: set[str] = set()
        self._registered_cache[id(scope)] = names
        for node in walk_function(scope):
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if m.matches(func, m.Attribute(m.Name("self"), m.Name())) and cst.ensure_type(func, cst.Attribute).attr.value in REGISTERING_CALLS or (
                self._builtin(func, scope) == "setattr"
            ):
                names.update(n.value for n in _cst.walk(self._loop_region(node)) if isinstance(n, cst.Name))
            elif self._classify_call(node, scope) == LAYER:
                for arg in node.args:
                    names.update(n for k, n in _container_refs(arg.value) if k == "local")
        return names

    # -- a local list stored on self afterwards --------------------------------------------------------
    def _local_container(self, name: str, assign: cst.CSTNode, scope: cst.FunctionDef):
        """(kind, elements, registered, problem) for ``self.x = name`` where ``name`` is a local
        bound once to a list/dict display and filled; ``problem`` says why the rewrite would not
        behave the same (the list changed after being stored). None when ``name`` is not such a
        local list."""
        if any(p.name.value == name for p in _cst.all_params(scope)):
            return None
        statement = self._parents.get(id(assign))
        index = next((i for i, s in enumerate(scope.body.body) if s is statement), None)
        kind: str | None = None
        elements: list[_Element] = []
        stores = 0
        problem: str | None = None if index is not None else (
            f"it is stored from the local `{name}` inside a block; wrap the list where it is built"
        )
        for node in self._binding_and_filling_nodes(scope):
            if isinstance(node, cst.Assign) and m.matches(node.value, m.Name(name)):
                stores += sum(1 for t in node.targets if self_attr(t.target) is not None)
            binding = binding_of(node, name)
            if binding is False or (binding is not None and kind is not None):
                return None
            if binding is not None:
                if isinstance(binding, (cst.List, cst.ListComp)):
                    kind, elements = "list", elements + self._iterable_elements(binding, scope)
                elif isinstance(binding, (cst.Dict, cst.DictComp)):
                    kind, elements = "dict", elements + self._dict_elements(binding, scope)
                else:
                    return None
                position = self._top_index(node, scope)
            else:
                fill = self._local_fill(node, name, scope)
                if fill is None:
                    continue
                elements.extend(fill)
                position = self._top_index(node, scope)
            if problem is None and (position is None or position >= cst.ensure_type(index, int)):
                problem = (f"the local `{name}` is changed after it is stored on self, and a registered "
                           f"container would be a copy that misses the change")
        if kind is None or stores != 1:
            return None
        elements = [e for e in elements if e.is_dict_item == (kind == "dict")]
        return kind, elements, name in self._registered_names_in(scope), problem

    def _binding_and_filling_nodes(self, scope: cst.FunctionDef) -> list[cst.CSTNode]:
        """The nodes of ``scope`` (:func:`walk_function`, in its order) that may bind a name
        (:func:`binding_of`) or fill a container (:meth:`_local_fill`); for every other node
        both answer None. Listed once per function, for every local asked about."""
        if id(scope) not in self._filling_nodes:
            self._filling_nodes[id(scope)] = [
                n for n in walk_function(scope)
                if isinstance(n, _BINDING_OR_FILLING) and (not isinstance(n, cst.Call) or isinstance(n.func, cst.Attribute))
            ]
        return self._filling_nodes[id(scope)]

    def _local_fill(self, node: cst.CSTNode, name: str, scope) -> list[_Element] | None:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and m.matches(node.func.value, m.Name(name)):
            method = node.func.attr.value
            args = _cst.positional_args(node)
            if method in ("append", "insert") and args:
                return [_Element(args[-1].value, scope)]
            if method == "extend" and len(args) == 1:
                return self._iterable_elements(args[0].value, scope)
            if method == "update":
                return self._dict_elements_of_update(node, scope)
            if method in ("pop", "remove", "clear", "sort", "reverse", "setdefault", "popitem"):
                return []
            return None
        if isinstance(node, cst.AugAssign) and m.matches(node.target, m.Name(name)):
            return self._iterable_elements(node.value, scope)
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Subscript) and m.matches(target.target.value, m.Name(name)):
                    index = target.target.slice[0].slice if len(target.target.slice) == 1 else None
                    key = index.value if isinstance(index, cst.Index) else None
                    return [_Element(node.value, scope), _Element(node.value, scope, key=key, is_dict_item=True)]
        if isinstance(node, cst.Del) and any(
            isinstance(s, cst.Subscript) and m.matches(s.value, m.Name(name)) for s in _cst.walk(node.target)
        ):
            return []
        return None

    def _top_index(self, node: cst.CSTNode, scope: cst.FunctionDef) -> int | None:
        """Index of the top-level statement of ``scope`` that contains ``node``."""
        body = scope.body.body
        current: cst.CSTNode | None = node
        while current is not None:
            for i, stmt in enumerate(body):
                if stmt is current:
                    return i
            current = self._parents.get(id(current))
        return None

    # -- context ----------------------------------------------------------------------------------------
    def _scope_of(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost function around ``node`` in the class being analysed, None inside a
        lambda."""
        parent = self._parents.get(id(node))
        return None if parent is None else self._inner_function[id(parent)]

    def _in_instance_method(self, node: cst.CSTNode) -> bool:
        method = self._method_of(node)
        if method is None:
            return False
        if id(method) not in self._instance_methods:
            params = [*method.params.posonly_params, *method.params.params]
            self._instance_methods[id(method)] = (
                bool(params) and params[0].name.value == "self"
                and not _cst.decorator_names(method) & {"staticmethod", "classmethod"}
            )
        return self._instance_methods[id(method)]

    def _method_of(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The outermost function around ``node`` in the class being analysed (its method)."""
        parent = self._parents.get(id(node))
        return None if parent is None else self._outer_function[id(parent)]

    def _loop_region(self, node: cst.CSTNode) -> cst.CSTNode:
        """The outermost loop around ``node`` in its function, else its statement."""
        region = node
        current = self._parents.get(id(node))
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            if isinstance(current, (cst.For, cst.While)):
                region = current
            elif isinstance(current, cst.SimpleStatementLine) and region is node:
                region = current
            current = self._parents.get(id(current))
        return region

    def _check_repeat(self, node: cst.BinaryOperation, scope) -> None:
        """``[nn.Linear(4, 4)] * 3``: one layer object, three times."""
        if not isinstance(node.operator, cst.Multiply) or id(node) in self._reported_repeats:
            return
        for operand in (node.left, node.right):
            if isinstance(operand, cst.List):
                inner = {self._classify(e.value, scope, frozenset()) for e in operand.elements if not isinstance(e, cst.StarredElement)}
                if inner & {LAYER, PARAM}:
                    self._reported_repeats.add(id(node))
                    self._manual(
                        node,
                        f"`{_short(node)}` repeats the same layer object: the copies share one set of weights "
                        f"(and a plain list hides them from .to(), .parameters() and state_dict()); build distinct "
                        f"layers with a comprehension in nn.ModuleList",
                    )
                    return

    # -- naming the container ---------------------------------------------------------------------------
    def _spelling(self, target: str) -> tuple[str, bool] | None:
        """How to write ``target`` here, and whether ``from torch.nn import <target>`` must be added:
        the name a ``from torch.nn import`` binds, else ``<nn alias>.<target>``, else the bare name
        with an import (when the file uses that name for nothing else)."""
        direct = from_import_of(self._module, NN_PACKAGES, target)
        if direct is not None:
            return direct, False
        alias = _cst.nn_alias(self._module)
        if alias is not None:
            return f"{alias}.{target}", False
        if target not in self._all_names():
            return target, True
        return None

    def _all_names(self) -> set[str]:
        if self._names is None:
            self._names = _cst.all_names(self._module)
        return self._names


# -- small pure helpers ------------------------------------------------------------------------------------
def _module_bindings(module: cst.Module) -> tuple[set[str], set[str]]:
    """Names bound at module level by imports, and by assignments (anywhere outside functions
    and classes: ``if``/``try`` blocks included)."""
    imports: set[str] = set()
    assigned: set[str] = set()
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Import):
            for alias in node.names:
                imports.add(cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname
                            else (_cst.dotted_name(alias.name) or "").split(".")[0])
        elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname else alias.name
                imports.add(_cst.dotted_name(cst.ensure_type(bound, cst.BaseExpression)) or "")
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.WithItem, cst.NamedExpr)):
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign)
                else [node.asname.name] if isinstance(node, cst.WithItem) and node.asname is not None
                else [] if isinstance(node, cst.WithItem) else [node.target]
            )
            for target in targets:
                assigned.update(n.value for n in unpacked_names(target))
        stack.extend(_cst.children(node))
    return imports, assigned



def _combine(found: Iterable[str]) -> str:
    found = set(found)
    if REGISTERED in found:
        return REGISTERED
    for kind in (UNKNOWN, NESTED):
        if kind in found:
            return kind
    if found <= {LAYER, NONE} and LAYER in found:
        return LAYER
    if len(found) == 1:
        return found.pop()
    return OPAQUE


def _nested(inner: set[str]) -> str:
    if inner & {LAYER, PARAM, NESTED}:
        return NESTED
    if inner <= {OTHER, NONE}:
        return OTHER
    return OPAQUE


def _comprehension_names(comp: cst.BaseComp | cst.DictComp) -> frozenset[str]:
    names: set[str] = set()
    for_in: cst.CompFor | None = comp.for_in
    while for_in is not None:
        names.update(n.value for n in _cst.walk(for_in.target) if isinstance(n, cst.Name))
        for_in = for_in.inner_for_in
    return frozenset(names)


def _container_refs(value: cst.BaseExpression) -> set[tuple[str, str]]:
    """Containers whose items ``value`` hands over: ``x``, ``self.x``, ``x[1:]``, ``list(x)``,
    ``[b for b in x]``, ``(*x, y)``."""
    name = self_attr(value)
    if name is not None:
        return {("self", name)}
    if isinstance(value, cst.Name):
        return {("local", value.value)}
    if isinstance(value, cst.Subscript):
        return _container_refs(value.value)
    if isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
        refs: set[tuple[str, str]] = set()
        for_in: cst.CompFor | None = value.for_in
        while for_in is not None:
            refs |= _container_refs(for_in.iter)
            for_in = for_in.inner_for_in
        return refs
    if isinstance(value, cst.Call) and _cst.dotted_name(value.func) in ITERATING_BUILTINS:
        return {r for a in value.args for r in _container_refs(a.value)}
    if isinstance(value, (cst.List, cst.Tuple)):
        return {r for e in value.elements for r in _container_refs(e.value)}
    if isinstance(value, cst.StarredElement):
        return _container_refs(value.value)
    return set()


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(_cst.code_of(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- stage 1 ---------------------------------------------------------------------------------
CONTAINER_DISPLAYS = (ast.List, ast.ListComp, ast.Dict, ast.DictComp)


def _may_be_container(value: ast.expr, func: ast.AST) -> bool:
    if isinstance(value, CONTAINER_DISPLAYS):
        return True
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        return (ast_scan.full_name(value.func) or "").rpartition(".")[2] in ("list", "dict")
    if isinstance(value, ast.Name):
        return any(isinstance(bound, CONTAINER_DISPLAYS) for bound in values_bound_to(value.id, func))
    return False

"""What a value put in a container on ``self`` is: a layer, an ``nn.Parameter``, or not.

TFD004 (:mod:`~torchfix_device.codemods.unregistered_layer_container`) rewrites a plain list or
dict of layers only when this file shows what its elements are. :class:`LayerEvidence` answers,
for one expression in a method of the class being analysed, with one of the element kinds below
(``LAYER``, ``PARAM``, ``NONE``, ``OTHER``, ``OPAQUE``, ``REGISTERED``, ``UNKNOWN``, ``NESTED``),
from this file alone: ``torch.nn`` classes and functions by qualified name, ``nn.Module``
subclasses of the file, functions and methods of the file by what they return, locals by what
they are bound to. It also says which names are registered already (passed to a layer, or walked
by ``add_module`` / ``register_module`` / ``setattr``): their layers are not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax.bindings import (
    binding_of,
    methods,
    names_bound_by,
    self_attr,
    unpacked_names,
    walk_function,
)
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

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
REGISTERING_CALLS = {"add_module", "register_module", "register_parameter"}
ITERATING_BUILTINS = {"list", "tuple", "reversed", "iter", "sorted", "zip", "enumerate"}


@dataclass
class Element:
    """A value put in a container, with where it is evaluated."""

    value: cst.BaseExpression | None
    """None: a value the code does not show (``**other``, ``*rest``, ``update(other)``)."""
    scope: cst.FunctionDef | None
    bound: frozenset[str] = frozenset()
    """Names bound by enclosing comprehensions (not the function's locals)."""
    key: cst.BaseExpression | None = None
    is_dict_item: bool = False
    items: bool = False
    """``value`` is an iterable whose items are the elements (``extend(make_blocks())``)."""


class LayerEvidence:
    """The element kind of values in one file; :meth:`enter_class` before asking about a class.

    Every answer is cached for the file (by node identity): make one per module visited."""

    def __init__(
        self,
        module: cst.Module,
        qualified_names: Callable[[cst.CSTNode], set[str]],
        module_class_names: Callable[[], set[str]],
    ) -> None:
        self._qualified_names = qualified_names
        """The visiting codemod's :meth:`~torchfix_device.codemods.base.Codemod.qualified_names`."""
        self._module_class_names = module_class_names
        """The names of the file's ``nn.Module`` subclasses (asked when needed)."""
        self._functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
        self._classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef)}
        self._module_imports, self._module_assigned = _module_bindings(module)
        self._where_cache: dict[int, dict[str, str]] = {}
        self._call_cache: dict[int, str] = {}
        self._returns_cache: dict[int, str] = {}
        self._in_progress: set[object] = set()
        self._registered_cache: dict[int, set[str]] = {}
        self._class_methods: dict[str, cst.FunctionDef] = {}
        self._parents: dict[int, cst.CSTNode] = {}

    def enter_class(self, cls: cst.ClassDef, parents: dict[int, cst.CSTNode]) -> None:
        """Answer about ``cls`` from now on: ``self.f(...)`` calls its method ``f``; ``parents``
        maps every node of the class to its parent."""
        self._class_methods = {f.name.value: f for f in methods(cls)}
        self._parents = parents

    # -- the kind of one value ------------------------------------------------------------------------
    def classify_element(self, element: Element) -> str:
        if element.value is None:
            return OPAQUE
        if element.items:
            return self._classify_items(element.value, element.scope)
        return self.classify(element.value, element.scope, element.bound)

    def _classify_items(self, value: cst.BaseExpression, scope) -> str:
        """What the items of the iterable ``value`` are."""
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return _combine(
                self.classify(e.value, scope, frozenset()) if not isinstance(e, cst.StarredElement) else OPAQUE
                for e in value.elements
            ) if value.elements else OTHER
        if isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.classify(value.elt, scope, comprehension_names(value))
        key = ("items", id(value))
        if key in self._in_progress:
            return OPAQUE
        self._in_progress.add(key)
        try:
            if isinstance(value, cst.Name) and scope is not None:
                if any(p.name.value == value.value for p in nodes.all_params(scope)):
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
                found = self.classify_call(value, scope)
                return found if found in (OTHER, UNKNOWN) else OPAQUE
            return OPAQUE
        finally:
            self._in_progress.discard(key)

    def _same_file_function(self, func: cst.BaseExpression, scope) -> cst.FunctionDef | None:
        """The method (``self.f``) or module-level function (``f``) of this file ``func`` names."""
        method = self_attr(func)
        if method is not None:
            return self._class_methods.get(method)
        dotted = nodes.dotted_name(func)
        if isinstance(func, cst.Name) and dotted in self._functions and self._where_bound(func.value, scope) == "module":
            return self._functions[dotted]
        return None

    def classify(self, value: cst.BaseExpression, scope, bound: frozenset[str]) -> str:
        if nodes.is_none(value):
            return NONE
        if isinstance(value, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                              cst.FormattedString, cst.Lambda, cst.Comparison, cst.Ellipsis)):
            return OTHER
        if m.matches(value, m.Name("True") | m.Name("False")):
            return OTHER
        if isinstance(value, cst.UnaryOperation):
            return OTHER if self.classify(value.expression, scope, bound) == OTHER else OPAQUE
        if isinstance(value, cst.BinaryOperation):
            left = self.classify(value.left, scope, bound)
            right = self.classify(value.right, scope, bound)
            if isinstance(value.operator, cst.Multiply) and {left, right} & {NESTED}:
                return REGISTERED  # ``[layer] * n``: reported on its own, never rewritten
            return OTHER if left == right == OTHER else OPAQUE
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            inner = {self.classify(e.value, scope, bound) for e in value.elements if not isinstance(e, cst.StarredElement)}
            return _nested(inner)
        if isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return _nested({self.classify(value.elt, scope, bound | comprehension_names(value))})
        if isinstance(value, cst.Dict):
            inner = {self.classify(e.value, scope, bound) for e in value.elements if isinstance(e, cst.DictElement)}
            return _nested(inner)
        if isinstance(value, cst.DictComp):
            return _nested({self.classify(value.value, scope, bound | comprehension_names(value))})
        if isinstance(value, cst.IfExp):
            return _combine({self.classify(value.body, scope, bound), self.classify(value.orelse, scope, bound)})
        if isinstance(value, cst.Call):
            return self.classify_call(value, scope, bound)
        if isinstance(value, cst.Name):
            if value.value in bound or scope is None:
                return OPAQUE
            return self._classify_local(value.value, scope)
        if self_attr(value) is not None:
            return REGISTERED  # ``self.fc1``: an attribute, registered on its own if it is a layer
        return OPAQUE

    def classify_call(self, call: cst.Call, scope, bound: frozenset[str] = frozenset()) -> str:
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
        dotted = nodes.dotted_name(func)
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
            return self._classify_imported(call, self._qualified_names(func), scope, bound)
        if where == "module":
            if not isinstance(func, cst.Name):
                return UNKNOWN  # ``Block.from_config(...)``
            if dotted in self._module_class_names():
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
        receiver = self.classify(func.value, scope, bound)
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
                args = nodes.positional_args(call)
                if len(args) == 1:
                    inner = self.classify(args[0].value, scope, bound)
                    return UNKNOWN if inner == OPAQUE else inner
                return UNKNOWN
            if name.startswith(NON_LAYER_MODULES):
                return OTHER
        return UNKNOWN

    # -- where a name is bound ------------------------------------------------------------------------
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
            found = {p.name.value: "local" for p in nodes.all_params(scope)}
            for node in walk_function(scope):
                kind = "imported" if isinstance(node, (cst.Import, cst.ImportFrom)) else "local"
                for name in names_bound_by(node):
                    found.setdefault(name, kind)
            self._where_cache[id(scope)] = found
        return self._where_cache[id(scope)]

    def builtin(self, func: cst.BaseExpression, scope) -> str | None:
        """``len`` for a call of the builtin ``len`` (a bare name bound nowhere in the file)."""
        if isinstance(func, cst.Name) and self._where_bound(func.value, scope) == "builtin":
            return func.value
        return None

    # -- what functions return, what locals hold, which names are registered ------------------------
    def _classify_returns(self, func: cst.FunctionDef) -> str:
        if id(func) in self._returns_cache:
            return self._returns_cache[id(func)]
        if id(func) in self._in_progress:
            return OPAQUE
        self._in_progress.add(id(func))
        found = {
            self.classify(n.value, func, frozenset()) if n.value is not None else NONE
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
        if any(p.name.value == name for p in nodes.all_params(scope)):
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
            found = {self.classify(v, scope, frozenset()) for v in values}
        finally:
            self._in_progress.discard(key)
        if name in self.registered_names_in(scope):
            return REGISTERED
        return _combine(found)

    def registered_names_in(self, scope: cst.FunctionDef) -> set[str]:
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
                self.builtin(func, scope) == "setattr"
            ):
                names.update(n.value for n in traversal.walk(self.loop_region(node)) if isinstance(n, cst.Name))
            elif self.classify_call(node, scope) == LAYER:
                for arg in node.args:
                    names.update(n for k, n in container_refs(arg.value) if k == "local")
        return names

    def loop_region(self, node: cst.CSTNode) -> cst.CSTNode:
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
                            else (nodes.dotted_name(alias.name) or "").split(".")[0])
        elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname else alias.name
                imports.add(nodes.dotted_name(cst.ensure_type(bound, cst.BaseExpression)) or "")
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.WithItem, cst.NamedExpr)):
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign)
                else [node.asname.name] if isinstance(node, cst.WithItem) and node.asname is not None
                else [] if isinstance(node, cst.WithItem) else [node.target]
            )
            for target in targets:
                assigned.update(n.value for n in unpacked_names(target))
        stack.extend(traversal.children(node))
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


def comprehension_names(comp: cst.BaseComp | cst.DictComp) -> frozenset[str]:
    names: set[str] = set()
    for_in: cst.CompFor | None = comp.for_in
    while for_in is not None:
        names.update(n.value for n in traversal.walk(for_in.target) if isinstance(n, cst.Name))
        for_in = for_in.inner_for_in
    return frozenset(names)


def container_refs(value: cst.BaseExpression) -> set[tuple[str, str]]:
    """Containers whose items ``value`` hands over: ``x``, ``self.x``, ``x[1:]``, ``list(x)``,
    ``[b for b in x]``, ``(*x, y)``."""
    name = self_attr(value)
    if name is not None:
        return {("self", name)}
    if isinstance(value, cst.Name):
        return {("local", value.value)}
    if isinstance(value, cst.Subscript):
        return container_refs(value.value)
    if isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
        refs: set[tuple[str, str]] = set()
        for_in: cst.CompFor | None = value.for_in
        while for_in is not None:
            refs |= container_refs(for_in.iter)
            for_in = for_in.inner_for_in
        return refs
    if isinstance(value, cst.Call) and nodes.dotted_name(value.func) in ITERATING_BUILTINS:
        return {r for a in value.args for r in container_refs(a.value)}
    if isinstance(value, (cst.List, cst.Tuple)):
        return {r for e in value.elements for r in container_refs(e.value)}
    if isinstance(value, cst.StarredElement):
        return container_refs(value.value)
    return set()

"""Which plain lists and dicts an ``nn.Module`` class keeps on ``self``, and what goes in them.

For TFD004 (:mod:`~torchfix_device.codemods.unregistered_layer_container`), :class:`ContainerFinder`
walks the instance methods of one class once and gathers, per attribute ``self.NAME``: the
assignments of a list or dict to it (a display, a comprehension, ``list()`` / ``dict()``, or a
local list filled and then stored on ``self``), the elements put in it anywhere in the class
(``append`` / ``extend`` / ``insert`` / ``+=`` / ``self.NAME[k] = ...`` / ``update``), and what is
done with it (methods, operators, ``isinstance``, ``del``). Attributes registered by hand already
(walked by ``add_module`` / ``register_module`` / ``setattr``, or passed to a layer outside
``forward``) are left out, and ``[layer] * n`` is noted. It decides nothing: what the elements are
is :mod:`~torchfix_device.facts.layers`'s answer, whether to rewrite is the codemod's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from torchfix_device.facts.layers import (
    LAYER,
    PARAM,
    REGISTERING_CALLS,
    Element,
    LayerEvidence,
    comprehension_names,
    container_refs,
)
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device.syntax.bindings import binding_of, self_attr, walk_class, walk_function

_BINDING_OR_FILLING = (
    cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.WithItem, cst.Global, cst.Nonlocal,
    cst.NamedExpr, cst.Import, cst.ImportFrom, cst.Call, cst.Del,
)
"""Node types :func:`binding_of` or ``_local_fill`` can answer for with anything but None."""


@dataclass
class Site:
    """One assignment ``self.NAME = value`` (or ``self.NAME: T = value``)."""

    node: cst.Assign | cst.AnnAssign
    value: cst.BaseExpression
    scope: cst.FunctionDef | None
    kind: str | None = None
    """"list" / "dict" for a container this codemod can rewrite, else None."""
    empty: bool = False
    elements: list[Element] = field(default_factory=list)
    registered_local: bool = False
    problem: str | None = None
    """Why rewriting this site would change behaviour (reported instead)."""


@dataclass
class Attr:
    """What the methods of the class do with one attribute ``self.NAME``."""

    sites: list[Site] = field(default_factory=list)
    fills: list[tuple[str, Element]] = field(default_factory=list)
    """(container kind the fill implies, element)."""
    uses: dict[str, cst.CSTNode] = field(default_factory=dict)
    """Methods and operators used on ``self.NAME`` → where."""
    complex: bool = False
    """Assigned in a form that cannot be followed (``self.a = self.b = []``, tuple targets)."""


class ContainerFinder:
    """The containers of the classes of one file (caches by node identity: one per module)."""

    def __init__(self, evidence: LayerEvidence) -> None:
        self._evidence = evidence
        self._filling_nodes: dict[int, list[cst.CSTNode]] = {}
        self._instance_methods: dict[int, bool] = {}
        self._seen_repeats: set[int] = set()

    def find(self, cls: cst.ClassDef) -> tuple[dict[str, Attr], list[cst.BinaryOperation]]:
        """The attributes of ``cls`` assigned a list or dict, or filled like one (name →
        evidence; attributes registered by hand left out), and its ``[layer] * n`` (each
        node once per file). Sets :meth:`LayerEvidence.enter_class` for ``cls``."""
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
        self._evidence.enter_class(cls, parents)
        attrs: dict[str, Attr] = {}
        registered_attrs: set[str] = set()
        repeats: list[cst.BinaryOperation] = []

        def attr(name: str) -> Attr:
            return attrs.setdefault(name, Attr())

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
                            attr(owner).fills.append(("list", Element(node.value, scope)))
                            attr(owner).fills.append(("dict", Element(node.value, scope, key=key, is_dict_item=True)))
                    else:
                        for sub in traversal.walk(target.target):
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
                        attr(name).uses.setdefault(_nodes.code_of(node.operator).strip(), node)
            elif isinstance(node, cst.Attribute):
                owner = self_attr(node.value)
                if owner is not None:
                    attr(owner).uses.setdefault(node.attr.value, node)
            elif isinstance(node, cst.BinaryOperation):
                for side, operand in (("left", node.left), ("right", node.right)):
                    owner = self_attr(operand)
                    if owner is not None:
                        op = _nodes.code_of(node.operator).strip()
                        attr(owner).uses.setdefault(op if side == "left" else f"r{op}", node)
                if self._repeats_a_layer(node, scope):
                    repeats.append(node)
            elif isinstance(node, cst.Del):
                for sub in traversal.walk(node.target):
                    owner = self_attr(sub.value) if isinstance(sub, cst.Subscript) else None
                    if owner is not None:
                        attr(owner).uses.setdefault("del", node)
            elif isinstance(node, cst.Call):
                self._collect_call(node, scope, attr, registered_attrs)

        return {name: info for name, info in attrs.items() if name not in registered_attrs}, repeats

    def _collect_call(self, node: cst.Call, scope, attr, registered_attrs: set[str]) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            owner = self_attr(func.value)
            if owner is not None:
                method = func.attr.value
                args = _nodes.positional_args(node)
                if method in ("append", "insert") and args and not _nodes.has_star_args(node):
                    attr(owner).fills.append(("list", Element(args[-1].value, scope)))
                elif method == "extend" and len(args) == 1:
                    attr(owner).fills.extend(("list", e) for e in self._iterable_elements(args[0].value, scope))
                elif method == "update":
                    for e in self._dict_elements_of_update(node, scope):
                        attr(owner).fills.append(("dict", e))
        builtin = self._evidence.builtin(func, scope)
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
            region = self._evidence.loop_region(node)
            for sub in traversal.walk(region):
                name = self_attr(sub)
                if name is not None:
                    registered_attrs.add(name)
            return
        # Passed to a layer (``nn.Sequential(*self.blocks)``) outside ``forward``: registered there.
        if self._evidence.classify_call(node, scope) == LAYER:
            method = self._method_of(node)
            if method is None or method.name.value != "forward":
                for arg in node.args:
                    registered_attrs.update(n for k, n in container_refs(arg.value) if k == "self")

    def _repeats_a_layer(self, node: cst.BinaryOperation, scope) -> bool:
        """``[nn.Linear(4, 4)] * 3``: one layer object, three times (each node answers True once)."""
        if not isinstance(node.operator, cst.Multiply) or id(node) in self._seen_repeats:
            return False
        for operand in (node.left, node.right):
            if isinstance(operand, cst.List):
                inner = {self._evidence.classify(e.value, scope, frozenset()) for e in operand.elements if not isinstance(e, cst.StarredElement)}
                if inner & {LAYER, PARAM}:
                    self._seen_repeats.add(id(node))
                    return True
        return False

    # -- one attribute ----------------------------------------------------------------------------------
    def _site(self, node: cst.Assign | cst.AnnAssign, value: cst.BaseExpression, scope) -> Site:
        site = Site(node, value, scope)
        if isinstance(value, (cst.List, cst.ListComp)):
            site.kind = "list"
            site.elements = self._iterable_elements(value, scope)
            site.empty = isinstance(value, cst.List) and not value.elements and "#" not in _nodes.code_of(value)
        elif isinstance(value, (cst.Dict, cst.DictComp)):
            site.kind = "dict"
            site.elements = self._dict_elements(value, scope)
            site.empty = isinstance(value, cst.Dict) and not value.elements and "#" not in _nodes.code_of(value)
        elif isinstance(value, cst.Call) and not value.args and self._evidence.builtin(value.func, scope) in ("list", "dict"):
            site.kind = "list" if self._evidence.builtin(value.func, scope) == "list" else "dict"
            site.empty = True
        elif isinstance(value, cst.Name) and scope is not None:
            local = self._local_container(value.value, node, scope)
            if local is not None:
                site.kind, site.elements, site.registered_local, site.problem = local
        return site

    # -- elements ------------------------------------------------------------------------------------
    def _iterable_elements(self, value: cst.BaseExpression, scope) -> list[Element]:
        if isinstance(value, (cst.List, cst.Tuple)):
            return [
                Element(None if isinstance(e, cst.StarredElement) else e.value, scope) for e in value.elements
            ]
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            return [Element(value.elt, scope, comprehension_names(value))]
        return [Element(value, scope, items=True)]

    def _dict_elements(self, value: cst.Dict | cst.DictComp, scope) -> list[Element]:
        if isinstance(value, cst.DictComp):
            return [Element(value.value, scope, comprehension_names(value), key=value.key, is_dict_item=True)]
        return [
            Element(e.value, scope, key=e.key, is_dict_item=True) if isinstance(e, cst.DictElement)
            else Element(None, scope, is_dict_item=True)
            for e in value.elements
        ]

    def _dict_elements_of_update(self, call: cst.Call, scope) -> list[Element]:
        found: list[Element] = []
        for arg in call.args:
            if arg.keyword is not None:
                key = cst.SimpleString(repr(arg.keyword.value))
                found.append(Element(arg.value, scope, key=key, is_dict_item=True))
            elif isinstance(arg.value, (cst.Dict, cst.DictComp)) and not arg.star:
                found.extend(self._dict_elements(arg.value, scope))
            else:
                found.append(Element(None, scope, is_dict_item=True))
        return found

    # -- a local list stored on self afterwards --------------------------------------------------------
    def _local_container(self, name: str, assign: cst.CSTNode, scope: cst.FunctionDef):
        """(kind, elements, registered, problem) for ``self.x = name`` where ``name`` is a local
        bound once to a list/dict display and filled; ``problem`` says why the rewrite would not
        behave the same (the list changed after being stored). None when ``name`` is not such a
        local list."""
        if any(p.name.value == name for p in _nodes.all_params(scope)):
            return None
        statement = self._parents.get(id(assign))
        index = next((i for i, s in enumerate(scope.body.body) if s is statement), None)
        kind: str | None = None
        elements: list[Element] = []
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
        return kind, elements, name in self._evidence.registered_names_in(scope), problem

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

    def _local_fill(self, node: cst.CSTNode, name: str, scope) -> list[Element] | None:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and m.matches(node.func.value, m.Name(name)):
            method = node.func.attr.value
            args = _nodes.positional_args(node)
            if method in ("append", "insert") and args:
                return [Element(args[-1].value, scope)]
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
                    return [Element(node.value, scope), Element(node.value, scope, key=key, is_dict_item=True)]
        if isinstance(node, cst.Del) and any(
            isinstance(s, cst.Subscript) and m.matches(s.value, m.Name(name)) for s in traversal.walk(node.target)
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
                and not _nodes.decorator_names(method) & {"staticmethod", "classmethod"}
            )
        return self._instance_methods[id(method)]

    def _method_of(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The outermost function around ``node`` in the class being analysed (its method)."""
        parent = self._parents.get(id(node))
        return None if parent is None else self._outer_function[id(parent)]

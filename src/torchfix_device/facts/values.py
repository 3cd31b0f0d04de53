"""What names hold, for the facts about values: one resolution of a module, shared by every fact.

Every question about a value (is it a tensor, may it require grad, is it 0-dim, is it on the CPU, may it
be a project object that moves itself) comes to the same few questions about the code: what a name read
at some place may hold (the bindings that reach the read, in the order the code runs: :mod:`.name_flow`),
what a binding binds there (an assignment's value or a part of it, an item of what a loop or comprehension
goes through, a parameter), what a module-level dotted name is (``torch.load`` for ``T.load``, star
imports included: :mod:`.names`). This module answers them once per module version and keeps the answers;
the facts (:mod:`.grad`, :mod:`.kinds`, :mod:`.sizes`, :mod:`.devices`) only say what each form of code
means for their question. :func:`of` gives the one instance of a module version for the codemod that asks.

Names and bindings are libcst's exact answers for any node of the module, given by the codemod that first
asks (the engine's shortcuts where they hold). Code outside the file is not seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import libcst as cst

from torchfix_device import torch_api
from torchfix_device.facts.name_flow import binding_owner, reaching_bindings
from torchfix_device.facts.names import AnyNodeNames
from torchfix_device.facts.tree import TreeFacts, tree_facts
from torchfix_device.syntax import traversal
from torchfix_device.syntax.nodes import is_none

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
VALUE, PART, ITEM, PARAM, AUGMENTED, OTHER = "value", "part", "item", "param", "augmented", "other"


@dataclass(frozen=True)
class Bound:
    """What one binding of a name binds: ``value`` (an expression) for ``kind`` ``VALUE``; for
    ``PART`` the value it is unpacked from (``a, b = pair``: a part of it, not it); the iterable
    whose items it takes for ``ITEM`` (a loop or comprehension target); the function for
    ``PARAM``; for ``AUGMENTED`` (``x += v``) the added value; else nothing shown (``why``)."""

    kind: str
    node: cst.CSTNode
    value: Any = None
    why: str | None = None


@dataclass(frozen=True)
class Reach:
    """The bindings that may hold a name's value at a read (``bindings``, in source order), or why that cannot be
    told (``why``); ``whole``: all are taken (a module's or enclosing function's name read in a function, a comprehension's target)."""

    bindings: tuple[cst.CSTNode, ...] = ()
    scope: cst.CSTNode | None = None
    why: str | None = None
    whole: bool = False


class ModuleValues:
    """The shared resolution of one module version (see the module docstring)."""

    def __init__(self, view: "CodemodView", module: cst.Module) -> None:
        self.view = view
        self.module = module
        self._tree: TreeFacts | None = None
        self._names = AnyNodeNames(view, module, self.parent, self.tree_facet)
        self._reach: dict[int, Reach] = {}
        self._bound: dict[int, Bound] = {}
        self.facets: dict[str, Any] = {}
        """The facts computed on this module version, by name (:meth:`facet`)."""

    def facet(self, name: str, compute: "Callable[[], Any]") -> Any:
        """The fact ``name`` of this module version, computed by ``compute`` the first time."""
        if name not in self.facets:
            self.facets[name] = compute()
        return self.facets[name]

    # -- the tree ---------------------------------------------------------------------------
    @property
    def tree(self) -> TreeFacts:
        """The facts of this tree's syntax, shared with every codemod that visits it."""
        if self._tree is None:
            self._tree = tree_facts(self.module)
        return self._tree

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.tree.parents.get(id(node))

    def tree_facet(self, name: str, compute: "Callable[[], Any]") -> Any:
        """The fact ``name`` of this tree, computed by ``compute`` the first time for every codemod that visits
        the tree: only for facts of the syntax alone (never of names: they may take the asker's shortcuts)."""
        facets = self.tree.facets
        return facets[name] if name in facets else facets.setdefault(name, compute())

    def source_order(self, node: cst.CSTNode) -> tuple:
        """Where ``node`` comes in a walk of the module (binding sets arrive in the order of memory addresses)."""
        return self.tree.place(node)

    def block_of(self, statement: cst.CSTNode) -> tuple[tuple[cst.CSTNode, ...], int] | None:
        """The statements of the block holding ``statement`` and its index there (None: no such block)."""
        body = getattr(self.parent(statement), "body", None)
        if not isinstance(body, (list, tuple)):
            return None
        index = next((i for i, s in enumerate(body) if s is statement), None)
        return (tuple(body), index) if index is not None else None

    def enclosing(self, node: cst.CSTNode, kind: type | tuple[type, ...]) -> cst.CSTNode | None:
        above = self.parent(node)
        while above is not None and not isinstance(above, kind):
            above = self.parent(above)
        return above

    # -- names ------------------------------------------------------------------------------
    def names(self, node: cst.CSTNode, *, ending_in: frozenset[str] | None = None) -> set[str]:
        """The module objects ``node`` may name (libcst's qualified names, star imports included). ``ending_in``
        (last parts, ``{"array"}``): only names ending in one of them are looked at; the others may be left out
        (where the file shows none can end so, no scope analysis of the whole file is made)."""
        return self._names.qualified_names(node, ending_in=ending_in)

    def bindings(self, name: str, node: cst.CSTNode) -> set[Any]:
        """libcst's bindings of ``name`` visible at ``node``."""
        return self._names.bindings(name, node)

    def torch_names(self, func: cst.BaseExpression) -> set[str]:
        """The ``torch.<x>`` / ``torch.nn.functional.<x>`` / ``torch.cuda.<X>Tensor`` names of
        ``func`` (a function of the torch module, not a method); empty otherwise."""
        found = set()
        for q in self.names(func):
            parts = q.split(".")
            if parts[0] == "torch" and (len(parts) == 2 or parts[1:-1] in (["nn", "functional"], ["cuda"])):
                found.add(q)
        return found

    def module_path(self, expr: cst.BaseExpression) -> bool:
        """``torch.utils.data``, ``np.random``: a dotted name rooted in an import."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return False
        found = self.bindings(expr.value, expr)
        return bool(found) and all(isinstance(getattr(b, "node", None), (cst.Import, cst.ImportFrom)) for b in found)

    def legacy_alias(self, func: cst.BaseExpression) -> set[str]:
        """``Tensor`` every binding of which is ``Tensor = torch.cuda.FloatTensor if c else
        torch.FloatTensor``: the legacy types it may be; empty otherwise."""
        found: set[str] = set()
        if not isinstance(func, cst.Name):
            return found
        for binding in self.bindings(func.value, func):
            node = getattr(binding, "node", None)
            owner = binding_owner(node, self.parent) if node is not None else None
            statement = owner[0] if owner is not None else None
            if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and statement.targets[0].target is node
                    and isinstance(statement.value, cst.IfExp)):
                return set()
            for choice in (statement.value.body, statement.value.orelse):
                names = self.torch_names(choice)
                if torch_api.legacy_tensor_type(names) is None or len(names) != 1:
                    return set()
                found |= names
        return found

    # -- what a name holds --------------------------------------------------------------------
    def reach(self, read: cst.Name) -> Reach:
        """The bindings of ``read.value`` that may hold its value at ``read`` (memoised)."""
        known = self._reach.get(id(read))
        if known is None:
            known = self._reach[id(read)] = self._reaching(read)
        return known

    def agreed(self, read: cst.Name, answer: "Callable[[Bound], Any]", past_none: bool = False) -> Any:
        """The one answer ``answer`` gives of every binding that may reach ``read`` (None where one gives
        none, or two differ): a name's kind, dimensionality..., from its bindings'; with ``past_none``,
        of those that bind anything but ``None`` (where ``read`` raises on it: ``total / n``)."""
        reach, found = self.reach(read), set()
        for node in reach.bindings if reach.why is None else ():
            if not (past_none and self.binds_none(node)):
                found.add(answer(self.bound(node)))
            if None in found or len(found) > 1:
                return None
        return found.pop() if found else None

    def _reaching(self, read: cst.Name) -> Reach:
        bindings = [b for b in self.bindings(read.value, read) if getattr(b, "node", None) is not None]
        if not bindings:
            return Reach(why=f"`{read.value}` is not bound in this file")
        nodes = tuple(sorted((b.node for b in bindings), key=self.source_order))
        where = scope_of(read, self.parent)
        homes = {id(home): home for home in (scope_of(n, self.parent) for n in nodes)}
        if len(homes) != 1:
            if any(isinstance(h, cst.Module) for h in homes.values()) and all(
                isinstance(h, cst.Module) or (isinstance(h, cst.FunctionDef) and declares_global(h, read.value)) for h in homes.values()
            ):
                return Reach(nodes, self.module, whole=True)  # a global a function rebinds: any binding, any time
            return Reach(why=f"`{read.value}` is bound in several scopes")
        scope = scope_of(nodes[0], self.parent)
        if isinstance(scope, COMPREHENSIONS):
            return Reach(nodes, scope, whole=True)  # a comprehension's own target
        if scope is where or (isinstance(where, (cst.ListComp, cst.SetComp, cst.DictComp)) and scope_of(where, self.parent) is scope):
            reaching = reaching_bindings(scope, read.value, nodes, read, self.parent, self.tree_facet) if isinstance(scope, (cst.Module, cst.FunctionDef)) else None
            if reaching is None:
                return Reach(why=f"where `{read.value}` was last bound cannot be told")
            if not reaching:
                return Reach(why=f"`{read.value}` may be unbound here")
            return Reach(tuple(reaching), scope)
        if isinstance(scope, (cst.Module, cst.FunctionDef)) and isinstance(where, (cst.FunctionDef, cst.Lambda)):
            return Reach(nodes, scope, whole=True)  # a module's or an enclosing function's name read in a function: any binding
        return Reach(why=f"`{read.value}` comes from an enclosing scope")

    def binds_none(self, node: cst.CSTNode) -> bool:
        """Binding ``node`` binds the literal ``None`` (``total = None``)."""
        return self.bound(node).kind == VALUE and is_none(self.bound(node).value)

    def bound(self, node: cst.CSTNode) -> Bound:
        """What binding ``node`` binds (memoised)."""
        known = self._bound.get(id(node))
        if known is None:
            known = self._bound[id(node)] = self._bind(node)
        return known

    def _bind(self, node: cst.CSTNode) -> Bound:
        name = node.value if isinstance(node, cst.Name) else getattr(getattr(node, "name", None), "value", "it")
        if isinstance(node, cst.Param):
            function = self.enclosing(node, (cst.FunctionDef, cst.Lambda))
            return Bound(PARAM, node, function, f"`{name}` is a parameter of `{function_name(function)}`")
        above = self.parent(node)
        if isinstance(above, cst.NamedExpr) and above.target is node:
            return Bound(VALUE, node, above.value)
        comp = self._comp_for_of(node)
        if comp is not None:
            return Bound(ITEM, node, comp.iter)
        owner = binding_owner(node, self.parent)
        if owner is None:
            return Bound(OTHER, node, why=f"`{name}` is bound where its value is not shown")
        statement = owner[0]
        if isinstance(statement, cst.Assign):
            for target in statement.targets:
                found = part_of(target.target, node, statement.value)
                if found is not None:
                    value, exact = found
                    return Bound(VALUE if exact else PART, node, value)
            return Bound(OTHER, node, why=f"`{name}` is unpacked from a value this file does not show")
        if isinstance(statement, cst.AnnAssign) and statement.value is not None:
            return Bound(VALUE, node, statement.value)
        if isinstance(statement, cst.AugAssign):
            return Bound(AUGMENTED, node, statement.value)
        if isinstance(statement, cst.For):
            return Bound(ITEM, node, statement.iter)
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom)):
            return Bound(OTHER, node, statement, why=f"`{name}` is not bound to a tensor here")
        return Bound(OTHER, node, why=f"`{name}` is bound by a `{type(statement).__name__}` statement")

    def function_called(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The function of this file a call of ``func`` calls: ``func`` is a name whose only
        binding reaching the call is an undecorated, non-async ``def`` (a method's too: callers
        that want a plain function check its parent). None otherwise."""
        function = self._only_binding(func)
        plain = isinstance(function, cst.FunctionDef) and not function.decorators and function.asynchronous is None
        return function if plain else None  # type: ignore[return-value]

    def class_called(self, func: cst.BaseExpression) -> cst.ClassDef | None:
        """The undecorated module-level class of this file a call of the name ``func`` makes an
        instance of, where that class is the only binding reaching the call; None otherwise."""
        cls = self._only_binding(func)
        return cls if isinstance(cls, cst.ClassDef) and not cls.decorators and isinstance(self.parent(cls), cst.Module) else None

    def _only_binding(self, func: cst.BaseExpression) -> cst.CSTNode | None:
        reach = self.reach(func) if isinstance(func, cst.Name) else None
        return reach.bindings[0] if reach is not None and reach.why is None and len(reach.bindings) == 1 else None

    def call_returns(self, call: cst.Call) -> Any:
        """What ``call`` returns (a ``Returned`` of :mod:`.returns`): of a function or class of this file, or of
        another file of the run (the engine's ``view.foreign_returns``), a method of the class of ``self``, a
        function another call returned (:func:`.returns.called_otherwise`); None otherwise or with no summariser."""
        function = self.function_called(call.func)
        if function is not None or not _SUMMARISER:
            return self.function_returns(function) if function is not None else None  # (none installed: nothing)
        cls = self.class_called(call.func)
        if cls is not None:
            return _SUMMARISER[1](self, cls)
        foreign = getattr(self.view, "foreign_returns", None)
        names = self.names(call.func) if foreign is not None else set()
        found = foreign(next(iter(names))) if len(names) == 1 else None
        return found if found is not None else _SUMMARISER[2](self, call)

    def function_returns(self, function: cst.FunctionDef) -> Any:
        """What every ``return`` of ``function`` of this file (a method's too) gives (``Returned``)."""
        return _SUMMARISER[0](self, function) if _SUMMARISER else None

    def returned_parts(self, node: cst.CSTNode) -> list[cst.BaseExpression] | None:
        """For a ``PART`` binding ``a, b = f(...)`` of a function ``f`` of this file
        (:meth:`function_called`) every ``return`` of which gives a tuple
        or list literal of as many elements: the element at ``node``'s place in each ``return``
        (expressions of ``f``, read in its own scope). None otherwise."""
        bound = self.bound(node)
        call = bound.value
        if bound.kind != PART or not isinstance(call, cst.Call):
            return None
        owner = binding_owner(node, self.parent)
        statement = owner[0] if owner is not None else None
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or statement.value is not call:
            return None
        target = statement.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        index = next((i for i, e in enumerate(target.elements) if e.value is node), None)
        function = self.function_called(call.func)
        if index is None or function is None:
            return None
        parts = []
        for ret in traversal.function_returns(function):
            value = ret.value
            if not isinstance(value, (cst.Tuple, cst.List)) or len(value.elements) != len(target.elements) \
                    or any(isinstance(e, cst.StarredElement) for e in value.elements):
                return None
            parts.append(value.elements[index].value)
        return parts or None

    def _comp_for_of(self, node: cst.CSTNode) -> cst.CompFor | None:
        child, above = node, self.parent(node)
        while above is not None and not isinstance(above, cst.BaseStatement):
            if isinstance(above, cst.CompFor) and child is above.target:
                return above
            child, above = above, self.parent(above)
        return None

    def values_of(self, expr: cst.BaseExpression) -> Iterator[cst.BaseExpression | None]:
        """What ``expr`` may be: itself, or for a name the values of the plain assignments
        reaching it (None for a binding that is no plain assignment, or where none is shown)."""
        if not isinstance(expr, cst.Name):
            yield expr
            return
        reach = self.reach(expr)
        if reach.why is not None or not reach.bindings:
            yield None
            return
        for node in reach.bindings:
            owner = binding_owner(node, self.parent)
            statement = owner[0] if owner is not None else None
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1 and statement.targets[0].target is node:
                yield statement.value
            else:
                yield None

    def name_reads(self, scope: cst.CSTNode) -> dict[str, list[cst.Name]]:
        """Every ``Name`` under ``scope`` that is not an attribute's or a keyword's name nor in an
        import (``from data.loader import X`` reads no ``data``), by its name (memoised per scope):
        the places a name may be read."""
        memo = self.tree_facet("name reads", dict)
        known = memo.get(id(scope))
        if known is None:
            known = {}
            imports = traversal.of_classes_under(self.module, scope, cst.Import, cst.ImportFrom)
            spelt = {id(n) for statement in imports for n in traversal.walk(statement)} if imports else ()
            for node in traversal.of_classes_under(self.module, scope, cst.Name):
                if id(node) not in spelt:
                    above = self.parent(node)
                    if not (isinstance(above, cst.Attribute) and above.attr is node or isinstance(above, cst.Arg) and above.keyword is node):
                        known.setdefault(node.value, []).append(node)
            memo[id(scope)] = known
        return known

    def assigned_names(self) -> frozenset[str]:
        """Every name an assignment of the module binds (``x = ...``, ``a, b = ...``,
        ``x: T = ...``, ``x += ...``, ``(x := ...)``), in any scope (memoised): a cheap test
        before resolving a name whose value only an assignment can show (not a parameter, a
        loop target or an import)."""
        def compute() -> frozenset[str]:
            found: set[str] = set()
            for node in traversal.of_classes(self.module, cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.NamedExpr):
                if isinstance(node, cst.AssignTarget):
                    found.update(n.value for n in traversal.walk(node.target) if isinstance(n, cst.Name))
                elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)) and isinstance(node.target, cst.Name):
                    found.add(node.target.value)
            return frozenset(found)

        return self.tree_facet("assigned names", compute)

    def reads_of(self, binding: cst.CSTNode) -> list[cst.Name]:
        """The reads of ``binding``'s name (a ``Name`` or ``Param`` binding) in its scope and the
        scopes inside it that ``binding`` may reach (flow-sensitive, :meth:`reach`), in source
        order; assignment targets are no reads (``x += 1``'s ``x`` is one)."""
        scope = scope_of(binding, self.parent)
        name = binding.name.value if isinstance(binding, cst.Param) else getattr(binding, "value", None)
        if not isinstance(name, str):
            return []
        if isinstance(binding, cst.Param) and isinstance(scope, cst.FunctionDef):
            scope = scope.body
        found = []
        for node in self.name_reads(scope).get(name, ()):
            if node is binding or self.is_target(node):
                continue
            reach = self.reach(node)
            if reach.why is None and any(b is binding for b in reach.bindings):
                found.append(node)
        return found

    def is_target(self, name: cst.Name) -> bool:
        """``name`` is bound, not read, where it stands: an assignment's, loop's, ``with``'s or
        walrus' target (inside a tuple or list of targets too)."""
        child: cst.CSTNode = name
        above = self.parent(name)
        while isinstance(above, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            child, above = above, self.parent(above)
        if isinstance(above, cst.AssignTarget) or isinstance(above, cst.AsName):
            return True
        if isinstance(above, (cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            return above.target is child
        return False


_SUMMARISER: list[Callable[[ModuleValues, Any], Any]] = []
"""The summaries :meth:`ModuleValues.call_returns` gives (of a function, a class, other calls): installed by
:mod:`.returns`, which asks the facts (dimensions, grad, sizes) that ask for calls here, so that none imports it."""


def install_summariser(summarise: Callable[[ModuleValues, cst.FunctionDef], Any], of_class: Callable[[ModuleValues, cst.ClassDef], Any],
                       otherwise: Callable[[ModuleValues, cst.Call], Any]) -> None:
    _SUMMARISER[:] = [summarise, of_class, otherwise]


def of(view: "CodemodView") -> ModuleValues:
    """The :class:`ModuleValues` of the module ``view`` is visiting, one per module version for each codemod:
    every fact the codemod asks, and every helper of it, shares it. (Not shared between codemods: its names of
    any node take the asking codemod's shortcuts where they hold, only in the statements that codemod visits.)"""
    module = view.visited_module
    memo = view.__dict__.setdefault("_facts_memo", {})
    known = memo.get(id(module))
    if known is None or known.module is not module:
        known = memo[id(module)] = ModuleValues(view, module)
    return known


def declares_global(function: cst.FunctionDef, name: str) -> bool:
    """Whether ``function`` declares ``name`` ``global`` (in its own body)."""
    return any(
        isinstance(node, cst.Global) and any(n.name.value == name for n in node.names)
        for node in traversal.walk_statements(function.body)
    )


def function_name(function: cst.CSTNode | None) -> str:
    return function.name.value if isinstance(function, cst.FunctionDef) else "a lambda"


def scope_of(node: cst.CSTNode, parent) -> cst.CSTNode:  # noqa: ANN001
    """The function, lambda, class, comprehension or module whose scope ``node`` is evaluated in
    (a decorator, default or base counts for the scope around; so does a comprehension's first
    iterable)."""
    if isinstance(node, cst.Param):
        above = parent(node)
        while above is not None and not isinstance(above, (cst.FunctionDef, cst.Lambda)):
            above = parent(above)
        return above if above is not None else node
    child, above = node, parent(node)
    while above is not None:
        if isinstance(above, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and child is above.body:
            return above
        if isinstance(above, COMPREHENSIONS):
            first = above.for_in
            if not (child is first and _is_first_iter(node, first, parent)):
                return above
        child, above = above, parent(above)
    return child


def _is_first_iter(node: cst.CSTNode, first: cst.CompFor, parent) -> bool:  # noqa: ANN001
    while node is not None and node is not first:
        if node is first.iter:
            return True
        node = parent(node)
    return False


def part_of(
    target: cst.BaseExpression, node: cst.CSTNode, value: cst.BaseExpression
) -> tuple[cst.BaseExpression, bool] | None:
    """The part of ``value`` that ``node`` (inside assignment target ``target``) is bound to,
    and whether exactly: element-wise through tuple/list literals of the same length (exact),
    else the whole value it is unpacked from (not exact: a part of it). None when ``node`` is
    not in ``target``."""
    if target is node:
        return value, True
    if isinstance(target, (cst.Tuple, cst.List)):
        same_shape = (
            isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements)
            and not any(isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements))
        )
        for index, element in enumerate(target.elements):
            if same_shape:
                found = part_of(element.value, node, value.elements[index].value)
            else:
                inner = part_of(element.value, node, value)
                found = (inner[0], False) if inner is not None else None
            if found is not None:
                return found
    return None

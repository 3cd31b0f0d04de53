"""Scope questions answered without libcst's scope analysis of the whole file.

libcst's ``ScopeProvider`` walks the whole tree and records every assignment and access: on a
big file that costs several parses, and a file rewritten by one codemod needs it again for the
next. Most questions the codemods ask are about one name at one place inside a function, and
two smaller analyses give libcst's own answer:

- the analysis of the outermost function around the place, alone (a module holding only that
  function), tells whether the name resolves to a binding inside it, and to which;
- otherwise (the name is not bound on the way out of that function) the name resolves at
  module level: class bodies are not visible from the functions inside them. The analysis of
  the module's *skeleton* (the module with the body of every function outside functions
  replaced by ``pass``) holds exactly the module-level bindings, since a function body binds a
  module-level name only through ``global``, which the callers rule out (``FastNames``).

The answers are libcst's own objects (``Assignment``), their nodes those of the file's tree.
``TORCHFIX_DEVICE_CHECK_NAMES=1`` compares every answer with the whole-file analysis.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, NamedTuple

import libcst as cst
from libcst.metadata import MetadataWrapper, ScopeProvider
from libcst.metadata.scope_provider import Assignment, BaseAssignment, BuiltinAssignment, GlobalScope, ImportAssignment
from torchfix_device.syntax import batched_visitors  # noqa: F401  (libcst's hooks found once per class)
from torchfix_device.syntax import visits  # noqa: F401  (libcst's visits build only what a hook changed)
from torchfix_device.syntax import traversal

LOCAL = "local"
MODULE = "module"


def scopes_of_function_alone(function: cst.FunctionDef) -> Mapping[cst.CSTNode, Any] | None:
    """libcst's scopes for the nodes of ``function`` from an analysis of a module holding only
    it; None when it declares names ``global`` or ``nonlocal`` (they reach outside it)."""
    if any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in traversal.walk_statements(function)):
        return None
    return MetadataWrapper(cst.Module(body=[function]), unsafe_skip_copy=True).resolve(ScopeProvider)


_TARGETS = {
    cst.AssignTarget: "target", cst.AnnAssign: "target", cst.AugAssign: "target", cst.For: "target",
    cst.CompFor: "target", cst.NamedExpr: "target", cst.AsName: "name", cst.Del: "target", cst.MatchCase: "pattern",
}
"""Where a statement or expression binds names: every name under that field (a generous
superset: ``a.b = 1`` lists ``a``, which binds nothing)."""
_BINDING_WHOLE = tuple(c for c in (cst.Import, cst.ImportFrom, getattr(cst, "TypeParam", None), getattr(cst, "TypeAlias", None)) if c)


def _bound_under(node: cst.CSTNode) -> set[str] | None:
    """A superset of the names bound under ``node`` (its parameters, targets, imports, nested
    definitions, comprehension and ``match`` targets: every name spelt in a target, ``a.b = 1``
    lists ``a``); None when a ``global`` or ``nonlocal`` is there."""
    found: set[str] = set()
    for inner in traversal.walk(node):
        kind = type(inner)
        if kind is cst.Name or kind in (cst.Attribute, cst.Call, cst.Arg):
            continue
        if kind in (cst.Global, cst.Nonlocal):
            return None
        field = _TARGETS.get(kind)
        if field is not None:
            found.update(n.value for n in traversal.walk(getattr(inner, field)) if isinstance(n, cst.Name))
        elif kind is cst.Param or kind is cst.FunctionDef or kind is cst.ClassDef:
            found.add(inner.name.value)
        elif isinstance(inner, _BINDING_WHOLE):
            found.update(n.value for n in traversal.walk(inner) if isinstance(n, cst.Name))
    return found


class FunctionLocals(NamedTuple):
    """What a function's own scope binds, as libcst's analysis of the function alone records it."""

    bound: frozenset[str]
    """A superset of the names some scope inside the function binds, its own name included: a
    name outside it, read in its body, resolves at module level as libcst's analysis of the
    function alone says."""
    simple: dict[str, tuple[cst.CSTNode, ...]]
    """Name → the nodes of its bindings (libcst's ``Assignment.node``: the target ``Name``, the
    ``Param``, the nested ``FunctionDef``/``ClassDef``), for a name the function's own scope binds
    and nothing else inside it does, by the forms read here only (assignments, augmented and
    annotated ones, ``for`` and ``with``/``except ... as`` targets, parameters, nested
    definitions): a name read anywhere in its body resolves to exactly these."""


_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_OTHER_FORMS = (cst.Import, cst.ImportFrom, cst.Del, cst.NamedExpr, cst.MatchCase, *_BINDING_WHOLE)
"""Bindings left to libcst's analysis (its walrus in a comprehension binds there, for one)."""


def function_locals(function: cst.FunctionDef) -> FunctionLocals | None:
    """The :class:`FunctionLocals` of ``function``; None when it declares names ``global`` or
    ``nonlocal`` (they reach outside it)."""
    simple: dict[str, list[cst.CSTNode]] = {}
    other: set[str] = set()
    params = function.params
    parts: list[cst.CSTNode | None] = [*function.decorators, function.returns]
    for param in (*params.posonly_params, *params.params, params.star_arg, *params.kwonly_params, params.star_kwarg):
        if isinstance(param, cst.Param):
            simple.setdefault(param.name.value, []).append(param)
            parts += [param.default, param.annotation]
    outside = [_bound_under(part) for part in parts if part is not None]
    if any(b is None for b in outside):
        return None
    other.update(*outside)  # a walrus in a default binds around the function: left to libcst
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Global or kind is cst.Nonlocal:
            return None
        if isinstance(node, _NESTED) or isinstance(node, _OTHER_FORMS):
            named = kind is cst.FunctionDef or kind is cst.ClassDef
            inner = [_bound_under(child) for child in traversal.children(node)] if named else [_bound_under(node)]
            if any(b is None for b in inner):
                return None
            other.update(*inner)
            if named:
                simple.setdefault(node.name.value, []).append(node)
            continue
        if kind is cst.AssignTarget or kind is cst.AnnAssign or kind is cst.AugAssign or kind is cst.For:
            _stores(node.target, simple, other)
        elif kind is cst.AsName:
            _stores(node.name, simple, other)
        stack.extend(traversal.children(node))
    bound = frozenset({function.name.value, *simple, *other})
    return FunctionLocals(bound, {k: tuple(v) for k, v in simple.items() if k not in other})


def _stores(target: cst.CSTNode, simple: dict[str, list[cst.CSTNode]], other: set[str]) -> None:
    """The names a target binds (libcst's ``STORE`` context: the target itself, or inside a
    tuple, list or starred element); an attribute or subscript binds none."""
    if isinstance(target, cst.Name):
        simple.setdefault(target.value, []).append(target)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _stores(element.value, simple, other)
    elif isinstance(target, cst.StarredElement):
        _stores(target.value, simple, other)
    elif not isinstance(target, (cst.Attribute, cst.Subscript)):
        other.update(n.value for n in traversal.walk(target) if isinstance(n, cst.Name))


def resolution_in_function(
    scopes: Mapping[cst.CSTNode, Any] | None, node: cst.CSTNode, name: str
) -> tuple[str, set[BaseAssignment]] | None:
    """Where ``name``, read at ``node``, resolves, from ``scopes`` (the analysis of the outermost
    function around ``node`` alone): ``(LOCAL, bindings)`` when a scope inside that function
    binds it (libcst's answer), ``(MODULE, set())`` when none does, so that it resolves at
    module level. None when that analysis cannot tell: ``node`` is evaluated outside the
    function's own scopes (a decorator, a default), or the function's module-level part binds
    ``name`` (a walrus in a default)."""
    scope = scopes.get(node) if scopes is not None else None
    if scope is None or isinstance(scope, GlobalScope):
        return None
    found = set(scope[name])
    if not found or all(isinstance(a, BuiltinAssignment) for a in found):
        return MODULE, set()
    if any(isinstance(a, BuiltinAssignment) or isinstance(a.scope, GlobalScope) for a in found):
        return None
    return LOCAL, found


class ModuleSkeleton:
    """The module-level bindings of one module version (see the module docstring)."""

    def __init__(self, module: cst.Module) -> None:
        self._originals: dict[int, cst.CSTNode] = {}
        self.module = _without_function_bodies(module, self._originals)
        scopes = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(ScopeProvider)
        self._global = scopes[self.module]

    def bindings(self, name: str) -> set[BaseAssignment]:
        """libcst's module-level bindings of ``name`` (``GlobalScope.assignments[name]``), with
        the file's own nodes."""
        return {self._original(a) for a in self._global.assignments[name]}

    def _original(self, assignment: BaseAssignment) -> BaseAssignment:
        node = getattr(assignment, "node", None)
        original = self._originals.get(id(node)) if node is not None else None
        if original is None:
            return assignment
        found = copy.copy(assignment)
        found.node = original  # type: ignore[attr-defined]
        return found


def _without_function_bodies(node: cst.CSTNode, originals: dict[int, cst.CSTNode]) -> Any:
    """``node`` with the body of every function not inside a function replaced by ``pass``
    (decorators, parameters with their defaults and annotations kept: they are evaluated where
    the function is defined). Nodes not on the way to such a function are the file's own;
    each rebuilt one is recorded in ``originals`` (``id`` → the node it stands for)."""
    if isinstance(node, cst.FunctionDef):
        stripped = node.with_changes(body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Pass()])]))
        originals[id(stripped)] = node
        return stripped
    if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite, cst.BaseSmallStatement)):
        return node
    changes: dict[str, Any] = {}
    for field in traversal.STATEMENT_FIELDS:
        value = getattr(node, field, None)
        if isinstance(value, cst.CSTNode):
            new = _without_function_bodies(value, originals)
            if new is not value:
                changes[field] = new
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], cst.CSTNode):
            items = [_without_function_bodies(item, originals) for item in value]
            if any(new is not old for new, old in zip(items, value)):
                changes[field] = items
    if not changes:
        return node
    rebuilt = node.with_changes(**changes)
    originals[id(rebuilt)] = node
    return rebuilt


def is_plain_assignment(assignment: BaseAssignment) -> bool:
    """An ``Assignment`` other than an import's."""
    return isinstance(assignment, Assignment) and not isinstance(assignment, ImportAssignment)


def free_at_module_level(module: cst.Module, name: str, scope_of: Any) -> bool:
    """From libcst's scopes (``scope_of(node)``): ``name`` can be bound at module level without
    changing what any code refers to — nothing binds it there, and no read of it resolves to a
    binding that cannot be seen (an undefined name, a star import)."""
    global_scope = scope_of(module)
    if global_scope is None or global_scope.assignments[name]:
        return False
    for node in traversal.of_classes(module, cst.Name):
        if node.value == name:
            scope = scope_of(node)
            if scope is None:
                continue
            for access in scope.accesses[name]:
                if access.node is node and not access.referents:
                    return False
    return True

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
from typing import Any, Mapping

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
    for node in traversal.walk(module):
        if isinstance(node, cst.Name) and node.value == name:
            scope = scope_of(node)
            if scope is None:
                continue
            for access in scope.accesses[name]:
                if access.node is node and not access.referents:
                    return False
    return True

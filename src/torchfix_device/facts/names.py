"""libcst's answers about names, for any node of a module, without its whole-file analysis.

The facts about values (:mod:`torchfix_device.facts.values`) ask about names anywhere in the
file (the module-level ``DataLoader`` a function's loop reads), not only in the statement being
visited, where the engine's own shortcuts hold. libcst's whole-file ``QualifiedNameProvider`` and
``ScopeProvider`` cost more than the rest of the run on a large file, so :class:`AnyNodeNames`
answers qualified names from the codemod's own question where it holds (a node in the function
being visited, or a module-level node asked ``in_module_scope``), and otherwise, bindings
included, from smaller analyses (:mod:`torchfix_device.syntax.scopes`), as the engine does:

- in another function: what its outermost function's own scope binds, read off its statements
  (:func:`~torchfix_device.syntax.scopes.function_locals`: a name nothing in it binds resolves at
  module level; one only its own scope binds, by plain forms, to those bindings), else libcst's
  analysis of that function alone says whether the name is bound there (and by what);
- at module level (outside any class body, lambda or comprehension): the module's own
  statements give the module-level bindings (:mod:`._module_bindings`, checked against the
  analysis of its skeleton with ``TORCHFIX_DEVICE_CHECK_NAMES=1``); a name some function
  declares ``global`` is left to libcst.

Qualified names follow from the bindings: an import's (``ImportAssignment``), ``builtins.x``
for an unbound builtin, none for a local (no module's object). Where these cannot tell, the
exact whole-file answer is asked; with ``TORCHFIX_DEVICE_CHECK_NAMES=1`` every answer is
checked against it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import libcst as cst
from libcst.metadata.scope_provider import Assignment, BuiltinAssignment, ImportAssignment

from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.syntax import qualified_names as fast_names

from torchfix_device.syntax import scopes

from torchfix_device.facts import star_names
from torchfix_device.syntax.module_bindings import ModuleBinding, ModuleBindings, module_bindings
from torchfix_device.syntax.qualified_names import BUILTIN_NAMES, CHECK_FAST_NAMES

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


class AnyNodeNames:
    """``bindings(name, node)`` and ``qualified_names(node)`` for any node of ``module``."""

    def __init__(self, codemod: "CodemodView", module: cst.Module, parent: Callable[[cst.CSTNode], "cst.CSTNode | None"],
                 tree_facet: "Callable[[str, Callable[[], Any]], Any]") -> None:
        self.codemod = codemod
        self.module = module
        self.parent = parent
        self.tree_facet = tree_facet
        """A fact of the tree alone, shared by every codemod that asks it of this tree."""
        self._globals: set[str] | None = None
        self._bound = ModuleBindings({}, set(), True)
        self._outermost: dict[int, tuple[cst.CSTNode | None, bool, bool]] = {}

    def _exact_bindings(self, name: str, node: cst.CSTNode) -> set[Any]:
        """libcst's answer: the codemod's for its own module (the engine's by parts where they tell,
        else the whole-file analysis), the whole file's for another version of it."""
        if self.module is self.codemod.visited_module:
            return self.codemod.bindings_visible_at(name, node)
        return self.codemod.exact_bindings(name, node)

    def _exact_names(self, node: cst.CSTNode) -> set[str]:
        return self.codemod.exact_qualified_names(node)

    def _visited(self, outermost: cst.CSTNode | None) -> bool:
        """``outermost`` is the function the codemod is visiting: its own answers hold there."""
        stack = self.codemod.function_stack
        return outermost is not None and bool(stack) and stack[0] is outermost

    def bindings(self, name: str, node: cst.CSTNode) -> set[Any]:
        """libcst's bindings of ``name`` visible at ``node`` (``scope[name]``)."""
        fast = self._fast_bindings(name, node)
        if fast is None or CHECK_FAST_NAMES:
            exact = self._exact_bindings(name, node)
            if fast is not None:
                assert {id(getattr(a, "node", a)) for a in fast if not isinstance(a, BuiltinAssignment)} == {
                    id(getattr(a, "node", a)) for a in exact if not isinstance(a, BuiltinAssignment)
                }, name
            return exact
        return fast

    def qualified_names(self, node: cst.CSTNode, *, ending_in: frozenset[str] | None = None) -> set[str]:
        """The module objects ``node`` may name (``torch.load`` for ``T.load``); none for a
        local's attribute (libcst's ``f.<locals>.x.y`` names no module's object). ``ending_in``
        (last parts): the caller only looks at names ending in one of them, and may get the
        empty set instead of the others (the codemods' ``qualified_names``)."""
        spelt = nodes.dotted_name(node)  # a name or a chain of attributes of one
        if spelt is None:
            return set()
        outermost, inside, _ = self._outermost_scope(node)
        if self._visited(outermost):
            return self.codemod.qualified_names(node, ending_in=ending_in)
        if outermost is None and not inside:
            return self.codemod.qualified_names(node, ending_in=ending_in, in_module_scope=True)
        root = spelt.partition(".")[0]
        found = [b for b in self.bindings(root, node) if not isinstance(b, BuiltinAssignment)]
        imported = bool(found) and all(isinstance(b, ImportAssignment) or getattr(b, "imported", None) for b in found)
        if not found:
            answer = {f"builtins.{spelt}"} if root in BUILTIN_NAMES else set()
        elif imported:
            answer = {q for b in found for q in _import_names(b, spelt)}
        else:
            answer = set()
        if CHECK_FAST_NAMES and (imported or not found):
            exact = self._exact_names(node)
            assert answer == exact, f"{spelt!r}: {sorted(answer)} != libcst's {sorted(exact)}"
        return star_names.widened(self.codemod.star_imports, node, answer, self.bindings)

    def _fast_bindings(self, name: str, node: cst.CSTNode) -> set[Any] | None:
        outermost, inside, in_body = self._outermost_scope(node)
        if isinstance(outermost, cst.FunctionDef):
            local = self.codemod.function_locals(outermost) if in_body else None
            if local is not None and name not in local.bound:
                return self._module_bindings(name)  # nothing in it binds the name: what its analysis says
            if local is not None and name in local.simple:  # its own scope alone binds it: its analysis's
                # answer (no scope object: the consumers only ask whether a binding's is the global one)
                return {Assignment(name, None, binding, 0) for binding in local.simple[name]}  # type: ignore[arg-type]
            where = scopes.resolution_in_function(self.codemod.scopes_of_function_alone(outermost), node, name)
            if where is None:
                return None
            kind, found = where
            return found if kind == scopes.LOCAL else self._module_bindings(name)
        if inside:
            return None  # a class body, lambda or comprehension at module level
        return self._module_bindings(name)

    def _may_hold_walruses(self) -> bool:
        """False where the code of the module visited spells no ``:=`` (its walk for them is skipped)."""
        code = getattr(self.codemod, "source_code", None) if self.module is self.codemod.visited_module else None
        return not isinstance(code, str) or ":=" in code

    def _module_bindings(self, name: str) -> set[Any] | None:
        if self._globals is None:
            self._globals, self._bound = self.tree_facet("module bindings", lambda: (
                {n.value for g in traversal.walk_statements(self.module) if isinstance(g, cst.Global) for n in (a.name for a in g.names)},
                module_bindings(self.module, walruses=self._may_hold_walruses()),
            ))
        if name in self._globals or self._bound.everything_unknown or name in self._bound.unknown:
            return None  # a function may bind it, or a form only libcst's analysis follows
        found = set(self._bound.by_name.get(name, ()))
        if CHECK_FAST_NAMES:
            exact = scopes.ModuleSkeleton(self.module).bindings(name)
            assert {id(b.node) for b in found} == {id(a.node) for a in exact if hasattr(a, "node")}, name
        return found

    def _outermost_scope(self, node: cst.CSTNode) -> tuple[cst.CSTNode | None, bool, bool]:
        """The outermost function around ``node`` (None at module level), whether some other
        scope (class body, lambda, comprehension) is around it outside any function, and whether
        it is in that function's body (not its decorators, defaults or annotations, evaluated
        outside it) where libcst's scope analysis records a scope for it (not an attribute's
        name, a keyword, an import)."""
        known = self._outermost.get(id(node))
        if known is not None:
            return known
        outermost: cst.CSTNode | None = None
        inside = in_body = False
        visited = True
        child, above = node, self.parent(node)
        while above is not None:
            visited = visited and _scope_visits(above, child)
            if isinstance(above, cst.FunctionDef):
                outermost, inside, in_body = above, False, child is above.body
            elif isinstance(above, cst.ClassDef) and child is not above.body:
                pass  # a base, keyword or decorator: evaluated in the scope around the class
            elif isinstance(above, SCOPES):
                inside = True
            child, above = above, self.parent(above)
        found = self._outermost[id(node)] = (outermost, inside and outermost is None, in_body and visited)
        return found


def _scope_visits(above: cst.CSTNode, child: cst.CSTNode) -> bool:
    """libcst's scope analysis visits ``child`` of ``above``, so records a scope for it."""
    if isinstance(above, (cst.Attribute, cst.Arg)):
        return child is above.value
    if isinstance(above, (cst.FunctionDef, cst.ClassDef)):
        return child is not above.name
    if isinstance(above, cst.Param):
        return child is above.default or child is above.annotation
    return not isinstance(above, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal))


def _import_names(binding: Any, spelt: str) -> set[str]:
    """The qualified names an import (libcst's or a :class:`ModuleBinding`) gives ``spelt``."""
    if isinstance(binding, ModuleBinding):
        return binding.qualified_names_for(spelt)
    return fast_names.names_from([binding], spelt)

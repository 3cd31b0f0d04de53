"""Name and scope questions answered without libcst's scope analysis of the whole file.

:class:`FastNameAnswers` overrides the name questions of
:class:`~torchfix_device.codemods.base.Codemod` (whose answers come from libcst's metadata of the
whole module) with answers from CPython's ``symtable`` and the file's imports
(:mod:`torchfix_device.syntax.qualified_names`), from a scope analysis of the outermost function
around the read alone (or of the top-level statement around a class body, lambda or comprehension),
and from the module's skeleton (:mod:`torchfix_device.syntax.scopes`). Where those cannot tell, it asks
the base class. The read may be anywhere in the module, not only where the codemod's visit is (a
rule scanning the whole module, a fact following a name to another function): the scopes around
it come from the parents of the whole tree. With ``CHECK_FAST_NAMES`` every shortcut is checked
against the base's answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchfix_device.facts import star_names
from torchfix_device.facts.tree import tree_facts
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device.syntax import qualified_names as fast_names

from torchfix_device.syntax import scopes
from torchfix_device.syntax.qualified_names import CHECK_FAST_NAMES

if TYPE_CHECKING:
    from torchfix_device.engine.shared import SharedWrapper

_BLOCKS = (cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
"""Scopes other than a function's that may bind a name read in them."""


class FastNameAnswers:
    """The name-answering half of the engine's codemod subclass (see the module docstring)."""

    shared: "SharedWrapper | None"
    _memos: "SharedWrapper"
    source_code: str | None = None
    """The code of the tree about to be transformed (saves rendering it)."""

    # -- what the base class asks libcst, answered faster ------------------------------------
    def _plain_qualified_names(
        self, node: cst.CSTNode, *, ending_in: frozenset[str] | None = None, in_module_scope: bool = False
    ) -> set[str]:
        fast = self._fast_names()
        if ending_in is not None and fast is not None and not fast.may_end_in(node, ending_in):
            if CHECK_FAST_NAMES:
                wrong = [q for q in super()._plain_qualified_names(node) if q.rpartition(".")[2] in ending_in]  # type: ignore[misc]
                assert not wrong, f"{_nodes.code_of(node)!r} has names {wrong} ending in {sorted(ending_in)}"
            return set()
        answer = fast.qualified_names(node) if fast is not None else None
        if answer is None and fast is not None:
            answer = self._qualified_names_by_scope(node, fast, in_module_scope)
        if answer is not None and not CHECK_FAST_NAMES:
            return answer
        exact = super()._plain_qualified_names(node)  # type: ignore[misc]
        if answer is None:
            return exact
        if not fast.agrees(answer, exact, node):  # type: ignore[union-attr]
            raise AssertionError(f"fast qualified names {sorted(answer)} != libcst's {sorted(exact)} for {_nodes.code_of(node)!r}")
        return answer

    def _star_where_read(self, name: str, node: cst.CSTNode) -> str:
        """Where a star import's name read at ``node`` resolves in the file, without libcst's
        scope analysis where ``symtable`` tells: nowhere, where no scope of the file binds it
        (``Variable`` that only a star import gives); at module level, wherever ``node`` is,
        where only the module's own statements bind it."""
        fast = self._fast_names()
        told = None
        if fast is not None and fast.bound_nowhere(name):
            told = star_names.NOT_IN_FILE
        elif fast is not None and fast.bound_at_module_level_only(name):
            told = star_names.IN_FILE
        if told is not None and not CHECK_FAST_NAMES:
            return told
        exact = star_names.where_bound(self.bindings_visible_at(name, node))
        assert told is None or told == exact, (name, told, exact)
        return exact

    def bindings_visible_at(self, name: str, node: cst.CSTNode) -> set[Any]:
        local = self._bindings_wherever(name, node)
        if local is not None and not CHECK_FAST_NAMES:
            return local
        whole = super().bindings_visible_at(name, node)  # type: ignore[misc]
        if local is not None:
            assert {(type(a), id(a.node)) for a in local} == {(type(a), id(a.node)) for a in whole}, name
        return whole

    def scopes_of_function_alone(self, function: cst.FunctionDef) -> Any:
        return self._memos.function_scopes.get(function, lambda: scopes.scopes_of_function_alone(function))

    def function_locals(self, function: cst.FunctionDef) -> "scopes.FunctionLocals | None":
        return self._memos.function_locals.get(function, lambda: scopes.function_locals(function))

    def local_scope_of(self, target: cst.Name) -> Any:
        function = self.function_stack[-1] if self.function_stack else None  # type: ignore[attr-defined]
        found = self.scopes_of_function_alone(function) if function is not None else None
        scope = found.get(target) if found is not None else None
        if scope is None or getattr(scope, "node", None) is not function:
            return super().local_scope_of(target)  # type: ignore[misc]
        if CHECK_FAST_NAMES:
            whole = super().local_scope_of(target)  # type: ignore[misc]
            assert whole is not None

            def binding(s: Any) -> set[Any]:
                return {(id(a.node), frozenset(id(r.node) for r in a.references)) for a in s.assignments[target.value]}

            assert binding(scope) == binding(whole), target.value
        return scope

    def parent_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        # the whole tree's parents, shared with the facts and every codemod visiting the tree
        found = tree_facts(self.visited_module).parents.get(id(node))  # type: ignore[attr-defined]
        if found is None or CHECK_FAST_NAMES:
            whole = super().parent_of(node)  # type: ignore[misc]
            assert found is None or found is whole
            return whole
        return found

    def import_reads(self, imp: cst.ImportFrom) -> list[cst.CSTNode] | None:
        fast = self._reads_of_only_binding(imp)
        if fast is not None and not CHECK_FAST_NAMES:
            return fast
        exact = super().import_reads(imp)  # type: ignore[misc]
        if fast is not None:
            assert exact is not None and {id(u) for u in fast} == {id(u) for u in exact}, _nodes.code_of(imp)
        return exact

    def spelt_nowhere(self, name: str) -> bool:
        fast = self._fast_names()
        return fast is not None and name not in fast.symbols

    def free_at_module_level(self, name: str) -> bool:
        if self.spelt_nowhere(name):
            return True  # nothing binds it, nothing reads it
        fast = self._fast_names()
        told = fast.free_at_module_level(name) if fast is not None else None
        if told is not None and not CHECK_FAST_NAMES:
            return told
        exact = super().free_at_module_level(name)  # type: ignore[misc]
        assert told is None or told == exact, (name, told, exact)
        return exact

    # -- how ---------------------------------------------------------------------------------
    def _fast_names(self) -> "fast_names.FastNames | None":
        wrapper = self.context.wrapper  # type: ignore[attr-defined]
        if self.shared is None or wrapper is None:
            return None
        return self.shared.names_for(wrapper, self.source_code)

    def _reads_of_only_binding(self, imp: cst.ImportFrom) -> list[cst.CSTNode] | None:
        """The reads of the names ``imp`` binds, where ``symtable`` shows that this import at
        module level is their only binding anywhere (then every read is of it); None otherwise."""
        fast = self._fast_names()
        if fast is None or isinstance(imp.names, cst.ImportStar):
            return None
        uses: list[cst.CSTNode] = []
        for alias in imp.names:
            bound = _nodes.dotted_name(alias.asname.name) if alias.asname else _nodes.dotted_name(alias.name)
            if bound is None or not fast.bound_by_one_import_only(bound):
                return None
            reads = traversal.name_reads(self.visited_module, bound)  # type: ignore[attr-defined]
            if reads is None:
                return None
            uses.extend(reads)
        return uses

    def _names_in(self, function: cst.FunctionDef) -> frozenset[str]:
        """Every identifier spelt as a name in ``function`` (parameters, targets, reads)."""
        return self._memos.function_names.get(function, lambda: frozenset(traversal.all_names(function)))

    def _module_skeleton(self) -> scopes.ModuleSkeleton:
        module = self.visited_module  # type: ignore[attr-defined]
        return self._memos.skeletons.get(module, lambda: scopes.ModuleSkeleton(module))

    def _qualified_names_by_scope(
        self, node: cst.CSTNode, fast: "fast_names.FastNames", in_module_scope: bool
    ) -> set[str] | None:
        """The qualified names of ``node`` where ``FastNames`` alone cannot tell (its first name
        is bound at module level and inside some function or class too), from where that name
        resolves: at module level for code in the module's own scope (``in_module_scope``, or
        where no scope around ``node`` binds the name); a local of a function, class body,
        lambda or comprehension around ``node`` (no module's object) where one binds it."""
        spelt = get_full_name_for_node(node)
        root = spelt.partition(".")[0] if spelt is not None else None
        if root is None or not fast.may_resolve_at_module_level(root):
            return None
        if in_module_scope:
            return None if fast.bound_in_blocks(root) else fast.module_level_names(node)
        where = self._resolution_anywhere(root, node)
        if where is None:
            return None
        kind, found = where
        if kind == scopes.MODULE:
            return fast.module_level_names(node)
        if fast.locals_named_like_modules:
            return None
        if all(scopes.is_plain_assignment(a) for a in found):
            return set()
        if all(isinstance(a, scopes.ImportAssignment) for a in found):
            return fast_names.names_from(sorted(found, key=lambda a: a.name), spelt)  # type: ignore[arg-type]
        return None

    def _bindings_wherever(self, name: str, node: cst.CSTNode) -> set[Any] | None:
        """The bindings of ``name`` visible at ``node``, anywhere in the module visited: those
        of a scope around ``node`` that binds it, else the module-level ones (the module's
        skeleton). None when that cannot be told so (then libcst's whole-file analysis answers)."""
        fast = self._fast_names()
        if fast is None or not fast.may_resolve_at_module_level(name):
            return None
        if fast.bound_at_module_level_only(name):
            return self._module_skeleton().bindings(name)
        where = self._resolution_anywhere(name, node)
        if where is None:
            return None
        kind, found = where
        return found if kind == scopes.LOCAL else self._module_skeleton().bindings(name)

    def _resolution_anywhere(self, name: str, node: cst.CSTNode) -> tuple[str, set[Any]] | None:
        """Where ``name`` read at ``node`` resolves, wherever ``node`` is in the module visited
        (:func:`~torchfix_device.syntax.scopes.resolution_in_function`): from the parents of the
        whole tree, the analysis of the outermost function around ``node`` alone; at module
        level, ``(MODULE, set())`` where no class body, lambda or comprehension around ``node``
        binds it, else the analysis of its top-level statement alone. None when that cannot
        tell, or ``node`` is not of the module visited."""
        fast = self._fast_names()
        parents = tree_facts(self.visited_module).parents  # type: ignore[attr-defined]
        if fast is None or id(node) not in parents:
            return None
        outermost: cst.CSTNode | None = None
        in_block = False  # a class body, lambda or comprehension around ``node``
        child, above = node, parents.get(id(node))
        while above is not None and above is not self.visited_module:  # type: ignore[attr-defined]
            if isinstance(above, cst.FunctionDef):
                outermost, in_block = above, False  # blocks inside it: its own analysis sees them
            elif isinstance(above, _BLOCKS) and not (isinstance(above, cst.ClassDef) and child is not above.body):
                in_block = True
            child, above = above, parents.get(id(above))
        if above is None:
            return None
        if outermost is None and not (in_block and fast.bound_in_blocks(name)):
            return scopes.MODULE, set()
        if outermost is None:  # in a class body, lambda or comprehension at module level:
            outermost = child  # its top-level statement, analysed alone as a function is
        elif not fast.bound_in_blocks(name) and name not in self._names_in(outermost):  # type: ignore[arg-type]
            return scopes.MODULE, set()  # nothing in the function spells it, so nothing there binds it
        return scopes.resolution_in_function(self.scopes_of_function_alone(outermost), node, name)  # type: ignore[arg-type]

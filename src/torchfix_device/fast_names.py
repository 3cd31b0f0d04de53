"""Qualified names without libcst's scope analysis, for the names where the answer is certain.

libcst's ``QualifiedNameProvider`` needs its ``ScopeProvider``: a walk over the whole tree that
records every assignment and access, which costs several parses on a big file. Most names the
codemods ask about are simpler than that. CPython's ``symtable`` (C, a fraction of a parse) tells
where each name is bound, and when the first name of an expression is

- bound only by imports at module level (``torch``, ``nn``, ``F``), the answer is what those
  imports give, computed by libcst's own ``ImportAssignment``;
- bound by other statements at module level only (a module-level class, function or
  variable), possibly also by imports there: the spelling itself (libcst's name for a
  module-level binding), plus what the imports give; a name spelt like a module
  (``torch = f()``) is left to libcst;
- bound nowhere: ``builtins.<name>`` for a builtin, else nothing;
- bound only inside functions, classes or comprehensions, never imported nor declared
  ``global``: only names local to those scopes (``Net.forward.<locals>.x``), or a builtin where
  the name is not bound. Neither names a module's object, the only thing the codemods ask
  about: :meth:`FastNames.qualified_names` gives the empty set, as long as no module-level
  function or class is named like a module (``def torch(): ...``), whose locals' names would
  look like that module's.

Anything else (a name imported in one function and assigned in another, ``global`` statements,
code ``symtable`` refuses, files with ``match`` statements, whose captures libcst does not record)
returns None and the codemod asks libcst. ``TORCHFIX_DEVICE_CHECK_NAMES=1``
makes every answer checked against libcst's (a test and corpus aid).
"""

from __future__ import annotations

import ast
import builtins
import symtable
import sys
from typing import Iterator

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata.scope_provider import ImportAssignment

BUILTIN_NAMES = frozenset(dir(builtins))


class Unsupported(ValueError):
    """Code whose names this module cannot answer for (libcst then answers for all of them)."""

MODULE_LIKE_NAMES = frozenset(sys.stdlib_module_names) | {
    "torch", "numpy", "numba", "cupy", "pycuda", "jax", "tensorflow", "cudf", "mxnet", "chainer", "builtins",
}
"""A module-level function or class with one of these names makes its locals' qualified names
look like a module's (``torch.<locals>.x``): such files ask libcst about locals."""

_BLOCKS = (
    cst.If, cst.Else, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally,
    cst.With, cst.For, cst.While, cst.Match, cst.MatchCase, cst.IndentedBlock, cst.SimpleStatementSuite,
    cst.SimpleStatementLine,
)


class FastNames:
    """Certain qualified names for one module version (see the module docstring)."""

    def __init__(self, module: cst.Module, code: str) -> None:
        if "match" in code and "case" in code and any(isinstance(n, ast.Match) for n in ast.walk(ast.parse(code))):
            raise Unsupported("match statements: libcst records none of their captures")
        self._imports: dict[str, list[ImportAssignment]] = {}
        self._spelt_in_imports: set[int] = set()
        """The names an import statement spells (libcst qualifies none of them)."""
        for node in _module_level_imports(module):
            if isinstance(node, cst.ImportFrom) and node.module is not None:
                self._spelt_in_imports.update(_ids(node.module))
            if isinstance(node.names, cst.ImportStar):
                continue
            for alias in node.names:
                self._spelt_in_imports.update(_ids(alias.name))
                if alias.asname is not None:
                    self._spelt_in_imports.update(_ids(alias.asname.name))
                bound = _bound_name(alias)
                if bound is not None:
                    self._imports.setdefault(bound, []).append(
                        ImportAssignment(name=bound, scope=None, node=node, index=0, as_name=alias.asname.name if alias.asname else alias.name)  # type: ignore[arg-type]
                    )
        top = symtable.symtable(code, "<module>", "exec")
        self._top: dict[str, symtable.Symbol] = {s.get_name(): s for s in top.get_symbols()}
        self._bound_inside: set[str] = set()
        self._declared: set[str] = set()
        self._module_like_scope = False
        # A local's qualified name starts with the name of the outermost function or class.
        self._module_like_scope = any(child.get_name() in MODULE_LIKE_NAMES for child in top.get_children())
        for table in _descendants(top):
            for symbol in table.get_symbols():
                if symbol.is_imported() or symbol.is_declared_global() or symbol.is_nonlocal():
                    self._declared.add(symbol.get_name())
                elif _binds(symbol):
                    self._bound_inside.add(symbol.get_name())

    def qualified_names(self, node: cst.CSTNode) -> set[str] | None:
        """The qualified names of ``node``, or None when only libcst can tell."""
        spelt = get_full_name_for_node(node)
        if spelt is None or id(node) in self._spelt_in_imports:
            return set()
        root = spelt.partition(".")[0]
        if root in self._declared:
            return None
        top = self._top.get(root)
        imported_here = top is not None and top.is_imported()
        bound_here = top is not None and _binds(top)
        if imported_here or bound_here:
            if root in self._bound_inside or root in BUILTIN_NAMES:
                return None
            if bound_here and root in MODULE_LIKE_NAMES:
                return None  # `torch = f()`: libcst's `torch.*` names then depend on the statement
            imports = self._imports.get(root, [])
            if imported_here and not imports:
                return None  # an import this walk did not find: ask libcst
            names = {q.name for assignment in imports for q in assignment.get_qualified_names_for(spelt)}
            if bound_here:
                names.add(spelt)
            return names
        if root in self._bound_inside:
            return None if self._module_like_scope else set()
        return {f"builtins.{root}"} if root in BUILTIN_NAMES else set()


def agrees(answer: set[str], exact: set[str], node: cst.CSTNode) -> bool:
    """``answer`` is libcst's ``exact`` answer, up to what cannot name a module's object: names
    local to a function, class or comprehension (``prefix.<spelling>``) and builtins, which the
    fast answer leaves out, and the spelling itself when it does not start with a module's name
    (libcst leaves out a module-level name in the statement that first binds it:
    ``model = f(model)``)."""
    if answer == exact:
        return True
    spelt = get_full_name_for_node(node)
    if spelt is None:
        return False
    own = spelt.partition(".")[0] not in MODULE_LIKE_NAMES

    def local_or_builtin(q: str) -> bool:
        return q.startswith("builtins.") or (q != spelt and q.endswith("." + spelt))

    return all(local_or_builtin(q) or (own and q == spelt) for q in exact - answer) and all(
        own and q == spelt for q in answer - exact
    )


def _ids(node: cst.CSTNode) -> Iterator[int]:
    """``id`` of ``node`` and of every Name and Attribute in it."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield id(current)
        if isinstance(current, cst.Attribute):
            stack.extend((current.value, current.attr))


def _binds(symbol: symtable.Symbol) -> bool:
    """Bound in its table other than by an import."""
    return symbol.is_assigned() or symbol.is_parameter() or symbol.is_annotated() or symbol.is_namespace()


def _descendants(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    for child in table.get_children():
        yield child
        yield from _descendants(child)


def _bound_name(alias: cst.ImportAlias) -> str | None:
    if alias.asname is not None:
        return alias.asname.name.value if isinstance(alias.asname.name, cst.Name) else None
    full = get_full_name_for_node(alias.name)
    return full.partition(".")[0] if full else None


def _module_level_imports(module: cst.Module) -> Iterator[cst.Import | cst.ImportFrom]:
    """Imports in the module's own scope: top-level statements and the blocks of ``if``, ``try``,
    ``with``, loops and ``match`` there, not function or class bodies."""
    stack: list[cst.CSTNode] = list(reversed(module.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            yield node
        elif isinstance(node, cst.SimpleStatementLine):
            stack.extend(reversed(node.body))
        elif isinstance(node, cst.SimpleStatementSuite):
            stack.extend(reversed(node.body))
        elif isinstance(node, _BLOCKS):
            stack.extend(reversed([c for c in node.children if isinstance(c, (*_BLOCKS, cst.BaseSuite))]))

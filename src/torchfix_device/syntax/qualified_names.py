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

- imported at module level and also inside functions or classes (``import torch._dynamo`` in a
  function of a module that imports ``torch``), never bound otherwise: what the imports give,
  when every import binding the name, wherever it is, gives the same answer (then the scope the
  expression is in does not matter);
- imported only inside functions or classes (``from .exc import unimplemented`` in each
  function that uses it), never bound otherwise, with no ``import *`` at module level: what the
  imports give, when they all agree. Where such a name is used outside a function importing
  it, it is unbound (the code raises ``NameError``) and libcst gives no name; the fast answer
  names what the file imports under that name everywhere;
- bound at module level and inside functions or classes, never by an import and not spelt like
  a module: the spelling itself (a local's libcst name, ``f.<locals>.log``, names no module's
  object either).

A binding in a class body that the class body itself never reads (a method named like a
module-level import) is ignored throughout: the class's methods do not see it.

Anything else (a name imported in one function and assigned in another, imports that disagree,
``global`` statements, code ``symtable`` refuses, names a ``match`` pattern captures, which
libcst does not record as bindings) returns None and the codemod asks libcst. ``TORCHFIX_DEVICE_CHECK_NAMES=1``
makes every answer checked against libcst's (a test and corpus aid).
"""

from __future__ import annotations

import builtins
import os
import symtable
import sys
from typing import Iterator

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata.scope_provider import ImportAssignment
from torchfix_device.syntax import traversal

BUILTIN_NAMES = frozenset(dir(builtins))

CHECK_FAST_NAMES = os.environ.get("TORCHFIX_DEVICE_CHECK_NAMES") == "1"
"""Check every shortcut answer (qualified names, bindings, positions) against libcst's, the
whole-file analysis it saves (tests and corpus runs)."""


MODULE_LIKE_NAMES = frozenset(sys.stdlib_module_names) | {
    "torch", "numpy", "numba", "cupy", "pycuda", "jax", "tensorflow", "cudf", "mxnet", "chainer", "builtins",
}
"""Names of modules: a module-level variable spelt like one (``torch = f()``) is left to libcst."""

PREFIX_TESTED_MODULES = frozenset({
    "torch", "numpy", "numba", "cupy", "pycuda", "jax", "tensorflow", "cudf", "mxnet", "chainer", "math",
    "random", "string", "re", "os", "itertools", "functools", "operator", "collections", "json", "pathlib",
    "typing",
})
"""The modules whose names some codemod tests by prefix (``q.startswith("math.")``). A
module-level function or class named like one makes its locals' libcst names look like that
module's (``math.<locals>.x``): such files ask libcst about locals. Names compared whole
(``copy.deepcopy``) cannot match a local's. (``tests/test_fast_names.py`` checks that the
codemods' prefix lists stay inside this set.)"""

EXPRESSION_SCOPES = frozenset({"lambda", "listcomp", "setcomp", "dictcomp", "genexpr"})
"""``symtable``'s names for the scopes of lambdas and comprehensions."""

_BLOCKS = (
    cst.If, cst.Else, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally,
    cst.With, cst.For, cst.While, cst.Match, cst.MatchCase, cst.IndentedBlock, cst.SimpleStatementSuite,
    cst.SimpleStatementLine,
)


class FastNames:
    """Certain qualified names for one module version (see the module docstring)."""

    def __init__(self, module: cst.Module, code: str) -> None:
        self._captured = _match_captures(module) if "match" in code and "case" in code else frozenset()
        """Names a ``match`` pattern binds: libcst records none of these bindings, so every
        question about them is left to libcst."""
        top = symtable.symtable(code, "<module>", "exec")
        self._top: dict[str, symtable.Symbol] = {s.get_name(): s for s in top.get_symbols()}
        self._bound_inside: set[str] = set()
        """Names bound inside a function or class other than by an import."""
        self._imported_inside: set[str] = set()
        self._declared: set[str] = set()
        """Names declared ``global`` or ``nonlocal`` somewhere."""
        # A local's qualified name starts with the name of the outermost function or class.
        self._module_like_scope = any(child.get_name() in PREFIX_TESTED_MODULES for child in top.get_children())
        self.symbols: set[str] = set(self._top)
        """Every name the code binds or reads as a name, in any scope (``x.device`` and
        ``device=`` hold no name ``device``): a name not here has no binding anywhere."""
        self._bound_in_blocks: set[str] = set()
        """Names bound in a class body, a lambda or a comprehension."""
        self._read_as_global: set[str] = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
        """Names read where they resolve to the module's scope (or the builtins): at module
        level, or in a function or class that does not bind them."""
        for table in _descendants(top):
            in_class_body = table.get_type() == "class"
            block = in_class_body or table.get_name() in EXPRESSION_SCOPES
            for symbol in table.get_symbols():
                self.symbols.add(symbol.get_name())
                if block and (_binds(symbol) or symbol.is_imported()):
                    self._bound_in_blocks.add(symbol.get_name())
                if symbol.is_referenced() and symbol.is_global():
                    self._read_as_global.add(symbol.get_name())
                if symbol.is_declared_global() or symbol.is_nonlocal():
                    self._declared.add(symbol.get_name())
                    continue
                if in_class_body and not symbol.is_referenced():
                    continue  # a method or class attribute: the class body alone could see it there
                if symbol.is_imported():
                    self._imported_inside.add(symbol.get_name())
                if _binds(symbol):
                    self._bound_inside.add(symbol.get_name())
        self._imports: dict[str, list[ImportAssignment]] = {}
        """Module-level imports by the name they bind."""
        self._nested_imports: dict[str, list[ImportAssignment]] = {}
        """Imports inside functions and classes by the name they bind."""
        self._spelt_in_imports: set[int] = set()
        """The names an import statement spells (libcst qualifies none of them)."""
        self._star_import = False
        """``from m import *`` at module level: binds names no one can list."""
        self._renamed: set[str] = set()
        """Names an import binds to something whose last part is spelt otherwise
        (``from torch import zeros as z``, ``import torch.nn as tnn``), anywhere in the file."""
        for node, at_module_level in _imports(module, nested=True):
            self._record_import(node, at_module_level)
        self._given: dict[str, frozenset[str]] = {}
        """Spelling → what the module-level imports of its first part give it (a file made of
        many files imports ``torch`` dozens of times)."""

    def _record_import(self, node: cst.Import | cst.ImportFrom, at_module_level: bool) -> None:
        if isinstance(node, cst.ImportFrom) and node.module is not None:
            self._spelt_in_imports.update(_ids(node.module))
        if isinstance(node.names, cst.ImportStar):
            self._star_import = self._star_import or at_module_level
            return
        into = self._imports if at_module_level else self._nested_imports
        for alias in node.names:
            self._spelt_in_imports.update(_ids(alias.name))
            bound = _bound_name(alias)
            if alias.asname is not None:
                self._spelt_in_imports.update(_ids(alias.asname.name))
                if bound is not None and bound != (get_full_name_for_node(alias.name) or "").rpartition(".")[2]:
                    self._renamed.add(bound)
            if bound is not None:
                into.setdefault(bound, []).append(
                    ImportAssignment(name=bound, scope=None, node=node, index=0, as_name=alias.asname.name if alias.asname else alias.name)  # type: ignore[arg-type]
                )

    def bound_in_functions_only(self, name: str) -> bool:
        """``name`` is bound, if anywhere, only in functions (parameters, assignments, imports
        there), never at module level, in a class body, a lambda or a comprehension, nor
        declared ``global``/``nonlocal``, and is no builtin: the bindings visible at a node are
        then those of the functions around it, which a scope analysis of the outermost of them
        alone finds."""
        top = self._top.get(name)
        if top is not None and (_binds(top) or top.is_imported()) or name in self._captured:
            return False
        return name not in self._declared and name not in self._bound_in_blocks and name not in BUILTIN_NAMES

    def free_at_module_level(self, name: str) -> bool | None:
        """Whether a module-level binding of ``name`` would change what no code refers to:
        nothing binds it at module level and no code reads it where it would resolve there
        (code reading it where nothing binds it). None where ``symtable`` cannot tell (a
        builtin, ``global``/``nonlocal`` declarations, ``import *``)."""
        if name in BUILTIN_NAMES or name in self._declared or name in self._captured or self._star_import:
            return None
        top = self._top.get(name)
        if top is not None and (_binds(top) or top.is_imported()):
            return False
        return name not in self._read_as_global

    def qualified_names(self, node: cst.CSTNode) -> set[str] | None:
        """The qualified names of ``node``, or None when only libcst can tell."""
        spelt = get_full_name_for_node(node)
        if spelt is None or id(node) in self._spelt_in_imports:
            return set()
        root = spelt.partition(".")[0]
        if root in self._declared or root in self._captured:
            return None
        top = self._top.get(root)
        imported_here = top is not None and top.is_imported()
        bound_here = top is not None and _binds(top)
        if root in self._imported_inside:
            if bound_here or root in self._bound_inside or root in BUILTIN_NAMES:
                return None
            if not imported_here and self._star_import:
                return None
            return self._names_every_import_gives(root, spelt, imported_here)
        if imported_here or bound_here:
            if root in BUILTIN_NAMES and (bound_here or root in self._bound_inside or root in self._bound_in_blocks):
                return None  # `from io import open` alone hides the builtin everywhere: its names
            if bound_here and root in MODULE_LIKE_NAMES:
                return None  # `torch = f()`: libcst's `torch.*` names then depend on the statement
            if root in self._bound_inside:
                # a local of some function or class: its libcst name there (`f.<locals>.x`) is
                # no module's, but an import's name would be wrong for it
                return None if imported_here else {spelt}
            return self._module_level_bindings_give(root, spelt, imported_here, bound_here)
        if root in self._bound_inside:
            return None if self._module_like_scope else set()
        return {f"builtins.{root}"} if root in BUILTIN_NAMES else set()

    def module_level_names(self, node: cst.CSTNode) -> set[str] | None:
        """The qualified names of ``node`` where its first name resolves at module level (read
        in a function that does not bind it, whatever other functions and classes bind), or
        None when only libcst can tell."""
        spelt = get_full_name_for_node(node)
        if spelt is None or id(node) in self._spelt_in_imports:
            return set()
        root = spelt.partition(".")[0]
        if not self.may_resolve_at_module_level(root):
            return None
        top = self._top.get(root)
        imported_here = top is not None and top.is_imported()
        bound_here = top is not None and _binds(top)
        if not (imported_here or bound_here):
            return set()
        if bound_here and root in MODULE_LIKE_NAMES:
            return None
        return self._module_level_bindings_give(root, spelt, imported_here, bound_here)

    def may_resolve_at_module_level(self, name: str) -> bool:
        """Where ``name`` is read in a function that does not bind it, it resolves to the
        module-level bindings that the module's own statements make (no ``global`` or
        ``nonlocal`` declaration of it anywhere, no ``match`` capture libcst does not record, no
        builtin to fall back on)."""
        return name not in self._declared and name not in self._captured and name not in BUILTIN_NAMES

    def bound_by_one_import_only(self, name: str) -> bool:
        """One module-level import binds ``name`` and nothing else binds it anywhere (no other
        import, assignment, parameter, ``global`` or ``match`` capture, in any scope): every
        read of it, anywhere, is of that import."""
        top = self._top.get(name)
        return (
            top is not None and top.is_imported() and not _binds(top) and len(self._imports.get(name, [])) == 1
            and name not in self._bound_inside and name not in self._imported_inside and name not in self._bound_in_blocks
            and name not in self._declared and name not in self._captured
        )

    def bound_nowhere(self, name: str) -> bool:
        """No scope of the code binds ``name`` (nor declares it ``global`` or ``nonlocal``):
        every read of it resolves at module level and finds no binding of the file there."""
        return (
            name not in self._captured and name not in self._declared
            and not self._bound_below_module_level(name) and not self._bound_at_module_level(name)
        )

    def bound_at_module_level_only(self, name: str) -> bool:
        """The module's own statements bind ``name`` and no other scope does (no function, class
        body, lambda or comprehension; no ``global``/``nonlocal`` declaration or ``match``
        capture; no builtin): the bindings visible at any node are the module-level ones."""
        return (
            self.may_resolve_at_module_level(name)
            and self._bound_at_module_level(name) and not self._bound_below_module_level(name)
        )

    def _bound_at_module_level(self, name: str) -> bool:
        top = self._top.get(name)
        return top is not None and (_binds(top) or top.is_imported())

    def _bound_below_module_level(self, name: str) -> bool:
        """A function, class body, lambda or comprehension binds ``name`` (or imports it)."""
        return name in self._bound_inside or name in self._imported_inside or name in self._bound_in_blocks

    def bound_in_blocks(self, name: str) -> bool:
        """A class body, lambda or comprehension binds ``name``."""
        return name in self._bound_in_blocks

    @property
    def locals_named_like_modules(self) -> bool:
        """A module-level function or class is named like a module whose names a codemod tests
        by prefix: libcst's names of its locals (``math.<locals>.x``) look like that module's."""
        return self._module_like_scope

    def _module_level_bindings_give(self, root: str, spelt: str, imported_here: bool, bound_here: bool) -> set[str] | None:
        imports = self._imports.get(root, [])
        if imported_here and not imports:
            return None  # an import this walk did not find: ask libcst
        given = self._given.get(spelt)
        if given is None:
            given = self._given[spelt] = frozenset(names_from(imports, spelt))
        names = set(given)
        if bound_here:
            names.add(spelt)
        return names

    def may_end_in(self, node: cst.CSTNode, last_parts: frozenset[str]) -> bool:
        """False when no qualified name of ``node`` can end in one of ``last_parts``. A dotted
        expression's names all end in the part it is spelt with (``T.nn.Linear``:
        ``torch.nn.Linear``, ``f.<locals>.x.Linear``), except where it starts with a builtin's
        name: libcst names ``dict.get`` ``builtins.dict`` (seen in real code, InferSent's
        ``__getattr__ = dict.get``); a plain name's end in it too, unless an import renames it
        (``from torch import zeros as z``)."""
        if isinstance(node, cst.Attribute) and _is_dotted_name(node):
            root = _innermost(node).value
            return node.attr.value in last_parts or (root in BUILTIN_NAMES and root in last_parts)
        if isinstance(node, cst.Name):
            return node.value in last_parts or node.value in self._renamed
        return True  # ``f().x``, ``''.join``: libcst's names for these follow other rules

    def _names_every_import_gives(self, root: str, spelt: str, imported_here: bool) -> set[str] | None:
        """What the imports of ``root`` give for ``spelt`` when every import inside a function
        or class gives the same as the module-level ones together (or, without any, as each
        other); else None."""
        imports = self._imports.get(root, [])
        nested = self._nested_imports.get(root, [])
        if not nested or (imported_here and not imports):
            return None  # an import this walk did not find: ask libcst
        names = names_from(imports or nested[:1], spelt)
        return names if all(names_from([assignment], spelt) == names for assignment in nested) else None

    def agrees(self, answer: set[str], exact: set[str], node: cst.CSTNode) -> bool:
        """:func:`agrees`, where libcst may also give nothing for a name imported only inside
        functions (used where it is unbound)."""
        spelt = get_full_name_for_node(node)
        root = spelt.partition(".")[0] if spelt is not None else None
        if answer and not exact and root in self._imported_inside:
            top = self._top.get(root)
            if top is None or not top.is_imported():
                return True
        return agrees(answer, exact, node)


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


def names_from(imports: list[ImportAssignment], spelt: str) -> set[str]:
    """The qualified names these imports give the expression spelt ``spelt``."""
    return {q.name for assignment in imports for q in assignment.get_qualified_names_for(spelt)}


def _ids(node: cst.CSTNode) -> Iterator[int]:
    """``id`` of ``node`` and of every Name and Attribute in it."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield id(current)
        if isinstance(current, cst.Attribute):
            stack.extend((current.value, current.attr))


def _innermost(node: cst.BaseExpression) -> cst.BaseExpression:
    """``a`` of ``a.b.c``: the value at the bottom of a chain of attributes."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node


def _is_dotted_name(node: cst.BaseExpression) -> bool:
    """``a.b.c``: names joined by dots, nothing else."""
    return isinstance(_innermost(node), cst.Name)


def _binds(symbol: symtable.Symbol) -> bool:
    """Bound in its table other than by an import."""
    return symbol.is_assigned() or symbol.is_parameter() or symbol.is_annotated() or symbol.is_namespace()


def _match_captures(module: cst.Module) -> frozenset[str]:
    """The names the ``match`` statements of ``module`` capture (``case [a, *rest]``,
    ``case {**kw}``, ``case P() as p``)."""
    captured: set[str] = set()
    for statement in traversal.walk_statements(module):
        if isinstance(statement, cst.Match):
            for case in statement.cases:
                for node in traversal.walk(case.pattern):
                    name = node.rest if isinstance(node, cst.MatchMapping) else getattr(node, "name", None)
                    if isinstance(node, (cst.MatchAs, cst.MatchStar, cst.MatchMapping)) and isinstance(name, cst.Name):
                        captured.add(name.value)
    return frozenset(captured)


def _descendants(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    for child in table.get_children():
        yield child
        yield from _descendants(child)


def _bound_name(alias: cst.ImportAlias) -> str | None:
    if alias.asname is not None:
        return alias.asname.name.value if isinstance(alias.asname.name, cst.Name) else None
    full = get_full_name_for_node(alias.name)
    return full.partition(".")[0] if full else None


def _imports(module: cst.Module, *, nested: bool) -> Iterator[tuple[cst.Import | cst.ImportFrom, bool]]:
    """Import statements, each with whether it is in the module's own scope (a top-level
    statement or in the blocks of ``if``, ``try``, ``with``, loops and ``match`` there). With
    ``nested``, also those in function and class bodies (statements only: no expression holds
    an import)."""
    followed = (*_BLOCKS, cst.BaseSuite) + ((cst.FunctionDef, cst.ClassDef) if nested else ())
    stack: list[tuple[cst.CSTNode, bool]] = [(node, True) for node in reversed(module.body)]
    while stack:
        node, at_module_level = stack.pop()
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            yield node, at_module_level
        elif isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            stack.extend((child, at_module_level) for child in reversed(node.body))
        elif isinstance(node, _BLOCKS):
            stack.extend((c, at_module_level) for c in reversed(traversal.statement_children(node)) if isinstance(c, followed))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):  # only followed with ``nested``
            stack.append((node.body, False))

"""The ``Variable`` import TFD009 removes once nothing uses it.

The import goes when the name it binds appears nowhere else in the rewritten module: counted
during the walk (every Name node, less the import's own and the callees of the rewritten calls,
which the codemod adds to ``_removed_names``), so no scope analysis is needed. A name still
spelt somewhere (a use left alone, an attribute or local variable of that name, a string other
than a docstring such as an ``__all__`` entry or a string annotation) keeps it. The count needs
every statement holding such a name or string visited: the lines of TFD009's stage-1 sites
(:func:`site_lines`) hold every one.
A module-level import in a module that the star imports of other files of the run reach stays:
it binds their ``Variable`` too (:attr:`~torchfix_device.facts.star_imports.FileStars.imported_by`).
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import TYPE_CHECKING, Iterator

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.syntax.imports import remove_import_aliases

if TYPE_CHECKING:
    from torchfix_device.prefilter.candidates import FileFacts

VARIABLE_MODULES = ("torch.autograd", "torch.autograd.variable")


def site_lines(facts: "FileFacts") -> Iterator[ast.AST] | None:
    """TFD009's sites, as nodes standing for lines: every line spelling ``Variable``, a name
    an import binds to it, or ``volatile`` (a name, an attribute, a keyword, in a string or a
    comment: a superset of what it rewrites, reports and counts), and, in a file spelling
    ``volatile``, every loop outside functions (``x = Variable(..., volatile=True)`` feeds the
    loop after it in its block, :func:`.no_grad_loops.volatile_loop`). None (every statement)
    in a file with a star import, which may bind ``Variable`` under another name."""
    if facts.star_import:
        return None
    words = {"Variable", "volatile"}
    loops: list[ast.AST] = []
    for node, _, function in facts.contexts:
        if isinstance(node, ast.ImportFrom) and node.module in VARIABLE_MODULES and not node.level:
            words.update(a.asname for a in node.names if a.name == "Variable" and a.asname)
        elif function is None and isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            loops.append(node)
    lines = [ast.Pass(lineno=n, col_offset=0) for n, line in enumerate(facts.lines, 1) if any(w in line for w in words)]
    return iter(lines + loops if "volatile" in facts.text else lines)


class VariableImportTracking:
    """Hooks mixed into :class:`~torchfix_device.codemods.variable_wrapper.VariableWrapper`."""

    context: object

    def start_import_tracking(self) -> None:
        """At ``visit_Module``: nothing counted yet."""
        self._imports: dict[cst.ImportAlias, tuple[cst.ImportFrom, str, str | None]] = {}
        self._module_level: set[int] = set()
        """``id`` of the aliases of ``_imports`` whose statement binds the module's own name."""
        self._import_originals: dict[int, cst.ImportFrom] = {}
        """``id`` of each recorded import (libcst's copy) → the original it was copied from."""
        self._names: Counter[str] = Counter()
        self._removed_names: Counter[str] = Counter()
        self._strings: list[cst.SimpleString] = []
        self._docstrings: set[int] = set()

    def without_unused_imports(self, module: cst.Module) -> cst.Module:
        """``module`` without the ``Variable`` imports whose name is used nowhere else (kept
        where a star import of another file of the run takes the module's names)."""
        stars = getattr(self, "star_imports", None)
        shared = stars is not None and bool(stars.imported_by)
        unused = {
            alias: found for alias, found in self._imports.items()
            if self._unused(found) and not (shared and id(alias) in self._module_level)
        }
        if not unused:
            return module
        objects = [(name, "Variable", asname) for _, name, asname in unused.values()]
        aliases = self._aliases_in(module, {alias: statement for alias, (statement, _, _) in unused.items()})
        return remove_import_aliases(self.context, module, objects, aliases)  # type: ignore[arg-type]

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if updated_node.module is None or updated_node.relative or isinstance(updated_node.names, cst.ImportStar):
            return updated_node
        module = nodes.dotted_name(updated_node.module)
        if module in VARIABLE_MODULES:
            for alias in updated_node.names:
                if nodes.dotted_name(alias.name) == "Variable":
                    asname = nodes.dotted_name(alias.asname.name) if alias.asname else None
                    self._imports[alias] = (updated_node, module, asname)
                    if not (self.function_stack or self.class_stack):  # type: ignore[attr-defined]
                        self._module_level.add(id(alias))
                    self._import_originals[id(updated_node)] = original_node
        return updated_node

    def _aliases_in(
        self, module: cst.Module, aliases: dict[cst.ImportAlias, cst.ImportFrom]
    ) -> dict[cst.ImportAlias, cst.ImportFrom]:
        """``aliases`` as they are in ``module``: a statement in which nothing was rewritten is
        the original object there, not libcst's copy (``Codemod.on_leave``), so an import in it
        is the original one, its aliases at the same places."""
        present = {id(n) for n in traversal.walk_statements(module) if isinstance(n, cst.ImportFrom)}
        found: dict[cst.ImportAlias, cst.ImportFrom] = {}
        for alias, statement in aliases.items():
            if id(statement) not in present:
                original = self._import_originals[id(statement)]
                alias = original.names[list(statement.names).index(alias)]  # type: ignore[index,arg-type]
                statement = original
            found[alias] = statement
        return found

    def visit_Name(self, node: cst.Name) -> None:
        self._names[node.value] += 1

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._strings.append(node)

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.SimpleString):
            self._docstrings.add(id(node.value))

    def _unused(self, found: tuple[cst.ImportFrom, str, str | None]) -> bool:
        """Whether the name an import of ``Variable`` binds is spelt nowhere but in that import
        (and the imports of ``Variable`` binding the same name) after the rewrite."""
        bound = found[2] or "Variable"
        in_imports = sum(1 for _, _, asname in self._imports.values() if (asname or "Variable") == bound)
        if self._names[bound] - in_imports - self._removed_names[bound] > 0:
            return False
        return not any(bound in s.value for s in self._strings if id(s) not in self._docstrings)


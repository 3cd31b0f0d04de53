"""Import edits that visit only the statements an import can stand in.

libcst's ``RemoveImportsVisitor`` (what ``RemoveImportsVisitor.remove_unused_import`` schedules)
first runs a whole-module scope analysis to learn which imports are unused, then rebuilds every
node of the module through its matcher dispatch: on a 650-line model file that was a second,
for one import. A codemod that knows which import aliases to drop (see
``codemods/_variable_import.py``, TFD009) hands them to :func:`remove_import_aliases`, which applies
libcst's own removal of those aliases (its comma and comment handling, the statement dropped
when no alias is left) while visiting only statements, never an expression.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Sequence

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor
from torchfix_device.syntax import traversal
from torchfix_device.syntax.nodes import dotted_name


class _AliasRemover(cst.CSTTransformer):
    """Removes the given import aliases with ``RemoveImportsVisitor``'s own leave hooks."""

    leave_Import = RemoveImportsVisitor.leave_Import
    leave_ImportFrom = RemoveImportsVisitor.leave_ImportFrom
    _process_importfrom_aliases = RemoveImportsVisitor._process_importfrom_aliases

    def __init__(
        self,
        context: CodemodContext,
        objects: Sequence[tuple[str, str | None, str | None]],
        aliases: Mapping[cst.ImportAlias, cst.Import | cst.ImportFrom],
    ) -> None:
        super().__init__()
        self.context = context
        self.unused_module_imports = {module: alias for module, obj, alias in objects if obj is None}
        self.unused_obj_imports: dict[str, set[tuple[str, str | None]]] = {}
        for module, obj, alias in objects:
            if obj is not None:
                self.unused_obj_imports.setdefault(module, set()).add((obj, alias))
        self._unused_imports = dict(aliases)

    def on_visit(self, node: cst.CSTNode) -> bool:
        return isinstance(node, traversal.STATEMENT_SCAFFOLD)  # an import is a statement: none is in an expression


def remove_import_aliases(
    context: CodemodContext,
    module: cst.Module,
    objects: Sequence[tuple[str, str | None, str | None]],
    aliases: Mapping[cst.ImportAlias, cst.Import | cst.ImportFrom],
) -> cst.Module:
    """``module`` without the import ``aliases`` (nodes of ``module``, each with its import
    statement) that are also named in ``objects`` — ``(module, object, asname)`` triples as
    ``RemoveImportsVisitor.remove_unused_import`` takes them. The caller has decided the aliases
    are unused; nothing else is removed."""
    return cst.ensure_type(module.visit(_AliasRemover(context, objects, aliases)), cst.Module)


def torch_module_alias(module: cst.Module) -> str | None:
    """The name under which ``torch`` itself is imported at module level (``torch``, ``T``)."""
    for stmt in _top_level_small_statements(module):
        if isinstance(stmt, cst.Import):
            for alias in stmt.names:
                if dotted_name(alias.name) == "torch":
                    if alias.asname is None:
                        return "torch"
                    return cst.ensure_type(alias.asname.name, cst.Name).value
                if alias.asname is None and (dotted_name(alias.name) or "").startswith("torch."):
                    return "torch"  # ``import torch.nn`` binds ``torch`` too
    return None

def imports_torch(module: cst.Module) -> bool:
    """A module-level ``import torch...`` or ``from torch... import ...``."""
    for stmt in _top_level_small_statements(module):
        if isinstance(stmt, cst.Import) and any((dotted_name(a.name) or "").split(".")[0] == "torch" for a in stmt.names):
            return True
        if isinstance(stmt, cst.ImportFrom) and stmt.module is not None and not stmt.relative \
                and (dotted_name(stmt.module) or "").split(".")[0] == "torch":
            return True
    return False


def nn_alias(module: cst.Module) -> str | None:
    """How ``torch.nn`` can be spelled in this file (``nn``, ``torch.nn``), if at all."""
    for stmt in _top_level_small_statements(module):
        if isinstance(stmt, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
            if stmt.module is not None and dotted_name(stmt.module) == "torch" and stmt.relative == ():
                for alias in stmt.names:
                    if isinstance(alias.name, cst.Name) and alias.name.value == "nn":
                        return cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname else "nn"
        if isinstance(stmt, cst.Import):
            for alias in stmt.names:
                if dotted_name(alias.name) == "torch.nn" and alias.asname is not None:
                    return cst.ensure_type(alias.asname.name, cst.Name).value
    torch_alias = torch_module_alias(module)
    return f"{torch_alias}.nn" if torch_alias else None

def _top_level_small_statements(module: cst.Module) -> Iterator[cst.BaseSmallStatement]:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        elif isinstance(stmt, (cst.Try, cst.If)):
            for inner in stmt.body.body:
                if isinstance(inner, cst.SimpleStatementLine):
                    yield from inner.body

def is_import_statement(stmt: cst.BaseStatement) -> bool:
    """A top-level statement that only imports (``import x``, ``from x import y``, a
    ``try:``/``if`` block of imports)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
    if isinstance(stmt, cst.Try):
        return all(is_import_statement(s) for s in stmt.body.body)
    return False

def is_docstring(stmt: cst.BaseStatement) -> bool:
    return m.matches(stmt, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())]))

def end_of_import_block(module: cst.Module) -> int:
    """Index in ``module.body`` just after the leading docstring and imports."""
    index = 0
    for i, stmt in enumerate(module.body):
        if is_import_statement(stmt) or (i == 0 and is_docstring(stmt)):
            index = i + 1
        else:
            break
    return index

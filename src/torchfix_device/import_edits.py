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

from typing import Mapping, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor

from torchfix_device import _cst


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
        return isinstance(node, _cst.STATEMENT_SCAFFOLD)  # an import is a statement: none is in an expression


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

"""Where a module-level ``device = torch.device(...)`` line goes.

Just after the leading docstring and imports, as a reader expects; but never before the
statement that imports ``torch`` (a file that first runs ``sys.path.append('..')`` or sets an
environment variable has its ``import torch`` after that), and never after a module-level
statement that already reads the new name. When those two cannot both hold (a top-level use of
the device before ``import torch``), the caller also imports ``torch`` next to the binding.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from torchfix_device.syntax import imports as _imports
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal


@dataclass(frozen=True)
class Place:
    index: int  # in ``module.body``
    needs_import: bool  # ``torch`` is not bound yet at ``index``


def binding_place(module: cst.Module, torch_name: str | None, device_name: str) -> Place:
    """Where to insert the binding of ``device_name`` in ``module`` (the rewritten tree)."""
    index = _imports.end_of_import_block(module)
    first_use = _first_module_level_use(module, device_name)
    bound_at = None if torch_name is None else _first_binding(module, torch_name)
    if bound_at is None:  # ``import torch`` is added by libcst among the leading imports
        return Place(min(index, first_use), needs_import=False)
    after = bound_at + 1
    while after < len(module.body) and _imports.is_import_statement(module.body[after]):
        after += 1  # the imports that follow ``import torch`` stay together
    index = max(index, after)
    if bound_at >= first_use:
        return Place(first_use, needs_import=True)
    return Place(min(index, first_use), needs_import=False)


def _first_binding(module: cst.Module, name: str) -> int | None:
    """Index of the first top-level statement that imports ``name`` (directly, or inside a
    top-level ``try``/``if`` block)."""
    for index, stmt in enumerate(module.body):
        if any(name in _imported_names(s) for s in _simple_statements(stmt)):
            return index
    return None


def _simple_statements(stmt: cst.BaseStatement):
    if isinstance(stmt, cst.SimpleStatementLine):
        yield from stmt.body
    elif isinstance(stmt, (cst.Try, cst.If)):
        for inner in stmt.body.body:
            yield from _simple_statements(inner)


def _imported_names(stmt: cst.BaseSmallStatement) -> set[str]:
    names: set[str] = set()
    if isinstance(stmt, cst.Import):
        for alias in stmt.names:
            if alias.asname is not None:
                names.add(nodes.code_of(alias.asname.name))
            else:
                names.add((nodes.dotted_name(alias.name) or "").split(".")[0])
    elif isinstance(stmt, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
        for alias in stmt.names:
            names.add(nodes.code_of(alias.asname.name) if alias.asname else nodes.code_of(alias.name))
    return names


def _first_module_level_use(module: cst.Module, name: str) -> int:
    """Index of the first top-level statement that may read ``name`` while the module runs
    (a function's body runs later; its decorators and defaults do not); ``len(body)`` if none."""
    for index, stmt in enumerate(module.body):
        if isinstance(stmt, cst.FunctionDef):
            parts: list[cst.CSTNode] = [*stmt.decorators, stmt.params]
        else:
            parts = [stmt]
        if any(name in traversal.all_names(part) for part in parts):
            return index
    return len(module.body)

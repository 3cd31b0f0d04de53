"""The module-level bindings of every name, read off the module's own statements.

:class:`~torchfix_device.codemods.variable_wrapper.any_node_names.AnyNodeNames` needs, for a name read at module
level or resolving there, the nodes that bind it in the module's scope: what libcst's
``GlobalScope.assignments[name]`` holds. Its scope analysis of the module's skeleton costs as
much as the whole file's for a script or a notebook (all module-level code), once per rewrite
pass; :func:`module_bindings` walks the module-scope statements once instead and gives, per
name, records shaped like libcst's ``Assignment`` (``.name``, ``.node``: the target ``Name``,
the ``FunctionDef``/``ClassDef``, or the ``Import``/``ImportFrom`` statement), with the
qualified names an import gives (:meth:`ModuleBinding.qualified_names_for`).

Binding forms: assignment, annotated and augmented assignment targets (unpacked through tuples,
lists and starred elements, not through attributes or subscripts), ``for`` and ``with ... as``
targets, ``except ... as``, imports, ``def`` and ``class``, a walrus outside comprehensions.
Names it cannot give libcst's answer for are listed apart (:attr:`ModuleBindings.unknown`): a
walrus inside a comprehension, any name where the module holds a ``match`` statement or a type
alias. A star import binds nothing here, as in libcst's analysis (what it may bind is
:mod:`torchfix_device.facts.star_names`'s question).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import libcst as cst
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal


@dataclass(frozen=True, eq=False)
class ModuleBinding:
    name: str
    node: cst.CSTNode
    imported: str | None = None
    """For an import: the dotted name the bound name stands for (``torch.nn`` for ``nn`` in
    ``from torch import nn``; ``a`` for ``import a.b``); None otherwise."""

    def qualified_names_for(self, spelt: str) -> set[str]:
        """What libcst's ``ImportAssignment.get_qualified_names_for(spelt)`` gives."""
        if self.imported is None:
            return set()
        rest = spelt[len(self.name):]
        return {self.imported + rest}


@dataclass
class ModuleBindings:
    by_name: dict[str, list[ModuleBinding]]
    unknown: set[str]
    everything_unknown: bool


def module_bindings(module: cst.Module, walruses: bool = True) -> ModuleBindings:
    """Every module-level binding of ``module`` (see the module docstring); ``walruses=False``:
    the module's code holds no ``:=``, so its expressions are not searched for one."""
    found: dict[str, list[ModuleBinding]] = defaultdict(list)
    unknown: set[str] = set()
    search = _walrus_targets if walruses else _no_walruses
    for statement in traversal.module_scope_statements(module):
        if isinstance(statement, (cst.Match, cst.TypeAlias)):
            return ModuleBindings({}, set(), True)
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            found[statement.name.value].append(ModuleBinding(statement.name.value, statement))
            search(statement.decorators, found, unknown)
            continue
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                    continue  # libcst records no binding for it (facts.star_names widens the answers)
                _small(small, found, unknown, search)
            continue
        if isinstance(statement, cst.For):
            _targets(statement.target, found)
            search([statement.iter], found, unknown)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                search([item.item], found, unknown)
                if item.asname is not None:
                    _targets(item.asname.name, found)
        elif isinstance(statement, (cst.ExceptHandler, cst.ExceptStarHandler)):
            if statement.name is not None:
                _targets(statement.name.name, found)
            if statement.type is not None:
                search([statement.type], found, unknown)
        elif isinstance(statement, (cst.If, cst.While)):
            search([statement.test], found, unknown)
    return ModuleBindings(dict(found), unknown, False)


def _small(small: cst.BaseSmallStatement, found: dict[str, list[ModuleBinding]], unknown: set[str], search) -> None:  # noqa: ANN001
    if isinstance(small, cst.Assign):
        for target in small.targets:
            _targets(target.target, found)
        search([small.value], found, unknown)
    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        _targets(small.target, found)
        search([small.value] if small.value is not None else [], found, unknown)
    elif isinstance(small, cst.Import):
        for alias in small.names:
            dotted = _nodes.dotted_name(alias.name) or ""
            if alias.asname is not None:
                bound = cst.ensure_type(alias.asname.name, cst.Name).value
                found[bound].append(ModuleBinding(bound, small, dotted))
            else:
                root = dotted.partition(".")[0]
                found[root].append(ModuleBinding(root, small, root))
    elif isinstance(small, cst.ImportFrom):
        module = (_nodes.dotted_name(small.module) or "") if small.module is not None else ""
        base = "." * len(small.relative) + module
        for alias in small.names:  # type: ignore[union-attr]  (a star import was handled)
            name = _nodes.dotted_name(alias.name) or ""
            bound = cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname is not None else name
            source = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
            found[bound].append(ModuleBinding(bound, small, source))
    else:
        search([small], found, unknown)


def _targets(target: cst.BaseExpression, found: dict[str, list[ModuleBinding]]) -> None:
    if isinstance(target, cst.Name):
        found[target.value].append(ModuleBinding(target.value, target))
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _targets(element.value, found)
    elif isinstance(target, cst.StarredElement):
        _targets(target.value, found)


def _no_walruses(nodes: list, found: dict[str, list[ModuleBinding]], unknown: set[str]) -> None:  # noqa: ANN001
    """What :func:`_walrus_targets` finds in code that spells no ``:=``: nothing."""


def _walrus_targets(nodes: list, found: dict[str, list[ModuleBinding]], unknown: set[str]) -> None:  # noqa: ANN001
    """The walrus targets in ``nodes`` (expressions of the module's scope): bindings, or names
    left unknown where a comprehension holds them (libcst does not put those at module level)."""
    stack = [(n, False) for n in nodes]
    while stack:
        node, in_comprehension = stack.pop()
        if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            if in_comprehension:
                unknown.add(node.target.value)
            else:
                found[node.target.value].append(ModuleBinding(node.target.value, node.target))
        inside = in_comprehension or isinstance(node, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp))
        stack.extend((child, inside) for child in traversal.children(node))

"""Accumulated scalars for TFD006 (issue 20 idiom 6): ``total += loss.data`` ... ``total[0]``.

Before PyTorch 0.4 ``total = 0; total += loss.data`` made ``total`` a 1-element tensor and
``total[0]`` read its number; since 0.4 ``total`` is 0-dim and ``total[0]`` raises. The fix
accumulates ``loss.item()`` and reads ``total``: one fix across every statement concerned (all
of them rewritten, or none). It is planned here, before the codemod visits anything, because
a read may come before the accumulation in the file.

A name is planned when, in its scope, it is bound to a number literal (``total = 0``) and by
accumulations (``total += <numbers> * x.data``, ``total = total + x.data``) only, and every
read of it is ``total[0]`` (or the ``total`` of ``total = total + ...``), or is reached only
by a rebinding to a value computed from ``total[0]`` (``total = total[0] / n``: the same value
after the fix), which reaches no ``total[0]`` and no accumulation. Where a read or a
binding is anything else (``total.cpu()``, ``f(total)``, ``total = torch.zeros(1)``) the plan
is left for manual review, with the reason. Where ``x`` is not shown to be a scalar the fix is
unsafe: ``x.item()`` raises on a vector, whose ``total[0]`` is its first element's sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

import libcst as cst
from libcst.metadata import Assignment, FunctionScope, GlobalScope, PositionProvider
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device.facts.sizes import ARITHMETIC, Size, SizeEvidence
from torchfix_device.syntax.nodes import zero_index

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.facts.values import ModuleValues

NOT_SCALAR_ATTRS = frozenset({"weight", "bias", "grad", "data"})
"""``x.weight.data``: parameters and gradients, never one loss."""


@dataclass
class Accumulation:
    """One accumulated name of one scope: every node its fix rewrites, and how it may."""

    name: str
    datas: list[cst.Attribute] = field(default_factory=list)
    """The ``x.data`` nodes accumulated, each to become ``x.item()``."""
    reads: list[cst.Subscript] = field(default_factory=list)
    """The ``total[0]`` nodes, each to become ``total``."""
    problem: str | None = None
    """Why it is left for manual review (None: it may be rewritten)."""
    unproven: list[str] = field(default_factory=list)
    """The accumulated values not shown to be scalars (the fix is then unsafe)."""
    applied: bool | None = None
    """Whether the fix is applied, once the codemod has reported it."""

    def nodes(self) -> Iterator[cst.CSTNode]:
        yield from self.datas
        yield from self.reads


def plan(codemod: "Codemod", module: cst.Module, evidence: SizeEvidence) -> list[Accumulation]:
    """Every accumulated name of ``module`` that is read as ``name[0]``."""
    by_scope: dict[tuple[int, str], list[tuple[cst.Name, cst.Attribute]]] = {}
    for target, data in _accumulations(module, evidence):
        assignments = _bindings(codemod, target)
        if assignments:
            by_scope.setdefault((id(assignments[0].scope), target.value), []).append((target, data))
    found = []
    for (_, name), accumulated in by_scope.items():
        planned = _plan_one(codemod, name, accumulated, evidence)
        if planned is not None:
            found.append(planned)
    return found


def _plan_one(
    codemod: "Codemod", name: str, accumulated: list[tuple[cst.Name, cst.Attribute]], evidence: SizeEvidence
) -> Accumulation | None:
    assignments = _bindings(codemod, accumulated[0][0])
    targets = {id(t): d for t, d in accumulated}
    found = Accumulation(name, datas=[d for _, d in accumulated])
    self_reads: set[int] = set()
    for _, data in accumulated:
        self_reads.update(id(n) for n in _self_reads(codemod, data, name))
    started = False
    rebinds: dict[int, cst.CSTNode] = {}
    """``total = total[0] / n``: the number read, kept under the name (a number before and after the fix)."""
    for assignment in assignments:
        if id(assignment.node) in targets:
            continue
        value = evidence.value_of(assignment.node)
        if isinstance(value, cst.BaseExpression) and _is_number_literal(value):
            started = True
        elif isinstance(value, cst.BaseExpression) and _reads_the_number(value, name):
            rebinds[id(assignment.node)] = assignment.node
        elif found.problem is None:
            found.problem = f"`{name}` is also bound to something else than a number here ({_describe(codemod, assignment.node)})"
    accesses = {id(a.node): a.node for assignment in assignments for a in assignment.references}
    values = evidence.values
    for node in accesses.values():
        parent = codemod.parent_of(node)
        if isinstance(parent, cst.Subscript) and parent.value is node and zero_index(parent):
            found.reads.append(parent)
        elif found.problem is None and id(node) not in self_reads and _reached_by(values, node, rebinds) != "only":
            found.problem = f"`{name}` is also used as it is ({_describe(codemod, node)}), where a number would not do what the tensor does"
    if not found.reads:
        return None  # not the idiom: nothing reads `name[0]`
    if rebinds and found.problem is None:
        found.problem = _rebinds_reach(codemod, values, name, rebinds, [r.value for r in found.reads] + [
            cst.ensure_type(n, cst.Name) for n in accesses.values() if id(n) in self_reads], [t for t, _ in accumulated])
    if not started and found.problem is None:
        found.problem = f"`{name}` is not shown to start from a number (`{name} = 0`)"
    for data in found.datas:
        if evidence.size(data.value) not in (Size.ZERO_DIM, Size.ONE):
            found.unproven.append(_nodes.code_of(data.value))
    return found


def _reads_the_number(value: cst.BaseExpression, name: str) -> bool:
    """``value`` reads ``name[0]`` (``total[0] / len(data)``): the same number in 0.3 as ``total``
    after the fix, so ``value`` is the same too (no lambda or comprehension, which run later)."""
    found = False
    for node in traversal.walk(value):
        if isinstance(node, (cst.Lambda, cst.BaseComp)):
            return False
        if isinstance(node, cst.Subscript) and zero_index(node) and isinstance(node.value, cst.Name) and node.value.value == name:
            found = True
    return found


def _reached_by(values: "ModuleValues", read: cst.CSTNode, rebinds: dict[int, cst.CSTNode]) -> str | None:
    """``"only"`` where every binding that may reach ``read`` is one of ``rebinds``, ``"some"``
    where one of them is, None where none is; ``"some"`` also where the reach cannot be told."""
    reach = values.reach(read) if isinstance(read, cst.Name) else None
    if reach is None or reach.why is not None or not reach.bindings:
        return "some" if rebinds else None
    held = [id(b) in rebinds for b in reach.bindings]
    return "only" if all(held) else "some" if any(held) else None


def _rebinds_reach(
    codemod: "Codemod", values: "ModuleValues", name: str, rebinds: dict[int, cst.CSTNode], reads: list[cst.Name], accumulated: list[cst.Name]
) -> str | None:
    """Why a rebinding (``total = total[0] / n``) may reach what the fix rewrites: a ``name[0]``
    or ``total`` of ``total = total + x.data`` read (by the flow of the scope), or an
    accumulation (one that comes later in the file, or shares a loop with it); None if none may."""
    for read in reads:
        if _reached_by(values, read, rebinds) is not None:
            return f"`{name}` is read as `{name}[0]` where it may hold a number it was rebound to ({_describe(codemod, read)})"
    for target in accumulated:
        for rebind in rebinds.values():
            if values.source_order(rebind) < values.source_order(target) or _loops_of(values, rebind) & _loops_of(values, target):
                return f"`{name}` is accumulated where it may hold a number it was rebound to ({_describe(codemod, target)})"
    return None


def _loops_of(values: "ModuleValues", node: cst.CSTNode) -> set[int]:
    """The ``for``/``while`` statements around ``node`` (up to its function)."""
    found: set[int] = set()
    loop = values.enclosing(node, (cst.For, cst.While, cst.FunctionDef, cst.Module))
    while isinstance(loop, (cst.For, cst.While)):
        found.add(id(loop))
        loop = values.enclosing(loop, (cst.For, cst.While, cst.FunctionDef, cst.Module))
    return found


def _accumulations(module: cst.Module, evidence: SizeEvidence) -> Iterator[tuple[cst.Name, cst.Attribute]]:
    """``total += <numbers> * x.data`` and ``total = total + x.data``: (the target, ``x.data``)."""
    for node in traversal.walk_statements(module):
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            if isinstance(node.target, cst.Name):
                data = _data_term(node.value, evidence)
                if data is not None:
                    yield node.target, data
        elif isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            target, value = node.targets[0].target, node.value
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
                for own, other in ((value.left, value.right), (value.right, value.left)):
                    if isinstance(own, cst.Name) and own.value == target.value:
                        data = _data_term(other, evidence)
                        if data is not None:
                            yield target, data
                            break


def _data_term(value: cst.BaseExpression, evidence: SizeEvidence) -> cst.Attribute | None:
    """The one ``x.data`` of ``value``, whose other operands are numbers (``len(batch) * x.data``)."""
    leaves = list(_leaves(value))
    datas = [leaf for leaf in leaves if isinstance(leaf, cst.Attribute) and leaf.attr.value == "data"]
    if len(datas) != 1 or any(leaf is not datas[0] and evidence.size(leaf) is not Size.NUMBER for leaf in leaves):
        return None
    subject = datas[0].value
    if isinstance(subject, cst.Attribute) and subject.attr.value in NOT_SCALAR_ATTRS:
        return None  # a parameter's or gradient's values: `total[0]` is real indexing
    return datas[0]  # type: ignore[return-value]


def _leaves(value: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, ARITHMETIC):
        yield from _leaves(value.left)
        yield from _leaves(value.right)
    elif isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
        yield from _leaves(value.expression)
    else:
        yield value


def _self_reads(codemod: "Codemod", data: cst.Attribute, name: str) -> Iterator[cst.Name]:
    """The ``total`` of ``total = total + x.data`` (a read that is part of the accumulation)."""
    node: cst.CSTNode | None = data
    while node is not None and not isinstance(node, cst.BaseSmallStatement):
        node = codemod.parent_of(node)
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.BinaryOperation):
        for operand in (node.value.left, node.value.right):
            if isinstance(operand, cst.Name) and operand.value == name:
                yield operand


def _bindings(codemod: "Codemod", target: cst.Name) -> list[Assignment]:
    """Every binding of ``target``'s name in the function or module scope it binds in."""
    scope = codemod.scope_of(target)
    if scope is None:
        return []
    found = [a for a in scope[target.value] if isinstance(a, Assignment)]
    if not found or len(found) != len(list(scope[target.value])):
        return []
    if not isinstance(found[0].scope, (FunctionScope, GlobalScope)) or any(a.scope is not found[0].scope for a in found):
        return []
    return list(found[0].scope.assignments[target.value])


def _is_number_literal(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))


def _describe(codemod: "Codemod", node: cst.CSTNode) -> str:
    """``line N, `code``` for the small statement holding ``node``."""
    statement: cst.CSTNode | None = node
    while statement is not None and not isinstance(statement, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
        statement = codemod.parent_of(statement)
    shown = statement if isinstance(statement, cst.BaseSmallStatement) else node
    code = _nodes.code_of(shown).strip().splitlines()[0]
    line = codemod.get_metadata(PositionProvider, node).start.line
    return f"line {line}, `{code[:60]}`"

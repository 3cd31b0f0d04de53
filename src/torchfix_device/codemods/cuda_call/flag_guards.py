"""TFD001's guards on a user's flag: which may go once the moves take the flag's device.

``if args.cuda: model.cuda()`` becomes ``model.to(device)`` with
``device = torch.device("cuda" if args.cuda else "cpu")`` (:mod:`torchfix_device.devices.flag_device`)
when the flag is usable there, the guard has no ``else``, its body only moves existing values
(``x = x.cuda()``, ``m.cuda()``, ``a, b = a.cuda(), b.cuda()``) and each of them is shown to be on
the CPU just before it (:mod:`._cpu_evidence`): with the flag off, ``.to(cpu)`` of a value on
the CPU changes nothing. ``x.cuda() if use_cuda else x`` becomes ``x.to(device)`` on the same
terms. Every other guard stays, and the message of its moves says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.facts.devices import not_on_cpu
from torchfix_device.codemods.cuda_call.guards import moved_value, small_statements

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.devices.flag_device import ScopeFlag

CUDA_CALL = m.Call(func=m.Attribute(attr=m.Name("cuda")))


class FlagGuards:
    """The guards on a flag of one module, and what becomes of them."""

    def __init__(self, codemod: "Codemod", module: cst.Module) -> None:
        self.codemod = codemod
        self._guard_of: dict[int, cst.CSTNode] = {}
        self._decided: dict[int, str | None] = {}
        self._statement_of: dict[int, cst.BaseStatement] = {}
        flags = codemod.device_source.flags
        guards = flags.analysis.by_guard if flags.analysis.scan.guards else {}
        if not guards:
            return
        for node in traversal.of_classes(module, cst.If, cst.IfExp):
            if id(node) in guards:
                body = node.body if isinstance(node, cst.IfExp) else node.body  # type: ignore[attr-defined]
                for inner in traversal.of_classes_under(module, body, cst.Call):
                    if m.matches(inner, CUDA_CALL):
                        self._guard_of[id(inner)] = node  # the innermost guard wins: walked last
        for statement in traversal.walk_statements(module):
            if isinstance(statement, cst.SimpleStatementLine):
                for node in traversal.walk(statement):
                    if isinstance(node, cst.IfExp) and id(node) in guards:
                        self._statement_of[id(node)] = statement

    def guard_of(self, call: cst.Call) -> cst.CSTNode | None:
        """The innermost guard on a flag around ``call``."""
        return self._guard_of.get(id(call))

    def flag_of(self, guard: cst.CSTNode) -> "ScopeFlag | None":
        return self.codemod.device_source.flags.guard_flag(guard)

    def why_it_stays(self, guard: cst.CSTNode) -> str | None:
        """None when ``guard`` may go (its moves taking the flag's device); else why not."""
        if id(guard) not in self._decided:
            self._decided[id(guard)] = self._decide(guard)
        return self._decided[id(guard)]

    def shown(self, guard: cst.CSTNode) -> str:
        test = guard.test  # type: ignore[attr-defined]
        return f"if {nodes.code_of(test)}:" if isinstance(guard, cst.If) else f"... if {nodes.code_of(test)} else ..."

    def _decide(self, guard: cst.CSTNode) -> str | None:
        flag = self.flag_of(guard)
        if flag is None:
            return "it does not test a flag"
        if not flag.usable:
            return flag.reason
        if id(guard) in flag.before:
            return f"it runs before `{flag.flag}` is final"
        if isinstance(guard, cst.IfExp):
            return self._decide_ifexp(guard, flag)
        if_node = cst.ensure_type(guard, cst.If)
        if if_node.orelse is not None:
            return "it has an `else`"
        statements = small_statements(if_node.body)
        moved: list[cst.BaseExpression] = []
        for statement in statements or []:
            found = _moved_names(statement)
            if found is None:
                return "it does more than move existing values"
            moved.extend(found)
        if not moved:
            return "it does more than move existing values"
        for name in moved:
            if not isinstance(name, cst.Name):
                return f"nothing shows where `{nodes.code_of(name)}` is when `{flag.flag}` is false"
            reason = not_on_cpu(self.codemod, name, if_node)
            if reason is not None:
                return _off(reason, flag)
        return None

    def _decide_ifexp(self, guard: cst.IfExp, flag: "ScopeFlag") -> str | None:
        receiver = moved_value(guard.body) if m.matches(guard.body, CUDA_CALL) else None
        if receiver is None or not guard.orelse.deep_equals(receiver):
            return "its branches do more than move one value"
        if not isinstance(receiver, cst.Name):
            return f"nothing shows where `{nodes.code_of(receiver)}` is when `{flag.flag}` is false"
        statement = self._statement_of.get(id(guard))
        if statement is None:
            return "it is not in a statement of its own"
        reason = not_on_cpu(self.codemod, receiver, statement, skip=guard)
        return None if reason is None else _off(reason, flag)


def _off(reason: str, flag: "ScopeFlag") -> str:
    return f"{reason}; with `{flag.flag}` false, `.to(device)` would put it on the CPU wherever it was"


def _moved_names(statement: cst.BaseSmallStatement) -> list[cst.BaseExpression] | None:
    """The values ``statement`` moves onto themselves (``x = x.cuda()``, ``m.cuda()``,
    ``a, b = a.cuda(), b.cuda()``); None when it does anything else."""
    if isinstance(statement, cst.Expr):
        moved = moved_value(statement.value) if m.matches(statement.value, CUDA_CALL) else None
        return None if moved is None else [moved]
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return None
    target, value = statement.targets[0].target, statement.value
    pairs = [(target, value)]
    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple):
        if len(target.elements) != len(value.elements):
            return None
        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
    found = []
    for t, v in pairs:
        moved = moved_value(v) if m.matches(v, CUDA_CALL) else None
        if moved is None or nodes.dotted_name(moved) != nodes.dotted_name(t):
            return None
        found.append(moved)
    return found

"""The device bindings built from a user's flag: which sites take one, their names, where they go.

:mod:`torchfix_device.devices.flag_device` says, for each scope, which flag decides the device and from
which statement on; this module is what :class:`~torchfix_device.devices.source.DeviceSource`
does with that. A site that comes after that statement in a scope with a usable flag takes
``device = torch.device("cuda" if <flag> else "cpu")``; the binding is inserted right after
that statement once a rewrite has used its name (in ``finish`` for the module, when leaving the
function for a function). A binding of that value already there (an earlier codemod or run put
it) is reused, by the sites that may use it only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from torchfix_device.syntax import imports
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.devices.expression import device_expression_node
from torchfix_device.devices.flag_device import FlagAnalysis, ScopeFlag
from torchfix_device.devices.flag_scan import asks_cuda, flag_test, is_main_test, statements_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from torchfix_device.syntax.lookup import CodemodView

CANDIDATES = ("device", "torch_device", "default_device", "device_")
IS_AVAILABLE = frozenset({"is_available"})
_LAST: list[tuple[cst.Module, FlagAnalysis]] = []
"""The analysis of the last module asked about: the codemods of one pass see the same tree."""


class FlagAt(NamedTuple):
    """What the user's flag says at one site."""

    flag: ScopeFlag
    applies: bool
    """The site comes after the flag is final and the flag is usable: it takes the flag's device."""


def analysis_of(module: cst.Module, codemod: "CodemodView") -> FlagAnalysis:
    if _LAST and _LAST[0][0] is module:
        return _LAST[0][1]

    def is_torch(node: cst.BaseExpression) -> bool:
        return any(q == "torch" or q.startswith("torch.") for q in codemod.qualified_names(node))

    found = FlagAnalysis(module, is_torch)
    _LAST[:] = [(module, found)]
    return found


class FlagBindings:
    """The flag devices of one transform of one module."""

    def __init__(self, codemod: "CodemodView", module: cst.Module) -> None:
        self.codemod = codemod
        self.module = module
        self._analysis: FlagAnalysis | None = None
        self._names: dict[int, str] | None = None
        self._existing: dict[int, str | None] = {}
        self.requested: dict[int, ScopeFlag] = {}

    @property
    def analysis(self) -> FlagAnalysis:
        if self._analysis is None:
            self._analysis = analysis_of(self.module, self.codemod)
        return self._analysis

    def at(self, node: cst.CSTNode) -> FlagAt | None:
        """The flag of the innermost scope around ``node`` that has one (None: no flag there)."""
        by_scope = self.analysis.by_scope
        if not by_scope:
            return None
        flag = next((by_scope[id(f)] for f in reversed(self.codemod.function_stack) if id(f) in by_scope), None)
        flag = flag or by_scope.get(id(self.module))
        if flag is None:
            return None
        return FlagAt(flag, flag.usable and id(node) not in flag.before)

    def guard_flag(self, guard: cst.CSTNode) -> ScopeFlag | None:
        """The flag ``guard`` (an ``If`` or ``IfExp`` around a move) tests, if it tests one."""
        return self.analysis.by_guard.get(id(guard))

    def requested_names(self) -> set[str]:
        """The names of the bindings this transform asked to insert (not there yet)."""
        return {self._binding_names()[key] for key in self.requested}

    def reserved(self) -> set[str]:
        """Names the flag bindings of this module take (the module-level binding avoids them)."""
        return set(self._binding_names().values())

    def name_for(self, flag: ScopeFlag) -> str:
        """The name the binding of ``flag`` has or gets; asks for it to be inserted."""
        existing = self.existing_name(flag)
        if existing is not None:
            return existing
        self.requested[id(flag.scope)] = flag
        return self._binding_names()[id(flag.scope)]

    def binding_name(self, flag: ScopeFlag) -> str:
        """The name of ``flag``'s binding (there already, or to be inserted)."""
        return self.existing_name(flag) or self._binding_names()[id(flag.scope)]

    def existing_name(self, flag: ScopeFlag) -> str | None:
        """A binding of ``flag``'s device right after the flag is final, already there."""
        if id(flag.scope) not in self._existing:
            statements = flag.statements()
            found = None
            if flag.after + 1 < len(statements):
                found = self._binding_of(statements[flag.after + 1], self.test_code(flag))
            self._existing[id(flag.scope)] = found
        return self._existing[id(flag.scope)]

    def test_code(self, flag: ScopeFlag) -> str:
        """The test in the device ``flag``'s binding carries (as :meth:`condition_of` reads it)."""
        return self.test_of(flag, imports.torch_module_alias(self.module) or "torch")

    def _binding_of(self, statement: cst.CSTNode, condition: str) -> str | None:
        if not m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])):
            return None
        assign = cst.ensure_type(cst.ensure_type(statement, cst.SimpleStatementLine).body[0], cst.Assign)
        if self.condition_of(assign.value) != condition:
            return None
        return cst.ensure_type(assign.targets[0].target, cst.Name).value

    def condition_of(self, value: cst.BaseExpression, flag_only: bool = False) -> str | None:
        """The flag test of a device built from a flag: ``torch.device("cuda" if <test> else
        "cpu")`` or ``(<expression>) if <test> else torch.device("cpu")`` (not
        ``torch.cuda.is_available()``: that is the default device). ``flag_only``: without an
        ``and torch.cuda.is_available()`` it ends with."""
        choice: cst.BaseExpression = value
        if m.matches(value, m.Call(args=[m.Arg(value=m.IfExp(body=m.SimpleString(), orelse=m.SimpleString()), keyword=None)])):
            call = cst.ensure_type(value, cst.Call)
            if not self._is_torch_device(call.func):
                return None
            choice = cst.ensure_type(call.args[0].value, cst.IfExp)
            if (choice.body.evaluated_value, choice.orelse.evaluated_value) != ("cuda", "cpu"):  # type: ignore[attr-defined]
                return None
        elif not (
            m.matches(value, m.IfExp(orelse=m.Call(args=[m.Arg(value=m.SimpleString(), keyword=None)])))
            and self._is_torch_device(cst.ensure_type(cst.ensure_type(value, cst.IfExp).orelse, cst.Call).func)
        ):
            return None
        test = cst.ensure_type(choice, cst.IfExp).test
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and asks_cuda(test.right):
            flagged = test.left
        else:
            flagged = test
        if flag_test(flagged) is None:
            return None
        return nodes.code_of(flagged if flag_only else test)

    def _is_torch_device(self, func: cst.BaseExpression) -> bool:
        return "torch.device" in self.codemod.qualified_names(func, ending_in=frozenset({"device"}))

    def _binding_names(self) -> dict[int, str]:
        """Scope → the free name its binding gets: at module level, free there; in a function,
        spelt nowhere in it (its sites before the flag is final take the module's default
        binding, whose name avoids these)."""
        if self._names is None:
            names: dict[int, str] = {}
            module_flag = self.analysis.by_scope.get(id(self.module))
            module_name = None
            if module_flag is not None and module_flag.usable:
                module_name = next((n for n in CANDIDATES if self.codemod.free_at_module_level(n)), None) or \
                    _numbered(traversal.all_names(self.module))
                names[id(self.module)] = module_name
            for key, flag in self.analysis.by_scope.items():
                if flag.usable and isinstance(flag.scope, cst.FunctionDef):
                    spelt = traversal.all_names(flag.scope)
                    names[key] = next((n for n in CANDIDATES if n not in spelt), None) or _numbered(spelt)
            self._names = names
        return self._names

    # -- insertion --------------------------------------------------------------------------
    def binding(self, flag: ScopeFlag, module: cst.Module) -> cst.SimpleStatementLine:
        """``device = torch.device("cuda" if <flag> else "cpu")``; with a configured device
        expression ``device = (<expression>) if <flag> else torch.device("cpu")``."""
        torch_name = imports.torch_module_alias(self.module)
        if torch_name is None:
            AddImportsVisitor.add_needed_import(self.codemod.context, "torch")
            torch_name = "torch"
        name = self._binding_names()[id(flag.scope)]
        configured = self.codemod.device_expression
        test = self.test_of(flag, torch_name)
        if configured is None:
            value = f'{torch_name}.device("cuda" if {test} else "cpu")'
        else:
            chosen = nodes.code_of(device_expression_node(configured, torch_name))
            value = f'({chosen}) if {test} else {torch_name}.device("cpu")'
        code = f"{name} = {value}\n"
        return cst.ensure_type(cst.parse_statement(code, config=module.config_for_parsing), cst.SimpleStatementLine)

    @staticmethod
    def test_of(flag: ScopeFlag, torch_name: str) -> str:
        """The test of ``flag``'s device: ``args.cuda``, or ``args.cuda and torch.cuda.is_available()``."""
        return flag.condition if flag.asks_cuda else f"{flag.condition} and {torch_name}.cuda.is_available()"

    def finish_module(self, module: cst.Module, used: "Callable[[str], bool]") -> cst.Module:
        """Insert the module's flag binding where it goes if a rewrite used its name."""
        flag = self.requested.get(id(self.module))
        if flag is None or not used(self._binding_names()[id(self.module)]):
            return module
        statement = self.binding(flag, module)
        if flag.block is self.module:
            return module.with_changes(body=_insert(module.body, statements_of(self.module), flag.after, statement))
        original = cst.ensure_type(flag.block, cst.If)
        mains = [i for i, s in enumerate(module.body) if isinstance(s, cst.If) and is_main_test(s.test) and s.test.deep_equals(original.test)]
        if len(mains) != 1:
            raise RuntimeError("the `if __name__ == '__main__':` block the device binding goes in is gone")
        main = cst.ensure_type(module.body[mains[0]], cst.If)
        block = cst.ensure_type(main.body, cst.IndentedBlock)
        block = block.with_changes(body=_insert(block.body, statements_of(original), flag.after, statement))
        body = list(module.body)
        body[mains[0]] = main.with_changes(body=block)
        return module.with_changes(body=body)

    def finish_function(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        """Insert a function's flag binding if a rewrite in it used its name."""
        flag = self.requested.get(id(original))
        if flag is None or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        name = self._binding_names()[id(original)]
        if traversal.count_name(updated.body, name) == 0:
            return updated
        statement = self.binding(flag, self.module)
        after = flag.after
        if after < 0 and statements_of(original) and imports.is_docstring(statements_of(original)[0]):
            after = 0
        body = _insert(updated.body.body, statements_of(original), after, statement)
        return updated.with_changes(body=updated.body.with_changes(body=body))


def _insert(updated: "Sequence[cst.BaseStatement]", original: "Sequence[cst.BaseStatement]", after: int,
            statement: cst.BaseStatement) -> list[cst.BaseStatement]:
    """``updated`` (the rewrite of ``original``) with ``statement`` after the rewrite of
    ``original[after]``, found as the last statement equal to it (it holds no rewritten site)."""
    body = list(updated)
    if after < 0:
        return [statement, *body]
    anchor = original[after]
    found = [i for i, s in enumerate(body) if s is anchor or s.deep_equals(anchor)]
    if found:
        index = found[-1]
    elif len(body) == len(original):
        index = after
    else:
        raise RuntimeError("the statement after which the flag is final was rewritten: cannot place its device")
    body.insert(index + 1, statement)
    return body


def _numbered(names: set[str]) -> str:
    i = 2
    while f"device{i}" in names:
        i += 1
    return f"device{i}"

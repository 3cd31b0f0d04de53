"""TFD001's move wrappers: a module-level lambda that calls something and moves the result to
CUDA when the user's flag is on, ``W = lambda *args, **kwargs: F(*args, **kwargs).cuda() if
USE_CUDA else F(*args, **kwargs)`` (RL-Adventure's ``Variable``, and the notebooks copied from it).

Each call ``W(x, volatile=True)`` becomes ``F(x, volatile=True).to(device)``, the device built
from the flag (``device = torch.device("cuda" if USE_CUDA else "cpu")``), and the lambda goes
once every call is rewritten. Only where

- the name is bound once, by that statement, and every read of it is the function of a call;
- ``F``'s first name is bound once, at module level, and reads the same at every call; the
  device's name reads the module's binding there too (no function binds it);
- every call runs after the flag is final, outside any function with a flag of its own.

Otherwise nothing here applies, and the ``.cuda()`` inside the lambda is rewritten as any other.
A call is safe where the flag asks ``torch.cuda.is_available()`` (with it off no tensor is on
CUDA, so ``.to(cpu)`` changes nothing), or ``F`` is ``Variable`` and its argument is shown to be
on the CPU (:func:`~torchfix_device.facts.devices.on_cpu`); elsewhere it is unsafe.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.devices import kept_chain, on_cpu
from torchfix_device.codemods.catalog import codes
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

if TYPE_CHECKING:
    from torchfix_device.codemods.base import Codemod
    from torchfix_device.devices.flag_device import ScopeFlag

VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


@dataclass
class Wrapper:
    """One lambda that moves what it returns, and its calls."""

    name: str
    statement: cst.SimpleStatementLine
    inner: cst.Call
    """The ``.cuda()`` call inside the lambda."""
    callee: cst.BaseExpression
    flag: "ScopeFlag"
    test: str
    """The lambda's condition, as written."""
    calls: dict[int, str | None] = field(default_factory=dict)
    """``id`` of each call of the lambda → why its rewrite is unsafe (None: safe)."""
    goes: bool = False
    """Every call will be rewritten (none suppressed nor held back): the lambda goes."""
    rewritten: int = 0


class MoveWrappers:
    """The move wrappers of one module, for TFD001."""

    def __init__(self, codemod: "Codemod", module: cst.Module) -> None:
        self.codemod = codemod
        self._by_call: dict[int, Wrapper] = {}
        self._by_inner: dict[int, Wrapper] = {}
        self.wrappers: list[Wrapper] = []
        for statement in module.body:
            wrapper = self._wrapper(statement, module)
            if wrapper is None:
                continue
            self.wrappers.append(wrapper)
            self._by_inner[id(wrapper.inner)] = wrapper
            self._by_call.update((key, wrapper) for key in wrapper.calls)

    def skips(self, call: cst.Call) -> bool:
        """``call`` is the ``.cuda()`` of a lambda that goes: nothing to rewrite there."""
        wrapper = self._by_inner.get(id(call))
        return wrapper is not None and wrapper.goes

    def rewrite(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """``F(args).to(device)`` for a call of a wrapper (None: not one)."""
        wrapper = self._by_call.get(id(original))
        if wrapper is None:
            return None
        device = self.codemod.device_source.flags.binding_name(wrapper.flag)
        shown = nodes.code_of(wrapper.callee)
        message = (
            f"`{wrapper.name}(...)` calls `{shown}(...)` and moves the result with `.cuda()` when `{wrapper.test}`:"
            f" use `{shown}(...).to({device})`"
        )
        why = wrapper.calls[id(original)]
        if why is not None:
            message += f"; unsafe: {why}"
        if not self.codemod.report(original, message, safe=False if why is not None else None):
            return updated
        self.codemod.device_source.flags.name_for(wrapper.flag)
        wrapper.rewritten += 1
        args = nodes.positional_args(original)
        for call in kept_chain(args[0].value) if args and not args[0].star else ():
            self.codemod.resolves(call, "TFD003")  # a factory there is moved now: nothing left to review
        call = updated.with_changes(func=wrapper.callee.deep_clone(), lpar=(), rpar=())
        to = cst.Call(func=cst.Attribute(value=call, attr=cst.Name("to")), args=[cst.Arg(cst.Name(device))])
        return to.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def removed(self) -> list[cst.SimpleStatementLine]:
        """The lambdas that go (at the end of the module): every call was rewritten."""
        gone = []
        for wrapper in self.wrappers:
            if not wrapper.goes or wrapper.rewritten != len(wrapper.calls):
                continue
            message = f"`{wrapper.name}` is a lambda that moves what it returns with `.cuda()` when `{wrapper.test}`: its calls now move to the device themselves; remove it"
            if self.codemod.report(wrapper.statement, message):
                gone.append(wrapper.statement)
                for node in traversal.walk(wrapper.statement):  # what others leave for review there goes too
                    if isinstance(node, cst.Call):
                        for code in codes():
                            self.codemod.resolves(node, code)
        return gone

    # -- finding them ----------------------------------------------------------------------
    def _wrapper(self, statement: cst.BaseStatement, module: cst.Module) -> Wrapper | None:
        shape = _shape(statement)
        if shape is None:
            return None
        target, guard, inner = shape
        codemod = self.codemod
        flags = codemod.device_source.flags
        flag = flags.guard_flag(guard)
        if flag is None or not flag.usable or flag.scope is not module or id(guard) in flag.before:
            return None
        callee = cst.ensure_type(inner.func, cst.BaseExpression)
        root = _root(callee)
        scope = codemod.scope_of(target)
        if root is None or scope is None:
            return None
        own = list(scope.assignments[target.value])
        roots = set(scope.assignments[root.value])
        if len(own) != 1 or len(roots) != 1:
            return None
        calls: list[cst.Call] = []
        for access in own[0].references:
            parent = codemod.parent_of(access.node)
            if not (isinstance(parent, cst.Call) and parent.func is access.node):
                return None
            calls.append(parent)
        if not calls:
            return None
        device = flags.binding_name(flag)
        for call in calls:
            if id(call) in flag.before or self._in_function_with_flag(call):
                return None
            if codemod.exact_bindings(root.value, call) != roots:
                return None
            if any(b.scope is not scope for b in codemod.exact_bindings(device, call)):
                return None
        wrapper = Wrapper(target.value, cst.ensure_type(statement, cst.SimpleStatementLine), cst.ensure_type(guard.body, cst.Call), callee, flag, nodes.code_of(guard.test))
        values = None
        if not flag.asks_cuda:  # `Variable(x)` is where `x` is: the argument's place is asked
            names = facts_values.of(codemod).names(callee)  # (of any node: not the statement visited)
            values = facts_values.of(codemod) if names and names <= VARIABLE else None
        for call in calls:
            wrapper.calls[id(call)] = None if flag.asks_cuda else _why_unsafe(call, values, wrapper.test)
        wrapper.goes = not codemod.is_suppressed(statement) and all(
            codemod.options.applies(why is None) and not codemod.is_suppressed(call)
            for call, why in zip(calls, wrapper.calls.values())
        )
        return wrapper

    def _in_function_with_flag(self, node: cst.CSTNode) -> bool:
        by_scope = self.codemod.device_source.flags.analysis.by_scope
        parent = self.codemod.parent_of(node)
        while parent is not None:
            if isinstance(parent, cst.FunctionDef) and id(parent) in by_scope:
                return True
            parent = self.codemod.parent_of(parent)
        return False


def _why_unsafe(call: cst.Call, values: "facts_values.ModuleValues | None", test: str) -> str | None:
    args = nodes.positional_args(call)
    if values is not None and args and not args[0].star and on_cpu(values, args[0].value):
        return None
    shown = nodes.code_of(args[0].value) if args and not args[0].star else "what it returns"
    return f"nothing shows where `{nodes.short_text(shown)}` is when `{test}` is false: `.to(device)` would then put it on the CPU wherever it was"


def _root(callee: cst.BaseExpression) -> cst.Name | None:
    while isinstance(callee, cst.Attribute):
        callee = callee.value
    return callee if isinstance(callee, cst.Name) else None


def _shape(statement: cst.BaseStatement) -> tuple[cst.Name, cst.IfExp, cst.Call] | None:
    """``W = lambda *a, **k: F(*a, **k).cuda() if <test> else F(*a, **k)``: ``W``, the
    conditional and ``F(*a, **k)``."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None  # every statement of every module with a `.cuda()` comes here: plain checks first
    assign = statement.body[0]
    if not (isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Lambda) and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)):
        return None
    function = assign.value
    params = function.params
    if params.params or params.posonly_params or params.kwonly_params:
        return None
    if not (isinstance(params.star_arg, cst.Param) and isinstance(params.star_kwarg, cst.Param)):
        return None
    star, double = params.star_arg.name.value, params.star_kwarg.name.value
    body = function.body
    if not m.matches(body, m.IfExp(body=m.Call(func=m.Attribute(value=m.Call(), attr=m.Name("cuda")), args=[]))):
        return None
    guard = cst.ensure_type(body, cst.IfExp)
    inner = cst.ensure_type(cst.ensure_type(cst.ensure_type(guard.body, cst.Call).func, cst.Attribute).value, cst.Call)
    forwarded = m.Call(args=[m.Arg(star="*", value=m.Name(star), keyword=None), m.Arg(star="**", value=m.Name(double), keyword=None)])
    if not m.matches(inner, forwarded) or not guard.orelse.deep_equals(inner):
        return None
    return cst.ensure_type(assign.targets[0].target, cst.Name), guard, inner


def wrapper_names(tree: ast.Module) -> set[str]:
    """Stage 1: the names a module-level lambda holding a ``.cuda()`` call is bound to."""
    names = set()
    for statement in tree.body:
        if type(statement) is ast.Assign and len(statement.targets) == 1 and type(statement.targets[0]) is ast.Name \
                and type(statement.value) is ast.Lambda:
            if any(type(n) is ast.Attribute and n.attr == "cuda" for n in ast.walk(statement.value.body)):
                names.add(statement.targets[0].id)
    return names

from __future__ import annotations

import ast
from typing import Iterator

import libcst as cst

from torchfix_device.codemods.base import Codemod
from torchfix_device.codemods.legacy_autograd_function.rewrite import apply_call, migrate_class
from torchfix_device.facts.legacy_function_run import FileDecisions, RunLegacyFunctions, decide
from torchfix_device.facts.legacy_functions import FUNCTION_BASES, SUPPRESSED_CLASS, parse
from torchfix_device.prefilter.candidates import FileFacts

BY_HAND = (
    "by hand: `@staticmethod` on `forward` and `backward`, their `self` renamed `ctx`, and each "
    "`{name}()(x)` written `{name}.apply(x)`"
)


class LegacyAutogradFunction(Codemod):
    """
    ## What it does
    Migrates a legacy autograd Function, a subclass of `torch.autograd.Function` whose `forward`
    is an instance method (`def forward(self, x)`), to the new style: `forward` and `backward`
    become `@staticmethod`s whose first parameter is `ctx`, every `self.` in them becomes
    `ctx.` (`save_for_backward`, `saved_tensors`, `needs_input_grad`, `mark_dirty`,
    `mark_non_differentiable`, and the attributes `forward` sets for `backward`), an `__init__`
    that only calls the base's is removed, and every call `F()(x)` becomes `F.apply(x)`, in the
    class's file and in the other files of the run (`from models.functions import F`). A
    `backward` decorated with torch's `once_differentiable` keeps it, under `@staticmethod`.

    ## Why is this bad?
    Since PyTorch 1.3 calling an instance of such a class raises `RuntimeError: Legacy autograd
    function with non-static forward method is deprecated. Please use new-style autograd
    function with static forward method.` Code written for PyTorch 0.2 to 1.2 (custom
    activations, gradient reversal layers, straight-through estimators) stops at its first
    forward pass.

    ## Example
    ```python
    class ClampedReLU(torch.autograd.Function):
        def forward(self, x):
            self.save_for_backward(x)
            return x.clamp(min=0)

        def backward(self, grad_output):
            x, = self.saved_tensors
            return grad_output * (x > 0).float()

    y = ClampedReLU()(x)
    ```

    ## Use instead
    ```python
    class ClampedReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            return grad_output * (x > 0).float()

    y = ClampedReLU.apply(x)
    ```

    ## Not rewritten
    A Function already in the new style (a static `forward`), and a class whose base is a
    project class called `Function` (or a name also bound otherwise in the file, or one a star
    import may bind) are left alone. Reported for manual review, with what to do, and left as
    they are, class and calls alike: a class whose instances carry state from `__init__`
    (`F(alpha)(x)` with `self.alpha = alpha`: pass it to `apply` as one more argument, take it in
    `forward(ctx, x, alpha)`, keep it as `ctx.alpha`, return one more `None` from `backward`); one
    whose `forward`/`backward` use `self` otherwise than for the context's attributes and their
    own (a helper method, `self` passed on, a class attribute); one with other bases,
    decorators, or nested in a function or class; and one of which a use anywhere in the run is
    not a call `F()(...)` (an instance kept and called later, `isinstance`, a subclass, keywords
    in the call, an import under another name, a `# noqa: TFD017` on a call, a file the run does
    not rewrite). A file outside the run that calls the class cannot be seen: migrate it too.

    ## Fix safety
    Safe. The new `ctx` is what the legacy `self` was for autograd: the same saved tensors,
    `needs_input_grad` and marks, and the attributes `forward` sets are read back in `backward`
    from the same object; `forward` still runs without recording a graph, and `apply` returns
    the same outputs with the same gradients. The class is migrated only when every use of it in
    the run is a call that becomes `apply` in the same run, so no half-migrated pair is left: the
    legacy code raised on every call, and the migrated code computes what it computed under
    PyTorch 1.2 and before.
    """

    code = "TFD017"
    name = "legacy-autograd-function"
    summary = "`class F(torch.autograd.Function)` with a non-static `forward` raises since PyTorch 1.3: static methods and `F.apply(x)`"
    safe = True
    triggers = ("Function",)  # a file calling a class of another file: the engine lends it the word

    @classmethod
    def sites(cls, facts: FileFacts) -> Iterator[ast.AST]:
        """Classes that may subclass torch's ``Function`` and define ``forward``; calls
        ``X()(...)`` (of a class of this file or, through the run, of another)."""
        scan = facts.scan
        for node, _, _ in facts.contexts:
            if isinstance(node, ast.ClassDef):
                if any(scan.may_name(b, FUNCTION_BASES) for b in node.bases) and any(
                    isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "forward" for s in node.body
                ):
                    yield node
            elif isinstance(node, ast.Call) and _callee_of_instance_call(node) is not None:
                yield node

    def visit_Module(self, node: cst.Module) -> bool | None:
        super().visit_Module(node)
        tree = parse(node.code)
        run = getattr(self.options, "legacy_functions", None)
        self._run: RunLegacyFunctions | None = run if isinstance(run, RunLegacyFunctions) else None
        self._here = getattr(self.context, "filename", None)
        self._decisions = FileDecisions() if tree is None else decide(tree, self._run, self._here, self._suppressed_line)
        return None

    def _suppressed_line(self, line: int) -> bool:
        return self.suppressions is not None and self.suppressions.suppresses(line, self.code)

    # -- the class ----------------------------------------------------------------------------
    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.CSTNode:
        super().leave_ClassDef(original_node, updated_node)
        name = original_node.name.value
        if self.class_stack or self.function_stack:
            if any(c.name == name for c in self._decisions.nested):
                self.report(original_node, _review(name, "it is defined inside a function or class"), fixable=False)
            return updated_node
        legacy = self._decisions.classes.get(name)
        if legacy is None:
            return updated_node
        reason = self._decisions.reasons.get(name)
        if reason == SUPPRESSED_CLASS:
            self.report(original_node, _message(name))  # suppressed: recorded as such, never applied
            return updated_node
        if reason is not None:
            self.report(original_node, _review(name, reason), fixable=False)
            return updated_node
        if self.report(original_node, _message(name)):
            return migrate_class(updated_node, legacy)
        return updated_node

    # -- the calls ----------------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        callee = original_node.func.func if isinstance(original_node.func, cst.Call) else None
        if callee is None or not _plain_instance_call(original_node):
            return updated_node
        target = self._target(callee)
        if target is None:
            return updated_node
        name, reason = target
        if reason == SUPPRESSED_CLASS:
            return updated_node
        if reason is not None:
            self.report(original_node, f"`{name}()(...)` calls a legacy autograd Function, which raises since PyTorch 1.3; left as it is: {reason}", fixable=False)
            return updated_node
        if self.report(original_node, f"`{name}()(...)` calls a legacy autograd Function (an error since PyTorch 1.3): `{name}.apply(...)`"):
            return apply_call(updated_node)
        return updated_node

    def _target(self, callee: cst.BaseExpression) -> tuple[str, str | None] | None:
        """(the class name, why its call is not rewritten, or None) when ``callee`` names a
        legacy Function class of this file or of the run; None otherwise."""
        last = callee.value if isinstance(callee, cst.Name) else callee.attr.value if isinstance(callee, cst.Attribute) else None
        if last is None:
            return None
        names = self.qualified_names(callee, ending_in=frozenset({last}))
        if isinstance(callee, cst.Name) and last in self._decisions.classes and last in names:
            return last, self._decisions.reasons.get(last)
        if self._run is None or last in self._decisions.classes:
            return None
        for qualified in sorted(names):
            module, dot, tail = qualified.rpartition(".")
            if dot and tail == last:
                found, reason = self._run.decision(last, module)
                if found is not None:
                    return last, reason
        return None


def _message(name: str) -> str:
    return (
        f"`{name}` is a legacy autograd Function (`forward(self, ...)`), which raises since PyTorch 1.3: "
        f"static `forward`/`backward` taking `ctx`, and `{name}.apply(...)` for `{name}()(...)`"
    )


def _review(name: str, reason: str) -> str:
    return (
        f"`{name}` is a legacy autograd Function (`forward(self, ...)`), which raises since PyTorch 1.3; "
        f"not rewritten: {reason}; {BY_HAND.format(name=name)}"
    )


def _plain_instance_call(call: cst.Call) -> bool:
    """``X()(args)``: no argument to ``X()``, no keyword (or ``**``) to the call."""
    inner = call.func
    return (
        isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, (cst.Name, cst.Attribute))
        and all(a.keyword is None and a.star != "**" for a in call.args)
    )


def _callee_of_instance_call(call: ast.Call) -> ast.expr | None:
    """Stage 1's :func:`_plain_instance_call` (keywords of the outer call allowed: a superset)."""
    inner = call.func
    if isinstance(inner, ast.Call) and not inner.args and not inner.keywords and isinstance(inner.func, (ast.Name, ast.Attribute)):
        return inner.func
    return None

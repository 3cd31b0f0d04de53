from __future__ import annotations

import ast
from typing import Iterator

import libcst as cst

from torchfix_device.codemods.base import Codemod
from libcst.codemod.visitors import AddImportsVisitor

from torchfix_device.codemods.legacy_autograd_function.rewrite import apply_call, migrate_class, partial_call, state_values
from torchfix_device.facts.legacy_function_run import FileDecisions, RunLegacyFunctions, decide
from torchfix_device.facts.legacy_functions import FUNCTION_BASES, KEPT, SUPPRESSED_CLASS, parse
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

    State kept by `__init__` (`def __init__(self, h, w, scale): self.scale = float(scale)`,
    made of its arguments) moves into `forward`: its arguments come first, after `ctx`
    (`forward(ctx, h, w, scale, x, rois)`), `ctx.scale = float(scale)` is set where `self.scale`
    was, `backward` returns one `None` more for each (`return None, None, None, grad_x, None`),
    `RoI(7, 7, 1/16.)(x, rois)` becomes `RoI.apply(7, 7, 1/16., x, rois)` (defaults filled in;
    a `forward` with defaulted inputs keeps them, after the state: `forward(ctx, d, u, init=None)`),
    and an instance kept and only ever called (`self.roi = RoI(7, 7, 1/16.)`, then
    `self.roi(x, rois)`) becomes `functools.partial(RoI.apply, 7, 7, 1/16.)`.

    Other state kept by `__init__` (a CUDA kernel it loads, a tensor it builds, a module-level
    setting, a check that raises), which `forward` and `backward` only read: the instances stay,
    each holding what its `__init__` set (less a call of the base's `__init__`, which warns
    since PyTorch 2.x), and the calls are written as they were. A new `__call__` runs
    `RoI.apply(self, *args)`; the static `forward` takes the instance after `ctx` and first
    copies its attributes onto `ctx` (`ctx.__dict__.update(vars(instance))`), so every
    `self.x` of both methods reads `ctx.x`, and what `forward` sets for `backward` is one
    call's own; `backward` returns one `None` more, first, for the instance.

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
    they are, class and calls alike: a class whose `__init__` keeps other state that
    `forward`/`backward` set too, or that defines `__call__` or calls another `__init__` with
    arguments, or whose `__init__` arguments are spelt in `forward`/`backward` too, or
    whose `backward` returns a name where `forward` takes several inputs (how many gradients it
    holds is not shown); one whose `forward`/`backward` use `self` otherwise than for the
    context's attributes and their own (a helper method, `self` passed on, a class attribute);
    one with other bases, decorators, or nested in a function or class; and one of which a use
    anywhere in the run is neither a call `F(...)(...)` whose arguments fit `__init__` nor a kept
    instance only ever called (an instance whose attribute is read, `isinstance`, a subclass,
    keywords in the call, an import under another name, a `# noqa: TFD017` on a call, a file
    the run does not rewrite). A file outside the run that calls the class cannot be seen:
    migrate it too.

    ## Fix safety
    Safe. The new `ctx` is what the legacy `self` was for autograd: the same saved tensors,
    `needs_input_grad` and marks, and the attributes `forward` sets are read back in `backward`
    from the same object; `forward` still runs without recording a graph, and `apply` returns
    the same outputs with the same gradients. The class is migrated only when every use of it in
    the run is a call that becomes `apply` in the same run, so no half-migrated pair is left: the
    legacy code raised on every call, and the migrated code computes what it computed under
    PyTorch 1.2 and before. Where the instances stay, calling one computes what calling it
    computed then, from the same attributes; the one difference is where `forward` writes what
    it keeps for `backward`: on that call's `ctx` rather than on the instance shared by every
    call (where the legacy code read it only in that call's `backward`, as it must to have
    worked: an instance whose attribute is read elsewhere is not migrated).
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
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _class_like(node.value.func) \
                    and not _torch_object(scan, node.value.func):
                yield node  # an instance kept (`self.roi = RoI(7, 7)`), called later

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
        if self.report(original_node, _message(name, legacy.state == KEPT)):
            return migrate_class(updated_node, legacy)
        return updated_node

    # -- the calls ----------------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        callee = original_node.func.func if isinstance(original_node.func, cst.Call) else None
        kept = callee is None and _kept_instance(original_node, self.parent_of(original_node))
        if not kept and (callee is None or not _plain_instance_call(original_node)):
            return updated_node
        target = self._target(original_node.func if kept else callee)
        if target is None:
            return updated_node
        name, reason, state = target
        if state == KEPT and reason is None:
            return updated_node  # the instance stays: calling it runs the new `__call__`
        inner = original_node if kept else cst.ensure_type(original_node.func, cst.Call)
        values = state_values(inner, state)
        if reason is None and values is None:
            reason = f"`{name}(...)`'s arguments do not fit its `__init__`"
        what = f"`{name}(...)` kept and called later" if kept else f"`{name}({'...' if inner.args else ''})(...)`"
        if reason == SUPPRESSED_CLASS or (kept and reason is not None):
            return updated_node  # a kept instance left as it is: the class's finding names the use
        if reason is not None:
            self.report(original_node, f"{what} calls a legacy autograd Function, which raises since PyTorch 1.3; left as it is: {reason}", fixable=False)
            return updated_node
        if kept:
            if self.report(original_node, f"{what}: a legacy autograd Function (an error since PyTorch 1.3): `functools.partial({name}.apply, ...)`"):
                AddImportsVisitor.add_needed_import(self.context, "functools")
                return partial_call(updated_node, values)
            return updated_node
        if self.report(original_node, f"{what} calls a legacy autograd Function (an error since PyTorch 1.3): `{name}.apply(...)`"):
            return apply_call(updated_node, values)
        return updated_node

    def _target(self, callee: cst.BaseExpression) -> tuple[str, str | None, tuple] | None:
        """(the class name, why its call is not rewritten, or None, the state its ``__init__``
        keeps) when ``callee`` names a legacy Function class of this file or of the run; None
        otherwise."""
        last = callee.value if isinstance(callee, cst.Name) else callee.attr.value if isinstance(callee, cst.Attribute) else None
        if last is None:
            return None
        names = self.qualified_names(callee, ending_in=frozenset({last}))
        if isinstance(callee, cst.Name) and last in self._decisions.classes and last in names:
            return last, self._decisions.reasons.get(last), self._decisions.classes[last].state
        if self._run is None or last in self._decisions.classes:
            return None
        for qualified in sorted(names):
            module, dot, tail = qualified.rpartition(".")
            if dot and tail == last:
                found, reason = self._run.decision(last, module, self._here)
                if found is not None:
                    return last, reason, found.state
        return None


def _message(name: str, kept: bool = False) -> str:
    if kept:
        return (
            f"`{name}` is a legacy autograd Function (`forward(self, ...)`), which raises since PyTorch 1.3: "
            f"static `forward`/`backward` taking `ctx`; its instances keep what `__init__` sets, and calling one "
            f"runs `{name}.apply(instance, ...)`, whose `forward` puts those attributes on `ctx`"
        )
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
    """``X(...)(args)``: no keyword (or ``**``) to the outer call (``X``'s arguments are fitted
    to its ``__init__``)."""
    inner = call.func
    return (
        isinstance(inner, cst.Call) and isinstance(inner.func, (cst.Name, cst.Attribute))
        and all(a.keyword is None and a.star != "**" for a in call.args)
    )


def _kept_instance(call: cst.Call, parent: cst.CSTNode | None) -> bool:
    """``x = X(...)`` / ``self.x = X(...)``: an instance made and kept (the analysis has made sure
    it is only ever called, where the class is migrated)."""
    return isinstance(call.func, (cst.Name, cst.Attribute)) and isinstance(parent, cst.Assign) and parent.value is call \
        and len(parent.targets) == 1 and isinstance(parent.targets[0].target, (cst.Name, cst.Attribute))


def _torch_object(scan, func: ast.expr) -> bool:  # noqa: ANN001
    """``nn.Linear``: every name the callee may have is torch's (no legacy class of the run)."""
    names = scan.qualified(func)
    return not scan.opaque and bool(names) and all(n.startswith("torch.") for n in names)


def _class_like(func: ast.expr) -> bool:
    """``RoI``, ``layers.RoI``: a name spelt as a class is (only such a class's kept instance is
    migrated: :func:`~torchfix_device.facts.legacy_function_uses.uses`)."""
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name[:1].isupper()


def _callee_of_instance_call(call: ast.Call) -> ast.expr | None:
    """Stage 1's :func:`_plain_instance_call` (keywords of the outer call allowed: a superset)."""
    inner = call.func
    if isinstance(inner, ast.Call) and isinstance(inner.func, (ast.Name, ast.Attribute)):
        return inner.func
    return None

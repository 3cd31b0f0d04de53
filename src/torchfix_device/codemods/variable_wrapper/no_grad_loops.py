"""``volatile=True`` inputs of a loop: the loop runs under ``with torch.no_grad():``.

In PyTorch 0.3 ``Variable(x, volatile=True)`` made everything computed from ``x`` build no
graph (``requires_grad`` False): the inference mode of an evaluation loop. Since 0.4 the flag
does nothing, and the loop builds a graph it never uses (one that grows from step to step where
a hidden state is fed back). :func:`loops_to_wrap` finds, for each
``Variable(..., volatile=True)``, its loop (:func:`volatile_loop`: the innermost loop around it
in its own function or at module level, or the loop right after it that reads the name it is
assigned to), and keeps it when

- it is not already under ``with torch.no_grad():`` (or in a function decorated with it);
- it does not train: no ``.backward()``, ``.step()``, ``.zero_grad()``,
  ``torch.autograd.grad``/``backward``, ``requires_grad_`` or ``.requires_grad =`` in it (under
  ``no_grad`` those would fail or do nothing), nor in the statements after it in its block
  (which could train through a value it computed), nor in a function or method of the file it
  calls (``train_step(x, y)``, ``self.update(...)``), followed through the calls those make;
- it holds no ``yield`` or ``await`` (the grad mode would leak to the code that runs meanwhile).

A loop inside another loop that is wrapped is not wrapped again. Inside the loop, every value
computed is grad-free, as 0.3 made those computed from the volatile inputs; a value computed
there from other tensors alone would have had a graph in 0.3, and has none now (only a
``backward`` through it could tell, and there is none in the loop).
"""

from __future__ import annotations

from typing import Callable

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]
QualifiedNames = Callable[[cst.CSTNode], "set[str]"]
LOOPS = (cst.For, cst.While)
TRAINING_METHODS = {"backward", "step", "zero_grad", "requires_grad_"}
TRAINING_FUNCTIONS = {"torch.autograd.grad", "torch.autograd.backward"}
NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}


def volatile_loop(call: cst.Call, parent: Parent) -> cst.For | cst.While | None:
    """The loop whose inputs ``call`` makes: the innermost loop around it in its own scope, or,
    where it stands in none and is assigned to names (``x = Variable(..., volatile=True)``),
    the first loop after it in the same block that reads one of them (none rebinding it
    before)."""
    above = parent(call)
    statement: cst.CSTNode | None = None
    while above is not None and not isinstance(above, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if isinstance(above, LOOPS):
            return above
        if statement is None and isinstance(above, cst.SimpleStatementLine):
            statement = above
        above = parent(above)
    if statement is None or not (len(statement.body) == 1 and isinstance(statement.body[0], cst.Assign)):
        return None
    names = {n.value for t in statement.body[0].targets for n in traversal.walk(t.target) if isinstance(n, cst.Name)}
    block = parent(statement)
    siblings = list(block.body) if isinstance(block, (cst.Module, cst.IndentedBlock)) else []
    for later in siblings[siblings.index(statement) + 1:] if statement in siblings else []:
        if isinstance(later, LOOPS) and {n.value for n in traversal.walk(later) if isinstance(n, cst.Name)} & names:
            return later
        if _rebinds(later, names):
            return None
    return None


def _rebinds(statement: cst.CSTNode, names: set[str]) -> bool:
    for node in traversal.walk(statement):
        targets: list[cst.CSTNode] = []
        if isinstance(node, cst.AssignTarget):
            targets = [node.target]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        if any(isinstance(n, cst.Name) and n.value in names for t in targets for n in traversal.walk(t)):
            return True
    return False


def why_not_wrapped(loop: cst.For | cst.While, parent: Parent, names: QualifiedNames, module: cst.Module | None = None) -> str | None:
    """Why ``loop`` is not put under ``torch.no_grad()`` (None: it is)."""
    if _under_no_grad(loop, parent, names):
        return "it already runs under `torch.no_grad()`"
    functions = _functions(module) if module is not None else {}
    for node in traversal.walk(loop):
        if isinstance(node, (cst.Yield, cst.Await)):
            return f"it holds a `{'yield' if isinstance(node, cst.Yield) else 'await'}`"
        training = _training(node, names) or _trains_through(node, names, functions, set())
        if training is not None:
            return f"it also trains ({training})"
    block = parent(loop)
    siblings = list(block.body) if isinstance(block, (cst.Module, cst.IndentedBlock)) else []
    for later in siblings[siblings.index(loop) + 1:] if loop in siblings else []:
        for node in traversal.walk(later):
            training = _training(node, names) or _trains_through(node, names, functions, set())
            if training is not None:
                return f"the code after it trains ({training}), maybe through what it computed"
    return None


def _functions(module: cst.Module) -> dict[str, list[cst.FunctionDef]]:
    """The functions and methods of ``module`` by name."""
    found: dict[str, list[cst.FunctionDef]] = {}
    for node in traversal.walk_statements(module):
        if isinstance(node, cst.FunctionDef):
            found.setdefault(node.name.value, []).append(node)
    return found


def _trains_through(node: cst.CSTNode, names: QualifiedNames, functions: dict[str, list[cst.FunctionDef]], seen: set[int]) -> str | None:
    """Where ``node`` calls a function or method of the file (``step(x)``, ``self.step(x)``)
    that trains, directly or through its own calls: what it does and where."""
    if not (isinstance(node, cst.Call) and functions):
        return None
    func = node.func
    called = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) and m_self(func.value) else None
    for function in functions.get(called, []) if called is not None else []:
        if id(function) in seen:
            continue
        seen.add(id(function))
        for inner in traversal.walk(function.body):
            found = _training(inner, names) or _trains_through(inner, names, functions, seen)
            if found is not None:
                return found if " in `" in found else f"{found} in `{called}`"
    return None


def m_self(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def _training(node: cst.CSTNode, names: QualifiedNames) -> str | None:
    """``.backward()``, ``.step()``, ``.zero_grad()``, ``torch.autograd.grad``, a
    ``requires_grad`` set: what ``torch.no_grad()`` would break."""
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in TRAINING_METHODS:
            return f"`.{func.attr.value}()`"
        if names(func) & TRAINING_FUNCTIONS:
            return "`torch.autograd`"
    if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Attribute) and node.target.attr.value == "requires_grad":
        return "`.requires_grad =`"
    return None


def _under_no_grad(node: cst.CSTNode, parent: Parent, names: QualifiedNames) -> bool:
    above = parent(node)
    while above is not None:
        if isinstance(above, cst.With) and any(
            isinstance(item.item, cst.Call) and names(item.item.func) & NO_GRAD for item in above.items
        ):
            return True
        if isinstance(above, cst.FunctionDef):
            decorators = [d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator for d in above.decorators]
            return any(names(d) & NO_GRAD for d in decorators)
        above = parent(above)
    return False


def loops_to_wrap(
    module: cst.Module, parent: Parent, names: QualifiedNames, is_volatile_variable: Callable[[cst.Call], bool]
) -> tuple[dict[int, cst.For | cst.While], dict[int, str]]:
    """The loops to wrap (``id`` → loop) and, for each volatile call whose loop is not
    wrapped, why (``id`` of the call → reason)."""
    chosen: dict[int, cst.For | cst.While] = {}
    reasons: dict[int, str] = {}
    for node in traversal.of_classes(module, cst.Call):
        if not any(a.keyword is not None and a.keyword.value == "volatile" for a in node.args):
            continue
        if not is_volatile_variable(node):
            continue
        loop = volatile_loop(node, parent)
        if loop is None:
            continue
        reason = why_not_wrapped(loop, parent, names, module)
        if reason is None:
            chosen[id(loop)] = loop
        else:
            reasons[id(node)] = reason
    return {i: loop for i, loop in chosen.items() if not _inside_another(loop, chosen, parent)}, reasons


def _inside_another(loop: cst.CSTNode, chosen: dict[int, cst.For | cst.While], parent: Parent) -> bool:
    above = parent(loop)
    while above is not None:
        if id(above) in chosen:
            return True
        above = parent(above)
    return False


def under_no_grad(loop: cst.BaseStatement) -> cst.With:
    """``with torch.no_grad():`` holding ``loop`` (its comments above go above the ``with``)."""
    return cst.With(
        items=[cst.WithItem(item=cst.parse_expression("torch.no_grad()"))],
        body=cst.IndentedBlock(body=[loop.with_changes(leading_lines=[])]),
        leading_lines=loop.leading_lines,
    )


def volatile_note(call: cst.Call, parent, loops) -> str:  # noqa: ANN001
    """What TFD009's message says of ``volatile=`` in ``call`` (``loops()``: the loops to wrap,
    by id, and why the others are left, by the id of their ``Variable`` call)."""
    volatile = nodes.keyword_arg(call, "volatile")
    if volatile is None:
        return ""
    if not (isinstance(volatile.value, cst.Name) and volatile.value.value == "True"):
        return "; `volatile=` has no effect since PyTorch 0.4 (where it is True, run under `with torch.no_grad():`)"
    loop = volatile_loop(call, parent)
    wrapped, reasons = loops()
    if loop is not None and id(loop) in wrapped:
        return "; `volatile=True` has no effect since PyTorch 0.4: the loop it feeds now runs under `with torch.no_grad():`"
    if id(call) in reasons:
        return f"; `volatile=True` has no effect since PyTorch 0.4: run inference under `with torch.no_grad():` (the loop it feeds is left as it is: {reasons[id(call)]})"
    return "; `volatile=True` has no effect since PyTorch 0.4: run inference under `with torch.no_grad():`"

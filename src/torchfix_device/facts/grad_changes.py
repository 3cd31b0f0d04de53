"""What happens to ``Variable(x)``'s result later: is it made to require grad in place?

``Variable(x)`` returns a new object; where ``x`` is a name (or a method of it that may return
it), unwrapping it to ``x`` makes its holder and ``x`` the same object (or its holder a view of
``x``: ``Variable(x).view(3)``). A later change to that object's autograd state, shape or
attributes then reaches ``x`` too, and one made through ``x`` reaches the holder.
:func:`changed_in_place` finds such changes in the scope that binds the result (see its
docstring).

An attribute that takes its own unwrapped value, ``self.a = Variable(self.a)``, keeps the object
it held instead of a detached copy. That is the same program only where no other name holds that
object (a later ``.requires_grad_()`` through ``self.a`` would reach that holder, or one through
the holder would reach ``self.a``): :func:`refilled_attribute` shows it where the object was just
made by a factory and only filled since (see its docstring).
"""

from __future__ import annotations

import libcst as cst
from torchfix_device.facts.grad import (
    BUILTIN_NEVER_GRAD,
    BUILTIN_PURE,
    FACTORIES,
    NEVER_GRAD_METHODS,
    SELF_RETURNING,
    SHAPE_METHODS,
    GradEvidence,
)
from torchfix_device.facts.values import scope_of
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.facts.in_place import aliases, changes_of, in_place, index_of

VIEWING = {
    "view", "view_as", "reshape", "reshape_as", "expand", "expand_as", "permute", "transpose", "t",
    "unsqueeze", "squeeze", "narrow", "select", "unflatten", "as_strided", "unfold", "diagonal",
    "movedim", "moveaxis", "swapaxes", "swapdims", "split", "chunk", "unbind", "tensor_split",
    "T", "mT", "H", "mH", "real", "imag",
}
"""Methods and properties that may return a view of their receiver: an in-place change by a
value that requires grad through the view gives the receiver grad too (checked, torch 2.13)."""
RESHAPING = {
    "resize_", "resize_as_", "set_", "t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_",
    "swapdims_", "swapaxes_", "rename_",
}
"""In-place methods that change a tensor object's shape or storage, not its elements: on the
detached copy ``Variable`` made they did not reach ``x``; unwrapped, they do."""
QUIET_FUNCTIONS = {f"builtins.{name}" for name in BUILTIN_NEVER_GRAD | BUILTIN_PURE}
QUIET_METHODS = NEVER_GRAD_METHODS | SHAPE_METHODS


def changed_in_place(evidence: GradEvidence, call: cst.Call) -> str | None:
    """Why the object ``call`` returns may be made to require grad after it is bound (None: as
    far as this file shows, it is not): the names it is assigned to get ``requires_grad``,
    ``.requires_grad_()``, ``.grad =``, or an in-place change (``x.add_(w)``, ``x[i] = w``,
    ``x += w``) by a value that may require grad. Where ``Variable(x)`` made a new object, that
    change reached it alone; unwrapped, it reaches ``x`` too. The result passed on (to a
    call, ``return``) is not followed (see the module docstring). A view of the result (``.view()``,
    ``[i]``) is followed like the result: an in-place change through it reaches ``x``. So is a
    change of the object's shape or storage (``.unsqueeze_()``, ``.resize_()``) or a Python
    attribute set on it, through its names or through ``x``'s: unwrapped, both see it. Stored
    in an attribute, it is no change only where the attribute takes its own value back
    (:func:`refilled_attribute`)."""
    node: cst.CSTNode = call
    above = evidence.parent(node)
    while (isinstance(above, cst.Attribute) and above.value is node) or (isinstance(above, cst.Subscript) and above.value is node):
        if isinstance(above, cst.Subscript):
            node, above = above, evidence.parent(above)  # an index may give a view
            continue
        grand = evidence.parent(above)
        method = above.attr.value
        if method in VIEWING and not (isinstance(grand, cst.Call) and grand.func is above):
            node, above = above, grand  # `.T`, `.real`: a view
            continue
        if not (isinstance(grand, cst.Call) and grand.func is above and (method in SELF_RETURNING or method in VIEWING or in_place(method))):
            return None  # a method making a new object holds the result
        node, above = grand, evidence.parent(grand)
    given = _root_name(call.args[0].value) if call.args else None
    if given is not None:
        found = _reshaped(evidence, given.value, scope_of(given, evidence.parent))
        if found is not None:
            return found
    index = None
    if isinstance(above, cst.Element):
        container = evidence.parent(above)
        if not isinstance(container, cst.Tuple):
            return None
        index = list(container.elements).index(above)
        node, above = container, evidence.parent(container)
    if not (isinstance(above, cst.Assign) and above.value is node):
        return None
    for target in above.targets:
        held = target.target
        if index is not None:
            if not (isinstance(held, (cst.Tuple, cst.List)) and len(held.elements) == len(cst.ensure_type(node, cst.Tuple).elements)):
                return "it is unpacked into names this file does not show"
            held = held.elements[index].value
        if isinstance(held, cst.Attribute) and index is None and call.args and _same_attribute(held, call.args[0].value):
            if refilled_attribute(evidence, above, held):
                continue
            return f"it is stored in `{nodes.code_of(held)}`, and nothing shows that nothing else holds the object it held"
        if not isinstance(held, cst.Name):
            return f"it is stored in `{nodes.code_of(held)}`"
        scope = scope_of(above, evidence.parent)
        found = changes_of(evidence, held.value, scope) or _reshaped(evidence, held.value, scope)
        if found is not None:
            return found
    return None


def _root_name(expr: cst.BaseExpression) -> cst.Name | None:
    """``x`` for ``x``, ``x.cuda()``, ``x.float()``: the name whose object ``expr`` may be."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SELF_RETURNING:
        expr = expr.func.value
    return expr if isinstance(expr, cst.Name) else None


def _reshaped(evidence: GradEvidence, name: str, scope: cst.CSTNode) -> str | None:
    """A change of the shape or storage of what ``name`` (or a copy of it) holds in ``scope``,
    or a Python attribute set on it (flow-insensitive, like :func:`changes_of`)."""
    index = index_of(evidence, scope)
    for alias in aliases(evidence, name, scope):
        for node in index.names.get(alias, ()):
            above = evidence.parent(node)
            if not (isinstance(above, cst.Attribute) and above.value is node):
                continue
            grand, attr = evidence.parent(above), above.attr.value
            if attr in RESHAPING and isinstance(grand, cst.Call) and grand.func is above:
                return f"`{alias}` is changed in place (`{alias}.{attr}()`, which unwrapped reaches the other name too)"
            if isinstance(grand, cst.AssignTarget) and grand.target is above:
                return f"`{alias}.{attr}` is set (unwrapped, on the object the other name holds too)"
    return None


def refill_line(evidence: GradEvidence, call: cst.Call) -> cst.SimpleStatementLine | None:
    """The line ``self.a = Variable(self.a)`` of ``call`` where :func:`refilled_attribute`
    holds: unwrapped, ``self.a = self.a`` gives ``self.a`` the object it holds (no method or
    property ``a``, no ``__setattr__`` shown), a line that can go."""
    assign = evidence.parent(call)
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1 and call.args):
        return None
    held = assign.targets[0].target
    if not (isinstance(held, cst.Attribute) and _same_attribute(held, call.args[0].value) and refilled_attribute(evidence, assign, held)):
        return None
    return cst.ensure_type(evidence.parent(assign), cst.SimpleStatementLine)


def refilled_attribute(evidence: GradEvidence, assign: cst.Assign, held: cst.Attribute) -> bool:
    """``self.a = Variable(self.a)`` (``assign``, ``held`` its target ``self.a``) where nothing
    but ``self.a`` holds the object ``self.a`` held: earlier in the same block,
    ``self.a = torch.<factory>(...)`` (one target, no ``out=``: a new tensor, no view of
    another), and between the two only ``self.a[...] = v`` lines and ``for ... in range(...)``
    loops of them, which
    read ``self.a`` nowhere else, give ``self`` to no call and call only builtins, torch, NumPy
    and math functions and size-like methods (``.size()``); ``self`` is the method's own, ``a``
    and ``__getattr__`` are no method or property of the file's classes. Then ``self.a`` keeps,
    unwrapped, an object no one else reaches, as the detached copy was: whatever is done to it
    later is done as before. Whether that object can require grad is the evidence's question
    (the values ``self.a[...] = v`` are among those it checks)."""
    receiver = held.value
    if not isinstance(receiver, cst.Name) or evidence.class_of_self(receiver) is None:
        return False
    methods = _class_methods(evidence)
    if held.attr.value in methods or methods & {"__getattr__", "__getattribute__"}:
        return False
    line = evidence.parent(assign)
    block = evidence.parent(line) if line is not None else None
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(block, cst.IndentedBlock)):
        return False
    body = list(block.body)
    position = next(i for i, statement in enumerate(body) if statement is line)
    for statement in reversed(body[:position]):
        if _makes_new(evidence, statement, held):
            return True
        if not _only_fills(evidence, statement, held, methods):
            return False
    return False


def _same_attribute(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """``self.a`` and ``self.a``: the same name's same attribute."""
    return (
        isinstance(a, cst.Attribute) and isinstance(b, cst.Attribute) and a.attr.value == b.attr.value
        and isinstance(a.value, cst.Name) and isinstance(b.value, cst.Name) and a.value.value == b.value.value
    )


def _class_methods(evidence: GradEvidence) -> set[str]:
    """The names of the functions defined in the bodies of the module's classes (remembered;
    the classes are those of the attribute index the evidence already built)."""
    found = evidence.__dict__.get("_class_method_names")
    if found is None:
        found = set()
        for cls in evidence.attribute_index().classes:
            if isinstance(cls.body, cst.IndentedBlock):
                found.update(s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef))
        evidence.__dict__["_class_method_names"] = found
    return found


def _makes_new(evidence: GradEvidence, statement: cst.BaseStatement, held: cst.Attribute) -> bool:
    """``self.a = torch.zeros(...)`` alone on its line: a new tensor only ``self.a`` holds."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    assign = statement.body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and _same_attribute(assign.targets[0].target, held)):
        return False
    value = assign.value
    if not isinstance(value, cst.Call) or nodes.keyword_arg(value, "out") is not None:
        return False
    names = evidence.names(value.func)
    return bool(names) and all(q.count(".") == 1 and q.startswith("torch.") and q[6:] in FACTORIES for q in names)


def _only_fills(evidence: GradEvidence, statement: cst.BaseStatement, held: cst.Attribute, methods: set[str]) -> bool:
    """``self.a[...] = v`` lines and ``for`` loops of them, quiet (see :func:`refilled_attribute`)."""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                return False
            target = small.targets[0].target
            if not (isinstance(target, cst.Subscript) and _same_attribute(target.value, held)):
                return False
            if not (all(_quiet(evidence, e, held, methods) for e in target.slice) and _quiet(evidence, small.value, held, methods)):
                return False
        return True
    if isinstance(statement, cst.For) and statement.asynchronous is None:
        counted = isinstance(statement.iter, cst.Call) and evidence.names(statement.iter.func) == {"builtins.range"}
        if not (counted and _quiet(evidence, statement.target, held, methods) and _quiet(evidence, statement.iter, held, methods)):
            return False  # iterating anything but a range may run code that keeps `self.a`
        if not isinstance(statement.body, cst.IndentedBlock) or statement.orelse is not None:
            return False
        return all(_only_fills(evidence, s, held, methods) for s in statement.body.body)
    return False


def _quiet(evidence: GradEvidence, node: cst.CSTNode, held: cst.Attribute, methods: set[str]) -> bool:
    """``node`` reads ``self`` only as ``self.b`` (``b`` not ``a``, not a method or property of
    the file's classes) and calls nothing that may run the class's code or keep ``self.a``."""
    self_name = cst.ensure_type(held.value, cst.Name).value
    for inner in traversal.walk(node):
        if isinstance(inner, (cst.Lambda, cst.Yield, cst.Await, cst.NamedExpr)):
            return False
        if isinstance(inner, cst.Name) and inner.value == self_name:
            above = evidence.parent(inner)
            if not (isinstance(above, cst.Attribute) and above.value is inner):
                return False
            if above.attr.value == held.attr.value or above.attr.value in methods:
                return False
        if isinstance(inner, cst.Call) and not _quiet_call(evidence, inner, self_name):
            return False
    return True


def _quiet_call(evidence: GradEvidence, call: cst.Call, self_name: str) -> bool:
    """A builtin, torch, NumPy or math function, or a size-like method of something other than
    ``self`` itself (``self.cuda()`` is the module's own)."""
    names = evidence.names(call.func)
    if names and all(q in QUIET_FUNCTIONS or q.startswith(("torch.", "numpy.", "math.")) for q in names):
        return True
    func = call.func
    return (
        isinstance(func, cst.Attribute) and func.attr.value in QUIET_METHODS
        and not (isinstance(func.value, cst.Name) and func.value.value == self_name)
    )

"""What happens to ``Variable(x)``'s result later: is it made to require grad in place?

``Variable(x)`` returns a new object; where ``x`` is a name (or a method of it that may return
it), unwrapping it to ``x`` makes its holder and ``x`` the same object. A later change to that
object's autograd state then reaches ``x`` too. :func:`changed_in_place` finds such changes in
the scope that binds the result (see its docstring).
"""

from __future__ import annotations

import libcst as cst

from torchfix_device import _cst
from torchfix_device.codemods._grad_evidence import SELF_RETURNING, GradEvidence, in_place, scope_of


def changed_in_place(evidence: GradEvidence, call: cst.Call) -> str | None:
    """Why the object ``call`` returns may be made to require grad after it is bound (None: as
    far as this file shows, it is not): the names it is assigned to get ``requires_grad``,
    ``.requires_grad_()``, ``.grad =``, or an in-place change (``x.add_(w)``, ``x[i] = w``,
    ``x += w``) by a value that may require grad. Where ``Variable(x)`` made a new object, that
    change reached it alone; unwrapped, it reaches ``x`` too. The result passed on (to a
    call, ``return``) is not followed (see the module docstring)."""
    node: cst.CSTNode = call
    above = evidence.parent(node)
    while isinstance(above, cst.Attribute) and above.value is node:
        grand = evidence.parent(above)
        method = above.attr.value
        if not (isinstance(grand, cst.Call) and grand.func is above and (method in SELF_RETURNING or in_place(method))):
            return None  # a method making a new object holds the result
        node, above = grand, evidence.parent(grand)
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
        if not isinstance(held, cst.Name):
            return f"it is stored in `{_cst.code_of(held)}`"
        scope = scope_of(above, evidence.parent)
        for name in _aliases(evidence, held.value, scope):
            found = _changes_of(evidence, name, scope)
            if found is not None:
                return found
    return None


def _aliases(evidence: GradEvidence, name: str, scope: cst.CSTNode) -> list[str]:
    """``name`` and the names assigned from it in ``scope`` (``y = x``), transitively."""
    where = evidence.module if isinstance(scope, cst.Module) else scope
    copies = [
        (n.value.value, t.target.value) for n in _cst.walk(where) if isinstance(n, cst.Assign) and isinstance(n.value, cst.Name)
        for t in n.targets if isinstance(t.target, cst.Name)
    ]
    found = [name]
    for held in found:
        found.extend(target for source, target in copies if source == held and target not in found)
    return found


def _changes_of(evidence: GradEvidence, name: str, scope: cst.CSTNode) -> str | None:
    where = evidence.module if isinstance(scope, cst.Module) else scope
    for node in _cst.walk(where):
        if not (isinstance(node, cst.Name) and node.value == name):
            continue
        above = evidence.parent(node)
        shown = f"`{name}` is changed in place later"
        if isinstance(above, cst.Attribute) and above.value is node:
            attr = above.attr.value
            grand = evidence.parent(above)
            if attr in ("requires_grad", "grad", "data") and isinstance(grand, (cst.AssignTarget, cst.AugAssign)):
                return f"{shown} (`{name}.{attr} = ...`)"
            if attr == "requires_grad_":
                return f"{shown} (`{name}.requires_grad_()`)"
            if in_place(attr) and isinstance(grand, cst.Call) and evidence.args_missing(grand) is not None:
                return f"{shown} (`{name}.{attr}(...)` with a value that may require grad)"
        elif isinstance(above, cst.Subscript) and above.value is node:
            grand = evidence.parent(above)
            if isinstance(grand, cst.AssignTarget):
                assign = evidence.parent(grand)
                if isinstance(assign, cst.Assign) and evidence.missing(assign.value) is not None:
                    return f"{shown} (`{name}[...] = ...` with a value that may require grad)"
            if isinstance(grand, cst.AugAssign) and grand.target is above and evidence.missing(grand.value) is not None:
                return f"{shown} (`{name}[...]` augmented with a value that may require grad)"
        elif isinstance(above, cst.AugAssign) and above.target is node and evidence.missing(above.value) is not None:
            return f"{shown} (`{name} {_cst.code_of(above.operator).strip()} ...` with a value that may require grad)"
    return None

"""What happens to ``Variable(x)``'s result later: is it made to require grad in place?

``Variable(x)`` returns a new object; where ``x`` is a name (or a method of it that may return
it), unwrapping it to ``x`` makes its holder and ``x`` the same object. A later change to that
object's autograd state then reaches ``x`` too. :func:`changed_in_place` finds such changes in
the scope that binds the result (see its docstring).
"""

from __future__ import annotations

import libcst as cst

from torchfix_device import _cst
from torchfix_device.codemods._grad_evidence import SELF_RETURNING, GradEvidence, scope_of
from torchfix_device.codemods._in_place import changes_of, in_place


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
        found = changes_of(evidence, held.value, scope_of(above, evidence.parent))
        if found is not None:
            return found
    return None


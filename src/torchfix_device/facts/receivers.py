"""Is the receiver of a ``.cuda()`` / ``.to()`` call a torch object, or may it be an instance of a
project class that moves itself (its own ``cuda()`` or ``to()``, which need not return it)?

``storage.cuda()`` on such an object is not ``storage = storage.to(device)``: that calls another
method, or replaces the object by ``None``. The classes come from every file of the run
(``Codemod.own_move_classes``, :mod:`torchfix_device.facts.project_classes`) and from the file itself.
The answer rests on what the receiver is bound to, never on its name:

- :data:`OWN`: it is bound to a call of such a class (``s = RolloutStorage(...)``,
  ``self.s = RolloutStorage(...)`` in its class): the move is left for manual review;
- :data:`UNKNOWN`: such classes exist and nothing shows what it is (a parameter, an item): the
  fix needs ``--unsafe-fixes``;
- None: no such class exists, or every binding is a torch object, a move of one, or an instance
  of another class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.facts.project_classes import TEXT_MARKERS, classes_in

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

OWN = "own"
UNKNOWN = "unknown"
_OTHER = "other"
SAME_KIND_METHODS = frozenset({"to", "cuda", "cpu", "float", "double", "half", "long", "int", "type", "detach", "clone", "contiguous", "eval", "train"})
"""Methods of tensors and modules returning an object of the same kind (a move of it)."""


def moves_itself(codemod: "CodemodView", receiver: cst.BaseExpression) -> tuple[str, str] | None:
    """(:data:`OWN` or :data:`UNKNOWN`, the classes concerned) for a move on ``receiver``, or
    None when it is not in doubt (see the module docstring)."""
    classes = codemod.own_move_classes | _local_classes(codemod)
    if not classes:
        return None
    kind, name = _kind(codemod, receiver, classes, frozenset())
    if kind == OWN:
        return OWN, name
    if kind == UNKNOWN:
        return UNKNOWN, ", ".join(f"`{c}`" for c in sorted(classes))
    return None


def _local_classes(codemod: "CodemodView") -> frozenset[str]:
    module = codemod.visited_module
    known = getattr(codemod, "_own_move_local", None)
    if known is None or known[0] is not module:
        code = getattr(codemod, "source_code", None)
        names = classes_in(code) if code is not None and any(m in code for m in TEXT_MARKERS) else frozenset()
        known = (module, names)
        codemod._own_move_local = known  # type: ignore[attr-defined]
    return known[1]


def _kind(codemod: "CodemodView", expr: cst.BaseExpression, classes: frozenset[str], seen: frozenset[str]) -> tuple[str, str]:
    if isinstance(expr, cst.Call):
        return _call_kind(codemod, expr, classes, seen)
    if isinstance(expr, cst.Name):
        if expr.value in seen:
            return _OTHER, ""
        values = bound_values(codemod, expr)
        if values is None:
            return UNKNOWN, ""
        return _combine([_kind(codemod, v, classes, seen | {expr.value}) for v in values])
    if m_self_attribute(expr):
        attr = cst.ensure_type(expr, cst.Attribute).attr.value
        if "self." + attr in seen:
            return _OTHER, ""
        values = _self_attribute_values(codemod, attr)
        if not values:
            return UNKNOWN, ""
        return _combine([_kind(codemod, v, classes, seen | {"self." + attr}) for v in values])
    return UNKNOWN, ""


def _call_kind(codemod: "CodemodView", call: cst.Call, classes: frozenset[str], seen: frozenset[str]) -> tuple[str, str]:
    spelt = nodes.dotted_name(call.func) or ""
    last = spelt.rpartition(".")[2]
    if last in classes:
        return OWN, last
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in SAME_KIND_METHODS:
        return _kind(codemod, call.func.value, classes, seen)
    if any(q.startswith("torch.") for q in codemod.qualified_names(call.func)):
        return _OTHER, ""
    if isinstance(call.func, cst.Name) and call.func.value in _local_class_names(codemod):
        return _OTHER, ""  # an instance of a class of this file without its own move
    return UNKNOWN, ""


def _local_class_names(codemod: "CodemodView") -> frozenset[str]:
    module = codemod.visited_module
    known = getattr(codemod, "_class_names", None)
    if known is None or known[0] is not module:
        known = (module, frozenset(n.name.value for n in traversal.walk_statements(module) if isinstance(n, cst.ClassDef)))
        codemod._class_names = known  # type: ignore[attr-defined]
    return known[1]


def _combine(kinds: list[tuple[str, str]]) -> tuple[str, str]:
    for wanted in (OWN, UNKNOWN):
        for kind in kinds:
            if kind[0] == wanted:
                return kind
    return _OTHER, ""


def bound_values(
    codemod: "CodemodView", name: cst.Name, assigned: dict[int, cst.BaseExpression] | None = None
) -> list[cst.BaseExpression] | None:
    """The values assigned to the bindings of ``name`` visible where it is read; None when one
    of them is not a plain assignment (a parameter, a loop target, an import). ``assigned``:
    assigned ``Name`` (by id) → value (default: ``=``, ``x: T =`` and ``+=``, the device
    source's)."""
    bindings = codemod.bindings_visible_at(name.value, name)
    if not bindings:
        return None
    assigned = codemod.device_source.assigned_values() if assigned is None else assigned
    values = []
    for binding in bindings:
        value = assigned.get(id(getattr(binding, "node", None)))
        if value is None:
            return None
        values.append(value)
    return values


def _self_attribute_values(codemod: "CodemodView", attr: str) -> list[cst.BaseExpression]:
    """The values assigned to ``self.<attr>`` in the class being visited."""
    if not codemod.class_stack:
        return []
    values = []
    for node in traversal.walk(codemod.class_stack[-1]):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and m_self_attribute(node.targets[0].target, attr):
            values.append(node.value)
    return values


def m_self_attribute(node: cst.CSTNode, attr: str | None = None) -> bool:
    """``self.<attr>`` (any attribute when ``attr`` is None)."""
    return (
        isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
        and (attr is None or node.attr.value == attr)
    )

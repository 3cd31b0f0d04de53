"""What a program's own checkpoint holds when it loads it back. One of the facts about values
(:mod:`torchfix_device.facts`), on the module's shared resolution of names (:mod:`.values`).

``torch.save([model, criterion, optimizer], f)`` in one function and ``model, criterion,
optimizer = torch.load(f)`` in another (awd-lstm-lm's ``model_save`` / ``model_load``): each
name the load unpacks holds an unpickled copy of what the same name held at a save, an object
of the same class, a tensor of the same shape, though not always on the same device
(``map_location``). :func:`saved_values` gives, for such a binding, the expressions the saves
stored at its place; a question whose answer does not depend on the device (what a call of the
name returns, whether it is a module and of which class) may follow them as it follows any other
value of the name. It holds where every ``torch.save`` of the module whose first argument is a
list or tuple display of names names exactly the load's targets, in the same order, and there
is at least one. A save of other names, of a single object, or a load unpacked into other targets
shows nothing. A checkpoint written by another program is outside what the code shows: the
program loads into its own names what it saves from them, the only file it documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from torchfix_device.facts.name_flow import binding_owner
from torchfix_device.syntax import traversal

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

LOADS = frozenset({"torch.load", "torch.serialization.load"})
SAVES = frozenset({"torch.save", "torch.serialization.save"})


def saved_values(values: "ModuleValues", node: cst.CSTNode) -> list[cst.BaseExpression] | None:
    """The expressions every save of the program's checkpoint stores at the place of binding
    ``node``, a target of ``a, b = torch.load(...)`` (see the module docstring); None otherwise."""
    found = checkpoint_saves(values, node)
    if found is None or len(found[1]) != sum(_names_of(save) is not None for save in _saves(values)):
        return None  # another save stores other names: the file may hold those
    index, saves = found
    return [save.elements[index].value for save in saves]  # type: ignore[attr-defined]


def checkpoint_saves(values: "ModuleValues", node: cst.CSTNode) -> tuple[int, list[cst.List | cst.Tuple]] | None:
    """Where binding ``node`` stands among the targets of ``a, b = torch.load(...)``, and the list
    or tuple display of every ``torch.save`` that saves those names, in that order (at least one;
    :func:`saved_values` asks that no save stores other names); None otherwise."""
    owner = binding_owner(node, values.parent)
    statement = owner[0] if owner is not None else None
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or not isinstance(statement.value, cst.Call):
        return None
    names = _names_of(statement.targets[0].target)
    if names is None or not (values.torch_names(statement.value.func) & LOADS):
        return None
    index = next((i for i, e in enumerate(statement.targets[0].target.elements) if e.value is node), None)  # type: ignore[attr-defined]
    saves = [save for save in _saves(values) if _names_of(save) == names]
    return (index, saves) if index is not None and saves else None  # type: ignore[return-value]


def _saves(values: "ModuleValues") -> list[cst.BaseExpression]:
    """The first argument of every ``torch.save`` call of the module (memoised per version)."""
    def compute() -> list[cst.BaseExpression]:
        found = []
        for node in traversal.of_classes(values.module, cst.Call):
            if isinstance(node.func, (cst.Name, cst.Attribute)) \
                    and _last_part(node.func) == "save" and values.torch_names(node.func) & SAVES:
                positional = [a for a in node.args if a.keyword is None and not a.star]
                saved = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "obj"), None)
                found.append(saved if saved is not None else positional[0].value if positional else cst.Name("None"))
        return found
    return values.facet("checkpoint saves", compute)


def _last_part(func: cst.Name | cst.Attribute) -> str:
    return func.value if isinstance(func, cst.Name) else func.attr.value


def _names_of(expr: cst.BaseExpression) -> tuple[str, ...] | None:
    """The names of a list or tuple display of plain names (``[model, criterion]``); None otherwise."""
    if not isinstance(expr, (cst.List, cst.Tuple)) or not expr.elements:
        return None
    if not all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in expr.elements):
        return None
    return tuple(e.value.value for e in expr.elements)  # type: ignore[attr-defined]

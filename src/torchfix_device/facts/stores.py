"""Where a value is written to: one of the facts about values (:mod:`torchfix_device.facts`).

:func:`store_of` says how a subscript is a target (assigned, augmented, deleted) or None where it
is read; asked where ``x.data[0]`` of a scalar becomes ``x.item()`` (TFD006: only a read may) and
where a value is refused first (:mod:`.refusals`). :func:`written_in_place` says where an array
taken from a tensor (``x.numpy()``) is written to, directly or through a name bound to it, asked
where ``.cpu()`` is added before it (TFD018: on the CPU, ``.numpy()`` shares the tensor's memory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues


def written_in_place(values: "ModuleValues", expr: cst.BaseExpression) -> cst.CSTNode | None:
    """Where the array ``expr`` gives (``x.numpy()``) is written to, directly (``x.numpy()[0] =
    1``) or through a name bound to it (``a = x.numpy()`` then ``a[0] = 1``, ``a += 1``,
    ``a.fill(0)``, ``out=a``); None where this file shows no such write."""
    parent = values.parent(expr)
    if isinstance(parent, cst.Subscript) and _stored(values, parent):
        return parent
    if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is expr:
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        if len(targets) == 1 and isinstance(targets[0], cst.Name):
            for read in values.reads_of(targets[0]):
                above = values.parent(read)
                if isinstance(above, cst.AugAssign) and above.target is read:
                    return above
                if isinstance(above, cst.Subscript) and above.value is read and _stored(values, above):
                    return above
                if isinstance(above, cst.Attribute) and above.value is read and above.attr.value in ARRAY_WRITES:
                    return above
                if isinstance(above, cst.Arg) and above.keyword is not None and above.keyword.value == "out":
                    return above
    return None


ARRAY_WRITES = frozenset({"fill", "sort", "put", "itemset", "resize", "setfield", "partition", "byteswap"})
"""NumPy array methods that change the array in place."""


def _stored(values: "ModuleValues", subscript: cst.Subscript) -> bool:
    """``subscript`` is assigned to (``a[0] = 1``, ``a[0] += 1``, ``a[0], b = ...``)."""
    return store_of(values, subscript) in ("assigned", "augmented")


def store_of(values: "ModuleValues", subscript: cst.Subscript) -> str | None:
    """How ``subscript`` is a target: ``"assigned"`` (``a[0] = 1``, ``a[0], b = ...``, a ``for``
    or ``with`` target), ``"augmented"`` (``a[0] += 1``: read first), ``"deleted"``; None where
    it is read."""
    child: cst.CSTNode = subscript
    above = values.parent(subscript)
    while isinstance(above, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, above = above, values.parent(above)
    if isinstance(above, cst.AugAssign) and above.target is child:
        return "augmented"
    if isinstance(above, (cst.AssignTarget, cst.AnnAssign, cst.WithItem)) or (isinstance(above, (cst.For, cst.CompFor)) and above.target is child):
        return "assigned"
    return "deleted" if isinstance(above, cst.Del) else None


"""Changes in place that can make a tensor require grad, found where a name is used.

``x.requires_grad = True``, ``x.requires_grad_()``, ``x.grad = ...``, ``x.data = ...``, and an
in-place change by a value that may require grad (``x.add_(w)``, ``x[i] = w``, ``x += w``,
``x[i] += w``) make the object ``x`` holds require grad (or change what autograd sees of it).
:func:`changes_of` finds them in a scope (a function, or the whole module for a module-level
name), through ``x`` and the names it is copied to (``y = x``). A change anywhere in the scope
counts, but one through ``x`` itself where ``x`` holds another object: where every binding of
``x`` reaching the read makes a new object (``x = torch.from_numpy(a)``), a change through ``x``
that none of them reaches is skipped where it runs before the read (an earlier statement, no
loop around both: ``x -= m`` on the NumPy array ``x`` held before) or where every binding
reaching it makes a new object too (not ``x = x.float()``, which may hold the object read).
Objects of another run of the function are not followed. Used for the evidence about a name
(:class:`~torchfix_device.facts.grad.GradEvidence`) and for what happens to an
unwrapped ``Variable(x)`` (:mod:`._grad_changes`). ``evidence`` answers ``parent``,
``module``, ``missing`` and ``args_missing``.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device.facts.name_flow import binding_owner, reaching_bindings

Evidence = Any


RANDOM_FILLS = {"normal_", "uniform_", "exponential_", "cauchy_", "log_normal_", "geometric_", "random_"}
"""In-place methods that take Python numbers only (a tensor that requires grad is a
``TypeError``, checked on torch 2.13): only their receiver's grad reaches their result."""


def in_place(method: str) -> bool:
    """``add_``, ``fill_``: an in-place tensor method (not ``__x__``)."""
    return method.endswith("_") and not method.startswith("_")


def aliases(evidence: "Evidence", name: str, scope: cst.CSTNode) -> list[str]:
    """``name`` and the names assigned from it in ``scope`` (``y = x``), transitively."""
    copies = index_of(evidence, scope).copies
    found = [name]
    for held in found:
        found.extend(target for source, target in copies if source == held and target not in found)
    return found


class ScopeIndex:
    """The ``Name`` nodes of a scope by name, and its copies (``y = x``), from the module's index."""

    def __init__(self, module: cst.Module, where: cst.CSTNode) -> None:
        self.names: dict[str, list[cst.Name]] = {}
        self.copies: list[tuple[str, str]] = []
        for node in traversal.of_classes_under(module, where, cst.Name):
            self.names.setdefault(node.value, []).append(node)
        for node in traversal.of_classes_under(module, where, cst.Assign):
            if isinstance(node.value, cst.Name):
                self.copies.extend((node.value.value, t.target.value) for t in node.targets if isinstance(t.target, cst.Name))


def index_of(evidence: "Evidence", scope: cst.CSTNode) -> ScopeIndex:
    """``scope``'s index (the whole module's for a module-level name), made once."""
    where = evidence.module if isinstance(scope, cst.Module) else scope
    holder = getattr(evidence, "values", evidence)  # one index per scope for the module's facts
    indexes: dict[int, ScopeIndex] = holder.__dict__.setdefault("_scope_indexes", {})
    if id(where) not in indexes:
        indexes[id(where)] = ScopeIndex(evidence.module, where)
    return indexes[id(where)]


Flow = "tuple[cst.Name, list[cst.CSTNode]] | None"


def changes_of(evidence: "Evidence", name: str, scope: cst.CSTNode, flow: Flow = None) -> str | None:
    """Why the object ``name`` holds in ``scope`` may be made to require grad in place (None:
    as far as ``scope`` shows, it is not), through ``name`` or a name copied from it.
    ``flow``: the read asked about and the bindings of ``name`` reaching it, where known."""
    made = _new_objects(evidence, flow[1]) if flow is not None else None
    for held in aliases(evidence, name, scope):
        for node in index_of(evidence, scope).names.get(held, ()):
            found = _change_at(evidence, held, node)
            if found is not None and (held != name or made is None or flow is None or _may_hold(evidence, scope, node, made, flow[0])):
                return found
    return None


def flow_key(evidence: "Evidence", flow: Flow) -> int | None:
    """What the answer of :func:`changes_of` for ``flow`` depends on beyond the name: the read,
    where its reaching bindings all make new objects (else None: the answer of any read)."""
    return id(flow[0]) if flow is not None and _new_objects(evidence, flow[1]) is not None else None


def _new_objects(evidence: "Evidence", reaching: list[cst.CSTNode]) -> frozenset[int] | None:
    """The ids of ``reaching`` where each is ``x = <a new object>`` (None otherwise): then the
    object read is one that a binding of them made."""
    if not reaching or not all(_makes_new(evidence, n) for n in reaching):
        return None
    return frozenset(id(n) for n in reaching)


def _makes_new(evidence: "Evidence", node: cst.CSTNode) -> bool:
    owner = binding_owner(node, evidence.parent)
    statement = owner[0] if owner is not None else None
    return (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and statement.targets[0].target is node
            and evidence.fresh(statement.value))


def _may_hold(evidence: "Evidence", scope: cst.CSTNode, node: cst.Name, made: frozenset[int], read: cst.Name) -> bool:
    """At ``node`` (a use of the name in ``scope``), the name may hold an object a binding of
    ``made`` made: one of them may reach it; or ``node`` is in a nested function, class, lambda
    or comprehension (run at another time), or where the flow cannot be told; or it may run
    after ``read`` (a loop around both, or later in the scope) while no binding reaching it
    is one that makes a new object (``x = x.float()`` may hold the object read)."""
    child, above = node, evidence.parent(node)
    while above is not None and above is not scope:
        if isinstance(above, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            return True
        child, above = above, evidence.parent(above)
    if above is None or not isinstance(scope, (cst.Module, cst.FunctionDef)) or (isinstance(scope, cst.FunctionDef) and child is not scope.body):
        return True
    bindings = [b.node for b in evidence.bindings(node.value, node) if getattr(b, "node", None) is not None]
    found = reaching_bindings(scope, node.value, bindings, node, evidence.parent, evidence.values.tree_facet)
    if found is None or any(id(b) in made for b in found):
        return True
    return not (all(_makes_new(evidence, b) for b in found) or _runs_before(evidence, scope, node, read))


def _runs_before(evidence: "Evidence", scope: cst.CSTNode, node: cst.CSTNode, read: cst.CSTNode) -> bool:
    """The statement of ``node`` comes before ``read`` (it does not hold it) and no loop holds
    both: in one run of ``scope``, it runs before ``read`` if at all."""
    around_read = _ancestors(evidence, scope, read)
    place = {id(a): i for i, a in enumerate(around_read)}
    child, statement = node, None
    for above in _ancestors(evidence, scope, node):
        if id(above) in place:  # the innermost node holding both
            break
        if statement is None and isinstance(above, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            statement = above
        child = above
    else:
        return False
    if statement is None or any(isinstance(a, (cst.For, cst.While)) for a in around_read[place[id(above)]:]):
        return False  # `node` in the statement of `read`, or a loop around both
    order = [id(c) for c in traversal.children(above)]
    towards_read = around_read[place[id(above)] - 1] if place[id(above)] else read
    return id(child) in order and id(towards_read) in order and order.index(id(child)) < order.index(id(towards_read))


def _ancestors(evidence: "Evidence", scope: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes above ``node`` up to ``scope`` (included), the nearest first."""
    found = []
    above = evidence.parent(node)
    while above is not None and above is not scope:
        found.append(above)
        above = evidence.parent(above)
    return [*found, scope]


def _change_at(evidence: "Evidence", name: str, node: cst.Name) -> str | None:
    """The change in place ``node`` (a use of ``name``) makes, if it may give grad."""
    above = evidence.parent(node)
    shown = f"`{name}` is changed in place"
    if isinstance(above, cst.Attribute) and above.value is node:
        attr = above.attr.value
        grand = evidence.parent(above)
        if attr in ("requires_grad", "grad", "data") and isinstance(grand, (cst.AssignTarget, cst.AugAssign)):
            return f"{shown} (`{name}.{attr} = ...`)"
        if attr == "requires_grad_":
            return f"{shown} (`{name}.requires_grad_()`)"
        if in_place(attr) and attr not in RANDOM_FILLS and isinstance(grand, cst.Call) and evidence.args_missing(grand) is not None:
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
        return f"{shown} (`{name} {_nodes.code_of(above.operator).strip()} ...` with a value that may require grad)"
    return None


RESHAPING = frozenset({"squeeze_", "unsqueeze_", "resize_", "resize_as_", "set_", "as_strided_"})
"""In-place methods that may change the number of dimensions of the tensor they are called on
(``t_``, ``transpose_`` keep it)."""


def reshaped_in_place(values: Any, name: cst.Name) -> bool:
    """The object ``name`` holds may have its number of dimensions changed in place
    (``idx.squeeze_(1)``, ``y.unsqueeze_(0)``) in its scope, through the name or a name copied
    from it (:func:`aliases`): what its bindings show of its dimensions does not hold (``values``:
    the module's :class:`~torchfix_device.facts.values.ModuleValues`; a name copied *to* it, ``x =
    y``, is asked about itself where its dimensions are)."""
    reach = values.reach(name)
    if reach.why is not None:
        return False  # nothing is shown of it anyway
    index = index_of(values, reach.scope)
    for held in aliases(values, name.value, reach.scope):
        for node in index.names.get(held, ()):
            above = values.parent(node)
            if isinstance(above, cst.Attribute) and above.value is node and above.attr.value in RESHAPING:
                return True
    return False

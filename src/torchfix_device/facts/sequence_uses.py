"""What a read does with a value that Python 2 code took for a list (``batch = zip(*samples)``):
one of the facts about values (:mod:`torchfix_device.facts`), asked by TFD023 where a ``zip``,
``map`` or ``filter`` result of Python 3, a one-shot iterator, becomes ``list(...)`` again.

:func:`sequence_use` says what the code around a value does with it: ``INDEXED`` (subscripted,
given to ``len()``: raises on the iterator), ``ITERATED`` (gone through: a ``for``, a
comprehension, ``*v``, ``a, b = v``, ``x in v``, a list's method, a builtin or NumPy/torch function
that goes through its argument, or a plain function of the file whose parameter gets it and does
only these), or a reason a list may not do (``next(v)``: a list is no iterator);
:func:`uses_of_sequence` gives that for every read a binding reaches, a read whose binding cannot
be told being a doubt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts.values import scope_of
from torchfix_device.syntax import nodes

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

INDEXED, ITERATED = "indexed", "iterated"
"""What a read of the value does: subscripted or given to ``len()`` (a site: raises on Python 3),
or goes through it once as a list would be gone through (the same on a list)."""
FIRST_ITERATED = frozenset({
    "builtins.list", "builtins.tuple", "builtins.sorted", "builtins.set", "builtins.frozenset", "builtins.dict",
    "builtins.enumerate", "builtins.sum", "builtins.min", "builtins.max", "builtins.any", "builtins.all",
    "builtins.reversed", "builtins.iter",
    "numpy.array", "numpy.asarray", "numpy.concatenate", "numpy.stack", "numpy.vstack", "numpy.hstack",
    "torch.tensor", "torch.as_tensor", "torch.cat", "torch.stack",
})
"""Functions whose first argument is gone through as a sequence (a list is what they take)."""
ANY_ITERATED = frozenset({"builtins.zip", "builtins.print"})
LATER_ITERATED = frozenset({"builtins.map", "builtins.filter"})
"""Functions whose arguments, all of them or all after the first, are gone through (``print``
shows the list Python 2 showed, where Python 3 shows ``<zip object at 0x...>``)."""
LIST_METHODS = frozenset({"sort", "reverse", "index", "count", "append", "extend", "insert", "pop", "remove"})
"""A list's methods: Python 3's iterators have none of them (AttributeError), Python 2 meant these."""
MAX_DEPTH = 4
"""How many calls deep a value is followed into the functions of the file."""
MAX_CODE = 48
"""Longest code quoted in a message; longer code is described instead."""


def uses_of_sequence(values: "ModuleValues", binding: cst.Name | cst.Param, depth: int = 0) -> list[tuple[str, cst.CSTNode]]:
    """What each read of the name bound at ``binding`` (a plain name assigned, or a parameter
    of a function given the value) does with the value, in source order (:func:`sequence_use`); a
    read that may hold it but whose bindings cannot be told, a doubt."""
    found: list[tuple[str, cst.CSTNode]] = []
    name = binding.name.value if isinstance(binding, cst.Param) else binding.value
    scope = scope_of(binding, values.parent)
    if isinstance(binding, cst.Param) and isinstance(scope, cst.FunctionDef):
        scope = scope.body
    for read in values.name_reads(scope).get(name, ()):
        if read is binding or values.is_target(read):
            continue
        reach = values.reach(read)
        if reach.why is not None:
            found.append((f"`{name}` is also read where this file cannot tell which value it holds", read))
        elif any(b is binding for b in reach.bindings):
            found.append(sequence_use(values, read, depth) or (_unknown(values, read, name), read))
    return found


def sequence_use(values: "ModuleValues", value: cst.BaseExpression, depth: int = 0) -> tuple[str, cst.CSTNode] | None:
    """What the code around ``value`` does with it, where that is the same on a list: ``INDEXED``
    (with the subscript or ``len`` call) or ``ITERATED`` (also for an argument of a function
    of this file that does only such things with it); for ``next(value)`` and such a function
    doing something else, the reason a list may not do; None for anything else."""
    parent = values.parent(value)
    if isinstance(parent, cst.Subscript) and parent.value is value:
        return INDEXED, parent
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is value:
        return ITERATED, parent
    if isinstance(parent, cst.StarredElement) and isinstance(values.parent(parent), (cst.List, cst.Tuple, cst.Set)):
        return ITERATED, parent  # `[*batch]`
    if isinstance(parent, cst.Assign) and parent.value is value and all(isinstance(t.target, (cst.Tuple, cst.List)) for t in parent.targets):
        return ITERATED, parent  # `states, actions = batch`
    if isinstance(parent, cst.Attribute) and parent.value is value and parent.attr.value in LIST_METHODS:
        return ITERATED, parent  # `batch.sort()`: no method of the iterator, the list's own
    if isinstance(parent, cst.ComparisonTarget) and parent.comparator is value and isinstance(parent.operator, (cst.In, cst.NotIn)):
        return ITERATED, parent
    call = values.parent(parent) if isinstance(parent, cst.Arg) else None
    if not (isinstance(call, cst.Call) and isinstance(parent, cst.Arg) and parent.value is value):
        return None
    if parent.star == "*":
        return ITERATED, call  # `f(*batch)`
    if parent.star or parent.keyword is not None:
        return None
    index = next(i for i, a in enumerate(call.args) if a is parent)
    if any(a.star or a.keyword is not None for a in call.args[:index]):
        return None  # which parameter takes it is not shown
    if isinstance(call.func, cst.Name) and call.func.value == "len" and len(call.args) == 1 and values.names(call.func) == {"builtins.len"}:
        return INDEXED, call
    names = values.names(call.func)
    if names == {"builtins.next"}:
        return f"`{code_or_none(call) or 'next()'}` needs an iterator and a list is not one", call
    if names and (names <= ANY_ITERATED or (index and names <= LATER_ITERATED) or (not index and names <= FIRST_ITERATED)):
        return ITERATED, call
    return _passed(values, call, index, depth)


def _passed(values: "ModuleValues", call: cst.Call, index: int, depth: int) -> tuple[str, cst.CSTNode] | None:
    """The value is the ``index``-th positional argument of ``call``: where that calls a plain
    function of this file, what its parameter's reads do with the value, taken together."""
    function = _function_called(values, call)
    params = [*function.params.posonly_params, *function.params.params] if function is not None else []
    if depth >= MAX_DEPTH or index >= len(params):
        return None
    uses = uses_of_sequence(values, params[index], depth + 1)
    doubt = next(((kind, node) for kind, node in uses if kind not in (INDEXED, ITERATED)), None)
    return doubt or (ITERATED, call)


def _function_called(values: "ModuleValues", call: cst.Call) -> cst.FunctionDef | None:
    """The one undecorated function of this file, not a method, that ``call`` calls by name."""
    function = values.function_called(call.func)
    if function is None:
        return None
    return None if isinstance(values.parent(values.parent(function) or function), cst.ClassDef) else function


def _unknown(values: "ModuleValues", read: cst.Name, name: str) -> str:
    """Why a read that is neither subscripted nor gone through leaves the fix unsafe."""
    parent = values.parent(read)
    if isinstance(parent, cst.Arg):
        parent = values.parent(parent)
    shown = code_or_none(parent) if isinstance(parent, (cst.Call, cst.Attribute, cst.Assign, cst.Return)) else None
    where = f"`{shown}`" if shown else f"a read of `{name}`"
    return f"{where} may need the iterator, and this file does not show that a list does the same there"


def code_or_none(node: cst.CSTNode | None) -> str | None:
    """``node``'s code where it is short enough to quote, on one line."""
    if node is None:
        return None
    text = nodes.code_of(node).strip()
    return text if len(text) <= MAX_CODE and "\n" not in text else None

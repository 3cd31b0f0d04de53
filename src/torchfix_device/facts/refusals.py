"""Where a tensor of any shape fails: the first use of a value, on every path, that no tensor
passes. One of the facts about values (:mod:`torchfix_device.facts`), asked where a PyTorch 0.3
number is now a tensor (TFD019): if the first thing the program does with the value fails for
every tensor, making it a number changes only a run that failed, whatever its shape.

:func:`refused_first` follows a fresh value (a reduction, an element: a new tensor each time it
is made) to its first use:

- used where it is made: the action of ``env.step(v)`` of an environment whose ``step`` checks
  that its action is in its discrete action space (``gym.make("CartPole-v0")``, through a name
  every value of which is such a literal, or its ``.unwrapped``; a tensor is never in it), or
  the key of a lookup ``d[v]`` / ``d[v] += 1`` of a dict shown to be a plain one (a literal,
  ``dict()``, ``OrderedDict()``: a fresh tensor is no key of it, so the lookup raises
  ``KeyError``; a ``defaultdict`` or ``Counter`` would add it);
- bound to a name (``a = v``): the statement right after the binding, in the same block, reads
  the name once, unconditionally, in such a use (statements before it that read the name only as
  ``t.fill_(a)``, which fills with a 0-dim tensor as with its number and refuses any other
  tensor, and that cannot leave the block but by raising, are passed over); or the name's only
  read is a ``return``, and at every call of the function
  (:func:`~torchfix_device.facts.uses.calls_of`, methods included) the value is refused first in
  the same way, where no other file of the run may call it
  (:func:`~torchfix_device.facts.uses.foreign_uses` shows none);
- ``return v``: refused first at every call.

None where that is not shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import libcst as cst
from torchfix_device.syntax import traversal
from torchfix_device.facts.stores import store_of
from torchfix_device.facts.environments import gym_environment_ids
from torchfix_device.facts.uses import Place, Use, calls_of, container_kind, foreign_uses

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

MAX_DEPTH = 8
CHECKED_ENVIRONMENTS = frozenset({"CartPole-v0", "CartPole-v1", "MountainCar-v0"})
"""gym environments whose ``step`` asserts ``self.action_space.contains(action)`` on a
``Discrete`` space, which holds only ``int`` and integer NumPy scalars (every gym and gymnasium
release)."""
MAX_PASSED = 4
"""Statements passed over between a binding and the use that refuses every tensor."""
LEAVING = (cst.Return, cst.Break, cst.Continue, cst.Yield, cst.Await)
CONDITIONAL = (cst.Lambda, cst.IfExp, cst.BooleanOperation, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


Refusing = Callable[["ModuleValues", cst.BaseExpression], "Place | None"]
Passing = Callable[["ModuleValues", cst.Name], bool]


@dataclass(frozen=True)
class Question:
    """What refuses the value (``refusing``), which other reads of a bound name may sit in the
    statement of the refusing read, after it (``beside``), and which reads let a statement before
    it be passed over (``passed``)."""

    refusing: Refusing
    beside: Passing | None = None
    passed: Passing | None = None


def refused_first(values: "ModuleValues", expr: cst.BaseExpression, question: "Question | None" = None) -> Place | None:
    """The use that every tensor fails, where it comes first (see the module docstring). The
    default ``question``: :func:`refusing_use` (a tensor of any shape where a number was meant),
    passing over ``t.fill_(v)``."""
    return _refused(values, expr, 0, frozenset(), question or NUMBER_MEANT)


def _refused(values, expr: cst.BaseExpression, depth: int, seen: frozenset[int], question: Question) -> Place | None:  # noqa: ANN001
    if depth > MAX_DEPTH:
        return None
    place = question.refusing(values, expr)
    if place is not None:
        return place
    parent = values.parent(expr)
    if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1 \
            and isinstance(parent.targets[0].target, cst.Name):
        return _after_binding(values, parent, parent.targets[0].target, depth, seen, question)
    if isinstance(parent, cst.Return):
        return _at_calls(values, parent, depth, seen, question)
    return None


def _after_binding(values, assign: cst.Assign, target: cst.Name, depth: int, seen: frozenset[int], question: Question) -> Place | None:  # noqa: ANN001
    line = values.parent(assign)
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    reads = values.reads_of(target)
    following = _next_statement(values, line)
    beside, passed = question.beside, question.passed
    for _ in range(MAX_PASSED):
        if following is None:
            break
        inside = sorted((r for r in reads if _in(values, r, following)), key=values.source_order)
        if inside and _unconditionally_in(values, inside[0], following) \
                and (len(inside) == 1 or (beside is not None and all(beside(values, r) for r in inside[1:]))):
            place = question.refusing(values, inside[0])
            if place is not None:
                return place
        if (inside and (passed is None or not all(passed(values, r) for r in inside))) or _may_leave(following):
            break
        following = _next_statement(values, following)
    if len(reads) == 1 and isinstance(values.parent(reads[0]), cst.Return):
        return _at_calls(values, cst.ensure_type(values.parent(reads[0]), cst.Return), depth, seen, question)
    return None


def _passes_number_on(values: "ModuleValues", read: cst.Name) -> bool:
    """``t.fill_(v)``: a 0-dim ``v`` fills as its number does, any other tensor is refused."""
    arg = values.parent(read)
    call = values.parent(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(call, cst.Call) and len(call.args) == 1 and call.args[0] is arg and arg.keyword is None \
        and not arg.star and isinstance(call.func, cst.Attribute) and call.func.attr.value == "fill_"


def _may_leave(statement: cst.SimpleStatementLine) -> bool:
    """The statement may end the block without raising (so the next one need not run)."""
    return any(isinstance(n, LEAVING) for n in traversal.walk(statement))


def _at_calls(values, statement: cst.Return, depth: int, seen: frozenset[int], question: Question) -> Place | None:  # noqa: ANN001
    function = values.enclosing(statement, (cst.FunctionDef, cst.Lambda))
    if not isinstance(function, cst.FunctionDef) or id(function) in seen or foreign_uses(values, function, None, 0) != []:
        return None  # (the other files of the run call it: their uses are not read for a refusal)
    calls = calls_of(values, function)
    first = None
    for call in calls:
        place = _refused(values, call, depth + 1, seen | {id(function)}, question)
        if place is None:
            return None
        first = first or place
    return first


def refusing_use(values: "ModuleValues", expr: cst.BaseExpression) -> Place | None:
    """``expr`` is the action of a checked environment's ``step`` or the key of a plain dict's
    lookup (see the module docstring)."""
    parent = values.parent(expr)
    if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
        call = values.parent(parent)
        if isinstance(call, cst.Call) and call.args and call.args[0] is parent and isinstance(call.func, cst.Attribute) \
                and call.func.attr.value == "step" and _checked(gym_environment_ids(values, call.func.value)):
            return Place(Use.ACTION, call)
        return None
    if isinstance(parent, cst.Index):
        element = values.parent(parent)
        subscript = values.parent(element) if element is not None else None
        if isinstance(subscript, cst.Subscript) and len(subscript.slice) == 1 \
                and store_of(values, subscript) in (None, "augmented") and container_kind(values, subscript.value, plain=True) == "dict":
            return Place(Use.KEY, subscript)
    return None


def _next_statement(values: "ModuleValues", line: cst.SimpleStatementLine) -> cst.SimpleStatementLine | None:
    found = values.block_of(line)
    if found is None:
        return None
    body, index = found
    following = body[index + 1] if index + 1 < len(body) else None
    return following if isinstance(following, cst.SimpleStatementLine) and len(following.body) == 1 else None


def _in(values: "ModuleValues", node: cst.CSTNode, statement: cst.CSTNode) -> bool:
    above = values.parent(node)
    while above is not None and above is not statement:
        above = values.parent(above)
    return above is statement


def _unconditionally_in(values: "ModuleValues", node: cst.CSTNode, statement: cst.CSTNode) -> bool:
    above = values.parent(node)
    while above is not None and above is not statement:
        if isinstance(above, CONDITIONAL):
            return False
        above = values.parent(above)
    return above is statement


def _checked(ids: set[str | None] | None) -> bool:
    """The environment is made for ids that all check their action (:data:`CHECKED_ENVIRONMENTS`)."""
    return ids is not None and all(i in CHECKED_ENVIRONMENTS for i in ids)


NUMBER_MEANT = Question(refusing_use, passed=_passes_number_on)
"""The question TFD019 asks: a tensor of any shape where a number was meant."""

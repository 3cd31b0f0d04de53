"""What an environment is: a ``gym``/``gymnasium`` environment, made by that package or by the
project's own code. One of the facts about values (:mod:`torchfix_device.facts`), asked where a
PyTorch 0.3 number is the action of ``env.step(v)`` (:mod:`.uses`, :mod:`.refusals`).

:func:`gym_environment_ids` says a value is an environment where it is (every value of a name
being one):

- made by a function or class of the package: ``gym.make(...)`` (the id given, where it is a
  literal: some environments check their action, :mod:`.refusals`), a ``gym.wrappers`` class,
  or the ``.unwrapped`` of one;
- an instance of a class of the project that derives from a class of the package (through the
  classes of its file): a wrapper of the RL repos' own (``class WarpFrame(gym.ObservationWrapper)``);
- what a function of this file or of another file of the run returns, where every ``return``
  of it is one (``wrap_pytorch(env)``, ``make_atari(env_id)``), and an instance of such a class:
  both as the function's or the class's summary says (``Returned.gym_env``, :mod:`.returns`,
  made in the defining file).

The ids of a project's environment are not known (None among them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

MAX_DEPTH = 16
GYM_MAKERS = frozenset({"gym.make", "gymnasium.make"})
PACKAGES = ("gym", "gymnasium")


def gym_environment_ids(values: "ModuleValues", receiver: cst.BaseExpression, depth: int = 0) -> set[str | None] | None:
    """The environment ids ``receiver`` may have been made for (see the module docstring: a
    literal id given to ``gym.make``, directly or through a name every value of which is one, or
    None where not shown); None where ``receiver`` is not shown to be an environment."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(receiver, cst.Attribute) and receiver.attr.value == "unwrapped":
        return gym_environment_ids(values, receiver.value, depth + 1)
    if isinstance(receiver, cst.Call):
        return _made_by(values, receiver, depth)
    if not isinstance(receiver, cst.Name):
        return None
    found: set[str | None] = set()
    for value in values.values_of(receiver):
        ids = gym_environment_ids(values, value, depth + 1) if value is not None and value is not receiver else None
        if ids is None:
            return None
        found |= ids
    return found or None


def _made_by(values: "ModuleValues", call: cst.Call, depth: int) -> set[str | None] | None:
    names = values.names(call.func)
    if names and all(q.split(".")[0] in PACKAGES for q in names):
        first = call.args[0] if call.args and not call.args[0].keyword and not call.args[0].star else None
        literal = _literal_string(values, first.value, depth + 1) if first is not None and names <= GYM_MAKERS else None
        return {literal}
    summary = values.call_returns(call)  # a class or function of this file or of another file of the run
    return {None} if getattr(summary, "gym_env", False) else None


def derives_from_gym(values: "ModuleValues", cls: cst.ClassDef, depth: int = 0) -> bool:
    """``cls`` derives from a class of the package, directly or through classes of its file."""
    if depth > MAX_DEPTH:
        return False
    for base in cls.bases:
        if base.keyword is not None or base.star:
            continue
        names = values.names(base.value)
        if names and all(q.split(".")[0] in PACKAGES for q in names):
            return True
        inner = values.class_called(base.value)
        if inner is not None and derives_from_gym(values, inner, depth + 1):
            return True
    return False


def _literal_string(values: "ModuleValues", expr: cst.BaseExpression, depth: int) -> str | None:
    """The text of a string literal, directly or through a name every value of which is the same one."""
    if isinstance(expr, cst.SimpleString):
        text = expr.evaluated_value
        return text if isinstance(text, str) else None
    if isinstance(expr, cst.Name) and depth <= MAX_DEPTH:
        found = {_literal_string(values, v, depth + 1) if v is not None and v is not expr else None for v in values.values_of(expr)}
        return found.pop() if len(found) == 1 else None
    return None

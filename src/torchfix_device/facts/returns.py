"""What a function returns: its dimensions, its elements' dimensions, whether it can require grad.
One of the facts about values (:mod:`torchfix_device.facts`), for calls of a function of this
file and of a function another file of the run defines (``from utils import accuracy``, also
re-exported by a package's ``from .eval import *``).

:func:`returned` summarises a function from every ``return`` of it: the dimensions of the value
where every return shows the same (:mod:`.dims`); for a list or tuple, the dimensions of its
elements where every element shows the same (a literal's elements, and the values appended to
a list that is only appended to and returned: ``res = []``, ``res.append(x)``, ``return res``),
and where every return is a literal of one length (``return data, target``), those of each
position where every return agrees; whether nothing returned can require grad (:mod:`.grad`); and whether every return builds a loss
module (:mod:`.losses`: ``def get_criterion(): return nn.CrossEntropyLoss()``). The function's parameters are
unknown there, as for any caller: only what the function's own code shows counts.

:meth:`~.values.ModuleValues.call_returns` answers for a call (this module installs
:func:`returned` there: the facts it asks, :mod:`.dims` and :mod:`.grad`, ask for calls): a
function of this file (:meth:`~.values.ModuleValues.function_called`), or one of another file,
which the engine summarises in that file's own module (``view.foreign_returns``, of
:mod:`torchfix_device.engine.foreign`: the run tells each file which functions it imports from
where, and the result cache keys the file's answer with a digest of those files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import libcst as cst
from torchfix_device.facts import dims as facts_dims
from torchfix_device.facts import kinds
from torchfix_device.facts import sizes as facts_sizes
from torchfix_device.facts.cpu_paths import loader_class
from torchfix_device.facts.environments import derives_from_gym, gym_environment_ids
from torchfix_device.facts.grad import GradEvidence
from torchfix_device.facts.losses import LossEvidence, calls_making
from torchfix_device.facts.project_calls import own_method
from torchfix_device.facts.values import VALUE, install_summariser
from torchfix_device.syntax import nodes, traversal

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues


@dataclass(frozen=True)
class Returned:
    """What every ``return`` of a function gives (None / False where not shown)."""

    dims: int | None = None
    element_dims: int | None = None
    positions: tuple[int | None, ...] | None = None
    """Where every ``return`` is a tuple or list literal of one length (``return data, target``):
    the dimensions of the element at each position, where every return shows the same."""
    grad_free: bool = False
    builds_loss: bool = False
    """Every ``return`` builds a loss module with a scalar reduction (``return nn.CrossEntropyLoss(w)``)."""
    loader: bool = False
    """A class, not a function: a ``DataLoader`` subclass whose instances place nothing on a
    device (:func:`~torchfix_device.facts.cpu_paths.loader_class`)."""
    scalar: bool = False
    """Every ``return`` is shown to be a 0-dim tensor (:mod:`.sizes`: ``return F.nll_loss(...)``)."""
    gym_env: bool = False
    """What it returns is a ``gym`` environment (:mod:`.environments`): every ``return`` of a
    function, an instance of a class deriving from the package's."""
    scalar_call: bool = False
    """A class whose instances, called, return what is shown to be a 0-dim tensor: the
    ``forward`` of an ``nn.Module`` subclass (``LabelSmoothing(...)(x, y)``), the ``__call__`` of
    another class, defined in the class itself."""
    closure: "Returned | None" = None
    """A function every ``return`` of which gives one function it defines (``def trainer(...):
    def train(...): ...; return train``): what calling that function gives."""
    call: "Returned | None" = None
    """A class: what calling an instance gives, its ``forward`` or ``__call__`` defined in the class
    itself (:func:`.project_calls.instance_call_dims` asks its dimensions)."""
    closures: tuple[tuple[str, "Returned"], ...] = ()
    """A class: for each method of it that returns a function it defines, what calling that
    function gives (``train_step = rvae.trainer(...)`` then ``train_step(...)``)."""
    none_at: tuple[bool, ...] = ()
    """The positions of :attr:`positions` where a ``return`` may give ``None`` (``kld = None`` in an
    ``else``): the dimensions there are those of the other values."""

    def at(self, elements: "Sequence[cst.Element]", name: cst.CSTNode, past_none: bool = False) -> int | None:
        """The dimensions of ``name``, one of the ``elements`` of the target of ``a, b, ... = f(...)``
        (at a position where a ``return`` may give ``None``, only ``past_none``: where the read raises on it)."""
        if self.positions is not None and len(self.positions) == len(elements):
            index = next(i for i, e in enumerate(elements) if e.value is name)
            return None if index < len(self.none_at) and self.none_at[index] and not past_none else self.positions[index]
        return self.element_dims


NOTHING = Returned()


def made_by_class(values: "ModuleValues", cls: cst.ClassDef) -> Returned:
    """What calling the module-level class ``cls`` gives, as far as a caller asks: an instance of
    a ``DataLoader`` that places nothing, or one whose call returns a 0-dim tensor (a loss module
    of the project), once per module version."""
    memo = values.facets.setdefault("made by class", {})
    known = memo.get(id(cls))
    if known is None:
        memo[id(cls)] = NOTHING  # while it is being found
        method = _instance_call(values, cls)
        scalar = method is not None and facts_sizes.evidence(values).returns_size(method) is facts_sizes.Size.ZERO_DIM
        closures = tuple((m.name.value, returned(values, nested)) for m in cls.body.body if isinstance(m, cst.FunctionDef)
                         and not m.decorators and (nested := _defined_and_returned(values, m)) is not None)
        known = memo[id(cls)] = Returned(loader=loader_class(values, cls), scalar_call=scalar, gym_env=derives_from_gym(values, cls),
                                         call=returned(values, method) if method is not None else None, closures=closures)
    return known


def _instance_call(values: "ModuleValues", cls: cst.ClassDef) -> cst.FunctionDef | None:
    """The method an instance's call runs: ``forward`` of an ``nn.Module`` subclass
    (:func:`.kinds.module_classes`), ``__call__`` of another class; defined once in the class itself."""
    name = "forward" if id(cls) in kinds.module_classes(values) else "__call__"
    defs = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name] \
        if isinstance(cls.body, cst.IndentedBlock) else []
    return defs[0] if len(defs) == 1 and not defs[0].decorators else None


def returned(values: "ModuleValues", function: cst.FunctionDef) -> Returned:
    """The summary of ``function`` (see the module docstring), once per module version."""
    memo = values.facets.setdefault("returned", {})
    known = memo.get(id(function))
    if known is None:
        memo[id(function)] = NOTHING  # while it is being found: a recursive call shows nothing
        known = memo[id(function)] = _summary(values, function)
    return known


def _summary(values: "ModuleValues", function: cst.FunctionDef) -> Returned:
    returns = [r.value for r in traversal.function_returns(function)]
    if not returns or any(r is None for r in returns) or traversal.yields(function):
        return NOTHING
    found_dims = {facts_dims.dims(values, r) for r in returns}
    elements: list[cst.BaseExpression] = []
    for value in returns:
        parts = returned_elements(values, value)  # type: ignore[arg-type]
        if parts is None:
            elements = []
            break
        elements += parts
    element_dims = {facts_dims.dims(values, e) for e in elements}
    literals = [[e.value for e in r.elements] for r in returns if isinstance(r, (cst.Tuple, cst.List))  # type: ignore[union-attr]
                and not any(isinstance(e, cst.StarredElement) for e in r.elements)]  # type: ignore[union-attr]
    positions, none_at = None, ()
    if len(literals) == len(returns) and len({len(parts) for parts in literals}) == 1:
        at = [[_dims(values, parts[i]) for parts in literals] for i in range(len(literals[0]))]
        positions = tuple(found.pop() if len(found := {d for d, none in each if not none or d is not None}) == 1 else None for each in at)
        none_at = tuple(any(none for _, none in each) for each in at)
    evidence = GradEvidence(values)
    grad_free = all(evidence.missing(e) is None for e in elements) if elements else \
        all(evidence.missing(r) is None for r in returns)  # type: ignore[arg-type]
    losses = LossEvidence(values)
    return Returned(
        dims=found_dims.pop() if len(found_dims) == 1 else None,
        element_dims=element_dims.pop() if len(element_dims) == 1 else None,
        positions=positions,
        grad_free=grad_free,
        builds_loss=all(isinstance(r, cst.Call) and losses.is_loss_constructor(r) for r in returns),
        scalar=facts_sizes.evidence(values).returns_size(function) is facts_sizes.Size.ZERO_DIM,
        gym_env=all(gym_environment_ids(values, r) is not None for r in returns),  # type: ignore[arg-type]
        closure=returned(values, nested) if (nested := _defined_and_returned(values, function)) is not None else None,
        none_at=none_at if any(none_at) else (),
    )


def _dims(values: "ModuleValues", expr: cst.BaseExpression) -> tuple[int | None, bool]:
    """The dimensions of ``expr`` where it is not ``None``, 0 for what :mod:`.sizes` shows to be a
    0-dim tensor (a loss), and whether it may be ``None`` (:func:`.dims.dims_past_none`)."""
    found, none = facts_dims.dims_past_none(values, expr)
    if found is None and not nodes.is_none(expr) and facts_sizes.evidence(values).size(expr) is facts_sizes.Size.ZERO_DIM:
        return 0, none
    return found, none


def _defined_and_returned(values: "ModuleValues", function: cst.FunctionDef) -> cst.FunctionDef | None:
    """The one plain function ``function`` defines in its own body that every ``return`` of it
    gives by name (a closure: ``def train(...): ...`` then ``return train``); None otherwise."""
    returns = [r.value for r in traversal.function_returns(function)] if not traversal.yields(function) else []
    found = {id(d): d for d in (values.function_called(r) if isinstance(r, cst.Name) else None for r in returns)}
    nested = found.popitem()[1] if len(found) == 1 else None
    return nested if nested is not None and values.enclosing(nested, cst.FunctionDef) is function else None


def called_otherwise(values: "ModuleValues", call: cst.Call) -> Returned | None:
    """What a call gives that is neither of a function nor of a class by name: a method of the
    class of ``self`` (``self(x)``, ``self.forward(x)``: :func:`.project_calls.own_method`); an
    instance of a class of this file or another of the run, maybe moved (``model = Net().cuda()``
    then ``model(x)``: its ``forward``); a function another call returned (``step = make_step(m)``;
    ``train_step = rvae.trainer(opt, loader)``, ``rvae`` such an instance, whose ``trainer``
    returns a function it defines). Where the name may hold several, all must agree."""
    method = own_method(values, call.func)
    if method is not None:
        return returned(values, method)
    busy = values.facets.setdefault("calls otherwise", set())
    if not isinstance(call.func, cst.Name) or id(call) in busy:
        return None
    busy.add(id(call))
    try:
        found: set = set()
        for made in calls_making(values, list(values.values_of(call.func))) or [None]:
            if isinstance(made, cst.Call) and isinstance(made.func, cst.Attribute) and isinstance(made.func.value, cst.Name):
                instances = calls_making(values, list(values.values_of(made.func.value))) or [None]
                found |= {dict(getattr(values.call_returns(i), "closures", ())).get(made.func.attr.value) if i else None for i in instances}
            else:
                summary = values.call_returns(made) if isinstance(made, cst.Call) else None  # a function's closure, a class's call
                found.add(getattr(summary, "closure", None) or getattr(summary, "call", None))
        return found.pop() if len(found) == 1 else None
    finally:
        busy.discard(id(call))


def returned_elements(values: "ModuleValues", expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The elements of the list or tuple ``expr`` is: a literal's, or for a name bound only to a
    list literal, that literal's and every value appended to it, where the list is only appended
    to and read whole (returned, iterated); None otherwise."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return None if any(isinstance(e, cst.StarredElement) for e in expr.elements) else [e.value for e in expr.elements]
    if not isinstance(expr, cst.Name):
        return None
    reach = values.reach(expr)
    if reach.why is not None or len(reach.bindings) != 1:
        return None
    binding = reach.bindings[0]
    bound = values.bound(binding)
    if not isinstance(bound.value, cst.List) or bound.kind != VALUE:
        return None
    found = [e.value for e in bound.value.elements if not isinstance(e, cst.StarredElement)]
    if len(found) != len(bound.value.elements):
        return None
    for read in values.reads_of(binding):
        parent = values.parent(read)
        if isinstance(parent, cst.Return) or read is expr:
            continue
        call = values.parent(parent) if isinstance(parent, cst.Attribute) else None
        if isinstance(parent, cst.Attribute) and parent.attr.value == "append" and isinstance(call, cst.Call) \
                and call.func is parent and len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
            found.append(call.args[0].value)
            continue
        return None  # stored, extended, passed: what it holds is not shown
    return found


install_summariser(returned, made_by_class, called_otherwise)

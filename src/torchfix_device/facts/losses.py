"""Which calls are torch losses with a scalar reduction, and where a loss module is bound.

Part of the facts about a value's size (:mod:`.sizes` builds on it): ``F.cross_entropy(...)``
and the other ``F.*_loss`` functions, ``nn.*Loss(...)`` constructors, neither with
``reduction="none"``, ``reduce=False`` nor anything by position that may be one of them; the
call of a name bound to such a module (moved or not: a module's ``.cuda()``/``.to()`` return it)
or to such a function; ``self.x(...)`` where this class's ``__init__`` sets ``self.x`` to such a
module (or to a parameter every construction of the class passes one: ``self.criterion =
criterion``) and nothing in the file assigns an attribute ``x`` anything else. Names are resolved by
the module's shared resolution (:mod:`.values`). A parameter every call of whose function passes
a loss module is one too, with the calls of the other files of the run where the engine shows
them (:meth:`LossEvidence.calls_elsewhere`).
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m
from torchfix_device.facts.values import AUGMENTED, PART, VALUE, ModuleValues
from torchfix_device.facts.checkpoints import saved_values
from torchfix_device.facts.name_flow import binding_owner
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

LOSS_FUNCTIONS = frozenset({
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "margin_ranking_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss",
})
MAX_LOSS_POSITIONALS = 3
"""``F.*_loss`` positional arguments that cannot be ``reduce``/``reduction`` (the earliest is the
fourth, ``F.mse_loss(a, b, size_average, reduce)``), except where :data:`REDUCTION_POSITION`
says otherwise."""
REDUCTION_POSITION = {"huber_loss": 2, "HuberLoss": 0, "CTCLoss": 1}
"""Losses whose ``reduction`` can be passed at a position the general rules allow."""
NOT_SCALAR_LOSSES = frozenset({"AdaptiveLogSoftmaxWithLoss", "LinearCrossEntropyLoss"})
"""``nn.*Loss`` classes whose call does not return one reduced loss."""
AUGMENTED_ARITHMETIC = (
    cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign, cst.FloorDivideAssign,
    cst.ModuloAssign, cst.PowerAssign,
)
UNKNOWN = object()
"""A binding whose value says nothing (``x @= y``, ``x |= y``)."""
SHAPE_PART = object()
"""A binding to one part of a tensor's shape (``n, c = x.size()``): a Python int."""
MAX_PASSES = 4
"""How many functions' parameters a loss module is followed through (``main`` → ``train`` →
``eval_epoch`` → ``get_performance``)."""
MODULE_MOVES = frozenset({"cuda", "to", "cpu", "float", "double", "half", "train", "eval"})
"""``nn.Module`` methods that return the module itself."""


class LossEvidence:
    """Loss questions about one module version."""

    def __init__(self, values: ModuleValues) -> None:
        self.values = values
        self.module = values.module
        self._attribute_values: dict[str, list[tuple[cst.Attribute, cst.BaseExpression | None]]] | None = None
        self._param_losses: dict[tuple[int, int], bool] = {}
        """(class, the name ``__init__`` assigns) → :meth:`_init_param_losses`' answer."""

    def loss_call_reduces(self, function: str, call: cst.Call) -> bool:
        """``F.<function>(...)`` with a scalar reduction: neither ``reduction="none"`` nor
        ``reduce=False``, and nothing by position that may be either."""
        positional = nodes.positional_args(call)
        if _keeps_elements(call) or len(positional) > MAX_LOSS_POSITIONALS:
            return False
        return _reduction_position_ok(positional, REDUCTION_POSITION.get(function))

    def is_loss_constructor(self, call: cst.Call) -> bool:
        """``nn.XLoss(...)`` with its default (full) reduction: reduction and ``reduce`` not
        given, or not by position (``nn.MSELoss(None, False)`` keeps elements)."""
        call = strip_moves(call)  # type: ignore[assignment]
        if not isinstance(call, cst.Call) or _keeps_elements(call) or nodes.has_star_args(call):
            return False
        positional = nodes.positional_args(call)
        if len(positional) > 1:
            return False
        for q in self.values.names(call.func):
            last = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.") and last.endswith("Loss") and last not in NOT_SCALAR_LOSSES:
                return _reduction_position_ok(positional, REDUCTION_POSITION.get(last))
        return False

    def holds_made_torch_loss(self, receiver: cst.BaseExpression) -> bool:
        """Every value ``receiver`` may hold is a torch loss module built with no reduction argument
        (``nn.CrossEntropyLoss(weight)``, moved or not): a name, through its bindings reaching it, or
        ``self.x`` in a method, through every value any ``.x = ...`` of the file assigns."""
        if isinstance(receiver, cst.Name):
            made = calls_making(self.values, list(self.values.values_of(receiver)))
        elif isinstance(receiver, cst.Attribute) and self.method_around(receiver) is not None:
            held = [value for _, value in self.assigned_to_attribute().get(receiver.attr.value, [])]
            # `self.loss_fn = self.loss_fn.cuda()`, a move of itself, adds nothing
            made = calls_making(self.values, [v for v in held if not m.matches(strip_moves(v), m.Attribute(attr=m.Name(receiver.attr.value)))])
        else:
            return False  # any other receiver: what it holds is not shown
        return bool(made) and all(
            self.is_loss_constructor(call) and not any(nodes.keyword_arg(call, k) for k in ("reduction", "size_average", "reduce")) for call in made
        )

    def is_own_loss_attribute(self, func: cst.Attribute) -> bool:
        """``self.x`` in a method of the class whose ``__init__`` sets ``self.x = nn.XLoss()`` (or
        an instance of a project class whose call returns a 0-dim tensor), and nothing in the file
        assigns any other value to an attribute named ``x`` (a move of ``self.x`` itself is no
        other value), ``self.x`` in a method of a class neither deriving from this one nor a base of it aside."""
        found = self.method_around(func)
        if found is None:
            return False
        cls, _ = found
        attr = func.attr.value
        values = self.assigned_to_attribute().get(attr, [])
        in_init = False
        for target, value in values:
            other = self.method_around(target)
            if other is not None and other[0] is not cls and not related_classes(cls, other[0]):
                continue  # `self.criterion = criterion` of another class's instances
            if value is None:
                return False
            stripped = strip_moves(value)
            if isinstance(stripped, cst.Attribute) and stripped.attr.value == attr:
                continue  # self.x = self.x.cuda()
            if isinstance(value, cst.Name) and _set_in_init(cls, target) and self._init_param_losses(cls, value):
                in_init = True  # `self.criterion = criterion`, every `Trainer(..., nn.KLDivLoss())` passing one
                continue
            if not (isinstance(value, cst.Call) and (self.is_loss_constructor(value) or self._builds_loss(value))):
                return False
            in_init = in_init or _set_in_init(cls, target)
        return in_init

    def _init_param_losses(self, cls: cst.ClassDef, name: cst.Name) -> bool:
        """``name`` reads only a parameter of ``cls.__init__`` to which every construction of the
        class passes a loss module: the calls of this file and, certainly, of the other files of
        the run (:meth:`calls_elsewhere`, the class's name as a function's); the class is
        undecorated, at module level, subclassed by no class of this file (memoised)."""
        key = (id(cls), id(name))
        if key not in self._param_losses:
            self._param_losses[key] = self._find_param_losses(cls, name)
        return self._param_losses[key]

    def _find_param_losses(self, cls: cst.ClassDef, name: cst.Name) -> bool:
        reach = self.values.reach(name)
        param = reach.bindings[0] if reach.why is None and len(reach.bindings) == 1 else None
        param = self.values.parent(param) if isinstance(param, cst.Name) else param
        init = self.values.enclosing(param, cst.FunctionDef) if isinstance(param, cst.Param) else None
        if init is None or init.name.value != "__init__" or param not in init.params.params[1:] or cls.decorators:
            return False
        if not isinstance(self.values.parent(cls), cst.Module) or any(
                isinstance(c, cst.ClassDef) and related_classes(c, cls) and c is not cls for c in traversal.walk_statements(self.module)):
            return False
        position = list(init.params.params).index(param) - 1
        reads = [r for r in self._reads_of(cls) if not self._in_super(r)]
        for read in reads:
            call = self.values.parent(read)
            if not (isinstance(call, cst.Call) and call.func is read) or nodes.has_star_args(call):
                return False
            passed = nodes.argument(call, position, param.name.value)
            if passed is None or not self.is_loss_argument(passed.value, frozenset(), True):
                return False
        elsewhere = self.calls_elsewhere(cls, position, param)
        return elsewhere is not None and len(reads) + elsewhere > 0

    def assigned_to_attribute(self) -> dict[str, list[tuple[cst.Attribute, cst.BaseExpression | None]]]:
        """Attribute name → every (target, value) assigning an attribute of that name in the file
        (value None for an augmented or annotated-only assignment, or a tuple target)."""
        if self._attribute_values is None:
            found: dict[str, list] = {}
            for node in traversal.walk_statements(self.module):
                if isinstance(node, cst.Assign):
                    for t in node.targets:
                        for target, whole in _attribute_targets(t.target):
                            found.setdefault(target.attr.value, []).append((target, node.value if whole else None))
                elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                    for target, _ in _attribute_targets(node.target):
                        found.setdefault(target.attr.value, []).append((target, None))
            self._attribute_values = found  # type: ignore[assignment]
        return self._attribute_values  # type: ignore[return-value]

    def callable_kind(self, value: cst.BaseExpression, name: str) -> str | None:
        """``"module"``: a loss module; the name of an ``F.*_loss`` function bound as it is; None:
        a move of the name itself; ``"other"``: anything else. ``A() if c else B()``: what both
        branches are, where they are the same."""
        value = strip_moves(value)
        if isinstance(value, cst.IfExp):
            body, orelse = self.callable_kind(value.body, name), self.callable_kind(value.orelse, name)
            return body if body == orelse else "other"
        if isinstance(value, cst.Name) and value.value == name:
            return None
        if isinstance(value, cst.Call):
            return "module" if self.is_loss_constructor(value) or self._builds_loss(value) else "other"
        if isinstance(value, (cst.Name, cst.Attribute)):
            for q in self.values.names(value):
                package, _, last = q.rpartition(".")
                if package == "torch.nn.functional" and last in LOSS_FUNCTIONS:
                    return last
        return "other"

    def _builds_loss(self, call: cst.Call) -> bool:
        """``call`` calls a function (of this file, or of another of the run) every ``return`` of
        which builds a loss module (``def get_criterion(n): ... return nn.CrossEntropyLoss(weight)``),
        or makes an instance of a class whose call returns a 0-dim tensor (a project's loss
        module: ``LabelSmoothing(...)``, whose ``forward`` returns a torch loss): the summary of
        :mod:`.returns`."""
        made = strip_moves(call)  # `LabelSmoothing(...).cuda()`
        summary = self.values.call_returns(made) if isinstance(made, cst.Call) else None
        return summary is not None and (summary.builds_loss or summary.scalar_call)

    def binding_values(self, name: cst.Name) -> list[object] | None:
        """What each binding of ``name`` that may reach this read assigns (:meth:`value_of`);
        None where that cannot be told."""
        reach = self.values.reach(name)
        if reach.why is not None or not reach.bindings:
            return None
        return [self.value_of(node) for node in reach.bindings]

    def value_of(self, node: cst.CSTNode) -> object | None:
        """The value binding ``node`` assigns (``x = v``, ``x: T = v``, ``x += v``, ``a, b = 0, []``),
        or :data:`SHAPE_PART` (``n, c = x.size()``), or :data:`UNKNOWN` (``x @= y``), or None (a
        parameter, a loop variable, another unpacking)."""
        bound = self.values.bound(node)
        if bound.kind == VALUE:
            return bound.value
        if bound.kind == PART:
            return SHAPE_PART if _is_shape(bound.value) else None
        if bound.kind == AUGMENTED:
            owner = binding_owner(node, self.values.parent)
            statement = owner[0] if owner is not None else None
            return bound.value if isinstance(statement, cst.AugAssign) and isinstance(statement.operator, AUGMENTED_ARITHMETIC) else UNKNOWN
        return None

    def callable_kinds(self, func: cst.Name, seen: frozenset[int] = frozenset()) -> list[str | None] | None:
        """:meth:`callable_kind` of each binding reaching ``func``, a move of the name itself
        (``criterion = criterion.cpu()``) followed to what the moved name holds, a target of the
        program's own checkpoint to what its saves stored there (:mod:`.checkpoints`); None where
        a binding is no plain assignment. A binding to ``None`` (``criterion = None`` until
        ``if not criterion:`` builds one) is left out: a call of the name there raises, so what
        the call gives comes from the others."""
        reach = self.values.reach(func)
        if reach.why is not None or not reach.bindings:
            return None
        kinds: list[str | None] = []
        for node in reach.bindings:
            saved = saved_values(self.values, node)
            for value in saved if saved is not None else [self.value_of(node)]:
                if not isinstance(value, cst.BaseExpression):
                    return None
                if nodes.is_none(value):
                    continue
                kind = self.callable_kind(value, func.value)
                moved = strip_moves(value)
                if kind is None and isinstance(moved, cst.Name) and id(moved) not in seen:
                    inner = self.callable_kinds(moved, seen | {id(moved)})
                    if inner is None:
                        return None
                    kinds.extend(inner)
                else:
                    kinds.append(kind)
        return kinds

    def is_loss_module_name(self, name: cst.Name) -> bool:
        """Every binding of ``name`` that may reach here is a loss module (moved or not)."""
        kinds = self.callable_kinds(name)
        return kinds is not None and "module" in kinds and all(k in ("module", None) for k in kinds)

    def passed_losses(self, param: cst.Param, seen: frozenset[int] = frozenset(), *, certain: bool = False) -> bool:
        """``param`` is a parameter of a function of this module whose name is read only to call
        it, and every call passes it a loss module (``test(loader, model, criterion)`` with
        ``criterion = nn.CrossEntropyLoss()``), or a parameter of a function of which the same
        holds (``train(crit)`` calls ``eval_epoch(crit)``). A caller in another file may pass
        anything, unless ``certain``: then the calls of the other files of the run are shown too
        (:meth:`calls_elsewhere`), for each function the loss is passed through."""
        function = self.values.enclosing(param, cst.FunctionDef)
        if not isinstance(function, cst.FunctionDef) or function.decorators or param not in function.params.params:
            return False
        if id(param) in seen or len(seen) > MAX_PASSES:
            return False
        seen = seen | {id(param)}
        if not isinstance(self.values.parent(function), cst.Module):
            return False
        position = list(function.params.params).index(param)
        calls = 0
        for read in self._reads_of(function):
            call = self.values.parent(read)
            if not (isinstance(call, cst.Call) and call.func is read) or nodes.has_star_args(call):
                return False
            passed = nodes.argument(call, position, param.name.value)
            if passed is None or not self.is_loss_argument(passed.value, seen, certain):
                return False
            calls += 1
        elsewhere = self.calls_elsewhere(function, position, param)
        if certain and elsewhere is None:
            return False
        return calls + (elsewhere or 0) > 0

    def _in_super(self, read: cst.Name) -> bool:
        """``read`` is the class named in ``super(C, self)``: no construction."""
        arg = self.values.parent(read)
        call = self.values.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and m.matches(call.func, m.Name("super")) and call.args[0] is arg

    def calls_elsewhere(self, function: cst.FunctionDef | cst.ClassDef, position: int, param: cst.Param) -> int | None:
        """How many calls the other files of the run make of ``function``, every one passing a loss
        module for ``param`` (the engine's ``view.foreign_callers``); 0 where no other file may
        call it (no file of the run imports this one); None where that is not shown."""
        if getattr(self.values.view, "imported_by_none", False):
            return 0
        foreign = getattr(self.values.view, "foreign_callers", None)
        return foreign(function.name.value, position, param.name.value) if foreign is not None else None

    def is_loss_argument(self, value: cst.BaseExpression, seen: frozenset[int] = frozenset(), certain: bool = True) -> bool:
        """What a call passes is a loss module: a name bound to one (or a parameter every call
        passes one: :meth:`passed_losses`, ``certain`` as there), a constructor of one, a call
        building one, or a choice between two."""
        if isinstance(value, cst.Name):
            return self.is_loss_module_name(value) or self._passed_on(value, seen, certain)
        if isinstance(value, cst.Call):
            return self.is_loss_constructor(value) or self._builds_loss(value)
        return isinstance(value, cst.IfExp) and self.callable_kind(value, "") == "module"

    def _passed_on(self, name: cst.Name, seen: frozenset[int], certain: bool = False) -> bool:
        """``name`` reads only a parameter of which :meth:`passed_losses` holds."""
        reach = self.values.reach(name)
        if reach.why is not None or len(reach.bindings) != 1:
            return False
        param = reach.bindings[0]
        if isinstance(param, cst.Name):
            param = self.values.parent(param)
        return isinstance(param, cst.Param) and self.passed_losses(param, seen, certain=certain)

    def _reads_of(self, function: cst.FunctionDef | cst.ClassDef) -> list[cst.Name] | list:
        """Every read of ``function``'s name that only its ``def`` binds; [] where another
        binding of the name exists."""
        reads = []
        for node in self.values.name_reads(self.module).get(function.name.value, ()):
            if node is function.name or isinstance(self.values.parent(node), (cst.Param, cst.FunctionDef, cst.ClassDef)):
                continue
            reach = self.values.reach(node)
            if reach.why is not None or list(reach.bindings) != [function]:
                return []
            reads.append(node)
        return reads

    # -- where a method is -------------------------------------------------------------------
    def method_around(self, node: cst.CSTNode) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The class and method ``node`` (``self.x``) is in, where ``self`` is the method's
        first parameter."""
        function = self._enclosing_function(node)
        if function is None or not isinstance(node, cst.Attribute) or not isinstance(node.value, cst.Name):
            return None
        block = self.values.parent(function)
        cls = self.values.parent(block) if block is not None else None
        params = function.params.params
        if not isinstance(cls, cst.ClassDef) or not params or params[0].name.value != node.value.value:
            return None
        return cls, function

    def _enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        parent = self.values.parent(node)
        while parent is not None and not isinstance(parent, cst.FunctionDef):
            if isinstance(parent, (cst.ClassDef, cst.Lambda)):
                return None
            parent = self.values.parent(parent)
        return parent


def strip_moves(value: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` for ``x.cuda()``, ``x.to(device)``, ``x.cpu().train()``: a module's moves return it."""
    while m.matches(value, m.Call(func=m.Attribute(attr=m.Name()))) and value.func.attr.value in MODULE_MOVES:  # type: ignore[attr-defined]
        value = value.func.value  # type: ignore[attr-defined]
    return value


def _keeps_elements(call: cst.Call) -> bool:
    """``reduction="none"`` / ``reduce=False``: the loss keeps one value per element."""
    reduction = nodes.keyword_arg(call, "reduction")
    if reduction is not None:
        if not isinstance(reduction.value, cst.SimpleString):
            return True  # not a literal: it may be "none"
        if reduction.value.evaluated_value == "none":
            return True
    reduce = nodes.keyword_arg(call, "reduce")
    return reduce is not None and not m.matches(reduce.value, m.Name("True"))


def _reduction_position_ok(positional: list[cst.Arg], position: int | None) -> bool:
    """The argument at ``position`` (where ``reduction`` goes), if given, is a string literal
    other than ``"none"``."""
    if position is None or len(positional) <= position:
        return True
    value = positional[position].value
    return isinstance(value, cst.SimpleString) and value.evaluated_value != "none"


def related_classes(a: cst.ClassDef, b: cst.ClassDef) -> bool:
    """One class names the other among its bases (their instances may share attributes)."""
    def bases(cls: cst.ClassDef) -> set[str]:
        return {n.value for arg in cls.bases for n in (arg.value, getattr(arg.value, "attr", None)) if isinstance(n, cst.Name)}
    return a.name.value in bases(b) or b.name.value in bases(a)


def _set_in_init(cls: cst.ClassDef, target: cst.Attribute) -> bool:
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__" and stmt.params.params:
            self_name = stmt.params.params[0].name.value
            if isinstance(target.value, cst.Name) and target.value.value == self_name:
                for node in traversal.walk_statements(stmt):
                    if isinstance(node, cst.Assign) and any(t.target is target for t in node.targets):
                        return True
    return False


def _attribute_targets(target: cst.BaseExpression) -> Iterator[tuple[cst.Attribute, bool]]:
    """The attributes assigned by ``target``, each with whether it gets the whole value."""
    if isinstance(target, cst.Attribute):
        yield target, True
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            for found, _ in _attribute_targets(element.value):
                yield found, False


def _is_shape(value: cst.BaseExpression) -> bool:
    """``x.size()`` or ``x.shape``."""
    return m.matches(value, m.Call(func=m.Attribute(attr=m.Name("size")), args=[])) or m.matches(value, m.Attribute(attr=m.Name("shape")))


def calls_making(values: "ModuleValues", held: "list[cst.BaseExpression | None]", seen: frozenset[int] = frozenset()) -> list[cst.Call] | None:
    """The calls that made what ``held`` (the values a name or attribute may hold) may be:
    through moves (``DQN(args).cuda()``) and names moved (``model = model.to(device)``: what
    ``model`` held before); None where one is no call."""
    made: list[cst.Call] = []
    for value in held:
        instance = strip_moves(value) if value is not None else None
        if isinstance(instance, cst.Name) and id(instance) not in seen and instance is not value:
            inner = calls_making(values, list(values.values_of(instance)), seen | {id(instance)})
            if inner is None:
                return None
            made += inner
        elif isinstance(instance, cst.Call):
            made.append(instance)
        else:
            return None
    return made

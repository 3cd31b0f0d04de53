"""Which calls are torch losses with a scalar reduction, and where a loss module is bound.

Part of TFD006's evidence (:mod:`._scalar_evidence` builds on it): ``F.cross_entropy(...)`` and
the other ``F.*_loss`` functions, ``nn.*Loss(...)`` constructors, neither with
``reduction="none"``, ``reduce=False`` nor anything by position that may be one of them; the
call of a name bound to such a module (moved or not: a module's ``.cuda()``/``.to()`` return it)
or to such a function; ``self.x(...)`` where this class's ``__init__`` sets ``self.x`` to such a
module and nothing in the file assigns an attribute ``x`` anything else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst
import libcst.matchers as m
from libcst.metadata import Assignment
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

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
MODULE_MOVES = frozenset({"cuda", "to", "cpu", "float", "double", "half", "train", "eval"})
"""``nn.Module`` methods that return the module itself."""


class LossEvidence:
    """Loss questions about the module ``codemod`` is visiting."""

    def __init__(self, codemod: "CodemodView", module: cst.Module) -> None:
        self.codemod = codemod
        self.module = module
        self._attribute_values: dict[str, list[tuple[cst.Attribute, cst.BaseExpression | None]]] | None = None
        self._values: dict[int, object] | None = None

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
        for q in self.codemod.qualified_names(call.func):
            last = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.") and last.endswith("Loss") and last not in NOT_SCALAR_LOSSES:
                return _reduction_position_ok(positional, REDUCTION_POSITION.get(last))
        return False

    def is_own_loss_attribute(self, func: cst.Attribute) -> bool:
        """``self.x`` in a method of the class whose ``__init__`` sets ``self.x = nn.XLoss()``,
        and nothing in the file assigns any other value to an attribute named ``x`` (a move of
        ``self.x`` itself is no other value)."""
        found = self.method_around(func)
        if found is None:
            return False
        cls, _ = found
        attr = func.attr.value
        values = self.assigned_to_attribute().get(attr, [])
        in_init = False
        for target, value in values:
            if value is None:
                return False
            stripped = strip_moves(value)
            if isinstance(stripped, cst.Attribute) and stripped.attr.value == attr:
                continue  # self.x = self.x.cuda()
            if not (isinstance(value, cst.Call) and self.is_loss_constructor(value)):
                return False
            in_init = in_init or _set_in_init(cls, target)
        return in_init

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
        a move of the name itself; ``"other"``: anything else."""
        value = strip_moves(value)
        if isinstance(value, cst.Name) and value.value == name:
            return None
        if isinstance(value, cst.Call):
            return "module" if self.is_loss_constructor(value) else "other"
        if isinstance(value, (cst.Name, cst.Attribute)):
            for q in self.codemod.qualified_names(value):
                package, _, last = q.rpartition(".")
                if package == "torch.nn.functional" and last in LOSS_FUNCTIONS:
                    return last
        return "other"

    def visible(self, name: cst.Name) -> list[Assignment]:
        """The bindings of ``name`` visible where it is read; [] when one is not a plain
        ``Assignment`` (an import, a builtin) or none is known."""
        scope = self.codemod.scope_of(name)
        if scope is None:
            return []
        found = list(scope[name.value])
        if not all(isinstance(a, Assignment) for a in found):
            return []
        return found

    def value_of(self, assignment: Assignment) -> object | None:
        """The value assigned by ``assignment`` (``x = v``, ``x: T = v``, ``x += v``), or
        :data:`UNKNOWN`, or None (a parameter, a loop variable, an unpacking)."""
        if self._values is None:
            values: dict[int, object] = {}
            for node in traversal.walk_statements(self.module):
                if isinstance(node, cst.Assign):
                    for t in node.targets:
                        if isinstance(t.target, cst.Name):
                            values[id(t.target)] = node.value
                        elif _same_length_tuples(t.target, node.value):  # total, shown = 0, []
                            for name, value in zip(t.target.elements, node.value.elements):  # type: ignore[attr-defined]
                                if isinstance(name.value, cst.Name):
                                    values[id(name.value)] = value.value
                        elif isinstance(t.target, (cst.Tuple, cst.List)) and _is_shape(node.value):  # n, c = x.size()
                            for element in t.target.elements:
                                if isinstance(element.value, cst.Name) and not isinstance(element, cst.StarredElement):
                                    values[id(element.value)] = SHAPE_PART
                elif isinstance(node, cst.AnnAssign) and node.value is not None and isinstance(node.target, cst.Name):
                    values[id(node.target)] = node.value
                elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
                    values[id(node.target)] = node.value if isinstance(node.operator, AUGMENTED_ARITHMETIC) else UNKNOWN
            self._values = values
        return self._values.get(id(assignment.node))

    def is_loss_module_name(self, name: cst.Name) -> bool:
        """Every binding of ``name`` visible here is a loss module (or a move of ``name``)."""
        values = [self.value_of(a) for a in self.visible(name)]
        if not values or any(not isinstance(v, cst.BaseExpression) for v in values):
            return False
        kinds = [self.callable_kind(v, name.value) for v in values]  # type: ignore[arg-type]
        return "module" in kinds and all(k in ("module", None) for k in kinds)

    def passed_losses(self, param: cst.Param) -> bool:
        """``param`` is a parameter of a function of this module whose name is read only to call
        it, and every call passes it a loss module (``test(loader, model, criterion)`` with
        ``criterion = nn.CrossEntropyLoss()``). A caller in another file may pass anything."""
        function = self.codemod.parent_of(self.codemod.parent_of(param))  # Param -> Parameters -> FunctionDef
        if not isinstance(function, cst.FunctionDef) or function.decorators or param not in function.params.params:
            return False
        if not isinstance(self.codemod.parent_of(function), cst.Module):
            return False
        position = list(function.params.params).index(param)
        scope = self.codemod.scope_of(function)
        bindings = list(scope.assignments[function.name.value]) if scope is not None else []
        if len(bindings) != 1 or bindings[0].node is not function:
            return False
        calls = 0
        for access in bindings[0].references:
            call = self.codemod.parent_of(access.node)
            if not (isinstance(call, cst.Call) and call.func is access.node) or nodes.has_star_args(call):
                return False
            passed = nodes.keyword_arg(call, param.name.value)
            if passed is None:
                positional = nodes.positional_args(call)
                passed = positional[position] if position < len(positional) else None
            value = passed.value if passed is not None else None
            if isinstance(value, cst.Name) and self.is_loss_module_name(value):
                calls += 1
            elif not (isinstance(value, cst.Call) and self.is_loss_constructor(value)):
                return False
            else:
                calls += 1
        return calls > 0

    # -- where a method is -------------------------------------------------------------------
    def method_around(self, node: cst.CSTNode) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The class and method ``node`` (``self.x``) is in, where ``self`` is the method's
        first parameter."""
        function = self._enclosing(node, cst.FunctionDef)
        if function is None or not isinstance(node, cst.Attribute) or not isinstance(node.value, cst.Name):
            return None
        block = self.codemod.parent_of(function)
        cls = self.codemod.parent_of(block) if block is not None else None
        params = function.params.params
        if not isinstance(cls, cst.ClassDef) or not params or params[0].name.value != node.value.value:
            return None
        return cls, function

    def _enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        parent = self.codemod.parent_of(node)
        while parent is not None and not isinstance(parent, kind):
            if isinstance(parent, (cst.ClassDef, cst.Lambda)) and kind is cst.FunctionDef:
                return None
            parent = self.codemod.parent_of(parent)
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


def _same_length_tuples(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """``a, b = x, y``: each name gets its own value (no starred element on either side)."""
    return (
        isinstance(target, (cst.Tuple, cst.List))
        and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
        and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements))
    )


def _is_shape(value: cst.BaseExpression) -> bool:
    """``x.size()`` or ``x.shape``."""
    return m.matches(value, m.Call(func=m.Attribute(attr=m.Name("size")), args=[])) or m.matches(value, m.Attribute(attr=m.Name("shape")))

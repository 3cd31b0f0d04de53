"""How large a value is: a Python number, a 0-dim tensor, one element? One of the facts about
values (:mod:`torchfix_device.facts`), asked where ``loss.data[0]`` becomes ``loss.item()``
(TFD006) and where a 0.3-era number must become one again.

The answer comes from what the code shows a value to be, never from its name:

- a torch loss with a scalar reduction: ``F.cross_entropy(...)``, ``F.*_loss(...)``, the call of
  an ``nn.*Loss`` instance resolved through its binding (``criterion = nn.MSELoss()`` in scope,
  moved or not, or ``self.criterion`` set in this class's ``__init__`` and nowhere else to
  anything else), ``nn.L1Loss()(a, b)``;
- a full reduction: ``x.sum()``, ``x.mean()``, ... with no argument, ``torch.sum(x)``,
  ``torch.max(x)`` with one argument, ``torch.dot(a, b)``;
- arithmetic on such values and Python numbers (broadcasting never shrinks a tensor), methods
  that keep the shape (``.exp()``, ``.float()``, ``.cpu()``, ``.detach()``...);
- a name every binding of which that may reach the read is one of these (a value built from the name itself
  adds nothing, nor does ``None`` where the read raises on it: ``total / n``), a function or method of this
  file, or a function of another file of the run, every ``return`` of which is one (:mod:`.returns`); the
  call of an instance of a project class whose ``forward`` (``__call__``) returns one (a project's loss module,
  bound to a name, set on ``self`` in ``__init__``, or loaded from the program's own checkpoint: :mod:`.losses`);
- an attribute of ``self`` or an item of one (``self.acc_loss``, ``self._losses["total"]``, ``v``
  of ``for k, v in self._losses.items()``) every value of which the class gives it is one (no
  ``update``/``append`` fills it; one ``self.x.backward()`` shows one element);
- a binding of a name that reaches a ``.backward()`` with no argument on it, or on an arithmetic expression
  it is an operand of (which only a one-element tensor allows: ``loss`` bound in both branches of an
  ``if``/``else``, then ``loss.backward()``; ``(value_loss + action_loss - entropy * coef).backward()``), or
  that reaches a read building by arithmetic a name whose binding reaches one (``loss = raw_loss + reg``;
  ``loss.backward()`` shows ``raw_loss`` has one element: broadcasting never shrinks a tensor).

:class:`Size` tells how strong the answer is: ``ZERO_DIM`` (0-dim on PyTorch >= 0.4, where
``x.data[0]`` and ``x.data.numpy()[0]`` raise) or ``ONE`` (one element, maybe a 1-element
vector on which they still work).

**A Python number in PyTorch 0.3.** :func:`number_in_03` tells whether an expression gave a
Python number in PyTorch 0.3 that is a 0-dim tensor since 0.4 (TFD019), and how sure that is
(:class:`Number03`):

- a full reduction of a tensor (``pred.eq(y).sum()``, ``(pred == y).sum()``, ``x.max()``,
  ``torch.sum(x)``): 0-dim, shown (the receiver shown to be a tensor by its value or by a
  method only tensors have, :mod:`.kinds`);
- an element of a tensor by an integer index (``t[0]``, ``t.data[i]``) where the tensor is shown
  to have one dimension (:func:`.dims.dims`: ``torch.max(x, 1)[1][0]`` of a 2-dim ``x``):
  0-dim, shown;
- the same where the dimensions are not shown but the tensor holds what a selection returns
  (``torch.max(x, 1)[1]``, ``q.max(1)[1].data``, ``torch.multinomial(p, 1)``, ``x.argmax(1)``,
  an unpacked ``_, i = x.max(1)``), which legacy code took from 1-dim tensors: a number if the
  tensor is 1-dim, a row otherwise (not shown).

An element of a value already shown to be a scalar (``loss.data[0]``: :class:`Size`) is not
one: indexing it raises (TFD006 turns it into ``loss.item()``).
"""

from __future__ import annotations

import enum
from functools import reduce
from dataclasses import dataclass
from typing import Iterator

import libcst as cst
import libcst.matchers as m
from torchfix_device.facts import dims as facts_dims
from torchfix_device.facts.counts import is_count
from torchfix_device.facts.grad import GradEvidence
from torchfix_device.facts import kinds
from torchfix_device.facts.losses import LOSS_FUNCTIONS, SHAPE_PART, LossEvidence
from torchfix_device.facts.values import AUGMENTED, ITEM, PARAM, PART, VALUE, ModuleValues
from torchfix_device.syntax import nodes
from torchfix_device.syntax.nodes import element_form, numpy_subject, zero_index
from torchfix_device.syntax import traversal


class Size(enum.IntEnum):
    """How much is known of a value's size (the larger, the weaker for a rewrite)."""

    NUMBER = 0
    """A Python number (a literal, ``len(...)``): neutral in arithmetic with a tensor."""
    ZERO_DIM = 1
    """A 0-dim tensor on PyTorch >= 0.4."""
    ONE = 2
    """A tensor with exactly one element (0-dim, or a vector of one element)."""
    LIKELY = 3
    """A loss where the value comes through a parameter every call in this file passes a loss
    module to: a caller in another file may pass anything (evidence for an unsafe fix only)."""


def combine(a: Size | None, b: Size | None) -> Size | None:
    """The size of ``a op b`` for an elementwise arithmetic ``op`` (None: unknown)."""
    return None if a is None or b is None else max(a, b)


METHOD_REDUCTIONS = TORCH_REDUCTIONS = frozenset({"sum", "mean", "prod", "norm", "std", "var", "max", "min", "all", "any", "median", "nansum", "nanmean"})
"""``x.sum()`` & co. with no argument, ``torch.sum(x)`` & co. with one positional argument and no keyword: a 0-dim tensor."""
ELEMENTWISE = frozenset({
    "exp", "log", "log1p", "log2", "log10", "expm1", "abs", "sqrt", "rsqrt", "neg", "sigmoid", "tanh",
    "sin", "cos", "square", "reciprocal", "floor", "ceil", "round", "trunc", "sign", "relu",
})
"""Functions and methods of one tensor that keep its shape."""
SAME_SHAPE_METHODS = ELEMENTWISE | {"float", "double", "half", "cpu", "cuda", "to", "type", "type_as", "detach", "clone", "contiguous"}
"""Methods returning a tensor of the receiver's shape whatever their arguments (``type`` only
with one: ``x.type()`` is a string)."""
BINARY = frozenset({"add", "sub", "mul", "div", "pow"})
"""``x.add(y)``, ``torch.add(x, y)``: the broadcast of both."""
NUMBER_BUILTINS = frozenset({"builtins.len", "builtins.float", "builtins.int"})
ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)


class SizeEvidence(LossEvidence):
    """Answers :meth:`size` for the expressions of one module version."""

    def __init__(self, values: ModuleValues) -> None:
        super().__init__(values)
        self._busy: set[tuple[int, ...]] = set()
        self._neutral = 0  # how often a value built from itself was taken as neutral
        self._memo: dict[tuple[int, ...], Size | None] = {}
        self._in_functions: set[int] = set()
        self._one_element: dict[int, bool] = {}
        self._grad: GradEvidence | None = None

    # -- expressions ------------------------------------------------------------------------
    def size(self, node: cst.BaseExpression) -> Size | None:
        """What ``node`` is shown to be (None: not shown to be a scalar or a number)."""
        if isinstance(node, (cst.Integer, cst.Float)):
            return Size.NUMBER
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
            return self.size(node.expression)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, ARITHMETIC):
            return combine(self.size(node.left), self.size(node.right))
        if isinstance(node, cst.IfExp):
            return combine(self.size(node.body), self.size(node.orelse))
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            return _tensor(self.size(node.value))
        if m.matches(node, m.Subscript(value=m.Attribute(attr=m.Name("shape")), slice=[m.SubscriptElement(m.Index(m.Integer()))])):
            return Size.NUMBER  # `x.shape[1]`
        if isinstance(node, cst.Subscript) and zero_index(node):
            # `x.data[0]` / `x.data.numpy()[0]` of a scalar: the number (a later pass sees `x.item()`)
            data = node.value if m.matches(node.value, m.Attribute(attr=m.Name("data"))) else None
            subject = data.value if data is not None else numpy_subject(node)  # type: ignore[attr-defined]
            neutral, found = self._neutral, self.size(subject) if subject is not None else None
            return Size.NUMBER if _tensor(found) or found is Size.NUMBER and self._neutral > neutral else None  # (or built from itself)
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            return self._held_size(node)  # `self.acc_loss`, `self.losses["total"]`
        if isinstance(node, cst.Name):
            found = self.name_size(node)
        elif isinstance(node, cst.Call):
            found = self.call_size(node)
        else:
            return None
        if found is None and facts_dims.dims(self.values, node) == 0:
            return Size.ZERO_DIM  # `for v in vector`, `x.squeeze()` of a tensor of sizes 1
        return found

    def call_size(self, call: cst.Call) -> Size | None:
        if nodes.has_star_args(call):
            return None
        func = call.func
        positional = nodes.positional_args(call)
        for qualified in self.values.names(func):
            found = self._library_call(qualified, call, positional)
            if found is not None:
                return found
        if isinstance(func, cst.Attribute):
            return self._method_call(func, call, positional)
        if isinstance(func, cst.Call):  # nn.MSELoss()(a, b)
            return Size.ZERO_DIM if self.is_loss_constructor(func) or self._builds_loss(func) else None
        if isinstance(func, cst.Name):
            return self._named_call(func, call, positional)
        return None

    def _library_call(self, qualified: str, call: cst.Call, positional: list[cst.Arg]) -> Size | None:
        if qualified in NUMBER_BUILTINS:
            return Size.NUMBER
        package, _, last = qualified.rpartition(".")
        only_positional = len(positional) == len(call.args)
        if qualified in ("builtins.min", "builtins.max") and only_positional and len(positional) >= 2:
            return reduce(combine, (self.size(a.value) for a in positional), Size.NUMBER)  # `min(max(k, 0), 1)`
        if package == "torch.nn.functional":
            if last in LOSS_FUNCTIONS:
                return Size.ZERO_DIM if self.loss_call_reduces(last, call) else None
            if last in ELEMENTWISE and only_positional and len(positional) == 1:
                return _tensor(self.size(positional[0].value))
            return None
        if package != "torch" or not only_positional:
            return None
        if (last in TORCH_REDUCTIONS and len(positional) == 1) or (last == "norm" and len(positional) == 2):
            return Size.ZERO_DIM
        if last in ("dot", "vdot") and len(positional) == 2:
            return Size.ZERO_DIM
        if last in ELEMENTWISE and len(positional) == 1:
            return _tensor(self.size(positional[0].value))
        if last in BINARY and len(positional) == 2:
            return _tensor(combine(self.size(positional[0].value), self.size(positional[1].value)))
        return None

    def _method_call(self, func: cst.Attribute, call: cst.Call, positional: list[cst.Arg]) -> Size | None:
        name, receiver = func.attr.value, func.value
        only_positional = len(positional) == len(call.args)
        if name in METHOD_REDUCTIONS and not call.args:
            return Size.ZERO_DIM
        if name == "dot" and only_positional and len(positional) == 1:
            return Size.ZERO_DIM
        if (name in ("item", "numel", "nelement", "dim") and not call.args) or (name == "size" and len(positional) == 1 == len(call.args)):
            return Size.NUMBER  # a Python number (`x.size(0)`, not `x.size()`)
        if name == "squeeze" and not call.args:
            return Size.ZERO_DIM if _tensor(self.size(receiver)) is not None else None
        if name in SAME_SHAPE_METHODS and (name != "type" or call.args):
            return _tensor(self.size(receiver))
        if name in BINARY and only_positional and len(positional) == 1:
            return _tensor(combine(_tensor(self.size(receiver)), self.size(positional[0].value)))
        if self.is_own_loss_attribute(func):
            return Size.ZERO_DIM
        method = self._own_method(func)
        return self.returns_size(method) if method is not None else None

    def _named_call(self, func: cst.Name, call: cst.Call, positional: list[cst.Arg]) -> Size | None:
        reach = self.values.reach(func)
        if reach.why is not None or not reach.bindings:
            return None
        if len(reach.bindings) == 1 and isinstance(reach.bindings[0], cst.FunctionDef):
            return self.returns_size(reach.bindings[0])
        if len(reach.bindings) == 1 and self.values.bound(reach.bindings[0]).kind == PARAM:
            if self.passed_losses(reach.bindings[0], certain=True):
                return Size.ZERO_DIM
            return Size.LIKELY if self.passed_losses(reach.bindings[0]) else None
        summary = self.values.call_returns(call)  # a function of another file of the run
        if summary is not None and summary.scalar:
            return Size.ZERO_DIM
        kinds = self.callable_kinds(func)
        if kinds is None or "other" in kinds or not any(kinds):
            return None
        functions = {k for k in kinds if k not in (None, "module")}
        if not functions:
            return Size.ZERO_DIM  # every binding is a loss module (or a move of one)
        if "module" in kinds or len(functions) > 1:
            return None
        return Size.ZERO_DIM if self.loss_call_reduces(functions.pop(), call) else None

    def grad(self) -> GradEvidence:
        """The module's grad facts (their walk of its attributes), made once for every consumer."""
        if self._grad is None:
            self._grad = GradEvidence(self.values)
        return self._grad

    def _held_size(self, node: cst.Attribute | cst.Subscript) -> Size | None:
        """What every value ``self.attr`` (or an item of it) may hold is shown to be (:meth:`.SelfAttributeEvidence.held`)."""
        held = self.grad().held(node)
        key = tuple(id(v) for v in held or ())
        if held is None or key in self._busy:
            return None if held is None else Size.NUMBER  # a value built from itself: the others decide
        self._busy.add(key)
        found = reduce(combine, (self.size(v) for v in held), Size.NUMBER)
        self._busy.discard(key)
        return Size.ONE if found is None and self.grad().backward_called(node) else found

    # -- names --------------------------------------------------------------------------------
    def name_size(self, name: cst.Name) -> Size | None:
        reach = self.values.reach(name)
        if reach.why is not None or not reach.bindings:
            return None
        bindings = reach.bindings  # `total / n` raises where `total` holds None: the others decide
        if nodes.raises_if_none(name, self.values.parent(name)):
            bindings = tuple(n for n in bindings if not self.values.binds_none(n)) or bindings
        key = tuple(id(n) for n in bindings)
        if key in self._busy:
            self._neutral += 1
            return Size.NUMBER  # a value built from itself: the other bindings decide
        if key in self._memo:
            return self._memo[key]
        self._busy.add(key)
        neutral_before = self._neutral
        try:
            found = self._fold(bindings)
        finally:
            self._busy.discard(key)
        if (found is None or found is Size.LIKELY) and all(self.shown_one_element(n) for n in bindings):
            found = Size.ONE
        if self._neutral == neutral_before or not self._busy:
            self._memo[key] = found
        return found

    def _fold(self, bindings: tuple[cst.CSTNode, ...]) -> Size | None:
        found: Size | None = Size.NUMBER
        for node in bindings:
            value = self.value_of(node)
            if value is SHAPE_PART:
                continue  # `_, c, h, w = x.size()`: a number
            held = self._loop_held(node) if value is None else None
            if held is not None:  # `for key, var in self.losses.items()`: every value an item holds
                found = reduce(combine, (self.size(v) for v in held), found)
                if found is None:
                    return None
                continue
            parts = self.values.returned_parts(node) if value is None else None  # `loss, n = f(...)`
            if parts is None and not isinstance(value, cst.BaseExpression):
                return None
            for part in parts if parts is not None else [value]:
                found = combine(found, self.size(part))
                if found is None:
                    return None
            if isinstance(node, cst.Name) and self.values.bound(node).kind == AUGMENTED:
                found = combine(found, self.name_size(node))  # `x /= n`: what `x` held before, too
                if found is None:
                    return None
        return found

    def _loop_held(self, node: cst.CSTNode) -> list[cst.BaseExpression] | None:
        loop = self.values.enclosing(node, cst.For) if self.values.bound(node).kind == ITEM else None
        return self.grad().held_by_loop(node, loop) if isinstance(node, cst.Name) and isinstance(loop, cst.For) else None

    # -- .backward() ------------------------------------------------------------------------
    def shown_one_element(self, binding: cst.CSTNode) -> bool:
        """The value bound at ``binding`` (a name) reaches ``name.backward()`` with no gradient,
        or reaches a read that builds by arithmetic ``target = ... name ...`` whose binding
        does (see the module docstring)."""
        known = self._one_element.get(id(binding))
        if known is None:
            self._one_element[id(binding)] = False  # while it is being found
            known = self._one_element[id(binding)] = self._reaches_backward(binding, depth=0)
        return known

    def _reaches_backward(self, binding: cst.CSTNode, depth: int) -> bool:
        if not isinstance(binding, (cst.Name, cst.Param)) or depth > 3:
            return False
        for read in self._reads_reached_by(binding):
            whole, attribute = self._operand_of(read)
            if isinstance(attribute, cst.Attribute) and attribute.value is whole and attribute.attr.value == "backward":
                call = self.values.parent(attribute)
                if isinstance(call, cst.Call) and call.func is attribute and not call.args:
                    return True
            built = self._built_into(read)
            if built is not None and self._reaches_backward(built, depth + 1):
                return True
        return False

    def _reads_reached_by(self, binding: cst.Name | cst.Param) -> Iterator[cst.Name]:
        """The reads of ``binding``'s name, in its scope, that ``binding`` may reach."""
        return iter(self.values.reads_of(binding))

    # -- a Python number in PyTorch 0.3 ------------------------------------------------------
    def number_in_03(self, node: cst.BaseExpression) -> "Number03 | None":
        """See :func:`number_in_03`."""
        if isinstance(node, cst.Call):
            return self._full_reduction(node)
        if isinstance(node, cst.Subscript) and element_form(node):
            return self._element(node)
        return None

    def _full_reduction(self, call: cst.Call) -> "Number03 | None":
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in METHOD_REDUCTIONS | TORCH_REDUCTIONS or nodes.has_star_args(call):
            return None
        torch_names = {q.rpartition(".")[2] for q in self.values.torch_names(func)}
        if torch_names:
            positional = nodes.positional_args(call)
            if torch_names <= TORCH_REDUCTIONS and len(positional) == 1 == len(call.args):
                return Number03(True, "a full reduction")
            return None
        if func.attr.value not in METHOD_REDUCTIONS or call.args or self.values.module_path(func):
            return None
        receiver = func.value
        if kinds.is_tensor(self.values, receiver) or (
            kinds.tensor_by_method(self.values, receiver) and cst.ensure_type(receiver, cst.Call).func.attr.value in kinds.TENSOR_METHODS  # type: ignore[attr-defined]
        ):
            return Number03(True, "a full reduction")
        return None

    def _element(self, node: cst.Subscript) -> "Number03 | None":
        base = node.value
        data = isinstance(base, cst.Attribute) and base.attr.value == "data"
        subject = cst.ensure_type(base, cst.Attribute).value if data else base
        found = facts_dims.dims(self.values, base)
        if found == 1:
            number = Number03(True, "an element of a 1-dim tensor", data)
        elif found is None and self._selection(subject):
            number = Number03(False, "an element of what a selection returns, whose dimensions are not shown", data)
        else:
            return None
        if not is_count(self.values, cst.ensure_type(node.slice[0].slice, cst.Index).value):
            return None
        if _tensor(self.size(subject)) is not None:
            return None  # a scalar's `[0]` raises: TFD006's `.item()`
        return number

    def _selection(self, expr: cst.BaseExpression) -> bool:
        """``expr`` holds indices or values a selection returns (see :func:`number_in_03`)."""
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        if isinstance(expr, cst.Name):
            if expr.value not in self.values.assigned_names():
                return False
            reach = self.values.reach(expr)
            if reach.why is not None or not reach.bindings:
                return False
            for binding in reach.bindings:
                bound = self.values.bound(binding)
                if not (bound.kind in (VALUE, PART) and isinstance(bound.value, cst.BaseExpression) and bound.value is not expr):
                    return False
                if not (self._selection(bound.value) if bound.kind == VALUE else self._pair_call(bound.value)):
                    return False
            return True
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            index = expr.slice[0].slice.value
            return isinstance(index, cst.Integer) and index.value in ("0", "1") and self._pair_call(expr.value)
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "indices"):
            return self._pair_call(expr.value)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            name = expr.func.attr.value
            if name in ("argmax", "argmin") and expr.args or name == "multinomial":
                return self._torch_method(expr.func)
        return False

    def _pair_call(self, expr: cst.BaseExpression) -> bool:
        if kinds.is_pair(self.values, expr):
            return True
        return (
            isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and bool(expr.args)
            and expr.func.attr.value in kinds.PAIR_FUNCTIONS and self._torch_method(expr.func)
        )

    def _torch_method(self, func: cst.Attribute) -> bool:
        """``torch.<f>`` or a method ``.<f>`` in a file where only torch objects have it."""
        if self.values.torch_names(func):
            return True
        return not self.values.module_path(func) and kinds.method_doubt(self.values, func.attr.value) is None

    def _operand_of(self, read: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode | None]:
        """The whole elementwise arithmetic ``read`` is an operand of (``read`` itself when it is
        none), and that expression's parent: ``(a + b - c * k).backward()`` shows each of ``a``,
        ``b``, ``c`` has one element, as the result has (broadcasting never shrinks a tensor)."""
        node, parent = read, self.values.parent(read)
        while isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, ARITHMETIC) or \
                isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus):
            node, parent = parent, self.values.parent(parent)
        return node, parent

    def _built_into(self, read: cst.CSTNode) -> cst.Name | None:
        """The target of ``target = ... read ...`` where ``read`` is an operand of the value's
        arithmetic (or the whole value)."""
        node, parent = read, self.values.parent(read)
        while isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, ARITHMETIC):
            node, parent = parent, self.values.parent(parent)
        if isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
            target = parent.targets[0].target
            return target if isinstance(target, cst.Name) else None
        return None

    # -- functions and methods of this file --------------------------------------------------
    def returns_size(self, function: cst.FunctionDef) -> Size | None:
        """The size every ``return`` of ``function`` is shown to have (None: one is not)."""
        if function.decorators or id(function) in self._in_functions:
            return None
        self._in_functions.add(id(function))
        try:
            found: Size | None = None
            for ret in traversal.function_returns(function):
                if ret.value is None:
                    return None
                size = self.size(ret.value)
                if size is None:
                    return None
                found = size if found is None else max(found, size)
            return found
        finally:
            self._in_functions.discard(id(function))

    def _own_method(self, func: cst.Attribute) -> cst.FunctionDef | None:
        """``self.m`` where ``m`` is defined once in the class around, assigned nowhere."""
        found = self.method_around(func)
        if found is None or func.attr.value in self.assigned_to_attribute():
            return None
        cls, _ = found
        defs = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value]
        return defs[0] if len(defs) == 1 else None


@dataclass(frozen=True)
class Number03:
    """What :func:`number_in_03` found: ``zero_dim`` (shown to be a 0-dim tensor now, else only
    likely), ``what`` it is (for a message), and whether it indexes ``.data`` (``x.data[0]``)."""

    zero_dim: bool
    what: str
    data: bool = False



def number_in_03(values: ModuleValues, node: cst.BaseExpression) -> Number03 | None:
    """Whether ``node`` gave a Python number in PyTorch 0.3 that is a 0-dim tensor since 0.4 (see
    the module docstring); None where it did not, or where that is not shown."""
    return evidence(values).number_in_03(node)


def evidence(values: ModuleValues) -> SizeEvidence:
    """The module version's one :class:`SizeEvidence`, shared by every fact and codemod that asks."""
    return values.facet("size evidence", lambda: SizeEvidence(values))


# -- helpers ----------------------------------------------------------------------------------
def _tensor(size: Size | None) -> Size | None:
    """``size`` where it is a tensor's (a Python number has no ``.data``, ``.exp()``...)."""
    return size if size is not None and size is not Size.NUMBER else None

"""How many dimensions a tensor has, where the code shows it. One of the facts about values
(:mod:`torchfix_device.facts`), asked where a PyTorch 0.3 Python number must become one again
(:func:`torchfix_device.facts.sizes.number_in_03`): an element of a 1-dim tensor (``torch.max(x,
1)[1][0]`` of a 2-dim ``x``) was a number in 0.3, a 0-dim tensor since 0.4; of a 2-dim one, a row.

:func:`dims` answers from what the code shows, never from names:

- a factory with its sizes spelt: ``torch.randn(5, 4)`` (2), ``torch.zeros((n, 3))`` (2),
  ``torch.arange(n)`` (1), ``torch.eye(n)`` (2), ``torch.tensor([[1, 2]])`` (the nesting of
  the literal), a legacy constructor given sizes (``torch.LongTensor(48)``), ``*_like(x)``;
- ``Variable(x)``, ``nn.Parameter(x)``, ``x.data``, methods and functions that keep the shape
  (``.float()``, ``.cpu()``, ``.detach()``, ``.exp()``, ``.div(2)``, ``.softmax(1)``...), and
  arithmetic and comparisons with a Python number (the tensor's) or a tensor (the larger:
  broadcasting never removes a dimension);
- ``x.view(a, b)`` / ``reshape`` with that many sizes (two or more arguments can only be numbers; one is
  a number shown: ``view(-1)``: 1), ``flatten()`` (1), ``unsqueeze(d)`` (one more), ``t()``/``permute`` (the same);
- a reduction over one dimension (``x.sum(1)``, ``x.argmax(1)``, ``torch.mean(x, 0)``): one
  fewer (the same with ``keepdim=True``); an element of ``torch.max(x, 1)`` / ``x.min(0)``
  (``[0]``, ``[1]``, ``.values``, ``.indices``, or unpacked: ``_, pred = x.max(1)``): one fewer;
  of ``sort``/``topk``: the same; ``torch.multinomial(p, n)``: as ``p``; a full reduction: 0;
- an integer index (``x[0]``, ``x[i]`` with ``i`` a number): one fewer; a slice: the same;
- the output of a ``torch.nn`` layer called through a name every binding of which builds it, or through
  ``self.fc`` every value of which the class builds so (:func:`~.tensor_clues.layer_class`, :func:`~.self_attributes.held_by_self`):
  as its input for ``Linear``, activations, dropout, normalisation, convolution and pooling; one more
  for ``Embedding``; through an ``nn.Sequential`` of such layers;
- a name every binding of which that may reach the read shows the same number, none reshaped in place (``x.squeeze_()``,
  :func:`~.in_place.reshaped_in_place`): an assignment, the whole target of a ``for`` over a tensor (one fewer: ``for
  row in x``), or a positional parameter of a plain function of a file no other file imports, every call passing that number;
- ``x.squeeze()`` of a 0-dim tensor, or of one every size of which is shown to be 1 (``torch.rand(1, 1)``): 0;
- the call of a function of the file that returns its first argument in the same shape
  (``to_var(x)``: :func:`keeps_its_argument`): as the argument; the call of any other function
  of this file or of another file of the run: as every ``return`` of it shows
  (:mod:`.returns`), and an element unpacked from the list it returns (``prec1, prec5 =
  accuracy(...)``): as every element of it, or as its position of every literal returned
  (``data, target = get_batch(...)`` of ``return data, target``); ``self.forward(x)`` / ``self(x)`` / ``self.m(x)`` of
  a method its class defines once, which no class derives from (:func:`~.project_calls.own_method`): as every
  ``return`` of the method shows; ``model(x)`` of an instance of a project class: as its own
  ``forward`` shows (:func:`.project_calls.instance_call_dims`).

None where it is not shown (a parameter of a method or of a function another file may call, any
other ``x.squeeze()``, a ``torch.from_numpy`` of an array).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts.self_attributes import held_by_self
from torchfix_device.facts.tensor_clues import MOVES_OF_MODULES, layer_class
from torchfix_device.facts import kinds
from torchfix_device.facts.counts import is_count, is_number
from torchfix_device.facts.in_place import reshaped_in_place
from torchfix_device.facts.methods import attributes_named, class_of_self, own_def
from torchfix_device.facts.project_calls import SAME_SHAPE, WRAPPERS, instance_call_dims, keeps_its_argument, own_method
from torchfix_device.facts.project_attributes import subclassed_in_run
from torchfix_device.facts.values import ITEM, PARAM, PART, VALUE
from torchfix_device.syntax import nodes, traversal

if TYPE_CHECKING:
    from torchfix_device.facts.values import Bound, ModuleValues

MAX_DEPTH = 16
SIZED_FACTORIES = frozenset({"zeros", "ones", "empty", "rand", "randn"})
"""``torch.<f>(*sizes)`` or ``torch.<f>(sizes)``."""
VECTOR_FACTORIES = frozenset({"arange", "range", "linspace", "logspace", "randperm"})
DATA_FACTORIES = frozenset({"tensor", "as_tensor", "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor",
                            "IntTensor", "ShortTensor", "ByteTensor", "CharTensor", "BoolTensor"})
LIKE_FACTORIES = frozenset({"zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "full_like", "randint_like"})
BROADCAST = frozenset({"add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge", "max", "min"})
"""Binary methods and functions: the broadcast of both (``max``/``min`` with a tensor)."""
DIM_REDUCTIONS = frozenset({"sum", "mean", "prod", "std", "var", "argmax", "argmin", "all", "any", "logsumexp", "nansum",
                            "count_nonzero"})
"""``x.<f>(dim)``: one dimension fewer (kept with ``keepdim=True``)."""
FULL_REDUCTIONS = frozenset({"sum", "mean", "prod", "std", "var", "max", "min", "median", "norm", "argmax", "argmin",
                             "all", "any", "nansum"})
PAIRS = frozenset({"max", "min", "median", "mode", "kthvalue"})
"""``x.max(dim)``: a pair of tensors of one dimension fewer."""
ORDERED_PAIRS = frozenset({"sort", "topk"})
"""``x.sort()``, ``x.topk(k)``: a pair of tensors of the same shape."""
SAME_SHAPE_LAYERS = frozenset({
    "Linear", "Identity", "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax",
    "LogSoftmax", "Softplus", "Hardtanh", "PReLU", "Dropout", "Dropout2d", "AlphaDropout", "BatchNorm1d", "BatchNorm2d",
    "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "Conv1d", "Conv2d", "Conv3d",
    "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
    "AdaptiveAvgPool2d", "Upsample",
})


def dims(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> int | None:
    """The number of dimensions of the tensor ``expr`` is, where shown (see the module
    docstring); None otherwise (not shown, or not a tensor)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        return _name_dims(values, expr, depth)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "data":
            return dims(values, expr.value, depth + 1)
        if expr.attr.value in ("values", "indices"):
            return pair_dims(values, expr.value, depth + 1)
        return _attribute_dims(values, expr, depth)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus, cst.BitInvert)):
        return dims(values, expr.expression, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.MatrixMultiply):
            return None
        return _broadcast(values, expr.left, expr.right, depth)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        return _broadcast(values, expr.left, expr.comparisons[0].comparator, depth)
    if isinstance(expr, cst.Subscript):
        return _subscript_dims(values, expr, depth)
    if isinstance(expr, cst.Call) and not nodes.has_star_args(expr):
        return _call_dims(values, expr, depth)
    return None


def _attribute_dims(values: "ModuleValues", expr: cst.Attribute, depth: int) -> int | None:
    """``self.support`` in a method of its class: as every value the class gives it shows, where the
    file writes it no other way (:func:`~.self_attributes.held_by_self`: no in-place method such as
    ``unsqueeze_``, no ``agent.support = ...``); ``self.support = self.support.cuda()`` keeps them."""
    found = set()
    for value in held_by_self(values, expr) or ():
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in SAME_SHAPE:
            value = value.func.value
        if not (isinstance(value, cst.Attribute) and value.attr.value == expr.attr.value and isinstance(value.value, cst.Name)
                and value.value.value == getattr(expr.value, "value", None)):
            found.add(dims(values, value, depth + 1))
    return found.pop() if len(found) == 1 else None


def pair_dims(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> int | None:
    """The dimensions of each tensor of the pair ``expr`` returns (``torch.max(x, 1)``,
    ``x.sort()``), where shown; None for anything else."""
    if depth > MAX_DEPTH or not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute) or nodes.has_star_args(expr):
        return None
    name = expr.func.attr.value
    if name not in PAIRS | ORDERED_PAIRS:
        return None
    subject, rest = _subject(values, expr)
    if subject is None:
        return None
    if name in ORDERED_PAIRS:
        return dims(values, subject, depth + 1)
    positional = [a for a in rest if a.keyword is None]
    dim = nodes.keyword_arg(expr, "dim")
    chosen = dim.value if dim is not None else (positional[-1].value if positional else None)
    if chosen is None or not is_count(values, chosen) or len(positional) > (2 if name == "kthvalue" else 1):
        return None  # `x.max()` is one tensor; `x.max(y)` an elementwise maximum
    return _reduced(values, expr, dims(values, subject, depth + 1))


# -- the forms ------------------------------------------------------------------------------------
def _name_dims(values: "ModuleValues", name: cst.Name, depth: int, past_none: bool | None = None) -> int | None:
    """What every binding reaching ``name`` shows, but ``None`` where ``past_none`` (by default: where the
    read raises on ``None``, as ``total.sum()`` does) and a part a function's ``return`` may give ``None`` at."""
    if past_none is None:
        past_none = nodes.raises_if_none(name, values.parent(name))

    def answer(bound: "Bound") -> int | None:
        node = bound.node
        if bound.kind == VALUE and bound.value is not name:
            return dims(values, bound.value, depth + 1)
        if bound.kind == PART and _pair_target(values, node) and pair_dims(values, bound.value, depth + 1) is not None:
            return pair_dims(values, bound.value, depth + 1)  # `_, pred = x.max(1)`
        if bound.kind == PART and _element_target(values, node) and isinstance(bound.value, cst.Call):
            summary = values.call_returns(bound.value)  # `prec1, prec5 = accuracy(...)`, `data, target = get_batch(...)`
            return summary.at(values.parent(values.parent(node)).elements, node, past_none) if summary is not None else None
        if bound.kind == ITEM and _whole_target(values, node):
            over = dims(values, bound.value, depth + 1)  # `for row in x`: one fewer
            return over - 1 if over is not None and over >= 1 else None
        if bound.kind == PARAM and isinstance(bound.value, cst.FunctionDef):
            return _param_dims(values, node, bound.value, depth)
        return None
    found = values.agreed(name, answer, past_none)
    return None if found is None or reshaped_in_place(values, name) else found


def dims_past_none(values: "ModuleValues", expr: cst.BaseExpression) -> tuple[int | None, bool]:
    """The dimensions of ``expr`` where it is not ``None`` (:func:`dims`), and whether it may be
    ``None`` (the literal, or a name a binding of which reaching it binds ``None``)."""
    if nodes.is_none(expr):
        return None, True
    if not isinstance(expr, cst.Name):
        return dims(values, expr), False
    reach = values.reach(expr)
    may_be_none = any(values.binds_none(b) for b in (reach.bindings if reach.why is None else ()))
    return _name_dims(values, expr, 0, past_none=True), may_be_none


def _whole_target(values: "ModuleValues", node: cst.CSTNode) -> bool:
    """``node`` is the whole target of its ``for`` (``for row in x``, not ``for a, b in x``)."""
    above = values.parent(node)
    return isinstance(above, (cst.For, cst.CompFor)) and above.target is node


def _param_dims(values: "ModuleValues", node: cst.CSTNode, function: cst.FunctionDef, depth: int) -> int | None:
    """A parameter of a plain function of a file no other file imports (a script, a notebook):
    the dimensions every call of the file passes it, where they agree."""
    from torchfix_device.facts.uses import passed_to

    given = passed_to(values, node, function) if depth <= MAX_DEPTH // 2 else None
    if not given:
        return None
    found = {dims(values, value, depth + 1) for value in given}
    return found.pop() if len(found) == 1 else None


def _ones_only(values: "ModuleValues", expr: cst.BaseExpression, depth: int) -> bool:
    """``expr`` is a tensor every size of which is 1 (``torch.rand(1, 1)``, through names,
    ``Variable``, ``.data`` and shape-keeping methods)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        found = list(values.values_of(expr))
        return bool(found) and all(v is not None and v is not expr and _ones_only(values, v, depth + 1) for v in found)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return _ones_only(values, expr.value, depth + 1)
    if not isinstance(expr, cst.Call) or nodes.has_star_args(expr):
        return False
    positional = nodes.positional_args(expr)
    if values.names(expr.func) & WRAPPERS:
        return bool(positional) and _ones_only(values, positional[0].value, depth + 1)
    torch_names = values.torch_names(expr.func)
    if len(torch_names) == 1 and next(iter(torch_names)).rpartition(".")[2] in SIZED_FACTORIES:
        sizes = positional[0].value.elements if len(positional) == 1 and isinstance(positional[0].value, (cst.Tuple, cst.List)) \
            else positional
        return bool(sizes) and all(isinstance(a.value, cst.Integer) and a.value.value == "1" for a in sizes)
    if isinstance(expr.func, cst.Attribute) and not torch_names and not values.module_path(expr.func):
        method = expr.func.attr.value
        return method in SAME_SHAPE and (method != "to" or len(positional) <= 1) and _ones_only(values, expr.func.value, depth + 1)
    return False


def _element_target(values: "ModuleValues", node: cst.CSTNode) -> bool:
    """``node`` is one of the names of ``a, b, ... = <value>`` (one level, no star)."""
    element = values.parent(node)
    tuple_target = values.parent(element) if element is not None else None
    return isinstance(element, cst.Element) and isinstance(tuple_target, (cst.Tuple, cst.List)) \
        and isinstance(values.parent(tuple_target), cst.AssignTarget) and all(isinstance(e.value, cst.Name) for e in tuple_target.elements)


def _pair_target(values: "ModuleValues", node: cst.CSTNode) -> bool:
    """``node`` is one of the two names of ``a, b = <pair>``."""
    tuple_target = values.parent(values.parent(node) or node)
    return isinstance(tuple_target, (cst.Tuple, cst.List)) and len(tuple_target.elements) == 2 and all(
        isinstance(e.value, cst.Name) for e in tuple_target.elements
    )


def _broadcast(values: "ModuleValues", left: cst.BaseExpression, right: cst.BaseExpression, depth: int) -> int | None:
    """``left op right`` elementwise: a tensor's with a Python number, the larger of two tensors'."""
    numbers = (is_number(values, left, depth), is_number(values, right, depth))
    if all(numbers):
        return None  # no tensor
    a = None if numbers[0] else dims(values, left, depth + 1)
    b = None if numbers[1] else dims(values, right, depth + 1)
    if numbers[0] or numbers[1]:
        return a if b is None else b
    return max(a, b) if a is not None and b is not None else None


def _subscript_dims(values: "ModuleValues", expr: cst.Subscript, depth: int) -> int | None:
    if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        index = expr.slice[0].slice.value
        if isinstance(index, cst.Integer) and index.value in ("0", "1"):
            pair = pair_dims(values, expr.value, depth + 1)
            if pair is not None:
                return pair
    found = dims(values, expr.value, depth + 1)
    if found is None:
        return None
    for element in expr.slice:
        part = element.slice
        if isinstance(part, cst.Slice):
            continue
        if isinstance(part, cst.Index) and part.star is None and is_count(values, part.value):
            found -= 1
        else:
            return None
    return found if found >= 0 else None


def _subject(values: "ModuleValues", call: cst.Call) -> tuple[cst.BaseExpression | None, list[cst.Arg]]:
    """The tensor a method or ``torch.<f>`` call works on, and its other arguments."""
    func = cst.ensure_type(call.func, cst.Attribute)
    if values.torch_names(func):
        positional = nodes.positional_args(call)
        if not positional:
            return None, []
        return positional[0].value, [a for a in call.args if a is not positional[0]]
    if values.module_path(func):
        return None, []
    return func.value, list(call.args)


def _reduced(values: "ModuleValues", call: cst.Call, before: int | None) -> int | None:
    if before is None:
        return None
    keep = nodes.keyword_arg(call, "keepdim")
    if keep is not None:
        if isinstance(keep.value, cst.Name) and keep.value.value in ("True", "False"):
            return before if keep.value.value == "True" else before - 1
        return None
    return before - 1 if before >= 1 else None


def _call_dims(values: "ModuleValues", call: cst.Call, depth: int) -> int | None:
    func = call.func
    names = values.names(func)
    if names & WRAPPERS:
        positional = nodes.positional_args(call)
        return dims(values, positional[0].value, depth + 1) if positional else None
    torch_names = values.torch_names(func)
    if torch_names:
        if len(torch_names) != 1:
            return None
        found = _factory_dims(values, next(iter(torch_names)).rpartition(".")[2], call, depth)
        if found is not None or not isinstance(func, cst.Attribute):
            return found
    layer = layer_class(values, func)
    if layer is not None:
        return _layer_dims(values, func, layer, call, depth)
    positional = nodes.positional_args(call)
    if isinstance(func, cst.Name) and positional and keeps_its_argument(values, func):
        return dims(values, positional[0].value, depth + 1)
    method = own_method(values, func)
    if method is not None:  # `self.forward(x)`, `self(x)`: as every `return` of the method shows
        return getattr(values.function_returns(method), "dims", None)
    if (called := instance_call_dims(values, func)) is not None:  # `self.online_net(x)`: its class's `forward` shows
        return called
    if isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and values.module_path(func) and not torch_names):
        summary = values.call_returns(call)  # a function of this file or of another of the run: `accuracy(...)`
        return summary.dims if summary is not None else None
    return _method_dims(values, func.attr.value, call, depth) if isinstance(func, cst.Attribute) else None


def _factory_dims(values: "ModuleValues", name: str, call: cst.Call, depth: int) -> int | None:
    positional = nodes.positional_args(call)
    if name in SIZED_FACTORIES or (name in DATA_FACTORIES - {"tensor", "as_tensor"} and positional and is_count(values, positional[0].value)):
        return _sizes(values, positional)
    if name == "full":
        return _sizes(values, positional[:1])
    if name == "randint":
        return _sizes(values, positional[-1:]) if positional and isinstance(positional[-1].value, (cst.Tuple, cst.List)) else None
    if name in VECTOR_FACTORIES:
        return 1
    if name == "eye":
        return 2
    if name in DATA_FACTORIES and len(positional) == 1:
        return _literal_depth(positional[0].value)
    if name in LIKE_FACTORIES and positional:
        return dims(values, positional[0].value, depth + 1)
    return None  # a function of tensors: as a method (`torch.sum(x, 1)` is `x.sum(1)`)


def _sizes(values: "ModuleValues", positional: list[cst.Arg]) -> int | None:
    if len(positional) == 1 and isinstance(positional[0].value, (cst.Tuple, cst.List)):
        elements = positional[0].value.elements
        return len(elements) if all(is_count(values, e.value) for e in elements) else None
    if len(positional) >= 2:
        return len(positional)  # each one size: with another beside it, no argument may be a sequence (TypeError)
    return 1 if positional and is_count(values, positional[0].value) else None


def _literal_depth(node: cst.BaseExpression) -> int | None:
    if isinstance(node, (cst.Integer, cst.Float)) or (isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float))):
        return 0
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        inner = {_literal_depth(e.value) for e in node.elements}
        return inner.pop() + 1 if len(inner) == 1 and None not in inner else None
    return None


def _layer_dims(values: "ModuleValues", func: cst.BaseExpression, layer: str, call: cst.Call, depth: int) -> int | None:
    positional = nodes.positional_args(call)
    if len(positional) != 1 or len(call.args) != 1:
        return None
    given = dims(values, positional[0].value, depth + 1)
    if given is None:
        return None
    return _through_layers(values, func, layer, given)


def _through_layers(values: "ModuleValues", func: cst.BaseExpression, layer: str, given: int) -> int | None:
    if layer in SAME_SHAPE_LAYERS:
        return given
    if layer == "Embedding":
        return given + 1
    if layer == "Sequential":
        items = _sequential_items(values, func, 0)
        if items is None:
            return None
        for item in items:
            found = _through_layers(values, item, _item_layer(values, item) or "", given)
            if found is None:
                return None
            given = found
        return given
    return None


def _sequential_items(
    values: "ModuleValues", value: cst.BaseExpression | None, depth: int, seen: frozenset[int] = frozenset()
) -> tuple[cst.BaseExpression, ...] | None:
    """The layers of the one ``nn.Sequential(...)`` that ``value`` is (through names and moves)."""
    if depth > MAX_DEPTH:
        return None
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MOVES_OF_MODULES \
            and not values.module_path(value.func):
        value = value.func.value  # `nn.Sequential(...).cuda()`, `model.cuda()`
    if isinstance(value, (cst.Name, cst.Attribute)):
        held = values.values_of(value) if isinstance(value, cst.Name) else held_by_self(values, value) or [None]
        found = {
            _sequential_items(values, v, depth + 1, seen | {id(v)})
            for v in held if v is None or id(v) not in seen  # a loop's own binding: the others decide
        }
        return found.pop() if len(found) == 1 else None
    if not isinstance(value, cst.Call) or not any(q.endswith(".Sequential") for q in values.names(value.func)):
        return None
    return tuple(a.value for a in value.args)


def _item_layer(values: "ModuleValues", item: cst.BaseExpression) -> str | None:
    if isinstance(item, cst.Call):
        names = values.names(item.func)
        if len(names) == 1 and next(iter(names)).startswith("torch.nn."):
            return next(iter(names)).rpartition(".")[2]
    return None


def _method_dims(values: "ModuleValues", name: str, call: cst.Call, depth: int) -> int | None:
    subject, rest = _subject(values, call)
    if subject is None:
        return None
    positional = [a for a in rest if a.keyword is None]
    if name in SAME_SHAPE and (name != "to" or len(positional) <= 1):
        return dims(values, subject, depth + 1)
    if name in BROADCAST and len(positional) == 1 and not rest[1:]:
        if name in ("max", "min") and is_count(values, positional[0].value):
            return None  # a pair, not a tensor
        return _broadcast(values, subject, positional[0].value, depth)
    if name in FULL_REDUCTIONS and not rest:
        return 0
    if name in DIM_REDUCTIONS:
        dim = nodes.keyword_arg(call, "dim")
        chosen = dim.value if dim is not None else (positional[0].value if len(positional) == 1 else None)
        if chosen is not None and is_count(values, chosen):
            return _reduced(values, call, dims(values, subject, depth + 1))
        return None
    if name in ("view", "reshape"):
        return _sizes(values, positional) if len(positional) == len(rest) else None
    if name in ("view_as", "reshape_as", "expand_as") and len(positional) == 1:
        return dims(values, positional[0].value, depth + 1)
    if name == "flatten" and not rest:
        return 1
    if name == "unsqueeze" and len(rest) == 1:
        found = dims(values, subject, depth + 1)
        return found + 1 if found is not None else None
    if name in ("t", "transpose", "permute"):
        return dims(values, subject, depth + 1)
    if name == "multinomial":
        return dims(values, subject, depth + 1)
    if name == "squeeze" and not rest:  # of a 0-dim tensor (`x.mean().squeeze()`) or of sizes 1 only
        return 0 if dims(values, subject, depth + 1) == 0 or _ones_only(values, subject, depth + 1) else None
    return None

"""Whether a tensor is floating point, and where an integer tensor is refused. One of the facts
about values (:mod:`torchfix_device.facts`), asked where PyTorch 0.3's ``torch.arange`` of
integers, a float tensor then, is an ``int64`` tensor since 0.4 (TFD026).

:func:`shown_float` says a value is floating point where the code shows it: a factory that only
makes floating point (``torch.rand``, ``randn``, ``rand_like``, ``randn_like``, ``normal``), any
torch factory or wrapper given ``requires_grad=True`` and an ``nn.Parameter`` (only floating point
may require grad), ``.float()``, ``.double()``, ``.half()``, the ``weight`` or ``bias`` of a
``torch.nn`` layer; through ``.data``, ``.detach()`` and the methods that keep the dtype
(:data:`KEEP_DTYPE`), and through a name every value of which is shown floating point.

:func:`integer_refused` says where the first thing the program does with an integer tensor
fails for any integer tensor (whatever its values and shape), on every path: it is made to
require grad (``requires_grad=True`` on the factory, ``Variable(x, requires_grad=True)``,
``nn.Parameter(x)``, ``x.requires_grad_()``); it is set as ``layer.weight.data`` /
``layer.bias.data`` of a ``torch.nn`` layer (a parameter that requires grad takes only floating
point data); it is a matrix operand (``mm``, ``matmul``, ``bmm``, ``@``) with a tensor shown
floating point (matrix products do not promote); it is the input of a ``torch.nn`` layer whose
forward refuses integer input (:data:`FLOAT_LAYERS`; ``Dropout`` only where the layer was built in
the statement just before, in training mode). The walk from a value to its first use, through a
name bound to it, is :func:`torchfix_device.facts.refusals.refused_first`'s; here the reads of
the name that only take its shape (``expand_as(x)``, ``x.size()``, ``x.shape``, ``len(x)``) may
sit beside the refusing one in its statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts.refusals import Question, refused_first
from torchfix_device.facts.tensor_clues import layer_class
from torchfix_device.facts.uses import Place, Use
from torchfix_device.syntax import nodes

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

MAX_DEPTH = 8
FLOAT_FACTORIES = frozenset({"rand", "randn", "rand_like", "randn_like", "normal"})
"""torch factories that only make floating point tensors (without a ``dtype``)."""
FLOAT_METHODS = frozenset({"float", "double", "half"})
KEEP_DTYPE = frozenset({
    "view", "reshape", "unsqueeze", "squeeze", "t", "transpose", "permute", "contiguous", "clone", "detach", "cpu",
    "cuda", "expand", "expand_as", "view_as", "reshape_as", "flatten", "repeat", "flip",
})
"""Tensor methods whose result has the receiver's dtype, whatever their arguments."""
MATRIX_PRODUCTS = frozenset({"mm", "matmul", "bmm"})
FLOAT_LAYERS = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "Softmax", "LogSoftmax", "MaxPool1d", "MaxPool2d",
    "LSTM", "GRU", "RNN",
})
"""``torch.nn`` layers whose forward raises on an integer tensor (torch 2.x, in any mode)."""
TRAINING_ONLY_LAYERS = frozenset({"Dropout"})
"""Layers that raise on an integer tensor in training mode (a freshly built layer's)."""
VARIABLES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
SHAPE_ONLY = frozenset({"expand_as", "view_as", "reshape_as", "size", "shape", "dim", "numel"})


def shown_float(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``expr`` is a floating point tensor (see the module docstring)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "data":
            return shown_float(values, expr.value, depth + 1)
        if expr.attr.value in ("weight", "bias"):
            return layer_class(values, expr.value) is not None
        return False
    if isinstance(expr, cst.Name):
        found = [v for v in values.values_of(expr)]
        return bool(found) and all(v is not None and v is not expr and shown_float(values, v, depth + 1) for v in found)
    if not isinstance(expr, cst.Call):
        return False
    if _requires_grad(expr) is True:
        return bool(_torch_last(values, expr.func)) or bool(values.names(expr.func) & VARIABLES)
    if values.names(expr.func) & PARAMETERS:
        return _requires_grad(expr) is not False
    last = _torch_last(values, expr.func)
    if last in FLOAT_FACTORIES and not any(a.keyword is not None and a.keyword.value == "dtype" for a in expr.args):
        return True
    if isinstance(expr.func, cst.Attribute) and not values.module_path(expr.func):
        method = expr.func.attr.value
        if method in FLOAT_METHODS and not expr.args:
            return True
        if method in KEEP_DTYPE:
            return shown_float(values, expr.func.value, depth + 1)
    return False


def integer_refused(values: "ModuleValues", expr: cst.BaseExpression) -> Place | None:
    """Where every integer tensor made by ``expr`` fails first (see the module docstring)."""
    top = _climb(values, expr)
    place = _wrapper_refusal(values, expr, top)
    if place is not None:
        return place
    return refused_first(values, top, INTEGER_REFUSED)


def refusing_integer(values: "ModuleValues", expr: cst.BaseExpression) -> Place | None:
    """``expr`` (an integer tensor) is used where any integer tensor fails."""
    expr = _climb(values, expr)
    parent = values.parent(expr)
    if isinstance(parent, cst.Attribute) and parent.value is expr:
        call = values.parent(parent)
        if not isinstance(call, cst.Call) or call.func is not parent:
            return None
        method = parent.attr.value
        if method == "requires_grad_" and not (call.args and _false(call.args[0].value)):
            return Place(Use.GRAD, call)
        if method in MATRIX_PRODUCTS and len(call.args) == 1 and shown_float(values, call.args[0].value):
            return Place(Use.MATMUL, call)
        return None
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.MatrixMultiply):
        other = parent.right if parent.left is expr else parent.left
        return Place(Use.MATMUL, parent) if shown_float(values, other) else None
    if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, cst.Attribute) and target.attr.value == "data" and isinstance(target.value, cst.Attribute) \
                and target.value.attr.value in ("weight", "bias") and layer_class(values, target.value.value) is not None:
            return Place(Use.FLOAT_DATA, parent)
        return None
    if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
        call = values.parent(parent)
        if not isinstance(call, cst.Call):
            return None
        if len(call.args) == 1 and call.func is not None and _refusing_layer(values, call):
            return Place(Use.FLOAT_LAYER, call)
        last = _torch_last(values, call.func)
        if last in MATRIX_PRODUCTS and len(call.args) == 2 and all(a.keyword is None and not a.star for a in call.args):
            other = call.args[1] if call.args[0] is parent else call.args[0]
            return Place(Use.MATMUL, call) if shown_float(values, other.value) else None
    return None


def _climb(values: "ModuleValues", expr: cst.BaseExpression) -> cst.BaseExpression:
    """The outermost of ``expr``'s calls of methods that keep its dtype, and of ``Variable``
    wrappers that do not make it require grad (``V(t.arange(0, 12).view(3, 4))``)."""
    for _ in range(MAX_DEPTH):
        parent = values.parent(expr)
        if isinstance(parent, cst.Attribute) and parent.value is expr and parent.attr.value in KEEP_DTYPE:
            call = values.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                expr = call
                continue
        if isinstance(parent, cst.Attribute) and parent.value is expr and parent.attr.value == "data":
            expr = parent
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            call = values.parent(parent)
            if isinstance(call, cst.Call) and call.args[0] is parent and values.names(call.func) & VARIABLES \
                    and _requires_grad(call) is not True:
                expr = call
                continue
        break
    return expr


def _wrapper_refusal(values: "ModuleValues", expr: cst.BaseExpression, top: cst.BaseExpression) -> Place | None:
    """``requires_grad=True`` on the factory itself, or a wrapper around the chain that requires grad."""
    if isinstance(expr, cst.Call) and _requires_grad(expr) is True:
        return Place(Use.GRAD, expr)
    parent = values.parent(top)
    if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
        call = values.parent(parent)
        if isinstance(call, cst.Call) and call.args[0] is parent:
            names = values.names(call.func)
            if (names & VARIABLES and _requires_grad(call) is True) or (names & PARAMETERS and _requires_grad(call) is not False):
                return Place(Use.GRAD, call)
    return None


def _refusing_layer(values: "ModuleValues", call: cst.Call) -> bool:
    layer = layer_class(values, call.func)
    if layer in FLOAT_LAYERS:
        return True
    return layer in TRAINING_ONLY_LAYERS and _built_just_before(values, call)


def _built_just_before(values: "ModuleValues", call: cst.Call) -> bool:
    """``call.func`` is a name bound only by the statement just before the call's (a fresh layer,
    in training mode), and the call is its statement's value."""
    func = call.func
    if not isinstance(func, cst.Name):
        return False
    reach = values.reach(func)
    if reach.why is not None or len(reach.bindings) != 1:
        return False
    binding_line = values.enclosing(reach.bindings[0], cst.SimpleStatementLine)
    line = values.enclosing(call, cst.SimpleStatementLine)
    found = values.block_of(line) if line is not None and binding_line is not None else None
    return found is not None and found[1] > 0 and found[0][found[1] - 1] is binding_line


def _shape_only(values: "ModuleValues", read: cst.Name) -> bool:
    """A read that takes only the value's shape: ``y.expand_as(x)``, ``x.size()``, ``x.shape``, ``len(x)``."""
    parent = values.parent(read)
    if isinstance(parent, cst.Attribute) and parent.value is read:
        return parent.attr.value in ("size", "shape", "dim", "numel")
    if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
        call = values.parent(parent)
        if isinstance(call, cst.Call) and len(call.args) == 1:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in SHAPE_ONLY:
                return True
            return "builtins.len" in values.names(call.func)
    return False


def _requires_grad(call: cst.Call) -> bool | None:
    """The literal ``requires_grad=`` of a call (None where absent or not a literal)."""
    arg = nodes.keyword_arg(call, "requires_grad")
    if arg is None or not isinstance(arg.value, cst.Name) or arg.value.value not in ("True", "False"):
        return None
    return arg.value.value == "True"


def _false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _torch_last(values: "ModuleValues", func: cst.BaseExpression) -> str | None:
    """The name of the torch function ``func`` calls (``torch.rand`` -> ``rand``), None otherwise."""
    names = values.torch_names(func)
    if len(names) != 1:
        return None
    qualified = next(iter(names))
    package, _, last = qualified.rpartition(".")
    return last if package == "torch" else None


INTEGER_REFUSED = Question(refusing_integer, beside=_shape_only)
"""The question TFD026 asks: an integer tensor where only floating point is taken."""

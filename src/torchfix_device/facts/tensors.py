"""Is a value provably a tensor? ``Variable(h.data)`` → ``h.detach()`` needs it (TFD009).

``Variable(t)`` gives a new tensor that shares ``t``'s storage and needs no grad: for any
object ``h`` whose ``.data`` is a tensor, ``Variable(h.data)`` is exactly ``h.data.detach()``.
``h.detach()`` is the same only where ``h`` is a tensor: a ``PackedSequence`` (or any object of
the project's) has a ``.data`` tensor but no ``.detach()``, so the shorter form would raise
``AttributeError`` there. The evidence, from this file alone:

- a guard around the use that says so: the true branch of ``if isinstance(h, Variable):``
  (``torch.Tensor``, ``nn.Parameter``, a tuple of these), ``type(h) == Variable`` /
  ``type(h) is Variable`` (the 0.3 form of the test), ``torch.is_tensor(h)``, where the branch
  does not bind ``h`` again;
- a value made by torch: ``Variable(...)``, ``nn.Parameter(...)``, a torch function that
  returns one tensor (a factory, ``torch.from_numpy``, ``torch.cat``, ...), a tensor method
  that returns one tensor called on such a value;
- a name every binding of which that may reach the read is such a value.

A parameter, a module's output (an RNN returns a tuple), a project call: no evidence, and the
exact ``h.data.detach()`` is written instead (the message says why).

``x.data`` of a tensor never requires grad; a ``PackedSequence``'s ``.data`` may. So in a file
that packs sequences (it names ``torch.nn.utils.rnn``'s packing functions or ``PackedSequence``)
``x.data`` is grad-free only where ``x`` is shown to be a tensor (:func:`may_be_packed`). Not
seen: a packed sequence made in another file and passed into one that packs none.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from torchfix_device.syntax import traversal
from torchfix_device.syntax.bindings import names_bound_by

GradEvidence = Any
"""A :class:`torchfix_device.facts.grad.GradEvidence` (that module imports this one)."""

TENSOR_CLASSES = frozenset({
    "torch.Tensor", "torch.autograd.Variable", "torch.autograd.variable.Variable",
    "torch.nn.Parameter", "torch.nn.parameter.Parameter",
})
MAKERS = frozenset({
    "torch.autograd.Variable", "torch.autograd.variable.Variable", "torch.nn.Parameter",
    "torch.nn.parameter.Parameter", "torch.Tensor",
})
TORCH_FUNCTIONS = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "range",
    "linspace", "logspace", "eye", "tensor", "as_tensor", "from_numpy", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "cat", "stack", "matmul", "mm", "bmm",
    "exp", "log", "sigmoid", "tanh", "relu", "softmax", "log_softmax", "sum", "mean", "abs",
    "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ByteTensor",
})
"""``torch.<name>`` functions (and legacy constructors) whose result is one tensor."""
TENSOR_METHODS = frozenset({
    "view", "reshape", "expand", "expand_as", "view_as", "repeat", "permute", "transpose", "t",
    "unsqueeze", "squeeze", "contiguous", "clone", "detach", "float", "double", "half", "long",
    "int", "byte", "bool", "cuda", "cpu", "type_as", "new", "new_zeros", "new_ones", "new_full",
    "new_empty", "new_tensor", "fill_", "zero_", "normal_", "uniform_", "mul", "add", "sub",
    "div", "sum", "mean", "exp", "log", "abs", "sigmoid", "tanh",
})
"""Tensor methods whose result, called on a tensor, is one tensor."""
MAX_DEPTH = 12
PACKING = frozenset({"pack_padded_sequence", "pack_sequence", "PackedSequence"})


def is_tensor(evidence: "GradEvidence", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """True where ``expr`` is provably a tensor when it is evaluated (see the module docstring)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name) and _guarded(evidence, expr):
        return True
    if isinstance(expr, cst.Name):
        values = list(evidence._values_of(expr))
        return bool(values) and all(v is not None and v is not expr and is_tensor(evidence, v, depth + 1) for v in values)
    if not isinstance(expr, cst.Call):
        return False
    names = evidence.names(expr.func)
    if names and names <= MAKERS:
        return True
    torch_names = evidence._torch_names(expr.func)
    if torch_names:
        return {q.rpartition(".")[2] for q in torch_names} <= TORCH_FUNCTIONS and not names - torch_names
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in TENSOR_METHODS and not evidence._module_path(expr.func):
        return is_tensor(evidence, expr.func.value, depth + 1)
    return False


def may_be_packed(evidence: "GradEvidence", receiver: cst.BaseExpression) -> bool:
    """Whether ``receiver.data`` may be a ``PackedSequence``'s data: the file packs sequences and
    nothing shows ``receiver`` is a tensor."""
    packs = evidence.__dict__.get("_packs_sequences")
    if packs is None:  # one walk of the module per evidence object (one version of the module)
        packs = evidence.__dict__["_packs_sequences"] = any(
            isinstance(node, cst.Name) and node.value in PACKING for node in traversal.walk(evidence.module)
        )
    return packs and not is_tensor(evidence, receiver)


def _guarded(evidence: "GradEvidence", name: cst.Name) -> bool:
    """``name`` is read in the true branch of a test that says it is a tensor, and that branch
    does not bind it again."""
    child: cst.CSTNode = name
    above = evidence.parent(name)
    while above is not None and not isinstance(above, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)):
        if isinstance(above, cst.If) and child is above.body and _says_tensor(evidence, above.test, name.value):
            return not _binds(above.body, name.value)
        if isinstance(above, cst.IfExp) and child is above.body and _says_tensor(evidence, above.test, name.value):
            return True
        child, above = above, evidence.parent(above)
    return False


def _says_tensor(evidence: "GradEvidence", test: cst.BaseExpression, name: str) -> bool:
    if isinstance(test, cst.Call) and len(test.args) == 2 and not any(a.keyword or a.star for a in test.args):
        if not _is_name(test.args[0].value, name) or evidence.names(test.func) != {"builtins.isinstance"}:
            return False
        classes = test.args[1].value
        parts = [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]
        return all(_is_tensor_class(evidence, p) for p in parts)
    if isinstance(test, cst.Call) and len(test.args) == 1 and not (test.args[0].keyword or test.args[0].star):
        return _is_name(test.args[0].value, name) and evidence.names(test.func) == {"torch.is_tensor"}
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator = test.comparisons[0].operator
        left, right = test.left, test.comparisons[0].comparator
        if not isinstance(operator, (cst.Equal, cst.Is)):
            return False
        for typed, cls in ((left, right), (right, left)):
            if (
                isinstance(typed, cst.Call)
                and len(typed.args) == 1
                and not (typed.args[0].keyword or typed.args[0].star)
                and _is_name(typed.args[0].value, name)
                and evidence.names(typed.func) == {"builtins.type"}
                and _is_tensor_class(evidence, cls)
            ):
                return True
    return False


def _is_tensor_class(evidence: "GradEvidence", expr: cst.BaseExpression) -> bool:
    names = evidence.names(expr)
    return bool(names) and names <= TENSOR_CLASSES


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name


def _binds(body: cst.CSTNode, name: str) -> bool:
    """Whether anything in ``body`` may bind ``name`` (an assignment, a loop or ``with`` target,
    a walrus, an import, ``global``, a nested definition, ``del``)."""
    for node in traversal.walk(body):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.name.value == name:
            return True
        if isinstance(node, (cst.AugAssign, cst.Del)):
            if any(isinstance(n, cst.Name) and n.value == name for n in traversal.walk(node.target)):
                return True
        elif name in names_bound_by(node):
            return True
    return False

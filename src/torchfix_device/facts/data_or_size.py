"""What the argument of a legacy typed constructor is: a size, data, or a NumPy array. One of the
facts about values (:mod:`torchfix_device.facts`), on the module's shared resolution of names
(:mod:`.values`).

``torch.FloatTensor(3)`` makes three uninitialised floats, ``torch.FloatTensor([3])`` one float
of value 3, ``torch.FloatTensor(np.ones(3))`` a tensor sharing the array's memory (on the CPU,
where the dtypes match). Each has its own factory since PyTorch 0.4 (``torch.empty``,
``torch.tensor``, ``torch.as_tensor``), so a rewrite must know which the argument is. TFD003
(legacy CPU constructors in module methods) and TFD008 (CUDA tensor types, their aliases) ask
:func:`argument_kind`:

- :data:`SIZE`, a Python ``int``: a literal, ``len(...)``, ``int(...)``, ``x.size(i)``,
  ``x.shape[i]``, arithmetic of those other than ``/``;
- :data:`DATA`, a sequence: a list or tuple display, a list comprehension, ``list(...)``,
  ``tuple(...)``, a part of what ``zip(...)`` gives unpacked (``probs, idxs = zip(*batch)``:
  each a tuple), a slice or negation of data;
- :data:`ARRAY`, a NumPy array of at least one dimension (a 0-d array or a NumPy scalar is a
  size to the legacy constructor): what a NumPy function of :data:`ARRAY_FUNCTIONS` returns
  given its shape (``np.zeros((n, d))``), ``np.array`` of a display, a ``numpy.random``
  function given its size, an array method of :data:`ARRAY_METHODS` on one (``.reshape(2, 3)``),
  an image of OpenCV's :data:`IMAGE_ARRAYS` (``cv2.resize(...)``), a
  slice or negation of one;
- and for a name, the kind every binding that may reach the read gives (flow-sensitive: both
  branches of an ``if``, loops); None where any shows nothing, or two kinds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from torchfix_device.facts.values import PART, VALUE
from torchfix_device.syntax import nodes

if TYPE_CHECKING:
    from torchfix_device.facts.values import Bound, ModuleValues

SIZE, DATA, ARRAY = "size", "data", "array"
MAX_DEPTH = 6

ARRAY_FUNCTIONS = {  # NumPy functions returning an array, and where their shape argument is (None: always one)
    "array": None, "asarray": None, "ascontiguousarray": None, "stack": None, "concatenate": None,
    "vstack": None, "hstack": None, "arange": None, "linspace": None, "eye": None, "identity": None,
    "argsort": None, "sort": None, "flip": None, "fliplr": None, "flipud": None, "cumsum": None,
    "repeat": None, "tile": None, "zeros": 0, "ones": 0, "empty": 0, "full": 0, "zeros_like": None, "ones_like": None,
}
RANDOM_FUNCTIONS = {  # numpy.random functions: index of the `size` argument (an array when given)
    "normal": 2, "uniform": 2, "randint": 2, "binomial": 2, "beta": 2, "gamma": 2, "poisson": 1,
    "exponential": 1, "choice": 1, "random": 0, "random_sample": 0, "rand": 0, "randn": 0,
    "standard_normal": 0, "permutation": None,
}
ARRAY_METHODS = frozenset({"reshape", "astype", "copy", "transpose", "flatten", "ravel", "clip"})
"""Array methods that give an array (``squeeze``, which may give a 0-d one, a size to the legacy
constructor, is left out)."""
IMAGE_ARRAYS = frozenset({"cv2.resize", "cv2.cvtColor", "cv2.warpAffine", "cv2.flip", "scipy.misc.imresize"})
"""Image functions of other libraries that always return an array of at least two dimensions."""
_DISPLAY_ONLY = frozenset({"array", "asarray", "ascontiguousarray"})
"""Array only when given a display (``np.array(5)`` is 0-d: a size to the legacy constructor)."""
_INTS = frozenset({"len", "builtins.len", "int", "builtins.int"})
_SEQUENCES = frozenset({"list", "builtins.list", "tuple", "builtins.tuple"})
_ZIP = frozenset({"zip", "builtins.zip"})


def argument_kind(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> str | None:
    """:data:`SIZE`, :data:`DATA` or :data:`ARRAY` where ``expr`` is shown to be one (see the
    module docstring); None otherwise."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, cst.Integer):
        return SIZE
    if isinstance(expr, (cst.List, cst.Tuple, cst.ListComp)):
        return DATA
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.Divide):
        left, right = argument_kind(values, expr.left, depth + 1), argument_kind(values, expr.right, depth + 1)
        return SIZE if left == right == SIZE else None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return argument_kind(values, expr.expression, depth + 1)
    if isinstance(expr, cst.Subscript):
        if m.matches(expr.value, m.Attribute(attr=m.Name("shape"))):
            return SIZE if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) else None
        if all(isinstance(e.slice, cst.Slice) for e in expr.slice):
            inner = argument_kind(values, expr.value, depth + 1)
            return inner if inner in (DATA, ARRAY) else None
        return None
    if isinstance(expr, cst.Call):
        return _call_kind(values, expr, depth)
    if isinstance(expr, cst.Name):
        return _name_kind(values, expr, depth)
    return None


def _call_kind(values: "ModuleValues", call: cst.Call, depth: int) -> str | None:
    if m.matches(call.func, m.Attribute(attr=m.Name("size"))):
        return SIZE if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star else None
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ARRAY_METHODS:
        return ARRAY if argument_kind(values, call.func.value, depth + 1) == ARRAY else None
    names = values.names(call.func)
    if not names or any(a.star for a in call.args):
        return None
    if names <= _INTS:
        return SIZE
    if names <= _SEQUENCES:
        return DATA
    return ARRAY if all(_numpy_array(name, call) for name in names) else None


def _numpy_array(name: str, call: cst.Call) -> bool:
    """``numpy.<name>(...)`` returns an array of at least one dimension."""
    parts = name.split(".")
    if name in IMAGE_ARRAYS:
        return True
    if parts[0] != "numpy":
        return False
    if len(parts) == 2 and parts[1] in ARRAY_FUNCTIONS:
        if parts[1] in _DISPLAY_ONLY:
            return bool(call.args) and isinstance(call.args[0].value, (cst.List, cst.Tuple, cst.ListComp))
        shape = ARRAY_FUNCTIONS[parts[1]]
        return shape is None or _given(call, shape, "shape")
    if len(parts) == 3 and parts[1] == "random" and parts[2] in RANDOM_FUNCTIONS:
        if parts[2] in ("rand", "randn"):
            return bool(call.args)
        size = RANDOM_FUNCTIONS[parts[2]]
        return size is None or _given(call, size, "size")
    return False


def _given(call: cst.Call, index: int, keyword: str) -> bool:
    """The shape or size argument is given, and is not ``None`` nor ``()``."""
    positional = [a for a in call.args if a.keyword is None]
    chosen = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
    if chosen is None and len(positional) > index:
        chosen = positional[index].value
    if chosen is None or nodes.is_none(chosen):
        return False
    return not (isinstance(chosen, cst.Tuple) and not chosen.elements)


def _name_kind(values: "ModuleValues", name: cst.Name, depth: int) -> str | None:
    def answer(bound: "Bound") -> str | None:
        if bound.kind == VALUE and bound.value is not name:
            return argument_kind(values, bound.value, depth + 1)
        return DATA if bound.kind == PART and _a_zipped_part(values, bound.node, bound.value) else None
    return values.agreed(name, answer)


def _a_zipped_part(values: "ModuleValues", binding: cst.CSTNode, value: cst.BaseExpression) -> bool:
    """``binding`` is one target of ``a, b = zip(...)`` (each a tuple; a starred one a list)."""
    if not (isinstance(value, cst.Call) and values.names(value.func) and values.names(value.func) <= _ZIP):
        return False
    element = values.parent(binding)
    holder = values.parent(element) if isinstance(element, (cst.Element, cst.StarredElement)) else None
    target = values.parent(holder) if isinstance(holder, (cst.Tuple, cst.List)) else None
    return isinstance(target, cst.AssignTarget) and values.parent(target) is values.parent(value)

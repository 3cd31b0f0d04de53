"""What a value given to ``Variable(...)`` is: can it be a tensor that requires grad?

TFD009 (:mod:`~torchfix_device.codemods.variable_wrapper`) unwraps ``Variable(x)`` to ``x`` as a
safe fix only where ``x`` provably cannot require grad (then the ``.detach()`` that ``Variable``
does is a no-op). :meth:`GradEvidence.missing` answers for one expression with None (it cannot:
it is *grad-free*) or with the evidence that is missing, from this file alone:

- values that never require grad: literals, ``x.data``, ``x.detach()``, integer and boolean
  results (``.long()``, ``torch.LongTensor(...)``), a legacy constructor given sizes
  (``torch.FloatTensor(2, n)``: two or more positional arguments), sizes, NumPy and ``math``
  values, dtypes; a name every binding of which is ``torch.cuda.XTensor if c else
  torch.XTensor`` (TFD008's alias) is such a legacy constructor;
- tensor factories (``torch.zeros``, ``torch.from_numpy``, ``x.new(2, 3)``, ...) without
  ``requires_grad=``; a torch function, a tensor method, an operator, a subscript or a
  comprehension of grad-free values (nothing but ``requires_grad_`` and ``requires_grad=`` makes
  grad out of nothing; ``torch.load`` is no evidence); ``torch.as_tensor(a, ...)`` and
  ``torch.asarray(a, ...)`` where ``a`` is grad-free (they return ``a`` itself, a copy of it in
  its graph, or a new tensor of data; the result may still be ``a`` itself, so it is not new);
- an item of a ``DataLoader`` or data set this file shows (:mod:`._data_pipeline`), also
  through ``enumerate``, ``zip``, ``tqdm`` and ``next(iter(...))``, and an attribute of such a
  torchvision data set (``train_data.test_data``);
- an attribute of ``self`` its class only ever gives grad-free values (:mod:`._self_attributes`),
  an attribute of a ``parse_args()`` result shown to be no tensor (:mod:`._argparse_values`);
- a local name: every binding that may reach the read (libcst's bindings, ordered by
  :mod:`._name_flow`) is of a grad-free value; a module-level name read in a function: every
  module-level binding is. A loop's own rebinding (``x = Variable(x)`` each iteration) is
  assumed grad-free while it is being proven (a greatest fixpoint: each binding keeps the value
  grad-free if the others do).

Parameters and models are not followed, and the message says so; the call of a function of
this file or of another file of the run is grad-free where nothing it returns can require grad,
whatever its arguments (:mod:`.returns`). What a name holds where it is read comes from the module's one resolution
(:mod:`.values`), shared with the other facts. Code outside the file (another module rebinding
a global or an attribute) is not seen.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst
from torchfix_device.syntax import nodes as _nodes
from torchfix_device import torch_api
from torchfix_device.facts.argparse_values import ParsedValueEvidence
from torchfix_device.facts.data_pipeline import DataPipelineEvidence
from torchfix_device.facts.in_place import RANDOM_FILLS, changes_of, flow_key, in_place
from torchfix_device.facts.self_attributes import SelfAttributeEvidence
from torchfix_device.facts.kinds import may_be_packed
from torchfix_device.facts.values import AUGMENTED, ITEM, PARAM, OTHER, ModuleValues

FACTORIES = {
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "range",
    "linspace", "logspace", "eye", "tensor", "zeros_like", "ones_like", "empty_like", "full_like",
    "rand_like", "randn_like", "randint_like", "from_numpy", "multinomial",
}
"""``torch.<name>`` calls whose result is a new tensor that does not require grad, whatever
their arguments (unless given ``requires_grad=``)."""
NOT_PURE_TORCH = {"load", "as_tensor", "asarray", "from_file", "frombuffer"}
"""``torch.<name>`` functions whose result is not made from their arguments alone."""
FROM_DATA = {"as_tensor", "asarray"}
"""``torch.<name>`` functions (also in ``NOT_PURE_TORCH`` and ``SELF_RETURNING``) whose result
requires grad only where their first argument is a tensor that does (checked on torch 2.13: a
NumPy array or a list of tensors gives no grad; a tensor that requires grad gives itself, or a
copy in its graph when ``dtype=`` or ``device=`` differ). Without ``requires_grad=``."""
SELF_RETURNING = {
    "to", "cuda", "cpu", "type", "type_as", "float", "double", "half", "bfloat16", "long", "int",
    "short", "byte", "char", "bool", "contiguous", "flatten", "pin_memory", "astype", "conj",
    "conj_physical", "dequantize", "positive", "resolve_conj", "resolve_neg", "to_dense",
    "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "cartesian_prod", "as_tensor",
    "asarray",
}
"""Methods and ``torch.<name>`` functions that may return their (first) argument itself, as
every in-place ``*_`` one does (found by calling each on a tensor, torch 2.13)."""
SHAPE_METHODS = {
    "view", "reshape", "expand", "repeat", "permute", "transpose", "unsqueeze", "squeeze", "narrow",
    "flatten", "unflatten", "view_as", "expand_as", "reshape_as", "type_as", "type", "to", "cuda",
    "cpu", "contiguous", "index_select", "gather", "select", "chunk", "split", "roll", "flip", "t",
    "float", "double", "half", "bfloat16",
}
"""Methods (and ``torch.<name>`` functions, on their first argument) whose other arguments are
sizes, dims, integer indices, a device or a tensor lending its shape or type: only the
receiver's grad reaches the result."""
NEVER_GRAD_METHODS = {
    "detach", "long", "int", "short", "byte", "char", "bool", "size", "dim", "numel", "item",
    "tolist", "numpy", "nonzero", "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt",
    "ge", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "astype", "nelement",
    "element_size", "data_ptr", "get_device", "is_contiguous", "stride", "storage",
}
"""Methods whose result never requires grad (an integer, a bool, a size, a detached tensor)."""
INTEGER_TYPES = {"LongTensor", "IntTensor", "ShortTensor", "ByteTensor", "CharTensor", "BoolTensor"}
BUILTIN_NEVER_GRAD = {"len", "int", "float", "bool", "str", "range", "isinstance", "hasattr", "repr", "round"}
BUILTIN_PURE = {"abs", "min", "max", "sum", "list", "tuple", "sorted", "reversed", "zip", "enumerate", "iter"}
CONSTANTS = {"None", "True", "False"}
TORCH_TYPES = {
    "float", "float16", "float32", "float64", "double", "half", "bfloat16", "long", "int", "int8",
    "int16", "int32", "int64", "uint8", "bool", "short", "complex64", "complex128", "cfloat", "cdouble",
    "dtype", "device", "Size", "strided",
}
MAX_DEPTH = 60


class GradEvidence(DataPipelineEvidence, SelfAttributeEvidence, ParsedValueEvidence):
    """Answers about the values of one module version (see the module docstring)."""

    def __init__(self, values: ModuleValues) -> None:
        """``values``: the module version's shared resolution of names (:func:`.values.of`)."""
        self.values = values
        self.module = values.module
        self.names = values.names
        self.bindings = values.bindings
        self.parent = values.parent
        self.source_order = values.source_order
        self._values_of = values.values_of
        self._module_path = values.module_path
        self._torch_names = values.torch_names
        self._legacy_alias = values.legacy_alias
        self._depth = 0

    # -- the questions ----------------------------------------------------------------------------
    def missing(self, expr: cst.BaseExpression) -> str | None:
        """None when ``expr`` cannot be a tensor that requires grad; else the evidence missing."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                self.proof_cut_short()
                return "its value is too far from where it is made"
            return self._expr(expr)
        finally:
            self._depth -= 1

    def fresh(self, expr: cst.BaseExpression) -> bool:
        """``expr`` makes a new object that nothing else refers to (so marking it changes nothing
        else): a factory, ``x.data``, an operator's result, a method that always returns a new
        tensor; not a name, a subscript (of a list, the element itself) or a self-returning
        method of those."""
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "data"
        if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
            return True
        if not isinstance(expr, cst.Call):
            return False
        if isinstance(expr.func, cst.Attribute) and not self._torch_names(expr.func):
            method = expr.func.attr.value
            if method in SELF_RETURNING or in_place(method):
                return self.fresh(expr.func.value)
            return True
        torch_names = self._torch_names(expr.func)
        if not torch_names:
            return False
        short = {q.rpartition(".")[2] for q in torch_names}
        return not (short & (NOT_PURE_TORCH | SELF_RETURNING) or any(in_place(n) for n in short))

    # -- expressions ------------------------------------------------------------------------------
    def _expr(self, expr: cst.BaseExpression) -> str | None:
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Ellipsis)):
            return None
        if isinstance(expr, cst.Name):
            return None if expr.value in CONSTANTS else self._name(expr)
        if isinstance(expr, cst.UnaryOperation):
            return self.missing(expr.expression)
        if isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation)):
            return self.missing(expr.left) or self.missing(expr.right)
        if isinstance(expr, cst.Comparison):
            return self.missing(expr.left) or _first(self.missing(c.comparator) for c in expr.comparisons)
        if isinstance(expr, cst.IfExp):
            return self.missing(expr.body) or self.missing(expr.orelse)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return _first(self.missing(e.value) for e in expr.elements)
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return self.missing(expr.elt)
        if isinstance(expr, cst.Subscript):
            if self.dataset_missing(expr.value) is None:
                return None  # an item of a data set this file shows
            return self.missing(expr.value)  # an index never gives grad to what it picks
        if isinstance(expr, cst.Attribute):
            return self._attribute(expr)
        if isinstance(expr, cst.Call):
            return self._call(expr)
        return f"`{_nodes.code_of(expr)}` is not a value this file shows"

    def _attribute(self, expr: cst.Attribute) -> str | None:
        attr = expr.attr.value
        if self._module_path(expr):
            return None if self._plain_module_value(expr) else f"`{_nodes.code_of(expr)}` is a module's value this file does not show"
        if attr == "data" and may_be_packed(self.values, expr.value):
            return f"`{_nodes.code_of(expr)}` may be a `PackedSequence`'s data, which can require grad (this file packs sequences)"
        if attr in ("data", "shape", "dtype", "device", "is_cuda", "requires_grad", "ndim"):
            return None
        if attr in ("T", "mT", "real", "imag") and self.missing(expr.value) is None:
            return None
        if self.dataset_missing(expr.value) is None:
            return None  # a torchvision data set's own tensors (``train_data.test_data``)
        return self.parsed_value_missing(expr) if self.is_parsed(expr.value) else self.self_attribute_missing(expr)

    def _call(self, call: cst.Call) -> str | None:
        shown = f"`{_nodes.code_of(call.func)}(...)`"
        requires = _nodes.keyword_arg(call, "requires_grad")
        if requires is not None and not (isinstance(requires.value, cst.Name) and requires.value.value == "False"):
            return f"{shown} is given `requires_grad=`"
        if self._is_variable(call.func):
            return self.missing(call.args[0].value) if call.args and not call.args[0].keyword else f"{shown} is not understood"
        torch_names = self._torch_names(call.func) or self._legacy_alias(call.func)
        if torch_names:
            return self._torch_call(call, torch_names, shown)
        qualified = self.names(call.func)
        if any(q.startswith("numpy.") or q.startswith("math.") for q in qualified):
            return None  # NumPy and math never make a torch tensor that requires grad
        if isinstance(call.func, cst.Name) and qualified == {f"builtins.{call.func.value}"}:
            if call.func.value in BUILTIN_NEVER_GRAD:
                return None
            if call.func.value == "next" and len(call.args) == 1:
                return self.next_missing(call.args[0].value)
            if call.func.value in BUILTIN_PURE:
                return self.args_missing(call)
        if isinstance(call.func, cst.Attribute) and not self._module_path(call.func):
            return self._method(call, call.func.attr.value, call.func.value)
        summary = self.values.call_returns(call)  # a function of this file or of another of the run
        if summary is not None and summary.grad_free:
            return None
        return f"{shown} is a call this file does not show to return a tensor without grad"

    def _method(self, call: cst.Call, method: str, receiver: cst.BaseExpression) -> str | None:
        if method in NEVER_GRAD_METHODS:
            return None
        if method == "requires_grad_":
            return f"`.{method}()` makes it require grad"
        if method == "type" and call.args:
            qualified = self.names(call.args[0].value)
            if any(q.startswith("torch.") and q.rpartition(".")[2] in INTEGER_TYPES for q in qualified):
                return None
        if method == "new":
            if not call.args or _given_sizes(call):
                return None  # sizes: a new, empty tensor
            if len(call.args) == 1 and call.args[0].star == "*" and all(
                isinstance(v, (cst.Tuple, cst.List)) and len(v.elements) >= 2 for v in self._values_of(call.args[0].value)
            ):
                return None  # x.new(*size), size = (a, b): sizes too
            return self.args_missing(call)
        if method in SHAPE_METHODS or method in RANDOM_FILLS:
            return self.missing(receiver)  # sizes, dims, indices, a tensor giving its shape or type, numbers
        return self.missing(receiver) or self.args_missing(call)

    def _torch_call(self, call: cst.Call, torch_names: set[str], shown: str) -> str | None:
        last = {q.rpartition(".")[2] for q in torch_names}
        legacy = torch_api.legacy_tensor_type(torch_names)
        if legacy is not None or "Tensor" in last:
            if last <= INTEGER_TYPES:
                return None  # an integer tensor cannot require grad
            if _given_sizes(call):
                return None  # sizes (a tensor among them is read as a number): a new tensor
            return self.args_missing(call)  # given a tensor, a legacy constructor keeps its grad
        if last & FACTORIES:
            return None
        if last & FROM_DATA and call.args and call.args[0].keyword is None and not call.args[0].star:
            return self.missing(call.args[0].value)  # its grad is its first argument's
        if last & NOT_PURE_TORCH:
            return f"{shown} may return a tensor that requires grad"
        if last & SHAPE_METHODS and call.args and call.args[0].keyword is None:
            return self.missing(call.args[0].value)  # the rest: sizes, dims, indices
        return self.args_missing(call)

    def args_missing(self, call: cst.Call) -> str | None:
        return _first(self.missing(a.value) for a in call.args if a.keyword is None or a.keyword.value != "out")

    def _is_variable(self, func: cst.BaseExpression) -> bool:
        names = self.names(func)
        return bool(names) and names <= {"torch.autograd.Variable", "torch.autograd.variable.Variable"}

    # -- names ----------------------------------------------------------------------------------
    def _name(self, read: cst.Name) -> str | None:
        reach = self.values.reach(read)
        if reach.why is not None:
            return reach.why
        flow = None if reach.whole else (read, list(reach.bindings))
        return _first(self._binding(read.value, n) for n in reach.bindings) or self._changes(read.value, reach.scope, flow)

    def _changes(self, name: str, scope: cst.CSTNode, flow: tuple[cst.Name, list[cst.CSTNode]] | None) -> str | None:
        """A change in place of what ``name`` holds in ``scope`` at the read of ``flow`` (assumed
        none while checked: an assumption the proof memory tracks like the others)."""
        key = ("changes", id(scope), name, flow_key(self, flow))
        return self.prove(key, lambda: changes_of(self, name, scope, flow if key[-1] is not None else None))

    def _plain_module_value(self, expr: cst.BaseExpression) -> bool:
        """``torch.float32``, ``torch.FloatTensor``, ``np.newaxis``, ``math.pi``: no tensor."""
        for q in self.names(expr):
            last = q.rpartition(".")[2]
            if q.startswith(("numpy.", "math.")) or (q.startswith("torch.") and (last in TORCH_TYPES or last.endswith("Tensor"))):
                continue
            return False
        return bool(self.names(expr))

    def _binding(self, name: str, node: cst.CSTNode) -> str | None:
        """Why the value bound at ``node`` may require grad (None: it cannot)."""
        bound = self.values.bound(node)
        if bound.kind in (PARAM, OTHER):
            return bound.why
        return self.prove(("binding", id(node)), lambda: self._binding_value(name, node))

    def _binding_value(self, name: str, node: cst.CSTNode) -> str | None:
        bound = self.values.bound(node)
        if bound.kind == ITEM:
            return self.elements_missing(bound.value, name)
        if bound.kind == AUGMENTED:
            return self.missing(bound.value) or (self._name(node) if isinstance(node, cst.Name) else "?")
        return self.missing(bound.value)


def _given_sizes(call: cst.Call) -> bool:
    """Two or more positional arguments and no ``*``: sizes (``x.new(2, 3)``,
    ``torch.FloatTensor(2, n)``), whatever values they hold."""
    positional = [a for a in call.args if a.keyword is None]
    return len(positional) >= 2 and not any(a.star for a in call.args)


def _first(found: Iterator[str | None] | Sequence[str | None]) -> str | None:
    for item in found:
        if item is not None:
            return item
    return None


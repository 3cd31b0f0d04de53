"""What kind of value an expression is: a tensor, or an object of a project class that moves
itself. One of the facts about values (:mod:`torchfix_device.facts`), on the module's shared
resolution of names (:mod:`.values`).

**A tensor, provably.** ``Variable(t)`` gives a new tensor that shares ``t``'s storage and needs
no grad: for any object ``h`` whose ``.data`` is a tensor, ``Variable(h.data)`` is exactly
``h.data.detach()``; ``h.detach()`` is the same only where ``h`` is a tensor (a
``PackedSequence`` has a ``.data`` tensor but no ``.detach()``). :func:`is_tensor` says so on
this evidence, from this file alone:

- a guard around the use that says so: the true branch of ``if isinstance(h, Variable):``
  (``torch.Tensor``, ``nn.Parameter``, a tuple of these), ``type(h) == Variable`` /
  ``type(h) is Variable``, ``torch.is_tensor(h)``, where the branch does not bind ``h`` again;
- a value made by torch: ``Variable(...)``, ``nn.Parameter(...)``, a torch function or a method of
  such a value that gives one tensor (``torch.cat``, ``x.view(...)``; and every ``torch.NAME`` and C
  method torch's own schemas show gives one, :mod:`torchfix_device.torch_api`), a method only tensors
  have (:func:`tensor_by_method`: ``x.eq(y)``), arithmetic with such a value, an index into one;
- a name every binding of which that may reach the read is such a value;
- an element of what a torch function returns as a pair of tensors (``torch.max(x, 1)[1]``,
  ``_, pred = torch.max(out, 1)``, ``x.sort(0)[0]`` of a tensor ``x``), a comparison of a
  tensor with a tensor or a number (``pred == y``), ``t.data`` and ``t.T`` of a tensor;
  ``a if c else b`` where both ``a`` and ``b`` are;
- the output of a ``torch.nn`` layer that returns one tensor (``nn.Linear``, activations,
  ``nn.Sequential`` of such), called through a name every binding of which is one (moved or
  not: ``.cuda()``, ``.to(...)``, ``.eval()``).

A parameter, a project module's output (an RNN returns a tuple), a project call: no evidence.

**A tensor, by its methods.** :func:`tensor_by_method`: in a file that imports torch and no
other array library (:data:`OTHER_ARRAY_LIBRARIES`: TensorFlow's tensors have ``.numpy()`` and
``.cpu()``, pandas' ``.eq()``), and whose own classes define no method of that name, a value
on which a method only torch tensors have among the libraries the file imports is called
(``x.numpy()``, ``.cpu()``, ``.eq(y)``, ``.view_as(y)``, ``.long()``; NumPy's arrays have
none of them) is a tensor where that call succeeds. :func:`numpy_doubt` says why ``.numpy()``
is no such evidence in a file. In a file that packs sequences, ``x.data`` may be a
``PackedSequence``'s, which can require grad (:func:`may_be_packed`).

**An object that moves itself.** :func:`moves_itself`: may the receiver of a ``.cuda()`` /
``.to()`` be an instance of a project class with its own ``cuda()``/``to()`` (which need not
return it)? ``storage.cuda()`` on such an object is not ``storage = storage.to(device)``. The
classes are those the file reaches by import (``CodemodView.own_move_classes``,
:mod:`.project_classes`) and its own:

- :data:`OWN`: a binding of it is a call of such a class (``self.s = RolloutStorage(...)``), of
  its functions (``DocReader.load(...)``, unpacked too) or of a function of this file returning
  one: the move is left for manual review;
- :data:`UNKNOWN`: such classes exist and nothing shows what it is (a parameter, an item): the
  fix needs ``--unsafe-fixes``;
- None: no such class exists, or every binding (every ``return`` of a function of this file
  it calls) is a torch object, a move of one, or an instance of another class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts import values as facts_values
from torchfix_device.facts.methods import SELF_RETURNING
from torchfix_device.facts.project_classes import TEXT_MARKERS, classes_in, cuda_taking_nothing
from torchfix_device.facts.tensor_clues import (  # noqa: F401 - part of this fact's interface
    ONE_TENSOR_LAYERS, TENSOR_ONLY_METHODS, TORCH_ONLY_METHODS, layer_class, method_doubt, numpy_doubt, tensor_by_method,
)
from torchfix_device.facts.values import PART, VALUE, ModuleValues
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.syntax.bindings import names_bound_by
from torchfix_device.torch_api import ONE_TENSOR_METHODS, is_torch_module_class, torch_operators

if TYPE_CHECKING:
    from torchfix_device.syntax.lookup import CodemodView

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
    "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "cat", "stack", "matmul", "mm",
    "bmm", "exp", "log", "sigmoid", "tanh", "relu", "softmax", "log_softmax", "sum", "mean", "abs", "tril",
    "triu", "normal", "bernoulli", "multinomial", "diag", "outer",
    "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ByteTensor",
})
"""``torch.<name>`` functions (and legacy constructors) whose result is one tensor."""
TENSOR_METHODS = frozenset({
    "view", "reshape", "expand", "expand_as", "view_as", "reshape_as", "repeat", "permute", "transpose", "t",
    "unsqueeze", "squeeze", "flatten", "contiguous", "clone", "detach", "float", "double", "half", "bfloat16",
    "long", "int", "short", "byte", "char", "bool", "cuda", "cpu", "to", "type_as", "new", "new_zeros",
    "new_ones", "new_full", "new_empty", "new_tensor", "fill_", "zero_", "normal_", "uniform_", "masked_fill",
    "masked_fill_", "flip", "mul", "add", "sub", "div", "pow", "sum", "mean", "exp", "log", "sqrt", "rsqrt",
    "sin", "cos", "abs", "neg", "reciprocal", "cumsum", "cumprod", "tril", "triu", "sigmoid", "tanh",
    "softmax", "log_softmax", "logical_not", "unfold", "eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin",
    "multinomial", "masked_select", "index_select", "gather", "clamp", "clamp_", "random_", "bernoulli_",
    "exponential_", "add_", "mul_", "sub_", "div_",
})
"""Tensor methods whose result, called on a tensor, is one tensor."""
GIVING_A_TENSOR = TENSOR_METHODS | ONE_TENSOR_METHODS  # and those torch's schemas show give one (torch_api)
MAX_DEPTH = 12
PACKING = frozenset({"pack_padded_sequence", "pack_sequence", "PackedSequence"})
PAIR_FUNCTIONS = frozenset({"max", "min", "median", "mode", "kthvalue", "sort", "topk"})
"""``torch.max(x, 1)`` & co. (with a dimension, or ``k``) and ``x.max(1)``: a pair of tensors
(values, indices); ``sort``/``topk`` always."""


def is_tensor(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """True where ``expr`` is provably a tensor when it is evaluated (see the module docstring)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name) and _guarded(values, expr):
        return True
    if isinstance(expr, cst.Name):
        return _name_is_tensor(values, expr, depth)
    if isinstance(expr, cst.BinaryOperation):  # a tensor in arithmetic gives a tensor (or raises)
        return is_tensor(values, expr.left, depth + 1) or is_tensor(values, expr.right, depth + 1)
    if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
        return is_tensor(values, expr.expression, depth + 1)
    if isinstance(expr, cst.IfExp):  # `a if c else b`: whichever is taken
        return is_tensor(values, expr.body, depth + 1) and is_tensor(values, expr.orelse, depth + 1)
    if isinstance(expr, cst.Comparison):  # `pred == y`: elementwise, a tensor of bools
        return _elementwise_comparison(values, expr, depth)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in ("data", "T") and is_tensor(values, expr.value, depth + 1)
    if isinstance(expr, cst.Subscript):  # an element, row or slice of a tensor; a part of a pair
        return is_pair(values, expr.value, depth + 1) or is_tensor(values, expr.value, depth + 1)
    if not isinstance(expr, cst.Call):
        return False
    if layer_class(values, expr.func) in ONE_TENSOR_LAYERS:
        return True
    names = values.names(expr.func)
    if names and names <= MAKERS:
        return True
    torch_names = values.torch_names(expr.func)
    if torch_names:
        return not names - torch_names and ({q.rpartition(".")[2] for q in torch_names} <= TORCH_FUNCTIONS
                                            or torch_operators(torch_names) is not None)  # `torch.ger`: torch's schemas
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in GIVING_A_TENSOR and not values.module_path(expr.func):
        # a method only tensors have (`x.eq(y)`; not `.cuda()`, which modules have) gives a tensor
        tensor_only = expr.func.attr.value in TENSOR_ONLY_METHODS and tensor_by_method(values, expr)
        return tensor_only or is_tensor(values, expr.func.value, depth + 1)
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in PAIR_FUNCTIONS | {"max", "min"} and not expr.args:
        return is_tensor(values, expr.func.value, depth + 1)  # `x.max()`: a full reduction
    return False


def _name_is_tensor(values: "ModuleValues", name: cst.Name, depth: int) -> bool:
    """Every binding that may reach ``name`` binds a tensor: ``name = <tensor>``, or a part of a
    pair of tensors (``_, pred = torch.max(out, 1)``)."""
    reach = values.reach(name)
    if reach.why is not None or not reach.bindings:
        return False
    for node in reach.bindings:
        bound = values.bound(node)
        if bound.kind == VALUE:
            if bound.value is name or not is_tensor(values, bound.value, depth + 1):
                return False
        elif not (bound.kind == PART and is_pair(values, bound.value, depth + 1)):
            return False
    return True


def is_pair(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``expr`` is a call that returns a pair of tensors (values, indices): ``torch.max(x, 1)``
    (a torch function of :data:`PAIR_FUNCTIONS` with more than one argument, or ``sort``/``topk``),
    or such a method of a tensor (``x.max(1)``, ``x.sort()``)."""
    if depth > MAX_DEPTH or not isinstance(expr, cst.Call) or nodes.has_star_args(expr):
        return False
    func = expr.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in PAIR_FUNCTIONS:
        return False
    several = len(expr.args) > 1 or func.attr.value in ("sort", "topk")
    if {q.rpartition(".")[2] for q in values.torch_names(func)} == {func.attr.value}:
        return several if func.attr.value != "sort" else True
    if values.module_path(func):
        return False
    has_dim = bool(expr.args) and not _tensor_argument(values, expr.args[0].value, depth)
    return (has_dim or func.attr.value in ("sort", "topk")) and is_tensor(values, func.value, depth + 1)


def _tensor_argument(values: "ModuleValues", arg: cst.BaseExpression, depth: int) -> bool:
    """``x.max(y)``'s ``y`` may be a tensor (then the elementwise maximum, not a pair)."""
    return not isinstance(arg, (cst.Integer, cst.UnaryOperation)) and (is_tensor(values, arg, depth + 1) or not isinstance(arg, cst.Name))


def _elementwise_comparison(values: "ModuleValues", expr: cst.Comparison, depth: int) -> bool:
    if len(expr.comparisons) != 1:
        return False
    target = expr.comparisons[0]
    if not isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)):
        return False
    sides = (expr.left, target.comparator)
    if any(nodes.is_none(s) or isinstance(s, (cst.SimpleString, cst.ConcatenatedString)) for s in sides):
        return False  # `t == None` is False, not a tensor
    return any(is_tensor(values, s, depth + 1) for s in sides)




def may_be_packed(values: "ModuleValues", receiver: cst.BaseExpression) -> bool:
    """Whether ``receiver.data`` may be a ``PackedSequence``'s data: the file packs sequences and
    nothing shows ``receiver`` is a tensor."""
    packs = values.facets.get("packs sequences")
    if packs is None:  # one walk per module version
        packs = values.facets["packs sequences"] = any(
            node.value in PACKING for node in traversal.of_classes(values.module, cst.Name)
        )
    return packs and not is_tensor(values, receiver)


def _guarded(values: "ModuleValues", name: cst.Name) -> bool:
    """``name`` is read in the true branch of a test that says it is a tensor, and that branch
    does not bind it again."""
    child: cst.CSTNode = name
    above = values.parent(name)
    while above is not None and not isinstance(above, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)):
        if isinstance(above, cst.If) and child is above.body and _says_tensor(values, above.test, name.value):
            return not _binds(above.body, name.value)
        if isinstance(above, cst.IfExp) and child is above.body and _says_tensor(values, above.test, name.value):
            return True
        child, above = above, values.parent(above)
    return False


def _says_tensor(values: "ModuleValues", test: cst.BaseExpression, name: str) -> bool:
    if isinstance(test, cst.Call) and len(test.args) == 2 and not any(a.keyword or a.star for a in test.args):
        if not _is_name(test.args[0].value, name) or values.names(test.func) != {"builtins.isinstance"}:
            return False
        classes = test.args[1].value
        parts = [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]
        return all(_is_tensor_class(values, p) for p in parts)
    if isinstance(test, cst.Call) and len(test.args) == 1 and not (test.args[0].keyword or test.args[0].star):
        return _is_name(test.args[0].value, name) and values.names(test.func) == {"torch.is_tensor"}
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
                and values.names(typed.func) == {"builtins.type"}
                and _is_tensor_class(values, cls)
            ):
                return True
    return False


def _is_tensor_class(values: "ModuleValues", expr: cst.BaseExpression) -> bool:
    names = values.names(expr)
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


OWN = "own"
UNKNOWN = "unknown"
_OTHER = "other"
SAME_KIND_METHODS = frozenset({"to", "cuda", "cpu", "float", "double", "half", "long", "int", "type", "detach", "clone", "contiguous", "eval", "train"})
"""Methods of tensors and modules returning an object of the same kind (a move of it)."""


def moves_itself(codemod: "CodemodView", receiver: cst.BaseExpression, move: cst.Call | None = None) -> tuple[str, str] | None:
    """(:data:`OWN` or :data:`UNKNOWN`, the classes concerned) for a move on ``receiver``, or
    None when it is not in doubt (see the module docstring). A ``move`` given an argument
    (``x.cuda(0)``; a ``*args`` may be empty) is no ``cuda(self)`` that takes nothing."""
    here = _local_classes(codemod)
    classes = codemod.own_move_classes | here
    if move is not None and isinstance(move.func, cst.Attribute) and move.func.attr.value == "cuda" and any(not a.star for a in move.args):
        classes -= codemod.cuda_taking_nothing | (_local_taking_nothing(codemod, here) - codemod.own_move_classes)  # the run's, else the file's
    if not classes:
        return None
    kind, name = _kind(codemod, receiver, classes, frozenset())
    if kind == OWN:
        return OWN, name
    if kind == UNKNOWN:
        return UNKNOWN, ", ".join(f"`{c}`" for c in sorted(classes))
    return None


def _local_classes(codemod: "CodemodView") -> frozenset[str]:
    code = getattr(codemod, "source_code", None)
    return facts_values.of(codemod).facet("own move classes here", lambda: (
        classes_in(code) if code is not None and any(marker in code for marker in TEXT_MARKERS) else frozenset()))


def _local_taking_nothing(codemod: "CodemodView", here: frozenset[str]) -> frozenset[str]:
    """Those of this file's classes ``here`` the run did not give whose ``cuda()`` takes nothing (parsed only then)."""
    code = getattr(codemod, "source_code", "") if here - codemod.own_move_classes else ""
    return facts_values.of(codemod).facet("cuda taking nothing here", lambda: cuda_taking_nothing(code) & here) if code else frozenset()


def _kind(codemod: "CodemodView", expr: cst.BaseExpression, classes: frozenset[str], seen: frozenset[str]) -> tuple[str, str]:
    if isinstance(expr, cst.Call):
        return _call_kind(codemod, expr, classes, seen)
    if isinstance(expr, cst.Name):
        values = facts_values.of(codemod)
        key = f"{expr.value}@{id(values.enclosing(expr, (cst.FunctionDef, cst.Lambda)))}"  # the name in its scope
        reach = values.reach(expr)
        if key in seen or reach.why is not None or not reach.bindings:
            return (_OTHER if key in seen else UNKNOWN), ""
        found = []
        for bound in map(values.bound, reach.bindings):  # one binding that may be an instance decides
            kind = _kind(codemod, bound.value, classes, seen | {key}) if bound.kind in (VALUE, PART) else (UNKNOWN, "")
            found.append(kind if bound.kind == VALUE or kind[0] == OWN else (UNKNOWN, ""))
        return _combine(found)
    if m_self_attribute(expr):
        attr = cst.ensure_type(expr, cst.Attribute).attr.value
        if "self." + attr in seen:
            return _OTHER, ""
        found = _self_attribute_values(facts_values.of(codemod), expr, attr)
        if not found:
            return UNKNOWN, ""
        return _combine([_kind(codemod, v, classes, seen | {"self." + attr}) for v in found])
    return UNKNOWN, ""


def _call_kind(codemod: "CodemodView", call: cst.Call, classes: frozenset[str], seen: frozenset[str]) -> tuple[str, str]:
    spelt = nodes.dotted_name(call.func) or ""
    last = spelt.rpartition(".")[2]
    if last in classes:
        return OWN, last
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in SAME_KIND_METHODS:
        return _kind(codemod, call.func.value, classes, seen)
    owner = spelt.rpartition(".")[0].rpartition(".")[2]
    if owner in classes:
        return OWN, owner  # `DocReader.load(...)`: what a class's own function returns may be an instance
    values = facts_values.of(codemod)
    function = values.function_called(call.func)  # a module-level function of this file: its returns
    returned = [r.value for r in traversal.function_returns(function) if r.value] if function else []
    if returned and function.name.value not in seen and values.parent(function) is values.module:
        return _combine([_kind(codemod, v, classes, seen | {function.name.value}) for v in returned])
    if any(q.startswith("torch.") for q in codemod.qualified_names(call.func)):
        return _OTHER, ""
    if isinstance(call.func, cst.Name) and call.func.value in _local_class_names(codemod):
        return _OTHER, ""  # an instance of a class of this file without its own move
    if last in codemod.known_classes:
        return _OTHER, ""  # an instance of a class of the run without its own move
    return UNKNOWN, ""


def _local_class_names(codemod: "CodemodView") -> frozenset[str]:
    values = facts_values.of(codemod)
    return values.facet("class names", lambda: frozenset(
        n.name.value for n in traversal.walk_statements(values.module) if isinstance(n, cst.ClassDef)))


def _combine(kinds: list[tuple[str, str]]) -> tuple[str, str]:
    return next((kind for wanted in (OWN, UNKNOWN) for kind in kinds if kind[0] == wanted), (_OTHER, ""))


def bound_values(values: ModuleValues, name: cst.Name) -> list[cst.BaseExpression] | None:
    """The values the bindings of ``name`` that may reach this read assign (``name = value``,
    ``name: T = value``, a part of a literal tuple); None when one of them is something else (a
    parameter, a loop target, an import, ``+=``, unpacking) or where that cannot be told."""
    reach = values.reach(name)
    if reach.why is not None or not reach.bindings:
        return None
    found = []
    for node in reach.bindings:
        bound = values.bound(node)
        if bound.kind != VALUE:
            return None
        found.append(bound.value)
    return found


def _self_attribute_values(values: ModuleValues, expr: cst.CSTNode, attr: str) -> list[cst.BaseExpression]:
    """The values assigned to ``self.<attr>`` in the class around ``expr``."""
    cls = values.enclosing(expr, cst.ClassDef)
    if cls is None:
        return []
    found = []
    for node in traversal.walk(cls):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and m_self_attribute(node.targets[0].target, attr):
            found.append(node.value)
    return found


def m_self_attribute(node: cst.CSTNode, attr: str | None = None) -> bool:
    """``self.<attr>`` (any attribute when ``attr`` is None)."""
    return (
        isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
        and (attr is None or node.attr.value == attr)
    )


def module_classes(values: ModuleValues) -> dict[int, cst.ClassDef]:
    """Classes of the module that subclass ``torch.nn`` classes, directly or through others of
    the module (memoised per module version)."""
    known = values.facets.get("module classes")
    if known is None:
        classes = [n for n in traversal.walk_statements(values.module) if isinstance(n, cst.ClassDef)]
        in_module_scope = {id(n) for n in traversal.module_scope_statements(values.module) if isinstance(n, cst.ClassDef)}
        known = {}
        names: set[str] = set()
        changed = True
        while changed:
            changed = False
            for cls in classes:
                if id(cls) in known:
                    continue
                for base in cls.bases:  # evaluated where the class statement stands
                    qualified = values.view.qualified_names(base.value, in_module_scope=id(cls) in in_module_scope)
                    if any(is_torch_module_class(q) for q in qualified) or nodes.dotted_name(base.value) in names:
                        known[id(cls)] = cls
                        names.add(cls.name.value)
                        changed = True
                        break
        values.facets["module classes"] = known
    return known


DATASET_BASES = frozenset({
    "torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset", "torch.utils.data.IterableDataset",
    "torch.utils.data.dataset.IterableDataset", "torchvision.datasets.VisionDataset",
    "torchvision.datasets.vision.VisionDataset",
})
"""Classes whose subclasses are data sets: their items go to a ``DataLoader`` and its workers."""


def is_dataset_class(values: ModuleValues, cls: cst.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
    """``cls`` subclasses torch's (or torchvision's) ``Dataset``, directly or through classes of
    the module."""
    for base in cls.bases:
        if values.names(base.value) & DATASET_BASES:
            return True
        name = nodes.dotted_name(base.value)
        if name is not None and name not in seen:
            local = [c for c in traversal.walk_statements(values.module) if isinstance(c, cst.ClassDef) and c.name.value == name]
            if len(local) == 1 and is_dataset_class(values, local[0], seen | {name}):
                return True
    return False


STATE_LOADERS = ("torch.nn.", "torch.optim.")
"""Where the classes whose ``load_state_dict`` copies each tensor into one of their own live (a
module's parameters and buffers; an optimizer's state, cast to its parameters' devices)."""


def copies_state_in(values: ModuleValues, receiver: cst.BaseExpression, depth: int = 0) -> bool:
    """``receiver.load_state_dict(state)`` copies ``state``'s tensors to where ``receiver``'s own
    are: every value ``receiver`` may hold is made by a ``torch.nn`` or ``torch.optim`` class, or
    by an ``nn.Module`` class of this file none of whose classes defines ``load_state_dict``."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(receiver, cst.Call):
        if isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value in SELF_RETURNING:
            return copies_state_in(values, receiver.func.value, depth + 1)
        names = values.names(receiver.func)
        if names and all(q.startswith(STATE_LOADERS) and not q.startswith("torch.optim.lr_scheduler.") for q in names):
            return True  # (a scheduler's `load_state_dict` keeps what it is given)
        classes = {c.name.value for c in module_classes(values).values()}
        return isinstance(receiver.func, cst.Name) and receiver.func.value in classes and not _defines_state_loading(values) \
            and values.function_called(receiver.func) is None and _class_bound(values, receiver.func)
    if isinstance(receiver, cst.Name) and receiver.value == "self":
        cls = values.enclosing(receiver, cst.ClassDef)  # a method's own module (the file's subclasses too)
        return cls is not None and id(cls) in module_classes(values) and not _defines_state_loading(values)
    if isinstance(receiver, cst.Name):
        found = bound_values(values, receiver)
    elif m_self_attribute(receiver):
        found = _self_attribute_values(values, receiver, cst.ensure_type(receiver, cst.Attribute).attr.value)
    else:
        return False
    return bool(found) and all(copies_state_in(values, v, depth + 1) for v in found)


def _class_bound(values: ModuleValues, name: cst.Name) -> bool:
    reach = values.reach(name)
    return reach.why is None and len(reach.bindings) == 1 and isinstance(reach.bindings[0], cst.ClassDef)


def _defines_state_loading(values: ModuleValues) -> bool:
    """A class of this file defines ``load_state_dict`` (memoised per module version)."""
    return values.facet("defines load_state_dict", lambda: any(
        isinstance(c, cst.ClassDef) and any(isinstance(s, cst.FunctionDef) and s.name.value == "load_state_dict" for s in c.body.body)
        for c in traversal.walk_statements(values.module)
    ))

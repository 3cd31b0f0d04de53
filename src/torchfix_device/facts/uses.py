"""How a value is used: as a Python number, or as a tensor? One of the facts about values
(:mod:`torchfix_device.facts`), asked where a PyTorch 0.3 number that is now a 0-dim tensor
(:func:`torchfix_device.facts.sizes.number_in_03`) may become a number again with ``.item()``
(TFD019); where it is written to is :mod:`.stores`.

:func:`uses_of` follows a value from where it is made to every place that takes it: through
arithmetic (``100. * correct / total``), a binding (``best = ...``, then each read that binding
may reach), a counter (``correct += ...`` where every binding that may reach is a number
literal or such an addition, then the counter's reads), the elements of a literal list, tuple
or dict (an element unpacked by position, ``a, b = x, v`` or ``return x, v`` where every call
is unpacked so, ``loss, n = f()``: the name it is bound to), a list that starts empty and grows
by it (``xs += [v]``, ``xs.append(v)``: the list's reads, holding it), and the ``return`` of a
function of this file to the calls of it in this file and in the other files of the run
(:func:`foreign_uses`). Each place is a :class:`Use`:

- where a 0-dim tensor breaks what a number did (the number was meant): ``KEY`` (a key of a
  dict shown to be one: ``d[v]``, ``d[v] += 1``, ``d.get(v)``, ``v in d``: tensors hash by
  identity, so the lookup raises ``KeyError``), ``JSON`` (``json.dump``/``json.dumps``:
  ``TypeError``), ``ACTION`` (``env.step(v)`` of a ``gym`` environment: gym checks the action's
  type), ``COUNTER`` (added to a counter that starts from a number literal);
- ``INDEX``: an index of a container not shown to be a dict, a sequence or a tensor
  (``vocab.idx2word[v]``): a number was meant, but what the container does with a tensor is
  not shown;
- ``NUMBER``: where a number does what the tensor did, or what the legacy code meant: arithmetic
  with a tensor, formatting (``%``, ``format``, f-strings), ``print``, ``float()``/``int()``,
  comparisons and tests, ``math``/NumPy functions, a list's index, a statement of its own;
- ``TENSOR``: where only a tensor will do: an attribute or method (``v.item()``,
  ``v.backward()``), an index into it (``row[0]``), a torch function other than a constructor
  (``torch.exp(v)``), a counter that starts as a tensor (``torch.zeros(1)``);
- ``UNKNOWN``: anything else (an argument of another function, an attribute set, a ``return``
  of a function not called in this file, a container whose fate is not followed).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts import kinds, project_attributes
from torchfix_device.facts.environments import gym_environment_ids
from torchfix_device.facts.methods import method_calls
from torchfix_device.facts.values import AUGMENTED, VALUE
from torchfix_device.syntax import nodes

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

MAX_DEPTH = 16


class Use(enum.Enum):
    KEY = "a dict key"
    JSON = "written as JSON"
    ACTION = "a gym action"
    COUNTER = "added to a counter that starts from a number"
    INDEX = "an index of a container not shown to be a dict or a sequence"
    NUMBER = "used as a number"
    TENSOR = "used as a tensor"
    UNKNOWN = "used where a number is not shown to do"
    GRAD = "made to require grad"
    FLOAT_DATA = "set as the data of a layer's parameter"
    MATMUL = "a matrix operand with a floating point tensor"
    FLOAT_LAYER = "the input of a layer that refuses integer tensors"


MEANT = frozenset({Use.KEY, Use.JSON, Use.ACTION, Use.COUNTER, Use.INDEX})
"""Uses that show a number was meant."""


@dataclass(frozen=True)
class Place:
    """One use of a value: what kind, and the node where it is (for a message)."""

    use: Use
    node: cst.CSTNode


NUMBER_BUILTINS = frozenset({"float", "int", "str", "repr", "print", "bool", "format", "range", "len", "hash", "divmod"})
FLOWING_BUILTINS = frozenset({"max", "min", "abs", "round", "sum", "sorted"})
"""Builtins whose result is the value (or made from it): followed."""
TORCH_TAKING_NUMBERS = frozenset({"save", "tensor", "as_tensor", "full", "manual_seed", "arange", "zeros", "ones", "randn", "rand", "empty"})
NUMBER_ARGUMENT_METHODS = frozenset({"fill_", "add", "add_", "mul", "mul_", "sub", "sub_", "div", "div_", "pow", "masked_fill", "masked_fill_", "clamp", "index_fill_"})
"""Tensor methods that take a Python number where a 0-dim tensor was given."""
PLAIN_DICT_MAKERS = frozenset({"builtins.dict", "collections.OrderedDict"})
DICT_MAKERS = PLAIN_DICT_MAKERS | {"collections.defaultdict", "collections.Counter"}
SEQUENCE_MAKERS = frozenset({"builtins.list", "builtins.tuple", "builtins.range", "builtins.str"})
KEY_METHODS = frozenset({"get", "pop", "setdefault", "__getitem__", "__contains__"})
GROWING = frozenset({"append", "extend", "insert"})
"""List methods that add to a list: what it already holds is not used."""


def uses_of(values: "ModuleValues", expr: cst.BaseExpression) -> list[Place]:
    """Every place the value of ``expr`` reaches (see the module docstring)."""
    found: list[Place] = []
    _context(values, expr, found, 0, frozenset(), held=False)
    return found


def _context(values: "ModuleValues", expr: cst.CSTNode, found: list[Place], depth: int, seen: frozenset[int], held: bool) -> None:
    """The uses of the value ``expr`` evaluates to (``held``: a container holds it)."""
    def add(use: Use, node: cst.CSTNode = expr) -> None:
        found.append(Place(Use.UNKNOWN if held and use is Use.TENSOR else use, node))

    if depth > MAX_DEPTH:
        return add(Use.UNKNOWN)
    parent = values.parent(expr)
    if isinstance(parent, cst.BinaryOperation):
        if isinstance(parent.operator, cst.Modulo) and parent.right is expr and isinstance(parent.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return add(Use.NUMBER)  # "%d" % v
        other = parent.right if parent.left is expr else parent.left
        if kinds.is_tensor(values, other):
            return add(Use.NUMBER, parent)  # a tensor's arithmetic takes a number as well
        return _context(values, parent, found, depth + 1, seen, held)
    if isinstance(parent, cst.UnaryOperation):
        return add(Use.NUMBER) if isinstance(parent.operator, cst.Not) else _context(values, parent, found, depth + 1, seen, held)
    if isinstance(parent, cst.Comparison):
        return _comparison(values, parent, expr, add)
    if isinstance(parent, cst.ComparisonTarget):
        return _comparison(values, cst.ensure_type(values.parent(parent), cst.Comparison), expr, add)
    if isinstance(parent, cst.BooleanOperation):
        return _context(values, parent, found, depth + 1, seen, held)
    if isinstance(parent, cst.IfExp):
        return add(Use.NUMBER) if parent.test is expr else _context(values, parent, found, depth + 1, seen, held)
    if isinstance(parent, cst.Attribute):
        call = values.parent(parent)
        if held and parent.attr.value in GROWING and isinstance(call, cst.Call) and call.func is parent:
            return add(Use.NUMBER)  # `xs.append(w)`: the list grows, what it holds is not used
        return add(Use.TENSOR)
    if isinstance(parent, cst.Subscript):
        return add(Use.TENSOR)  # `v[0]`: only the tensor has elements (the index itself is an Index)
    if isinstance(parent, cst.Index):
        return _index(values, parent, add)
    if isinstance(parent, cst.Slice):
        return add(Use.NUMBER)
    if isinstance(parent, cst.Arg):
        return _argument(values, parent, expr, found, depth, seen, held, add)
    if isinstance(parent, cst.Call):
        return add(Use.TENSOR)  # `v(...)`
    if isinstance(parent, cst.FormattedStringExpression):
        return add(Use.NUMBER)
    if isinstance(parent, (cst.Element, cst.StarredElement)):
        return _element(values, parent, found, depth, seen, held, add)
    if isinstance(parent, cst.DictElement):
        if parent.key is expr:
            return add(Use.KEY)
        return _context(values, cst.ensure_type(values.parent(parent), cst.BaseExpression), found, depth + 1, seen, True)
    if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is expr:
        return _assigned(values, parent, found, depth, seen, held, add)
    if isinstance(parent, cst.AugAssign) and parent.value is expr:
        return _counter(values, parent, found, depth, seen, held, add)
    if isinstance(parent, cst.Return):
        return _returned(values, parent, found, depth, seen, held, add)
    if isinstance(parent, (cst.If, cst.While, cst.Assert)) and parent.test is expr:
        return add(Use.NUMBER)
    if isinstance(parent, cst.Expr):
        return add(Use.NUMBER)
    return add(Use.UNKNOWN)


def _comparison(values: "ModuleValues", comparison: cst.Comparison, expr: cst.CSTNode, add) -> None:  # noqa: ANN001
    for target in comparison.comparisons:
        if isinstance(target.operator, (cst.In, cst.NotIn)) and comparison.left is expr:
            kind = container_kind(values, target.comparator)
            return add(Use.KEY if kind == "dict" else Use.NUMBER if kind is not None else Use.UNKNOWN)
    return add(Use.NUMBER)


def _index(values: "ModuleValues", index: cst.Index, add) -> None:  # noqa: ANN001
    element = values.parent(index)
    subscript = values.parent(element) if element is not None else None
    if not isinstance(subscript, cst.Subscript) or len(subscript.slice) != 1:
        return add(Use.UNKNOWN)
    kind = container_kind(values, subscript.value)
    add(Use.KEY if kind == "dict" else Use.INDEX if kind is None else Use.NUMBER, subscript)


def _argument(values, arg: cst.Arg, expr, found, depth, seen, held, add) -> None:  # noqa: ANN001
    call = values.parent(arg)
    if not isinstance(call, cst.Call) or arg.star:
        return add(Use.UNKNOWN)
    names = values.names(call.func)
    first = bool(call.args) and call.args[0] is arg and arg.keyword is None
    if names & {"json.dump", "json.dumps"} and (first or (arg.keyword is not None and arg.keyword.value == "obj")):
        return add(Use.JSON, call)
    builtins = {q[len("builtins."):] for q in names if q.startswith("builtins.")}
    if builtins & NUMBER_BUILTINS:
        return add(Use.NUMBER, call)
    if builtins & FLOWING_BUILTINS:
        return _context(values, call, found, depth + 1, seen, held)
    if any(q.startswith(("math.", "numpy.")) for q in names):
        return add(Use.NUMBER, call)
    torch_names = values.torch_names(call.func)
    if torch_names:
        takes = {q.rpartition(".")[2] for q in torch_names} <= TORCH_TAKING_NUMBERS
        return add(Use.NUMBER if takes else Use.TENSOR, call)
    func = call.func
    if isinstance(func, cst.Attribute):
        method, receiver = func.attr.value, func.value
        if method == "format" and isinstance(receiver, (cst.SimpleString, cst.ConcatenatedString)):
            return add(Use.NUMBER, call)
        if method in KEY_METHODS and first and container_kind(values, receiver) == "dict":
            return add(Use.KEY, call)
        if method == "step" and first and gym_environment_ids(values, receiver) is not None:
            return add(Use.ACTION, call)
        if method in NUMBER_ARGUMENT_METHODS and kinds.is_tensor(values, receiver):
            return add(Use.NUMBER, call)
        if method == "append" and first and len(call.args) == 1 and isinstance(receiver, cst.Name):
            return _grown(values, receiver, found, depth, seen, add, call)
    add(Use.UNKNOWN, call)


def _element(values, element, found, depth, seen, held, add) -> None:  # noqa: ANN001
    holder = values.parent(element)
    operation = values.parent(holder) if holder is not None else None
    if isinstance(holder, cst.Tuple) and isinstance(operation, cst.BinaryOperation) and operation.right is holder \
            and isinstance(operation.operator, cst.Modulo):
        return add(Use.NUMBER)  # "%d %d" % (a, v)
    if isinstance(holder, cst.Tuple) and isinstance(operation, cst.Index):
        return _index(values, operation, add)  # `d[(a, v)]`: part of a key
    unpacked = _unpacked(values, holder, element, seen)
    if unpacked is not None:
        names, seen, elsewhere = unpacked
        found.extend(_as_held(elsewhere, held))
        for name in names:
            _follow(values, name, found, depth + 1, seen, held)
        return
    if isinstance(holder, cst.BaseExpression):
        return _context(values, holder, found, depth + 1, seen, True)
    add(Use.UNKNOWN)


def _unpacked(values, holder, element, seen) -> tuple[list[cst.Name], frozenset[int], list[Place]] | None:  # noqa: ANN001
    """The names an element of a tuple or list literal is bound to by position: ``a, b = x, v``,
    or ``return x, v`` of a function of this file whose every call is unpacked alike
    (``loss, n = f()``), with the uses of that element by the calls of the other files of the run
    (:func:`foreign_uses`); None where any of them is not so (starred, another length, a call
    kept whole)."""
    if not isinstance(holder, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in holder.elements):
        return None
    position = next(i for i, e in enumerate(holder.elements) if e is element)
    parent = values.parent(holder)
    sources: list[cst.BaseExpression] = [holder]
    elsewhere: list[Place] | None = []
    if isinstance(parent, cst.Return):
        function = values.enclosing(parent, (cst.FunctionDef, cst.Lambda))
        if not isinstance(function, cst.FunctionDef) or function.decorators or id(function) in seen:
            return None
        sources, seen = list(calls_of(values, function)), seen | {id(function)}
        elsewhere = foreign_uses(values, function, position, len(holder.elements))
        if elsewhere is None or not (sources or elsewhere):
            return None
    names = [_bound_by_position(values, source, position, len(holder.elements)) for source in sources]
    if None in names:
        return None
    return (names, seen, elsewhere) if names or elsewhere else None  # type: ignore[return-value]


def _bound_by_position(values, source, position: int, length: int) -> cst.Name | None:  # noqa: ANN001
    """The name ``a, v = source`` binds at ``position`` (of ``length`` targets); None otherwise."""
    statement = values.parent(source)
    if not (isinstance(statement, cst.Assign) and statement.value is source and len(statement.targets) == 1):
        return None
    target = statement.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != length:
        return None
    bound = target.elements[position]
    return bound.value if isinstance(bound, cst.Element) and isinstance(bound.value, cst.Name) else None


def _as_held(places: list[Place], held: bool) -> list[Place]:
    """``places`` as uses of a value a container holds: a tensor's use of it is unknown."""
    return [Place(Use.UNKNOWN, p.node) if held and p.use is Use.TENSOR else p for p in places]


def _grown(values, name: cst.Name, found, depth, seen, add, node) -> None:  # noqa: ANN001
    """``xs += [v]`` or ``xs.append(v)``: where every binding of ``xs`` that may reach is ``[]``
    or such an addition, the uses of the list's reads, holding the value; otherwise unknown."""
    reach = values.reach(name)
    if reach.why is not None or not reach.bindings:
        return add(Use.UNKNOWN, node)
    for binding in reach.bindings:
        bound = values.bound(binding)
        if not (bound.kind == AUGMENTED or bound.kind == VALUE and isinstance(bound.value, cst.List) and not bound.value.elements):
            return add(Use.UNKNOWN, node)
    _follow(values, name, found, depth + 1, seen, True)


def _assigned(values, statement, found, depth, seen, held, add) -> None:  # noqa: ANN001
    targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
    if len(targets) != 1 or not isinstance(targets[0], cst.Name):
        return add(Use.UNKNOWN, statement)  # `self.x = v`, `d[k] = v`, unpacking
    _follow(values, targets[0], found, depth, seen, held)


def _follow(values, binding: cst.Name, found, depth, seen, held) -> None:  # noqa: ANN001
    """The uses of every read ``binding`` may reach (a binding with no read: none)."""
    if id(binding) in seen:
        return
    seen = seen | {id(binding)}
    for read in values.reads_of(binding):
        if isinstance(values.parent(read), cst.AugAssign) and cst.ensure_type(values.parent(read), cst.AugAssign).target is read:
            found.append(Place(Use.NUMBER, read))  # `c += more`: the counter itself
            continue
        _context(values, read, found, depth + 1, seen, held)


def _counter(values, statement: cst.AugAssign, found, depth, seen, held, add) -> None:  # noqa: ANN001
    """``c += v``: a counter that starts from a number (every binding of ``c`` that may reach is
    a number literal or such an addition), then its reads; a tensor counter wants a tensor."""
    target = statement.target
    if not isinstance(target, cst.Name) or not isinstance(statement.operator, (cst.AddAssign, cst.SubtractAssign)):
        return add(Use.UNKNOWN, statement)
    if held and isinstance(statement.value, cst.List) and isinstance(statement.operator, cst.AddAssign):
        return _grown(values, target, found, depth, seen, add, statement)  # `xs += [v]`
    reach = values.reach(target)
    if reach.why is not None or not reach.bindings:
        return add(Use.UNKNOWN, statement)
    for node in reach.bindings:
        bound = values.bound(node)
        if bound.kind == AUGMENTED:
            continue
        if bound.kind == VALUE and _number_literal(bound.value):
            continue
        tensor = bound.kind == VALUE and kinds.is_tensor(values, bound.value)
        return add(Use.TENSOR if tensor else Use.UNKNOWN, node)
    add(Use.COUNTER, statement)
    _follow(values, target, found, depth, seen, False)


def _returned(values, statement: cst.Return, found, depth, seen, held, add) -> None:  # noqa: ANN001
    """``return v`` of a function of this file: the uses of each call of it in this file, and
    in the other files of the run (:func:`foreign_uses`)."""
    function = values.enclosing(statement, (cst.FunctionDef, cst.Lambda))
    if not isinstance(function, cst.FunctionDef) or function.decorators or id(function) in seen:
        return add(Use.UNKNOWN, statement)
    calls = calls_of(values, function)
    foreign = foreign_uses(values, function, None, 0)
    if foreign is None or not (calls or foreign):
        return add(Use.UNKNOWN, statement)
    found.extend(_as_held(foreign, held))
    for call in calls:
        _context(values, call, found, depth + 1, seen | {id(function)}, held)


def foreign_uses(values: "ModuleValues", function: cst.FunctionDef, position: int | None, length: int) -> list[Place] | None:
    """Where the other files of the run use what their calls of ``function`` return (element
    ``position`` of a tuple of ``length`` where given; the engine's ``view.foreign_callers``, each
    file's calls read in their own module); [] where no other file calls it, or where the run's
    files are not known (a file transformed alone: its own calls decide, as they always did);
    None where a call elsewhere is not shown, as a method's of a class other files import."""
    ask = getattr(values.view, "foreign_callers", None)
    if ask is None or getattr(values.view, "imported_by_none", False):
        return []
    if not isinstance(values.parent(function), cst.Module):
        owner = values.parent(values.parent(function))
        method = isinstance(owner, cst.ClassDef) and values.parent(owner) is values.module
        return None if method else []  # a nested function: no other file names it
    return ask.return_uses(function.name.value, position, length)


def uses_of_call(values: "ModuleValues", call: cst.Call, position: int | None, length: int) -> list[Place] | None:
    """The uses of what ``call`` returns (:func:`uses_of`), or, with ``position``, of the element
    bound by position where the call is unpacked into ``length`` names (``model, acc =
    finetune(...)``); None where it is not unpacked so."""
    if position is None:
        return uses_of(values, call)
    name = _bound_by_position(values, call, position, length)
    if name is None:
        return None
    found: list[Place] = []
    _follow(values, name, found, 1, frozenset(), False)
    return found


def calls_of(values: "ModuleValues", function: cst.FunctionDef) -> list[cst.Call]:
    """The calls in this file of ``function`` by its name, every one resolved to it; none when
    the name is also used otherwise (passed, stored). Reads that reach only other bindings of the
    name (another ``def`` of it) are not its. A method: :func:`method_calls`."""
    owner = values.parent(values.parent(function) or function)
    if isinstance(owner, cst.ClassDef):
        return method_calls(values, function, owner)
    scope = values.enclosing(function, (cst.FunctionDef, cst.Module)) or values.module
    calls = []
    for read in values.name_reads(scope).get(function.name.value, ()):
        parent = values.parent(read)
        if read is function.name or (isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is read):
            continue  # a `def` of the name binds it
        reach = values.reach(read)
        if reach.why is None and reach.bindings and function not in reach.bindings:
            continue  # another function of the same name (`def f` again in a later notebook cell)
        if not (isinstance(parent, cst.Call) and parent.func is read) or reach.why is not None or list(reach.bindings) != [function]:
            return []
        calls.append(parent)
    return calls


def passed_to(values: "ModuleValues", param: cst.CSTNode, function: cst.FunctionDef) -> list[cst.BaseExpression] | None:
    """What every call of this file gives the parameter ``param`` of ``function`` (positionally,
    or by its name), where ``function`` is a plain, undecorated function (not a method) of a file
    no other file of the run imports (a script, a notebook: it is called from the file alone);
    None where that is not shown (no call, ``*args``, a call that leaves it to its default)."""
    if not getattr(values.view, "imported_by_none", False) or function.decorators:
        return None
    if isinstance(values.parent(values.parent(function) or function), cst.ClassDef):
        return None
    params = list(function.params.params)
    index = next((i for i, p in enumerate(params) if p is param or p.name is param), None)
    calls = calls_of(values, function)
    if index is None or not calls:
        return None
    found = []
    for call in calls:
        if nodes.has_star_args(call):
            return None
        given = nodes.keyword_arg(call, params[index].name.value)
        positional = nodes.positional_args(call)
        arg = given if given is not None else (positional[index] if len(positional) > index else None)
        if arg is None:
            return None
        found.append(arg.value)
    return found


def _number_literal(value: cst.BaseExpression | None) -> bool:
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))


def container_kind(values: "ModuleValues", expr: cst.BaseExpression, depth: int = 0, plain: bool = False) -> str | None:
    """``"dict"``, ``"sequence"`` (list, tuple, range, string) or ``"tensor"`` where every value
    ``expr`` may hold is shown to be one of these; None otherwise. With ``plain``, a dict only
    where none may add a missing key (a literal, ``dict()``, ``OrderedDict()``; not a
    ``defaultdict`` or ``Counter``). An attribute of an instance of a project class has the kind its
    class gives it (:mod:`.project_attributes`)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, (cst.Dict, cst.DictComp)):
        return "dict"
    if isinstance(expr, (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString, cst.ConcatenatedString)):
        return "sequence"
    if isinstance(expr, cst.Call):
        names = values.names(expr.func)
        if names and names <= (PLAIN_DICT_MAKERS if plain else DICT_MAKERS):
            return "dict"
        if names and names <= SEQUENCE_MAKERS:
            return "sequence"
    if isinstance(expr, cst.Name):
        kinds_found = set()
        for value in values.values_of(expr):
            kinds_found.add(container_kind(values, value, depth + 1, plain) if value is not None and value is not expr else None)
        return kinds_found.pop() if len(kinds_found) == 1 else None
    if isinstance(expr, cst.Attribute):
        kind = project_attributes.attribute_kind(values, expr)
        if kind == project_attributes.PLAIN_DICT or (kind == project_attributes.MAPPING and not plain):
            return "dict"
        if kind == project_attributes.SEQUENCE:
            return "sequence"
    return "tensor" if kinds.is_tensor(values, expr) else None

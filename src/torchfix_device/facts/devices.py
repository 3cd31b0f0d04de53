"""Where a value is: provably on the CPU just before a guard on a user's flag? One of the facts
about values (:mod:`torchfix_device.facts`), asked where a guarded ``.cuda()`` becomes a move to
the device the flag chooses (TFD001).

With the device built from the flag (``device = torch.device("cuda" if args.cuda else "cpu")``),
``if args.cuda: x = x.cuda()`` and ``x = x.to(device)`` do the same when the flag is on (both
move to the current CUDA device). When it is off, ``x.to(device)`` moves ``x`` to the CPU: the
same as leaving it only if it is there already (then ``.to`` changes nothing and returns ``x``
itself, a tensor or a module). So the guard may go only for values shown to be on the CPU:

- the statement that binds the name last before the guard, in the same block, is
  ``x = <value made on the CPU>``, and no statement in between names ``x`` or calls a function
  of the file that does (at module level ``x`` is a global such a function could move);
- a value made on the CPU: a torch factory without ``device=`` (``torch.arange(4.0)``,
  ``torch.zeros(n)``, ``torch.tensor([1, 2])``, ``torch.from_numpy(a)``), a CPU legacy type
  (``torch.FloatTensor(1)``), maybe followed by methods that keep the device (``.float()``,
  ``.view(...)``); a ``torch.nn`` layer (``nn.Linear(3, 2)``, ``nn.BCELoss()``; containers
  of such layers), or an ``nn.Module`` class of this file whose code neither moves, loads nor
  names a device, built from constants and configuration attributes.

Nothing is evidence in a file that changes the default device or tensor type.

**May a value be on the device, before or after the migration?** Asked where a tensor meets
host code (``x.numpy()``, ``np.array(x)``: TFD018). :func:`may_be_on_device` says no where

- the file moves nothing to a device (:func:`moves_to_a_device`): no ``.cuda``, ``.to``,
  ``device`` (``torch.device``, ``device=``), ``map_location=``, ``torch.load`` (which TFD005
  gives ``map_location=device``, unless no file of its import group places a value:
  :mod:`~torchfix_device.facts.project_placements`), ``set_default_tensor_type`` or ``set_default_device``
  anywhere in it (``x.device`` of a value, as in TFD003's ``device=x.device``, follows a tensor
  already placed and does not count, nor does a type an ``isinstance`` test names:
  ``torch.cuda.LongTensor``); then no codemod gives it a device either (every one
  starts from such a word), and its values are where the code that made them put them: the
  CPU for what this file makes (values made by other files' functions are taken to follow the
  same rule: a helper module without device code is left as it is);
- the value is shown to be on the CPU (:func:`on_cpu`): ``.cpu()`` (maybe followed by methods
  that keep the device: ``x.cpu().detach()``, ``x.detach().cpu().data``), a torch factory
  without ``device=`` or ``torch.from_numpy(...)`` outside an ``nn.Module`` class (where TFD003
  gives factories the module's device), indexing, ``.data`` or a method that keeps the device of
  such a value, or a name every binding of which that may reach the read is one, and that no
  statement moves in place (``x.cuda()`` on a line of its own, which TFD002 turns into
  ``x = x.to(device)``; ``x.data = ...``); a name may also be bound to the parts of
  ``torch.sort(x)`` (``x.max(1)``...) of such an ``x``, or to an item of a data loader
  (:mod:`.cpu_paths`); an operator torch's schemas show gives one tensor (``torch.ger(a, b)``,
  ``x.addmm(a, b)``) of such values; the output of a module of this file that stays on the CPU
  (:func:`.project_calls.output_on_cpu`);
- the value is read on the flag's CPU path (:mod:`.cpu_paths`): the ``else:`` of ``if F:`` where
  every place of the file that may put a value on a device is under ``if F:``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device import torch_api
from torchfix_device.facts import values as facts_values
from torchfix_device.facts import cpu_paths, kinds, project_calls
from torchfix_device.facts.methods import only_method
from torchfix_device.facts.project_attributes import stays_on_cpu
from torchfix_device.torch_api import is_torch_module_class

if TYPE_CHECKING:
    from collections.abc import Sequence

    from torchfix_device.facts.values import ModuleValues
    from torchfix_device.syntax.lookup import CodemodView

FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "range",
    "linspace", "logspace", "eye",
})
DATA_FACTORIES = frozenset({"tensor", "as_tensor", "Tensor"})
KEEP_DEVICE = frozenset({
    "float", "double", "long", "int", "half", "bool", "byte", "char", "short", "view", "reshape",
    "unsqueeze", "squeeze", "contiguous", "clone", "detach", "fill_", "zero_", "normal_", "uniform_",
    "t", "transpose", "permute", "expand", "repeat", "train", "eval", "requires_grad_",
})
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "DataParallel"})
TENSOR_KEYWORDS = frozenset({"device", "weight", "pos_weight", "_weight", "bias"})
MOVING_WORDS = frozenset({"cuda", "to", "device", "load", "set_default_tensor_type", "set_default_device", "_apply", "type"})


def kept_chain(value: cst.BaseExpression) -> "Iterator[cst.Call]":
    """The calls of ``value``'s chain whose device its result keeps: ``value`` itself and, through
    methods that keep the device, the calls they are called on (``f(x).unsqueeze(0).detach()``:
    ``detach()``, ``unsqueeze(0)``, ``f(x)``). Moving ``value`` moves each of them."""
    while isinstance(value, cst.Call):
        yield value
        func = value.func
        value = func.value if isinstance(func, cst.Attribute) and func.attr.value in KEEP_DEVICE else None


def not_on_cpu(codemod: "CodemodView", name: cst.Name, statement: cst.BaseStatement, skip: cst.CSTNode | None = None) -> str | None:
    """None when ``name`` (read in ``statement``, outside ``skip``) is shown to be on the CPU
    right before ``statement``; else why it is not (for the message)."""
    shown = name.value
    if _changes_defaults(codemod):
        return "the file changes the default device or tensor type"
    if skip is not None and _names(_read_part(statement), shown, skip):
        return f"`{shown}` is used elsewhere in the same statement"
    block = codemod.parent_of(statement)
    statements: Sequence[cst.BaseStatement] = block.body if isinstance(block, (cst.Module, cst.IndentedBlock)) else ()
    index = next((i for i, s in enumerate(statements) if s is statement), None)
    if index is None:
        return f"nothing shows where `{shown}` is"
    movers = _functions_naming(codemod, shown)
    for previous in reversed(statements[:index]):
        value = _assigned_value(previous, shown)
        if value is not None:
            return None if _made_on_cpu(codemod, value) else f"nothing shows `{shown}` is made on the CPU"
        if _names(previous, shown) or _calls_any(previous, movers):
            return f"`{shown}` may move between where it is made and the guard"
    return f"nothing shows `{shown}` is on the CPU here"


def _read_part(statement: cst.BaseStatement) -> cst.CSTNode:
    """What ``statement`` reads before it binds: the value of ``x = value``, else all of it."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
            return small.value
    return statement


def _assigned_value(statement: cst.BaseStatement, name: str) -> cst.BaseExpression | None:
    """The value of ``name = value`` when that is the whole statement."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Name) and target.value == name:
            return small.value
    return None


def _names(node: cst.CSTNode, name: str, skip: cst.CSTNode | None = None) -> bool:
    return traversal.count_name(node, name, frozenset({id(skip)}) if skip is not None else frozenset()) > 0


def _calls_any(node: cst.CSTNode, functions: set[str]) -> bool:
    return bool(functions) and any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in functions for n in traversal.walk(node)
    )


def _functions_naming(codemod: "CodemodView", name: str) -> set[str]:
    """Functions and classes of the file whose code names ``name`` (they may move a global)."""
    module = codemod.visited_module
    return {
        n.name.value for n in traversal.walk_statements(module)
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)) and _names(n.body, name)
    }


def _changes_defaults(codemod: "CodemodView") -> bool:
    names = traversal.all_names(codemod.visited_module)
    return bool(names & {"set_default_tensor_type", "set_default_device", "set_default_dtype"})


def _made_on_cpu(codemod: "CodemodView", value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in KEEP_DEVICE and not _qualified(codemod, func):
        return all(a.keyword is None or a.keyword.value != "device" for a in value.args) and _made_on_cpu(codemod, func.value)
    if any(a.keyword is not None and a.keyword.value == "device" for a in value.args) or nodes.has_star_args(value):
        return False
    for qualified in _qualified(codemod, func):
        parts = qualified.split(".")
        if parts[0] != "torch":
            continue
        if len(parts) == 2 and parts[1] in FACTORIES:
            return True
        if len(parts) == 2 and parts[1] == "from_numpy":
            return True
        if len(parts) == 2 and (parts[1] in DATA_FACTORIES or parts[1] in torch_api.LEGACY_TENSOR_DTYPES):
            return all(_is_data(a.value) for a in value.args)
        if is_torch_module_class(qualified):
            return _layer_on_cpu(codemod, parts[-1], value)
    if isinstance(func, cst.Name):
        cls = next((c for c in kinds.module_classes(facts_values.of(codemod)).values() if c.name.value == func.value), None)
        if cls is not None:
            return _settings_only(value) and _class_on_cpu(codemod, cls, frozenset())
    return False


def _qualified(codemod: "CodemodView", func: cst.BaseExpression) -> set[str]:
    return facts_values.of(codemod).names(func)


def _is_data(node: cst.BaseExpression) -> bool:
    """A literal: numbers, strings, and lists or tuples of them (never a tensor, which may be on CUDA)."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _is_data(node.expression)
    if isinstance(node, (cst.List, cst.Tuple)):
        return all(_is_data(e.value) for e in node.elements)
    return isinstance(node, cst.Name) and node.value in ("True", "False")


def _setting(node: cst.BaseExpression) -> bool:
    """A constant or a configuration value (``opt.n_classes``, ``4 * nz``), not a bare name (a
    module or tensor may be passed that way)."""
    if _is_data(node) or nodes.is_none(node):
        return True
    if isinstance(node, cst.Attribute):
        dotted = nodes.dotted_name(node)
        return dotted is not None and not dotted.startswith(("self.", "cls."))
    if isinstance(node, cst.BinaryOperation):
        return _setting(node.left) and _setting(node.right)
    if isinstance(node, cst.UnaryOperation):
        return _setting(node.expression)
    return False


def _settings_only(call: cst.Call) -> bool:
    return all(a.star == "" and _setting(a.value) and (a.keyword is None or a.keyword.value not in TENSOR_KEYWORDS) for a in call.args)


def _layer_on_cpu(codemod: "CodemodView", layer: str, call: cst.Call) -> bool:
    if layer in CONTAINERS:
        items = [a.value for a in call.args]
        if len(items) == 1 and isinstance(items[0], (cst.List, cst.Tuple)):
            items = [e.value for e in items[0].elements]
        return all(a.keyword is None and not a.star for a in call.args) and all(_made_on_cpu(codemod, i) for i in items)
    if layer.endswith("Loss"):
        return _settings_only(call) and all(a.keyword is not None for a in call.args)
    return all(not a.star and (a.keyword is None or a.keyword.value not in TENSOR_KEYWORDS) for a in call.args)


def _class_on_cpu(codemod: "CodemodView", cls: cst.ClassDef, seen: frozenset[str]) -> bool:
    """An ``nn.Module`` class of this file whose code does not move, load or name a device,
    does not call the file's functions, and whose bases of this file are the same."""
    words = traversal.all_names(cls)
    if words & MOVING_WORDS or cls.name.value in seen:
        return False
    module_classes = {c.name.value: c for c in kinds.module_classes(facts_values.of(codemod)).values()}
    functions = {n.name.value for n in traversal.walk_statements(codemod.visited_module) if isinstance(n, cst.FunctionDef)}
    own = {n.name.value for n in traversal.walk_statements(cls) if isinstance(n, cst.FunctionDef)}
    for node in traversal.walk(cls.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            called = node.func.value
            if called in module_classes:
                if not _class_on_cpu(codemod, module_classes[called], seen | {cls.name.value}):
                    return False
            elif called in functions and called not in own:
                return False
    for base in cls.bases:
        name = nodes.dotted_name(base.value)
        if name in module_classes and not _class_on_cpu(codemod, module_classes[name], seen | {cls.name.value}):
            return False
    return True


DEVICE_WORDS = frozenset({"cuda", "to", "device", "set_default_tensor_type", "set_default_device"})
"""Attribute and imported names with which a file may put a value on a device."""
DEVICE_KEYWORDS = frozenset({"device", "map_location"})
TORCH_LOAD = cpu_paths.TORCH_LOAD
MOVES = frozenset({"cuda", "to", "type", "type_as", "new", "pin_memory", "share_memory_"})
"""Tensor methods whose result may be on another device than the tensor (or moved in place)."""


def moves_to_a_device(values: "facts_values.ModuleValues") -> bool:
    """Whether the file may put a value on a device, as it is or once migrated (see the module
    docstring; memoised per module version)."""
    known = values.facets.get("moves to a device")
    if known is None:
        known = values.facets["moves to a device"] = _moves(values)
    return known


def _moves(values: "facts_values.ModuleValues") -> bool:
    loads, type_tests = [], set()
    for node in traversal.of_classes(values.module, cst.Call, cst.Arg, cst.Attribute, cst.ImportAlias):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "isinstance" \
                and len(node.args) == 2 and not any(a.keyword or a.star for a in node.args):
            type_tests.update(id(n) for n in traversal.walk(node.args[1].value))
        if id(node) in type_tests:
            continue  # `isinstance(x, torch.cuda.FloatTensor)` moves nothing
        if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in DEVICE_KEYWORDS:
            if not cpu_paths.follows_a_tensor(values, node.value) and not cpu_paths.names_the_cpu(node.value):
                return True
        if isinstance(node, cst.Attribute) and node.attr.value in DEVICE_WORDS and not cpu_paths.follows_a_tensor(values, node):
            return True
        if isinstance(node, cst.ImportAlias) and set((nodes.dotted_name(node.name) or "").split(".")) & DEVICE_WORDS:
            return True
        if isinstance(node, cst.Call) and (nodes.dotted_name(node.func) or "").rpartition(".")[2] == "load" \
                and nodes.keyword_arg(node, "map_location") is None \
                and not (len(node.args) >= 2 and node.args[1].keyword is None and cpu_paths.names_the_cpu(node.args[1].value)):
            loads.append(node)  # `torch.load`, `T.load`, `load` imported from torch: resolved last
    # A `torch.load` TFD005 maps to the CPU (the import group places nothing) moves nothing.
    return not stays_on_cpu(values) and any(values.names(call.func) & TORCH_LOAD for call in loads)


def may_be_on_device(values: "facts_values.ModuleValues", expr: cst.BaseExpression) -> bool:
    """Whether ``expr``'s tensor may be on a device other than the CPU, now or once the file is
    migrated (see the module docstring)."""
    return moves_to_a_device(values) and not on_cpu(values, expr)


def on_cpu(values: "facts_values.ModuleValues", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``expr`` is shown to be on the CPU, now and once migrated (see the module docstring)."""
    if depth > kinds.MAX_DEPTH:
        return False
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "cpu" and not expr.args:
        return not values.module_path(expr.func)  # whatever the default device
    if _defaults_changed(values):
        return False
    if depth == 0 and cpu_paths.in_flag_cpu_branch(values, expr):
        return True
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in ("data", "T") and on_cpu(values, expr.value, depth + 1)
    if isinstance(expr, cst.Subscript):
        return on_cpu(values, expr.value, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        sides = (expr.left, expr.right)
        return all(isinstance(s, (cst.Integer, cst.Float)) or on_cpu(values, s, depth + 1) for s in sides)
    if isinstance(expr, cst.Name):
        return _name_on_cpu(values, expr, depth)
    if not isinstance(expr, cst.Call) or nodes.has_star_args(expr):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and not values.module_path(func):
        if func.attr.value in kinds.TENSOR_METHODS and func.attr.value not in MOVES:
            return not any(a.keyword is not None and a.keyword.value == "device" for a in expr.args) and on_cpu(values, func.value, depth + 1)
        if func.attr.value in SCHEMA_METHODS and on_cpu(values, func.value, depth + 1) and _arguments_on_cpu(values, expr.args, depth):
            return True  # `x.addmm(a, b)`: torch's schemas, every tensor on the CPU
    operators = torch_api.torch_operators(values.names(func))
    if operators and not operators & NOT_FOLLOWING and nodes.positional_args(expr) and _arguments_on_cpu(values, expr.args, depth):
        return True  # `torch.ger(a, b)`
    names = values.names(func)
    if names and names <= kinds.MAKERS:  # `Variable(x)`: where `x` is
        positional = nodes.positional_args(expr)
        return bool(positional) and on_cpu(values, positional[0].value, depth + 1)
    torch_names = {q.rpartition(".")[2] for q in values.torch_names(func)}
    if torch_names and torch_names <= (kinds.TENSOR_METHODS | kinds.TORCH_FUNCTIONS) - FACTORIES - DATA_FACTORIES - MOVES:
        tensors = [a.value for a in expr.args if a.keyword is None]  # `torch.unsqueeze(x, 1)`, `torch.cat([a, b])`
        if tensors and all(_cpu_or_number(values, t, depth) for t in tensors) and nodes.keyword_arg(expr, "device") is None:
            return True
    if project_calls.output_on_cpu(values, expr, lambda made: _made_on_cpu(values.view, made),
                                    lambda argument: _cpu_or_number(values, argument, depth)):
        return True  # `pe(x)` of a module of this file that stays on the CPU
    if values.enclosing(expr, cst.ClassDef) is not None and any(
        values.enclosing(expr, cst.ClassDef) is c for c in kinds.module_classes(values).values()
    ):
        return False  # TFD003 gives a factory in an nn.Module the module's device
    return bool(values.torch_names(func)) and _made_on_cpu(values.view, expr)


SPLITTING = frozenset({"sort", "max", "min", "topk", "kthvalue", "median", "mode", "split", "chunk", "unbind"})
"""Torch functions and tensor methods whose result is tensors on the device of their input."""


def _parts_on_cpu(values: "facts_values.ModuleValues", call: cst.Call, depth: int) -> bool:
    """Each part of ``call``'s result is on the CPU: ``torch.sort(x)``, ``x.max(1)`` of a tensor on
    the CPU (no ``out=``)."""
    if nodes.has_star_args(call) or nodes.keyword_arg(call, "out") is not None:
        return False
    func = call.func
    if isinstance(func, cst.Attribute) and not values.module_path(func):
        return func.attr.value in SPLITTING and on_cpu(values, func.value, depth + 1)
    torch_names = {q.rpartition(".")[2] for q in values.torch_names(func)}
    positional = nodes.positional_args(call)
    return bool(torch_names) and torch_names <= SPLITTING and bool(positional) and on_cpu(values, positional[0].value, depth + 1)


NOT_FOLLOWING = torch_api.DEVICE_OPERATORS | MOVES | {"cpu", "cuda", "set_"}
"""Of the operators torch's schemas show give one tensor (:mod:`torchfix_device.torch_api`), those
whose result need not be where their tensors are: they take a device, move (``set_`` takes
another's storage)."""
SCHEMA_METHODS = torch_api.ONE_TENSOR_METHODS - NOT_FOLLOWING
NOT_TENSOR_KEYWORDS = frozenset({"dim", "keepdim", "dtype"})


def _arguments_on_cpu(values: "facts_values.ModuleValues", args: "Sequence[cst.Arg]", depth: int) -> bool:
    """Every argument of an operator is a number or a value on the CPU (``dim=``, ``keepdim=``,
    ``dtype=`` aside; an ``out=`` too): a tensor on a device among them would put the result there."""
    return all(a.keyword is not None and a.keyword.value in NOT_TENSOR_KEYWORDS or (a.star == "" and _cpu_or_number(values, a.value, depth))
               for a in args)


def _cpu_or_number(values: "facts_values.ModuleValues", expr: cst.BaseExpression, depth: int) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)) or (isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, (cst.Integer, cst.Float))):
        return True
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(_cpu_or_number(values, e.value, depth + 1) for e in expr.elements)
    return on_cpu(values, expr, depth + 1)


def _defaults_changed(values: "facts_values.ModuleValues") -> bool:
    known = values.facets.get("changes default device")
    if known is None:
        known = values.facets["changes default device"] = _changes_defaults(values.view)
    return known


def _name_on_cpu(values: "facts_values.ModuleValues", name: cst.Name, depth: int) -> bool:
    reach = values.reach(name)
    if reach.why is not None or not reach.bindings:
        return False
    for node in reach.bindings:
        bound = values.bound(node)
        if bound.kind == facts_values.ITEM:
            if not cpu_paths.loader_item(values, bound):
                return False
        elif bound.kind == facts_values.PART and isinstance(bound.value, cst.Call):
            if not _parts_on_cpu(values, bound.value, depth + 1):  # `values, order = torch.sort(x)`
                return False
        elif bound.kind == facts_values.PART and isinstance(bound.value, cst.Name):
            if not on_cpu(values, bound.value, depth + 1):  # `inputs, targets = batch`, a loader's item
                return False
        elif bound.kind != facts_values.VALUE or bound.value is name or not on_cpu(values, bound.value, depth + 1):
            return False
        if _moved_in_place(values, node):
            return False
    return True


def _moved_in_place(values: "facts_values.ModuleValues", binding: cst.CSTNode) -> bool:
    """A read of ``binding`` moves the tensor in place, or as the migration will: ``x.cuda()`` /
    ``x.to(...)`` as a statement of its own, ``x.data = ...``."""
    for read in values.reads_of(binding):
        attribute = values.parent(read)
        if not isinstance(attribute, cst.Attribute) or attribute.value is not read:
            continue
        above = values.parent(attribute)
        if attribute.attr.value in ("cuda", "to") and isinstance(above, cst.Call) and isinstance(values.parent(above), cst.Expr):
            return True
        if attribute.attr.value == "data" and isinstance(above, cst.AssignTarget):
            return True
    return False


DEVICE_TEST_CALLS = frozenset({"str", "repr", "type", "isinstance", "next"})
"""Builtins a module's own device test may call (nothing else: it must have no effect)."""


def module_device_test(values: "ModuleValues", test: cst.BaseExpression) -> bool:
    """``test`` is ``self.m()`` of a method ``m`` of the enclosing class (and of no other
    function of the file) whose whole body returns where the module's tensors are: an
    ``is_cuda`` attribute or ``'cuda'`` in the text of a tensor's type, computed with
    :data:`DEVICE_TEST_CALLS` and ``self.parameters()`` only (InferSent's
    ``'cuda' in str(type(self.enc_lstm.bias_hh_l0.data))``, always false on torch 2.x, whose
    tensors all have the type ``torch.Tensor``). Such a guard may go like ``t.is_cuda``'s: its
    moves take the device of the tensors the method computes with (asked by TFD001)."""
    if not (isinstance(test, cst.Call) and not test.args and isinstance(test.func, cst.Attribute)
            and isinstance(test.func.value, cst.Name) and test.func.value.value == "self"):
        return False
    cls = values.enclosing(test, cst.ClassDef)
    method = only_method(values, cls, test.func.attr.value) if isinstance(cls, cst.ClassDef) else None
    if method is None:
        return False
    params = method.params
    if method.decorators or len(params.params) != 1 or params.star_arg is not cst.MaybeSentinel.DEFAULT \
            and params.star_arg is not None or params.kwonly_params or params.star_kwarg is not None:
        return False
    statements = list(method.body.body) if isinstance(method.body, cst.IndentedBlock) else [method.body]
    if len(statements) != 1 or not isinstance(statements[0], (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return False
    small = statements[0].body
    if len(small) != 1 or not isinstance(small[0], cst.Return) or small[0].value is None:
        return False
    cuda = False
    for node in traversal.walk(small[0].value):
        if isinstance(node, (cst.Lambda, cst.NamedExpr, cst.Yield, cst.Await)):
            return False
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name) and func.value in DEVICE_TEST_CALLS and values.names(func) <= {f"builtins.{func.value}"}:
                continue
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                    and func.attr.value == "parameters" and not node.args:
                continue
            return False
        if isinstance(node, cst.Attribute) and node.attr.value == "is_cuda":
            cuda = True
        if isinstance(node, cst.SimpleString) and "cuda" in node.value:
            cuda = True
    return cuda

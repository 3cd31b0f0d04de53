"""What a call of the project's own code gives. One of the facts about values
(:mod:`torchfix_device.facts`): the code a call runs (:func:`own_method`: ``self.forward(x)``,
``self(x)`` of a method its class defines once; :func:`keeps_its_argument`: ``to_var(x)`` of a
function that returns its first argument in the same shape), and what calling an ``nn.Module``
of the project gives: where it is and how many dimensions it has.

**On the CPU.** ``pe = PositionalEncoding(20, 0)`` then
``y = pe.forward(Variable(torch.zeros(1, 100, 20)))`` (or ``pe(x)``): ``y`` is on the CPU, now
and once migrated (:func:`output_on_cpu`, asked by
:func:`~torchfix_device.facts.devices.on_cpu` where a tensor meets host code, TFD018), where

- every binding of ``pe`` that may reach the call builds an ``nn.Module`` class of this file
  made on the CPU (its code neither moves, loads nor names a device, it calls no function of the
  file, it is built from settings: :func:`~torchfix_device.facts.devices.on_cpu`'s evidence of a
  module made there), and every read of that binding calls it (``pe(x)``, ``pe.forward(x)``) or
  one of :data:`STAYING` (``pe.eval()``): given to nothing (``nn.DataParallel(pe)``,
  ``f(pe)``), stored nowhere, moved never (``pe.cuda()``, ``pe.to(d)``, ``pe.apply(fn)``);
- the class, its methods and the module classes of the file it names read no module-level name
  but imports, builtins and such classes (a global tensor the file moved, ``x * mask``, would
  put the result on its device);
- every argument of the call is a number or a value on the CPU.

A parameter, buffer or layer such a module holds is then where it was made, the CPU, and so is
every tensor its ``forward`` computes from them and from its arguments.

**Its dimensions.** :func:`instance_call_dims`: ``model(x)``, ``self.online_net(x)`` or
``model.forward(x)``, where every value the name (every binding that may reach the call) or the
attribute (:func:`~.self_attributes.held_by_self`) holds is an instance of a class of the file or
of another file of the run, maybe moved (``DQN(args).cuda()``), has the dimensions every
``return`` of that class's own ``forward`` shows, whatever its input
(:class:`~.returns.Returned`'s ``call``: ``return F.softmax(q.view(-1, n, k), dim=2)`` is 3-dim).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import libcst as cst
from torchfix_device.facts import kinds
from torchfix_device.facts.methods import attributes_named, class_of_self, own_def
from torchfix_device.facts.project_attributes import subclassed_in_run
from torchfix_device.facts.self_attributes import held_by_self
from torchfix_device.facts.losses import calls_making, strip_moves
from torchfix_device.facts.values import PARAM, VALUE
from torchfix_device.syntax import nodes, traversal
from torchfix_device.syntax.qualified_names import BUILTIN_NAMES

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

STAYING = frozenset({"forward", "eval", "train", "zero_grad", "parameters", "named_parameters", "state_dict"})
"""Methods a read of the module may call, none of which puts anything anywhere."""
MAX_DEPTH = 16
WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})
SAME_SHAPE = frozenset({
    "float", "double", "half", "long", "int", "short", "byte", "char", "bool", "cpu", "cuda", "to", "detach", "clone",
    "contiguous", "exp", "log", "log1p", "sqrt", "rsqrt", "abs", "neg", "sigmoid", "tanh", "relu", "sin", "cos", "floor",
    "ceil", "round", "sign", "reciprocal", "square", "clamp", "softmax", "log_softmax", "type_as", "fill_", "zero_",
    "normal_", "uniform_", "masked_fill", "masked_fill_", "requires_grad_", "pin_memory", "cumsum", "cumprod",
    "random_", "bernoulli_", "exponential_", "clamp_", "add_", "mul_", "sub_", "div_",
})
"""Methods and ``torch.<f>`` functions whose result has the shape of the tensor they take."""


def output_on_cpu(
    values: "ModuleValues",
    call: cst.Call,
    made_on_cpu: Callable[[cst.Call], bool],
    argument_on_cpu: Callable[[cst.BaseExpression], bool],
) -> bool:
    """``call`` (``m(...)`` or ``m.forward(...)``) is of a module of this file that stays on the
    CPU, given only numbers and values there (see the module docstring; ``made_on_cpu`` and
    ``argument_on_cpu`` are :mod:`.devices`' evidence, which asks this)."""
    func = call.func
    module = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
    if not isinstance(module, cst.Name) or any(a.star for a in call.args):
        return False
    reach = values.reach(module)
    if reach.why is not None or not reach.bindings:
        return False
    module_classes = kinds.module_classes(values)
    for binding in reach.bindings:
        bound = values.bound(binding)
        if bound.kind != VALUE or not isinstance(bound.value, cst.Call):
            return False
        cls = values.class_called(bound.value.func)
        if cls is None or id(cls) not in module_classes or not made_on_cpu(bound.value):
            return False
        if not _only_called(values, binding) or not _reads_only_imports(values, cls):
            return False
    return all(argument_on_cpu(a.value) for a in call.args)


def _only_called(values: "ModuleValues", binding: cst.CSTNode) -> bool:
    """Every read of ``binding`` calls the module or one of :data:`STAYING`; no read of its name
    anywhere in the file may reach it without the resolution saying so (a doubt counts against)."""
    name = getattr(binding, "value", None)
    if any(values.reach(n).why is not None for n in values.name_reads(values.module).get(name, ()) if not values.is_target(n)):
        return False
    for read in values.reads_of(binding):
        above = values.parent(read)
        if isinstance(above, cst.Call) and above.func is read:
            continue
        if isinstance(above, cst.Attribute) and above.value is read and above.attr.value in STAYING:
            called = values.parent(above)
            if isinstance(called, cst.Call) and called.func is above:
                continue
        return False
    return True


def _reads_only_imports(values: "ModuleValues", cls: cst.ClassDef, seen: frozenset[int] = frozenset()) -> bool:
    """Every name ``cls`` reads is its own (a parameter, a local), an import, a builtin, or a
    module class of the file that reads only such names too (memoised per class)."""
    memo = values.facets.setdefault("reads only imports", {})
    if id(cls) not in memo:
        memo[id(cls)] = False  # while it is being found
        memo[id(cls)] = all(_read_allowed(values, node, cls, seen) for reads in values.name_reads(cls).values() for node in reads)
    return memo[id(cls)]


def _read_allowed(values: "ModuleValues", name: cst.Name, cls: cst.ClassDef, seen: frozenset[int]) -> bool:
    """``name`` in ``cls`` is no read (a parameter, a ``def``'s, ``class``'s or import's name, a
    target), or reads what :func:`_reads_only_imports` allows; a doubt only about names of the
    class's own (unbound, they raise)."""
    if isinstance(values.parent(name), (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName)) or values.is_target(name):
        return True
    reach = values.reach(name)
    if not reach.bindings:
        return name.value in BUILTIN_NAMES

    def own(binding: cst.CSTNode) -> bool:
        return binding is cls or values.enclosing(binding, cst.ClassDef) is cls

    if reach.why is not None:
        return all(own(b) for b in reach.bindings)
    return all(isinstance(b, (cst.Import, cst.ImportFrom)) or own(b) or isinstance(b, cst.ClassDef) and id(b) in kinds.module_classes(values)
               and id(b) not in seen and _reads_only_imports(values, b, seen | {id(cls)}) for b in reach.bindings)


def instance_call_dims(values: "ModuleValues", func: cst.BaseExpression) -> int | None:
    """The dimensions of what calling ``func`` gives, an instance of a project class every value of
    which agrees (see the module docstring); None otherwise."""
    target = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
    held = list(values.values_of(target)) if isinstance(target, cst.Name) else held_by_self(values, target)
    made = calls_making(values, held) if held else None
    found = {getattr(getattr(values.call_returns(m), "call", None), "dims", None) for m in made or ()}
    return found.pop() if len(found) == 1 else None


def own_method(values: "ModuleValues", func: cst.BaseExpression) -> cst.FunctionDef | None:
    """The method ``self.m(...)`` (``self(...)``: an ``nn.Module``'s ``forward``) calls in a plain
    method of a class of the file that defines it once (:func:`~.methods.own_def`), where no class
    of the run derives from the class and nothing assigns an attribute of that name."""
    receiver, name = (func.value, func.attr.value) if isinstance(func, cst.Attribute) else (func, "forward")
    cls = class_of_self(values, receiver) if isinstance(receiver, cst.Name) else None
    if cls is None or subclassed_in_run(values, cls.name.value) or (func is receiver and id(cls) not in kinds.module_classes(values)):
        return None
    if any(isinstance(values.parent(a), (cst.AssignTarget, cst.AugAssign)) for a in attributes_named(values, name)):
        return None
    return own_def(values, cls, name)


def keeps_its_argument(values: "ModuleValues", func: cst.Name) -> bool:
    """``func`` is a function of the file that returns its first argument in the same shape,
    wherever it returns (``def to_var(x): if cuda: x = x.cuda(); return Variable(x)``): a
    function :meth:`~torchfix_device.facts.values.ModuleValues.function_called` finds, every ``return`` of which gives the
    first parameter through moves, ``Variable``/``Parameter``, ``.data`` and shape-keeping
    methods (:data:`SAME_SHAPE`)."""
    function = values.function_called(func)
    if function is None or not function.params.params:
        return False
    returns = list(traversal.function_returns(function))
    return bool(returns) and all(r.value is not None and _gives(values, r.value, function.params.params[0], 0) for r in returns) \
        and not traversal.yields(function)


def _gives(values: "ModuleValues", expr: cst.BaseExpression, param: cst.Param, depth: int) -> bool:
    """``expr`` is ``param``'s value in the same shape (see :func:`keeps_its_argument`)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        reach = values.reach(expr)
        if reach.why is not None or not reach.bindings:
            return False
        for node in reach.bindings:
            if node is param or node is param.name:
                continue
            bound = values.bound(node)
            if bound.kind == PARAM and bound.node in (param, param.name):
                continue
            if not (bound.kind == VALUE and bound.value is not expr and _gives(values, bound.value, param, depth + 1)):
                return False
        return True
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return _gives(values, expr.value, param, depth + 1)
    if isinstance(expr, cst.Call) and not nodes.has_star_args(expr):
        func = expr.func
        if values.names(func) & WRAPPERS:
            positional = nodes.positional_args(expr)
            return bool(positional) and _gives(values, positional[0].value, param, depth + 1)
        if isinstance(func, cst.Attribute) and func.attr.value in SAME_SHAPE and not values.module_path(func):
            return _gives(values, func.value, param, depth + 1)
    return False

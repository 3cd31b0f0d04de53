"""What calling a module of this file gives: on the CPU, where nothing could have put it
elsewhere. One of the facts about values (:mod:`torchfix_device.facts`), asked by
:func:`~torchfix_device.facts.devices.on_cpu` where a tensor meets host code (TFD018).

``pe = PositionalEncoding(20, 0)`` then ``y = pe.forward(Variable(torch.zeros(1, 100, 20)))``
(or ``pe(x)``): ``y`` is on the CPU, now and once migrated, where

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import libcst as cst
from torchfix_device.facts.values import VALUE
from torchfix_device.syntax import traversal
from torchfix_device.syntax.qualified_names import BUILTIN_NAMES

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

STAYING = frozenset({"forward", "eval", "train", "zero_grad", "parameters", "named_parameters", "state_dict"})
"""Methods a read of the module may call, none of which puts anything anywhere."""


def output_on_cpu(
    values: "ModuleValues",
    call: cst.Call,
    module_classes: "dict[int, cst.ClassDef]",
    made_on_cpu: Callable[[cst.Call], bool],
    argument_on_cpu: Callable[[cst.BaseExpression], bool],
) -> bool:
    """``call`` (``m(...)`` or ``m.forward(...)``) is of a module of this file that stays on the
    CPU, given only numbers and values there (see the module docstring)."""
    func = call.func
    module = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
    if not isinstance(module, cst.Name) or any(a.star for a in call.args):
        return False
    reach = values.reach(module)
    if reach.why is not None or not reach.bindings:
        return False
    for binding in reach.bindings:
        bound = values.bound(binding)
        if bound.kind != VALUE or not isinstance(bound.value, cst.Call):
            return False
        cls = values.class_called(bound.value.func)
        if cls is None or id(cls) not in module_classes or not made_on_cpu(bound.value):
            return False
        if not _only_called(values, binding) or not _reads_only_imports(values, cls, module_classes, frozenset()):
            return False
    return all(argument_on_cpu(a.value) for a in call.args)


def _only_called(values: "ModuleValues", binding: cst.CSTNode) -> bool:
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


def _reads_only_imports(values: "ModuleValues", cls: cst.ClassDef, module_classes: "dict[int, cst.ClassDef]", seen: frozenset[int]) -> bool:
    """Every name ``cls`` reads is its own (a parameter, a local), an import, a builtin, or a
    module class of the file that reads only such names too (memoised per class)."""
    memo = values.facets.setdefault("reads only imports", {})
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = False  # while it is being found
    found = True
    for node in traversal.walk(cls):
        if not isinstance(node, cst.Name) or not _read(values, node):
            continue
        reach = values.reach(node)
        if reach.why is not None and not all(_inside(values, b, cls) for b in reach.bindings):
            found = False  # a doubt about a name of its own only: unbound, it raises
            break
        if not reach.bindings:
            if node.value not in BUILTIN_NAMES:
                found = False
                break
            continue
        for binding in reach.bindings:
            if isinstance(binding, (cst.Import, cst.ImportFrom)) or _inside(values, binding, cls):
                continue
            if isinstance(binding, cst.ClassDef) and id(binding) in module_classes and id(binding) not in seen \
                    and _reads_only_imports(values, binding, module_classes, seen | {id(cls)}):
                continue
            found = False
            break
        if not found:
            break
    memo[id(cls)] = found
    return found


def _read(values: "ModuleValues", name: cst.Name) -> bool:
    above = values.parent(name)
    if isinstance(above, cst.Attribute) and above.attr is name:
        return False
    if isinstance(above, cst.Arg) and above.keyword is name:
        return False
    if isinstance(above, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName)):
        return False
    child: cst.CSTNode = name  # not a target: `pe = torch.zeros(n, d)`, `a, b = ...`, `for i in ...`
    while isinstance(above, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, above = above, values.parent(above)
    return not (isinstance(above, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr))
                and getattr(above, "target", None) is child)


def _inside(values: "ModuleValues", node: cst.CSTNode, cls: cst.ClassDef) -> bool:
    while node is not None:
        if node is cls:
            return True
        node = values.parent(node)  # type: ignore[assignment]
    return False

"""Which calls in a file call a method of one of its classes. One of the facts about values
(:mod:`torchfix_device.facts`): where a method returns a value (``act`` returns the action a
0.3 DQN took as a Python number), the uses of that value are at the calls of the method.

:func:`method_calls` gives the calls ``r.m(...)`` of the method ``m`` of a class ``C`` defined at
the top of the module: ``r`` is ``self`` in a method of ``C``, or every value that may reach
``r`` is ``C(...)`` (also through a module move that returns the module itself:
``model = model.cuda()``, ``.to(device)``, ``.train()``, for a subclass of ``nn.Module`` that
does not define that method). A read ``r.m`` of an instance of another class of the module that
defines ``m`` itself (and does not derive from ``C``) is not a call of it. Any other read of an
attribute ``m`` (not called, or of a value not shown to be an instance of either) makes the
answer "not shown": an empty list, as for a function passed around.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from torchfix_device.facts.self_attributes import method_of_self
from torchfix_device.syntax import traversal

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues

MAX_DEPTH = 8
SELF_RETURNING = frozenset({"cuda", "cpu", "to", "train", "eval", "float", "double", "half", "requires_grad_", "share_memory"})
"""``nn.Module`` methods that return the module itself."""


def method_calls(values: "ModuleValues", function: cst.FunctionDef, cls: cst.ClassDef) -> list[cst.Call]:
    """The calls of the method ``function`` of ``cls`` in this file (see the module docstring)."""
    if values.parent(cls) is not values.module or function.decorators:
        return []
    method = function.name.value
    calls = []
    for attribute in _by_name(values)[1].get(method, ()):
        call = values.parent(attribute)
        if not (isinstance(call, cst.Call) and call.func is attribute):
            return []
        classes = _classes_of(values, attribute.value, 0)
        if classes is None:
            return []
        if classes == {cls}:
            calls.append(call)
        elif not all(c is not cls and _defines(c, method) and not _derives(values, c, cls) for c in classes):
            return []
    return calls


def only_method(values: "ModuleValues", cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The ``def name`` in the body of ``cls`` where it is the file's only function of that name
    (no other class of the file, a subclass included, defines or overrides it)."""
    found = _by_name(values)[0].get(name, [])
    return found[0] if len(found) == 1 and values.parent(values.parent(found[0]) or found[0]) is cls else None


def own_def(values: "ModuleValues", cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The undecorated ``def name`` of ``cls``'s body, defined there once, where no other class of
    the module may derive from ``cls`` (:func:`_derives`: none overrides it)."""
    defs = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    if len(defs) != 1 or defs[0].decorators:
        return None
    derived = any(isinstance(c, cst.ClassDef) and c is not cls and _derives(values, c, cls) for c in traversal.walk_statements(values.module))
    return None if derived else defs[0]


def attributes_named(values: "ModuleValues", name: str) -> list[cst.Attribute]:
    """Every ``x.<name>`` of the module."""
    return _by_name(values)[1].get(name, [])


def _by_name(values: "ModuleValues") -> tuple[dict[str, list[cst.FunctionDef]], dict[str, list[cst.Attribute]]]:
    """Every ``def`` and every ``x.<name>`` of the module, by name (one walk per module version)."""

    def index() -> tuple[dict[str, list[cst.FunctionDef]], dict[str, list[cst.Attribute]]]:
        functions: dict[str, list[cst.FunctionDef]] = {}
        attributes: dict[str, list[cst.Attribute]] = {}
        for node in traversal.of_classes(values.module, cst.FunctionDef):
            functions.setdefault(node.name.value, []).append(node)
        for node in traversal.of_classes(values.module, cst.Attribute):
            attributes.setdefault(node.attr.value, []).append(node)
        return functions, attributes

    return values.tree_facet("functions and attributes by name", index)


def _classes_of(values: "ModuleValues", receiver: cst.BaseExpression, depth: int) -> set[cst.ClassDef] | None:
    """The classes of the module whose instances ``receiver`` may be, where every value it may
    hold is shown to be one; None otherwise."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(receiver, cst.Name) and receiver.value == "self":
        owner = class_of_self(values, receiver)
        return None if owner is None else {owner}
    found: set[cst.ClassDef] = set()
    for value in values.values_of(receiver):
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in SELF_RETURNING:
            moved = _classes_of(values, func.value, depth + 1)
            if moved is None or not all(_is_module_class(values, c) and not _defines(c, func.attr.value) for c in moved):
                return None
            found |= moved
            continue
        if not isinstance(func, cst.Name):
            return None
        reach = values.reach(func)
        if reach.why is not None or len(reach.bindings) != 1 or not isinstance(reach.bindings[0], cst.ClassDef):
            return None
        found.add(reach.bindings[0])
    return found or None


def class_of_self(values: "ModuleValues", name: cst.Name) -> cst.ClassDef | None:
    """The class of the plain (undecorated) method whose first parameter ``name`` is, where it is
    read and not rebound (:func:`~.self_attributes.class_of_self`)."""
    method = method_of_self(values, name)  # (in a closure too: a function the method defines)
    if method is None or method.decorators:
        return None  # (a class method's `cls` is the class, a static method's first parameter anything)
    return values.parent(values.parent(method))  # type: ignore[return-value]


def _defines(cls: cst.ClassDef, method: str) -> bool:
    return any(isinstance(s, cst.FunctionDef) and s.name.value == method for s in cls.body.body)


def _derives(values: "ModuleValues", cls: cst.ClassDef, base: cst.ClassDef, depth: int = 0) -> bool:
    """``cls`` may derive from ``base`` (a base not resolved to a class of the module may)."""
    if depth > MAX_DEPTH:
        return True
    for arg in cls.bases:
        if not isinstance(arg.value, cst.Name) or values.names(arg.value) == {"builtins.object"}:
            continue  # `nn.Module`, `object`: not a class of this module
        reach = values.reach(arg.value)
        if reach.why is not None:
            return True
        found = [b for b in reach.bindings if isinstance(b, cst.ClassDef)]  # else imported: not of this module
        if any(b is base or _derives(values, b, base, depth + 1) for b in found):
            return True
    return False


def _is_module_class(values: "ModuleValues", cls: cst.ClassDef) -> bool:
    """``cls`` derives from ``torch.nn.Module`` directly (``class Net(nn.Module)``)."""
    return any("torch.nn.Module" in values.names(arg.value) or "torch.nn.modules.module.Module" in values.names(arg.value)
               for arg in cls.bases)

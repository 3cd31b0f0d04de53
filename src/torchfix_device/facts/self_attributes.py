"""What an attribute of ``self`` holds, where its class shows every value it is given.

``self.memory`` read in a method of class ``C`` (``self`` being the method's first parameter) is
grad-free for :class:`~torchfix_device.facts.grad.GradEvidence` when every way this
file gives ``memory`` a value is grad-free:

- ``self.memory = v`` (``v`` judged where it stands), ``self.memory: T = v``,
  ``self.memory += v``, ``self.memory[i] = v``, ``self.memory.fill_(v)`` in the methods of any
  class of the file (a subclass or a base of ``C`` may write it too), ``memory = v`` in a class
  body, ``self.register_buffer("memory", v)``;
- an in-place change of an attribute of that name through any other receiver
  (``model.memory[i] = v``, ``model.memory.add_(v)``, anywhere in the file) is a value too: the
  receiver may be an instance of ``C``;
- at least one such value is seen; nothing else in the file writes an attribute of that name
  (``other.memory = ...``) or makes it require grad (``model.memory.requires_grad_()``,
  ``model.memory.requires_grad = True``, ``.grad = ...``, through any receiver), registers a
  parameter or module of that name (``register_parameter``, ``add_module``) on a receiver
  that may be an instance of a class of the file (``self.seq.add_module(...)`` where every
  value of ``seq`` is made by a ``torch.nn`` class, ``nn.Sequential()``, is none), and ``setattr``,
  ``__setattr__``, ``__dict__`` and ``vars`` appear nowhere in it;
- every base class of ``C`` is ``object``, ``torch.nn.Module`` or a class of this file with such
  bases (a base from elsewhere may write the attribute).

A subclass in another file, or code there writing the attribute, is not seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device.facts.in_place import RANDOM_FILLS
from torchfix_device.facts.proof_memo import ProofMemo

if TYPE_CHECKING:
    from torchfix_device.facts.values import ModuleValues


REGISTERING = {"register_buffer", "register_parameter", "add_module", "register_module"}


CONTAINER_FILLS = frozenset({"update", "setdefault", "append", "extend", "insert", "__setitem__", "fromkeys"})
"""Methods that give a dict or list items their arguments hold."""


class SelfAttributeEvidence(ProofMemo):
    """``self_attribute_missing`` of :class:`GradEvidence` (which supplies ``parent``,
    ``module``, ``missing`` and ``args_missing``)."""

    module: cst.Module
    values: "ModuleValues"

    def names(self, node: cst.CSTNode) -> set[str]:  # pragma: no cover - supplied
        raise NotImplementedError

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:  # pragma: no cover - supplied
        raise NotImplementedError

    def missing(self, expr: cst.BaseExpression) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def args_missing(self, call: cst.Call) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def _values_of(self, expr: cst.BaseExpression) -> Iterator[cst.BaseExpression | None]:  # pragma: no cover
        raise NotImplementedError

    def self_attribute_missing(self, expr: cst.Attribute) -> str | None:
        """None when ``expr`` (``self.<name>``) is grad-free; else the evidence missing."""
        cls = self.class_of_self(expr.value)
        if cls is None:
            return f"`{nodes.code_of(expr)}` is an attribute whose value this file does not show"
        attr = expr.attr.value

        def values_missing() -> str | None:
            values = self._attribute_values(cls, attr)
            if not values:  # written some other way, or nowhere this file shows
                return f"`{nodes.code_of(expr)}` is an attribute whose value this file does not show"
            for value in values:
                found = self.missing(value) if isinstance(value, cst.BaseExpression) else self.args_missing(value[1])
                if found is not None:
                    return f"`{nodes.code_of(expr)}` may be given a value that requires grad: {found}"
            return None

        # assumed grad-free while its values are checked (a greatest fixpoint), remembered
        return self.prove(("attribute", id(cls), attr), values_missing)

    def class_of_self(self, receiver: cst.BaseExpression) -> cst.ClassDef | None:
        """The class whose method has ``receiver`` as its first parameter (not rebound)."""
        method = self.method_of_self(receiver)
        return self.parent(self.parent(method)) if method is not None else None  # type: ignore[return-value]

    def method_of_self(self, receiver: cst.BaseExpression) -> cst.FunctionDef | None:
        """The method of a class whose first parameter ``receiver`` is, read there or in a function
        the method defines (a closure), and rebound nowhere in the method."""
        if not isinstance(receiver, cst.Name):
            return None
        above = self.parent(receiver)
        while above is not None and not _first_parameter(above, receiver.value):
            if isinstance(above, (cst.Lambda, cst.ClassDef)) or (
                isinstance(above, cst.FunctionDef) and any(p.name.value == receiver.value for p in nodes.all_params(above))
            ):
                return None  # (a function defined in the method, a closure, reads the method's `self`)
            above = self.parent(above)
        if above is None:
            return None
        block = self.parent(above)
        cls = self.parent(block) if block is not None else None
        if not isinstance(cls, cst.ClassDef):
            return None
        rebinds: dict = self.__dict__.setdefault("_rebinds_self", {})
        key = (id(above), receiver.value)
        if key not in rebinds:  # one walk per method, not one per attribute read
            rebinds[key] = any(_binds(node, receiver.value) for node in traversal.of_classes_under(self.module, above.body, *BINDING))
        return None if rebinds[key] else above  # type: ignore[return-value]

    def _bases_shown(self, cls: cst.ClassDef, local: dict[str, cst.ClassDef], seen: set[int]) -> bool:
        """Every base class of ``cls`` is ``object``, ``torch.nn.Module`` or a class of this
        file whose own bases are (their methods are the file's, seen by the scan)."""
        if id(cls) in seen:
            return True
        seen.add(id(cls))
        for base in cls.bases:
            if base.keyword is not None or base.star:
                return False
            names = self.names(base.value)
            if names and names <= {"builtins.object", "torch.nn.Module", "torch.nn.modules.module.Module"}:
                continue
            inner = local.get(base.value.value) if isinstance(base.value, cst.Name) else None
            if inner is None or not self._bases_shown(inner, local, seen):
                return False
        return True

    def _attribute_values(self, cls: cst.ClassDef, attr: str) -> list[object] | None:
        """Every value ``attr`` is given: expressions, and ``("call", call)`` for an in-place
        method whose arguments are what it is changed by. None when something writes it
        another way, or may. (Remembered: it depends on the module alone.)"""
        found: dict = self.__dict__.setdefault("_attribute_values_of", {})
        key = (id(cls), attr)
        if key not in found:
            found[key] = None  # while it is scanned: what leans on itself is not shown
            found[key] = self._scan_attribute_values(cls, attr)
        return found[key]

    def held(self, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """What ``self.attr`` may hold, or an item of it (``self.attr[key]``, one index): every
        value the class gives the attribute whole, or for an item every value stored into an
        item and every value of a dict display given whole (``self.losses = {}``); None where
        the receiver is no method's ``self``, something writes the attribute another way (an
        in-place method), a whole value is stored beside items, or a whole value of an item's
        attribute is no dict display."""
        item = isinstance(expr, cst.Subscript)
        if item:
            if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
                return None
            expr = expr.value
        return self._held(expr, item)

    def _held(self, expr: cst.BaseExpression, item: bool) -> list[cst.BaseExpression] | None:
        """:meth:`held` of ``self.attr`` (``expr``) whole, or of any item of it."""
        if not isinstance(expr, cst.Attribute):
            return None
        cls = self.class_of_self(expr.value)
        values = self._attribute_values(cls, expr.attr.value) if cls is not None else None
        if not values or (item and self._filled_by_methods(expr.attr.value)):
            return None
        found: list[cst.BaseExpression] = []
        for value in values:
            if not isinstance(value, cst.BaseExpression):
                return None
            statement = self.parent(value)
            stored_in_item = isinstance(statement, cst.AugAssign) and isinstance(statement.target, cst.Subscript) or \
                isinstance(statement, cst.Assign) and any(isinstance(t.target, cst.Subscript) for t in statement.targets)
            if stored_in_item != item and not (item and isinstance(value, cst.Dict)):
                return None
            if isinstance(value, cst.Dict):
                if not item or any(not isinstance(e, cst.DictElement) for e in value.elements):
                    return None
                found.extend(e.value for e in value.elements)
            else:
                found.append(value)
        return found

    def _filled_by_methods(self, attr: str) -> bool:
        """Some receiver's attribute ``attr`` is given items by a method (``self.scores.update(d)``,
        ``.setdefault``, ``.append``...): what its items hold is not all shown."""
        for node in self.attribute_index().attributes.get(attr, ()):
            above = self.parent(node)
            if isinstance(above, cst.Attribute) and above.value is node and above.attr.value in CONTAINER_FILLS:
                return True
        return False

    def held_by_loop(self, target: cst.Name, loop: cst.For) -> list[cst.BaseExpression] | None:
        """What the loop variable ``target`` of ``loop`` may hold where the loop goes over the
        values of a dict or list kept on ``self`` (``for key, var in self.summaries.items()``:
        ``var``; ``for var in self.summaries.values()``): every value :meth:`held` by an item
        of the attribute; None otherwise."""
        call, whole = loop.iter, loop.target
        method = call.func.attr.value if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and not call.args else None
        if method == "items" and isinstance(whole, (cst.Tuple, cst.List)) and len(whole.elements) == 2:
            whole = whole.elements[1].value
        elif method != "values":
            return None
        if whole is not target:
            return None
        return self._held(cst.ensure_type(call.func, cst.Attribute).value, True)  # `self.summaries`: its items

    def backward_called(self, expr: cst.BaseExpression) -> bool:
        """``self.attr.backward()``, with no gradient, in some method of the file: the
        attribute holds a one-element tensor there (``expr``: ``self.attr`` in a method)."""
        if not isinstance(expr, cst.Attribute) or self.class_of_self(expr.value) is None:
            return False
        for node in self.attribute_index().attributes.get(expr.attr.value, ()):
            above = self.parent(node)
            call = self.parent(above) if isinstance(above, cst.Attribute) and above.attr.value == "backward" else None
            if isinstance(call, cst.Call) and call.func is above and not call.args and self.class_of_self(node.value) is not None:
                return True
        return False

    def made_by_torch(self, receiver: cst.BaseExpression) -> bool:
        """``receiver`` (``self.seq``, a name) only ever holds objects that ``torch.nn``
        classes made (``nn.Sequential()``): no instance of a class of this file."""
        return bool(self.torch_classes_held(receiver))

    def torch_classes_held(self, receiver: cst.BaseExpression) -> set[str]:
        """The ``torch.nn`` classes (last part: ``Dropout``) whose objects ``receiver``
        (``self.dropout``, a name) holds, where every value it is given is built by one; empty
        otherwise."""
        if isinstance(receiver, cst.Attribute):
            cls = self.class_of_self(receiver.value)
            values = self._attribute_values(cls, receiver.attr.value) if cls is not None else None
        else:
            values = list(self._values_of(receiver)) if isinstance(receiver, cst.Name) else None
        found: set[str] = set()
        for value in values or ():
            names = self.names(value.func) if isinstance(value, cst.Call) else set()
            if not _torch_classes(names):
                return set()
            found |= {q.rpartition(".")[2] for q in names}
        return found

    def attribute_index(self) -> "_AttributeIndex":
        """The module's :class:`_AttributeIndex` (one walk per tree, shared by every reader of it)."""
        return self.values.tree_facet("attribute index", lambda: _AttributeIndex(self.module))

    def _scan_attribute_values(self, cls: cst.ClassDef, attr: str) -> list[object] | None:
        index = self.attribute_index()
        classes = index.classes
        if index.dynamic or not self._bases_shown(cls, {c.name.value: c for c in classes}, set()):
            return None
        values: list[object] = []
        methods = [s for c in classes for s in _body(c) if isinstance(s, cst.FunctionDef)]
        selves = {id(m): m.params.params[0].name.value for m in methods if m.params.params}
        for statement in (s for c in classes for s in _body(c)):
            for small in _small_statements(statement):
                if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == attr for t in small.targets):
                    values.append(small.value)
        for node in index.attributes.get(attr, ()):
            method = _method_of(node, methods, self.parent)
            own = method is not None and isinstance(node.value, cst.Name) and node.value.value == selves.get(id(method))
            above = self.parent(node)
            if isinstance(above, cst.AssignTarget):
                if not own:
                    return None
                assign = cst.ensure_type(self.parent(above), cst.Assign)
                if above.target is not node:
                    return None  # unpacked: not followed
                values.append(assign.value)
            elif isinstance(above, (cst.AugAssign, cst.AnnAssign)) and above.target is node:
                if not own or above.value is None:
                    return None
                values.append(above.value)
            elif isinstance(above, cst.Subscript) and above.value is node:  # any receiver: it may be `self`
                grand = self.parent(above)
                if isinstance(grand, cst.AssignTarget):
                    values.append(cst.ensure_type(self.parent(grand), cst.Assign).value)
                elif isinstance(grand, cst.AugAssign) and grand.target is above:
                    values.append(grand.value)
            elif isinstance(above, cst.Attribute) and above.value is node and above.attr.value.endswith("_"):
                call = self.parent(above)
                if above.attr.value == "requires_grad_" or not isinstance(call, cst.Call):
                    return None
                if above.attr.value not in RANDOM_FILLS:  # those take numbers only
                    values.append(("call", call))
            elif isinstance(above, cst.Attribute) and above.value is node and above.attr.value in ("requires_grad", "grad"):
                if isinstance(self.parent(above), (cst.AssignTarget, cst.AugAssign)):
                    return None
        for node in index.registering:
            if not (len(node.args) >= 2 and isinstance(node.args[0].value, cst.SimpleString)):
                return None  # registered under a name not shown
            if node.args[0].value.evaluated_value != attr:
                continue
            func = cst.ensure_type(node.func, cst.Attribute)
            if func.attr.value != "register_buffer":
                if self.made_by_torch(func.value):
                    continue  # on a torch module, not on an instance of a class of this file
                return None  # a parameter or a module of that name
            values.append(node.args[1].value)
        return values


class _Reader(SelfAttributeEvidence):
    """The classes of one module version, read for the facts that ask what ``self.attr`` holds."""

    def __init__(self, values) -> None:  # noqa: ANN001 - a ModuleValues
        self.values, self.module, self.names, self.parent, self._values_of = values, values.module, values.names, values.parent, values.values_of


def held_by_self(values, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:  # noqa: ANN001
    """What ``self.attr`` may hold, in a method of its class, where the file shows every value the
    class gives it (:meth:`SelfAttributeEvidence.held`); None otherwise."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
        return None
    return values.facet("self attributes", lambda: _Reader(values)).held(expr)


def _first_parameter(node: cst.CSTNode, name: str) -> bool:
    """``node`` is a function whose first parameter is ``name``."""
    return isinstance(node, cst.FunctionDef) and bool(node.params.params) and node.params.params[0].name.value == name


def class_of_self(values, receiver: cst.BaseExpression) -> cst.ClassDef | None:  # noqa: ANN001
    """The class whose method has ``receiver`` as its first parameter, not rebound there."""
    return values.facet("self attributes", lambda: _Reader(values)).class_of_self(receiver)


def method_of_self(values, receiver: cst.BaseExpression) -> cst.FunctionDef | None:  # noqa: ANN001
    """The method whose first parameter ``receiver`` is (:meth:`SelfAttributeEvidence.method_of_self`)."""
    return values.facet("self attributes", lambda: _Reader(values)).method_of_self(receiver)


class _AttributeIndex:
    """One walk of the module: its classes, every ``x.<attr>`` by attribute name, the
    registering calls, and whether ``setattr``-like code may write any attribute."""

    def __init__(self, module: cst.Module) -> None:
        self.classes = [c for c in traversal.walk_statements(module) if isinstance(c, cst.ClassDef)]
        self.attributes: dict[str, list[cst.Attribute]] = {}
        self.registering: list[cst.Call] = []
        self.dynamic = False
        for node in traversal.of_classes(module, cst.Attribute):
            self.attributes.setdefault(node.attr.value, []).append(node)
        self.dynamic = any(node.value in ("setattr", "vars", "__dict__", "__setattr__") for node in traversal.of_classes(module, cst.Name))
        self.registering = [
            node for node in traversal.of_classes(module, cst.Call) if isinstance(node.func, cst.Attribute) and node.func.attr.value in REGISTERING
        ]


def _torch_classes(names: set[str]) -> bool:
    """Every name is a class of ``torch.nn`` (``torch.nn.Sequential``), none a function."""
    def one(q: str) -> bool:
        parts = q.split(".")
        return parts[:2] == ["torch", "nn"] and (len(parts) == 3 or parts[2] == "modules") and parts[-1][:1].isupper()
    return bool(names) and all(one(q) for q in names)


def _body(cls: cst.ClassDef) -> list[cst.BaseStatement]:
    body = cls.body
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def _small_statements(statement: cst.CSTNode) -> list[cst.BaseSmallStatement]:
    return list(statement.body) if isinstance(statement, cst.SimpleStatementLine) else []


BINDING = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.AsName)
"""The nodes that may bind a name (:func:`_binds`)."""


def _binds(node: cst.CSTNode, name: str) -> bool:
    """``node`` rebinds ``name`` (an assignment, a loop or ``with`` target, a walrus)."""
    if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
        return name in _bound_names(node.target)
    if isinstance(node, cst.AsName):
        return name in _bound_names(node.name)
    return False


def _bound_names(target: cst.BaseExpression) -> set[str]:
    """The names a target binds: ``a, (b, *c)`` binds a, b, c; ``x.y``, ``x[i]`` bind none."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _bound_names(e.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()


def _method_of(node: cst.CSTNode, methods: list[cst.FunctionDef], parent) -> cst.FunctionDef | None:  # noqa: ANN001
    ids = {id(m) for m in methods}
    above = parent(node)
    while above is not None:
        if id(above) in ids:
            return above  # type: ignore[return-value]
        above = parent(above)
    return None

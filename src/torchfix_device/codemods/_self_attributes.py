"""What an attribute of ``self`` holds, where its class shows every value it is given.

``self.memory`` read in a method of class ``C`` (``self`` being the method's first parameter) is
grad-free for :class:`~torchfix_device.codemods._grad_evidence.GradEvidence` when every way this
file gives ``memory`` a value is grad-free:

- ``self.memory = v`` (``v`` judged where it stands), ``self.memory: T = v``,
  ``self.memory += v``, ``self.memory[i] = v``, ``self.memory.fill_(v)`` in ``C``'s methods,
  ``memory = v`` in ``C``'s body, ``self.register_buffer("memory", v)``;
- and nothing else in the file writes an attribute of that name (``other.memory = ...``),
  ``setattr``, ``__dict__`` or ``vars`` appear nowhere in ``C``, and ``C`` names no base class
  of this file (whose methods would write too).

A subclass or code in another file writing the attribute is not seen.
"""

from __future__ import annotations

import libcst as cst

from torchfix_device import _cst


class SelfAttributeEvidence:
    """``self_attribute_missing`` of :class:`GradEvidence` (which supplies ``parent``,
    ``module``, ``missing`` and ``args_missing``)."""

    module: cst.Module

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:  # pragma: no cover - supplied
        raise NotImplementedError

    def missing(self, expr: cst.BaseExpression) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def args_missing(self, call: cst.Call) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def self_attribute_missing(self, expr: cst.Attribute) -> str | None:
        """None when ``expr`` (``self.<name>``) is grad-free; else the evidence missing."""
        shown = f"`{_cst.code_of(expr)}` is an attribute whose value this file does not show"
        cls = self._class_of_self(expr.value)
        if cls is None:
            return shown
        attr = expr.attr.value
        assumed: set[tuple[int, str]] = self.__dict__.setdefault("_attributes_assumed", set())
        key = (id(cls), attr)
        if key in assumed:
            return None  # being proven (see GradEvidence: a greatest fixpoint)
        assumed.add(key)
        try:
            values = self._attribute_values(cls, attr)
            if values is None:
                return shown
            for value in values:
                found = self.missing(value) if isinstance(value, cst.BaseExpression) else self.args_missing(value[1])
                if found is not None:
                    return f"`{_cst.code_of(expr)}` may be given a value that requires grad: {found}"
            return None
        finally:
            assumed.discard(key)

    def _class_of_self(self, receiver: cst.BaseExpression) -> cst.ClassDef | None:
        """The class whose method has ``receiver`` as its first parameter (not rebound)."""
        if not isinstance(receiver, cst.Name):
            return None
        above = self.parent(receiver)
        while above is not None and not isinstance(above, cst.FunctionDef):
            if isinstance(above, (cst.Lambda, cst.ClassDef)):
                return None
            above = self.parent(above)
        if above is None or not above.params.params or above.params.params[0].name.value != receiver.value:
            return None
        block = self.parent(above)
        cls = self.parent(block) if block is not None else None
        if not isinstance(cls, cst.ClassDef):
            return None
        if any(_binds(node, receiver.value) for node in _cst.walk(above.body)):
            return None
        return cls

    def _attribute_values(self, cls: cst.ClassDef, attr: str) -> list[object] | None:
        """Every value ``attr`` is given: expressions, and ``("call", call)`` for an in-place
        method whose arguments are what it is changed by. None when something writes it
        another way, or may."""
        local_bases = {c.name.value for c in _cst.walk_statements(self.module) if isinstance(c, cst.ClassDef)}
        if any(isinstance(b.value, cst.Name) and b.value.value in local_bases for b in cls.bases):
            return None
        values: list[object] = []
        methods = [s for s in _body(cls) if isinstance(s, cst.FunctionDef)]
        selves = {id(m): m.params.params[0].name.value for m in methods if m.params.params}
        for statement in _body(cls):
            for small in _small_statements(statement):
                if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == attr for t in small.targets):
                    values.append(small.value)
        for node in _cst.walk(self.module):
            if isinstance(node, cst.Name) and node.value in ("setattr", "vars", "__dict__") and _inside(node, cls, self.parent):
                return None
            if not (isinstance(node, cst.Attribute) and node.attr.value == attr):
                continue
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
            elif own and isinstance(above, cst.Subscript) and above.value is node:
                grand = self.parent(above)
                if isinstance(grand, cst.AssignTarget):
                    values.append(cst.ensure_type(self.parent(grand), cst.Assign).value)
                elif isinstance(grand, cst.AugAssign) and grand.target is above:
                    values.append(grand.value)
            elif own and isinstance(above, cst.Attribute) and above.value is node and above.attr.value.endswith("_"):
                call = self.parent(above)
                if above.attr.value == "requires_grad_" or not isinstance(call, cst.Call):
                    return None
                values.append(("call", call))
            elif own and isinstance(above, cst.Attribute) and above.value is node and above.attr.value in ("requires_grad", "grad"):
                if isinstance(self.parent(above), (cst.AssignTarget, cst.AugAssign)):
                    return None
        for node in _cst.walk(cls):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "register_buffer":
                if len(node.args) >= 2 and isinstance(node.args[0].value, cst.SimpleString):
                    if node.args[0].value.evaluated_value == attr:
                        values.append(node.args[1].value)
                else:
                    return None
        return values


def _body(cls: cst.ClassDef) -> list[cst.BaseStatement]:
    body = cls.body
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def _small_statements(statement: cst.CSTNode) -> list[cst.BaseSmallStatement]:
    return list(statement.body) if isinstance(statement, cst.SimpleStatementLine) else []


def _binds(node: cst.CSTNode, name: str) -> bool:
    """``node`` rebinds ``name`` (an assignment, a loop or ``with`` target, a walrus)."""
    if isinstance(node, cst.AssignTarget):
        return any(isinstance(n, cst.Name) and n.value == name for n in _cst.walk(node.target))
    if isinstance(node, (cst.For, cst.CompFor, cst.NamedExpr)):
        return any(isinstance(n, cst.Name) and n.value == name for n in _cst.walk(node.target))
    if isinstance(node, cst.AsName):
        return any(isinstance(n, cst.Name) and n.value == name for n in _cst.walk(node.name))
    return False


def _inside(node: cst.CSTNode, container: cst.CSTNode, parent) -> bool:  # noqa: ANN001
    while node is not None:
        if node is container:
            return True
        node = parent(node)
    return False


def _method_of(node: cst.CSTNode, methods: list[cst.FunctionDef], parent) -> cst.FunctionDef | None:  # noqa: ANN001
    ids = {id(m) for m in methods}
    above = parent(node)
    while above is not None:
        if id(above) in ids:
            return above  # type: ignore[return-value]
        above = parent(above)
    return None

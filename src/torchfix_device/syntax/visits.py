"""libcst's visits, without rebuilding the nodes nothing changed.

``CSTNode.visit`` runs ``_visit_and_replace_children`` for every node a visitor goes through:
each child is visited through ``visit_required``/``visit_sequence``/... and the node is then
built anew from what they return (a dataclass ``__init__`` and a validation per node), whether
anything changed or not. A plain ``CSTVisitor`` (every metadata provider: scopes, expression
contexts, parents; the batched visitors) throws that copy away; a transformer (every codemod)
keeps it, though in most of a tree no hook replaced anything. That rebuilding was a third of
the time of the scope analyses the engine runs on pieces of a file, and about a fifth of the
engine's time on legacy repos.

:func:`install` makes ``CSTNode.visit`` go through the same hooks in the same order
(``on_visit``; per field, ``on_visit_attribute``, the field's nodes, ``on_leave_attribute``;
``on_leave``) without building anything where it can:

- a plain visitor gets the node itself back, as from libcst;
- a transformer gets, as ``updated_node``, the node itself where no child was replaced, and
  otherwise the node with the replaced fields only (``with_changes``: the same constructor and
  validation libcst's rebuild runs), with libcst's rules for what a child's hook may return: a
  ``RemovalSentinel`` empties an optional field (None) or a sentinel field
  (``MaybeSentinel.DEFAULT``) and drops an element of a sequence (and in a block, a statement
  line left empty by it), a ``FlattenSentinel`` splices elements into a sequence, either where a
  single node is required raises libcst's ``TypeError``; the leave hook's result is checked as
  libcst checks it.

The fields, their order and the ``visit_*`` helper of each are read once per node class from the
source of its own ``_visit_and_replace_children`` (a field visited only when it is not None,
like an f-string's ``format_spec``, gets no attribute hooks when it is None, as there). A class
whose source cannot be read that way goes through libcst's own ``visit``. Trees the engine
rewrites keep their unchanged parts as the same objects as the tree before, which libcst's
copies did not; where a rewrite then holds a node twice, the metadata wrapper copies the tree
(``engine.shared``). ``tests/test_engine.py`` compares every hook call of both visits on every
fixture, and the trees and code a transformer makes with each.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from typing import Any

from libcst._flatten_sentinel import FlattenSentinel
from libcst._maybe_sentinel import MaybeSentinel
from libcst._nodes.base import CSTNode, CSTValidationError
from libcst._removal_sentinel import RemovalSentinel
from libcst._batched_visitor import _BatchedCSTVisitor
from libcst._typed_visitor import CSTTypedBaseFunctions, CSTTypedTransformerFunctions, CSTTypedVisitorFunctions
from libcst._visitors import CSTVisitor

from torchfix_device.syntax import node_classes  # noqa: F401  (isinstance as plain classes answer it)

_LIBCST_VISIT = CSTNode.visit
_FIELD_HOOK = re.compile(r"(visit|leave)_[A-Za-z]+_\w+")
"""The name of a per-field hook (``visit_Call_func``), or of some other method a visitor holds."""
LIBCST_DEFAULTS = (CSTTypedBaseFunctions, CSTTypedVisitorFunctions, CSTTypedTransformerFunctions, object)
"""The classes of libcst's empty default hooks (one for every node and field)."""
_HELPERS = frozenset({
    "visit_required", "visit_optional", "visit_sentinel", "visit_sequence", "visit_iterable",
    "visit_body_sequence", "visit_body_iterable",
})
Field = tuple[str, bool, str]
"""A field's name, whether it is skipped (hooks included) when None, and its ``visit_*`` helper
(the first one named for it: ``ImportFrom.names`` is a sequence or a lone ``ImportStar``)."""
_FIELDS: dict[type, tuple[Field, ...] | None] = {}
"""Node class → its fields in visiting order; None: libcst's own visit."""
_PLAIN: dict[type, bool] = {}
"""Visitor class → whether it is a plain ``CSTVisitor`` (``isinstance`` on libcst's abstract
classes is slow, and asked for every node)."""


def libcst_visit(node: CSTNode, visitor: Any) -> Any:
    """libcst's own ``CSTNode.visit``, all the way down (for comparisons: the visits are
    installed again after it, so not for use by several threads)."""
    installed = CSTNode.visit
    CSTNode.visit = _LIBCST_VISIT  # type: ignore[method-assign]
    try:
        return _LIBCST_VISIT(node, visitor)
    finally:
        CSTNode.visit = installed  # type: ignore[method-assign]


def fields_of(cls: type) -> tuple[Field, ...] | None:
    """The fields ``cls._visit_and_replace_children`` visits, in order (see :data:`Field`);
    None where its source does not say."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    try:
        found: tuple[Field, ...] | None = _read_fields(cls)
    except (OSError, TypeError, SyntaxError, ValueError):
        found = None
    _FIELDS[cls] = found
    return found


def _read_fields(cls: type) -> tuple[Field, ...]:
    source = textwrap.dedent(inspect.getsource(cls._visit_and_replace_children))
    fields: list[Field] = []

    class Calls(ast.NodeVisitor):
        def visit_Call(self, call: ast.Call) -> None:
            if isinstance(call.func, ast.Name) and call.func.id in _HELPERS:
                name = call.args[1]
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    raise ValueError(f"{cls.__name__}: a field name that is not a string")
                if not fields or fields[-1][0] != name.value:  # `a(x) if c else b(x)`: one field
                    fields.append((name.value, False, call.func.id))
            self.generic_visit(call)

        def visit_IfExp(self, choice: ast.IfExp) -> None:
            self.visit(choice.test)
            before = len(fields)
            self.visit(choice.body)
            if isinstance(choice.orelse, ast.Constant) and choice.orelse.value is None:
                if len(fields) != before + 1:
                    raise ValueError(f"{cls.__name__}: a conditional visit of several fields")
                name, _, helper = fields[-1]
                fields[-1] = (name, True, helper)  # `visit_...(x) if x is not None else None`
            else:
                self.visit(choice.orelse)

    function = ast.parse(source).body[0]
    if not isinstance(function, ast.FunctionDef):
        raise ValueError(f"{cls.__name__}: no function")
    for statement in function.body:
        if isinstance(statement, (ast.If, ast.For, ast.While, ast.Try, ast.With)):
            raise ValueError(f"{cls.__name__}: a visit that depends on the node")
        Calls().visit(statement)
    return tuple(fields)


def _visit(node: CSTNode, visitor: Any) -> Any:
    plain = _PLAIN.get(type(visitor))
    if plain is None:
        plain = _PLAIN[type(visitor)] = isinstance(visitor, CSTVisitor)
    cls = type(node)
    fields = _FIELDS[cls] if cls in _FIELDS else fields_of(cls)
    if fields is None:
        return _LIBCST_VISIT(node, visitor)
    if plain:
        _walk(node, visitor, _has_field_hooks(visitor))
        return node
    return _transform(node, fields, visitor)


def _has_field_hooks(visitor: CSTVisitor) -> bool:
    """Whether a plain visitor's per-field hooks (``on_visit_attribute``) may run anything: a
    batched visitor (the metadata providers') holding a ``visit_Call_func``-like method, or a
    visitor that defines one or overrides the hooks themselves. libcst's default hooks only
    look such a method up by name, for every field of every node."""
    cls = type(visitor)
    if cls is _BatchedCSTVisitor:
        return any(_FIELD_HOOK.fullmatch(name) for name in visitor.visitor_methods)
    return (
        cls.on_visit_attribute is not CSTVisitor.on_visit_attribute
        or cls.on_leave_attribute is not CSTVisitor.on_leave_attribute
        or defines_field_hooks(cls)
        or any(_FIELD_HOOK.fullmatch(name) for name in vars(visitor))
    )


@functools.lru_cache(maxsize=None)
def defines_field_hooks(cls: type) -> bool:
    """Whether ``cls`` defines a per-field hook (``visit_Call_func``, ``leave_If_test``) anywhere
    above libcst's own empty defaults."""
    return any(_FIELD_HOOK.fullmatch(name) for klass in cls.__mro__ if klass not in LIBCST_DEFAULTS for name in vars(klass))


def _walk(node: CSTNode, visitor: CSTVisitor, field_hooks: bool = True) -> None:
    cls = type(node)
    fields = _FIELDS[cls] if cls in _FIELDS else fields_of(cls)
    if fields is None:
        _LIBCST_VISIT(node, visitor)
        return
    if visitor.on_visit(node):
        for name, skipped_when_none, _ in fields:
            value = getattr(node, name)
            if value is None and skipped_when_none:
                continue
            if field_hooks:
                visitor.on_visit_attribute(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for child in value:
                    _walk(child, visitor, field_hooks)
            elif value is not None and kind is not MaybeSentinel:
                _walk(value, visitor, field_hooks)
            if field_hooks:
                visitor.on_leave_attribute(node, name)
    visitor.on_leave(node)


def _transform(node: CSTNode, fields: tuple[Field, ...], visitor: Any) -> Any:
    updated = node
    if visitor.on_visit(node):
        changes: dict[str, Any] | None = None
        for name, skipped_when_none, helper in fields:
            value = getattr(node, name)
            if value is None and skipped_when_none:
                continue
            visitor.on_visit_attribute(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                new = _sequence(value, visitor, helper.startswith("visit_body"))
            elif value is None or kind is MaybeSentinel:
                new = value
            else:
                new = _one(value, visitor, helper)
            visitor.on_leave_attribute(node, name)
            if new is not value:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is not None:
            updated = node.with_changes(**changes)
    result = visitor.on_leave(node, updated)
    if not isinstance(result, (CSTNode, RemovalSentinel, FlattenSentinel)):
        raise CSTValidationError(
            "Expected a node of type CSTNode or a RemovalSentinel, "
            + f"but got a return value of {type(result).__name__}"
        )
    return result


def _one(child: CSTNode, visitor: Any, helper: str) -> Any:
    """A field holding one node: what libcst's ``visit_required`` / ``visit_optional`` /
    ``visit_sentinel`` make of the child's visit (the child itself where nothing replaced it)."""
    result = child.visit(visitor)
    if result is child:
        return child
    if isinstance(result, FlattenSentinel) or (helper == "visit_required" and isinstance(result, RemovalSentinel)):
        what = "a FlattenSentinel" if isinstance(result, FlattenSentinel) else "a RemovalSentinel"
        raise TypeError(
            f"We got {what} while visiting a {type(child).__name__}. This node's parent does not allow it"
        )
    if isinstance(result, RemovalSentinel):
        return None if helper == "visit_optional" else MaybeSentinel.DEFAULT
    return result


def _sequence(children: Any, visitor: Any, body: bool) -> Any:
    """A field holding a sequence: libcst's ``visit_sequence`` (``visit_body_sequence`` for a
    block, ``body``), or the sequence itself where no element was replaced."""
    new: list[Any] = []
    replaced = False
    for child in children:
        result = child.visit(visitor)
        if result is child:
            new.append(child)
            continue
        replaced = True
        if isinstance(result, RemovalSentinel):
            continue
        for element in (result if isinstance(result, FlattenSentinel) else (result,)):
            if body and not child._is_removable() and element._is_removable():
                continue  # a statement line a removal emptied: dropped, as libcst does
            new.append(element)
    return tuple(new) if replaced else children


def install() -> None:
    """Make ``CSTNode.visit`` the visit above (idempotent)."""
    CSTNode.visit = _visit  # type: ignore[method-assign]


install()

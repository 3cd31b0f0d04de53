"""What statements bind, and where: the names a target binds, ``self.x`` attributes, a class's
methods, body names and registered names, the value a name is bound to in a block."""

from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal

REGISTERING_METHODS = {"add_module", "register_module", "register_parameter", "register_buffer"}


def self_attr(node: cst.CSTNode | None) -> str | None:
    """``NAME`` for ``self.NAME``, else None."""
    if isinstance(node, cst.Attribute) and m.matches(node.value, m.Name("self")):
        return node.attr.value
    return None


def methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    """The functions defined directly in the class body."""
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]


def walk_class(cls: cst.ClassDef) -> Iterator[tuple[cst.CSTNode, cst.CSTNode | None]]:
    """(node, parent) for every node of the class body, nested classes left out (their ``self``
    is another object)."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(cls.body, cls)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        for child in reversed(traversal.children(node)):
            if not isinstance(child, cst.ClassDef):
                stack.append((child, node))


def walk_function(func: cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """Every node of ``func``'s body in its own scope (nested functions, lambdas and classes
    left out)."""
    stack: list[cst.CSTNode] = list(reversed(traversal.children(func.body)))
    while stack:
        node = stack.pop()
        yield node
        for child in reversed(traversal.children(node)):
            if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                stack.append(child)


def is_super_init_call(stmt: cst.BaseStatement) -> bool:
    """``super().__init__(...)``, ``super(C, self).__init__(...)``, ``Base.__init__(self, ...)``."""
    if not m.matches(stmt, m.SimpleStatementLine(body=[m.Expr(m.Call(func=m.Attribute(attr=m.Name("__init__"))))])):
        return False
    call = cst.ensure_type(cst.ensure_type(cst.ensure_type(stmt, cst.SimpleStatementLine).body[0], cst.Expr).value, cst.Call)
    base = cst.ensure_type(call.func, cst.Attribute).value
    if m.matches(base, m.Call(func=m.Name("super"))):
        return True
    if isinstance(base, (cst.Name, cst.Attribute)) and nodes.dotted_name(base) is not None:
        first = nodes.positional_args(call)
        return bool(first) and m.matches(first[0].value, m.Name("self"))
    return False


def super_init_index(init: cst.FunctionDef) -> int | None:
    """Index of the ``super().__init__()`` statement among ``init``'s top-level statements."""
    for index, stmt in enumerate(init.body.body):
        if is_super_init_call(stmt):
            return index
    return None


def class_body_names(cls: cst.ClassDef) -> set[str]:
    """Names the class body itself defines (methods, class attributes, properties)."""
    names: set[str] = set()
    for stmt in cls.body.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.add(stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets: list[cst.BaseExpression] = []
                if isinstance(small, cst.Assign):
                    targets = [t.target for t in small.targets]
                elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                    targets = [small.target]
                for target in targets:
                    for node in traversal.walk(target):
                        if isinstance(node, cst.Name):
                            names.add(node.value)
    return names


def registered_names(cls: cst.ClassDef) -> set[str]:
    """Names registered by ``self.register_buffer("x", ...)`` / ``register_parameter`` /
    ``add_module`` / ``register_module`` with a string literal, anywhere in the class."""
    names: set[str] = set()
    for node, _ in walk_class(cls):
        if isinstance(node, cst.Call) and m.matches(node.func, m.Attribute(m.Name("self"), m.Name())):
            method = cst.ensure_type(node.func, cst.Attribute).attr.value
            args = nodes.positional_args(node)
            if method in REGISTERING_METHODS and args and isinstance(args[0].value, cst.SimpleString):
                value = args[0].value.evaluated_value
                if isinstance(value, str):
                    names.add(value)
    return names


def from_import_of(module: cst.Module, packages: tuple[str, ...], name: str) -> str | None:
    """The local name under which ``from <package> import <name>`` binds ``name`` at module level."""
    for stmt in module.body:
        small_statements: list[cst.BaseSmallStatement] = []
        if isinstance(stmt, cst.SimpleStatementLine):
            small_statements = list(stmt.body)
        elif isinstance(stmt, (cst.Try, cst.If)):
            for inner in stmt.body.body:
                if isinstance(inner, cst.SimpleStatementLine):
                    small_statements.extend(inner.body)
        for small in small_statements:
            if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                continue
            if small.relative or small.module is None or nodes.dotted_name(small.module) not in packages:
                continue
            for alias in small.names:
                if isinstance(alias.name, cst.Name) and alias.name.value == name:
                    if alias.asname is None:
                        return name
                    return cst.ensure_type(alias.asname.name, cst.Name).value
    return None


def binding_of(node: cst.CSTNode, name: str) -> cst.BaseExpression | None | bool:
    """The value ``node`` binds to ``name`` (``name = value``); False when it binds it in a way
    that cannot be followed (a loop target, tuple unpacking, ``with ... as``, ``global``, an
    import, ``:=``); None when it does not bind it (``name += x`` and ``name[i] = x`` update it)."""
    if isinstance(node, cst.Assign):
        for target in node.targets:
            if m.matches(target.target, m.Name(name)):
                return node.value if len(node.targets) == 1 else False
            if not isinstance(target.target, cst.Name) and any(
                m.matches(n, m.Name(name)) for n in unpacked_names(target.target)
            ):
                return False
        return None
    if isinstance(node, cst.AnnAssign) and m.matches(node.target, m.Name(name)):
        return node.value if node.value is not None else None
    if isinstance(node, (cst.For, cst.CompFor)) and any(m.matches(n, m.Name(name)) for n in unpacked_names(node.target)):
        return False
    if isinstance(node, cst.WithItem) and node.asname is not None and any(
        m.matches(n, m.Name(name)) for n in unpacked_names(node.asname.name)
    ):
        return False
    if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == name for n in node.names):
        return False
    if isinstance(node, cst.NamedExpr) and m.matches(node.target, m.Name(name)):
        return False
    if isinstance(node, (cst.Import, cst.ImportFrom)) and name in {
        (cst.ensure_type(a.asname.name, cst.Name).value if a.asname else (nodes.dotted_name(a.name) or "").split(".")[0])
        for a in (node.names if not isinstance(node.names, cst.ImportStar) else [])
    }:
        return False
    return None


def names_bound_by(node: cst.CSTNode) -> list[str]:
    """The names ``n`` for which :func:`binding_of` ``(node, n)`` is not None: every name
    ``node`` binds, one call for all of them."""
    if isinstance(node, cst.Assign):
        return [n.value for t in node.targets for n in unpacked_names(t.target)]
    if isinstance(node, cst.AnnAssign):
        return [node.target.value] if isinstance(node.target, cst.Name) and node.value is not None else []
    if isinstance(node, (cst.For, cst.CompFor)):
        return [n.value for n in unpacked_names(node.target)]
    if isinstance(node, cst.WithItem):
        return [n.value for n in unpacked_names(node.asname.name)] if node.asname is not None else []
    if isinstance(node, (cst.Global, cst.Nonlocal)):
        return [n.name.value for n in node.names]
    if isinstance(node, cst.NamedExpr):
        return [node.target.value] if isinstance(node.target, cst.Name) else []
    if isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
        return [
            cst.ensure_type(a.asname.name, cst.Name).value if a.asname else (nodes.dotted_name(a.name) or "").split(".")[0]
            for a in node.names
        ]
    return []


def unpacked_names(target: cst.BaseExpression) -> list[cst.Name]:
    """Names bound by an assignment target (``a``, ``a, (b, c)``, ``*rest``), not attributes."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in unpacked_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return unpacked_names(target.value)
    return []

"""What ``from M import *`` binds: the names of module ``M`` at the end of its top-level code,
read with CPython's ``ast`` (no libcst, no import of anything), and what each is.

:func:`module_namespace` runs through ``M``'s top-level statements in order, as the
interpreter would, recording for each name the last thing that bound it (:class:`Bound`):

- an import of a module from outside the project (``import torch``, ``import torch.nn as nn``,
  ``from torch.autograd import Variable``): the qualified name it binds, *proven*; a name
  imported from a module of the project (``from .utils import Variable``) is what that module
  binds it to;
- a ``def`` or ``class``: a new object of the module's own, never a torch object (``other``);
- anything else (an assignment, a ``for`` target, a binding under ``if``, ``try`` or any other
  block, a name a function declares ``global``): not known (``doubt``, with the reason).

Nested ``from N import *`` statements are followed (:class:`Resolver` finds ``N``), in order: a
later binding shadows an earlier one. What a star import binds is then :func:`exports`:
``__all__`` when it is a literal list or tuple of strings (assigned, or extended with ``+=``
by literals; anything else makes the names unknown), otherwise every name without a leading
underscore, plus a package's submodules (module objects). Where the set of names itself is
not known (a module that is not found, cannot be parsed, sits in a cycle of star imports, or
binds names through ``globals()``/``exec``), ``rest`` says why: any other name may be bound,
to anything. A module of the standard library binds names none of which is a torch object.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, NamedTuple, Protocol

IMPORT, OTHER, DOUBT = "import", "other", "doubt"
STDLIB = "stdlib"
"""``rest`` of a standard-library module: other names may be bound, none to a torch object."""

_DYNAMIC = frozenset({"globals", "vars", "locals", "exec", "eval"})



class Resolver(Protocol):
    """What following imports needs (:class:`torchfix_device.facts.star_imports.Resolver` gives it):
    the modules an import names, found, parsed and followed once."""

    def star_namespace(self, spelt: str, level: int, importer: Path, stack: tuple[Path, ...]) -> "Namespace": ...

    def imported(self, spelt: str, level: int, name: str, importer: Path, stack: tuple[Path, ...]) -> "Bound": ...

    def submodules(self, init: Path) -> frozenset[str]: ...

    def has_submodule(self, init: Path, name: str) -> bool: ...

class Bound(NamedTuple):
    kind: str
    """:data:`IMPORT` (``value``: the qualified name), :data:`OTHER` or :data:`DOUBT`
    (``value``: what it is, in words)."""
    value: str


class Namespace(NamedTuple):
    names: dict[str, Bound]
    rest: str | None
    """None: no other name is bound; :data:`STDLIB`; otherwise why any other name may be."""


class _Module:
    """The simulation of one module's top-level code."""

    def __init__(self, resolver: "Resolver", path, tree: ast.Module, shown: str, stack: tuple) -> None:
        self.resolver, self.path, self.shown, self.stack = resolver, path, shown, stack
        self.names: dict[str, Bound] = {}
        self.rest: str | None = None
        self.all: tuple[str, ...] | None = None
        self.all_unknown: str | None = None
        self.package = path.name == "__init__.py"
        for statement in tree.body:
            self.statement(statement, conditional=False)
        for name in _declared_global(tree):
            self.names[name] = Bound(DOUBT, f"a function of {shown} declares it `global`")
        dynamic = _dynamic_call(tree)
        if dynamic is not None:
            self.everything_doubtful(f"{shown} binds names through `{dynamic}()` (line {_line(tree, dynamic)})")

    # -- statements ----------------------------------------------------------------------
    def where(self, node: ast.AST) -> str:
        return f"{self.shown}:{getattr(node, 'lineno', '?')}"

    def bind(self, name: str, bound: Bound, conditional: bool, node: ast.AST) -> None:
        if conditional and self.names.get(name) != bound:
            bound = Bound(DOUBT, f"bound under a condition or in a block at {self.where(node)}")
        self.names[name] = bound

    def everything_doubtful(self, why: str) -> None:
        for name in self.names:
            self.names[name] = Bound(DOUBT, why)
        self.rest = why

    def statement(self, node: ast.stmt, conditional: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.bind(alias.asname, Bound(IMPORT, alias.name), conditional, node)
                else:
                    root = alias.name.partition(".")[0]
                    self.bind(root, Bound(IMPORT, root), conditional, node)
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node, conditional)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator_binding in _bindings_in(node.decorator_list):
                self.bind(decorator_binding, Bound(DOUBT, f"assigned at {self.where(node)}"), conditional, node)
            self.bind(node.name, Bound(OTHER, f"a {'class' if isinstance(node, ast.ClassDef) else 'function'} of {self.shown}"), conditional, node)
        elif isinstance(node, (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Match)) or type(node).__name__ == "TryStar":
            self.all_statement(node)
            for name in _bindings_in(_header_parts(node)):
                self.bind(name, Bound(DOUBT, f"assigned at {self.where(node)}"), True, node)
            for block in _blocks(node):
                for inner in block:
                    self.statement(inner, conditional=True)
        else:
            self.all_statement(node)
            if not (isinstance(node, (ast.Assign, ast.AugAssign)) and _is_all(node)):
                for name in _bindings_in([node]):
                    if name == "__all__":
                        self.all_unknown = f"`__all__` is not a literal list of names at {self.where(node)}"
                    self.bind(name, Bound(DOUBT, f"assigned at {self.where(node)}"), conditional, node)
            if isinstance(node, ast.Delete):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.bind(target.id, Bound(DOUBT, f"deleted at {self.where(node)}"), conditional, node)

    def all_statement(self, node: ast.stmt) -> None:
        """``__all__ = [...]`` / ``__all__ += [...]`` with literal strings: the names exported;
        ``__all__`` changed any other way: the exported names are not known."""
        if isinstance(node, (ast.Assign, ast.AugAssign)) and _is_all(node):
            names = _literal_names(node.value)
            if names is None or (isinstance(node, ast.AugAssign) and (self.all is None or not isinstance(node.op, ast.Add))):
                self.all_unknown = f"`__all__` is computed at {self.where(node)}"
            else:
                self.all = names if isinstance(node, ast.Assign) else self.all + names  # type: ignore[operator]
            return
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "__all__":
                self.all_unknown = f"`__all__` is changed at {self.where(node)}"  # __all__.append(...)
            elif isinstance(inner, ast.Name) and inner.id == "__all__" and not isinstance(inner.ctx, ast.Load):
                self.all_unknown = f"`__all__` is computed at {self.where(node)}"

    def import_from(self, node: ast.ImportFrom, conditional: bool) -> None:
        module = node.module or ""
        if self.package and node.level == 1 and module:  # importing pkg.sub binds `sub` in pkg
            self.bind(module.split(".")[0], Bound(OTHER, f"a submodule of {self.shown}"), conditional, node)
        if node.names[0].name != "*":
            for alias in node.names:
                bound = alias.asname or alias.name
                if self.package and node.level == 1 and not module and self.resolver.has_submodule(self.path, alias.name):
                    self.bind(bound, Bound(OTHER, f"a submodule of {self.shown}"), conditional, node)
                else:  # followed into the module where it is one of the project
                    self.bind(bound, self.resolver.imported("." * node.level + module, node.level, alias.name, self.path, self.stack), conditional, node)
            return
        spelt = "." * node.level + module
        found = self.resolver.star_namespace(spelt, node.level, self.path, self.stack)
        label = f"`from {spelt} import *` at {self.where(node)}"
        for name, bound in found.names.items():
            self.bind(name, bound, conditional, node)
        if found.rest is None:
            return
        why = f"{label} may rebind it" + ("" if found.rest == STDLIB else f" ({found.rest})")
        for name in self.names:
            if name not in found.names:
                self.names[name] = Bound(DOUBT, why)
        if found.rest != STDLIB:
            self.rest = f"{label}: {found.rest}"
        elif self.rest is None:
            self.rest = STDLIB


def exports(module: _Module) -> Namespace:
    """What ``from M import *`` binds, ``module`` being M's simulation."""
    if module.all_unknown is not None:
        return Namespace({n: Bound(DOUBT, module.all_unknown) for n in module.names}, module.all_unknown)
    if module.all is not None:
        names: dict[str, Bound] = {}
        for name in module.all:
            if name in module.names:
                names[name] = module.names[name]
            elif module.package and module.resolver.has_submodule(module.path, name):
                names[name] = Bound(OTHER, f"a submodule of {module.shown}")
            else:
                names[name] = Bound(DOUBT, f"{module.shown} lists it in `__all__` but does not show what it is")
        return Namespace(names, None)
    names = {n: b for n, b in module.names.items() if not n.startswith("_")}
    if module.package:
        for sub in module.resolver.submodules(module.path):
            if not sub.startswith("_"):
                names.setdefault(sub, Bound(OTHER, f"a submodule of {module.shown}"))
    return Namespace(names, module.rest)


def module_namespace(resolver: "Resolver", path, tree: ast.Module, shown: str, stack: tuple) -> Namespace:
    """What ``from M import *`` binds, for the module ``path`` (its ``tree``, named ``shown``)."""
    return exports(_Module(resolver, path, tree, shown, stack))


# -- small helpers --------------------------------------------------------------------------
def _is_all(node: ast.Assign | ast.AugAssign) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == "__all__"


def _literal_names(value: ast.expr) -> tuple[str, ...] | None:
    if not isinstance(value, (ast.List, ast.Tuple)):
        return None
    if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
        return None
    return tuple(e.value for e in value.elts)  # type: ignore[attr-defined]


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _walk_outside_scopes(nodes: list) -> Iterator[ast.AST]:
    """Every node of ``nodes`` and below, not entering function, class or lambda bodies."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                yield child  # its name binds; decorators and defaults are walked below
                stack.extend(getattr(child, "decorator_list", []))
                args = getattr(child, "args", None)
                if isinstance(args, ast.arguments):
                    stack.extend(d for d in args.defaults + args.kw_defaults if d is not None)
                continue
            stack.append(child)


def _bindings_in(nodes: list) -> Iterator[str]:
    """Names bound in the module's scope by ``nodes`` (not entering nested scopes; a walrus in
    a comprehension binds in the module, the comprehension's own targets do not)."""
    comprehension_targets: set[int] = set()
    for node in _walk_outside_scopes(nodes):
        if isinstance(node, _COMPREHENSIONS):
            for generator in node.generators:
                comprehension_targets.update(id(n) for n in ast.walk(generator.target))
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in comprehension_targets:
            yield node.id
        elif isinstance(node, _SCOPES) and not isinstance(node, ast.Lambda) and node not in nodes:
            yield node.name  # type: ignore[union-attr]
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and node not in nodes:
            for alias in node.names:
                if alias.name != "*":
                    yield alias.asname or alias.name.partition(".")[0]
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            yield node.name
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest


def _header_parts(node: ast.stmt) -> list:
    """The parts of a compound statement outside its blocks (a ``for`` target, ``with ... as``)."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target, node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return list(node.items)
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if isinstance(node, ast.Match):
        return [node.subject] + [c.pattern for c in node.cases] + [c.guard for c in node.cases if c.guard]
    return [h for h in getattr(node, "handlers", [])]


def _blocks(node: ast.stmt) -> Iterator[list]:
    if isinstance(node, ast.Match):
        for case in node.cases:
            yield case.body
        return
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if block:
            yield block
    for handler in getattr(node, "handlers", []):
        yield handler.body


def _declared_global(tree: ast.Module) -> set[str]:
    return {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}


def _dynamic_call(tree: ast.Module) -> str | None:
    """``globals()``, ``vars()``, ``exec(...)`` and the like, called anywhere in the module
    (``vars(args)``, of an object, reads that object's attributes: it binds nothing)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC:
            if not (node.func.id == "vars" and node.args):
                return node.func.id
    return None


def _line(tree: ast.Module, name: str) -> int:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            return node.lineno
    return 0

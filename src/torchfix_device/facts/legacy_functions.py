"""Legacy autograd Functions (``class F(torch.autograd.Function)`` with a non-static
``forward(self, ...)``, called as ``F()(x)``): which can be migrated, and where they are used.

Read with the stdlib ``ast``, by TFD017 (``codemods/legacy_autograd_function``) on the file it
transforms and by the runner over every file of the run
(:func:`~torchfix_device.facts.legacy_function_run.scan_run`), so that the file
defining a class and the files calling it take the same decision: the class becomes new-style
(``@staticmethod def forward(ctx, ...)``) and every ``F()(...)`` becomes ``F.apply(...)``, all
of them or none. A class is migrated only when

- its base is provably torch's ``Function`` (imported from ``torch.autograd`` or
  ``torch.autograd.function``, the name bound nowhere else in the file), at module level, with
  no other base, keyword or class decorator;
- ``forward`` (and ``backward``, when there is one) are plain methods (``backward`` may carry
  torch's ``once_differentiable``), whose first parameter is used only as ``self.attr``, where
  ``attr`` is one of the context's (:data:`CONTEXT_API`) or one the two methods set on ``self``
  themselves, never rebound, in nested functions neither;
- the instance carries no state: no ``__init__``, or one that only calls the base's;
- every use of its name in the run is a call ``F()(args)`` without keywords (an import of it
  under its own name aside), on a line no ``# noqa`` suppresses TFD017 on, in a file the run
  rewrites (not skipped, not ``@generated``, parsed).

Otherwise the class gets a :attr:`LegacyClass.problem`: it and its calls are reported for
manual review, with what to do.
"""

from __future__ import annotations

import ast
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

CODE = "TFD017"
FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
ONCE_DIFFERENTIABLE = frozenset({"torch.autograd.function.once_differentiable"})
CONTEXT_API = frozenset({
    "save_for_backward", "saved_tensors", "saved_variables", "needs_input_grad", "mark_dirty",
    "mark_non_differentiable", "set_materialize_grads",
})
"""What a legacy ``self`` did as the context, and the new ``ctx`` still does."""
METHODS = ("forward", "backward")
NEW_NAME = "ctx"
SUPPRESSED_CLASS = "`# noqa` keeps the class as it is"
"""The reason of a class whose own finding is suppressed: its calls are left alone quietly."""


@dataclass(frozen=True)
class LegacyClass:
    """A legacy Function class of one file."""

    name: str
    line: int
    problem: str | None
    """Why it cannot be migrated (for manual review); None when its own file shows none."""
    renames: tuple[tuple[str, str, str], ...] = ()
    """(method, its first parameter, the new name) for ``forward`` and ``backward``."""
    drop_init: bool = False
    """An ``__init__`` that only calls the base's: removed (no instance is made any more)."""
    top_level: bool = True


@dataclass(frozen=True)
class Use:
    """An occurrence of a legacy class's name."""

    name: str
    line: int
    call: bool
    """``F()(args)`` without keywords: it becomes ``F.apply(args)``."""
    why: str = ""
    """Why it cannot be rewritten (for a use that is not a call)."""


# -- one file --------------------------------------------------------------------------------
def parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def may_define(text: str | bytes) -> bool:
    """The substrings every legacy Function class spells (cheap, before parsing)."""
    if isinstance(text, bytes):
        return b"Function" in text and b"forward" in text
    return "Function" in text and "forward" in text


class _Bindings:
    """Every binding of every name in a file (any scope): an import's target, or ``None`` for
    any other binding (a class, a function, an assignment, a parameter...)."""

    def __init__(self, tree: ast.Module) -> None:
        self.of: dict[str, list[str | None]] = defaultdict(list)
        self.star = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.of[alias.asname].append(alias.name)
                    else:
                        root = alias.name.partition(".")[0]
                        self.of[root].append(root)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "*":
                        self.star = True
                    elif node.level == 0 and node.module:
                        self.of[alias.asname or alias.name].append(f"{node.module}.{alias.name}")
                    else:
                        self.of[alias.asname or alias.name].append(None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.of[node.name].append(None)
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.of[node.id].append(None)
            elif isinstance(node, ast.arg):
                self.of[node.arg].append(None)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.of[node.name].append(None)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    self.of[name].append(None)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                self.of[node.name].append(None)

    def qualified(self, node: ast.expr) -> str | None:
        """The one thing ``node`` (a dotted name) can name through an import, else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        bound = self.of.get(node.id, [])
        if len(bound) != 1 or bound[0] is None:
            return None
        return ".".join([bound[0], *reversed(parts)])


def legacy_classes(tree: ast.Module) -> list[LegacyClass]:
    """The legacy Function classes of a file (nested ones with a problem)."""
    bindings = _Bindings(tree)
    top = {id(s) for s in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and _is_legacy(node, bindings):
            found.append(_judge(node, bindings, id(node) in top))
    return sorted(found, key=lambda c: c.line)


def _is_legacy(cls: ast.ClassDef, bindings: _Bindings) -> bool:
    if not any(bindings.qualified(base) in FUNCTION_BASES for base in cls.bases):
        return False
    forward = _method(cls, "forward")
    return forward is not None and not any(_decorator_name(d) in ("staticmethod", "classmethod") for d in forward.decorator_list)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    found = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name]
    return found[-1] if found else None


def _decorator_name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _judge(cls: ast.ClassDef, bindings: _Bindings, top_level: bool) -> LegacyClass:
    """The class's :class:`LegacyClass`: what its migration needs, or why there is none."""

    def problem(text: str) -> LegacyClass:
        return LegacyClass(cls.name, cls.lineno, text, top_level=top_level)

    if not top_level:
        return problem("it is defined inside a function or class: migrate it by hand (see below)")
    if len(cls.bases) != 1 or cls.keywords or cls.decorator_list:
        return problem("it has other bases, keywords or class decorators")
    if bindings.of.get("staticmethod"):
        return problem("`staticmethod` is bound to something else in this file")
    names = [s.name for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if any(names.count(m) > 1 for m in (*METHODS, "__init__")):
        return problem("it defines `forward`, `backward` or `__init__` twice")
    init_attrs, init_problem, drop_init = _init(cls, bindings)
    members = _class_members(cls)
    renames = []
    stored: set[str] = set()
    methods = [m for m in (_method(cls, name) for name in METHODS) if m is not None]
    for method in methods:
        if isinstance(method, ast.AsyncFunctionDef):
            return problem(f"`{method.name}` is `async`")
        if method.decorator_list and not (
            method.name == "backward" and all(bindings.qualified(d) in ONCE_DIFFERENTIABLE for d in method.decorator_list)
        ):
            return problem(f"`{method.name}` has a decorator (`@staticmethod` and `once_differentiable` on `backward` aside)")
        positional = [*method.args.posonlyargs, *method.args.args]
        if not positional:
            return problem(f"`{method.name}` takes no `self`")
        stored |= _stored_attributes(method, positional[0].arg)
    for method in methods:
        own = positional_arg(method).arg
        bad = _self_problem(method, own, stored | CONTEXT_API, init_attrs, members)
        if bad is not None:
            return problem(bad)
        renames.append((method.name, own, own if own == NEW_NAME or _spells(method, NEW_NAME) else NEW_NAME))
    if init_problem is not None:
        return problem(init_problem)
    return LegacyClass(cls.name, cls.lineno, None, tuple(renames), drop_init, top_level)


def _class_members(cls: ast.ClassDef) -> set[str]:
    """Names the class body binds (methods, class attributes)."""
    members: set[str] = set()
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members.add(statement.name)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            members.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return members - set(METHODS) - {"__init__"}


def _init(cls: ast.ClassDef, bindings: _Bindings) -> tuple[set[str], str | None, bool]:
    """(attributes ``__init__`` sets on ``self``, the state problem or None, whether it is a
    trivial ``__init__`` to remove)."""
    init = _method(cls, "__init__")
    if init is None:
        return set(), None, False
    positional = [*init.args.posonlyargs, *init.args.args]
    me = positional[0].arg if positional else None
    attrs = _stored_attributes(init, me) if me else set()
    trivial = not init.decorator_list and me is not None and all(_trivial_init_statement(s, me, cls.name) for s in init.body)
    if trivial and not isinstance(init, ast.AsyncFunctionDef):
        return attrs, None, True
    stored = ", ".join(f"`self.{a}`" for a in sorted(attrs)) or "its state"
    return attrs, (
        f"its instances carry state from `__init__` ({stored}): pass each value to `{cls.name}.apply(...)` as one "
        "more argument, take it in `forward(ctx, ..., value)` and keep it as `ctx.<name>`, and return one more "
        "`None` from `backward` for it"
    ), False


def _trivial_init_statement(statement: ast.stmt, me: str, name: str) -> bool:
    """``pass``, a docstring, or a call of the base's ``__init__`` without arguments."""
    if isinstance(statement, ast.Pass):
        return True
    if not isinstance(statement, ast.Expr):
        return False
    value = statement.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return True
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "__init__"):
        return False
    target = value.func.value
    if value.keywords:
        return False
    if isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "super":
        args = target.args
        plain = not args or (len(args) == 2 and isinstance(args[0], ast.Name) and args[0].id == name
                             and isinstance(args[1], ast.Name) and args[1].id == me)
        return plain and not value.args
    # Function.__init__(self)
    return len(value.args) == 1 and isinstance(value.args[0], ast.Name) and value.args[0].id == me


def _stored_attributes(method: ast.AST, me: str) -> set[str]:
    """``self.x = ...`` (``+=``, ``del``, unpacking) in ``method``: the attributes it sets."""
    return {
        node.attr for node in ast.walk(method)
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name) and node.value.id == me
    }


def _spells(method: ast.AST, name: str) -> bool:
    """``name`` is read or bound anywhere in ``method``: the new first parameter cannot take it."""
    return any(
        (isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.arg) and n.arg == name) or name in _names_bound(n)
        for n in ast.walk(method) if n is not method
    )


def _self_problem(method, me: str, known: set[str], init_attrs: set[str], members: set[str]) -> str | None:  # noqa: ANN001
    """Why ``me`` (the first parameter of ``method``) cannot simply become ``ctx``: every use
    must be ``me.attr`` with ``attr`` known on the new ``ctx``, and nothing may bind ``me``
    again (nested functions included)."""
    first = positional_arg(method)
    parents = {child: parent for parent in ast.walk(method) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(method):
        if (node is not first and node is not method and me in _names_bound(node)) or (isinstance(node, ast.arg) and node.arg == me and node is not first):
            return f"`{method.name}` binds `{me}` again (line {node.lineno})"
        if not (isinstance(node, ast.Name) and node.id == me):
            continue
        if not isinstance(node.ctx, ast.Load):
            return f"`{method.name}` assigns `{me}` (line {node.lineno})"
        parent = parents.get(node)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            return f"`{method.name}` uses `{me}` as a value, not only its attributes (line {node.lineno}): the new `ctx` is not the instance"
        attr = parent.attr
        if attr in known or attr in init_attrs:  # state from __init__: its own problem says what to do
            continue
        if attr in members:
            return (
                f"`{method.name}` reads `{me}.{attr}`, a member of the class (line {node.lineno}), which the new `ctx` "
                "does not have: read it from the class instead"
            )
        return f"`{method.name}` reads `{me}.{attr}`, which neither `forward` nor `backward` sets (line {node.lineno})"
    return None


def _names_bound(node: ast.AST) -> list[str]:
    """Names a statement or clause binds other than by assignment (which ``ast.Name`` shows)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.partition(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    return []


def positional_arg(method: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.arg:
    return [*method.args.posonlyargs, *method.args.args][0]


# -- uses ------------------------------------------------------------------------------------
def uses(tree: ast.Module, names: Iterable[str], own_classes: Sequence[LegacyClass] = ()) -> list[Use]:
    """Every occurrence of ``names`` in ``tree`` (over-approximated: a local variable spelt the
    same counts), each a call to rewrite or a use that blocks the migration. ``own_classes``:
    the legacy classes of this file (their own bodies are theirs: a trivial ``__init__``'s
    ``super(F, self)`` is removed with it)."""
    wanted = set(names)
    if not wanted:
        return []
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    removed_inits = _removed_inits(tree, own_classes)
    defined_here = {c.name for c in own_classes if c.top_level}
    found: list[Use] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in wanted and alias.asname not in (None, alias.name):
                    found.append(Use(alias.name, node.lineno, False, f"imported as `{alias.asname}`"))
            continue
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name not in wanted:
            continue
        if _inside(node, removed_inits, parents):
            continue
        if not isinstance(node.ctx, ast.Load):
            found.append(Use(name, node.lineno, False, f"`{name}` is bound again"))
            continue
        if isinstance(node, ast.Attribute) and name in defined_here:
            found.append(Use(name, node.lineno, False, f"`.{name}` is read from a module in the file defining `{name}`"))
            continue
        found.append(_use(node, name, parents))
    return found


def _use(node: ast.expr, name: str, parents: dict) -> Use:  # noqa: ANN001
    inner = parents.get(node)
    if isinstance(inner, ast.Call) and inner.func is node:
        outer = parents.get(inner)
        if inner.args or inner.keywords:
            return Use(name, node.lineno, False, f"`{name}(...)` is made with arguments")
        if isinstance(outer, ast.Call) and outer.func is inner:
            if outer.keywords:
                return Use(name, node.lineno, False, f"`{name}()(...)` passes keywords, which `apply` does not take")
            return Use(name, node.lineno, True)
        return Use(name, node.lineno, False, f"an instance of `{name}` is kept, to be called later")
    return Use(name, node.lineno, False, f"`{name}` is used otherwise than called as `{name}()(...)`")


def _removed_inits(tree: ast.Module, own_classes: Sequence[LegacyClass]) -> set[int]:
    """``id`` of each trivial ``__init__`` the migration removes."""
    dropping = {c.name for c in own_classes if c.drop_init and c.problem is None}
    return {
        id(init) for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.name in dropping
        for init in [_method(cls, "__init__")] if init is not None
    }


def _inside(node: ast.AST, holders: set[int], parents: dict) -> bool:  # noqa: ANN001
    while node is not None:
        if id(node) in holders:
            return True
        node = parents.get(node)
    return False

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
- its ``__init__``, if any, only calls the base's or keeps its arguments on ``self``
  (``self.scale = float(scale)``: made of its positional arguments, constants and a few
  builtins; defaults constants): those become ``forward``'s first arguments after ``ctx``, set
  on ``ctx`` as ``__init__`` set them, and each ``return`` of ``backward`` gives one ``None``
  more per argument (a tuple display, or one value where ``forward`` takes one input); or it
  keeps other state (a kernel it loads, a global's value), which ``forward``/``backward`` only
  read: the instances stay (:data:`KEPT`, :func:`_kept_problem`);
- every use of its name in the run (:mod:`.legacy_function_uses`) is a call ``F(a)(args)``
  whose ``a`` fits ``__init__`` and without keywords to ``(args)``, or an instance kept
  (``self.pool = F(2)``) whose every read in its file is a call (an import of it under its own
  name aside), on a line no ``# noqa`` suppresses TFD017 on, in a file the run rewrites (not
  skipped, not ``@generated``, parsed).

Otherwise the class gets a :attr:`LegacyClass.problem`: it and its calls are reported for
manual review, with what to do.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass

from torchfix_device.syntax.legacy import python_tree

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
    """An ``__init__`` that only calls the base's or keeps its arguments: removed (no instance is
    made any more)."""
    top_level: bool = True
    state: tuple[tuple[str, str | None], ...] = ()
    """The parameters of an ``__init__`` that keeps state (``self.scale = scale``), each with its
    default's source (None: none): ``forward`` takes them first, after ``ctx``, and sets what
    ``__init__`` set on ``ctx``; ``F(a)(x)`` becomes ``F.apply(a, x)``. :data:`KEPT`: the
    instances keep their ``__init__`` (other state: a kernel it loads, a global's value)."""


KEPT = (("*", None),)
"""The :attr:`LegacyClass.state` of a class whose instances stay, each holding what its
``__init__`` sets: calling one (``F(a)(x)``, or ``self.pool(x)`` of ``self.pool = F(a)``) runs
the new ``__call__``, ``F.apply(instance, x)``, whose static ``forward`` first copies the
instance's attributes onto ``ctx``; the calls are written as they were."""
KEPT_PARAMETER = "instance"


# -- one file --------------------------------------------------------------------------------
parse = python_tree
"""CPython's tree of a file (a Python 2 one read through its token fixes), None where none parses."""


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
    init_attrs, init_problem, drop_init, state = _init(cls, bindings)
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
        kept = _kept_problem(cls, init_attrs, stored)
        if kept is not None:
            return problem(f"{init_problem}; its instances cannot keep it either: {kept}")
        return LegacyClass(cls.name, cls.lineno, None, tuple(renames), False, top_level, KEPT)
    state_problem = _state_problem(cls, state)
    if state_problem is not None:
        return problem(state_problem)
    return LegacyClass(cls.name, cls.lineno, None, tuple(renames), drop_init, top_level, state)


def _state_problem(cls: ast.ClassDef, state: tuple[tuple[str, str | None], ...]) -> str | None:
    """Why state from ``__init__`` cannot become ``forward``'s first arguments: a parameter's
    name is spelt in ``forward`` other than as a local variable of its own (``stride =
    self.stride`` makes ``stride`` local: every read of it already read that local, and now
    starts from the value itself), or a ``return`` of ``backward`` cannot be given one more
    ``None`` per parameter (not a tuple display where ``forward`` takes several inputs).
    ``backward`` takes no new parameter: a local of the same name there is no clash."""
    if not state:
        return None
    forward, backward = _method(cls, "forward"), _method(cls, "backward")
    for name, _ in state:
        if name == NEW_NAME or (forward is not None and _spells(forward, name) and not _local_of(forward, name)):
            return f"`__init__`'s `{name}` is also spelt in `forward`: rename it there, then migrate it"
    if forward is not None and (forward.args.vararg or forward.args.kwonlyargs or forward.args.kwarg):
        return "`forward` takes `*args` or keyword-only arguments, after which the state cannot come"
    line = _return_without_room(forward, backward)
    return f"`backward` returns at line {line} what cannot be given one more `None` per `__init__` argument" if line else None


def _return_without_room(forward, backward) -> int | None:  # noqa: ANN001
    """The line of a ``return`` of ``backward`` that cannot be given one more ``None`` first (no
    tuple display where ``forward`` takes several inputs, or no value); None where there is none."""
    inputs = len([*forward.args.posonlyargs, *forward.args.args]) - 1 if forward is not None else 0
    for ret in _returns(backward) if backward is not None else ():
        if ret.value is None or (inputs != 1 and not isinstance(ret.value, ast.Tuple)):
            return ret.lineno
    return None


def _kept_problem(cls: ast.ClassDef, init_attrs: set[str], stored: set[str]) -> str | None:
    """Why the instances cannot simply stay, each holding what its ``__init__`` sets
    (:data:`KEPT`): an ``__init__`` that is no plain method or calls another ``__init__`` with
    arguments, an attribute it sets that ``forward``/``backward`` set too (per call, now on
    ``ctx``) or that the context has, a ``__call__`` or ``apply`` of the class's own, a
    ``forward`` spelling the new parameter's name, or a ``return`` of ``backward`` that cannot
    be given one more ``None`` first."""
    init = _method(cls, "__init__")
    forward, backward = _method(cls, "forward"), _method(cls, "backward")
    if init is None or isinstance(init, ast.AsyncFunctionDef) or init.decorator_list or not [*init.args.posonlyargs, *init.args.args]:
        return "its `__init__` is no plain method"
    me = positional_arg(init).arg
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__" \
                and not any(_trivial_init_statement(s, me, cls.name) and s.value is node for s in init.body if isinstance(s, ast.Expr)):
            return f"its `__init__` calls another `__init__` at line {node.lineno}"
    clash = sorted(init_attrs & (stored | CONTEXT_API))
    if clash:
        return f"`self.{clash[0]}` is set by `__init__` and by `forward`/`backward` or is the context's"
    if _method(cls, "__call__") is not None or "apply" in _class_members(cls):
        return "it defines its own `__call__` or `apply`"
    if forward is None or _spells(forward, KEPT_PARAMETER):
        return f"`forward` spells `{KEPT_PARAMETER}`" if forward is not None else "it has no `forward`"
    line = _return_without_room(forward, backward)
    return f"`backward` returns at line {line} what cannot be given one more `None`" if line else None


def _returns(function: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of ``function`` itself (not of functions nested in it)."""
    found, stack = [], list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return found


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


def _init(cls: ast.ClassDef, bindings: _Bindings) -> tuple[set[str], str | None, bool, tuple[tuple[str, str | None], ...]]:
    """(attributes ``__init__`` sets on ``self``, the state problem or None, whether the
    ``__init__`` is removed, the parameters it keeps as state: :attr:`LegacyClass.state`)."""
    init = _method(cls, "__init__")
    if init is None:
        return set(), None, False, ()
    positional = [*init.args.posonlyargs, *init.args.args]
    me = positional[0].arg if positional else None
    attrs = _stored_attributes(init, me) if me else set()
    plain = not init.decorator_list and me is not None and not isinstance(init, ast.AsyncFunctionDef)
    if plain and all(_trivial_init_statement(s, me, cls.name) for s in init.body):
        return attrs, None, True, ()
    params = [a.arg for a in positional[1:]]
    defaults = [None] * (len(params) - len(init.args.defaults)) + [_constant_source(d) for d in init.args.defaults]
    if plain and params and not (init.args.vararg or init.args.kwonlyargs or init.args.kwarg) \
            and all(d is not None for d in defaults[len(params) - len(init.args.defaults):]) \
            and all(_trivial_init_statement(s, me, cls.name) or _kept_argument(s, me, set(params)) for s in init.body):
        return attrs, None, True, tuple(zip(params, defaults))
    stored = ", ".join(f"`self.{a}`" for a in sorted(attrs)) or "its state"
    return attrs, (
        f"its instances carry state from `__init__` ({stored}): pass each value to `{cls.name}.apply(...)` as one "
        "more argument, take it in `forward(ctx, ..., value)` and keep it as `ctx.<name>`, and return one more "
        "`None` from `backward` for it"
    ), False, ()


SAFE_BUILTINS = frozenset({"float", "int", "bool", "tuple", "list", "str", "len", "abs", "min", "max", "round"})


def _kept_argument(statement: ast.stmt, me: str, params: set[str]) -> bool:
    """``self.scale = float(spatial_scale)``: one attribute of ``self`` given a value made of
    ``__init__``'s arguments, constants and a few builtins only (``forward`` computes it again,
    from the same arguments)."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return False
    target = statement.targets[0]
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me):
        return False
    allowed = (ast.Name, ast.Constant, ast.Call, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.Load, ast.operator, ast.unaryop)
    for node in ast.walk(statement.value):
        if not isinstance(node, allowed):
            return False
        if isinstance(node, ast.Name) and node.id not in params and node.id not in SAFE_BUILTINS:
            return False
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in SAFE_BUILTINS and not node.keywords):
            return False
    return True


def _constant_source(node: ast.expr) -> str | None:
    """The source of a default that is a constant (``0.5``, ``-1``, ``None``, ``(7, 7)``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _constant_source(node.operand)
        return None if operand is None else "-" + operand
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, ast.Tuple) and all(_constant_source(e) is not None for e in node.elts):
        return ast.unparse(node)
    return None


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


NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _local_of(method: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """``name`` is a local variable of ``method`` itself: bound in its own scope (not only in a
    nested one), not declared ``global``/``nonlocal``, and not one of its parameters."""
    args = method.args
    if any(a.arg == name for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None):
        return False
    bound, stack = False, list(method.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return False
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load) or name in _names_bound(node):
            bound = True
        if not isinstance(node, NESTED_SCOPES):  # a nested scope binds its own names
            stack.extend(ast.iter_child_nodes(node))
    return bound


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

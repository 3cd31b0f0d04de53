"""Where a legacy autograd Function class is used (:mod:`.legacy_functions` says which classes
are legacy and what their migration needs): every occurrence of its name in a file, each a call
that becomes ``F.apply(...)`` (``F()(x)``, ``F(a)(x)`` where ``a`` fits the state its
``__init__`` keeps), an instance kept and only ever called (``self.roi = F(7)``, which becomes
``functools.partial(F.apply, 7)``), or a use that blocks the migration, with why. Read with the
stdlib ``ast``, by TFD017 on its own file and by the runner over the run
(:func:`~torchfix_device.facts.legacy_function_run.scan_run`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from torchfix_device.facts.legacy_functions import KEPT, LegacyClass, _method


@dataclass(frozen=True)
class Use:
    """An occurrence of a legacy class's name."""

    name: str
    line: int
    call: bool
    """``F()(args)`` without keywords: it becomes ``F.apply(args)``; or an instance kept and
    only ever called (``self.roi = F(7)``), which becomes ``functools.partial(F.apply, 7)``."""
    why: str = ""
    """Why it cannot be rewritten (for a use that is not a call)."""


State = "tuple[tuple[str, str | None], ...] | None"


def uses(tree: ast.Module, names: Iterable[str] | Mapping[str, State], own_classes: Sequence[LegacyClass] = ()) -> list[Use]:
    """Every occurrence of ``names`` in ``tree`` (over-approximated: a local variable spelt the
    same counts), each a call to rewrite or a use that blocks the migration. ``names`` may map
    each to its class's :attr:`LegacyClass.state` (then ``F(a)(x)`` and a kept instance are
    calls to rewrite where the arguments fit it). ``own_classes``: the legacy classes of this
    file (their own bodies are theirs: a removed ``__init__``'s ``super(F, self)`` goes with it)."""
    states: Mapping[str, State] = names if isinstance(names, Mapping) else {}
    wanted = set(names)
    if not wanted:
        return []
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    removed_inits = _removed_inits(tree, own_classes)
    defined_here = {c.name for c in own_classes if c.top_level}
    kept = _kept_on_self(tree, wanted, parents)
    found: list[Use] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in kept and isinstance(node.value, ast.Name) and node.value.id == "self":
            continue  # `self.RoI = RoI(...)`, then `self.RoI(x, rois)`: the kept instance, not the class
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
        found.append(_use(node, name, parents, states.get(name), tree))
    return found


def _use(node: ast.expr, name: str, parents: dict, state: State, tree: ast.Module) -> Use:  # noqa: ANN001
    inner = parents.get(node)
    if isinstance(inner, ast.Call) and inner.func is node:
        outer = parents.get(inner)
        if (inner.args or inner.keywords) and state_arguments(inner, state or ()) is None:
            return Use(name, node.lineno, False, f"`{name}(...)` is made with arguments its `__init__` does not keep as state")
        if isinstance(outer, ast.Call) and outer.func is inner:
            if outer.keywords:
                return Use(name, node.lineno, False, f"`{name}()(...)` passes keywords, which `apply` does not take")
            return Use(name, node.lineno, True)
        if state is not None and name[:1].isupper() and isinstance(outer, ast.Assign) and len(outer.targets) == 1 \
                and _only_called(outer.targets[0], tree, parents):  # spelt as a class: stage 1 finds it
            return Use(name, node.lineno, True)
        return Use(name, node.lineno, False, f"an instance of `{name}` is kept, and used otherwise than called")
    return Use(name, node.lineno, False, f"`{name}` is used otherwise than called as `{name}()(...)`")


def state_arguments(call: ast.Call, state: tuple[tuple[str, str | None], ...]) -> list[str | int] | None:
    """For ``F(a, b=...)`` (``call``) of a class keeping ``state``: :func:`fit_state`."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return fit_state(len(call.args), [k.arg for k in call.keywords], state)


def fit_state(positional: int, keywords: Sequence[str | None], state: tuple[tuple[str, str | None], ...]) -> list[str | int] | None:
    """Each parameter's argument in a call ``F(...)`` with ``positional`` arguments and
    ``keywords`` (None: ``**``) of a class keeping ``state``: the index of a positional
    argument, the name of a keyword, or its default's source (``"=<source>"``); None where the
    arguments do not fit (too many, unknown, missing, ``**``)."""
    if state == KEPT:
        return []  # the instance stays and keeps its arguments itself
    if positional > len(state) or None in keywords or len(set(keywords)) != len(keywords):
        return None
    given = set(keywords)
    found: list[str | int] = []
    for index, (param, default) in enumerate(state):
        if index < positional:
            if param in given:
                return None
            found.append(index)
        elif param in given:
            found.append(param)
        elif default is not None:
            found.append("=" + default)
        else:
            return None
    return found if given <= {p for p, _ in state} else None


def _only_called(target: ast.expr, tree: ast.Module, parents: dict) -> bool:  # noqa: ANN001
    """Every read of ``target`` (a name, or any ``x.attr`` of its attribute's name) in ``tree``
    is a call of it: the instance kept there may become a ``functools.partial``."""
    if isinstance(target, ast.Name):
        reads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == target.id and n is not target]
    elif isinstance(target, ast.Attribute):
        reads = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == target.attr and n is not target]
    else:
        return False
    return bool(reads) and all(
        isinstance(n.ctx, ast.Load) and isinstance(parents.get(n), ast.Call) and parents[n].func is n for n in reads
    )


def _kept_on_self(tree: ast.Module, wanted: set[str], parents: dict) -> set[str]:  # noqa: ANN001
    """Names of ``self`` attributes spelt as a class of ``wanted`` that hold an instance of it
    (``self.RoI = RoI(...)``), every ``self.<name>`` store being such and every read a call."""
    stores: dict[str, list[bool]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in wanted and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and not isinstance(node.ctx, ast.Load):
            assign = parents.get(node)
            value = assign.value if isinstance(assign, ast.Assign) and assign.targets == [node] else None
            func = value.func if isinstance(value, ast.Call) else None
            spelt = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            stores.setdefault(node.attr, []).append(spelt in wanted and _only_called(node, tree, parents))
    return {name for name, each in stores.items() if all(each)}


def _removed_inits(tree: ast.Module, own_classes: Sequence[LegacyClass]) -> set[int]:
    """``id`` of each trivial ``__init__`` the migration removes, and of each call of the base's
    ``__init__`` it removes from an ``__init__`` that stays (:data:`KEPT`)."""
    dropping = {c.name for c in own_classes if c.drop_init and c.problem is None}  # with state too
    keeping = {c.name for c in own_classes if c.state == KEPT and c.problem is None}
    found = set()
    for cls in tree.body:
        init = _method(cls, "__init__") if isinstance(cls, ast.ClassDef) and cls.name in dropping | keeping else None
        if init is not None:
            found |= {id(init)} if cls.name in dropping else {
                id(s) for s in init.body
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
                and s.value.func.attr == "__init__"
            }
    return found


def _inside(node: ast.AST, holders: set[int], parents: dict) -> bool:  # noqa: ANN001
    while node is not None:
        if id(node) in holders:
            return True
        node = parents.get(node)
    return False

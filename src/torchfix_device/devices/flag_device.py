"""Where a user's own flag decides the device (DESIGN.md, "Where a rewrite gets its device", 3).

A *flag* is a dotted name whose last part says ``cuda`` or ``gpu`` (``args.cuda``, ``use_gpu``,
``opt.use_gpu``, ``USE_CUDA``, ``cuda``), tested alone or against an integer
(``if args.cuda > 0:``) by a *guard* around a move: ``if args.cuda: model.cuda()``,
``x.cuda() if use_cuda else x``, ``torch.cuda.FloatTensor if cuda else torch.FloatTensor``.

A scope (the module, a function) whose guards test one flag, or that has no such guard but
defines one flag (``args.cuda = not args.no_cuda and torch.cuda.is_available()``,
``cuda = True if torch.cuda.is_available() else False``), gets
``device = torch.device("cuda" if <flag> else "cpu")`` right after the statement from which
nothing can change the flag any more (and after the import that binds ``torch``: the imports
may not be contiguous, or a function may import torch itself); the sites after that statement take that device, so
``--no-cuda`` still means the CPU. For the module, "after" also covers the functions and
classes of the file (they run when called), less those that module-level code calls before that
statement.

*Final* means: every statement that can change the flag (binding its root name, assigning it
or a prefix of it, ``setattr``/``vars``/``__dict__`` on a prefix, calling a method of a prefix)
lies in the scope's own main line at or before that statement: the function's body, or for the
module its body or the block of ``if __name__ == "__main__":``. A name flag must be bound there
unconditionally. ``use_cuda = args.cuda`` after ``args.cuda`` is final makes ``use_cuda`` the
same flag. Passing the object to a call (``train(args)``) is assumed not to change the flag.

No device is built from a flag (the rewrites keep their behaviour and say why) when it is
changed later or elsewhere, bound only conditionally, an attribute of an imported object, of
``self`` or of ``cls``, a GPU index (``.cuda(args.gpu)``), or when the guards of a scope test
different flags. The module is parsed, never imported; nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

import libcst as cst
from torchfix_device.syntax import imports as _imports
from torchfix_device.syntax import nodes as _nodes
from torchfix_device.syntax import traversal
from torchfix_device.devices.flag_scan import FlagScan, Guard, Where, asks_cuda, statements_of

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class ScopeFlag:
    """The flag of one scope: usable (``reason`` None) or why it cannot give the device."""

    scope: cst.CSTNode
    """The ``Module`` or ``FunctionDef`` whose sites follow the flag."""
    flag: str
    """The flag the device is built from (``args.cuda``); the others of ``names`` are aliases."""
    condition: str
    """The test the device expression carries: ``args.cuda``, ``args.cuda > 0``."""
    names: frozenset[str]
    asks_cuda: bool = False
    """Every value the flag is given asks ``torch.cuda.is_available()`` itself; when not, the
    device asks it too (a flag set on a machine without CUDA must not make code that ran on
    the CPU, such as ``torch.load`` of a CPU checkpoint, ask for CUDA)."""
    reason: str | None = None
    block: cst.CSTNode | None = None
    """Where the binding goes: the ``Module``, the ``FunctionDef``, or the ``if __name__ ...``."""
    after: int = -1
    """Index in ``block``'s statements of the statement the binding follows (-1: first)."""
    before: frozenset[int] = frozenset()
    """``id`` of every node that runs before the binding (its sites cannot use it)."""

    @property
    def usable(self) -> bool:
        return self.reason is None

    def statements(self) -> "Sequence[cst.BaseStatement]":
        return statements_of(self.block) if self.block is not None else ()


class FlagAnalysis:
    """The flags of one module, by scope and by guard (see the module docstring)."""

    def __init__(self, module: cst.Module, is_torch: Callable[[cst.BaseExpression], bool]) -> None:
        self.module = module
        self.scan = FlagScan(module, is_torch)
        self.by_scope: dict[int, ScopeFlag] = {}
        self.by_guard: dict[int, ScopeFlag] = {}
        if self.scan.guards or self.scan.definitions:
            self._decide()

    # -- deciding ---------------------------------------------------------------------------
    def _decide(self) -> None:
        guards: dict[int, list[Guard]] = {}
        owners: dict[int, cst.CSTNode] = {}
        unbound: dict[int, list[str]] = {}
        for guard in self.scan.guards:
            if guard.flag in self.scan.index_uses:
                continue  # a GPU index (`.cuda(args.gpu)`), not a flag
            owner = self._owner(guard.flag.split(".")[0], guard.where)
            if owner is None:  # read from a star import or nowhere: a global of unknown origin
                owner = self.module
                unbound.setdefault(id(owner), []).append(guard.flag)
            guards.setdefault(id(owner), []).append(guard)
            owners[id(owner)] = owner
        for flag, _, where, _ in self.scan.definitions:
            owner = self._owner(flag.split(".")[0], where)
            if owner is not None and flag not in self.scan.index_uses and id(owner) not in guards:
                guards[id(owner)] = []
                owners[id(owner)] = owner
        for key, scope_guards in guards.items():
            decided = self._decide_scope(owners[key], scope_guards, unbound.get(key, []))
            if decided is None:
                continue
            self.by_scope[key] = decided
            for guard in scope_guards:
                self.by_guard[id(guard.node)] = decided
        for key, decided in list(self.by_scope.items()):
            outer = [g for g in self.scan.guards if g.flag not in self.scan.index_uses and self._inside(g.where, decided.scope)
                     and self.by_guard.get(id(g.node)) is not decided]
            if decided.usable and outer:
                self.by_scope[key] = _replace_reason(decided, f"it also tests `{outer[0].condition}`, a flag of another scope")

    def _inside(self, where: Where, scope: cst.CSTNode) -> bool:
        function = where.function
        while function is not None:
            if function.node is scope:
                return True
            function = function.parent
        return False

    def _owner(self, root: str, where: Where) -> cst.CSTNode | None:
        function = where.function
        while function is not None:
            if root in function.declared_global:
                break
            if function.binds(root):
                return function.node
            function = function.parent
        return self.module if root in self.scan.module_bound else None

    def _decide_scope(self, owner: cst.CSTNode, guards: list[Guard], unbound: list[str]) -> ScopeFlag | None:
        aliases: dict[str, str] = {}
        defined: list[str] = []
        for flag, source, where, _ in self.scan.definitions:
            if self._owner(flag.split(".")[0], where) is owner and flag not in self.scan.index_uses:
                defined.append(flag)
                if source is not None and source != flag:
                    aliases[flag] = source

        def canonical(flag: str) -> str:
            seen = {flag}
            while flag in aliases and aliases[flag] not in seen:
                flag = aliases[flag]
                seen.add(flag)
            return flag

        if guards:
            conditions = sorted({canonical(g.flag) + g.condition[len(g.flag):] for g in guards})
            names = {g.flag for g in guards}
        else:
            roots = sorted({canonical(f) for f in defined})
            if len(roots) != 1:
                return None  # defines several flags and tests none: nothing to follow
            conditions, names = roots, set(defined)
        flag = canonical(sorted(names)[0])
        members: set[str] = set()
        for name in names:  # each flag tested, and the aliases from it to the one it copies
            while name not in members:
                members.add(name)
                name = aliases.get(name, name)
        values = [v for f, _, where, v in self.scan.definitions if f == flag and self._owner(f.split(".")[0], where) is owner]
        base = ScopeFlag(owner, flag, conditions[0], frozenset(members), bool(values) and all(asks_cuda(v) for v in values))
        if unbound:
            return _replace_reason(base, f"`{unbound[0]}` is not bound in this file")
        if len(conditions) > 1 or len({canonical(n) for n in names}) > 1:
            shown = ", ".join(f"`{c}`" for c in conditions) if len(conditions) > 1 else \
                ", ".join(f"`{n}`" for n in sorted(names))
            return _replace_reason(base, f"the guards here test different flags ({shown})")
        last: tuple[int, int] = (-1, -1)
        for name in sorted(members):
            reason, position = self._final(name, owner)
            if reason is not None:
                return _replace_reason(base, reason)
            last = max(last, position)
        for name, source in aliases.items():  # an alias copies a final flag
            if name in members:
                _, copied_at = self._final(source, owner)
                _, made_at = self._final(name, owner)
                if copied_at >= made_at:
                    return _replace_reason(base, f"`{source}` changes after `{name} = {source}`")
        return self._placed(base, max(last, self._torch_bound(owner)))

    def _torch_bound(self, owner: cst.CSTNode) -> tuple[int, int]:
        """The position of the last statement of ``owner``'s main line that binds the name the
        binding spells ``torch`` with (``import sys; sys.path.append(..); import torch``, an
        ``import torch`` inside the function): the binding goes after it."""
        alias = _imports.torch_module_alias(self.module) or "torch"
        last = (-1, -1)
        for event in self.scan.events:
            where = event.where
            if event.kind != "bind" or event.target != alias or where.in_class:
                continue
            home = self.module if where.function is None else where.function.node
            if home is owner:
                last = max(last, (where.top, -1 if where.main is None else where.main))
        return last

    def _final(self, flag: str, owner: cst.CSTNode) -> tuple[str | None, tuple[int, int]]:
        """(why ``flag`` is not final, or None; the position of the last statement changing it)."""
        root = flag.split(".")[0]
        last, plain = (-1, -1), False
        for event in self.scan.events:
            target = event.target
            changes = target == flag or flag.startswith(target + ".") if event.kind == "bind" else flag.startswith(target + ".")
            if not changes or (event.where.in_class and "." not in target):
                continue  # a class attribute of that name is another variable
            if self._owner(target.split(".")[0], event.where) is not owner:
                continue
            if event.imported:
                return f"`{root}` is imported: other modules may change `{flag}`", last
            where = event.where
            home = self.module if where.function is None else where.function.node
            if where.in_class or home is not owner:
                place = "a class body" if where.in_class else f"`{cst.ensure_type(home, cst.FunctionDef).name.value}()`"
                return f"`{flag}` is changed in {place}", last
            position = (where.top, -1 if where.main is None else where.main)
            last = max(last, position)
            plain = plain or (event.plain and target == root)
        if isinstance(owner, cst.FunctionDef) and root in self.scan.functions[id(owner)].params:
            plain = True
        if not plain:
            return f"`{root}` is not bound on every path before it is tested", last
        return None, last

    def _placed(self, base: ScopeFlag, last: tuple[int, int]) -> ScopeFlag:
        """``base`` with where its binding goes and which nodes run before it."""
        top, inner = last
        if isinstance(base.scope, cst.FunctionDef):
            body = statements_of(base.scope)
            before = {id(n) for statement in body[: top + 1] for n in traversal.walk(statement)}
            return _with_place(base, base.scope, top, frozenset(before))
        module = self.module
        if inner >= 0:
            main = cst.ensure_type(module.body[top], cst.If)
            early = [*module.body[:top], main.test, *statements_of(main)[: inner + 1]]
            block, after, reads_upto = main, inner, (top, inner)
        else:
            early = list(module.body[: top + 1])
            block, after, reads_upto = module, top, (top, 1 << 30)
        before: set[int] = set()
        for node in early:
            before.update(id(n) for n in _module_scope_nodes(node))
        for node in self._early_definitions(reads_upto):
            before.update(id(n) for n in traversal.walk(node))
        return _with_place(base, block, after, frozenset(before))

    def _early_definitions(self, upto: tuple[int, int]) -> list[cst.CSTNode]:
        """The module's defs and classes that its own code may call up to ``upto``, and those
        they may call (by name, transitively)."""
        names = set().union(*(reads for position, reads in self.scan.module_reads.items() if position <= upto))
        todo = [n for n in names if n in self.scan.defs]
        seen: set[str] = set(todo)
        found: list[cst.CSTNode] = []
        while todo:
            for node in self.scan.defs[todo.pop()]:
                found.append(node)
                for name in traversal.all_names(node):
                    if name in self.scan.defs and name not in seen:
                        seen.add(name)
                        todo.append(name)
        return found


def _replace_reason(flag: ScopeFlag, reason: str) -> ScopeFlag:
    return replace(flag, reason=reason)


def _with_place(flag: ScopeFlag, block: cst.CSTNode, after: int, before: frozenset[int]) -> ScopeFlag:
    return replace(flag, block=block, after=after, before=before)


def _module_scope_nodes(node: cst.CSTNode):
    """The nodes of ``node`` that run where it stands: not the bodies of its functions (the
    decorators and defaults do run), but class bodies (they run when the class is made)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, cst.FunctionDef):
            stack.extend(d.decorator for d in current.decorators)
            stack.extend(p.default for p in _nodes.all_params(current) if p.default is not None)
            continue
        stack.extend(traversal.children(current))



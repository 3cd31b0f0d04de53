"""The facts about user flags that one reading of a module gives (for :mod:`.flag_device`).

A *flag* is a dotted name whose last part says ``cuda`` or ``gpu`` (``args.cuda``, ``use_gpu``,
``opt.use_gpu``, ``USE_CUDA``, ``cuda``). :class:`FlagScan` walks the module once and records
the guards that test one around a move (``if args.cuda: model.cuda()``, ``x.cuda() if use_cuda
else x``, ``torch.cuda.FloatTensor if cuda else torch.FloatTensor``, and a device built from one,
``device = torch.device("cuda" if args.cuda else "cpu")``), the statements that define
one (``args.cuda = not args.no_cuda and torch.cuda.is_available()``, ``use_cuda = args.cuda``),
every statement that can change a dotted name (binding it or a prefix of it, ``setattr``, a method
call on it), the names used as a GPU index (``.cuda(args.gpu)``), each function's local names,
and what the module's own code reads where (to tell which functions run before a flag is final).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import libcst as cst
import libcst.matchers as m
from torchfix_device.syntax import nodes
from torchfix_device.syntax import traversal
from torchfix_device import torch_api

if TYPE_CHECKING:
    from collections.abc import Sequence

FLAG_WORDS = ("cuda", "gpu")
FLAG_COMPANIONS = frozenset({"use", "with", "enable", "enabled", "on", "is", "has", "do", "run", "mode", "available", "flag", "want"})
INDEX_CALLS = frozenset({"cuda", "to", "set_device", "device"})
INDEX_KEYWORDS = frozenset({"device", "device_ids", "output_device", "map_location", "gpu_id", "gpu_ids"})
COMPARISONS = {cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.NotEqual: "!=", cst.Equal: "=="}


def flag_test(test: cst.BaseExpression) -> tuple[str, str] | None:
    """``(flag, condition)`` for a guard's test that reads a user flag: ``args.cuda`` →
    ``("args.cuda", "args.cuda")``, ``args.cuda > 0`` → ``("args.cuda", "args.cuda > 0")``;
    None for anything else (``t.is_cuda``, ``torch.cuda.is_available()``, ``not use_cuda``)."""
    operand, suffix = test, ""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        operator = COMPARISONS.get(type(target.operator))
        if operator is None or not isinstance(target.comparator, cst.Integer):
            return None
        operand, suffix = test.left, f" {operator} {target.comparator.value}"
    flag = nodes.dotted_name(operand)
    if flag is None or not is_flag_name(flag):
        return None
    return flag, flag + suffix


def is_flag_name(dotted: str) -> bool:
    """``args.cuda``, ``use_gpu``, ``USE_CUDA``, ``opt.gpu``, ``with_cuda``: a name made of
    ``cuda`` or ``gpu`` and words such as ``use``; not ``multi_gpu``, ``n_gpus``, ``gpu_ids``,
    ``USE_GPU_NMS`` (counts, indices and other switches) nor ``t.is_cuda``."""
    parts = dotted.split(".")
    if parts[0] in ("self", "cls", "torch"):
        return False
    words = parts[-1].lower().split("_")
    return any(w in FLAG_WORDS for w in words) and words != ["is", "cuda"] and \
        all(w in FLAG_WORDS or w in FLAG_COMPANIONS or w.isdigit() for w in words)


def mentions_a_device(dotted: str) -> bool:
    """A name that says ``cuda`` or ``gpu`` anywhere (``args.no_cuda``): a flag may be made of it."""
    return any(w in dotted.rsplit(".", 1)[-1].lower() for w in FLAG_WORDS)


def holds_a_move(node: cst.CSTNode) -> bool:
    """``node`` holds a ``.cuda(...)`` call or names a CUDA tensor type (``torch.cuda.FloatTensor``)."""
    for n in traversal.walk(node):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "cuda":
            return True
        if isinstance(n, cst.Attribute) and n.attr.value in torch_api.LEGACY_TENSOR_DTYPES and \
                isinstance(n.value, cst.Attribute) and n.value.attr.value == "cuda":
            return True
    return False


def statements_of(block: cst.CSTNode) -> "Sequence[cst.BaseStatement]":
    if isinstance(block, cst.Module):
        return block.body
    body = block.body  # type: ignore[attr-defined]
    return body.body if isinstance(body, cst.IndentedBlock) else ()


@dataclass
class Function:
    node: cst.FunctionDef
    parent: "Function | None"
    params: set[str]
    bound: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)

    def binds(self, name: str) -> bool:
        return name in self.params or (name in self.bound and name not in self.declared_global | self.declared_nonlocal)


@dataclass(frozen=True)
class Where:
    function: Function | None  # None: the module's own scope
    in_class: bool  # in a class body (outside its methods)
    top: int  # index of the statement of the scope's body that holds it
    main: int | None  # module scope: index in the body of `if __name__ == "__main__":`


@dataclass(frozen=True)
class Event:
    """Something that can change ``target`` (bind it, ``kind`` "bind") or its attributes ("attrs")."""

    target: str
    kind: str
    where: Where
    plain: bool  # an unconditional `target = ...` statement of the scope's main line
    imported: bool = False


@dataclass(frozen=True)
class Guard:
    node: cst.CSTNode  # the If or IfExp
    flag: str
    condition: str
    where: Where


class FlagScan:
    """What one walk over ``module`` finds (see the module docstring). ``is_torch(node)`` says
    whether a dotted expression names a torch object (``t.cuda`` under ``import torch as t``)."""

    def __init__(self, module: cst.Module, is_torch: Callable[[cst.BaseExpression], bool]) -> None:
        self.module = module
        self._is_torch = is_torch
        self.guards: list[Guard] = []
        self.definitions: list[tuple[str, str | None, Where, cst.BaseExpression]] = []
        """(flag defined, the flag it copies or None, where, value): ``args.cuda = not args.no_cuda``."""
        self.events: list[Event] = []
        self.index_uses: set[str] = set()
        self.functions: dict[int, Function] = {}
        self.module_bound: set[str] = set()
        self.module_reads: dict[tuple[int, int], set[str]] = {}
        """(top, index in the main block or -1) -> names read by the module's own code there."""
        self.defs: dict[str, list[cst.FunctionDef | cst.ClassDef]] = {}
        """Functions and classes defined in the module's own scope, by name."""
        mains = [s for s in module.body if isinstance(s, cst.If) and is_main_test(s.test)]
        self.main: cst.If | None = mains[0] if len(mains) == 1 else None
        self.default_devices = self._default_devices()
        """Module-level names bound to ``torch.device("cuda" if torch.cuda.is_available() else
        "cpu")``: a guarded ``.to(<one of them>)`` is a move like ``.cuda()``. An earlier codemod
        of this run writes one for each guarded ``.cuda()`` whose guard it keeps; without this,
        the guard vanished from the scan of the rewritten tree, and a later codemod read the
        flag as final where the scan of the file as it was did not (a ``torch.load`` reported
        for review was rewritten all the same)."""
        self._scan_block(module.body, None)

    def _default_devices(self) -> frozenset[str]:
        names = set()
        for statement in self.module.body:
            if not m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])):
                continue
            assign = cst.ensure_type(cst.ensure_type(statement, cst.SimpleStatementLine).body[0], cst.Assign)
            choice = self._cuda_or_cpu(assign.value)
            if choice is not None and isinstance(choice.test, cst.Call) and asks_cuda(choice.test):
                names.add(cst.ensure_type(assign.targets[0].target, cst.Name).value)
        return frozenset(names)

    def _cuda_or_cpu(self, value: cst.BaseExpression) -> cst.IfExp | None:
        """The choice of ``torch.device("cuda" if <test> else "cpu")``; None for anything else."""
        if not m.matches(value, m.Call(args=[m.Arg(value=m.IfExp(body=m.SimpleString(), orelse=m.SimpleString()), keyword=None)])):
            return None
        call = cst.ensure_type(value, cst.Call)
        choice = cst.ensure_type(call.args[0].value, cst.IfExp)
        strings = (cst.ensure_type(choice.body, cst.SimpleString).evaluated_value,
                   cst.ensure_type(choice.orelse, cst.SimpleString).evaluated_value)
        if strings != ("cuda", "cpu") or not (nodes.dotted_name(call.func) or "").endswith("device") or not self._is_torch(call.func):
            return None
        return choice

    def _moves_to_a_default_device(self, node: cst.CSTNode) -> bool:
        if not self.default_devices:
            return False
        return any(
            isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "to"
            and len(n.args) >= 1 and isinstance(n.args[0].value, cst.Name) and n.args[0].value.value in self.default_devices
            for n in traversal.walk(node)
        )

    # -- the scan ---------------------------------------------------------------------------
    def _scan_block(self, statements: "Sequence[cst.CSTNode]", function: Function | None) -> None:
        """The body of the module or of a function: its statements are a main line."""
        for index, statement in enumerate(statements):
            where = Where(function, False, index, None)
            if function is None and statement is self.main:
                self._scan_expression(statement.test, where)  # type: ignore[attr-defined]
                for inner, child in enumerate(statements_of(statement)):
                    self._scan_statement(child, Where(None, False, index, inner), direct=True)
                if statement.orelse is not None:  # type: ignore[attr-defined]
                    self._scan_statement(statement.orelse, where)  # type: ignore[attr-defined]
                continue
            self._scan_statement(statement, where, direct=True)

    def _scan_statement(self, node: cst.CSTNode, where: Where, direct: bool = False) -> None:
        function = where.function
        if isinstance(node, cst.FunctionDef):
            self._bind(node.name.value, where, plain=False)
            for part in (*node.decorators, *(p.default for p in nodes.all_params(node) if p.default is not None)):
                self._scan_expression(part, where)
            inner = Function(node, function, {p.name.value for p in nodes.all_params(node)})
            self.functions[id(node)] = inner
            self._define(node, where)
            self._scan_block(statements_of(node), inner)
            return
        if isinstance(node, cst.ClassDef):
            self._bind(node.name.value, where, plain=False)
            for part in (*node.decorators, *node.bases, *node.keywords):
                self._scan_expression(part, where)
            self._define(node, where)
            for statement in statements_of(node):
                self._scan_statement(statement, Where(function, True, where.top, where.main))
            return
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self._scan_small(small, where, direct and len(node.body) == 1)
            return
        if isinstance(node, cst.If):
            self._guard(node, node.test, node.body, where)
        for name in ("test", "iter", "items", "subject"):
            part = getattr(node, name, None)
            for item in part if isinstance(part, (list, tuple)) else [part] if isinstance(part, cst.CSTNode) else []:
                self._scan_expression(item, where)
                if isinstance(item, cst.WithItem) and item.asname is not None:
                    self._bind_target(item.asname.name, where)
        if isinstance(node, (cst.For, cst.ExceptHandler)):
            target = node.target if isinstance(node, cst.For) else (node.name.name if node.name else None)
            if target is not None:
                self._bind_target(target, where)
        for child in traversal.statement_children(node):
            self._scan_statement(child, where)

    def _define(self, node: cst.FunctionDef | cst.ClassDef, where: Where) -> None:
        """A def or class of the module's own scope: what it reads, to tell which of them run
        before a flag is final."""
        if where.function is None and not where.in_class:
            self.defs.setdefault(node.name.value, []).append(node)

    def _scan_small(self, small: cst.BaseSmallStatement, where: Where, direct: bool) -> None:
        function = where.function
        if isinstance(small, (cst.Global, cst.Nonlocal)):
            if function is not None:
                names = {n.name.value for n in small.names}
                (function.declared_global if isinstance(small, cst.Global) else function.declared_nonlocal).update(names)
            return
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            if not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = nodes.dotted_name(alias.asname.name if alias.asname else alias.name) or ""
                    self._bind(bound.split(".")[0], where, plain=False, imported=True)
            return
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            for target in targets:
                self._bind_target(target, where, plain=direct and not isinstance(small, cst.AugAssign))
            if small.value is not None:
                self._scan_expression(small.value, where)
                if len(targets) == 1:
                    self._definition(targets[0], small.value, where)
                    self._device_binding(small.value, where)
            return
        if isinstance(small, cst.Del):
            self._bind_target(small.target, where)
            return
        self._scan_expression(small, where)

    def _scan_expression(self, node: cst.CSTNode, where: Where) -> None:
        reads = self.module_reads.setdefault((where.top, -1 if where.main is None else where.main), set()) \
            if where.function is None else None
        for n in traversal.of_classes_under(self.module, node, cst.Name, cst.IfExp, cst.NamedExpr, cst.Call):
            if isinstance(n, cst.Name):
                if reads is not None:
                    reads.add(n.value)
            elif isinstance(n, cst.IfExp):
                self._guard(n, n.test, n.body, where)
            elif isinstance(n, cst.NamedExpr):
                self._bind_target(n.target, where)
            elif isinstance(n, cst.Call):
                self._call(n, where)

    def _call(self, call: cst.Call, where: Where) -> None:
        func = nodes.dotted_name(call.func)
        if func in ("setattr", "delattr") and call.args:
            self._attrs(call.args[0].value, where)
        elif isinstance(call.func, cst.Attribute):
            self._attrs(call.func.value, where)
        last = call.func.attr.value if isinstance(call.func, cst.Attribute) else (func or "")
        for arg in call.args:
            used = nodes.dotted_name(arg.value)
            if used is None:
                continue
            if (arg.keyword is None and last in INDEX_CALLS) or (arg.keyword is not None and arg.keyword.value in INDEX_KEYWORDS):
                self.index_uses.add(used)

    def _attrs(self, node: cst.BaseExpression, where: Where) -> None:
        """A method of ``node`` is called: it may change ``node``'s attributes (so may
        ``vars(x).update(...)`` and ``x.__dict__.update(...)``)."""
        if isinstance(node, cst.Call) and nodes.dotted_name(node.func) == "vars" and node.args:
            node = node.args[0].value
        elif isinstance(node, cst.Attribute) and node.attr.value == "__dict__":
            node = node.value
        dotted = nodes.dotted_name(node)
        if dotted is not None:
            self.events.append(Event(dotted, "attrs", where, False))

    def _bind_target(self, node: cst.BaseExpression, where: Where, plain: bool = False) -> None:
        if isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._bind_target(element.value, where)
        elif isinstance(node, cst.StarredElement):
            self._bind_target(node.value, where)
        else:
            dotted = nodes.dotted_name(node)
            if dotted is not None:
                self._bind(dotted, where, plain=plain)

    def _bind(self, dotted: str, where: Where, *, plain: bool, imported: bool = False) -> None:
        if "." not in dotted and not where.in_class:
            (self.module_bound if where.function is None else where.function.bound).add(dotted)
        self.events.append(Event(dotted, "bind", where, plain, imported))

    def _guard(self, node: cst.CSTNode, test: cst.BaseExpression, body: cst.CSTNode, where: Where) -> None:
        found = flag_test(test)
        if found is None or where.in_class or not (holds_a_move(body) or self._moves_to_a_default_device(body)):
            return
        if self._is_torch(test.left if isinstance(test, cst.Comparison) else test):
            return
        self.guards.append(Guard(node, found[0], found[1], where))

    def _device_binding(self, value: cst.BaseExpression, where: Where) -> None:
        """``device = torch.device("cuda" if args.cuda [and torch.cuda.is_available()] else
        "cpu")``, a device built from a flag (by a user, or by an earlier codemod of this run in
        place of the guards it dropped) decides like a guard on that flag."""
        choice = None if where.in_class else self._cuda_or_cpu(value)
        if choice is None:
            return
        test = choice.test
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and asks_cuda(test.right):
            test = test.left
        found = flag_test(test)
        if found is not None:
            self.guards.append(Guard(choice, found[0], found[1], where))

    def _definition(self, target: cst.BaseExpression, value: cst.BaseExpression, where: Where) -> None:
        dotted = nodes.dotted_name(target)
        if dotted is None or not is_flag_name(dotted) or where.in_class:
            return
        source = nodes.dotted_name(value)
        if source is not None and is_flag_name(source) or source is None and flag_like(value):
            self.definitions.append((dotted, source, where, value))


def is_main_test(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return len(names) == 1 and len(strings) == 1


def asks_cuda(value: cst.BaseExpression) -> bool:
    """``value`` is False where CUDA is not available: ``torch.cuda.is_available()``,
    ``not args.no_cuda and torch.cuda.is_available()``, ``True if torch.cuda.is_available() else False``."""
    if isinstance(value, cst.Call):
        return (nodes.dotted_name(value.func) or "").endswith("cuda.is_available") and not value.args
    if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.And):
        return asks_cuda(value.left) or asks_cuda(value.right)
    if isinstance(value, cst.IfExp):
        return m.matches(value.orelse, m.Name("False")) and (asks_cuda(value.test) or asks_cuda(value.body)) and \
            (asks_cuda(value.body) or m.matches(value.body, m.Name("True")))
    return False


def flag_like(value: cst.BaseExpression) -> bool:
    """A value a device flag is made of: ``True``, ``torch.cuda.is_available()``,
    ``not args.no_cuda and torch.cuda.is_available()``, ``True if ... else False``."""
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return True
    if isinstance(value, cst.Call):
        return (nodes.dotted_name(value.func) or "").endswith("cuda.is_available")
    dotted = nodes.dotted_name(value)
    if dotted is not None:
        return mentions_a_device(dotted)
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Not):
        return flag_like(value.expression)
    if isinstance(value, cst.BooleanOperation):
        return flag_like(value.left) and flag_like(value.right)
    if isinstance(value, cst.IfExp):
        return flag_like(value.body) and flag_like(value.orelse)
    return False
